"""Bad input gets eager's exception: the same type and message, on every
call, with both backends (tests/fuzz's "no-exception" classes).

* An op that checks its operands' values (an index tensor out of range:
  index, embedding, cross_entropy / nll_loss targets) runs on every call
  even when its result is dead (ops.c checks_values, graph.c
  tc_node_must_run): DCE dropped it and eager's IndexError with it.
"""
import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same

BACKENDS = ("auto", "eager")


def _outcome(fn, args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - any eager error must be mirrored
        return None, e


def same_as_eager(fn, *arg_sets, backend="auto"):
    """Call fn eagerly and compiled once per argument tuple (the first call
    compiles, later ones run the cached code on other values); where eager
    raises, the compiled call raises the same type with the same message,
    else it returns eager's result."""
    compiled = tcjit.compile(fn, backend=backend)
    for i, args in enumerate(arg_sets):
        expected, exc = _outcome(fn, args)
        actual, got = _outcome(compiled, args)
        if exc is None:
            assert got is None, f"call{i}: eager returns, tcjit raised {got!r}"
            check_same(actual, expected, path=f"call{i}")
            continue
        assert got is not None, f"call{i}: eager raises {exc!r}; tcjit did not"
        assert type(got) is type(exc) and str(got) == str(exc), \
            f"call{i}: eager raises {exc!r}; tcjit raised {got!r}"
    return compiled


# ---- ops that check values run when their result is dead -------------------

def _dead_index(a, i, b):
    v = a[i]
    return (b,)


def _dead_index_of_computed(a, i, b):
    v = (a + 1)[:, i]
    return a * 2


def _dead_embedding(a, i, b):
    v = F.embedding(i, a)
    return b + 1


def _dead_cross_entropy(a, i, b):
    v = F.cross_entropy(a, i)
    return a.sum()


def _dead_nll_loss(a, i, b):
    v = F.nll_loss(a, i)
    return b


DEAD_CHECKS = {
    "index": _dead_index,
    "index_of_computed": _dead_index_of_computed,
    "embedding": _dead_embedding,
    "cross_entropy": _dead_cross_entropy,
    "nll_loss": _dead_nll_loss,
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(DEAD_CHECKS))
def test_dead_value_check_still_raises(name, backend):
    def args(idx):
        return (torch.randn(4, 5), torch.tensor(idx), torch.randn(3))
    # out of range on the first call, in range then out on later calls
    same_as_eager(DEAD_CHECKS[name], args([0, 9, 1, 2]), args([0, 4, 1, 2]),
                  backend=backend)
    tcjit.reset()
    same_as_eager(DEAD_CHECKS[name], args([0, 4, 1, 2]), args([0, 9, 1, 2]),
                  args([1, 1, 1, 1]), args([-7, 0, 0, 0]), backend=backend)


def test_dead_index_is_one_compiled_graph():
    """The check runs in the compiled code, not through a graph break."""
    f = tcjit.compile(_dead_index)
    args = (torch.randn(4, 5), torch.tensor([1]), torch.randn(3))
    f(*args)
    f(*args)
    c = tcjit.counters()
    assert c["eager_fallbacks"] == 0 and c["cache_hits"] >= 1, c
