/* runtime.c - compile a plan once, run it per call (see jit.h).
 *
 * The per-call path matters as much as the kernels: a 1-element x + 1 must
 * cost less than eager (~4 us), and torch.empty_strided alone is ~1 us.  So
 * everything that depends only on the (static, guarded) shapes is prepared
 * at compile time: the argument vectors for torch.empty_strided, which
 * buffers need a data pointer, the byte size of temporaries.  A call then
 * does one vectorcall per output, one data_ptr() per used tensor, and the
 * kernel calls.
 */
#include "jit.h"
#include "jit_internal.h"
#include "threadpool.h"

#include <stdlib.h>
#include <string.h>

/* Written by the graph engineer (src/graph); weak so that the backend links
 * and works before/without them. */
#pragma weak tc_kernel_format
#pragma weak tc_plan_free

struct tc_compiled {
    tc_plan *plan;
    tc_jit_code *code;
    PyObject **alloc_argv;  /* [nbuffers][4]: sizes, strides, dtype, device */
    PyObject **view_argv;   /* [noutputs][3]: sizes, strides, offset; NULL
                               for outputs that are not views */
    size_t *temp_bytes;     /* [nbuffers]: TEMP allocation size */
    char *needs_ptr;        /* [nbuffers]: some kernel touches it */
    int max_args;
};

static PyObject *empty_strided = NULL;  /* torch.empty_strided */
static PyObject *dtype_kwnames = NULL;  /* ("dtype", "device") */
static PyObject *cpu_device = NULL;     /* torch.device("cpu") */
static PyObject *str_data_ptr = NULL;   /* interned "data_ptr" */
static PyObject *str_storage_offset = NULL; /* interned "storage_offset" */
static PyObject *as_strided = NULL;     /* torch.as_strided */
static PyObject *dtype_objs[TC_NDTYPES];
static int64_t parallel_threshold = 32768;

static const char *const torch_dtype_names[TC_NDTYPES] = {
    "bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64",
};

static size_t
elem_size(tc_dtype dt)
{
    static const size_t sz[TC_NDTYPES] = {1, 1, 1, 2, 4, 8, 4, 8};
    return (unsigned)dt < TC_NDTYPES ? sz[dt] : 1;
}

void
tc_jit_set_parallel_threshold(int64_t n)
{
    parallel_threshold = n > 0 ? n : 1;
}

int64_t
tc_jit_get_parallel_threshold(void)
{
    return parallel_threshold;
}

const char *
tc_jit_cflags(void)
{
    static char flags[128];
    if (flags[0] == '\0') {
        const char *m = tc_cpu_march();
        snprintf(flags, sizeof(flags),
                 "-O2 -ftree-vectorize -fvect-cost-model=dynamic%s%s "
                 "-ffp-contract=off -fno-math-errno "
                 "-fno-trapping-math",
                 m ? " -march=" : "", m ? m : "");
    }
    return flags;
}

int
tc_jit_init(void)
{
    if (empty_strided != NULL) {
        return 0;
    }
    (void)tc_cpu_march();
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
    cpu_device = PyObject_CallMethod(torch, "device", "s", "cpu");
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    dtype_kwnames = Py_BuildValue("(ss)", "dtype", "device");
    empty_strided = PyObject_GetAttrString(torch, "empty_strided");
    str_storage_offset = PyUnicode_InternFromString("storage_offset");
    as_strided = PyObject_GetAttrString(torch, "as_strided");
    if (cpu_device == NULL || str_data_ptr == NULL || dtype_kwnames == NULL
        || empty_strided == NULL || str_storage_offset == NULL
        || as_strided == NULL) {
        goto error;
    }
    Py_DECREF(torch);
    return 0;
error:
    for (int i = 0; i < TC_NDTYPES; i++) {
        Py_CLEAR(dtype_objs[i]);
    }
    Py_CLEAR(cpu_device);
    Py_CLEAR(str_data_ptr);
    Py_CLEAR(dtype_kwnames);
    Py_CLEAR(empty_strided);
    Py_CLEAR(str_storage_offset);
    Py_CLEAR(as_strided);
    Py_DECREF(torch);
    return -1;
}

