"""Python that real libraries (HuggingFace transformers, torchvision) run
around their tensor code, kept inside one graph (issue 18): type(),
torch.compiler.is_compiling(), class attributes, sequences of sizes,
function attributes, getattr/hasattr with absent attributes, objects with
a Python __getitem__, zero-argument super().

Every result is compared with eager; explain() shows one graph and no
break; a second call neither recompiles nor falls back.
"""
import collections.abc
import functools
import os

import pytest

import torch

import tcjit
from conftest import check_same, run_both


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


# ---- methods of known values, function and code attributes -------------------

def test_methods_of_strings_sizes_and_constant_lists_fold():
    def f(x, impl, flags):
        a = impl.startswith("sdpa") and not impl.removeprefix("s").endswith("x")
        i = flags.index(True) if True in flags else 0
        d = x.shape.index(3) + x.shape.count(2)
        parts = impl.split("_")
        parts.append("z")
        return x * (i + d + len(parts)) if a else x
    one_graph(f, torch.randn(2, 3), "sdpa_paged", [False, False, True])


def test_split_gives_a_new_list_every_call():
    def f(x, s):
        return s.split(","), x + 1
    cf = tcjit.compile(f)
    x = torch.randn(2)
    a, _ = cf(x, "a,b")
    a.append("c")
    b, _ = cf(x, "a,b")
    assert b == ["a", "b"]


def _defaults_from(func):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        # transformers' merge_with_config_defaults
        for name in ("scale", "bias"):
            if name in func.__code__.co_varnames:
                index = func.__code__.co_varnames.index(name) - 1
                if len(args) <= index and name not in kwargs:
                    kwargs[name] = getattr(self, "default_" + name)
        return func(self, *args, **kwargs)
    return wrapper


class WithDefaults(torch.nn.Module):
    default_scale = 2.0

    @_defaults_from
    def forward(self, x, scale=None):
        return x * scale


class Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = WithDefaults()

    def forward(self, x):
        return self.inner(x) + 1


def test_function_code_attributes_in_a_decorator():
    one_graph(WithDefaults(), torch.randn(3))
    one_graph(Outer(), torch.randn(3))


def test_slice_and_str_builtins_fold():
    def f(x, n):
        s = slice(-n, None)
        return x[s], str(n) + "!"
    one_graph(f, torch.randn(5), 2)


def test_size_read_after_a_break_is_a_constant():
    def f(x):
        shape = x.shape
        print("break")
        return x.view(shape[:-1] + (-1,)), (*shape, 1)
    x = torch.randn(2, 3)
    cf = tcjit.compile(f)
    check_same(cf(x), f(x))
    ex = tcjit.explain(f)(x)
    assert [b.reason for b in ex.break_reasons] == [
        "call to print (not a traceable torch op)"]
    y = torch.randn(3, 3)
    check_same(cf(y), f(y))


# ---- getattr with a default, hasattr ------------------------------------------

class Config:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class UsesConfig(torch.nn.Module):
    def __init__(self, config, buffer=False):
        super().__init__()
        self.config = config
        if buffer:
            self.register_buffer("ids", torch.arange(3.0))

    def forward(self, x):
        causal = getattr(self.config, "is_causal", True)
        y = x + self.ids if hasattr(self, "ids") else x
        if hasattr(self.config, "scale") and not hasattr(x, "jax"):
            y = y * self.config.scale
        return y + 1 if causal else y - 1


def test_getattr_default_and_hasattr_guard_presence():
    x = torch.randn(3)
    models = [UsesConfig(Config()), UsesConfig(Config(is_causal=False)),
              UsesConfig(Config(scale=3.0), buffer=True)]
    for m in models:
        one_graph(m, x)
    # one compiled forward, one cache entry per kind of config
    cf = [tcjit.compile(m) for m in models]
    for _ in range(2):
        for m, f in zip(models, cf):
            check_same(f(x), m(x))


