/* cpu.c - pick the -march libgccjit compiles for.
 *
 * libgccjit rejects -march=native, so the CPU is classified into the x86-64
 * micro-architecture levels (v4 needs the AVX-512 F/BW/DQ/VL subsets, v3
 * AVX2 + FMA + BMI2), which every GCC since 11 accepts.
 */
#include "jit_internal.h"

#include <pthread.h>

static const char *march = NULL;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

#if defined(__x86_64__) || defined(__i386__)
static const char *
detect(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
        && __builtin_cpu_supports("avx512dq")
        && __builtin_cpu_supports("avx512vl")) {
        return "x86-64-v4";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
        && __builtin_cpu_supports("bmi2")) {
        return "x86-64-v3";
    }
    if (__builtin_cpu_supports("sse4.2") && __builtin_cpu_supports("popcnt")
        && __builtin_cpu_supports("ssse3")) {
        return "x86-64-v2";
    }
    return "x86-64";
}
#elif defined(__aarch64__)
static const char *
detect(void)
{
    return "armv8-a";
}
#else
static const char *
detect(void)
{
    return NULL;
}
#endif

static void
detect_once_fn(void)
{
    march = detect();
}

const char *
tc_cpu_march(void)
{
    pthread_once(&detect_once, detect_once_fn);
    return march;
}
