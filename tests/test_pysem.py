"""Python semantics the tracer keeps inside a graph (issue 3): loops over
known iterables are unrolled, grad-mode `with` blocks are traced, closures,
methods, partials, *args/**kwargs and other modules' functions are inlined,
and builtins on known values fold.

Every result is compared with eager; explain() shows that the construct
no longer breaks the graph.
"""
import functools
import inspect
import sys
import textwrap
import traceback

import pytest
import torch

import tcjit
from conftest import check_same, log_messages


def line_of(fn, needle):
    lines, start = inspect.getsourcelines(fn)
    for i, line in enumerate(lines):
        if needle in line:
            return start + i
    raise AssertionError(needle)


def one_graph(fn, *args, calls=2):
    """explain() shows one graph and no break; compiled calls match eager.
    (explain's own result comes from its Python replay of the graph, which
    does not apply reduction attributes: the compiled calls are what is
    compared.)"""
    expected = fn(*args)
    ex = tcjit.explain(fn)(*args)
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    assert ex.graph_count == 1
    cf = tcjit.compile(fn)
    for _ in range(calls):
        check_same(cf(*args), expected)
    return ex


# ---- 1. for loops ---------------------------------------------------------------

def test_range_loop_with_continue_and_break_is_unrolled():
    def f(x):
        for i in range(1, 10, 2):
            if i == 3:
                continue
            if i > 7:
                break
            x = x * 2 + i
        return x

    ex = one_graph(f, torch.randn(4))
    assert ex.ops_per_graph[0].count("mul") == 3


def test_loop_over_list_argument_items_are_graph_inputs():
    def f(x, xs):
        for t in xs:
            x = x + t
        return x

    xs = [torch.randn(3), torch.randn(3), torch.randn(3)]
    ex = one_graph(f, torch.randn(3), xs)
    guards = "\n".join(ex.guards[0])
    assert "len(L['xs']) == 3" in guards
    assert "TENSOR_MATCH L['xs'][2]" in guards
    # the length is guarded: another length recompiles and is right
    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x, xs), f(x, xs))
    check_same(cf(x, xs[:2]), f(x, xs[:2]))


def test_loop_over_tuple_and_mixed_items():
    def f(x):
        acc = x
        for k in (2, 0.5, x):
            acc = acc * k
        return acc

    one_graph(f, torch.randn(5))


def test_enumerate_zip_reversed():
    def f(x, xs, ys):
        for i, t in enumerate(xs, 1):
            x = x + i * t
        for a, b in zip(xs, reversed(ys)):
            x = x - a * b
        for i, (a, b) in enumerate(zip(xs, ys)):
            x = x + (a - b) / (i + 1)
        return x

    xs = [torch.randn(4) for _ in range(3)]
    ys = (torch.randn(4), torch.randn(4))
    one_graph(f, torch.randn(4), xs, ys)


def test_nested_loops_and_range_of_shape():
    def f(x):
        out = x
        for i in range(x.shape[0]):
            for j in range(2):
                out = out + (i * j)
        return out

    one_graph(f, torch.randn(3, 2))


def test_loop_over_unknown_iterator_still_breaks():
    def gen(n):
        yield from range(n)

    def f(x):
        for i in gen(3):
            x = x + i
        return x

    x = torch.randn(3)
    ex = tcjit.explain(f)(x)
    check_same(ex.result, f(x))
    assert ex.graph_break_count >= 1


def test_break_inside_unrolled_loop_resumes_in_order(capsys):
    def f(x, xs):
        for i, t in enumerate(xs):
            x = x * t
            print("iter", i)
            x = x + i
        return x.cos()

    xs = [torch.randn(3) for _ in range(3)]
    x = torch.randn(3)
    expected = f(x, xs)
    eager_out = capsys.readouterr().out
    cf = tcjit.compile(f)
    for _ in range(2):
        check_same(cf(x, xs), expected)
        assert capsys.readouterr().out == eager_out


