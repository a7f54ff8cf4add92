"""Differential fuzzing, a fixed slice: SLICE seeds of tests/fuzz's short
programs, each run eagerly and through tcjit.compile with both backends
(values, dtypes, shapes, strides, aliasing, mutated inputs, exceptions).

A failure class (signature) that tests/fuzz/known.py's KNOWN matches, or
whose first program minimizes to one KNOWN matches, is reported in one
warning and does not fail the test; any other fails it, with a minimized
standalone reproducer.  Longer runs: `make fuzz` (docs/dev.md).
"""
import warnings

import pytest
import torch

from conftest import child_jobs
from fuzz import check, known, runner

SLICE = range(0, 2000)
# the training path (tests/fuzz/grad.py): inputs requiring grad, gradients
GRAD_SLICE = range(0, 400)
PROFILE = "small"
BUDGET = 20               # seconds to minimize one failure class
MINIMIZE = 6              # classes minimized at most; the rest are listed


@pytest.mark.parametrize("backends,seeds", [(("auto", "eager"), SLICE),
                                             (("grad",), GRAD_SLICE)],
                         ids=["auto-eager", "grad"])
def test_fuzz_slice(backends, seeds):
    jobs = child_jobs()
    res = runner.fuzz(len(seeds), seeds.start, jobs, PROFILE, backends=backends)
    assert len(res.by_seed) == len(seeds)
    groups = res.groups()
    seen, new = {}, []
    for sig, g in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        k = known.known_as(sig)
        if k is None and len(new) < MINIMIZE:
            r = runner.reproduce(g[0][0], g[0][1], PROFILE, budget_s=BUDGET)
            k = known.known_as(r.get("signature", ""))
            if k is None:
                new.append((sig, g, r))
                continue
            sig = f"{sig} (minimized: {r['signature']})"
        elif k is None:
            new.append((sig, g, None))
            continue
        seen.setdefault(k, []).append((sig, g))
    if seen:
        warnings.warn("fuzz slice: known failures (tests/fuzz/known.py):\n" + "\n".join(
            f"  {known.KNOWN[k]}: {sum(len(g) for _, g in sgs)} programs, {len(sgs)} classes, "
            f"e.g. {sgs[0][0]} (seed {sgs[0][1][0][0]})" for k, sgs in seen.items()))
    stale = [k for k in known.KNOWN if k not in seen and k not in known.BY_DESIGN
             and k.startswith("grad:") == (backends == ("grad",))]
    if stale:
        warnings.warn("fuzz slice: KNOWN entries that no longer occur (remove them): "
                      + ", ".join(stale))
    if not new:
        return
    lines = [f"{len(new)} new failure classes in {len(seeds)} fuzz programs:"]
    for sig, g, r in new:
        seed, failure = g[0]
        lines.append(f"\n== {sig}: {len(g)} programs, seeds "
                     f"{', '.join(str(s) for s, _ in g[:8])}\n   {failure['message'][:300]}")
        if r is None:
            lines.append(f"   (python3 tests/fuzz --count 1 --seed {seed} --profile {PROFILE}"
                         f" --backends {','.join(backends)}"
                         f" --jobs 1  minimizes it)")
        else:
            lines.append(r.get("reproducer") or "minimizer failed: " + r["error"][-500:])
    raise AssertionError("\n".join(lines))


def test_oracle_eager_nan_bounds_nothing():
    # float32 layer_norm of a row with 1e30: eager NaN (its Welford
    # overflows), the float64 reference finite: tcjit's finite value is
    # accepted; where eager is finite, the usual bound still holds
    e = torch.tensor([float("nan"), 1.0])
    ref = (torch.tensor([-0.577, 1.0], dtype=torch.float64),
           torch.zeros(2, dtype=torch.float64))
    assert check.value_mismatch(torch.tensor([0.0, 1.0]), e, ref) is None
    assert check.value_mismatch(torch.tensor([0.0, 2.0]), e, ref) is not None
    assert check.value_mismatch(torch.tensor([float("inf"), 1.0]), e, ref) is not None



def test_oracle_nan_where_eager_is_noise():
    # fuzz seed 140076: F.normalize(F.layer_norm(x, (2, 2))) of a constant
    # float16 row, then a matmul: the reference 0, eager 0.35 / 0.78 (its
    # layer_norm's rounding noise scaled to a unit row), tcjit NaN (exact
    # zeros, 0 / 0 in normalize as eager's own zero row gives): accepted
    nan = float("nan")
    e = torch.tensor([0.3545, 0.7793], dtype=torch.float16)
    ref = (torch.zeros(2, dtype=torch.float64), torch.full((2,), 0.7, dtype=torch.float64))
    assert check.value_mismatch(torch.tensor([nan, nan], dtype=torch.float16), e, ref) is None
    # where eager is accurate a NaN is still wrong, and so is one where
    # eager's error is negligible next to the tensor's values
    e = torch.tensor([0.5, 1e-20, 1.0])
    ref = (torch.tensor([0.5, 0.0, 1.0], dtype=torch.float64), torch.zeros(3, dtype=torch.float64))
    assert check.value_mismatch(torch.tensor([nan, 1e-20, 1.0]), e, ref) is not None
    assert check.value_mismatch(torch.tensor([0.5, nan, 1.0]), e, ref) is not None
    assert check.value_mismatch(torch.tensor([0.5, 0.0, 1.0]), e, ref) is None
    # and a wrong finite value beyond eager's error and the spread
    assert check.value_mismatch(torch.tensor([0.7, 0.0, 1.0]), e, ref) is not None

def _eager_run(src):
    ns = {}
    exec(src, ns)
    prog = type("P", (), {"load": lambda self, float64=False: (ns["f"], ns["mk"]),
                          "func_source": lambda self: src})()
    return check.Eager(prog, ns["f"], ns["mk"], 0, "cpu")


def test_oracle_spread_of_amplified_ulps_and_precision_floor():
    # fuzz seed 21865: exp(exp(int64)) in float32: the inner exp one ulp
    # apart (tcjit's vs Sleef's) is 55 ulps after the outer one; the
    # reference perturbs each float32 op by an ulp (_Perturb), so that
    # spread is accepted, while an error far beyond it is not
    ev = _eager_run("import torch\n"
                    "def mk(v, d): return [torch.tensor([4, 3, 2])]\n"
                    "def f(a): return torch.exp(torch.exp(a))\n")
    e = ev.out
    ref = ev.ref()[0][0]
    assert ref[1] is not None and float(ref[1][0]) > 0
    one_ulp = torch.exp(torch.nextafter(torch.exp(torch.tensor([4.0, 3, 2])),
                                        torch.tensor(100.0)))
    assert check.value_mismatch(one_ulp, e, ref) is None
    assert check.value_mismatch(e * (1 + 1e-4), e, ref) is not None
    # fuzz seed 23640: a float64 result of a float32 layer_norm is compared
    # with float32's tolerance (Eager.floors), a float64 chain with float64's
    ev = _eager_run("import torch\n"
                    "def mk(v, d): return [torch.arange(5.0)]\n"
                    "def f(a): return (torch.nn.functional.layer_norm(a, (5,))"
                    ".double(), a.double().exp(), a[1:].double())\n")
    floors = ev.floors()[0]
    assert floors == [torch.float32, torch.float64, torch.float64]
    out = ev.out[0]
    assert check.value_mismatch(out * (1 + 3e-7), out, None, floors[0]) is None
    assert check.value_mismatch(out * (1 + 3e-7), out) is not None
