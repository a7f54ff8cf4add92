"""float16 and bfloat16 tensors, compiled on the CPU, against eager.

tcjit computes reduced floats as Inductor does: loads convert to float32,
the math runs in float32 and stores round to the tensor's dtype.  So:

* casts (.half(), .bfloat16(), .to(dtype) both ways) must be bit-exact with
  eager: all 65536 bit patterns of each type, and float32 values over every
  exponent with rounding ties, subnormals, overflow, inf and NaN;
* a single op must match eager within 1 ulp of the result dtype (one
  rounding of a float32 result, like eager; transcendentals differ from
  eager's SLEEF in the last float32 bits at most);
* chains round once, where eager rounds after every op: they are compared
  with eager computed in float32 and then cast, with the dtype's default
  torch.testing tolerances.

NaN encodings: eager's own differ by path (float32 -> bfloat16 gives
0xffff from ATen's vectorized code, float16 -> bfloat16 gives 0x7fc0 from
c10's scalar code); tcjit follows the float32 paths, so the float16 ->
bfloat16 and float64 -> bfloat16 casts are compared bit for bit except that
NaNs only need to be NaN.
"""
import types

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same, run_both
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

HALF = [torch.float16, torch.bfloat16]
HALF_IDS = ["f16", "bf16"]
INT_OF = {2: torch.int16, 4: torch.int32, 8: torch.int64}


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g) * 2).to(dtype)


def all_bit_patterns(dtype):
    bits = np.arange(1 << 16, dtype=np.uint16).view(np.int16)
    return torch.from_numpy(bits).view(dtype)


def bits(t):
    return t.contiguous().view(INT_OF[t.element_size()])


def assert_same_bits(actual, expected, nan_any=False):
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    a, e = bits(actual), bits(expected)
    differ = a != e
    if nan_any:
        differ &= ~(torch.isnan(actual) & torch.isnan(expected))
    bad = differ.nonzero().flatten()[:5].tolist()
    assert not bad, [(hex(a[i].item()), hex(e[i].item())) for i in bad]


def ulp_distance(actual, expected):
    """|difference| in units in the last place of the half dtype (the
    integer distance of the sign-magnitude bit patterns); NaN == NaN."""
    def ordered(t):
        b = bits(t).to(torch.int32)
        return torch.where(b < 0, -(b & 0x7fff), b)
    d = (ordered(actual) - ordered(expected)).abs()
    both_nan = torch.isnan(actual) & torch.isnan(expected)
    return torch.where(both_nan, torch.zeros_like(d), d)


def py(fn):
    """fn as a Python function (tcjit compiles those, not builtins)."""
    if isinstance(fn, types.FunctionType):
        return fn
    return lambda a, b: fn(a, b)


def compiled_once(fn, *args):
    """Result of fn compiled by tcjit, checking that it really compiled."""
    fn = py(fn)
    tcjit.reset()
    out = tcjit.compile(fn)(*args)
    c = tcjit.counters()
    assert c["graphs"] >= 1 and c["eager_fallbacks"] == 0, c
    return out


# ---- casts: bit-exact ----------------------------------------------------

TARGETS = [torch.float32, torch.float64, torch.int64, torch.int32,
           torch.int16, torch.int8, torch.uint8, torch.bool] + HALF


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("to", TARGETS, ids=str)
def test_cast_from_half_all_bits(dt, to):
    if to == dt:
        pytest.skip("identity")
    x = all_bit_patterns(dt)
    actual = compiled_once(lambda x: x.to(to), x)
    expected = x.to(to)
    if to.is_floating_point:
        assert_same_bits(actual, expected, nan_any=to in HALF)
    else:
        # eager leaves NaN, inf and out-of-range float -> int undefined
        ok = x.float().abs() < 100
        assert torch.equal(actual[ok], expected[ok])


