/* jit.h - CPU code generation with libgccjit and the per-call executor.
 *
 * tc_jit_compile turns a kernel plan into machine code: every kernel of the
 * plan goes into ONE gccjit context (one assembler/linker run), compiled at
 * -O3 with an -march detected at startup (libgccjit rejects "native").
 * tc_jit_run executes it for one call: allocates outputs through torch,
 * splits large kernels across a thread pool, returns the output tensors.
 */
#ifndef TCJIT_JIT_H
#define TCJIT_JIT_H

#include <Python.h>
#include "../graph/schedule.h"
#include "../runtime/backend.h"

typedef struct tc_compiled tc_compiled;

/* The functions below as a backend (../runtime/backend.h): handles are
 * tc_compiled, device is ignored, code_kind is tc_jit_cflags. */
extern const tc_backend tc_jit_backend;

/* Takes ownership of plan.  NULL with a Python exception set on failure.
 * If log_code is non-zero the pseudo-source of every kernel is returned in
 * *code_text (malloc'd) for TCJIT_LOGS=output_code. */
tc_compiled *tc_jit_compile(tc_plan *plan, char **code_text);
void tc_jit_free(tc_compiled *c);

/* inputs: graph inputs (torch.Tensor, borrowed), ninputs of them.
 * outputs: filled with new references, one per graph output.
 * Returns 0, or -1 with a Python exception set. */
int tc_jit_run(tc_compiled *c, PyObject *const *inputs, Py_ssize_t ninputs,
               PyObject **outputs);

int tc_jit_nkernels(const tc_compiled *c);

/* Called once at module init: imports torch pieces the executor needs,
 * detects the CPU, starts nothing (the pool starts lazily). */
int tc_jit_init(void);

/* Parallel compile: a plan's kernels are compiled by up to n worker
 * processes (1: serially in this process; 0: one per online CPU, at most
 * 8, with 4 CPUs or more, else 1).  See docs/cache.md. */
void tc_jit_set_compile_workers(int n);

/* Forgets which kernels earlier plans compiled (tcjit.reset()): later
 * plans compile theirs or read the on-disk cache again. */
void tc_jit_forget_shared(void);

/* Seconds spent compiling plans' kernels (cache lookups, gcc, loading)
 * since the process started: tcjit.counters()["kernel_compile_seconds"]. */
double tc_jit_compile_seconds(void);

/* Kernels with at least n elements are split across the thread pool. */
void tc_jit_set_parallel_threshold(int64_t n);

/* Compile-time flags chosen for this CPU, e.g. "-O3 -march=x86-64-v3". */
const char *tc_jit_cflags(void);

#endif