def test_list_mutated_inside_loop_keeps_eager_semantics():
    def f(x, xs):
        for t in xs:
            if len(xs) < 4:
                xs.append(t * 2)   # a STEP: the iterator sees the new item
            x = x + t
        return x

    x = torch.randn(3)
    a, b = [torch.randn(3), torch.randn(3)], None
    b = [t.clone() for t in a]
    cf = tcjit.compile(f)
    check_same(cf(x, a), f(x, b))
    assert len(a) == len(b) == 4


def test_exception_inside_unrolled_loop_keeps_type_message_and_line():
    def f(x, xs):
        for t in xs:
            x = x + t            # the second item does not broadcast
        return x

    xs = [torch.randn(3), torch.randn(4)]
    with pytest.raises(RuntimeError) as eager:
        f(torch.randn(3), xs)
    line = line_of(f, "does not broadcast")
    cf = tcjit.compile(f)
    for _ in range(2):
        with pytest.raises(RuntimeError) as info:
            cf(torch.randn(3), xs)
        assert str(info.value) == str(eager.value)
        frames = [(fr.lineno, fr.name)
                  for fr in traceback.extract_tb(info.value.__traceback__)]
        assert (line, "f") in frames


def test_instruction_budget_stops_long_unrolling():
    def f(x):
        n = 0
        for i in range(100000):
            n = n + i
        return x + n

    x = torch.randn(3)
    ex = tcjit.explain(f)(x)
    check_same(ex.result, f(x))
    assert any("instructions traced" in b.reason for b in ex.break_reasons)
    check_same(tcjit.compile(f)(x), f(x))


# ---- 2. grad mode -------------------------------------------------------------------

def test_no_grad_block_with_input_that_requires_grad():
    def f(x, w):
        with torch.no_grad():
            y = x * w + 1
        return y.relu()

    x, w = torch.randn(4), torch.randn(4, requires_grad=True)
    ex = one_graph(f, x, w)
    assert not ex.result.requires_grad
    assert "requires_grad=1" in "\n".join(ex.guards[0])
    assert torch.is_grad_enabled()


def test_input_requiring_grad_used_after_no_grad_runs_eagerly():
    def f(w):
        with torch.no_grad():
            y = w * 2
        return y + w * 3        # needs autograd

    w = torch.randn(3, requires_grad=True)
    out = tcjit.compile(f)(w)
    check_same(out, f(w))
    out.sum().backward()
    torch.testing.assert_close(w.grad, torch.full((3,), 3.0))


@pytest.mark.parametrize("ctx", ["set_grad_enabled", "inference_mode",
                                 "enable_grad"])
def test_other_grad_contexts(ctx):
    def f(x):
        with torch.set_grad_enabled(False):
            a = x * 2
        with torch.inference_mode():
            b = x + 1
        with torch.enable_grad():
            c = x - 1
        return a + b + c, torch.is_grad_enabled

    def g(x):
        return f(x)[0]

    x = torch.randn(3)
    one_graph(g, x)
    with torch.no_grad():
        # enable_grad inside an outer no_grad: the inner block has grad on
        ex = tcjit.explain(g)(x)
        check_same(ex.result, g(x))
        assert ex.graph_break_count == 0


def test_break_inside_with_block_keeps_grad_mode(capsys):
    def f(x):
        with torch.no_grad():
            y = x * 2
            print("inside", torch.is_grad_enabled())
            z = y + 1
        return z * 3

    w = torch.randn(3, requires_grad=True)
    expected = f(w)
    eager_out = capsys.readouterr().out
    cf = tcjit.compile(f)
    for _ in range(2):
        check_same(cf(w), expected)
        assert capsys.readouterr().out == eager_out == "inside False\n"
        assert torch.is_grad_enabled()


