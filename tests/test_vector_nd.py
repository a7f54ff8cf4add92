"""The PTX vector entry (16-byte loads and stores, src/gpu/ptx_emit.c
emit_pointwise_vec) on nests of more than one dim: a bias or a per-row
operand broadcast over a contiguous tensor (the GELU of a linear layer,
cross-entropy's backward) used to take the scalar loop, one load in flight
per thread.  vectorizable() takes such a nest when its innermost size is a
whole number of vectors and every argument is contiguous along it (and
16-byte aligned) or broadcast along it.

Generated cases around those conditions -- innermost sizes that are and
are not a whole number of vectors, offsets that keep or break alignment,
transposed operands, 3-d nests, in-place updates, every float width and
int64 -- compared with eager on CUDA (the runtime takes the vector entry
only when every pointer is 16-byte aligned); on the CPU machine every
module must assemble with ptxas, and the cases built to be vectorized must
have a vector entry."""
import random

import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_against_float64
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

HAS_CUDA = torch.cuda.is_available()


def _ce_bwd(x, b, r):         # softmax(x) * r - onehot-like mask, per row
    m = x.amax(-1, keepdim=True)
    return (x - m).exp() * r - (x > b).to(x.dtype)


# name -> (fn(x [R, C], b [C], r [R, 1]), vectorized when C fits)
BODIES = {
    "bias_gelu": (lambda x, b, r: F.gelu(x + b, approximate="tanh"), True),
    "row_scale": (lambda x, b, r: x * r + 1, True),
    "bias_row": (lambda x, b, r: x * b - r, True),
    "bias_3d": (lambda x, b, r: x.reshape(-1, 2, x.shape[-1]) + b, True),
    "ce_bwd": (_ce_bwd, False),            # the pointwise after a reduction
    "slice_aligned": (lambda x, b, r: x[:, 8:] * b[8:], True),
    "slice_odd": (lambda x, b, r: x[:, 1:] * b[1:], False),
    "transposed": (lambda x, b, r: x + x.t()[: x.shape[0], : x.shape[0]].sum()
                   + r, True),
    "inplace_bias": (lambda x, b, r: x.clone().add_(b).mul_(r), True),
    "two_outputs": (lambda x, b, r: (x + b, (x * r).neg()), True),
    # positions (index arguments): cross-entropy's one-hot of the target
    "onehot": (lambda x, b, r: x * r - (
        torch.arange(x.shape[1], device=x.device)
        == (r.abs() * 3).long()).to(x.dtype), True),
    "iota_rows": (lambda x, b, r: x + torch.arange(
        x.shape[0], device=x.device)[:, None].to(x.dtype), True),
    "iota_step": (lambda x, b, r: x * 2 + torch.arange(
        0, 3 * x.shape[1], 3, device=x.device).to(x.dtype), True),
}


def _cases():
    rng = random.Random(20261130)
    shapes = [(37, 64), (4, 96), (3, 12), (512, 256), (2, 8), (6, 50304 // 8),
              (130, 33)]
    shapes += [(2 * rng.randint(1, 60), 8 * rng.randint(1, 40)) for _ in range(3)]
    dts = [torch.float32, torch.float16, torch.bfloat16, torch.float64,
           torch.int64]
    out = []
    for name in BODIES:
        for i, shp in enumerate(shapes):
            dt = dts[i % len(dts)]
            if name in ("bias_gelu", "ce_bwd") and not dt.is_floating_point:
                dt = torch.float32
            if name == "transposed" and shp[0] > shp[1]:
                shp = (shp[1], shp[1])
            if name == "bias_3d" and shp[0] % 2:
                shp = (shp[0] + 1, shp[1])
            out.append(pytest.param(name, shp, dt, id=f"{name}-{shp[0]}x{shp[1]}-"
                                    f"{str(dt)[6:]}"))
    return out


def _inputs(shp, dt, dev):
    g = torch.Generator().manual_seed(shp[0] * 1000 + shp[1])
    R, C = shp
    if dt.is_floating_point:
        mk = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64).to(dt)
    else:
        mk = lambda *s: torch.randint(-50, 50, s, generator=g).to(dt)
    return mk(R, C).to(dev), mk(C).to(dev), mk(R, 1).to(dev)


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("name,shp,dt", _cases())
def test_vector_nd_cuda(name, shp, dt):
    tcjit.reset()
    check_against_float64(BODIES[name][0], _inputs(shp, dt, "cuda"))


@pytest.mark.parametrize("name,shp,dt", _cases()[::9])
def test_vector_nd_check_cpu(name, shp, dt):
    """The checker on the CPU backend (a sample of the cases)."""
    tcjit.reset()
    check_against_float64(BODIES[name][0], _inputs(shp, dt, "cpu"))


def _vec_entries(text):
    """Names of the vector entries of a module whose loop splits the
    element index into coordinates (a nest of more than one dim)."""
    out = []
    for part in text.split(".visible .entry ")[1:]:
        name = part[: part.index("(")]
        body = part[part.find("$vloop_"):]
        if name.endswith("_v4") and "rem.u" in body.split("$vdone_")[0]:
            out.append(name)
    return out


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_vector_nd_ptx_assembles(tmp_path):
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    found = {}
    try:
        for p in _cases():
            name, shp, dt = p.values
            tcjit.reset()
            before = set(dumped_ptx(d, 0))
            tcjit.compile(BODIES[name][0], dynamic=False)(*_inputs(shp, dt, "cpu"))
            new = [f for f in dumped_ptx(d, 0) if f not in before]
            found.setdefault(name, []).extend(
                n for f in new for n in _vec_entries(open(f).read()))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    for name, (_, vectorized) in BODIES.items():
        if vectorized:
            assert found[name], f"{name}: no vector entry over a 2-d nest"
    assert not found["slice_odd"], found["slice_odd"]
    assert_ptxas_accepts(dumped_ptx(d, 20))
