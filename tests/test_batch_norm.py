"""Eval-mode batch norm as pointwise ops (src/graph/bn_lower.c): values,
dtype and strides as eager's; fused with the ReLU / residual add after it;
training mode, batch statistics and custom backends keep torch's call."""
import pytest
import torch
import torch.nn as nn

import tcjit
from conftest import check_same, log_messages
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SHAPES = {nn.BatchNorm1d: [(4, 16), (4, 16, 33)],
          nn.BatchNorm2d: [(4, 16, 9, 11)],
          nn.BatchNorm3d: [(2, 16, 3, 5, 7)]}
CASES = [(cls, s) for cls, shapes in SHAPES.items() for s in shapes]


def _bn(cls, c, dtype, affine=True, seed=0, **kw):
    """An eval-mode batch norm with non-trivial statistics and affine
    parameters."""
    g = torch.Generator().manual_seed(seed)
    m = cls(c, affine=affine, **kw)
    with torch.no_grad():
        if m.running_mean is not None:
            m.running_mean.copy_(torch.randn(c, generator=g))
            m.running_var.copy_(torch.rand(c, generator=g) + 0.1)
        if affine:
            m.weight.copy_(torch.randn(c, generator=g))
            m.bias.copy_(torch.randn(c, generator=g))
    return m.to(dtype).eval()


def _input(shape, dtype, layout="contiguous", seed=1):
    x = (torch.randn(shape, generator=torch.Generator().manual_seed(seed))
         * 3).to(dtype)
    if layout == "channels_last":
        fmt = (torch.channels_last if x.dim() == 4
               else torch.channels_last_3d)
        x = x.to(memory_format=fmt)
    elif layout == "permuted":        # dense, neither format: eager's
        x = x.transpose(0, -1).contiguous().transpose(0, -1)
    elif layout == "strided":         # not dense
        x = torch.cat([x, x], -1)[..., ::2]
    return x


def _ulp_close(got, want, x, m):
    """Eager's dtype and strides, and values within the rounding that
    separates eager's kernel from ours: eager's CPU kernel contracts
    x * alpha + beta into an FMA, tcjit's kernels round the product (an ulp
    of the terms, in opmath); a float16 / bfloat16 result then rounds
    once to the nearer of two neighbours (an ulp of the result)."""
    check_same(got, want)
    xd = x.double()
    shape = (1, -1) + (1,) * (x.dim() - 2)
    inv = torch.rsqrt(m.running_var.double() + m.eps).view(shape)
    w = m.weight.double().view(shape) if m.weight is not None else 1.0
    b = m.bias.double().view(shape) if m.bias is not None else 0.0
    alpha = inv * w
    terms = (xd * alpha).abs() + (m.running_mean.double().view(shape)
                                  * alpha).abs() + abs(b)
    opmath = torch.float64 if x.dtype == torch.float64 else torch.float32
    bound = 4 * torch.finfo(opmath).eps * terms
    if x.dtype in (torch.float16, torch.bfloat16):
        bound = bound + torch.finfo(x.dtype).eps * torch.maximum(
            got.double().abs(), want.double().abs())
    err = (got.double() - want.double()).abs()
    assert (err <= bound).all(), f"max error {err.max()} > bound"


def _run(m, x):
    with torch.no_grad():
        return tcjit.compile(m)(x), m(x)


def _ops(f, *args):
    with torch.no_grad():
        return tcjit.explain(f)(*args).ops_per_graph


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("affine", [True, False], ids=["affine", "plain"])
@pytest.mark.parametrize("cls,shape", CASES,
                         ids=[f"{c.__name__}{len(s)}d" for c, s in CASES])
def test_eval_values_dtype_strides(cls, shape, affine, dtype):
    m = _bn(cls, shape[1], dtype, affine)
    x = _input(shape, dtype)
    got, want = _run(m, x)
    _ulp_close(got, want, x, m)
    assert "extern" not in _ops(m, x)[0]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["channels_last", "permuted", "strided"])
