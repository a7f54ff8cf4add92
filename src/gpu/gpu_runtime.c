/* gpu_runtime.c - compile a plan for a CUDA device once, run it per call
 * (see gpu.h).
 *
 * Per call: one cuCtxGetCurrent (the primary context of the device is made
 * current only when it is not), one vectorcall per output / temporary
 * (torch.empty_strided on cuda:N, arguments prebuilt), one data_ptr() per
 * used tensor, one call for torch's current stream, and one cuLaunchKernel
 * per kernel (two for a split reduction, which also gets a uint8 scratch
 * tensor for its partials).
 *
 * The stream: torch._C._cuda_getCurrentRawStream(device) returns the raw
 * cudaStream_t as an int (~0.1-0.2 us); when a torch build lacks it we
 * fall back to torch.cuda.current_stream(device).cuda_stream, which builds
 * a Stream object per call (~2-3 us).  The callable is looked up once.
 * Temporaries are uint8 torch tensors too: freeing them right after the
 * launches is safe because torch's caching allocator is stream-ordered on
 * the current stream, which is the stream the kernels run on.
 */
#include "gpu.h"
#include "driver.h"

#include <stdlib.h>
#include <string.h>

#pragma weak tc_plan_free

struct tc_gpu_compiled {
    tc_plan *plan;
    int device;
    tc_ptx_module mod;
    CUfunction *fn;         /* [nkernels] scalar entries */
    CUfunction *fn_vec;     /* [nkernels] vector entries or NULL */
    PyObject **alloc_argv;  /* [nbuffers][4]: sizes, strides, dtype, device */
    PyObject **view_argv;   /* [noutputs][3]: sizes, strides, offset */
    char *needs_ptr;        /* [nbuffers] */
    int max_args;
    CUfunction *fn_fin;     /* [nkernels] split-reduction final entries */
    int64_t scratch_bytes;  /* largest scratch of a split reduction */
    PyObject *scratch_argv[4];  /* torch.empty_strided arguments for it */
};

static PyObject *empty_strided = NULL;
static PyObject *as_strided = NULL;
static PyObject *alloc_kwnames = NULL;  /* ("dtype", "device") */
static PyObject *get_stream = NULL;     /* see the file comment */
static int stream_is_raw = 0;
static PyObject *cuda_stream_attr = NULL;
static PyObject *str_data_ptr = NULL;
static PyObject *str_storage_offset = NULL;
static PyObject *dtype_objs[TC_NDTYPES];

static const char *const torch_dtype_names[TC_NDTYPES] = {
    "bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64",
};

int
tc_gpu_available(void)
{
    char err[256];
    return tc_cu_load(err, sizeof(err)) != NULL;
}

static int
gpu_init(void)
{
    if (empty_strided != NULL) {
        return 0;
    }
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch == NULL) {
        return -1;
    }
    for (int i = 0; i < TC_NDTYPES; i++) {
        dtype_objs[i] = PyObject_GetAttrString(torch, torch_dtype_names[i]);
        if (dtype_objs[i] == NULL) {
            goto error;
        }
    }
    PyObject *C = PyObject_GetAttrString(torch, "_C");
    if (C != NULL) {
        get_stream = PyObject_GetAttrString(C, "_cuda_getCurrentRawStream");
        Py_DECREF(C);
    }
    if (get_stream != NULL) {
        stream_is_raw = 1;
    }
    else {
        PyErr_Clear();
        PyObject *cuda = PyObject_GetAttrString(torch, "cuda");
        if (cuda == NULL) {
            goto error;
        }
        get_stream = PyObject_GetAttrString(cuda, "current_stream");
        Py_DECREF(cuda);
        if (get_stream == NULL) {
            goto error;
        }
    }
    cuda_stream_attr = PyUnicode_InternFromString("cuda_stream");
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    str_storage_offset = PyUnicode_InternFromString("storage_offset");
    alloc_kwnames = Py_BuildValue("(ss)", "dtype", "device");
    as_strided = PyObject_GetAttrString(torch, "as_strided");
    empty_strided = PyObject_GetAttrString(torch, "empty_strided");
    if (cuda_stream_attr == NULL || str_data_ptr == NULL
        || str_storage_offset == NULL || alloc_kwnames == NULL
        || as_strided == NULL || empty_strided == NULL) {
        goto error;
    }
    Py_DECREF(torch);
    return 0;
