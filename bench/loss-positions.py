#!/usr/bin/env python3
"""Positions the actor update runs per loss token, from a run's tokens table.

    t1 query trajectories --run R --format ndjson > trajectories.json
    t1 query tokens --run R --format ndjson | python3 bench/loss-positions.py trajectories.json

Every position of a chunk goes through the trainer's forward and backward;
only the loss region's tokens (the policy's replies) carry a gradient.
Prints, per purpose (train, eval, sft demonstrations; from the
trajectories table given as the argument) and policy version: chunks per attempt,
positions per loss token over whole chunks, and the same counted from each
chunk's first loss token (the prompt left out).
"""
import json
import sys
from collections import defaultdict

purpose = {}
with open(sys.argv[1]) as f:
    for line in f:
        t = json.loads(line)
        purpose[(t["task_id"], t["attempt"], t["policy_version"], t["iteration"])] = t["purpose"]

stats = defaultdict(lambda: {"chunks": 0, "attempts": set(), "positions": 0, "loss": 0, "region": 0, "prefix": 0})
for line in sys.stdin:
    row = json.loads(line)
    mask = row["loss_mask"]
    loss = sum(1 for m in mask if m)
    if loss == 0:
        continue
    first = mask.index(True)
    key = purpose.get((row["task_id"], row["attempt"], row["policy_version"], row["iteration"]), "?")
    s = stats[(key, row["policy_version"])]
    s["chunks"] += 1
    s["attempts"].add((row["task_id"], row["attempt"]))
    s["positions"] += len(mask)
    s["loss"] += loss
    s["region"] += len(mask) - first
    s["prefix"] += first

print("purpose  policy  chunks  attempts  chunks/attempt  positions/loss token  from first loss token  prompt positions/chunk")
for (p, v) in sorted(stats):
    s = stats[(p, v)]
    print(f"{p:<8} v{v:<6} {s['chunks']:>6}  {len(s['attempts']):>8}  {s['chunks'] / len(s['attempts']):>14.2f}  "
          f"{s['positions'] / s['loss']:>20.2f}  {s['region'] / s['loss']:>21.2f}  {s['prefix'] / s['chunks']:>22.0f}")