def test_attribute_added_later_is_seen():
    cfg = Config()
    m = UsesConfig(cfg)
    x = torch.randn(3)
    cf = tcjit.compile(m)
    check_same(cf(x), x + 1)
    cfg.is_causal = False
    check_same(cf(x), x - 1)
    del cfg.is_causal
    cfg.scale = 2.0
    check_same(cf(x), x * 2 + 1)


class MappedConfig(Config):
    """transformers' PretrainedConfig: attribute_map through
    __getattribute__."""
    attribute_map = {"hidden": "d_model"}

    def __getattribute__(self, name):
        if name != "attribute_map" and name in super().__getattribute__(
                "attribute_map"):
            name = super().__getattribute__("attribute_map")[name]
        return super().__getattribute__(name)


def test_getattr_default_on_a_config_with_getattribute():
    def f(x, cfg):
        h = getattr(cfg, "hidden", 1)
        c = getattr(cfg, "is_causal", None)
        return x * h if c is None and hasattr(cfg, "d_model") else x
    one_graph(f, torch.randn(3), MappedConfig(d_model=4))
    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x, MappedConfig(d_model=5, is_causal=True)), x)


# ---- comprehensions and generator expressions in library code ----------------

import types

_LIB = types.ModuleType("fake_library")
exec('''
import torch

SCALE = 3.0

def names(d):
    return [k for k in d if not k.startswith("_")]

def total(xs):
    return sum(x * SCALE for x in xs) if all(x is not None for x in xs) else None

def heads(x, n):
    return tuple(t.sum(-1) for t in x.chunk(n, -1))

def keyed(xs):
    return {i: x + 1 for i, x in enumerate(xs)}
''', _LIB.__dict__)


def test_comprehensions_in_another_modules_function():
    def f(x):
        ks = _LIB.names({"a": 1, "_b": 2, "c": 3})
        return x * len(ks), _LIB.keyed([x, x * 2])
    one_graph(f, torch.randn(3))


def test_generator_expressions_run_where_they_are_made():
    def f(x):
        a = _LIB.total([x, x + 1])
        b = _LIB.heads(x, 2)
        c = any(t is None for t in (x, None))
        return a, b, c, all(n > 0 for n in x.shape)
    one_graph(f, torch.randn(2, 4))


# ---- sets ---------------------------------------------------------------------

def test_sets_of_constants():
    def f(x, name):
        fields = {n for n in ("a", "b", "a", "c")}
        fields.add("d")
        both = {*fields, "e"} | set()
        k = len(fields) + len(both)
        if name in fields and "z" not in fields:
            k += 10
        return x * k, sorted(fields), fields
    got = one_graph(f, torch.randn(2), "b")


def test_set_returned_is_new_on_every_call():
    def f(x):
        return {1, 2}, x + 1
    cf = tcjit.compile(f)
    x = torch.randn(2)
    a, _ = cf(x)
    a.add(3)
    b, _ = cf(x)
    assert b == {1, 2}


def test_set_comparisons_and_set_of_dict_keys():
    # transformers checks set(kwargs.keys()) == {...}; sets compare by
    # content with ==, !=, <=, <, frozenset() and {3+ constants} (a
    # frozenset constant the compiler makes) included
    def f(x, d):
        if set(d.keys()) == {"a", "b"}:
            x = x + 1
        s = {1, 2}
        if s != {2, 3} and s <= {1, 2, 3} and frozenset(s) == s and {1} < s:
            x = x * 2
        return x, set(d) - {"a"}, s == {2, 1}, sorted(set(d) ^ {"b", "z"}), \
            list(d), tuple(d), frozenset(d)
    one_graph(f, torch.randn(2), {"a": 1, "b": 2})
    one_graph(f, torch.randn(2), {"b": 1, "c": 2})


def test_set_of_dict_keys_guards_the_keys():
    def f(x, d):
        return x + 1 if set(d) == {"a", "b"} else x - 1
    run_both(f, torch.randn(2), {"a": 1, "b": 2}, calls=1)
    cf = tcjit.compile(f)
    x = torch.randn(2)
    check_same(cf(x, {"a": 1, "b": 2}), x + 1)
    check_same(cf(x, {"b": 1, "a": 2}), x + 1)
    check_same(cf(x, {"a": 1}), x - 1)


