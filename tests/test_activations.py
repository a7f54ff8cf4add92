"""F.silu and F.gelu(approximate='tanh'): registry ops, compared with eager
over dtypes, layouts and special values; the exact gelu compiles too
(tests/test_more_ops.py has its accuracy tests)."""
import math

import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same

SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e30, -1e30, 20.0, -20.0,
           1e-40, 3.0, -3.0, 0.5]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "special"])
def test_silu_and_gelu_tanh(dtype, layout):
    def f(x):
        return F.silu(x), F.gelu(x, approximate="tanh"), F.silu(x * 2) + 1

    if layout == "special":
        x = torch.tensor(SPECIAL, dtype=dtype)
    else:
        x = (torch.randn(40, 24) * 4).to(dtype)
        if layout == "transposed":
            x = x.t()
    cf = tcjit.compile(f)
    check_same(cf(x), f(x))
    assert tcjit.counters()["eager_fallbacks"] == 0


def test_silu_of_integers_raises_like_eager():
    def f(x):
        return F.silu(x)

    x = torch.arange(4)
    with pytest.raises(NotImplementedError) as eager:
        f(x)
    with pytest.raises(NotImplementedError) as got:
        tcjit.compile(f)(x)
    assert str(got.value) == str(eager.value)


def test_exact_gelu_compiles_into_the_graph():
    def f(x):
        return F.gelu(x.sin()) * 2

    x = torch.randn(16)
    ex = tcjit.explain(f)(x)
    check_same(ex.result, f(x))
    assert ex.break_reasons == []
