#!/bin/bash
set -euo pipefail
cd /app
python3 - <<'PY'
import csv, json
totals = {}
with open("/app/sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["region"]] = totals.get(row["region"], 0) + int(row["units"]) * int(row["price"])
json.dump(totals, open("/app/summary.json", "w"), indent=2, sort_keys=True)
open("/app/top.txt", "w").write(max(totals, key=totals.get) + "\n")
PY
