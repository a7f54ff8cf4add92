"""In-place writes in graphs that require grad (issue 13, docs/training.md
"In-place writes under grad"): differential tests against eager.

Each case runs a function eagerly and under tcjit on fresh, equal inputs
and compares: the outputs' values, requires_grad and grad_fn presence; the
written inputs' values, requires_grad, grad_fn presence and version
counters; the errors eager raises (a leaf that requires grad written in
place); and the gradient of every leaf, through torch.autograd.grad and
through .backward() + .grad, of a random weighting of every output and
every input that requires grad (so a gradient that flows only through a
written input is checked too).  Each compiled function is called twice:
the second call runs the cached entry.
"""
import itertools

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import tcjit

SHAPE = (4, 3)
IDX = torch.tensor([0, 2])
MASK = torch.tensor([[True, False, True]] * 4)


# ---- the harness ---------------------------------------------------------------

def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return []


def _run(fn, make, compiled):
    """(leaves, args, result or exception, versions before)"""
    leaves, args = make()
    before = [a._version if isinstance(a, torch.Tensor) else None
              for a in args]
    try:
        out = fn(*args)
    except RuntimeError as e:
        out = e
    return leaves, args, out, before


def _state(t):
    return (t.requires_grad, t.grad_fn is None, t.is_leaf)


def _same_run(got, want, atol):
    (la, aa, oa, va), (lb, ab, ob, vb) = got, want
    if isinstance(ob, Exception):
        assert isinstance(oa, Exception), f"eager raised {ob!r}, tcjit not"
        assert str(oa) == str(ob)
        return None
    assert not isinstance(oa, Exception), f"tcjit raised {oa!r}"
    outs_a, outs_b = _tensors(oa), _tensors(ob)
    assert len(outs_a) == len(outs_b)
    for o, r in zip(outs_a, outs_b):
        torch.testing.assert_close(o.detach(), r.detach(), atol=atol,
                                   rtol=atol)
        assert o.requires_grad == r.requires_grad
        assert (o.grad_fn is None) == (r.grad_fn is None)
    for k, (a, b) in enumerate(zip(aa, ab)):
        if not isinstance(b, torch.Tensor):
            continue
        torch.testing.assert_close(a.detach(), b.detach(), atol=atol,
                                   rtol=atol, msg=f"input {k}")
        assert _state(a) == _state(b), f"input {k}: {_state(a)} {_state(b)}"
        # eager moved the counter by its in-place ops: so does tcjit
        assert a._version - va[k] == b._version - vb[k], f"input {k} version"
    return outs_a, outs_b


def _losses(outs_a, outs_b, aa, ab, seed):
    gen = torch.Generator().manual_seed(seed)
    la, lb = 0, 0
    for a, b in list(zip(outs_a, outs_b)) + [
            (x, y) for x, y in zip(aa, ab) if isinstance(y, torch.Tensor)]:
        if b.requires_grad and b.dtype.is_floating_point:
            w = torch.randn(b.shape, generator=gen, dtype=b.dtype)
            la = la + (a * w).sum()
            lb = lb + (b * w).sum()
    return la, lb


