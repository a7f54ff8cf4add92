#!/usr/bin/env bash
# test-venv.sh - a virtual environment of CPython VERSION with what tcjit's
# tests need (torch, pytest, pytest-xdist, numpy, expecttest, hypothesis,
# transformers), made once and cached; prints the path of its python.
#
#   scripts/test-venv.sh 3.13            # -> ~/.cache/tcjit/venv-3.13/bin/python
#   scripts/test-venv.sh /path/to/python3.12
#
# torch comes from PyPI, whose Linux wheel is built for CUDA: it pulls
# triton, cuda-bindings and ~3 GB of nvidia-* libraries per environment.
# The leanest install that imports and runs on the CPU:
#   * torch itself with --no-deps, plus its pure-Python requirements;
#   * the CUDA libraries that libtorch_cuda.so is linked against (it loads
#     them at import, GPU or not), installed once into
#     $CACHE/cuda-libs-<torch version> and shared by every Python version
#     (they are py3-none wheels), linked in as site-packages/nvidia where
#     torch's RPATH ($ORIGIN/../../nvidia/...) looks for them;
#   * not triton or cuda-bindings (GPU compilers, unused here).
# Versions follow torch's own metadata, so a torch bump needs no edit here.
#
# Idempotent and offline once made (a stamp file records what was
# installed).  Environment:
#   TCJIT_CACHE_DIR          default ${XDG_CACHE_HOME:-~/.cache}/tcjit
#   TCJIT_TORCH_VERSION      default 2.13.0
#   TCJIT_PIP_ARGS           extra pip arguments
set -euo pipefail
set -f  # requirement specs hold brackets (cuda-toolkit[cublas,...])

say() { echo "test-venv: $*" >&2; }

[ $# = 1 ] || { echo "usage: $0 VERSION|PYTHON" >&2; exit 2; }
TORCH_VERSION=${TCJIT_TORCH_VERSION:-2.13.0}
CACHE=${TCJIT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tcjit}
here=$(cd "$(dirname "$0")" && pwd)

base=$("$here/find-python.sh" "$1")
ver=$("$base" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv=$CACHE/venv-$ver
py=$venv/bin/python
stamp=$venv/.tcjit-stamp
want="torch==$TORCH_VERSION base=$base"

# Test-only packages that torch does not need: checked on every call, so a
# venv made before one was added gets it without being made again.
# transformers: tests/test_hf_*.py build real models from configs (issue
# 18); pytest-xdist: `make check` runs the suite on every core (-n auto).
# Keep in step with scripts/install-deps.sh.
EXTRAS="transformers==5.24.0 pytest-xdist==3.8.0"
pip=("$py" -m pip install -q --disable-pip-version-check ${TCJIT_PIP_ARGS:-})
ensure_extras() {
    # shellcheck disable=SC2086
    "$py" - $EXTRAS <<'EOF' || "${pip[@]}" $EXTRAS >&2
import sys
from importlib import metadata
for spec in sys.argv[1:]:
    name, _, want = spec.partition("==")
    try:
        if metadata.version(name) != want:
            sys.exit(1)
    except metadata.PackageNotFoundError:
        sys.exit(1)
EOF
}

if [ -x "$py" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    ensure_extras
    echo "$py"
    exit 0
fi

say "making $venv (CPython $ver from $base, torch $TORCH_VERSION)"
rm -rf "$venv"
mkdir -p "$CACHE"
"$base" -m venv "$venv"
"${pip[@]}" --no-deps "torch==$TORCH_VERSION"

# torch's requirements, split: pure Python (installed here) and the CUDA
# runtime libraries (shared directory); triton / cuda-bindings skipped.
reqs=$("$py" - <<'EOF'
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:  # a bare venv: pip vendors packaging
    from pip._vendor.packaging.requirements import Requirement
pure, cuda = [], []
for r in metadata.requires("torch") or []:
    req = Requirement(r)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower() in ("triton", "cuda-bindings"):
        continue
    spec = str(req).split(";")[0].strip()
    (cuda if req.name.lower().startswith(("nvidia-", "cuda-")) else pure).append(spec)
print(" ".join(pure))
print(" ".join(cuda))
EOF
)
pure=$(echo "$reqs" | sed -n 1p)
cuda=$(echo "$reqs" | sed -n 2p)

# shellcheck disable=SC2086
"${pip[@]}" $pure pytest numpy expecttest hypothesis

site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
if [ -n "$cuda" ]; then
    libs=$CACHE/cuda-libs-$TORCH_VERSION
    if [ ! -f "$libs/.tcjit-stamp" ] || [ "$(cat "$libs/.tcjit-stamp")" != "$cuda" ]; then
        say "installing the CUDA libraries torch links against into $libs (once for all versions)"
        rm -rf "$libs"
        # shellcheck disable=SC2086
        "${pip[@]}" --target "$libs" $cuda
        echo "$cuda" > "$libs/.tcjit-stamp"
    fi
    ln -sfn "$libs/nvidia" "$site/nvidia"
fi

"$py" -c 'import torch; torch.ones(2).sin()' \
    || { say "torch does not import in $venv"; exit 1; }
ensure_extras
echo "$want" > "$stamp"
echo "$py"
