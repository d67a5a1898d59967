#!/bin/bash
set -euo pipefail
pip install --no-cache-dir six==1.16.0
python /app/greet.py > /app/out.txt
