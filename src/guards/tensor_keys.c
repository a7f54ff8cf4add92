/* tensor_keys.c - a tensor's kind from its dispatch key set (see
 * tensor_keys.h).
 *
 * TENSOR_MATCH runs before every compiled call, and
 * torch._C._dispatch_keys(t).raw_repr() costs two pybind11 calls (~0.3 us
 * per tensor, as much as the rest of a small call's guards).  The key set
 * is a 64-bit field of the tensor's at::TensorImpl, which the Python
 * object points to, so the guard reads it directly.  Where these two
 * fields are is found once, at import, by probing: the word of the Python
 * object that equals t._cdata (the TensorImpl's address), and the first
 * word of the TensorImpl that equals _dispatch_keys(t).raw_repr() for
 * tensors of different key sets.  Should a torch version lay them out
 * differently, probing fails and the guard calls _dispatch_keys instead.
 */
#include "tensor_keys.h"

#include <string.h>

#include "guards.h"

/* Where the probe stops looking for the key set in an at::TensorImpl
 * (it sits at ~170 bytes in torch 2.x; reads stop at the first match). */
#define MAX_KEYS_OFFSET 512

static PyObject *fn_dispatch_keys, *str_raw_repr, *keyset_type;
static PyObject *tensor_type, *parameter_type;
static Py_ssize_t impl_offset = -1;  /* in the Python object: TensorImpl * */
static Py_ssize_t keys_offset = -1;  /* in the TensorImpl: DispatchKeySet */
/* c10::impl::SizesAndStrides in the TensorImpl: the rank, then either
 * `inline_dims` sizes and as many strides in place, or (more dims) a
 * pointer to rank sizes followed by rank strides. */
static Py_ssize_t geometry_offset = -1;
static int inline_dims;

/* The key sets of plain CPU and CUDA tensors (dense backend, autograd,
 * ADInplaceOrView, autocast) and their dense backend keys; and the
 * functorch wrappers' keys, for reasons. */
static uint64_t plain_keys[2], backend_keys[2], functorch_keys;

static int
keys_py(PyObject *t, uint64_t *keys)
{
    PyObject *ks = PyObject_CallOneArg(fn_dispatch_keys, t);
    PyObject *raw = ks ? PyObject_CallMethodNoArgs(ks, str_raw_repr) : NULL;
    Py_XDECREF(ks);
    if (raw == NULL) {
        return -1;
    }
    *keys = PyLong_AsUnsignedLongLong(raw);
    Py_DECREF(raw);
    return *keys == (uint64_t)-1 && PyErr_Occurred() ? -1 : 0;
}

/* DispatchKeySet(k1).add(k2)... of torch._C.DispatchKey names. */
static int
keyset_of(const char *const *names, uint64_t *out)
{
    PyObject *torch_c = PyImport_ImportModule("torch._C");
    PyObject *enum_ = torch_c ? PyObject_GetAttrString(torch_c, "DispatchKey")
                              : NULL;
    PyObject *set = NULL;
    for (int i = 0; enum_ != NULL && names[i] != NULL; i++) {
        PyObject *k = PyObject_GetAttrString(enum_, names[i]);
        PyObject *next = k == NULL ? NULL
            : set == NULL ? PyObject_CallOneArg(keyset_type, k)
                          : PyObject_CallMethod(set, "add", "O", k);
        Py_XDECREF(k);
        Py_XSETREF(set, next);
        if (set == NULL) {
            break;
        }
    }
    PyObject *raw = set ? PyObject_CallMethodNoArgs(set, str_raw_repr) : NULL;
    Py_XDECREF(torch_c);
    Py_XDECREF(enum_);
    Py_XDECREF(set);
    if (raw == NULL) {
        return -1;
    }
    *out = PyLong_AsUnsignedLongLong(raw);
    Py_DECREF(raw);
    return PyErr_Occurred() ? -1 : 0;
}

static void *
impl_of(PyObject *t, Py_ssize_t off)
{
    void *p;
    memcpy(&p, (char *)t + off, sizeof(p));
    return p;
}

/* Sets impl_offset and keys_offset if tensors probes[0..n-1] (instances of
 * torch.Tensor with different key sets) agree on them; else leaves -1. */
static int
probe_offsets(PyObject *const *probes, int n)
{
    void *impl[4];
    uint64_t want[4];
    for (int i = 0; i < n; i++) {
        PyObject *cdata = PyObject_GetAttrString(probes[i], "_cdata");
        impl[i] = cdata ? PyLong_AsVoidPtr(cdata) : NULL;
        Py_XDECREF(cdata);
        if (PyErr_Occurred() || keys_py(probes[i], &want[i]) < 0) {
            return -1;
        }
        if (impl[i] == NULL) {
            return 0;
        }
    }
    Py_ssize_t size = Py_TYPE(probes[0])->tp_basicsize;
    for (Py_ssize_t off = sizeof(PyObject);
         impl_offset < 0 && off + (Py_ssize_t)sizeof(void *) <= size;
         off += sizeof(void *)) {
        int all = 1;
        for (int i = 0; all && i < n; i++) {
            all = impl_of(probes[i], off) == impl[i];
        }
        impl_offset = all ? off : -1;
    }
    if (impl_offset < 0) {
        return 0;
    }
    for (Py_ssize_t off = sizeof(void *); off < MAX_KEYS_OFFSET;
         off += sizeof(uint64_t)) {
        int all = 1;
        for (int i = 0; all && i < n; i++) {
            uint64_t k;
            memcpy(&k, (char *)impl[i] + off, sizeof(k));
            all = k == want[i];
        }
        if (all) {
            keys_offset = off;
            return 0;
        }
    }
    impl_offset = -1;
    return 0;
}

