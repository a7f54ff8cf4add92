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


def test_device_argument_breaks_without_drawing_randoms():
    # a meta run of rand_like(x, device="cpu") would make a real CPU tensor
    # and draw from the random stream while tracing: refused, eager's stream
    # intact
    def f(x):
        return torch.rand_like(x, device="cpu") + x

    x = torch.randn(4, 4)
    assert any("device" in r for r in reasons(f, x))
    torch.manual_seed(3)
    expected = f(x)
    tcjit.reset()
    torch.manual_seed(3)
    check_same(tcjit.compile(f)(x), expected)


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


def test_aten_inplace_overload_breaks():
    def f(x):
        return torch.ops.aten.add_.Tensor(x, x)

    x = torch.randn(3)
    assert any("mutates an input: see issue 12" in r for r in reasons(f, x))


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
