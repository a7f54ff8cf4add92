"""F.scaled_dot_product_attention where torch takes its math kernel: the
tracer records the kernel's ops (python/tcjit/_sdpa.py math_attention:
float32 products for half inputs, q and k each scaled by sqrt(scale), the
mask added, torch's _safe_softmax) instead of one extern node, so tcjit
fuses them.  Generated cases against eager: values, dtype, strides, the
graph has no sdpa node, fully masked rows, gradients."""
import itertools

import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same, run_both

TOL = {torch.float32: 1e-5, torch.float64: 1e-12, torch.bfloat16: 2e-2,
       torch.float16: 2e-3}


def _case(dt, rank, mask, seed):
    g = torch.Generator().manual_seed(seed)
    lead = (2, 3) if rank == 4 else (3,)
    # v's head size differs from q's: torch takes math on the CPU
    q = torch.randn(*lead, 5, 8, generator=g).to(dt)
    k = torch.randn(*lead, 6, 8, generator=g).to(dt)
    v = torch.randn(*lead, 6, 4, generator=g).to(dt)
    m = None
    if mask in ("bool", "masked_row"):
        m = torch.rand(5, 6, generator=g) > 0.3
        if mask == "masked_row":
            m[2] = False
    elif mask == "same":
        m = torch.randn(5, 6, generator=g).to(dt)
    elif mask == "float32":
        m = torch.randn(1, 5, 6, generator=g)
    return q, k, v, m


def _graph_ops(fn, *args):
    ex = tcjit.explain(fn)(*args)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, \
        [b.reason for b in ex.break_reasons]
    return str(ex.graphs[0])


CASES = list(itertools.product(
    [torch.float32, torch.float64, torch.bfloat16, torch.float16], [3, 4],
    ["none", "bool", "masked_row", "same", "float32", "causal"]))


@pytest.mark.parametrize("dt,rank,mask", CASES)
def test_math_attention_like_eager(dt, rank, mask):
    q, k, v, m = _case(dt, rank, mask, seed=len(str((dt, rank, mask))))
    scale = 0.3 if mask in ("same", "causal") else None
    causal = mask == "causal"

    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m,
                                              is_causal=causal,
                                              scale=scale) * 2

    assert "sdpa(" not in _graph_ops(f, q, k, v, m)
    want = f(q, k, v, m)
    got = tcjit.compile(f)(q, k, v, m)
    assert got.dtype == want.dtype and got.stride() == want.stride()
    assert torch.equal(got.isnan(), want.isnan())
    torch.testing.assert_close(got, want, atol=TOL[dt], rtol=TOL[dt])
    if mask == "masked_row":
        assert (got[..., 2, :] == 0).all()


def test_fused_kernel_choice_stays_one_node():
    """4-d operands of one head size take the CPU flash kernel: one extern
    node, as before."""
    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
    assert "sdpa(" in _graph_ops(f, q, k, v)
    run_both(f, q, k, v, expect_compiled=True)


def test_reduced_precision_math_is_one_node():
    """With fp16/bf16 products allowed in the math kernel, torch does not
    upcast: the call stays one node (math_attention upcasts)."""
    q, k, v, m = _case(torch.bfloat16, 3, "none", seed=1)

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v)
    old = torch.backends.cuda.fp16_bf16_reduction_math_sdp_allowed()
    torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(True)
    try:
        tcjit.reset()
        assert "sdpa(" in _graph_ops(f, q, k, v)
        check_same(tcjit.compile(f)(q, k, v), f(q, k, v))
    finally:
        torch.backends.cuda.allow_fp16_bf16_reduction_math_sdp(old)
        tcjit.reset()


@pytest.mark.parametrize("mask", ["none", "same", "causal"])
def test_math_attention_gradients(mask):
    q, k, v, m = _case(torch.float64, 3, mask, seed=7)
    causal = mask == "causal"
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    ref = [t.clone().requires_grad_() for t in (q, k, v)]

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m,
                                              is_causal=causal).tanh().sum()
    tcjit.compile(f)(*leaves).backward()
    f(*ref).backward()
    for a, b in zip(leaves, ref):
        torch.testing.assert_close(a.grad, b.grad)
