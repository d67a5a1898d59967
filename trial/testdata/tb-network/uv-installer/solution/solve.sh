#!/bin/bash
set -euo pipefail
curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh
"$HOME/.local/bin/uv" --version > /app/uv.txt
