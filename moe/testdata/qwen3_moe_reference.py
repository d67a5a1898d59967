"""Hugging Face transformers' Qwen3-MoE, run as the reference t1's Go model is compared against.

The Go tests (make test) run, once per test binary,

    .venv/bin/python moe/testdata/qwen3_moe_reference.py JOBS.json OUT.json

JOBS.json is {"jobs": [job, ...]}; OUT.json gets {"results": [result, ...]}, one result per job in
the same order. A job that fails gets {"error": "message"} in its slot and the others still run
(exit status 0); a JOBS file that is not of that shape exits 2 with a message on stderr. One process
runs every job because importing torch takes seconds. Everything runs on the CPU in float32 with
deterministic algorithms and one thread: the same jobs give the same bytes out.

Jobs ("kind" is "policy", Qwen3MoeForCausalLM, or "critic", Qwen3MoeForTokenClassification with
num_labels=1):

  {"op": "init", "config": {Qwen3MoeConfig fields}, "seed": 7, "dir": "/abs/path", "kind": ...,
   "dtype": "float32" | "bfloat16" | "float16", "max_shard_size": "20KB" | null}
      Builds the model, draws every parameter from a torch.Generator seeded with seed (in
      named_parameters() order, at scales where a missing norm, a wrong expert or a wrong head
      shows), casts it to dtype and writes it with save_pretrained (safetensors; the experts under
      their per-expert hub names). Result: {"ok": true, "files": [sorted names in dir]}.

  {"op": "forward", "dir": "/abs/path", "kind": ..., "ids": [ints],
   "dlogprobs": [floats] | null, "dvalues": [floats] | null}
      Loads the checkpoint strictly (any missing, unexpected, mismatched or unconverted tensor, or
      a model_type other than qwen3_moe, is an error) in float32 with eager attention and experts,
      and runs one sequence. Result:
        policy: "logprobs": [T-1], log_softmax(logits[t])[ids[t+1]]
        critic: "values": [T], logits[t, 0]
        both:   "experts": [T][L][K], the top-k experts each token's router chose, ascending;
                "margins": [T][L], the K-th chosen expert's probability minus the best unchosen one's
                (small margins are near-ties that float rounding may flip)
        with dlogprobs (policy) or dvalues (critic): "grads": {checkpoint tensor name: flat list},
        the gradient of sum_t d[t] * logprob[t] (or value[t]) under the names save_pretrained writes
        (fused experts split back per expert; tied embeddings only as model.embed_tokens.weight).

  {"op": "save_as", "dir": src, "out": dst, "kind": ..., "dtype": ...}
      Loads src strictly and writes it again with save_pretrained to dst, cast to dtype
      (default float32). Result: {"ok": true, "files": [...]}.

Floats are written as Python floats of float32 values: parsing them as float32 gives the exact bits.
"""

import json
import math
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import load_file
from transformers import (
    AutoConfig,
    Qwen3MoeConfig,
    Qwen3MoeForCausalLM,
    Qwen3MoeForTokenClassification,
)

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
CLASSES = {"policy": Qwen3MoeForCausalLM, "critic": Qwen3MoeForTokenClassification}

# The router's weights are drawn at ROUTER_SCALE/sqrt(hidden): its logits then have a standard
# deviation of about ROUTER_SCALE, so the top-k choice is clear for most tokens yet differs
# between tokens.
ROUTER_SCALE = 2.0

# -----------------------------------------------------------------------------
# initialisation


def make_config(fields, kind):
    fields = dict(fields)
    if kind == "critic":
        fields["num_labels"] = 1
    return Qwen3MoeConfig(**fields)


def init_parameters(model, seed):
    """Draws every parameter from one generator, in named_parameters() order."""
    g = torch.Generator().manual_seed(seed)
    hidden = model.config.hidden_size
    with torch.no_grad():
        for name, p in model.named_parameters():
            z = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if name.endswith("norm.weight"):
                value = 1.0 + 0.1 * z  # RMSNorm gains: a skipped norm shows
            elif name.endswith("embed_tokens.weight"):
                value = z
            elif name.endswith("mlp.gate.weight"):
                value = z * (ROUTER_SCALE / math.sqrt(hidden))
            elif name.endswith(".bias"):
                value = z  # the critic's score bias
            elif p.dim() >= 2:
                value = z / math.sqrt(p.shape[-1])  # matrices, experts, lm_head, score: 1/sqrt(fan_in)
            else:
                raise ValueError(f"no initialisation rule for parameter {name} {tuple(p.shape)}")
            p.copy_(value)