error:
    for (int i = 0; i < TC_NDTYPES; i++) {
        Py_CLEAR(dtype_objs[i]);
    }
    Py_CLEAR(get_stream);
    Py_CLEAR(cuda_stream_attr);
    Py_CLEAR(str_data_ptr);
    Py_CLEAR(str_storage_offset);
    Py_CLEAR(alloc_kwnames);
    Py_CLEAR(as_strided);
    Py_CLEAR(empty_strided);
    Py_DECREF(torch);
    return -1;
}

static void
free_plan(tc_plan *p)
{
    if (p == NULL) {
        return;
    }
    if (tc_plan_free != NULL) {
        tc_plan_free(p);
        return;
    }
    for (int i = 0; i < p->nkernels; i++) {
        free(p->kernels[i].args);
        free(p->kernels[i].insts);
        free(p->kernels[i].desc);
    }
    free(p->kernels);
    free(p->buffers);
    free(p->output_buffer);
    free(p->outputs);
    free(p);
}

static PyObject *
int_tuple(int n, const int64_t *v)
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

static int64_t
layout_span(const tc_layout *l)
{
    int64_t span = 1;
    for (int d = 0; d < l->ndim; d++) {
        if (l->sizes[d] == 0) {
            return 0;
        }
        span += (l->sizes[d] - 1) * (l->strides[d] < 0 ? -l->strides[d]
                                                      : l->strides[d]);
    }
    return span;
}

