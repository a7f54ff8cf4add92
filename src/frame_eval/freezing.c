/* freezing.c - the compile step of freezing: ask python/tcjit/_freezing.py
 * what folds and their values, rewrite the graph (../graph/freeze.h),
 * keep the values in the entry and guard what they were made from. */
#include "freezing.h"

#include "convert.h"

#include "../graph/freeze.h"

/* tcjit._freezing.<name> (borrowed, kept), or NULL with an exception. */
static PyObject *
freezing_attr(const char *name)
{
    static PyObject *mod;
    if (mod == NULL && (mod = PyImport_ImportModule("tcjit._freezing")) == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_GetAttrString(mod, name);
    Py_XDECREF(r);  /* the module keeps it */
    return r;
}

/* The graph inputs, None where not frozen (a tuple); *total the elements
 * of the frozen ones.  NULL with an exception. */
static PyObject *
frozen_inputs(tc_entry *e, tc_graph *g, PyObject **vals, int64_t *total)
{
    PyObject *is_frozen = freezing_attr("frozen");
    PyObject *r = is_frozen ? PyTuple_New(e->ninputs) : NULL;
    *total = 0;
    for (int i = 0; r && i < e->ninputs; i++) {
        const tc_guard_set *gs = e->guards;
        int s = e->input_sources[i];
        const tc_source *src = &gs->sources[s];
        int written = 0;
        for (int j = 0; g->output_writes && j < g->noutputs; j++) {
            written |= g->output_writes[j] == i;
        }
        int yes = 0;
        if (!written && src->kind == TC_SRC_ATTR && vals[src->parent]) {
            PyObject *v = PyObject_CallFunctionObjArgs(
                is_frozen, vals[s], vals[src->parent], src->name, NULL);
            yes = v ? PyObject_IsTrue(v) : -1;
            Py_XDECREF(v);
        }
        if (yes < 0) {
            Py_CLEAR(r);
            break;
        }
        PyTuple_SET_ITEM(r, i, Py_NewRef(yes ? vals[s] : Py_None));
        if (yes) {
            for (int n = 0; n < g->nnodes; n++) {
                if (g->nodes[n].kind == TC_NODE_INPUT
                    && g->nodes[n].input_index == i) {
                    *total += tc_layout_numel(&g->nodes[n].layout);
                }
            }
        }
    }
    return r;
}

/* folds: the plan's list of (kind, node, conv, tensors).  Fills fl and
 * the entry's constants.  0, or -1 with an exception. */
static int
read_folds(tc_entry *e, PyObject *folds, tc_fold *fl)
{
    Py_ssize_t n = PyList_GET_SIZE(folds);
    for (Py_ssize_t i = 0; i < n; i++) {
        int kind, node, conv;
        PyObject *tensors;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(folds, i), "iiiO!", &kind,
                              &node, &conv, &PyTuple_Type, &tensors)) {
            return -1;
        }
        fl[i].kind = kind;
        fl[i].node = node;
        fl[i].conv = conv;
        for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tensors) && k < 2; k++) {
            PyObject *t = PyTuple_GET_ITEM(tensors, k);
            tc_tensor_meta m;
            if (tc_tensor_read_meta(t, &m, &fl[i].dt[k]) != 0) {
                if (!PyErr_Occurred()) {
                    PyErr_SetString(PyExc_RuntimeError, "freezing made a "
                                    "tensor tcjit does not compile for");
                }
                return -1;
            }
            fl[i].layout[k].ndim = m.ndim;
            memcpy(fl[i].layout[k].sizes, m.sizes, sizeof(m.sizes));
            memcpy(fl[i].layout[k].strides, m.strides, sizeof(m.strides));
            e->consts[e->nconsts++] = Py_NewRef(t);
        }
    }
    return 0;
}

static int
apply_plan(tc_entry *e, tc_graph *g, PyObject *plan, PyObject **vals)
{
    PyObject *folds, *used;
    if (!PyArg_ParseTuple(plan, "O!O!", &PyList_Type, &folds, &PyList_Type,
                          &used)) {
        return -1;
    }
    Py_ssize_t n = PyList_GET_SIZE(folds);
    if (n == 0) {
        return 0;
    }
    tc_fold *fl = PyMem_Calloc((size_t)n, sizeof(tc_fold));
    e->consts = PyMem_Calloc(2 * (size_t)n, sizeof(PyObject *));
    if (fl == NULL || e->consts == NULL) {
        PyMem_Free(fl);
        PyErr_NoMemory();
        return -1;
    }
    char err[256];
    int rc = read_folds(e, folds, fl);
    if (rc == 0 && tc_graph_fold(g, (int)n, fl, err, sizeof(err)) < 0) {
        PyErr_Format(PyExc_RuntimeError, "tcjit freezing: %s", err);
        rc = -1;
    }
    PyMem_Free(fl);
    for (Py_ssize_t k = 0; rc == 0 && k < PyList_GET_SIZE(used); k++) {
        long i = PyLong_AsLong(PyList_GET_ITEM(used, k));
        if (i < 0 || i >= e->ninputs) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "tcjit freezing: bad "
                                "input index");
            }
            rc = -1;
            break;
        }
        int s = e->input_sources[i];
        rc = tc_guard_frozen(e->guards, s, vals[s]);
    }
    if (rc == 0) {
        e->ninputs = g->ninputs;
        return 0;
    }
    for (int k = 0; k < e->nconsts; k++) {
        Py_DECREF(e->consts[k]);
    }
    PyMem_Free(e->consts);
    e->consts = NULL;
    e->nconsts = 0;
    return -1;
}

int
tc_freeze(tc_entry *e, tc_graph *g, tc_iframe *f, int device)
{
    PyObject **vals = tc_entry_fetch(e, f);
    if (vals == NULL) {
        return -1;
    }
    int64_t total;
    PyObject *inputs = frozen_inputs(e, g, vals, &total);
    PyObject *plan = NULL, *desc = NULL;
    int rc = -1, any = 0;
    for (int i = 0; inputs && i < e->ninputs; i++) {
        any |= PyTuple_GET_ITEM(inputs, i) != Py_None;
    }
    if (inputs != NULL && !any) {
        rc = 0;
    }
    else if (inputs != NULL && (desc = tc_graph_desc(g, device)) != NULL) {
        PyObject *fn = freezing_attr("plan");
        plan = fn ? PyObject_CallFunction(fn, "OOL", desc, inputs,
                                          (long long)total) : NULL;
        rc = plan ? apply_plan(e, g, plan, vals) : -1;
    }
    Py_XDECREF(plan);
    Py_XDECREF(desc);
    Py_XDECREF(inputs);
    tc_entry_fetch_release(e, vals);
    return rc;
}
