"""Freezing and max-autotune vs default (docs/freezing.md,
docs/autotune.md).

    PYTHONPATH=python python3 bench/modes.py [--rounds 5] [--json]
        [--only freezing|autotune] [--device cpu|cuda]

max-autotune rows (bench/bench.py's workloads): softmax 1024x1024,
layer_norm 2048x1024, GPT-2 block 2x128x768 on --device (CPU by default;
--device cuda for the GPU).  Columns: tcjit default, tcjit max_autotune
(per-call median of the best round, us), the tuning time of the first
compile (autotune_seconds) and whether the table on disk was used.  The
table goes to a fresh temporary TCJIT_CACHE_DIR unless one is set.

Freezing rows (inference, torch.no_grad, eval mode), beside torch.compile
with Inductor's freezing:
  conv-bn-relu net (CPU)  three conv-bn-relu blocks + residual, 1x32x56x56
  resnet50 b1 (CUDA)      torchvision's resnet50, 1x3x224x224; skipped
                          without torchvision or without a GPU

Columns: eager, tcjit, tcjit freezing=True, torch.compile,
torch.compile with torch._inductor.config.freezing = True (per-call
medians of the best round, ms), and the first-call (compile) time of each
compiled column.  --no-inductor leaves out the torch.compile columns.
"""
import argparse
import copy
import json
import os
import sys
import tempfile
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
    v = [("eager", lambda: model), ("tcjit", tc(False)),
         ("tcjit freezing", tc(True))]
    if inductor:
        v += [("torch.compile", ind(False)),
              ("torch.compile freezing", ind(True))]
    return v


AUTOTUNE_ROWS = ("softmax 1024x1024", "layer_norm 2048x1024",
                 "GPT-2 block 2x128x768")


def autotune_rows(a, results):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench
    os.environ.setdefault("TCJIT_CACHE_DIR", tempfile.mkdtemp())
    for w in bench.WORKLOADS:
        if w["name"] not in AUTOTUNE_ROWS:
            continue
        torch.manual_seed(0)
        inputs = w["make_inputs"](a.device)
        fn = w["fn"]
        row = {}
        with torch.no_grad():
            ref = fn(*inputs)
            for col, on in (("tcjit", False), ("tcjit max_autotune", True)):
                tcjit.reset()
                tcjit.config.max_autotune = on
                c = tcjit.compile(fn)
                _sync(a.device)
                t0 = time.perf_counter()
                out = c(*inputs)
                _sync(a.device)
                first = time.perf_counter() - t0
                tcjit.config.max_autotune = False
                torch.testing.assert_close(out, ref, **w.get(
                    "tol", dict(rtol=1e-4, atol=1e-5)))
                counters = tcjit.counters()
                best = min(time_call(lambda x: c(*x), inputs, a.device,
                                     a.calls) for _ in range(a.rounds))
                row[col] = {"us": round(best * 1e3, 2),
                            "first_call_s": round(first, 3),
                            "tuning_s": round(counters["autotune_seconds"],
                                              3),
                            "table_hits": counters["autotune_hits"]}
        results[f"{w['name']} ({a.device})"] = row


def freezing_rows(a, results):
    for name, make_model, make_x, device in rows():
        torch.manual_seed(0)
        model = make_model().to(device)
        x = make_x().to(device)
        row = {}
        with torch.no_grad():
            ref = model(x)
            # on CUDA, convolutions run in TF32 (cudnn.allow_tf32): each
            # variant rounds differently (folded weights), so the check is
            # against a float64 run, at twice eager's own error
            ref64 = copy.deepcopy(model).double()(x.double())
            allowed = max(2 * (ref.double() - ref64).abs().max().item(),
                          1e-3 * ref64.abs().max().item())
            for col, make in variants(model, not a.no_inductor):
                tcjit.reset()
                fn, compile_s = first_call(make, x, device)
                tcjit.config.freezing = False
                err = (fn(x).double() - ref64).abs().max().item()
                assert err <= allowed, (col, err, allowed)
                best = min(time_call(fn, x, device, a.calls)
                           for _ in range(a.rounds))
                row[col] = {"ms": round(best, 4),
                            "first_call_s": round(compile_s, 3)}
                if col == "torch.compile freezing":
                    import torch._inductor.config as icfg
                    icfg.freezing = False
        results[name] = row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--only", choices=("freezing", "autotune"))
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args()
    results = {}
    if a.only != "freezing":
        autotune_rows(a, results)
    if a.only != "autotune":
        freezing_rows(a, results)
    if a.json:
        print(json.dumps(results))
        return
    for name, row in results.items():
        print(name)
        for col, r in row.items():
            if "us" in r:
                print(f"  {col:24s} {r['us']:10.1f} us   first call "
                      f"{r['first_call_s']:7.3f} s   tuning "
                      f"{r['tuning_s']:6.3f} s   table hits "
                      f"{r['table_hits']}")
            else:
                print(f"  {col:24s} {r['ms']:9.3f} ms   first call "
                      f"{r['first_call_s']:7.3f} s")


if __name__ == "__main__":
    main()
