"""reduce-overhead on CUDA (docs/modes.md): compiled runs recorded as CUDA
graphs and replayed.  Each case runs several calls with changing input
values next to eager, and checks every call's outputs again after the
last call (a replay must never overwrite what an earlier call returned).

The cases also run on the CPU in tests/test_modes.py, through a stand-in
for the CUDA graph, so the recorder's bookkeeping is tested everywhere;
here (skipped without CUDA) they run on the GPU with torch's CUDAGraph.
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import tcjit
from tcjit import _modes_cudagraphs as cg

from conftest import check_same

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs CUDA")


def _clone(v):
    if isinstance(v, torch.Tensor):
        return v.detach().clone()
    if isinstance(v, (tuple, list)):
        return type(v)(_clone(x) for x in v)
    return v


def pointwise(x, y):
    return (x.sin() + y).relu() * 2, x.sum(-1)


def mutates(x, y):
    x.add_(y)
    return x.sin() * 2


def views(x):
    y = x * 3
    return x[1:], y, y.t(), x.t()


def branch(x):
    y = x.sin() * 2
    if y.sum() > 0:
        return y.cos() + x
    return y - x


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 16)

    def forward(self, x):
        return self.b(F.gelu(self.a(x)))


class Running(nn.Module):
    """A buffer updated in place every call (as batch-norm's statistics):
    the kernels may store into it directly."""

    def __init__(self):
        super().__init__()
        self.register_buffer("acc", torch.zeros(16))

    def forward(self, x):
        self.acc.mul_(0.9).add_(x.mean(0))
        return x - self.acc


class Cache(nn.Module):
    """A decode step: write position t of a preallocated cache, attend
    over [:t+1]."""

    def __init__(self):
        super().__init__()
        self.q = nn.Linear(32, 32, bias=False)
        self.register_buffer("k", torch.zeros(1, 2, 16, 16))
        self.register_buffer("v", torch.zeros(1, 2, 16, 16))

    def forward(self, x, t):
        q = self.q(x).view(1, 1, 2, 16).transpose(1, 2)
        self.k[:, :, t:t + 1] = q
        self.v[:, :, t:t + 1] = q * 2
        a = F.scaled_dot_product_attention(q, self.k[:, :, :t + 1],
                                           self.v[:, :, :t + 1])
        return a.transpose(1, 2).reshape(1, 1, 32)


def _inputs(shapes, dev, sign=None):
    def make(i):
        out = []
        for s in shapes:
            x = torch.randn(*s, device=dev)
            if sign is not None:
                x = x.abs() * (1 if i % 3 else -1)
            out.append(x)
        return out
    return make


# name -> (make the function (fresh state), inputs of call i, calls, kw)
CASES = {
    "pointwise": (lambda: pointwise, _inputs([(64, 32), (64, 32)], None), 6,
                  {}),
    "mutated_input": (lambda: mutates, _inputs([(8, 16), (8, 16)], None), 5,
                      {}),
    "output_views": (lambda: views, _inputs([(6, 5)], None), 5, {}),
    "graph_break": (lambda: branch, _inputs([(16, 8)], None, sign=True), 7,
                    {}),
    "module_params": (MLP, _inputs([(4, 32)], None), 5, {}),
    "two_sizes": (lambda: pointwise,
                  lambda dev: lambda i: [torch.randn(8 if i % 2 else 24, 32,
                                                     device=dev)
                                         for _ in range(2)], 8, {}),
    "dynamic_sizes": (lambda: pointwise,
                      lambda dev: lambda i: [torch.randn(4 + i % 3, 32,
                                                         device=dev)
                                             for _ in range(2)], 9,
                      {"dynamic": True}),
    "kv_cache": (Cache, None, 6, {}),
    "buffer_update": (Running, _inputs([(8, 16)], None), 5, {}),
}


def _case_inputs(name, dev):
    make = CASES[name][1]
    if name == "kv_cache":
        # positions 3, 4, 3, 4, ...: each position an entry of its own
        return lambda i: [torch.randn(1, 1, 32, device=dev), 3 + i % 2]
    if name in ("two_sizes", "dynamic_sizes"):
        return make(dev)
    inner = make

    def at(i):
        return [x.to(dev) for x in inner(i)]
    return at


def run_case(name, dev):
    """Eager and tcjit reduce-overhead side by side; every call's values
    checked right away and again at the end."""
    build, _, calls, kw = CASES[name]
    fn = build()
    if isinstance(fn, nn.Module):
        fn = fn.to(dev)
    eager = copy.deepcopy(fn) if isinstance(fn, nn.Module) else fn
    compiled = tcjit.compile(fn, mode="reduce-overhead", **kw)
    inputs = _case_inputs(name, dev)
    kept = []
    with torch.no_grad():
        for i in range(calls):
            args = inputs(i)
            a_eager, a_comp = _clone(args), _clone(args)
            expected = eager(*a_eager)
            got = compiled(*a_comp)
            check_same(got, expected, path=f"call{i}")
            check_same(a_comp, a_eager, path=f"inputs after call{i}")
            kept.append((got, _clone(expected)))
    for i, (got, expected) in enumerate(kept):
        check_same(got, expected, path=f"call{i} after the last call")
    if isinstance(fn, nn.Module):
        for (n, b), (_, be) in zip(fn.named_buffers(), eager.named_buffers()):
            check_same(b, be, path=n)


def check_case(name, dev, recorders):
    """run_case, then what the Recorders did."""
    run_case(name, dev)
    assert recorders, "nothing was handed to the recorder"
    assert all(r.off is None for r in recorders), [r.off for r in recorders]
    assert any(r.nrecorded for r in recorders)
    recs = [rec for r in recorders for rec in r.recordings.values()]
    if name == "graph_break":
        assert len(recorders) >= 2
    if name == "mutated_input":
        # x moves every call: the graph writes its static buffer
        assert all(rec.copy_back == (0,) for rec in recs)
    if name == "kv_cache":
        # the caches are read (and written) in place, x is copied; the
        # graph writes the caches back itself
        for rec in recs:
            assert len(rec.inplace) >= 3 and not rec.copy_back
            assert len(rec.folded) == 2, rec.plan


def collect_recorders(monkeypatch, recorder_for):
    """Install recorder_for (cg.recorder_for's signature) for the compiles
    to come; the list of the Recorders they make."""
    made = []

    def wrapped(*args):
        make = recorder_for(*args)
        if make is None:
            return None

        def keep(*a):
            r = make(*a)
            made.append(r)
            return r
        return keep
    monkeypatch.setattr(cg, "recorder_for", wrapped)
    return made


@pytest.fixture
def recorders(monkeypatch):
    return collect_recorders(monkeypatch, cg.recorder_for)


@needs_cuda
@pytest.mark.parametrize("name", list(CASES))
def test_reduce_overhead_equals_eager(name, recorders):
    check_case(name, "cuda", recorders)


@needs_cuda
def test_reduce_overhead_inputs_read_in_place_or_copied(recorders):
    m = MLP().cuda()
    f = tcjit.compile(m, mode="reduce-overhead")
    with torch.no_grad():
        for _ in range(4):
            x = torch.randn(4, 32, device="cuda")
            torch.testing.assert_close(f(x), m(x))
        (rec,) = recorders[0].recordings.values()
        assert len(rec.copied) == 1                  # x
        assert len(rec.inplace) == 4                 # weights and biases
        # a parameter replaced: recorded again with it copied, still right
        m.a.weight = nn.Parameter(torch.randn(64, 32, device="cuda"))
        x = torch.randn(4, 32, device="cuda")
        torch.testing.assert_close(f(x), m(x))
        torch.testing.assert_close(f(x), m(x))


@needs_cuda
def test_reduce_overhead_cpu_tensor_input_runs_normally(tcjit_logs):
    caplog = tcjit_logs("perf_hints")

    def g(x, s):
        return x * s.to(x.device)

    f = tcjit.compile(g, mode="reduce-overhead")
    for _ in range(3):
        x, s = torch.randn(8, device="cuda"), torch.randn(())
        torch.testing.assert_close(f(x, s), g(x, s))
    assert len([r for r in caplog.records
                if r.name == "tcjit.perf_hints"]) <= 1


@needs_cuda
def test_reduce_overhead_pool_is_private():
    """The graph's memory comes from its own pool: eager allocations made
    between replays never land in it."""
    f = tcjit.compile(lambda x: (x * 2).sin(), mode="reduce-overhead")
    x = torch.randn(1 << 16, device="cuda")
    outs = [f(x) for _ in range(3)]
    junk = [torch.full((1 << 16,), 7.0, device="cuda") for _ in range(8)]
    out = f(x)
    torch.testing.assert_close(out, (x * 2).sin())
    for o in outs:
        torch.testing.assert_close(o, (x * 2).sin())
    del junk
