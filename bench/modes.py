"""Freezing vs default (docs/freezing.md), beside torch.compile with
Inductor's freezing.

    PYTHONPATH=python python3 bench/modes.py [--rounds 5] [--json]

Rows (inference, torch.no_grad, eval mode):
  conv-bn-relu net (CPU)  three conv-bn-relu blocks + residual, 1x32x56x56
  resnet50 b1 (CUDA)      torchvision's resnet50, 1x3x224x224; skipped
                          without torchvision or without a GPU

Columns: eager, tcjit, tcjit freezing=1, torch.compile,
torch.compile with torch._inductor.config.freezing = True (per-call
medians of the best round, ms), and the first-call (compile) time of each
compiled column.  --no-inductor leaves out the torch.compile columns.
"""
import argparse
import json
import time

import torch
import torch.nn as nn

import tcjit


class ConvBnReluNet(nn.Module):
    def __init__(self, c=32):
        super().__init__()

        def cbr():
            return nn.Sequential(nn.Conv2d(c, c, 3, padding=1, bias=False),
                                 nn.BatchNorm2d(c), nn.ReLU())
        self.a, self.b, self.c = cbr(), cbr(), cbr()

    def forward(self, x):
        y = self.b(self.a(x))
        return self.c(y) + x


def _randomize_bn(m):
    for b in m.modules():
        if isinstance(b, nn.BatchNorm2d):
            b.running_mean.uniform_(-0.5, 0.5)
            b.running_var.uniform_(0.5, 1.5)
    return m


def rows():
    out = [("conv-bn-relu net (CPU)",
            lambda: _randomize_bn(ConvBnReluNet()).eval(),
            lambda: torch.randn(1, 32, 56, 56), "cpu")]
    try:
        import torchvision
    except ImportError:
        torchvision = None
    if torchvision is not None and torch.cuda.is_available():
        out.append(("resnet50 b1 (CUDA)",
                    lambda: torchvision.models.resnet50().eval(),
                    lambda: torch.randn(1, 3, 224, 224), "cuda"))
    return out


def _sync(device):
    if device == "cuda":
        torch.cuda.synchronize()


def time_call(fn, x, device, n):
    ts = []
    for _ in range(n):
        _sync(device)
        t0 = time.perf_counter()
        fn(x)
        _sync(device)
        ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def first_call(make_fn, x, device):
    _sync(device)
    t0 = time.perf_counter()
    fn = make_fn()
    fn(x)
    _sync(device)
    return fn, time.perf_counter() - t0


def variants(model, inductor):
    def tc(freezing):
        def make():
            # freezing is read when the first call compiles
            tcjit.config.freezing = freezing
            return tcjit.compile(model)
        return make

    def ind(freezing):
        def make():
            import torch._inductor.config as icfg
            torch._dynamo.reset()
            icfg.freezing = freezing
            return torch.compile(model)
        return make
    v = [("eager", lambda: model), ("tcjit", tc(0)),
         ("tcjit freezing", tc(1))]
    if inductor:
        v += [("torch.compile", ind(False)),
              ("torch.compile freezing", ind(True))]
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-inductor", action="store_true")
    a = ap.parse_args()
    results = {}
    for name, make_model, make_x, device in rows():
        torch.manual_seed(0)
        model = make_model().to(device)
        x = make_x().to(device)
        row = {}
        with torch.no_grad():
            ref = model(x)
            for col, make in variants(model, not a.no_inductor):
                tcjit.reset()
                fn, compile_s = first_call(make, x, device)
                tcjit.config.freezing = 0
                torch.testing.assert_close(fn(x), ref, rtol=1e-3, atol=1e-3)
                best = min(time_call(fn, x, device, a.calls)
                           for _ in range(a.rounds))
                row[col] = {"ms": round(best, 4),
                            "first_call_s": round(compile_s, 3)}
                if col == "torch.compile freezing":
                    import torch._inductor.config as icfg
                    icfg.freezing = False
        results[name] = row
    if a.json:
        print(json.dumps(results))
        return
    for name, row in results.items():
        print(name)
        for col, r in row.items():
            print(f"  {col:24s} {r['ms']:9.3f} ms   first call "
                  f"{r['first_call_s']:7.3f} s")


if __name__ == "__main__":
    main()
