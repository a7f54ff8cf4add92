"""tcjit quick start.

Compiles three small PyTorch functions with tcjit.compile, checks every
result against eager PyTorch, and prints per-call and first-call times for
eager, tcjit and torch.compile (Inductor).

    make demo                                  # builds tcjit, then runs this
    PYTHONPATH=python python3 examples/quickstart.py --no-inductor

torch.compile's first call is slow on a cold machine (tens of seconds for
the first function on CPU); --no-inductor leaves it out.
"""

import argparse
import statistics
import time

import torch

import tcjit


# -- the programs: plain PyTorch, nothing tcjit-specific ---------------------

def f(x, y):
    return (torch.sin(x) + torch.cos(y)).relu() * 2 + 1


def g(x, y, alpha):
    # A Python float argument and broadcasting ([1000, 64] with [64]);
    # two outputs.
    z = torch.sin(x) + y.cos() * alpha
    return torch.relu(z).exp() - 1, z.abs()


def h(x):
    return x + 1


EXAMPLES = [
    ("f: (sin(x)+cos(y)).relu()*2+1, 4M f32", f,
     lambda: (torch.randn(1 << 22), torch.randn(1 << 22))),
    ("g: scalar + broadcast, 1000x64 & 64", g,
     lambda: (torch.randn(1000, 64), torch.randn(64), 0.5)),
    ("h: x + 1, 1 element", h,
     lambda: (torch.randn(1),)),
]


# -- timing -------------------------------------------------------------------

def per_call_seconds(fn, args, budget=0.5):
    """Median per-call time: warm up, then batch calls so that one sample
    takes >= 1 ms (tiny functions), and take the median of the samples."""
    for _ in range(3):
        fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(1e-3 / one))
    samples = []
    deadline = time.perf_counter() + budget
    while len(samples) < 5 or (time.perf_counter() < deadline and len(samples) < 200):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn(*args)
        samples.append((time.perf_counter() - t0) / inner)
    return statistics.median(samples)


def first_call_seconds(fn, args):
    t0 = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - t0, out


def fmt(seconds):
    if seconds is None:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} us"


# Polynomial sin/cos/exp (tcjit) and SLEEF (eager, Inductor) differ by a few
# ulp; this is the tolerance the demo asks of every compiler.
TOL = dict(rtol=1e-5, atol=1e-5)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-inductor", action="store_true",
                    help="skip torch.compile (its first call takes tens of seconds)")
    opts = ap.parse_args()

    torch.manual_seed(0)
    rows = []
    for name, fn, make_inputs in EXAMPLES:
        args = make_inputs()
        expected = fn(*args)

        compiled = tcjit.compile(fn)
        tc_first, out = first_call_seconds(compiled, args)
        torch.testing.assert_close(out, expected, **TOL)
        torch.testing.assert_close(compiled(*args), expected, **TOL)  # cached path

        row = {
            "name": name,
            "eager": per_call_seconds(fn, args),
            "tcjit": per_call_seconds(compiled, args),
            "tcjit_first": tc_first,
            "inductor": None,
            "inductor_first": None,
        }
        if not opts.no_inductor:
            ind = torch.compile(fn)
            row["inductor_first"], out = first_call_seconds(ind, args)
            torch.testing.assert_close(out, expected, **TOL)
            row["inductor"] = per_call_seconds(ind, args)
        rows.append(row)
        print(f"ok  {name}: matches eager", flush=True)

    print()
    w = max(len(r["name"]) for r in rows)
    print(f"{'':{w}}  {'per call':^35}  {'first call':^24}")
    print(f"{'example':{w}}  {'eager':>10} {'tcjit':>10} {'torch.compile':>13}"
          f"  {'tcjit':>10} {'torch.compile':>13}")
    for r in rows:
        print(f"{r['name']:{w}}  {fmt(r['eager']):>10} {fmt(r['tcjit']):>10} "
              f"{fmt(r['inductor']):>13}  {fmt(r['tcjit_first']):>10} "
              f"{fmt(r['inductor_first']):>13}")
    print()
    print("tcjit counters:", tcjit.counters())


if __name__ == "__main__":
    main()
