/* eval_frame.h - the PEP 523 hook and its runtime loop; the public header
 * of src/frame_eval/ (module.c sees the stage through it: the process state
 * of report.h and the code states of cache.h come with it).
 *
 * The hook decides per frame: pass through (SKIP, generators, tracing,
 * frames already running), run a cached entry whose guards pass, or convert
 * the frame (trace + compile) and run the new entry.  A compiled entry's
 * RETURN exit pushes the result and resumes the frame at its own return
 * instruction, so CPython pops and clears the frame as usual.
 */
#ifndef TCJIT_EVAL_FRAME_H
#define TCJIT_EVAL_FRAME_H

#include "report.h"
#include "cache.h"

/* Turn the hook on for every frame (enable) or only for frames that a
 * tcjit.compile wrapper asks for. */
void tc_set_enabled(int on);
int tc_is_enabled(void);
void tc_install_hook(void);

/* Called by a compile wrapper around the call of its function: the next
 * frame running `code` is compiled for `backend`, and so is every frame
 * it calls (scope), as torch.compile compiles what its function calls;
 * library roots (torch, the standard library) are skipped as under
 * enable().  Per thread: another thread's calls are not in the scope. */
typedef struct {
    PyObject *code;
    PyObject *backend;
    PyObject *scope;
} tc_pending;

tc_pending tc_set_pending(PyObject *code, PyObject *backend);
void tc_restore_pending(tc_pending saved);

/* Nanoseconds per guard evaluation (cache lookup: fetch, check, release)
 * of the entries at the start of fn's code, for a call fn(*args) with
 * positional arguments; for bench/guards.py.  -1 with an exception. */
double tc_guard_time(PyObject *fn, PyObject *args, long n);

/* _C.cudagraph_moved(inputs, indices, ptrs): the first k with
 * inputs[indices[k]].data_ptr() != ptrs[k], or -1 (cudagraphs.c: the
 * reduce-overhead recorder's per-call check, in C for speed). */
PyObject *tc_cudagraph_moved(PyObject *m, PyObject *args);

#endif
