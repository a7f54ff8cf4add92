/* autotune.h - max-autotune for CUDA (docs/autotune.md), private to
 * src/gpu. */
#ifndef TCJIT_GPU_AUTOTUNE_H
#define TCJIT_GPU_AUTOTUNE_H

#include "../graph/schedule.h"

/* The ptx.h variant to compile plan with on device (compute capability
 * sm, nsm SMs): the table's entry, or the candidate whose kernels took the
 * least time (CUDA events on scratch device memory; the winner is stored).
 * Never fails: 0 (the default) when the candidates cannot be timed.  The
 * caller holds no GIL requirement (no Python here). */
int tc_gpu_autotune(const tc_plan *plan, int device, int sm, int nsm);

#endif
