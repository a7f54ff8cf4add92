"""Bad input gets eager's exception: the same type and message, on every
call, with both backends (tests/fuzz's "no-exception" classes).

* An op that checks its operands' values (an index tensor out of range:
  index, embedding, cross_entropy / nll_loss targets) runs on every call
  even when its result is dead (ops.c checks_values, graph.c
  tc_node_must_run): DCE dropped it and eager's IndexError with it.
* F.hardtanh / F.relu6 refuse what eager's hardtanh refuses (bool, negative
  limits of uint8, min_val > max_val): they were traced as clamp, which
  accepts them (torchcalls.c call_hardtanh).
* Reductions take what eager's argument parser takes: keepdim (and var's
  unbiased) a Python bool, no dim=None for prod / logsumexp / max / min
  (registry signatures "keepdim: bool", "dim: int", bindings.c).
tests/sweeps/errors.py compares every spelling over dtypes and arguments.
"""
import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same

BACKENDS = ("auto", "eager")


def _outcome(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - any eager error must be mirrored
        return None, e


def same_as_eager(fn, *arg_sets, backend="auto"):
    """Call fn eagerly and compiled once per argument tuple (the first call
    compiles, later ones run the cached code on other values); where eager
    raises, the compiled call raises the same type with the same message,
    else it returns eager's result."""
    compiled = tcjit.compile(fn, backend=backend)
    for i, args in enumerate(arg_sets):
        expected, exc = _outcome(fn, args)
        actual, got = _outcome(compiled, args)
        if exc is None:
            assert got is None, f"call{i}: eager returns, tcjit raised {got!r}"
            check_same(actual, expected, path=f"call{i}")
            continue
        assert got is not None, f"call{i}: eager raises {exc!r}; tcjit did not"
        assert type(got) is type(exc) and str(got) == str(exc), \
            f"call{i}: eager raises {exc!r}; tcjit raised {got!r}"
    return compiled


# ---- ops that check values run when their result is dead -------------------

def _dead_index(a, i, b):
    v = a[i]
    return (b,)


def _dead_index_of_computed(a, i, b):
    v = (a + 1)[:, i]
    return a * 2


def _dead_embedding(a, i, b):
    v = F.embedding(i, a)
    return b + 1


def _dead_cross_entropy(a, i, b):
    v = F.cross_entropy(a, i)
    return a.sum()


def _dead_nll_loss(a, i, b):
    v = F.nll_loss(a, i)
    return b


def _dead_index_around_a_break(a, i, b):
    v = a[:, i]
    n = b.sum().item()        # a graph break: two segments
    w = a[i % 5]
    return b * n


DEAD_CHECKS = {
    "around_a_break": _dead_index_around_a_break,
    "index": _dead_index,
    "index_of_computed": _dead_index_of_computed,
    "embedding": _dead_embedding,
    "cross_entropy": _dead_cross_entropy,
    "nll_loss": _dead_nll_loss,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(DEAD_CHECKS))
def test_dead_value_check_still_raises(name, backend):
    def args(idx):
        return (torch.randn(4, 5), torch.tensor(idx), torch.randn(3))
    # out of range on the first call, in range then out on later calls
    same_as_eager(DEAD_CHECKS[name], args([0, 9, 1, 2]), args([0, 4, 1, 2]),
                  backend=backend)
    tcjit.reset()
    same_as_eager(DEAD_CHECKS[name], args([0, 4, 1, 2]), args([0, 9, 1, 2]),
                  args([1, 1, 1, 1]), args([-7, 0, 0, 0]), backend=backend)


def test_dead_index_is_one_compiled_graph():
    """The check runs in the compiled code, not through a graph break."""
    f = tcjit.compile(_dead_index)
    args = (torch.randn(4, 5), torch.tensor([1]), torch.randn(3))
    f(*args)
    f(*args)
    c = tcjit.counters()
    assert c["eager_fallbacks"] == 0 and c["cache_hits"] >= 1, c


# ---- eager's dtype and argument checks at trace time ------------------------
#
# Where the condition is static (a dtype, a constant argument) the tracer
# refuses the call: the frame runs eagerly and raises eager's exception.

def _tensor(dtype):
    if dtype == torch.bool:
        return torch.tensor([[True, False], [False, True]])
    if dtype == torch.uint8:
        return torch.tensor([[0, 3], [9, 1]], dtype=dtype)
    return torch.tensor([[-2, 3], [9, 1]]).to(dtype)


HARDTANH = {
    "hardtanh": lambda x: F.hardtanh(x),
    "hardtanh_limits": lambda x: F.hardtanh(x, -2, 2),
    "hardtanh_float_limits": lambda x: F.hardtanh(x, 0.5, 1.5),
    "hardtanh_inverted": lambda x: F.hardtanh(x, 2, 1),
    "hardtanh_neg_half": lambda x: F.hardtanh(x, -0.5, 2),
    "relu6": lambda x: F.relu6(x),
    "hardtanh_of_lt": lambda x: F.hardtanh(torch.lt(x, 1)) + 1,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int64,
                                   torch.float32])
