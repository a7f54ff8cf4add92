"""Frames: closures, defaults, globals, keyword arguments, shape arithmetic,
methods, Python calls, exceptions with tracebacks, unsupported constructs
(graph breaks) and other Python the tracer must not get wrong."""
import collections
import dataclasses
import inspect
import sys
import traceback
import typing
import warnings

import pytest
import torch

import tcjit
from conftest import check_same, counters, run_both

G_TENSOR = torch.linspace(-1, 1, 6)
G_SCALE = 1.5


def helper_scale(t, k):
    return t * k + 1


# ---- closures, defaults, globals ------------------------------------------------------

def test_closure_tensor_and_scalar():
    w = torch.randn(6)
    s = 1.5

    def f(x):
        return x * w + s

    x = torch.randn(4, 6)
    cf = run_both(f, x)
    assert counters()["frames_compiled"] == 1
    w.mul_(-3)               # in-place change of the closed-over tensor
    check_same(cf(x), f(x))


def test_closure_tensor_rebound():
    w = torch.ones(3)

    def f(x):
        return x + w

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x), x + 1)
    w = torch.full((3,), 7.0)
    check_same(cf(x), x + 7)


def test_nested_closure_cells_and_cellvars():
    def outer(a):
        b = a * 2          # cell variable captured by inner

        def inner(x):
            return x * b + a
        return inner(a) - b

    run_both(outer, torch.randn(4))


def test_default_args():
    def f(x, scale=2.0, shift=torch.tensor(0.5)):
        return x * scale + shift

    x = torch.randn(3)
    cf = tcjit.compile(f)
    check_same(cf(x), f(x))
    check_same(cf(x, 3.0), f(x, 3.0))
    check_same(cf(x, shift=torch.tensor(-1.0)), f(x, shift=torch.tensor(-1.0)))
    check_same(cf(x, scale=0.25), f(x, scale=0.25))


def test_globals_tensor_and_scalar():
    def f(x):
        return x * G_SCALE + G_TENSOR

    run_both(f, torch.randn(2, 6))
    assert counters()["frames_compiled"] == 1


def test_global_scalar_change_recompiles():
    global G_SCALE

    def f(x):
        return x - G_SCALE

    cf = tcjit.compile(f)
    x = torch.randn(3)
    try:
        check_same(cf(x), x - 1.5)
        G_SCALE = -4.0
        check_same(cf(x), x + 4.0)
        assert counters()["recompiles"] == 1
    finally:
        G_SCALE = 1.5


def test_global_torch_module_alias():
    import torch as th    # noqa: F401 - the function reads the global 'torch'

    def f(x):
        return torch.nn.functional.relu(x) + torch.sigmoid(x)

    run_both(f, torch.randn(5))


# ---- keyword arguments in calls -------------------------------------------------------------

def test_keyword_arguments_in_torch_calls():
    def f(x, y):
        a = torch.clamp(x, min=0.1)
        b = torch.add(x, y, alpha=2)
        c = torch.sub(input=x, other=y, alpha=0.5)
        d = x.clamp(max=0.3, min=-0.3)
        e = torch.pow(x, exponent=2)
        g = torch.where(x > 0, input=x, other=y)
        return a, b, c, d, e, g

    run_both(f, torch.randn(4, 3), torch.randn(4, 3))
    assert counters()["frames_compiled"] == 1


# ---- shapes in Python arithmetic -----------------------------------------------------------------

def test_shape_size_dim_numel_arithmetic():
    def f(x):
        n = x.shape[0]
        m = x.size(1)
        k = x.size()[-1]
        return x * n + m / x.numel() - x.dim() + k

    cf = tcjit.compile(f)
    for shape in [(3, 4), (3, 4), (5, 2)]:
        x = torch.randn(shape)
        check_same(cf(x), f(x))
    c = counters()
    assert c["frames_compiled"] == 2 and c["cache_hits"] == 1


def test_shape_returned_as_python_values():
    def f(x):
        return x.shape, x.size(0), x.dim(), x.numel(), x + 1

    run_both(f, torch.randn(2, 3))


# ---- methods, Python calls --------------------------------------------------------------------------

class Model:
    def __init__(self):
        self.w = torch.linspace(0, 1, 5)
        self.bias = 0.25

    @tcjit.compile
    def forward(self, x):
        return torch.relu(x * self.w + self.bias)

    @tcjit.compile
    def plain(self, x):
        return x.sin() * 2


