"""In-place tensor ops traced as data flow (issue 12; tracer/mutation.c).

Every case runs eagerly and compiled (the default backend and
backend="eager"'s op-by-op replay) on equal fresh inputs and compares:
results (values, dtype, shape, strides), the inputs and any tensor watched
besides them (a base whose view was passed), each tensor's ``_version``,
identity (a result that is an input in eager is that input compiled) and
aliasing (a result that shares an input's memory in eager shares it
compiled).  explain() must show one graph and no break.
"""
import pytest
import torch

import tcjit
from conftest import check_same


def _tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for item in x for t in _tensors(item)]
    return []


def _mem(t):
    return t.untyped_storage().data_ptr()


def _run(fn, make, backend):
    """(result, watched tensors) of fn on fresh inputs; the watched are the
    args then the extras make returns."""
    args, extra = make()
    return fn(*args), list(args) + list(extra)


def check_mutation(fn, make, backend="auto", breaks=0, calls=2):
    torch.manual_seed(0)
    expected, e_watch = _run(fn, make, backend)
    compiled = tcjit.compile(fn, backend=backend)
    for call in range(calls):
        torch.manual_seed(0)
        args, extra = make()
        c_watch = list(args) + list(extra)
        actual = compiled(*args)
        check_same(actual, expected, path=f"call{call}")
        for k, (a, e) in enumerate(zip(c_watch, e_watch)):
            if isinstance(e, torch.Tensor):
                check_same(a, e, path=f"call{call}: tensor #{k} after the call")
                assert a._version == e._version, \
                    f"call{call}: tensor #{k} _version {a._version} != eager {e._version}"
        for r_a, r_e in zip(_tensors(actual), _tensors(expected)):
            assert r_a._version == r_e._version, \
                f"result _version {r_a._version} != eager {r_e._version}"
            for a, e in zip(c_watch, e_watch):
                if isinstance(e, torch.Tensor):
                    assert (r_a is a) == (r_e is e), "result identity differs"
                    assert (_mem(r_a) == _mem(a)) == (_mem(r_e) == _mem(e)), \
                        "result aliasing differs"
    torch.manual_seed(0)
    args, _ = make()
    report = tcjit.explain(fn)(*args)
    if breaks is not None:
        assert report.graph_break_count == breaks, str(report)
    return report


BACKENDS = ["auto", "eager"]


def fresh(*shapes, dtype=torch.float32):
    def make():
        return [torch.randn(s).to(dtype) for s in shapes], []
    return make


# ---- in-place methods on graph inputs -----------------------------------

def add_(x):
    x.add_(1)
    return x


def chain(x, y):
    y = x.mul_(2).add_(y, alpha=3)
    return y


def every_pointwise(x):
    x.abs_().add_(1).sqrt_().log_().exp_().neg_().sin_().cos_()
    x.tanh_().sigmoid_().mul_(3).sub_(1).div_(2).clamp_(-0.5, 0.5)
    x.pow_(2).reciprocal_().clamp_min_(0.1).clamp_max_(5.0).square_()
    x.relu_().rsqrt_()
    return x


def fills(x, y, m):
    x.zero_()
    y.fill_(3.5)
    x.masked_fill_(m, -1.0)
    return x + y


def copy_broadcast(x, y):
    x.copy_(y)              # [3] into [4, 3], int64 into float32
    return x


def read_after_write(x):
    a = x * 1               # the old value
    x.add_(1)
    b = x * 1               # the new value
    return a, b


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [
    (add_, fresh((3,))),
    (chain, fresh((4, 3), (3,))),
    (every_pointwise, fresh((5, 4))),
    (copy_broadcast, lambda: ([torch.randn(4, 3),
                               torch.arange(3)], [])),
    (read_after_write, fresh((2, 3))),
    (fills, lambda: ([torch.randn(2, 3), torch.randn(2, 3),
                      torch.randn(2, 3) > 0], [])),
])
def test_inplace_methods_on_inputs(fn, make, backend):
    check_mutation(fn, make, backend)


def test_result_is_self():
    def f(x):
        y = x.add_(1)
        return y is x, y
    check_mutation(f, fresh((3,)))
    g = tcjit.compile(lambda x: x.mul_(2))
    x = torch.ones(3)
    assert g(x) is x and x._version == 1