@pytest.mark.parametrize("name", sorted(HARDTANH))
def test_hardtanh_dtype_checks(name, dtype, backend):
    x = _tensor(dtype)
    same_as_eager(HARDTANH[name], (x,), (x.clone(),), backend=backend)


REDUCTION_ARGS = {
    "logsumexp_none": lambda x: x.logsumexp(None),
    "logsumexp_dim_none": lambda x: torch.logsumexp(x, dim=None),
    "prod_none": lambda x: x.prod(None),
    "prod_dim_none": lambda x: torch.prod(x, dim=None),
    "max_none": lambda x: x.max(None),
    "min_dim_none": lambda x: torch.min(x, dim=None),
    "sum_keepdim_int": lambda x: x.sum(0, 1),
    "amax_keepdim_int": lambda x: torch.amax(x, 0, keepdim=1),
    "mean_keepdim_none": lambda x: x.mean(0, keepdim=None),
    "argmax_keepdim_int": lambda x: x.argmax(1, keepdim=0),
    "any_keepdim_int": lambda x: x.any(0, 1),
    "var_unbiased_int": lambda x: x.var(0, 1),
    "var_unbiased_none": lambda x: torch.var(x, 0, None),
    "std_keepdim_float": lambda x: x.std(0, keepdim=1.0),
    "logsumexp_keepdim_int": lambda x: x.logsumexp(0, 1),
    "norm_keepdim_int": lambda x: x.norm(2, 0, 1),
    "max_keepdim_int": lambda x: x.max(0, 1),
    # what eager accepts keeps compiling
    "sum_none": lambda x: x.sum(None),
    "amax_dim_none": lambda x: x.amax(dim=None),
    "prod_dim": lambda x: x.prod(1, True),
    "logsumexp_dims": lambda x: x.logsumexp((0, 1), keepdim=True),
    "var_unbiased": lambda x: x.var(0, False, keepdim=True),
    "max_dim": lambda x: x.max(dim=1, keepdim=False),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(REDUCTION_ARGS))
def test_reduction_argument_checks(name, backend):
    x = torch.randn(3, 4)
    same_as_eager(REDUCTION_ARGS[name], (x,), (x + 1,), backend=backend)


STATIC_ARGS = {
    "squeeze_duplicate_dims": lambda x: x.squeeze((0, 0)),
    "squeeze_duplicate_wrapped": lambda x: x[:1].squeeze((0, -2)),
    "dropout_p_above_1": lambda x: F.dropout(x, 1.5, False),
    "dropout_p_negative": lambda x: F.dropout(x, -0.5, training=False),
    # what eager accepts keeps compiling
    "squeeze_dims": lambda x: x[:1].squeeze((0, 1)),
    "dropout_p_1_eval": lambda x: F.dropout(x, 1.0, False) + 1,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(STATIC_ARGS))