def test_compile_decorator_on_method():
    m = Model()
    x = torch.randn(3, 5)
    ref = torch.relu(x * m.w + m.bias)
    check_same(m.forward(x), ref)
    check_same(m.forward(x), ref)
    check_same(m.plain(x), x.sin() * 2)
    m2 = Model()
    m2.w = torch.randn(5)
    m2.bias = -1.0
    check_same(m2.forward(x), torch.relu(x * m2.w + m2.bias))
    assert counters()["frames_compiled"] >= 1


def test_compiled_wrapper_as_bound_method_name():
    m = Model()
    assert callable(m.forward)
    assert Model.forward.__name__ == "forward"


def test_calls_python_function():
    def f(x, y):
        return helper_scale(x, 3) + helper_scale(y, 0.5)

    run_both(f, torch.randn(4), torch.randn(4))


def test_lambda_and_star_args():
    run_both(lambda *xs: xs[0] * xs[1] - xs[2], torch.randn(3),
             torch.randn(3), torch.randn(3))
    tcjit.reset()

    def f(x, **kw):
        return x * kw["a"] + kw["b"]

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x, a=2.0, b=torch.ones(3)), f(x, a=2.0, b=torch.ones(3)))


def test_local_list_building_and_unpacking():
    def f(x, y):
        out = []
        a, b = x + 1, y * 2
        out.append(a)
        out.append(b)
        p, q = out
        return [p - q, *out]

    run_both(f, torch.randn(3), torch.randn(3))


def test_generator_function_left_to_cpython():
    def gen(x):
        yield x + 1
        yield x * 2

    cg = tcjit.compile(gen)
    x = torch.randn(3)
    check_same(list(cg(x)), list(gen(x)))


def test_try_except_and_with_block():
    def f(x):
        try:
            y = x * 2
        except ValueError:
            y = x
        with torch.no_grad():
            z = y + 1
        return z

    run_both(f, torch.randn(4))


def test_recursion():
    def f(x, n):
        return x if n == 0 else f(x * 2, n - 1) + 1

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x, 3), f(x, 3))


# ---- exceptions ----------------------------------------------------------------------------

def _tb_entries_in_this_file(exc):
    return [(fs.lineno, fs.name) for fs in traceback.extract_tb(exc.__traceback__)
            if fs.filename == __file__]


def _line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if needle in line:
            return start + i
    raise AssertionError(needle)


def test_shape_error_surfaces_with_traceback():
    def f(x):
        y = x * 2
        z = y + torch.ones(3)   # shape mismatch here
        return z

    line = _line_of(f, "shape mismatch here")
    x = torch.randn(4)
    with pytest.raises(RuntimeError) as eager:
        f(x)
    cf = tcjit.compile(f)
    for _ in range(2):
        with pytest.raises(RuntimeError) as info:
            cf(x)
        assert type(info.value) is RuntimeError
        assert str(info.value) == str(eager.value)
        assert (line, "f") in _tb_entries_in_this_file(info.value)
    # still works on good inputs
    x3 = torch.randn(3)
    check_same(cf(x3), f(x3))


def test_shape_error_between_traced_inputs():
    def f(x, y):
        a = x.sin()
        return a + y            # inputs of different shapes

    line = _line_of(f, "inputs of different shapes")
    x, y = torch.randn(4), torch.randn(5)
    with pytest.raises(RuntimeError) as eager:
        f(x, y)
    cf = tcjit.compile(f)
    with pytest.raises(RuntimeError) as info:
        cf(x, y)
    assert type(info.value) is type(eager.value)
    assert str(info.value) == str(eager.value)
    assert (line, "f") in _tb_entries_in_this_file(info.value)


def test_raise_value_error_from_function():
    def f(x):
        y = x + 1
        raise ValueError(f"bad value {y.shape[0]}")   # raise here

    line = _line_of(f, "raise here")
    cf = tcjit.compile(f)
    with pytest.raises(ValueError, match="bad value 4") as info:
        cf(torch.randn(4))
    assert (line, "f") in _tb_entries_in_this_file(info.value)