def like_eager(fn, make, *, atol=1e-5, calls=2, seed=0):
    """fn compiled and eager on fresh inputs from make() (-> leaves, args):
    the same results, inputs, errors and leaf gradients."""
    cf = tcjit.compile(fn)
    for call in range(calls):
        got, want = _run(cf, make, True), _run(fn, make, False)
        pair = _same_run(got, want, atol)
        if pair is None:
            continue
        la, lb = _losses(*pair, got[1], want[1], seed + call)
        if not isinstance(lb, torch.Tensor):
            continue
        leaves_a, leaves_b = got[0], want[0]
        try:
            gb = torch.autograd.grad(lb, leaves_b, allow_unused=True,
                                     retain_graph=True)
        except RuntimeError as e:
            # eager's backward raises (a saved tensor written in place
            # since): so does tcjit's
            assert "modified by an inplace operation" in str(e), e
            with pytest.raises(RuntimeError, match="modified by an "
                                                   "inplace operation"):
                torch.autograd.grad(la, leaves_a, allow_unused=True)
            continue
        ga = torch.autograd.grad(la, leaves_a, allow_unused=True,
                                 retain_graph=True)
        for k, (x, y) in enumerate(zip(ga, gb)):
            assert (x is None) == (y is None), f"leaf {k}"
            if y is not None:
                torch.testing.assert_close(x, y, atol=atol, rtol=atol,
                                           msg=f"leaf {k}")
        la.backward()
        lb.backward()
        for k, (x, y) in enumerate(zip(leaves_a, leaves_b)):
            assert (x.grad is None) == (y.grad is None), f"leaf {k} .grad"
            if y.grad is not None:
                torch.testing.assert_close(x.grad, y.grad, atol=atol,
                                           rtol=atol, msg=f"leaf {k} .grad")
    return cf


def graphs_and_breaks(fn, *args):
    e = tcjit.explain(fn)(*args)
    return e.graph_count, e.graph_break_count, [str(r.reason)
                                                for r in e.break_reasons]


# ---- generated: write op x target x value x what is returned ----------------

def _w_copy(t, v): t.copy_(v)
def _w_add(t, v): t.add_(v)
def _w_mul(t, v): t.mul_(v)                 # the backward reads t's old value
def _w_sub_alpha(t, v): t.sub_(v, alpha=0.5)
def _w_slice(t, v): t[1:3] = v[1:3]
def _w_column(t, v): t[:, 1] = v[:, 0]
def _w_select(t, v): t[0].add_(v[0])        # through a view of t
def _w_index(t, v): t[IDX] = v[:2]          # index_put
def _w_index_put(t, v): t.index_put_((IDX,), v[:2])
def _w_index_acc(t, v): t.index_put_((IDX,), v[:2], accumulate=True)
def _w_mask(t, v): t[MASK] = v[0, 0]        # a masked write of a 0-d value
def _w_masked_fill(t, v): t.masked_fill_(MASK, 0.5)
def _w_masked_scatter(t, v): t.masked_scatter_(MASK, v)
def _w_where(t, v): t.copy_(torch.where(MASK, v, t))
def _w_addcmul(t, v): t.addcmul_(v, v, value=0.5)
def _w_relu(t, v): t.relu_()
def _w_zero(t, v): t.zero_()
def _w_twice(t, v): t.mul_(2).add_(v)       # two bumps


WRITES = [_w_copy, _w_add, _w_mul, _w_sub_alpha, _w_slice, _w_column,
          _w_select, _w_index, _w_index_put, _w_index_acc, _w_mask,
          _w_masked_fill, _w_masked_scatter, _w_where, _w_addcmul, _w_relu,
          _w_zero, _w_twice]

# the written input: a tensor that needs no grad (a buffer), a non-leaf
# that requires grad, a leaf that does (eager raises), a view of a
# non-leaf (CPython runs it: eager's rules for views)
TARGETS = ["buffer", "nonleaf", "leaf", "view"]
# the value written: computed from a leaf that requires grad, or not
VALUES = ["grad", "const"]
# what the function returns: a read of the written input, an unrelated
# result, the written input itself, views of it (made after the write:
# autograd rebases them onto its new history)
RETURNS = ["read", "other", "itself", "views"]


def _maker(target, value, seed):
    def make():
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(SHAPE, generator=g).requires_grad_()
        w = torch.randn(SHAPE, generator=g).requires_grad_()
        base = torch.randn(SHAPE, generator=g)
        leaves = [x, w]
        if target == "buffer":
            t = base
        elif target == "leaf":
            t = base.requires_grad_()
            leaves.append(t)
        else:
            p = base.requires_grad_()
            leaves.append(p)
            t = p * 1.5 if target == "nonleaf" else (p * 1.5)[:, :]
        c = torch.randn(SHAPE, generator=g)
        return leaves, [t, x if value == "grad" else c, w]
    return make


