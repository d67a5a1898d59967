"""python -m t1train --job JOB --out RESULT [--workdir DIR]: one job of t1's exec protocol."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile

from .errors import Refused


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="t1train", description=__doc__)
    ap.add_argument("--job", required=True, help="the job file t1 wrote ({job})")
    ap.add_argument("--out", required=True, help="the result file to write ({out})")
    ap.add_argument("--workdir", default=os.environ.get("T1TRAIN_WORKDIR", ""),
                    help="where checkpoints are written (default: a new directory under the system's temporary one)")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    try:
        from .train import run

        result = run(args.job, args.workdir)
    except Refused as e:
        print(f"t1train: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    from .dist import is_rank0, teardown

    if is_rank0():
        tmp = args.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(result, f, allow_nan=False)
        os.replace(tmp, args.out)
    teardown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