class Fields:
    names = ("loss", "logits")

    def __setattr__(self, name, value):
        # transformers' ModelOutput.__setattr__ asks a set of field names
        field_names = {n for n in type(self).names}
        if name in field_names and value is not None:
            object.__setattr__(self, "_" + name, value)
        object.__setattr__(self, name, value)


def test_set_comprehension_in_setattr():
    def f(x):
        o = Fields()
        o.logits = x * 2
        o.other = 1
        return o
    expected = f(torch.randn(2))
    got = tcjit.compile(f)(torch.randn(2))
    assert sorted(vars(got)) == sorted(vars(expected))


# ---- closures in inlined functions ---------------------------------------------

exec('''
def present(obj, names):
    # transformers' ModelOutput.__post_init__: a generator over `obj`
    return all(getattr(obj, n, None) is not None for n in names)

def scaled(xs, k):
    return [x * k for x in xs if x is not None]

def make_adder(k):
    return lambda x: x + k
''', _LIB.__dict__)


class _Holder:
    def __init__(self, a, b=None):
        self.a, self.b = a, b


def test_closures_over_an_inlined_functions_variables():
    def f(x):
        h = _Holder(x)
        ys = _LIB.scaled([x, None, x + 1], 3)
        both = _LIB.present(h, ("a", "b"))
        return ys, both, torch.stack(ys).sum() if not both else x
    one_graph(f, torch.randn(2))


def test_a_closure_returned_by_an_inlined_call_keeps_final_values():
    """transformers' mask-function factories (and_masks, ...): the
    closure sees the factory's variables as they were when it returned;
    returned to the caller, it is made with fresh cells."""
    def f(x):
        add = _LIB.make_adder(2)
        return add(x), _LIB.make_adder(x)
    x = torch.randn(2)
    (y, g), (ey, eg) = tcjit.compile(f)(x), f(x)
    check_same(y, ey)
    check_same(g(x), eg(x))
    ex = tcjit.explain(f)(x)
    assert ex.graph_break_count == 0, [b.reason for b in ex.break_reasons]
    g2 = tcjit.compile(f)(x * 3)[1]
    check_same(g(x), eg(x))
    check_same(g2(x), x + x * 3)


exec('''
def and_masks(*mask_functions):
    # transformers.masking_utils.and_masks
    if not all(callable(arg) for arg in mask_functions):
        raise RuntimeError("All inputs should be callable")

    def and_mask(batch_idx: int, q_idx: int) -> bool:
        result = q_idx.new_ones((), dtype=torch.bool)
        for mask in mask_functions:
            result = result & mask(batch_idx, q_idx)
        return result
    return and_mask

def causal(batch_idx, q_idx):
    return q_idx >= batch_idx

def padding(mask):
    def inner(batch_idx: int, q_idx: int) -> bool:
        return mask[q_idx] > 0
    return inner
''', _LIB.__dict__)


def test_mask_function_factories():
    def f(q, kv, mask):
        fn = _LIB.and_masks(_LIB.causal, _LIB.padding(mask))
        return fn(kv, q), callable(fn), callable(q)
    one_graph(f, torch.arange(4), torch.tensor([1, 2, 0, 3]),
              torch.tensor([1, 0, 1, 1]))


def test_finfo_and_iinfo_of_constant_dtypes_fold():
    # transformers' masks: torch.finfo(dtype).min of the input's dtype
    def f(x):
        lo = torch.finfo(x.dtype).min
        big = torch.iinfo(torch.int32).max
        return x.masked_fill(x < 0, lo) + torch.finfo(torch.float16).eps \
            - int(big > 0)
    one_graph(f, torch.randn(4, 5))
    one_graph(f, torch.randn(4, 5, dtype=torch.float64))