def test_exception_inside_with_block_restores_grad_mode():
    def f(x):
        with torch.no_grad():
            y = x * 2
            print("break")
            z = y + torch.ones(7)       # raises after the break
        return z

    cf = tcjit.compile(f)
    for _ in range(2):
        with pytest.raises(RuntimeError) as info:
            cf(torch.randn(3))
        assert torch.is_grad_enabled()
        frames = [fr.lineno for fr in
                  traceback.extract_tb(info.value.__traceback__)]
        assert line_of(f, "raises after the break") in frames


@torch.no_grad()
def _decorated(x, k=2.0):
    return x * k


def test_no_grad_decorated_callee_is_inlined():
    def f(x):
        return _decorated(x, k=3.0) + 1

    x = torch.randn(3, requires_grad=True)
    ex = one_graph(f, x)
    assert not ex.result.requires_grad


# ---- 3. inlining --------------------------------------------------------------------

def _make_scale(k):
    def scale(t):
        return t * k
    return scale


def _make_shift(fn, b):
    def shift(t):
        return fn(t) + b
    return shift


_deep = _make_shift(_make_shift(_make_scale(2.0), 1.0), torch.ones(3))


def test_closures_inlined_three_deep():
    def f(x):
        return _deep(x).relu()

    ex = one_graph(f, torch.randn(3))
    guards = "\n".join(ex.guards[0])
    assert "__closure__" in guards


def test_closure_cell_rebound_recompiles():
    cells = []

    def make():
        k = 2.0

        def inner(t):
            return t * k

        def set_k(v):
            nonlocal k
            k = v
        cells.append(set_k)
        return inner

    g = make()

    def f(x):
        return g(x) + 1

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x), f(x))
    cells[0](5.0)
    check_same(cf(x), f(x))


