"""erf and exact gelu, softplus / leaky_relu / hardtanh / relu6 / elu /
mish, masked_fill, tril / triu (positions from loop indices), creation ops
(zeros, ones, empty, full, arange, *_like, new_*), F.normalize and casts,
compiled with tcjit and compared with eager (values, dtype, shape, strides).

Every test checks that the op really ran compiled (run_both's
expect_compiled: no eager fallback, compiled code hit), and the last test
assembles the PTX of every function here with ptxas.
"""
import math

import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same, log_messages, run_both
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

FLOATS = [torch.float32, torch.float64]
FLOAT_IDS = ["f32", "f64"]
SPECIAL = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-40, -1e-40, 1e-10,
           -1e-10, 0.5, -0.5, 0.99999, 1.0, -1.0, 1.00001, 3.5, -3.9, 4.0,
           5.9, 6.0, 20.0, -20.0, 25.0, 88.0, -88.0, 1e30, -1e30]


def make(shape, dtype, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    return torch.randint(-5, 6, shape, generator=g).to(dtype)


def layouts(dtype):
    """name -> tensor: contiguous, transposed, sliced with a step, 0-d,
    empty, special values."""
    out = {
        "contiguous": make((7, 9), dtype),
        "transposed": make((9, 7), dtype, 1).t(),
        "sliced": make((7, 20), dtype, 2)[1:, ::3],
        "0d": make((), dtype, 3),
        "empty": make((0, 4), dtype, 4),
    }
    if dtype.is_floating_point:
        out["special"] = torch.tensor(SPECIAL, dtype=dtype)
    return out


def check(fn, *args, strides=True):
    return run_both(fn, *args, strides=strides, expect_compiled=True)


# ---- erf and exact gelu -------------------------------------------------------

ERF_FUNCS = {
    "torch.erf": lambda x: torch.erf(x),
    "Tensor.erf": lambda x: x.erf() * 2,
    "special.erf": lambda x: torch.special.erf(x) + 1,
    "gelu": lambda x: F.gelu(x),
    "gelu_none": lambda x: F.gelu(x, approximate="none") - x,
}


@pytest.mark.parametrize("fname", list(ERF_FUNCS))
@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("lname", ["contiguous", "transposed", "sliced", "0d",
                                   "empty", "special"])
def test_erf_gelu(fname, dtype, lname):
    x = layouts(dtype)[lname]
    if fname.startswith("gelu") and lname == "special" and dtype == torch.float32:
        # eager's float32 gelu(inf) is nan in its vectorized loop (its own
        # Vectorized<float>::erf) but inf in the scalar tail; tcjit gives
        # inf, as float64 does everywhere
        x = x[x != math.inf]
    check(ERF_FUNCS[fname], x)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_erf_full_range(dtype):
    """Dense sweep over both pieces of the approximation and the clamp,
    plus denormals; compared with eager's tolerance of the dtype."""
    x = torch.cat([torch.linspace(-8, 8, 200001, dtype=torch.float64),
                   torch.logspace(-45, 1, 2001, dtype=torch.float64),
                   -torch.logspace(-45, 1, 2001, dtype=torch.float64)]).to(dtype)
    check(lambda x: (torch.erf(x), F.gelu(x)), x)
    # tighter than assert_close: a few ulp of the result
    got = tcjit.compile(lambda x: torch.erf(x))(x)
    ulp = torch.finfo(dtype).eps
    err = ((got - torch.erf(x)).abs() / torch.erf(x).abs().clamp_min(
        torch.finfo(dtype).tiny)).max().item()
    assert err <= 8 * ulp, err


def test_erf_of_integers_is_float32():
    check(lambda x: torch.erf(x), torch.arange(-3, 4))


def test_special_erf_is_traced_not_a_graph_break():
    """torch.special.erf reaches its binding through the torch.special
    module, whose attributes must be trusted like torch's (before, the call
    was a graph break that ran erf eagerly, which run_both cannot see)."""
    ops = []

    def backend(graph, example_inputs):
        ops.extend(graph.ops())
        return graph

    x = torch.randn(5)
    f = tcjit.compile(lambda x: torch.special.erf(x) + 1, backend=backend)
    check_same(f(x), torch.special.erf(x) + 1)
    assert ops == ["erf", "add"]


def test_gelu_other_approximate_is_a_break():
    def f(x):
        return F.gelu(x, approximate="bogus")

    run_both(f, torch.randn(3))


# ---- activations ------------------------------------------------------------------

ACTS = {
    "softplus": lambda x: F.softplus(x),
    "softplus_beta": lambda x: F.softplus(x, beta=2.5, threshold=5),
    "softplus_beta_neg": lambda x: F.softplus(x, 0.5, 1.0),
    "leaky_relu": lambda x: F.leaky_relu(x),
    "leaky_relu_slope": lambda x: F.leaky_relu(x, 0.2) + F.leaky_relu(x, negative_slope=-1.5),
    "hardtanh": lambda x: F.hardtanh(x),
    "hardtanh_bounds": lambda x: F.hardtanh(x, -0.5, 2.0),
    "relu6": lambda x: F.relu6(x),
    "elu": lambda x: F.elu(x),
    "elu_alpha": lambda x: F.elu(x, alpha=0.3),
    "mish": lambda x: F.mish(x),
}


@pytest.mark.parametrize("fname", list(ACTS))
@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("lname", ["contiguous", "transposed", "sliced", "0d",
                                   "empty", "special"])
def test_activations(fname, dtype, lname):
    check(ACTS[fname], layouts(dtype)[lname])


@pytest.mark.parametrize("fname", list(ACTS))
def test_activations_wide_range(fname):
    x = torch.cat([torch.linspace(-100, 100, 20001),
                   torch.logspace(-40, 1, 500), -torch.logspace(-40, 1, 500)])
    check(ACTS[fname], x)
    check(ACTS[fname], x.double())


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=["i32", "i64"])
def test_hardtanh_relu6_integers(dtype):
    x = torch.arange(-10, 10, dtype=dtype).view(4, 5)
    check(lambda x: (F.hardtanh(x), F.relu6(x), F.hardtanh(x, -3, 4)), x)


