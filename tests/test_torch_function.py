"""torch.nn.functional's wrappers inline (issue 11): the has_torch_function
family folds to False when no argument overrides torch functions (guarded,
so a later call with a __torch_function__ subclass, or under a
TorchFunctionMode, is not served by the folded code), and the queries of
torch's global state they make fold with a guard on their value.

Every compiled result is compared with eager.
"""
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

import tcjit
from conftest import check_same


def one_graph(fn, *args, calls=2):
    expected = fn(*args)
    ex = tcjit.explain(fn)(*args)
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    assert ex.graph_count == 1
    cf = tcjit.compile(fn)
    for _ in range(calls):
        check_same(cf(*args), expected)
    return ex


class Logged(torch.Tensor):
    """A subclass whose __torch_function__ records what it saw."""
    seen = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.seen.append(getattr(func, "__name__", str(func)))
        return super().__torch_function__(func, types, args, kwargs or {})


class Wrapped:
    """Not a tensor, but overrides torch functions."""
    def __init__(self, t):
        self.t = t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return "handled by Wrapped"


def test_functional_wrappers_inline_to_their_ops():
    x = torch.randn(4, 8)
    for fn in (lambda x: F.softsign(x), lambda x: F.tanhshrink(x),
               lambda x: F.softmin(x, dim=-1),
               lambda x: F.softsign(x) + F.tanhshrink(x) * 2):
        one_graph(fn, x)


def test_has_torch_function_family_folds_on_plain_values():
    from torch.overrides import (has_torch_function,
                                 has_torch_function_unary,
                                 has_torch_function_variadic)

    def f(x, w, n):
        a = has_torch_function_unary(x)
        b = has_torch_function_variadic(x, w, None, n, "s", (x,), [w])
        c = has_torch_function((x, w, 3))
        d = torch._C._has_torch_function_variadic()
        if a or b or c or d:
            return x - 1
        return (x + w) * n

    p = torch.nn.Parameter(torch.randn(4), requires_grad=False)
    ex = one_graph(f, torch.randn(4), p, 3)
    guards = "\n".join(str(g) for gs in ex.guards for g in gs)
    assert "torch._C._is_torch_function_mode_enabled()" in guards, guards


def test_subclass_with_torch_function_later_gets_its_behaviour():
    def f(x):
        return F.softsign(x) * 2

    cf = tcjit.compile(f)
    x = torch.randn(4, 8)
    check_same(cf(x), f(x))
    check_same(cf(x), f(x))
    Logged.seen = []
    s = x.as_subclass(Logged)
    r = cf(s)
    eager_seen = list(Logged.seen)
    Logged.seen = []
    e = f(s)
    assert type(r) is Logged and type(e) is Logged
    torch.testing.assert_close(r.as_subclass(torch.Tensor),
                               e.as_subclass(torch.Tensor))
    assert eager_seen == Logged.seen and "softsign" in eager_seen
    # and the plain tensor is still served from the cache
    check_same(cf(x), f(x))


def test_non_tensor_argument_with_torch_function_is_not_folded():
    def f(x, w):
        return F.softsign(w) if isinstance(x, int) else x

    cf = tcjit.compile(f)
    assert cf(1, Wrapped(1)) == "handled by Wrapped"

    def g(x, y):
        return F.tanhshrink(x) + y

    cg = tcjit.compile(g)
    x = torch.randn(5)
    check_same(cg(x, 1.0), g(x, 1.0))
    w = Wrapped(x)
    # an argument that overrides torch is seen at the has_torch_function
    # of the second position: F.tanhshrink(x) does not look at y, but
    # x + y does (Tensor.__add__ defers to Wrapped)
    check_same(cg(x, 2.0), g(x, 2.0))
    try:
        expected = g(x, w)
    except TypeError as e:
        expected = e
    try:
        got = cg(x, w)
    except TypeError as e:
        got = e
    assert type(got) is type(expected) and str(got) == str(expected)


def test_torch_function_mode_is_not_served_by_folded_code():
    calls = []

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    def f(x):
        return F.softsign(x) + 1

    cf = tcjit.compile(f)
    x = torch.randn(6)
    check_same(cf(x), f(x))
    check_same(cf(x), f(x))
    with Mode():
        r = cf(x)
    eager_calls = list(calls)
    calls.clear()
    with Mode():
        e = f(x)
    torch.testing.assert_close(r, e)
    assert "softsign" in calls and "softsign" in eager_calls


