"""Regression tests for values at the edges of the number range, found by
the differential fuzzer (tests/fuzz): where eager's answer is defined by
how its kernels compute, not by a tolerance.

* float -> integer conversion gives x86's answer, as eager's CPU kernels
  do: truncation toward zero (so a negative fraction becomes +0 again when
  converted back), INT_MIN / INT64_MIN for NaN, infinities and magnitudes
  out of range, and integers below 32 bits through int32 (so 0 there).
  GCC folded (float)(int)x into trunc(x) (gccjit_emit.c
  emit_float_to_int), and KIR folded constants by wrapping (kir.c
  kb_const_f).
"""
import pytest
import torch

import tcjit
from conftest import run_both

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8]
EDGES = [float("nan"), float("inf"), -float("inf"), 1e30, -1e30, 3e9, -3e9,
         1e19, -1e19, 70000.0, -70000.0, 300.0, -300.0, -0.2, -0.7, -0.0,
         0.0, 2.5e9, 65504.0, 1.5]


def _same_bits(actual, expected):
    """Equal, with the sign of zero and NaN where eager has them."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.is_floating_point:
        nan = expected.isnan()
        assert torch.equal(actual.isnan(), nan)
        a, e = actual[~nan], expected[~nan]
        assert torch.equal(a, e) and torch.equal(a.signbit(), e.signbit()), \
            [(x, y) for x, y in zip(a.tolist(), e.tolist())
             if x != y or str(x) != str(y)][:4]
    else:
        assert torch.equal(actual, expected)


@pytest.mark.parametrize("n", [1, 40], ids=["scalar", "vector"])
@pytest.mark.parametrize("idt", INTS, ids=str)
@pytest.mark.parametrize("fdt", FLOATS, ids=str)
def test_float_to_int(fdt, idt, n):
    x = torch.tensor(EDGES, dtype=torch.float64).to(fdt).repeat_interleave(n)
    fns = [lambda x: x.to(idt),
           lambda x: x.to(idt).to(x.dtype),
           lambda x: x.to(idt).rsqrt(),
           lambda x: 1.0 / x.to(idt)]
    for fn in fns:
        tcjit.reset()
        _same_bits(tcjit.compile(fn)(x), fn(x))


def test_float_to_int_fuzz_reproducers():
    # fuzz seeds 7267 (rsqrt of int32(-0.2) was -inf), 6815 (hardtanh of
    # int64 into float: reciprocal of -0), 9598 (int32(1e30) was 1e30)
    x = torch.tensor([-0.2, 0.5, -0.9, 1e30, -3.7])
    for fn in (lambda a: a.to(dtype=torch.int32).rsqrt(),
               lambda a: a.type(torch.int32).sigmoid()):
        _same_bits(tcjit.compile(fn)(x), fn(x))
    i = torch.tensor([[0, -3, 4, -1, 2]])
    fn = lambda a: torch.nn.functional.hardtanh(a, -0.5, 2.0).reciprocal()
    _same_bits(tcjit.compile(fn)(i), fn(i))


def test_float_constant_to_int():
    # a cast of a constant folds in KIR: out of int32's range it gives
    # the backend's answer, not the wrapped int64
    def f(x):
        return (x + torch.full((3,), 3e9).int(),
                x + torch.full((3,), -1e10).to(torch.int16),
                x + torch.full((3,), 70000.0).to(torch.int16),
                x + torch.full((3,), float("nan")).to(torch.int64))
    run_both(f, torch.zeros(3, dtype=torch.int64))
