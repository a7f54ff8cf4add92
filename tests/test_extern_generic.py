"""Generic extern nodes (issue 11): any torch op outside the registry stays
in the graph as one node that calls torch at run time, with its result's
metadata from a meta run at trace time (src/tracer/externcall.c,
src/runtime/extern_table.c)."""
import pytest
import torch

import tcjit
from conftest import check_same, run_both


def explain(fn, *args):
    return tcjit.explain(fn)(*args)


def whole(fn, *args):
    """fn is one graph without breaks."""
    ex = explain(fn, *args)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, \
        [b.reason for b in ex.break_reasons]
    return ex


def reasons(fn, *args):
    return [b.reason for b in explain(fn, *args).break_reasons]


@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_extern_between_pointwise_chains(backend):
    # cumsum is not a registry op: it runs as torch's own between two fused
    # chains; values and strides as eager (the input is transposed)
    def f(x):
        return (x.sin() * 2).cumsum(1).cos() + 1

    x = torch.randn(6, 9).t()
    run_both(f, x, backend=backend, expect_compiled=True)
    whole(f, x)


@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_tuple_outputs(backend):
    def f(x):
        v, i = torch.sort(x * 2, dim=0, descending=True)
        return v + 1, i

    def g(x):
        r = torch.topk(x.exp(), 3)
        return r.values * r.indices, r

    def h(x):
        return torch.cummax(x, 1)

    x = torch.randn(5, 7)
    for fn in (f, g, h):
        run_both(fn, x, backend=backend, expect_compiled=True)
        whole(fn, x)


def test_structseq_result_type():
    def f(x):
        return torch.sort(x)

    x = torch.randn(4, 3)
    r = tcjit.compile(f)(x)
    assert type(r) is torch.return_types.sort
    check_same(tuple(r), tuple(f(x)))


def test_view_returning_extern_aliases_input():
    # Tensor.diagonal / unfold are not registry ops: their result is a view
    # of the input in eager, so it must be one here too
    def f(x):
        return x.diagonal(), x.unfold(0, 2, 1)

    x = torch.randn(4, 4)
    run_both(f, x, expect_compiled=True)
    whole(f, x)
    d, u = tcjit.compile(f)(x)
    x[1, 1] = 100.0
    assert d[1].item() == 100.0 and u[1, 1, 0].item() == 100.0


def test_view_of_computed_node():
    def f(x):
        return (x + 1).diagonal(offset=1) * 2

    x = torch.randn(5, 5)
    run_both(f, x, expect_compiled=True)
    whole(f, x)


def test_extern_returning_self_is_identity():
    def f(x):
        return x.contiguous(memory_format=torch.contiguous_format)

    x = torch.randn(3, 3)
    assert tcjit.compile(f)(x) is x


def test_rng_keeps_eager_stream():
    # two equal calls of an RNG op are neither merged nor reordered, and an
    # unused one still consumes the stream
    def f(x):
        torch.rand_like(x)
        a = torch.rand_like(x)
        b = torch.bernoulli(x.sigmoid())
        c = torch.rand_like(x)
        return a - c, b, torch.dropout(x, 0.5, True)

    x = torch.randn(8, 8)
    whole(f, x)
    cf = tcjit.compile(f)
    for seed in (0, 1):
        torch.manual_seed(seed)
        expected = f(x)
        torch.manual_seed(seed)
        check_same(cf(x), expected)
        assert expected[0].abs().sum() > 0


def test_mutation_breaks_with_reason():
    def f(x):
        return x.cumsum_(0)

    def g(x, y):
        return torch.cumsum(x, 0, out=y)

    def h(x, y):
        return torch.ops.aten.cumsum.out(x, 0, out=y)

    x = torch.randn(3, 4)
    # Tensor.cumsum_ and out= of a torch function are their out-of-place
    # forms written back (test_mutation.py); an aten out overload breaks
    assert reasons(f, x.clone()) == []
    assert reasons(g, x, torch.empty(3, 4)) == []
    assert any("mutates an input: see issue 12" in r
               for r in reasons(h, x, torch.empty(3, 4)))
    y1, y2 = x.clone(), x.clone()
    f(y1)
    tcjit.compile(f)(y2)
    assert torch.equal(y1, y2)


