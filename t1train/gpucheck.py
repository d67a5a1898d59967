"""python -m t1train.gpucheck: the trainer's check on one GPU (bench/gpu-trainer.sh runs it).

(a) Routing replay under bf16, the trainer's own path (FSDP2 over a group of one, bf16 compute with
    float32 master weights, activation checkpointing on): on a small random Qwen3-MoE, a record of
    the model's live routing is taken, the routers are perturbed (a step's worth of change), and
    then the experts used must equal the recorded ones at every token and layer but the last
    token, in the forward and in the backward's recomputation, with finite gradients, while the
    same forward without replay mismatches; a random record must be used exactly too.
(b) One actor step (forward, backward of the token-level loss, Adam as moe/adam.go computes it,
    gradient clipping) on a Qwen3-30B-A3B-shaped slice: hidden 2048, 128 experts, top-8, expert
    width 768, 32 query and 4 KV heads of 128, vocabulary 151,936, as many layers as fit, 8,192
    tokens; with replay on and off. It reports tokens/s and model FLOPs utilisation:

        FLOPs/token = 6 N_active + 6 L h d T
        N_active    = L (2 D h d + 2 D k d + D E + K 3 D F) + V D     (attention, router, the top-K
                      experts, the output head; the embedding lookup is not a matmul)

    with the causal attention's score and value products counted at half of a full T x T (6 L h d T
    for forward and backward), activation recomputation not counted (model FLOPs), against the
    card's dense bf16 peak from its name (H100 SXM and H200: 989 TFLOP/s).
(c) Everything printed as Go benchmark lines, then a summary; the exit status is 1 when replay
    correctness fails, 2 when there is no GPU (without --device cpu).

--device cpu --tiny runs the same on tiny shapes in seconds (bf16 on the CPU), for the tests.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

SLICE = dict(vocab=151936, hidden=2048, experts=128, top_k=8, d_ff=768, heads=32, kv_heads=4, head_dim=128)
REPLAY = dict(vocab=8192, hidden=512, experts=64, top_k=8, d_ff=256, heads=8, kv_heads=4, head_dim=64)
TINY = dict(vocab=256, hidden=32, experts=8, top_k=2, d_ff=16, heads=4, kv_heads=2, head_dim=8)

PEAKS = (("H100 PCIe", 756e12), ("H100", 989e12), ("H200", 989e12), ("H800", 989e12), ("B200", 2250e12), ("A100", 312e12))


def peak(name: str) -> tuple[float, str]:
    for key, flops in PEAKS:
        if key.lower() in name.lower():
            return flops, f"{key} dense bf16 {flops / 1e12:.0f} TFLOP/s"
    return 989e12, f"unknown card {name!r}: assumed the H100 SXM's dense bf16 989 TFLOP/s"


def config(shape: dict, layers: int, tokens: int):
    from transformers import Qwen3MoeConfig

    from . import model as M

    cfg = Qwen3MoeConfig(vocab_size=shape["vocab"], hidden_size=shape["hidden"], num_hidden_layers=layers,
                         num_attention_heads=shape["heads"], num_key_value_heads=shape["kv_heads"], head_dim=shape["head_dim"],
                         num_experts=shape["experts"], num_experts_per_tok=shape["top_k"], moe_intermediate_size=shape["d_ff"],
                         max_position_embeddings=max(tokens, 4096), rope_theta=1e6, norm_topk_prob=True,
                         tie_word_embeddings=False, decoder_sparse_step=1, mlp_only_layers=[])
    cfg._attn_implementation, cfg._experts_implementation = M.implementations()
    return cfg


def build(shape: dict, layers: int, tokens: int, dev, dtype, seed: int = 1):
    """A random model of the shape, float32 on dev, as the trainer prepares one (FSDP2 over the
    group of one, dtype compute, activation checkpointing on)."""
    import torch
    from transformers import Qwen3MoeForCausalLM

    from . import model as M
    from . import parallel

    torch.manual_seed(seed)
    with torch.device(dev):
        m = Qwen3MoeForCausalLM(config(shape, layers, tokens)).float()
    M.install_replay(m)
    m.eval()
    parallel.parallelize(m, True, dev, ac=True, dtype=dtype)
    return m


def active_params(shape: dict, layers: int) -> int:
    D, h, k, d = shape["hidden"], shape["heads"], shape["kv_heads"], shape["head_dim"]
    per_layer = 2 * D * h * d + 2 * D * k * d + D * shape["experts"] + shape["top_k"] * 3 * D * shape["d_ff"]
    return layers * per_layer + shape["vocab"] * D


def flops_per_token(shape: dict, layers: int, tokens: int) -> float:
    return 6.0 * active_params(shape, layers) + 6.0 * layers * shape["heads"] * shape["head_dim"] * tokens


def sync(dev) -> None:
    import torch

    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def check_replay(shape: dict, layers: int, tokens: int, dev, dtype) -> dict:
    import numpy as np
    import torch

    from . import model as M
    from .optim import local

    m = build(shape, layers, tokens, dev, dtype, seed=2)
    rng = np.random.default_rng(3)
    ids = rng.integers(0, shape["vocab"], tokens).tolist()
    T = tokens - 1
    with torch.no_grad():
        M.action_logprobs(m, ids, 1.0)
    rec = M.used_routing(m)[:T].copy()
    # A step's worth of change in every router.
    with torch.no_grad():
        for r in M.routers(m):
            w = local(r.weight)
            w.add_(torch.randn_like(w) * float(w.std()) * 0.3)
    res = {"sets": T * layers}
    with torch.no_grad():
        M.action_logprobs(m, ids, 1.0)
    res["live_mismatches"], _ = M.compare_routing(rec, M.used_routing(m)[:T])
    lp = M.action_logprobs(m, ids, 1.0, rec)
    res["forward_mismatches"], _ = M.compare_routing(rec, M.used_routing(m)[:T])
    res["forward_exact"] = bool((M.used_routing(m)[:T] == rec).all())
    (lp * (-1.0 / T)).sum().backward()
    # The backward recomputed every checkpointed layer: its routers ran again, replaying.
    res["recompute_exact"] = bool((M.used_routing(m)[:T] == rec).all())
    res["grads_finite"] = all(bool(torch.isfinite(local(p.grad)).all()) for p in m.parameters() if p.grad is not None)
    res["router_grads"] = all(p.grad is not None and float(local(p.grad).abs().sum()) > 0 for p in (r.weight for r in M.routers(m)))
    rnd = np.sort(rng.random((T, layers, shape["experts"])).argsort(-1)[..., : shape["top_k"]], -1)
    with torch.no_grad():
        M.action_logprobs(m, ids, 1.0, rnd)
    res["random_exact"] = bool((M.used_routing(m)[:T] == rnd).all())
    res["ok"] = (res["forward_exact"] and res["recompute_exact"] and res["random_exact"] and res["grads_finite"]
                 and res["router_grads"] and res["live_mismatches"] > 0)
    del m
    return res


def step_bench(shape: dict, layers: int, tokens: int, dev, dtype, steps: int) -> list[dict]:
    import numpy as np
    import torch

    from . import model as M
    from .config import Adam as AdamConfig
    from .optim import Adam

    m = build(shape, layers, tokens, dev, dtype)
    opt = Adam(m, AdamConfig(lr=1e-6))
    ids = np.random.default_rng(5).integers(0, shape["vocab"], tokens).tolist()
    with torch.no_grad():
        M.action_logprobs(m, ids, 1.0)
    rec = M.used_routing(m)[: tokens - 1].copy()
    weight = torch.full((tokens - 1,), -1.0 / (tokens - 1))
    out = []
    for replay in (True, False):
        fb = ad = 0.0
        for i in range(steps + 1):  # the first is a warm-up
            sync(dev)
            t0 = time.perf_counter()
            (M.action_logprobs(m, ids, 1.0, rec if replay else None) * weight).sum().backward()
            sync(dev)
            t1 = time.perf_counter()
            norm = opt.update(1.0)
            sync(dev)
            t2 = time.perf_counter()
            if not math.isfinite(norm):
                raise RuntimeError(f"gradient norm {norm}")
            if i > 0:
                fb, ad = fb + (t1 - t0), ad + (t2 - t1)
        out.append({"replay": replay, "fwdbwd_s": fb / steps, "adam_s": ad / steps})
    out_mem = torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else 0
    for o in out:
        o["peak_bytes"] = out_mem
    del m, opt
    return out


def auto_layers(dev, shape: dict, tokens: int) -> int:
    """Layers that should fit: 16 bytes a parameter (float32 weights, gradients and Adam's two
    moments), about 12 bytes a token per vocabulary entry for the head's logits and their gradient,
    the rest for the layers; between 1 and 8."""
    import torch

    if dev.type != "cuda":
        return 2
    free, _ = torch.cuda.mem_get_info(dev)
    D = shape["hidden"]
    per_layer = 16 * (active_params(shape, 1) - shape["vocab"] * D + (shape["experts"] - shape["top_k"]) * 3 * D * shape["d_ff"])
    fixed = 16 * 2 * shape["vocab"] * D + 12 * tokens * shape["vocab"] + (4 << 30)
    return max(1, min(8, int((0.92 * free - fixed) // (per_layer * 1.1))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="t1train.gpucheck", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--tiny", action="store_true", help="tiny shapes (seconds on a CPU)")
    ap.add_argument("--layers", type=int, default=0, help="layers of the 30B-A3B slice (0: as many as fit, at most 8)")
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--steps", type=int, default=2, help="timed steps per setting, after one warm-up")
    args = ap.parse_args(argv)
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if args.device == "cpu":
        os.environ["T1TRAIN_DEVICE"] = "cpu"
    import torch

    from . import dist as D

    if args.device == "cuda" and not torch.cuda.is_available():
        print("gpucheck: no CUDA device here (torch.cuda.is_available() is false); run it on a GPU machine, "
              "or pass --device cpu --tiny for the CPU smoke run", file=sys.stderr)
        return 2
    D.setup(force=True)
    dev = D.device()
    dtype = torch.bfloat16
    from . import model as M

    attn, experts = M.implementations()
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"
    flops_peak, peak_note = peak(name) if dev.type == "cuda" else (0.0, "no peak on the CPU")
    print(f"# device {name}; torch {torch.__version__}; bf16 compute, float32 master weights and reduction (FSDP2, "
          f"group of {D.world()}); activation checkpointing on; attention {attn}, experts {experts}")
    ok = True
    try:
        rshape, rlayers, rtokens = (TINY, 2, 64) if args.tiny else (REPLAY, 4, 2048)
        t0 = time.perf_counter()
        r = check_replay(rshape, rlayers, rtokens, dev, dtype)
        ns = int((time.perf_counter() - t0) * 1e9)
        ok = r["ok"]
        print(f"BenchmarkReplayBF16/layers={rlayers}/tokens={rtokens}-1\t1\t{ns} ns/op\t{r['sets']} sets\t"
              f"{r['forward_mismatches']} mismatches-replayed\t{0 if r['recompute_exact'] else 1} recompute-failures\t"
              f"{r['live_mismatches']} mismatches-live")
        sshape, tokens = (TINY, 128) if args.tiny else (SLICE, args.tokens)
        layers = args.layers or auto_layers(dev, sshape, tokens)
        while True:
            try:
                if dev.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(dev)
                res = step_bench(sshape, layers, tokens, dev, dtype, args.steps)
                break
            except torch.OutOfMemoryError:
                if args.layers or layers == 1:
                    raise
                print(f"# {layers} layers ran out of memory; trying {layers - 1}")
                layers -= 1
                torch.cuda.empty_cache()
        fpt = flops_per_token(sshape, layers, tokens)
        lines = []
        for o in res:
            step_s = o["fwdbwd_s"] + o["adam_s"]
            tps = tokens / step_s
            mfu = 100 * fpt * tokens / step_s / flops_peak if flops_peak else 0.0
            tag = "on" if o["replay"] else "off"
            print(f"BenchmarkActorStep/replay={tag}/layers={layers}/tokens={tokens}-1\t{args.steps}\t{int(step_s * 1e9)} ns/op\t"
                  f"{tps:.0f} tok/s\t{mfu:.2f} MFU%\t{int(o['fwdbwd_s'] * 1e9)} fwdbwd-ns\t{int(o['adam_s'] * 1e9)} adam-ns\t"
                  f"{o['peak_bytes'] / 2**30:.1f} peak-GiB")
            lines.append((tag, tps, mfu, step_s))
        print(f"# summary: replay check {'PASSED' if ok else 'FAILED'}: {r['sets']} (token, layer) sets, replayed "
              f"{r['forward_mismatches']} mismatches in the forward, recompute {'exact' if r['recompute_exact'] else 'WRONG'}, "
              f"random record {'exact' if r['random_exact'] else 'WRONG'}, without replay {r['live_mismatches']} mismatches, "
              f"gradients {'finite' if r['grads_finite'] else 'NOT FINITE'}")
        what = "tiny shapes" if args.tiny else "a Qwen3-30B-A3B slice"
        print(f"# summary: actor step on {what} ({layers} layers, {tokens} tokens, "
              f"{active_params(sshape, layers) / 1e9:.2f}B active parameters/token): "
              + "; ".join(f"replay {t}: {tps:.0f} tok/s, {mfu:.1f}% MFU, {s * 1e3:.0f} ms/step" for t, tps, mfu, s in lines))
        print(f"# summary: FLOPs/token = 6*N_active + 6*L*heads*head_dim*T = {fpt / 1e9:.2f} GFLOP; peak: {peak_note}; "
              f"peak memory {res[0]['peak_bytes'] / 2**30:.1f} GiB")
    finally:
        D.teardown()
    if not ok:
        print("gpucheck: routing replay did not use the recorded experts (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