def _fn(write, ret):
    def f(t, x, w):
        v = x * 2
        write(t, v)
        if ret == "read":
            return t * w + v
        if ret == "other":
            return (v * w).sum()
        if ret == "views":
            return t[0], t.t(), t[1:] * w[1:]
        return t
    return f


CASES = list(itertools.product(WRITES, TARGETS, VALUES, RETURNS))


@pytest.mark.parametrize(
    "write,target,value,ret", CASES,
    ids=[f"{w.__name__[3:]}-{t}-{v}-{r}" for w, t, v, r in CASES])
def test_generated_writes_under_grad(write, target, value, ret):
    seed = abs(hash((write.__name__, target, value, ret))) % 1000
    like_eager(_fn(write, ret), _maker(target, value, seed))


@pytest.mark.parametrize("write", [_w_copy, _w_index, _w_mask, _w_mul,
                                   _w_select, _w_twice],
                         ids=lambda w: w.__name__[3:])
def test_buffer_written_with_a_grad_value_is_one_graph(write):
    """The common cases are compiled, not left to CPython: one graph, no
    break, and the written buffer gets eager's history."""
    f = _fn(write, "read")
    leaves, args = _maker("buffer", "grad", 1)()
    graphs, breaks, why = graphs_and_breaks(f, *args)
    assert (graphs, breaks) == (1, 0), why
    tcjit.reset()
    t = args[0]
    tcjit.compile(f)(*args)
    assert t.requires_grad and t.grad_fn is not None


def test_nonleaf_add_mul_is_one_graph():
    def f(t, x):
        t.add_(x)
        t.mul_(x)
        return t.sum()

    p = torch.randn(5, requires_grad=True)
    x = torch.randn(5, requires_grad=True)
    graphs, breaks, why = graphs_and_breaks(f, p * 2, x)
    assert (graphs, breaks) == (1, 0), why
    like_eager(f, lambda: _nonleaf_and(p, x))


def _nonleaf_and(p, x):
    pa, xa = (p.detach().clone().requires_grad_(),
              x.detach().clone().requires_grad_())
    return [pa, xa], [pa * 2, xa]


# ---- eager's errors ------------------------------------------------------------

@pytest.mark.parametrize("write", [_w_add, _w_copy, _w_zero, _w_index,
                                   _w_select],
                         ids=lambda w: w.__name__[3:])
def test_leaf_that_requires_grad_raises_eagers_error(write):
    def f(t, x):
        write(t, x * 2)
        return t * 3

    cf = tcjit.compile(f)
    for _ in range(2):      # the trace, then the cached entry
        leaf = torch.randn(SHAPE, requires_grad=True)
        before = leaf.detach().clone()
        with pytest.raises(RuntimeError, match="leaf Variable that requires "
                                               "grad is being used in an "
                                               "in-place operation"):
            cf(leaf, torch.randn(SHAPE, requires_grad=True))
        assert torch.equal(leaf.detach(), before)
        assert leaf.grad_fn is None


def test_leaf_written_under_no_grad_is_compiled():
    """Under no_grad eager writes a leaf that requires grad (an
    optimizer's update): no history, no error."""
    def f(p, x):
        y = p.exp() * x      # the backward reads exp(p), not p
        with torch.no_grad():
            p.add_(1)
        return y

    like_eager(f, lambda: _two_leaves())
    graphs, breaks, why = graphs_and_breaks(f, *_two_leaves()[1])
    assert (graphs, breaks) == (1, 0), why


def _seeded(*sizes):
    g = torch.Generator().manual_seed(sum(sizes))
    return [torch.randn(n, generator=g).requires_grad_() for n in sizes]


def _two_leaves():
    g = torch.Generator().manual_seed(3)
    p = torch.randn(5, generator=g).requires_grad_()
    x = torch.randn(5, generator=g).requires_grad_()
    return [p, x], [p, x]


