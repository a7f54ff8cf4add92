"""Optimizer step on a GPT-2-sized parameter set (issue 12).

AdamW over the parameter shapes of GPT-2 124M (12 layers; --layers N for
fewer), gradients filled once: eager with foreach=True (the default on
CUDA), eager with fused=True, torch.compile(opt.step) and
tcjit.compile(opt.step), each on its own copy of the parameters, timed in
rounds in one process (bench.py's per_call_seconds: GPU time by CUDA
events).  Prints ms per step, first-step time (trace + compile) and the
ratio to eager foreach; checks tcjit's parameters and state against eager
foreach after the timed steps.

    PYTHONPATH=python python3 bench/optim.py [--device cuda] [--layers 12]
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import per_call_seconds  # noqa: E402 (a fresh Inductor cache dir)

import torch  # noqa: E402

import tcjit  # noqa: E402


def gpt2_shapes(layers, d=768, vocab=50257, ctx=1024):
    shapes = [(vocab, d), (ctx, d)]
    for _ in range(layers):
        shapes += [(d,), (d,), (3 * d, d), (3 * d,), (d, d), (d,),
                   (d,), (d,), (4 * d, d), (4 * d,), (d, 4 * d), (d,)]
    return shapes + [(d,), (d,)]


def make_params(shapes, device):
    g = torch.Generator().manual_seed(0)
    ps = []
    for s in shapes:
        p = torch.nn.Parameter((torch.randn(s, generator=g) * 0.02).to(device))
        p.grad = (torch.randn(s, generator=g) * 1e-3).to(device)
        ps.append(p)
    return ps


def variants(shapes, device):
    def opt(**kw):
        return torch.optim.AdamW(make_params(shapes, device), lr=1e-4,
                                 weight_decay=0.1, **kw)

    out = {"eager foreach": opt(foreach=True)}
    try:
        out["eager fused"] = opt(fused=True)
    except (RuntimeError, ValueError) as e:
        print(f"eager fused: not available here ({e})")
    out["torch.compile"] = opt(foreach=True)
    out["tcjit"] = opt(foreach=True)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--budget", type=float, default=1.0)
    a = ap.parse_args()
    dev = a.device
    layers = a.layers if a.layers is not None else (12 if dev == "cuda" else 2)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    shapes = gpt2_shapes(layers)
    n = sum(torch.Size(s).numel() for s in shapes)
    opts = variants(shapes, dev)
    steps = {name: o.step for name, o in opts.items()}
    steps["torch.compile"] = torch.compile(opts["torch.compile"].step)
    steps["tcjit"] = tcjit.compile(opts["tcjit"].step)
    first = {}
    for name, fn in steps.items():
        sync()
        t = time.perf_counter()
        fn()
        sync()
        first[name] = time.perf_counter() - t
    ex = tcjit.explain(opts["tcjit"].step)()
    opts["eager foreach"].step()     # as many steps as tcjit's copy
    times = per_call_seconds({k: (lambda f=f: f()) for k, f in steps.items()},
                             (), sync, a.budget)
    # the same number of steps ran on every copy: tcjit against eager foreach
    ref, got = opts["eager foreach"], opts["tcjit"]
    steps_ref = ref.state[ref.param_groups[0]["params"][0]]["step"].item()
    steps_got = got.state[got.param_groups[0]["params"][0]]["step"].item()
    same = "n/a (step counts differ)"
    if steps_ref == steps_got:
        errs = [(p - q).abs().max().item() for p, q in
                zip(ref.param_groups[0]["params"], got.param_groups[0]["params"])]
        same = f"max |param diff| {max(errs):.2e}"
    print(f"AdamW step, GPT-2 shapes, {layers} layers, {n / 1e6:.1f}M params, "
          f"{dev}; tcjit graphs {ex.graph_count}, breaks "
          f"{ex.graph_break_count} {[b.reason for b in ex.break_reasons][:3]}")
    print(f"{'variant':16} {'ms/step':>9} {'first step s':>13} "
          f"{'/eager foreach':>15}")
    base = times["eager foreach"]
    for name in steps:
        print(f"{name:16} {times[name] * 1e3:9.3f} {first[name]:13.3f} "
              f"{times[name] / base:15.2f}")
    print(f"tcjit vs eager foreach after the same steps: {same}")


if __name__ == "__main__":
    main()
