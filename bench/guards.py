"""Guard evaluation time per call (issue 20: measured before / after).

    PYTHONPATH=python python3 bench/guards.py [--rounds 7] [--json]

Rows (one compiled entry each, CPU, inference):
  GPT-2 block          a nanoGPT block (tests/test_models.py), called whole
  GPT-2 12-block stack twelve of them in an nn.Sequential
  50 tensor args       f(a0, ..., a49): fifty TENSOR_MATCH guards
  x+1 per call         the whole compiled call of x + 1 on one element
                       (guards, kernel, result): the per-call overhead

Guard rows time the cache lookup alone (fetch every source, run every
guard, release), through tcjit._C._guard_time, n lookups in a C loop; the
x+1 row times Python calls of the compiled function.  Every row is the
minimum over --rounds rounds (a 2-core shared machine is noisy: the minimum
is the run least disturbed).
"""

import argparse
import json
import os
import sys
import time

import torch

import tcjit
from tcjit import _C

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from test_models import Block  # noqa: E402

BLOCK = STACK = None  # set by setup()


def block(x):
    return BLOCK(x)


def stack(x):
    return STACK(x)


_NARGS = 50
_src = "def many({0}):\n    return {1}\n".format(
    ", ".join(f"a{i}" for i in range(_NARGS)),
    " + ".join(f"a{i}" for i in range(_NARGS)))
exec(_src)  # defines many(a0, ..., a49)


def add_one(x):
    return x + 1


def setup():
    global BLOCK, STACK
    torch.manual_seed(0)
    BLOCK = Block(768, 12).eval().requires_grad_(False)
    STACK = torch.nn.Sequential(
        *[Block(768, 12) for _ in range(12)]).eval().requires_grad_(False)
    x = torch.randn(1, 8, 768)
    rows = [
        ("GPT-2 block", block, (x,)),
        ("GPT-2 12-block stack", stack, (x,)),
        ("50 tensor args", many, tuple(torch.randn(4) for _ in range(_NARGS))),
    ]
    for _, fn, args in rows:
        compiled = tcjit.compile(fn)
        with torch.no_grad():
            out = compiled(*args)
            torch.testing.assert_close(out, fn(*args), rtol=1e-3, atol=1e-3)
            compiled(*args)
    return rows


def guard_ns(fn, args, n):
    with torch.no_grad():
        return _C._guard_time(fn, args, n)


def call_ns(compiled, args, n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        compiled(*args)
    return (time.perf_counter_ns() - t0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows = setup()
    one = torch.randn(1)
    compiled_add = tcjit.compile(add_one)
    compiled_add(one)
    best = {}
    for _ in range(a.rounds):
        for name, fn, args in rows:
            n = 2000 if "stack" in name else 20000
            ns = guard_ns(fn, args, n)
            best[name] = min(best.get(name, ns), ns)
        ns = call_ns(compiled_add, (one,), 20000)
        best["x+1 per call"] = min(best.get("x+1 per call", ns), ns)
    if a.json:
        print(json.dumps(best))
        return
    for name, ns in best.items():
        print(f"{name:24s} {ns / 1000:9.3f} us")


if __name__ == "__main__":
    main()