def test_data_dependent_shape_breaks_with_reason():
    def f(x):
        return torch.nonzero(x > 0) + 1

    x = torch.randn(5, 5)
    run_both(f, x)
    assert any("output shape may depend on data" in r for r in reasons(f, x))


def test_meta_error_is_eagers_error():
    # cumsum over a dim out of range: meta raises, the frame runs eagerly and
    # raises torch's own error
    def f(x):
        return torch.cumsum(x.sin(), 5)

    run_both(f, torch.randn(3, 4))


def test_run_time_error_is_raised():
    # an index out of range is only seen on the data: the node raises it
    def f(x, i):
        return torch.index_select(x * 2, 0, i) + 1

    x = torch.randn(4, 3)
    run_both(f, x, torch.tensor([0, 2]), expect_compiled=True)
    run_both(f, x, torch.tensor([0, 9]))


def test_meta_cache_hits_on_retrace():
    def f(x):
        return torch.special.erfcx(x.sin()) + 1

    x = torch.randn(7, 3)
    f_c = tcjit.compile(f)
    f_c(x)
    before = tcjit.counters()
    tcjit.reset()
    tcjit.compile(f)(x)
    after = tcjit.counters()
    assert after["extern_meta_runs"] == before["extern_meta_runs"]
    assert after["extern_meta_hits"] > before["extern_meta_hits"]


def test_constants_of_equal_value_but_other_type():
    # 2 and 2.0 (and True) compare equal: the interned call must tell them
    # apart (pow of an int tensor: int64 vs float32 result)
    def f(x):
        return torch.float_power(x, 2), torch.xlogy(x, 2.0)

    x = torch.arange(1, 5)
    run_both(f, x, expect_compiled=True)


def test_list_of_tensors_argument():
    def f(a, b):
        return torch.block_diag(a * 2, b) + 1, torch.cartesian_prod(a[0], b[0])

    run_both(f, torch.randn(2, 2), torch.randn(3, 3), expect_compiled=True)


CPU = torch.device("cpu")


def _same_random_stream(f, *args):
    """f compiled gives eager's values, and leaves the random stream where
    eager leaves it (its meta run at trace time draws nothing)."""
    torch.manual_seed(3)
    expected, after = f(*args), torch.rand(3)
    tcjit.reset()
    torch.manual_seed(3)
    got, got_after = tcjit.compile(f)(*args), torch.rand(3)
    check_same(got, expected)
    check_same(got_after, after)


def test_device_argument_stays_in_graph_without_drawing_randoms():
    # the meta run of rand_like(x, device="cpu") gets "meta" for the device:
    # it makes no CPU tensor and draws nothing while tracing
    def f(x):
        return torch.rand_like(x, device="cpu") + x

    def g(x):
        return x.to("cpu", torch.float64) * 2, x.to(CPU)

    x = torch.randn(4, 4)
    whole(f, x)
    _same_random_stream(f, x)
    whole(g, x)
    run_both(g, x, expect_compiled=True)


def test_device_argument_of_another_device_breaks():
    # (a CUDA device on a CPU graph: tests/gpu)
    def f(x):
        return torch.rand_like(x, device="meta"), torch.rand_like(x)

    x = torch.randn(4)
    assert any("rand_like with an argument it cannot take: a device other "
               "than 'cpu' or 'cuda:N'" in r
               for r in reasons(f, x))
    tcjit.reset()
    torch.manual_seed(0)
    got = tcjit.compile(f)(x)
    torch.manual_seed(0)
    expected = f(x)
    assert got[0].device.type == "meta" and got[0].shape == x.shape
    check_same(got[1], expected[1])


