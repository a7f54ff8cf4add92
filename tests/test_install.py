"""pip installs tcjit (pyproject.toml -> scripts/tcjit_build.py -> configure
+ make): `pip install .` into a fresh virtual environment, then a compiled
function runs there from the installed package; `pip install -e .` and
`pip wheel .` too.  Offline: torch comes from this interpreter's
environment (linked into the new one with a .pth file), nothing is
downloaded (--no-deps: the wheel's torch requirement is checked in its
METADATA), and the build needs no packages.

pip builds from a copy of the source tree (fixture src), never the tree
itself, whose python/tcjit/ the rest of the suite imports.  Set
TCJIT_TEST_INSTALL=0 to skip (each Python version builds the module once
more, from scratch, in the copy's build/pip-pyX.Y)."""
import os
import subprocess
import sys
import sysconfig
import zipfile

import pytest

import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """A copy of the source tree that pip builds from (one for the module's
    three tests, so the second and third builds are incremental).  Not the
    tree itself: its build (build/pip-pyX.Y) copies the module into the
    tree's python/tcjit/, replacing the one the rest of the suite imports
    -- another build, so another build-id, so other kernel-cache keys: on
    a second pytest-xdist worker, test_cache.py's warm process of a
    cold/warm pair missed every kernel the cold one had stored."""
    dst = tmp_path_factory.mktemp("src") / "tcjit"
    ignore = shutil.ignore_patterns(".git", "build", "__pycache__", "_C.*.so",
                                    "*.o", "fuzz-out", ".pytest_cache", ".whl",
                                    ".debs", "autom4te.cache", ".benchmarks")
    shutil.copytree(ROOT, dst, ignore=ignore, symlinks=True)
    return str(dst)

pytestmark = pytest.mark.skipif(os.environ.get("TCJIT_TEST_INSTALL") == "0",
                                reason="TCJIT_TEST_INSTALL=0")

PROGRAM = r"""
import os, sys, torch, tcjit
here = os.path.dirname(tcjit.__file__)
print("tcjit from", here)

@tcjit.compile
def f(x, y):
    return (x.sin() + y.cos()).relu() * 2

x, y = torch.randn(1000), torch.randn(1000)
torch.testing.assert_close(f(x, y), (x.sin() + y.cos()).relu() * 2)
c = tcjit.counters()
assert c["frames_compiled"] >= 1 and c["kernels_compiled"] >= 1, c
print("OK", here)
"""


def _venv(tmp_path, name):
    """A fresh venv whose sys.path also has this interpreter's packages
    (torch, from a venv or not) through a .pth file."""
    env_dir = tmp_path / name
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True)
    py = str(env_dir / "bin" / "python")
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    with open(os.path.join(site, "zz_parent_packages.pth"), "w") as f:
        f.write("\n".join(sorted(ours)) + "\n")
    # 3.11's venv seeds an old setuptools, which would shadow the one torch
    # requires (>= 77) from the parent
    if os.path.isdir(os.path.join(site, "setuptools")):
        _pip(ROOT, py, "uninstall", "-y", "setuptools")
    return py


def _pip(src, py, *args):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # never the source tree's python/
    # offline; --no-deps: torch is there (linked in), but a test venv's
    # torch has its CUDA requirements unmet by design (scripts/test-venv.sh)
    offline = (["--no-index", "--no-deps"] if args[0] in ("install", "wheel")
               else [])
    r = subprocess.run([py, "-m", "pip", "--disable-pip-version-check",
                        "--no-input", *args, *offline], cwd=src, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return r


def _run(py, cwd):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r = subprocess.run([py, "-c", PROGRAM], cwd=cwd, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return r.stdout


def test_pip_install_runs_compiled_function(src, tmp_path):
    py = _venv(tmp_path, "venv")
    _pip(src, py, "install", ".")
    out = _run(py, str(tmp_path))
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    assert "OK " + os.path.join(site, "tcjit") in out, out
    # the package carries its compiled module and every Python file
    installed = os.listdir(os.path.join(site, "tcjit"))
    assert any(n.startswith("_C.") and n.endswith(".so") for n in installed)
    ours = {n for n in os.listdir(os.path.join(src, "python", "tcjit"))
            if n.endswith(".py")}
    assert ours <= set(installed), ours - set(installed)


def test_pip_install_editable(src, tmp_path):
    py = _venv(tmp_path, "venv-dev")
    _pip(src, py, "install", "-e", ".")
    out = _run(py, str(tmp_path))
    assert "OK " + os.path.join(src, "python", "tcjit") in out, out


def test_pip_wheel(src, tmp_path):
    _pip(src, sys.executable, "wheel", "-w", str(tmp_path), ".")
    wheels = [n for n in os.listdir(tmp_path) if n.endswith(".whl")]
    assert len(wheels) == 1, wheels
    tag = "cp%d%d" % sys.version_info[:2]
    assert f"-{tag}-{tag}-" in wheels[0], wheels[0]
    with zipfile.ZipFile(tmp_path / wheels[0]) as z:
        names = z.namelist()
        assert "tcjit/__init__.py" in names
        assert any(n.startswith("tcjit/_C.") for n in names)
        meta = z.read(next(n for n in names
                           if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Dist: torch" in meta
