/* bn_lower.h - eval-mode batch norm as pointwise ops.
 *
 * torch.batch_norm with training=False reads its running statistics and
 * writes nothing, so it is a per-channel affine map of its input.  As a
 * generic extern node it is three torch kernels per call (CUDA: invstd,
 * the transform, a copy into the graph's buffer) between the convolution
 * before it and the ReLU / residual add after it; as registry ops it fuses
 * into one kernel with them, which is what Inductor does.
 *
 * Which extern nodes are such calls is decided above this stage (the call
 * table needs Python: frame_eval/bn_eval.c); this file only rewrites the
 * graph, with the arithmetic of the eager kernel the graph's device runs.
 */
#ifndef TCJIT_BN_LOWER_H
#define TCJIT_BN_LOWER_H

#include "graph.h"

typedef struct {
    int node;          /* the torch.batch_norm extern node */
    int x;             /* operands (node ids); weight / bias -1: None */
    int weight, bias, mean, var;
    double eps;
} tc_bn_eval;

/* Replaces each bns[k].node (ascending, each once) whose operands this
 * pass can compute as eager does (see bn_lower.c) by pointwise ops over
 * its operands, laid out as the node was; the others stay externs.  Node
 * ids change; outputs are remapped; the old nodes stay for DCE.  Returns
 * the number of nodes lowered, or -1 with a message in err. */
int tc_graph_lower_batch_norm(tc_graph *g, int n, const tc_bn_eval *bns,
                              char *err, size_t errlen);

#endif