def test_function_of_another_module(tmp_path, monkeypatch):
    (tmp_path / "pysem_other.py").write_text(textwrap.dedent("""
        import torch
        SCALE = 3.0
        def helper(x):
            return torch.sigmoid(x) * SCALE + len([1, 2])
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import pysem_other

    def f(x):
        return pysem_other.helper(x)

    ex = one_graph(f, torch.randn(3))
    assert "__globals__['SCALE']" in "\n".join(ex.guards[0])
    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x), f(x))
    pysem_other.SCALE = -1.0            # the other module's global is guarded
    check_same(cf(x), f(x))
    sys.modules.pop("pysem_other")


def _varargs(*xs, scale=1.0, **kw):
    return sum_all(xs) * scale + kw["bias"] + len(kw)


def sum_all(xs):
    acc = 0
    for t in xs:
        acc = t + acc
    return acc


def test_star_args_and_kwargs():
    def f(x, y):
        opts = {"bias": 2.0, "extra": None}
        a = _varargs(x, y, scale=3.0, **opts)
        b = _varargs(*(x, y, x), bias=1)
        return a, b

    one_graph(f, torch.randn(3), torch.randn(3))


_softmax_last = functools.partial(torch.softmax, dim=-1)
_scaled = functools.partial(_varargs, scale=0.5, bias=1.0)


def test_functools_partial():
    def f(x, y):
        return _softmax_last(x), _scaled(x, y)

    one_graph(f, torch.randn(2, 3), torch.randn(2, 3))


_global_lambda = lambda t: t.cos() * 2   # noqa: E731


def test_lambdas():
    def f(x):
        inner = lambda t: t.sin() + 1    # noqa: E731
        return inner(x) + _global_lambda(x)

    one_graph(f, torch.randn(3))


class _Model:
    def __init__(self):
        self.w = torch.randn(3)
        self.scale = 2.0

    def forward(self, x):
        return self.act(x * self.w) * self.scale

    def act(self, t):
        return t.relu() + self.offset()

    def offset(self):
        return 1


def test_bound_methods_of_user_objects():
    m = _Model()

    def f(x):
        return m.forward(x)

    ex = one_graph(f, torch.randn(3))
    assert "L['m']" in "\n".join(ex.guards[0]) or \
        "C['m']" in "\n".join(ex.guards[0])
    cf = tcjit.compile(f)
    x = torch.randn(3)
    m.scale = 5.0                        # an attribute read is guarded
    check_same(cf(x), f(x))
    fwd = m.forward                      # a bound method passed around

    def g(x):
        return fwd(x)

    one_graph(g, x)


# ---- 4. folding -----------------------------------------------------------------------

Parameter = torch.nn.Parameter


def test_isinstance_len_getattr_hasattr_fold():
    def f(x, xs, p):
        a = isinstance(x, torch.Tensor) and isinstance(xs, (list, tuple))
        b = isinstance(p, Parameter)
        c = isinstance(x.shape[0], int) and not isinstance(2.0, int)
        n = len(xs) + len(x) + len("abc")
        h = hasattr(x, "shape") and getattr(x, "ndim") == 2
        dt = getattr(x, "dtype", None)
        return x * n + a + b + c + h + p.sum(), dt

    p = torch.nn.Parameter(torch.randn(3), requires_grad=False)
    one_graph(f, torch.randn(3, 3), [1, 2], p)


def test_dict_literals_and_subscripts():
    def f(x):
        d = {"w": x * 2, "b": 1.5}
        e = dict_lit(x)
        return d["w"] + d["b"] + e[0] + d.get("missing", 3), d

    one_graph(f, torch.randn(3))


def dict_lit(x):
    return {0: x.sin(), 1: 2}


def test_assert_and_scalar_builtins_on_constants():
    def f(x):
        n = x.shape[0]
        assert n == 4, "four"
        assert isinstance(n, int)
        k = min(n, 3) + max(1, 2) + abs(-2) + int(2.7) + float(n) + round(1.4)
        return x * k

    one_graph(f, torch.randn(4))
    cf = tcjit.compile(f)
    with pytest.raises(AssertionError, match="four"):
        cf(torch.randn(5))


# ---- 5. integer counters across a break --------------------------------------------------

def test_loop_counter_across_a_break_recompiles_and_is_reported(tcjit_logs):
    caplog = tcjit_logs("recompiles")
    tcjit.config.recompile_limit = 3

    def f(x):
        n = 0
        while x.abs().max() < 50:     # BRANCH on a tensor each iteration
            x = x * 2
            n += 1
        return x, n

    cf = tcjit.compile(f)
    with pytest.warns(RuntimeWarning, match="recompile_limit"):
        for scale in (0.01, 0.1, 1.0, 0.01):
            x = torch.full((4,), scale)
            check_same(cf(x), f(x))
    msgs = log_messages(caplog, "recompiles")
    assert any("Recompiling function f" in m and "L['n'] ==" in m
               for m in msgs), msgs
    assert any("Recompile limit reached" in m for m in msgs), msgs



# ---- with nn.Module --------------------------------------------------------------------

def test_module_parameters_that_require_grad_under_no_grad():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())

    def infer(x):
        with torch.no_grad():
            return model(x) * 2

    def train(x):
        return model(x) * 2

    x = torch.randn(2, 4)
    ex = one_graph(infer, x)
    assert not ex.result.requires_grad
    out = tcjit.compile(train)(x)         # autograd: runs eagerly
    check_same(out, train(x))
    assert out.requires_grad


LOOP_FIRST_SCRIPT = r"""
import torch, tcjit
ws = [torch.full((3,), float(i)) for i in range(4)]
def f(x):
    for w in ws:          # the first thing traced in this process: a loop
        x = x * 2 + w
    return x
x = torch.randn(3)
torch.testing.assert_close(tcjit.compile(f)(x), f(x))
"""


def test_loop_as_the_first_traced_code_of_a_process(tmp_path):
    """A fresh process whose first traced instruction is a for loop (the
    tracer's builtins used to be looked up only at the first call: this
    crashed)."""
    import os
    import subprocess
    script = tmp_path / "loop_first.py"
    script.write_text(LOOP_FIRST_SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "python") + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, str(script)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]


# ---- comprehensions and closures over the frame's variables ------------------
# 3.11 compiles a comprehension to a nested function (MAKE_FUNCTION over
# LOAD_CLOSURE cells when it uses the frame's variables), inlined here;
# 3.12 inlines it into the frame (LOAD_FAST_AND_CLEAR saves the loop
# variable).  Both end up in the caller's graph.

class Heads(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.heads = torch.nn.ModuleList(torch.nn.Linear(6, 3) for _ in range(3))

    def forward(self, x):
        return torch.cat([h(x) for h in self.heads], dim=-1)


COMPREHENSIONS = {
    "list_over_args": lambda x, ws: torch.stack([x * w for w in ws]).sum(0),
    "list_of_chunks": lambda x, ws: torch.cat([p.relu() for p in x.chunk(3, -1)], -1),
    "dict": lambda x, ws: (lambda d: d[1] + d[2])({k: x * k for k in range(3)}),
    "nested": lambda x, ws: torch.stack([torch.stack([x + w for w in ws]) for _ in range(2)]),
    "with_condition": lambda x, ws: torch.stack([x + i for i in range(6) if i % 2]),
    "enumerate_zip": lambda x, ws: [x * i + w for i, w in enumerate(ws)][-1],
}


@pytest.mark.parametrize("name", list(COMPREHENSIONS))
def test_comprehension_is_one_graph(name):
    one_graph(COMPREHENSIONS[name], torch.randn(4, 6), [1.0, 2.0, 3.0])


def test_comprehension_over_module_list():
    m = Heads().eval()
    with torch.no_grad():
        one_graph(m, torch.randn(2, 6))


def test_comprehension_variable_keeps_its_outer_value():
    """The loop variable of a 3.12 inlined comprehension is saved and put
    back; on 3.11 it is the nested function's own local."""
    def f(x):
        i = x.sum()
        ys = [x * i for i in range(3)]
        return ys[2] + i

    one_graph(f, torch.randn(5))


def test_lambda_over_a_local_sees_later_assignments():
    def f(x):
        s = 2
        g = lambda t: t * s   # noqa: E731 - a closure over s
        s = 3
        return g(x) + s

    one_graph(f, torch.randn(3))


def test_closure_returned_keeps_the_final_values():
    def f(x):
        y = x + 1
        g = lambda: y * 2  # noqa: E731
        y = y * 10
        return g

    cf = tcjit.compile(f)
    x = torch.randn(3)
    for _ in range(2):
        check_same(cf(x)(), f(x)())
    reasons = [b.reason for b in tcjit.explain(f)(x).break_reasons]
    assert reasons == ["returning a closure over the function's variables"]


def test_closures_made_in_a_comprehension_read_the_frame_later():
    """Lambdas made inside a comprehension (not inlined: the closure is the
    comprehension's own) read the frame's variable as it is when they are
    called, after the frame assigned it again."""
    def f(x, n):
        y = x + 1
        fs = [lambda: y * k for k in range(n)]
        y = y * 10
        return [h() for h in fs]

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x, 3), f(x, 3))


