#!/bin/bash
mkdir -p /app/bin
gcc -O2 -Wall -o /app/bin/rot13 /app/src/rot13.c
