/* reinplace.h - writes of a slice of a written-back input done in place
 * (Inductor's reinplace pass over functionalized graphs).
 *
 * The tracer models `x[:, :, t:t+1] = k` on a graph input x as data flow
 * (DESIGN.md, "Tensor mutation is data flow"): x's new value is
 * cat(x's elements before the box, k, x's elements after it) and the
 * runtime copies that value back into x after the run (graph.h
 * output_writes).  For a KV cache that is two copies of the whole cache
 * per step where eager writes one row.  This pass turns such a value into
 * one write_box node (ops.c): k copied into the box of x's own memory,
 * the node's value x itself, so the write-back finds the output is the
 * input and copies nothing.
 */
#ifndef TCJIT_REINPLACE_H
#define TCJIT_REINPLACE_H

#include "graph.h"

/* Rewrites every written-back value of g that is its input's elements
 * with one box replaced, when no other node reads the input's old
 * elements (reinplace.c says why that suffices).  For tcjit's own code
 * generators, on graphs without autograd.  Node ids change when a value
 * was rewritten (DCE of the views it no longer reads; outputs are
 * remapped).  The number of values rewritten, or -1 when out of memory. */
int tc_graph_reinplace(tc_graph *g);

#endif
