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
 * the current stream, which is the stream the kernels run on.  Buffers
 * and outputs as torch tensors: ../runtime/tensor_alloc.c (shared with the CPU
 * executor).
 */
#include "gpu.h"
#include "driver.h"
#include "autotune.h"
#include "../runtime/tensor_alloc.h"
#include "../runtime/extern_call.h"
#include "../runtime/threadpool.h"
#include "../graph/textbuf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct tc_gpu_compiled {
    tc_plan *plan;
    int device;
    tc_ptx_module mod;
    CUfunction *fn;         /* [nkernels] scalar entries */
    CUfunction *fn_vec;     /* [nkernels] vector entries or NULL */
    tc_tensor_alloc alloc;  /* buffers (TEMPs too) and outputs as tensors */
    CUfunction *fn_fin;     /* [nkernels] split-reduction final entries */
    int64_t scratch_bytes;  /* largest scratch of a split reduction */
    PyObject *scratch_argv[4];  /* torch.empty_strided arguments for it */
    tc_extern_rt *ext;      /* extern steps (torch's own kernels), or NULL */
    int ncompiled;          /* kernels whose module this compile loaded
                               (dynamic shapes: the others were shared) */
};

static PyObject *get_stream = NULL;     /* see the file comment */
static int stream_is_raw = 0;
static PyObject *cuda_stream_attr = NULL;

int
tc_gpu_available(void)
{
    char err[256];
    return tc_cu_load(err, sizeof(err)) != NULL;
}

static int
gpu_init(void)
{
    if (get_stream != NULL) {
        return 0;
    }
    if (tc_alloc_init() < 0) {
        return -1;
    }
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch == NULL) {
        return -1;
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
    if (cuda_stream_attr == NULL) {
        goto error;
    }
    Py_DECREF(torch);
    return 0;
error:
    Py_CLEAR(get_stream);
    Py_CLEAR(cuda_stream_attr);
    Py_DECREF(torch);
    return -1;
}

/* TCJIT_LOGS=output_code: the plan's module, then each size-generic
 * kernel's (once). */
static char *
module_texts(const tc_ptx_module *m)
{
    tc_textbuf b = {0};
    if (m->nparts > 0) {
        tc_textbuf_printf(&b, "// JIT-compiled as %d parts in parallel "
                          "(ptx_emit.c PART_BYTES)\n", m->nparts);
    }
    tc_textbuf_printf(&b, "%s", m->text);
    for (int i = 0; i < m->nkernels; i++) {
        const char *t = m->kernels[i].text;
        int seen = t == NULL;
        for (int j = 0; j < i && !seen; j++) {
            seen = m->kernels[j].text != NULL
                   && strcmp(m->kernels[j].text, t) == 0;
        }
        if (!seen) {
            tc_textbuf_printf(&b, "\n// kernel %d (size-generic, a module "
                              "of its own)\n%s", i, t);
        }
    }
    return tc_textbuf_finish(&b);
}

/* The parts of a large module (ptx.h), JIT-compiled by the driver on the
 * thread pool's threads, the largest first: the driver compiles a module
 * on the thread that loads it. */
typedef struct {
    const tc_ptx_module *m;
    int device;
    int *order;         /* [nparts] part indices, largest first */
    CUmodule *mods;     /* [nparts] */
    int *loaded;        /* [nparts] compiled now, not found loaded */
    char (*errs)[512];  /* [nparts] "" or why the part failed */
    size_t *len;        /* [nparts] text lengths */
} parts_job;

static void
load_part_range(void *ctx, int64_t begin, int64_t end)
{
    parts_job *j = ctx;
    for (int64_t q = begin; q < end; q++) {
        int p = j->order[q];
        if (tc_cu_module_ex(j->m->parts[p], j->device, &j->mods[p],
                            &j->loaded[p], j->errs[p],
                            sizeof(j->errs[p])) < 0
            && j->errs[p][0] == '\0') {
            snprintf(j->errs[p], sizeof(j->errs[p]), "tcjit gpu: part %d "
                     "of a module failed to load", p);
        }
    }
}