def test_comprehension_around_a_graph_break():
    printed = []

    def f(x):
        a = x.sin()
        ys = [a * i for i in range(3)]
        printed.append(len(ys))     # a graph break
        return [t + a for t in ys]

    cf = tcjit.compile(f)
    x = torch.randn(4)
    for _ in range(2):
        check_same(cf(x), f(x))
    assert printed == [3] * 4     # two compiled calls, two eager


def test_generator_expression_is_run_where_it_is_made():
    def f(x):
        return sum(x * i for i in range(3))

    one_graph(f, torch.randn(4))


def test_other_generators_break_with_a_reason():
    def gen(x):
        yield x * 2

    def f(x):
        return next(gen(x)) + 1

    cf = tcjit.compile(f)
    x = torch.randn(4)
    check_same(cf(x), f(x))
    reasons = [b.reason for b in tcjit.explain(f)(x).break_reasons]
    assert reasons and "generator" in reasons[0], reasons


def test_graph_break_inside_a_comprehension():
    """On 3.12 the comprehension runs in the frame: the break leaves the
    list being built, the iterator and the loop variable's saved outer
    value (none here) on the stack for CPython; 3.11 calls the nested
    function instead of inlining it."""
    seen = []

    def f(x):
        ys = [seen.append(i) or x * i for i in range(3)]
        return torch.stack(ys) + 1

    cf = tcjit.compile(f)
    x = torch.randn(4)
    for _ in range(2):
        check_same(cf(x), f(x))
    assert seen == [0, 1, 2] * 4


