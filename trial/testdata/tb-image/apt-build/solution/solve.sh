#!/bin/bash
set -euo pipefail
mkdir -p /app/bin
gcc -O2 -Wall -o /app/bin/crc32sum /app/src/crc.c -lz
