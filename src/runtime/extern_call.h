/* extern_call.h - the extern steps of a plan (../graph/extern.h), run by
 * calling torch; shared by the CPU (runtime.c) and CUDA (gpu_runtime.c)
 * executors.
 *
 * The callable and every argument that depends only on the graph (strides,
 * paddings, keyword names, is_causal, ...) are built at compile time, so a
 * call is one vectorcall plus an as_strided per operand that is a view.
 * The result is checked against the layout the graph assumed (kernels after
 * it read it through those strides): other sizes or dtype are an internal
 * error, other strides are fixed with one copy.
 */
#ifndef TCJIT_EXTERN_CALL_H
#define TCJIT_EXTERN_CALL_H

#include <Python.h>
#include "../graph/schedule.h"

typedef struct tc_extern_rt tc_extern_rt;

/* Prepared calls for plan p (borrowed; must outlive the result).  NULL with
 * an exception on failure.  A plan without extern steps gets NULL and no
 * exception: check p->nexterns. */
/* Generic extern calls running on this thread: the Python frames they
 * run (a torch.library.custom_op's implementation) are the op's inside,
 * which the frame hook leaves to CPython, as Dynamo leaves a custom op
 * opaque. */
extern _Thread_local int tc_extern_running;

tc_extern_rt *tc_extern_prepare(const tc_plan *p);
void tc_extern_free(tc_extern_rt *x);

/* Run extern call e: operands from objs (tc_alloc_bind's tensors), result
 * into objs[out_buffer] (a new reference) and, when want_ptr,
 * ptrs[out_buffer].  0, or -1 with an exception (torch's own when the call
 * raised). */
int tc_extern_run(const tc_extern_rt *x, int e, PyObject **objs, void **ptrs,
                  int want_ptr);

/* Training (../frame_eval/autograd.c): while the compiled forward of an
 * autograd node runs, an extern step whose node id is a key of keep calls
 * keep[id](*operands) instead of torch: the op called under grad mode, its
 * autograd graph kept as the node's backward (python/tcjit/_autograd.py),
 * the result returned detached.  keep is a dict (borrowed; NULL: none),
 * per thread; returns the previous one, to be set back after the run. */
PyObject *tc_extern_set_keep(PyObject *keep);

/* Extern node id of g as a Python callable for eager replay of the graph
 * (tcjit.Graph): f(*operands) makes the same torch call a plan's step
 * makes, and conforms the result to the node's layout the same way.  New
 * reference, or NULL with an exception. */
PyObject *tc_extern_callable(const tc_graph *g, int id);

/* "%7 = linear(%3, %4, %5)" lines for TCJIT_LOGS=output_code.  malloc'd. */
char *tc_extern_format(const tc_plan *p, int e);

#endif
