"""Shared fixtures and helpers for the tcjit pytest suite.

Every compiled result is compared against eager PyTorch with ``check_same``:
values (within tolerance.py's bound; exact for integer/bool dtypes), dtype,
shape, type of containers, Python constants, and (unless told otherwise)
strides.
"""
import atexit
import logging
import os
import shutil
import tempfile

# A fresh on-disk kernel cache for the whole session (and the subprocesses
# tests start, which inherit it): the suite exercises the cache but never
# reads or fills ~/.cache/tcjit.  Set before tcjit is imported.  Under
# pytest-xdist every worker is a process of its own that imports this file,
# so each has its own cache (named after it: gw0, gw1, ...); the
# controller's (which it inherits in os.environ) is replaced.  Removed at
# pytest_unconfigure, which a worker runs before it exits (atexit alone
# left a worker's behind: execnet ends worker processes without it).
_CACHE_ROOT = tempfile.mkdtemp(
    prefix="tcjit-test-cache-%s-" % os.environ.get("PYTEST_XDIST_WORKER", "main"))
os.environ["TCJIT_CACHE_DIR"] = _CACHE_ROOT
atexit.register(shutil.rmtree, _CACHE_ROOT, True)


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE_ROOT, True)

import pytest
import torch

import tcjit
import tolerance


_CONFIG_KEYS = ("recompile_limit", "num_threads", "parallel_threshold",
                "cudagraphs", "max_autotune", "freezing", "template",
                "cache", "cache_size_mb", "compile_workers",
                "emulate_precision_casts")


@pytest.fixture(autouse=True)
def _tcjit_isolation():
    """Each test starts and ends with no compiled code, no logs, tcjit off
    and the default config, so tests do not depend on each other."""
    saved = {k: getattr(tcjit.config, k) for k in _CONFIG_KEYS}
    tcjit.disable()
    tcjit.reset()
    tcjit.set_logs("")
    try:
        yield
    finally:
        tcjit.disable()
        tcjit.reset()
        tcjit.set_logs("")
        for k, v in saved.items():
            setattr(tcjit.config, k, v)


@pytest.fixture
def tcjit_logs(caplog):
    """``tcjit_logs("recompiles")`` turns channels on and returns caplog."""
    def enable(spec):
        tcjit.set_logs(spec)
        caplog.set_level(logging.INFO, logger="tcjit")
        return caplog
    return enable


def log_messages(caplog, channel):
    """Messages of one channel (logger ``tcjit.<channel>``)."""
    return [r.getMessage() for r in caplog.records
            if r.name == f"tcjit.{channel}"]


def counters():
    return dict(tcjit.counters())


