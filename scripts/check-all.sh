#!/usr/bin/env bash
# check-all.sh - "make check" on every supported CPython, one after the
# other, each with its own build (build/pyX.Y) and module
# (python/tcjit/_C.cpython-3XY-...so); then a summary: pass counts and
# times per version.  Exits non-zero if any version fails.
#
#   TCJIT_CHECK_VERSIONS="3.11 3.12 3.13"   the versions (default)
#
# The default python3 (when it is one of them) is tested as it is, with
# the packages scripts/install-deps.sh installs into it; every other
# version runs in a cached virtual environment (scripts/test-venv.sh:
# torch from PyPI, CPU use, made once).  Versions run in sequence: the
# suite is CPU-bound and CI machines are small; each version's suite runs
# on all the cores (pytest-xdist workers, Makefile.am's PYTEST_JOBS).
set -uo pipefail
cd "$(dirname "$0")/.."

versions=${TCJIT_CHECK_VERSIONS:-3.11 3.12 3.13}
default_ver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null || true)
make_=${MAKE:-make}
summary=()
status=0
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

for v in $versions; do
    echo "=== CPython $v ==="
    start=$(date +%s)
    if [ "$v" = "$default_ver" ]; then
        py=$(python3 -c 'import sys; print(sys.executable)')
    elif ! py=$(scripts/test-venv.sh "$v"); then
        summary+=("$v  FAILED: no test environment")
        status=1
        continue
    fi
    log=$logdir/check-$v.log
    # MAKEFLAGS of an outer make (-j, -s) pass through; PYTHON names the
    # interpreter, so the inner make checks that one only.
    $make_ --no-print-directory PYTHON="$py" check 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    secs=$(( $(date +%s) - start ))
    # pytest's closing line, the same with pytest-xdist ("12644 passed,
    # 616 skipped, 3 warnings in 512.30s (0:08:32)"); only errors (a
    # collection error, a crashed worker) is still a summary
    result=$(grep -E '^=* ?[0-9]+ (failed|passed|skipped|deselected|xfailed|xpassed|errors?).* in [0-9.]+s' "$log" | tail -n 1 | sed 's/=//g; s/^ *//; s/ *$//')
    [ -n "$result" ] || result="(no pytest summary)"
    # how the suite ran (Makefile.am's check-local says it): N workers or one process
    mode=$(sed -n 's/^pytest: //p' "$log" | tail -n 1)
    [ -z "$mode" ] || result="$result  ($mode)"
    if [ "$rc" = 0 ]; then
        summary+=("$v  ok      $(printf '%5ds' "$secs")  $result  [$py]")
    else
        summary+=("$v  FAILED  $(printf '%5ds' "$secs")  $result  [$py]")
        status=1
    fi
done

echo
echo "=== make check: per-version summary (wall time includes the build) ==="
for line in "${summary[@]}"; do
    echo "  $line"
done
exit $status