def test_state_queries_fold_with_guards():
    def f(x):
        if torch.jit.is_scripting() or torch.jit.is_tracing():
            return x - 1
        if torch.are_deterministic_algorithms_enabled():
            return x * 3
        if torch.is_grad_enabled():
            return x * 5
        if torch._C._get_tracing_state() is None:
            return x * 7
        return x + 1

    x = torch.randn(4)
    with torch.no_grad():
        one_graph(f, x)
    cf = tcjit.compile(f)
    with torch.no_grad():
        check_same(cf(x), f(x))
        torch.use_deterministic_algorithms(True)
        try:
            check_same(cf(x), f(x))
        finally:
            torch.use_deterministic_algorithms(False)
        check_same(cf(x), f(x))
    check_same(cf(x), f(x))   # grad mode on: the other branch


def test_is_grad_enabled_follows_with_blocks():
    def f(x):
        with torch.no_grad():
            a = torch.is_grad_enabled()
        b = torch.is_grad_enabled()
        return x * 2 if a else x * 3 if b else x * 4

    x = torch.randn(4)
    one_graph(f, x)
    with torch.no_grad():
        one_graph(f, x)


# ---- `is` / `is not` and `in` / `not in` ---------------------------------------

def same_outcome(fn, *args):
    """Compiled and eager agree: the value, or the exception's type and
    text."""
    def run(f):
        try:
            return f(*args), None
        except Exception as e:  # noqa: BLE001 - compared below
            return None, e
    ev, ee = run(fn)
    cv, ce = run(tcjit.compile(fn))
    assert type(ce) is type(ee) and str(ce) == str(ee), (ce, ee)
    if ee is None:
        check_same(cv, ev)


def code(flags):
    """The flags as one number (a binary code), so each one shows."""
    s = 0
    for v in flags:
        s = s * 2 + (1 if v else 0)
    return s


class Cfg:
    def __init__(self, act=None):
        self.act = act


def test_is_and_is_not_fold():
    def f(x, n, cfg, mode):
        a = (n is None, n is not None, mode is None, x is None,
             x is not None, x is x, F.relu is F.relu, torch.float32 is
             x.dtype, cfg is None, cfg is cfg, [] is [], (x,) is None,
             int is bool, mode is True)
        return x * code(a)

    x = torch.randn(3)
    one_graph(f, x, None, Cfg(), True)
    one_graph(f, x, 2, Cfg("gelu"), None)
    cf = tcjit.compile(f)
    for n, mode in ((None, True), (3, False), (None, None), (1.5, "a")):
        check_same(cf(x, n, Cfg(), mode), f(x, n, Cfg(), mode))


def test_is_on_objects_pins_identity():
    a, b = Cfg(), Cfg()

    def f(x, p, q):
        return x + 1 if p is q else x - 1

    cf = tcjit.compile(f)
    x = torch.randn(3)
    for p, q in ((a, a), (a, b), (b, b), (b, a)):
        check_same(cf(x, p, q), f(x, p, q))


def test_is_between_tensors_breaks_with_a_reason():
    def f(x, y):
        return x * 2 if x is y else x * 3

    x, y = torch.randn(3), torch.randn(3)
    ex = tcjit.explain(f)(x, y)
    assert any("'is' between two tensors" in b.reason
               for b in ex.break_reasons)
    cf = tcjit.compile(f)
    check_same(cf(x, x), f(x, x))
    check_same(cf(x, y), f(x, y))


def test_in_and_not_in_fold():
    def f(x, mode, k, n):
        d = {"a": 1, "b": 2, 3: None}
        a = (mode in ("nearest", "linear"), mode not in ["area"],
             k in d, k not in d, "ar" in mode, n in (1, 2.0, None),
             n in [x.dtype, torch.float16], None in (n,), 3 in d,
             torch.float32 in (x.dtype,), F.relu in (F.gelu, F.relu))
        return x * code(a)

    x = torch.randn(3)
    one_graph(f, x, "linear", "a", 2)
    cf = tcjit.compile(f)
    for args in (("area", "c", None), ("nearest", 3, 2.0), ("x", "b", 5),
                 ("linear", "a", True)):
        check_same(cf(x, *args), f(x, *args))


def test_in_keeps_eager_exceptions_and_nan():
    def unhashable(x, k):
        return x + 1 if k in {"a": 1} else x

    def str_of_int(x, k):
        return x + 1 if k in "abc" else x

    nan = float("nan")

    def with_nan(x, v):
        return x + 1 if v in (v, 1.0) else x

    x = torch.randn(3)
    same_outcome(unhashable, x, [1])
    same_outcome(unhashable, x, "a")
    same_outcome(str_of_int, x, 1)
    same_outcome(str_of_int, x, "b")
    same_outcome(with_nan, x, nan)
    same_outcome(with_nan, x, 1.0)


def test_in_with_a_tensor_breaks_with_a_reason():
    def f(x, y):
        return x * 2 if y in (x, 3) else x

    x = torch.randn(1)
    ex = tcjit.explain(f)(x, 3)
    assert any("'in' comparing a tensor" in b.reason
               for b in ex.break_reasons)
    same_outcome(f, x, 3)
    same_outcome(f, x, 4)