class _Chunked(torch.nn.Module):
    # transformers' apply_chunking_to_forward counts the forward's
    # parameters with inspect.signature
    def ff(self, a):
        return a * 2

    def forward(self, x):
        import inspect
        n = len(inspect.signature(self.ff).parameters)
        m = len(inspect.signature(_plain).parameters)
        return self.ff(x) + n * 10 + m


def _plain(a, b=1, *c):
    return a


def test_inspect_signature_of_methods_and_functions_folds():
    one_graph(_Chunked(), torch.randn(3))


def test_inspect_signature_guard_sees_a_replaced_method():
    # the bound method is made per read: its __func__ is guarded, so an
    # instance attribute that replaces it recompiles with the new count
    m = _Chunked()
    cf = tcjit.compile(m)
    x = torch.randn(3)
    check_same(cf(x), m(x))
    m.ff = (lambda self, a, b=0: a * 2).__get__(m)
    check_same(cf(x), m(x))


def _nested(k, x):
    return x + 1 if k == 0 else _nested(k - 1, x) * 2


def test_calls_nested_as_deep_as_a_library_inline():
    # transformers reaches a model's attention through ~12 nested calls
    # (wrappers, forward, layer, attention, mask helpers): inlined whole
    one_graph(lambda x: _nested(20, x), torch.randn(3))


def test_dtype_comparisons_with_torch_constants_fold():
    # T5: `if hidden_states.dtype == torch.float16:` (torch.float16 is read
    # from the torch module, x.dtype from the tensor's guarded dtype)
    def f(x):
        if x.dtype == torch.float16:
            x = x.clamp(-100, 100)
        if torch.float32 == x.dtype and x.dtype != torch.bfloat16:
            x = x + 1
        if x.dtype in (torch.float16, torch.bfloat16):
            x = x * 3
        return x * 2
    for dt in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        one_graph(f, torch.randn(4).to(dt))


class _Cfg:
    num_layers = 3
    scale = 2.0


class _PerLayer(__import__("collections.abc").abc.Sequence):
    # transformers' _PerLayerConfigView: Sequence's mixin __iter__ over a
    # Python __len__ / __getitem__
    def __init__(self, cfg):
        self._cfg = cfg

    def __len__(self):
        return self._cfg.num_layers

    def __getitem__(self, i):
        if i < 0 or i >= len(self):
            raise IndexError("list index out of range")
        return self._cfg


def test_loop_over_a_sequence_subclass_is_unrolled():
    view = _PerLayer(_Cfg())

    def f(x):
        kinds = []
        for c in view:
            kinds.append("full" if getattr(c, "window", None) is None
                         else "sliding")
        for k in kinds:
            x = x * _Cfg.scale if k == "full" else x
        for i, (k, c) in enumerate(zip(kinds, view)):
            x = x + c.scale * i
        return x + len(kinds)
    one_graph(f, torch.randn(3))


def test_loop_over_a_sequence_subclass_sees_a_new_length():
    cfg = _Cfg()
    view = _PerLayer(cfg)

    def f(x):
        for c in view:
            x = x + c.scale
        return x
    cf = tcjit.compile(f)
    x = torch.randn(3)
    check_same(cf(x), f(x))
    cfg.num_layers = 5
    check_same(cf(x), f(x))


def test_len_of_an_object_with_a_python_len():
    class Sized:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

    ok, bad = Sized(4), Sized(-1)
    one_graph(lambda x: x * len(ok), torch.randn(3))
    f = lambda x: x * len(bad)  # noqa: E731
    with pytest.raises(ValueError, match="__len__"):
        f(torch.randn(3))
    with pytest.raises(ValueError, match="__len__"):
        tcjit.compile(f)(torch.randn(3))


class _MLP(torch.nn.Sequential):
    # torchvision's MLPBlock: a Sequential subclass with its own __init__
    def __init__(self):
        super().__init__(torch.nn.Linear(8, 16), torch.nn.GELU(),
                         torch.nn.Linear(16, 8))


