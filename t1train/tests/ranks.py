"""The worker of test_fsdp: one rank of a gloo process group on the CPU, running jobs as torchrun
would run `python -m t1train` (the same environment variables), rank 0 writing the results."""

from __future__ import annotations

import json
import os


def worker(rank: int, world: int, port: int, jobs: dict, workdir: str, env: dict, out: str) -> None:
    os.environ.update(env)
    os.environ.update({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world),
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})
    import torch

    torch.set_num_threads(1)
    from t1train.dist import teardown
    from t1train.train import run

    results = {kind: run(path, os.path.join(workdir, kind)) for kind, path in jobs.items()}
    if rank == 0:
        with open(out, "w") as f:
            json.dump(results, f)
    teardown()
