/* autograd.h - a graph that requires grad compiles as an autograd node
 * (autograd.c; the Python side is python/tcjit/_autograd.py). */
#ifndef TCJIT_AUTOGRAD_H
#define TCJIT_AUTOGRAD_H

#include "cache.h"

/* 1 when a node of g requires grad (graph.h tc_node.requires_grad). */
int tc_graph_requires_grad(const tc_graph *g);

/* Plan the autograd node of g: desc is the graph's description (what
 * custom backends get).  The plan (a new reference in *plan) appends to
 * g's outputs the values the backward reads (saved tensors).  0; 1 with
 * *reason (a new str) when the graph must run eagerly (plan.reason); -1
 * with an exception. */
int tc_autograd_plan(tc_graph *g, PyObject *desc, PyObject **plan,
                     PyObject **reason);

/* After compile_auto filled e->be / e->code for g (outputs included
 * the saved ones): move them into a runner object and make
 * e->backend_fn the autograd node's apply (plan.finish(runner)).  The
 * plan reference is consumed.  0, or -1 with an exception. */
int tc_autograd_finish(tc_entry *e, PyObject *plan, int nresults);

/* Move e->be / e->code into a runner, a Python callable
 * runner(*inputs) -> tuple of noutputs tensors that owns the compiled
 * code (keep: extern_call.h tc_extern_set_keep, or NULL).  A new
 * reference, or NULL with an exception (the entry unchanged). */
PyObject *tc_runner_new(tc_entry *e, int noutputs, PyObject *keep);

#endif