def saved_files(d):
    return sorted(f for f in os.listdir(d) if os.path.isfile(os.path.join(d, f)))


def save(model, out, dtype, max_shard_size):
    os.makedirs(out, exist_ok=True)
    model = model.to(DTYPES[dtype])
    kwargs = {}
    if max_shard_size is not None:
        kwargs["max_shard_size"] = max_shard_size
    model.save_pretrained(out, **kwargs)
    return {"ok": True, "files": saved_files(out)}


def run_init(job):
    kind = job["kind"]
    config = make_config(job["config"], kind)
    model = CLASSES[kind](config)
    init_parameters(model, int(job["seed"]))
    return save(model, job["dir"], job.get("dtype", "float32"), job.get("max_shard_size"))


# -----------------------------------------------------------------------------
# checkpoint names


def hub_tensors(model, get):
    """Maps the model's parameters to checkpoint names: get(p) of each, with the fused experts
    (gate_up_proj [E, 2F, D], down_proj [E, D, F]) split back into per-expert matrices.
    named_parameters() lists a tied lm_head once, as model.embed_tokens.weight."""
    out = {}
    for name, p in model.named_parameters():
        t = get(p)
        if name.endswith("mlp.experts.gate_up_proj"):
            prefix = name[: -len("gate_up_proj")]
            f = t.shape[1] // 2
            for e in range(t.shape[0]):
                out[f"{prefix}{e}.gate_proj.weight"] = t[e, :f]
                out[f"{prefix}{e}.up_proj.weight"] = t[e, f:]
        elif name.endswith("mlp.experts.down_proj"):
            prefix = name[: -len("down_proj")]
            for e in range(t.shape[0]):
                out[f"{prefix}{e}.down_proj.weight"] = t[e]
        else:
            out[name] = t
    return out


def checkpoint_files(d):
    return [os.path.join(d, f) for f in saved_files(d) if f.endswith(".safetensors")]


def read_checkpoint(d):
    tensors = {}
    for f in checkpoint_files(d):
        tensors.update(load_file(f))
    return tensors


def checkpoint_shapes(d):
    shapes = {}
    for f in checkpoint_files(d):
        with safe_open(f, "pt") as st:
            for k in st.keys():
                shapes[k] = tuple(st.get_slice(k).get_shape())
    return shapes


# -----------------------------------------------------------------------------
# strict loading


def load(d, kind):
    if kind not in CLASSES:
        raise ValueError(f"unknown kind {kind!r}")
    cls = CLASSES[kind]
    config = AutoConfig.from_pretrained(d)
    if config.model_type != "qwen3_moe":
        raise ValueError(f"model_type is {config.model_type!r}, not 'qwen3_moe'")
    if kind == "critic" and config.num_labels != 1:
        raise ValueError(f"a critic has num_labels 1, not {config.num_labels}")

    # The names and shapes the config calls for, from a model without storage, against the
    # files: transformers' own report says little when its per-expert to fused merge fails, and
    # it quietly unties a tied lm_head that the files hold.
    with torch.device("meta"):
        empty = cls(config)
    want = {k: tuple(t.shape) for k, t in hub_tensors(empty, lambda p: p).items()}
    have = checkpoint_shapes(d)
    problems = []
    missing = sorted(set(want) - set(have))
    unexpected = sorted(set(have) - set(want))
    shapes = [f"{k} {have[k]} not {want[k]}" for k in sorted(set(want) & set(have)) if have[k] != want[k]]
    if missing:
        problems.append(f"missing: {missing}")
    if unexpected:
        problems.append(f"unexpected: {unexpected}")
    if shapes:
        problems.append(f"mismatched: {shapes}")
    if not problems:
        model, info = cls.from_pretrained(
            d,
            dtype=torch.float32,
            attn_implementation="eager",
            experts_implementation="eager",
            output_loading_info=True,
        )
        problems = [f"{k}: {sorted(map(str, v))}" for k, v in info.items() if v]
        # and every tensor as the files hold it
        loaded = hub_tensors(model, lambda p: p.detach())
        stored = read_checkpoint(d)
        differ = [k for k in sorted(want) if not torch.equal(loaded[k], stored[k].to(torch.float32))]
        if differ:
            problems.append(f"loaded other than stored: {differ}")
    if problems:
        raise ValueError(f"{d} does not load strictly as {cls.__name__}: " + "; ".join(problems))
    model.eval()
    return model