static int
prepare(tc_gpu_compiled *c)
{
    tc_plan *p = c->plan;
    int nb = p->nbuffers;
    c->alloc_argv = calloc((size_t)(4 * nb + 1), sizeof(PyObject *));
    c->view_argv = calloc((size_t)(3 * p->noutputs + 1), sizeof(PyObject *));
    c->needs_ptr = calloc((size_t)(nb + 1), 1);
    if (c->alloc_argv == NULL || c->view_argv == NULL || c->needs_ptr == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *dev = PyUnicode_FromFormat("cuda:%d", c->device);
    if (dev == NULL) {
        return -1;
    }
    for (int b = 0; b < nb; b++) {
        const tc_buffer *buf = &p->buffers[b];
        if ((unsigned)buf->dtype >= TC_NDTYPES) {
            Py_DECREF(dev);
            PyErr_SetString(PyExc_RuntimeError, "tcjit gpu: bad buffer dtype");
            return -1;
        }
        PyObject **argv = &c->alloc_argv[4 * b];
        if (buf->kind == TC_BUF_OUTPUT) {
            argv[0] = int_tuple(buf->layout.ndim, buf->layout.sizes);
            argv[1] = int_tuple(buf->layout.ndim, buf->layout.strides);
            argv[2] = Py_NewRef(dtype_objs[buf->dtype]);
        }
        else if (buf->kind == TC_BUF_TEMP) {
            /* a flat byte buffer the kernels index through their strides */
            int64_t n = layout_span(&buf->layout)
                        * (int64_t)(buf->dtype == TC_F64 || buf->dtype == TC_I64
                                        ? 8
                                    : buf->dtype == TC_F32 || buf->dtype == TC_I32
                                        ? 4
                                    : buf->dtype == TC_I16 ? 2 : 1);
            int64_t one = 1;
            argv[0] = int_tuple(1, &n);
            argv[1] = int_tuple(1, &one);
            argv[2] = Py_NewRef(dtype_objs[TC_U8]);
        }
        else {
            continue;
        }
        argv[3] = Py_NewRef(dev);
        if (argv[0] == NULL || argv[1] == NULL) {
            Py_DECREF(dev);
            return -1;
        }
    }
    Py_DECREF(dev);
    for (int i = 0; i < p->nkernels; i++) {
        const tc_kernel *k = &p->kernels[i];
        c->max_args = k->nargs > c->max_args ? k->nargs : c->max_args;
        for (int a = 0; a < k->nargs; a++) {
            if (k->args[a].buffer < 0 || k->args[a].buffer >= nb) {
                PyErr_SetString(PyExc_RuntimeError,
                                "tcjit gpu: kernel argument without buffer");
                return -1;
            }
            c->needs_ptr[k->args[a].buffer] = 1;
        }
    }
    for (int j = 0; j < p->noutputs; j++) {
        int b = p->output_buffer[j];
        if (b < 0 || b >= nb || p->buffers[b].kind == TC_BUF_TEMP) {
            PyErr_SetString(PyExc_RuntimeError,
                            "tcjit gpu: graph output maps to no buffer");
            return -1;
        }
        if (p->outputs != NULL && p->outputs[j].is_view) {
            const tc_output_desc *o = &p->outputs[j];
            PyObject **v = &c->view_argv[3 * j];
            v[0] = int_tuple(o->layout.ndim, o->layout.sizes);
            v[1] = int_tuple(o->layout.ndim, o->layout.strides);
            v[2] = PyLong_FromLongLong(o->offset);
            if (v[0] == NULL || v[1] == NULL || v[2] == NULL) {
                return -1;
            }
        }
    }
    return 0;
}

tc_gpu_compiled *
tc_gpu_compile(tc_plan *plan, int device, char **code_text)
{
    if (code_text != NULL) {
        *code_text = NULL;
    }
    if (plan == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tcjit gpu: no plan");
        return NULL;
    }
    if (gpu_init() < 0) {
        free_plan(plan);
        return NULL;
    }
    tc_gpu_compiled *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        free_plan(plan);
        PyErr_NoMemory();
        return NULL;
    }
    c->plan = plan;
    c->device = device;
    if (prepare(c) < 0) {
        tc_gpu_free(c);
        return NULL;
    }
    char err[2048] = "";
    int sm = 0, nsm = 0, rc;
    CUmodule mod = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = tc_cu_device_info(device, &sm, &nsm, err, sizeof(err));
    if (rc == 0) {
        rc = tc_ptx_emit(plan, sm, nsm, &c->mod, err, sizeof(err));
    }
    if (rc == 0) {
        rc = tc_cu_module(c->mod.text, device, &mod, err, sizeof(err));
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        PyErr_SetString(PyExc_RuntimeError, err);
        tc_gpu_free(c);
        return NULL;
    }
    int n = plan->nkernels;
    c->fn = calloc((size_t)(n + 1), sizeof(CUfunction));
    c->fn_vec = calloc((size_t)(n + 1), sizeof(CUfunction));
    c->fn_fin = calloc((size_t)(n + 1), sizeof(CUfunction));
    if (c->fn == NULL || c->fn_vec == NULL || c->fn_fin == NULL) {
        PyErr_NoMemory();
        tc_gpu_free(c);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const tc_ptx_kernel *ki = &c->mod.kernels[i];
        if (tc_cu_function(mod, ki->entry, &c->fn[i], err, sizeof(err)) < 0
            || (ki->entry_vec[0]
                && tc_cu_function(mod, ki->entry_vec, &c->fn_vec[i], err,
                                  sizeof(err)) < 0)
            || (ki->entry_final[0]
                && tc_cu_function(mod, ki->entry_final, &c->fn_fin[i], err,
                                  sizeof(err)) < 0)) {
            PyErr_SetString(PyExc_RuntimeError, err);
            tc_gpu_free(c);
            return NULL;
        }
        if (ki->scratch_bytes > c->scratch_bytes) {
            c->scratch_bytes = ki->scratch_bytes;
        }
    }
    if (c->scratch_bytes > 0) {
        /* a uint8 tensor per call (like the temporaries: stream-ordered
         * caching allocator, so concurrent calls on other streams never
         * share it) */
        int64_t one = 1;
        c->scratch_argv[0] = int_tuple(1, &c->scratch_bytes);
        c->scratch_argv[1] = int_tuple(1, &one);
        c->scratch_argv[2] = Py_NewRef(dtype_objs[TC_U8]);
        c->scratch_argv[3] = PyUnicode_FromFormat("cuda:%d", device);
        if (c->scratch_argv[0] == NULL || c->scratch_argv[1] == NULL
            || c->scratch_argv[3] == NULL) {
            tc_gpu_free(c);
            return NULL;
        }
    }
    if (code_text != NULL) {
        *code_text = strdup(c->mod.text);
    }
    return c;
}