# ---- nested functions with defaults and annotations -----------------------------
# MAKE_FUNCTION with defaults, keyword defaults or annotations is performed
# by the runtime as CPython performs it: annotations are the compiler's
# flat tuple of (name, value) pairs, which the function turns into a dict
# when __annotations__ is read.

def run_both_checked(fn, x):
    cf = tcjit.compile(fn)
    expected = fn(x)
    for _ in range(2):
        check_same(cf(x), expected)


def _function_parts(fn):
    return (fn.__qualname__, fn.__defaults__, fn.__kwdefaults__,
            fn.__annotations__, fn.__closure__ is None)


def test_nested_function_with_annotations():
    def g(x):
        def inner(y: torch.Tensor) -> torch.Tensor:
            return y + 1
        return inner(x)

    run_both_checked(g, torch.randn(3))


def test_nested_function_defaults_kwdefaults_annotations_closure():
    def g(x):
        scale = x.sum()

        def inner(y: torch.Tensor, k: int = 2, *, shift: float = 0.5,
                  **kw: int) -> torch.Tensor:
            return y * k + shift * scale

        return inner(x), inner(x, 3, shift=1.0), _function_parts(inner)

    run_both_checked(g, torch.randn(3))


def test_nested_function_with_postponed_annotations():
    ns = {"torch": torch, "_function_parts": _function_parts}
    exec(textwrap.dedent("""
        from __future__ import annotations

        def g(x):
            def inner(y: torch.Tensor, k: int = 1) -> torch.Tensor:
                return y - k
            return inner(x), _function_parts(inner)
        """), ns)
    run_both_checked(ns["g"], torch.randn(3))


def test_starred_unpacking():
    def f(x, y, z):
        a, *rest = (x, y, z)
        *init, last = [x, y, z]
        p, *mid, q = (x, y, z, x)
        rest.append(p)            # the starred name is a new list
        return a + last + sum(rest) + len(mid) * q, init, mid
    args = [torch.randn(3) for _ in range(3)]
    got, want = tcjit.compile(f)(*args), f(*args)
    check_same(got[0], want[0])
    assert type(got[1]) is list and len(got[1]) == 2 and len(got[2]) == 2
    assert tcjit.explain(f)(*args).graph_break_count == 0


def test_starred_unpacking_of_too_few_raises_like_eager():
    def f(x):
        a, b, *c = (x,)
        return a
    with pytest.raises(ValueError, match="not enough values"):
        tcjit.compile(f)(torch.randn(2))


def test_skipped_frame_names_its_reason():
    # a frame without tensor arguments whose trace stops before any tensor
    # work compiles nothing; explain() and the graph_breaks log say why
    import typing

    def g(n):
        t = typing.Optional[int]
        return torch.ones(n) + (t is not None)
    ex = tcjit.explain(g)(2)
    assert ex.graph_count == 0
    assert [b.lineno for b in ex.skipped_frames] == \
        [g.__code__.co_firstlineno + 1]
    assert "Skipped Frames" in str(ex)
    check_same(tcjit.compile(g)(2), g(2))


def test_fx_printed_indexing_with_builtin_ellipsis_and_slice():
    """Graphs printed by FX (GraphNet's timm models) index with the builtin
    names: x[(Ellipsis, slice(None, 1, None))].  Ellipsis read from the
    builtins is a constant guarded by identity."""
    def f(x):
        a = x[(Ellipsis, slice(None, 1, None))]
        b = x[(slice(None, None, None), None, Ellipsis, 0)]
        return a * 2 + b.squeeze(1)[..., None]

    one_graph(f, torch.randn(3, 4))
    one_graph(f, torch.randn(2, 5, 4))