def test_exception_in_called_function():
    def inner(x):
        return x / torch.zeros(2, 2)   # raise in inner

    def f(x):
        return inner(x) * 2

    line = _line_of(inner, "raise in inner")
    cf = tcjit.compile(f)
    with pytest.raises(RuntimeError) as info:
        cf(torch.randn(3))
    entries = _tb_entries_in_this_file(info.value)
    assert (line, "inner") in entries


def test_op_error_matches_eager_type():
    def f(x):
        return -x              # neg of bool raises RuntimeError in eager

    run_both(f, torch.tensor([True, False]))
    tcjit.reset()
    run_both(lambda x: ~x, torch.randn(3))              # TypeError
    tcjit.reset()
    run_both(lambda x, y: x & y, torch.randn(3), torch.randn(3))  # NotImplementedError


# ---- unsupported constructs run eagerly -----------------------------------------------------

def test_print_graph_break_runs_eagerly(capsys):
    def f(x):
        y = x.sin()
        print("value", y.shape)
        return y * 2

    x = torch.randn(3)
    ref = f(x)
    eager_out = capsys.readouterr().out
    cf = tcjit.compile(f)
    for _ in range(2):
        check_same(cf(x), ref)
        assert capsys.readouterr().out == eager_out   # printed exactly once


def test_item_graph_break():
    def f(x):
        s = x[0].item()
        return x * s + 1

    run_both(f, torch.tensor([2.0, 3.0, -1.0]))


def test_data_dependent_if():
    def f(x):
        if x > 0:
            return x * 2
        return x - 1

    cf = tcjit.compile(f)
    for v in (3.0, -3.0, 0.5, -0.5):
        x = torch.tensor(v)
        check_same(cf(x), f(x))


def test_data_dependent_while_loop():
    def f(x):
        while x.sum() < 100:
            x = x * 2 + 1
        return x

    run_both(f, torch.ones(4))


def test_for_loop_over_python_range():
    def f(x):
        for i in range(3):
            x = x * 2 + i
        return x

    run_both(f, torch.randn(4))


def test_in_place_ops_and_side_effects():
    def f(x, log):
        log.append(1)
        x.add_(1)
        return x * 2

    x1, x2 = torch.randn(3), None
    x2 = x1.clone()
    l1, l2 = [], []
    cf = tcjit.compile(f)
    out = cf(x1, l1)
    ref = f(x2, l2)
    check_same(out, ref)
    check_same(x1, x2)
    assert l1 == l2 == [1]


# ---- compiled functions calling each other, code objects dying ------------------

def test_compiled_calls_compiled():
    @tcjit.compile
    def inner(x):
        return x.tanh() * 2

    @tcjit.compile
    def outer(x, y):
        return inner(x) + inner(y) * 3

    x, y = torch.randn(5), torch.randn(5)
    ref = torch.tanh(x) * 2 + torch.tanh(y) * 2 * 3
    check_same(outer(x, y), ref)
    check_same(outer(x, y), ref)


def test_compiled_function_objects_die_cleanly():
    import gc
    import weakref

    x = torch.randn(3)
    refs = []
    for i in range(20):
        src = f"def f_{i}(x):\n    return x * {i} + 1\n"
        ns = {}
        exec(compile(src, __file__, "exec"), ns)
        cf = tcjit.compile(ns[f"f_{i}"])
        check_same(cf(x), x * i + 1)
        refs.append(weakref.ref(ns[f"f_{i}"]))
        del cf, ns
    gc.collect()
    assert sum(r() is not None for r in refs) == 0, "compiled functions leak"
    tcjit.reset()
    gc.collect()
    check_same(tcjit.compile(lambda t: t - 1)(x), x - 1)


def test_enable_compiles_nested_user_functions():
    def inner(x):
        return x.sigmoid() * 3

    def outer(x):
        return inner(x) - 1

    x = torch.randn(4)
    tcjit.enable()
    try:
        out1 = outer(x)
        out2 = outer(x)
        c = counters()
    finally:
        tcjit.disable()
    ref = torch.sigmoid(x) * 3 - 1
    check_same(out1, ref)
    check_same(out2, ref)
    assert c["frames_compiled"] >= 1
    assert c["cache_hits"] >= 1


# ---- instructions the runtime performs see the frame they belong to ------------
#
# A STEP (a call tcjit cannot trace) runs while the frame is current, as it
# is when CPython executes the instruction: zero-argument super() reads
# __class__ and `self` (a cell when a closure captures it) from the current
# frame, and so do sys._getframe(), locals() and warnings.

