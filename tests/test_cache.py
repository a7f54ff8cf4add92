"""The on-disk kernel cache (issue 15, docs/cache.md): reuse across
processes, verified entries, concurrent writers, guard-divergent lookups,
parameters not baked into cached code, artifacts, eviction, compile
failures.  Cross-process scenarios run fresh interpreters (subprocess) on a
cache directory of their own."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import tcjit
from conftest import check_same, counters, log_messages

_PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "python")

# Prepended to every subprocess script: tcjit, torch, and report(values)
# printing the counters and results as the last line (JSON).
_PRELUDE = """
import json, sys, warnings
import torch, tcjit
warnings.simplefilter("always")
def report(**values):
    c = tcjit.counters()
    out = {k: c[k] for k in c if k.startswith("kernel_cache_")}
    out["kernels_compiled"] = c["kernels_compiled"]
    out.update({k: v.tolist() if isinstance(v, torch.Tensor) else v
                for k, v in values.items()})
    print(json.dumps(out))
"""


def run_py(code, cache_root, env=None, check=True):
    """Runs code in a fresh interpreter whose TCJIT_CACHE_DIR is
    cache_root; returns (the JSON of its last stdout line, stderr)."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.abspath(_PYTHON_DIR) + os.pathsep + e.get(
        "PYTHONPATH", "")
    e["TCJIT_CACHE_DIR"] = str(cache_root)
    e.pop("TCJIT_LOGS", None)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c",
                        _PRELUDE + textwrap.dedent(code)],
                       capture_output=True, text=True, env=e, timeout=300)
    if check:
        assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    return (json.loads(lines[-1]) if lines else None), p.stderr


def entries(cache_root):
    d = os.path.join(str(cache_root), "kernels")
    return sorted(n for n in os.listdir(d)) if os.path.isdir(d) else []


_POINTWISE_AND_REDUCTION = """
@tcjit.compile
def f(x, y):
    return (x.sin() * y + 1).relu().sum(-1)
torch.manual_seed(0)
x, y = torch.randn(32, 64), torch.randn(32, 64)
out = f(x, y)
torch.testing.assert_close(out, (x.sin() * y + 1).relu().sum(-1))
report(out=out)
"""


def test_cross_process_reuse(tmp_path):
    first, _ = run_py(_POINTWISE_AND_REDUCTION, tmp_path)
    assert first["kernel_cache_misses"] >= 1
    assert first["kernel_cache_hits"] == 0
    assert first["kernel_cache_writes"] >= 1
    names = entries(tmp_path)
    assert names and all(n.startswith("cpu-") for n in names)
    second, _ = run_py(_POINTWISE_AND_REDUCTION, tmp_path)
    assert second["kernel_cache_misses"] == 0
    assert second["kernel_cache_hits"] == first["kernel_cache_misses"]
    assert second["kernel_cache_writes"] == 0
    assert second["out"] == first["out"]       # the same machine code
    assert entries(tmp_path) == names


