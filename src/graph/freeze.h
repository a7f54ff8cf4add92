/* freeze.h - the graph half of freezing (docs/freezing.md): nodes whose
 * values are computed once at compile time become graph inputs that the
 * compiled entry supplies itself (its constants).
 *
 * Which nodes fold, and their values, is decided above this stage (the
 * values need torch: python/tcjit/_freezing.py); this file only rewrites
 * the graph, so that the scheduler sees an ordinary input where an op was.
 */
#ifndef TCJIT_FREEZE_H
#define TCJIT_FREEZE_H

#include "graph.h"

typedef enum {
    TC_FOLD_CONST,  /* node's value is constant 0 */
    TC_FOLD_CONV    /* node (a batch_norm in eval mode over the output of
                       convolution `conv`) is conv(conv's input, constant
                       0 as weight, constant 1 as bias) */
} tc_fold_kind;

typedef struct {
    tc_fold_kind kind;
    int node;
    int conv;
    tc_dtype dt[2];       /* the constants' dtypes and layouts */
    tc_layout layout[2];
} tc_fold;

/* Rewrite g with folds[0..n-1] (ascending node ids, each node once).
 * The constants become new graph inputs numbered from g->ninputs on, in
 * fold order (a TC_FOLD_CONV adds two).  A TC_FOLD_CONST's layout must be
 * the node's own.  Nodes nothing reads any more stay for DCE
 * (tc_graph_optimize).  Node ids change; outputs are remapped.  0, or -1
 * with a message in err. */
int tc_graph_fold(tc_graph *g, int n, const tc_fold *folds, char *err,
                  size_t errlen);

#endif