class _Block(torch.nn.Module):
    # torchvision's vit EncoderBlock: MultiheadAttention (is_nested,
    # is_autocast_enabled, the dispatch-mode stack) and an MLPBlock
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(8, 2, batch_first=True)
        self.mlp = _MLP()

    def forward(self, x):
        y, _ = self.attn(x, x, x, need_weights=False)
        return self.mlp(y + x) + x.is_nested + x.is_cpu


def test_attention_block_with_a_sequential_subclass():
    one_graph(_Block().eval(), torch.randn(2, 5, 8))


class _Action(__import__("enum").Enum):
    NONE = "none"
    RAISE = "raise"


_MODE = _Action.NONE


def _enum_fn(x, act=_Action.NONE):
    # transformers' deprecate_kwarg compares Action members
    if act == _Action.RAISE:
        return x * 2
    if _MODE is _Action.NONE and act != _Action.RAISE:
        return x + 1
    return x - 1


def test_enum_members_compare_as_constants():
    one_graph(_enum_fn, torch.randn(3))
    one_graph(lambda x: _enum_fn(x, _Action.RAISE), torch.randn(3))


def test_enum_global_change_is_guarded():
    global _MODE
    cf = tcjit.compile(_enum_fn)
    x = torch.randn(3)
    check_same(cf(x), _enum_fn(x))
    _MODE = _Action.RAISE
    try:
        check_same(cf(x), _enum_fn(x))
    finally:
        _MODE = _Action.NONE


# ---- no-op context managers: nullcontext, autocast(enabled=False) -----------

class Rotary(torch.nn.Module):
    """transformers 4.x's LlamaRotaryEmbedding.forward: float32 forced with
    autocast(enabled=False) around the frequencies."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, 8, 2).float() / 8))

    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        device_type = x.device.type if isinstance(x.device.type, str) else "cpu"
        with torch.autocast(device_type=device_type, enabled=False):
            freqs = (inv.float() @ pos.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
        return cos.to(x.dtype), sin.to(x.dtype)


def test_autocast_disabled_block_is_one_graph():
    import contextlib

    def f(x):
        with contextlib.nullcontext():
            y = x.sin()
        with torch.autocast("cpu", torch.bfloat16, False):
            y = y @ y.t()
        return y + 1

    one_graph(f, torch.randn(4, 4))
    one_graph(Rotary(), torch.randn(2, 5, 8), torch.arange(5)[None].expand(2, 5))


def test_autocast_enabled_breaks_with_eagers_dtypes():
    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return x @ x

    x = torch.randn(4, 4)
    ex = tcjit.explain(f)(x)
    assert any("torch.autocast() region" in b.reason for b in ex.break_reasons)
    got = tcjit.compile(f)(x)
    assert got.dtype == f(x).dtype == torch.bfloat16
    check_same(got, f(x))


def test_autocast_bad_device_raises_eagers_error():
    def f(x):
        with torch.autocast("nope", enabled=False):
            return x + 1

    with pytest.raises(RuntimeError) as eager:
        f(torch.ones(2))
    with pytest.raises(RuntimeError) as got:
        tcjit.compile(f)(torch.ones(2))
    assert str(got.value) == str(eager.value)


def test_segment_ending_inside_a_noop_context():
    """A break inside the block: the rest of it runs in Python inside the
    materialized context (a nullcontext), values as eager's."""
    import os
    seen = []

    def f(x):
        with torch.autocast("cpu", enabled=False):
            y = x.cos()
            seen.append(os.getpid() > 0)      # not traceable: a break
            seen.append(torch.is_autocast_enabled())
            z = y * 2
        return z + 1

    x = torch.randn(3)
    ex = tcjit.explain(f)(x)
    assert ex.graph_break_count >= 1 and ex.graph_count >= 1
    seen.clear()
    check_same(tcjit.compile(f)(x), f(x))
    assert seen == [True, False, True, False]


# ---- exceptions the traced program raises and handles -------------------------

