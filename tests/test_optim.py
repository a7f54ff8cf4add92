"""Optimizer steps compiled (issues 12/13): tcjit.compile(opt.step) for
torch.optim's SGD, Adam and AdamW (foreach=True and the default) against
eager: every parameter, every state tensor (values, dtype, shape) and the
step counters after a few steps, and explain() for the graphs and breaks.
"""
import collections
import itertools

import pytest
import torch
import torch.nn as nn

import tcjit
from conftest import check_same
from test_torch_function import same_outcome


def _model(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


OPTIMIZERS = {
    "sgd": lambda ps, fe: torch.optim.SGD(ps, lr=0.1, foreach=fe),
    "sgd_momentum": lambda ps, fe: torch.optim.SGD(ps, lr=0.1, momentum=0.9,
                                                   foreach=fe),
    "sgd_nesterov_wd": lambda ps, fe: torch.optim.SGD(
        ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2,
        foreach=fe),
    "adam": lambda ps, fe: torch.optim.Adam(ps, lr=1e-2, foreach=fe),
    "adam_amsgrad": lambda ps, fe: torch.optim.Adam(ps, lr=1e-2, amsgrad=True,
                                                    foreach=fe),
    "adamw": lambda ps, fe: torch.optim.AdamW(ps, lr=1e-2, foreach=fe),
}


def _grads(model, step):
    gen = torch.Generator().manual_seed(100 + step)
    x = torch.randn(5, 8, generator=gen)
    model.zero_grad(set_to_none=True)
    model(x).pow(2).sum().backward()


def _same_state(oa, ob, atol):
    assert len(oa.state) == len(ob.state)
    for pa, pb in zip(oa.param_groups[0]["params"],
                      ob.param_groups[0]["params"]):
        torch.testing.assert_close(pa.detach(), pb.detach(), atol=atol,
                                   rtol=atol)
        sa, sb = oa.state[pa], ob.state[pb]
        assert sorted(sa) == sorted(sb)
        for k in sb:
            if isinstance(sb[k], torch.Tensor):
                assert sa[k].dtype == sb[k].dtype and sa[k].shape == sb[k].shape
                torch.testing.assert_close(sa[k], sb[k], atol=atol, rtol=atol)
            else:
                assert sa[k] == sb[k]


def run_steps(name, foreach, wrap, steps=3, atol=1e-6, warm=0):
    """Two equal models and optimizers: eager's opt.step() and wrap(opt)()
    take `steps` steps on equal gradients; `warm` eager steps first on
    both (the first step makes the optimizer's state)."""
    ma, mb = _model(), _model()
    oa = OPTIMIZERS[name](ma.parameters(), foreach)
    ob = OPTIMIZERS[name](mb.parameters(), foreach)
    for s in range(warm):
        for m, o in ((ma, oa), (mb, ob)):
            _grads(m, s)
            o.step()
    step = wrap(oa)
    for s in range(warm, warm + steps):
        _grads(ma, s)
        _grads(mb, s)
        step()
        ob.step()
        _same_state(oa, ob, atol)
    return oa, ob


# ---- opt.step as one graph -------------------------------------------------------

@pytest.mark.parametrize("foreach", [None, True], ids=["default", "foreach"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_step_is_one_graph_and_equals_eager(name, foreach):
    oa, _ = run_steps(name, foreach, lambda o: tcjit.compile(o.step), warm=1)
    assert tcjit.counters()["graphs"] == 1
    assert tcjit.counters()["eager_fallbacks"] == 0
    ex = tcjit.explain(oa.step)()
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    assert not ex.skipped_frames


@pytest.mark.parametrize("name", ["sgd_momentum", "adamw"])
def test_first_step_makes_the_state_then_compiles(name):
    # the first step's state[p] is missing: a break that guards the state's
    # length, so the second step traces again, whole
    run_steps(name, None, lambda o: tcjit.compile(o.step), warm=0, steps=4)
    c = tcjit.counters()
    assert c["graphs"] == 1 and c["recompiles"] == 1


def test_step_under_enable_keeps_the_grad_mode():
    ma, mb = _model(), _model()
    oa = torch.optim.AdamW(ma.parameters(), lr=1e-2)
    ob = torch.optim.AdamW(mb.parameters(), lr=1e-2)
    tcjit.enable()
    try:
        for s in range(3):
            _grads(ma, s)
            _grads(mb, s)
            assert torch.is_grad_enabled()
            oa.step()
            assert torch.is_grad_enabled()
            with torch.no_grad():
                oa.step.__wrapped__  # (a plain attribute read)
            tcjit.disable()
            ob.step()
            tcjit.enable()
            _same_state(oa, ob, 1e-6)
    finally:
        tcjit.disable()


def test_step_with_a_hook_registered_recompiles_and_runs_it():
    calls = []
    oa, _ = run_steps("adam", None, lambda o: tcjit.compile(o.step), warm=1)
    oa.register_step_post_hook(lambda opt, a, k: calls.append(len(a)))
    ob = torch.optim.Adam(_model().parameters(), lr=1e-2)
    step = tcjit.compile(oa.step)
    for _ in range(2):
        for p in oa.param_groups[0]["params"]:
            p.grad = torch.ones_like(p)
        step()
    assert calls == [1, 1]


# ---- training: forward compiled, backward, the step compiled ----------------------

def test_nanogpt_train_step_matches_eager():
    # forward (compiled), loss.backward(), opt.step() (compiled) against
    # eager: the loss and every gradient at 1e-4; then the step on equal
    # gradients (eager's copied: Adam turns the rounding noise of a zero
    # gradient, such as the attention's key bias, into +-lr) at 1e-6
    from test_models import GPT
    torch.manual_seed(0)
    eager = GPT(n_layer=2).eval()
    comp = GPT(n_layer=2).eval()
    comp.load_state_dict(eager.state_dict())
    oa = torch.optim.AdamW(comp.parameters(), lr=1e-3)
    ob = torch.optim.AdamW(eager.parameters(), lr=1e-3)
    fwd, step = tcjit.compile(comp), tcjit.compile(oa.step)
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        idx = torch.randint(0, 50, (2, 16), generator=gen)
        tgt = torch.randint(0, 50, (2, 16), generator=gen)
        losses = []
        for m, o, f in ((comp, oa, fwd), (eager, ob, eager)):
            o.zero_grad(set_to_none=True)
            _, loss = f(idx, tgt)
            loss.backward()
            losses.append(loss.detach())
        torch.testing.assert_close(losses[0], losses[1], atol=1e-4,
                                   rtol=1e-4)
        for (na, pa), pb in zip(comp.named_parameters(), eager.parameters()):
            torch.testing.assert_close(pa.grad, pb.grad, atol=1e-4,
                                       rtol=1e-4, msg=na)
            pa.grad.copy_(pb.grad)
        step()
        ob.step()
        _same_state(oa, ob, 1e-6)
    ex = tcjit.explain(oa.step)()
    assert ex.graph_count == 1 and ex.graph_break_count == 0


# ---- the constructs, one by one ------------------------------------------------------

def test_tensor_grad_of_an_input():
    def f(p):
        if p.grad is None:
            return p * 2
        return p - 0.1 * p.grad

    p = nn.Parameter(torch.randn(4))
    same_outcome(f, p)
    p.grad = torch.randn(4)
    same_outcome(f, p)
    ex = tcjit.explain(f)(p)
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    # the grad's guards follow it: None again, another shape
    comp = tcjit.compile(f)
    comp(p)
    p.grad = None
    check_same(comp(p), f(p))
    p.grad = torch.randn(4)
    check_same(comp(p), f(p))
    p.grad = torch.randn(4).t()[None][0]       # another object, strided view
    check_same(comp(p), f(p))


def test_dict_keyed_by_a_tensor():
    a, b = torch.randn(3), torch.randn(3)
    state = collections.defaultdict(dict)
    state[a]["m"] = torch.zeros(3)

    def f(state, a, x):
        s = state[a]
        s["m"].mul_(0.5).add_(x)
        return s["m"] + state[a]["m"]

    x = torch.ones(3)
    comp = tcjit.compile(f)
    sa = collections.defaultdict(dict, {a: {"m": torch.zeros(3)}})
    sb = collections.defaultdict(dict, {a: {"m": torch.zeros(3)}})
    for _ in range(3):
        check_same(comp(sa, a, x), f(sb, a, x))
        check_same(sa[a]["m"], sb[a]["m"])
    ex = tcjit.explain(f)(sa, a, x)
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    # another key object: the identity guard fails, eager's KeyError... a
    # defaultdict makes the item, as eager does
    sc = collections.defaultdict(dict)
    with pytest.raises(KeyError):
        comp(sc, b, x)
    assert b in sc and sc[b] == {}


def test_dict_keyed_by_a_tensor_missing_then_present():
    a = torch.randn(3)

    def f(state, a, x):
        s = state[a]
        if len(s) == 0:
            s["m"] = torch.zeros_like(x)
        s["m"].add_(x)
        return s["m"] * 1

    comp = tcjit.compile(f)
    sa, sb = collections.defaultdict(dict), collections.defaultdict(dict)
    x = torch.ones(3)
    for _ in range(3):
        check_same(comp(sa, a, x), f(sb, a, x))
    check_same(sa[a]["m"], sb[a]["m"])
    assert tcjit.counters()["recompiles"] == 1


def test_frame_dict_item_stored_back_is_a_no_op():
    def f(d, x):
        m = d["m"]
        m.add_(x)
        d["m"] = m
        return x * 2

    da, db = {"m": torch.zeros(3)}, {"m": torch.zeros(3)}
    check_same(tcjit.compile(f)(da, torch.ones(3)), f(db, torch.ones(3)))
    check_same(da["m"], db["m"])
    ex = tcjit.explain(f)({"m": torch.zeros(3)}, torch.ones(3))
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_one_input_per_source_sees_inplace_writes():
    # the same tensor read twice from the frame (state[p] looked up twice,
    # as SGD's step does) is one graph input: the second read sees the
    # first's in-place write, with no eager fallback for aliased inputs
    a = torch.randn(3)

    def f(state, a, x):
        state[a]["m"].mul_(2).add_(x)
        return state[a]["m"] + 1

    sa = collections.defaultdict(dict, {a: {"m": torch.ones(3)}})
    sb = collections.defaultdict(dict, {a: {"m": torch.ones(3)}})
    comp = tcjit.compile(f)
    for _ in range(2):
        check_same(comp(sa, a, torch.ones(3)), f(sb, a, torch.ones(3)))
    check_same(sa[a]["m"], sb[a]["m"])
    assert tcjit.counters()["eager_fallbacks"] == 0
    assert tcjit.counters()["graphs"] == 1


@pytest.mark.parametrize("case", ["mul", "add_alpha", "sqrt", "pow_scalar",
                                  "addcmul_value", "addcdiv_scalars",
                                  "addcdiv_tensor_scalars", "lerp"])
def test_foreach_functional_and_inplace(case):
    def f(xs, ys, zs):
        if case == "mul":
            return torch._foreach_mul(xs, ys)
        if case == "add_alpha":
            return torch._foreach_add(xs, ys, alpha=0.5)
        if case == "sqrt":
            return torch._foreach_sqrt(torch._foreach_abs(xs))
        if case == "pow_scalar":
            return torch._foreach_pow(0.9, xs)
        if case == "addcmul_value":
            torch._foreach_addcmul_(xs, ys, zs, 0.25)
            return xs
        if case == "addcdiv_scalars":
            torch._foreach_addcdiv_(xs, ys, zs, [0.5, -1.0])
            return xs
        if case == "addcdiv_tensor_scalars":
            torch._foreach_addcdiv_(xs, ys, zs, torch.stack([y.sum() for y
                                                             in ys]))
            return xs
        torch._foreach_lerp_(xs, ys, 0.1)
        return xs

    def args():
        g = torch.Generator().manual_seed(0)
        mk = lambda: [torch.rand(3, generator=g) + 0.5,
                      torch.rand(2, 2, generator=g) + 0.5]
        return mk(), mk(), mk()

    a, b = args(), args()
    check_same(tcjit.compile(f)(*a), f(*b))
    check_same(a, b)
    ex = tcjit.explain(f)(*args())
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_tensor_valued_addcdiv_scalar():
    def f(x, t1, t2, v):
        return x.addcdiv_(t1, t2, value=-v)

    g = torch.Generator().manual_seed(0)
    mk = lambda: [torch.rand(5, generator=g) + 0.5 for _ in range(3)] + [
        torch.tensor(0.3)]
    a = mk()
    b = [t.clone() for t in a]
    check_same(tcjit.compile(f)(*a), f(*b))
    ex = tcjit.explain(f)(*mk())
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_zip_strict():
    def f(x, a, b):
        n = 0
        for u, v in zip(a, b, strict=True):
            n = n + u * v
        return x * n

    same_outcome(f, torch.randn(3), [1, 2], [3, 4])
    same_outcome(f, torch.randn(3), [1, 2], [3])       # ValueError
    ex = tcjit.explain(f)(torch.randn(3), [1, 2], [3, 4])
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_del_of_a_local():
    def f(x):
        y = x * 2
        z = y + 1
        del y
        return z

    def g(x):
        y = x * 2
        del y
        return y

    same_outcome(f, torch.randn(3))
    same_outcome(g, torch.randn(3))               # UnboundLocalError
    ex = tcjit.explain(f)(torch.randn(3))
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_builtin_type_subscript_in_a_cast():
    from typing import cast

    def f(xs):
        ys = cast(list[torch.Tensor], xs)
        return ys[0] + 1

    same_outcome(f, [torch.randn(3)])
    ex = tcjit.explain(f)([torch.randn(3)])
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def _set_grad_and_restore(x, w, mode):
    prev = torch.is_grad_enabled()
    try:
        torch.set_grad_enabled(mode)
        y = x * w
    finally:
        torch.set_grad_enabled(prev)
    return y, torch.is_grad_enabled()


def test_set_grad_enabled_call_in_try_finally():
    w = torch.randn(3, requires_grad=True)
    for mode in (False, True):
        y, on = tcjit.compile(_set_grad_and_restore)(torch.randn(3), w, mode)
        assert y.requires_grad == mode and on and torch.is_grad_enabled()
    ex = tcjit.explain(_set_grad_and_restore)(torch.randn(3), w, False)
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_set_grad_enabled_call_then_a_break():
    # the exit before the break sets the mode the traced call set, so the
    # rest (and Python's view of the mode) is as in eager
    w = torch.randn(3, requires_grad=True)

    def f(x):
        torch.set_grad_enabled(False)
        y = x * w
        print(end="")
        z = x * w
        on = torch.is_grad_enabled()
        torch.set_grad_enabled(True)
        return y.requires_grad, z.requires_grad, on, (x * w).requires_grad

    try:
        assert tcjit.compile(f)(torch.randn(3)) == (False, False, False, True)
        assert torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def test_set_grad_enabled_call_left_off_at_return():
    def f(x):
        torch.set_grad_enabled(False)
        return x + 1

    try:
        tcjit.compile(f)(torch.randn(3))
        assert not torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def test_set_grad_enabled_call_inside_no_grad_breaks():
    def f(x):
        with torch.no_grad():
            torch.set_grad_enabled(True)
            y = x * 2
        return y

    same_outcome(f, torch.randn(3, requires_grad=True))
    ex = tcjit.explain(f)(torch.randn(3, requires_grad=True))
    assert any("inside a with block" in b.reason for b in ex.break_reasons)


def test_record_function_without_a_profiler_is_its_body():
    def f(x):
        with torch.autograd.profiler.record_function("tcjit-range"):
            y = x.sin() * 2
        return y + 1

    same_outcome(f, torch.randn(8))
    ex = tcjit.explain(f)(torch.randn(8))
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_record_function_with_a_profiler_records_its_range():
    def f(x):
        with torch.autograd.profiler.record_function("tcjit-range"):
            y = x.sin() * 2
        return y + 1

    comp = tcjit.compile(f)
    comp(torch.randn(8))                  # compiled with no profiler
    with torch.autograd.profiler.profile() as prof:
        check_same(comp(torch.randn(8).zero_()), f(torch.zeros(8)))
    assert any(e.name == "tcjit-range" for e in prof.function_events)


def test_record_function_block_with_a_break_inside():
    def f(x):
        with torch.autograd.profiler.record_function("tcjit-range"):
            y = x.sin()
            print(end="")
            z = y * 2
        return z

    same_outcome(f, torch.randn(8))
    with torch.autograd.profiler.profile() as prof:
        tcjit.compile(f)(torch.randn(8))
    assert any(e.name == "tcjit-range" for e in prof.function_events)


_HOOKS = collections.OrderedDict()


def test_chain_of_dict_views():
    def f(x, hooks):
        for h in itertools.chain(_HOOKS.values(), hooks.values()):
            x = h(x)
        return x + 1

    hooks = collections.OrderedDict()
    same_outcome(f, torch.randn(3), hooks)
    hooks[0] = lambda t: t * 2
    hooks[1] = torch.sin
    same_outcome(f, torch.randn(3), hooks)
    ex = tcjit.explain(f)(torch.randn(3), hooks)
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    hooks.move_to_end(0)     # another order: guarded
    same_outcome(f, torch.randn(3), hooks)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("case", ["lerp_small", "lerp_large", "lerp_neg",
                                  "addcmul", "addcmul_value", "addcdiv",
                                  "addcdiv_tensor_value"])
def test_inplace_addc_and_lerp_are_pointwise_ops(case, dtype):
    # what an optimizer's update is made of: decomposed into registry ops
    # in eager's kernel order (one fused kernel, no extern call), equal
    # to eager's to an ulp of the operands (eager's vectorized kernels
    # contract a multiply and an add into an fma where we round twice)
    def f(x, a, b, v):
        if case.startswith("lerp"):
            w = {"lerp_small": 0.1, "lerp_large": 0.7, "lerp_neg": -0.6}[case]
            return x.lerp_(a, w) * 1
        if case == "addcmul":
            return x.addcmul_(a, b) * 1
        if case == "addcmul_value":
            return x.addcmul_(a, b, value=-0.25) * 1
        if case == "addcdiv":
            return x.addcdiv_(a, b, value=0.5) * 1
        return x.addcdiv_(a, b, value=-v) * 1

    g = torch.Generator().manual_seed(0)
    mk = lambda: [torch.rand(1000, generator=g, dtype=dtype) + 0.5
                  for _ in range(3)] + [torch.tensor(0.3, dtype=dtype)]
    a = mk()
    b = [t.clone() for t in a]
    out = tcjit.compile(f)(*a)
    ref = f(*b)
    ulp = 2 * torch.finfo(dtype).eps     # operands are in [0.5, 1.5)
    torch.testing.assert_close(out, ref, atol=ulp, rtol=ulp)
    torch.testing.assert_close(a[0], b[0], atol=ulp, rtol=ulp)
    ex = tcjit.explain(f)(*mk())
    assert ex.graph_count == 1 and ex.graph_break_count == 0
    assert not any("extern" in str(op) for op in ex.ops_per_graph[0])


def test_inplace_addcmul_of_ints_stays_eagers():
    def f(x, a, b):
        return x.addcmul_(a, b, value=2)

    a = [torch.arange(6), torch.arange(6), torch.ones(6, dtype=torch.long)]
    b = [t.clone() for t in a]
    check_same(tcjit.compile(f)(*a), f(*b))


def test_stack_and_cat_of_many_tensors():
    # Adam's foreach step stacks one step size per parameter
    def f(xs):
        return torch.stack([x.sum() for x in xs]) * 2, torch.cat(xs, 0) + 1

    xs = [torch.randn(3) for _ in range(37)]
    same_outcome(f, xs)
    ex = tcjit.explain(f)(xs)
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_gpt2_sized_parameter_list_is_one_graph():
    # GPT-2's 148 parameter tensors: lists, generators and the traced
    # loop's length are no limit below that
    from test_models import GPT
    for fe in (None, True):
        torch.manual_seed(0)
        ma, mb = GPT(12, 64, 16, 16), GPT(12, 64, 16, 16)
        mb.load_state_dict(ma.state_dict())
        oa = torch.optim.AdamW(ma.parameters(), lr=1e-2, foreach=fe)
        ob = torch.optim.AdamW(mb.parameters(), lr=1e-2, foreach=fe)
        step = tcjit.compile(oa.step)
        for s in range(3):
            for pa, pb in zip(ma.parameters(), mb.parameters()):
                pa.grad = torch.randn_like(pa)
                pb.grad = pa.grad.clone()
            step()
            ob.step()
        _same_state(oa, ob, 1e-6)
        ex = tcjit.explain(oa.step)()
        assert ex.graph_count == 1 and ex.graph_break_count == 0
        tcjit.reset()


# ---- with blocks of context managers written in Python ---------------------------

class _Scale:
    def __init__(self, k):
        self.k = k
        self.entered = 0
        self.exited = 0

    def __enter__(self):
        self.entered += 1
        return self.k

    def __exit__(self, et, ev, tb):
        self.exited += 1
        return False


def _with_frame_object(x, cm):
    with cm as k:
        y = x * k
    return y + 1, cm.entered, cm.exited


def _with_new_object(x):
    with _Scale(3) as k:
        y = x * k
    return y


def _with_a_break_inside(x, cm):
    with cm as k:
        y = x * k
        print(end="")
        z = y + 1
    return z, cm.entered, cm.exited


@pytest.mark.parametrize("fn", [_with_frame_object, _with_new_object,
                                _with_a_break_inside])
def test_python_context_manager_is_inlined(fn):
    def args():
        return (torch.ones(3),) + ((_Scale(2),) if fn is not _with_new_object
                                   else ())
    a, b = args(), args()
    check_same(tcjit.compile(fn)(*a), fn(*b))
    for ca, cb in zip(a[1:], b[1:]):
        assert vars(ca) == vars(cb)
    ex = tcjit.explain(fn)(*args())
    assert ex.graph_count == (2 if fn is _with_a_break_inside else 1)
    assert ex.graph_break_count == (fn is _with_a_break_inside)


def test_python_context_manager_exit_runs_on_an_exception():
    def f(x, cm):
        with cm as k:
            y = x * k
            raise ValueError("boom")

    for fn in (f, tcjit.compile(f)):
        cm = _Scale(2)
        with pytest.raises(ValueError, match="boom"):
            fn(torch.ones(3), cm)
        assert vars(cm) == {"k": 2, "entered": 1, "exited": 1}


class _Counter:
    def __init__(self):
        self.n = 0

    def bump(self):
        self.n += 1


def test_attribute_set_through_a_bound_method_is_seen():
    # o.n after m() with m = o.bump: the write made through m's __self__
    # is the object's (a wrong answer before: the read missed it)
    def f(x, o):
        m = o.bump
        m()
        return x + o.n, o.n

    a, b = _Counter(), _Counter()
    check_same(tcjit.compile(f)(torch.zeros(1), a), f(torch.zeros(1), b))
    assert a.n == b.n == 1


def test_set_grad_enabled_in_try_finally_when_the_graph_raises():
    # the graph's error is raised with the frame as it was (the exit that
    # would set the mode never ran): the mode is the caller's, as eager's
    # finally leaves it
    def f(x, idx):
        prev = torch.is_grad_enabled()
        try:
            torch.set_grad_enabled(False)
            y = torch.index_select(x, 0, idx) * 2
        finally:
            torch.set_grad_enabled(prev)
        return y

    x = torch.randn(4, requires_grad=True)
    comp = tcjit.compile(f)
    assert not comp(x, torch.tensor([1, 2])).requires_grad
    with pytest.raises(IndexError):
        comp(x, torch.tensor([1, 7]))
    assert torch.is_grad_enabled()


# ---- torch._dynamo.disable wrappers ----------------------------------------------

def test_dynamo_disabled_torch_internals_are_traced():
    # Once Dynamo has run in a process it wraps every optimizer's
    # _init_group in torch._dynamo.disable (TorchPatcher); that is about
    # Dynamo, not tcjit: the step still compiles whole (it broke before at
    # the wrapper's set_eval_frame call)
    class PatchedAdamW(torch.optim.AdamW):
        pass

    PatchedAdamW._init_group = torch._dynamo.disable(
        torch.optim.AdamW._init_group, reason="as TorchPatcher does")
    m, twin = _model(), _model()
    oa = PatchedAdamW(m.parameters(), lr=1e-2)
    ob = torch.optim.AdamW(twin.parameters(), lr=1e-2)
    step = tcjit.compile(oa.step)
    for s in range(3):
        _grads(m, s)
        _grads(twin, s)
        step()
        ob.step()
        _same_state(oa, ob, 1e-6)
    ex = tcjit.explain(oa.step)()
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_user_torch_compiler_disable_is_kept():
    @torch.compiler.disable
    def helper(x):
        return x * 2

    def f(x):
        return helper(x + 1) - 1

    x = torch.randn(8)
    torch.testing.assert_close(tcjit.compile(f)(x), f(x))
    ex = tcjit.explain(f)(x)
    assert ex.graph_break_count >= 1   # the user's disable: run in Python
