#!/bin/bash
set -euo pipefail
vowels < /app/input.txt > /app/count.txt
