/* pyframe.c - per-version bytecode facts read from the running interpreter. */
#include "pyframe.h"

unsigned char tc_inline_caches[256];

/* dis._inline_cache_entries is a list indexed by opcode on 3.11 and 3.12,
 * a dict by opcode name on 3.13 (turned into that list here); reading it
 * keeps us from hard-coding a table that changes per release. */
int
pyframe_init_opcode_info(void)
{
    PyObject *dis = PyImport_ImportModule("dis");
    if (dis == NULL) {
        return -1;
    }
    PyObject *caches = PyObject_GetAttrString(dis, "_inline_cache_entries");
    if (caches != NULL && PyDict_Check(caches)) {
        PyObject *by_name = caches;
        PyObject *names = PyObject_GetAttrString(dis, "opname");
        Py_ssize_t n = names ? PySequence_Length(names) : -1;
        caches = n < 0 ? NULL : PyList_New(n);
        for (Py_ssize_t i = 0; caches != NULL && i < n; i++) {
            PyObject *name = PySequence_GetItem(names, i);
            PyObject *c = name ? PyDict_GetItemWithError(by_name, name) : NULL;
            Py_XDECREF(name);
            if (c == NULL && (name == NULL || PyErr_Occurred())) {
                Py_CLEAR(caches);
                break;
            }
            PyList_SET_ITEM(caches, i, c ? Py_NewRef(c) : PyLong_FromLong(0));
        }
        Py_XDECREF(names);
        Py_DECREF(by_name);
    }
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

/* MAKE_CELL and COPY_FREE_VARS, as the evaluator runs them before RESUME.
 * A frame resumed past its first instruction must have them done or
 * LOAD_DEREF reads a raw value as a cell and crashes. */
int
pyframe_run_prologue(tc_iframe *f)
{
    PyCodeObject *co = f->f_code;
    const unsigned char *kinds =
        (const unsigned char *)PyBytes_AS_STRING(co->co_localspluskinds);
    PyObject *func = pyframe_func(f);
    PyObject *closure = func ? PyFunction_GET_CLOSURE(func) : NULL;
    int first_free = co->co_nlocalsplus - co->co_nfreevars;
    for (int i = 0; i < co->co_nlocalsplus; i++) {
        if (kinds[i] & TC_CO_FAST_FREE) {
            if (closure == NULL) {
                PyErr_SetString(PyExc_SystemError, "tcjit: missing closure");
                return -1;
            }
            Py_XSETREF(f->localsplus[i],
                       Py_NewRef(PyTuple_GET_ITEM(closure, i - first_free)));
        }
        else if (kinds[i] & TC_CO_FAST_CELL) {
            PyObject *cell = PyCell_New(f->localsplus[i]);
            if (cell == NULL) {
                return -1;
            }
            Py_XSETREF(f->localsplus[i], cell);
        }
    }
    return 0;
}

PyObject *
pyframe_make_function(PyObject *code, PyObject *globals,
                      PyObject *const parts[TC_FN_NPARTS])
{
    PyFunctionObject *func = (PyFunctionObject *)PyFunction_New(code,
                                                                globals);
    if (func == NULL) {
        return NULL;
    }
    PyObject **fields[TC_FN_NPARTS] = {
        &func->func_defaults, &func->func_kwdefaults,
        &func->func_annotations, &func->func_closure};
    for (int i = 0; i < TC_FN_NPARTS; i++) {
        if (parts[i] != NULL) {
            Py_XSETREF(*fields[i], Py_NewRef(parts[i]));
        }
    }
#if TC_PY312
    func->func_version = ((PyCodeObject *)code)->co_version;
#endif
    return (PyObject *)func;
}

PyObject *
tc_binary_op(int nb, PyObject *a, PyObject *b)
{
    switch (nb) {
    case NB_ADD: return PyNumber_Add(a, b);
    case NB_SUBTRACT: return PyNumber_Subtract(a, b);
    case NB_MULTIPLY: return PyNumber_Multiply(a, b);
    case NB_TRUE_DIVIDE: return PyNumber_TrueDivide(a, b);
    case NB_FLOOR_DIVIDE: return PyNumber_FloorDivide(a, b);
    case NB_REMAINDER: return PyNumber_Remainder(a, b);
    case NB_POWER: return PyNumber_Power(a, b, Py_None);
    case NB_MATRIX_MULTIPLY: return PyNumber_MatrixMultiply(a, b);
    case NB_AND: return PyNumber_And(a, b);
    case NB_OR: return PyNumber_Or(a, b);
    case NB_XOR: return PyNumber_Xor(a, b);
    case NB_LSHIFT: return PyNumber_Lshift(a, b);
    case NB_RSHIFT: return PyNumber_Rshift(a, b);
    case NB_INPLACE_ADD: return PyNumber_InPlaceAdd(a, b);
    case NB_INPLACE_SUBTRACT: return PyNumber_InPlaceSubtract(a, b);
    case NB_INPLACE_MULTIPLY: return PyNumber_InPlaceMultiply(a, b);
    case NB_INPLACE_TRUE_DIVIDE: return PyNumber_InPlaceTrueDivide(a, b);
    case NB_INPLACE_FLOOR_DIVIDE: return PyNumber_InPlaceFloorDivide(a, b);
    case NB_INPLACE_REMAINDER: return PyNumber_InPlaceRemainder(a, b);
    case NB_INPLACE_POWER: return PyNumber_InPlacePower(a, b, Py_None);
    case NB_INPLACE_MATRIX_MULTIPLY: return PyNumber_InPlaceMatrixMultiply(a, b);
    case NB_INPLACE_AND: return PyNumber_InPlaceAnd(a, b);
    case NB_INPLACE_OR: return PyNumber_InPlaceOr(a, b);
    case NB_INPLACE_XOR: return PyNumber_InPlaceXor(a, b);
    case NB_INPLACE_LSHIFT: return PyNumber_InPlaceLshift(a, b);
    case NB_INPLACE_RSHIFT: return PyNumber_InPlaceRshift(a, b);
    default:
        PyErr_Format(PyExc_SystemError, "tcjit: binary op %d", nb);
        return NULL;
    }
}