def float32_test_values():
    g = torch.Generator().manual_seed(1)
    random_bits = torch.randint(-2**31, 2**31 - 1, (1 << 20,), generator=g)
    parts = [random_bits.to(torch.int32)]
    exps = torch.arange(256, dtype=torch.int32) << 23
    # mantissa tails around the float16 (13 bits) and bfloat16 (16 bits)
    # rounding points: exact ties, just below, just above; even and odd
    for low in (0x1000, 0x0fff, 0x1001, 0x3000, 0x8000, 0x7fff, 0x8001,
                0x18000, 0x2000, 0):
        for sign in (0, -2**31):
            m = torch.randint(0, 1 << 23, (256,), generator=g,
                              dtype=torch.int32)
            parts.append(exps | (m & ~0x1ffff) | low | sign)
    # float16's subnormal range and overflow boundary, every float32 there
    parts.append(torch.arange(0x33000000, 0x38900000, 97, dtype=torch.int32))
    parts.append(torch.arange(0x477fe000, 0x47801000, dtype=torch.int32))
    x = torch.cat(parts).view(torch.float32)
    special = torch.tensor([0.0, -0.0, float("inf"), -float("inf"),
                            float("nan"), 65504.0, 65519.996, 65520.0,
                            -65520.0, 3.4e38, 1e-45, 2.98e-8, 5.96e-8])
    return torch.cat([x, special])


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_cast_float32_to_half_bits(dt):
    x = float32_test_values()
    assert_same_bits(compiled_once(lambda x: x.to(dt), x), x.to(dt))
    method = {torch.float16: lambda x: x.half(),
              torch.bfloat16: lambda x: x.bfloat16()}[dt]
    assert_same_bits(compiled_once(method, x[:4096]), method(x[:4096]))


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_cast_float64_and_ints_to_half(dt):
    # float64 rounds through float32, as c10 does (double rounding included)
    x = float32_test_values().double() * (1 + 2.0**-30)
    x = torch.cat([x, torch.tensor([1 + 2.0**-11 + 2.0**-40,
                                    1 + 2.0**-8 + 2.0**-40])])
    assert_same_bits(compiled_once(lambda x: x.to(dt), x), x.to(dt),
                     nan_any=True)  # eager: 0x7fc0 here, 0xffff from float32
    i = torch.randint(-200000, 200000, (100000,),
                      generator=torch.Generator().manual_seed(2))
    i = torch.cat([i, torch.tensor([2**40, -2**40, 65519, 65520, 2**24 + 1])])
    assert_same_bits(compiled_once(lambda x: x.to(dt), i), i.to(dt))
    b = torch.tensor([True, False])
    assert_same_bits(compiled_once(lambda x: x.to(dt), b), b.to(dt))


def test_cast_round_trip_in_one_graph():
    x = float32_test_values()[:50000]
    f = lambda x: (x.half().float(), x.bfloat16().float(),  # noqa: E731
                   x.half().bfloat16(), x.bfloat16().half())
    for a, e in zip(compiled_once(f, x), f(x)):
        assert_same_bits(a, e, nan_any=True)


# ---- single ops: within 1 ulp ---------------------------------------------

UNARY = {
    "neg": lambda x: -x, "abs": lambda x: x.abs(),  # exact
    "relu": lambda x: x.relu(),  # exact
    "exp": lambda x: x.exp(), "log": lambda x: torch.log(x.abs()),
    "sqrt": lambda x: x.abs().sqrt(), "rsqrt": lambda x: x.abs().rsqrt(),
    "sin": lambda x: x.sin(), "cos": lambda x: x.cos(),
    "tanh": lambda x: x.tanh(), "sigmoid": lambda x: x.sigmoid(),
    "silu": lambda x: F.silu(x),
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "reciprocal": lambda x: x.reciprocal(), "square": lambda x: x.square(),
}
BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "maximum": torch.maximum, "minimum": torch.minimum,
    "pow": lambda a, b: a.abs() ** b,
}


