/* writeback.h - the runtime half of in-place ops (tracer/mutation.c):
 * after a segment's graph ran, its final values of the inputs it wrote go
 * into the inputs' storage, and version counters move as eager moves
 * them. */
#ifndef TCJIT_WRITEBACK_H
#define TCJIT_WRITEBACK_H

#include "../tracer/tracer.h"

/* 1 if an input the segment writes shares memory with another of its
 * inputs (the graph assumed they do not: the segment must run in
 * CPython), 0 if not, -1 with an exception. */
int tc_writeback_aliased(const tc_writebacks *w, PyObject *const *inputs);

/* 1 if an input that requires grad, written by in-place ops under grad
 * mode, is a leaf or a view (eager raises for a leaf, and has rules of
 * its own for views): the segment must run in CPython, which gives
 * eager's error or history.  0 if not, -1 with an exception. */
int tc_writeback_eager_error(const tc_writebacks *w, PyObject *const *inputs);

/* Copy the written values into the inputs (each in the grad mode of its
 * in-place ops: autograd records a write under grad mode as eager's
 * would), set version counters.  0, or -1 with an exception. */
int tc_writeback_apply(const tc_writebacks *w, PyObject *const *inputs,
                       PyObject *const *outputs);

/* torch._C._set_grad_enabled(on) (an exit's tc_exit.set_grad): 0, or
 * -1 with an exception. */
int tc_set_grad_mode(int on);

#endif
