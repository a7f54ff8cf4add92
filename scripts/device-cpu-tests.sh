#!/usr/bin/env bash
# device-cpu-tests.sh - build tcjit for the machine's python3 without
# autotools or system libgccjit, then run the CPU test suite.
#
# Used on the GPU device machine (Python 3.12, no network, no libgccjit):
# libgccjit comes from Debian .deb files carried in .debs/ (apt-get download
# libgccjit0 libgccjit-12-dev libgcc-12-dev) and unpacked under /tmp/gj,
# never into /.  Wheels for pytest may be carried in .whl/.
#
#   bash scripts/device-cpu-tests.sh [pytest args...]
#   TC_BUILD_ONLY=1 bash scripts/device-cpu-tests.sh    # build, run nothing
set -euo pipefail
cd "$(dirname "$0")/.."
GJ=${GJ:-/tmp/gj}
PY=${PYTHON:-python3}

if [ ! -f "$GJ/usr/lib/x86_64-linux-gnu/libgccjit.so.0" ]; then
    mkdir -p "$GJ"
    for f in .debs/*.deb; do dpkg -x "$f" "$GJ"; done
fi
GCCDIR=$(ls -d "$GJ"/usr/lib/gcc/x86_64-linux-gnu/* | head -n 1)
export LD_LIBRARY_PATH="$GJ/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if ls .whl/*.whl >/dev/null 2>&1 && ! "$PY" -c "import pytest" 2>/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# The source list is Makefile.am's, so this build cannot drift from it.
srcs=$(sed -n '/^tcjit_sources = /,/^$/p' Makefile.am | tr -d '\\' | tr -s ' \t' '\n' \
       | grep '\.c$')
inc=$("$PY" -c "import sysconfig; print(sysconfig.get_paths()['include'])")
ext=$("$PY" -c "import sysconfig; print(sysconfig.get_config_var('EXT_SUFFIX'))")
"$PY" scripts/check-layers.py src
echo "building tcjit._C for $("$PY" --version) with $(gcc --version | head -n 1)"
gcc -shared -fPIC -O2 -g -Wall -std=gnu11 -fvisibility=hidden -Isrc -I"$inc" \
    -I"$GCCDIR/include" -o "python/tcjit/_C$ext" $srcs \
    -L"$GCCDIR" -L"$GJ/usr/lib/x86_64-linux-gnu" -l:libgccjit.so.0 -lpthread -ldl -lm
# libgccjit's embedded driver links against libgcc from its own GCC version.
export LIBRARY_PATH="$GCCDIR"
[ -n "${TC_BUILD_ONLY:-}" ] && exit 0
PYTHONPATH=python${PYTHONPATH:+:$PYTHONPATH} "$PY" -m pytest -q -p no:cacheprovider tests "$@"
