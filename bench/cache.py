"""First call in a fresh process, cold vs warm on-disk cache: tcjit beside
torch.compile (issue 15, docs/cache.md).

    PYTHONPATH=python python3 bench/cache.py               # CPU
    PYTHONPATH=python python3 bench/cache.py --device cuda
    PYTHONPATH=python python3 bench/cache.py --json > cache.json

Workloads: the GPT-2 block (2x128x768 on the CPU, 8x256x768 on CUDA) and
12 of them traced as one graph, inference (bench.py's _gpt2).  For each
implementation a child process is started per measurement, so every first
call pays what a new process pays (imports excluded, model built before
the clock starts):
  tcjit cold      empty TCJIT_CACHE_DIR: trace + schedule + compile + run
  tcjit warm      the same directory again: kernels loaded from the cache
  inductor cold   empty TORCHINDUCTOR_CACHE_DIR
  inductor warm   the same directory again (FX graph + kernel caches)
tcjit cold is measured twice: compile_workers = 1 (serial) and = --workers
(parallel, default: the CPU count, at least 2).  Each number is the median
of --repeat runs; "over steady" subtracts the child's own steady-state call
(median of 3 later calls), which is what the first call costs beyond a
normal call; "trace+compile" is what tcjit.explain() records for the first
call (trace, schedule, kernels), "kernels" kernel_compile_seconds (cache
lookups, gcc, loading shared objects).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import os, sys, time, json
sys.path.insert(0, {tests!r})
sys.path.insert(0, {here!r})
import torch
impl, dev, blocks, batch, seq = {impl!r}, {dev!r}, {blocks}, {batch}, {seq}
if impl == "tcjit":
    import tcjit
    if {workers} is not None:
        tcjit.config.compile_workers = {workers}
from bench import _gpt2, _MODELS
(x,) = _gpt2(batch, seq, blocks)(dev)
model = _MODELS[dev]
if impl == "tcjit":
    fn = tcjit.compile(model)
else:
    fn = torch.compile(model)
if dev == "cuda":
    torch.cuda.synchronize()
compile_s = None
t0 = time.perf_counter()
with torch.no_grad():
    if impl == "tcjit":
        # explain() is the first call, recording what trace + compile took
        ex = tcjit.explain(model)(x)
        out, compile_s = ex.result, sum(ex.compile_times)
    else:
        out = fn(x)
if dev == "cuda":
    torch.cuda.synchronize()
t = time.perf_counter() - t0
steady = []
for _ in range(3):
    t1 = time.perf_counter()
    with torch.no_grad():
        fn(x)
    if dev == "cuda":
        torch.cuda.synchronize()
    steady.append(time.perf_counter() - t1)
with torch.no_grad():
    ref = model(x)
torch.testing.assert_close(out, ref, rtol=1e-3, atol=1e-3)
extra = {{}}
if impl == "tcjit":
    c = tcjit.counters()
    extra = {{k: c[k] for k in ("kernel_cache_hits", "kernel_cache_misses",
                                "kernels_compiled", "graphs",
                                "kernel_compile_seconds")}}
print(json.dumps(dict(seconds=t, steady=sorted(steady)[1],
                      compile=compile_s, **extra)))
"""


def child(impl, dev, blocks, batch, seq, cache_dir, workers=None):
    env = dict(os.environ)
    env["TCJIT_CACHE_DIR"] = cache_dir
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_dir, "inductor")
    code = CHILD.format(tests=os.path.join(HERE, "..", "tests"), here=HERE,
                        impl=impl, dev=dev, blocks=blocks, batch=batch,
                        seq=seq, workers=workers)
    p = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{impl} child failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def measure(impl, dev, blocks, batch, seq, repeat, workers=None):
    """(cold runs, warm runs): each cold run in a fresh directory, then one
    warm run in that same directory."""
    cold, warm = [], []
    for _ in range(repeat):
        d = tempfile.mkdtemp(prefix="tcjit-bench-cache-")
        cold.append(child(impl, dev, blocks, batch, seq, d, workers))
        warm.append(child(impl, dev, blocks, batch, seq, d, workers))
    return cold, warm


def med(runs):
    return statistics.median(r["seconds"] for r in runs)


def over(runs):
    return statistics.median(r["seconds"] - r["steady"] for r in runs)


def gcc(runs):
    return statistics.median(r["kernel_compile_seconds"] for r in runs)


def comp(runs):
    return statistics.median(r["compile"] for r in runs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-inductor", action="store_true")
    ap.add_argument("--only", choices=["block", "12-block"])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--workers", type=int, default=max(2, os.cpu_count() or 2))
    args = ap.parse_args()
    dev = args.device
    batch, seq = (2, 128) if dev == "cpu" else (8, 256)
    rows = []
    for name, blocks in (("GPT-2 block", 1), ("GPT-2 12-block graph", 12)):
        if args.only and (args.only == "block") != (blocks == 1):
            continue
        label = f"{name} {batch}x{seq}x768 {dev}"
        serial, _ = measure("tcjit", dev, blocks, batch, seq, args.repeat,
                            workers=1)
        cold, warm = measure("tcjit", dev, blocks, batch, seq, args.repeat,
                             workers=args.workers)
        row = {"workload": label,
               "tcjit_cold_serial_s": med(serial),
               "tcjit_cold_s": med(cold), "tcjit_warm_s": med(warm),
               "tcjit_cold_serial_over_steady_s": over(serial),
               "tcjit_cold_over_steady_s": over(cold),
               "tcjit_warm_over_steady_s": over(warm),
               "tcjit_cold_serial_compile_s": comp(serial),
               "tcjit_cold_compile_s": comp(cold),
               "tcjit_warm_compile_s": comp(warm),
               "tcjit_cold_serial_gcc_s": gcc(serial),
               "tcjit_cold_gcc_s": gcc(cold),
               "tcjit_warm_gcc_s": gcc(warm),
               "tcjit_cold_counters": cold[-1],
               "tcjit_warm_counters": warm[-1]}
        if not args.no_inductor:
            icold, iwarm = measure("inductor", dev, blocks, batch, seq,
                                   args.repeat)
            row["inductor_cold_s"] = med(icold)
            row["inductor_warm_s"] = med(iwarm)
            row["inductor_cold_over_steady_s"] = over(icold)
            row["inductor_warm_over_steady_s"] = over(iwarm)
        rows.append(row)
        if not args.json:
            ms = lambda k: f"{row[k] * 1e3:8.1f}"
            print(f"{label}  (ms; first call / over a steady call / "
                  f"trace+compile / kernels)")
            for what, k in (("tcjit cold serial", "tcjit_cold_serial"),
                            (f"tcjit cold {args.workers} workers",
                             "tcjit_cold"), ("tcjit warm", "tcjit_warm")):
                print(f"  {what:24s} {ms(k + '_s')} {ms(k + '_over_steady_s')}"
                      f" {ms(k + '_compile_s')} {ms(k + '_gcc_s')}")
            for what, k in (("torch.compile cold", "inductor_cold"),
                            ("torch.compile warm", "inductor_warm")):
                if k + "_s" in row:
                    print(f"  {what:24s} {ms(k + '_s')} "
                          f"{ms(k + '_over_steady_s')}")
            print(f"  warm counters {warm[-1]}", flush=True)
    if args.json:
        print(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