def one_ulp(actual, expected):
    """Within 1 ulp, or within 2e-7 absolute: where the float32 result is
    a difference that cancels (gelu's 1 + tanh(x) near x = -5), a few
    float32 ulps of tcjit's polynomials vs eager's SLEEF are visible in
    the half dtype's subnormals (bfloat16 has float32's exponent range)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    d = ulp_distance(actual, expected)
    near = (actual.float() - expected.float()).abs() <= 2e-7
    bad = (d > 1) & ~near
    assert not bad.any(), (d[bad].max().item(), actual[bad][:5],
                           expected[bad][:5])


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_one_ulp(dt, name):
    fn = UNARY[name]
    if name in ("abs", "neg", "relu", "square"):
        x = all_bit_patterns(dt)
    else:
        x = torch.cat([make((5000,), dt), make((64,), dt) * 40])
    if name in ("log", "sqrt", "rsqrt"):
        x = torch.where(x == 0, torch.ones_like(x), x)
    # abs/neg/relu are exact: every bit pattern, bit for bit (NaNs: eager
    # flips the sign bit of a signaling NaN, tcjit's float32 quiets it)
    actual = compiled_once(fn, x)
    if name in ("abs", "neg", "relu"):
        assert_same_bits(actual, fn(x), nan_any=True)
    else:
        one_ulp(actual, fn(x))


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_one_ulp(dt, name):
    fn = BINARY[name]
    a, b = make((4000,), dt, 1), make((4000,), dt, 2)
    actual = compiled_once(fn, a, b)
    if name in ("add", "sub", "mul", "div", "maximum", "minimum"):
        assert_same_bits(actual, fn(a, b))  # one float32 op, one rounding
    else:
        one_ulp(actual, fn(a, b))


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("scalar", [0.1, 2, -1.5, 1e-3, 3.0e4, True])
def test_python_scalars_exact(dt, scalar):
    """eager keeps the scalar of mul / div in float32 and rounds it to the
    tensor's dtype for the others; both ways are reproduced exactly."""
    x = make((3000,), dt, 3)
    fns = [lambda x: x * scalar, lambda x: scalar * x, lambda x: x / scalar,
           lambda x: x + scalar, lambda x: x - scalar, lambda x: scalar - x,
           lambda x: x < scalar, lambda x: x >= scalar,
           lambda x: x == scalar, lambda x: torch.where(x > 0, x, scalar),
           lambda x: x.clamp(min=scalar), lambda x: x.clamp(max=scalar)]
    for fn in fns:
        try:
            expected = fn(x)
        except RuntimeError:  # True - x
            continue
        actual = compiled_once(fn, x)
        if expected.dtype == torch.bool:
            assert torch.equal(actual, expected)
        else:
            assert_same_bits(actual, expected)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_comparison_with_scalar_rounds_scalar(dt):
    # 0.1 as float16 is 0.0999755859375: eager compares with that
    v = torch.tensor(0.1, dtype=dt).item()
    x = torch.tensor([v, 0.1, 0.2, -1.0], dtype=dt)
    for fn in (lambda x: x < 0.1, lambda x: x == 0.1, lambda x: x >= 0.1):
        assert torch.equal(compiled_once(fn, x), fn(x))


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_zero_dim_tensor_operands(dt):
    x = make((7, 5), dt, 4)
    for s in (torch.tensor(0.123456), torch.tensor(0.123456, dtype=dt),
              torch.tensor(3, dtype=torch.int64)):
        for fn in (lambda x, s: x * s, lambda x, s: x / s,
                   lambda x, s: x + s, lambda x, s: s * x):
            expected = fn(x, s)
            assert_same_bits(compiled_once(fn, x, s), expected)


# ---- promotion -------------------------------------------------------------

PROMO_CASES = [
    # (a, b) -> result dtype checked by run_both against eager
    (torch.float16, torch.bfloat16),
    (torch.float16, torch.float32),
    (torch.bfloat16, torch.float64),
    (torch.float16, torch.int64),
    (torch.bfloat16, torch.int32),
    (torch.float16, torch.bool),
    (torch.bfloat16, torch.uint8),
]


def _operand(dt, shape, seed):
    if dt.is_floating_point:
        return make(shape, dt, seed)
    if dt == torch.bool:
        return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) > 0.5
    return torch.randint(0, 5, shape, generator=torch.Generator().manual_seed(seed)).to(dt)


@pytest.mark.parametrize("a,b", PROMO_CASES, ids=lambda d: str(d)[6:])
@pytest.mark.parametrize("shapes", [((4, 6), (4, 6)), ((4, 6), (6,)),
                                    ((4, 6), ()), ((), (4, 6))],
                         ids=["same", "bcast", "0d_right", "0d_left"])
def test_promotion_with_tensors(a, b, shapes):
    x, y = _operand(a, shapes[0], 1), _operand(b, shapes[1], 2)
    for fn in (torch.add, torch.mul, torch.maximum, torch.lt):
        fn = py(fn)
        run_both(fn, x, y, expect_compiled=True)
        run_both(fn, y, x, expect_compiled=True)
        tcjit.reset()


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_promotion_with_python_scalars(dt):
    x = make((4, 6), dt)
    i = torch.arange(24).reshape(4, 6)
    z = make((), dt)
    for fn, args in [(lambda x: x + 1.5, (x,)), (lambda x: x * 3, (x,)),
                     (lambda x: x / 7, (x,)), (lambda x: x ** 2, (x,)),
                     (lambda i, z: i + z, (i, z)),       # int dim + half 0-d
                     (lambda i, z: i * z + 0.5, (i, z)),
                     (lambda x: (x > 0) + 0.5, (x,))]:
        run_both(fn, *args, expect_compiled=True)
        tcjit.reset()