class _Registry(collections.abc.MutableMapping):
    # transformers' AttentionInterface: get() of a mapping whose
    # __getitem__ raises KeyError for a name it lacks ("eager")
    _global = {"sdpa": 1}

    def __init__(self):
        self._local = {}

    def __getitem__(self, key):
        if key in self._local:
            return self._local[key]
        return self._global[key]

    def __setitem__(self, key, value):
        self._local[key] = value

    def __delitem__(self, key):
        del self._local[key]

    def __iter__(self):
        return iter({**self._global, **self._local})

    def __len__(self):
        return len(self._global) + len(self._local)

    def get_interface(self, name, default):
        return super().get(name, default)


_REG = _Registry()


def _lookup(d, k, log):
    try:
        log.append(k)           # kept: it ran before the raise
        return d[k]
    except IndexError:
        return -1               # does not match: on to the caller
    finally:
        log.append("finally")


def _caller(k, log):
    try:
        b = _lookup({"a": 2}, k, log)
    except KeyError as e:
        b = len(str(e))
    return b


def test_except_keyerror_in_inlined_calls_is_one_graph():
    # (try blocks of inlined calls; the compiled frame's own run in
    # Python)
    def f(x):
        log = []
        a = _REG.get_interface("eager", 7) + _REG.get_interface("sdpa", 5)
        b = _caller("b", log) + _caller("a", log)
        return x * a + b + ("eager" in _REG), log
    one_graph(f, torch.randn(2))


def test_uncaught_keyerror_still_raises():
    def f(x, k):
        log = []
        return x + _lookup({"a": 2}, k, log), log
    run_both(f, torch.randn(2), "b")
    run_both(f, torch.randn(2), "a")


# ---- functions marked assume_constant_result ------------------------------------

_PROBES = []


def _constant(fn):
    # transformers' _make_compile_constant: Dynamo's marker, set without
    # importing torch
    fn._dynamo_marked_constant = True
    return fn


@functools.lru_cache
@_constant
def _probe(name):
    _PROBES.append(name)
    return name == "torch"


def test_marked_constant_functions_fold():
    def f(x):
        if not _probe("dist"):
            x = x + 1
        return x * _probe("torch")
    one_graph(f, torch.randn(2))
    assert sorted(set(_PROBES)) == ["dist", "torch"]


def test_dict_copy_is_a_new_dict():
    # Gemma3: sliding_mask_kwargs = mask_kwargs.copy(), then changed
    def f(x):
        kw = {"a": x, "b": 1}
        other = kw.copy()
        other["b"] = 2
        other.pop("a")
        return kw, other, kw["a"] * other["b"]
    one_graph(f, torch.randn(2))


class _Windowed:
    def __init__(self, window):
        self.attention_window = window


def test_max_of_a_list_attribute_folds():
    # LED: max(self.config.attention_window), a list per layer
    def f(x, cfg):
        w = cfg.attention_window
        w = w if isinstance(w, int) else max(w) + min(w) + abs(-len(w))
        return x * w
    one_graph(f, torch.randn(2), _Windowed([4, 8]))
    run_both(f, torch.randn(2), _Windowed([4, 2]))
    cf = tcjit.compile(f)
    x = torch.randn(2)
    cfg = _Windowed([4, 8])
    check_same(cf(x, cfg), x * 14)
    cfg.attention_window[1] = 16
    check_same(cf(x, cfg), x * 22)


def test_conv_with_string_padding():
    # SigLIP's patch embedding: nn.Conv2d(padding="valid")
    convs = [torch.nn.Conv2d(3, 4, 3, padding="valid"),
             torch.nn.Conv2d(3, 4, 3, padding="same", dilation=2),
             torch.nn.Conv1d(3, 4, 5, padding="same")]

    def f(x, y):
        return convs[0](x), convs[1](x), convs[2](y)
    one_graph(f, torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8))
    even = torch.nn.Conv2d(3, 4, 2, padding="same")   # eager pads unevenly
    run_both(lambda x: even(x) * 2, torch.randn(1, 3, 5, 5), calls=1)


# ---- os.environ ------------------------------------------------------------------

