"""Guards: cache hits, every guard kind's recompile path with its exact
recompiles log line, the recompile limit and tcjit.config."""
import dataclasses
import re
import sys
import warnings

import pytest
import torch

import tcjit
from conftest import check_same, counters, log_messages

scale = 2.0          # read by test_global_scalar_guard (G['scale'])
W_GLOBAL = torch.arange(6, dtype=torch.float32)


def where(fn):
    code = fn.__code__
    return f"{code.co_name} in {code.co_filename}:{code.co_firstlineno}"


def assert_one_recompile(caplog, fn, reason):
    """Exactly one recompiles message, in the documented format, whose only
    guard failure is ``reason`` (literal text)."""
    msgs = log_messages(caplog, "recompiles")
    assert len(msgs) == 1, msgs
    pattern = (re.escape(f"Recompiling function {where(fn)}")
               + r"\n    triggered by the following guard failure\(s\):"
               + r"\n    - \d+/0: " + re.escape(reason)
               + r"(\n    automatic dynamic shapes: .*)?")
    assert re.fullmatch(pattern, msgs[0]), msgs[0]


# ---- hits ------------------------------------------------------------------

def test_cache_hit_same_shapes(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x, y):
        return torch.sin(x) * y + 1

    cf = tcjit.compile(f)
    x, y = torch.randn(4, 5), torch.randn(4, 5)
    check_same(cf(x, y), f(x, y))
    c1 = counters()
    assert c1["frames_compiled"] == 1
    assert c1["cache_misses"] == 1
    assert c1["graphs"] == 1
    assert c1["kernels_compiled"] >= 1
    x2, y2 = torch.randn(4, 5), torch.randn(4, 5)
    check_same(cf(x2, y2), f(x2, y2))
    check_same(cf(x2, y), f(x2, y))
    c2 = counters()
    assert c2["frames_compiled"] == 1
    assert c2["cache_hits"] == c1["cache_hits"] + 2
    assert c2["cache_misses"] == 1
    assert c2["recompiles"] == 0
    assert c2["kernels_compiled"] == c1["kernels_compiled"]
    assert log_messages(caplog, "recompiles") == []


def test_alternating_shapes_hit_both_entries():
    def f(x):
        return x * 3 - 1

    cf = tcjit.compile(f)
    a, b = torch.randn(4), torch.randn(8)
    for _ in range(3):
        check_same(cf(a), f(a))
        check_same(cf(b), f(b))
    c = counters()
    assert c["frames_compiled"] == 2
    assert c["recompiles"] == 1
    assert c["cache_hits"] == 4


# ---- each guard kind --------------------------------------------------------

