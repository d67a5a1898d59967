"""Medians and moe/PyTorch ratios of bench/torch-peer.sh's benchmark lines.

Lines look like `Benchmark-<who>/<case>[-N] <n> <ns> ns/op … <x> tok/s … <y> cpu-tok/s`
with <who> one of moe, base (an earlier revision of moe) and torch.
"""

import re
import statistics
import sys
from collections import defaultdict

LINE = re.compile(r"^Benchmark-(\w+)/(\S+?)(?:-\d+)?\s")
WALL = re.compile(r"\s([\d.e+]+) tok/s")
CPU = re.compile(r"\s([\d.e+]+) cpu-tok/s")


def main(path):
    runs = defaultdict(lambda: ([], []))
    for line in open(path):
        m, w, c = LINE.match(line), WALL.search(line), CPU.search(line)
        if m and w and c:
            who, case, wall, cpu = m.group(1), m.group(2), float(w.group(1)), float(c.group(1))
            runs[(who, case)][0].append(wall)
            runs[(who, case)][1].append(cpu)
    cases = sorted({c for _, c in runs}, key=lambda c: (c.split("-")[1], c))
    whos = [w for w in ("torch", "base", "moe") if any((w, c) in runs for c in cases)]
    med = {k: (statistics.median(v[0]), statistics.median(v[1]), min(v[0]), max(v[0]), len(v[0])) for k, v in runs.items()}
    head = "| case | " + " | ".join(f"{w} tok/s (cpu-tok/s)" for w in whos) + " | moe/torch wall (cpu)"
    if "base" in whos:
        head += " | base/torch wall (cpu) | moe/base wall (cpu)"
    print(head + " |")
    print("|" + "---|" * (head.count("|")))
    for c in cases:
        cells = []
        for w in whos:
            if (w, c) in med:
                wm, cm, lo, hi, n = med[(w, c)]
                cells.append(f"{wm:.0f} ({cm:.0f}) [{lo:.0f}–{hi:.0f}, n={n}]")
            else:
                cells.append("—")

        def ratio(a, b):
            if (a, c) not in med or (b, c) not in med:
                return "—"
            return f"{med[(a, c)][0] / med[(b, c)][0]:.2f}× ({med[(a, c)][1] / med[(b, c)][1]:.2f}×)"

        row = f"| {c} | " + " | ".join(cells) + f" | {ratio('moe', 'torch')}"
        if "base" in whos:
            row += f" | {ratio('base', 'torch')} | {ratio('moe', 'base')}"
        print(row + " |")


if __name__ == "__main__":
    main(sys.argv[1])
