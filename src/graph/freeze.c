/* freeze.c - rebuild a graph with folded nodes (freeze.h). */
#include "freeze.h"

#include <stdlib.h>
#include <string.h>

#include "ops.h"

/* The folded node's replacement in ng: an input, or the convolution over
 * the new weight and bias.  Its id, or -1. */
static int
push_fold(tc_graph *ng, const tc_graph *g, const tc_fold *f, const int *map,
          char *err, size_t errlen)
{
    const tc_node *old = &g->nodes[f->node];
    if (f->kind == TC_FOLD_CONST) {
        if (f->dt[0] != old->dtype
            || !tc_layout_same_sizes(&f->layout[0], &old->layout)
            || !tc_layout_same_strides(&f->layout[0], &old->layout)) {
            tc_set_err(err, errlen, "folded value of node %d has another "
                       "dtype or layout", f->node);
            return -1;
        }
        return tc_graph_input(ng, f->dt[0], &f->layout[0]);
    }
    const tc_node *conv = &g->nodes[f->conv];
    if (conv->kind != TC_NODE_OP || conv->nin < 2 || f->conv >= f->node
        || !tc_layout_same_sizes(&conv->layout, &old->layout)) {
        tc_set_err(err, errlen, "node %d is no convolution under node %d",
                   f->conv, f->node);
        return -1;
    }
    int w = tc_graph_input(ng, f->dt[0], &f->layout[0]);
    int b = w < 0 ? -1 : tc_graph_input(ng, f->dt[1], &f->layout[1]);
    if (b < 0) {
        tc_set_err(err, errlen, "out of memory");
        return -1;
    }
    tc_node nd = *conv;
    nd.in[0] = map[conv->in[0]];
    nd.in[1] = w;
    nd.in[2] = b;
    nd.nin = 3;
    /* the batch norm's result layout: what eager hands the users */
    nd.layout = old->layout;
    nd.requires_grad = 0;
    return tc_graph_push_op(ng, &nd, err, errlen);
}

int
tc_graph_fold(tc_graph *g, int n, const tc_fold *folds, char *err,
              size_t errlen)
{
    int nn = g->nnodes;
    int *map = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    tc_graph *ng = tc_graph_new();
    int rc = -1, next = 0;
    if (map == NULL || ng == NULL) {
        tc_set_err(err, errlen, "out of memory");
        goto done;
    }
    ng->ninputs = g->ninputs;
    for (int i = 0; i < nn; i++) {
        if (next < n && folds[next].node == i) {
            map[i] = push_fold(ng, g, &folds[next++], map, err, errlen);
            if (map[i] < 0) {
                goto done;
            }
            continue;
        }
        map[i] = tc_graph_push_mapped(ng, &g->nodes[i], map);
        if (map[i] < 0) {
            tc_set_err(err, errlen, "out of memory");
            goto done;
        }
    }
    if (next != n) {
        tc_set_err(err, errlen, "folds not in ascending node order");
        goto done;
    }
    tc_graph_take_nodes(g, ng, map);
    rc = 0;
done:
    tc_graph_free(ng);
    free(map);
    return rc;
}
