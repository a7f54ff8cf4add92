/* colsum.c - sums over leading dims of CPU graphs as torch.sum calls
 * (colsum.h).
 *
 * Why: the libgccjit emitter reduces a row in vector lanes of consecutive
 * points (../jit/gccjit_emit.c).  A column sum, the bias gradient
 * sum(g, 0) of a linear layer or a layer norm's weight gradient, has its
 * points a row apart: every lane is a strided load and nothing
 * vectorizes.  On the 2-core CI machine sum(g, 0) of a [256, 1024] g took
 * 422 us against eager's 27, of a [4096, 768] one 4.4 ms against 0.14,
 * and GPT's GELU backward fused with its bias sum [256, 1024] 2.1 ms
 * against 0.18 for the GELU backward alone: the nanoGPT training step
 * ran slower than eager.  Until the CPU emitter has column tiles as the
 * PTX one does (../gpu/ptx_emit.c column_tiles), such a sum is eager's
 * own kernel, the same bits as eager's, and its operand a kernel of its
 * own.  The GPU keeps its column tiles. */
#include "colsum.h"

#include "../graph/extern.h"
#include "../graph/ops.h"
#include "../runtime/extern_table.h"
#include "../pyrt/pyvalue.h"

#include <string.h>

/* Rows and columns below which the fused kernel is as fast: a sum of a
 * few rows, or of a few columns (nearly a whole-tensor sum). */
#define COLSUM_MIN 8

/* Whether node id is a float sum over dims that leave its operand's
 * innermost (stride 1) dim, of at least COLSUM_MIN rows and columns. */
static int
is_column_sum(const tc_graph *g, int id)
{
    const tc_node *n = &g->nodes[id];
    if (n->kind != TC_NODE_OP || n->nin != 1
        || strcmp(tc_ops[n->op].name, "sum") != 0
        || (n->dtype != TC_F32 && n->dtype != TC_F64)
        || g->nodes[n->in[0]].dtype != n->dtype) {
        return 0;
    }
    const tc_layout *l = &g->nodes[n->in[0]].layout;
    int64_t rows = 1, cols = 1;
    int inner = -1;
    for (int d = 0; d < l->ndim; d++) {
        if (l->sizes[d] > 1 && l->strides[d] == 1) {
            inner = d;
        }
        if (n->red_mask & (1u << d)) {
            rows *= l->sizes[d];
        }
        else {
            cols *= l->sizes[d];
        }
    }
    return inner >= 0 && !(n->red_mask & (1u << inner))
           && rows >= COLSUM_MIN && cols >= COLSUM_MIN;
}

/* The call table's entry of torch.sum(x, dims, keepdim) for node n, or
 * -1 with an exception. */
static int
sum_call(const tc_graph *g, const tc_node *n)
{
    static PyObject *fn;        /* torch.sum, kept */
    if (fn == NULL && (fn = tc_torch_attr("sum")) == NULL) {
        return -1;
    }
    int64_t dims[TC_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < g->nodes[n->in[0]].layout.ndim; d++) {
        if (n->red_mask & (1u << d)) {
            dims[nd++] = d;
        }
    }
    PyObject *x = tc_xtable_operand(0);
    PyObject *t = x ? tc_int_tuple(nd, dims) : NULL;
    if (t == NULL) {
        return -1;
    }
    PyObject *argv[3] = {x, t, n->keepdim ? Py_True : Py_False};
    char err[256];
    int call = tc_xtable_intern(fn, 3, argv, NULL, 1, err, sizeof(err));
    Py_DECREF(t);
    if (call == -2) {
        PyErr_Format(PyExc_RuntimeError, "tcjit: torch.sum call: %s", err);
        return -1;
    }
    return call;
}

int
tc_cpu_column_sums(tc_graph *g)
{
    int turned = 0;
    for (int i = 0; i < g->nnodes; i++) {
        if (!is_column_sum(g, i)) {
            continue;
        }
        int call = sum_call(g, &g->nodes[i]);
        char err[128];
        if (call < 0) {
            return -1;
        }
        if (tc_graph_reduction_as_extern(g, i, call, err, sizeof(err)) < 0) {
            PyErr_Format(PyExc_RuntimeError, "tcjit: %s", err);
            return -1;
        }
        turned++;
    }
    return turned;
}
