/* cudagraphs.c - reduce-overhead (docs/modes.md): hand a compiled entry
 * on a CUDA device to the recorder of python/tcjit/_modes_cudagraphs.py,
 * which warms it up, captures its run into a CUDA graph with torch's
 * CUDAGraph (private memory pool) and replays it.  The recorder is a
 * Python callable like a custom backend's: the runtime loop runs it
 * through e->backend_fn, so nothing per call is added here. */
#include "cudagraphs.h"

#include "autograd.h"

static PyObject *
recorder_for(void)
{
    static PyObject *fn;
    if (fn == NULL) {
        PyObject *mod = PyImport_ImportModule("tcjit._modes_cudagraphs");
        if (mod == NULL) {
            return NULL;
        }
        fn = PyObject_GetAttrString(mod, "recorder_for");
        Py_DECREF(mod);
    }
    return fn;
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
     * captured: it logged why) or make(run) -> the recorder */
    PyObject *make = PyObject_CallFunction(
        fn, "Oiii(OOi)", desc, device, dynamic, training, co->co_name,
        co->co_filename, co->co_firstlineno);
    if (make == NULL || make == Py_None) {
        Py_XDECREF(make);
        return make ? 0 : -1;
    }
    PyObject *run = e->be != NULL ? tc_runner_new(e, e->noutputs, NULL)
                                  : Py_NewRef(e->backend_fn);
    PyObject *rec = run ? PyObject_CallOneArg(make, run) : NULL;
    Py_DECREF(make);
    Py_XDECREF(run);
    if (rec == NULL) {
        return -1;
    }
    Py_XSETREF(e->backend_fn, rec);
    return 0;
}
