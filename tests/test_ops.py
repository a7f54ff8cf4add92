"""Every supported op, compiled with tcjit, against eager PyTorch.

Matrix: op x dtype (float32, float64, int32, int64, bool) x layout
(contiguous, transposed, broadcast, 0-d, empty, sliced with a step), plus
special values, type promotion, aliases (torch.X / Tensor.X / operators /
keywords) and a large tensor that is split over threads.

Where eager raises for a combination (neg of bool, relu of bool, ...), the
compiled function must raise exactly the same exception type.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same, counters, run_both

DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool]
DTYPE_IDS = ["f32", "f64", "i32", "i64", "bool"]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 2).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


# ---- layouts ---------------------------------------------------------------
# name -> (builder(dtype, n_tensors) -> list of tensors, compare strides?)

def _contig(dt, n, base=0):
    return [make((4, 6), dt, base + i) for i in range(n)]


def _transposed(dt, n, base=0):
    ts = [make((6, 4), dt, base + i).t() for i in range(n)]
    assert not ts[0].is_contiguous()
    return ts


def _bcast_row(dt, n, base=0):  # [N, M] with [M]
    return ([make((4, 6), dt, base + i) for i in range(n - 1)]
            + [make((6,), dt, base + 9)])


def _bcast_col(dt, n, base=0):  # [N, M] with [N, 1]
    return ([make((4, 6), dt, base + i) for i in range(n - 1)]
            + [make((4, 1), dt, base + 9)])


def _dim_and_0d(dt, n, base=0):  # [N, M] with a 0-d tensor
    return ([make((4, 6), dt, base + i) for i in range(n - 1)]
            + [make((), dt, base + 9)])


def _zero_d(dt, n, base=0):
    return [make((), dt, base + i) for i in range(n)]


def _empty(dt, n, base=0):
    return [make((0, 5), dt, base + i) for i in range(n)]


def _sliced(dt, n, base=0):
    ts = [make((4, 10), dt, base + i)[:, ::2] for i in range(n)]
    assert ts[0].stride() == (10, 2)
    return ts


UNARY_LAYOUTS = {
    "contiguous": (_contig, True),
    "transposed": (_transposed, True),
    "0d": (_zero_d, True),
    "empty": (_empty, True),
    "sliced": (_sliced, False),
}

NARY_LAYOUTS = {
    "contiguous": (_contig, True),
    "transposed": (_transposed, True),
    "bcast_row": (_bcast_row, True),
    "bcast_col": (_bcast_col, True),
    "dim_and_0d": (_dim_and_0d, True),
    "0d": (_zero_d, True),
    "empty": (_empty, True),
    "sliced": (_sliced, False),
}


# ---- op tables (each lambda is its own code object) -------------------------

UNARY = {
    "neg": lambda x: -x,
    "abs": lambda x: torch.abs(x),
    "exp": lambda x: torch.exp(x),
    "log": lambda x: torch.log(x),
    "sqrt": lambda x: torch.sqrt(x),
    "rsqrt": lambda x: torch.rsqrt(x),
    "sin": lambda x: torch.sin(x),
    "cos": lambda x: torch.cos(x),
    "tanh": lambda x: torch.tanh(x),
    "sigmoid": lambda x: torch.sigmoid(x),
    "relu": lambda x: torch.relu(x),
    "square": lambda x: torch.square(x),
    "reciprocal": lambda x: torch.reciprocal(x),
    "pow_2": lambda x: x ** 2,
    "pow_0.5": lambda x: x ** 0.5,
    "pow_3": lambda x: x ** 3,
    "pow_-1": lambda x: x ** -1,
    "pow_1.7": lambda x: x ** 1.7,
    "rpow_2": lambda x: 2 ** x,
    "rpow_2.5": lambda x: 2.5 ** x,
    "clamp_min": lambda x: torch.clamp(x, min=-0.5),
    "clamp_max": lambda x: torch.clamp(x, max=0.5),
    "clamp_both": lambda x: torch.clamp(x, -0.5, 0.5),
    "clamp_int": lambda x: x.clamp(-2, 3),
    "clamp_min_fn": lambda x: torch.clamp_min(x, 0.25),
    "clamp_max_fn": lambda x: torch.clamp_max(x, -0.25),
    "logical_not": lambda x: torch.logical_not(x),
    "invert": lambda x: ~x,
    "bitwise_not": lambda x: torch.bitwise_not(x),
    "lt_scalar": lambda x: x < 0.5,
    "ge_scalar_reflected": lambda x: 0.5 <= x,
    "eq_scalar": lambda x: x == 1,
    "ne_scalar": lambda x: x != 0,
    "add_scalar": lambda x: x + 2,
    "radd_float": lambda x: 2.5 + x,
    "sub_scalar": lambda x: x - 1,
    "rsub_scalar": lambda x: 1 - x,
    "mul_float": lambda x: x * 2.5,
    "div_scalar": lambda x: x / 2,
    "rdiv_scalar": lambda x: 2 / x,
    "to_float64": lambda x: x.to(torch.float64),
    "to_int32": lambda x: x.to(torch.int32),
    "to_bool": lambda x: x.to(torch.bool),
    "float": lambda x: x.float(),
    "double": lambda x: x.double(),
    "int": lambda x: x.int(),
    "long": lambda x: x.long(),
    "bool": lambda x: x.bool(),
    "chain": lambda x: torch.relu(torch.sin(x) * 2 + 1) - x.sigmoid(),
}

BINARY = {
    "add": lambda x, y: x + y,
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "pow": lambda x, y: x ** y,
    "maximum": lambda x, y: torch.maximum(x, y),
    "minimum": lambda x, y: torch.minimum(x, y),
    "add_alpha": lambda x, y: torch.add(x, y, alpha=2),
    "sub_alpha": lambda x, y: torch.sub(x, y, alpha=2),
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "logical_and": lambda x, y: torch.logical_and(x, y),
    "logical_or": lambda x, y: torch.logical_or(x, y),
    "logical_xor": lambda x, y: torch.logical_xor(x, y),
    "and": lambda x, y: x & y,
    "or": lambda x, y: x | y,
    "xor": lambda x, y: x ^ y,
    "chain": lambda x, y: torch.where(x > y, x * y + x, y - 1.5).abs(),
}

TERNARY = {
    "where": lambda c, x, y: torch.where(c, x, y),
    "where_method": lambda c, x, y: x.where(c, y),
}

# Spellings of the same ops: torch.X, Tensor.X, keyword arguments.  Checked
# for every dtype on contiguous inputs.
ALIASES_UNARY = {
    "torch.neg": lambda x: torch.neg(x),
    "torch.negative": lambda x: torch.negative(x),
    "Tensor.neg": lambda x: x.neg(),
    "builtins.abs": lambda x: abs(x),
    "Tensor.abs": lambda x: x.abs(),
    "torch.absolute": lambda x: torch.absolute(x),
    "Tensor.exp": lambda x: x.exp(),
    "Tensor.log": lambda x: x.log(),
    "Tensor.sqrt": lambda x: x.sqrt(),
    "Tensor.rsqrt": lambda x: x.rsqrt(),
    "Tensor.sin": lambda x: x.sin(),
    "Tensor.cos": lambda x: x.cos(),
    "Tensor.tanh": lambda x: x.tanh(),
    "F.tanh": lambda x: F.tanh(x),
    "Tensor.sigmoid": lambda x: x.sigmoid(),
    "F.sigmoid": lambda x: F.sigmoid(x),
    "Tensor.relu": lambda x: x.relu(),
    "F.relu": lambda x: F.relu(x),
    "Tensor.square": lambda x: x.square(),
    "Tensor.reciprocal": lambda x: x.reciprocal(),
    "torch.pow_scalar": lambda x: torch.pow(x, 2),
    "torch.pow_kw": lambda x: torch.pow(x, exponent=3),
    "torch.pow_scalar_base": lambda x: torch.pow(2, x),
    "Tensor.pow": lambda x: x.pow(0.5),
    "torch.clamp_kw_min": lambda x: torch.clamp(x, min=0.1),
    "torch.clamp_kw_max": lambda x: torch.clamp(x, max=0.1),
    "Tensor.clamp_kw": lambda x: x.clamp(min=-1, max=1),
    "torch.clip": lambda x: torch.clip(x, -1.0, 1.0),
    "Tensor.clip": lambda x: x.clip(min=0),
    "Tensor.clamp_min": lambda x: x.clamp_min(0.25),
    "Tensor.clamp_max": lambda x: x.clamp_max(0.25),
    "Tensor.logical_not": lambda x: x.logical_not(),
    "Tensor.bitwise_not": lambda x: x.bitwise_not(),
    "Tensor.to_kw": lambda x: x.to(dtype=torch.float32),
    "Tensor.to_int64": lambda x: x.to(torch.int64),
    "Tensor.to_float32": lambda x: x.to(torch.float32),
    "Tensor.type": lambda x: x.type(torch.float64),
    "torch.add_scalar_alpha": lambda x: torch.add(x, 3, alpha=2),
    "Tensor.mul_scalar": lambda x: x.mul(3),
    "Tensor.div_scalar": lambda x: x.div(4),
    "torch.sub_scalar": lambda x: torch.sub(x, 1),
    "Tensor.lt_scalar": lambda x: x.lt(0),
    "torch.gt_scalar": lambda x: torch.gt(x, 0),
    "and_True": lambda x: x & True,
    "xor_True": lambda x: x ^ True,
    "or_False": lambda x: x | False,
    "and_3": lambda x: x & 3,
    "xor_3": lambda x: x ^ 3,
    "or_8": lambda x: 8 | x,
}

ALIASES_BINARY = {
    "torch.add": lambda x, y: torch.add(x, y),
    "Tensor.add": lambda x, y: x.add(y),
    "Tensor.add_alpha": lambda x, y: x.add(y, alpha=3),
    "torch.add_alpha_float": lambda x, y: torch.add(x, y, alpha=0.5),
    "torch.sub": lambda x, y: torch.sub(x, y),
    "torch.subtract": lambda x, y: torch.subtract(x, y),
    "Tensor.sub_alpha": lambda x, y: x.sub(y, alpha=2),
    "torch.mul": lambda x, y: torch.mul(x, y),
    "torch.multiply": lambda x, y: torch.multiply(x, y),
    "Tensor.mul": lambda x, y: x.mul(y),
    "torch.div": lambda x, y: torch.div(x, y),
    "torch.divide": lambda x, y: torch.divide(x, y),
    "torch.true_divide": lambda x, y: torch.true_divide(x, y),
    "Tensor.div": lambda x, y: x.div(y),
    "torch.pow": lambda x, y: torch.pow(x, y),
    "Tensor.pow": lambda x, y: x.pow(y),
    "Tensor.maximum": lambda x, y: x.maximum(y),
    "Tensor.minimum": lambda x, y: x.minimum(y),
    "torch.lt": lambda x, y: torch.lt(x, y),
    "torch.less": lambda x, y: torch.less(x, y),
    "torch.le": lambda x, y: torch.le(x, y),
    "torch.gt": lambda x, y: torch.gt(x, y),
    "torch.ge": lambda x, y: torch.ge(x, y),
    "torch.eq": lambda x, y: torch.eq(x, y),
    "torch.ne": lambda x, y: torch.ne(x, y),
    "torch.not_equal": lambda x, y: torch.not_equal(x, y),
    "Tensor.lt": lambda x, y: x.lt(y),
    "Tensor.le": lambda x, y: x.le(y),
    "Tensor.gt": lambda x, y: x.gt(y),
    "Tensor.ge": lambda x, y: x.ge(y),
    "Tensor.eq": lambda x, y: x.eq(y),
    "Tensor.ne": lambda x, y: x.ne(y),
    "Tensor.logical_and": lambda x, y: x.logical_and(y),
    "Tensor.logical_or": lambda x, y: x.logical_or(y),
    "Tensor.logical_xor": lambda x, y: x.logical_xor(y),
    "torch.bitwise_and": lambda x, y: torch.bitwise_and(x, y),
    "torch.bitwise_or": lambda x, y: torch.bitwise_or(x, y),
    "torch.bitwise_xor": lambda x, y: torch.bitwise_xor(x, y),
    "Tensor.bitwise_and": lambda x, y: x.bitwise_and(y),
    "torch.clamp_tensor_bounds": lambda x, y: torch.clamp(x, min=y),
    "torch.where_kw": lambda x, y: torch.where(x > y, input=x, other=y),
}


# Variants that only respell an op or combine it with a Python scalar run on
# fewer layouts (the full matrix stays for every op of the list).
REDUCED_LAYOUT_OPS = {"add_scalar", "radd_float", "sub_scalar", "rsub_scalar",
                      "mul_float", "div_scalar", "rdiv_scalar", "lt_scalar",
                      "ge_scalar_reflected", "eq_scalar", "ne_scalar",
                      "bitwise_not", "to_float64", "to_int32", "to_bool",
                      "clamp_int", "rpow_2.5"}
REDUCED_LAYOUTS = ("contiguous", "transposed", "0d")


def _params(table, layouts):
    return [pytest.param(op, dt, lay, id=f"{op}-{did}-{lay}")
            for op in table for dt, did in zip(DTYPES, DTYPE_IDS)
            for lay in layouts
            if op not in REDUCED_LAYOUT_OPS or lay in REDUCED_LAYOUTS]


@pytest.mark.parametrize("op,dtype,layout", _params(UNARY, UNARY_LAYOUTS))
def test_unary(op, dtype, layout):
    build, strides = UNARY_LAYOUTS[layout]
    (x,) = build(dtype, 1)
    run_both(UNARY[op], x, strides=strides,
             expect_compiled=dtype.is_floating_point)


@pytest.mark.parametrize("op,dtype,layout", _params(BINARY, NARY_LAYOUTS))
def test_binary(op, dtype, layout):
    build, strides = NARY_LAYOUTS[layout]
    x, y = build(dtype, 2)
    run_both(BINARY[op], x, y, strides=strides,
             expect_compiled=dtype.is_floating_point)


@pytest.mark.parametrize("op,dtype,layout", _params(TERNARY, NARY_LAYOUTS))
def test_where(op, dtype, layout):
    build, strides = NARY_LAYOUTS[layout]
    x, y = build(dtype, 2)
    # the condition has the layout of the layout's last operand (a [M],
    # [N, 1] or 0-d condition broadcasts against x) and its own values
    (c,) = build(torch.bool, 1, base=50)
    assert not torch.equal(c, x.bool()) or c.numel() <= 1
    run_both(TERNARY[op], c, x, y, strides=strides,
             expect_compiled=dtype.is_floating_point)


SPELLING_DTYPES = [torch.float32, torch.int32, torch.bool]
SPELLING_IDS = ["f32", "i32", "bool"]


@pytest.mark.parametrize("dtype", SPELLING_DTYPES, ids=SPELLING_IDS)
@pytest.mark.parametrize("op", list(ALIASES_UNARY))
def test_unary_spellings(op, dtype):
    run_both(ALIASES_UNARY[op], make((3, 5), dtype))


@pytest.mark.parametrize("dtype", SPELLING_DTYPES, ids=SPELLING_IDS)
@pytest.mark.parametrize("op", list(ALIASES_BINARY))
def test_binary_spellings(op, dtype):
    run_both(ALIASES_BINARY[op], make((3, 5), dtype, 1), make((3, 5), dtype, 2))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_where_scalar_operands(dtype):
    c = make((3, 5), torch.bool, 3)
    x = make((3, 5), dtype)
    run_both(lambda c, x: torch.where(c, x, 0.5), c, x)
    tcjit.reset()
    run_both(lambda c, x: torch.where(c, 2, x), c, x)


# ---- special values ----------------------------------------------------------

def special_values(dtype):
    tiny = 1e-40 if dtype == torch.float32 else 1e-310  # denormals
    big = 88.5 if dtype == torch.float32 else 709.0      # exp() near overflow
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, math.pi, -math.pi / 2,
            math.inf, -math.inf, math.nan, tiny, -tiny, 1e-7, 1e6, -1e6,
            1e30, -1e30, 100.0, -100.0, big, -big, 1e4 + 0.25, 123.456,
            3e38 if dtype == torch.float32 else 1e300, 1e-30, 20.0, -20.0]
    t = torch.tensor(vals, dtype=dtype)
    if dtype == torch.float32:
        assert t[12] != 0 and t[12].abs() < torch.finfo(torch.float32).tiny
    return t


SPECIAL_UNARY = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos",
                 "tanh", "sigmoid", "relu", "square", "reciprocal", "pow_2",
                 "pow_0.5", "pow_3", "pow_-1", "pow_1.7", "rpow_2", "rpow_2.5",
                 "clamp_both", "lt_scalar", "eq_scalar", "ne_scalar",
                 "logical_not", "to_float64", "float", "bool", "div_scalar",
                 "rdiv_scalar", "mul_float", "chain"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", SPECIAL_UNARY)
def test_special_values_unary(op, dtype):
    run_both(UNARY[op], special_values(dtype), expect_compiled=True)


SPECIAL_BINARY = ["add", "sub", "mul", "div", "pow", "maximum", "minimum",
                  "lt", "le", "gt", "ge", "eq", "ne", "logical_and",
                  "logical_xor", "chain"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", SPECIAL_BINARY)
def test_special_values_binary(op, dtype):
    v = special_values(dtype)
    x = v.repeat_interleave(len(v))   # every pair of special values
    y = v.repeat(len(v))
    run_both(BINARY[op], x, y, expect_compiled=True)


def test_special_values_where():
    v = special_values(torch.float32)
    c = torch.arange(len(v)) % 3 == 0
    run_both(lambda c, x, y: torch.where(c, x, y), c, v, v.flip(0))


def test_cast_special_values():
    f32 = special_values(torch.float32)
    f64 = special_values(torch.float64)
    run_both(lambda x: x.double(), f32)
    tcjit.reset()
    # float64 -> float32: denormals flush to 0, 1e300 to inf
    run_both(lambda x: x.float(), f64)
    tcjit.reset()
    run_both(lambda x: x.to(torch.bool), f64)


INT32_EDGE = [2 ** 31 - 1, -2 ** 31, 0, 1, -1, 123456789, -7, 65536]
INT64_EDGE = [2 ** 63 - 1, -2 ** 63, 0, 1, -1, 2 ** 53 + 1, -(2 ** 62) - 3, 7]


@pytest.mark.parametrize("op", ["neg", "abs", "add", "sub", "mul", "div",
                                "maximum", "lt", "eq", "and", "xor", "float",
                                "double", "bool", "square", "invert"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
def test_integer_edge_values(op, dtype):
    """Integer arithmetic wraps around like eager and never goes through a
    float (2**53 + 1 must stay exact in int64)."""
    v = torch.tensor(INT32_EDGE if dtype == torch.int32 else INT64_EDGE,
                     dtype=dtype)
    if op in BINARY:
        x = v.repeat_interleave(len(v))
        y = v.repeat(len(v))
        if op == "div":
            y = torch.where(y == 0, torch.ones_like(y), y)
        run_both(BINARY[op], x, y)
    else:
        run_both(UNARY[op], v)


def test_int_pow_negative_exponent_tensor():
    x = torch.tensor([0, 1, -1, 2, -2, 3, 1, -1], dtype=torch.int32)
    y = torch.tensor([-1, -3, -3, -1, -2, 0, 5, 4], dtype=torch.int32)
    run_both(lambda x, y: x ** y, x, y)


def test_int_division_by_zero():
    x = torch.tensor([0, 1, -1, 5], dtype=torch.int64)
    y = torch.tensor([0, 0, 0, 2], dtype=torch.int64)
    run_both(lambda x, y: x / y, x, y)


# ---- type promotion ----------------------------------------------------------

i32 = torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int32)
i64 = torch.tensor([[1, -2, 3], [4, 5, -6]], dtype=torch.int64)
f32 = torch.tensor([[1.5, -2.0, 3.25], [0.5, 5.0, -6.0]], dtype=torch.float32)
f64 = torch.tensor([[1.5, -2.0, 3.25], [0.5, 5.0, -6.0]], dtype=torch.float64)
b = torch.tensor([[True, False, True], [False, False, True]])

PROMOTION = {
    "int32*2.5->f32": (lambda x: x * 2.5, (i32,)),
    "int64*2.5->f32": (lambda x: x * 2.5, (i64,)),
    "int32+2->int32": (lambda x: x + 2, (i32,)),
    "int32+True->int32": (lambda x: x + True, (i32,)),
    "int32+int64_0d->int32": (lambda x, y: x + y, (i32, torch.tensor(7, dtype=torch.int64))),
    "int64_0d+int32->int32": (lambda x, y: y + x, (i32, torch.tensor(7, dtype=torch.int64))),
    "f32+f64_0d->f32": (lambda x, y: x + y, (f32, torch.tensor(0.1, dtype=torch.float64))),
    "int32+f64_0d": (lambda x, y: x + y, (i32, torch.tensor(0.1, dtype=torch.float64))),
    "int32+f32_0d": (lambda x, y: x * y, (i32, torch.tensor(0.1, dtype=torch.float32))),
    "bool+f64_0d": (lambda x, y: x + y, (b, torch.tensor(0.1, dtype=torch.float64))),
    "f32+f64": (lambda x, y: x + y, (f32, f64)),
    "i32+i64": (lambda x, y: x + y, (i32, i64)),
    "i32*f32": (lambda x, y: x * y, (i32, f32)),
    "i64-f64": (lambda x, y: x - y, (i64, f64)),
    "bool*f32": (lambda x, y: x * y, (b, f32)),
    "bool+i32": (lambda x, y: x + y, (b, i32)),
    "int/int->f32": (lambda x, y: x / y, (i32, i64 + 10)),
    "int64/int64->f32": (lambda x, y: x / y, (i64, i64 + 10)),
    "int/2->f32": (lambda x: x / 2, (i64,)),
    "bool+bool": (lambda x, y: x + y, (b, b.flip(0))),
    "bool*bool": (lambda x, y: x * y, (b, b.flip(0))),
    "bool*2->int64": (lambda x: x * 2, (b,)),
    "bool+1.5->f32": (lambda x: x + 1.5, (b,)),
    "bool+True": (lambda x: x + True, (b,)),
    "f64*2.5->f64": (lambda x: x * 2.5, (f64,)),
    "f32*2->f32": (lambda x: x * 2, (f32,)),
    "int32<2.5": (lambda x: x < 2.5, (i32,)),
    "int32==f32": (lambda x, y: x == y, (i32, f32)),
    "int**2.5->f32": (lambda x: x ** 2.5, (i32,)),
    "int**2->int": (lambda x: x ** 2, (i32,)),
    "2**int->int": (lambda x: 2 ** x.abs(), (i32,)),
    "2.0**int->f32": (lambda x: 2.0 ** x, (i64,)),
    "f32**f64_0d": (lambda x, y: x ** y, (f32.abs(), torch.tensor(1.5, dtype=torch.float64))),
    "max(i32,f32)": (lambda x, y: torch.maximum(x, y), (i32, f32)),
    "max(i32,i64_0d)": (lambda x, y: torch.maximum(x, y), (i32, torch.tensor(2))),
    "where(b,i32,f64)": (lambda c, x, y: torch.where(c, x, y), (b, i32, f64)),
    "where(b,i32,1.5)": (lambda c, x: torch.where(c, x, 1.5), (b, i32)),
    "clamp(i32,0.5)": (lambda x: torch.clamp(x, min=0.5), (i32,)),
    "clamp(i64,-1,2)": (lambda x: torch.clamp(x, -1, 2), (i64,)),
    "sin(int)->f32": (lambda x: torch.sin(x), (i64,)),
    "sigmoid(bool)->f32": (lambda x: torch.sigmoid(x), (b,)),
    "sqrt(i32)->f32": (lambda x: torch.sqrt(x.abs()), (i32,)),
    "logical_and(i32,f32)->bool": (lambda x, y: torch.logical_and(x, y), (i32, f32)),
    "bitwise(i32,i64)": (lambda x, y: x & y, (i32, i64)),
    "bitwise(bool,i32)": (lambda x, y: x | y, (b, i32)),
    "add_alpha_int": (lambda x, y: torch.add(x, y, alpha=2), (i32, i64)),
    "add_alpha_float_on_float": (lambda x, y: torch.add(x, y, alpha=0.5), (i32, f32)),
}


@pytest.mark.parametrize("case", list(PROMOTION))
def test_type_promotion(case):
    fn, args = PROMOTION[case]
    run_both(fn, *args)


def test_promotion_results_are_what_eager_says():
    """Spot checks of the promotion table itself (guards the test data)."""
    assert (i32 * 2.5).dtype == torch.float32
    assert (i32 + torch.tensor(7, dtype=torch.int64)).dtype == torch.int32
    assert (f32 + torch.tensor(0.1, dtype=torch.float64)).dtype == torch.float32
    assert (i32 / i64).dtype == torch.float32
    assert (b + b).dtype == torch.bool
    f = tcjit.compile(lambda x: x * 2.5)
    assert f(i32).dtype == torch.float32
    g = tcjit.compile(lambda x, y: x + y)
    assert g(i32, torch.tensor(7, dtype=torch.int64)).dtype == torch.int32


# ---- large tensors (kernels split across threads) -----------------------------

def big_fn(x, y):
    z = torch.where(x > 0, torch.sin(x) * y, torch.exp(-x.abs()) + y)
    return torch.relu(z) - torch.sigmoid(y) / 2, (x * y).to(torch.float64)


def test_large_tensor_threads():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(600, 500, generator=g)   # 300k elements
    y = torch.randn(500, generator=g)
    assert x.numel() >= 300_000 > tcjit.config.parallel_threshold
    f = run_both(big_fn, x, y)
    # the same with a forced small split and a single thread
    with tcjit.config.patch(num_threads=2, parallel_threshold=1000):
        check_same(f(x, y), big_fn(x, y))
    with tcjit.config.patch(num_threads=1):
        check_same(f(x, y), big_fn(x, y))
    assert counters()["frames_compiled"] >= 1


def test_large_tensor_transposed_and_int():
    g = torch.Generator().manual_seed(2)
    xt = torch.randn(500, 601, generator=g).t()
    run_both(lambda x: (x.cos() + 1) * x, xt)
    tcjit.reset()
    xi = torch.randint(-1000, 1000, (310_001,), generator=g, dtype=torch.int32)
    run_both(lambda x: (x * 3 - 7) ^ (x > 0).int(), xi)
    tcjit.reset()
    xs = torch.randn(1000, 700, generator=g)[:, ::2]
    run_both(lambda x: x.tanh() * 2, xs, strides=False)


def test_large_tensor_odd_sizes_with_small_threshold():
    """Ranges that do not divide evenly between threads."""
    g = torch.Generator().manual_seed(3)
    with tcjit.config.patch(parallel_threshold=7, num_threads=2):
        for n in (1, 2, 7, 13, 1031):
            tcjit.reset()
            x = torch.randn(n, generator=g)
            run_both(lambda x: x.exp() - x * 0.5, x)


# ---- more layouts: outer broadcast, expanded, storage offsets, permuted ----------

def _outer(dt):
    return make((4, 1), dt, 1), make((1, 6), dt, 2)


def _expanded(dt):
    x = make((6,), dt, 1).expand(4, 6)
    assert x.stride() == (0, 1)
    return x, make((4, 6), dt, 2)


def _offset_1d(dt):
    x = make((20,), dt, 1)[5:15]
    assert x.storage_offset() == 5
    return x, make((30,), dt, 2)[17:27]


def _offset_2d(dt):
    return make((5, 10), dt, 1)[1:, 2:8], make((5, 10), dt, 2)[:4, 3:9]


def _permuted_3d(dt):
    return make((2, 3, 4), dt, 1).permute(2, 0, 1), make((2, 3, 4), dt, 2).permute(2, 0, 1)


def _five_d(dt):
    return make((2, 1, 3, 2, 2), dt, 1), make((3, 1, 2), dt, 2)


def _same_tensor(dt):
    x = make((3, 4), dt, 1)
    return x, x


MORE_LAYOUTS = {
    "outer": (_outer, True),
    "expanded": (_expanded, True),
    "offset_1d": (_offset_1d, True),
    "offset_2d": (_offset_2d, False),
    "permuted_3d": (_permuted_3d, True),
    "5d_bcast": (_five_d, True),
    "same_tensor": (_same_tensor, True),
}

MORE_OPS = {
    "add": lambda x, y: x + y,
    "mul_sin": lambda x, y: torch.sin(x) * y,
    "where_cast": lambda x, y: torch.where(x > y, x.double(), y.float()),
    "chain": lambda x, y: ((x - y) ** 2).sqrt() + torch.maximum(x, y),
    "unary_x": lambda x, y: (x * 2).exp(),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool],
                         ids=["f32", "i64", "bool"])
@pytest.mark.parametrize("layout", list(MORE_LAYOUTS))
@pytest.mark.parametrize("op", list(MORE_OPS))
def test_more_layouts(op, layout, dtype):
    build, strides = MORE_LAYOUTS[layout]
    x, y = build(dtype)
    run_both(MORE_OPS[op], x, y, strides=strides)


# ---- other dtypes: casts to small ints, unsupported input dtypes ------------------

def test_small_int_casts():
    xi = torch.arange(-300, 300, 7, dtype=torch.int32)
    run_both(lambda x: (x.short(), x.char(), x.byte()), xi)
    tcjit.reset()
    xf = torch.linspace(0, 120, 50)
    run_both(lambda x: (x.short(), x.char(), x.byte(), x.int(), x.long()), xf)
    tcjit.reset()
    xn = torch.linspace(-100.7, 100.7, 51)
    run_both(lambda x: (x.int(), x.long(), x.short(), x.bool()), xn)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8,
                                   torch.uint8, torch.int16, torch.complex64])
def test_other_input_dtypes_are_correct(dtype):
    """Input dtypes tcjit may not compile still give eager's answers."""
    x = (torch.arange(12).reshape(3, 4) % 7).to(dtype)
    run_both(lambda x: x * 2 + 1, x)
    tcjit.reset()
    run_both(lambda x, y: x + y.to(x.dtype), x, torch.ones(4))


