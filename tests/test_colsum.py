"""Column sums of CPU graphs as torch.sum calls (src/frame_eval/colsum.c).

A float sum whose reduced dims leave its operand's innermost dim (the bias
gradient sum(g, 0), a layer norm's weight gradient) is eager's own kernel
on the CPU in graphs that record no autograd; its operand is a kernel of
its own.  Generated cases check: the graph has the extern where the rule
says so and the registry sum elsewhere (row sums, few rows or columns,
half dtypes, dtype=, graphs that record autograd); values, dtype, shape and
strides against eager -- bit for bit where the sum's operand is an input,
against the float64 program where a fused producer computes it."""
import random

import pytest
import torch

import tcjit
from conftest import check_against_float64, log_messages


def _ops(fn, args):
    tcjit.reset()
    e = tcjit.explain(fn)(*args)
    assert e.graph_count == 1 and e.graph_break_count == 0
    return [op for ops in e.ops_per_graph for op in ops]


def _cases():
    rng = random.Random(20261129)
    out = []
    for i in range(24):
        nd = rng.choice([2, 3, 3, 4])
        shape = [rng.choice([1, 3, 8, 17, 64]) for _ in range(nd)]
        shape[-1] = rng.choice([8, 33, 64])
        dims = tuple(sorted(rng.sample(range(nd - 1), rng.randint(1, nd - 1))))
        keepdim = rng.random() < 0.4
        dt = torch.float64 if i % 3 == 0 else torch.float32
        out.append(pytest.param(tuple(shape), dims, keepdim, dt,
                                id=f"{'x'.join(map(str, shape))}-{dims}-"
                                   f"{'keep' if keepdim else 'drop'}-{str(dt)[6:]}"))
    return out


def _column(shape, dims):
    """What colsum.c turns: at least 8 rows and 8 columns."""
    rows = 1
    for d in dims:
        rows *= shape[d]
    cols = 1
    for d in range(len(shape)):
        cols *= 1 if d in dims else shape[d]
    return rows >= 8 and cols >= 8


@pytest.mark.parametrize("shape,dims,keepdim,dt", _cases())
def test_column_sum_of_an_input_is_eagers_kernel(shape, dims, keepdim, dt):
    g = torch.Generator().manual_seed(len(shape) * 100 + sum(shape))
    x = torch.randn(shape, generator=g, dtype=dt)

    def f(x):
        return x.sum(dims, keepdim=keepdim)
    ops = _ops(f, (x,))
    assert (ops == ["extern"]) == _column(shape, dims), ops
    tcjit.reset()
    got, exp = tcjit.compile(f)(x), f(x)
    assert (got.dtype, got.shape, got.stride()) == (exp.dtype, exp.shape, exp.stride())
    if _column(shape, dims):
        assert torch.equal(got, exp)      # eager's kernel: the same bits
    else:
        torch.testing.assert_close(got, exp)


@pytest.mark.parametrize("shape,dims,keepdim,dt", _cases()[::2])
def test_column_sum_of_a_fused_producer(shape, dims, keepdim, dt):
    """GELU-backward-like producer, returned too (the pointwise kernel
    stores it) and not (only the sum reads it)."""
    g = torch.Generator().manual_seed(sum(shape))
    a, b = (torch.randn(shape, generator=g, dtype=dt) for _ in "ab")

    def both(a, b):
        d = a * (1 - b.tanh() ** 2) + 0.5 * b
        return d, d.sum(dims, keepdim=keepdim)

    def only(a, b):
        return (a * b.sigmoid()).sum(dims, keepdim=keepdim) * 2
    for fn in (both, only):
        ops = _ops(fn, (a, b))
        assert ("extern" in ops) == _column(shape, dims), ops
        tcjit.reset()
        check_against_float64(fn, (a, b))


@pytest.mark.parametrize("case", ["row", "few_rows", "few_cols", "bf16",
                                  "transposed"])
def test_sums_that_stay_registry_sums(case):
    x = torch.randn(64, 32)
    fn = {"row": lambda x: x.sum(-1),
          "few_rows": lambda x: x[:4].sum(0),
          "few_cols": lambda x: x[:, :4].contiguous().sum(0),
          "bf16": lambda x: x.bfloat16().sum(0),
          "transposed": lambda x: x.t().sum(0)}[case]   # reduces stride 1
    assert "sum" in _ops(fn, (x,))
    tcjit.reset()
    torch.testing.assert_close(tcjit.compile(fn)(x), fn(x))


def test_graph_recording_autograd_keeps_the_registry_sum():
    """The forward of a training graph keeps `sum` (its derivative rule);
    the backward graph's bias sum is the extern, and every gradient is
    eager's."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 48)

    def f(x):
        h = torch.nn.functional.gelu(lin(x), approximate="tanh")
        return h.sum(0).square().sum()
    x = torch.randn(64, 32, requires_grad=True)
    assert "sum" in _ops(f, (x,))
    tcjit.reset()
    loss = tcjit.compile(f)(x)
    loss.backward()
    got = [x.grad, lin.weight.grad, lin.bias.grad]
    x.grad = lin.weight.grad = lin.bias.grad = None
    f(x).backward()
    for g, e in zip(got, [x.grad, lin.weight.grad, lin.bias.grad]):
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_later_in_place_write_of_the_sum():
    """The extern's result is a tensor of its own: writing it in place
    afterwards (in the graph and after it) changes nothing else."""
    x = torch.randn(64, 32)

    def f(x):
        s = x.sum(0)
        s.mul_(2)
        return s, x * 1
    tcjit.reset()
    got, exp = tcjit.compile(f)(x), f(x)
    for g, e in zip(got, exp):
        assert torch.equal(g, e)
    got[0].add_(1)
    assert torch.equal(got[1], exp[1])


def test_size_generic_compile_keeps_the_registry_sum(tcjit_logs):
    """A size-generic compile does not turn column sums (which ones turn
    depends on the sizes: colsum.h); a static one does."""
    def f(x):
        return x.sum(0) * 2
    for dynamic, want in ((True, "= sum("), (False, "= extern(")):
        tcjit.reset()
        caplog = tcjit_logs("graph")
        caplog.clear()
        cf = tcjit.compile(f, dynamic=dynamic)
        for n in (16, 24):
            xs = torch.randn(n, 32)
            torch.testing.assert_close(cf(xs), f(xs))
        text = "\n".join(log_messages(caplog, "graph"))
        assert want in text, text
        tcjit.set_logs("")
