#!/bin/bash
set -euo pipefail
cd /app
tail -n +2 sales.csv | sort -t, -k1,1 | awk -F, '
  { sum[$1] += $2; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
  END {
    printf "{"
    for (i = 1; i <= n; i++) printf "%s\"%s\": %d", (i > 1 ? ", " : ""), order[i], sum[order[i]]
    print "}"
  }' > summary.json
