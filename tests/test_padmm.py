"""Half-precision linear with out_features not a multiple of 8 (GPT-2's
lm_head, vocabulary 50257): computed into rows padded to a multiple of 8
on CUDA, in chunks of rows
(python/tcjit/_padmm.py, src/runtime/extern_call.c use_padded_linear):
same values and layout as eager."""
import pytest
import torch

import tcjit
from tcjit import _padmm

HAS_CUDA = torch.cuda.is_available()


@pytest.mark.parametrize("chunk", [1 << 30, 700])
@pytest.mark.parametrize("lead", [(3, 5), (7,), (0, 2)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("n", [8, 64, 67, 1001])
def test_padded_linear_is_linear(monkeypatch, n, bias, lead, chunk):
    """chunk=700 bytes: a few rows per chunk, the last one partial."""
    monkeypatch.setattr(_padmm, "_CHUNK_BYTES", chunk)
    g = torch.Generator().manual_seed(n)
    x = torch.randn(*lead, 24, generator=g)
    w = torch.randn(n, 24, generator=g)
    b = torch.randn(n, generator=g) if bias else None
    got = _padmm.linear(x, w, b, force=True)
    want = torch.nn.functional.linear(x, w, b)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want)
    assert got.stride() == want.stride()


@pytest.mark.parametrize("bias", [False, True])
def test_padded_linear_under_autograd(bias):
    """out= calls are not differentiable: under grad F.linear of the
    padded weight, and the gradients are eager's."""
    g = torch.Generator().manual_seed(1)
    ws = [torch.randn(67, 24, generator=g, requires_grad=True)
          for _ in range(2)]
    bs = [torch.randn(67, generator=g, requires_grad=True) if bias else None
          for _ in range(2)]
    with torch.no_grad():
        ws[1].copy_(ws[0])
        if bias:
            bs[1].copy_(bs[0])
    x = torch.randn(4, 24, generator=g)
    got = _padmm.linear(x, ws[0], bs[0], force=True)
    want = torch.nn.functional.linear(x, ws[1], bs[1])
    torch.testing.assert_close(got, want)
    got.square().sum().backward()
    want.square().sum().backward()
    torch.testing.assert_close(ws[0].grad, ws[1].grad)
    if bias:
        torch.testing.assert_close(bs[0].grad, bs[1].grad)


@pytest.mark.skipif(not HAS_CUDA, reason="needs CUDA")
def test_padded_linear_peak_memory_cuda():
    """Without a bias the peak is eager's result plus one chunk, not a
    second padded product or a padded weight (GPT-2 bfloat16's lm_head
    was 206 MB above eager)."""
    x = torch.randn(4096, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(50257, 256, device="cuda", dtype=torch.bfloat16)
    result = 4096 * 50257 * 2
    # cuBLAS's workspace (32 MB on an H200) comes from the caching
    # allocator on the first product: allocated before measuring
    _padmm.linear(x[:8], w)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    got = _padmm.linear(x, w)
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base - result
    assert extra <= _padmm._CHUNK_BYTES + (1 << 20)
    torch.testing.assert_close(got, torch.nn.functional.linear(x, w))


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

    def counting(f):
        def call(*a):
            calls.append(1)
            return f(*a)
        return call
    # (on the CPU linear() calls _linear, on CUDA _chunked)
    for name in ("_linear", "_chunked"):
        monkeypatch.setattr(_padmm, name, counting(getattr(_padmm, name)))
    tcjit.reset()
    head = torch.nn.Linear(16, n, bias=False).to(dtype=dt)
    with torch.no_grad():
        tcjit.compile(lambda h: head(h * 2))(torch.randn(3, 16, dtype=dt))
    assert bool(calls) == used