# -----------------------------------------------------------------------------
# forward and backward


def routers(model):
    return [layer.mlp.gate for layer in model.model.layers]


def run_forward(job):
    kind = job["kind"]
    model = load(job["dir"], kind)
    ids = [int(i) for i in job["ids"]]
    T = len(ids)
    d = job.get("dlogprobs") if kind == "policy" else job.get("dvalues")
    if d is not None and len(d) != (T - 1 if kind == "policy" else T):
        raise ValueError(f"{len(d)} gradient weights for {T} tokens")

    # Record each router's logits as it computes them: where transformers' output_router_logits
    # takes them from (the policy's output has them too, and must agree), but the critic's
    # TokenClassifierOutput drops them.
    router_logits = []
    hooks = [r.register_forward_hook(lambda mod, inp, out: router_logits.append(out[0].detach()))
             for r in routers(model)]
    x = torch.tensor([ids], dtype=torch.long)
    with torch.set_grad_enabled(d is not None):
        if kind == "policy":
            output = model(input_ids=x, output_router_logits=True)
            if not all(torch.equal(a, b.detach()) for a, b in zip(router_logits, output.router_logits, strict=True)):
                raise RuntimeError("output_router_logits differ from the routers' own logits")
        else:
            output = model(input_ids=x)
        logits = output.logits[0].float()  # (T, V) or (T, 1)
    for h in hooks:
        h.remove()

    result = {}
    if kind == "policy":
        logp = torch.log_softmax(logits[:-1], dim=-1)
        out = logp.gather(1, x[0, 1:, None])[:, 0]  # (T-1,)
        result["logprobs"] = out.tolist()
    else:
        out = logits[:, 0]  # (T,)
        result["values"] = out.tolist()

    k = model.config.num_experts_per_tok
    experts = [[None] * len(router_logits) for _ in range(T)]
    margins = [[None] * len(router_logits) for _ in range(T)]
    for layer, rl in enumerate(router_logits):
        probs = torch.softmax(rl.float(), dim=-1)  # (T, E), as the router computes them
        top_p, top_i = torch.topk(probs, k, dim=-1)
        if k < probs.shape[1]:
            rest = probs.scatter(1, top_i, float("-inf")).max(dim=-1).values  # best unchosen
        else:
            rest = torch.zeros(T)
        for t in range(T):
            experts[t][layer] = sorted(top_i[t].tolist())
            margins[t][layer] = (top_p[t, k - 1] - rest[t]).item()
    result["experts"] = experts
    result["margins"] = margins

    if d is not None:
        loss = (torch.tensor(d, dtype=torch.float32) * out).sum()
        loss.backward()
        grads = hub_tensors(model, lambda p: p.grad if p.grad is not None else torch.zeros_like(p))
        result["grads"] = {name: g.reshape(-1).tolist() for name, g in sorted(grads.items())}
    return result


def run_save_as(job):
    model = load(job["dir"], job["kind"])
    return save(model, job["out"], job.get("dtype", "float32"), job.get("max_shard_size"))


OPS = {"init": run_init, "forward": run_forward, "save_as": run_save_as}


def run(job):
    try:
        op = OPS.get(job.get("op"))
        if op is None:
            raise ValueError(f"unknown op {job.get('op')!r}")
        result = op(job)
        json.dumps(result, allow_nan=False)  # NaN or infinity is an error, not invalid JSON
        return result
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def main():
    if len(sys.argv) != 3:
        print("usage: qwen3_moe_reference.py JOBS.json OUT.json", file=sys.stderr)
        sys.exit(2)
    try:
        with open(sys.argv[1]) as f:
            jobs = json.load(f)["jobs"]
        if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
            raise ValueError('"jobs" is not a list of objects')
    except Exception as e:
        print(f"qwen3_moe_reference.py: {sys.argv[1]}: malformed jobs file: {e}", file=sys.stderr)
        sys.exit(2)

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    results = [run(job) for job in jobs]
    with open(sys.argv[2], "w") as f:
        json.dump({"results": results}, f, allow_nan=False)
        f.write("\n")


if __name__ == "__main__":
    main()
