"""Loading a checkpoint into a sharded model and saving one, each rank reading and writing only its
own rows.

transformers' from_pretrained materialises the whole model in every process: under torchrun with
eight ranks a node would hold eight float32 copies of the model (and of Adam's two moments) in host
memory before FSDP2 throws seven eighths of each away, 960 GB for Qwen3-30B-A3B's weights alone. A
sharded job instead builds the model on the meta device, shards it (parallel.py), allocates only
each rank's shard (to_empty), and fills it from the safetensors files, reading the rows of dim 0
that the rank holds (safetensors' get_slice reads just those bytes):

    checkpoint tensor (hub name)                    parameter (transformers 5)      rank r holds
    model.layers.i.mlp.experts.e.gate_proj.weight   ...mlp.experts.gate_up_proj     experts [a, b)
    model.layers.i.mlp.experts.e.up_proj.weight       [E, 2F, D]: e, :F | F:          of dim 0
    model.layers.i.mlp.experts.e.down_proj.weight   ...mlp.experts.down_proj [E, D, F]
    anything else                                   the same name                   rows [a, b)

FSDP2 shards dim 0 as torch.chunk does: ceil(N / world) rows per rank, the last ranks fewer or
none. Buffers that are not in a checkpoint (RoPE's inverse frequencies) are computed again after
to_empty, on the CPU as transformers computes them.

Saving is the same map backwards, with nothing gathered (a 235B model's weights and Adam's moments
are 2.8 TB, more than any one host holds): every rank lays the files out alike from the names and
shapes (layout), rank 0 creates them at full length, and each rank writes, at their offsets, its
rows of each tensor stored whole (rows of dim 0 are contiguous bytes) and the matrices of the
experts it holds (write).
"""

from __future__ import annotations

import json
import os

import torch
from safetensors import safe_open
from torch.distributed.tensor import DTensor, Shard

from .errors import Refused


class Reader:
    """The tensors of one checkpoint file set: model.safetensors, or the shards an index names, or
    one other file (optimizer.safetensors)."""

    def __init__(self, d: str, single: str | None = None):
        self.dir = d
        index = os.path.join(d, "model.safetensors.index.json")
        if single is None and os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f).get("weight_map") or {}
            files = sorted(set(weight_map.values()))
        else:
            files = [single or "model.safetensors"]
        self._files = {}
        self._where: dict[str, str] = {}
        self._meta: dict[str, str] = {}
        for name in files:
            if os.path.basename(name) != name:
                raise Refused(f"checkpoint {d}: shard name {name!r} is not a file of the directory")
            path = os.path.join(d, name)
            if not os.path.exists(path):
                raise Refused(f"checkpoint {d}: {name} missing")
            f = safe_open(path, framework="pt")
            self._files[name] = f
            self._meta.update(f.metadata() or {})
            for k in f.keys():
                if k in self._where:
                    raise Refused(f"checkpoint {d}: tensor {k} in both {self._where[k]} and {name}")
                self._where[k] = name

    def names(self) -> set[str]:
        return set(self._where)

    def metadata(self) -> dict[str, str]:
        return self._meta

    def shape(self, name: str) -> list[int]:
        return list(self._slice(name).get_shape())

    def rows(self, name: str, start: int | None = None, stop: int | None = None) -> torch.Tensor:
        """Rows [start, stop) of dim 0 (all of them by default), as float32."""
        s = self._slice(name)
        t = s[start:stop] if start is not None else s[:]
        return t.float()

    def _slice(self, name: str):
        f = self._where.get(name)
        if f is None:
            raise Refused(f"checkpoint {self.dir}: tensor {name} missing")
        return self._files[f].get_slice(name)


