"""torch.cat of one tensor, and torch.cat skipping 1-d empty operands
beside tensors of another rank (HF DynamicCache's first update:
cat([tensor([]), k], dim=-2)): a copy in cat's layout, fused into a kernel
instead of a torch call; values, dtype, strides and identity as eager's."""
import pytest
import torch

import tcjit
from conftest import run_both


def _kv(x):
    k = x.view(2, 5, 3, 4).transpose(1, 2)         # a permuted view
    return k


CASES = {
    "legacy_empty_first": lambda x: torch.cat([x.new_empty(0), _kv(x) * 2], dim=-2),
    "legacy_empty_tensor": lambda x: torch.cat([torch.tensor([], dtype=x.dtype), _kv(x)], dim=2),
    "legacy_empty_last": lambda x: torch.cat((_kv(x), x.new_empty(0)), -1),
    "one_tensor": lambda x: torch.cat([_kv(x)], 1),
    "one_contiguous": lambda x: torch.cat([x], 0),
    "channels_last": lambda x: torch.cat([x.view(2, 5, 3, 4).contiguous(
        memory_format=torch.channels_last) + 1], 1),
    "two_empties": lambda x: torch.cat([x.new_empty(0), x.new_empty(0)]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_cat_copy_like_eager(name):
    f = CASES[name]
    x = torch.randn(2, 5, 12)
    want = f(x)
    got = tcjit.compile(f)(x)
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert got.data_ptr() != x.data_ptr()      # a tensor of its own


def test_cat_copy_is_a_kernel_not_a_torch_call():
    tcjit.reset()
    g = tcjit.explain(CASES["legacy_empty_first"])(torch.randn(2, 5, 12))
    assert g.graph_count == 1 and g.graph_break_count == 0
    ops = [n.op for gr in g.graphs for n in gr.nodes if n.kind == "op"]
    assert "clone" in ops and not any(
        "cat" in str(getattr(n, "call", "")) for gr in g.graphs
        for n in gr.nodes)


def test_cat_out_of_range_dim_raises_like_eager():
    # eager's IndexError, from torch's own call (cat_copy leaves it there)
    run_both(lambda x: torch.cat([x], 3), torch.randn(2, 3))
