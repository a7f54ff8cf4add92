/* gpu.h - GPU code generation (PTX) and the per-call executor; mirrors
 * src/jit/jit.h.
 *
 * tc_gpu_compile emits one PTX module for all kernels of a plan (ptx.h),
 * loads it on the device (driver.h: libcuda through dlopen, module cache)
 * and prepares everything that depends only on the static shapes: grids,
 * torch.empty_strided arguments for outputs and temporaries.  tc_gpu_run
 * allocates the outputs through torch on cuda:<device> (so the caching
 * allocator and torch's stream semantics apply), reads data_ptr()s and
 * launches the kernels on torch's current stream of that device.
 */
#ifndef TCJIT_GPU_H
#define TCJIT_GPU_H

#include <Python.h>
#include "../graph/schedule.h"
#include "../runtime/backend.h"
/* the PTX emitter (plain C; tc_gpu_emit_ptx_for_plan for ptxas checks) */
#include "ptx.h"

typedef struct tc_gpu_compiled tc_gpu_compiled;

/* The functions below as a backend (../runtime/backend.h): handles are
 * tc_gpu_compiled, code_kind is "PTX". */
extern const tc_backend tc_gpu_backend;

/* Takes ownership of plan.  NULL with a Python exception set on failure
 * (RuntimeError naming the kernel and the CUresult for driver errors).
 * With code_text != NULL the PTX module is returned in *code_text
 * (malloc'd) for TCJIT_LOGS=output_code. */
tc_gpu_compiled *tc_gpu_compile(tc_plan *plan, int device, char **code_text);
void tc_gpu_free(tc_gpu_compiled *c);

/* inputs: graph inputs (CUDA tensors on the compiled device, borrowed).
 * outputs: filled with new references, one per graph output.
 * Returns 0, or -1 with a Python exception set.  Asynchronous, like eager:
 * kernels are queued on torch.cuda.current_stream(device). */
int tc_gpu_run(tc_gpu_compiled *c, PyObject *const *inputs,
               Py_ssize_t ninputs, PyObject **outputs);

int tc_gpu_nkernels(const tc_gpu_compiled *c);

/* Kernels whose module this compile loaded: all of them for a static
 * plan; for a dynamic one (tc_plan.dynamic) those of its size-generic
 * kernels that no earlier plan had (ptx.h) plus, when its module was new,
 * the kernels with constant sizes. */
int tc_gpu_ncompiled(const tc_gpu_compiled *c);

/* Whether CUDA can be used at all (libcuda loads, cuInit succeeds); never
 * raises.  Lets callers fall back to the CPU path. */
int tc_gpu_available(void);

#endif
