"""Custom torch.autograd.Function subclasses called as cls.apply(...)
(src/tracer/autofn.c).

The forward is traced into the caller's graph.  Where the call records
an autograd graph (grad mode on, a tensor argument requires grad), the
compiled node's backward calls the Function's own backward: gradients,
double backward, needs_input_grad, non-differentiable outputs and
materialized gradients are eager's; what forward stores on ctx that its
backward cannot be given is a graph break with a reason.
"""
import inspect

import pytest
import torch

import tcjit
from conftest import run_both, check_same


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


def _apply_takes_keywords():
    try:
        with torch.no_grad():
            NewStyle.apply(torch.ones(1), w=torch.ones(1))
    except TypeError:
        return False
    return True


APPLY_KEYWORDS = _apply_takes_keywords()


def with_keywords(check, f, *args):
    """check(f, *args) where Function.apply takes keyword arguments (torch
    2.13); before that (the H200's torch 2.11) eager raises TypeError
    "apply() takes no keyword arguments", and tcjit must raise it too."""
    if APPLY_KEYWORDS:
        return check(f, *args)
    run_both(f, *args)


def test_new_style_keyword_and_default():
    def f(x, w):
        return NewStyle.apply(x, w=w) + NewStyle.apply(x, w, 3.0)
    with torch.no_grad():
        with_keywords(explain_same, f, torch.randn(3), torch.randn(3))


def test_old_style_keyword_arguments():
    def f(x):
        return KeywordOld.apply(x, b=3.0, a=0.5) - KeywordOld.apply(x, 2.0)
    with_keywords(explain_same, f, torch.randn(6))


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


def test_returned_input_that_requires_grad_is_detached_as_in_eager():
    # under no_grad eager returns x.detach(): no view of x, no grad
    x = torch.randn(3, 4, requires_grad=True)

    def f(x):
        return ReturnsInput.apply(x), ReturnsInput.apply(x * 2)
    with torch.no_grad():
        got, expected = explain_same(f, x)
    for t in got + expected:
        assert not t.requires_grad and t.grad_fn is None
    assert expected[0]._base is None
    got[0].add_(1)                       # shares x's memory, as eager's
    torch.testing.assert_close(x, expected[0])


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


def grad_same(fn, *args, double=False):
    """fn compiled under grad mode: one graph, no break; eager's outputs,
    their requires_grad, and the gradients of every input that requires
    grad (double: and the gradients of those gradients)."""
    def run(f):
        xs = [a.detach().clone().requires_grad_(a.requires_grad)
              if isinstance(a, torch.Tensor) else a for a in args]
        out = f(*xs)
        outs = out if isinstance(out, tuple) else (out,)
        ts = [o for o in outs if isinstance(o, torch.Tensor)
              and o.requires_grad]
        leaves = [x for x in xs if isinstance(x, torch.Tensor)
                  and x.requires_grad]
        loss = sum((t * torch.linspace(-1, 2, t.numel()).view_as(t)).sum()
                   for t in ts)
        grads = torch.autograd.grad(loss, leaves, create_graph=double,
                                    allow_unused=True)
        if double:
            grads = grads + torch.autograd.grad(
                sum(g.pow(2).sum() for g in grads if g is not None),
                leaves, allow_unused=True)
        return outs, [o.requires_grad for o in outs
                      if isinstance(o, torch.Tensor)], grads
    expected = run(fn)
    tcjit.reset()
    ex = tcjit.explain(fn)(*args)
    assert ex.graph_count == 1, [b.reason for b in ex.break_reasons]
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    got = run(tcjit.compile(fn))
    for e, g in zip(expected[0], got[0]):
        if isinstance(e, torch.Tensor):
            torch.testing.assert_close(g, e)
        else:
            assert g == e
    assert got[1] == expected[1]
    torch.testing.assert_close(got[2], expected[2])
    return got


def leaf(*shape):
    return torch.randn(*shape, requires_grad=True)


def test_old_and_new_style_under_grad():
    # saved tensors, a constant on ctx, set_materialize_grads(False), a
    # non-tensor argument; setup_context and a default argument
    def f(x, w):
        return (OldStyle.apply(x * 3, 2.0) * w).sum(), new_style(x, w)
    grad_same(f, leaf(5), leaf(5))


def test_inputs_without_grad_and_keywords_under_grad():
    def f(x, w):
        return NewStyle.apply(x, w=w) + KeywordOld.apply(x, b=3.0, a=w)
    with_keywords(grad_same, f, leaf(4), torch.randn(4))


class TwoOutputs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, k):
        ctx.save_for_backward(x)
        ctx.k = k
        s = x * y
        ctx.mark_non_differentiable(s.sign())  # not returned: ignored
        return s, (x + y).sum(0) * k, k + 1, "name"

    @staticmethod
    def backward(ctx, gs, gsum, gk, gname):
        x, = ctx.saved_tensors
        assert gk is None and gname is None
        return gs * x + gsum * ctx.k, gs * 2 + gsum, None


class MarksNonDifferentiable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        i = x.argmax(-1)
        m = x.amax(-1)
        ctx.mark_non_differentiable(i)
        ctx.save_for_backward(x, i)
        return m, i

    @staticmethod
    def backward(ctx, gm, gi):
        x, i = ctx.saved_tensors
        assert gi is None               # not materialized
        if gm is None:
            return None
        return torch.zeros_like(x).scatter(-1, i[..., None], gm[..., None])


