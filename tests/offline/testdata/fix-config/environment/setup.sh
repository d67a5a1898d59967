#!/bin/bash
set -euo pipefail
mkdir -p /app
cat > /app/app.conf <<'CONF'
# service configuration
name = inventory
prot = 8080
log_level = verbose
workers = 4
CONF
