"""Custom torch.autograd.Function subclasses called as cls.apply(...)
(src/tracer/autofn.c).

Where no autograd graph is recorded (no_grad, or no tensor argument
requires grad) the forward is traced into the caller's graph; otherwise
the call is a graph break that runs in Python, so gradients are eager's.
"""
import inspect

import pytest
import torch

import tcjit
from conftest import check_same


class OldStyle(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        ctx.set_materialize_grads(False)
        return torch.tanh(x) * scale + 1

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return g * ctx.scale * (1 - torch.tanh(x) ** 2), None


class NewStyle(torch.autograd.Function):
    @staticmethod
    def forward(x, w, bias=0.5):
        return x * w + bias

    @staticmethod
    def setup_context(ctx, inputs, output):
        x, w, _ = inputs
        ctx.save_for_backward(x, w)
        ctx.out_shape = output.shape

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g * w, g * x, None


class ReturnsInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class ReturnsView(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.t()

    @staticmethod
    def backward(ctx, g):
        return g.t()


class ReturnsMany(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, n):
        ctx.mark_non_differentiable(x)
        return x, x.sum(0), n + 1, "s", [x]

    @staticmethod
    def backward(ctx, *g):
        return g[0], None


class StarArgs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *args):
        ctx.flags = ctx.needs_input_grad
        assert not any(ctx.needs_input_grad)
        return args[0] * args[1] - args[2]

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        return g, g, -g


class KeywordOld(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, a=1.0, b=2.0):
        return x * a + b

    @staticmethod
    def backward(ctx, g):
        return g, None, None


def line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, l in enumerate(lines) if needle in l)


def explain_same(fn, *args):
    """fn through tcjit.explain: one graph, no break, eager's result."""
    expected = fn(*args)
    tcjit.reset()
    ex = tcjit.explain(fn)(*args)
    assert ex.graph_count == 1, [b.reason for b in ex.break_reasons]
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    check_same(ex.result, expected)
    got = tcjit.compile(fn)(*args)
    check_same(got, expected)
    return got, expected


def old_style(x):
    return OldStyle.apply(x.sin(), 2.0).cos()


def new_style(x, w):
    return NewStyle.apply(x, w) * 2


@pytest.mark.parametrize("mode", ["no_grad", "grad_no_inputs"])
def test_old_and_new_style_one_graph(mode):
    x = torch.randn(4, 5)
    w = torch.randn(5)
    if mode == "no_grad":
        x.requires_grad_()   # under no_grad nothing is recorded anyway
        w.requires_grad_()
        with torch.no_grad():
            explain_same(old_style, x)
            explain_same(new_style, x, w)
    else:
        explain_same(old_style, x)
        explain_same(new_style, x, w)


def test_new_style_keyword_and_default():
    def f(x, w):
        return NewStyle.apply(x, w=w) + NewStyle.apply(x, w, 3.0)
    with torch.no_grad():
        explain_same(f, torch.randn(3), torch.randn(3))


def test_old_style_keyword_arguments():
    def f(x):
        return KeywordOld.apply(x, b=3.0, a=0.5) - KeywordOld.apply(x, 2.0)
    explain_same(f, torch.randn(6))


def test_star_args_needs_input_grad_and_once_differentiable():
    def f(x, y):
        return StarArgs.apply(x, y, 1.5).relu()
    explain_same(f, torch.randn(3, 2), torch.randn(2))


def test_returned_input_is_a_view_as_in_eager():
    x = torch.randn(3, 4)

    def f(x):
        return ReturnsInput.apply(x)
    got, expected = explain_same(f, x)
    for t in (got, expected):
        assert t is not x and t._base is x     # eager: x.view_as(x)
        assert not t.requires_grad
    assert got._version == expected._version


def test_returned_input_that_requires_grad_runs_as_eager():
    # eager returns x.detach(): the call runs in Python, with a reason
    x = torch.randn(3, 4, requires_grad=True)

    def f(x):
        return ReturnsInput.apply(x) * 2
    with torch.no_grad():
        expected = f(x)
        tcjit.reset()
        ex = tcjit.explain(f)(x)
        assert ex.graph_break_count == 1
        assert "ReturnsInput" in ex.break_reasons[0].reason
        check_same(tcjit.compile(f)(x), expected)


def test_returned_view_keeps_strides():
    def f(x):
        return ReturnsView.apply(x)
    x = torch.randn(3, 4)
    got, expected = explain_same(f, x)
    assert got._base is x and expected._base is x
    assert got.stride() == (1, 4)


