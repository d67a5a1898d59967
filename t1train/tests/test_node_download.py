"""A checkpoint is downloaded once per node, not once per rank: the node's first rank fetches it
into a directory the node's ranks share while the others wait, every rank reads the same files,
a download that fails fails every rank (none waits for it), and the directory goes with the job."""

import json
import os

import torch.multiprocessing as mp

from t1train.tests import ranks
from t1train.tests.test_fsdp import free_port


def test_three_ranks_of_a_node_download_once_and_share_it(tmp_path):
    root = tmp_path / "store"
    ck = root / "runs" / "r" / "policy" / "v000001"
    ck.mkdir(parents=True)
    for name, body in {"config.json": b'{"model_type": "qwen3_moe"}', "model.safetensors": os.urandom(4096)}.items():
        (ck / name).write_bytes(body)
    out = str(tmp_path / "out")
    prefixes = ["runs/r/policy/v000001", "runs/r/policy/v000009"]
    mp.start_processes(ranks.fetcher, nprocs=3, start_method="spawn", args=(3, free_port(), str(root), prefixes, out))
    res = [json.load(open(f"{out}.{r}")) for r in range(3)]

    # One download of each prefix on the node, by its first rank.
    assert res[0]["downloads"] == prefixes
    assert res[1]["downloads"] == [] and res[2]["downloads"] == []
    # Every rank was handed the same directory and read the checkpoint's bytes from it.
    want = {n: (ck / n).read_bytes().hex() for n in sorted(os.listdir(ck))}
    dirs = {r["got"][prefixes[0]]["dir"] for r in res}
    assert len(dirs) == 1
    for r in res:
        assert r["got"][prefixes[0]]["files"] == want
    # The missing prefix fails on every rank: the first with the store's refusal, the others
    # told it failed there.
    assert "no objects in the store" in res[0]["got"][prefixes[1]]["error"]
    for r in res[1:]:
        assert "failed on another node's first rank" in r["got"][prefixes[1]]["error"]
    # The node's scratch directory is gone once the ranks are done.
    assert not any(r["scratch_left"] for r in res)
