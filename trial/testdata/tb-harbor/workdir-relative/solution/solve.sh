#!/bin/bash
mkdir -p data
echo 42 > data/answer.txt
printf '#!/bin/sh\ncat data/answer.txt\n' > check.sh
chmod +x check.sh
