"""pip installs tcjit (pyproject.toml -> scripts/tcjit_build.py -> configure
+ make): `pip install .` into a fresh virtual environment, then a compiled
function runs there from the installed package; `pip install -e .` and
`pip wheel .` too.  Offline: torch comes from this interpreter's
environment (linked into the new one with a .pth file), nothing is
downloaded (--no-deps: the wheel's torch requirement is checked in its
METADATA), and the build needs no packages.

Set TCJIT_TEST_INSTALL=0 to skip (each Python version builds the module
once more, in build/pip-pyX.Y)."""
import os
import subprocess
import sys
import sysconfig
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

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
        _pip(py, "uninstall", "-y", "setuptools")
    return py


def _pip(py, *args):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # never the source tree's python/
    # offline; --no-deps: torch is there (linked in), but a test venv's
    # torch has its CUDA requirements unmet by design (scripts/test-venv.sh)
    offline = (["--no-index", "--no-deps"] if args[0] in ("install", "wheel")
               else [])
    r = subprocess.run([py, "-m", "pip", "--disable-pip-version-check",
                        "--no-input", *args, *offline], cwd=ROOT, env=env,
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


def test_pip_install_runs_compiled_function(tmp_path):
    py = _venv(tmp_path, "venv")
    _pip(py, "install", ".")
    out = _run(py, str(tmp_path))
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    assert "OK " + os.path.join(site, "tcjit") in out, out
    # the package carries its compiled module and every Python file
    installed = os.listdir(os.path.join(site, "tcjit"))
    assert any(n.startswith("_C.") and n.endswith(".so") for n in installed)
    src = {n for n in os.listdir(os.path.join(ROOT, "python", "tcjit"))
           if n.endswith(".py")}
    assert src <= set(installed), src - set(installed)


def test_pip_install_editable(tmp_path):
    py = _venv(tmp_path, "venv-dev")
    _pip(py, "install", "-e", ".")
    out = _run(py, str(tmp_path))
    assert "OK " + os.path.join(ROOT, "python", "tcjit") in out, out


def test_pip_wheel(tmp_path):
    _pip(sys.executable, "wheel", "-w", str(tmp_path), ".")
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