@pytest.mark.parametrize("cls,shape", [(nn.BatchNorm1d, (4, 16, 33)),
                                       (nn.BatchNorm2d, (4, 16, 9, 11)),
                                       (nn.BatchNorm3d, (2, 16, 3, 5, 7))],
                         ids=["1d", "2d", "3d"])
def test_eval_layouts(cls, shape, layout, dtype):
    """channels-last stays channels-last; a permuted or strided input
    gives what eager's kernel allocates (suggest_memory_format), with
    eager's general loop's arithmetic."""
    if layout == "channels_last" and cls is nn.BatchNorm1d:
        pytest.skip("no channels-last format for 3-d tensors")
    m = _bn(cls, shape[1], dtype)
    x = _input(shape, dtype, layout)
    got, want = _run(m, x)
    _ulp_close(got, want, x, m)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last",
                                    "permuted"])
def test_float32_parameters_reduced_input(dtype, layout):
    """float32 statistics and parameters with a half-precision input (a
    module left in float32 under a half-precision input): eager computes
    in float32 and rounds once."""
    m = _bn(nn.BatchNorm2d, 16, torch.float32)
    x = _input((4, 16, 9, 11), dtype, layout)
    got, want = _run(m, x)
    _ulp_close(got, want, x, m)
    assert "extern" not in _ops(m, x)[0]


def test_general_loop_rounds_like_c10_half():
    """Eager's general loop (a strided input) with float16 parameters
    rounds every op to float16: the lowered ops do the same, bitwise."""
    m = _bn(nn.BatchNorm2d, 16, torch.float16)
    x = _input((4, 16, 9, 11), torch.float16, "strided")
    got, want = _run(m, x)
    check_same(got, want)
    assert torch.equal(got, want)


def test_special_values_and_signed_zero():
    """inf / nan / -0.0 inputs, a zero variance, and no bias (eager adds
    0, so -0.0 becomes +0.0)."""
    m = _bn(nn.BatchNorm1d, 4, torch.float32, affine=False)
    with torch.no_grad():
        m.running_mean.zero_()
        m.running_var.copy_(torch.tensor([1.0, 0.0, 4.0, 1e-30]))
    x = torch.tensor([[-0.0, float("inf"), float("nan"), -1.0],
                      [1.0, -float("inf"), -0.0, 3.0]])
    got, want = _run(m, x)
    check_same(got, want)
    assert torch.equal(torch.signbit(got), torch.signbit(want))


class BnReluRes(nn.Module):
    """resnet's tail of a block: bn, + residual, relu."""

    def __init__(self, c, dtype):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1, bias=False).to(dtype)
        self.bn = _bn(nn.BatchNorm2d, c, dtype)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)) + x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_conv_bn_residual_relu(dtype):
    m = BnReluRes(8, dtype).eval()
    x = _input((2, 8, 10, 10), dtype)
    got, want = _run(m, x)
    check_same(got, want)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_bn_residual_relu(dtype, layout):
    """(a channels-last input to a convolution is left out: the conv2d
    extern's CPU result is contiguous where eager's is channels-last, a
    separate bug of the convolution's layout rule)"""
    bn = _bn(nn.BatchNorm2d, 8, dtype)

    def f(x, y):
        return torch.relu(bn(x) + y)

    x = _input((2, 8, 10, 10), dtype, layout)
    y = _input((2, 8, 10, 10), dtype, layout, seed=2)
    with torch.no_grad():
        got, want = tcjit.compile(f)(x, y), f(x, y)
    check_same(got, want)


