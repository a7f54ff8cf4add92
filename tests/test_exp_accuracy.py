"""float32 exp on the CPU (src/graph/transcendental.c) against a float64
reference, in ulps of the correctly rounded result.

Two decompositions: the general one (any x) and the one for softmax's
x - max(x), which is <= 0 or NaN and only needs the lower clamp.  Both
must stay within ~1 ulp over the whole range, round once into the
denormals, and give exact 0 / inf / NaN where eager does; the max
reductions beside them must propagate NaN.
"""
import numpy as np
import pytest
import torch

import tcjit


def _float_range(lo, hi, stride):
    """Every `stride`-th float32 bit pattern between lo and hi (one sign)."""
    a, b = (int(np.float32(v).view(np.int32)) for v in (lo, hi))
    bits = np.arange(min(a, b), max(a, b), stride, dtype=np.int64)
    return torch.from_numpy(bits.astype(np.int32).view(np.float32))


def _ulp_error(actual, x):
    """|actual - exp(x)| in ulps of float32(exp(x)); 0 where both are the
    same inf or both NaN, inf where only one is NaN."""
    ref = torch.exp(x.double())
    ref32 = ref.float()
    ulp = torch.from_numpy(np.spacing(np.abs(ref32.numpy()))).double()
    ulp = torch.where(ulp == 0, torch.tensor(2.0 ** -149, dtype=torch.float64),
                      ulp)
    err = (actual.double() - ref).abs() / ulp
    same = (torch.isnan(actual) & torch.isnan(ref32)) | (
        torch.isinf(ref32) & (actual == ref32))
    err = torch.where(same, torch.zeros_like(err), err)
    return torch.where(torch.isnan(actual) != torch.isnan(ref32),
                       torch.full_like(err, float("inf")), err)


SPECIALS = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), 1e30,
            -1e30, 3.4e38, -3.4e38, 88.72283, 88.72284, 89.0, 100.0,
            -87.33655, -87.33654, -103.97, -103.973, -104.0, -104.5, -150.0,
            1e-40, -1e-40, 1e-7, -1e-7]


def test_exp_general_ulp():
    x = torch.cat([_float_range(-110.0, -1e-30, 4099),
                   _float_range(1e-30, 95.0, 4099), torch.tensor(SPECIALS)])
    y = tcjit.compile(lambda x: torch.exp(x))(x)
    err = _ulp_error(y, x)
    assert err.max().item() < 1.5, x[err.argmax()].item()
    assert torch.equal(torch.isnan(y), torch.isnan(x))


def test_exp_general_nan_payloads():
    bits = np.array([0x7fc001ff, 0xffc00155, 0x7f800001, 0xff8000ff],
                    dtype=np.uint32)
    x = torch.from_numpy(bits.view(np.float32))
    assert torch.isnan(tcjit.compile(lambda x: torch.exp(x))(x)).all()


def _rows_with_zero_max(values, width=512):
    """values <= 0 laid out in rows that each also hold a 0, so that
    x - max(x) is x itself."""
    pad = (-len(values)) % (width - 1)
    v = torch.cat([values, torch.full((pad,), -1.0)]).view(-1, width - 1)
    return torch.cat([v, torch.zeros(v.shape[0], 1)], 1)


def test_exp_minus_max_ulp():
    f = tcjit.compile(lambda x: torch.exp(x - x.amax(-1, keepdim=True)))
    neg = torch.cat([_float_range(-110.0, -1e-30, 1021),
                     torch.tensor([-0.0, -float("inf"), -1e30, -3.4e38,
                                   -87.33655, -87.33654, -103.97, -103.973,
                                   -104.0, -104.5, -1e-40])])
    x = _rows_with_zero_max(neg)
    err = _ulp_error(f(x), x)
    assert err.max().item() < 1.5, x.flatten()[err.argmax()].item()


@pytest.mark.parametrize("where", [0, 7, 300, 511])
def test_exp_minus_max_nan_and_inf_rows(where):
    f = lambda x: torch.exp(x - x.amax(-1, keepdim=True))
    x = torch.randn(6, 512) * 40
    x[0, where] = float("nan")
    x[1, where] = float("inf")
    x[2, where] = -float("inf")
    x[3] = -float("inf")
    x[4, where] = -float("nan")
    got, want = tcjit.compile(f)(x), f(x)
    torch.testing.assert_close(got, want, equal_nan=True)


@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_minmax_reductions_nan(op, dtype):
    f = getattr(torch, op)
    g = lambda x: f(x, -1)
    x = torch.randn(9, 1000, dtype=dtype)
    x[0, 3] = float("nan")
    x[1, 999] = -float("nan")
    x[2, 500] = float("inf")
    x[3, 0] = -float("inf")
    x[4] = float("inf")
    x[5, 17] = float("nan")
    x[5, 18] = float("inf")
    x[6, :] = -float("inf") if op == "amax" else float("inf")
    got, want = tcjit.compile(g)(x), g(x)
    torch.testing.assert_close(got, want, equal_nan=True)
    # rows too short for the vector loop
    y = x[:, :13].contiguous()
    torch.testing.assert_close(tcjit.compile(g)(y), g(y), equal_nan=True)