def test_input_saved_then_written_raises_as_eager():
    """x * t saves t, then t.add_(1): eager's backward raises (t was
    modified by an inplace operation); so does tcjit's."""
    def f(t, x):
        y = x * t
        t.add_(1)
        return y

    def make():
        p, x = _seeded(4, 4)
        return [p, x], [p * 2, x]

    for fn in (f, tcjit.compile(f)):
        _, (t, x) = make()
        y = fn(t, x)
        with pytest.raises(RuntimeError, match="modified by an inplace"):
            y.sum().backward()


def test_mixed_grad_modes_on_one_input_break_with_a_reason():
    def f(t, x):
        t.mul_(x)
        with torch.no_grad():
            t.add_(1)
        return x.sum()        # (reading t: test_writes_under_no_grad)

    def make():
        p, x = _seeded(4, 4)
        return [p, x], [p * 2, x]

    graphs, breaks, why = graphs_and_breaks(f, *make()[1])
    assert breaks >= 1 and any("both under grad mode and under" in r
                               for r in why), why
    like_eager(f, make)


# ---- batch norm ----------------------------------------------------------------

def _bn_make(cls, c, affine, seed, shape):
    def make():
        torch.manual_seed(seed)
        m = cls(c, affine=affine)
        # non-trivial running statistics and parameters
        with torch.no_grad():
            m.running_mean.uniform_(-1, 1)
            m.running_var.uniform_(0.5, 2)
            if affine:
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)
        x = torch.randn(*shape).requires_grad_()
        return m, x
    return make


BN = [(nn.BatchNorm1d, (6, 5)), (nn.BatchNorm1d, (6, 5, 7)),
      (nn.BatchNorm2d, (3, 5, 4, 4))]


@pytest.mark.parametrize("cls,shape", BN, ids=["1d", "1d-3", "2d"])
@pytest.mark.parametrize("momentum", [0.1, None])
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_module_train(cls, shape, momentum, affine):
    """BatchNorm in train mode under grad: the running statistics and
    num_batches_tracked move as eager's (no history, version counters as
    eager's), outputs and every gradient as eager's; with the default
    momentum one graph and no break."""
    make = _bn_make(cls, shape[1], affine, 7, shape)
    ma, xa = make()
    mb, xb = make()
    ma.momentum = mb.momentum = momentum
    cm = tcjit.compile(ma)
    for step in range(3):
        xa2 = xa.detach().clone().mul(step + 1).requires_grad_()
        xb2 = xb.detach().clone().mul(step + 1).requires_grad_()
        bufs_a = [ma.running_mean, ma.running_var, ma.num_batches_tracked]
        bufs_b = [mb.running_mean, mb.running_var, mb.num_batches_tracked]
        va = [t._version for t in bufs_a]
        vb = [t._version for t in bufs_b]
        ya, yb = cm(xa2), mb(xb2)
        torch.testing.assert_close(ya, yb, atol=1e-5, rtol=1e-5)
        assert ya.requires_grad and ya.grad_fn is not None
        for k, (a, b) in enumerate(zip(bufs_a, bufs_b)):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6,
                                       msg=f"buffer {k}")
            assert not a.requires_grad and a.grad_fn is None
            assert a._version - va[k] == b._version - vb[k], f"buffer {k}"
        w = torch.randn(ya.shape)
        params_a = [xa2] + list(ma.parameters())
        params_b = [xb2] + list(mb.parameters())
        ga = torch.autograd.grad((ya * w).sum(), params_a, retain_graph=True)
        gb = torch.autograd.grad((yb * w).sum(), params_b, retain_graph=True)
        for a, b in zip(ga, gb):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
        (ya * w).sum().backward()
        (yb * w).sum().backward()
        for a, b in zip(params_a, params_b):
            torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-5)
    if momentum is not None:
        tcjit.reset()
        m, x = make()
        graphs, breaks, why = graphs_and_breaks(m, x)
        assert (graphs, breaks) == (1, 0), why


