/* pyvalue.c - small Python value helpers (see pyvalue.h). */
#include "pyvalue.h"

PyObject *
tc_int_tuple(int n, const int64_t *v)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t != NULL && i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (x == NULL) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

PyObject *
tc_torch_attr(const char *name)
{
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *v = torch ? PyObject_GetAttrString(torch, name) : NULL;
    Py_XDECREF(torch);
    return v;
}
