"""PyTorch's OpInfo database through tcjit.compile: what is captured whole.

    python -m tests.sweeps.opinfo [--dtype float32] [--samples 4]
                                  [--device cpu] [--only NAME ...]
                                  [--json FILE] [--jobs N]

Each OpInfo entry's first samples become small Python functions whose
parameters are the sample's tensors (every other argument is a constant of
the function), run eagerly and through tcjit.compile (first call under
explain(), second call from the cache), and are sorted into:

  whole      right values, 0 breaks, no eager fallback: 1+ graph, or none
             where the frame has no op to compile (it returns an input:
             x.contiguous(), x.conj() of a real x), counted apart
  break      right values, but a graph break or an eager fallback
  wrong      a value, dtype, shape or exception type differs from eager
  crash      the worker process died (segfault, abort)
  skip       eager itself raised, or the entry has no sample for the dtype

An entry's class is the worst of its samples'.  Nondeterministic ops
(``empty*``) are compared on metadata only; RNG ops run with the same seed
eagerly and compiled, so they are compared on values (tcjit must keep
eager's random stream).  Workers run in subprocesses, a chunk of entries
each, so a crash is recorded against its entry and the sweep goes on.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import Counter

ORDER = ["wrong", "crash", "break", "whole", "skip"]
UNINITIALIZED = ("empty", "empty_like", "new_empty", "new_empty_strided",
                 "empty_strided", "empty_permuted")


# ---------------------------------------------------------------- worker

def _load_db():
    from torch.testing._internal.common_methods_invocations import op_db
    return op_db


def _entry_name(op):
    return op.name + ("." + op.variant_test_name if op.variant_test_name
                      else "")


def _flatten(value, tensors):
    """Replace each tensor of a nested argument by its parameter name."""
    import torch
    if isinstance(value, torch.Tensor):
        tensors.append(value)
        return _Param(len(tensors) - 1)
    if isinstance(value, (list, tuple)):
        items = [_flatten(v, tensors) for v in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {k: _flatten(v, tensors) for k, v in value.items()}
    return value


class _Param:
    def __init__(self, i):
        self.i = i


def _source(call_args, call_kwargs, consts):
    """Python text of an argument, constants as globals c0, c1, ..."""
    def text(v):
        if isinstance(v, _Param):
            return f"t{v.i}"
        if isinstance(v, list):
            return "[" + "".join(text(x) + ", " for x in v) + "]"
        if isinstance(v, tuple):
            return "(" + "".join(text(x) + ", " for x in v) + ")"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {text(x)}" for k, x in v.items()) + "}"
        if v is None or isinstance(v, (bool, int, str)):
            return repr(v)
        consts.append(v)
        return f"c{len(consts) - 1}"
    parts = [text(a) for a in call_args]
    parts += [f"{k}={text(v)}" for k, v in call_kwargs.items()]
    return ", ".join(parts)


def make_function(op, sample):
    """(fn, tensors, source): the sample as `def f(t0, t1, ...)`."""
    tensors = []
    args = _flatten((sample.input,) + tuple(sample.args), tensors)
    kwargs = _flatten(dict(sample.kwargs), tensors)
    consts = []
    call = _source(args, kwargs, consts)
    params = ", ".join(f"t{i}" for i in range(len(tensors)))
    src = f"def f({params}):\n    return op({call})\n"
    env = {"op": op.op}
    env.update({f"c{i}": c for i, c in enumerate(consts)})
    exec(compile(src, f"<opinfo {_entry_name(op)}>", "exec"), env)
    return env["f"], tensors, src


def _clone(tensors):
    return [t.clone() if t.is_leaf else t.detach().clone() for t in tensors]


def _compare(got, exp, values, upcast=None):
    """None when got matches eager's exp, else what differs.  upcast: the
    function run in float32 on upcast float16 / bfloat16 inputs, or None;
    a reduced-float result close to it (rounded to the dtype) matches too:
    tcjit rounds a fused chain once where eager rounds after every op, so
    it may be closer to the exact value than eager by more than the
    dtype's tolerance (tanhshrink's x - tanh(x) cancels)."""
    import torch
    if isinstance(exp, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"type {type(got).__name__} != Tensor"
        for what in ("dtype", "shape", "device"):
            if getattr(got, what) != getattr(exp, what):
                return f"{what} {getattr(got, what)} != {getattr(exp, what)}"
        if values:
            # float16 / bfloat16: torch.testing's bound for the dtype
            reduced = exp.dtype in (torch.float16, torch.bfloat16)
            tol = {} if reduced else {"rtol": 1e-4, "atol": 1e-5}
            try:
                torch.testing.assert_close(got, exp, equal_nan=True, **tol)
            except AssertionError as e:
                if not (reduced and isinstance(upcast, torch.Tensor)
                        and upcast.shape == exp.shape
                        and _compare(got, upcast.to(exp.dtype), values)
                        is None):
                    return "values: " + str(e).splitlines()[0]
        return None
    if isinstance(exp, (list, tuple)):
        if not isinstance(got, (list, tuple)) or len(got) != len(exp):
            return f"structure {type(got).__name__} != {type(exp).__name__}"
        ups = (upcast if isinstance(upcast, (list, tuple))
               and len(upcast) == len(exp) else [None] * len(exp))
        for g, e, u in zip(got, exp, ups):
            d = _compare(g, e, values, u)
            if d:
                return d
        return None
    if got != exp and not (got != got and exp != exp):
        return f"{got!r} != {exp!r}"
    return None


def _upcast(fn, tensors):
    """fn on float16 / bfloat16 inputs made float32 (None if it raises)."""
    import torch
    ts = [t.float() if t.dtype in (torch.float16, torch.bfloat16) else t
          for t in _clone(tensors)]
    return _run(fn, ts)[0]


def _run(fn, tensors):
    import torch
    torch.manual_seed(0)
    try:
        return fn(*tensors), None
    except Exception as e:   # noqa: BLE001 - every exception is a result
        return None, e


def run_sample(op, sample):
    """One sample: (class, reason)."""
    import torch
    import tcjit
    fn, tensors, src = make_function(op, sample)
    exp, eexc = _run(fn, _clone(tensors))
    if eexc is not None:
        return "skip", f"eager raised {type(eexc).__name__}"
    tcjit.reset()
    c0 = tcjit.counters()
    torch.manual_seed(0)
    try:
        ex = tcjit.explain(fn)(*_clone(tensors))
    except Exception as e:   # noqa: BLE001
        return "wrong", f"tcjit raised {type(e).__name__}: {e}"
    values = op.name not in UNINITIALIZED
    diff = _compare(ex.result, exp, values)
    if diff is not None and diff.startswith("values"):
        upcast = _upcast(fn, tensors)
        diff = _compare(ex.result, exp, values, upcast)
    if diff is None:
        got, gexc = _run(tcjit.compile(fn), _clone(tensors))
        diff = (f"second call raised {type(gexc).__name__}: {gexc}"
                if gexc is not None else _compare(got, exp, values))
        if diff is not None and diff.startswith("values"):
            diff = _compare(got, exp, values, _upcast(fn, tensors))
    if diff is not None:
        return "wrong", diff
    c = tcjit.counters()
    fallbacks = c["eager_fallbacks"] - c0["eager_fallbacks"]
    if ex.graph_break_count or fallbacks:
        # (a frame that breaks before it touched a tensor -- its tensors
        # made inside by a call the tracer cannot keep -- is skipped
        # whole, without a reason of its own)
        reason = (ex.break_reasons[0].reason if ex.break_reasons
                  else "frame skipped: no tensor traced before a break"
                  if c["frames_skipped"] > c0["frames_skipped"]
                  else "eager fallback")
        return "break", reason
    # no graph, no break, no fallback: the compiled frame computes nothing
    # (x.contiguous() of a contiguous x returns x), and a cache hit returns
    # it without running the frame
    return "whole", "no op" if ex.graph_count == 0 else ""


def run_entry(op, dtype, device, nsamples):
    if dtype not in op.supported_dtypes(device):
        return "skip", f"no {dtype} support"
    try:
        samples = op.sample_inputs(device, dtype, requires_grad=False)
        samples = [s for _, s in zip(range(nsamples), samples)]
    except Exception as e:   # noqa: BLE001
        return "skip", f"sample_inputs raised {type(e).__name__}"
    if not samples:
        return "skip", "no samples"
    worst = None
    for s in samples:
        cls, reason = run_sample(op, s)
        if worst is None:
            worst = (cls, "eager raised on every sample (" + reason + ")"
                     if cls == "skip" else reason)
            continue
        if ORDER.index(cls) < ORDER.index(worst[0]) \
                or (cls == worst[0] == "whole" and not reason):
            worst = (cls, reason)   # "no op" only if no sample has one
    return worst


def worker(args):
    import torch
    import warnings
    warnings.simplefilter("ignore")
    dtype = getattr(torch, args.dtype)
    db = _load_db()
    for i in range(args.start, min(args.stop, len(db))):
        op = db[i]
        if args.only and _entry_name(op) not in args.only \
                and op.name not in args.only:
            continue
        print(json.dumps({"i": i, "started": True}), flush=True)
        t0 = time.perf_counter()
        cls, reason = run_entry(op, dtype, args.device, args.samples)
        print(json.dumps({"i": i, "name": _entry_name(op), "class": cls,
                          "reason": str(reason)[:300],
                          "seconds": round(time.perf_counter() - t0, 3)}),
              flush=True)


# ---------------------------------------------------------------- driver

def _run_range(args, start, stop):
    """Run entries [start, stop) in workers; a crash is charged to the
    entry that was running and the rest go on in a new worker."""
    results = {}
    while start < stop:
        cmd = [sys.executable, "-m", "tests.sweeps.opinfo", "--worker",
               "--start", str(start), "--stop", str(stop),
               "--dtype", args.dtype, "--device", args.device,
               "--samples", str(args.samples)]
        if args.only:
            cmd += ["--only"] + args.only
        p = subprocess.run(cmd, capture_output=True, text=True,
                           timeout=args.timeout)
        running = None
        for line in p.stdout.splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if r.get("started"):
                running = r["i"]
            else:
                results[r["i"]] = r
                running = None
        if p.returncode == 0:
            break
        if running is None:
            raise RuntimeError(f"worker failed outside an entry:\n{p.stderr}")
        results[running] = {"i": running, "name": f"#{running}",
                            "class": "crash",
                            "reason": f"exit {p.returncode}: "
                                      + p.stderr.strip()[-200:]}
        start = running + 1
    return results


def sweep(args):
    from concurrent.futures import ThreadPoolExecutor
    n = len(_load_db())
    step = (n + args.jobs - 1) // args.jobs
    with ThreadPoolExecutor(args.jobs) as ex:
        parts = ex.map(lambda s: _run_range(args, s, min(s + step, n)),
                       range(0, n, step))
    results = {}
    for part in parts:
        results.update(part)
    return [results[i] for i in sorted(results)]


def _reason_kind(reason):
    """A break reason without its names and places, to count kinds."""
    reason = re.sub(r"call to [\w.<>]+", "call to X", reason)
    while reason.startswith("call to X (not inlined: "):
        reason = reason[len("call to X (not inlined: "):]  # the innermost
    return reason.split(" at /")[0].rstrip(")")[:100]


def report(results, out=sys.stdout):
    tally = Counter(r["class"] for r in results)
    print("OpInfo sweep:", ", ".join(f"{c} {tally.get(c, 0)}" for c in ORDER),
          f"(of {len(results)} entries)", file=out)
    tested = sum(tally[c] for c in ("whole", "break", "wrong", "crash"))
    if tested:
        noop = sum(r["class"] == "whole" and r["reason"] == "no op"
                   for r in results)
        print(f"captured whole: {tally['whole'] / tested:.1%} of the "
              f"{tested} entries with samples ({noop} of them with no op "
              "to compile)", file=out)
    for cls in ("wrong", "crash", "break", "skip"):
        for r in results:
            if r["class"] == cls:
                print(f"  {cls:6} {r['name']}: {r['reason']}", file=out)
    reasons = Counter(_reason_kind(r["reason"])
                      for r in results if r["class"] == "break")
    print("most common break reasons:", file=out)
    for reason, k in reasons.most_common(15):
        print(f"  {k:4}  {reason}", file=out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dtype", default="float32")
    p.add_argument("--device", default="cpu")
    p.add_argument("--samples", type=int, default=4)
    p.add_argument("--only", nargs="*")
    p.add_argument("--json")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--timeout", type=int, default=1800)
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--stop", type=int, default=1 << 30, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    t0 = time.perf_counter()
    results = sweep(args)
    if args.only:
        results = [r for r in results if r["class"] != "skip"
                   or r["name"] in args.only]
    report(results)
    print(f"({time.perf_counter() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if any(r["class"] in ("wrong", "crash") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
