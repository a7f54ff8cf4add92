"""Online softmax (src/graph/kir_online.c): a max pass and a later pass
that only sums exp(x - max) become one pass with a SOFTMAX accumulator
(running max, rescaled sum).  The GPU does it for rows read from memory
twice (looped rows); the CPU only in max-autotune's candidate variant 4,
which these tests force through the autotune table.

The rows have the values where the one-pass and two-pass forms could
part: +inf (once, twice), all -inf, -inf before any finite value, NaN, the
lowest finite float, all equal, huge spreads.  Each result (and the
cross-entropy's gradient) must equal eager's, NaN where eager's is; the
counter says the rewrite happened, so a pattern that stops matching fails
here instead of silently testing the two-pass kernels."""
import glob
import os
import re

import pytest
import torch
import torch.nn.functional as F

import tcjit
from test_cuda import _ptxas, assert_ptxas_accepts, dumped_ptx

HAS_CUDA = torch.cuda.is_available()
INF, NAN = float("inf"), float("nan")

FNS = {
    "softmax": lambda x: torch.softmax(x, -1),
    "log_softmax": lambda x: torch.log_softmax(x, -1),
    "logsumexp": lambda x: torch.logsumexp(x, -1),
    "softmax_dim0": lambda x: torch.softmax(x.t(), 0),
    "softmax_bf16": lambda x: torch.softmax(x.to(torch.bfloat16), -1),
}


