"""Python constructs the OpInfo samples and the torch libraries they call
use around torch ops (issue 11): each stays in the graph, or breaks with a
reason, and never changes what the program computes."""
import torch

import tcjit
from conftest import run_both
from test_extern_generic import explain, whole


def test_in_frozenset_constant():
    # `reduction not in {"mean", "sum", "none"}` compiles to a frozenset
    # constant (F.linear_cross_entropy); a str argument is guarded by
    # membership, so another value recompiles
    def f(x, reduction="mean"):
        if reduction not in {"mean", "sum", "none"}:
            return x - 1
        return x + 1

    x = torch.randn(3)
    whole(f, x)
    compiled = run_both(f, x, expect_compiled=True)
    for r in ("sum", "other", "none", "bad"):
        assert torch.equal(compiled(x, r), f(x, r))


def test_set_of_dtypes():
    # torch.masked's reductions: `input.dtype in {torch.uint8, ...}`
    def f(x):
        if x.dtype in {torch.uint8, torch.bool, torch.int8, torch.int32}:
            return x.to(torch.int64) + 1
        return x * 2

    whole(f, torch.randn(3))
    for x in (torch.randn(3), torch.arange(3, dtype=torch.int32),
              torch.arange(3, dtype=torch.int64)):
        run_both(f, x, expect_compiled=True)

    def g(x):
        s = {x.dtype, torch.float32}
        return x + len(s), s

    run_both(g, torch.randn(2), expect_compiled=True)
    run_both(g, torch.randn(2).double(), expect_compiled=True)


def test_dtype_compared_with_torch_dtype():
    # F.linear_cross_entropy: `target.dtype != torch.int64`
    def f(x, t):
        if t.dtype != torch.int64 or torch.float32 == x.dtype:
            return x + 1
        return x - 1

    x = torch.randn(3)
    whole(f, x, torch.arange(3))
    for t in (torch.arange(3), torch.arange(3, dtype=torch.int32)):
        run_both(f, x, t, expect_compiled=True)
        run_both(f, x.double(), t, expect_compiled=True)


def test_with_on_a_set_raises_as_eager():
    # a set the trace built is made at the exit by a call, like a grad-mode
    # context: `with` on it must not be taken for one (it ran the block)
    def f(x):
        s = {1, 2}
        with s:
            y = x + 1
        return y

    run_both(f, torch.randn(2))


def _combine(x, mask):
    # torch.masked._combine_input_and_mask's shape: a class statement whose
    # class only a MaskedTensor input uses
    def helper(x, mask):
        return x if mask is None else torch.where(mask, x, 0)

    class Combine(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, mask):
            return helper(x, mask)

        @staticmethod
        def backward(ctx, g):
            return g, None

    return Combine.apply(x, mask) if isinstance(x, list) else helper(x, mask)


def test_class_statement_unused_class():
    def f(x, m):
        return _combine(x * 2, m) + 1

    x = torch.randn(5)
    whole(f, x, x > 0)
    run_both(f, x, x > 0, expect_compiled=True)
    run_both(lambda x, m: torch.masked.sum(x, 0, mask=m), x, x > 0,
             expect_compiled=True)
    whole(lambda x, m: torch.masked.amax(x, 0, mask=m), x, x > 0)


def test_class_statement_class_escapes():
    # the class is made at the exit, a new one per call, as eager does
    def f(x):
        class P:
            k = 3

            def get(self):
                return self.k
        return x + 1, P

    x = torch.randn(3)
    whole(f, x)
    compiled = tcjit.compile(f)
    r1, r2 = compiled(x), compiled(x)
    assert torch.equal(r1[0], x + 1)
    assert r1[1] is not r2[1] and r1[1].k == 3 and r1[1]().get() == 3
    assert r1[1].__qualname__ == f(x)[1].__qualname__


def test_class_statement_with_effects_breaks():
    # a body that runs code, a used class, a base's __init_subclass__ or
    # another metaclass: eager's effects happen (once per call)
    seen = []

    class Registered:
        def __init_subclass__(cls):
            seen.append(cls.__name__)

    class Meta(type):
        def __init__(cls, *a):
            seen.append("meta")
            super().__init__(*a)

    def body_runs(x):
        class P:
            seen.append("body")
        return x + 1

    def used(x):
        class P:
            k = 2
        return x * P.k

    def subclass(x):
        class Q(Registered):
            pass
        return x + 1

    def meta(x):
        class R(metaclass=Meta):
            pass
        return x + 1

    def meta_base(x):
        Base = Meta("Base", (), {})
        class S(Base):
            pass
        return x + 1

    x = torch.randn(3)
    for fn, want in ((body_runs, ["body"]), (used, []), (subclass, ["Q"]),
                     (meta, ["meta"]), (meta_base, ["meta", "meta"])):
        seen.clear()
        compiled = tcjit.compile(fn)
        for _ in range(2):
            assert torch.equal(compiled(x), fn(x))
        assert seen == want * 4, (fn.__name__, seen)
        assert explain(fn, x).graph_break_count >= 1


def test_dtype_queries_fold():
    # torch.masked._reduction_identity: torch.is_floating_point(input)
    def f(x):
        y = x * 2
        if torch.is_floating_point(y) and not y.is_complex():
            return y + 1
        if x.is_signed():
            return y - 1
        return y

    for x in (torch.randn(3), torch.arange(3), torch.arange(3).byte(),
              torch.randn(3).to(torch.bfloat16)):
        whole(f, x)
        run_both(f, x, expect_compiled=True)


TABLE = {("cpu", torch.float32): 2.0, ("cuda", torch.float32): 3.0,
         ("cpu", torch.float64): 4.0}


def test_global_dict_with_tuple_keys():
    # LinearCrossEntropyOptions: _AUTO_DEFAULTS.get((device.type, dtype))
    def f(x):
        return x * TABLE.get((x.device.type, x.dtype), 1.0)

    x = torch.randn(3)
    whole(f, x)
    compiled = run_both(f, x, expect_compiled=True)
    run_both(f, x.double(), expect_compiled=True)
    TABLE[("cpu", torch.float32)] = 5.0    # guarded: recompiles
    try:
        assert torch.equal(compiled(x), x * 5.0)
    finally:
        TABLE[("cpu", torch.float32)] = 2.0


def test_call_with_many_arguments():
    # F.multi_head_attention_forward takes 19 arguments
    def g(x, *a):
        return x + sum(a)

    def f(x):
        return g(x, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                 17, 18)

    whole(f, torch.randn(3))
    run_both(f, torch.randn(3), expect_compiled=True)

    def h(x):
        a = (x,) + tuple(range(19))
        return g(*a)      # CALL_FUNCTION_EX of 20 arguments

    whole(h, torch.randn(3))
    run_both(h, torch.randn(3), expect_compiled=True)