# ---- mixed layouts: eager's output strides follow TensorIterator's rules -----

def _t_and_contig(dt):
    return make((6, 4), dt, 1).t(), make((4, 6), dt, 2)


def _contig_and_t(dt):
    return make((4, 6), dt, 1), make((6, 4), dt, 2).t()


def _t_and_row(dt):
    return make((6, 4), dt, 1).t(), make((6,), dt, 2)


def _t_and_col(dt):
    return make((6, 4), dt, 1).t(), make((4, 1), dt, 2)


def _row_and_t(dt):
    return make((6,), dt, 1), make((6, 4), dt, 2).t()


def _perm3d_and_contig(dt):
    return make((2, 3, 4), dt, 1).permute(1, 2, 0), make((3, 4, 2), dt, 2)


def _expanded_and_t(dt):
    return make((4, 1), dt, 1).expand(4, 6), make((6, 4), dt, 2).t()


def _empty_bcast(dt):
    return make((0, 5), dt, 1), make((5,), dt, 2)


def _zero_middle(dt):
    return make((3, 0, 2), dt, 1), make((1, 0, 1), dt, 2)


def _high_rank(dt):
    return make((2, 1, 2, 1, 2, 1, 2), dt, 1), make((2, 1, 2, 1, 2, 1), dt, 2)


