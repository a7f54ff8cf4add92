"""Independent parts of a pointwise kernel (kir.c tc_kernel_parts): a
horizontally fused kernel, like an optimizer step's over same-shape
parameters, runs each part on blocks of its own in the PTX vector entry
(ptx_emit.c vec_parts) instead of every member in every thread.

Parts must never split what shares memory: an input two members read, a
buffer one writes and another reads.  Shared scalars (0-dim inputs,
constants, positions) are computed again by each part.  On the CPU
machine the dumped modules must show the expected number of parts and
assemble with ptxas; on CUDA every case is compared with eager, with the
inputs it mutates.

The CPU emits each part as a function of its own, called in turn over the
range a thread gets (gccjit_emit.c emit_parts): every case and shape on
the CPU too, against eager."""
import pytest
import torch

import tcjit
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

HAS_CUDA = torch.cuda.is_available()


def _adam_like(lr, *t):
    """AdamW's in-place updates over len(t) // 3 parameters (p, g, m, v...)."""
    n = len(t) // 4
    for i in range(n):
        p, g, m, v = t[4 * i: 4 * i + 4]
        p.mul_(1 - 0.01)
        m.lerp_(g, 0.1)
        v.mul_(0.999).addcmul_(g, g, value=0.001)
        p.addcdiv_(m, v.sqrt().add_(1e-8), value=-0.001)
        p.add_(lr * g)
    return None


def _shared_input(lr, a, b, c, d):
    return torch.sin(a) * 2, torch.cos(a) + 1           # a read by both


def _read_then_write(lr, a, b, c, d):
    y = a + 1                                            # reads a before...
    a.mul_(2)                                            # ...a is written
    b.add_(1)
    return y


def _scalar_shared(lr, a, b, c, d):
    return a * lr, b * lr + 1, torch.relu(c) - lr        # lr: a 0-dim input


def _row_broadcast(lr, a, b, c, d):
    bias = d[0]                                          # a row: not a scalar
    return a + bias, b + bias


def _independent(lr, a, b, c, d):
    return torch.sigmoid(a), torch.relu(b), c * c, d.abs()


def _positions(lr, a, b, c, d):
    i = torch.arange(a.shape[-1], device=a.device, dtype=a.dtype)
    return a + i, b * i                                   # index args are shared


# name -> (function, parameters for _adam_like-style inputs, parts expected
# in the vector entry of the shape (64, 32))
CASES = {
    "adam_like_4": (_adam_like, 16, 4),
    "shared_input": (_shared_input, 4, 0),
    "read_then_write": (_read_then_write, 4, 2),
    "scalar_shared": (_scalar_shared, 4, 3),
    "row_broadcast": (_row_broadcast, 4, 0),
    "independent": (_independent, 4, 4),
    "positions": (_positions, 4, 2),
}

SHAPES = [(64, 32), (1000, 36), (3, 5), (8, 1024)]


def _inputs(n, shp, dt, dev):
    g = torch.Generator().manual_seed(n * 31 + shp[0])
    t = [torch.rand(shp, generator=g, dtype=torch.float64).to(dt).to(dev) + 0.01
         for _ in range(n)]
    lr = torch.tensor(0.125, dtype=dt, device=dev)
    return [lr] + t


def _parts(text):
    return text.count("bra $vpart_")


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_parts_in_ptx(tmp_path):
    """Each case's vector entry has the parts expected, and every module
    assembles; a shape that is not a whole number of vectors (3x5: the
    scalar loop does the tail) gets no parts."""
    got = {}
    for shp in ((64, 32), (3, 5)):
        for name, (fn, n, want) in CASES.items():
            d = tmp_path / f"{name}-{shp[0]}"
            d.mkdir()
            tcjit._C.set_config(ptx_dump_dir=str(d))
            try:
                tcjit.reset()
                tcjit.compile(fn)(*_inputs(n, shp, torch.float32, "cpu"))
            finally:
                tcjit._C.set_config(ptx_dump_dir=None)
            files = [f for f in dumped_ptx(str(d), 1) if "_p" not in f.rsplit("/", 1)[1]]
            assert_ptxas_accepts(files)
            text = "".join(open(f).read() for f in files if f.endswith("sm90.ptx"))
            got[name, shp] = _parts(text)
            assert got[name, shp] == (want if shp == (64, 32) else 0), (name, shp, got)


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_parts_half(tmp_path):
    """float16 members (8 lanes a vector) are parts too."""
    tcjit._C.set_config(ptx_dump_dir=str(tmp_path))
    try:
        tcjit.reset()
        tcjit.compile(_independent)(*_inputs(4, (16, 64), torch.float16, "cpu"))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    files = dumped_ptx(str(tmp_path), 1)
    assert_ptxas_accepts(files)
    assert _parts("".join(open(f).read() for f in files if f.endswith("sm90.ptx"))) == 4


def _check(name, dt, shp, dev):
    """Case name compiled against eager, results and mutated inputs."""
    fn, n, _ = CASES[name]
    tcjit.reset()
    ins = _inputs(n, shp, dt, dev)
    ref_ins = [t.clone() for t in ins]
    got = tcjit.compile(fn)(*ins)
    exp = fn(*ref_ins)
    tol = dict(rtol=2e-2, atol=2e-2) if dt in (torch.float16, torch.bfloat16) \
        else {}
    torch.testing.assert_close(got, exp, **tol)
    for a, b in zip(ins, ref_ins):                      # mutated inputs
        torch.testing.assert_close(a, b, **tol)
    assert tcjit.counters()["eager_fallbacks"] == 0


# float16 on CUDA, bfloat16 on the CPU (its half type there)
DEVICE_DTYPES = [
    pytest.param(dev, dt, id=f"{dev}-{str(dt)[6:]}", marks=pytest.mark.skipif(
        dev == "cuda" and not HAS_CUDA, reason="no CUDA device"))
    for dev, half in (("cuda", torch.float16), ("cpu", torch.bfloat16))
    for dt in (torch.float32, half, torch.float64)]


@pytest.mark.parametrize("shp", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("dev,dt", DEVICE_DTYPES)
@pytest.mark.parametrize("name", list(CASES))
def test_parts_run(name, dev, dt, shp):
    _check(name, dt, shp, dev)