@pytest.mark.parametrize("ndim", [2, 3, 4])
@pytest.mark.parametrize("affine", [True, False])
@pytest.mark.parametrize("momentum", [0.1, 0.3])
def test_functional_batch_norm_training(ndim, affine, momentum):
    """F.batch_norm(training=True) with running statistics as plain
    tensors: torch's call updates them (eager moves no version counter
    for that), and every gradient is eager's."""
    shape = (5, 3, 4, 2)[:ndim]

    def f(x, rm, rv, w, b):
        return F.batch_norm(x, rm, rv, w, b, training=True,
                            momentum=momentum).relu()

    def make():
        g = torch.Generator().manual_seed(ndim)
        x = torch.randn(shape, generator=g).requires_grad_()
        rm = torch.randn(3, generator=g)
        rv = torch.rand(3, generator=g) + 0.5
        w = (torch.rand(3, generator=g) + 0.5).requires_grad_() \
            if affine else None
        b = torch.randn(3, generator=g).requires_grad_() if affine else None
        leaves = [x] + ([w, b] if affine else [])
        return leaves, [x, rm, rv, w, b]

    like_eager(f, make)


def test_batch_norm_then_buffer_update_in_one_forward():
    """A module that updates a buffer with a value computed from an input
    that requires grad, under no_grad (as an EMA of activations): compiled,
    the buffer gets no history."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.bn = nn.BatchNorm1d(4)
            self.register_buffer("ema", torch.zeros(4))

        def forward(self, x):
            y = self.bn(x)
            with torch.no_grad():
                self.ema.mul_(0.9).add_(y.mean(0), alpha=0.1)
            return y.tanh()

    torch.manual_seed(0)
    ma, mb = M(), M()
    mb.load_state_dict(ma.state_dict())
    x = torch.randn(8, 4)
    cm = tcjit.compile(ma)
    for _ in range(3):
        xa = x.clone().requires_grad_()
        xb = x.clone().requires_grad_()
        ya, yb = cm(xa), mb(xb)
        torch.testing.assert_close(ya, yb, atol=1e-5, rtol=1e-5)
        ya.sum().backward()
        yb.sum().backward()
        torch.testing.assert_close(xa.grad, xb.grad, atol=1e-5, rtol=1e-5)
        for (n, a), b in zip(ma.named_buffers(), mb.buffers()):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6, msg=n)
            assert a.grad_fn is None and not a.requires_grad
    tcjit.reset()
    graphs, breaks, why = graphs_and_breaks(M(), x.clone().requires_grad_())
    assert (graphs, breaks) == (1, 0), why


class _SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, padding=1)
        self.b1 = nn.BatchNorm2d(8)
        self.c2 = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x, target):
        x = F.relu(self.b1(self.c1(x)))
        x = F.relu(self.b2(self.c2(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return F.cross_entropy(self.fc(x), target)


def test_small_cnn_trains_three_sgd_steps_like_eager():
    torch.manual_seed(0)
    eager = _SmallCNN()
    model = _SmallCNN()
    model.load_state_dict(eager.state_dict())
    comp = tcjit.compile(model)
    opt_e = torch.optim.SGD(eager.parameters(), lr=0.1, momentum=0.9)
    opt_c = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    gen = torch.Generator().manual_seed(1)
    for step in range(3):
        x = torch.randn(4, 3, 8, 8, generator=gen)
        t = torch.randint(0, 5, (4,), generator=gen)
        loss_e = eager(x, t)
        loss_c = comp(x, t)
        torch.testing.assert_close(loss_c, loss_e, atol=1e-4, rtol=1e-4)
        loss_e.backward()
        loss_c.backward()
        for (name, pe), pc in zip(eager.named_parameters(),
                                  model.parameters()):
            torch.testing.assert_close(pc.grad, pe.grad, atol=1e-4,
                                       rtol=1e-4, msg=f"{step} {name}")
        for (name, be), bc in zip(eager.named_buffers(), model.buffers()):
            torch.testing.assert_close(bc, be, atol=1e-4, rtol=1e-4,
                                       msg=f"{step} {name}")
        opt_e.step()
        opt_c.step()
        opt_e.zero_grad()
        opt_c.zero_grad()
    tcjit.reset()
    e = tcjit.explain(model)(x, t)
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons


# ---- other shapes of the same thing ------------------------------------------

def test_written_computed_tensor_keeps_its_history():
    """A tensor the graph makes and writes in place: the node's output,
    its version counter as eager's."""
    def f(x):
        y = x * 2
        y.add_(1)
        y.mul_(x)
        return y

    def make():
        x, = _seeded(5)
        return [x], [x]

    like_eager(f, make)


