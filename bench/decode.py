"""Per-token latency of a Llama-style decode step (issue 19): batch 1, a KV
cache preallocated as [B, H, Tmax, D] per layer, the step writes position
t and attends over [:t+1].

Variants, in one process, each on its own copy of the model and caches:
eager, torch.compile(mode="reduce-overhead"), tcjit default, tcjit
reduce-overhead.  Each decodes positions t0 .. t0+n-1 `--warm` times (a
size-generic step warms up, then records a CUDA graph per position) and
then once more timed; the latency is that pass's time per token.  Every
variant's last logits are checked against eager's.

    PYTHONPATH=python python3 bench/decode.py                 # GPU sizes
    PYTHONPATH=python python3 bench/decode.py --cpu           # small, CPU
    PYTHONPATH=python python3 bench/decode.py --skip torch    # no Inductor
"""
import argparse
import copy
import gc
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import tcjit


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


class Layer(nn.Module):
    def __init__(self, hidden, heads, tmax, batch):
        super().__init__()
        self.heads, self.hd = heads, hidden // heads
        self.norm1, self.norm2 = RMSNorm(hidden), RMSNorm(hidden)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        inter = hidden * 8 // 3 // 64 * 64
        self.gate = nn.Linear(hidden, inter, bias=False)
        self.up = nn.Linear(hidden, inter, bias=False)
        self.down = nn.Linear(inter, hidden, bias=False)
        shape = (batch, heads, tmax, self.hd)
        self.register_buffer("k_cache", torch.zeros(shape))
        self.register_buffer("v_cache", torch.zeros(shape))

    def forward(self, x, t):
        b = x.shape[0]
        h = self.norm1(x)
        q = self.q(h).view(b, 1, self.heads, self.hd).transpose(1, 2)
        k = self.k(h).view(b, 1, self.heads, self.hd).transpose(1, 2)
        v = self.v(h).view(b, 1, self.heads, self.hd).transpose(1, 2)
        self.k_cache[:, :, t:t + 1] = k
        self.v_cache[:, :, t:t + 1] = v
        keys = self.k_cache[:, :, :t + 1]
        vals = self.v_cache[:, :, :t + 1]
        a = F.scaled_dot_product_attention(q, keys, vals)
        x = x + self.o(a.transpose(1, 2).reshape(b, 1, -1))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class Decoder(nn.Module):
    def __init__(self, hidden, heads, layers, tmax, vocab, batch=1):
        super().__init__()
        self.layers = nn.ModuleList(Layer(hidden, heads, tmax, batch)
                                    for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, x, t):
        for layer in self.layers:
            x = layer(x, t)
        return self.head(self.norm(x))


def decode(step, xs, t0, sync):
    out = None
    for i, x in enumerate(xs):
        out = step(x, t0 + i)
    sync()
    return out


def copy_out_cost(sync, reps=50):
    """What copying a replay's outputs out of the graph's pool costs per
    token: the outputs a recording clones, cloned again here."""
    from tcjit._modes_cudagraphs import Recorder
    recs = [rec for r in gc.get_objects() if isinstance(r, Recorder)
            for rec in r.recordings.values()]
    if not recs:
        print("  (no CUDA graph was recorded)")
        return
    rec = recs[0]
    outs = [o for o, p in zip(rec.outs, rec.plan) if p[0] in ("clone",
                                                              "group")]
    raw = sum(p[0] == "raw" for p in rec.plan)
    sync()
    t = time.perf_counter()
    for _ in range(reps):
        rec._outputs(rec.statics)
    sync()
    per = (time.perf_counter() - t) / reps
    nbytes = sum(o.untyped_storage().nbytes() for o in outs)
    print(f"  copy-out of outputs: {len(outs)} tensor(s), {nbytes / 1024:.0f}"
          f" KiB, {per * 1e6:.1f} us/token ({raw} write-back output(s) "
          f"left in the pool); {len(recs)} recordings")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu", action="store_true", help="small sizes, CPU")
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--tmax", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--t0", type=int, default=32, help="first position")
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--warm", type=int, default=3,
                    help="untimed passes over the positions")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--skip", default="", help="comma list: eager,torch,"
                    "tcjit,tcjit-ro")
    a = ap.parse_args()
    cuda = torch.cuda.is_available() and not a.cpu
    dev = "cuda" if cuda else "cpu"
    hidden = a.hidden or (2048 if cuda else 256)
    heads = a.heads or (16 if cuda else 4)
    tmax = a.tmax or (1024 if cuda else 128)
    vocab = a.vocab or (32000 if cuda else 1000)
    dtype = getattr(torch, a.dtype or ("bfloat16" if cuda else "float32"))
    torch.manual_seed(0)
    with torch.no_grad():
        base = Decoder(hidden, heads, a.layers, tmax, vocab).to(dev, dtype)
    xs = [torch.randn(1, 1, hidden, device=dev, dtype=dtype)
          for _ in range(a.tokens)]
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    variants = {
        "eager": lambda m: m,
        "torch": lambda m: torch.compile(m, mode="reduce-overhead"),
        "tcjit": lambda m: tcjit.compile(m),
        "tcjit-ro": lambda m: tcjit.compile(m, mode="reduce-overhead"),
    }
    names = {"eager": "eager", "torch": "torch.compile reduce-overhead",
             "tcjit": "tcjit default", "tcjit-ro": "tcjit reduce-overhead"}
    skip = {s for s in a.skip.split(",") if s}
    print(f"decode step: {a.layers} layers, hidden {hidden}, {heads} heads, "
          f"Tmax {tmax}, vocab {vocab}, {dtype}, {dev}, positions "
          f"{a.t0}..{a.t0 + a.tokens - 1}")
    # t is a Python int: tcjit specializes it (an entry, and under
    # reduce-overhead a CUDA graph, per position); keep every position
    tcjit.config.recompile_limit = max(8, a.tokens + 8)
    res, ref = {}, None
    for key, make in variants.items():
        if key in skip:
            continue
        model = copy.deepcopy(base)
        step = make(model)
        with torch.no_grad():
            t = time.perf_counter()
            decode(step, xs, a.t0, sync)
            first = time.perf_counter() - t
            for _ in range(a.warm - 1):
                decode(step, xs, a.t0, sync)
            t = time.perf_counter()
            out = decode(step, xs, a.t0, sync)
            per_token = (time.perf_counter() - t) / a.tokens
        if ref is None:
            ref = out.float()
        err = (out.float() - ref).abs().max().item()
        res[key] = per_token
        print(f"  {names[key]:32} {per_token * 1e6:9.1f} us/token   "
              f"first pass {first:7.2f} s   max|diff| vs {names[next(iter(res))]}"
              f" {err:.2e}", flush=True)
        if key == "tcjit-ro" and cuda:
            copy_out_cost(sync)
        del step, model
        tcjit.reset()
    print("  time ratios (this variant's time / the other's):")
    for key, per_token in res.items():
        ratios = "  ".join(f"{per_token / res[o]:5.2f}x {o}" for o in res
                           if o != key)
        print(f"  {key:10} {ratios}")


if __name__ == "__main__":
    main()