def test_integer_and_bool_targets():
    def f(x, b):
        x.add_(2).mul_(3)
        x.bitwise_and_(7)
        b.logical_not_()
        return x, b
    check_mutation(f, lambda: ([torch.arange(6), torch.arange(6) > 2], []))


# ---- augmented assignment ------------------------------------------------

def iops(x, y):
    x += y
    x *= 2
    x -= 1
    x /= 4
    return x


def iops_int(x):
    x += 3
    x |= 8
    x &= 12
    return x


def number_plus_tensor(x):
    s = 1
    s += x            # a number has no __iadd__: out of place
    return s


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [
    (iops, fresh((4, 3), (3,))),
    (iops_int, lambda: ([torch.arange(5)], [])),
    (number_plus_tensor, fresh((3,))),
])
def test_augmented_assignment(fn, make, backend):
    check_mutation(fn, make, backend)


# ---- graph-made tensors, views, setitem ----------------------------------

def made_in_graph(x):
    y = x * 2
    v = y[0]
    y.add_(1)          # v sees it
    y[1].zero_()       # so does y
    return y, v


def view_of_input(x):
    x[0].add_(1)       # writes x
    x[:, 1:3].mul_(2)
    x.t()[2].fill_(7)  # column 2
    return x.sum()


def base_written_view_read(x):
    v = x[1:3]
    x.mul_(2)
    return v           # a view of x: sees the write, aliases x


def setitem(x, y):
    x[0] = 5
    x[:, 1:3] = torch.ones(2)
    x[-1, ::1] = y
    x[1:3][0] = x[3]
    return x


def setitem_made(x):
    y = torch.zeros(4, 5)
    y[:, 2] = x
    y[1] = 1.5
    y[2:, :2] += 3
    return y


def strided_slices(x, y):
    x[:, ::2] = 0
    x[1::3] += 1
    x.t()[::2, 1:].mul_(y[:3].view(3, 1))
    return x


def reshaped_view(x):
    x.view(6)[1:4].fill_(0)
    x.unsqueeze(0)[0, 1].add_(1)
    x.permute(1, 0)[0].sub_(2)
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [
    (made_in_graph, fresh((4, 3))),
    (view_of_input, fresh((4, 3))),
    (base_written_view_read, fresh((4, 3))),
    (setitem, fresh((4, 3), (3,))),
    (setitem_made, fresh((4,))),
    (reshaped_view, fresh((2, 3))),
    (strided_slices, fresh((7, 5), (5,))),
])
def test_views_and_setitem(fn, make, backend):
    check_mutation(fn, make, backend)


def test_view_argument_writes_its_base():
    def f(v):
        v.add_(1)
        v[0] = 0
        return v

    def make():
        base = torch.randn(4, 3)
        return [base[1:3]], [base]
    check_mutation(f, make)

    def make_t():
        base = torch.randn(3, 4)
        return [base.t()], [base]
    check_mutation(f, make_t)


