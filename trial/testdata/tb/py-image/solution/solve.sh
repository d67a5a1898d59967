#!/bin/bash
cat > /app/convert.py <<'EOF'
import csv

with open("/app/temps.csv", newline="") as src, open("/app/fahrenheit.csv", "w", newline="") as dst:
    out = csv.writer(dst)
    out.writerow(["city", "fahrenheit"])
    for row in csv.DictReader(src):
        out.writerow([row["city"], f"{float(row['celsius']) * 9 / 5 + 32:.1f}"])
EOF
cd /app && python convert.py