def test_many_kernels_in_one_process_stay_distinct(tmp_path):
    """Every loaded entry is its own shared object: a later load must not
    return an earlier one (dlopen matches already loaded names)."""
    code = """
    fns = [tcjit.compile(eval(f"lambda x: x * {k} + {k}")) for k in range(12)]
    x = torch.randn(100)
    for k, fn in enumerate(fns):
        torch.testing.assert_close(fn(x), x * k + k)
    report()
    """
    cold, _ = run_py(code, tmp_path)
    assert cold["kernel_cache_misses"] == 12
    warm, _ = run_py(code, tmp_path)
    assert warm["kernel_cache_hits"] == 12
    assert warm["kernel_cache_misses"] == 0


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_corrupted_entry_is_recompiled_with_a_warning(tmp_path, damage):
    run_py(_POINTWISE_AND_REDUCTION, tmp_path)
    names = entries(tmp_path)
    path = os.path.join(str(tmp_path), "kernels", names[0])
    data = bytearray(open(path, "rb").read())
    if damage == "truncate":
        data = data[:len(data) // 2]
    elif damage == "flip":
        data[-100] ^= 0x40
    else:
        data = bytearray(b"not a cache entry")
    open(path, "wb").write(bytes(data))
    res, err = run_py(_POINTWISE_AND_REDUCTION, tmp_path)
    assert res["kernel_cache_corrupt"] == 1
    assert res["kernel_cache_misses"] >= 1
    assert err.count("is invalid") == 1, err
    # rewritten whole: the next process loads it
    again, err = run_py(_POINTWISE_AND_REDUCTION, tmp_path)
    assert again["kernel_cache_misses"] == 0
    assert again["kernel_cache_corrupt"] == 0
    assert "invalid" not in err
    assert again["out"] == res["out"]


def test_two_concurrent_writers(tmp_path):
    code = """
    import time
    fns = [tcjit.compile(eval(f"lambda x: (x - {k}).abs().sum()"))
           for k in range(8)]
    x = torch.randn(4096)
    for k, fn in enumerate(fns):
        torch.testing.assert_close(fn(x), (x - k).abs().sum())
    report()
    """
    e = dict(os.environ)
    e["PYTHONPATH"] = os.path.abspath(_PYTHON_DIR)
    e["TCJIT_CACHE_DIR"] = str(tmp_path)
    script = _PRELUDE + textwrap.dedent(code)
    procs = [subprocess.Popen([sys.executable, "-c", script], env=e,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "invalid" not in err
    names = entries(tmp_path)
    assert len(names) == 8
    assert not [n for n in names if n.startswith(".")]  # no temporaries
    warm, err = run_py(code, tmp_path)
    assert warm["kernel_cache_misses"] == 0
    assert warm["kernel_cache_hits"] == 8


def test_guard_divergent_lookups(tmp_path):
    """One function compiled under two guard sets (dtype, shape): both
    entries cached, each call gets its own code."""
    code = """
    @tcjit.compile
    def f(x):
        return (x * 3).exp().mean(0)
    torch.manual_seed(0)
    a = torch.randn(16, 8)
    b = torch.randn(5, 3, dtype=torch.float64)
    ra, rb = f(a), f(b)
    torch.testing.assert_close(ra, (a * 3).exp().mean(0))
    torch.testing.assert_close(rb, (b * 3).exp().mean(0))
    assert rb.dtype == torch.float64
    report(ra=ra, rb=rb)
    """
    cold, _ = run_py(code, tmp_path)
    assert cold["kernel_cache_misses"] >= 2
    assert len(entries(tmp_path)) >= 2
    warm, _ = run_py(code, tmp_path)
    assert warm["kernel_cache_misses"] == 0
    assert warm["kernel_cache_hits"] == cold["kernel_cache_misses"]
    assert warm["ra"] == cold["ra"] and warm["rb"] == cold["rb"]
    # the other order: the right entry is picked by its key, not by order
    code_rev = code.replace("ra, rb = f(a), f(b)", "rb = f(b); ra = f(a)")
    rev, _ = run_py(code_rev, tmp_path)
    assert rev["kernel_cache_misses"] == 0
    assert rev["ra"] == cold["ra"] and rev["rb"] == cold["rb"]


_MODULE = """
class M(torch.nn.Module):
    def __init__(self, seed, scale):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.w = torch.nn.Parameter(torch.randn(64, generator=g))
        self.b = torch.nn.Parameter(torch.randn(64, generator=g))
        self.scale = scale
    def forward(self, x):
        return torch.tanh(x * self.w + self.b) * self.scale
import os
m = M(int(os.environ["SEED"]), float(os.environ["SCALE"]))
x = torch.randn(8, 64, generator=torch.Generator().manual_seed(7))
with torch.no_grad():
    out = tcjit.compile(m)(x)
    ref = m(x)
torch.testing.assert_close(out, ref)
report(out=out)
"""


def test_parameters_changed_between_processes(tmp_path):
    """Parameters are graph inputs, never constants of the cached code: a
    process with other parameter values hits the same entries and computes
    with its own values.  A Python float attribute is specialized into the
    kernel, hence part of its key."""
    a, _ = run_py(_MODULE, tmp_path, env={"SEED": "0", "SCALE": "2.0"})
    assert a["kernel_cache_misses"] >= 1
    b, _ = run_py(_MODULE, tmp_path, env={"SEED": "1", "SCALE": "2.0"})
    assert b["kernel_cache_misses"] == 0 and b["kernel_cache_hits"] >= 1
    assert b["out"] != a["out"]        # (checked against eager inside)
    c, _ = run_py(_MODULE, tmp_path, env={"SEED": "1", "SCALE": "3.0"})
    assert c["kernel_cache_misses"] >= 1     # another constant: new code
    torch.testing.assert_close(torch.tensor(c["out"]),
                               torch.tensor(b["out"]) * 1.5)


def test_save_clear_load(tmp_path):
    blob = tmp_path / "artifacts.bin"
    save = _POINTWISE_AND_REDUCTION + f"""
open({str(blob)!r}, "wb").write(tcjit.save_cache_artifacts())
"""
    first, _ = run_py(save, tmp_path / "a")
    assert first["kernel_cache_misses"] >= 1
    assert blob.stat().st_size > 0
    # an empty cache directory elsewhere: the artifacts alone make it warm
    load = f"""
n = tcjit.load_cache_artifacts(open({str(blob)!r}, "rb").read())
assert n >= 1, n
""" + _POINTWISE_AND_REDUCTION
    second, _ = run_py(load, tmp_path / "b")
    assert second["kernel_cache_misses"] == 0
    assert second["kernel_cache_hits"] == first["kernel_cache_misses"]
    assert second["out"] == first["out"]
    # clear_cache empties it again
    cleared, _ = run_py("tcjit.clear_cache()\n" + _POINTWISE_AND_REDUCTION,
                        tmp_path / "b")
    assert cleared["kernel_cache_hits"] == 0
    assert cleared["kernel_cache_misses"] >= 1


@pytest.fixture
def own_cache(tmp_path):
    """This process's kernel cache in tmp_path for one test."""
    old = tcjit._cache.cache_dir()
    tcjit._cache.set_cache_dir(str(tmp_path / "kernels"))
    try:
        yield tmp_path / "kernels"
    finally:
        tcjit._cache.set_cache_dir(old)


def test_in_process_counters_and_log_channel(own_cache, tcjit_logs):
    logs = tcjit_logs("cache")

    def f(x):
        return torch.sigmoid(x) * 4 - 1
    x = torch.randn(333)
    check_same(tcjit.compile(f)(x), f(x))
    c = counters()
    assert c["kernel_cache_misses"] == 1 and c["kernel_cache_hits"] == 0
    assert c["kernel_cache_writes"] == 1
    tcjit.reset()        # forgets compiled entries, not the disk
    check_same(tcjit.compile(f)(x), f(x))
    c = counters()
    assert c["kernel_cache_hits"] == 1 and c["kernel_cache_misses"] == 0
    assert c["kernels_compiled"] == 1    # supplied by the cache
    msgs = log_messages(logs, "cache")
    assert any(m.startswith("miss cpu-") for m in msgs), msgs
    assert any(m.startswith("wrote cpu-") for m in msgs), msgs
    assert any(m.startswith("hit cpu-") for m in msgs), msgs


def test_kernels_shared_between_graphs_until_reset(own_cache):
    # another graph with the same kernel (each layer's backward segment of
    # a model: docs/training.md) takes the compiled one
    def f(x):
        return (x.sin() * 2).sum(1)

    def g(y):
        return (y.sin() * 2).sum(1)
    x = torch.randn(8, 16)
    check_same(tcjit.compile(f)(x), f(x))
    c = counters()
    assert c["kernels_compiled"] == 1 and c["kernel_cache_misses"] == 1
    check_same(tcjit.compile(g)(x), g(x))
    c = counters()
    assert c["kernels_compiled"] == 1 and c["kernel_cache_misses"] == 1
    assert c["graphs"] == 2
    tcjit.reset()        # forgets them: the disk cache supplies it again
    check_same(tcjit.compile(g)(x * 2), g(x * 2))
    c = counters()
    assert c["kernels_compiled"] == 1 and c["kernel_cache_hits"] == 1


def test_config_cache_off(own_cache):
    tcjit.config.cache = 0
    x = torch.randn(50)
    check_same(tcjit.compile(lambda x: x.cos() / 3)(x), x.cos() / 3)
    c = counters()
    assert c["kernel_cache_hits"] == 0 and c["kernel_cache_misses"] == 0
    assert not own_cache.exists() or not os.listdir(own_cache)
    with pytest.raises(ValueError):
        tcjit.config.cache = 2


def test_size_bound_evicts_least_recently_used(own_cache):
    own_cache.mkdir(parents=True)
    old = own_cache / ("cpu-" + "0" * 32)
    old.write_bytes(b"x" * (2 << 20))
    os.utime(old, (1, 1))
    tcjit.config.cache_size_mb = 1
    x = torch.randn(50)
    check_same(tcjit.compile(lambda x: x.abs() + 5)(x), x.abs() + 5)
    assert not old.exists()
    assert counters()["kernel_cache_evicted"] == 1
    assert len(os.listdir(own_cache)) == 1


def test_injected_compile_failure(own_cache, monkeypatch, tcjit_logs):
    """A kernel that fails to compile is named with its ops; its source is
    on the output_code channel; the process keeps working."""
    logs = tcjit_logs("output_code")
    monkeypatch.setenv("TCJIT_TEST_COMPILE_FAILURE", "sin")

    def f(x):
        return x.sin() + 1

    def g(x):
        return x.cos() * 3
    x = torch.randn(10)
    with pytest.warns(RuntimeWarning) as w:
        check_same(tcjit.compile(f)(x), f(x))     # eager fallback
    msg = "\n".join(str(r.message) for r in w)
    assert "kernel tc_k0" in msg and "sin(" in msg and "failed to compile" \
        in msg, msg
    assert any("failed to compile" in m and "sin(" in m
               for m in log_messages(logs, "output_code"))
    assert not own_cache.exists() or not os.listdir(own_cache)
    monkeypatch.delenv("TCJIT_TEST_COMPILE_FAILURE")
    check_same(tcjit.compile(g)(x), g(x))
    for _ in range(3):
        check_same(tcjit.compile(f)(x), f(x))


def test_backend_failure_is_a_graph_break(own_cache, monkeypatch,
                                          tcjit_logs):
    """A frame that runs eagerly because its kernels failed to compile is
    no silent fallback: explain() and TCJIT_LOGS=graph_breaks name it."""
    logs = tcjit_logs("graph_breaks")
    monkeypatch.setenv("TCJIT_TEST_COMPILE_FAILURE", "sin")

    def f(x):
        return x.sin() * 2

    x = torch.randn(10)
    with pytest.warns(RuntimeWarning):
        ex = tcjit.explain(f)(x)
    assert [b.reason.startswith("tcjit backend failed")
            for b in ex.break_reasons] == [True], ex.break_reasons
    assert any("tcjit backend failed" in m
               for m in log_messages(logs, "graph_breaks"))
    check_same(ex.result, f(x))


def test_load_rejects_bad_artifacts(own_cache):
    import struct
    with pytest.raises(ValueError, match="bad magic"):
        tcjit.load_cache_artifacts(b"nonsense")
    x = torch.randn(20)
    check_same(tcjit.compile(lambda x: x * 9)(x), x * 9)
    good = tcjit.save_cache_artifacts()
    with pytest.raises(ValueError, match="truncated"):
        tcjit.load_cache_artifacts(good[:-10])
    bad = (b"TCJITART" + struct.pack("<II", 1, 1)
           + struct.pack("<IQ", 4, 1) + b"../x" + b"z")
    with pytest.raises(ValueError, match="bad entry name"):
        tcjit.load_cache_artifacts(bad)
    assert tcjit.load_cache_artifacts(good) == 1


def _many_kernels(x, w):
    """20 kernels, 10 of each kind: more than one group (8 kernels) each."""
    outs = []
    for k in range(10):
        y = x[: k + 3] * (k + 1)
        outs.append(y.softmax(-1))
        outs.append(y.amax(0))      # (a CPU sum(0) is torch's: colsum.c)
        outs.append((y + w).relu())
    return outs


@pytest.mark.parametrize("threads", ["0", "1"])
def test_parallel_compile(own_cache, monkeypatch, threads):
    """Kernels of one graph compiled by worker processes (or, measured
    against them, threads): the same results, stored and loaded again."""
    monkeypatch.setenv("TCJIT_COMPILE_THREADS", threads)
    tcjit.config.compile_workers = 3
    x, w = torch.randn(16, 40), torch.randn(40)
    check_same(tcjit.compile(_many_kernels)(x, w), _many_kernels(x, w))
    c = counters()
    assert c["kernel_cache_misses"] >= 18 and c["kernel_cache_hits"] == 0
    assert c["kernel_cache_writes"] >= 3        # groups of 8 kernels
    tcjit.reset()
    tcjit.config.compile_workers = 1     # entries do not depend on it
    check_same(tcjit.compile(_many_kernels)(x, w), _many_kernels(x, w))
    assert counters()["kernel_cache_misses"] == 0


def test_parallel_compile_failure_in_worker(own_cache, monkeypatch):
    """A kernel failing in a worker process is named like one failing here;
    the next compiles work."""
    monkeypatch.setenv("TCJIT_TEST_COMPILE_FAILURE", "sum(")
    tcjit.config.compile_workers = 3
    x, w = torch.randn(16, 40), torch.randn(40)
    with pytest.warns(RuntimeWarning, match="failed to compile") as rec:
        check_same(tcjit.compile(_many_kernels)(x, w), _many_kernels(x, w))
    msg = "\n".join(str(r.message) for r in rec)
    assert "kernel tc_k" in msg, msg
    monkeypatch.delenv("TCJIT_TEST_COMPILE_FAILURE")
    tcjit.reset()
    check_same(tcjit.compile(_many_kernels)(x, w), _many_kernels(x, w))
    assert counters()["eager_fallbacks"] == 0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_cubin_cross_process(tmp_path):
    """The GPU path stores the cubin the driver links from the PTX; a new
    process loads it (no PTX JIT) and computes the same values."""
    code = """
    @tcjit.compile
    def f(x):
        return (x.sin() * 2 + 1).relu().sum(-1)
    torch.manual_seed(0)
    x = torch.randn(64, 1000, device="cuda")
    out = f(x)
    torch.testing.assert_close(out, (x.sin() * 2 + 1).relu().sum(-1))
    report(out=out.cpu())
    """
    cold, _ = run_py(code, tmp_path)
    assert cold["kernel_cache_misses"] >= 1
    assert any(n.startswith("cubin-") for n in entries(tmp_path))
    warm, _ = run_py(code, tmp_path)
    assert warm["kernel_cache_misses"] == 0 and warm["kernel_cache_hits"] >= 1
    assert warm["out"] == cold["out"]
