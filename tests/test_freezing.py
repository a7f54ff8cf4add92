"""Freezing (docs/freezing.md): parameters and buffers of modules as
compile-time constants; conv + batch_norm folding; constant folding; a
changed parameter recompiles."""
import copy

import pytest
import torch
import torch.nn as nn

import tcjit
from conftest import check_same


def _bn_stats(m, seed=0):
    """Non-trivial running statistics, so that folding is really tested."""
    g = torch.Generator().manual_seed(seed)
    for b in m.modules():
        if isinstance(b, nn.BatchNorm2d):
            b.running_mean.copy_(torch.rand(b.num_features, generator=g) - 0.5)
            b.running_var.copy_(torch.rand(b.num_features, generator=g) + 0.5)
            b.weight.data.copy_(torch.rand(b.num_features, generator=g) + 0.5)
            b.bias.data.copy_(torch.rand(b.num_features, generator=g) - 0.5)
    return m


class ConvBnRelu(nn.Sequential):
    def __init__(self, cin, cout, bias=False):
        super().__init__(nn.Conv2d(cin, cout, 3, padding=1, bias=bias),
                         nn.BatchNorm2d(cout), nn.ReLU())


class ResBlock(nn.Module):
    """resnet's BasicBlock: conv-bn-relu, conv-bn, + residual, relu."""

    def __init__(self, c):
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + x)


class SmallNet(nn.Module):
    """torchvision-like: stem, two residual stages, pooling, classifier."""

    def __init__(self):
        super().__init__()
        self.stem = ConvBnRelu(3, 16, bias=True)
        self.layer1 = ResBlock(16)
        self.layer2 = ResBlock(16)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(torch.flatten(x.mean((2, 3)), 1))


def _close(got, want):
    """Eager's dtype, shape and strides; values within what folding's one
    extra rounding of the weights moves them."""
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.stride() == want.stride()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def _ops(m, x):
    with torch.no_grad():
        return tcjit.explain(m)(x).ops_per_graph


def _run(m, x):
    with torch.no_grad():
        return tcjit.compile(m)(x), m(x)


@pytest.mark.parametrize("make", [lambda: ConvBnRelu(3, 8),
                                  lambda: ConvBnRelu(3, 8, bias=True),
                                  lambda: ResBlock(8), SmallNet])
def test_frozen_values_equal_eager(make):
    m = _bn_stats(make()).eval()
    x = torch.randn(2, 3 if not isinstance(m, ResBlock) else 8, 12, 12)
    with tcjit.config.patch(freezing=True):
        got, want = _run(m, x)
    _close(got, want)


def test_conv_bn_folded_fewer_externs():
    m = _bn_stats(ResBlock(8)).eval()
    x = torch.randn(1, 8, 10, 10)
    plain = _ops(m, x)
    tcjit.reset()
    with tcjit.config.patch(freezing=True):
        frozen = _ops(m, x)
    # without freezing the two eval-mode batch norms are pointwise ops
    # (src/graph/bn_lower.c: one sqrt each); freezing folds them into the
    # convolutions before them, which leaves none of those ops
    assert "extern" not in plain[0] and plain[0].count("sqrt") == 2
    assert "extern" not in frozen[0] and "sqrt" not in frozen[0]
    assert frozen[0].count("conv2d") == 2
    assert len(frozen[0]) < len(plain[0]) - 2


def test_constant_subexpression_evaluated_once():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(16))
            self.register_buffer("s", torch.rand(16) + 1)

        def forward(self, x):
            return x * (self.w.exp() / self.s.sqrt()) + self.w.sum()

    m = M()
    x = torch.randn(4, 16)
    plain = _ops(m, x)
    tcjit.reset()
    with tcjit.config.patch(freezing=True):
        frozen = _ops(m, x)
        tcjit.reset()
        got, want = _run(m, x)
    check_same(got, want)
    assert {"exp", "sqrt", "sum"} <= set(plain[0])
    assert sorted(frozen[0]) == ["add", "mul"]


