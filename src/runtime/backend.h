/* backend.h - the interface every code generator implements: what the
 * frame_eval stage compiles a plan with and what a cache entry calls.
 *
 * A backend turns a scheduled plan (../graph/schedule.h) into an opaque
 * handle and runs that handle on a call's input tensors.  src/jit (CPU,
 * libgccjit) and src/gpu (CUDA, PTX) each export one const instance; the
 * cache entry holds the instance and the handle, so the per-call path is
 * one indirect call whichever backend made it, and frame_eval includes no
 * backend's internals.
 *
 * A custom Python backend (tcjit.compile(backend=...)) is not one of
 * these: it compiles a graph description, not a plan, and its callable
 * runs as tcjit's own work (frame_eval/eval_frame.c), so the entry keeps it
 * apart (cache.h: backend_fn).
 */
#ifndef TCJIT_BACKEND_H
#define TCJIT_BACKEND_H

#include <Python.h>
#include "../graph/schedule.h"

typedef struct tc_backend {
    const char *name;  /* "cpu", "cuda": for messages */

    /* Takes ownership of plan.  device: -1 for the CPU, else the CUDA
     * device index (a backend for one kind ignores it).  With code_text
     * != NULL, the generated code is returned in *code_text (malloc'd) for
     * TCJIT_LOGS=output_code.  The handle, or NULL with an exception. */
    void *(*compile)(tc_plan *plan, int device, char **code_text);

    /* inputs: the graph inputs (tensors, borrowed), ninputs of them;
     * outputs: filled with new references, one per graph output.  0, or -1
     * with an exception (no output left set). */
    int (*run)(void *handle, PyObject *const *inputs, Py_ssize_t ninputs,
               PyObject **outputs);

    void (*free)(void *handle);  /* NULL is a no-op */

    int (*nkernels)(const void *handle);

    /* Kernels this compile built (dynamic shapes: the others were shared
     * size-generic kernels).  NULL: all of them (nkernels). */
    int (*ncompiled)(const void *handle);

    /* What output_code logs say the code is: "PTX", "-O3 -march=..." */
    const char *(*code_kind)(void);
} tc_backend;

#endif
