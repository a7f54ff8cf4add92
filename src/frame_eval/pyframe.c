/* pyframe.c - per-version bytecode facts read from the running interpreter. */
#include "pyframe.h"

unsigned char tc_inline_caches[256];

/* dis._inline_cache_entries is a list indexed by opcode on 3.11 and 3.12;
 * reading it keeps us from hard-coding a table that changes per release. */
int
pyframe_init_opcode_info(void)
{
    PyObject *dis = PyImport_ImportModule("dis");
    if (dis == NULL) {
        return -1;
    }
    PyObject *caches = PyObject_GetAttrString(dis, "_inline_cache_entries");
    Py_DECREF(dis);
    if (caches == NULL) {
        return -1;
    }
    int rc = -1;
    PyObject *seq = PySequence_Fast(caches, "dis._inline_cache_entries");
    if (seq == NULL) {
        goto done;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n && i < 256; i++) {
        long c = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (c < 0 || c > 255) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "bad inline cache size");
            }
            goto done;
        }
        tc_inline_caches[i] = (unsigned char)c;
    }
    rc = 0;
done:
    Py_XDECREF(seq);
    Py_DECREF(caches);
    return rc;
}
