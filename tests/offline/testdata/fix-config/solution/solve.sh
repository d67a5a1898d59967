#!/bin/bash
set -euo pipefail
sed -i 's/^prot = /port = /; s/^log_level = verbose$/log_level = debug/' /app/app.conf
grep -v '^#' /app/app.conf | awk -F' = ' 'NF == 2 {print $1}' | LC_ALL=C sort > /app/keys.txt