def test_changed_parameter_recompiles(tcjit_logs):
    logs = tcjit_logs("recompiles")
    m = _bn_stats(ConvBnRelu(3, 8)).eval()
    x = torch.randn(2, 3, 8, 8)
    cm = tcjit.compile(m)
    with tcjit.config.patch(freezing=True), torch.no_grad():
        _close(cm(x), m(x))
        m[1].running_mean.add_(1.0)                    # in place
        _close(cm(x), m(x))
        m[0].weight.data = torch.randn(8, 3, 3, 3)     # new data
        _close(cm(x), m(x))
        m[1].weight = nn.Parameter(torch.rand(8))      # another object
        _close(cm(x), m(x))
        n = tcjit.counters()["recompiles"]
        _close(cm(x), m(x))  # unchanged: a hit
    assert n == 3 and tcjit.counters()["recompiles"] == 3
    assert "frozen tensor L['self'].1.running_mean changed" in logs.text


def test_training_batch_norm_not_folded():
    m = _bn_stats(ConvBnRelu(3, 8)).train()
    ref = copy.deepcopy(m)
    x = torch.randn(2, 3, 8, 8)
    with tcjit.config.patch(freezing=True), torch.no_grad():
        ops = tcjit.explain(copy.deepcopy(m))(x).ops_per_graph
        got, want = tcjit.compile(m)(x), ref(x)
    assert "extern" in ops[0]                 # batch_norm still called
    _close(got, want)
    # the running statistics were updated, as eager updates them
    check_same(m[1].running_mean, ref[1].running_mean)
    check_same(m[1].running_var, ref[1].running_var)


def test_grad_mode_parameters_not_frozen():
    """With grad mode on, parameters that require grad stay inputs: the
    result requires grad and backward reaches them."""
    m = _bn_stats(ConvBnRelu(3, 8)).eval()
    x = torch.randn(2, 3, 8, 8)
    with tcjit.config.patch(freezing=True):
        out = tcjit.compile(m)(x)
    assert out.requires_grad
    out.sum().backward()
    assert m[0].weight.grad is not None


def test_freezing_off_by_default():
    assert tcjit.config.freezing == 0
    m = _bn_stats(ConvBnRelu(3, 8)).eval()
    assert "sqrt" in _ops(m, torch.randn(1, 3, 6, 6))[0]   # not folded


def test_outputs_are_not_constants():
    """A constant that is also returned is computed per call: eager gives
    a new tensor each time."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.randn(8))

        def forward(self, x):
            c = self.w * 2
            return x + c, c

    m = M()
    x = torch.randn(8)
    cm = tcjit.compile(m)
    with tcjit.config.patch(freezing=True), torch.no_grad():
        a = cm(x)
        b = cm(x)
        check_same(a, m(x))
    assert a[1] is not b[1] and a[1].data_ptr() != b[1].data_ptr()


@pytest.mark.parametrize("how", [dict(options={"freezing": True}),
                                 dict(template="freezing")])
def test_per_compile_freezing(how):
    # tcjit.compile(options=/template=) turns freezing on for that compile
    # only (docs/modes.md): a frozen parameter that changes recompiles,
    # where a plain compile reads parameters live
    m = _bn_stats(ConvBnRelu(3, 8)).eval()
    x = torch.randn(2, 3, 12, 12)
    frozen, plain = tcjit.compile(m, **how), tcjit.compile(m)
    with torch.no_grad():
        for f in (frozen, plain):
            _close(f(x), m(x))
        before = tcjit.counters()["recompiles"]
        m[1].running_mean.add_(0.5)
        _close(plain(x), m(x))
        assert tcjit.counters()["recompiles"] == before
        _close(frozen(x), m(x))
        assert tcjit.counters()["recompiles"] == before + 1
