#!/bin/bash
set -euo pipefail
cd /app/data
find . -type f -size +1024c | sed 's|^\./||' | LC_ALL=C sort > /app/large.txt