def _rows(n, points, dev="cpu", seed=0):
    """n rows (n >= 10): random rows, then one of each edge case."""
    g = torch.Generator().manual_seed(seed + points)
    x = torch.randn(n, points, generator=g) * 4
    x[1, points // 2] = INF
    x[2, 0] = INF
    x[2, points - 1] = INF
    x[3] = -INF
    x[4, : max(1, points - 1)] = -INF
    x[5, points // 3] = NAN
    x[6, 0] = -INF
    x[7] = -3.4028234663852886e38        # lowest finite float32
    x[8] = 2.5
    x[9, ::2] = 80.0                     # exp(80 - max) spans the range
    x[9, 1::2] = -80.0
    return x.to(dev)


def _close(actual, expected):
    torch.testing.assert_close(actual.float(), expected.float(), rtol=2e-5,
                               atol=2e-6, equal_nan=True)


def _force_cpu_online(cache_dir, fn, args):
    """Compile fn under max-autotune, rewrite its table entries to variant
    4 (online softmax), compile again from the table: returns that
    result."""
    tcjit.reset()
    with tcjit.config.patch(max_autotune=True):
        tcjit.compile(fn)(*args)
    files = glob.glob(os.path.join(cache_dir, "autotune", "*"))
    assert files, "max-autotune wrote no table entry"
    for f in files:
        with open(f) as fh:
            text = fh.read()
        with open(f, "w") as fh:
            fh.write(re.sub(r"^variant \d+", "variant 4", text))
    tcjit.reset()
    # the kernels come from the disk cache (the tuner compiled variant 4)
    # or forked compile workers (machines with 4 cores or more): counted
    # all the same
    with tcjit.config.patch(max_autotune=True, compile_workers=2):
        out = tcjit.compile(fn)(*args)
    c = tcjit.counters()
    assert c["autotune_hits"] >= 1 and c["autotune_runs"] == 0, c
    return out


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TCJIT_CACHE_DIR", str(d))
    return str(d)


@pytest.mark.parametrize("points", [2, 300, 3000])
@pytest.mark.parametrize("name", list(FNS))
def test_cpu_online_variant(cache_dir, name, points):
    fn = FNS[name]
    x = _rows(12, points)
    if name == "softmax_dim0":
        x = x.t().contiguous().t()      # the rows are columns in memory
    with torch.no_grad():
        out = _force_cpu_online(cache_dir, fn, (x,))
        ref = fn(x)
    if name != "softmax_dim0":      # the CPU sums columns with torch.sum
        assert tcjit.counters()["online_softmax_kernels"] >= 1
    assert out.dtype == ref.dtype and out.shape == ref.shape
    _close(out, ref)


def _cross_entropy(x, t):
    return F.cross_entropy(x, t, reduction="none")


@pytest.mark.parametrize("points", [3, 3000])
def test_cpu_online_cross_entropy_grad(cache_dir, points):
    """The training graph's forward is logsumexp's guarded form
    (where(|max| == inf, 0, max)); its loss and gradient against eager,
    row by row (reduction="none": a NaN row does not hide the others)."""
    x = _rows(12, points)
    t = torch.randint(0, points, (12,), generator=torch.Generator()
                      .manual_seed(1))
    xc = x.clone().requires_grad_()
    xe = x.clone().requires_grad_()
    loss = _force_cpu_online(cache_dir, _cross_entropy, (xc, t))
    assert tcjit.counters()["online_softmax_kernels"] >= 1
    le = _cross_entropy(xe, t)
    xc.grad = None
    loss.sum().backward()
    le.sum().backward()
    _close(loss, le)
    _close(xc.grad, xe.grad)


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_ptx_online_assembles(tmp_path):
    """Looped rows (50304 points: more than 16 a thread) go online in the
    PTX of CPU graphs too (ptx_dump_dir); every module assembles."""
    tcjit._C.set_config(ptx_dump_dir=str(tmp_path))
    try:
        tcjit.reset()
        x = _rows(16, 50304)
        with torch.no_grad():
            for fn in FNS.values():
                tcjit.compile(fn)(x)
        xg = x.clone().requires_grad_()
        tcjit.compile(_cross_entropy)(xg, torch.zeros(16, dtype=torch.long))
        online = tcjit.counters()["online_softmax_kernels"]
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    assert online >= len(FNS)
    files = dumped_ptx(str(tmp_path), len(FNS))
    assert_ptxas_accepts(files)


def test_persistent_rows_stay_two_pass(tmp_path):
    """A row that fits in registers (persistent) is not read twice: no
    rewrite there, nor on the CPU by default."""
    tcjit._C.set_config(ptx_dump_dir=str(tmp_path))
    try:
        tcjit.reset()
        with torch.no_grad():
            tcjit.compile(FNS["softmax"])(torch.randn(64, 1024))
        assert tcjit.counters()["online_softmax_kernels"] == 0
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    tcjit.reset()
    with torch.no_grad():
        tcjit.compile(FNS["softmax"])(torch.randn(16, 50304))
    assert tcjit.counters()["online_softmax_kernels"] == 0


# 5000 points: persistent rows (no rewrite); 50304: looped
@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("points", [5000, 50304])
@pytest.mark.parametrize("name", list(FNS))
def test_cuda_online(name, points):
    tcjit.reset()
    fn = FNS[name]
    x = _rows(40, points, "cuda")
    if name == "softmax_dim0":
        x = x.t().contiguous().t()
    with torch.no_grad():
        out = tcjit.compile(fn)(x)
        ref = fn(x)
    online = tcjit.counters()["online_softmax_kernels"]
    # column rows get column tiles instead
    assert online == (points > 5000 and name != "softmax_dim0")
    _close(out, ref)


@pytest.mark.skipif(not HAS_CUDA, reason="no CUDA device")
@pytest.mark.parametrize("points", [5000, 50304])
def test_cuda_online_cross_entropy_grad(points):
    tcjit.reset()
    x = _rows(40, points, "cuda")
    t = torch.randint(0, points, (40,), device="cuda")
    xc = x.clone().requires_grad_()
    xe = x.clone().requires_grad_()
    loss = tcjit.compile(_cross_entropy)(xc, t)
    assert tcjit.counters()["online_softmax_kernels"] == (points > 5000)
    le = _cross_entropy(xe, t)
    loss.sum().backward()
    le.sum().backward()
    _close(loss, le)
    _close(xc.grad, xe.grad)