class _Record:
    def __init__(self, x):
        self.x = x

    def __setattr__(self, name, value):
        super().__setattr__(name, value)


class _Output(collections.OrderedDict):
    """transformers' ModelOutput in small: every field is an item and an
    attribute, kept in sync by __setitem__ / __setattr__ through super()."""

    def __post_init__(self):
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None:
                self[field.name] = value

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        super().__setattr__(key, value)

    def __setattr__(self, name, value):
        if name in self.keys() and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)


@dataclasses.dataclass
class _ModelOutput(_Output):
    logits: typing.Optional[torch.Tensor] = None
    hidden: typing.Optional[torch.Tensor] = None


class _Base:
    def scale(self, x):
        return x * 2


class _CapturesSelf(_Base):
    def scale(self, x):
        get = lambda: self          # noqa: E731 - self becomes a cell
        y = super().scale(x)
        return y + (get() is self) + super(_CapturesSelf, self).scale(x)


def _records(x):
    r = _Record(x * 2)
    r.y = x + 1
    return r.x + r.y


def _model_output(x):
    out = _ModelOutput(logits=x * 2, hidden=x.sin())
    out.logits = out.logits + 1
    return out.logits + out["hidden"], list(out.keys()), len(out)


def _captures_self(x):
    return _CapturesSelf().scale(x)


def _introspects(x):
    y = x + 1
    frame = sys._getframe()
    names = sorted(locals())
    return (y * len(frame.f_code.co_name), names, frame.f_lineno,
            frame.f_back is not None, globals() is G_GLOBALS)


G_GLOBALS = globals()


def _run_three_ways(fn, x):
    expected = [fn(x), fn(x)]
    compiled = tcjit.compile(fn)
    check_same([compiled(x), compiled(x)], expected)
    tcjit.reset()
    tcjit.enable()
    try:
        got = [fn(x), fn(x)]
    finally:
        tcjit.disable()
    check_same(got, expected)


@pytest.mark.parametrize("fn", [_records, _model_output, _captures_self,
                                _introspects])
def test_steps_run_in_their_frame(fn):
    _run_three_ways(fn, torch.randn(4))


def test_step_warning_points_at_the_frames_line():
    def f(x):
        y = x.cos()
        warnings.warn("from f", stacklevel=1)
        return y

    line = inspect.getsourcelines(f)[1] + 2
    for run in (f, tcjit.compile(f)):
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            check_same(run(torch.ones(3)), torch.ones(3).cos())
        assert [(w.filename, w.lineno) for w in seen] == [(__file__, line)]


# ---- debuggers, profilers, coroutines, descriptors -------------------------------

def test_settrace_sees_every_line():
    """With a trace function installed (a debugger, coverage), the frame
    runs in CPython so the tracer sees its lines."""
    import sys

    def f(x):
        y = x * 2
        return y + 1

    cf = tcjit.compile(f)
    x = torch.randn(4)
    cf(x)
    events = []

    def tracer(frame, event, arg):
        if frame.f_code is f.__code__:
            events.append(event)
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        out = cf(x)
    finally:
        sys.settrace(old)
    check_same(out, f(x))
    assert events == ["call", "line", "line", "return"]


def test_setprofile_sees_call_and_return():
    import sys

    def f(x):
        return x.cos() - 1

    cf = tcjit.compile(f)
    x = torch.randn(4)
    cf(x)
    events = []

    def prof(frame, event, arg):
        if frame.f_code is f.__code__:
            events.append(event)

    sys.setprofile(prof)
    try:
        out = cf(x)
    finally:
        sys.setprofile(None)
    check_same(out, f(x))
    # c_call/c_return of x.cos(): the body ran in CPython, seen by the profiler
    assert events == ["call", "c_call", "c_return", "return"]


