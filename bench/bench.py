"""tcjit benchmarks: eager vs torch.compile vs tcjit, in one process.

    make bench                                  # all workloads, table
    make bench BENCH_ARGS="--only x+1 --output bench.json"
    PYTHONPATH=python python3 bench/bench.py --json > bench.json   # after make
    PYTHONPATH=python python3 bench/bench.py --no-inductor

For every workload and every implementation:
  per call     median of many warmed-up calls (tiny calls are batched so a
               sample takes >= 1 ms); the implementations take turns, one
               sample each per round, so machine noise hits them alike; on
               CUDA each sample is timed with CUDA events around the batch
  --device cuda  adds the GPU rows of DESIGN.md (16M f32 and bf16 chains,
               softmax, layer_norm, a GPT-2 block) and an eager-only
               device-to-device copy row: the bandwidth reference of the run
  first call   tcjit: tcjit.reset(), then the first call of a fresh function
               object (trace + compile + run); torch.compile: first call after
               torch._dynamo.reset(), with an empty Inductor cache directory
               (as on a cold machine; --inductor-cache keeps the user's cache)
  GB/s         bytes read + written by the workload / per-call time
  ratios       tcjit time / eager time and tcjit time / torch.compile time
               (< 1 means tcjit is faster)

Adding a workload: append a dict to WORKLOADS (name, fn, make_inputs(device),
bytes(inputs) -> int).  Workloads follow the table in DESIGN.md.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import types

# torch.compile's first call is measured cold: a fresh Inductor cache
# directory (compiled kernels, FX graphs) per run, set before torch is
# imported.  --inductor-cache keeps the user's cache (warm first calls).
if "--inductor-cache" not in sys.argv:
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="tcjit-bench-inductor-")

import torch

import tcjit

# the workloads' models (tests/test_models.py) and the bound results are
# checked with (tests/tolerance.py, the tests' own)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import tolerance  # noqa: E402


# -- workloads ----------------------------------------------------------------

def pointwise_chain(x, y):
    return (torch.sin(x) + torch.cos(y)).relu() * 2 + 1


def chain_with_extern(x, y):
    z = torch.sin(x) + torch.cos(y)
    z = torch.cumsum(z, 0)   # a scan: no tcjit kernel, a generic extern node
    return z.relu() * 2 + 1


def sort_between_chains(x):
    # a generic extern node; its values only (indices of near-equal values
    # may differ by an ulp of the chain before it)
    v = torch.sort(x.sin() * 2 + 1, dim=-1).values
    return v.cos() * 2 + 1


def add_one(x):
    return x + 1


def _nbytes(*tensors):
    return sum(t.numel() * t.element_size() for t in tensors)


def device_copy(x):
    return torch.empty_like(x).copy_(x)


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)


def _ln_inputs(rows):
    return lambda dev: (torch.randn(rows, 1024, device=dev),
                        torch.randn(1024, device=dev),
                        torch.randn(1024, device=dev))


def _gpt2(batch, seq, blocks=1):
    """nanoGPT blocks (tests/test_models.py's), eval mode, inference: the
    parameters do not require grad."""
    def make(dev):
        from test_models import Block
        torch.manual_seed(0)
        mods = [Block(768, 12) for _ in range(blocks)]
        model = (mods[0] if blocks == 1 else torch.nn.Sequential(*mods))
        model = model.to(dev).eval().requires_grad_(False)
        _MODELS[dev] = model
        return (torch.randn(batch, seq, 768, device=dev),)
    return make


_MODELS = {}


def _nanogpt_train(batch, seq, n_layer, n_embd, vocab=512):
    """A nanoGPT training step (tests/test_models.py's GPT): forward with
    the loss, backward, AdamW.  make(dev, wrap) -> (step, args): wrap is
    what each implementation does to the model and to opt.step (eager:
    nothing, tcjit.compile, torch.compile); every implementation trains a
    model of its own from the same initial weights.  eval(): dropout off,
    so the implementations compute the same steps."""
    def make(dev, wrap):
        from test_models import GPT
        torch.manual_seed(0)
        model = GPT(n_layer, vocab, seq, n_embd).to(dev).eval()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        run = wrap(model)
        opt_step = wrap(opt.step)
        gen = torch.Generator(device="cpu").manual_seed(1)
        idx = torch.randint(0, vocab, (batch, seq), generator=gen).to(dev)
        tgt = torch.randint(0, vocab, (batch, seq), generator=gen).to(dev)

        def step(idx, tgt):
            opt.zero_grad(set_to_none=True)
            _, loss = run(idx, tgt)
            loss.backward()
            opt_step()
            return loss.detach()
        return step, (idx, tgt)
    return make


def gpt2(x):
    return _MODELS[x.device.type](x)


WORKLOADS = [
    {
        "name": "pointwise f32 chain, 4M",
        "fn": pointwise_chain,
        "make_inputs": lambda dev: (torch.randn(1 << 22, device=dev),
                                    torch.randn(1 << 22, device=dev)),
        # reads x and y, writes one output of the same size
        "bytes": lambda inp: _nbytes(*inp) + _nbytes(inp[0]),
    },
    {
        "name": "pointwise chain, cumsum extern between, 4M",
        "fn": chain_with_extern,
        "make_inputs": lambda dev: (torch.randn(1 << 22, device=dev),
                                    torch.randn(1 << 22, device=dev)),
        "bytes": lambda inp: _nbytes(*inp) + _nbytes(inp[0]),
    },
    {
        "name": "torch.sort extern between pointwise chains, 1024x1024",
        "fn": sort_between_chains,
        "make_inputs": lambda dev: (torch.randn(1024, 1024, device=dev),),
        # reads x, writes the output (sort's own traffic not counted)
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
    },
    {
        "name": "x+1, 1 element (overhead)",
        "fn": add_one,
        "make_inputs": lambda dev: (torch.randn(1, device=dev),),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
    },
    {
        "name": "softmax 1024x1024",
        "devices": ("cpu",),
        "fn": softmax,
        "make_inputs": lambda dev: (torch.randn(1024, 1024, device=dev),),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
    },
    {
        "name": "layer_norm 2048x1024",
        "devices": ("cpu",),
        "fn": layer_norm,
        "make_inputs": _ln_inputs(2048),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
    },
    {
        "name": "GPT-2 block 2x128x768",
        "devices": ("cpu",),
        "fn": gpt2,
        "make_inputs": _gpt2(2, 128),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
        "tol": dict(rtol=1e-4, atol=1e-4),
    },
    {
        "name": "GPT-2 12-block stack 2x128x768",
        "devices": ("cpu",),
        "fn": gpt2,
        "make_inputs": _gpt2(2, 128, blocks=12),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
        "tol": dict(rtol=1e-3, atol=1e-3),
    },
    {
        "name": "nanoGPT train step (fwd+bwd+AdamW) 4x64, 4x256",
        "devices": ("cpu",),
        "train": _nanogpt_train(4, 64, n_layer=4, n_embd=256),
        "tol": dict(rtol=1e-4, atol=1e-4),
    },
    # --device cuda only (DESIGN.md's GPU rows) -------------------------------
    {
        # DESIGN.md's row: GPT-2 124M, batch 8 x 512, AdamW
        "name": "nanoGPT 124M train step (fwd+bwd+AdamW) 8x512",
        "devices": ("cuda",),
        "train": _nanogpt_train(8, 512, n_layer=12, n_embd=768, vocab=50304),
        "tol": dict(rtol=1e-3, atol=1e-3),
    },
    {
        "name": "GPT-2 block 8x256x768",
        "devices": ("cuda",),
        "fn": gpt2,
        "make_inputs": _gpt2(8, 256),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
        "tol": dict(rtol=1e-3, atol=1e-3),
    },
    {
        "name": "softmax 4096x4096",
        "devices": ("cuda",),
        "fn": softmax,
        "make_inputs": lambda dev: (torch.randn(4096, 4096, device=dev),),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
    },
    {
        "name": "layer_norm 8192x1024",
        "devices": ("cuda",),
        "fn": layer_norm,
        "make_inputs": _ln_inputs(8192),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
    },
    {
        "name": "pointwise f32 chain, 16M",
        "devices": ("cuda",),
        "fn": pointwise_chain,
        "make_inputs": lambda dev: (torch.randn(1 << 24, device=dev),
                                    torch.randn(1 << 24, device=dev)),
        "bytes": lambda inp: _nbytes(*inp) + _nbytes(inp[0]),
    },
    {
        # computed in float32 and rounded once per output (as torch.compile
        # does), eager rounds after every op: compared at bf16 tolerance
        "name": "pointwise bf16 chain, 16M",
        "devices": ("cuda",),
        "fn": pointwise_chain,
        "make_inputs": lambda dev: (torch.randn(1 << 24, device=dev,
                                                dtype=torch.bfloat16),
                                    torch.randn(1 << 24, device=dev,
                                                dtype=torch.bfloat16)),
        "bytes": lambda inp: _nbytes(*inp) + _nbytes(inp[0]),
        "tol": dict(rtol=2e-2, atol=2e-2),
    },
    {
        # bandwidth reference measured in the same run: eager only
        "name": "device copy 64 MB (empty_like + copy_)",
        "devices": ("cuda",),
        "reference_only": True,
        "fn": device_copy,
        "make_inputs": lambda dev: (torch.randn(1 << 24, device=dev),),
        "bytes": lambda inp: 2 * _nbytes(inp[0]),
    },
]

# -- measurement --------------------------------------------------------------

def fresh_function(fn):
    """A new function object with a new code object: nothing cached on it."""
    return types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__,
                              fn.__defaults__, fn.__closure__)


def _sample(fn, args, sync, inner):
    """Seconds per call of one batch of inner calls (CUDA: GPU time from the
    first launch to the end of the last kernel, with CUDA events)."""
    if sync is torch.cuda.synchronize:
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(inner):
            fn(*args)
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3 / inner
    sync()
    t0 = time.perf_counter()
    for _ in range(inner):
        fn(*args)
    sync()
    return (time.perf_counter() - t0) / inner


def per_call_seconds(fns, args, sync, budget):
    """Median seconds per call of every implementation in fns (a dict),
    timed in rounds: each round takes one sample of each, so a slow phase
    of a noisy machine (the 2-core CI VM drifts by +-10% over seconds)
    lands on all of them alike instead of on whichever ran then."""
    inner = {}
    for name, fn in fns.items():
        for _ in range(5):
            fn(*args)
        one = max(_sample(fn, args, sync, 1), 1e-7)
        inner[name] = max(1, int(1e-3 / one))
    samples = {name: [] for name in fns}
    deadline = time.perf_counter() + budget * len(fns)
    while (min(len(v) for v in samples.values()) < 10
           or (time.perf_counter() < deadline
               and max(len(v) for v in samples.values()) < 1000)):
        for name, fn in fns.items():
            samples[name].append(_sample(fn, args, sync, inner[name]))
    return {name: statistics.median(v) for name, v in samples.items()}


def first_call_seconds(fn, args, sync):
    sync()
    t0 = time.perf_counter()
    out = fn(*args)
    sync()
    return time.perf_counter() - t0, out


def run_training(w, device, sync, budget, inductor):
    """A training workload: each implementation wraps its own model; the
    first call is the first step (trace + compile of forward and
    backward), the losses of the first steps are compared."""
    res = {"name": w["name"], "device": device, "bytes": 0}
    wraps = {"eager": lambda m: m, "tcjit": tcjit.compile}
    if inductor:
        wraps["torch.compile"] = torch.compile
    impls, firsts, args, expected = {}, {}, None, None
    for impl, wrap in wraps.items():
        try:
            if impl == "tcjit":
                tcjit.reset()
            if impl == "torch.compile":
                torch._dynamo.reset()
            step, args = w["train"](device, wrap)
            first, loss = first_call_seconds(step, args, sync)
            if expected is None:
                expected = loss
            else:
                tolerance.assert_close(loss, expected, **w.get("tol", {}))
            impls[impl] = step
            firsts[impl] = None if impl == "eager" else first
        except Exception as e:  # report, keep benchmarking the rest
            res[impl] = {"error": f"{type(e).__name__}: {e}"}
    return _timed(res, impls, firsts, args, sync, budget)


def _timed(res, impls, firsts, args, sync, budget):
    """res with every implementation's per-call time and the ratios."""
    nbytes = res["bytes"]
    for impl, t in per_call_seconds(impls, args, sync, budget).items():
        res[impl] = {"per_call_s": t, "first_call_s": firsts[impl],
                     "gb_per_s": nbytes / t / 1e9}
    tc = res.get("tcjit", {}).get("per_call_s")
    for base in ("eager", "torch.compile"):
        b = res.get(base, {}).get("per_call_s")
        if tc is not None and b:
            res[f"tcjit/{base}"] = tc / b
    return res


def run_workload(w, device, sync, budget, inductor):
    if "skip" in w:
        return {"name": w["name"], "device": device, "skipped": w["skip"]}
    if "train" in w:
        return run_training(w, device, sync, budget, inductor)
    torch.manual_seed(0)
    args = w["make_inputs"](device)
    nbytes = w["bytes"](args)
    expected = w["fn"](*args)
    res = {"name": w["name"], "device": device, "bytes": nbytes}

    impls, firsts = {"eager": w["fn"]}, {"eager": None}
    if not w.get("reference_only"):
        try:
            tcjit.reset()
            compiled = tcjit.compile(fresh_function(w["fn"]))
            first, out = first_call_seconds(compiled, args, sync)
            tolerance.assert_close(out, expected, **w.get("tol", {}))
            impls["tcjit"], firsts["tcjit"] = compiled, first
        except Exception as e:  # report, keep benchmarking the rest
            res["tcjit"] = {"error": f"{type(e).__name__}: {e}"}
    if inductor and not w.get("reference_only"):
        try:
            torch._dynamo.reset()
            compiled = torch.compile(fresh_function(w["fn"]))
            first, out = first_call_seconds(compiled, args, sync)
            tolerance.assert_close(out, expected, **w.get("tol", {}))
            impls["torch.compile"], firsts["torch.compile"] = compiled, first
        except Exception as e:
            res["torch.compile"] = {"error": f"{type(e).__name__}: {e}"}

    return _timed(res, impls, firsts, args, sync, budget)


# -- output -------------------------------------------------------------------

def fmt_time(s):
    if s is None:
        return "-"
    if s >= 1:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.2f} ms"
    return f"{s * 1e6:.1f} us"


def print_table(results, out):
    impls = ["eager", "torch.compile", "tcjit"]
    w = max(len(r["name"]) for r in results)
    hdr = f"{'workload':{w}}  {'impl':13} {'per call':>10} {'GB/s':>8} {'first call':>11}"
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    for r in results:
        if "skipped" in r:
            print(f"{r['name']:{w}}  skipped: {r['skipped']}", file=out)
            continue
        for i, impl in enumerate(impls):
            if impl not in r:
                continue
            m = r[impl]
            name = r["name"] if i == 0 else ""
            if "error" in m:
                print(f"{name:{w}}  {impl:13} error: {m['error']}", file=out)
                continue
            print(f"{name:{w}}  {impl:13} {fmt_time(m['per_call_s']):>10} "
                  f"{m['gb_per_s']:8.3g} {fmt_time(m['first_call_s']):>11}", file=out)
        ratios = [f"{k} = {r[k]:.2f}" for k in ("tcjit/eager", "tcjit/torch.compile") if k in r]
        if ratios:
            print(f"{'':{w}}  " + ", ".join(ratios) + "  (time ratio, < 1: tcjit faster)", file=out)
    print(file=out)


def main():
    ap = argparse.ArgumentParser(description="eager vs torch.compile vs tcjit")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="run workloads whose name contains NAME (repeatable)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--json", action="store_true", help="write JSON to stdout (table to stderr)")
    ap.add_argument("--output", metavar="FILE", help="also write the JSON to FILE")
    ap.add_argument("--no-inductor", action="store_true", help="skip torch.compile")
    ap.add_argument("--inductor-cache", action="store_true",
                    help="let torch.compile use its on-disk caches (default: a fresh, empty cache)")
    ap.add_argument("--budget", type=float, default=1.0,
                    help="seconds of timing per (workload, implementation)")
    ap.add_argument("--list", action="store_true", help="list workload names")
    opts = ap.parse_args()

    if opts.list:
        for w in WORKLOADS:
            print(w["name"])
        return
    if opts.device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("bench: --device cuda but torch.cuda.is_available() is False")
        sync = torch.cuda.synchronize
    else:
        def sync():
            pass

    selected = [w for w in WORKLOADS
                if opts.device in w.get("devices", ("cpu", "cuda"))
                and (not opts.only or any(s.lower() in w["name"].lower() for s in opts.only))]
    if not selected:
        sys.exit(f"bench: no workload matches {opts.only}; --list shows the names")

    log = sys.stderr if opts.json else sys.stdout
    env = {
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "device": opts.device,
        "threads": torch.get_num_threads(),
        "inductor_cache": "user" if opts.inductor_cache else "fresh",
    }
    print(f"torch {env['torch']}, python {env['python']}, {opts.device}, "
          f"{env['threads']} torch threads", file=log)
    results = []
    try:
        for w in selected:
            print(f"... {w['name']}", file=log, flush=True)
            results.append(run_workload(w, opts.device, sync, opts.budget, not opts.no_inductor))
    finally:
        if not opts.inductor_cache:
            shutil.rmtree(os.environ["TORCHINDUCTOR_CACHE_DIR"], ignore_errors=True)
    print(file=log)
    print_table(results, log)
    report = {"env": env, "results": results}
    if opts.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    if opts.output:
        with open(opts.output, "w") as fh:
            json.dump(report, fh, indent=2)
            fh.write("\n")


if __name__ == "__main__":
    main()