/* ---- compile ------------------------------------------------------------ */

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

/* Elements a layout spans (0 for an empty one). */
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

/* View outputs (eager returns an alias): the as_strided arguments. */
static int
prepare_views(tc_compiled *c)
{
    tc_plan *p = c->plan;
    if (p->outputs == NULL) {
        return 0;
    }
    c->view_argv = calloc((size_t)(3 * p->noutputs + 1), sizeof(PyObject *));
    if (c->view_argv == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int j = 0; j < p->noutputs; j++) {
        const tc_output_desc *o = &p->outputs[j];
        if (!o->is_view) {
            continue;
        }
        PyObject **argv = &c->view_argv[3 * j];
        argv[0] = int_tuple(o->layout.ndim, o->layout.sizes);
        argv[1] = int_tuple(o->layout.ndim, o->layout.strides);
        argv[2] = PyLong_FromLongLong(o->offset);
        if (argv[0] == NULL || argv[1] == NULL || argv[2] == NULL) {
            return -1;
        }
    }
    return 0;
}

static int
prepare_buffers(tc_compiled *c)
{
    tc_plan *p = c->plan;
    int nb = p->nbuffers;
    c->alloc_argv = calloc((size_t)(4 * nb + 1), sizeof(PyObject *));
    c->temp_bytes = calloc((size_t)(nb + 1), sizeof(size_t));
    c->needs_ptr = calloc((size_t)(nb + 1), 1);
    if (c->alloc_argv == NULL || c->temp_bytes == NULL
        || c->needs_ptr == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int b = 0; b < nb; b++) {
        const tc_buffer *buf = &p->buffers[b];
        if ((unsigned)buf->dtype >= TC_NDTYPES) {
            PyErr_SetString(PyExc_RuntimeError, "tcjit cpu: bad buffer dtype");
            return -1;
        }
        if (buf->kind == TC_BUF_TEMP) {
            c->temp_bytes[b] = (size_t)layout_span(&buf->layout)
                               * elem_size(buf->dtype);
        }
        if (buf->kind != TC_BUF_OUTPUT) {
            continue;
        }
        PyObject **argv = &c->alloc_argv[4 * b];
        argv[0] = int_tuple(buf->layout.ndim, buf->layout.sizes);
        argv[1] = int_tuple(buf->layout.ndim, buf->layout.strides);
        argv[2] = Py_NewRef(dtype_objs[buf->dtype]);
        argv[3] = Py_NewRef(cpu_device);
        if (argv[0] == NULL || argv[1] == NULL) {
            return -1;
        }
    }
    for (int i = 0; i < p->nkernels; i++) {
        const tc_kernel *k = &p->kernels[i];
        c->max_args = k->nargs > c->max_args ? k->nargs : c->max_args;
        for (int a = 0; a < k->nargs; a++) {
            if (k->args[a].buffer < 0 || k->args[a].buffer >= nb) {
                PyErr_SetString(PyExc_RuntimeError,
                                "tcjit cpu: kernel argument without buffer");
                return -1;
            }
            c->needs_ptr[k->args[a].buffer] = 1;
        }
    }
    for (int j = 0; j < p->noutputs; j++) {
        int b = p->output_buffer[j];
        if (b < 0 || b >= nb || p->buffers[b].kind == TC_BUF_TEMP
            || (p->outputs != NULL && p->outputs[j].buffer != b)) {
            PyErr_SetString(PyExc_RuntimeError,
                            "tcjit cpu: graph output maps to no buffer");
            return -1;
        }
    }
    return prepare_views(c);
}