def test_tuple_with_non_tensor_values():
    def f(x):
        return ReturnsMany.apply(x * 2, 3)
    got, expected = explain_same(f, torch.randn(3, 2))
    assert got[0]._base is not None          # a view of the input, as eager
    assert got[4][0] is not got[0] and expected[4][0] is not expected[0]


def test_function_alias_in_a_module():
    gelu = OldStyle.apply

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(4, 4)

        def forward(self, x):
            return gelu(self.lin(x), 0.5)
    m = M()
    with torch.no_grad():
        explain_same(m, torch.randn(2, 4))


def test_inputs_that_require_grad_break_with_eager_gradients():
    def f(x, w):
        y = x * 3
        return (OldStyle.apply(y, 2.0) * w).sum()

    x0 = torch.randn(5)
    w0 = torch.randn(5)
    xe, we = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    f(xe, we).backward()
    tcjit.reset()
    xc, wc = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    ex = tcjit.explain(f)(xc, wc)
    reasons = [b.reason for b in ex.break_reasons]
    # (then forward, which the real apply calls, is compiled as a frame of
    # its own: its writes on the real ctx are breaks of that frame)
    assert ex.graph_break_count >= 1, reasons
    assert reasons[0] == ("custom autograd.Function OldStyle with inputs "
                          "that require grad (its backward is not traced "
                          "yet)")
    assert ex.break_reasons[0].lineno == line_of(f, "OldStyle.apply")
    xc, wc = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    loss = tcjit.compile(f)(xc, wc)
    loss.backward()
    torch.testing.assert_close(xc.grad, xe.grad)
    torch.testing.assert_close(wc.grad, we.grad)


def test_new_style_with_grad_breaks_and_backpropagates():
    def f(x, w):
        return NewStyle.apply(x, w).sum()
    x = torch.randn(4, requires_grad=True)
    w = torch.randn(4, requires_grad=True)
    f(x, w).backward()
    ge = (x.grad.clone(), w.grad.clone())
    x.grad = w.grad = None
    tcjit.reset()
    with pytest.raises(tcjit.Unsupported, match="autograd.Function NewStyle "
                       "with inputs that require grad"):
        tcjit.compile(f, fullgraph=True)(x, w)
    assert x.grad is None
    tcjit.compile(f)(x, w).backward()
    torch.testing.assert_close((x.grad, w.grad), ge)


class Dirty(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.add_(1)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class DirtyNotReturned(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x + 1

    @staticmethod
    def backward(ctx, g):
        return g


def test_mark_dirty_returns_the_input_itself():
    def f(x):
        y = Dirty.apply(x)
        return y, y * 2

    x0 = torch.randn(3)
    xe, xc = x0.clone(), x0.clone()
    expected = f(xe)
    tcjit.reset()
    ex = tcjit.explain(f)(x0.clone())
    assert ex.graph_count == 1 and ex.graph_break_count == 0, \
        [b.reason for b in ex.break_reasons]
    got = tcjit.compile(f)(xc)
    check_same(got, expected)
    check_same(xc, xe)
    assert got[0] is xc and expected[0] is xe
    assert xc._version == xe._version        # the add_ and mark_dirty


def test_mark_dirty_of_an_input_not_returned_raises_as_eager():
    def f(x):
        return DirtyNotReturned.apply(x) * 2
    xe, xc = torch.ones(3), torch.ones(3)
    with pytest.raises(RuntimeError, match="marked as dirty") as ee:
        f(xe)
    tcjit.reset()
    with pytest.raises(RuntimeError, match="marked as dirty"):
        tcjit.compile(f)(xc)
    check_same(xc, xe)                       # written once, as in eager
    with pytest.raises(tcjit.Unsupported, match="DirtyNotReturned marks "
                       "dirty a tensor"):
        tcjit.compile(f, fullgraph=True)(torch.ones(3))


def test_bloom_under_no_grad_is_one_graph():
    transformers = pytest.importorskip("transformers")
    from tests.sweeps.hf import TINY
    torch.manual_seed(0)
    model = transformers.BloomModel(transformers.BloomConfig(**TINY)).eval()
    ids = torch.randint(0, 100, (2, 16))
    with torch.no_grad():
        expected = model(ids).last_hidden_state
        tcjit.reset()
        ex = tcjit.explain(model)(ids)
        assert ex.graph_break_count == 0, [b.reason for b in
                                           ex.break_reasons][:3]
        assert ex.graph_count == 1
        got = tcjit.compile(model)(ids).last_hidden_state
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)