MIXED_LAYOUTS = {
    "t_and_contig": _t_and_contig,
    "contig_and_t": _contig_and_t,
    "t_and_row": _t_and_row,
    "t_and_col": _t_and_col,
    "row_and_t": _row_and_t,
    "perm3d_and_contig": _perm3d_and_contig,
    "expanded_and_t": _expanded_and_t,
    "empty_bcast": _empty_bcast,
    "zero_middle": _zero_middle,
    "rank7": _high_rank,
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32], ids=["f32", "i32"])
@pytest.mark.parametrize("layout", list(MIXED_LAYOUTS))
@pytest.mark.parametrize("op", ["add", "mul_sin", "where_cast"])
def test_mixed_layouts(op, layout, dtype):
    x, y = MIXED_LAYOUTS[layout](dtype)
    run_both(MORE_OPS[op], x, y)


@pytest.mark.parametrize("rank", [1, 6, 8, 10])
def test_ranks(rank):
    shape = [2 if i % 2 == 0 else 1 for i in range(rank)]
    shape[-1] = 3
    x = make(tuple(shape), torch.float32, 1)
    y = make(tuple(shape[1:]), torch.float32, 2)
    run_both(lambda x, y: (x * y).cos() + x, x, y)


# ---- Python scalar edge values ---------------------------------------------