static char *
format_code(const tc_plan *p)
{
    size_t len = 0, cap = 256;
    char *out = malloc(cap);
    if (out == NULL) {
        return NULL;
    }
    out[0] = '\0';
    for (int i = 0; i < p->nkernels; i++) {
        char *s = tc_kernel_format != NULL ? tc_kernel_format(&p->kernels[i])
                                           : NULL;
        char fallback[96];
        if (s == NULL) {
            snprintf(fallback, sizeof(fallback),
                     "// kernel %s: %d insts, %d args\n",
                     p->kernels[i].name, p->kernels[i].ninsts,
                     p->kernels[i].nargs);
        }
        const char *t = s != NULL ? s : fallback;
        size_t n = strlen(t);
        if (len + n + 2 > cap) {
            cap = (len + n + 2) * 2;
            char *o = realloc(out, cap);
            if (o == NULL) {
                free(s);
                free(out);
                return NULL;
            }
            out = o;
        }
        memcpy(out + len, t, n + 1);
        len += n;
        free(s);
    }
    return out;
}

tc_compiled *
tc_jit_compile(tc_plan *plan, char **code_text)
{
    if (code_text != NULL) {
        *code_text = NULL;
    }
    if (plan == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "tcjit cpu: no plan");
        return NULL;
    }
    if (empty_strided == NULL && tc_jit_init() < 0) {
        free_plan(plan);
        return NULL;
    }
    tc_compiled *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        free_plan(plan);
        PyErr_NoMemory();
        return NULL;
    }
    c->plan = plan;
    if (prepare_buffers(c) < 0) {
        tc_jit_free(c);
        return NULL;
    }
    if (code_text != NULL) {
        *code_text = format_code(plan);
    }
    char err[1024] = "";
    tc_jit_code *code;
    /* gcc takes tens of ms and touches no Python state */
    Py_BEGIN_ALLOW_THREADS
    code = tc_jit_code_compile(plan, err, sizeof(err));
    Py_END_ALLOW_THREADS
    if (code == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%s", err);
        if (code_text != NULL) {
            free(*code_text);
            *code_text = NULL;
        }
        tc_jit_free(c);
        return NULL;
    }
    c->code = code;
    return c;
}

void
tc_jit_free(tc_compiled *c)
{
    if (c == NULL) {
        return;
    }
    if (c->alloc_argv != NULL) {
        for (int i = 0; i < 4 * c->plan->nbuffers; i++) {
            Py_XDECREF(c->alloc_argv[i]);
        }
    }
    free(c->alloc_argv);
    if (c->view_argv != NULL) {
        for (int i = 0; i < 3 * c->plan->noutputs; i++) {
            Py_XDECREF(c->view_argv[i]);
        }
    }
    free(c->view_argv);
    free(c->temp_bytes);
    free(c->needs_ptr);
    tc_jit_code_free(c->code);
    free_plan(c->plan);
    free(c);
}

int
tc_jit_nkernels(const tc_compiled *c)
{
    return c != NULL && c->code != NULL ? c->code->nkernels : 0;
}

const tc_jit_code *
tc_jit_compiled_code(const tc_compiled *c)
{
    return c != NULL ? c->code : NULL;
}

/* ---- run ---------------------------------------------------------------- */

