"""Regression tests for wrong answers of the graph / schedule stage, checked
against eager.

* Reductions over the same dims, some with keepdim and some without, share
  one kernel; each stores into its own output with its own rank
  (schedule.c member_map: the second output was indexed with the first
  one's rank and held uninitialized memory).
"""
import pytest
import torch

import tcjit
from conftest import check_same
from test_cuda import _ptxas, assert_ptxas_accepts, cuda_only, dumped_ptx

# ---- reductions over the same dims with and without keepdim ------------------

KEEPDIM_MIXES = {
    "amin_keep_amax": lambda x: (x.amin(0, keepdim=True), x.amax(0)),
    "amax_amin_keep": lambda x: (x.amax(0), x.amin(0, keepdim=True)),
    "sum_keep_amax": lambda x: (x.sum(0, keepdim=True), x.amax(0)),
    "amin_keep_max_dim": lambda x: (x.amin(0, keepdim=True), *x.max(dim=0)),
    "max_keep_min_dim1": lambda x: (*x.max(dim=1, keepdim=True), *x.min(dim=1)),
    "argmax_keep_argmin": lambda x: (x.argmax(1, keepdim=True), x.argmin(1)),
    "argmin_argmax_keep": lambda x: (x.argmin(-1), x.argmax(-1, keepdim=True)),
    "mean_keep_var_sum": lambda x: (x.mean(1, keepdim=True), x.var(1), x.sum(1)),
    "var_keep_mean_std_keep": lambda x: (x.var(0, keepdim=True), x.mean(0),
                                         x.std(0, keepdim=True)),
    "all_dims": lambda x: (x.sum((0, 1), keepdim=True), x.amax((0, 1)),
                           x.mean()),
    "all_dims_args": lambda x: (x.amax(), x.amin((0, 1), keepdim=True),
                                x.argmax(), x.argmin()),
    "with_epilogues": lambda x: (x.amin(1, keepdim=True) + 1, x.amax(1) * 2,
                                 x - x.mean(1, keepdim=True)),
    "six_outputs": lambda x: (x.sum(1), x.sum(1, keepdim=True), x.amax(1),
                              x.amax(1, keepdim=True), x.argmax(1),
                              x.argmax(1, keepdim=True)),
    "last_dim_3d": lambda x: (x.sum(-1, keepdim=True), x.amax(-1),
                              x.argmin(-1)),
}

SHAPES_2D = {
    "contiguous": lambda: torch.randn(8, 11),
    "transposed": lambda: torch.randn(11, 8).t(),
    "sliced": lambda: torch.randn(8, 22)[:, ::2],
    "size1_reduced": lambda: torch.randn(1, 11),
    "wide": lambda: torch.randn(5, 300),
}


def _input(layout, name):
    x = SHAPES_2D[layout]()
    if name == "last_dim_3d":
        x = x.unsqueeze(0).expand(3, *x.shape).contiguous() + \
            torch.arange(3.0).view(3, 1, 1)
    return x


@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("layout", list(SHAPES_2D))
@pytest.mark.parametrize("name", list(KEEPDIM_MIXES))
def test_reductions_keepdim_mix(name, layout):
    fn = KEEPDIM_MIXES[name]
    x = _input(layout, name)
    cf = tcjit.compile(fn)
    for _ in range(2):
        check_same(cf(x), fn(x))
    assert tcjit.counters()["eager_fallbacks"] == 0


@pytest.mark.parametrize("dims", [(0,), (1,), (2,), (0, 2), (1, 2), (0, 1, 2)])
def test_reductions_keepdim_mix_3d(dims):
    def f(x):
        return (x.sum(dims, keepdim=True), x.amax(dims), x.mean(dims),
                x.amin(dims, keepdim=True))

    for x in (torch.randn(4, 5, 6), torch.randn(6, 5, 4).permute(2, 1, 0)):
        tcjit.reset()
        check_same(tcjit.compile(f)(x), f(x))


def test_argmax_indices_keepdim_mix_int():
    """Indices exact (ties included: eager returns the first)."""
    def f(x):
        return (*x.max(dim=0), x.argmin(0, keepdim=True), x.amax(0, keepdim=True))

    x = torch.randint(-3, 4, (9, 13), dtype=torch.int32)
    check_same(tcjit.compile(f)(x), f(x))


# ---- CUDA: the same graphs on the GPU, and their PTX through ptxas ------------

@cuda_only
@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
@pytest.mark.parametrize("name", list(KEEPDIM_MIXES))
def test_reductions_keepdim_mix_cuda(name):
    fn = KEEPDIM_MIXES[name]
    for layout in SHAPES_2D:
        x = _input(layout, name).cuda()
        tcjit.reset()
        check_same(tcjit.compile(fn)(x), fn(x))


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
@pytest.mark.filterwarnings("ignore:.*degrees of freedom")
def test_ptx_assembles_wrong_answer_graphs(tmp_path):
    d = str(tmp_path)
    tcjit._C.set_config(ptx_dump_dir=d)
    try:
        for name, fn in KEEPDIM_MIXES.items():
            for layout in ("contiguous", "transposed", "size1_reduced"):
                tcjit.reset()
                tcjit.compile(fn)(_input(layout, name))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    assert_ptxas_accepts(dumped_ptx(d, 40))
