#!/bin/bash
echo "status: ok" > /workspace/report.txt
mkdir -p /workspace/out
touch /workspace/out/done