def test_write_into_input_that_the_backward_reads_uses_its_old_value():
    """t.mul_(x) needs t's value before the write for x's gradient: the
    forward keeps a copy (eager keeps original_self)."""
    def f(t, x):
        t.mul_(x)
        return t.sin()

    def make():
        p, x = _seeded(6, 6)
        return [p, x], [p * 3, x]

    like_eager(f, make)
    graphs, breaks, why = graphs_and_breaks(f, *make()[1])
    assert (graphs, breaks) == (1, 0), why


def test_retain_graph_and_second_backward_through_written_input():
    def f(t, x):
        t.copy_(x.exp())
        return t.sum()

    def run(fn):
        x = torch.linspace(-1, 1, 5).requires_grad_()
        t = torch.zeros(5)
        s = fn(t, x)
        (t * 2).sum().backward(retain_graph=True)
        s.backward()
        return x.grad, t

    ga, ta = run(tcjit.compile(f))
    gb, tb = run(f)
    torch.testing.assert_close(ga, gb)
    assert type(ta.grad_fn).__name__ == type(tb.grad_fn).__name__


def test_double_backward_through_written_input_says_so():
    """create_graph=True replays the graph under torch's autograd from its
    inputs, which a write-back has changed: a RuntimeError that says so,
    never a wrong gradient."""
    def f(t, x):
        t.add_(x)
        return (t * x).sum()

    p, x = _seeded(4, 4)
    s = tcjit.compile(f)(p * 2, x)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(s, x, create_graph=True)