@pytest.mark.parametrize("fname", ["softplus", "leaky_relu", "elu", "mish"])
def test_float_only_activations_raise_on_integers(fname):
    run_both(ACTS[fname], torch.arange(4))


def test_inplace_activation_writes_its_input():
    def f(x):
        return F.leaky_relu(x, 0.1, inplace=True)

    ex = tcjit.explain(f)(torch.randn(4))
    assert ex.graph_break_count == 0
    x = torch.randn(4)
    y = x.clone()
    r = tcjit.compile(f)(x)
    assert r is x and torch.equal(x, F.leaky_relu(y, 0.1)) and x._version == 1


# ---- masked_fill / where ---------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64, torch.bool],
                         ids=FLOAT_IDS + ["i32", "i64", "bool"])
@pytest.mark.parametrize("mname", ["full", "row", "col", "0d", "bigger"])
def test_masked_fill(dtype, mname):
    x = make((4, 6), dtype, 0)
    m = {"full": make((4, 6), torch.bool, 1), "row": make((6,), torch.bool, 2),
         "col": make((4, 1), torch.bool, 3), "0d": torch.tensor(True),
         "bigger": make((3, 4, 6), torch.bool, 4)}[mname]
    value = True if dtype == torch.bool else 7 if not dtype.is_floating_point \
        else -2.5
    check(lambda x, m: (x.masked_fill(m, value), torch.masked_fill(x, m, 0)), x, m)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_masked_fill_special_values_and_layouts(dtype):
    x = make((6, 5), dtype).t()
    m = make((5, 6), torch.bool, 7)
    check(lambda x, m: (x.masked_fill(m, float("-inf")),
                        x.masked_fill(~m, float("nan")),
                        x.masked_fill(m, torch.tensor(3.0, dtype=torch.float64)),
                        torch.where(m, x, -x)), x, m)
    check(lambda x, m: x.masked_fill(m, -0.0), make((4, 12), dtype)[:, ::2],
          make((4, 6), torch.bool, 8))
    check(lambda x, m: x.masked_fill(m, 1.0), make((0, 3), dtype),
          make((0, 3), torch.bool))


def test_masked_fill_with_a_non_bool_mask_raises_like_eager():
    run_both(lambda x, m: x.masked_fill(m, 0.0), torch.randn(3),
             torch.tensor([1, 0, 1], dtype=torch.uint8))


def test_masked_fill_causal_softmax():
    """tril positions feeding a row reduction: the position node is read
    from a temporary in the softmax kernel."""
    def f(s):
        t = s.shape[-1]
        mask = torch.tril(torch.ones(t, t)) == 0
        return s.masked_fill(mask, float("-inf")).softmax(-1)

    check(f, torch.randn(2, 3, 8, 8))


