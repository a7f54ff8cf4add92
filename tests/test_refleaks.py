"""Reference leaks of the runtime: thousands of recompiles, graph breaks and
exceptions raised out of compiled code leave Python's object and memory
counts where they were, with the log channels on or off.

The compiled code runs on the "eager" backend: each compile is cheap, so a
few seconds cover thousands of them (the runtime's own objects, entries,
guards and messages are the same for every backend).
"""
import gc
import logging
import os
import sys

import pytest
import torch

import tcjit

ROUNDS = 700


def _recompiles_every_call(x, k):
    y = x * 2
    if k > 3:                 # k is guarded: every new k recompiles
        y = y + 1
    return y


def _breaks(x):
    y = x.sin()
    s = y.sum().item()        # STEP
    if y.amax() > 0:          # BRANCH
        y = y * 2
    return y + s


def _raises_in_graph(i, w):
    return (w * 2).index_select(0, i) + 1     # out of range: IndexError


def _fails(x):
    raise ValueError(f"bad {x.shape[0]}")


def _raises_after_break(x):
    y = x.cos()
    n = y.sum().item()        # a later segment raises
    return _fails(y + n)


def _mutates(x, y, i):
    x.add_(1)                 # written back, version counter set
    x[0] = y[i]               # index_put: a generic extern
    z = x * 2
    z.mul_(3)                 # a computed tensor's version counter
    return z


class _Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.k, ctx.shape = k, x.shape
        return x * k, k

    @staticmethod
    def backward(ctx, g, _):
        return g * ctx.k, None


class _KeepsObject(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.fn = torch.sin     # a graph break: backward cannot get it
        return x.cos()

    @staticmethod
    def backward(ctx, g):
        return -g * ctx.fn(ctx.saved_tensors[0])


def _custom_function(x, k):
    # traced under grad (a link to the backward), then run eagerly
    # (backend="eager" takes no autograd graph)
    y, _ = _Scaled.apply(x, k)
    return _KeepsObject.apply(y) + 1


def _workload(rounds):
    w = torch.randn(4, 3)
    shapes = [torch.randn(3), torch.randn(3, 2), torch.randn(2, 3, 2)]
    compiled = [tcjit.compile(f, backend="eager")
                for f in (_recompiles_every_call, _breaks, _raises_in_graph,
                          _raises_after_break)]
    recompiling, breaking, raising, raising_late = compiled
    mutating = tcjit.compile(_mutates, backend="eager")
    custom = tcjit.compile(_custom_function, backend="eager")
    leaf = torch.randn(3, requires_grad=True)
    buf = torch.zeros(4)
    for i in range(rounds):
        if i % 50 == 0:
            tcjit.reset()     # keep the guard failure lists short
        x = shapes[i % len(shapes)]
        assert torch.equal(recompiling(x, i), _recompiles_every_call(x, i))
        breaking(x)
        with pytest.raises(IndexError):
            raising(torch.tensor([i % 4, 9]), w)
        with pytest.raises(ValueError):
            raising_late(x)
        mutating(buf, w[:, 0].clone(), torch.tensor([i % 4]))
        mutating(buf[:2], buf[1:3], torch.tensor([0]))   # aliased: eager
        custom(leaf, i % 3)


def _rss():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _snapshot():
    gc.collect()
    return len(gc.get_objects()), sys.getallocatedblocks(), _rss()


@pytest.mark.parametrize("logs", ["", "recompiles,graph_breaks,guards,graph"])
def test_recompiles_breaks_and_exceptions_do_not_leak(logs):
    tcjit.config.recompile_limit = 10 ** 6
    tcjit.set_logs(logs)
    # the runtime builds and emits every message; logging drops them
    for channel in ("recompiles", "graph_breaks", "guards", "graph"):
        logging.getLogger(f"tcjit.{channel}").setLevel(logging.WARNING)
    for _ in range(2):        # caches, interned names, torch's lazy state
        _workload(ROUNDS)
    objects, blocks, rss = _snapshot()
    for _ in range(4):
        _workload(ROUNDS)
    objects2, blocks2, rss2 = _snapshot()
    assert tcjit.counters()["recompiles"] > 0
    # Leaking one object per recompile would grow them by 4 * ROUNDS.
    assert objects2 - objects < ROUNDS // 10, (objects, objects2)
    assert blocks2 - blocks < ROUNDS, (blocks, blocks2)
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        # (AddressSanitizer keeps freed memory in quarantine)
        assert rss2 - rss < 16 << 20, (rss, rss2)


def _writes_under_grad(t, x, buf, nb):
    # training graph with write-backs (tests/test_mutation_grad.py): a
    # non-leaf written with a value that requires grad (copy_ under grad
    # mode, a snapshot of t for mul_'s backward), a buffer written under
    # no_grad, a counter bumped as BatchNorm's num_batches_tracked
    t.mul_(x)
    nb.add_(1)
    with torch.no_grad():
        buf.mul_(0.9).add_(x.detach().mean())
    return (t * 2).sum()


def _held_input(x, w):
    # w (no grad) is read by v's backward, then written: the node holds it
    # outside save_for_backward (_autograd.py Plan.saved_args)
    v = x * w
    w.add_(1)
    return (x * 2).sum(), v


def _leaf_error(t, x):
    t.add_(x)                 # a leaf that requires grad: eager's error
    return t


def _training_workload(rounds, compiled, leafy, held):
    buf, nb = torch.zeros(3), torch.zeros((), dtype=torch.long)
    for _ in range(rounds):
        p = torch.randn(3, requires_grad=True)
        x = torch.randn(3, requires_grad=True)
        s = compiled(p * 2, x, buf, nb)
        s.backward()
        held(x, torch.ones(3))[0].backward()
        with pytest.raises(RuntimeError, match="leaf Variable"):
            leafy(torch.randn(3, requires_grad=True), x)


def test_training_writes_do_not_leak():
    """The autograd node of a graph with write-backs, its copies under
    grad mode, the snapshot it saves, an input it holds outside
    save_for_backward and the CPython run of a leaf's error, called many
    times on the 'auto' backend: no growth."""
    compiled = tcjit.compile(_writes_under_grad)
    leafy = tcjit.compile(_leaf_error)
    held = tcjit.compile(_held_input)
    for _ in range(2):
        _training_workload(ROUNDS, compiled, leafy, held)
    objects, blocks, rss = _snapshot()
    for _ in range(3):
        _training_workload(ROUNDS, compiled, leafy, held)
    objects2, blocks2, rss2 = _snapshot()
    assert tcjit.counters()["graphs"] >= 2
    assert objects2 - objects < ROUNDS // 10, (objects, objects2)
    assert blocks2 - blocks < ROUNDS, (blocks, blocks2)
    if "libasan" not in os.environ.get("LD_PRELOAD", ""):
        assert rss2 - rss < 16 << 20, (rss, rss2)
