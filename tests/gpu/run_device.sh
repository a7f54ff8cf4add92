#!/usr/bin/env bash
# run_device.sh - build and run the standalone PTX backend harness on a
# machine with an NVIDIA GPU (no Python, torch or libgccjit needed; only a
# C compiler and the driver's libcuda.so.1).  From the repo root:
#
#   bash tests/gpu/run_device.sh            all cases + bandwidth
#   bash tests/gpu/run_device.sh softmax    one case ("bench": only that)
#   TC_GPU_BIG=1 bash tests/gpu/run_device.sh   also the 2^31-element
#                                           64-bit-index case (~4.3 GB)
#
#   bash tests/gpu/run_device.sh f32_math_bits   float32 transcendentals
#                                           bit for bit vs the CPU mirror
#   bash tests/gpu/run_device.sh f64_trig   float64 sin / cos vs long
#                                           double libm, every exponent
# Prints PASS/FAIL per case and mode (scalar / vec entries) and BENCH lines
# (GB/s of the 16M float32 chain vs cuMemcpyDtoD).  Exit status 0 = all
# passed.
set -u
cd "$(dirname "$0")/../.."
CC=${CC:-$(command -v cc || command -v gcc || command -v clang)}
out=${TMPDIR:-/tmp}/tcjit_gpu_harness
"$CC" -std=gnu11 -O2 -Wall -ffp-contract=off -Isrc/graph -Isrc/gpu -o "$out" \
    tests/gpu/harness.c tests/gpu/cases.c tests/gpu/kir_ref.c \
    tests/gpu/f32math_ref.c \
    src/gpu/ptx_emit.c src/gpu/ptx_math.c src/gpu/driver.c \
    src/runtime/diskcache.c \
    src/graph/*.c \
    -lm -ldl -lpthread || { echo "FAIL build"; exit 1; }
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
"$out" "$@"