# ---- tril / triu ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64, torch.bool],
                         ids=["f32", "f64", "i64", "bool"])
@pytest.mark.parametrize("shape", [(5, 7), (7, 5), (2, 3, 4), (1, 1), (0, 3), (3, 0)])
@pytest.mark.parametrize("k", [0, 1, -2, 5, -9])
def test_tril_triu(dtype, shape, k):
    x = make(shape, dtype)
    check(lambda x: (torch.tril(x, k), torch.triu(x, diagonal=k), x.tril(k),
                     x.triu(k)), x)


def test_tril_triu_layouts():
    x = make((6, 8), torch.float32)
    check(lambda x: (x.tril(), x.triu(-1) * 2), x.t())
    check(lambda x: (x.tril(1), x.triu()), make((6, 20), torch.float32)[:, ::3])
    check(lambda x: torch.tril(x + 1), make((3, 1, 5), torch.float32).expand(3, 4, 5))


def test_tril_of_1d_raises_like_eager():
    run_both(lambda x: torch.tril(x), torch.randn(4))


# ---- creation ops -----------------------------------------------------------------

NEW_FUNCS = {
    "zeros": lambda x: x + torch.zeros(4, 6),
    "zeros_tuple": lambda x: torch.zeros((4, 6), dtype=torch.float64) * x,
    "ones_i": lambda x: torch.ones(6, dtype=torch.int32) + x,
    "full_int": lambda x: (torch.full((4, 6), 3), x),
    "full_float": lambda x: torch.full((6,), -1.5) * x,
    "full_bool": lambda x: (torch.full((2, 3), True), x.sum()),
    "full_dtype": lambda x: torch.full([4, 1], 7, dtype=torch.float32) - x,
    "zeros_like": lambda x: torch.zeros_like(x),
    "ones_like_dtype": lambda x: torch.ones_like(x, dtype=torch.float64) + x,
    "full_like": lambda x: torch.full_like(x, 2),
    "empty_like_shape": lambda x: torch.empty_like(x).shape,
    "new_zeros": lambda x: x.new_zeros(3, 2),
    "new_ones": lambda x: x.new_ones((5,), dtype=torch.int64),
    "new_full": lambda x: x.new_full((2, 2), 4),
    "arange_end": lambda x: torch.arange(6) + x,
    "arange_start_end": lambda x: (torch.arange(2, 9), x),
    "arange_step": lambda x: (torch.arange(10, 1, -3), torch.arange(0, 10, 4), x),
    "arange_float": lambda x: (torch.arange(0, 1, 0.1), torch.arange(-1.5, 2.5, 0.5), x),
    "arange_dtype": lambda x: (torch.arange(5, dtype=torch.float64),
                               torch.arange(1, 4, dtype=torch.int32), x),
    "arange_float_end": lambda x: (torch.arange(3.5), x),
}


@pytest.mark.parametrize("fname", list(NEW_FUNCS))
@pytest.mark.parametrize("lname", ["contiguous", "transposed"])
def test_creation_ops(fname, lname):
    x = make((4, 6), torch.float32) if lname == "contiguous" \
        else make((6, 4), torch.float32).t()
    check(NEW_FUNCS[fname], x)


def test_empty_is_allocated_like_eager():
    def f(x):
        return torch.empty(3, 4), torch.empty_like(x), x.new_empty(2)

    x = make((6, 4), torch.float64).t()
    compiled = tcjit.compile(f)
    for a, e in zip(compiled(x), f(x)):
        assert (a.shape, a.dtype, a.stride()) == (e.shape, e.dtype, e.stride())
    assert tcjit.counters()["eager_fallbacks"] == 0


def test_creation_only_graph_runs_on_the_cpu():
    def f():
        return torch.arange(12).view(3, 4) * 2, torch.ones(2, device="cpu")

    check(f)
    assert all(t.device.type == "cpu" for t in tcjit.compile(f)())


def test_empty_creation():
    check(lambda x: (torch.zeros(0, 3), torch.arange(0), x), torch.randn(2))


def test_creation_on_another_device_is_unsupported():
    """A graph runs on one device: a creation op elsewhere is a break."""
    def f(x):
        return x + 1, torch.zeros(2, device="meta")

    ex = tcjit.explain(f)(torch.randn(2))
    assert any("device" in b.reason for b in ex.break_reasons), ex.break_reasons
    assert ex.result[1].device.type == "meta" and ex.result[1].shape == (2,)


