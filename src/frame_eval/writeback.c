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

typedef struct {
    uintptr_t lo, hi;   /* the bytes an input's elements span */
    int written;
} span;

static int
span_cmp(const void *a, const void *b)
{
    uintptr_t x = ((const span *)a)->lo, y = ((const span *)b)->lo;
    return x < y ? -1 : x > y;
}

int
tc_writeback_aliased(const tc_writebacks *w, PyObject *const *inputs)
{
    span small[16], *sp = w->ninputs <= 16 ? small
        : PyMem_Malloc(sizeof(span) * (size_t)w->ninputs);
    int n = 0, rc = 0;
    if (sp == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    /* each input's pointer once, then a sweep in address order: n log n
     * for an optimizer step over hundreds of parameters */
    for (int i = 0; i < w->ninputs && rc == 0; i++) {
        void *p;
        if (w->span[i] == 0) {
            continue;
        }
        if (tc_alloc_data_ptr(inputs[i], &p) < 0) {
            rc = -1;
            break;
        }
        sp[n].lo = (uintptr_t)p;
        sp[n].hi = (uintptr_t)p + (uintptr_t)w->span[i];
        sp[n++].written = w->written[i];
    }
    if (rc == 0) {
        qsort(sp, (size_t)n, sizeof(span), span_cmp);
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        for (int j = i + 1; j < n && sp[j].lo < sp[i].hi; j++) {
            if (sp[i].written || sp[j].written) {
                rc = 1;
                break;
            }
        }
    }
    if (sp != small) {
        PyMem_Free(sp);
    }
    return rc;
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

static int grad_mode(int on);

int
tc_set_grad_mode(int on)
{
    return init() < 0 ? -1 : grad_mode(on);
}

/* torch._C._set_grad_enabled(on): 0, or -1 with an exception. */
static int
grad_mode(int on)
{
    PyObject *r = PyObject_CallOneArg(set_grad, on ? Py_True : Py_False);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* 1 if t (an input an in-place op under grad mode writes, which
 * requires grad) is a leaf or a view: eager raises for a leaf ("a leaf
 * Variable that requires grad is being used in an in-place operation")
 * and for a view of one, and has more rules for views (views made under
 * no_grad, outputs of multi-output views: handle_view_on_rebase); CPython
 * runs the segment for those, so each gets eager's own result.  0 for a
 * non-leaf that is no view, -1 with an exception. */
static int
leaf_or_view(PyObject *t)
{
    static PyObject *is_leaf_name, *base_name;
    if (is_leaf_name == NULL
        && (is_leaf_name = PyUnicode_InternFromString("is_leaf")) == NULL) {
        return -1;
    }
    if (base_name == NULL
        && (base_name = PyUnicode_InternFromString("_base")) == NULL) {
        return -1;
    }
    PyObject *leaf = PyObject_GetAttr(t, is_leaf_name);
    int r = leaf ? PyObject_IsTrue(leaf) : -1;
    Py_XDECREF(leaf);
    if (r != 0) {
        return r;
    }
    PyObject *base = PyObject_GetAttr(t, base_name);
    r = base ? base != Py_None : -1;
    Py_XDECREF(base);
    return r;
}

int
tc_writeback_eager_error(const tc_writebacks *w, PyObject *const *inputs)
{
    for (int k = 0; k < w->n; k++) {
        const tc_writeback *b = &w->items[k];
        if (b->input < 0 || !b->target_rg || b->grad != 1) {
            continue;
        }
        int r = leaf_or_view(inputs[b->input]);
        if (r != 0) {
            return r;
        }
    }
    return 0;
}

int
tc_writeback_apply(const tc_writebacks *w, PyObject *const *inputs,
                   PyObject *const *outputs)
{
    static PyObject *copy_name;
    if (init() < 0 || (copy_name == NULL
                       && (copy_name = PyUnicode_InternFromString("copy_"))
                          == NULL)) {
        return -1;
    }
    /* Each copy runs in the grad mode of the in-place ops it stands for
     * (tc_writeback.grad).  Under no_grad (an optimizer's update of a
     * parameter) autograd records nothing, as for eager's ops.  Under
     * grad mode torch's copy_ records what eager's in-place ops would:
     * an input that requires grad, or written with a value that does (a
     * differentiable output of the graph's autograd node), gets a
     * CopyBackwards / CopySlices history whose gradient flows through
     * the node to the input's old history (AOTAutograd applies input
     * mutations the same way).  Eager's error for a leaf that requires
     * grad was left to CPython before the run (tc_writeback_eager_error);
     * an input that needs no grad, written with a value that needs none,
     * records nothing in either mode. */
    int cur = tc_grad_enabled();
    if (cur < 0) {
        return -1;
    }
    int entry = cur;
    /* version counters to set: only where eager's count is not the one
     * copy_ gives (one in-place op on an input) */
    PyObject *ts[w->n + 1], *vs[w->n + 1];
    int nset = 0, rc = 0;
    for (int k = 0; rc == 0 && k < w->n; k++) {
        const tc_writeback *b = &w->items[k];
        PyObject *t = b->input >= 0 ? inputs[b->input] : outputs[b->output];
        long v = b->bumps;
        if (b->input >= 0) {
            /* a kernel that stored into the input itself (schedule.c
             * inplace_buffer) returns it: no copy, the count set below */
            int same = outputs[b->output] == t;
            int want = b->grad == 2 ? entry : b->grad;
            if (!same && want != cur) {
                if (grad_mode(want) < 0) {
                    rc = -1;
                    break;
                }
                cur = want;
            }
            long before = b->bumps == 1 && !same ? 0 : version_of(t);
            PyObject *copied = before < 0 ? NULL : same ? Py_NewRef(t)
                : PyObject_CallMethodOneArg(t, copy_name, outputs[b->output]);
            Py_XDECREF(copied);
            rc = copied ? 0 : -1;
            if (b->bumps == 1 && !same) {
                continue;
            }
            v += before;
        }
        if (rc == 0) {
            vs[nset] = PyLong_FromLong(v);
            ts[nset] = t;
            rc = vs[nset] ? 0 : -1;
            nset += rc == 0;
        }
    }
    if (cur != entry) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (grad_mode(entry) < 0) {
            rc = -1;
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        }
        else {
            PyErr_Restore(type, value, tb);
        }
    }
    PyObject *tt = NULL, *vt = NULL;
    if (rc == 0 && nset > 0) {
        tt = PyTuple_New(nset);
        vt = PyTuple_New(nset);
        rc = tt && vt ? 0 : -1;
        for (int k = 0; rc == 0 && k < nset; k++) {
            PyTuple_SET_ITEM(tt, k, Py_NewRef(ts[k]));
            PyTuple_SET_ITEM(vt, k, Py_NewRef(vs[k]));
        }
        PyObject *r = rc == 0
            ? PyObject_CallFunctionObjArgs(set_version, tt, vt, NULL) : NULL;
        rc = r ? 0 : -1;
        Py_XDECREF(r);
    }
    Py_XDECREF(tt);
    Py_XDECREF(vt);
    for (int k = 0; k < nset; k++) {
        Py_DECREF(vs[k]);
    }
    return rc;
}
