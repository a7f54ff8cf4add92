"""Time PTX entries alone, on a GPU: the module loaded with cuModuleLoadData,
each entry launched with cuLaunchKernel (ctypes, the driver API) on torch
buffers, timed with CUDA events (the best of 3 rounds of --iters calls).

    python3 bench/ptx_entry.py FILE:ENTRY:GRID:BLOCK:NPARAMS:ELEMS ...

FILE is a module tcjit dumped (`tcjit._C.set_config(ptx_dump_dir=...)`,
which works on the CPU machine too: the dumps are for 132 SMs, an H100's
and H200's count); NPARAMS the entry's .u64 parameters (its arguments,
plus the scratch buffer of a split reduction), each given a buffer of
ELEMS float32 values uniform in [1e-3, 0.101] (positive: no sqrt or div
slow paths that real data would not take).  GRID and BLOCK are the
launch's, by src/gpu/ptx_emit.c's rules: a split column-tile kernel is
tiles x chunks blocks of its `.maxntid` (the chunk count is the divisor
of its `rem.u32` of %ctaid), a row reduction min(rows, SMs x 2048 /
threads) blocks; vector and scalar pointwise entries stride over the
grid, so any grid computes them.  What it answers: how schedules of one
kernel compare (emit variants, dump, time them in one process), without
tcjit's per-call overhead or the rest of a model around it."""
import argparse
import ctypes

import torch


def _check(r, what):
    if r != 0:
        raise RuntimeError(f"{what}: CUresult {r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("specs", nargs="+", metavar="FILE:ENTRY:GRID:BLOCK:NPARAMS:ELEMS")
    ap.add_argument("--iters", type=int, default=50)
    a = ap.parse_args()
    cu = ctypes.CDLL("libcuda.so.1")
    torch.zeros(1, device="cuda")       # torch's context is current
    mods, bufs, key = {}, None, None
    for spec in a.specs:
        f, ent, grid, block, npar, elems = spec.split(":")
        grid, block, npar, elems = int(grid), int(block), int(npar), int(elems)
        if key != (npar, elems):
            bufs = None
            torch.cuda.empty_cache()
            bufs = [torch.rand(elems + 4096, device="cuda") * 0.1 + 1e-3
                    for _ in range(npar)]
            key = (npar, elems)
        if f not in mods:
            m = ctypes.c_void_p()
            text = open(f, "rb").read() + b"\0"
            _check(cu.cuModuleLoadData(ctypes.byref(m), ctypes.c_char_p(text)),
                   f"load {f}")
            mods[f] = m
        fn = ctypes.c_void_p()
        _check(cu.cuModuleGetFunction(ctypes.byref(fn), mods[f], ent.encode()),
               f"entry {ent}")
        vals = [ctypes.c_uint64(b.data_ptr()) for b in bufs]
        params = (ctypes.c_void_p * npar)(
            *[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in vals])

        def launch():
            _check(cu.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, 0, None,
                                     params, None), "launch")
        for _ in range(3):
            launch()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(3):
            torch.cuda.synchronize()
            start.record()
            for _ in range(a.iters):
                launch()
            end.record()
            torch.cuda.synchronize()
            best = min(best, start.elapsed_time(end) / a.iters * 1e3)
        print(f"{f.split('/')[-1]:24s} {ent:44s} grid {grid:6d} "
              f"block {block:4d}: {best:8.1f} us", flush=True)


if __name__ == "__main__":
    main()
