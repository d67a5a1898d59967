#!/usr/bin/env bash
# The PyTorch trainer's check on one GPU (an H100 or H200), one command,
# under 8 minutes: routing replay under bf16 (the experts used equal the
# recorded ones at every token and layer, in the forward and in the
# activation-checkpointing recomputation; without replay they differ),
# then one actor step (forward, backward, Adam) on a Qwen3-30B-A3B-shaped
# slice of as many layers as fit, 8,192 tokens, replay on and off, with
# tokens/s and model FLOPs utilisation. Go benchmark lines, then a
# summary (t1train/gpucheck.py says how FLOPs are counted). Exit status 1
# when replay correctness fails, 2 without a GPU. Not part of `make test`.
#
#   bash bench/gpu-trainer.sh [--layers N] [--tokens T] [--steps S]
#   bash bench/gpu-trainer.sh --device cpu --tiny     # seconds, on a CPU
set -euo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-.venv/bin/python}
[ -x "$py" ] || py=python3
exec timeout "${TIMEOUT:-480}" "$py" -m t1train.gpucheck "$@"
