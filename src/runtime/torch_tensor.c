/* torch_tensor.c - the torch calls the executors make per call (see
 * torch_tensor.h).
 *
 * torch.empty_strided alone is ~1 us, so callers prebuild its argument
 * vectors and call it with one vectorcall; nothing here adds a Python call
 * to what a call of the executors needs.
 */
#include "torch_tensor.h"

static PyObject *empty_strided = NULL;  /* torch.empty_strided */
static PyObject *as_strided = NULL;     /* torch.as_strided */
static PyObject *alloc_kwnames = NULL;  /* ("dtype", "device") */
static PyObject *str_data_ptr = NULL;   /* interned "data_ptr" */
static PyObject *str_storage_offset = NULL; /* interned "storage_offset" */
static PyObject *dtype_objs[TC_NALLDTYPES];

int
tc_alloc_init(void)
{
    if (empty_strided != NULL) {
        return 0;
    }
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch == NULL) {
        return -1;
    }
    for (int i = 0; i < TC_NALLDTYPES; i++) {
        dtype_objs[i] = PyObject_GetAttrString(torch, tc_dtype_name(i));
        if (dtype_objs[i] == NULL) {
            goto error;
        }
    }
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    str_storage_offset = PyUnicode_InternFromString("storage_offset");
    alloc_kwnames = Py_BuildValue("(ss)", "dtype", "device");
    as_strided = PyObject_GetAttrString(torch, "as_strided");
    /* last: it marks the module as initialised */
    empty_strided = PyObject_GetAttrString(torch, "empty_strided");
    if (str_data_ptr == NULL || str_storage_offset == NULL
        || alloc_kwnames == NULL || as_strided == NULL
        || empty_strided == NULL) {
        goto error;
    }
    Py_DECREF(torch);
    return 0;
error:
    for (int i = 0; i < TC_NALLDTYPES; i++) {
        Py_CLEAR(dtype_objs[i]);
    }
    Py_CLEAR(str_data_ptr);
    Py_CLEAR(str_storage_offset);
    Py_CLEAR(alloc_kwnames);
    Py_CLEAR(as_strided);
    Py_CLEAR(empty_strided);
    Py_DECREF(torch);
    return -1;
}

int
tc_alloc_bytes_argv(PyObject **argv, int64_t nbytes, PyObject *device)
{
    int64_t one = 1;
    argv[0] = tc_int_tuple(1, &nbytes);
    argv[1] = tc_int_tuple(1, &one);
    argv[2] = Py_NewRef(dtype_objs[TC_U8]);
    argv[3] = Py_NewRef(device);
    return argv[0] == NULL || argv[1] == NULL ? -1 : 0;
}

PyObject *
tc_alloc_dtype_object(tc_dtype dt)
{
    return (unsigned)dt < TC_NALLDTYPES ? dtype_objs[dt] : NULL;
}

PyObject *
tc_alloc_empty(PyObject *const *argv)
{
    return PyObject_Vectorcall(empty_strided, argv, 2, alloc_kwnames);
}

int
tc_alloc_data_ptr(PyObject *t, void **out)
{
    PyObject *r = PyObject_VectorcallMethod(
        str_data_ptr, &t, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL) {
        return -1;
    }
    *out = PyLong_AsVoidPtr(r);
    Py_DECREF(r);
    return *out == NULL && PyErr_Occurred() ? -1 : 0;
}

PyObject *
tc_alloc_view_detached(PyObject *base, PyObject *const *va)
{
    PyObject *d = PyObject_CallMethod(base, "detach", NULL);
    if (d == NULL) {
        return NULL;
    }
    PyObject *r = tc_alloc_view(d, va);
    Py_DECREF(d);
    return r;
}

PyObject *
tc_alloc_view(PyObject *base, PyObject *const *va)
{
    PyObject *so = PyObject_VectorcallMethod(
        str_storage_offset, &base, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (so == NULL) {
        return NULL;
    }
    PyObject *off = PyNumber_Add(so, va[2]);
    Py_DECREF(so);
    if (off == NULL) {
        return NULL;
    }
    PyObject *argv[4] = {base, va[0], va[1], off};
    PyObject *r = PyObject_Vectorcall(as_strided, argv, 4, NULL);
    Py_DECREF(off);
    return r;
}