static int
load_parts(tc_gpu_compiled *c, CUmodule *mods, char *err, size_t errlen)
{
    const tc_ptx_module *m = &c->mod;
    size_t np = (size_t)m->nparts;
    parts_job j = {m, c->device, calloc(np, sizeof(int)),
                   calloc(np, sizeof(CUmodule)), calloc(np, sizeof(int)),
                   calloc(np, sizeof(*j.errs)), calloc(np, sizeof(size_t))};
    int rc = -1;
    if (j.order == NULL || j.mods == NULL || j.loaded == NULL
        || j.errs == NULL || j.len == NULL) {
        snprintf(err, errlen, "tcjit gpu: out of memory");
        goto done;
    }
    for (int p = 0; p < m->nparts; p++) {   /* insertion sort by size */
        j.len[p] = strlen(m->parts[p]);
        int q = p;
        for (; q > 0 && j.len[j.order[q - 1]] < j.len[p]; q--) {
            j.order[q] = j.order[q - 1];
        }
        j.order[q] = p;
    }
    tc_threadpool_parallel_for(m->nparts, 1, load_part_range, &j);
    for (int p = 0; p < m->nparts; p++) {
        if (j.errs[p][0] != '\0') {
            snprintf(err, errlen, "%s", j.errs[p]);
            goto done;
        }
    }
    c->ncompiled = 0;
    for (int i = 0; i < m->nkernels; i++) {
        if (m->kernels[i].text == NULL) {
            mods[i] = j.mods[m->kernels[i].part];
            c->ncompiled += j.loaded[m->kernels[i].part];
        }
    }
    rc = 0;
done:
    free(j.order);
    free(j.mods);
    free(j.loaded);
    free(j.errs);
    free(j.len);
    return rc;
}

/* The module of each kernel of c into mods[]: the plan's module (every
 * kernel compiled with constant sizes; its parts when it has them), else the size-generic kernel's
 * own, shared with every plan whose kernel has the same text (ptx.h;
 * driver.c caches modules by text).  Counts c->ncompiled.  No Python. */
