#!/bin/bash
# Builds the task's starting state; run once in a fresh sandbox before the agent starts.
set -euo pipefail
mkdir -p /app/data/logs /app/data/cache/tmp /app/data/docs
head -c 4096 /dev/zero > /app/data/logs/app.log
head -c 1024 /dev/zero > /app/data/logs/small.log
head -c 1025 /dev/zero > /app/data/cache/blob.bin
head -c 10 /dev/zero > /app/data/cache/tmp/x
printf 'readme\n' > /app/data/docs/README
head -c 2000 /dev/zero > "/app/data/docs/big notes.txt"