# ---- chains: float32 in between --------------------------------------------

def assert_close_to_float32_reference(actual, fn, *args):
    """actual vs fn evaluated in float32 on the same inputs, then cast."""
    ref_args = [a.float() if isinstance(a, torch.Tensor) and a.dtype in HALF
                else a for a in args]
    expected = fn(*ref_args)
    assert actual.dtype == fn(*args).dtype
    torch.testing.assert_close(actual.float(), expected.to(actual.dtype).float(),
                               **_tol(actual.dtype))


def _tol(dt):
    # one rounding of the result, plus float32-vs-eager transcendental bits
    return {torch.float16: dict(rtol=1e-3, atol=1e-5),
            torch.bfloat16: dict(rtol=8e-3, atol=1e-5)}.get(dt, {})


CHAINS = {
    "pointwise": lambda x, y: ((x.sin() + y.cos()).relu() * 2 + 1) / (y.abs() + 1),
    "gelu_mlp": lambda x, y: F.gelu(x * y + 0.5, approximate="tanh") * x,
    "sigmoid_mix": lambda x, y: torch.where(x > y, x.sigmoid(), y.tanh()) - 0.25,
    "with_f32": lambda x, y: (x * y.float()).exp() + x,
}


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", sorted(CHAINS))
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "sliced", "bcast"])
def test_chains(dt, name, layout):
    fn = CHAINS[name]
    if layout == "contiguous":
        x, y = make((33, 40), dt, 1), make((33, 40), dt, 2)
    elif layout == "transposed":
        x, y = make((40, 33), dt, 1).t(), make((33, 40), dt, 2)
    elif layout == "sliced":
        x, y = make((33, 81), dt, 1)[:, 1::2], make((66, 40), dt, 2)[::2]
    else:
        x, y = make((33, 40), dt, 1), make((40,), dt, 2)
    actual = compiled_once(fn, x, y)
    expected = fn(x, y)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    assert_close_to_float32_reference(actual, fn, x, y)


def test_large_split_over_threads():
    x = make((1 << 20,), torch.bfloat16, 5)
    fn = lambda x: x * 0.5 + 1  # noqa: E731
    assert_same_bits(compiled_once(fn, x), (x.float() * 0.5 + 1).bfloat16())


# ---- reductions and normalizations -----------------------------------------

REDUCTIONS = {
    "sum": lambda x: x.sum(), "sum_dim": lambda x: x.sum(1),
    "sum_f32": lambda x: x.sum(1, dtype=torch.float32),
    "mean": lambda x: x.mean(), "mean_keep": lambda x: x.mean(0, keepdim=True),
    "amax": lambda x: x.amax(1), "amin": lambda x: x.amin(0),
    "argmax": lambda x: x.argmax(1), "argmin": lambda x: x.argmin(),
    "var": lambda x: x.var(1), "std": lambda x: x.std(),
    "prod": lambda x: (x * 0.1 + 1).prod(1),
    "logsumexp": lambda x: x.logsumexp(1), "norm": lambda x: x.norm(),
}


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_reductions(dt, name, layout):
    fn = REDUCTIONS[name]
    x = make((37, 300), dt, 6) if layout == "contiguous" else make((300, 37), dt, 6).t()
    actual = compiled_once(fn, x)
    expected = fn(x)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if name in ("amax", "amin", "argmax", "argmin"):
        check_same(actual, expected)  # exact
    else:
        # eager accumulates in float32 too; prod's input is a chain
        assert_close_to_float32_reference(actual, fn, x)


@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
def test_softmax_layer_norm(dt):
    x = make((16, 129), dt, 7)
    w, b = make((129,), dt, 8), make((129,), dt, 9)
    fns = [lambda x: x.softmax(-1), lambda x: F.log_softmax(x, 0),
           lambda x: torch.softmax(x, 1, dtype=torch.float32),
           lambda x: F.layer_norm(x, (129,), w, b),
           lambda x: F.layer_norm(x, (129,)),
           lambda x: F.rms_norm(x, (129,), w)]
    for fn in fns:
        actual = compiled_once(fn, x)
        expected = fn(x)
        assert actual.dtype == expected.dtype and actual.shape == expected.shape
        # eager computes these in float32 and rounds once, as tcjit does
        torch.testing.assert_close(actual, expected, **_tol(dt))


# ---- tracing: dtype objects, methods, guards --------------------------------

