"""PyTorch eager peer of package moe's reference model, for bench/torch-peer.sh.

The same architecture as moe (decoder-only, RMSNorm, RoPE on interleaved
pairs, causal attention, top-k routed SwiGLU experts with gates renormalised
over the chosen set, LM head and value head), written the way one writes it
in PyTorch: nn.Linear layouts, a loop over experts that gathers the tokens
routed to each, autograd, torch.optim.Adam and clip_grad_norm_. It times the
two things moe's benchmarks time:

  train: forward + backward (loss -mean log p of the next token) + clip 1 +
         Adam step on one sequence (BenchmarkTrainStep/live, BenchmarkPeer/train-*)
  sample: KV-cached decoding of a 64-token prompt and 448 sampled tokens at
         temperature 1 (BenchmarkSample, BenchmarkPeer/sample-*)

and prints Go benchmark lines (ns/op, tok/s) so that benchstat reads both.
"""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Cfg:
    def __init__(self, vocab=512, layers=2, d_model=64, heads=4, experts=8, top_k=2, d_ff=128, context=2048):
        self.vocab, self.layers, self.d_model, self.heads = vocab, layers, d_model, heads
        self.experts, self.top_k, self.d_ff, self.context = experts, top_k, d_ff, context


class RMSNorm(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.g = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.g


def rope_tables(cfg, theta=10000.0):
    hd = cfg.d_model // cfg.heads
    inv = theta ** (-torch.arange(0, hd, 2, dtype=torch.float64) / hd)
    ang = torch.arange(cfg.context, dtype=torch.float64)[:, None] * inv[None, :]
    return torch.cos(ang).float(), torch.sin(ang).float()


def rope(x, cos, sin):
    # x [T, H, hd]; rotate pairs (2i, 2i+1) by the angle of each position.
    a, b = x[..., 0::2], x[..., 1::2]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, Fd, E = cfg.d_model, cfg.d_ff, cfg.experts
        self.cfg = cfg
        self.attn_norm, self.moe_norm = RMSNorm(D), RMSNorm(D)
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(D, D, bias=False) for _ in range(4))
        self.router = nn.Linear(D, E, bias=False)
        self.w1 = nn.ModuleList(nn.Linear(D, Fd, bias=False) for _ in range(E))
        self.w3 = nn.ModuleList(nn.Linear(D, Fd, bias=False) for _ in range(E))
        self.w2 = nn.ModuleList(nn.Linear(Fd, D, bias=False) for _ in range(E))

    def attend(self, q, k, v, causal):
        # q [Tq, H, hd], k/v [Tk, H, hd]
        H, hd = self.cfg.heads, self.cfg.d_model // self.cfg.heads
        s = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(hd)
        if causal:
            Tq = q.shape[0]
            mask = torch.ones(Tq, Tq, dtype=torch.bool).triu(1)
            s = s.masked_fill(mask, float("-inf"))
        p = torch.softmax(s, dim=-1)
        return torch.einsum("hqk,khd->qhd", p, v).reshape(q.shape[0], -1)

    def moe(self, h):
        cfg = self.cfg
        probs = torch.softmax(self.router(h), dim=-1)
        top_p, top_i = probs.topk(cfg.top_k, dim=-1)
        gates = top_p / top_p.sum(-1, keepdim=True)
        out = torch.zeros_like(h)
        for e in range(cfg.experts):
            rows, slot = (top_i == e).nonzero(as_tuple=True)
            if rows.numel() == 0:
                continue
            x = h[rows]
            y = self.w2[e](F.silu(self.w1[e](x)) * self.w3[e](x))
            out.index_add_(0, rows, y * gates[rows, slot, None])
        return out

    def forward(self, x, cos, sin, cache=None):
        cfg = self.cfg
        T, H, hd = x.shape[0], cfg.heads, cfg.d_model // cfg.heads
        h = self.attn_norm(x)
        q = rope(self.wq(h).view(T, H, hd), cos, sin)
        k = rope(self.wk(h).view(T, H, hd), cos, sin)
        v = self.wv(h).view(T, H, hd)
        if cache is not None:
            k = torch.cat((cache[0], k)) if cache[0] is not None else k
            v = torch.cat((cache[1], v)) if cache[1] is not None else v
            cache[0], cache[1] = k, v
        x2 = x + self.wo(self.attend(q, k, v, causal=T > 1))
        return x2 + self.moe(self.moe_norm(x2))


class Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.d_model)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.final_norm = RMSNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.value_head = nn.Linear(cfg.d_model, 1)
        cos, sin = rope_tables(cfg)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids, pos0=0, caches=None):
        T = ids.shape[0]
        cos, sin = self.cos[pos0:pos0 + T], self.sin[pos0:pos0 + T]
        x = self.embed(ids)
        for i, blk in enumerate(self.layers):
            x = blk(x, cos, sin, None if caches is None else caches[i])
        xf = self.final_norm(x)
        return self.lm_head(xf), self.value_head(xf).squeeze(-1)


def seq_ids(cfg, n):
    return torch.tensor([(i * 37 + 11) % cfg.vocab for i in range(n)])


def time_train(cfg, tokens, reps):
    torch.manual_seed(1)
    m = Model(cfg)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    ids = seq_ids(cfg, tokens)

    def step():
        logits, _ = m(ids)
        logp = torch.log_softmax(logits[:-1], dim=-1).gather(1, ids[1:, None])
        loss = -logp.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
        opt.step()

    step()  # warm-up
    return [timed(step) for _ in range(reps)]


@torch.no_grad()
def time_sample(cfg, prompt, new, reps):
    torch.manual_seed(1)
    m = Model(cfg).eval()
    ids = seq_ids(cfg, prompt)
    g = torch.Generator().manual_seed(1)

    def generate():
        caches = [[None, None] for _ in range(cfg.layers)]
        logits, _ = m(ids, 0, caches)
        pos, last = prompt, logits[-1]
        for _ in range(new):
            tok = torch.multinomial(torch.softmax(last, -1), 1, generator=g)
            torch.log_softmax(last, -1)[tok]  # the sampled token's log-prob, as moe reports it
            logits, _ = m(tok, pos, caches)
            pos, last = pos + 1, logits[-1]

    generate()
    return [timed(generate) for _ in range(reps)]


def timed(f):
    """Wall and process CPU seconds of one call."""
    w0, c0 = time.perf_counter(), time.process_time()
    f()
    return time.perf_counter() - w0, time.process_time() - c0


CONFIGS = {
    "d64": Cfg(),  # moe.DefaultConfig
    "d256": Cfg(d_model=256, d_ff=512),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--configs", default="d64,d256")
    ap.add_argument("--train-tokens", type=int, default=512)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--what", default="train,sample")
    a = ap.parse_args()
    torch.set_num_threads(1)
    for name in a.configs.split(","):
        cfg = CONFIGS[name]
        if "train" in a.what:
            for w, c in time_train(cfg, a.train_tokens, a.reps):
                report(f"train-{name}", w, c, a.train_tokens)
        if "sample" in a.what:
            for w, c in time_sample(cfg, 64, 448, a.reps):
                report(f"sample-{name}", w, c, 512)


def report(name, wall, cpu, tokens):
    print(f"BenchmarkTorch/{name} \t1\t{wall * 1e9:.0f} ns/op\t{tokens / wall:.1f} tok/s\t{tokens / cpu:.1f} cpu-tok/s", flush=True)


if __name__ == "__main__":
    main()
