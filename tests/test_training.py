"""Training (issue 13): graphs that require grad compile as autograd nodes.
"""
import torch

import tcjit
from conftest import check_same


# ---- scheduler: found by training's backward graphs -------------------------------

def test_schedule_two_row_groups_around_a_reduction_do_not_cycle():
    # [n, 1] values before and after a reduction over [n, k], both kept
    # (outputs): one pointwise group would need itself
    def f(v, a, b, c):
        e = (b / 32).expand(2, 8, 32)
        s = (-(a + c + e * v)).sum(2, keepdim=True).to(torch.float64)
        return e, s, (s / 32).expand(2, 8, 32)

    args = [torch.randn(2, 8, 32), torch.randn(2, 8, 32),
            torch.randn(2, 8, 1), torch.randn(2, 8, 32)]
    with torch.no_grad():
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            out = tcjit.compile(f)(*args)
    for o, r in zip(out, f(*args)):
        torch.testing.assert_close(o, r, atol=1e-5, rtol=1e-5)


def test_arena_size_keeps_every_buffer_a_whole_tensor():
    # a bool buffer placed last made the arena 79 bytes: torch ops that
    # copy a float buffer's storage (slice_scatter) asserted on it
    def f(v0, v1, t1):
        t4 = torch.slice_scatter(torch.zeros(3, 5), t1, 1, 1, 4, 2)
        return torch.where(v0 < v1, 0.0, t4)

    args = torch.randn(3, 5), torch.randn(3, 5), torch.randn(3, 2)
    with torch.no_grad():
        check_same(tcjit.compile(f)(*args), f(*args))
