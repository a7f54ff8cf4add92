"""bench/bench.py checks every result against eager with the tests' own
bound (tolerance.py) before it times anything: a workload whose result is
within that bound is timed, not reported as an error."""
import json
import os
import subprocess
import sys

import torch

import tolerance

BENCH = os.path.join(os.path.dirname(__file__), "..", "bench", "bench.py")


def test_bench_first_row_is_checked_and_timed():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, BENCH, "--only", "pointwise f32 chain, 4M",
         "--no-inductor", "--budget", "0.01", "--json"],
        capture_output=True, text=True, env=env, timeout=300, check=True)
    (row,) = json.loads(out.stdout)["results"]
    assert "error" not in row["tcjit"], row["tcjit"]
    assert row["tcjit"]["per_call_s"] > 0


def test_tolerance_is_torch_testings_default():
    """A few float32 ulp pass, 1e-4 relative does not; integers are exact."""
    x = torch.linspace(1, 5, 1000)
    tolerance.assert_close(x * (1 + 4e-7), x)
    for bad in (x * (1 + 1e-4), x.int() + 1):
        try:
            tolerance.assert_close(bad, x if bad.is_floating_point() else x.int())
        except AssertionError:
            continue
        raise AssertionError("accepted a result outside the bound")