# ---- dicts: merges of the frame's dicts, methods, item assignment -------------

def _inner(x, **kwargs):
    scale = kwargs.pop("scale", 1.0)
    kwargs.setdefault("bias", 0.5)
    kwargs["extra"] = 2
    n = 0
    for k, v in kwargs.items():
        n = n + len(k)
    for k in kwargs.keys():
        n = n + 1
    for v in kwargs.values():
        n = n + (v if isinstance(v, int) else 0)
    return x * scale + kwargs["bias"] + n + kwargs.get("missing", 3)


def test_dict_merge_of_frame_dicts_and_dict_methods():
    def outer(x, opts):
        d = {**opts, "scale": 2.0}
        return _inner(x, **d), "bias" in opts, len(opts), opts.get("w")

    x = torch.randn(3)
    one_graph(outer, x, {"bias": 1.0, "w": 3})
    cf = tcjit.compile(outer)
    for opts in ({"bias": 1.0, "w": 3}, {"w": 3, "bias": 1.0}, {},
                 {"w": 4}, {"bias": 2.0, "w": 3}):
        check_same(cf(x, opts), outer(x, opts))


def test_frame_dict_is_not_mutated_by_the_trace():
    def f(x, d):
        y = x * d.pop("a")
        d["b"] = 1
        return y

    cf = tcjit.compile(f)
    x = torch.randn(3)
    d1, d2 = {"a": 2.0}, {"a": 2.0}
    check_same(cf(x, d1), f(x, d2))
    assert d1 == d2 == {"b": 1}
    ex = tcjit.explain(f)(x, {"a": 2.0})
    assert any("did not build" in b.reason for b in ex.break_reasons)


def _mutates(d):
    d.pop("a")
    print(end="")   # breaks after the mutation
    return d


def test_callee_mutating_a_callers_dict_breaks_before_it():
    def f(x):
        d = {"a": 1, "b": 2}
        _mutates(d)
        return x + len(d), d

    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x), f(x))


def test_dict_errors_are_eagers():
    def pop_missing(x, k):
        d = {"a": 1}
        return x + d.pop(k)

    def unhashable(x, k):
        d = {"a": 1}
        d[k] = 2
        return x

    def get_unhashable(x, k):
        return x + {"a": 1}.get(k, 0)

    def merge_twice(x, opts):
        return _inner(x, bias=1.0, **opts)

    x = torch.randn(3)
    same_outcome(pop_missing, x, "a")
    same_outcome(pop_missing, x, "z")
    same_outcome(unhashable, x, "b")
    same_outcome(unhashable, x, ["b"])
    same_outcome(get_unhashable, x, ["a"])
    same_outcome(get_unhashable, x, "a")
    same_outcome(merge_twice, x, {"scale": 3.0})
    same_outcome(merge_twice, x, {"bias": 3.0})


def test_frames_own_kwargs_may_be_mutated():
    def f(x, **kwargs):
        s = kwargs.pop("scale", 1.0)
        kwargs.setdefault("b", 2)
        kwargs["c"] = 3
        y = x * s + kwargs["b"]
        print(end="")   # a break: the next segment sees the changed dict
        return y, kwargs

    ex = tcjit.explain(f)(torch.randn(3), scale=2.0)
    assert not any("did not build" in b.reason for b in ex.break_reasons)
    cf = tcjit.compile(f)
    x = torch.randn(3)
    for kw in ({"scale": 2.0}, {}, {"b": 5, "scale": 3.0}, {"z": 1}):
        check_same(cf(x, **kw), f(x, **kw))


# ---- attributes of objects with __getattribute__ / properties (configs) --------

