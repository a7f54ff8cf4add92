"""tcjit_build - the PEP 517 / PEP 660 build backend of pyproject.toml.

`pip install .`, `pip install -e .` and `pip wheel .` come here.  The
autotools files stay the build's source of truth: this runs the same
configure + make as `make` does, for the interpreter that runs pip
(sys.executable), out of tree in build/pip-pyX.Y, and packs what
`make install` installs into a wheel.  Nothing but the standard library is
needed (pyproject.toml's build requirements are empty), plus what `make`
needs: a C compiler, libgccjit, autoconf/automake when ./configure is not
generated yet (scripts/install-deps.sh installs them).

  build_wheel      configure, make, make install DESTDIR=<stage>; zip the
                   stage's package and the .dist-info
  build_editable   configure, make (which copies the module into
                   python/tcjit/); a wheel holding only a .pth file that
                   puts python/ on sys.path.  After editing C, run `make`
                   (or pip install -e . again) to rebuild the module.
"""
import base64
import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

try:
    import tomllib
except ImportError:  # pragma: no cover - 3.11 has tomllib
    tomllib = None

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _log(*args):
    print("tcjit_build:", *args, file=sys.stderr, flush=True)


def _run(cmd, cwd):
    _log(" ".join(cmd), f"(in {cwd})")
    # stdout to stderr: pip shows it on failure, and stdout stays the
    # hook protocol's
    subprocess.run(cmd, cwd=cwd, check=True, stdout=sys.stderr)


def _version():
    with open(os.path.join(SRC, "configure.ac")) as f:
        m = re.search(r"AC_INIT\(\[tcjit\],\s*\[([^\]]+)\]", f.read())
    if m is None:
        raise RuntimeError("no version in configure.ac's AC_INIT")
    return m.group(1)


def _project():
    if tomllib is None:
        return {}
    with open(os.path.join(SRC, "pyproject.toml"), "rb") as f:
        return tomllib.load(f).get("project", {})


def _tag():
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        raise RuntimeError("tcjit does not support the free-threaded CPython "
                           "build (3.13t); use the default build")
    impl = "cp%d%d" % sys.version_info[:2]
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{impl}-{plat}"


@contextlib.contextmanager
def _built(extra_configure=()):
    """Configure (once per interpreter) and make in build/pip-pyX.Y; yields
    the build directory, locked (build/pip-pyX.Y.lock) until the caller is
    done with it: two pip runs of one interpreter at once (the test suite's
    workers, tests/test_install.py) would otherwise configure, make and
    make install in one directory together."""
    os.makedirs(os.path.join(SRC, "build"), exist_ok=True)
    lock = os.path.join(SRC, "build", "pip-py%d.%d.lock" % sys.version_info[:2])
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield _configure_and_make(extra_configure)
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _configure_and_make(extra_configure=()):
    """Configure (once per interpreter) and make in build/pip-pyX.Y;
    returns the build directory.  Only under _built's lock."""
    if os.path.exists(os.path.join(SRC, "config.status")):
        raise RuntimeError("the source tree is configured in place: run "
                           "'make distclean' there first")
    if not os.path.exists(os.path.join(SRC, "configure")):
        _run(["autoreconf", "-fi"], SRC)
    build = os.path.join(SRC, "build", "pip-py%d.%d" % sys.version_info[:2])
    makefile = os.path.join(build, "Makefile")
    # The base interpreter, not pip's (build-isolation or target) venv: the
    # module is the same for every environment of one interpreter, and a
    # build directory that stays configured for it rebuilds incrementally.
    python = getattr(sys, "_base_executable", None) or sys.executable
    if not os.path.exists(python):
        python = sys.executable
    python = subprocess.run(  # as configure resolves it
        [python, "-c", "import sys; print(sys.executable)"], check=True,
        capture_output=True, text=True).stdout.strip()
    want = "PYTHON = " + python
    configured = os.path.exists(makefile) and any(
        line.rstrip("\n") == want for line in open(makefile))
    if not configured:
        shutil.rmtree(build, ignore_errors=True)
        os.makedirs(build)
        _run([os.path.join(SRC, "configure"), "PYTHON=" + python,
              *extra_configure], build)
    _run(["make", "-j%d" % (os.cpu_count() or 2)], build)
    return build


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: tcjit", "Version: " + _version()]
    if "description" in p:
        lines.append("Summary: " + p["description"])
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    for dep in p.get("dependencies", []):
        lines.append("Requires-Dist: " + dep)
    readme = os.path.join(SRC, "README.md")
    body = ""
    if os.path.exists(readme):
        lines.append("Description-Content-Type: text/markdown")
        with open(readme) as f:
            body = "\n" + f.read()
    return "\n".join(lines) + "\n" + body


def _dist_info():
    """{name: bytes} of the .dist-info's METADATA and WHEEL, and its name."""
    dist = f"tcjit-{_version()}.dist-info"
    return dist, {
        "METADATA": _metadata().encode(),
        "WHEEL": ("Wheel-Version: 1.0\nGenerator: tcjit_build\n"
                  f"Root-Is-Purelib: false\nTag: {_tag()}\n").encode()}


def _write_wheel(wheel_directory, files):
    """files: {archive name: bytes}; adds .dist-info; returns the name."""
    name = f"tcjit-{_version()}"
    tag = _tag()
    dist, meta = _dist_info()
    files = dict(files)
    for fn, data in meta.items():
        files[f"{dist}/{fn}"] = data
    record = []
    for arc, data in sorted(files.items()):
        digest = base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arc},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    whl = f"{name}-{tag}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, whl), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            z.writestr(arc, data)
    return whl


# ---- PEP 517 hooks -------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """The .dist-info without building (pip asks for it first)."""
    dist, meta = _dist_info()
    os.makedirs(os.path.join(metadata_directory, dist), exist_ok=True)
    for fn, data in meta.items():
        with open(os.path.join(metadata_directory, dist, fn), "wb") as f:
            f.write(data)
    return dist


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None,
                metadata_directory=None):
    stage = tempfile.mkdtemp(prefix="tcjit-stage-")
    try:
        with _built() as build:
            # Makefile.am's install rules say what the package is
            _run(["make", "install", "DESTDIR=" + stage,
                  "pythondir=/pkg", "pyexecdir=/pkg"], build)
        root = os.path.join(stage, "pkg")
        files = {}
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for fn in filenames:
                path = os.path.join(dirpath, fn)
                with open(path, "rb") as f:
                    files[os.path.relpath(path, root)] = f.read()
        return _write_wheel(wheel_directory, files)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def build_editable(wheel_directory, config_settings=None,
                   metadata_directory=None):
    with _built():  # the module lands in python/tcjit/
        pass
    pth = os.path.join(SRC, "python") + "\n"
    return _write_wheel(wheel_directory, {"tcjit_editable.pth": pth.encode()})