def local_range(p: torch.Tensor) -> tuple[int, int]:
    """The rows of dim 0 this rank holds of p: all of them unless p is FSDP2-sharded on dim 0."""
    if not isinstance(p, DTensor):
        return 0, p.shape[0] if p.dim() else 0
    if len(p.placements) != 1 or p.placements[0] != Shard(0):
        raise Refused(f"a parameter placed {p.placements}; the loader reads FSDP2's Shard(0) only")
    n, world, r = p.shape[0], p.device_mesh.size(), p.device_mesh.get_local_rank()
    per = -(-n // world)
    a, b = min(r * per, n), min((r + 1) * per, n)
    if p.to_local().shape[0] != b - a:
        raise Refused(f"a shard of {p.to_local().shape[0]} rows where rows [{a}, {b}) were expected")
    return a, b


def fill(name: str, p: torch.Tensor, reader: Reader, key=lambda hub: hub) -> set[str]:
    """Copies p's rows this rank holds from reader (tensor key(hub) for each checkpoint tensor p
    is stored as, model.hub_names); returns the keys read. Shapes are checked against p's."""
    from .model import hub_names

    a, b = local_range(p)
    dst = p.to_local() if isinstance(p, DTensor) else p
    used = set()
    with torch.no_grad():
        for hub, idx in hub_names(name, p):
            k = key(hub)
            used.add(k)
            # The shape of p[idx], computed on the meta device: indexing a DTensor itself would
            # gather the whole parameter to every rank.
            want = list(torch.empty(p.shape, device="meta")[idx].shape) if idx else list(p.shape)
            if reader.shape(k) != want:
                raise Refused(f"checkpoint {reader.dir}: tensor {k} of shape {reader.shape(k)}, want {want}")
            if not idx:  # stored as it is: this rank's rows of it
                if b > a:
                    dst.copy_(reader.rows(k, a, b).to(dst.device))
                continue
            e = idx[0]  # one expert's matrix: only the rank holding expert e reads it
            if a <= e < b:
                dst[(e - a,) + tuple(idx[1:])].copy_(reader.rows(k).to(dst.device))
    return used


def reset_buffers(model, config) -> None:
    """Recomputes the non-persistent buffers to_empty left uninitialised (RoPE's inverse
    frequencies), as a freshly built model on the CPU has them."""
    rope = model.model.rotary_emb
    fresh = type(rope)(config=config)
    for n, buf in fresh.named_buffers():
        target = rope.get_buffer(n)
        target.copy_(buf.to(target.device, target.dtype))


# -----------------------------------------------------------------------------
# saving: each rank writes the bytes it holds into files every rank knows the layout of


SHARD_BYTES = 5 << 30  # at most this many bytes of tensors in one weight file (one tensor may exceed it)
PIECE_BYTES = 64 << 20  # a device-to-host copy and a write move at most this much at a time
ALIGN = 8  # safetensors pads its header so that the data starts 8-byte aligned


class Entry:
    """One checkpoint tensor: where its values live in the model (parameter t, index idx into it,
    as model.hub_names gives them) and where its bytes go (file, offset into the file's data)."""

    def __init__(self, name: str, t: torch.Tensor, idx: tuple):
        self.name, self.t, self.idx = name, t, idx
        self.shape = list(torch.empty(t.shape, device="meta")[idx].shape) if idx else list(t.shape)
        self.nbytes = 4 * _numel(self.shape)
        self.file, self.offset = "", 0


def _numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def entries(named, key=lambda hub: hub) -> list[Entry]:
    """The checkpoint tensors of named ((parameter name, tensor) pairs), float32, under the names
    save_pretrained gives them (model.hub_names: one matrix per expert)."""
    from .model import hub_names

    out = []
    for n, t in named:
        for hub, idx in hub_names(n, t):
            out.append(Entry(key(hub), t, idx))
    return out


def layout(es: list[Entry], single: str | None, shard_bytes: int = SHARD_BYTES) -> dict[str, dict]:
    """Assigns es to files, filled in order up to shard_bytes each (one file named single when
    given), each file's tensors in name order; returns each file's tensor table (its header less the
    metadata). The answer depends only on the names and shapes, so every rank computes the same one
    without talking to the others."""
    groups: list[list[Entry]] = [[]]
    size = 0
    for e in es:
        if single is None and groups[-1] and size + e.nbytes > shard_bytes:
            groups.append([])
            size = 0
        groups[-1].append(e)
        size += e.nbytes
    if len(groups) == 1 and single is None:
        single = "model.safetensors"
    headers = {}
    for i, g in enumerate(groups):
        name = single or f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        tensors = {}
        off = 0
        for e in sorted(g, key=lambda e: e.name):
            e.file, e.offset = name, off
            tensors[e.name] = {"dtype": "F32", "shape": e.shape, "data_offsets": [off, off + e.nbytes]}
            off += e.nbytes
        headers[name] = tensors
    return headers


def _header_bytes(tensors: dict, metadata: dict) -> bytes:
    h = json.dumps({"__metadata__": metadata, **tensors}, separators=(",", ":")).encode()
    h += b" " * (-len(h) % ALIGN)
    return len(h).to_bytes(8, "little") + h


def _pieces(t: torch.Tensor):
    """t's values as float32 host bytes, at most PIECE_BYTES at a time (a view, on the CPU)."""
    flat = t.detach().contiguous().reshape(-1)
    step = PIECE_BYTES // 4
    for s in range(0, flat.numel(), step):
        p = flat[s:s + step]
        if p.device.type != "cpu" or p.dtype != torch.float32:
            p = p.to("cpu", torch.float32)
        yield memoryview(p.numpy()).cast("B")


def _my_part(e: Entry) -> tuple[int, torch.Tensor] | None:
    """The bytes of e this rank holds: (byte offset into the tensor, values), or None. A tensor
    stored whole is split by rows of dim 0, whose bytes are contiguous; an expert's matrix is held
    whole by the rank holding that expert."""
    from . import dist as D

    t = e.t
    if not isinstance(t, DTensor):
        return (0, t[e.idx] if e.idx else t) if D.is_rank0() else None
    a, b = local_range(t)
    loc = t.to_local()
    if not e.idx:
        if b <= a:
            return None
        row = 4 * _numel(t.shape[1:])
        return a * row, loc
    ex = e.idx[0]
    if not a <= ex < b:
        return None
    return 0, loc[(ex - a,) + tuple(e.idx[1:])]


def write(out: str, es: list[Entry], headers: dict[str, dict], metadata: dict) -> None:
    """Every rank writes its own bytes of es into the files of headers under out; rank 0 creates
    the files first (header, full size) and the others wait for it. Nothing is gathered: a rank's
    host memory grows by one piece at a time. Every rank must reach the directory (one machine, or
    a directory the machines share). If any rank fails, every rank raises."""
    import torch.distributed as dist

    from . import dist as D

    group = dist.is_initialized() and D.world() > 1
    # The header's length fixes where the data starts; every rank computes it alike.
    starts = {name: len(_header_bytes(tensors, metadata)) for name, tensors in headers.items()}
    err = _everyone(group, lambda: _create(out, headers, metadata) if D.is_rank0() else None)
    if err is None:
        err = _everyone(group, lambda: _write_mine(out, es, starts))
    if err is not None:
        raise err


def _create(out: str, headers: dict, metadata: dict) -> None:
    os.makedirs(out, exist_ok=True)
    for name, tensors in headers.items():
        h = _header_bytes(tensors, metadata)
        end = max((v["data_offsets"][1] for v in tensors.values()), default=0)
        with open(os.path.join(out, name), "wb") as f:
            f.write(h)
            f.truncate(len(h) + end)


def _write_mine(out: str, es: list[Entry], starts: dict) -> None:
    for name in starts:
        # A machine that does not share rank 0's directory would write into a copy of its own,
        # leaving zeros where its rows belong in rank 0's files.
        if not os.path.exists(os.path.join(out, name)):
            raise Refused(f"{os.path.join(out, name)}: rank 0 made it but this rank does not see it; every rank must "
                          "save into one directory (a --workdir the machines share)")
    fds = {}
    try:
        with torch.no_grad():
            for e in es:
                part = _my_part(e)
                if part is None:
                    continue
                off, t = part
                if e.file not in fds:
                    fds[e.file] = os.open(os.path.join(out, e.file), os.O_WRONLY)
                pos = starts[e.file] + e.offset + off
                for buf in _pieces(t):
                    n = os.pwrite(fds[e.file], buf, pos)
                    if n != len(buf):
                        raise OSError(f"{e.file}: short write of {e.name}")
                    pos += n
        for fd in fds.values():
            os.fsync(fd)
    finally:
        for fd in fds.values():
            os.close(fd)


def _everyone(group: bool, fn):
    """Runs fn on this rank; returns its exception, or, when another rank failed, a Refused that
    says so, on every rank alike (so that no rank waits on a collective another has left)."""
    import torch.distributed as dist

    err = None
    try:
        fn()
    except Exception as e:  # noqa: BLE001 (returned, after the others learn of it)
        err = e
    if not group:
        return err
    from . import dist as D

    flags = [None] * D.world()
    dist.all_gather_object(flags, None if err is None else f"{type(err).__name__}: {err}")
    failed = [(r, f) for r, f in enumerate(flags) if f is not None]
    if err is None and failed:
        r, f = failed[0]
        return Refused(f"saving the checkpoint failed on rank {r}: {f}")
    return err