static void *
tensor_data_ptr(PyObject *t)
{
    PyObject *r = PyObject_VectorcallMethod(
        str_data_ptr, &t, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    if (r == NULL) {
        return NULL;
    }
    void *p = PyLong_AsVoidPtr(r);
    Py_DECREF(r);
    return p;
}

static int
run_kernel(const tc_jit_code *code, int i, void **args)
{
    int rc;
    if (tc_jit_code_work(code, i) >= parallel_threshold) {
        /* the pool (and a long kernel) runs without the GIL */
        Py_BEGIN_ALLOW_THREADS
        rc = tc_jit_code_run(code, i, args, parallel_threshold);
        Py_END_ALLOW_THREADS
    }
    else {
        rc = tc_jit_code_run(code, i, args, parallel_threshold);
    }
    if (rc < 0) {
        PyErr_NoMemory();
    }
    return rc;
}

/* Graph output j: the buffer's tensor, or for a view output
 * torch.as_strided(base, sizes, strides, base.storage_offset() + offset),
 * an alias of the input (or of the output buffer) as eager returns. */
static PyObject *
make_output(tc_compiled *c, int j, PyObject *base)
{
    const tc_plan *p = c->plan;
    if (p->outputs == NULL || !p->outputs[j].is_view) {
        return Py_NewRef(base);
    }
    PyObject **va = &c->view_argv[3 * j];
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

/* Fills objs/ptrs for every buffer; TEMPs are malloc'd into ptrs. */
static int
bind_buffers(tc_compiled *c, PyObject *const *inputs, Py_ssize_t ninputs,
             PyObject **objs, void **ptrs)
{
    const tc_plan *p = c->plan;
    for (int b = 0; b < p->nbuffers; b++) {
        const tc_buffer *buf = &p->buffers[b];
        if (buf->kind == TC_BUF_INPUT) {
            if (buf->index < 0 || buf->index >= ninputs) {
                PyErr_SetString(PyExc_RuntimeError,
                                "tcjit cpu: missing graph input");
                return -1;
            }
            objs[b] = Py_NewRef(inputs[buf->index]);
        }
        else if (buf->kind == TC_BUF_OUTPUT) {
            objs[b] = PyObject_Vectorcall(empty_strided, &c->alloc_argv[4 * b],
                                          2, dtype_kwnames);
            if (objs[b] == NULL) {
                return -1;
            }
        }
        else {
            size_t n = (c->temp_bytes[b] + 63) & ~(size_t)63;
            ptrs[b] = aligned_alloc(64, n > 0 ? n : 64);
            if (ptrs[b] == NULL) {
                PyErr_NoMemory();
                return -1;
            }
            continue;
        }
        if (c->needs_ptr[b]) {
            ptrs[b] = tensor_data_ptr(objs[b]);
            if (ptrs[b] == NULL && PyErr_Occurred()) {
                return -1;
            }
        }
    }
    return 0;
}

static void
release_buffers(const tc_plan *p, PyObject **objs, void **ptrs)
{
    for (int b = 0; b < p->nbuffers; b++) {
        Py_XDECREF(objs[b]);
        if (p->buffers[b].kind == TC_BUF_TEMP) {
            free(ptrs[b]);
        }
    }
}

#define TC_STACK_BUFS 32

int
tc_jit_run(tc_compiled *c, PyObject *const *inputs, Py_ssize_t ninputs,
           PyObject **outputs)
{
    const tc_plan *p = c->plan;
    int nb = p->nbuffers;
    PyObject *objs_stack[TC_STACK_BUFS];
    void *ptrs_stack[TC_STACK_BUFS + TC_STACK_BUFS];
    PyObject **objs = objs_stack;
    void **ptrs = ptrs_stack, **args = ptrs_stack + TC_STACK_BUFS;
    if (nb > TC_STACK_BUFS || c->max_args > TC_STACK_BUFS) {
        size_t n = (size_t)(nb > c->max_args ? nb : c->max_args) + 1;
        objs = calloc(n, sizeof(PyObject *));
        ptrs = calloc(2 * n, sizeof(void *));
        if (objs == NULL || ptrs == NULL) {
            free(objs);
            free(ptrs);
            PyErr_NoMemory();
            return -1;
        }
        args = ptrs + n;
    }
    else {
        memset(objs, 0, sizeof(PyObject *) * (size_t)nb);
        memset(ptrs, 0, sizeof(void *) * (size_t)nb);
    }
    int rc = bind_buffers(c, inputs, ninputs, objs, ptrs);
    for (int i = 0; rc == 0 && i < c->code->nkernels; i++) {
        const tc_kernel *k = &p->kernels[i];
        for (int a = 0; a < k->nargs; a++) {
            args[a] = ptrs[k->args[a].buffer];
        }
        rc = run_kernel(c->code, i, args);
    }
    int nout = 0;
    for (; rc == 0 && nout < p->noutputs; nout++) {
        outputs[nout] = make_output(c, nout, objs[p->output_buffer[nout]]);
        if (outputs[nout] == NULL) {
            rc = -1;
            break;
        }
    }
    if (rc < 0) {
        for (int j = 0; j < nout; j++) {
            Py_CLEAR(outputs[j]);
        }
    }
    release_buffers(p, objs, ptrs);
    if (objs != objs_stack) {
        free(objs);
        free(ptrs);
    }
    return rc;
}