void
tc_gpu_free(tc_gpu_compiled *c)
{
    if (c == NULL) {
        return;
    }
    if (c->alloc_argv != NULL) {
        for (int i = 0; i < 4 * c->plan->nbuffers; i++) {
            Py_XDECREF(c->alloc_argv[i]);
        }
    }
    if (c->view_argv != NULL) {
        for (int i = 0; i < 3 * c->plan->noutputs; i++) {
            Py_XDECREF(c->view_argv[i]);
        }
    }
    free(c->alloc_argv);
    free(c->view_argv);
    free(c->needs_ptr);
    free(c->fn);
    free(c->fn_vec);
    free(c->fn_fin);
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(c->scratch_argv[i]);
    }
    /* the CUmodule stays in the driver.c cache for the process */
    tc_ptx_module_clear(&c->mod);
    free_plan(c->plan);
    free(c);
}

int
tc_gpu_nkernels(const tc_gpu_compiled *c)
{
    return c != NULL ? c->mod.nkernels : 0;
}

/* ---- run ------------------------------------------------------------------ */

static int
data_ptr(PyObject *t, CUdeviceptr *out)
{
    PyObject *r = PyObject_VectorcallMethod(
        str_data_ptr, &t, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL) {
        return -1;
    }
    *out = (CUdeviceptr)PyLong_AsUnsignedLongLongMask(r);
    Py_DECREF(r);
    return PyErr_Occurred() ? -1 : 0;
}

static int
current_stream(int device, CUstream *out)
{
    PyObject *d = PyLong_FromLong(device);
    if (d == NULL) {
        return -1;
    }
    PyObject *s = PyObject_CallOneArg(get_stream, d);
    Py_DECREF(d);
    if (s == NULL) {
        return -1;
    }
    if (!stream_is_raw) {
        Py_SETREF(s, PyObject_GetAttr(s, cuda_stream_attr));
        if (s == NULL) {
            return -1;
        }
    }
    *out = (CUstream)(uintptr_t)PyLong_AsUnsignedLongLongMask(s);
    Py_DECREF(s);
    return PyErr_Occurred() ? -1 : 0;
}

#define TC_STACK_BUFS 32

