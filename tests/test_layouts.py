"""Compiled results have eager's strides (issue 17).

* Decomposed ops (the registry's tc_decomps: softmax, layer_norm, rms_norm,
  normalize, the reductions, ...) and group_norm over non-contiguous
  inputs: transposed, permuted, sliced with steps, expanded, with size-1
  dims of odd strides, channels last.  Strides are compared as the fuzzer
  does (tests/fuzz/check.py): all of them, size-1 dims included.
  eager's rms_norm (torch 2.13, the CPU) is a composite of pointwise ops
  and a mean that ends in result.contiguous() unless the input suggests
  channels last (graph.c tc_graph_rms_norm); its native_group_norm
  allocates empty_like(x, x.suggest_memory_format()) (extern.c).
* Convolutions on the CPU return channels last where the backend torch
  picks does (an input or a weight that suggests it; not float64 3-d
  ones, ...): the meta functions say contiguous, so the result's layout
  comes from a run on fake tensors, which asks torch for the backend
  (runtime/extern_table.c, tracer call_conv).  A fused op after the
  convolution follows it.
"""
import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same


def _strided(sizes, strides):
    return torch.empty_strided(sizes, strides).normal_()


# 4-d inputs (channels last applies to them), then the 3-d / 5-d ones
LAYOUTS = {
    "contiguous": lambda: torch.randn(4, 6, 3, 2),
    # the reproducer: transpose(1, 3) of a (4, 1, 3, 6)
    "transposed": lambda: torch.randn(4, 1, 3, 6).transpose(1, 3),
    "permuted": lambda: torch.randn(3, 4, 5, 6).permute(2, 0, 3, 1),
    "sliced": lambda: torch.randn(4, 6, 3, 12)[:, ::2, :, ::2],
    "expanded": lambda: torch.randn(4, 1, 3, 6).expand(4, 5, 3, 6),
    "size1_mid": lambda: _strided((4, 1, 3, 6), (18, 100, 6, 1)),
    "size1_last": lambda: _strided((4, 3, 6, 1), (18, 6, 1, 7)),
    "size1_lead": lambda: _strided((1, 3, 4, 2), (1, 8, 2, 1)),
    "channels_last": lambda: torch.randn(2, 3, 4, 5).to(
        memory_format=torch.channels_last),
    "cl_sliced": lambda: torch.randn(2, 6, 4, 5).to(
        memory_format=torch.channels_last)[:, ::2],
    "last_transposed": lambda: torch.randn(2, 3, 6, 4).transpose(2, 3),
    "3d_transposed": lambda: torch.randn(5, 3, 4).transpose(0, 2),
    "5d_channels_last": lambda: torch.randn(2, 3, 2, 3, 4).to(
        memory_format=torch.channels_last_3d),
}


def _w(x, n=1):
    return torch.linspace(0.5, 1.5, x.shape[-n:].numel()).reshape(x.shape[-n:])


# Every op of the registry's decomposition table that makes a tensor, and
# group_norm; each after abs(), as the reproducer (a pointwise op
# before keeps a dense input's strides: abs of the transposed input
# suggests channels last, the input itself does not).
DECOMPOSED = {
    "rms_norm": lambda x: F.rms_norm(x, x.shape[-2:]),
    "rms_norm_last": lambda x: F.rms_norm(x, x.shape[-1:], eps=1e-5),
    "rms_norm_weight": lambda x: F.rms_norm(x, x.shape[-1:], _w(x)),
    "rms_norm_half": lambda x: F.rms_norm(x.half(), x.shape[-1:]),
    "rms_norm_half_f32_weight": lambda x: F.rms_norm(x.half(), x.shape[-1:],
                                                     _w(x)),
    "layer_norm": lambda x: F.layer_norm(x, x.shape[-2:]),
    "layer_norm_affine": lambda x: F.layer_norm(x, x.shape[-1:], _w(x),
                                                _w(x) - 1),
    "group_norm": lambda x: F.group_norm(x, 1),
    "group_norm_affine": lambda x: F.group_norm(
        x, x.shape[1], torch.ones(x.shape[1]) * 0.5, torch.zeros(x.shape[1])),
    "softmax_0": lambda x: F.softmax(x, 0),
    "softmax_1": lambda x: torch.softmax(x, 1),
    "softmax_last": lambda x: x.softmax(-1),
    "softmax_dtype": lambda x: F.softmax(x, 1, dtype=torch.float64),
    "log_softmax_1": lambda x: F.log_softmax(x, 1),
    "log_softmax_last": lambda x: x.log_softmax(-1),
    "normalize": lambda x: F.normalize(x),
    "normalize_last_p1": lambda x: F.normalize(x, p=1, dim=-1),
    "mean": lambda x: x.mean(1, keepdim=True),
    "mean_dims": lambda x: x.mean((0, -1)),
    "var": lambda x: x.var(-1, keepdim=True),
    "std": lambda x: x.std(0),
    "logsumexp": lambda x: x.logsumexp(1, keepdim=True),
    "norm": lambda x: x.norm(dim=-1, keepdim=True),
    "max_dim": lambda x: x.max(1, keepdim=True),
    "min_dim": lambda x: torch.min(x, -1),
    "tril": lambda x: x.tril(),
    "triu": lambda x: torch.triu(x, 1),
    "dropout_eval": lambda x: F.dropout(x, 0.5, training=False) * 2,
    "zeros_like": lambda x: torch.zeros_like(x),
    "ones_like": lambda x: torch.ones_like(x) + x,
    "empty_like": lambda x: torch.empty_like(x).fill_(1.0),
    "type_as": lambda x: x.type_as(torch.zeros(1, dtype=torch.float64)),
    "cross_entropy_none": lambda x: F.cross_entropy(
        x, torch.zeros((x.shape[0],) + x.shape[2:], dtype=torch.long),
        reduction="none"),
}