def check_same(actual, expected, *, strides=True, path="out"):
    """Compare a compiled result with eager's, recursively."""
    if isinstance(expected, torch.Tensor):
        assert type(actual) is type(expected), \
            f"{path}: {type(actual).__name__} != eager {type(expected).__name__}"
        assert actual.dtype == expected.dtype, \
            f"{path}: dtype {actual.dtype} != eager {expected.dtype}"
        assert actual.shape == expected.shape, \
            f"{path}: shape {tuple(actual.shape)} != eager {tuple(expected.shape)}"
        assert actual.device == expected.device, f"{path}: device"
        assert actual.requires_grad == expected.requires_grad, \
            f"{path}: requires_grad {actual.requires_grad} != eager"
        if strides and expected.numel() > 0:
            assert actual.stride() == expected.stride(), \
                f"{path}: strides {actual.stride()} != eager {expected.stride()}"
        tolerance.assert_close(actual.detach(), expected.detach(),
                               msg=lambda m: f"{path}: {m}")
    elif isinstance(expected, (tuple, list)):
        assert type(actual) is type(expected), \
            f"{path}: container {type(actual).__name__} != eager {type(expected).__name__}"
        assert len(actual) == len(expected), f"{path}: length"
        for i, (a, e) in enumerate(zip(actual, expected)):
            check_same(a, e, strides=strides, path=f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert type(actual) is type(expected) and actual.keys() == expected.keys()
        for k in expected:
            check_same(actual[k], expected[k], strides=strides, path=f"{path}[{k!r}]")
    else:
        assert type(actual) is type(expected), \
            f"{path}: {type(actual).__name__} != eager {type(expected).__name__}"
        if isinstance(expected, float) and expected != expected:
            assert actual != actual
        else:
            assert actual == expected, f"{path}: {actual!r} != eager {expected!r}"


def clone_args(args):
    return [a.clone() if isinstance(a, torch.Tensor) else a for a in args]


def run_both(fn, *args, strides=True, backend="auto", calls=2,
             expect_compiled=False):
    """Run fn eagerly and compiled (``calls`` times: the first call compiles,
    later ones run the cached code); compare each result with eager's and
    check that the inputs were not modified.  If eager raises, the compiled
    function must raise exactly the same exception type.  With
    expect_compiled, a call eager accepts must have run compiled code, not an
    eager fallback (so the comparison tested tcjit's code, not eager's).
    Returns the compiled function."""
    compiled = tcjit.compile(fn, backend=backend)
    saved = clone_args(args)
    try:
        expected = fn(*args)
    except Exception as e:  # noqa: BLE001 - any eager error must be mirrored
        for _ in range(calls):
            with pytest.raises(Exception) as info:
                compiled(*args)
            assert type(info.value) is type(e), (
                f"eager raised {type(e).__name__}: {e}; tcjit raised "
                f"{type(info.value).__name__}: {info.value}")
        return compiled
    for i in range(calls):
        actual = compiled(*args)
        check_same(actual, expected, strides=strides, path=f"call{i}")
    if expect_compiled:
        # (a function that returns an input unchanged may need no graph)
        # (not frames_skipped: a tensor-free frame that runs meanwhile is
        # skipped by design, e.g. filelock's audit hook _audit_fork_safety,
        # installed once huggingface_hub is imported, ran inside a compiled
        # call on 3.12 and 3.13)
        c = tcjit.counters()
        assert (c["eager_fallbacks"] == 0
                and c["cache_misses"] >= 1 and c["cache_hits"] >= calls - 1), \
            f"expected compiled code to run, got counters {c}"
    for a, s in zip(args, saved):
        if isinstance(a, torch.Tensor):
            torch.testing.assert_close(a, s, rtol=0, atol=0, equal_nan=True,
                                       msg="an input was modified")
    return compiled


def child_jobs(most=4):
    """Worker processes a test may start (the fuzz slice, the OpInfo
    sweep): the cores left to this pytest process, at most `most`.  Under
    pytest-xdist each of N workers gets cpu_count / N (at least 1):
    min(4, cpus) each put 2 workers' 4 busy children on 2 cores."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    return max(1, min(most, (os.cpu_count() or 1) // max(workers, 1)))


def check_against_float64(fn, args):
    """fn compiled vs eager: dtype, shape, strides, and values -- exact for
    integers and indices; for floats, the compiled error against the
    float64 program at most twice eager's plus a few roundings (a sum of
    4096 terms rounds differently in another order, and neither order is
    eager's contract; tcjit keeps a fused chain in float32 where eager
    rounds each op to float16, docs/ops.md).  The graph must compile with
    no eager fallback."""
    got = tcjit.compile(fn)(*args)
    exp = fn(*args)
    ref = fn(*(a.double() for a in args)) if args[0].is_floating_point() else exp
    got, exp, ref = (r if isinstance(r, tuple) else (r,) for r in (got, exp, ref))
    assert tcjit.counters()["graphs"] >= 1 and tcjit.counters()["eager_fallbacks"] == 0
    for g, e, r in zip(got, exp, ref):
        assert (g.dtype, g.shape, g.stride()) == (e.dtype, e.shape, e.stride())
        if not e.is_floating_point():
            assert torch.equal(g, e)
            continue
        err_g = (g.double() - r).abs().max().item()
        err_e = (e.double() - r).abs().max().item()
        eps = 16 * torch.finfo(e.dtype).eps * max(r.abs().max().item(), 1.0)
        assert err_g <= 2 * err_e + eps, (err_g, err_e, eps)
