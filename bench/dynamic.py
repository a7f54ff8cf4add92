"""Static vs dynamic shapes on the same workloads (issue 14).

Each workload is compiled twice at the same size: dynamic=False (kernels
with constant sizes and strides) and dynamic=True (size-generic kernels:
sizes, strides and offsets read at run time).  Prints per-call times and
the dynamic/static ratio (goal: within 10%), and what a new size costs
once dynamic (a trace and a schedule, no gcc) beside what it costs static
(a full compile).  Then a nanoGPT-style generate loop: tokens/s of eager,
tcjit (dynamic=False and automatic dynamic) and, with --torch-compile (on
by default with --device cuda), torch.compile.

    PYTHONPATH=python python3 bench/dynamic.py [--torch-compile]
    PYTHONPATH=python python3 bench/dynamic.py --device cuda

With --device cuda the tensors and the model are on the GPU: size-generic
PTX kernels (src/gpu/ptx_emit.c), a new size emits PTX but loads no
module (no driver JIT); times are taken after torch.cuda.synchronize().
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

import tcjit

DEV = "cuda" if "--device" in sys.argv and \
    sys.argv[sys.argv.index("--device") + 1] == "cuda" else "cpu"


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()


def per_call(fn, args, reps=200):
    for _ in range(5):
        fn(*args)
    sync()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(reps):
            fn(*args)
        sync()
        best = min(best, (time.perf_counter() - t) / reps)
    return best


def once(fn, args):
    """Seconds of one call (a compile, when fn has not seen these sizes)."""
    sync()
    t = time.perf_counter()
    fn(*args)
    sync()
    return time.perf_counter() - t


WORKLOADS = {
    "pointwise 1M (sin+cos, relu, *2+1)":
        (lambda x, y: ((x.sin() + y.cos()).relu() * 2 + 1),
         lambda: (torch.randn(1 << 20), torch.randn(1 << 20)), 50),
    "softmax 1024x1024":
        (lambda x: torch.softmax(x, -1), lambda: (torch.randn(1024, 1024),),
         50),
    "layer_norm 2048x1024":
        (lambda x: F.layer_norm(x, (1024,)),
         lambda: (torch.randn(2048, 1024),), 50),
    "x + 1, 1 element (overhead)":
        (lambda x: x + 1, lambda: (torch.randn(1),), 2000),
}


def main():
    print(f"device {DEV}")
    print(f"{'workload':38} {'static':>10} {'dynamic':>10} {'ratio':>6} "
          f"{'new size':>9} {'static new':>10}")
    for name, (fn, make, reps) in WORKLOADS.items():
        args = tuple(a.to(DEV) for a in make())
        tcjit.reset()
        # two backends on the same code: entries of their own
        static = tcjit.compile(fn, dynamic=False)
        dyn = tcjit.compile(fn, dynamic=True)
        ts = td = float("inf")
        for _ in range(5):   # interleaved: the machine is shared
            ts = min(ts, per_call(static, args, reps))
            td = min(td, per_call(dyn, args, reps))
        # a size not seen yet (same size class): retrace + schedule,
        # kernels reused
        other = tuple(a[:-1] if a.shape[0] > 2 else a.repeat(3)
                      for a in args)
        tn = once(dyn, other)
        # another new size compiled static: kernels (and, on the GPU, a
        # module through the driver's JIT) of its own
        other2 = tuple(a[:-2] if a.shape[0] > 2 else a.repeat(5)
                       for a in args)
        tsn = once(static, other2)
        print(f"{name:38} {ts * 1e6:8.1f}us {td * 1e6:8.1f}us "
              f"{td / ts:6.2f} {tn * 1e3:7.2f}ms {tsn * 1e3:8.2f}ms")
    c = tcjit.counters()
    print(f"(last workload: {c['dynamic_reuses']} new size(s) reused "
          f"size-generic kernels)")


def generate_bench(use_torch_compile=False):
    """nanoGPT-style greedy generation, context 1 -> 64 tokens
    (tests/test_dynamic.py TinyGPT): tokens/s of the first pass (compiles
    included) and of a second pass (every size cached)."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
    from test_dynamic import TinyGPT, generate
    torch.manual_seed(0)
    model = TinyGPT(vocab=64, n_embd=128, n_head=4, n_layer=4).eval().to(DEV)
    start = torch.zeros(1, 1, dtype=torch.long, device=DEV)
    # tcjit static (dynamic=False) compiles every context length until
    # the recompile limit (8), then runs eagerly
    runs = [("eager", lambda: model),
            ("tcjit static", lambda: tcjit.compile(model, dynamic=False)),
            ("tcjit", lambda: tcjit.compile(model))]
    if use_torch_compile:
        runs.append(("torch.compile", lambda: torch.compile(model)))
    ref, c = None, None
    print(f"\ngenerate 63 tokens (TinyGPT 4x128, {DEV}):  first pass / "
          f"second pass")
    with torch.no_grad():
        for name, make_model in runs:
            tcjit.reset()
            try:
                m = make_model()
                times = []
                for _ in range(2):
                    sync()
                    t = time.perf_counter()
                    out = generate(m, start, 63)
                    sync()
                    times.append(time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001 - e.g. no triton
                print(f"  {name:14} failed: {type(e).__name__}: "
                      f"{str(e)[:100]}")
                continue
            ref = out if ref is None else ref
            same = "same tokens" if torch.equal(out, ref) else "DIFFERENT tokens"
            print(f"  {name:14} {63 / times[0]:8.1f} tok/s  "
                  f"{63 / times[1]:8.1f} tok/s   {same}")
            if name == "tcjit":
                c = dict(tcjit.counters())
    if c is None:
        return
    print(f"  tcjit: {c['recompiles']} recompile(s), "
          f"{c['frames_compiled'] - c['dynamic_reuses']} compiles, "
          f"{c['dynamic_reuses']} sizes reused size-generic kernels")


if __name__ == "__main__":
    main()
    generate_bench("--torch-compile" in sys.argv or DEV == "cuda")
