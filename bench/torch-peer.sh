#!/usr/bin/env bash
# Package moe's reference trainer and sampler side by side with a PyTorch
# eager peer of the same architecture (bench/torch_peer.py), interleaved
# round by round so that both see the same load; prints medians and the
# moe/PyTorch ratios (bench/peer_ratio.py). Not part of `make test`.
#
#   bash bench/torch-peer.sh [BASE_REV]
#
# BASE_REV (a git revision) adds that revision's moe, built with this
# tree's BenchmarkPeer, as a third column: before/after in the same run.
# ROUNDS (default 5) rounds; each runs BenchmarkPeer with -benchtime 3x
# and the peer with 3 repetitions. Needs Debian's python3-torch (PyTorch
# CPU; its BLAS is libblas.so.3, OpenBLAS with libopenblas0-pthread):
#   apt-get install -y python3-torch libopenblas0-pthread
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-5}
py=${PYTHON:-/usr/bin/python3}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
if ! "$py" -c 'import torch' 2>/dev/null; then
	echo "torch-peer: $py cannot import torch; install python3-torch (apt-get install -y python3-torch libopenblas0-pthread) or set PYTHON" >&2
	exit 1
fi
# One thread everywhere: the peer runs torch.set_num_threads(1), moe's
# BenchmarkPeer sets Workers = 1.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 GOMAXPROCS=${GOMAXPROCS:-2}
if [ -d /usr/lib/x86_64-linux-gnu/openblas-pthread ]; then
	export LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
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