static int
load_modules(tc_gpu_compiled *c, CUmodule *mods, char *err, size_t errlen)
{
    const tc_ptx_module *m = &c->mod;
    int nstatic = 0, loaded = 0;
    for (int i = 0; i < m->nkernels; i++) {
        nstatic += m->kernels[i].text == NULL;
    }
    CUmodule plan_mod = NULL;
    if (nstatic > 0 && m->nparts > 0) {
        if (load_parts(c, mods, err, errlen) < 0) {
            return -1;
        }
    }
    else if (nstatic > 0) {    /* externs only or all generic: no module */
        if (tc_cu_module_ex(m->text, c->device, &plan_mod, &loaded, err,
                            errlen) < 0) {
            return -1;
        }
        c->ncompiled = loaded ? nstatic : 0;
    }
    for (int i = 0; i < m->nkernels; i++) {
        if (m->nparts == 0) {
            mods[i] = plan_mod;
        }
        if (m->kernels[i].text != NULL) {
            if (tc_cu_module_ex(m->kernels[i].text, c->device, &mods[i],
                                &loaded, err, errlen) < 0) {
                return -1;
            }
            c->ncompiled += loaded;
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
        tc_plan_free(plan);
        return NULL;
    }
    tc_gpu_compiled *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        tc_plan_free(plan);
        PyErr_NoMemory();
        return NULL;
    }
    c->plan = plan;
    c->device = device;
    PyObject *dev = PyUnicode_FromFormat("cuda:%d", device);
    if (dev == NULL
        || tc_alloc_prepare(&c->alloc, plan, dev, 1, "tcjit gpu") < 0
        || ((c->ext = tc_extern_prepare(plan)) == NULL
            && plan->nexterns > 0)) {
        Py_XDECREF(dev);
        tc_gpu_free(c);
        return NULL;
    }
    Py_DECREF(dev);
    char err[2048] = "";
    int sm = 0, nsm = 0, rc;
    int n = plan->nkernels;
    CUmodule *mods = calloc((size_t)(n + 1), sizeof(CUmodule));
    c->fn = calloc((size_t)(n + 1), sizeof(CUfunction));
    c->fn_vec = calloc((size_t)(n + 1), sizeof(CUfunction));
    c->fn_fin = calloc((size_t)(n + 1), sizeof(CUfunction));
    if (mods == NULL || c->fn == NULL || c->fn_vec == NULL
        || c->fn_fin == NULL) {
        free(mods);
        PyErr_NoMemory();
        tc_gpu_free(c);
        return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = tc_cu_device_info(device, &sm, &nsm, err, sizeof(err));
    if (rc == 0) {
        /* max-autotune: the variant timed best (or stored), else 0 */
        int variant = plan->autotune && !plan->dynamic
                      ? tc_gpu_autotune(plan, device, sm, nsm) : 0;
        rc = tc_ptx_emit_variant(plan, sm, nsm, variant, &c->mod, err,
                                 sizeof(err));
    }
    if (rc == 0) {
        rc = load_modules(c, mods, err, sizeof(err));
    }
    Py_END_ALLOW_THREADS
    if (rc < 0) {
        free(mods);
        PyErr_SetString(PyExc_RuntimeError, err);
        tc_gpu_free(c);
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        const tc_ptx_kernel *ki = &c->mod.kernels[i];
        CUmodule mod = mods[i];
        if (tc_cu_function(mod, ki->entry, &c->fn[i], err, sizeof(err)) < 0
            || (ki->entry_vec[0]
                && tc_cu_function(mod, ki->entry_vec, &c->fn_vec[i], err,
                                  sizeof(err)) < 0)
            || (ki->entry_final[0]
                && tc_cu_function(mod, ki->entry_final, &c->fn_fin[i], err,
                                  sizeof(err)) < 0)) {
            free(mods);
            PyErr_SetString(PyExc_RuntimeError, err);
            tc_gpu_free(c);
            return NULL;
        }
        if (ki->scratch_bytes > c->scratch_bytes) {
            c->scratch_bytes = ki->scratch_bytes;
        }
    }
    free(mods);
    if (c->scratch_bytes > 0) {
        /* a uint8 tensor per call (like the temporaries: stream-ordered
         * caching allocator, so concurrent calls on other streams never
         * share it) */
        dev = PyUnicode_FromFormat("cuda:%d", device);
        int r = dev != NULL ? tc_alloc_bytes_argv(c->scratch_argv,
                                                  c->scratch_bytes, dev)
                            : -1;
        Py_XDECREF(dev);
        if (r < 0) {
            tc_gpu_free(c);
            return NULL;
        }
    }
    if (code_text != NULL) {
        *code_text = module_texts(&c->mod);
    }
    return c;
}

void
tc_gpu_free(tc_gpu_compiled *c)
{
    if (c == NULL) {
        return;
    }
    tc_alloc_clear(&c->alloc);
    tc_extern_free(c->ext);
    free(c->fn);
    free(c->fn_vec);
    free(c->fn_fin);
    for (int i = 0; i < 4; i++) {
        Py_XDECREF(c->scratch_argv[i]);
    }
    /* the CUmodule stays in the driver.c cache for the process */
    tc_ptx_module_clear(&c->mod);
    tc_plan_free(c->plan);
    free(c);
}

int
tc_gpu_nkernels(const tc_gpu_compiled *c)
{
    return c != NULL ? c->mod.nkernels : 0;
}

int
tc_gpu_ncompiled(const tc_gpu_compiled *c)
{
    if (c == NULL) {
        return 0;
    }
    return c->plan->dynamic ? c->ncompiled : c->mod.nkernels;
}

/* ---- run ------------------------------------------------------------------ */

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

/* Launch kernel i (and the final pass of a split reduction) on stream. */
static int
launch_kernel(tc_gpu_compiled *c, int i, void **ptrs, CUdeviceptr *args,
              void **params, CUstream stream, void *scratch_ptr)
{
    const tc_kernel *k = &c->plan->kernels[i];
    const tc_ptx_kernel *ki = &c->mod.kernels[i];
    char err[512];
    if (ki->skip) {
        return 0;
    }
    CUdeviceptr misalign = 0;
    for (int a = 0; a < k->nargs; a++) {
        int b = k->args[a].buffer;
        args[a] = b == TC_KARG_INDEX ? 0 : (CUdeviceptr)(uintptr_t)ptrs[b];
        params[a] = &args[a];
        misalign |= args[a] & 15;
    }
    /* split reductions: the scratch; size-generic kernels: their block of
     * sizes (an array parameter: the launch copies its bytes) */
    args[k->nargs] = (CUdeviceptr)(uintptr_t)scratch_ptr;
    params[k->nargs] = ki->dims != NULL ? (void *)ki->dims : &args[k->nargs];
    int vec = c->fn_vec[i] != NULL && misalign == 0;
    if (tc_cu_launch(vec ? c->fn_vec[i] : c->fn[i],
                     vec ? ki->entry_vec : ki->entry,
                     (unsigned)(vec ? ki->grid_vec : ki->grid),
                     (unsigned)ki->block, stream, params, err,
                     sizeof(err)) < 0
        || (c->fn_fin[i] != NULL
            && tc_cu_launch(c->fn_fin[i], ki->entry_final,
                            (unsigned)ki->grid_final,
                            (unsigned)ki->block_final, stream, params, err,
                            sizeof(err)) < 0)) {
        PyErr_SetString(PyExc_RuntimeError, err);
        return -1;
    }
    return 0;
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
    void *ptrs_stack[TC_STACK_BUFS];
    CUdeviceptr args_stack[TC_STACK_BUFS];
    void *params_stack[TC_STACK_BUFS];
    PyObject **objs = objs_stack;
    void **ptrs = ptrs_stack;
    CUdeviceptr *args = args_stack;
    void **params = params_stack;
    PyObject *scratch = NULL;
    int rc = -1;
    int max_args = c->alloc.max_args;
    /* + 1: the scratch pointer of split reductions */
    if (nb > TC_STACK_BUFS - 1 || max_args > TC_STACK_BUFS - 1) {
        size_t n = (size_t)(nb > max_args ? nb : max_args) + 2;
        objs = calloc(n, sizeof(PyObject *));
        ptrs = calloc(n, sizeof(void *));
        args = calloc(n, sizeof(CUdeviceptr));
        params = calloc(n, sizeof(void *));
        if (!objs || !ptrs || !args || !params) {
            PyErr_NoMemory();
            goto out;
        }
    }
    else {
        memset(objs, 0, sizeof(PyObject *) * (size_t)nb);
        memset(ptrs, 0, sizeof(void *) * (size_t)nb);
    }
    if (tc_cu_make_current(c->device, err, sizeof(err)) < 0) {
        PyErr_SetString(PyExc_RuntimeError, err);
        goto out;
    }
    if (tc_alloc_bind(&c->alloc, inputs, ninputs, objs, ptrs) < 0) {
        goto out;
    }
    CUstream stream = NULL;
    if (p->nkernels > 0 && current_stream(c->device, &stream) < 0) {
        goto out;
    }
    void *scratch_ptr = NULL;
    if (c->scratch_bytes > 0) {
        scratch = tc_alloc_empty(c->scratch_argv);
        if (scratch == NULL || tc_alloc_data_ptr(scratch, &scratch_ptr) < 0) {
            goto out;
        }
    }
    for (int step = 0; step < p->nsteps; step++) {
        int i = p->steps[step];
        int r = tc_alloc_step_begin(&c->alloc, step, objs, ptrs);
        if (r == 0 && i < 0) {
            int b = p->externs[-1 - i].out_buffer;
            r = tc_extern_run(c->ext, -1 - i, objs, ptrs,
                              c->alloc.needs_ptr[b]);
        }
        else if (r == 0) {
            r = launch_kernel(c, i, ptrs, args, params, stream, scratch_ptr);
        }
        /* freeing after the launch is stream-ordered: see the file
         * comment on temporaries */
        tc_alloc_step_end(&c->alloc, step, objs, ptrs);
        if (r < 0) {
            goto out;
        }
    }
    rc = tc_alloc_outputs(&c->alloc, objs, outputs);
out:
    Py_XDECREF(scratch);
    if (objs != NULL && ptrs != NULL) {
        tc_alloc_release(&c->alloc, objs, ptrs);
    }
    if (objs != objs_stack) {
        free(objs);
        free(ptrs);
        free(args);
        free(params);
    }
    return rc;
}

/* ---- the backend interface ---------------------------------------------- */

static void *
backend_compile(tc_plan *plan, int device, char **code_text)
{
    return tc_gpu_compile(plan, device, code_text);
}

static int
backend_run(void *c, PyObject *const *inputs, Py_ssize_t ninputs,
            PyObject **outputs)
{
    return tc_gpu_run(c, inputs, ninputs, outputs);
}

static void
backend_free(void *c)
{
    tc_gpu_free(c);
}

static int
backend_nkernels(const void *c)
{
    return tc_gpu_nkernels(c);
}

static int
backend_ncompiled(const void *c)
{
    return tc_gpu_ncompiled(c);
}

static const char *
backend_code_kind(void)
{
    return "PTX";
}

const tc_backend tc_gpu_backend = {
    .name = "cuda",
    .compile = backend_compile,
    .run = backend_run,
    .free = backend_free,
    .nkernels = backend_nkernels,
    .ncompiled = backend_ncompiled,
    .code_kind = backend_code_kind,
};