int
tc_gpu_run(tc_gpu_compiled *c, PyObject *const *inputs, Py_ssize_t ninputs,
           PyObject **outputs)
{
    const tc_plan *p = c->plan;
    int nb = p->nbuffers;
    char err[512];
    PyObject *objs_stack[TC_STACK_BUFS];
    CUdeviceptr ptrs_stack[TC_STACK_BUFS], args_stack[TC_STACK_BUFS];
    void *params_stack[TC_STACK_BUFS];
    PyObject **objs = objs_stack;
    CUdeviceptr *ptrs = ptrs_stack, *args = args_stack;
    void **params = params_stack;
    PyObject *scratch = NULL;
    int rc = -1;
    /* + 1: the scratch pointer of split reductions */
    if (nb > TC_STACK_BUFS - 1 || c->max_args > TC_STACK_BUFS - 1) {
        size_t n = (size_t)(nb > c->max_args ? nb : c->max_args) + 2;
        objs = calloc(n, sizeof(PyObject *));
        ptrs = calloc(n, sizeof(CUdeviceptr));
        args = calloc(n, sizeof(CUdeviceptr));
        params = calloc(n, sizeof(void *));
        if (!objs || !ptrs || !args || !params) {
            PyErr_NoMemory();
            goto out;
        }
    }
    else {
        memset(objs, 0, sizeof(PyObject *) * (size_t)nb);
    }
    if (tc_cu_make_current(c->device, err, sizeof(err)) < 0) {
        PyErr_SetString(PyExc_RuntimeError, err);
        goto out;
    }
    for (int b = 0; b < nb; b++) {
        const tc_buffer *buf = &p->buffers[b];
        ptrs[b] = 0;
        if (buf->kind == TC_BUF_INPUT) {
            if (buf->index < 0 || buf->index >= ninputs) {
                PyErr_SetString(PyExc_RuntimeError,
                                "tcjit gpu: missing graph input");
                goto out;
            }
            objs[b] = Py_NewRef(inputs[buf->index]);
        }
        else {
            objs[b] = PyObject_Vectorcall(empty_strided, &c->alloc_argv[4 * b],
                                          2, alloc_kwnames);
            if (objs[b] == NULL) {
                goto out;
            }
        }
        if (c->needs_ptr[b] && data_ptr(objs[b], &ptrs[b]) < 0) {
            goto out;
        }
    }
    CUstream stream = NULL;
    if (p->nkernels > 0 && current_stream(c->device, &stream) < 0) {
        goto out;
    }
    CUdeviceptr scratch_ptr = 0;
    if (c->scratch_bytes > 0) {
        scratch = PyObject_Vectorcall(empty_strided, c->scratch_argv, 2,
                                      alloc_kwnames);
        if (scratch == NULL || data_ptr(scratch, &scratch_ptr) < 0) {
            goto out;
        }
    }
    for (int i = 0; i < p->nkernels; i++) {
        const tc_kernel *k = &p->kernels[i];
        const tc_ptx_kernel *ki = &c->mod.kernels[i];
        if (ki->skip) {
            continue;
        }
        CUdeviceptr misalign = 0;
        for (int a = 0; a < k->nargs; a++) {
            args[a] = ptrs[k->args[a].buffer];
            params[a] = &args[a];
            misalign |= args[a] & 15;
        }
        args[k->nargs] = scratch_ptr;   /* split reductions only */
        params[k->nargs] = &args[k->nargs];
        int vec = c->fn_vec[i] != NULL && misalign == 0;
        if (tc_cu_launch(vec ? c->fn_vec[i] : c->fn[i],
                         vec ? ki->entry_vec : ki->entry,
                         (unsigned)(vec ? ki->grid_vec : ki->grid),
                         (unsigned)ki->block, stream, params, err,
                         sizeof(err)) < 0) {
            PyErr_SetString(PyExc_RuntimeError, err);
            goto out;
        }
        if (c->fn_fin[i] != NULL
            && tc_cu_launch(c->fn_fin[i], ki->entry_final,
                            (unsigned)ki->grid_final,
                            (unsigned)ki->block_final, stream, params, err,
                            sizeof(err)) < 0) {
            PyErr_SetString(PyExc_RuntimeError, err);
            goto out;
        }
    }
    for (int j = 0; j < p->noutputs; j++) {
        PyObject *base = objs[p->output_buffer[j]];
        if (p->outputs == NULL || !p->outputs[j].is_view) {
            outputs[j] = Py_NewRef(base);
            continue;
        }
        /* torch.as_strided(B, sizes, strides, B.storage_offset() + off) */
        PyObject *so = PyObject_VectorcallMethod(
            str_storage_offset, &base, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
            NULL);
        PyObject *off = so ? PyNumber_Add(so, c->view_argv[3 * j + 2]) : NULL;
        Py_XDECREF(so);
        if (off == NULL) {
            for (int q = 0; q < j; q++) {
                Py_CLEAR(outputs[q]);
            }
            goto out;
        }
        PyObject *argv[4] = {base, c->view_argv[3 * j],
                             c->view_argv[3 * j + 1], off};
        outputs[j] = PyObject_Vectorcall(as_strided, argv, 4, NULL);
        Py_DECREF(off);
        if (outputs[j] == NULL) {
            for (int q = 0; q < j; q++) {
                Py_CLEAR(outputs[q]);
            }
            goto out;
        }
    }
    rc = 0;
out:
    Py_XDECREF(scratch);
    if (objs != NULL) {
        for (int b = 0; b < nb; b++) {
            Py_XDECREF(objs[b]);
        }
    }
    if (objs != objs_stack) {
        free(objs);
        free(ptrs);
        free(args);
        free(params);
    }
    return rc;
}
