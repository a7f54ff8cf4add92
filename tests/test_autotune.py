"""max-autotune (docs/autotune.md): candidate configurations timed at the
first compile, the winner kept in a table under $TCJIT_CACHE_DIR/autotune
that later compiles (and other processes) read instead of tuning again."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import tcjit
from conftest import check_same

PYTHON_DIR = os.path.join(os.path.dirname(__file__), "..", "python")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("TCJIT_CACHE_DIR", str(d))
    return d


def softmax(x):
    return torch.softmax(x, -1)


def layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


def pointwise(x):
    return (x.sin() + x.cos()).relu() * 2 + 1


def reductions(x):
    return x.sum(), x.amax(1), x.mean(0)


CASES = [
    (softmax, lambda: (torch.randn(256, 512),)),
    (layer_norm, lambda: (torch.randn(512, 256), torch.randn(256),
                          torch.randn(256))),
    (pointwise, lambda: (torch.randn(1 << 18),)),
    (reductions, lambda: (torch.randn(512, 1024),)),
]


@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_results_equal_eager(cache_dir, fn, make):
    args = make()
    with tcjit.config.patch(max_autotune=True):
        got = tcjit.compile(fn)(*args)
    check_same(got, fn(*args))
    c = tcjit.counters()
    assert c["autotune_runs"] == 1 and c["autotune_seconds"] > 0


def test_table_written_and_reused_in_process(cache_dir):
    x = torch.randn(128, 1000)
    with tcjit.config.patch(max_autotune=True):
        check_same(tcjit.compile(softmax)(x), softmax(x))
        files = os.listdir(cache_dir / "autotune")
        assert len(files) == 1 and files[0].startswith("cpu-")
        tcjit.reset()
        check_same(tcjit.compile(softmax)(x), softmax(x))
    c = tcjit.counters()
    assert c["autotune_runs"] == 0 and c["autotune_hits"] == 1


def test_off_by_default_no_table(cache_dir):
    assert tcjit.config.max_autotune == 0
    x = torch.randn(64, 64)
    check_same(tcjit.compile(softmax)(x), softmax(x))
    assert tcjit.counters()["autotune_runs"] == 0
    assert not (cache_dir / "autotune").exists()


def test_malformed_entry_tunes_again(cache_dir):
    x = torch.randn(64, 300)
    with tcjit.config.patch(max_autotune=True):
        tcjit.compile(softmax)(x)
        (name,) = os.listdir(cache_dir / "autotune")
        (cache_dir / "autotune" / name).write_text("garbage")
        tcjit.reset()
        check_same(tcjit.compile(softmax)(x), softmax(x))
    assert tcjit.counters()["autotune_runs"] == 1
    assert (cache_dir / "autotune" / name).read_text().startswith("variant")


SCRIPT = textwrap.dedent("""
    import json, torch, tcjit
    tcjit.config.max_autotune = True
    def f(x):
        return torch.softmax(x, -1) * 2
    x = torch.randn(300, 700)
    torch.testing.assert_close(tcjit.compile(f)(x), f(x))
    print(json.dumps(tcjit.counters()))
""")


def test_second_process_does_not_tune(cache_dir, tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    env = dict(os.environ)
    env["PYTHONPATH"] = PYTHON_DIR + os.pathsep + env.get("PYTHONPATH", "")
    env["TCJIT_CACHE_DIR"] = str(cache_dir)
    runs = []
    for _ in range(2):
        r = subprocess.run([sys.executable, str(path)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert runs[0]["autotune_runs"] == 1 and runs[0]["autotune_hits"] == 0
    assert runs[1]["autotune_runs"] == 0 and runs[1]["autotune_hits"] == 1


def _ptxas():
    from test_cuda import _ptxas as find
    return find()


@pytest.mark.skipif(_ptxas() is None, reason="ptxas not installed")
def test_gpu_variants_assemble(cache_dir, tmp_path):
    """Every PTX module the CUDA tuner may choose (ptx.h variants) for
    pointwise, row and whole-tensor reductions, softmax and layer_norm
    assembles with ptxas (no GPU needed: the CPU compile dumps them)."""
    from test_cuda import assert_ptxas_accepts, dumped_ptx
    d = tmp_path / "ptx"
    d.mkdir()
    tcjit._C.set_config(ptx_dump_dir=str(d))
    try:
        with tcjit.config.patch(max_autotune=True):
            for fn, make in CASES:
                tcjit.reset()
                tcjit.compile(fn)(*make())
            tcjit.compile(lambda x: x.sum())(torch.randn(1 << 20))
    finally:
        tcjit._C.set_config(ptx_dump_dir=None)
    files = dumped_ptx(str(d), 5 * 2 * 4)
    assert any("_v3_sm90" in f for f in files)
    assert_ptxas_accepts(files)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("fn,make", CASES, ids=[c[0].__name__ for c in CASES])
def test_cuda_results_equal_eager(cache_dir, fn, make):
    """The CUDA tuner times every variant on the device, keeps the fastest
    and stores it; a second compile reads the table."""
    args = tuple(a.cuda() for a in make())
    with tcjit.config.patch(max_autotune=True):
        got = tcjit.compile(fn)(*args)
        check_same(got, fn(*args))
        c = tcjit.counters()
        assert c["autotune_runs"] == 1 and c["autotune_seconds"] > 0
        assert any(n.startswith("cuda-")
                   for n in os.listdir(cache_dir / "autotune"))
        tcjit.reset()
        check_same(tcjit.compile(fn)(*args), fn(*args))
    c = tcjit.counters()
    assert c["autotune_runs"] == 0 and c["autotune_hits"] == 1
