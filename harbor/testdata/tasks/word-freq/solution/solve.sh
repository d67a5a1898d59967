#!/bin/bash
set -euo pipefail
cd /app
tr 'A-Z' 'a-z' < corpus.txt | tr -cs 'a-z' '\n' | grep -v '^$' \
  | sort | uniq -c | awk '{print $2, $1}' | sort -k2,2nr -k1,1 | head -n 5 > top5.txt