@pytest.mark.parametrize("create_graph", [False, True])
def test_replayed_backward_does_not_update_running_stats_again(
        create_graph):
    """A backward that replays the graph under torch's autograd (an op
    without a rule; create_graph=True) calls torch.batch_norm again: the
    replay reads copies of the inputs that need no grad, so the running
    statistics move once, as in eager."""
    def f(x, rm, rv):
        return F.batch_norm(x, rm, rv, training=True).sin().prod()

    def run(fn):
        rm, rv = torch.zeros(3), torch.ones(3)
        x = torch.linspace(-1, 1, 12).reshape(4, 3).requires_grad_()
        y = fn(x, rm, rv)
        g, = torch.autograd.grad(y, x, create_graph=create_graph)
        return g, rm, rv

    for a, b in zip(run(tcjit.compile(f)), run(f)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("create_graph", [False, True])
def test_replay_copies_keep_strided_and_expanded_inputs(create_graph):
    def f(x, m, e):
        return (x * m[1:] + e).prod()

    def run(fn):
        g = torch.Generator().manual_seed(5)
        x = torch.rand(3, 3, generator=g).add(0.5).requires_grad_()
        m = torch.rand(4, 6, generator=g)[:, ::2]      # strided, offset
        e = torch.rand(3, generator=g).expand(3, 3)    # overlapping
        y = fn(x, m, e)
        gx, = torch.autograd.grad(y, x, create_graph=create_graph)
        return y, gx

    for a, b in zip(run(tcjit.compile(f)), run(f)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# ---- outputs that alias ----------------------------------------------------------

def _view_of_written_temp(h, w):
    q = h @ w
    q /= 2.0                  # a tensor the graph made, written in place
    return q.view(2, 2, 3).transpose(0, 1)


def _view_of_input(q):
    return q.transpose(1, 2) * 1, q.transpose(0, 2)


def test_views_across_nodes_like_hf_led():
    """HF LED: one node returns a view of a tensor it wrote in place
    (query /= sqrt(d); query.view(...).transpose(0, 1)), the next returns
    a view of that view.  The node sets the written tensor's version
    before autograd wraps the view (set after, autograd refused the view
    in the next node's apply), and a view of an input is made outside the
    node as torch's own view."""
    def run(f1, f2):
        g = torch.Generator().manual_seed(0)
        h = torch.randn(4, 5, generator=g).requires_grad_()
        w = torch.randn(5, 3, generator=g).requires_grad_()
        q = f1(h, w)
        a, b = f2(q)
        (a.sum() + (b * b).sum()).backward()
        return q._version, a, b, h.grad, w.grad

    got = run(tcjit.compile(_view_of_written_temp),
              tcjit.compile(_view_of_input))
    want = run(_view_of_written_temp, _view_of_input)
    assert got[0] == want[0]
    for x, y in zip(got[1:], want[1:]):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-5)


def test_view_of_input_returned_may_be_written_in_place():
    """A view of an input returned by a compiled graph that requires grad
    is torch's view of the input (not an output of the node, which
    autograd forbids to write in place), as eager's is."""
    def f(x, y):
        return x.t(), (x + y).exp().sum()   # saves no x: the write is legal

    def run(fn):
        p, y = _seeded(6, 6)
        x = (p * 2).view(2, 3)
        v, s = fn(x, y.view(2, 3))
        v.mul_(3)
        (s + (x * x).sum()).backward()
        return v, x, p.grad, y.grad

    for a, b in zip(run(tcjit.compile(f)), run(f)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


# ---- writes under no_grad ----------------------------------------------------------

@pytest.mark.parametrize("write", [_w_add, _w_mul, _w_slice, _w_index,
                                   _w_zero, _w_twice],
                         ids=lambda w: w.__name__[3:])
@pytest.mark.parametrize("target", ["buffer", "nonleaf", "leaf"])
@pytest.mark.parametrize("read", ["before", "after", "computed"])
def test_writes_under_no_grad(write, target, read):
    """Under no_grad eager changes a tensor's data and keeps its history:
    a later differentiable read sends its gradient to that history.  The
    graph's value computed under no_grad has none, so such a read (or a
    computed tensor returned) is a graph break, never a lost gradient."""
    def f(t, x, w):
        y = t * w if read == "before" else None
        if read == "computed":
            t = t * 1.5
        with torch.no_grad():
            write(t, x * 2)
        if read == "before":
            return y
        return t * w

    like_eager(f, _maker(target, "grad", 11))


def _writes_across_breaks(t, x, w):
    t.mul_(x)
    print("", end="")                   # a STEP: the next segment
    t[1:3] = (x * w)[1:3]
    s = t.sum().item()                  # data-dependent: another
    t.add_(s)
    return t * w


@pytest.mark.parametrize("target", ["buffer", "nonleaf"])
def test_writes_in_several_segments(target):
    """Each segment is its own autograd node with its own write-backs."""
    like_eager(_writes_across_breaks, _maker(target, "grad", 3))
    tcjit.reset()
    graphs, breaks, why = graphs_and_breaks(
        _writes_across_breaks, *_maker(target, "grad", 3)()[1])
    assert (graphs, breaks) == (3, 2), why


def _zero_it(y):
    y.zero_()
    return y


def _fill_it(y):
    y.copy_(torch.ones(3))
    return y


@pytest.mark.parametrize("fn", [_zero_it, _fill_it],
                         ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("leaf", [True, False], ids=["leaf", "nonleaf"])
def test_write_with_no_grad_value_into_input_that_requires_grad(fn, leaf):
    """No node of the graph requires grad, yet autograd records the write
    (the input requires grad): eager's error for a leaf, a history for a
    non-leaf.  (Before issue 13 the copy ran under no_grad: no error, and
    the non-leaf kept its old grad_fn, so its gradient was wrong.)"""
    def make():
        p = torch.linspace(-1, 1, 3).requires_grad_()
        return [p], [p if leaf else p * 2]

    like_eager(fn, make)
