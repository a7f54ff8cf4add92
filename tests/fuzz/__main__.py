"""python3 tests/fuzz: run the fuzzer (from anywhere; `python3 -m tests.fuzz`
from the repository root works too, unless a `tests` package is installed).

    python3 tests/fuzz --count 5000 --seed 0 --jobs 2
    python3 tests/fuzz --show 123          # print program 123
    python3 tests/fuzz --count 1 --seed 123 --jobs 1   # check one seed

Failures are grouped by signature (backend:kind:detail, see check.py);
for each new one (not in known.KNOWN) the first program is minimized in a
fresh process and its reproducer written to --out.  Exit status 1 if there
were new failures.
"""
import argparse
import json
import os
import re
import sys
import time

if not __package__:       # run as a directory: import the package as "fuzz"
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    __package__ = "fuzz"


def parse(argv):
    ap = argparse.ArgumentParser(prog="python3 tests/fuzz", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1000, help="programs to run")
    ap.add_argument("--seed", type=int, default=0, help="first seed")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    ap.add_argument("--profile", choices=("small", "full"), default="full",
                    help="small: the CI slice's short programs; full: longer ones")
    ap.add_argument("--device", default="cpu", help="cpu or cuda")
    ap.add_argument("--backends", default="auto,eager",
                    help="comma-separated tcjit backends; grad: the training path (grad.py)")
    ap.add_argument("--budget", type=float, default=60.0,
                    help="seconds to minimize each failure class")
    ap.add_argument("--max-repro", type=int, default=30,
                    help="failure classes to minimize (new ones first)")
    ap.add_argument("--known-too", action="store_true", help="also minimize known classes")
    ap.add_argument("--no-minimize", action="store_true")
    ap.add_argument("--out", default="fuzz-out", help="directory for reproducers")
    ap.add_argument("--timeout", type=float, default=120, help="seconds before a seed is a hang")
    ap.add_argument("--save", metavar="FILE", help="write every failure (JSON) to FILE")
    ap.add_argument("--show", type=int, metavar="SEED", help="print a program and exit")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--repro", type=int, metavar="SEED", help=argparse.SUPPRESS)
    ap.add_argument("--failure", help=argparse.SUPPRESS)
    ap.add_argument("--run-program", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def repro_main(a):
    """Minimize seed a.repro's failure a.failure; print one JSON line."""
    import torch

    from .gen import generate

    # candidates run in forked children: no OpenMP team may exist here
    torch.set_num_threads(1)
    from .minimize import minimize
    from .program import reproducer

    prog = generate(a.repro, a.profile, a.device)
    small, failure = minimize(prog, json.loads(a.failure), a.device, a.budget)
    print(json.dumps({"reproducer": reproducer(small, failure, a.device),
                      "signature": failure["signature"], "stmts": len(small.stmts)}))


def file_name(sig):
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", sig).strip("-")[:80] + ".py"


def main(argv=None):
    a = parse(argv)
    if a.worker:
        from .runner import worker_main
        return worker_main()
    if a.repro is not None:
        return repro_main(a)
    if a.run_program is not None:      # one program, for the minimizer
        from .check import run_program
        from .program import Program
        try:
            for _ in range(a.count):    # --count: times, for a crash that needs repeats
                failures, _ = run_program(Program.from_json(json.loads(a.run_program)),
                                          tuple(a.backends.split(",")), a.device)
        except RuntimeError as e:
            if "CUDA error" in str(e):
                os._exit(3)
            raise
        print(json.dumps(failures))
        return 0
    if a.show is not None:
        from .gen import generate
        print(generate(a.show, a.profile, a.device).source())
        return 0

    from .known import known_as
    from .runner import fuzz, reproduce

    t0 = time.time()
    done = [0]

    def tick(seed, failures):
        done[0] += 1
        if done[0] % 500 == 0:
            print(f"  {done[0]} programs, {time.time() - t0:.0f} s", file=sys.stderr)

    res = fuzz(a.count, a.seed, a.jobs, a.profile, a.device, a.backends.split(","),
               timeout=a.timeout, on_result=tick)
    groups = res.groups()
    if a.save:
        with open(a.save, "w") as fh:
            json.dump({str(k): v for k, v in sorted(res.by_seed.items()) if v}, fh, indent=1)
    failed = sum(1 for f in res.by_seed.values() if f)
    n = len(res.by_seed)
    info = list(res.info.values())
    print(f"tcjit fuzz: {n} programs (seeds {a.seed}..{a.seed + a.count - 1}, profile "
          f"{a.profile}, {a.device}) in {time.time() - t0:.0f} s: {n - failed} passed, "
          f"{failed} failed, {len(groups)} failure classes")
    if info:
        print(f"  {sum(i['nstmts'] for i in info) / len(info):.1f} statements per program, "
              f"{100 * sum(i['raises'] for i in info) / len(info):.1f}% raise in eager, "
              f"{sum(i['graphs'] for i in info) / len(info):.2f} graphs per auto call pair")
    new = sorted((s for s in groups if known_as(s) is None), key=lambda s: -len(groups[s]))
    known = sorted((s for s in groups if known_as(s) is not None), key=lambda s: -len(groups[s]))
    todo = (new + (known if a.known_too else []))[: 0 if a.no_minimize else a.max_repro]
    if todo:
        os.makedirs(a.out, exist_ok=True)
    for sig in new + known:
        seeds = [s for s, _ in groups[sig]]
        tag = "NEW  " if known_as(sig) is None else "KNOWN"
        print(f"{tag} {sig}  ({len(seeds)} programs; seeds {', '.join(map(str, seeds[:6]))}"
              f"{' ...' if len(seeds) > 6 else ''})")
        msg = groups[sig][0][1]["message"].splitlines() or [""]
        if groups[sig][0][1]["kind"] in ("crash", "hang"):   # the stack, where it died
            msg = [m for m in msg if not m.startswith(("0x", "\t"))][-8:]
        for line in msg[:8]:
            print("      " + line[:200])
        if sig in todo:
            seed, failure = groups[sig][0]
            r = reproduce(seed, failure, a.profile, a.device, a.budget)
            if "error" in r:
                print("      minimizer failed: " + r["error"].strip().splitlines()[-1])
                continue
            path = os.path.join(a.out, file_name(sig))
            with open(path, "w") as fh:
                fh.write(r["reproducer"])
            print(f"      minimized to {r['stmts']} statements ({r['signature']}): {path}")
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