def test_multiple_and_non_tensor_outputs():
    def f(x, y):
        s, t, k, name = TwoOutputs.apply(x.sin(), y, 3)
        return s * k, t, len(name)
    with pytest.raises(tcjit.Unsupported, match="marks non-differentiable"):
        tcjit.compile(f, fullgraph=True)(leaf(3, 2), leaf(3, 2))

    def g(x):
        m, i = MarksNonDifferentiable.apply(x * 2)
        return m.exp(), i
    grad_same(g, leaf(3, 5))


class Cube(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, g):
        x, = ctx.saved_tensors
        return 3 * x * x * g


class SavesOutput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(y)
        ctx.x = x                      # a tensor on ctx, not saved
        return y

    @staticmethod
    def backward(ctx, g):
        y, = ctx.saved_tensors
        return g * y + 0 * ctx.x


def test_returns_an_input_saves_its_output_tensor_attribute():
    def f(x, w):
        return ReturnsInput.apply(x) * w, SavesOutput.apply(x * w)
    grad_same(f, leaf(4), leaf(4))


class OnceDifferentiable(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(x, y)
        return x * y

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y, g * x


def test_double_backward_and_once_differentiable():
    grad_same(lambda x: Cube.apply(x.cos()) + SavesOutput.apply(x),
              leaf(5), double=True)

    def f(x, y):
        return OnceDifferentiable.apply(x, y).relu().sum()
    x, y = leaf(3), leaf(3)
    for fn in (f, tcjit.compile(f)):
        gx, = torch.autograd.grad(fn(x, y), x, create_graph=True)
        with pytest.raises(RuntimeError, match="once_differentiable"):
            gx.sum().backward()


class NeedsInputGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        return x * y

    @staticmethod
    def backward(ctx, g):
        NeedsInputGrad.seen.append(ctx.needs_input_grad)
        gx, gy = ctx.needs_input_grad
        return g * 2 if gx else None, g * 3 if gy else None


def test_needs_input_grad_in_backward():
    NeedsInputGrad.seen = []
    grad_same(lambda x, y: NeedsInputGrad.apply(x, y), torch.randn(3),
              leaf(3))
    assert NeedsInputGrad.seen == [(False, True)] * 2


class KeepsAnObject(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.act, ctx.x = torch.tanh, x
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, g):
        return g * (1 - ctx.act(ctx.x) ** 2)


def test_what_backward_cannot_get_is_a_break_with_eager_gradients():
    def f(x, w):
        y = x * 3
        return (KeepsAnObject.apply(y) * w).sum()
    x0, w0 = torch.randn(5), torch.randn(5)
    xe, we = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    f(xe, we).backward()
    tcjit.reset()
    ex = tcjit.explain(f)(x0.clone().requires_grad_(),
                          w0.clone().requires_grad_())
    reasons = [b.reason for b in ex.break_reasons]
    assert reasons[0] == ("custom autograd.Function KeepsAnObject: forward "
                          "stores builtin_function_or_method as ctx.act "
                          "(tcjit gives its backward tensors and constants "
                          "only)"), reasons
    assert ex.break_reasons[0].lineno == line_of(f, "KeepsAnObject.apply")
    xc, wc = x0.clone().requires_grad_(), w0.clone().requires_grad_()
    tcjit.compile(f)(xc, wc).backward()
    torch.testing.assert_close((xc.grad, wc.grad), (xe.grad, we.grad))


class WrongCount(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        return x * k

    @staticmethod
    def backward(ctx, g):
        return g


def test_backward_errors_are_eagers():
    def f(x):
        return WrongCount.apply(x, 2.0).sum()
    for fn in (f, tcjit.compile(f)):
        with pytest.raises(RuntimeError, match="incorrect number of "
                           "gradients"):
            fn(leaf(3)).backward()


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


def test_bloom_training_is_one_graph_with_eager_gradients():
    # BLOOM's MLP in train mode is a custom Function (GeLUFunction)
    transformers = pytest.importorskip("transformers")
    from tests.sweeps.hf import TINY
    torch.manual_seed(0)
    model = transformers.BloomModel(transformers.BloomConfig(**TINY)).train()
    ids = torch.randint(0, 100, (2, 8))

    def grads(m):
        model.zero_grad(set_to_none=True)
        out = m(ids).last_hidden_state
        out.pow(2).mean().backward()
        return out, [p.grad for p in model.parameters()]
    expected = grads(model)
    tcjit.reset()
    ex = tcjit.explain(model)(ids)
    assert ex.graph_break_count == 0, [b.reason for b in
                                       ex.break_reasons][:3]
    got = grads(tcjit.compile(model))
    torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-4)


def test_results_written_in_place_before_backward():
    def f(x):
        return Cube.apply(x * 2), SavesOutput.apply(x)
    x0 = torch.randn(4)
    got = []
    for fn in (f, tcjit.compile(f)):
        x = x0.clone().requires_grad_()
        c, s = fn(x)
        c.mul_(2)                 # eager allows it: Cube saved its input
        c.sum().backward(retain_graph=True)
        s.add_(1)                 # SavesOutput saved this result
        with pytest.raises(RuntimeError, match="modified by an inplace"):
            s.sum().backward()
        got.append(x.grad)
    torch.testing.assert_close(got[1], got[0])
