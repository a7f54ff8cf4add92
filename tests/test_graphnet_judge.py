"""The GraphNet sweep's judge (tests/sweeps/graphnet.py): a difference
from eager beyond the tolerance is a wrong answer only if it is more than
rounding, judged by a float64 run, or, where the graph has fixed
low-precision casts and no float64 run, by how far eager moves when its
inputs move by one rounding unit."""
import torch

from tests.sweeps import graphnet as G


class Deep(torch.nn.Module):
    """A bfloat16 residual stack whose bias is cast to bfloat16 in the
    graph (as bloomz's alibi): model.double() cannot run it."""

    def forward(self, x, w):
        for _ in range(24):
            h = torch.baddbmm(torch.zeros(1, 1, 1).to(torch.bfloat16),
                              x, w)
            x = torch.nn.functional.layer_norm(x + torch.tanh(h), (64,))
        return (x,)


def _case():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 16, 64, generator=g).to(torch.bfloat16)
    w = (torch.randn(1, 64, 64, generator=g) / 8).to(torch.bfloat16)
    model = Deep()
    with torch.no_grad():
        want = model(x=x, w=w)
    return model, {"x": x, "w": w}, want


def test_no_float64_run_rounding_is_not_wrong():
    model, kw, want = _case()
    # tcjit's kind of difference: the same program, its input rounded
    # the other way (one bfloat16 ulp, alternating signs)
    sign = torch.arange(kw["x"].numel()).reshape(kw["x"].shape) % 2 * 2 - 1
    x = (kw["x"].float() * (1 + 2 ** -7 * sign)).to(torch.bfloat16)
    with torch.no_grad():
        got = model(x=x, w=kw["w"])
    diff = G._difference(got, want)
    assert diff and "max error" in diff     # beyond bfloat16's tolerance
    assert G._judge_by_float64(model, kw, got, want, diff) is None


def test_no_float64_run_wrong_value_stands():
    model, kw, want = _case()
    got = (want[0].clone(),)
    got[0][0, 3, 5] += 4
    diff = G._difference(got, want)
    assert diff and "max error" in diff
    judged = G._judge_by_float64(model, kw, got, want, diff)
    assert judged is not None and "no float64 run" in judged
