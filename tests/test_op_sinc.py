"""torch.sinc: one registry entry (src/graph/ops.c) gives the op, its
spellings (torch.sinc, torch.special.sinc, Tensor.sinc), its eager replay
and its docs line.  Compiled results are compared with eager's."""
import math

import pytest
import torch

import tcjit
from conftest import check_same, run_both
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

SPECIAL = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e-40, -1e-20, 1e-7,
           0.5, -0.5, 1.0, -1.0, 2.0, 3.0, 1e6 + 0.5, 1e30, -1e30]

FUNCS = {
    "torch.sinc": lambda x: torch.sinc(x),
    "special.sinc": lambda x: torch.special.sinc(x) * 2,
    "Tensor.sinc": lambda x: x.sinc(),
    # fused into the kernel of its neighbours (float32 / float64 only: a
    # float16 chain rounds once where eager rounds after every op)
    "chain": lambda x: (x * 3).sinc() - x,
}


def inputs(dtype):
    g = torch.Generator().manual_seed(0)
    if dtype.is_floating_point:
        dense = (torch.randn(7, 9, generator=g, dtype=torch.float64) * 4)
        return {"contiguous": dense.to(dtype),
                "transposed": dense.t().to(dtype),
                "sliced": dense.to(dtype)[1:, ::3],
                "0d": torch.tensor(0.0, dtype=dtype),
                "empty": torch.empty(0, 3, dtype=dtype),
                "special": torch.tensor(SPECIAL, dtype=torch.float64).to(dtype)}
    return {"ints": torch.arange(-4, 5).to(dtype)}


def traced_ops(fn, x):
    """The ops of the graphs fn compiles to (a graph break before sinc
    would leave it out: run_both alone would then test eager's sinc)."""
    ops = []

    def backend(graph, example_inputs):
        ops.extend(graph.ops())
        return graph

    tcjit.compile(fn, backend=backend)(x)
    return ops


DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16,
          torch.int64, torch.int32, torch.bool]
CHAIN_DTYPES = (torch.float32, torch.float64)


@pytest.mark.parametrize("fname", list(FUNCS))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sinc(fname, dtype):
    if fname == "chain" and dtype not in CHAIN_DTYPES:
        pytest.skip("float16 chains round once (docs/ops.md)")
    for x in inputs(dtype).values():
        run_both(FUNCS[fname], x, expect_compiled=True)
        assert "sinc" in traced_ops(FUNCS[fname], x)


def test_sinc_dense_sweep():
    x = torch.linspace(-50, 50, 100001, dtype=torch.float64).to(torch.float32)
    fn = lambda x: torch.sinc(x)  # noqa: E731
    run_both(fn, x, expect_compiled=True)
    assert traced_ops(fn, x) == ["sinc"]


def test_sinc_is_in_the_registry_and_replays():
    row = {r["name"]: r for r in tcjit._C.op_table()}["sinc"]
    assert row["kind"] == "pointwise" and row["arity"] == 1
    spellings = {p for p, op in tcjit._C.bindings() if op == "sinc"}
    assert spellings == {"torch.sinc", "torch.special.sinc", "Tensor.sinc"}
    graphs = []

    def backend(graph, example_inputs):
        graphs.append(graph)
        return graph          # replays each op as eager computes it

    x = torch.randn(5)
    check_same(tcjit.compile(lambda x: x.sinc() + 1, backend=backend)(x),
               x.sinc() + 1)
    assert "sinc" in graphs[0].ops()


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_sinc_ptx_assembles(tmp_path):
    tcjit._C.set_config(ptx_dump_dir=str(tmp_path))
    try:
        for dtype in (torch.float32, torch.float64, torch.float16):
            tcjit.reset()
            tcjit.compile(lambda x: torch.sinc(x))(torch.randn(4, 6).to(dtype))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    assert_ptxas_accepts(dumped_ptx(str(tmp_path), 3))