def test_module_buffer():
    class Counter(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("n", torch.zeros(()))
            self.register_buffer("acc", torch.zeros(3))

        def forward(self, x):
            self.n += 1
            self.acc.mul_(0.9).add_(x, alpha=0.1)
            return x * self.acc
    eager, comp = Counter(), Counter()
    cf = tcjit.compile(comp)
    for _ in range(3):
        x = torch.randn(3)
        check_same(cf(x), eager(x))
    check_same(comp.n, eager.n)
    check_same(comp.acc, eager.acc)
    assert comp.acc._version == eager.acc._version
    assert comp.n._version == eager.n._version


def test_kv_cache_decode_step():
    B, H, T, D = 2, 4, 16, 8

    def step(q, k, v, k_cache, v_cache, t: int):
        k_cache[:, :, t] = k
        v_cache[:, :, t] = v
        keys = k_cache[:, :, :t + 1]
        vals = v_cache[:, :, :t + 1]
        att = (q.unsqueeze(2) @ keys.transpose(-1, -2)) * D ** -0.5
        return (att.softmax(-1) @ vals).squeeze(2)

    def make(t):
        def mk():
            torch.manual_seed(t)
            kc, vc = torch.randn(B, H, T, D), torch.randn(B, H, T, D)
            return [torch.randn(B, H, D), torch.randn(B, H, D),
                    torch.randn(B, H, D), kc, vc, t], []
        return mk
    for t in (0, 5):
        check_mutation(step, make(t))


# ---- what eager refuses, or what is not traced: breaks, never wrong -------

def test_eager_errors_are_kept():
    def bad_cast(x):
        x.add_(1.5)        # int64 += float: eager raises
        return x

    def bad_shape(x, y):
        x.add_(y)          # [3] += [2, 3]: eager raises
        return x

    for fn, args in [(bad_cast, (torch.arange(3),)),
                     (bad_shape, (torch.ones(3), torch.ones(2, 3)))]:
        with pytest.raises(RuntimeError) as e_eager:
            fn(*[a.clone() for a in args])
        with pytest.raises(RuntimeError) as e_comp:
            tcjit.compile(fn)(*[a.clone() for a in args])
        assert str(e_comp.value) == str(e_eager.value)


def test_expanded_target_breaks():
    def f(x):
        y = x.expand(3, 4)
        y.add_(1)
        return y
    x = torch.ones(1, 4)
    with pytest.raises(RuntimeError):
        f(x.clone())
    with pytest.raises(RuntimeError):
        tcjit.compile(f)(x.clone())
    report = tcjit.explain(f)
    with pytest.raises(RuntimeError):
        report(x.clone())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("write", [
    lambda v: v.index_copy_(0, torch.tensor([0, 1]), v[0:1].expand(2, 1).clone()),
    lambda v: v.mul_(3),
    lambda v: v.copy_(torch.tensor([[5.], [7.]])),
])
def test_write_into_view_of_expanded_input(write, backend):
    # fuzz seed 20555 (torch 2.11): a[:, 1::2] of an expanded a has no
    # shared elements, so eager writes it; the write-back of the whole
    # (expanded) input raised "more than one element of the written-to
    # tensor refers to a single memory location" where the scatter's meta
    # result kept a's strides.  Now a break that names it, eager's values.
    def f(a):
        v = a[:, 1::2]
        write(v)
        return a
    make = lambda: ((torch.tensor([[1.], [2.]]).expand(2, 2),), ())  # noqa: E731
    report = check_mutation(f, make, backend, breaks=None)
    assert any("expanded" in r.reason for r in report.break_reasons), str(report)


def test_aliased_inputs_run_eagerly():
    def f(a, b):
        a.add_(1)
        return b * 1      # b is a view of a: eager sees the write

    cf = tcjit.compile(f)
    x, y = torch.zeros(4), torch.zeros(4)
    check_same(cf(y[:2].clone(), torch.zeros(2)), torch.zeros(2))
    check_same(cf(x[:2], x[1:3]), f(y[:2], y[1:3]))
    check_same(x, y)


def test_partial_overlap_breaks():
    def f(x):
        x[1:].add_(x[:-1])
        return x
    x = torch.arange(5.)
    with pytest.raises(RuntimeError) as e:
        f(x.clone())
    with pytest.raises(RuntimeError) as c:
        tcjit.compile(f)(x.clone())
    assert str(e.value) == str(c.value)


# ---- advanced indices and ops outside the registry -----------------------

def adv_index(x, i, m):
    x[i] = 0
    x[m] = -1.5
    x[i] = torch.ones(3)
    return x


def adv_index_slices(x, pos, v):
    x[:, pos] = v
    x[:, :, pos] += 1                # x[...] (a copy) += 1, then written
    return x


def functional_forms(x, i, src, t1, t2):
    x.index_copy_(0, i, src)
    x.index_add_(0, i, src, alpha=2)
    x.addcdiv_(t1, t2, value=0.5)
    x.lerp_(t1, 0.25)
    x.scatter_(1, i.view(2, 1).expand(2, 3), 7.0)
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [
    (adv_index, lambda: ([torch.randn(5, 3), torch.tensor([1, -1]),
                          torch.tensor([True, False, True, False, False])],
                         [])),
    (adv_index_slices, lambda: ([torch.randn(2, 4, 4), torch.tensor([0, 3]),
                                 torch.randn(2, 2, 4)], [])),
    (functional_forms, lambda: ([torch.randn(4, 3), torch.tensor([2, 0]),
                                 torch.randn(2, 3), torch.randn(4, 3),
                                 torch.rand(4, 3) + 1], [])),
])
def test_advanced_indices_and_functional_forms(fn, make, backend):
    check_mutation(fn, make, backend)