def test_compiles_after_a_trace_function_went_away():
    """A code object that ran while (or after) a trace function was set
    keeps its monitoring data once the tracer is gone; only tools that are
    still active keep a frame in CPython.  (3.13 has fewer per-code events
    than 3.12: reading 3.12's count took a pointer's byte for a tool.)"""
    import sys

    def g(x):
        return x * 2

    def f(x):
        y = x.sin()
        if x.sum() > 0:
            y = y + 1
        return y.cos()

    cg = tcjit.compile(g)
    cg(torch.randn(3))
    old = sys.gettrace()
    sys.settrace(lambda *a: None)
    try:
        cg(torch.randn(3))
    finally:
        sys.settrace(old)
    x = torch.randn(8)
    f(x)                                  # eager: CPython instruments f
    tcjit.reset()
    cf = tcjit.compile(f)
    for _ in range(2):
        check_same(cf(x), f(x))
    assert tcjit.counters()["graphs"] >= 1


def _raises_with_keyword(x, k):
    raise ValueError("boom")


def test_traceback_position_of_a_keyword_call_that_raised():
    """An exception thrown into the frame at an instruction the runtime
    performed keeps that instruction's position in the traceback, also for
    3.13's CALL_KW, which has no CACHE entry to stand on: the next
    instruction here is on another line."""
    import traceback

    def f(x):
        y = x.sin()
        z = (y +
             _raises_with_keyword(y, k=1))
        return z

    def where(fn):
        try:
            fn(torch.ones(2))
        except ValueError as e:
            return [(t.name, t.lineno, t.colno, t.end_colno)
                    for t in traceback.extract_tb(e.__traceback__)][-2:]
        raise AssertionError("no exception")

    assert where(tcjit.compile(f)) == where(f)


def test_coroutine_function():
    import asyncio

    async def af(x):
        return x.sin() + 1

    caf = tcjit.compile(af)
    x = torch.randn(3)
    check_same(asyncio.run(caf(x)), torch.sin(x) + 1)


class WithDescriptors:
    @staticmethod
    @tcjit.compile
    def s(x):
        return x - 1

    @classmethod
    @tcjit.compile
    def c(cls, x):
        return x + 2


def test_staticmethod_and_classmethod():
    x = torch.randn(3)
    check_same(WithDescriptors.s(x), x - 1)
    check_same(WithDescriptors().s(x), x - 1)
    check_same(WithDescriptors.c(x), x + 2)


# ---- tensor subclasses -------------------------------------------------------------

class PlainSubclass(torch.Tensor):
    pass


class TracingSubclass(torch.Tensor):
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


def test_plain_tensor_subclass_type_is_kept():
    """eager: ops on a torch.Tensor subclass return that subclass."""
    def f(x):
        return x * 2 + 1

    x = torch.randn(3).as_subclass(PlainSubclass)
    ref = f(x)
    assert type(ref) is PlainSubclass
    run_both(f, x)


def test_torch_function_subclass_sees_the_same_calls():
    """A __torch_function__ override must see the ops the program performs
    (as in eager), and the result keeps the subclass."""
    def f(x):
        return x * 2

    x = torch.randn(3).as_subclass(TracingSubclass)
    TracingSubclass.seen.clear()
    ref = f(x)
    eager_seen = list(TracingSubclass.seen)
    assert eager_seen == ["mul"]
    cf = tcjit.compile(f)
    TracingSubclass.seen.clear()
    out = cf(x)
    assert TracingSubclass.seen == eager_seen
    check_same(out, ref)


# ---- graph breaks: side effects and cache stability ------------------------------

def test_list_append_side_effect_on_argument():
    def f(x, log):
        log.append(1)
        return x * 2

    x = torch.randn(3)
    cf = tcjit.compile(f)
    for n in (1, 2):
        log = []
        check_same(cf(x, log), x * 2)
        assert log == [1], f"call {n}: side effect lost: {log}"


def test_local_list_append_then_return():
    def f(x):
        out = []
        out.append(x + 1)
        out.append(x * 3)
        return out

    run_both(f, torch.randn(3))


@pytest.mark.parametrize("kind", ["print", "item", "branch", "sum_branch",
                                  "append_new_list"])