def test_size_guard(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x.cos() + 2

    cf = tcjit.compile(f)
    x4, x8 = torch.randn(4), torch.randn(8)
    check_same(cf(x4), f(x4))
    check_same(cf(x8), f(x8))
    assert_one_recompile(caplog, f, "tensor 'x' size mismatch at index 0. "
                                    "expected 4, actual 8")
    c = counters()
    assert c["recompiles"] == 1 and c["frames_compiled"] == 2
    # the first entry is still there
    check_same(cf(x4), f(x4))
    assert counters()["frames_compiled"] == 2
    assert len(log_messages(caplog, "recompiles")) == 1


def test_size_guard_second_dim(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x * x

    cf = tcjit.compile(f)
    a, b = torch.randn(3, 4), torch.randn(3, 6)
    check_same(cf(a), f(a))
    check_same(cf(b), f(b))
    assert_one_recompile(caplog, f, "tensor 'x' size mismatch at index 1. "
                                    "expected 4, actual 6")


def test_stride_guard(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x.exp() - x

    cf = tcjit.compile(f)
    x = torch.randn(4, 4)
    xt = torch.randn(4, 4).t()
    check_same(cf(x), f(x))
    check_same(cf(xt), f(xt))          # strides compared: eager keeps (1, 4)
    assert_one_recompile(caplog, f, "tensor 'x' stride mismatch at index 0. "
                                    "expected 4, actual 1")


def test_stride_guard_sliced(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x + 1

    cf = tcjit.compile(f)
    a = torch.randn(4, 5)
    s = torch.randn(4, 10)[:, ::2]
    check_same(cf(a), f(a))
    check_same(cf(s), f(s), strides=False)
    assert_one_recompile(caplog, f, "tensor 'x' stride mismatch at index 0. "
                                    "expected 5, actual 10")


def test_dtype_guard(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x.sigmoid() * 2

    cf = tcjit.compile(f)
    a = torch.randn(5)
    check_same(cf(a), f(a))
    check_same(cf(a.double()), f(a.double()))
    assert_one_recompile(caplog, f, "tensor 'x' dtype mismatch. "
                                    "expected Float, actual Double")


def test_dtype_guard_second_input(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x, y):
        return x + y

    cf = tcjit.compile(f)
    x = torch.randn(5)
    yi = torch.arange(5, dtype=torch.int32)
    check_same(cf(x, x), f(x, x))
    check_same(cf(x, yi), f(x, yi))
    assert_one_recompile(caplog, f, "tensor 'y' dtype mismatch. "
                                    "expected Float, actual Int")


def test_rank_guard(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return torch.tanh(x) + 0.5

    cf = tcjit.compile(f)
    a, b = torch.randn(2, 3), torch.randn(2, 3, 4)
    check_same(cf(a), f(a))
    check_same(cf(b), f(b))
    assert_one_recompile(caplog, f, "tensor 'x' rank mismatch. "
                                    "expected 2, actual 3")


def test_rank_guard_0d_vs_1d(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x * 4

    cf = tcjit.compile(f)
    a, b = torch.tensor(3.0), torch.tensor([3.0])
    check_same(cf(a), f(a))
    check_same(cf(b), f(b))
    assert_one_recompile(caplog, f, "tensor 'x' rank mismatch. "
                                    "expected 0, actual 1")


def test_requires_grad_guard(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return torch.sin(x) * x + 1

    cf = tcjit.compile(f)
    a = torch.randn(6)
    check_same(cf(a), f(a))
    before = counters()["eager_fallbacks"]
    xr = a.clone().requires_grad_()
    xe = a.clone().requires_grad_()
    out = cf(xr)
    ref = f(xe)
    check_same(out, ref)
    assert out.grad_fn is not None
    out.backward(torch.ones(6))
    ref.backward(torch.ones(6))
    torch.testing.assert_close(xr.grad, xe.grad)
    # compiled as an autograd node (test_training.py), not eagerly
    assert counters()["eager_fallbacks"] == before
    assert_one_recompile(caplog, f, "tensor 'x' requires_grad mismatch. "
                                    "expected requires_grad=0")


def test_python_scalar_equals_guard(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x, alpha):
        return x * alpha + alpha

    cf = tcjit.compile(f)
    x = torch.randn(5)
    check_same(cf(x, 0.5), f(x, 0.5))
    check_same(cf(x, 0.5), f(x, 0.5))
    assert counters()["frames_compiled"] == 1
    check_same(cf(x, 0.25), f(x, 0.25))
    assert_one_recompile(caplog, f, "L['alpha'] == 0.5")
    assert counters()["frames_compiled"] == 2


def test_python_scalar_type_change_int_to_float(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x, n):
        return x * n

    cf = tcjit.compile(f)
    x = torch.arange(6, dtype=torch.int32)
    r1 = cf(x, 2)
    check_same(r1, f(x, 2))
    assert r1.dtype == torch.int32
    r2 = cf(x, 2.0)             # 2.0 == 2, but int32 * 2.0 is float32
    check_same(r2, f(x, 2.0))
    assert r2.dtype == torch.float32
    assert_one_recompile(caplog, f, "L['n'] == 2")


def test_python_bool_vs_int_scalar():
    def f(x, n):
        return x + n

    cf = tcjit.compile(f)
    b = torch.tensor([True, False, True])
    check_same(cf(b, True), f(b, True))    # bool + True -> bool
    check_same(cf(b, 1), f(b, 1))          # bool + 1 -> int64


def test_global_scalar_guard(tcjit_logs):
    global scale
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x * scale

    cf = tcjit.compile(f)
    x = torch.randn(5)
    try:
        check_same(cf(x), f(x))
        scale = 3.0
        out = cf(x)
        check_same(out, f(x))
        torch.testing.assert_close(out, x * 3.0)
    finally:
        scale = 2.0
    assert_one_recompile(caplog, f, "G['scale'] == 2.0")
    check_same(cf(x), x * 2.0)


def test_global_tensor_same_shape_new_values():
    """A global tensor is an input of the graph, not a constant: rebinding
    it or mutating it in place must show in the next result."""
    global W_GLOBAL
    saved = W_GLOBAL

    def f(x):
        return x + W_GLOBAL

    cf = tcjit.compile(f)
    x = torch.randn(6)
    try:
        check_same(cf(x), f(x))
        W_GLOBAL = torch.randn(6)
        check_same(cf(x), f(x))
        W_GLOBAL.mul_(-2)
        check_same(cf(x), f(x))
        W_GLOBAL = torch.randn(3, 6)     # new shape: guard fails, recompiles
        check_same(cf(x), f(x))
        W_GLOBAL = torch.randn(6).double()
        check_same(cf(x), f(x))
    finally:
        W_GLOBAL = saved


def test_grad_mode_guard(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x.relu() + 1

    cf = tcjit.compile(f)
    x = torch.randn(5)
    with torch.no_grad():
        check_same(cf(x), f(x))
    check_same(cf(x), f(x))
    assert_one_recompile(caplog, f,
                         "GLOBAL_STATE changed: grad_mode (expected False)")


def test_grad_mode_guard_other_direction(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x.relu() * 3

    cf = tcjit.compile(f)
    x = torch.randn(5)
    check_same(cf(x), f(x))
    with torch.no_grad():
        check_same(cf(x), f(x))
    assert_one_recompile(caplog, f,
                         "GLOBAL_STATE changed: grad_mode (expected True)")


def test_no_grad_with_requires_grad_input_compiles():
    def f(x):
        return x * 2 + 1

    cf = tcjit.compile(f)
    x = torch.randn(5, requires_grad=True)
    with torch.no_grad():
        out = cf(x)
        ref = f(x)
    check_same(out, ref)
    assert not out.requires_grad
    assert counters()["frames_compiled"] == 1


def test_closure_scalar_rebound():
    k = 2.0

    def f(x):
        return x * k

    cf = tcjit.compile(f)
    x = torch.randn(4)
    check_same(cf(x), x * 2.0)
    k = 5.0
    check_same(cf(x), x * 5.0)
    check_same(cf(x), f(x))


def test_shape_specialization_guarded():
    def f(x):
        return x * x.shape[0] + x.size(1)

    cf = tcjit.compile(f)
    for shape in [(2, 3), (5, 3), (2, 7), (2, 3)]:
        x = torch.randn(shape)
        check_same(cf(x), f(x))


# ---- recompile limit -----------------------------------------------------------

def test_recompile_limit_patch():
    def f(x):
        return x * 2 + 1

    cf = tcjit.compile(f, dynamic=False)  # static: sizes recompile
    with tcjit.config.patch(recompile_limit=2):
        assert tcjit.config.recompile_limit == 2
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            for n in range(1, 7):
                x = torch.randn(n)
                check_same(cf(x), f(x))
        ours = [x for x in w if "recompile_limit" in str(x.message)]
        assert len(ours) == 1, [str(x.message) for x in w]
        assert ours[0].category is RuntimeWarning
        assert str(ours[0].message).startswith(
            "tcjit hit config.recompile_limit (2)")
        c = counters()
        assert c["frames_compiled"] == 2
        assert c["eager_fallbacks"] >= 4
        # cached entries still hit
        check_same(cf(torch.ones(1)), f(torch.ones(1)))
        assert counters()["frames_compiled"] == 2
    assert tcjit.config.recompile_limit == 8


def test_recompile_limit_default_8():
    assert tcjit.config.recompile_limit == 8

    def f(x):
        return x.abs() - 1

    # static shapes: every size its own compile (dynamic shapes would
    # compile twice; tests/test_dynamic.py)
    cf = tcjit.compile(f, dynamic=False)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for n in range(1, 12):
            x = torch.randn(n)
            check_same(cf(x), f(x))
    ours = [x for x in w if "recompile_limit" in str(x.message)]
    assert len(ours) == 1
    assert str(ours[0].message).startswith("tcjit hit config.recompile_limit (8)")
    assert counters()["frames_compiled"] == 8


def test_reset_clears_recompile_limit():
    def f(x):
        return x + 10

    cf = tcjit.compile(f)
    with tcjit.config.patch(recompile_limit=1):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            for n in (1, 2, 3):
                cf(torch.randn(n))
        assert counters()["frames_compiled"] == 1
        tcjit.reset()
        assert counters()["frames_compiled"] == 0
        x = torch.randn(3)
        check_same(cf(x), f(x))
        assert counters()["frames_compiled"] == 1


def test_recompile_limit_is_per_code_object():
    def f(x):
        return x * 5

    def g(x):
        return x * 6

    cf, cg = tcjit.compile(f), tcjit.compile(g)
    with tcjit.config.patch(recompile_limit=1):
        with warnings.catch_warnings(record=True):
            warnings.simplefilter("always")
            cf(torch.randn(1))
            cf(torch.randn(2))
        before = counters()["frames_compiled"]
        x = torch.randn(2)
        check_same(cg(x), g(x))
        assert counters()["frames_compiled"] == before + 1


# ---- config -------------------------------------------------------------------

def test_config_patch_restores():
    c = tcjit.config
    assert (c.recompile_limit, c.num_threads, c.parallel_threshold) == (8, 0, 32768)
    with c.patch(recompile_limit=3, num_threads=1, parallel_threshold=10):
        assert (c.recompile_limit, c.num_threads, c.parallel_threshold) == (3, 1, 10)
    assert (c.recompile_limit, c.num_threads, c.parallel_threshold) == (8, 0, 32768)
    with pytest.raises(KeyError):
        with c.patch(recompile_limit=4):
            assert c.recompile_limit == 4
            raise KeyError("boom")
    assert c.recompile_limit == 8


def test_config_validation():
    with pytest.raises(AttributeError):
        tcjit.config.no_such_setting = 1
    with pytest.raises(AttributeError):
        tcjit.config.no_such_setting
    with pytest.raises(AttributeError):
        with tcjit.config.patch(no_such_setting=1):
            pass
    for bad in (-1, 1.5, True, "2", None):
        with pytest.raises(ValueError):
            tcjit.config.num_threads = bad
    assert tcjit.config.num_threads == 0
    tcjit.config.parallel_threshold = 1
    assert tcjit.config.parallel_threshold == 1
    assert "parallel_threshold=1" in repr(tcjit.config)


def test_config_threads_do_not_change_results():
    def f(x):
        return (x.sin() * 2 + x.cos()).relu()

    cf = tcjit.compile(f)
    x = torch.randn(100_000)
    ref = f(x)
    for nt, thr in [(1, 1), (2, 1), (2, 100), (0, 32768), (3, 5000)]:
        with tcjit.config.patch(num_threads=nt, parallel_threshold=thr):
            check_same(cf(x), ref)


# ---- guards log ----------------------------------------------------------------

def test_guards_log(tcjit_logs):
    caplog = tcjit_logs("guards")

    def f(x, alpha):
        return x * alpha

    cf = tcjit.compile(f)
    cf(torch.randn(3, 2), 0.5)
    msgs = log_messages(caplog, "guards")
    assert msgs, "guards channel printed nothing"
    text = "\n".join(msgs)
    assert "L['x']" in text
    assert "L['alpha']" in text
    assert "0.5" in text
    assert "grad_mode" in text


# ---- more global state and types ----------------------------------------------

def test_default_dtype_is_guarded():
    """int * 2.5 gives the default dtype: compiled code must follow
    torch.set_default_dtype (DESIGN: GLOBAL_STATE covers default dtype)."""
    def f(x):
        return x * 2.5, x / 2

    cf = tcjit.compile(f)
    xi = torch.arange(5, dtype=torch.int32)
    check_same(cf(xi), f(xi))
    saved = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        ref = f(xi)
        assert ref[0].dtype == torch.float64
        check_same(cf(xi), ref)
    finally:
        torch.set_default_dtype(saved)
    check_same(cf(xi), f(xi))


def test_tensor_subclass_type_guard():
    def f(x):
        return x * 2 - 1

    cf = tcjit.compile(f)
    p = torch.nn.Parameter(torch.randn(4), requires_grad=False)
    t = torch.randn(4)
    ref_p = f(p)
    out_p = cf(p)
    assert type(out_p) is type(ref_p)
    check_same(out_p, ref_p)
    check_same(cf(t), f(t))
    check_same(cf(p), f(p))


def test_separate_backends_have_separate_entries():
    def f(x):
        return x.exp() + 1

    auto, eager = tcjit.compile(f), tcjit.compile(f, backend="eager")
    x = torch.randn(4)
    check_same(auto(x), f(x))
    check_same(eager(x), f(x))
    check_same(auto(x), f(x))
    check_same(eager(x), f(x))
    c = counters()
    assert c["frames_compiled"] == 2
    assert c["cache_hits"] == 2


def test_python_scalar_none_and_string_args():
    def f(x, mode, bias):
        if mode == "double":
            x = x * 2
        return x if bias is None else x + bias

    cf = tcjit.compile(f)
    x = torch.randn(3)
    for mode, bias in [("double", None), ("double", 1.0), ("same", None),
                       ("same", torch.ones(3)), ("double", None)]:
        check_same(cf(x, mode, bias), f(x, mode, bias))


def test_nan_scalar_argument_hits_cache():
    """EQUALS on a NaN must not fail forever (nan != nan): the same NaN
    argument should reuse the compiled entry, not recompile every call."""
    import math

    def f(x, a):
        return x + a

    cf = tcjit.compile(f)
    x = torch.randn(4)
    for _ in range(3):
        check_same(cf(x, math.nan), f(x, math.nan))
    c = counters()
    assert c["frames_compiled"] == 1, c
    assert c["cache_hits"] == 2, c


def test_recompile_limit_warning_turned_into_error():
    """Under -W error the limit warning raises: the call must then raise that
    RuntimeWarning (or run eagerly), never some unrelated error."""
    def f(x):
        return x + 1

    cf = tcjit.compile(f)
    with tcjit.config.patch(recompile_limit=1):
        check_same(cf(torch.ones(1)), f(torch.ones(1)))
        x2 = torch.randn(2)
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            try:
                out = cf(x2)
            except RuntimeWarning as e:
                assert "recompile_limit" in str(e)
            else:
                check_same(out, f(x2))
        x3 = torch.randn(3)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            check_same(cf(x3), f(x3))


# ---- tensors of other kinds ------------------------------------------------
# tcjit compiles plain dense CPU / CUDA tensors of type torch.Tensor or
# nn.Parameter.  Other tensors (functorch wrappers, sparse, nested, meta,
# negative views, subclasses, complex dtypes) run eagerly, with a reason,
# whether they come first or after a compile for a plain tensor.

class LoggingTensor(torch.Tensor):
    """A subclass whose __torch_function__ must run for every op."""
    calls = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        LoggingTensor.calls.append(getattr(func, "__name__", ""))
        return super().__torch_function__(func, types, args, kwargs or {})


def _sparse():
    return torch.tensor([[0.0, 2.0], [3.0, 0.0]]).to_sparse()


def _nested():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "prototype stage"
        return torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])


def _inference():
    with torch.inference_mode():
        return torch.randn(2, 2)


OTHER_KINDS = {
    "sparse": (_sparse, "non-dense"),
    "nested": (_nested, "NestedTensorCPU"),
    "meta": (lambda: torch.empty(2, 2, device="meta"), "device meta"),
    "neg_view": (lambda: torch._neg_view(torch.ones(2, 2)), "Negative"),
    "subclass": (lambda: torch.ones(2, 2).as_subclass(LoggingTensor),
                 "LoggingTensor"),
    "complex": (lambda: torch.randn(2, 2, dtype=torch.complex64),
                "dtype torch.complex64"),
}


def _same(actual, expected):
    """check_same, also for sparse / nested / meta results."""
    assert type(actual) is type(expected)
    assert (actual.layout, actual.device, actual.dtype, actual.is_nested) \
        == (expected.layout, expected.device, expected.dtype, expected.is_nested)
    if expected.is_nested:
        for a, e in zip(actual.unbind(), expected.unbind()):
            check_same(a, e)
    elif expected.is_sparse:
        check_same(actual.to_dense(), expected.to_dense())
    elif expected.device.type != "meta":
        check_same(actual.resolve_neg(), expected.resolve_neg())
    else:
        assert actual.shape == expected.shape


@pytest.mark.parametrize("first", [True, False], ids=["first", "after_plain"])
@pytest.mark.parametrize("kind", list(OTHER_KINDS))
def test_other_tensor_kinds_run_eagerly(kind, first):
    """A first call with such a tensor, or one after a compile for a plain
    tensor (its guards must reject it before reading sizes: a nested tensor
    raises for them, a meta tensor has no data), behaves as eager."""
    make, why = OTHER_KINDS[kind]

    def f(x):
        return x * 2

    cf = tcjit.compile(f)
    if not first:
        check_same(cf(torch.ones(2, 2)), f(torch.ones(2, 2)))
    x = make()
    expected = f(x)
    LoggingTensor.calls = []
    _same(cf(x), expected)
    if kind == "subclass":
        assert "mul" in LoggingTensor.calls
    reasons = [b.reason for b in tcjit.explain(f)(make()).break_reasons]
    assert any(why in r for r in reasons), reasons


def test_nested_tensor_raises_eagers_error():
    """After a compile for a plain tensor, a nested tensor gets eager's
    exception from the op (not an error from reading its sizes)."""
    def f(x):
        return x.sum(0) * 2

    cf = tcjit.compile(f)
    check_same(cf(torch.ones(2, 2)), f(torch.ones(2, 2)))
    with pytest.raises(RuntimeError) as eager:
        f(_nested())
    with pytest.raises(RuntimeError) as got:
        cf(_nested())
    assert str(got.value) == str(eager.value)


def test_other_kind_recompile_reason(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x + 1

    cf = tcjit.compile(f)
    cf(torch.zeros(3))
    cf(torch.empty(3, device="meta"))
    assert_one_recompile(
        caplog, f, "tensor 'x' dispatch key set mismatch. expected "
        "DispatchKeySet(CPU, ADInplaceOrView, AutogradCPU, AutocastCPU), "
        "actual DispatchKeySet(Meta, ADInplaceOrView, AutogradMeta)")


def test_inference_tensors_compile_with_their_own_guard(tcjit_logs):
    """An inference tensor is plain (no autograd keys): compiled, as a
    separate entry."""
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x.exp() * 2

    cf = tcjit.compile(f)
    x, xi = torch.randn(2, 2), _inference()
    for t in (x, xi, x, xi):
        check_same(cf(t), f(t))
    c = counters()
    assert c["eager_fallbacks"] == 0 and c["frames_compiled"] == 2, c
    with torch.inference_mode():
        for t in (x, xi):
            check_same(cf(t), f(t))
    assert counters()["eager_fallbacks"] == 0
    msgs = log_messages(caplog, "recompiles")
    assert any("dispatch key set mismatch" in m for m in msgs), msgs


def test_vmap_of_a_compiled_function():
    def f(x, y):
        return (x.sin() * y).sum(-1) + 1

    x, y = torch.randn(3, 4, 5), torch.randn(5)
    cf = tcjit.compile(f)
    check_same(torch.vmap(cf, in_dims=(0, None))(x, y),
               torch.vmap(f, in_dims=(0, None))(x, y))
    check_same(cf(x[0], y), f(x[0], y))   # plain tensors still compile
    reasons = []
    torch.vmap(lambda x: reasons.extend(
        b.reason for b in tcjit.explain(f)(x, y).break_reasons) or x)(x)
    assert any("functorch-wrapped" in r and "FuncTorchBatched" in r
               for r in reasons), reasons


def test_vmap_under_enable():
    def f(x, y):
        return (x.sin() * y).sum(-1) + 1

    x, y = torch.randn(3, 4, 5), torch.randn(5)
    expected = torch.vmap(f, in_dims=(0, None))(x, y)
    tcjit.enable()
    try:
        got = torch.vmap(f, in_dims=(0, None))(x, y)
        got2 = torch.vmap(torch.vmap(f, in_dims=(0, None)),
                          in_dims=(1, None))(x, y)
    finally:
        tcjit.disable()
    check_same(got, expected)
    check_same(got2, torch.vmap(torch.vmap(f, in_dims=(0, None)),
                                in_dims=(1, None))(x, y))


def _causal(batch_idx, head_idx, q_idx, kv_idx):
    return kv_idx <= q_idx


def _padding(mask):
    def inner(batch_idx, head_idx, q_idx, kv_idx):
        return mask[batch_idx, kv_idx]
    return inner


def _and(*fns):
    def inner(*args):
        out = torch.ones((), dtype=torch.bool)
        for fn in fns:
            out = out & fn(*args)
        return out
    return inner


def _mask(attention_mask, q_len):
    """transformers' masking_utils (sdpa_mask with vmap): the mask function
    vmapped over kv, q, head and batch indices."""
    fn = _and(_causal, _padding(attention_mask))
    for dims in [(None, None, None, 0), (None, None, 0, None),
                 (None, 0, None, None), (0, None, None, None)]:
        fn = torch.vmap(fn, in_dims=dims, out_dims=0)
    b = torch.arange(attention_mask.shape[0])
    h = torch.arange(1)
    q = torch.arange(q_len)
    kv = torch.arange(attention_mask.shape[1])
    return fn(b, h, q, kv)


def test_transformers_style_mask_building_with_vmap():
    am = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1]], dtype=torch.bool)
    expected = _mask(am, 4)
    tcjit.enable()
    try:
        got = _mask(am, 4)
    finally:
        tcjit.disable()
    check_same(got, expected)
    check_same(tcjit.compile(_mask)(am, 4), expected)


def test_grad_of_a_compiled_function():
    def f(x):
        return (x.sin() * 2).sum()

    x = torch.randn(5)
    cf = tcjit.compile(f)
    check_same(torch.func.grad(cf)(x), torch.func.grad(f)(x))
    check_same(torch.func.vmap(torch.func.grad(cf))(x[None].expand(3, 5)),
               torch.func.vmap(torch.func.grad(f))(x[None].expand(3, 5)))
    check_same(cf(x), f(x))


def test_guard_reads_dispatch_keys_directly():
    """TENSOR_MATCH reads the key set in C (the fast path), and what it
    reads is torch's key set, for tensors of every kind."""
    tensors = [torch.randn(3), torch.randn(3, requires_grad=True),
               torch.nn.Parameter(torch.randn(2)), _inference(), _sparse(),
               _nested(), torch.empty(2, device="meta"),
               torch.ones(2).as_subclass(LoggingTensor),
               torch._neg_view(torch.ones(2)),
               torch.randn(2, dtype=torch.complex64).conj(),
               torch.randn(4, 4)[1:, ::2]]
    seen = []
    torch.vmap(lambda t: seen.append(t) or t)(torch.randn(2, 3))
    torch.func.grad(lambda t: seen.append(t) or t.sum())(torch.randn(3))
    for t in tensors + seen:
        keys, direct = tcjit._C.tensor_keys(t)
        assert direct
        assert keys == torch._C._dispatch_keys(t).raw_repr(), t


# ---- TENSOR_MATCH's sizes and strides, read from the TensorImpl ------------

@pytest.mark.parametrize("make, other, reason", [
    # more dims than SizesAndStrides keeps in place (5)
    (lambda: torch.randn(2, 1, 2, 1, 2, 3), lambda: torch.randn(2, 1, 2, 1, 2, 4),
     "tensor 'x' size mismatch at index 5. expected 3, actual 4"),
    (lambda: torch.randn(2, 1, 2, 1, 2, 3),
     lambda: torch.randn(3, 2, 1, 2, 1, 2).permute(5, 4, 3, 2, 1, 0),
     "tensor 'x' stride mismatch at index 0. expected 12, actual 1"),
    (lambda: torch.randn(4, 6)[:, ::2], lambda: torch.randn(4, 3),
     "tensor 'x' stride mismatch at index 0. expected 6, actual 3"),
    (lambda: torch.randn(3, 1).expand(3, 5), lambda: torch.randn(3, 5),
     "tensor 'x' stride mismatch at index 0. expected 1, actual 5"),
    (lambda: torch.tensor(2.0), lambda: torch.randn(1),
     "tensor 'x' rank mismatch. expected 0, actual 1"),
])
def test_tensor_match_geometry(tcjit_logs, make, other, reason):
    """Sizes and strides as the guard reads them in C: same geometry hits
    (a fresh tensor, not the traced one), another recompiles with
    eager-equal results and the reason names what differs."""
    caplog = tcjit_logs("recompiles")

    def f(x):
        return x * 2 + 1

    cf = tcjit.compile(f)
    a = make()
    check_same(cf(a), f(a))
    b = make()
    check_same(cf(b), f(b))
    assert counters()["recompiles"] == 0 and counters()["cache_hits"] == 1
    c = other()
    check_same(cf(c), f(c))
    assert_one_recompile(caplog, f, reason)
    check_same(cf(b), f(b))
    check_same(cf(c), f(c))
    assert counters()["cache_hits"] == 3


# ---- the source tree: entries of one segment share fetched sources ---------

def test_entries_share_fetched_sources():
    """Three entries that differ deep in the source tree (m.lin.weight) and
    in an argument: every lookup that tries a failing entry first hands its
    fetched values to the next; results, hits and reference counts stay
    right."""
    class M(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.lin = torch.nn.Linear(n, 3)

        def forward(self, x, k):
            return torch.relu(self.lin(x)) * k

    mods = [M(4), M(4), M(6)]
    mods[1].lin.weight = torch.nn.Parameter(torch.randn(3, 4).t().contiguous().t())

    def f(m, x, k):
        return m(x, k)

    cf = tcjit.compile(f)
    xs = {4: torch.randn(2, 4), 6: torch.randn(2, 6)}
    calls = [(m, xs[m.lin.in_features], k) for m in mods for k in (2, 3)]
    with torch.no_grad():
        for m, x, k in calls:
            check_same(cf(m, x, k), f(m, x, k))
        compiled = counters()["frames_compiled"]
        refs = []
        for i in range(20):
            for m, x, k in reversed(calls):
                check_same(cf(m, x, k), f(m, x, k))
            refs.append([sys.getrefcount(o)
                         for o in (mods[0].lin.weight, xs[4])])
        before, after = refs[0], refs[-1]
    assert counters()["frames_compiled"] == compiled
    assert before == after


# ---- functions made per call: guarded by code, not identity ---------------

@dataclasses.dataclass
class _Output:
    logits: object = None
    loss: object = None


def test_comprehension_function_after_a_break_does_not_recompile(tcjit_logs):
    """transformers' ModelOutput.__setattr__: `{f.name for f in
    fields(self)}` breaks the graph at the comprehension's iterable (3.11
    makes a <setcomp> function object per call, and the next segment calls
    it from the stack).  Its guard is on the function's code, not on the
    fresh object's identity: no recompile on later calls."""
    caplog = tcjit_logs("recompiles")

    def f(x, out):
        y = x + 1
        names = {fld.name for fld in dataclasses.fields(out)}
        return y * len(names)

    cf = tcjit.compile(f)
    x = torch.randn(4)
    for _ in range(3):
        check_same(cf(x, _Output()), f(x, _Output()))
    assert counters()["recompiles"] == 0
    assert log_messages(caplog, "recompiles") == []


def test_lambdas_made_per_call_do_not_recompile(tcjit_logs):
    caplog = tcjit_logs("recompiles")

    def f(x, scale):
        fs = [lambda t: t + 1, lambda t, s=2.0: t * s]
        print(end="")   # a graph break: the next segment reads fs
        for h in fs:
            x = h(x)
        return x * scale

    cf = tcjit.compile(f)
    x = torch.randn(5)
    for i in range(3):
        check_same(cf(x, 3), f(x, 3))
    assert counters()["recompiles"] == 0
    assert log_messages(caplog, "recompiles") == []


def test_same_code_other_defaults_or_cells_is_not_reused():
    """A function of the same code with other defaults or cells is not the
    function traced: its defaults are guarded, and a function with cells
    keeps its identity guard."""
    def make(k):
        return lambda t, k=k: t * k

    def make_closure(k):
        return lambda t: t * k

    def f(x, h):
        print(end="")
        return h(x)

    cf = tcjit.compile(f)
    x = torch.randn(3)
    for h in (make(2.0), make(3.0), make_closure(2.0), make_closure(5.0)):
        check_same(cf(x, h), f(x, h))
        check_same(cf(x, h), f(x, h))


def test_guard_time_measures_a_passing_lookup():
    """tcjit._C._guard_time (bench/guards.py): ns per cache lookup of the
    entries at a function's start, for a call with these arguments."""
    def f(x, k):
        return x * k

    x = torch.randn(3)
    tcjit.compile(f)(x, 2)
    assert tcjit._C._guard_time(f, (x, 2), 100) > 0
    with pytest.raises(ValueError, match="guards fail"):
        tcjit._C._guard_time(f, (x, 3), 10)
    with pytest.raises(ValueError, match="no compiled entry"):
        tcjit._C._guard_time(lambda t: t, (x,), 10)


def test_hasattr_guard_names_the_call(tcjit_logs):
    """A guard on hasattr(obj, name) is logged as that call (it printed as
    the tracer's internal 'tuple.call(obj)')."""
    caplog = tcjit_logs("recompiles")

    class Box:
        pass

    box = Box()

    def f(x, b):
        return x + 1 if hasattr(b, "scale") else x - 1

    cf = tcjit.compile(f)
    x = torch.randn(4)
    check_same(cf(x, box), f(x, box))
    box.scale = 2
    check_same(cf(x, box), f(x, box))
    assert_one_recompile(caplog, f, "hasattr(L['b'], 'scale') == False")


@pytest.mark.parametrize("add", ["attr", "buffer", "parameter", "module"])
def test_hasattr_guard_on_a_module(add):
    """hasattr(module, name) guards answer absent names from nn.Module's
    dicts (no AttributeError per call): a name that appears later as an
    attribute, buffer, parameter or submodule recompiles."""
    m = torch.nn.Linear(3, 3)

    def f(x, m):
        return x + 1 if hasattr(m, "extra") else x - 1

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x, m), f(x, m))
    if add == "attr":
        m.extra = 1
    elif add == "buffer":
        m.register_buffer("extra", torch.ones(1))
    elif add == "parameter":
        m.extra = torch.nn.Parameter(torch.ones(1))
    else:
        m.extra = torch.nn.ReLU()
    check_same(cf(x, m), f(x, m))
    assert counters()["frames_compiled"] == 2
    del m.extra
    check_same(cf(x, m), f(x, m))


def test_hasattr_guard_on_a_module_with_its_own_getattr():
    """A module class with its own __getattr__ (forwarding to a wrapped
    module, as PEFT does) is asked through hasattr itself."""
    class Wrapper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(3, 3)
            self.forward_names = False

        def __getattr__(self, name):
            if name == "extra" and self.__dict__.get("forward_names"):
                return 1
            return super().__getattr__(name)

    w = Wrapper()

    def f(x, w):
        return x + 1 if hasattr(w, "extra") else x - 1

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x, w), f(x, w))
    w.forward_names = True
    check_same(cf(x, w), f(x, w))
    assert f(x, w)[0] == x[0] + 1
