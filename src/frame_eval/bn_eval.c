/* bn_eval.c - which extern nodes are eval-mode batch norms (bn_eval.h).
 *
 * The graph names a generic extern's call by its index in the call table
 * (../runtime/extern_table.h); the table's entry says the callable and the
 * recorded arguments.  F.batch_norm, which nn.BatchNorm*d's forward calls,
 * reaches torch.batch_norm(input, weight, bias, running_mean, running_var,
 * training, momentum, eps, cudnn_enabled) with every argument positional.
 */
#include "bn_eval.h"

#include "../graph/bn_lower.h"
#include "../graph/extern.h"
#include "../runtime/extern_table.h"
#include "../pyrt/pyvalue.h"

/* torch.batch_norm (borrowed, kept), or NULL with an exception. */
static PyObject *
torch_batch_norm(void)
{
    static PyObject *fn;
    if (fn == NULL) {
        fn = tc_torch_attr("batch_norm");
    }
    return fn;
}

int
tc_bn_eval_call(int call, int ops[5], double *eps)
{
    PyObject *bn = torch_batch_norm();
    PyObject *c = bn ? tc_xtable_args(call) : NULL;
    if (c == NULL) {
        return -1;
    }
    PyObject *fn = PyTuple_GET_ITEM(c, 0), *args = PyTuple_GET_ITEM(c, 1);
    PyObject *opk = PyTuple_GET_ITEM(c, 2);
    int r = 0;
    if (fn != bn || PyTuple_GET_SIZE(PyTuple_GET_ITEM(c, 3)) != 0
        || PyTuple_GET_SIZE(args) < 8) {
        goto done;
    }
    /* slots: input, weight, bias, running_mean, running_var (tensors;
     * weight and bias may be None), training, momentum, eps */
    for (int i = 0; i < 5; i++) {
        ops[i] = (int)PyLong_AsLong(PyTuple_GET_ITEM(opk, i));
        if (ops[i] < 0 && (i == 0 || i >= 3
                           || PyTuple_GET_ITEM(args, i) != Py_None)) {
            goto done;
        }
    }
    PyObject *training = PyTuple_GET_ITEM(args, 5);
    PyObject *e = PyTuple_GET_ITEM(args, 7);
    if (PyLong_AsLong(PyTuple_GET_ITEM(opk, 5)) >= 0 || training != Py_False
        || PyLong_AsLong(PyTuple_GET_ITEM(opk, 7)) >= 0
        || !(PyFloat_CheckExact(e) || PyLong_CheckExact(e))) {
        goto done;
    }
    *eps = PyFloat_AsDouble(e);
    r = *eps == -1.0 && PyErr_Occurred() ? -1 : 1;
done:
    Py_DECREF(c);
    return r;
}

/* 1 with *b filled when node id calls torch.batch_norm in eval mode with
 * running statistics, 0 when not, -1 with an exception. */
static int
recognize(const tc_graph *g, int id, tc_bn_eval *b)
{
    const tc_node *n = &g->nodes[id];
    int ops[5];
    if (!tc_node_has_effects(g, id) || n->xattr[TC_XA_GENERIC_ITEMS] != 0) {
        return 0;
    }
    int r = tc_bn_eval_call((int)n->xattr[TC_XA_GENERIC_CALL], ops, &b->eps);
    for (int i = 0; r == 1 && i < 5; i++) {
        r = ops[i] < n->nin ? 1 : 0;
    }
    if (r != 1) {
        return r;
    }
    int *slot[5] = {&b->x, &b->weight, &b->bias, &b->mean, &b->var};
    for (int i = 0; i < 5; i++) {
        *slot[i] = ops[i] >= 0 ? n->in[ops[i]] : -1;
    }
    b->node = id;
    return 1;
}

int
tc_lower_eval_batch_norms(tc_graph *g)
{
    tc_bn_eval *bns = NULL;
    int n = 0, rc = -1;
    for (int i = 0; i < g->nnodes; i++) {
        if (!tc_node_has_effects(g, i)) {
            continue;
        }
        if (bns == NULL
            && (bns = PyMem_Calloc((size_t)g->nnodes, sizeof(*bns))) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        int r = recognize(g, i, &bns[n]);
        if (r < 0) {
            goto done;
        }
        n += r;
    }
    if (n == 0) {
        rc = 0;
        goto done;
    }
    char err[256];
    rc = tc_graph_lower_batch_norm(g, n, bns, err, sizeof(err));
    if (rc < 0) {
        PyErr_Format(PyExc_RuntimeError, "lowering batch_norm: %s", err);
    }
done:
    PyMem_Free(bns);
    return rc;
}