def test_creation_on_a_second_device_names_both(tcjit_logs):
    """cuda:0 next to a CPU input that is not 0-d: the graph is a CUDA one
    with a host part (graph.h TC_PLACE_HOST), and a kernel cannot read the
    CPU tensor: a break with eager's message naming both devices (and
    eager's own error where there is no GPU)."""
    caplog = tcjit_logs("graph_breaks")

    def f(x):
        return x + torch.zeros(2, device="cuda:0")

    run_both(f, torch.randn(2))
    msgs = log_messages(caplog, "graph_breaks")
    assert any("found at least two devices, cuda:0 and cpu" in m
               for m in msgs), msgs


def test_arange_invalid_raises_like_eager():
    run_both(lambda x: torch.arange(5, 1) + x, torch.randn(1))
    run_both(lambda x: torch.arange(0, 5, 0) + x, torch.randn(1))


# ---- normalize, casts ----------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("lname", ["contiguous", "transposed", "sliced", "empty"])
def test_normalize(dtype, lname):
    x = layouts(dtype)[lname]
    check(lambda x: (F.normalize(x), F.normalize(x, dim=0),
                     F.normalize(x, p=1, dim=-1, eps=1e-3)), x)


def test_normalize_of_zeros_uses_eps():
    check(lambda x: F.normalize(x, dim=1), torch.zeros(3, 4))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.bool],
                         ids=FLOAT_IDS + ["i32", "bool"])
def test_casts_and_type_as(dtype):
    x = make((4, 6), dtype)
    y = make((6,), torch.float64, 1)
    check(lambda x, y: (x.type_as(y), y.type_as(x), x.float(), x.double(),
                        x.int(), x.long(), x.bool(), x.to(torch.int16)), x, y)


# ---- PTX -----------------------------------------------------------------------------

@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_ptx_of_new_ops_assembles(tmp_path):
    """The PTX of every function above (both dtypes) must assemble."""
    tcjit._C.set_config(ptx_dump_dir=str(tmp_path))
    try:
        for dtype in FLOATS:
            x = make((7, 9), dtype)
            for fn in list(ERF_FUNCS.values()) + list(ACTS.values()):
                tcjit.reset()
                tcjit.compile(fn)(x)
            tcjit.reset()
            tcjit.compile(lambda x: (x.tril(1), x.triu(), F.normalize(x),
                                     x.masked_fill(x > 0, float("-inf"))))(x)
        for fn in NEW_FUNCS.values():
            tcjit.reset()
            tcjit.compile(fn)(make((4, 6), torch.float32))
        tcjit.reset()
        tcjit.compile(lambda s: s.masked_fill(torch.tril(torch.ones(8, 8)) == 0,
                                              float("-inf")).softmax(-1))(
            torch.randn(2, 8, 8))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    files = dumped_ptx(str(tmp_path), 60)
    text = "".join(open(f).read() for f in files)
    assert "cvt.s64.s32" in text or "mov.s64" in text   # positions (KOP_INDEX)
    assert_ptxas_accepts(files)


ADD_NUMBER_ALPHA = {
    "add_int": lambda x: torch.add(x, 5, alpha=2),
    "sub_float": lambda x: torch.sub(x, 0.1, alpha=3),
    "method_add": lambda x: x.add(3, alpha=0.5),
    "int_tensor_float_number": lambda x: torch.add(x.int(), 2.5, alpha=2),
    "double": lambda x: torch.add(x.double(), 0.1, alpha=0.3),
    "bool_sub_raises": lambda x: torch.sub(x > 0, 1.5, alpha=2),
    # fuzz seed 7835: as a generic extern, the result's size-1 strides came
    # from torch's meta kernel, which differs from the CPU's there
    "rms_norm_of_it": lambda x: F.rms_norm(torch.add(x, 5, alpha=2), (2, 1)),
}


@pytest.mark.parametrize("name", ADD_NUMBER_ALPHA)
@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_add_sub_number_with_alpha(name, backend):
    """add / sub of a Python number with alpha: a fused op adding
    alpha * other, with eager's dtype and strides (size-1 dims too)."""
    x = torch.randn(1, 2).permute(1, 0)
    run_both(ADD_NUMBER_ALPHA[name], x, backend=backend,
             expect_compiled=not name.endswith("raises"))
