/* tensor_alloc.h - plan buffers as torch tensors, graph outputs as eager
 * returns them; shared by the CPU (runtime.c) and CUDA (gpu_runtime.c)
 * executors, which differ only in the device and in how they run kernels.
 *
 * Everything that depends only on the (static, guarded) shapes is built at
 * compile time (tc_alloc_prepare): the torch.empty_strided argument vectors
 * of OUTPUT (and, for a device backend, TEMP) buffers, the torch.as_strided
 * arguments of view outputs, which buffers need a data pointer.  A call
 * then does one vectorcall per allocated buffer and one data_ptr() per used
 * tensor (tc_alloc_bind), and one as_strided per view output
 * (tc_alloc_outputs).
 */
#ifndef TCJIT_TENSOR_ALLOC_H
#define TCJIT_TENSOR_ALLOC_H

#include <Python.h>
#include "../graph/schedule.h"
#include "arena.h"
#include "torch_tensor.h"

typedef struct tc_tensor_alloc {
    const tc_plan *plan;    /* borrowed from the owner of this struct */
    const char *who;        /* error message prefix, "tcjit cpu" */
    int temp_tensors;       /* TEMPs are uint8 tensors, else aligned_alloc */
    int max_args;           /* most arguments of one kernel */
    PyObject **alloc_argv;  /* [nbuffers][4]: sizes, strides, dtype, device */
    PyObject **view_argv;   /* [noutputs][3]: sizes, strides, offset; NULL
                               for outputs that are not views */
    size_t *temp_bytes;     /* [nbuffers]: TEMP allocation size */
    char *needs_ptr;        /* [nbuffers]: some kernel touches it */
    int *first_step;        /* [nbuffers]: step that writes it, -1 none */
    int *last_step;         /* [nbuffers]: last step that reads it; INT_MAX
                               for what the call returns */
    /* The same, per step (a call walks these, not every buffer):
     * buffers step s allocates are born[born_at[s] .. born_at[s + 1]),
     * those it drops after running are dead[dead_at[s] .. dead_at[s + 1]) */
    int *born_at, *born;
    int *dead_at, *dead;
    /* CPU: call-local buffers at fixed places in one kept allocation
     * (arena.h); NULL when none qualifies or on a device */
    tc_arena *arena;
    PyObject *device;
} tc_tensor_alloc;

/* Fills a (zeroed by the caller) for plan p on device (a torch device or
 * its string, borrowed).  temp_tensors: allocate TEMP buffers as flat uint8
 * tensors on device instead of host memory.  Validates the plan.  0, or -1
 * with an exception; a is then cleared with tc_alloc_clear either way. */
int tc_alloc_prepare(tc_tensor_alloc *a, const tc_plan *p, PyObject *device,
                     int temp_tensors, const char *who);
void tc_alloc_clear(tc_tensor_alloc *a);

/* Per call: objs[b] gets a new reference to every input's tensor, ptrs[b]
 * its data pointer where a kernel uses it.  Buffers that steps write are
 * allocated just before their first step (tc_alloc_step_begin: a tensor in
 * objs[b], or host memory for a CPU TEMP) and dropped right after the last
 * step that reads them (tc_alloc_step_end), so a graph of a whole model
 * holds about what eager holds, not every intermediate at once (fresh
 * large allocations are page faults).  objs and ptrs must be zeroed; call
 * tc_alloc_release afterwards, also on failure. */
int tc_alloc_bind(const tc_tensor_alloc *a, PyObject *const *inputs,
                  Py_ssize_t ninputs, PyObject **objs, void **ptrs);
int tc_alloc_step_begin(const tc_tensor_alloc *a, int step, PyObject **objs,
                        void **ptrs);
void tc_alloc_step_end(const tc_tensor_alloc *a, int step, PyObject **objs,
                       void **ptrs);
void tc_alloc_release(const tc_tensor_alloc *a, PyObject **objs,
                      void **ptrs);

/* outputs[j]: the output buffer's tensor, or for a view output an alias
 * made with torch.as_strided.  On failure none is left set. */
int tc_alloc_outputs(const tc_tensor_alloc *a, PyObject *const *objs,
                     PyObject **outputs);

/* va[0..2] for tc_alloc_view (torch_tensor.h) of the view o describes
 * (new references; -1 with an exception, va partly set). */
int tc_alloc_view_argv(PyObject **va, const tc_output_desc *o);

#endif
