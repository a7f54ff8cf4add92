/* autotune.c - max-autotune on the CPU (docs/autotune.md).
 *
 * Two kinds of candidates, each timed per kernel on zero-filled buffers of
 * the plan's sizes (kernels only read and write their buffers, and have no
 * data-dependent addressing, so any contents are safe; zeros are never
 * denormal):
 *   - the reduction schedule (gccjit_emit.c cpu_variant): accumulator sets
 *     per row, chunk size of split full reductions.  One compile per
 *     variant; the variant with the least total time over the plan's
 *     reduction kernels wins (one context per kind holds every kernel).
 *   - the thread-pool split of each kernel big enough to be split
 *     (run time only): element-steps per task, or not split at all.
 * A candidate replaces the default only when it is at least 3% faster:
 * timings on a loaded machine are noisy and the default is a good guess.
 * The choice is stored in the table (../runtime/tunetable.h) under a hash
 * of the kernels' KIR, compile flags and thread count.
 */
#include "jit.h"
#include "jit_internal.h"
#include "../runtime/threadpool.h"
#include "../runtime/tunetable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int64_t grain_candidates[] = {0, 4096, 65536, -1};
#define NGRAINS ((int)(sizeof(grain_candidates) / sizeof(int64_t)))

static uint64_t
plan_key(const tc_plan *plan)
{
    char desc[256];
    snprintf(desc, sizeof(desc), "cpu %s threads=%d", tc_jit_cflags(),
             tc_threadpool_get_threads());
    return tc_tune_plan_key(plan, desc);
}

/* Zero-filled memory for every buffer a kernel touches: bufs[b] (NULL
 * for none).  0, or -1. */
static int
alloc_buffers(const tc_plan *plan, void **bufs)
{
    int64_t *bytes = calloc((size_t)plan->nbuffers + 1, sizeof(int64_t));
    int rc = bytes != NULL ? tc_tune_buffer_bytes(plan, bytes) : -1;
    for (int b = 0; b < plan->nbuffers && rc == 0; b++) {
        bufs[b] = bytes[b] > 0 ? calloc(1, (size_t)bytes[b]) : NULL;
        rc = bytes[b] > 0 && bufs[b] == NULL ? -1 : 0;
    }
    free(bytes);
    return rc;
}

/* Seconds one run of kernel i takes (the best of a few), or a huge value
 * when it could not run. */
static double
time_kernel(const tc_plan *plan, tc_jit_code *code, int i, void **bufs,
            int64_t threshold)
{
    const tc_kernel *k = &plan->kernels[i];
    void *args[k->nargs + 1];
    for (int a = 0; a < k->nargs; a++) {
        args[a] = k->args[a].buffer < 0 ? NULL : bufs[k->args[a].buffer];
    }
    args[k->nargs] = NULL;
    if (tc_jit_code_run(code, i, args, threshold) < 0) {  /* warm-up */
        return 1e30;
    }
    double best = 1e30, spent = 0;
    for (int r = 0; r < 25 && (r < 3 || spent < 2e-3); r++) {
        double t0 = tc_tune_now();
        if (tc_jit_code_run(code, i, args, threshold) < 0) {
            return 1e30;
        }
        double t = tc_tune_now() - t0;
        spent += t;
        best = t < best ? t : best;
    }
    return best;
}

static double
reduction_time(const tc_plan *plan, tc_jit_code *code, void **bufs,
               int64_t threshold)
{
    double total = 0;
    for (int i = 0; i < plan->nkernels; i++) {
        if (plan->kernels[i].nphases > 0) {
            total += time_kernel(plan, code, i, bufs, threshold);
        }
    }
    return total;
}

/* The candidates of kernel i's split: none when it never runs split. */
static int
splittable(const tc_jit_code *code, int i, int64_t threshold)
{
    return tc_threadpool_get_threads() >= 2
           && tc_jit_code_work(code, i) >= threshold
           && (code->loops[i].sizes[0] >= 2 || code->loops[i].nchunks > 0);
}

static int
tune_grains(const tc_plan *plan, tc_jit_code *code, void **bufs,
            int64_t threshold)
{
    int n = plan->nkernels;
    code->grain = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    if (code->grain == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (!splittable(code, i, threshold)) {
            continue;
        }
        double best = time_kernel(plan, code, i, bufs, threshold);
        int64_t pick = 0;
        for (int c = 1; c < NGRAINS; c++) {
            /* split full reductions have fixed chunks: split or not */
            if (code->loops[i].nchunks > 0 && grain_candidates[c] > 0) {
                continue;
            }
            code->grain[i] = grain_candidates[c];
            double t = time_kernel(plan, code, i, bufs, threshold);
            if (t < 0.97 * best) {
                best = t;
                pick = grain_candidates[c];
            }
        }
        code->grain[i] = pick;
    }
    return 0;
}

