/* bn_eval.h - eval-mode torch.batch_norm calls of a graph lowered into
 * pointwise ops (../graph/bn_lower.h), so they fuse with their
 * neighbours. */
#ifndef TCJIT_BN_EVAL_H
#define TCJIT_BN_EVAL_H

#include <Python.h>

#include "../graph/graph.h"

/* Finds g's generic extern nodes that call torch.batch_norm with
 * training=False and running statistics, and lowers those the graph pass
 * can compute as eager does.  For tcjit's own backends, after freezing
 * (which folds the ones after a convolution into its weights).  The
 * number lowered (g then wants tc_graph_optimize), or -1 with an
 * exception. */
int tc_lower_eval_batch_norms(tc_graph *g);

/* Whether generic extern call `call` (../runtime/extern_table.h) is such
 * a torch.batch_norm: 1 with ops[] the operand indices of input, weight,
 * bias, running_mean and running_var (weight / bias -1 when None) and
 * *eps; 0 when not; -1 with an exception.  Freezing matches the same
 * calls (python/tcjit/_freezing.py). */
int tc_bn_eval_call(int call, int ops[5], double *eps);

#endif
