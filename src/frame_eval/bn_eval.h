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

#endif