def test_factories_without_tensor_arguments():
    # tensor factories are extern nodes even with no tensor argument: the
    # frame is one graph (no eager fallback), RNG factories keep eager's
    # random stream
    def rnd():
        return torch.randn(3, 4) * 2, torch.randint(0, 5, (6,))

    def lin():
        return torch.linspace(0, 1, 5, device="cpu"), torch.eye(3)

    def window():
        return torch.signal.windows.gaussian(6, device=CPU)

    for f in (rnd, lin, window):
        tcjit.reset()
        ex = explain(f)
        assert ex.graph_count == 1 and ex.graph_break_count == 0, f
        assert tcjit.counters()["eager_fallbacks"] == 0, f
        _same_random_stream(f)


def test_unused_constant_factories_are_dropped_random_ones_run():
    """HF DynamicCache's keys start as torch.tensor([]) and are replaced
    by cat([keys, k]) (which skips the empty operand): the unused factory
    call is not made on every call.  An unused random factory still draws
    (eager's stream after the call)."""
    def f(x):
        keys = torch.tensor([], dtype=x.dtype)
        keys = torch.cat([keys, x * 2], dim=-2)
        torch.zeros(3)
        return keys + 1

    def g(x):
        torch.randn(3)
        return x + 1

    x = torch.randn(2, 3, 4)
    ex = explain(f, x)
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    assert "extern(" not in str(ex.graphs[0])
    check_same(tcjit.compile(f)(x), f(x))
    tcjit.reset()
    assert "extern(" in str(explain(g, x).graphs[0])
    cg = tcjit.compile(g)
    torch.manual_seed(0)
    g(x)
    want = torch.rand(2)
    torch.manual_seed(0)
    cg(x)
    assert torch.equal(torch.rand(2), want)


def test_no_tensor_call_that_is_not_a_factory_is_not_run_while_tracing():
    # torch.manual_seed has no tensor argument and is no factory: never run
    # by a meta run (it would reseed at trace time)
    def f(x):
        torch.manual_seed(7)
        return x + torch.rand(2)

    x = torch.zeros(2)
    torch.manual_seed(0)
    expected = f(x)
    tcjit.reset()
    torch.manual_seed(0)
    check_same(tcjit.compile(f)(x), expected)


def test_factory_requiring_grad_breaks():
    def f(x):
        return torch.ones(3, requires_grad=True) * 0 + torch.arange(
            3.0, requires_grad=True) + x

    x = torch.zeros(3)
    assert any("requires grad" in r or "requires_grad" in r
               for r in reasons(f, x))
    run_both(f, x)


def test_memory_format_argument_of_the_frame():
    # a memory format the frame was given (a lambda's **kwargs, as OpInfo
    # passes it) is a guarded constant of the extern call
    def f(x, **kw):
        return x.bfloat16(**kw) * 2

    x = torch.randn(3, 4)
    for mf in (torch.contiguous_format, torch.preserve_format):
        tcjit.reset()
        ex = tcjit.explain(f)(x, memory_format=mf)
        assert ex.graph_break_count == 0, ex.break_reasons
        check_same(tcjit.compile(f)(x, memory_format=mf),
                   f(x, memory_format=mf))
    # another memory format: the guard fails, a recompile, eager's answer
    cf = tcjit.compile(f)
    y = torch.randn(2, 3, 4, 5)
    check_same(cf(y, memory_format=torch.channels_last),
               f(y, memory_format=torch.channels_last))


def test_layout_identity_check_folds():
    # `layout is not torch.strided` (torch.signal.windows' argument checks):
    # torch.layout objects are singletons, so `is` folds
    def f(x, layout=torch.strided):
        if layout is not torch.strided:
            raise ValueError("strided only")
        return x + 1

    whole(f, torch.randn(3))


def test_registry_op_with_other_arguments_is_extern():
    # the registry's div / addmm refuse rounding_mode / a float beta: torch
    # computes those calls, in the graph
    def f(x, a, b):
        return (torch.div(x * 3, 2, rounding_mode="floor").exp()
                + torch.addmm(x, a, b, beta=0.5))

    args = (torch.randn(3, 3), torch.randn(3, 4), torch.randn(4, 3))
    run_both(*([f] + list(args)), expect_compiled=True)
    whole(f, *args)


def test_method_loaded_as_value():
    def f(x):
        m = x.cumsum
        g = (lambda t, *a, **k: t.float(*a, **k))
        return m(0) + 1, g(x, memory_format=torch.preserve_format)

    x = torch.randn(3, 4)
    run_both(f, x, expect_compiled=True)
    whole(f, x)


