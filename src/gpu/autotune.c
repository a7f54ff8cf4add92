/* autotune.c - max-autotune for CUDA (autotune.h, docs/autotune.md).
 *
 * Each variant of ptx_emit.c (threads per block, grid of grid-stride
 * entries, persistent / looped / split reduction rows) is emitted, loaded,
 * and its kernels launched on zero-filled device buffers of the plan's
 * sizes (cuMemAlloc'd: 256-byte aligned, so vector entries run), timed
 * with CUDA events on the legacy default stream after 2 warm-up
 * launches, 10 launches each.  The variant with the least total time wins
 * when it is at least 3% faster than the default.  A candidate that fails
 * to emit, load or launch is skipped.
 */
#include "autotune.h"
#include "driver.h"
#include "ptx.h"
#include "../runtime/tunetable.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 10

typedef struct {
    const tc_cu_api *a;
    CUdeviceptr *bufs;       /* by plan buffer, 0: none */
    CUevent ev[2];
} bench;

/* Launch kernel i of module m (functions resolved from mod) once.
 * 0, or -1. */
static int
launch(const tc_plan *plan, const tc_ptx_kernel *ki, int i, CUmodule mod,
       const bench *b, CUdeviceptr scratch)
{
    const tc_kernel *k = &plan->kernels[i];
    CUdeviceptr args[k->nargs + 1];
    void *params[k->nargs + 1];
    char err[512];
    for (int a = 0; a < k->nargs; a++) {
        int buf = k->args[a].buffer;
        args[a] = buf == TC_KARG_INDEX ? 0 : b->bufs[buf];
        params[a] = &args[a];
    }
    args[k->nargs] = scratch;
    params[k->nargs] = &args[k->nargs];
    const char *name = ki->entry_vec[0] ? ki->entry_vec : ki->entry;
    unsigned grid = (unsigned)(ki->entry_vec[0] ? ki->grid_vec : ki->grid);
    CUfunction fn, fin = NULL;
    if (tc_cu_function(mod, name, &fn, err, sizeof(err)) < 0
        || (ki->entry_final[0]
            && tc_cu_function(mod, ki->entry_final, &fin, err,
                              sizeof(err)) < 0)) {
        return -1;
    }
    if (tc_cu_launch(fn, name, grid, (unsigned)ki->block, NULL, params, err,
                     sizeof(err)) < 0) {
        return -1;
    }
    if (fin != NULL
        && tc_cu_launch(fin, ki->entry_final, (unsigned)ki->grid_final,
                        (unsigned)ki->block_final, NULL, params, err,
                        sizeof(err)) < 0) {
        return -1;
    }
    return 0;
}

/* Milliseconds all kernels of variant v take per run, or -1. */
static double
time_variant(const tc_plan *plan, int device, int sm, int nsm, int v,
             const bench *b)
{
    char err[2048];
    tc_ptx_module m;
    CUmodule mod;
    if (tc_ptx_emit_variant(plan, sm, nsm, v, &m, err, sizeof(err)) < 0) {
        return -1;
    }
    double total = -1;
    int64_t scratch_bytes = 0;
    for (int i = 0; i < m.nkernels; i++) {
        if (m.kernels[i].scratch_bytes > scratch_bytes) {
            scratch_bytes = m.kernels[i].scratch_bytes;
        }
    }
    CUdeviceptr scratch = 0;
    if (tc_cu_module(m.text, device, &mod, err, sizeof(err)) < 0
        || (scratch_bytes > 0
            && b->a->cuMemAlloc(&scratch, (size_t)scratch_bytes) != 0)) {
        tc_ptx_module_clear(&m);
        return -1;
    }
    total = 0;
    for (int i = 0; i < m.nkernels && total >= 0; i++) {
        const tc_ptx_kernel *ki = &m.kernels[i];
        if (ki->skip) {
            continue;
        }
        float ms = 0;
        int rc = launch(plan, ki, i, mod, b, scratch);
        rc = rc == 0 ? launch(plan, ki, i, mod, b, scratch) : rc;
        rc = rc == 0 && b->a->cuEventRecord(b->ev[0], NULL) == 0 ? 0 : -1;
        for (int r = 0; rc == 0 && r < REPS; r++) {
            rc = launch(plan, ki, i, mod, b, scratch);
        }
        if (rc == 0 && b->a->cuEventRecord(b->ev[1], NULL) == 0
            && b->a->cuEventSynchronize(b->ev[1]) == 0
            && b->a->cuEventElapsedTime(&ms, b->ev[0], b->ev[1]) == 0) {
            total += ms / REPS;
        }
        else {
            total = -1;
        }
    }
    if (scratch != 0) {
        b->a->cuCtxSynchronize();
        b->a->cuMemFree(scratch);
    }
    tc_ptx_module_clear(&m);
    return total;
}

