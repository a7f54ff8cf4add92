/* cudagraphs.c - reduce-overhead (docs/modes.md): hand a compiled entry
 * on a CUDA device to the recorder of python/tcjit/_modes_cudagraphs.py,
 * which warms it up, captures its run into a CUDA graph with torch's
 * CUDAGraph (private memory pool) and replays it.  The recorder is a
 * Python callable like a custom backend's: the runtime loop runs it
 * through e->backend_fn, so nothing per call is added here. */
#include "cudagraphs.h"

#include "autograd.h"
#include "eval_frame.h"
#include "../runtime/torch_tensor.h"

/* The module's recorder_for, looked up per compile (tests replace it). */
static PyObject *
recorder_for(void)
{
    static PyObject *mod;
    if (mod == NULL) {
        mod = PyImport_ImportModule("tcjit._modes_cudagraphs");
        if (mod == NULL) {
            return NULL;
        }
    }
    return PyObject_GetAttrString(mod, "recorder_for");
}

static void
mark_outputs(const tc_template *t, char *used, int n)
{
    if (t->kind == TC_TMPL_OUTPUT && t->index >= 0 && t->index < n) {
        used[t->index] = 1;
    }
    for (int i = 0; i < t->n; i++) {
        mark_outputs(&t->items[i], used, n);
    }
}

/* Outputs only the write-back of an in-place op reads: it copies them
 * into their input right after the run, before any other replay, so they
 * may stay in the graph's memory (no copy out).  A new tuple of indices. */
static PyObject *
transient_outputs(const tc_entry *e)
{
    int n = e->noutputs;
    char *used = PyMem_Calloc((size_t)n + 1, 1);
    char *wb = PyMem_Calloc((size_t)n + 1, 1);
    PyObject *r = used && wb ? PyList_New(0) : NULL;
    if (r == NULL) {
        PyMem_Free(used);
        PyMem_Free(wb);
        return used && wb ? NULL : PyErr_NoMemory();
    }
    mark_outputs(&e->ret, used, n);
    for (int i = 0; i < e->exit.nstack; i++) {
        mark_outputs(&e->exit.stack_vals[i], used, n);
    }
    for (int i = 0; i < e->exit.nlocals; i++) {
        mark_outputs(&e->exit.local_vals[i], used, n);
    }
    for (int k = 0; k < e->wb.n; k++) {
        int o = e->wb.items[k].output;
        if (o >= 0 && o < n) {
            /* input -1: the output itself gets a version counter */
            used[o] |= e->wb.items[k].input < 0;
            wb[o] |= e->wb.items[k].input >= 0;
        }
    }
    for (int o = 0; r != NULL && o < n; o++) {
        PyObject *i = wb[o] && !used[o] ? PyLong_FromLong(o) : NULL;
        if (wb[o] && !used[o] && (i == NULL || PyList_Append(r, i) < 0)) {
            Py_CLEAR(r);
        }
        Py_XDECREF(i);
    }
    PyMem_Free(used);
    PyMem_Free(wb);
    return r;
}

int
tc_cudagraphs_apply(tc_entry *e, PyCodeObject *co, PyObject *desc,
                    int device, int dynamic, int training)
{
    PyObject *fn = recorder_for();
    if (fn == NULL) {
        return -1;
    }
    /* recorder_for(desc, device, dynamic, training, where) -> None (not
     * captured: it logged why) or make(run, transient, written) -> the
     * recorder */
    PyObject *make = PyObject_CallFunction(
        fn, "Oiii(OOi)", desc, device, dynamic, training, co->co_name,
        co->co_filename, co->co_firstlineno);
    Py_DECREF(fn);
    if (make == NULL || make == Py_None) {
        Py_XDECREF(make);
        return make ? 0 : -1;
    }
    PyObject *transient = e->merged_outputs ? PyList_New(0)
                                            : transient_outputs(e);
    /* (input, output): the write-backs into inputs */
    PyObject *written = PyList_New(0);
    for (int k = 0; written != NULL && k < e->wb.n; k++) {
        const tc_writeback *b = &e->wb.items[k];
        PyObject *pair = b->input >= 0
            ? Py_BuildValue("(ii)", b->input, b->output) : NULL;
        if (b->input >= 0 && (pair == NULL
                              || PyList_Append(written, pair) < 0)) {
            Py_CLEAR(written);
        }
        Py_XDECREF(pair);
    }
    PyObject *run = transient == NULL || written == NULL ? NULL
        : e->be != NULL ? tc_runner_new(e, e->noutputs, NULL)
                        : Py_NewRef(e->backend_fn);
    PyObject *rec = run ? PyObject_CallFunctionObjArgs(make, run, transient,
                                                       written, NULL) : NULL;
    Py_DECREF(make);
    Py_XDECREF(transient);
    Py_XDECREF(written);
    Py_XDECREF(run);
    if (rec == NULL) {
        return -1;
    }
    Py_XSETREF(e->backend_fn, rec);
    return 0;
}

PyObject *
tc_cudagraph_moved(PyObject *m, PyObject *args)
{
    PyObject *inputs, *indices, *ptrs;
    if (!PyArg_ParseTuple(args, "O!O!O!", &PyTuple_Type, &inputs,
                          &PyTuple_Type, &indices, &PyTuple_Type, &ptrs)) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(indices);
    if (PyTuple_GET_SIZE(ptrs) != n) {
        PyErr_SetString(PyExc_ValueError, "indices and ptrs differ in length");
        return NULL;
    }
    for (Py_ssize_t k = 0; k < n; k++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(indices, k));
        if (i < 0 || i >= PyTuple_GET_SIZE(inputs)) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_IndexError, "input index out of range");
            }
            return NULL;
        }
        void *p, *want = PyLong_AsVoidPtr(PyTuple_GET_ITEM(ptrs, k));
        if ((want == NULL && PyErr_Occurred())
            || tc_alloc_data_ptr(PyTuple_GET_ITEM(inputs, i), &p) < 0) {
            return NULL;
        }
        if (p != want) {
            return PyLong_FromSsize_t(k);
        }
    }
    return PyLong_FromLong(-1);
}