def test_kv_cache_with_position_tensor_is_one_graph():
    # a static cache: the position is a tensor, the attention spans the
    # whole cache under a mask, so every step runs the same graph
    B, H, T, D = 2, 4, 16, 8

    def step(q, k, v, k_cache, v_cache, pos):
        k_cache.index_copy_(2, pos, k.unsqueeze(2))
        v_cache[:, :, pos] = v.unsqueeze(2)
        att = (q.unsqueeze(2) @ k_cache.transpose(-1, -2)) * D ** -0.5
        mask = torch.arange(T) > pos
        att = att.masked_fill(mask, float("-inf"))
        return (att.softmax(-1) @ v_cache).squeeze(2)

    cstep = tcjit.compile(step)
    torch.manual_seed(0)
    ke, ve = torch.zeros(B, H, T, D), torch.zeros(B, H, T, D)
    kc, vc = ke.clone(), ve.clone()
    for t in range(6):
        q, k, v = (torch.randn(B, H, D) for _ in range(3))
        pos = torch.tensor([t])
        check_same(cstep(q, k, v, kc, vc, pos), step(q, k, v, ke, ve, pos))
        check_same(kc, ke)
        check_same(vc, ve)
        assert (kc._version, vc._version) == (ke._version, ve._version)
    c = tcjit.counters()
    assert c["cache_misses"] == 1 and c["cache_hits"] == 5, c
    report = tcjit.explain(step)(q, k, v, kc.clone(), vc.clone(), pos)
    assert report.graph_break_count == 0 and report.graph_count == 1


def test_advanced_index_dtype_mismatch_raises_like_eager():
    def f(x, i):
        x[i] = torch.ones(3, dtype=torch.float64)   # eager raises
        return x
    args = (torch.randn(4, 3), torch.tensor([1, 2]))
    with pytest.raises(RuntimeError) as e:
        f(*[a.clone() for a in args])
    with pytest.raises(RuntimeError) as c:
        tcjit.compile(f)(*[a.clone() for a in args])
    assert str(e.value) == str(c.value)


def test_metadata_inplace_ops_break_with_reason():
    def f(x):
        x.t_()
        return x
    r = check_mutation(f, fresh((3, 3)), breaks=1)
    assert "changes what its tensor is" in str(r)


def test_failed_inline_does_not_write_twice():
    def helper(x):
        x.add_(1)
        print(end="")      # not traceable: the call runs in CPython
        return x

    def f(x):
        return helper(x) * 2
    check_mutation(f, fresh((3,)), breaks=2)


def test_view_of_written_input_returned_twice_is_one_object():
    # found by the fuzzer: each exit slot made its own view of the input
    def f(a):
        v = a.reshape(-1)
        a.neg_()
        return v, v
    check_mutation(f, lambda: ([torch.arange(4).reshape(2, 2)], []))
    g = tcjit.compile(f)
    r = g(torch.ones(2, 2))
    assert r[0] is r[1]


def test_functional_inplace_flag_and_modules():
    def f(x):
        y = torch.nn.functional.relu(x, inplace=True)
        torch.nn.functional.leaky_relu(x[0], 0.2, inplace=True)
        return y is x, y
    check_mutation(f, fresh((3, 4)))

    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(inplace=True),
                              torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)
    with torch.no_grad():
        check_same(tcjit.compile(net)(x), net(x))
        report = tcjit.explain(net)(x)
    assert report.graph_break_count == 0


def test_written_tensors_keep_their_strides():
    # found by the fuzzer: size-1 dims' strides are part of the layout
    def f(a):
        v = torch.amax(a, (0, 1))
        w = a.maximum(v)
        w.tanh_()
        return w

    def make():
        return [torch.randn(8, 1, 2).transpose(0, 1)], []
    check_mutation(f, make)

    def g(a):
        a.add_(-0.0)
        return a.expand(1, 6)

    def make_g():
        return [torch.randn(1, 7)[:, 1:]], []
    check_mutation(g, make_g)


