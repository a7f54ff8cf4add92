/* runtime.c - compile a plan once, run it per call (see jit.h).
 *
 * The per-call path matters as much as the kernels: a 1-element x + 1 must
 * cost less than eager (~4 us), and torch.empty_strided alone is ~1 us.  So
 * everything that depends only on the (static, guarded) shapes is prepared
 * at compile time: the argument vectors for torch.empty_strided, which
 * buffers need a data pointer, the byte size of temporaries.  A call then
 * does one vectorcall per output, one data_ptr() per used tensor, and the
 * kernel calls.  The torch side of that (tensors for buffers, outputs as
 * eager returns them) is tensor_alloc.c, shared with the CUDA executor.
 */
#include "jit.h"
#include "jit_internal.h"
#include "../runtime/threadpool.h"
#include "../runtime/tensor_alloc.h"
#include "../runtime/extern_call.h"
#include "../graph/textbuf.h"

#include <stdlib.h>
#include <string.h>

struct tc_compiled {
    tc_plan *plan;
    tc_jit_code *code;
    tc_tensor_alloc alloc;  /* buffers and outputs as torch tensors */
    tc_extern_rt *ext;      /* extern steps, NULL if none */
    int max_kargs;          /* most kernel arguments + 1 (the dims block) */
};

static PyObject *cpu_device = NULL;     /* torch.device("cpu") */
static int64_t parallel_threshold = 32768;

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
    if (cpu_device != NULL) {
        return 0;
    }
    (void)tc_cpu_march();
    if (tc_alloc_init() < 0) {
        return -1;
    }
    PyObject *torch = PyImport_ImportModule("torch");
    if (torch == NULL) {
        return -1;
    }
    cpu_device = PyObject_CallMethod(torch, "device", "s", "cpu");
    Py_DECREF(torch);
    return cpu_device != NULL ? 0 : -1;
}

/* ---- compile ------------------------------------------------------------ */

static char *
format_code(const tc_plan *p)
{
    tc_textbuf out = {0};
    for (int i = 0; i < p->nsteps; i++) {
        int k = p->steps[i];
        char *s = k < 0 ? tc_extern_format(p, -1 - k)
                        : tc_kernel_format(&p->kernels[k]);
        if (s != NULL) {
            tc_textbuf_printf(&out, "%s", s);
        }
        else {
            tc_textbuf_printf(&out, "// step %d\n", i);
        }
        free(s);
    }
    return tc_textbuf_finish(&out);
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
    if (cpu_device == NULL && tc_jit_init() < 0) {
        tc_plan_free(plan);
        return NULL;
    }
    tc_compiled *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        tc_plan_free(plan);
        PyErr_NoMemory();
        return NULL;
    }
    c->plan = plan;
    for (int i = 0; i < plan->nkernels; i++) {
        if (plan->kernels[i].nargs + 1 > c->max_kargs) {
            c->max_kargs = plan->kernels[i].nargs + 1;
        }
    }
    if (tc_alloc_prepare(&c->alloc, plan, cpu_device, 0, "tcjit cpu") < 0
        || ((c->ext = tc_extern_prepare(plan)) == NULL
            && plan->nexterns > 0)) {
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
    code = plan->autotune && !plan->dynamic
           ? tc_jit_autotune(plan, err, sizeof(err))
           : tc_jit_code_compile(plan, 0, err, sizeof(err));
    Py_END_ALLOW_THREADS
    if (code == NULL) {
        /* *code_text stays: the caller logs the source that failed */
        PyErr_Format(PyExc_RuntimeError, "%s", err);
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
    tc_alloc_clear(&c->alloc);
    tc_extern_free(c->ext);
    tc_jit_code_free(c->code);
    tc_plan_free(c->plan);
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
    int na = c->max_kargs > c->alloc.max_args ? c->max_kargs
                                               : c->alloc.max_args;
    if (nb > TC_STACK_BUFS || na > TC_STACK_BUFS) {
        size_t n = (size_t)(nb > na ? nb : na) + 1;
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
    int rc = tc_alloc_bind(&c->alloc, inputs, ninputs, objs, ptrs);
    for (int i = 0; rc == 0 && i < p->nsteps; i++) {
        int s = p->steps[i];
        rc = tc_alloc_step_begin(&c->alloc, i, objs, ptrs);
        if (rc == 0 && s < 0) {
            int b = p->externs[-1 - s].out_buffer;
            tc_threadpool_park();
            rc = tc_extern_run(c->ext, -1 - s, objs, ptrs,
                               c->alloc.needs_ptr[b]);
        }
        else if (rc == 0) {
            const tc_kernel *k = &p->kernels[s];
            for (int a = 0; a < k->nargs; a++) {
                int b = k->args[a].buffer;
                args[a] = b == TC_KARG_INDEX ? NULL : ptrs[b];
            }
            /* a size-generic kernel's sizes and strides (jit_internal.h) */
            args[k->nargs] = c->code->dims ? c->code->dims[s] : NULL;
            rc = run_kernel(c->code, s, args);
        }
        tc_alloc_step_end(&c->alloc, i, objs, ptrs);
    }
    if (rc == 0) {
        rc = tc_alloc_outputs(&c->alloc, objs, outputs);
    }
    tc_alloc_release(&c->alloc, objs, ptrs);
    if (objs != objs_stack) {
        free(objs);
        free(ptrs);
    }
    return rc;
}

/* ---- the backend interface ---------------------------------------------- */

static void *
backend_compile(tc_plan *plan, int device, char **code_text)
{
    (void)device;
    return tc_jit_compile(plan, code_text);
}

static int
backend_run(void *c, PyObject *const *inputs, Py_ssize_t ninputs,
            PyObject **outputs)
{
    return tc_jit_run(c, inputs, ninputs, outputs);
}

static void
backend_free(void *c)
{
    tc_jit_free(c);
}

static int
backend_nkernels(const void *c)
{
    return tc_jit_nkernels(c);
}

static int
backend_ncompiled(const void *c)
{
    const tc_compiled *cc = c;
    return cc != NULL && cc->code != NULL ? cc->code->ncompiled : 0;
}

const tc_backend tc_jit_backend = {
    .name = "cpu",
    .compile = backend_compile,
    .run = backend_run,
    .free = backend_free,
    .nkernels = backend_nkernels,
    .ncompiled = backend_ncompiled,
    .code_kind = tc_jit_cflags,
};
