#!/usr/bin/env bash
# Package moe's reference trainer and sampler side by side with
# transformers' Qwen3-MoE of the same shapes (bench/torch_peer.py),
# interleaved round by round so that both see the same load; prints
# medians and the moe/PyTorch ratios (bench/peer_ratio.py). Not part of
# `make test`.
#
#   bash bench/torch-peer.sh [BASE_REV]
#
# BASE_REV (a git revision) adds that revision's moe, built with this
# tree's BenchmarkPeer, as a third column: before/after in the same run.
# ROUNDS (default 5) rounds; each runs BenchmarkPeer with -benchtime 3x
# and the peer with 3 repetitions. The peer runs in the project's Python
# environment (make setup: torch and transformers from requirements.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-5}
py=${PYTHON:-.venv/bin/python}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! "$py" -c 'import torch, transformers' 2>/dev/null; then
	echo "torch-peer: $py cannot import torch and transformers; run make setup, or set PYTHON" >&2
	exit 1
fi
# One thread everywhere: the peer runs torch.set_num_threads(1), moe's
# BenchmarkPeer sets Workers = 1.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 GOMAXPROCS=${GOMAXPROCS:-2}
go test -c -o "$out/moe.test" ./moe/
bins=(moe)
if [ -n "${1:-}" ]; then
	git worktree add -q --detach "$out/base" "$1"
	cp moe/bench_test.go "$out/base/moe/bench_test.go"
	(cd "$out/base" && go test -c -o "$out/base.test" ./moe/)
	git worktree remove --force "$out/base"
	bins+=(base)
fi
for i in $(seq "$rounds"); do
	echo "round $i/$rounds" >&2
	for b in "${bins[@]}"; do
		(cd moe && "$out/$b.test" -test.run '^$' -test.bench '^BenchmarkPeer$' -test.benchtime 3x) |
			grep '^BenchmarkPeer' | sed "s/^BenchmarkPeer/Benchmark-$b/" >>"$out/all.txt"
	done
	"$py" bench/torch_peer.py --reps 3 | sed 's/^BenchmarkTorch/Benchmark-torch/' >>"$out/all.txt"
done
"$py" bench/peer_ratio.py "$out/all.txt"
