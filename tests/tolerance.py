"""How close a result must be to eager's: one definition for the tests
(conftest.check_same) and bench/bench.py; docs/ops.md states it.

torch.testing.assert_close's defaults for the dtype compared -- float32:
rtol 1.3e-6, atol 1e-5; float64: rtol 1e-7, atol 1e-7; float16: rtol 1e-3,
atol 1e-5; bfloat16: rtol 1.6e-2, atol 1e-5; integers and bool: exact --
with NaN equal to NaN.  tcjit's transcendentals are within a few ulp of
the exact value, and so is eager's (SLEEF): both sit far inside these.
"""
import torch


def assert_close(actual, expected, msg=None, **tol):
    """tol (rtol=, atol=) loosens the bound where the caller says why: a
    bench workload of 12 transformer blocks accumulates rounding
    differences of its matmuls."""
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=msg,
                               **tol)