def test_sgd_like_step_on_leaf_parameters():
    # a leaf that requires grad may be written under no_grad, as
    # optimizers do; the write-back must not trip autograd
    def step(p, g, buf, lr: float):
        with torch.no_grad():
            buf.mul_(0.9).add_(g)
            p.add_(buf, alpha=-lr)
        return p

    def make():
        p = torch.randn(5, requires_grad=True)
        return [p, torch.randn(5), torch.randn(5), 0.1], []
    torch.manual_seed(0)
    args_e, _ = make()
    torch.manual_seed(0)
    args_c, _ = make()
    cstep = tcjit.compile(step)
    for _ in range(3):
        r_e, r_c = step(*args_e), cstep(*args_c)
        assert r_c is args_c[0] and r_c.requires_grad
        check_same(r_c, r_e)
        for a, e in zip(args_c[:3], args_e[:3]):
            check_same(a, e)
            assert a._version == e._version
    report = tcjit.explain(step)(*make()[0])
    assert report.graph_break_count == 0


def test_torch_inplace_functions_and_foreach():
    def f(x, ps, gs, bufs):
        torch.relu_(x)
        torch._foreach_mul_(bufs, 0.9)
        torch._foreach_add_(bufs, gs)
        r = torch._foreach_add_(ps, bufs, alpha=-0.1)
        return x, r is ps, r

    def make():
        ps = [torch.randn(3), torch.randn(2, 2)]
        gs = [torch.randn(3), torch.randn(2, 2)]
        bufs = [torch.randn(3), torch.randn(2, 2)]
        return [torch.randn(4), ps, gs, bufs], ps + gs + bufs
    check_mutation(f, make)


def test_batchnorm_train_mode_running_stats():
    torch.manual_seed(0)
    eager, comp = torch.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    cf = tcjit.compile(comp)
    with torch.no_grad():
        for _ in range(3):
            x = torch.randn(4, 3, 5, 5)
            check_same(cf(x), eager(x))
        report = tcjit.explain(torch.nn.BatchNorm2d(3))(x)
    assert report.graph_break_count == 0
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        check_same(getattr(comp, name), getattr(eager, name))
        assert getattr(comp, name)._version == getattr(eager, name)._version


def test_pending_fstring_of_written_tensor_keeps_old_value():
    def f(x):
        s = f"{x}"
        x.add_(1)
        return s, x
    r = check_mutation(f, fresh((3,)), breaks=None)
    assert "pending f-string" in str(r)


def test_out_argument():
    def f(x, y, out, acc):
        r = torch.add(x, y, out=out)
        torch.mul(x, 2, out=acc[1:3])
        torch.sum(x, 0, keepdim=True, out=y[:1])
        return r is out, r

    def make():
        acc = torch.zeros(5, 3)
        return [torch.randn(2, 3), torch.randn(2, 3), torch.empty(2, 3),
                acc], []
    check_mutation(f, make)


def test_loop_over_parameters_writes_each():
    # the loop's iterator (rebuilt at the exit) yields the tensors
    # themselves: writing them inside the loop is no break
    def f(ps, gs):
        for p, g in zip(ps, gs):
            p.mul_(0.9).add_(g)
        return ps[0] * 1

    def make():
        ps = [torch.randn(3) for _ in range(3)]
        return [ps, [torch.randn(3) for _ in range(3)]], ps
    check_mutation(f, make)


def old_value_read_elsewhere(x, y):
    a = x * 2                  # the old x, returned: x is not written early
    x.add_(1)
    return a, x


def reduction_then_write(x):
    s = x.sum()
    x.sub_(s)                  # every element reads the whole old x
    return x


def view_of_new_value(x):
    x.mul_(2).add_(x[0] * 1)   # x[0] of the new value, read at other rows
    return x


def both_ways(x, y):
    x.add_(y)
    y.add_(x)
    return x, y


def swap(x, y):
    t = x * 1
    x.copy_(y)
    y.copy_(t)
    return x, y


def flipped(x):
    x.add_(x.flip(0))          # an extern reads the old x
    return x


def transposed_read(x):
    x.add_(x.t() * 1)          # x is square: x.t() reads other elements
    return x


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,make", [
    (old_value_read_elsewhere, fresh((4, 3), (3,))),
    (reduction_then_write, fresh((4, 3))),
    (view_of_new_value, fresh((4, 3))),
    (both_ways, fresh((4, 3), (4, 3))),
    (swap, fresh((4, 3), (4, 3))),
    (flipped, fresh((5, 3))),
    (transposed_read, fresh((4, 4))),
])
def test_written_inputs_read_elsewhere(fn, make, backend):
    # the kernel writes an input in place only where no later read of its
    # old elements exists (schedule.c inplace_buffer); else a copy
    check_mutation(fn, make, backend)