static int64_t
impl_word(const void *impl, Py_ssize_t off)
{
    int64_t w;
    memcpy(&w, (const char *)impl + off, sizeof(w));
    return w;
}

/* Whether the SizesAndStrides at off of impl (inline capacity cap) holds
 * ndim, sizes and strides. */
static int
geometry_at(const void *impl, Py_ssize_t off, int cap, int ndim,
            const int64_t *sizes, const int64_t *strides)
{
    if (impl_word(impl, off) != ndim) {
        return 0;
    }
    const int64_t *data = (const int64_t *)((const char *)impl + off + 8);
    if (ndim > cap) {
        memcpy(&data, data, sizeof(data));
        cap = ndim;
    }
    for (int i = 0; i < ndim; i++) {
        if (data[i] != sizes[i] || data[cap + i] != strides[i]) {
            return 0;
        }
    }
    return 1;
}

/* Finds geometry_offset and inline_dims with tensors of ranks 2, 3 (a
 * transposed view) and 6 (more than fits in place); leaves -1 if they do
 * not agree on one layout. */
static int
probe_geometry(PyObject *torch)
{
    PyObject *p[3] = {
        PyObject_CallMethod(torch, "empty", "ii", 2, 3),
        PyObject_CallMethod(torch, "empty", "iii", 3, 5, 7),
        PyObject_CallMethod(torch, "empty", "iiiiii", 2, 3, 4, 5, 6, 7),
    };
    tc_tensor_meta m[3];
    tc_dtype dt;
    const void *impl[3];
    int rc = -1;
    if (p[1] != NULL) {
        Py_SETREF(p[1], PyObject_CallMethod(p[1], "transpose", "ii", 0, 2));
    }
    for (int i = 0; i < 3; i++) {
        /* as Python reports them: t.shape, t.stride() */
        if (p[i] == NULL || tc_tensor_read_meta(p[i], &m[i], &dt) != 0) {
            goto done;
        }
        impl[i] = impl_of(p[i], impl_offset);
    }
    rc = 0;
    for (Py_ssize_t off = sizeof(void *); off < MAX_KEYS_OFFSET;
         off += sizeof(int64_t)) {
        for (int cap = 3; cap <= 5; cap++) {
            int all = 1;
            for (int i = 0; all && i < 3; i++) {
                all = geometry_at(impl[i], off, cap, m[i].ndim, m[i].sizes,
                                  m[i].strides);
            }
            if (all) {
                geometry_offset = off;
                inline_dims = cap;
                goto done;
            }
        }
    }
done:
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(p[i]);
    }
    return rc;
}

int
tc_tensor_geometry(PyObject *t, int *ndim, const int64_t **sizes,
                   const int64_t **strides)
{
    if (geometry_offset < 0) {
        return 0;
    }
    const char *impl = impl_of(t, impl_offset);
    if (impl == NULL) {
        return 0;
    }
    int64_t n = impl_word(impl, geometry_offset);
    const int64_t *data = (const int64_t *)(impl + geometry_offset + 8);
    int cap = inline_dims;
    if (n > cap) {
        memcpy(&data, data, sizeof(data));
        cap = (int)n;
    }
    *ndim = (int)n;
    *sizes = data;
    *strides = data + cap;
    return 1;
}