def test_fx_printed_device_calls_and_api_usage_logging():
    """FX-printed graphs (GraphNet) call torch.device(type=..., index=...)
    (a constant) and torch._C._log_api_usage_once(name) (torchvision's
    usage logging: no effect on results): both stay in the graph."""
    from torch import device

    def f(x):
        r = torch.arange(0, 4, device=device(type="cpu", index=None))
        log = torch._C._log_api_usage_once("torchvision.ops.stochastic_depth")
        return x + r, device("cpu"), log

    one_graph(f, torch.randn(4))


# ---- dict views read at once, dict(), *constants, identity equality ----------

def test_dict_views_read_at_once_are_snapshots():
    """ModelOutput.__getitem__ does dict(self.items()): a view consumed by
    a builtin before anything else runs is its dict's snapshot."""
    def f(x):
        d = {"a": x + 1, "b": x * 2}
        e = dict(d.items())
        ks, vs = list(d.keys()), tuple(d.values())
        return (e["b"], ks, vs[0], len(d.keys()), sorted(d.keys()),
                "a" in d.keys(), sum(d.values()))

    one_graph(f, torch.randn(4))


def test_dict_view_that_outlives_a_change_still_follows_its_dict():
    def f(x):
        d = {"a": x + 1}
        v = d.items()
        d["b"] = x * 3
        return [k for k, _ in v], len(v)

    x = torch.randn(3)
    ex = tcjit.explain(f)(x)
    assert any("as a value (a view)" in b.reason for b in ex.break_reasons)
    check_same(tcjit.compile(f)(x), f(x))


@pytest.mark.parametrize("case", ["empty", "pairs", "list_pairs", "dict",
                                  "keywords", "repeated", "mixed"])
def test_dict_constructor(case):
    def f(x):
        if case == "empty":
            d = dict()
        elif case == "pairs":
            d = dict((("a", x), ("b", x + 1)))
        elif case == "list_pairs":
            d = dict([["a", x], ("b", x * 2)])
        elif case == "dict":
            d = dict({"b": x, "a": x - 1})
        elif case == "keywords":
            d = dict(a=x, b=x + 2)
        elif case == "repeated":
            d = dict([("a", x), ("b", x + 1), ("a", x * 5)])
        else:
            d = dict({"a": x}, b=x * 7, a=x + 3)
        d["z"] = x.sum()
        return list(d.keys()), list(d.values())

    one_graph(f, torch.randn(3))


def test_dict_constructor_errors_are_eagers():
    def f(x):
        return dict([("a", x, 1)])

    with pytest.raises(ValueError):
        f(torch.randn(2))
    with pytest.raises(ValueError):
        tcjit.compile(f)(torch.randn(2))


def test_star_args_of_a_constant_size():
    """MPNet: c.view(*(c.size()[:-2] + (self.all_head_size,)))"""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.all_head_size = 12

        def forward(self, c):
            c = c.permute(0, 2, 1, 3).contiguous()
            return c.view(*(c.size()[:-2] + (self.all_head_size,)))

    def f(c):
        return c.reshape(*(c.shape[:-2] + (12,))), torch.zeros(*c.shape[:2])

    one_graph(M(), torch.randn(2, 3, 4, 4))
    one_graph(f, torch.randn(2, 4, 3, 4))


def h_one(x):
    return x


def h_two(x):
    return x


def test_functions_compare_by_identity():
    """autograd.Function.apply: cls.setup_context != base's setup_context"""
    class A:
        def m(self):
            pass

    def f(x):
        if h_one != h_two and h_one == h_one and A.m == A.m \
                and not (h_two != h_two):
            return x + 1
        return x - 1

    one_graph(f, torch.randn(3))