static int
tune(const tc_plan *plan, int device, int sm, int nsm, const tc_cu_api *a)
{
    int64_t *bytes = calloc((size_t)plan->nbuffers + 1, sizeof(int64_t));
    bench b = {a, calloc((size_t)plan->nbuffers + 1, sizeof(CUdeviceptr)),
               {NULL, NULL}};
    int best = 0, ok = bytes != NULL && b.bufs != NULL
                       && tc_tune_buffer_bytes(plan, bytes) == 0;
    for (int i = 0; ok && i < plan->nbuffers; i++) {
        if (bytes[i] == 0) {
            continue;
        }
        void *zeros = calloc(1, (size_t)bytes[i]);
        ok = zeros != NULL
             && a->cuMemAlloc(&b.bufs[i], (size_t)bytes[i]) == 0
             && a->cuMemcpyHtoD(b.bufs[i], zeros, (size_t)bytes[i]) == 0;
        free(zeros);
    }
    ok = ok && a->cuEventCreate(&b.ev[0], 0) == 0
         && a->cuEventCreate(&b.ev[1], 0) == 0;
    double best_t = ok ? time_variant(plan, device, sm, nsm, 0, &b) : -1;
    for (int v = 1; best_t > 0 && v < TC_PTX_VARIANTS; v++) {
        double t = time_variant(plan, device, sm, nsm, v, &b);
        if (t > 0 && t < 0.97 * best_t) {
            best_t = t;
            best = v;
        }
    }
    if (a->cuCtxSynchronize != NULL) {
        a->cuCtxSynchronize();
    }
    for (int i = 0; b.bufs != NULL && i < plan->nbuffers; i++) {
        if (b.bufs[i] != 0) {
            a->cuMemFree(b.bufs[i]);
        }
    }
    for (int e = 0; e < 2; e++) {
        if (b.ev[e] != NULL) {
            a->cuEventDestroy(b.ev[e]);
        }
    }
    free(b.bufs);
    free(bytes);
    return best_t > 0 ? best : -1;
}

int
tc_gpu_autotune(const tc_plan *plan, int device, int sm, int nsm)
{
    char err[512], desc[64], *stored;
    const tc_cu_api *a = tc_cu_load(err, sizeof(err));
    if (a == NULL || plan->nkernels == 0 || a->cuMemAlloc == NULL
        || a->cuMemFree == NULL || a->cuMemcpyHtoD == NULL
        || a->cuEventCreate == NULL || a->cuEventRecord == NULL
        || a->cuEventSynchronize == NULL || a->cuEventElapsedTime == NULL
        || a->cuEventDestroy == NULL
        || tc_cu_make_current(device, err, sizeof(err)) < 0) {
        return 0;
    }
    snprintf(desc, sizeof(desc), "ptx sm=%d nsm=%d", sm, nsm);
    uint64_t key = tc_tune_plan_key(plan, desc);
    int variant;
    if ((stored = tc_tune_lookup("cuda", key)) != NULL) {
        int ok = sscanf(stored, "variant %d", &variant) == 1
                 && variant >= 0 && variant < TC_PTX_VARIANTS;
        free(stored);
        if (ok) {
            tc_tune_counters.hits++;
            return variant;
        }
    }
    double t0 = tc_tune_now();
    variant = tune(plan, device, sm, nsm, a);
    tc_tune_counters.runs++;
    tc_tune_counters.seconds += tc_tune_now() - t0;
    if (variant < 0) {
        return 0;
    }
    snprintf(desc, sizeof(desc), "variant %d\n", variant);
    (void)tc_tune_store("cuda", key, desc);
    return variant;
}