def _flag():
    # transformers' use_gqa_in_sdpa
    return os.environ.get("TCJIT_TEST_FLAG", "0") == "1"


def test_environment_lookups_are_guarded_per_key(monkeypatch):
    def f(x):
        return x * 2 if _flag() else x - 1
    monkeypatch.delenv("TCJIT_TEST_FLAG", raising=False)
    one_graph(f, torch.randn(2))
    cf = tcjit.compile(f)
    x = torch.randn(2)
    check_same(cf(x), x - 1)
    monkeypatch.setenv("TCJIT_TEST_FLAG", "1")
    check_same(cf(x), x * 2)
    monkeypatch.setenv("TCJIT_TEST_FLAG", "0")
    check_same(cf(x), x - 1)
    monkeypatch.setenv("TCJIT_TEST_FLAG", "1")
    check_same(cf(x), x * 2)


def test_raise_from_none_in_an_inlined_call_is_caught():
    # os._Environ.__getitem__: except KeyError: raise KeyError(key) from None
    def get(d, k):
        try:
            return d[k]
        except KeyError:
            raise KeyError(k) from None

    def f(x):
        try:
            return get({"a": 1}, "b")
        except KeyError as e:
            return x + len(str(e))
    one_graph(lambda x: f(x), torch.randn(2))


# ---- `is` between tensors ----------------------------------------------------------

def test_is_between_tensors_the_graph_computes():
    # nn.MultiheadAttention's fast-path check `query is not key` (SigLIP's
    # pooling head): an op's result is an object of its own; an op eager
    # answers with its operand gives that operand's var
    def f(x, w):
        q = x @ w
        k = x.relu()
        same = (x.contiguous() is x, x.to(x.dtype) is x, x[...] is x,
                x[:] is x, x.view(x.shape) is x, q is k, q is x,
                x.clone().add_(1) is x)
        y = x.clone()
        v = x[0]      # 1-d: t() is another object, flatten() is v itself
        return same, y.add_(1) is y, q is not k, v.t() is v, \
            v.flatten() is v, v.squeeze() is v
    one_graph(f, torch.randn(3, 4), torch.randn(4, 4))


def test_identity_views_keep_the_exact_strides():
    """x[...], x[:], x.t() of a 1-d x and a squeeze with nothing to
    squeeze are other objects with x's own strides, size-1 dims included;
    an advanced index after an empty basic index reads x itself (fuzz
    seed 1758 of test_fuzz's slice: a3[a4, a5] of a permuted input had
    (3, 3, 3, 1) where eager has (3, 3, 1, 1))."""
    def f(x, v, i, j):
        return x[...], x[:], x.squeeze(2) if x.shape[2] != 1 else x[:, :], \
            v.t(), v.squeeze(), x[i, j]
    x = torch.randn(1, 4, 3, 1).permute(1, 0, 3, 2)
    v = torch.randn(6, 2)[:, 1]
    run_both(f, x, v, torch.tensor([[2]]), torch.tensor([[0]]),
             expect_compiled=True)


def test_unpacking_a_generator_a_dict_and_a_set():
    # nn.MultiheadAttention: query, key = (x.transpose(1, 0) for x in ...)
    def f(x, y, d):
        a, b = (t.transpose(1, 0) for t in (x, y))
        k1, k2 = d
        s1, s2 = {3, 4}
        return a, b, k1, k2, s1 + s2
    one_graph(f, torch.randn(2, 3), torch.randn(2, 3), {"p": 1, "q": 2})
    run_both(f, torch.randn(2, 3), torch.randn(2, 3), {"p": 1})


def test_strides_fold_from_the_layout():
    # Longformer/LED: chunk_stride = list(hidden_states.stride())
    def f(x):
        y = x.transpose(0, 1)
        z = (x + 1)[:, ::2]
        return (x.stride(), y.stride(), y.stride(0), z.stride(-1),
                list(y.stride()), x * y.stride(1))
    one_graph(f, torch.randn(3, 4))
    one_graph(f, torch.randn(5, 2).t())