def written_then_normalized(x):
    x.tanh_()
    return torch.nn.functional.rms_norm(x, (4,))


def out_then_layer_norm(x):
    torch.mul(x, 2, out=x)
    return torch.nn.functional.layer_norm(x, x.shape[-2:])


@pytest.mark.parametrize("fn,make", [
    (written_then_normalized, fresh((6, 4))),
    (out_then_layer_norm, fresh((2, 6, 3))),
])
def test_written_input_read_by_a_reduction_kernel(fn, make):
    # found by the fuzzer: a reduction kernel the written value joins
    # recomputes it from the input in its later passes
    check_mutation(fn, make)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nn_functions_inplace_outside_the_registry(backend):
    # F.hardswish(x, inplace=True) calls torch._C._nn.hardswish_ (mobilenet
    # v3 in GraphNet's torchvision graphs): its out-of-place form lives in
    # torch._C._nn too
    import torch.nn.functional as F

    def f(x):
        y = x * 2
        F.hardswish(y, inplace=True)
        z = F.hardsigmoid(y + 1, inplace=True)
        F.hardswish(x, inplace=True)
        return y, z
    make = lambda: ((torch.randn(8),), ())  # noqa: E731
    check_mutation(f, make, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["hardtanh", "relu6", "module"])
def test_hardtanh_inplace(form, backend):
    """F.hardtanh(x, lo, hi, True) / F.relu6(inplace=True) /
    nn.ReLU6(inplace=True) write into their input (mobilenet_v2's
    GraphNet graphs call hardtanh(x, 0.0, 6.0, True)); intermediate and
    input targets, values, versions and identity as eager's."""
    import torch.nn.functional as F
    act = {"hardtanh": lambda t: F.hardtanh(t, -1.5, 2.0, True),
           "relu6": lambda t: F.relu6(t, inplace=True),
           "module": torch.nn.ReLU6(inplace=True)}[form]

    def fn(x, y):
        z = act(x * 4)
        w = act(y)
        return z, w, w is y

    def make():
        return [torch.randn(16), torch.randn(3, 4) * 5], []
    check_mutation(fn, make, backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("view", ["t", "flip", "select"])
def test_inplace_input_read_through_a_view_of_the_result(view, backend):
    """x.exp_() then a view of the result read in the same fused kernel:
    that kernel recomputed exp from x at the view's index after its store
    had overwritten x there (exp applied twice; fuzz seeds 93370, 100670).
    The write goes to a buffer of its own then."""
    import torch.nn.functional as F
    read = {"t": lambda v: v.t(), "flip": lambda v: v.flip(0),
            "select": lambda v: v[:, 0:1].expand(4, 4)}[view]

    def fn(x):
        v = x.exp_()
        return F.elu(read(v), alpha=0.5)

    def make():
        return [torch.randn(4, 4)], []
    check_mutation(fn, make, backend)


def test_write_into_a_tensor_a_pending_structseq_holds():
    # Mixtral's router: values, indices = torch.topk(...); values /= ...;
    # the structseq (made at the exit) holds the written tensor, as eager's
    class Box:
        pass

    def f(x):
        r = torch.topk(x.softmax(-1), 2, dim=-1)
        top, idx = r
        b = Box()
        b.top = top
        top /= top.sum(dim=-1, keepdim=True)
        return r, r.values is top, b.top * 1, idx
    check_mutation(f, fresh((3, 5)))


def test_slice_assignment_is_traced():
    # x[1:3] = v is one STORE_SLICE instruction from CPython 3.12 on: it was
    # a graph break there ("bytecode STORE_SLICE is not supported yet")
    def f(x, y):
        x = x.clone()
        x[1:3] = y * 2
        x[:, 0:1] = 0.5
        return x

    x, y = torch.randn(4, 3), torch.randn(2, 3)
    torch.testing.assert_close(tcjit.compile(f)(x, y), f(x, y))
    e = tcjit.explain(f)(x, y)
    assert e.graph_count == 1 and not e.break_reasons, [b.reason for b in e.break_reasons]
