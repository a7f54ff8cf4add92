/* colsum.h - sums over leading dims of CPU graphs as torch.sum calls. */
#ifndef TCJIT_COLSUM_H
#define TCJIT_COLSUM_H

#include <Python.h>

#include "../graph/graph.h"

/* Turns g's float sums whose reduced dims leave the operand's innermost
 * dim (a column sum: the bias gradient sum(g, 0)), of at least a few
 * rows and columns, into generic extern calls of torch.sum.  For tcjit's
 * own CPU code generator, on graphs that record no autograd (inference,
 * backward graphs), compiled for their sizes: a size-generic compile
 * keeps its column reductions (which sums turn depends on the sizes, and
 * the kernels left around a turned one are a schedule of their own, so
 * sizes 1..64 of log_softmax(x, 0) compiled three times).  The number
 * turned, or -1 with an exception. */
int tc_cpu_column_sums(tc_graph *g);

#endif
