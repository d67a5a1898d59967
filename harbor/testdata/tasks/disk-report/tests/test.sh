#!/bin/bash
# Needs nothing from the network: compares the answer with a fresh scan and
# writes Harbor's reward file.
mkdir -p /logs/verifier
want=$(cd /app/data && find . -type f -size +1024c | sed 's|^\./||' | LC_ALL=C sort)
if [ -f /app/large.txt ] && [ "$(cat /app/large.txt)" = "$want" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
  exit 1
fi