class Config:
    """Like transformers' PretrainedConfig: an attribute map through
    __getattribute__, a property, plain attributes."""
    attribute_map = {"hidden": "n_embd"}

    def __init__(self, n_embd, act, decoder):
        self.n_embd = n_embd
        self.act = act
        self.decoder = decoder
        self.reads = 0

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__(
                "attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    @property
    def scale(self):
        return 1.0 / self.n_embd

    def describe(self):
        return self.act


def test_config_attributes_are_read_and_guarded():
    def f(x, cfg):
        y = x * cfg.hidden * cfg.scale
        if cfg.decoder:
            y = y + 1
        if cfg.act == "gelu":
            y = F.gelu(y)
        return y, cfg.describe()

    x = torch.randn(4)
    one_graph(f, x, Config(4, "gelu", True))
    cf = tcjit.compile(f)
    c = Config(4, "gelu", True)
    check_same(cf(x, c), f(x, c))
    c.decoder = False       # the same object, changed: the guard sees it
    check_same(cf(x, c), f(x, c))
    c.n_embd = 8
    check_same(cf(x, c), f(x, c))
    for other in (Config(2, "relu", True), Config(4, "gelu", False)):
        check_same(cf(x, other), f(x, other))


def test_config_attribute_errors_are_eagers():
    def f(x, cfg):
        return x * cfg.missing

    same_outcome(f, torch.randn(3), Config(4, "gelu", True))


SUPPORTED = {"gelu", "relu"}


def test_in_a_set_read_from_the_frame_is_guarded_by_value():
    def f(x, act):
        return F.gelu(x) if act in SUPPORTED else x

    x = torch.randn(3)
    one_graph(f, x, "gelu")
    cf = tcjit.compile(f)
    check_same(cf(x, "gelu"), f(x, "gelu"))
    check_same(cf(x, "tanh"), f(x, "tanh"))
    SUPPORTED.add("tanh")
    try:
        check_same(cf(x, "tanh"), f(x, "tanh"))
    finally:
        SUPPORTED.discard("tanh")
    check_same(cf(x, "tanh"), f(x, "tanh"))


def test_comparisons_of_tuples_and_lists_of_constants_fold():
    def f(x, n, k):
        a = (x.shape == (n, 4), (n, k) < (3, 1), [n, k] == [n, k],
             x.shape[-1:] != (k,), (n,) >= (n, 0))
        return x * code(a)

    def bad(x, k):
        return x + 1 if (1, 2) < (1, k) else x

    x = torch.randn(3, 4)
    one_graph(f, x, 3, 4)
    cf = tcjit.compile(f)
    for n, k in ((3, 4), (2, 1), (3, 0), (3, "s")):
        same_outcome(f, x, n, k)
    same_outcome(bad, x, "a")
    same_outcome(bad, x, 3)


def _canonical(dims, ndim):
    out = []
    for d in dims:
        out.append(d % ndim)
    out.extend((0,))
    return out


def test_list_append_and_extend_on_lists_the_trace_built():
    def f(x):
        dims = _canonical((-1, 1), x.ndim)
        alias = dims
        alias.append(1)
        return x.sum(dims[0]) + len(dims), dims, alias is dims

    x = torch.randn(3, 4)
    one_graph(f, x)


def _appends(lst):
    lst.append(1)
    print(end="")   # breaks after the mutation
    return lst


def test_callee_appending_to_a_callers_list_breaks_before_it():
    # the callee's append is undone when the callee breaks after it: the
    # call runs in Python once, and appends once
    def f(x):
        lst = [0]
        _appends(lst)
        return x + len(lst), lst

    same_outcome(f, torch.randn(3))
    ex = tcjit.explain(f)(torch.randn(3))
    assert any("call to _appends (not inlined: call to print" in b.reason
               for b in ex.break_reasons)


def _appends_twice(lst, x):
    lst.append(x * 2)
    lst.extend([x + 1])
    return len(lst)


def test_callee_appends_to_a_callers_list():
    # an optimizer's step hands its lists to _init_group, which fills them
    def f(x):
        lst = [x]
        n = _appends_twice(lst, x)
        return lst[0] + lst[1] + lst[2] + n

    same_outcome(f, torch.randn(3))
    ex = tcjit.explain(f)(torch.randn(3))
    assert ex.graph_count == 1 and ex.graph_break_count == 0


def test_list_extend_errors_are_eagers():
    def f(x, k):
        lst = []
        lst.extend(k)
        return x + len(lst)

    same_outcome(f, torch.randn(3), (1, 2))
    same_outcome(f, torch.randn(3), 3)


def test_loops_over_dicts():
    def f(x, opts):
        d = {"a": 1, "b": 2}
        n = 0
        for k in d:
            n = n + d[k]
        for k in opts:
            n = n + len(k)
        return x * n

    x = torch.randn(3)
    one_graph(f, x, {"xy": 1})
    cf = tcjit.compile(f)
    for opts in ({"xy": 1}, {}, {"a": 1, "bcd": 2}):
        check_same(cf(x, opts), f(x, opts))


# ---- imports inside functions -------------------------------------------------

def test_imports_of_imported_modules_fold():
    def f(x):
        import math
        import torch.nn.functional
        from os import path as p
        from torch.nn import functional as F2
        import os.path
        return F2.gelu(x) * math.pi + len(p.sep) + len(os.path.sep)

    x = torch.randn(3)
    one_graph(f, x)


def test_imports_that_would_run_code_or_fail_are_eagers():
    import sys

    def missing(x):
        from os import no_such_name  # noqa: F401
        return x

    def first_import(x):
        import colorsys  # noqa: F401
        return x + 1

    same_outcome(missing, torch.randn(3))
    sys.modules.pop("colorsys", None)
    ex = tcjit.explain(first_import)(torch.randn(3))
    assert any("may run code" in b.reason for b in ex.break_reasons)
    assert "colorsys" in sys.modules
    same_outcome(first_import, torch.randn(3))