def test_graph_break_frames_reach_a_steady_state(kind, capsys):
    """Calling a function with a graph break again with the same inputs
    must reuse what was compiled: no recompile on every call, and never
    the recompile limit."""
    import warnings

    def f_print(x):
        y = x * 2
        print("p")
        return y + 1

    def f_item(x):
        return x * x[0].item()

    def f_branch(x):
        if x[0] > 0:
            return x * 2
        return x - 1

    def f_sum_branch(x):
        y = x * 2
        if y.sum() > 1e9:
            return y
        return y + 1

    def f_append_new_list(x):
        out = [x]
        y = x * 2
        out.append(y)            # a new list (and bound method) every call
        return out

    f = {"print": f_print, "item": f_item, "branch": f_branch,
         "sum_branch": f_sum_branch, "append_new_list": f_append_new_list}[kind]
    cf = tcjit.compile(f)
    x = torch.tensor([1.5, -2.0, 3.0])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(4):
            check_same(cf(x), f(x))
        settled = counters()
        for _ in range(12):
            check_same(cf(x), f(x))
        after = counters()
    assert not [m for m in w if "recompile_limit" in str(m.message)], \
        [str(m.message) for m in w]
    assert after["frames_compiled"] == settled["frames_compiled"], (settled, after)
    assert after["recompiles"] == settled["recompiles"], (settled, after)


# ---- resuming after a graph break: state before and after the break -----------------

def _gb_mid_expression(x):
    return x.sin() + float(x.sum()) * x        # break inside an expression


def _gb_two_breaks(x):
    a = x * 2
    print("first")
    b = a + 1
    s = b.sum().item()
    c = b * s
    return a, b, c


def _gb_locals_survive(x, y):
    a = x + y
    n = int(x.numel())
    b = a * n
    print("between", n)
    return a - b, n, y


def _gb_in_loop(x):
    acc = x
    for i in range(3):
        acc = acc * 2
        print("iter", i)
        acc = acc + i
    return acc


def _gb_closure(x):
    k = 3.0

    def inner(t):
        return t * k

    print("before inner")
    return inner(x) + k


def _gb_try_except(x):
    try:
        y = x * 2
        print("in try")
        raise KeyError("k")
    except KeyError:
        y = y + 100
    return y


def _gb_keyword_call(x):
    y = x + 1
    print("kw", end="!\n", sep="")
    return y


def _gb_branch_both_ways(x):
    y = x * 3
    if y.sum() > 0:
        z = y + 1
    else:
        z = y - 1
    return z * 2, y


def _gb_while(x):
    n = 0
    while x.abs().max() < 100:
        x = x * 2
        n += 1
    return x, n


def _gb_builtin_on_tensor(x):
    y = x + 1
    m = max(y.tolist())
    return y * m


GRAPH_BREAK_FUNCS = {
    "mid_expression": (_gb_mid_expression, (torch.randn(5),)),
    "two_breaks": (_gb_two_breaks, (torch.randn(5),)),
    "locals_survive": (_gb_locals_survive, (torch.randn(5), torch.randn(5))),
    "in_loop": (_gb_in_loop, (torch.randn(5),)),
    "closure": (_gb_closure, (torch.randn(5),)),
    "try_except": (_gb_try_except, (torch.randn(5),)),
    "keyword_call": (_gb_keyword_call, (torch.randn(5),)),
    "branch_pos": (_gb_branch_both_ways, (torch.ones(5),)),
    "branch_neg": (_gb_branch_both_ways, (-torch.ones(5),)),
    "while": (_gb_while, (torch.randn(5) * 0.01,)),
    "builtin_on_tensor": (_gb_builtin_on_tensor, (torch.randn(5),)),
}


@pytest.mark.parametrize("case", list(GRAPH_BREAK_FUNCS))
def test_graph_break_resume(case, capsys):
    fn, args = GRAPH_BREAK_FUNCS[case]
    expected_out = None
    cf = tcjit.compile(fn)
    ref = fn(*args)
    expected_out = capsys.readouterr().out
    for _ in range(3):
        check_same(cf(*args), ref)
        assert capsys.readouterr().out == expected_out


def test_graph_break_then_exception_line_numbers():
    def f(x):
        y = x * 2
        print("before")
        z = y + torch.ones(7)        # fails after the break
        return z

    line = _line_of(f, "fails after the break")
    cf = tcjit.compile(f)
    for _ in range(2):
        with pytest.raises(RuntimeError) as info:
            cf(torch.randn(3))
        assert (line, "f") in _tb_entries_in_this_file(info.value)


def test_graph_break_branch_alternates():
    cf = tcjit.compile(_gb_branch_both_ways)
    for v in (1.0, -1.0, 2.0, -3.0, 1.0, -1.0):
        x = torch.full((4,), v)
        check_same(cf(x), _gb_branch_both_ways(x))
