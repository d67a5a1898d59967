#!/bin/bash
cat > /app/helper.py <<'PY'
def greet():
    return "hello from helper"
PY
cat > /app/run.py <<'PY'
from helper import greet

print(greet())
PY
