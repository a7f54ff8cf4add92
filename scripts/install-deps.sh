#!/usr/bin/env bash
# install-deps.sh - install what tcjit needs to build, test and run, only if
# it is missing.  Idempotent and quick when everything is present (no apt,
# no pip, no network), so "make" runs it every time.
#
#   system (apt, Debian/Ubuntu): libgccjit-12-dev autoconf automake libtool
#                                build-essential binutils
#                                (+ python3-dev for a system Python)
#   Python (pip, for $PYTHON):   torch==2.13.0 pytest pytest-xdist==3.8.0
#                                numpy expecttest hypothesis
#                                transformers==5.24.0
#
# "make check" tests other CPython versions in cached virtual environments
# (scripts/test-venv.sh) instead of installing into their interpreters.
#
# Environment:
#   PYTHON=python3            interpreter to install Python packages for
#   TCJIT_TORCH_VERSION=2.13.0
#   TCJIT_GCCJIT_PKG=libgccjit-12-dev
#   TCJIT_PIP_ARGS="..."      extra pip arguments (e.g. --index-url ...)
#   TCJIT_SKIP_DEPS=1         do nothing
set -euo pipefail

[ "${TCJIT_SKIP_DEPS:-0}" = 1 ] && exit 0

PYTHON=${PYTHON:-python3}
TORCH_VERSION=${TCJIT_TORCH_VERSION:-2.13.0}
GCCJIT_PKG=${TCJIT_GCCJIT_PKG:-libgccjit-12-dev}

say() { echo "install-deps: $*" >&2; }

as_root() {
    if [ "$(id -u)" = 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        say "need root to run: $*  (no sudo found)"
        exit 1
    fi
}

# ------------------------------------------------------------------ apt
apt_pkgs="$GCCJIT_PKG autoconf automake libtool build-essential binutils"
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    # No interpreter at all: the distribution's Python 3 with headers and pip.
    apt_pkgs="$apt_pkgs python3 python3-dev python3-pip python3-venv"
fi

missing=()
if command -v dpkg-query >/dev/null 2>&1; then
    for p in $apt_pkgs; do
        status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
        [ "$status" = installed ] || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "installing system packages: ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        as_root apt-get update -q
        as_root apt-get install -y -q --no-install-recommends "${missing[@]}"
    fi
else
    # Not Debian: check the tools themselves and say what is missing.
    for t in gcc make autoreconf automake as ld; do
        command -v "$t" >/dev/null 2>&1 || missing+=("$t")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        say "no dpkg here; please install: ${missing[*]} and libgccjit (headers + library)"
        exit 1
    fi
fi

# Python.h for the chosen interpreter (a system Python needs python3-dev).
pyinc=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$pyinc/Python.h" ]; then
    if command -v dpkg-query >/dev/null 2>&1 && [ "${pyinc#/usr/include/}" != "$pyinc" ]; then
        say "installing python3-dev (no $pyinc/Python.h)"
        export DEBIAN_FRONTEND=noninteractive
        as_root apt-get update -q
        as_root apt-get install -y -q --no-install-recommends python3-dev
    else
        say "warning: $pyinc/Python.h not found; configure will fail"
    fi
fi

# ------------------------------------------------------------------ pip
# Ask importlib.metadata, not pip (fast, offline).  A local version label
# ("2.13.0+cpu") satisfies torch==2.13.0, as it does for pip.
need=$("$PYTHON" - "$TORCH_VERSION" <<'EOF'
import sys
from importlib import metadata
want_torch = sys.argv[1]
need = []
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
v = version("torch")
if v is None or v.split("+")[0] != want_torch:
    need.append("torch==" + want_torch)
# expecttest + hypothesis: torch.testing's OpInfo database (tests/sweeps)
for name in ("pytest", "numpy", "expecttest", "hypothesis"):
    if version(name) is None:
        need.append(name)
# transformers: tests/test_hf_*.py build real models from configs (issue
# 18); pinned, as its releases change the Python the tracer sees.  Keep in
# step with scripts/test-venv.sh's EXTRAS.
if version("transformers") != "5.24.0":
    need.append("transformers==5.24.0")
# pytest-xdist: `make check` runs the suite on every core (-n auto,
# Makefile.am's PYTEST_ARGS); pinned so every version's workers schedule
# alike.  Keep in step with scripts/test-venv.sh's EXTRAS.
if version("pytest-xdist") != "3.8.0":
    need.append("pytest-xdist==3.8.0")
print(" ".join(need))
EOF
)

if [ -n "$need" ]; then
    say "installing Python packages for $PYTHON: $need"
    if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
        "$PYTHON" -m ensurepip --upgrade >/dev/null 2>&1 || {
            say "installing python3-pip"
            export DEBIAN_FRONTEND=noninteractive
            as_root apt-get update -q
            as_root apt-get install -y -q --no-install-recommends python3-pip
        }
    fi
    pip_args=()
    # A distribution Python outside a venv refuses pip installs (PEP 668).
    if "$PYTHON" - <<'EOF'
import os, sys, sysconfig
in_venv = sys.prefix != sys.base_prefix
marker = os.path.join(sysconfig.get_paths()["stdlib"], "EXTERNALLY-MANAGED")
sys.exit(0 if (not in_venv and os.path.exists(marker)) else 1)
EOF
    then
        say "warning: $PYTHON is externally managed; using --break-system-packages" \
            "(use a venv and PYTHON=/path/to/venv/bin/python to avoid this)"
        pip_args+=(--break-system-packages)
    fi
    pip_cmd=("$PYTHON" -m pip install "${pip_args[@]}" ${TCJIT_PIP_ARGS:-} $need)
    # Root installing into a system prefix may need it; a user's own
    # interpreter (pyenv, venv) must not be touched with sudo.
    if [ "$(id -u)" != 0 ] && [ ! -w "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" ]; then
        pip_cmd=("$PYTHON" -m pip install --user "${pip_args[@]}" ${TCJIT_PIP_ARGS:-} $need)
    fi
    "${pip_cmd[@]}"
fi
