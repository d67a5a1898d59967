#!/bin/bash
s=0
for n in $(seq 1 40); do s=$((s + n)); echo "$n $s" >> /app/sums.txt; sleep 1; done
