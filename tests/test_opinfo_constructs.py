"""Python constructs the OpInfo samples and the torch libraries they call
use around torch ops (issue 11): each stays in the graph, or breaks with a
reason, and never changes what the program computes."""
import torch

import tcjit
from conftest import run_both


def explain(fn, *args):
    return tcjit.explain(fn)(*args)


def whole(fn, *args):
    """fn is one graph without breaks."""
    ex = explain(fn, *args)
    assert ex.graph_count == 1 and ex.graph_break_count == 0, \
        [b.reason for b in ex.break_reasons]
    return ex


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