def test_dtype_spellings_and_guards():
    x = make((8, 8), torch.float32)
    fns = [lambda x: x.half() + 1, lambda x: x.bfloat16() * 2,
           lambda x: x.to(torch.half), lambda x: x.to(torch.float16).float(),
           lambda x: x.to(dtype=torch.bfloat16),
           lambda x: x.sum(dtype=torch.float16),
           lambda x: x.softmax(1, dtype=torch.bfloat16)]
    for fn in fns:
        run_both(fn, x, expect_compiled=True)
        tcjit.reset()
    # a dtype change is a guard failure (recompile), not a wrong answer
    f = tcjit.compile(lambda x: x * 2)
    for dt in (torch.float16, torch.bfloat16, torch.float32, torch.float16):
        y = make((5,), dt)
        check_same(f(y), y * 2)
    assert tcjit.counters()["cache_misses"] == 3


def test_explain_reports_a_graph():
    x = make((4, 4), torch.bfloat16)
    r = tcjit.explain(lambda x: (x.float() * 2).half())(x)
    assert r.graph_count == 1 and r.graph_break_count == 0, r


# ---- PTX: every kernel above must assemble -----------------------------------

@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_ptx_assembles_half(tmp_path):
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        for dt in HALF:
            x, y = make((33, 40), dt, 1), make((33, 40), dt, 2)
            for fn in CHAINS.values():
                tcjit.reset()
                tcjit.compile(fn)(x, y)
            tcjit.reset()
            tcjit.compile(fn)(make((4099,), dt, 1), make((4099,), dt, 2))
            for fn in REDUCTIONS.values():
                tcjit.reset()
                tcjit.compile(fn)(x)
            for fn in (lambda x: x.softmax(-1), lambda x: F.layer_norm(x, (40,)),
                       lambda x: (x.float(), x.double(), x.int(), x.bool()),
                       lambda x: (x.half(), x.bfloat16())):
                tcjit.reset()
                tcjit.compile(fn)(x)
            tcjit.reset()
            tcjit.compile(lambda x: x.to(dt))(make((4099,), torch.float32))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    files = dumped_ptx(d, 40)
    assert any("cvt.rn.bf16.f32" in open(f).read() for f in files)
    assert_ptxas_accepts(files)


# ---- sin / cos of kernels with half results ----------------------------------
# A GPU kernel whose floats are all float16 / bfloat16 computes sin / cos as
# sin.approx / cos.approx after a reduction by 2 pi (ptx_math.c,
# f32_sincos_half: absolute error ~1e-6, measured by tests/gpu/harness.c);
# every other kernel keeps the float32-accurate polynomials.

TRIG_FORMS = {
    # name: (function, input dtype, whether the kernel may use sin.approx)
    "bf16": (lambda x: x.sin() + x.cos(), torch.bfloat16, True),
    "f16": (lambda x: x.sin() * x.cos(), torch.float16, True),
    "f32": (lambda x: x.sin() + x.cos(), torch.float32, False),
    "half_in_f32_out": (lambda x: x.float().sin(), torch.bfloat16, False),
    "f32_in_half_out": (lambda x: x.sin().half(), torch.float32, False),
}


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
@pytest.mark.parametrize("name", sorted(TRIG_FORMS))
def test_trig_approx_only_for_half_results(tmp_path, name):
    fn, dt, approx = TRIG_FORMS[name]
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        tcjit.reset()
        tcjit.compile(py(fn))(make((4096,), dt))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    files = dumped_ptx(d, 1)
    text = "".join(open(f).read() for f in files)
    assert ("sin.approx" in text or "cos.approx" in text) == approx
    assert_ptxas_accepts(files)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("dt", HALF, ids=HALF_IDS)
@pytest.mark.parametrize("name", ["sin", "cos"])
def test_trig_half_results_cuda(dt, name):
    """Every bit pattern: within 1 ulp of eager, or within 4e-6 of the
    float64 value (where an ulp is smaller than sin.approx's error), and
    within the dtype's assert_close tolerance."""
    fn = UNARY[name]
    x = all_bit_patterns(dt).cuda()
    got, want = compiled_once(fn, x), fn(x)
    exact = fn(x.double())
    near = (got.double() - exact).abs() <= 4e-6
    bad = (ulp_distance(got, want) > 1) & ~near
    assert not bad.any(), (x[bad][:5], got[bad][:5], want[bad][:5])
    torch.testing.assert_close(got, want, equal_nan=True)