def test_static_argument_checks(name, backend):
    x = torch.randn(3, 4)
    same_as_eager(STATIC_ARGS[name], (x,), (x + 1,), backend=backend)


ALPHA = {
    "sub_bool_other_alpha": lambda x, b: x.sub(b, alpha=0.5),
    "sub_bool_self_alpha": lambda x, b: torch.sub(b, x, alpha=2),
    "add_bool_other_alpha": lambda x, b: x.add(b, alpha=0.5),
    "sub_alpha": lambda x, b: x.sub(x * 2, alpha=0.5),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(ALPHA))
def test_add_sub_alpha_checks(name, backend):
    """The registry's checks of sub see the operands as given, not other
    cast to the result dtype for alpha (torchcalls.c call_add_sub)."""
    x = torch.randn(3, 4)
    same_as_eager(ALPHA[name], (x, x > 0), (x + 1, x < 0), backend=backend)


# ---- Python numbers eager converts with an overflow check --------------------
#
# c10's Scalar::to raises "value cannot be converted to type T without
# overflow" where an op converts a Python number to a dtype (ops.h
# tc_scalar_conv); the wrapped scalars of add / where are not checked.

SCALARS = {
    "full_uint8_300": lambda x: torch.full((3,), 300, dtype=torch.uint8),
    "full_uint8_minus_255": lambda x: torch.full((3,), -255,
                                                 dtype=torch.uint8) + 0,
    "full_uint8_minus_1_5": lambda x: torch.full((2,), -1.5,
                                                 dtype=torch.uint8),
    "full_int32_2_40": lambda x: torch.full((3,), 2**40, dtype=torch.int32),
    "full_int64_nan": lambda x: torch.full((2,), float("nan"),
                                           dtype=torch.int64),
    "full_half_70000": lambda x: torch.full((2,), 70000, dtype=torch.float16),
    "full_half_inf": lambda x: torch.full((2,), float("inf"),
                                          dtype=torch.float16),
    "full_bool_2": lambda x: torch.full((2,), 2, dtype=torch.bool),
    "full_float_1e300": lambda x: torch.full((2,), 1e300) + x,
    "new_full_bf16": lambda x: x.new_full((2,), 1e39, dtype=torch.bfloat16),
    "masked_fill_half": lambda x: x.half().masked_fill(x > 0, 1e300),
    "masked_fill_uint8": lambda x: x.to(torch.uint8).masked_fill(x > 0, 300),
    "masked_fill_uint8_wraps": lambda x: x.to(torch.uint8).masked_fill(
        x > 0, -1),
    "clamp_float": lambda x: x.clamp(1e300),
    "clamp_half": lambda x: x.half().clamp(None, 70000),
    "clamp_min_int32": lambda x: x.int().clamp_min(2**40),
    "clamp_max_half_inf": lambda x: x.half().clamp_max(float("inf")),
    "hardtanh_half": lambda x: F.hardtanh(x.half(), -70000, 70000),
    "leaky_relu_float": lambda x: F.leaky_relu(x, 1e300),
    "elu_bf16": lambda x: F.elu(x.bfloat16(), 1e39),
    "softplus_threshold": lambda x: F.softplus(x, 1, 1e300),
    "pow_half": lambda x: x.half() ** 70000.0,
    "pow_float": lambda x: x.abs() ** 1e300,
    "pow_base_half": lambda x: torch.pow(70000, x.half()),
    "add_half": lambda x: x.half() + 1e300,
    "where_half": lambda x: torch.where(x > 0, x.half(), 1e300),
    # a dtype the creation op has no kernel for
    "arange_bool": lambda x: torch.arange(3, dtype=torch.bool),
    "arange_bool_dead": lambda x: (torch.arange(0, 3, dtype=torch.bool),
                                   x)[1],
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(SCALARS))
def test_scalar_conversion_checks(name, backend):
    x = torch.randn(3)
    same_as_eager(SCALARS[name], (x,), (x * 2,), backend=backend)
