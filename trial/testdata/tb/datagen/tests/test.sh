#!/bin/bash
apt-get update
apt-get install -y curl python3
curl -LsSf https://astral.sh/uv/0.9.7/install.sh | sh
source $HOME/.local/bin/env

# Data the agent never saw, and the tests beside the agent's work.
python3 /tests/gen_data.py /tmp/verify-data 7
cp /tests/test_outputs.py /app/

cd /app
uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json test_outputs.py -rA
