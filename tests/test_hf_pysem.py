"""Python that real libraries (HuggingFace transformers, torchvision) run
around their tensor code, kept inside one graph (issue 18): type(),
torch.compiler.is_compiling(), class attributes, sequences of sizes,
function attributes, getattr/hasattr with absent attributes, objects with
a Python __getitem__, zero-argument super().

Every result is compared with eager; explain() shows one graph and no
break; a second call neither recompiles nor falls back.
"""
import functools

import torch

import tcjit
from conftest import check_same


@torch.no_grad()
def one_graph(fn, *args):
    expected = fn(*args)
    tcjit.reset()
    ex = tcjit.explain(fn)(*args)
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    assert ex.graph_count == 1
    cf = tcjit.compile(fn)
    check_same(cf(*args), expected)
    before = dict(tcjit.counters())
    check_same(cf(*args), expected)
    after = tcjit.counters()
    for k in ("recompiles", "eager_fallbacks", "cache_misses"):
        assert after.get(k, 0) == before.get(k, 0), (k, before, after)
    return ex


# ---- type() and class attributes --------------------------------------------

class Layer(torch.nn.Module):
    scale = 3.0

    def forward(self, x):
        return x * type(self).scale


def _wrap(forward):
    @functools.wraps(forward)
    def wrapped(self, *args, **kwargs):
        outermost = type(self).forward is wrapped
        y = forward(self, *args, **kwargs)
        return y + 1 if outermost else y
    return wrapped


class Wrapped(Layer):
    pass


Wrapped.forward = _wrap(Layer.forward)


def test_type_of_module_and_class_attribute():
    m = Layer()
    one_graph(m, torch.randn(3))


def test_type_forward_is_the_wrapper_itself():
    m = Wrapped()
    one_graph(m, torch.randn(3))


def test_type_of_tensor_and_python_values():
    def f(x, n):
        t = type(x) is torch.Tensor and type(n) is int and type([]) is list
        return x + 1 if t else x - 1
    one_graph(f, torch.randn(3), 2)


def test_class_attribute_change_recompiles():
    m = Layer()
    x = torch.randn(3)
    cf = tcjit.compile(m)
    check_same(cf(x), m(x))
    old = Layer.scale
    try:
        Layer.scale = 5.0
        check_same(cf(x), x * 5.0)
    finally:
        Layer.scale = old


# ---- torch.compiler.is_compiling() ------------------------------------------

def test_is_compiling_is_true_while_tracing():
    def f(x):
        if torch.compiler.is_compiling():
            return x + 1
        print("eager only")
        return x - 1
    x = torch.randn(3)
    ex = tcjit.explain(f)(x)
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    check_same(tcjit.compile(f)(x), x + 1)
    check_same(f(x), x - 1)


# ---- sequences of sizes -----------------------------------------------------

class Conv1D(torch.nn.Module):
    """transformers' GPT-2 Conv1D: torch.Size + a tuple of an attribute."""

    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = torch.nn.Parameter(torch.randn(nx, nf))
        self.bias = torch.nn.Parameter(torch.randn(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def test_size_plus_tuple_of_attribute():
    one_graph(Conv1D(6, 4), torch.randn(2, 3, 4))


def test_star_unpacking_a_size_into_a_shape():
    def f(x, d):
        shape = (*x.shape[:-1], -1, d)
        return x.view(*shape).transpose(1, 2)
    one_graph(f, torch.randn(2, 3, 8), 4)


def test_tuple_and_list_concatenation_of_tensors():
    def f(x, y):
        a = (x,) + (y, x * 2)
        b = [x] + [y] * 2
        c = list(a[:1]) * 2
        return torch.cat(a + tuple(b), 0), len(c), b
    one_graph(f, torch.randn(2), torch.randn(2))


def test_concatenated_list_is_new_on_every_call():
    def f(x):
        return [1, 2] + [3], x + 1
    cf = tcjit.compile(f)
    x = torch.randn(2)
    a, _ = cf(x)
    a.append(4)
    b, _ = cf(x)
    assert b == [1, 2, 3]