SCALAR_EDGES = {
    "mul_inf": (lambda x: x * math.inf, torch.float32),
    "add_nan": (lambda x: x + math.nan, torch.float32),
    "add_neg_zero": (lambda x: x + (-0.0), torch.float32),
    "mul_1e308": (lambda x: x * 1e308, torch.float32),
    "mul_1e308_f64": (lambda x: x * 1e308, torch.float64),
    "div_tiny": (lambda x: x / 1e-45, torch.float32),
    "pow_0": (lambda x: x ** 0, torch.float32),
    "pow_0.0_int": (lambda x: x ** 0.0, torch.int32),
    "zero_pow_x": (lambda x: 0 ** x, torch.float32),
    "zero_pow_int": (lambda x: 0 ** x.abs(), torch.int64),
    "pow_-2_f": (lambda x: x ** -2, torch.float32),
    "pow_-0.5": (lambda x: x ** -0.5, torch.float64),
    "pow_big": (lambda x: x ** 40, torch.float32),
    "int32_plus_2**40": (lambda x: x + 2 ** 40, torch.int32),
    "int64_times_2**62": (lambda x: x * 2 ** 62, torch.int64),
    "int32_mul_1e10": (lambda x: x * 1e10, torch.int32),
    "bool_and_True_int": (lambda x: x * True, torch.bool),
    "clamp_inverted": (lambda x: torch.clamp(x, min=1.0, max=-1.0), torch.float32),
    "clamp_nan_bound": (lambda x: torch.clamp(x, min=math.nan), torch.float32),
    "maximum_self": (lambda x: torch.maximum(x, x), torch.float32),
    "eq_nan": (lambda x: x == math.nan, torch.float32),
    "ne_nan": (lambda x: x != math.nan, torch.float32),
    "lt_inf": (lambda x: x < math.inf, torch.float32),
}


