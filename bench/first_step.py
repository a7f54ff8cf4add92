"""First training step of tests/test_models.py's nanoGPT under tcjit: trace
and compile of the forward and the backward, and the run (bench/bench.py's
'nanoGPT train step', model in eval mode, AdamW; the optimizer's first
step runs eagerly, as it makes its state).  Cold: an empty kernel cache.

    python3 bench/first_step.py [--config small|12x768] [--no-opt]
                                [--no-cache]

Prints wall and CPU seconds (this process, and the assembler and linker
gcc runs) of the first step, the eager step's for reference, and
tcjit.counters()' kernel figures.  Timing on a shared machine is noisy:
compare the CPU seconds, and runs of one command.
"""
import argparse
import os
import resource
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))
os.environ["TCJIT_CACHE_DIR"] = tempfile.mkdtemp(prefix="tcjit-first-step-")

import torch  # noqa: E402

import tcjit  # noqa: E402
from test_models import GPT  # noqa: E402

CONFIGS = {"small": (4, 64, 4, 256, 512),       # bench.py's CPU row
           "12x768": (1, 8, 12, 768, 512)}      # GPT-2 124M's layers


def make(cfg, wrap, opt_step):
    batch, seq, layers, embd, vocab = CONFIGS[cfg]
    torch.manual_seed(0)
    model = GPT(layers, vocab, seq, embd).eval()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    run, step_opt = wrap(model), wrap(opt.step)
    gen = torch.Generator().manual_seed(1)
    idx = torch.randint(0, vocab, (batch, seq), generator=gen)
    tgt = torch.randint(0, vocab, (batch, seq), generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        _, loss = run(idx, tgt)
        loss.backward()
        if opt_step:
            step_opt()
        return loss.detach()
    return step


def timed(fn):
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    t, c = time.perf_counter() - t0, time.process_time() - c0
    k = resource.getrusage(resource.RUSAGE_CHILDREN)
    kc = k.ru_utime + k.ru_stime - kids.ru_utime - kids.ru_stime
    return out, t, c, kc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="small", choices=sorted(CONFIGS))
    ap.add_argument("--no-opt", action="store_true",
                    help="forward and backward only")
    ap.add_argument("--no-cache", action="store_true",
                    help="tcjit.config.cache = 0 (no on-disk kernel cache)")
    a = ap.parse_args()
    if a.no_cache:
        tcjit.config.cache = 0
    torch.set_num_threads(1)
    ref, te, ce, _ = timed(make(a.config, lambda m: m, not a.no_opt))
    got, t, c, kc = timed(make(a.config, tcjit.compile, not a.no_opt))
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4)
    k = tcjit.counters()
    what = "".join(f" ({w})" for w, on in (("no opt", a.no_opt),
                                            ("no cache", a.no_cache)) if on)
    print(f"{a.config}{what}: first step "
          f"{t:.3f} s wall, {c:.3f} s cpu + {kc:.3f} s cpu in gcc's "
          f"as/ld; eager {te:.3f} s wall, {ce:.3f} s cpu; "
          f"{k['graphs']} graphs, {k['kernels_compiled']} kernels "
          f"compiled in {k['kernel_compile_seconds']:.3f} s")


if __name__ == "__main__":
    main()
