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

/* torch.batch_norm (borrowed, kept), or NULL with an exception. */
static PyObject *
torch_batch_norm(void)
{
    static PyObject *fn;
    if (fn == NULL) {
        PyObject *torch = PyImport_ImportModule("torch");
        fn = torch ? PyObject_GetAttrString(torch, "batch_norm") : NULL;
        Py_XDECREF(torch);
    }
    return fn;
}

/* Slot i of the call: the operand's node id (*node), or its value. */
static PyObject *
slot(const tc_node *n, PyObject *args, PyObject *opk, int i, int *node)
{
    long k = PyLong_AsLong(PyTuple_GET_ITEM(opk, i));
    *node = k >= 0 && k < n->nin ? n->in[k] : -1;
    return PyTuple_GET_ITEM(args, i);
}

/* 1 with *b filled when node id calls torch.batch_norm in eval mode with
 * running statistics, 0 when not, -1 with an exception. */
static int
recognize(const tc_graph *g, int id, PyObject *bn, tc_bn_eval *b)
{
    const tc_node *n = &g->nodes[id];
    if (!tc_node_has_effects(g, id) || n->xattr[TC_XA_GENERIC_ITEMS] != 0) {
        return 0;
    }
    PyObject *call = tc_xtable_args((int)n->xattr[TC_XA_GENERIC_CALL]);
    if (call == NULL) {
        return -1;
    }
    PyObject *args = PyTuple_GET_ITEM(call, 1);
    PyObject *opk = PyTuple_GET_ITEM(call, 2);
    int r = 0;
    if (PyTuple_GET_ITEM(call, 0) != bn || PyTuple_GET_SIZE(PyTuple_GET_ITEM(call, 3)) != 0
        || PyTuple_GET_SIZE(args) < 8) {
        goto done;
    }
    int x, training, momentum, eps;
    slot(n, args, opk, 0, &x);
    PyObject *w = slot(n, args, opk, 1, &b->weight);
    PyObject *bias = slot(n, args, opk, 2, &b->bias);
    slot(n, args, opk, 3, &b->mean);
    slot(n, args, opk, 4, &b->var);
    PyObject *tv = slot(n, args, opk, 5, &training);
    slot(n, args, opk, 6, &momentum);
    PyObject *ev = slot(n, args, opk, 7, &eps);
    if (x < 0 || b->mean < 0 || b->var < 0 || training >= 0 || eps >= 0
        || tv != Py_False || (b->weight < 0 && w != Py_None)
        || (b->bias < 0 && bias != Py_None)
        || !(PyFloat_CheckExact(ev) || PyLong_CheckExact(ev))) {
        goto done;
    }
    b->node = id;
    b->x = x;
    b->eps = PyFloat_AsDouble(ev);
    r = b->eps == -1.0 && PyErr_Occurred() ? -1 : 1;
done:
    Py_DECREF(call);
    return r;
}

int
tc_lower_eval_batch_norms(tc_graph *g)
{
    PyObject *bn = NULL;
    tc_bn_eval *bns = NULL;
    int n = 0, rc = -1;
    for (int i = 0; i < g->nnodes; i++) {
        if (!tc_node_has_effects(g, i)) {
            continue;
        }
        if (bn == NULL && (bn = torch_batch_norm()) == NULL) {
            goto done;
        }
        if (bns == NULL
            && (bns = PyMem_Calloc((size_t)g->nnodes, sizeof(*bns))) == NULL) {
            PyErr_NoMemory();
            goto done;
        }
        int r = recognize(g, i, bn, &bns[n]);
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