@pytest.mark.parametrize("case", list(SCALAR_EDGES))
def test_python_scalar_edges(case):
    fn, dtype = SCALAR_EDGES[case]
    if dtype.is_floating_point:
        x = special_values(dtype)
    else:
        x = torch.tensor([0, 1, -1, 7, -8, 2 ** 20], dtype=dtype) \
            if dtype != torch.bool else torch.tensor([True, False])
    run_both(fn, x)


def test_numpy_scalar_argument():
    np = pytest.importorskip("numpy")

    def f(x, s):
        return x * s + 1

    cf = tcjit.compile(f)
    xi = torch.arange(6, dtype=torch.int32)
    for s in (np.float64(2.5), 2.5, np.float32(0.5), 3):
        check_same(cf(xi, s), f(xi, s))


# ---- bigger graphs ---------------------------------------------------------------

def test_many_inputs_and_outputs():
    def f(*xs):
        acc = xs[0]
        outs = []
        for t in xs[1:]:
            acc = acc * 0.5 + t
            outs.append(acc.relu())
        return tuple(outs)

    g = torch.Generator().manual_seed(11)
    xs = [torch.randn(7, 3, generator=g) for _ in range(20)]
    run_both(f, *xs)


def test_long_chain():
    def f(x, y):
        for i in range(40):
            x = torch.sin(x) * 0.9 + y * (i % 3) - x.abs() * 0.1
        return x

    g = torch.Generator().manual_seed(12)
    run_both(f, torch.randn(64, generator=g), torch.randn(64, generator=g))


