/* autograd.c - a graph that requires grad compiles as an autograd node.
 *
 * The tracer marks the nodes that require grad (graph.h).  Such a graph
 * is planned in Python (python/tcjit/_autograd.py: which values the
 * backward reads, derivative rules from the op registry), its forward
 * compiled by the backend like any graph but with the saved values as
 * extra outputs, and run inside a torch.autograd.Function whose backward
 * is a compiled graph too.  What stays here is the glue: the plan call,
 * the extra outputs, and a runner object that owns the compiled forward
 * so the Function can call it. */
#include "autograd.h"

#include "report.h"
#include "../runtime/extern_call.h"

/* Inputs that require grad read under no_grad make no node that does:
 * such a graph (inference with parameters) runs as plain kernels. */
int
tc_graph_requires_grad(const tc_graph *g)
{
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].kind == TC_NODE_OP && g->nodes[i].requires_grad) {
            return 1;
        }
    }
    return 0;
}

/* ---- the runner: a compiled graph as a Python callable ------------------ */

typedef struct {
    PyObject_HEAD
    const tc_backend *be;
    void *code;
    int ninputs;
    int noutputs;
    PyObject *keep;   /* plan.keep: extern node id -> its call under grad
                         mode (extern_call.h tc_extern_set_keep), or NULL */
} runner;

static void
runner_dealloc(runner *r)
{
    if (r->be != NULL) {
        r->be->free(r->code);
    }
    Py_XDECREF(r->keep);
    Py_TYPE(r)->tp_free((PyObject *)r);
}

/* runner(*inputs) -> tuple of the graph's outputs (saved values last) */
static PyObject *
runner_call(runner *r, PyObject *args, PyObject *kwargs)
{
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
        PyErr_SetString(PyExc_TypeError, "a tcjit runner takes no keywords");
        return NULL;
    }
    if (PyTuple_GET_SIZE(args) != r->ninputs) {
        PyErr_Format(PyExc_TypeError, "a tcjit runner takes %d inputs, got "
                     "%zd", r->ninputs, PyTuple_GET_SIZE(args));
        return NULL;
    }
    PyObject *res = PyTuple_New(r->noutputs);
    if (res == NULL) {
        return NULL;
    }
    PyObject **outs = &PyTuple_GET_ITEM(res, 0);
    PyObject *prev = tc_extern_set_keep(r->keep);
    int rc = r->be->run(r->code, &PyTuple_GET_ITEM(args, 0), r->ninputs,
                        outs);
    tc_extern_set_keep(prev);
    if (rc < 0) {
        /* run fills no slot on failure: the tuple holds NULLs only */
        Py_DECREF(res);
        return NULL;
    }
    return res;
}

static PyTypeObject runner_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tcjit._C.Runner",
    .tp_basicsize = sizeof(runner),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)runner_dealloc,
    .tp_call = (ternaryfunc)runner_call,
    .tp_doc = "A compiled forward graph of an autograd node.",
};

/* ---- plan and finish ------------------------------------------------------ */

static PyObject *
plan_function(void)
{
    static PyObject *fn;
    if (fn == NULL) {
        PyObject *mod = PyImport_ImportModule("tcjit._autograd");
        if (mod == NULL) {
            return NULL;
        }
        fn = PyObject_GetAttrString(mod, "plan");
        Py_DECREF(mod);
    }
    return fn;
}

int
tc_autograd_plan(tc_graph *g, PyObject *desc, PyObject **plan,
                 PyObject **reason)
{
    *plan = NULL;
    *reason = NULL;
    PyObject *fn = plan_function();
    if (fn == NULL) {
        return -1;
    }
    PyObject *p = PyObject_CallOneArg(fn, desc);
    PyObject *why = p ? PyObject_GetAttrString(p, "reason") : NULL;
    if (why == NULL || why != Py_None) {
        Py_XDECREF(p);
        *reason = why;
        return why ? 1 : -1;
    }
    Py_DECREF(why);
    PyObject *saved = p ? PyObject_GetAttrString(p, "saved") : NULL;
    PyObject *seq = saved ? PySequence_Fast(saved, "plan.saved") : NULL;
    Py_XDECREF(saved);
    if (seq == NULL) {
        Py_XDECREF(p);
        return -1;
    }
    Py_ssize_t ns = PySequence_Fast_GET_SIZE(seq);
    int n = g->noutputs + (int)ns;
    int *outs = PyMem_Malloc(sizeof(int) * (size_t)(n ? n : 1));
    if (outs == NULL) {
        PyErr_NoMemory();
        goto error;
    }
    memcpy(outs, g->outputs, sizeof(int) * (size_t)g->noutputs);
    for (Py_ssize_t k = 0; k < ns; k++) {
        long id = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, k));
        if (id < 0 && -1 - id < g->nnodes
            && g->nodes[-1 - id].kind == TC_NODE_INPUT) {
            /* a copy of an input that the graph writes, taken before the
             * write-back: the backward reads its old value (the plan's
             * snapshot) */
            char err[128];
            int in = (int)(-1 - id);
            id = tc_graph_op(g, "clone", 1, &in, TC_F32, err, sizeof(err));
            if (id < 0) {
                PyErr_Format(PyExc_RuntimeError, "tcjit autograd plan: "
                             "%s", err);
                PyMem_Free(outs);
                goto error;
            }
        }
        if (id < 0 || id >= g->nnodes) {
            if (!PyErr_Occurred()) {
                PyErr_Format(PyExc_RuntimeError, "tcjit autograd plan "
                             "saves node %ld of %d", id, g->nnodes);
            }
            PyMem_Free(outs);
            goto error;
        }
        outs[g->noutputs + k] = (int)id;
    }
    int rc = tc_graph_set_outputs(g, n, outs);
    PyMem_Free(outs);
    if (rc < 0) {
        PyErr_NoMemory();
        goto error;
    }
    Py_DECREF(seq);
    *plan = p;
    return 0;
error:
    Py_DECREF(seq);
    Py_DECREF(p);
    return -1;
}

PyObject *
tc_runner_new(tc_entry *e, int noutputs, PyObject *keep)
{
    if (PyType_Ready(&runner_type) < 0) {
        return NULL;
    }
    runner *r = PyObject_New(runner, &runner_type);
    if (r == NULL) {
        return NULL;
    }
    r->be = e->be;
    r->code = e->code;
    r->ninputs = e->ninputs;
    r->noutputs = noutputs;
    r->keep = Py_XNewRef(keep);
    e->be = NULL;
    e->code = NULL;
    return (PyObject *)r;
}

int
tc_autograd_finish(tc_entry *e, PyObject *plan, int nresults)
{
    PyObject *keep = PyObject_GetAttrString(plan, "keep");
    /* a plan without kept calls: the hook stays off for its runs */
    PyObject *r = keep == NULL ? NULL
        : tc_runner_new(e, nresults, PyDict_Check(keep)
                        && PyDict_GET_SIZE(keep) > 0 ? keep : NULL);
    Py_XDECREF(keep);
    if (r == NULL) {
        Py_DECREF(plan);
        return -1;
    }
    e->backend_fn = PyObject_CallMethod(plan, "finish", "O", r);
    Py_DECREF(r);
    Py_DECREF(plan);
    return e->backend_fn ? 0 : -1;
}