# ops that need 2+ dims; group_norm wants channels (dim 1) with groups
_NEEDS = {"tril": 2, "triu": 2, "rms_norm": 2, "layer_norm": 2,
          "cross_entropy_none": 2, "group_norm": 2, "group_norm_affine": 2}


# backend="eager" replays the same graph metadata (frame_eval/convert.c):
# the layouts that exercise each rule differently are enough there
EAGER_BACKEND_LAYOUTS = ["transposed", "size1_last", "channels_last",
                         "5d_channels_last"]


@pytest.mark.parametrize("layout, backend",
                         [(lay, "auto") for lay in LAYOUTS]
                         + [(lay, "eager") for lay in EAGER_BACKEND_LAYOUTS])
@pytest.mark.parametrize("op", list(DECOMPOSED))
def test_decomposed_op_strides_like_eager(op, layout, backend):
    x = LAYOUTS[layout]()
    if x.dim() < _NEEDS.get(op, 1):
        pytest.skip("needs more dims")
    g = DECOMPOSED[op]
    f = lambda x: (g(abs(x)), g(x))  # noqa: E731
    check_same(tcjit.compile(f, backend=backend)(x), f(x))


def test_rms_norm_reproducer():
    # the program: (18, 3, 1, 1) where eager gives (18, 1, 6, 6)
    def f(a1, a4):
        v1 = abs(a1)
        return (F.rms_norm(v1, (3, 1), a4),)
    a1 = torch.randn(4, 1, 3, 6).transpose(1, 3)
    a4 = torch.tensor([1.5, 0.1, 0.7]).reshape(3, 1)
    for backend in ("auto", "eager"):
        tcjit.reset()
        check_same(tcjit.compile(f, backend=backend)(a1, a4), f(a1, a4))


# ---- convolutions --------------------------------------------------------------

CL = {4: torch.channels_last, 5: torch.channels_last_3d}


def _fmt(t, cl):
    return t.to(memory_format=CL[t.dim()]) if cl else t


CONVS = {
    # (input sizes, weight sizes, call)
    "conv1d": ((2, 3, 9), (4, 3, 3), lambda x, w, b: F.conv1d(x, w, b)),
    "conv2d": ((2, 3, 8, 8), (8, 3, 3, 3), lambda x, w, b: F.conv2d(x, w, b)),
    "conv2d_strided": ((2, 4, 9, 7), (6, 2, 3, 2),
                       lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1,
                                                groups=2)),
    "conv2d_unbatched": ((3, 8, 8), (8, 3, 3, 3),
                         lambda x, w, b: F.conv2d(x, w, b)),
    "conv3d": ((2, 3, 5, 5, 5), (4, 3, 3, 3, 3),
               lambda x, w, b: F.conv3d(x, w, b)),
    "conv_transpose2d": ((2, 3, 6, 6), (3, 4, 3, 3),
                         lambda x, w, b: F.conv_transpose2d(x, w, b)),
    "conv_transpose3d": ((2, 3, 4, 4, 4), (3, 2, 2, 2, 2),
                         lambda x, w, b: F.conv_transpose3d(x, w, b)),
}


@pytest.mark.parametrize("backend", ["auto", "eager"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("which", ["input", "weight", "both"])
@pytest.mark.parametrize("conv", list(CONVS))
def test_conv_channels_last_like_eager(conv, which, dtype, backend):
    xs, ws, call = CONVS[conv]
    x = _fmt(torch.randn(*xs, dtype=dtype), which != "weight" and len(xs) in CL)
    w = _fmt(torch.randn(*ws, dtype=dtype), which != "input" and len(ws) in CL)
    b = torch.randn(w.shape[1] if "transpose" in conv else w.shape[0],
                    dtype=dtype)
    # the result itself, a fused op after it, and a view of that
    f = lambda x, w, b: (call(x, w, b), call(x, w, b).relu() * 2,  # noqa: E731
                         (call(x, w, b) + 1)[:1])
    check_same(tcjit.compile(f, backend=backend)(x, w, b), f(x, w, b))


@pytest.mark.parametrize("backend", ["auto", "eager"])
def test_conv_module_channels_last(backend):
    # the example: nn.Conv2d(3, 8, 3) on a channels-last input
    torch.manual_seed(0)
    m = torch.nn.Conv2d(3, 8, 3)
    x = torch.randn(2, 3, 10, 10).to(memory_format=torch.channels_last)
    f = lambda x: torch.relu(m(x))  # noqa: E731
    out = tcjit.compile(f, backend=backend)(x)
    check_same(out, f(x))
    assert out.is_contiguous(memory_format=torch.channels_last)