int
tc_tensor_keys_init(void)
{
    static const char *const cpu[] = {"CPU", "ADInplaceOrView", "AutogradCPU",
                                      "AutocastCPU", NULL};
    static const char *const cuda[] = {"CUDA", "ADInplaceOrView",
                                       "AutogradCUDA", "AutocastCUDA", NULL};
    static const char *const cpu_backend[] = {"CPU", NULL};
    static const char *const cuda_backend[] = {"CUDA", NULL};
    static const char *const functorch[] = {"FuncTorchBatched",
                                            "FuncTorchGradWrapper",
                                            "Functionalize", NULL};
    PyObject *torch = PyImport_ImportModule("torch");
    PyObject *torch_c = torch ? PyObject_GetAttrString(torch, "_C") : NULL;
    PyObject *nn = torch ? PyImport_ImportModule("torch.nn") : NULL;
    PyObject *probes[3] = {NULL};
    int rc = -1;
    if (torch_c == NULL || nn == NULL) {
        goto done;
    }
    fn_dispatch_keys = PyObject_GetAttrString(torch_c, "_dispatch_keys");
    keyset_type = PyObject_GetAttrString(torch_c, "DispatchKeySet");
    tensor_type = PyObject_GetAttrString(torch, "Tensor");
    parameter_type = PyObject_GetAttrString(nn, "Parameter");
    str_raw_repr = PyUnicode_InternFromString("raw_repr");
    if (!fn_dispatch_keys || !keyset_type || !tensor_type || !parameter_type
        || !str_raw_repr || keyset_of(cpu, &plain_keys[0]) < 0
        || keyset_of(cuda, &plain_keys[1]) < 0
        || keyset_of(cpu_backend, &backend_keys[0]) < 0
        || keyset_of(cuda_backend, &backend_keys[1]) < 0
        || keyset_of(functorch, &functorch_keys) < 0) {
        goto done;
    }
    /* three key sets: plain, meta, negative view */
    probes[0] = PyObject_CallMethod(torch, "empty", "i", 1);
    PyObject *meta = Py_BuildValue("{s:s}", "device", "meta");
    PyObject *empty = PyObject_GetAttrString(torch, "empty");
    PyObject *args = Py_BuildValue("(i)", 1);
    probes[1] = probes[0] && meta && empty && args
                ? PyObject_Call(empty, args, meta) : NULL;
    Py_XDECREF(meta);
    Py_XDECREF(empty);
    Py_XDECREF(args);
    probes[2] = probes[1] ? PyObject_CallMethod(torch, "_neg_view", "O",
                                                probes[0]) : NULL;
    if (probes[2] != NULL) {
        rc = probe_offsets(probes, 3);
    }
    if (rc == 0 && keys_offset >= 0) {
        rc = probe_geometry(torch);
    }
done:
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(probes[i]);
    }
    Py_XDECREF(torch);
    Py_XDECREF(torch_c);
    Py_XDECREF(nn);
    return rc;
}

int
tc_tensor_keys(PyObject *t, uint64_t *keys)
{
    if (keys_offset >= 0) {
        const char *impl = impl_of(t, impl_offset);
        if (impl != NULL) {
            memcpy(keys, impl + keys_offset, sizeof(*keys));
            return 0;
        }
    }
    return keys_py(t, keys);
}

int
tc_tensor_keys_direct(void)
{
    return keys_offset >= 0;
}

int
tc_tensor_keys_plain(uint64_t keys)
{
    for (int i = 0; i < 2; i++) {
        if ((keys & ~plain_keys[i]) == 0
            && (keys & backend_keys[i]) == backend_keys[i]) {
            return 1;
        }
    }
    return 0;
}

int
tc_tensor_type_plain(PyObject *t)
{
    return (PyObject *)Py_TYPE(t) == tensor_type
           || (PyObject *)Py_TYPE(t) == parameter_type;
}

PyObject *
tc_tensor_keys_repr(uint64_t keys)
{
    PyObject *set = PyObject_CallMethod(keyset_type, "from_raw_repr", "K",
                                        (unsigned long long)keys);
    PyObject *r = set ? PyObject_Repr(set) : NULL;
    Py_XDECREF(set);
    return r;
}

PyObject *
tc_tensor_unsupported_reason(PyObject *t)
{
    uint64_t keys;
    if (!tc_tensor_type_plain(t)) {
        return PyUnicode_FromFormat(
            "a tensor of the torch.Tensor subclass %s (its __torch_function__ "
            "/ __torch_dispatch__ decide what ops do; tcjit compiles "
            "torch.Tensor and nn.Parameter)", Py_TYPE(t)->tp_name);
    }
    if (tc_tensor_keys(t, &keys) < 0) {
        return NULL;
    }
    PyObject *ks = tc_tensor_keys_repr(keys);
    PyObject *layout = ks ? PyObject_GetAttrString(t, "layout") : NULL;
    PyObject *device = layout ? PyObject_GetAttrString(t, "device") : NULL;
    PyObject *dtype = device ? PyObject_GetAttrString(t, "dtype") : NULL;
    PyObject *dim = dtype ? PyObject_CallMethod(t, "dim", NULL) : NULL;
    PyObject *r = NULL;
    if (dim != NULL && !tc_tensor_keys_plain(keys)) {
        r = PyUnicode_FromFormat(
            "a %s tensor (layout %S, device %S, %U): tcjit compiles plain "
            "dense CPU and CUDA tensors", keys & functorch_keys
            ? "functorch-wrapped (torch.func.vmap / grad / functionalize)"
            : "non-dense", layout, device, ks);
    }
    else if (dim != NULL) {
        r = PyUnicode_FromFormat(
            "a tensor of dtype %S on device %S with %S dims: tcjit compiles "
            "bool, integer and float tensors of up to %d dims on the CPU and "
            "CUDA", dtype, device, dim, TC_MAX_DIMS);
    }
    Py_XDECREF(ks);
    Py_XDECREF(layout);
    Py_XDECREF(device);
    Py_XDECREF(dtype);
    Py_XDECREF(dim);
    return r;
}
