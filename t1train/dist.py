"""The process group and the split of a batch across it.

Under torchrun (WORLD_SIZE > 1), or on a GPU, every process joins one process group (NCCL on CUDA,
gloo on the CPU), holds a shard of the model (parallel.py) and computes part of every pass. Work
is split by tokens, not by rows: split() hands each rank a set of the pass's sequences whose token
counts balance (largest first to the least loaded rank, ties to the lower index: the same answer on
every rank), and every rank then runs the same number of forwards, padding with zero-weight
forwards of a 2-token sequence, because every FSDP forward and backward is a collective. Results
are gathered by index (gather), so every rank sums the per-sequence statistics in the order a
1-rank run does and reports the same numbers.
"""

from __future__ import annotations

import os
from typing import Any, Callable

import torch
import torch.distributed as dist

DUMMY = [0, 0]  # the padding forward's tokens; its loss weight is 0


def world() -> int:
    return dist.get_world_size() if dist.is_initialized() else 1


def rank() -> int:
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", "0"))


def is_rank0() -> bool:
    return rank() == 0


def local_rank() -> int:
    """This process's index on its node (torchrun's LOCAL_RANK)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def node_dir(prefix: str) -> str:
    """A fresh directory that every rank of a node shares: its first rank makes it, and every rank
    learns its path from the first rank with the same host name. The node's first rank removes it
    (remove_node_dir)."""
    import socket
    import tempfile

    mine = tempfile.mkdtemp(prefix=prefix) if local_rank() == 0 else ""
    if world() == 1:
        return mine
    out: list = [None] * world()
    dist.all_gather_object(out, (socket.gethostname(), local_rank(), mine))
    host = socket.gethostname()
    return next(d for h, lr, d in out if h == host and lr == 0)


def remove_node_dir(d: str, ok: bool) -> None:
    """Removes node_dir's directory once every rank is done with it, and returns once it is gone
    (ok: every rank got here; on an error the job ends anyway and nothing waits for the others)."""
    import shutil

    if ok and world() > 1:
        dist.barrier()
    if local_rank() == 0:
        shutil.rmtree(d, ignore_errors=True)
    if ok and world() > 1:
        dist.barrier()  # so that it is gone when any rank returns


def node_once(fn: Callable[[], Any], what: str) -> None:
    """Runs fn on each node's first rank while the node's other ranks wait: one download per node,
    not per rank. If it fails on any node, every rank raises (the failing rank its own error), so
    no rank waits on a download that will never come."""
    from .errors import Refused

    err: BaseException | None = None
    if local_rank() == 0:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 (re-raised below, after the others learn of it)
            err = e
    if world() > 1:
        failed = torch.tensor([1 if err else 0], dtype=torch.int64, device=device())
        dist.all_reduce(failed, op=dist.ReduceOp.MAX)
        if failed.item() and err is None:
            raise Refused(f"{what}: failed on another node's first rank")
    if err is not None:
        raise err


def device() -> torch.device:
    """cuda:LOCAL_RANK when CUDA is present (and T1TRAIN_DEVICE is not cpu), else the CPU."""
    want = os.environ.get("T1TRAIN_DEVICE", "")
    if want != "cpu" and torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


def setup(force: bool = False) -> bool:
    """Joins the process group when there is more than one process or a GPU (or force); returns
    whether the model is to be sharded (FSDP2). One CPU process, the Go reference's peer, runs
    unsharded."""
    dev = device()
    n = int(os.environ.get("WORLD_SIZE", "1"))
    if n <= 1 and dev.type == "cpu" and not force:
        return False
    if not dist.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        if n <= 1:  # one process on a GPU without torchrun: a group of one, for mixed precision
            os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
            os.environ.setdefault("MASTER_PORT", str(_free_port()))
            os.environ.setdefault("RANK", "0")
            os.environ.setdefault("WORLD_SIZE", "1")
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo", device_id=dev if dev.type == "cuda" else None)
    return True


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def split(costs: list[int], n: int | None = None) -> list[list[int]]:
    """Indices into costs per rank: token counts balanced (greedy, largest first, ties to the lower
    index and the lower rank), each rank's indices ascending. Deterministic."""
    n = world() if n is None else n
    loads = [0] * n
    parts: list[list[int]] = [[] for _ in range(n)]
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        r = min(range(n), key=lambda r: (loads[r], r))
        parts[r].append(i)
        loads[r] += costs[i]
    return [sorted(p) for p in parts]


def gather(local: dict[int, Any]) -> dict[int, Any]:
    """Every rank's {index: result}, merged (an all-gather of Python objects)."""
    if world() == 1:
        return local
    out: list = [None] * world()
    dist.all_gather_object(out, local)
    merged: dict[int, Any] = {}
    for d in out:
        merged.update(d)
    return merged


def all_sum_f64(x: float, dev: torch.device) -> float:
    """The sum over ranks of a float64."""
    if world() == 1:
        return x
    t = torch.tensor([x], dtype=torch.float64, device=dev)
    dist.all_reduce(t)
    return float(t.item())


def run_split(costs: list[int], fn: Callable[[int], Any], pad: Callable[[], None]) -> dict[int, Any]:
    """Runs fn(i) for this rank's share of the indices (split by costs), pad() until every rank has
    run as many, and returns every index's result on every rank."""
    parts = split(costs)
    mine = parts[rank()]
    local = {i: fn(i) for i in mine}
    for _ in range(max(len(p) for p in parts) - len(mine)):
        pad()
    return gather(local)
