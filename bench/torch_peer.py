"""transformers' Qwen3-MoE as package moe's peer, for bench/torch-peer.sh.

moe is a Qwen3-MoE; its peer is the same model as researchers run it in PyTorch:
transformers' Qwen3MoeForCausalLM of the same shapes (moe.DefaultConfig and BenchmarkPeer's d256),
in float32 on the CPU, one thread, with torch.optim.Adam and clip_grad_norm_. It times the two
things moe's benchmarks time:

  train: forward + backward (loss -mean log p of the next token) + clip 1 + Adam step on one
         sequence (BenchmarkPeer/train-*)
  sample: KV-cached decoding of a 64-token prompt and 448 sampled tokens at temperature 1, each
         sampled token's log-prob computed as moe reports it (BenchmarkPeer/sample-*)

and prints Go benchmark lines (ns/op, tok/s, cpu-tok/s) so that benchstat and peer_ratio.py read
both. --attn and --experts pick transformers' implementations (by default its fastest on a CPU:
sdpa attention and its grouped_mm experts, falling back to eager where a kernel is missing).
"""

import argparse
import os
import time

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch
from transformers import DynamicCache, Qwen3MoeConfig, Qwen3MoeForCausalLM


def config(d_model, head_dim, d_ff):
    """moe.DefaultConfig, with d_model, head_dim and d_ff set (BenchmarkPeer's two shapes)."""
    return Qwen3MoeConfig(vocab_size=512, hidden_size=d_model, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, head_dim=head_dim, num_experts=8, num_experts_per_tok=2,
                          moe_intermediate_size=d_ff, max_position_embeddings=2048, rope_theta=10000.0,
                          rms_norm_eps=1e-6, norm_topk_prob=True, tie_word_embeddings=False)


CONFIGS = {"d64": lambda: config(64, 16, 128), "d256": lambda: config(256, 64, 512)}


def model(cfg, attn, experts):
    torch.manual_seed(1)
    kwargs = {"attn_implementation": attn}
    if experts:
        kwargs["experts_implementation"] = experts
    return Qwen3MoeForCausalLM._from_config(cfg, torch_dtype=torch.float32, **kwargs)


def seq_ids(n):
    return torch.tensor([[(i * 37 + 11) % 512 for i in range(n)]])


def time_train(cfg, tokens, reps, attn, experts):
    m = model(cfg, attn, experts).train()
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    ids = seq_ids(tokens)

    def step():
        logits = m(input_ids=ids).logits[0]
        logp = torch.log_softmax(logits[:-1], dim=-1).gather(1, ids[0, 1:, None])
        loss = -logp.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    step()  # warm-up
    return [timed(step) for _ in range(reps)]


@torch.no_grad()
def time_sample(cfg, prompt, new, reps, attn, experts):
    m = model(cfg, attn, experts).eval()
    ids = seq_ids(prompt)
    g = torch.Generator().manual_seed(1)

    def generate():
        cache = DynamicCache()
        out = m(input_ids=ids, cache=cache, use_cache=True)
        last = out.logits[0, -1]
        for _ in range(new):
            tok = torch.multinomial(torch.softmax(last, -1), 1, generator=g)
            torch.log_softmax(last, -1)[tok]  # the sampled token's log-prob, as moe reports it
            out = m(input_ids=tok[None], cache=cache, use_cache=True)
            last = out.logits[0, -1]

    generate()
    return [timed(generate) for _ in range(reps)]


def timed(f):
    """Wall and process CPU seconds of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    f()
    return time.perf_counter() - w0, time.process_time() - c0


def pick(cfg, attn, experts):
    """The fastest implementations that run here: experts' grouped_mm needs a kernel the CPU build
    may lack."""
    if experts:
        return attn, experts
    try:
        m = model(cfg, attn, "grouped_mm")
        m(input_ids=seq_ids(8)).logits.sum().backward()
        return attn, "grouped_mm"
    except Exception:
        return attn, "eager"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="d64,d256")
    ap.add_argument("--train-tokens", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--what", default="train,sample")
    ap.add_argument("--attn", default="sdpa")
    ap.add_argument("--experts", default="")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for name in a.configs.split(","):
        cfg = CONFIGS[name]()
        attn, experts = pick(cfg, a.attn, a.experts)
        if "train" in a.what:
            for w, c in time_train(cfg, a.train_tokens, a.reps, attn, experts):
                report(f"train-{name}", w, c, a.train_tokens)
        if "sample" in a.what:
            for w, c in time_sample(cfg, 64, 448, a.reps, attn, experts):
                report(f"sample-{name}", w, c, 512)


def report(name, wall, cpu, tokens):
    print(f"BenchmarkTorch/{name} \t1\t{wall * 1e9:.0f} ns/op\t{tokens / wall:.1f} tok/s\t{tokens / cpu:.1f} cpu-tok/s", flush=True)


if __name__ == "__main__":
    main()
