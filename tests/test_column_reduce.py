"""Reductions over a dim that is not the innermost in memory ("column"
reductions: the bias gradient sum(g, 0) of a linear layer, a layer norm's
weight gradient, batch statistics), which the PTX emitter runs as column
tiles (src/gpu/ptx_emit.c column_tiles): a row per lane, the block's warps
split the points, their partials folded in shared memory.

Generated cases (shapes around the 32-row tile and the warp count, rows
past the last tile, one- and two-phase kernels, index accumulators,
pointwise results stored beside the reduction, every float width and
int64) compared with eager on CUDA; on the CPU machine, every module of the
same cases must assemble with ptxas and some must be column tiles."""
import random

import pytest
import torch

import tcjit
from conftest import check_against_float64
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

HAS_CUDA = torch.cuda.is_available()


def _gelu_bwd(g, x):          # GPT-2's MLP backward: the grad and its bias sum
    t = torch.tanh(0.79788456 * (x + 0.044715 * x.pow(3)))
    d = g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * 0.79788456
             * (1 + 3 * 0.044715 * x * x))
    return d, d.sum(0)


def _ln_wgrad(g, x):          # sum over rows of g * normalized x: two phases
    xm = x - x.mean(0, keepdim=True)
    return (g * xm).sum(0), xm.pow(2).mean(0)


BODIES = {
    "sum0": lambda g, x: g.sum(0),
    "mean0_keepdim": lambda g, x: (g * x).mean(0, keepdim=True),
    "amax0": lambda g, x: (g + x).amax(0),
    "argmax0": lambda g, x: g.argmax(0),
    "sum01_3d": lambda g, x: g.reshape(2, -1, g.shape[-1]).sum((0, 1)),
    "gelu_bwd": _gelu_bwd,
    "ln_wgrad": _ln_wgrad,
    "var0": lambda g, x: torch.var(g, 0),
}


def _cases():
    rng = random.Random(20261129)
    shapes = [(64, 32), (4096, 96), (130, 33), (2, 40), (1000, 8), (34, 700),
              (8, 16400), (24, 7000),        # tiles of 32 and 16 rows
              (1536, 200), (2000, 50)]       # split, rows past the last tile
    shapes += [(2 * rng.randint(1, 300), rng.randint(8, 200)) for _ in range(4)]
    out = []
    for name in BODIES:
        for i, shp in enumerate(shapes):
            dt = [torch.float32, torch.float16, torch.bfloat16, torch.float64][i % 4]
            if name in ("sum0", "amax0") and i % 5 == 4:
                dt = torch.int64
            if name in ("ln_wgrad", "var0", "gelu_bwd", "mean0_keepdim") \
                    and not dt.is_floating_point:
                dt = torch.float32
            # eager rounds every op of a chain to half; tcjit keeps a
            # fused chain in float32 (docs/ops.md): only short chains in
            # half dtypes
            if name in ("ln_wgrad", "gelu_bwd") and dt.itemsize == 2:
                dt = torch.float32
            out.append(pytest.param(name, shp, dt, id=f"{name}-{shp[0]}x{shp[1]}-"
                                    f"{str(dt)[6:]}"))
    return out


def _inputs(shp, dt, dev):
    g = torch.Generator().manual_seed(shp[0] * 1000 + shp[1])
    if dt.is_floating_point:
        a, b = (torch.randn(shp, generator=g, dtype=torch.float64).to(dt) for _ in "ab")
    else:
        a, b = (torch.randint(-50, 50, shp, generator=g).to(dt) for _ in "ab")
    return a.to(dev), b.to(dev)


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("name,shp,dt", _cases())
def test_column_reduction_cuda(name, shp, dt):
    tcjit.reset()
    check_against_float64(BODIES[name], _inputs(shp, dt, "cuda"))


@pytest.mark.parametrize("name,shp,dt", _cases()[::7])
def test_column_reduction_check_cpu(name, shp, dt):
    """The checker on the CPU backend (a sample of the cases)."""
    tcjit.reset()
    check_against_float64(BODIES[name], _inputs(shp, dt, "cpu"))


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_column_reduction_ptx_assembles(tmp_path):
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        for p in _cases():
            name, shp, dt = p.values
            tcjit.reset()
            tcjit.compile(BODIES[name])(*_inputs(shp, dt, "cpu"))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    files = dumped_ptx(d, 20)
    texts = [open(f).read() for f in files]
    for rows in (8, 16, 32):
        n = sum(f"// column tiles: {rows} rows\n" in t for t in texts)
        assert n >= 2, f"{n} modules with column tiles of {rows} rows"
    # tiles too few to fill the device: split along the points, a final
    # pass folding the chunks (ptx_emit.c column_split)
    for rows in (8, 32):
        n = sum(f"// column tiles: {rows} rows, split" in t for t in texts)
        assert n >= 2, f"{n} modules with split column tiles of {rows} rows"
    assert_ptxas_accepts(files)
