"""One job, top to bottom: parse it, read its inputs from the store, train, save, describe."""

from __future__ import annotations

import os
import tempfile

import torch

from . import actor, critic, sft
from . import dist as D
from . import model as M
from . import parallel
from .config import Job, parse_job
from .data import load_batch, load_sft_rows
from .errors import Refused
from .optim import Adam
from .store import Store


is_rank0 = D.is_rank0


def prepare(model):
    """The model, parallelised (parallel.py): FSDP2-sharded over the process group when there is
    one (torchrun, or any GPU), activation checkpointing per its setting."""
    parallel.parallelize(model, torch.distributed.is_initialized(), D.device())
    return model


def load(loader, src: str):
    """A checkpoint loaded and prepared: a sharded job builds the model on the meta device and each
    rank reads only its shard's rows (shards.py), never a whole copy."""
    if torch.distributed.is_initialized():
        return loader(src, place=prepare)
    return prepare(loader(src))


def run(job_path: str, workdir: str = "") -> dict:
    with open(job_path) as f:
        job = parse_job(f.read())
    if not job.checkpoint:
        raise Refused("job file: no checkpoint to train towards")
    D.setup()
    if D.device().type == "cpu":
        torch.use_deterministic_algorithms(True)  # the Go reference's peer; bf16 on a GPU is not bit-reproducible anyway
    store = Store.from_env()
    out = os.path.join(os.path.abspath(workdir) if workdir else tempfile.mkdtemp(prefix="t1train-out-"),
                       f"{job.run}-{job.kind}-v{job.version:06d}")
    if os.path.exists(out) and os.listdir(out):
        raise Refused(f"{out} exists and is not empty")
    # The starting checkpoint's copy is only read while the job runs (a real model's is hundreds of
    # GB with its optimiser state), so it goes however the job ends; the ranks of a node share one.
    scratch, ok = D.node_dir("t1train-in-"), False
    try:
        res = {"actor": run_actor, "critic": run_critic, "sft": run_sft}[job.kind](job, store, scratch, out)
        ok = True
        return res
    finally:
        D.remove_node_dir(scratch, ok)


def fetch(store: Store, prefix: str, scratch: str, name: str) -> str:
    """The checkpoint under prefix, downloaded once per node into the node's scratch directory."""
    dest = os.path.join(scratch, name)
    D.node_once(lambda: store.download(prefix, dest), f"download of {prefix}")
    return dest


def run_actor(job: Job, store: Store, scratch: str, out: str) -> dict:
    if not job.policy or job.policy == job.checkpoint:
        raise Refused(f"the checkpoint {job.policy!r} and the new one {job.checkpoint!r} must be distinct prefixes")
    b = load_batch(store, job.manifest, need_values=True)
    src = fetch(store, job.policy, scratch, "policy")
    policy = load(M.load_policy, src)
    M.check_shape(policy, job.manifest["model"], critic=False)
    opt = Adam(policy, job.actor.adam)
    state = M.load_optimizer_state(src)
    if state is not None:
        opt.load_state(state)
    opt.cfg = job.actor.adam  # the configured constant, whatever the state was saved with
    met = actor.train(job, policy, opt, b)
    ck = M.save(policy, out, src, opt)
    return {"kind": "actor", "checkpoint": ck, "metrics": met}


def run_critic(job: Job, store: Store, scratch: str, out: str) -> dict:
    if job.critic and job.critic == job.checkpoint:
        raise Refused(f"the checkpoint {job.critic!r} and the new one {job.checkpoint!r} must be distinct prefixes")
    b = load_batch(store, job.manifest, need_values=False)
    o = job.critic_opts
    if job.critic:
        # A fresh seeded critic comes this way too (job.fresh): t1 writes it as its reference
        # trainer initialises one, so both trainers start a run from the same critic.
        src = fetch(store, job.critic, scratch, "critic")
        model = load(M.load_critic, src)
    elif job.policy:
        src = fetch(store, job.policy, scratch, "policy")
        model = load(M.critic_from_policy, src)
    else:
        raise Refused("critic job: neither a critic nor a policy to start from (t1 hands a fresh seeded critic over "
                      "as \"critic\" with \"fresh\")")
    M.check_shape(model, job.manifest["model"], critic=True)
    fresh = job.fresh or not job.critic
    opt = Adam(model, o.adam)
    state = None if fresh else M.load_optimizer_state(src)
    if state is not None:
        opt.load_state(state)
    opt.cfg = o.adam
    values, met = critic.train(job, model, opt, b, fresh=fresh)
    ck = M.save(model, out, src, opt)
    return {"kind": "critic", "checkpoint": ck, "values": values, "metrics": met}


def run_sft(job: Job, store: Store, scratch: str, out: str) -> dict:
    if not job.policy or job.policy == job.checkpoint:
        raise Refused(f"the checkpoint {job.policy!r} and the new one {job.checkpoint!r} must be distinct prefixes")
    rows = load_sft_rows(store, job.data)
    src = fetch(store, job.policy, scratch, "policy")
    policy = load(M.load_policy, src)
    opt = Adam(policy, job.sft.adam)  # a fresh optimiser; saved without its state
    met = sft.train(job, policy, opt, rows)
    ck = M.save(policy, out, src)
    return {"kind": "sft", "checkpoint": ck, "metrics": met}
