/* writeback.c - write the values of inputs that in-place ops changed back
 * into the inputs' storage, as eager left them (writeback.h). */
#include "writeback.h"

#include "../guards/guards.h"
#include "../runtime/torch_tensor.h"

static PyObject *set_version;   /* torch._C._autograd._unsafe_set_version_counter */
static PyObject *set_grad;      /* torch._C._set_grad_enabled */

static int
init(void)
{
    if (set_version != NULL) {
        return 0;
    }
    PyObject *ag = PyImport_ImportModule("torch._C._autograd");
    PyObject *c = PyImport_ImportModule("torch._C");
    set_version = ag ? PyObject_GetAttrString(ag,
                                              "_unsafe_set_version_counter")
                     : NULL;
    set_grad = c ? PyObject_GetAttrString(c, "_set_grad_enabled") : NULL;
    Py_XDECREF(ag);
    Py_XDECREF(c);
    if (set_version == NULL || set_grad == NULL) {
        Py_CLEAR(set_version);
        Py_CLEAR(set_grad);
        return -1;
    }
    return 0;
}

int
tc_writeback_aliased(const tc_writebacks *w, PyObject *const *inputs)
{
    for (int k = 0; k < w->n; k++) {
        int i = w->items[k].input;
        void *pi, *pj;
        if (i < 0 || w->span[i] == 0) {
            continue;
        }
        if (tc_alloc_data_ptr(inputs[i], &pi) < 0) {
            return -1;
        }
        char *lo = pi, *hi = lo + w->span[i];
        for (int j = 0; j < w->ninputs; j++) {
            if (j == i || w->span[j] == 0) {
                continue;
            }
            if (tc_alloc_data_ptr(inputs[j], &pj) < 0) {
                return -1;
            }
            char *lo2 = pj, *hi2 = lo2 + w->span[j];
            if (lo < hi2 && lo2 < hi) {
                return 1;
            }
        }
    }
    return 0;
}

/* x._version as a C long, or -1 with an exception. */
static long
version_of(PyObject *x)
{
    PyObject *v = PyObject_GetAttrString(x, "_version");
    long r = v ? PyLong_AsLong(v) : -1;
    Py_XDECREF(v);
    return r;
}

int
tc_writeback_apply(const tc_writebacks *w, PyObject *const *inputs,
                   PyObject *const *outputs)
{
    if (init() < 0) {
        return -1;
    }
    int grad = tc_grad_enabled();
    PyObject *ts = PyTuple_New(w->n), *vs = PyTuple_New(w->n);
    int rc = grad < 0 || ts == NULL || vs == NULL ? -1 : 0;
    /* what autograd would record was checked while tracing (values that
     * need grad make the frame eager): the copies are not ops of the
     * program, and a leaf that requires grad may be written */
    PyObject *r = rc == 0 && grad ? PyObject_CallOneArg(set_grad, Py_False)
                                  : NULL;
    if (grad && r == NULL) {
        rc = -1;
    }
    Py_XDECREF(r);
    for (int k = 0; rc == 0 && k < w->n; k++) {
        const tc_writeback *b = &w->items[k];
        PyObject *t = b->input >= 0 ? inputs[b->input] : outputs[b->output];
        long v = b->bumps;
        if (b->input >= 0) {
            long before = version_of(t);
            PyObject *copied = before < 0 ? NULL
                : PyObject_CallMethod(t, "copy_", "O", outputs[b->output]);
            Py_XDECREF(copied);
            rc = copied ? 0 : -1;
            v += before;
        }
        PyObject *vo = PyLong_FromLong(v);
        if (vo == NULL) {
            rc = -1;
            break;
        }
        PyTuple_SET_ITEM(ts, k, Py_NewRef(t));
        PyTuple_SET_ITEM(vs, k, vo);
    }
    if (grad > 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        r = PyObject_CallOneArg(set_grad, Py_True);
        Py_XDECREF(r);
        if (r == NULL) {
            rc = -1;
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        }
        else {
            PyErr_Restore(type, value, tb);
        }
    }
    if (rc == 0) {
        r = PyObject_CallFunctionObjArgs(set_version, ts, vs, NULL);
        rc = r ? 0 : -1;
        Py_XDECREF(r);
    }
    Py_XDECREF(ts);
    Py_XDECREF(vs);
    return rc;
}