def test_aten_overloads():
    def f(x):
        y = torch.ops.aten.cumsum.default(x.sin(), 1)
        return torch.ops.aten._safe_softmax.default(y, 0) + 1

    x = torch.randn(4, 5)
    run_both(f, x, expect_compiled=True)
    whole(f, x)


SOFTMAX_BACKWARD = torch.ops.aten._softmax_backward_data


def test_aten_packets():
    # an OpOverloadPacket (no .default), called directly or through a
    # global, as OpInfo's entries call them
    def f(g, y):
        return SOFTMAX_BACKWARD(g * 2, y, 0, torch.float32) + 1, \
            torch.ops.aten.cumsum(y, 1)

    g, y = torch.randn(4, 5), torch.randn(4, 5).softmax(0)
    run_both(f, g, y, expect_compiled=True)
    whole(f, g, y)


def test_aten_inplace_overload_breaks():
    def f(x):
        return torch.ops.aten.add_.Tensor(x, x)

    def g(x):
        return torch.ops.aten.add_(x, x)

    x = torch.randn(3)
    assert any("mutates an input: see issue 12" in r for r in reasons(f, x))
    assert any("mutates an input: see issue 12" in r for r in reasons(g, x))


def test_structseq_fields_by_name():
    # a structseq's fields are its own: eigh's .eigenvalues; qr has no
    # .values (eager raises AttributeError, so must tcjit)
    def f(x):
        r = torch.linalg.eigh(x @ x.T + 4 * torch.eye(4))
        return r.eigenvalues + 1, r.eigenvectors.abs()

    def g(x):
        return torch.linalg.qr(x).values

    x = torch.randn(4, 4)
    run_both(f, x)
    run_both(g, x)


def test_unused_extern_in_a_graph_without_outputs_still_runs():
    # the segment has no tensor result, but its extern node raises (abs of
    # bool) or draws from the random stream: it must run
    def f(a):
        a.abs()
        return 1

    def g(x):
        torch.rand_like(x)
        return 1

    run_both(f, torch.tensor([False]))
    x = torch.randn(3)
    torch.manual_seed(0)
    g(x)
    expected = torch.rand(3)
    torch.manual_seed(0)
    tcjit.compile(g)(x)
    assert torch.equal(torch.rand(3), expected)


def test_native_layer_norm_reduced_float_on_cpu_breaks():
    # the CPU kernel returns mean and rstd as bfloat16, the meta function
    # as float32: a graph built from the meta run would expect float32
    def f(x):
        return torch.native_layer_norm(x * 2, [4], None, None, 1e-5)

    x = torch.randn(3, 4, dtype=torch.bfloat16)
    assert any("differs from the CPU kernel's for float16 / bfloat16" in r
               for r in reasons(f, x))
    run_both(f, x)
    whole(f, x.float())


GETITEM = torch.Tensor.__getitem__
SLICE = slice(1, None, 2)
ALL = slice(None)


def test_tensor_getitem_called_as_a_function():
    # Tensor.__getitem__ (a slot wrapper) with slices and lists: basic
    # indexing is a view of the operand, as in eager
    def f(x):
        return GETITEM(x, SLICE), GETITEM(x * 2, [0, 2]), \
            GETITEM(x, (ALL, 1))

    x = torch.randn(4, 5)
    run_both(f, x, expect_compiled=True)
    whole(f, x)
    r = tcjit.compile(f)(x)
    assert r[0]._base is x and r[2]._base is x


def test_layout_and_conjugate_transpose_attributes():
    # a graph's tensors are dense and real: x.layout is torch.strided
    # (torch.masked's checks compare it), x.H / x.mH are x.T / x.mT
    def f(x, y):
        dense = x.layout == torch.strided and x.layout is torch.strided
        return x.H * 2, y.mH + 1, dense

    def h(y):
        return y.H  # eager raises: H is for matrices only

    x, y = torch.randn(3, 4), torch.randn(2, 3, 4)
    run_both(f, x, y, expect_compiled=True)
    whole(f, x, y)
    with pytest.raises(RuntimeError):
        tcjit.compile(h)(y)


