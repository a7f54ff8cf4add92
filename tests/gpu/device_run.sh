#!/usr/bin/env bash
# device_run.sh - everything to run on the GPU device machine, one command
# from the repo root (no network; ~3-5 minutes, at most 9.5 by the step timeouts):
#
#   bash tests/gpu/device_run.sh
#
#   (a) tests/gpu/run_device.sh: the standalone PTX harness (every case vs
#       the KIR reference, float32 math bit for bit vs its CPU mirror, the
#       16M chain bandwidth vs cuMemcpyDtoD)
#   (b) scripts/device-cpu-tests.sh -k test_cuda: builds tcjit._C for the
#       machine's python3 (libgccjit from .debs/, pytest from .whl/) and
#       runs only tests/test_cuda.py
#   (c) bench/bench.py --device cuda, with torch.compile (Triton is there)
#
# With $OUT set, every step's output goes to $OUT/{harness,pytest,bench}.txt
# and the bench JSON to $OUT/bench.json; a summary is in $OUT/summary.txt.
# Exit status: 0 if all three steps passed.
set -u -o pipefail
cd "$(dirname "$0")/../.."
dest=${OUT:-}
[ -n "$dest" ] && mkdir -p "$dest"

step() {    # step NAME CMD... : run, tee to $OUT/NAME.txt, print status
    local name=$1
    shift
    echo "=== $name: $*"
    local t0=$SECONDS rc
    if [ -n "$dest" ]; then
        "$@" 2>&1 | tee "$dest/$name.txt"
    else
        "$@" 2>&1
    fi
    rc=$?
    local line="$name: rc=$rc ($((SECONDS - t0)) s)"
    echo "=== $line"
    summary+="$line"$'\n'
    return $rc
}

summary=""
fails=0
step harness timeout 150 bash tests/gpu/run_device.sh || fails=$((fails + 1))
step pytest timeout 240 bash scripts/device-cpu-tests.sh -k test_cuda -rs \
    || fails=$((fails + 1))

# The module step (b) built needs libgccjit at import time (same paths as
# scripts/device-cpu-tests.sh).
GJ=${GJ:-/tmp/gj}
export LD_LIBRARY_PATH="$GJ/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
GCCDIR=$(ls -d "$GJ"/usr/lib/gcc/x86_64-linux-gnu/* 2>/dev/null | head -n 1)
[ -n "$GCCDIR" ] && export LIBRARY_PATH="$GCCDIR"
bench_json=${dest:+$dest/bench.json}
step bench timeout 180 env PYTHONPATH=python python3 bench/bench.py --device cuda \
    ${bench_json:+--output "$bench_json"} || fails=$((fails + 1))

echo
echo "$summary"
[ -n "$dest" ] && printf '%s' "$summary" > "$dest/summary.txt"
[ "$fails" -eq 0 ] && echo "device_run: PASS" || echo "device_run: FAIL ($fails step(s))"
exit $((fails != 0))
