"""Half-precision linear with out_features not a multiple of 8 (GPT-2's
lm_head, vocabulary 50257): computed with the weight padded to a multiple
of 8 rows on CUDA (python/tcjit/_padmm.py, src/runtime/extern_call.c
use_padded_linear), same values and layout as eager."""
import pytest
import torch

import tcjit
from tcjit import _padmm

HAS_CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n", [8, 64, 67, 1001])
def test_padded_linear_is_linear(n, bias):
    g = torch.Generator().manual_seed(n)
    x = torch.randn(3, 5, 24, generator=g)
    w = torch.randn(n, 24, generator=g)
    b = torch.randn(n, generator=g) if bias else None
    got = _padmm.linear(x, w, b, force=True)
    want = torch.nn.functional.linear(x, w, b)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()


@pytest.mark.parametrize("shape", [(1, 24), (1, 1, 24), (5, 1, 24)])
def test_padded_linear_strides_of_size1_dims(shape):
    """A [1, n] result laid out as eager's (1, 1)-style strides, not the
    padded product's (fuzz seed 221843 on CUDA: (8, 1))."""
    x = torch.randn(shape)
    w = torch.randn(67, 24)
    got = _padmm.linear(x, w, force=True)
    want = torch.nn.functional.linear(x, w)
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if HAS_CUDA else []))
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
def test_compiled_odd_vocab_head(device, dt):
    torch.manual_seed(0)
    head = torch.nn.Linear(64, 1001, bias=False).to(device, dt)

    def f(h):
        return head(torch.nn.functional.gelu(h))
    h = torch.randn(2, 7, 64, device=device, dtype=dt)
    with torch.no_grad():
        want = f(h)
        got = tcjit.compile(f)(h)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("n,dt,used", [(1001, torch.bfloat16, True),
                                       (1000, torch.bfloat16, False),
                                       (7, torch.bfloat16, False),
                                       (1001, torch.float32, False)])
def test_runtime_picks_padded_linear(monkeypatch, n, dt, used):
    calls = []

    def counting(*a):
        calls.append(1)
        return torch._C._nn.linear(*a)
    monkeypatch.setattr(_padmm, "_linear", counting)
    tcjit.reset()
    head = torch.nn.Linear(16, n, bias=False).to(dtype=dt)
    with torch.no_grad():
        tcjit.compile(lambda h: head(h * 2))(torch.randn(3, 16, dtype=dt))
    assert bool(calls) == used