/* "variant V\ngrains G0 G1 ...\n" */
static char *
format_choice(const tc_plan *plan, int variant, const tc_jit_code *code)
{
    size_t cap = 64 + 24 * (size_t)plan->nkernels;
    char *s = malloc(cap);
    if (s == NULL) {
        return NULL;
    }
    size_t n = (size_t)snprintf(s, cap, "variant %d\ngrains", variant);
    for (int i = 0; i < plan->nkernels; i++) {
        n += (size_t)snprintf(s + n, cap - n, " %lld",
                              (long long)(code->grain ? code->grain[i] : 0));
    }
    snprintf(s + n, cap - n, "\n");
    return s;
}

/* Parses a stored choice for a plan of nkernels.  0, or -1 (malformed:
 * tune again). */
static int
parse_choice(const char *text, int nkernels, int *variant, int64_t *grains)
{
    int used = 0;
    if (sscanf(text, "variant %d\ngrains%n", variant, &used) != 1
        || *variant < 0 || *variant >= TC_JIT_VARIANTS || used == 0) {
        return -1;
    }
    const char *p = text + used;
    for (int i = 0; i < nkernels; i++) {
        char *end;
        long long g = strtoll(p, &end, 10);
        if (end == p) {
            return -1;
        }
        grains[i] = g;
        p = end;
    }
    return 0;
}

static tc_jit_code *
from_table(const tc_plan *plan, const char *text, char *err, size_t errlen)
{
    int variant;
    int n = plan->nkernels;
    int64_t *grains = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t));
    if (grains == NULL || parse_choice(text, n, &variant, grains) < 0) {
        free(grains);
        return NULL;
    }
    tc_jit_code *code = tc_jit_code_compile(plan, variant, err, errlen);
    if (code == NULL) {
        free(grains);
        return NULL;
    }
    code->grain = grains;
    return code;
}

tc_jit_code *
tc_jit_autotune(const tc_plan *plan, char *err, size_t errlen)
{
    if (plan->nkernels == 0) {
        return tc_jit_code_compile(plan, 0, err, errlen);
    }
    uint64_t key = plan_key(plan);
    char *stored = tc_tune_lookup("cpu", key);
    if (stored != NULL) {
        tc_jit_code *code = from_table(plan, stored, err, errlen);
        free(stored);
        if (code != NULL) {
            tc_tune_counters.hits++;
            return code;
        }
        err[0] = '\0';
    }
    double t0 = tc_tune_now();
    void **bufs = calloc((size_t)plan->nbuffers + 1, sizeof(void *));
    tc_jit_code *best = tc_jit_code_compile(plan, 0, err, errlen);
    if (bufs == NULL || best == NULL || alloc_buffers(plan, bufs) < 0) {
        /* cannot time: the default schedule, untuned */
        goto done;
    }
    int64_t threshold = tc_jit_get_parallel_threshold();
    int variant = 0, any_red = 0;
    for (int i = 0; i < plan->nkernels; i++) {
        any_red |= plan->kernels[i].nphases > 0;
    }
    double best_t = any_red ? reduction_time(plan, best, bufs, threshold) : 0;
    for (int v = 1; any_red && v < TC_JIT_VARIANTS; v++) {
        char verr[256];
        tc_jit_code *c = tc_jit_code_compile(plan, v, verr, sizeof(verr));
        if (c == NULL) {
            continue;
        }
        double t = reduction_time(plan, c, bufs, threshold);
        if (t < 0.97 * best_t) {
            tc_jit_code_free(best);
            best = c;
            best_t = t;
            variant = v;
        }
        else {
            tc_jit_code_free(c);
        }
    }
    if (tune_grains(plan, best, bufs, threshold) == 0) {
        char *text = format_choice(plan, variant, best);
        if (text != NULL) {
            (void)tc_tune_store("cpu", key, text);
            free(text);
        }
    }
    tc_tune_counters.runs++;
    tc_tune_counters.seconds += tc_tune_now() - t0;
done:
    for (int b = 0; bufs != NULL && b < plan->nbuffers; b++) {
        free(bufs[b]);
    }
    free(bufs);
    return best;
}