def test_shared_subexpressions_and_dead_code():
    def f(x, y):
        a = x.sin() + y
        b = x.sin() + y          # CSE candidate
        unused = (x * y).exp()   # dead  # noqa: F841
        return a * b, a - b

    run_both(f, torch.randn(9), torch.randn(9))


# ---- accuracy over wide input ranges (vectorized approximations) ------------

def _wide_inputs(dtype, n=20_000):
    g = torch.Generator().manual_seed(21)
    lo, hi = (-45, 38.5) if dtype == torch.float32 else (-320, 308)
    e = torch.empty(n, dtype=torch.float64).uniform_(lo, hi, generator=g)
    s = torch.randint(0, 2, (n,), generator=g).double() * 2 - 1
    parts = [s * 10 ** e]
    for a in (1.0, 10.0, 100.0, 1e4):
        parts.append(torch.empty(n // 4, dtype=torch.float64).uniform_(-a, a, generator=g))
    return torch.cat(parts).to(dtype)


WIDE_OPS = ["exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh", "sigmoid",
            "reciprocal", "pow_0.5", "pow_1.7", "pow_-1", "pow_3", "rpow_2.5",
            "chain"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("op", WIDE_OPS)
def test_accuracy_wide_range(op, dtype):
    run_both(UNARY[op], _wide_inputs(dtype), expect_compiled=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_accuracy_wide_range_pow_tensor_tensor(dtype):
    x = _wide_inputs(dtype).abs()
    y = _wide_inputs(dtype).flip(0).clamp(-50, 50) * 0.1
    run_both(BINARY["pow"], x, y, expect_compiled=True)


# ---- casts to dtypes tcjit may not compute in ----------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.uint8,
                                   torch.int8, torch.int16, torch.complex64])
def test_cast_to_other_dtypes(dtype):
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(3)) * 50
    run_both(lambda x: x.to(dtype), x.abs() if dtype == torch.uint8 else x)
    tcjit.reset()
    run_both(lambda x: x.to(dtype) + 1, torch.arange(-30, 30, 7))


def test_storage_offset_changes_on_cache_hit():
    base = torch.randn(40)

    def f(x):
        return x * 2 + 1

    cf = tcjit.compile(f)
    for lo in (0, 5, 30, 17):
        v = base[lo:lo + 10]
        check_same(cf(v), f(v))
    c = counters()
    assert c["frames_compiled"] == 1 and c["cache_hits"] == 3


def test_inference_mode_outputs():
    def f(x):
        return x.sin() + 1

    cf = tcjit.compile(f)
    with torch.inference_mode():
        x = torch.randn(5)
        out, ref = cf(x), f(x)
    assert out.is_inference() == ref.is_inference()
    check_same(out, ref)
    x = torch.randn(5)
    out, ref = cf(x), f(x)
    assert out.is_inference() == ref.is_inference()
    check_same(out, ref)


UNSUPPORTED_BUT_CORRECT = {
    "div_floor": lambda x, y: torch.div(x, y, rounding_mode="floor"),
    "mod": lambda x, y: x % 2 + y,
    "floordiv": lambda x, y: x // 2 - y,
    "matmul": lambda x, y: x @ y.t(),
    "to_tensor": lambda x, y: x.to(y.int()),
    "to_device": lambda x, y: x.to("cpu") + y,
    "to_copy": lambda x, y: x.to(torch.float32, copy=True),
    "type_str": lambda x, y: x.type("torch.DoubleTensor"),
    "clamp_tensors": lambda x, y: torch.clamp(x, y - 1, y + 1),
    "rsub": lambda x, y: torch.rsub(x, y),
    "len": lambda x, y: x * len(x),
    "builtin_max": lambda x, y: max(x.shape) * y,
}


@pytest.mark.parametrize("case", list(UNSUPPORTED_BUT_CORRECT))
def test_other_torch_calls_are_correct(case):
    g = torch.Generator().manual_seed(4)
    run_both(UNSUPPORTED_BUT_CORRECT[case], torch.randn(4, 6, generator=g),
             torch.randn(4, 6, generator=g))