def test_layout_argument_of_the_frame_is_guarded():
    def f(x, layout):
        if layout is torch.strided:
            return x + 1
        return x - 1

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x, torch.strided), x + 1)
    check_same(cf(x, torch.sparse_coo), x - 1)


def test_string_that_only_starts_like_a_device_is_a_constant():
    # "hip..." is an einsum equation here, not the device "hip"
    def f(a, b):
        return torch.einsum("hip,pj->hij", a * 2, b)

    a, b = torch.randn(2, 3, 4), torch.randn(4, 5)
    run_both(f, a, b, expect_compiled=True)
    whole(f, a, b)


def test_op_without_meta_kernel_runs_on_fake_tensors():
    # geqrf and histogram have no meta kernel: their metadata comes from
    # torch's FakeTensorMode (the kernel on zeros of the operands' sizes);
    # nonzero's output shape depends on the data (torch's tag): a break;
    # nothing draws from the random stream while tracing
    def f(x):
        a, tau = torch.geqrf(x * 2)
        hist, edges = torch.histogram(x.flatten() + 1, 5)
        return a + 1, tau, hist, edges

    def g(x):
        return torch.nonzero(x > 0)

    x = torch.randn(5, 3)
    whole(f, x)
    run_both(f, x, expect_compiled=True)
    _same_random_stream(f, x)
    assert any("no meta kernel (output shape may depend on data): "
               "DynamicOutputShapeException" in r for r in reasons(g, x))
    run_both(g, x)


@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_complex_values_between_externs(backend):
    # complex tensors are graph values that only torch's own ops (generic
    # externs) make and take: fft -> abs fuses around them, a complex
    # result is returned as is
    def f(x):
        c = torch.fft.rfft(x * 2)
        return torch.fft.irfft(torch.fft.fft(c).conj_physical()) + 1, c

    def g(x):
        return torch.fft.fft2(x).abs().sin() * 2, torch.polar(x.abs(), x)

    x = torch.randn(4, 8)
    for fn in (f, g):
        run_both(fn, x, backend=backend, expect_compiled=True)
        whole(fn, x)


def test_complex_value_reaching_a_kernel_breaks():
    # a complex operand of a fused op (tcjit's kernels compute real dtypes
    # only) is a break with a reason, and the value is eager's
    def f(x):
        return torch.fft.fft(x) + 1

    def g(x):
        return torch.view_as_complex(torch.stack([x, x], -1)) * 2

    x = torch.randn(8)
    for fn in (f, g):
        run_both(fn, x)
        assert explain(fn, x).graph_break_count >= 1
    assert any("complex64" in r for r in reasons(f, x))


# ---- custom ops (torch.library.custom_op) -----------------------------------------

_GROUPED_CALLS = []


@torch.library.custom_op("tcjit_test::grouped_rows", mutates_args=())
def _grouped_rows(x: torch.Tensor, w: torch.Tensor,
                  offs: torch.Tensor) -> torch.Tensor:
    # transformers' grouped_mm_fallback: data-dependent inside the op
    _GROUPED_CALLS.append(1)
    out, start = [], 0
    for i, end in enumerate(offs.tolist()):
        out.append(x[start:end] @ w[i])
        start = end
    return torch.cat(out)


@_grouped_rows.register_fake
def _(x, w, offs):
    return x.new_empty(x.shape[0], w.shape[2])


def test_custom_op_with_a_fake_is_an_extern_and_stays_opaque():
    w = torch.randn(2, 4, 3)

    def f(x, offs):
        y = torch.ops.tcjit_test.grouped_rows(x.relu(), w, offs)
        return y * 2 + 1
    x, offs = torch.randn(5, 4), torch.tensor([2, 5])
    whole(f, x, offs)
    run_both(f, x, offs, expect_compiled=True)
    # its Python body ran as the op's inside, never traced: one call each
    _GROUPED_CALLS.clear()
    tcjit.compile(f)(x, offs)
    assert len(_GROUPED_CALLS) == 1