def test_bn_and_relu_are_one_kernel(tcjit_logs):
    """Conv -> BN -> ReLU: no torch batch_norm call; the per-element
    transform and the ReLU are one loop (the per-channel scale and shift
    are a [C] kernel before it)."""
    logs = tcjit_logs("output_code")
    m = nn.Sequential(nn.Conv2d(3, 8, 3), _bn(nn.BatchNorm2d, 8,
                                               torch.float32),
                      nn.ReLU()).eval()
    x = torch.randn(2, 3, 10, 10)
    got, want = _run(m, x)
    _ulp_close(got, want, m[0](x).detach(), m[1])
    code = "\n".join(log_messages(logs, "output_code"))
    assert "batch_norm" not in code, code
    kernels = [l for l in code.splitlines() if l.startswith("void k")]
    big = [k for k in kernels if "relu(" in k]
    assert len(big) == 1 and "mul(" in big[0] and "add(" in big[0], code
    assert len(kernels) == 2, code


def test_training_mode_stays_torch_call():
    """Training mode updates the running statistics: torch's call, and the
    statistics move as eager's do."""
    m = _bn(nn.BatchNorm2d, 8, torch.float32).train()
    ref = _bn(nn.BatchNorm2d, 8, torch.float32).train()
    x = torch.randn(4, 8, 5, 5)
    with torch.no_grad():
        got, want = tcjit.compile(m)(x), ref(x)
    check_same(got, want)
    check_same(m.running_mean, ref.running_mean)
    check_same(m.running_var, ref.running_var)
    m2 = _bn(nn.BatchNorm2d, 8, torch.float32).train()
    assert "extern" in _ops(m2, x)[0]


def test_no_running_stats_uses_batch_statistics():
    """track_running_stats=False: eval mode normalizes with the batch's
    statistics (F.batch_norm passes training=True): torch's call."""
    m = _bn(nn.BatchNorm2d, 8, torch.float32, track_running_stats=False)
    x = torch.randn(4, 8, 5, 5)
    got, want = _run(m, x)
    check_same(got, want)
    assert "extern" in _ops(m, x)[0]


def test_functional_batch_norm_eval():
    """F.batch_norm with weight only, eps given, running stats as plain
    tensors."""
    mean, var = torch.randn(6), torch.rand(6) + 0.5
    w = torch.randn(6)

    def f(x):
        return torch.nn.functional.batch_norm(x, mean, var, w, None,
                                              False, 0.1, 1e-3).sigmoid()

    x = torch.randn(3, 6, 7)
    got = tcjit.compile(f)(x)
    check_same(got, f(x))
    assert "extern" not in _ops(f, x)[0]


def test_custom_backend_sees_the_torch_call():
    """The lowering is for tcjit's own code generators: a callable backend
    gets the graph as traced, which replays torch.batch_norm."""
    graphs = []

    def backend(graph, example_inputs):
        graphs.append(graph)
        return graph

    m = _bn(nn.BatchNorm2d, 8, torch.float32)
    x = torch.randn(2, 8, 4, 4)
    with torch.no_grad():
        got = tcjit.compile(m, backend=backend)(x)
        want = m(x)
    check_same(got, want)
    assert any(n.op == "extern" for n in graphs[0].nodes)
    with torch.no_grad():
        check_same(tcjit.compile(m, backend="eager")(x), want)


def test_grad_mode_keeps_torch_call():
    """With grad mode on and parameters that require grad the graph goes to
    autograd, which still gets torch's call; backward works."""
    m = _bn(nn.BatchNorm2d, 8, torch.float32)
    x = torch.randn(2, 8, 4, 4)
    got, want = tcjit.compile(m)(x), m(x)
    check_same(got, want)
    got.sum().backward()
    assert m.weight.grad is not None


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_lowered_batch_norm_ptx_assembles(tmp_path):
    """The lowered ops (views of [C] parameters broadcast over dim 1, sqrt,
    casts of half-precision inputs) as PTX: ptxas accepts every module."""
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        for dtype in DTYPES:
            for layout in ["contiguous", "channels_last", "strided"]:
                m = _bn(nn.BatchNorm2d, 16, dtype)
                x = _input((2, 16, 5, 7), dtype, layout)
                tcjit.reset()
                with torch.no_grad():
                    tcjit.compile(lambda x: torch.relu(m(x)))(x)
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    assert_ptxas_accepts(dumped_ptx(d, 12))
