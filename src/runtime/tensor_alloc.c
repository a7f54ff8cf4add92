/* tensor_alloc.c - plan buffers as torch tensors, graph outputs as eager
 * returns them (see tensor_alloc.h).
 *
 * torch.empty_strided alone is ~1 us, so its argument vectors are prebuilt
 * here and called with one vectorcall (torch_tensor.c); nothing here adds a
 * Python call to what a call of the executors needs.
 */
#include "tensor_alloc.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- compile ------------------------------------------------------------ */

static size_t
elem_size(tc_dtype dt)
{
    size_t n = tc_dtype_size(dt);
    return n ? n : 1;
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
prepare_views(tc_tensor_alloc *a)
{
    const tc_plan *p = a->plan;
    if (p->outputs == NULL) {
        return 0;
    }
    a->view_argv = calloc((size_t)(3 * p->noutputs + 1), sizeof(PyObject *));
    if (a->view_argv == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int j = 0; j < p->noutputs; j++) {
        const tc_output_desc *o = &p->outputs[j];
        if (!o->is_view) {
            continue;
        }
        if (tc_alloc_view_argv(&a->view_argv[3 * j], o) < 0) {
            return -1;
        }
    }
    return 0;
}

static void
touch(tc_tensor_alloc *a, int b, int step, int writes)
{
    if (b < 0 || b >= a->plan->nbuffers) {
        return;
    }
    if (writes && a->first_step[b] < 0) {
        a->first_step[b] = step;
    }
    if (!writes && a->last_step[b] < step) {
        a->last_step[b] = step;
    }
}

/* Buffers grouped by the step in step_of[] (a counting sort): list[at[s]
 * .. at[s + 1]) for step s.  Inputs are never dropped (skip_inputs). */
static int
by_step(const tc_tensor_alloc *a, const int *step_of, int **at, int **list,
        int skip_inputs)
{
    const tc_plan *p = a->plan;
    int ns = p->nsteps;
    *at = calloc((size_t)ns + 2, sizeof(int));
    *list = malloc(sizeof(int) * (size_t)(p->nbuffers + 1));
    if (*at == NULL || *list == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (int b = 0; b < p->nbuffers; b++) {
            int s = step_of[b];
            if (s < 0 || s >= ns
                || (skip_inputs && p->buffers[b].kind == TC_BUF_INPUT)) {
                continue;
            }
            if (pass == 0) {
                (*at)[s + 2]++;             /* counts, shifted by one */
            } else {
                (*list)[(*at)[s + 1]++] = b;
            }
        }
        for (int s = 0; pass == 0 && s < ns; s++) {
            (*at)[s + 2] += (*at)[s + 1];   /* starts, shifted by one */
        }
    }
    return 0;
}

/* first_step / last_step of every buffer, from the plan's steps. */
static int
plan_lifetimes(tc_tensor_alloc *a)
{
    const tc_plan *p = a->plan;
    a->first_step = malloc(sizeof(int) * (size_t)(p->nbuffers + 1));
    a->last_step = malloc(sizeof(int) * (size_t)(p->nbuffers + 1));
    if (a->first_step == NULL || a->last_step == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int b = 0; b < p->nbuffers; b++) {
        a->first_step[b] = -1;
        a->last_step[b] = -1;
    }
    for (int s = 0; s < p->nsteps; s++) {
        int k = p->steps[s];
        if (k < 0) {
            const tc_extern_call *x = &p->externs[-1 - k];
            for (int i = 0; i < x->nin; i++) {
                touch(a, x->in[i].buffer, s, 0);
            }
            touch(a, x->out_buffer, s, 1);
            continue;
        }
        for (int i = 0; i < p->kernels[k].nargs; i++) {
            const tc_karg *arg = &p->kernels[k].args[i];
            touch(a, arg->buffer, s, arg->is_output);
        }
    }
    for (int j = 0; j < p->noutputs; j++) {
        int b = p->outputs ? p->outputs[j].buffer : p->output_buffer[j];
        if (b >= 0 && b < p->nbuffers) {
            a->last_step[b] = INT_MAX;
        }
    }
    return by_step(a, a->first_step, &a->born_at, &a->born, 0)
           || by_step(a, a->last_step, &a->dead_at, &a->dead, 1) ? -1 : 0;
}

/* Bytes of buffer b if it may live in the arena: a TEMP, or a tensor
 * buffer the call does not return (and with no negative stride), that a
 * step writes; 0 otherwise. */
static int64_t
arena_bytes(const tc_tensor_alloc *a, int b)
{
    const tc_buffer *buf = &a->plan->buffers[b];
    if (a->first_step[b] < 0 || a->last_step[b] == INT_MAX) {
        return 0;
    }
    if (buf->kind == TC_BUF_TEMP) {
        return (int64_t)a->temp_bytes[b];
    }
    if (buf->kind != TC_BUF_OUTPUT) {
        return 0;
    }
    for (int d = 0; d < buf->layout.ndim; d++) {
        if (buf->layout.strides[d] < 0) {
            return 0;
        }
    }
    return layout_span(&buf->layout) * (int64_t)elem_size(buf->dtype);
}

static int
plan_arena(tc_tensor_alloc *a)
{
    int nb = a->plan->nbuffers;
    int64_t *bytes = malloc(sizeof(int64_t) * (size_t)(nb + 1));
    if (bytes == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int b = 0; b < nb; b++) {
        bytes[b] = arena_bytes(a, b);
    }
    a->arena = tc_arena_plan(a->plan, bytes, a->first_step, a->last_step);
    free(bytes);
    return a->arena == NULL && PyErr_Occurred() ? -1 : 0;
}

int
tc_alloc_prepare(tc_tensor_alloc *a, const tc_plan *p, PyObject *device,
                 int temp_tensors, const char *who)
{
    int nb = p->nbuffers;
    a->plan = p;
    a->who = who;
    a->temp_tensors = temp_tensors;
    if (tc_alloc_init() < 0) {
        return -1;
    }
    a->alloc_argv = calloc((size_t)(4 * nb + 1), sizeof(PyObject *));
    a->temp_bytes = calloc((size_t)(nb + 1), sizeof(size_t));
    a->needs_ptr = calloc((size_t)(nb + 1), 1);
    if (a->alloc_argv == NULL || a->temp_bytes == NULL
        || a->needs_ptr == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int b = 0; b < nb; b++) {
        const tc_buffer *buf = &p->buffers[b];
        PyObject **argv = &a->alloc_argv[4 * b];
        /* (a complex tensor is only ever an extern call's result) */
        if ((unsigned)buf->dtype >= TC_NALLDTYPES
            || (buf->kind != TC_BUF_EXTERN && buf->dtype >= TC_NDTYPES)) {
            PyErr_Format(PyExc_RuntimeError, "%s: bad buffer dtype", who);
            return -1;
        }
        if (buf->kind == TC_BUF_TEMP) {
            a->temp_bytes[b] = (size_t)layout_span(&buf->layout)
                               * elem_size(buf->dtype);
            /* a flat byte buffer the kernels index through their strides */
            if (temp_tensors
                && tc_alloc_bytes_argv(argv, (int64_t)a->temp_bytes[b],
                                       device) < 0) {
                return -1;
            }
        }
        else if (buf->kind == TC_BUF_OUTPUT) {
            argv[0] = tc_int_tuple(buf->layout.ndim, buf->layout.sizes);
            argv[1] = tc_int_tuple(buf->layout.ndim, buf->layout.strides);
            argv[2] = Py_NewRef(tc_alloc_dtype_object(buf->dtype));
            argv[3] = Py_NewRef(device);
            if (argv[0] == NULL || argv[1] == NULL) {
                return -1;
            }
        }
    }
    for (int i = 0; i < p->nkernels; i++) {
        const tc_kernel *k = &p->kernels[i];
        a->max_args = k->nargs > a->max_args ? k->nargs : a->max_args;
        for (int j = 0; j < k->nargs; j++) {
            if (k->args[j].buffer == TC_KARG_INDEX) {
                continue;   /* positions only, no memory (kir.h) */
            }
            if (k->args[j].buffer < 0 || k->args[j].buffer >= nb) {
                PyErr_Format(PyExc_RuntimeError,
                             "%s: kernel argument without buffer", who);
                return -1;
            }
            a->needs_ptr[k->args[j].buffer] = 1;
        }
    }
    if (plan_lifetimes(a) < 0) {
        return -1;
    }
    for (int j = 0; j < p->noutputs; j++) {
        int b = p->output_buffer[j];
        if (b < 0 || b >= nb || p->buffers[b].kind == TC_BUF_TEMP
            || (p->outputs != NULL && p->outputs[j].buffer != b)) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s: graph output maps to no buffer", who);
            return -1;
        }
    }
    a->device = Py_NewRef(device);
    if (!temp_tensors && plan_arena(a) < 0) {
        return -1;
    }
    return prepare_views(a);
}

void
tc_alloc_clear(tc_tensor_alloc *a)
{
    tc_arena_free(a->arena);
    a->arena = NULL;
    Py_CLEAR(a->device);
    if (a->alloc_argv != NULL) {
        for (int i = 0; i < 4 * a->plan->nbuffers; i++) {
            Py_XDECREF(a->alloc_argv[i]);
        }
    }
    if (a->view_argv != NULL) {
        for (int i = 0; i < 3 * a->plan->noutputs; i++) {
            Py_XDECREF(a->view_argv[i]);
        }
    }
    free(a->alloc_argv);
    free(a->view_argv);
    free(a->temp_bytes);
    free(a->needs_ptr);
    free(a->first_step);
    free(a->last_step);
    free(a->born_at);
    free(a->born);
    free(a->dead_at);
    free(a->dead);
    a->first_step = a->last_step = NULL;
    a->born_at = a->born = a->dead_at = a->dead = NULL;
    a->alloc_argv = NULL;
    a->view_argv = NULL;
    a->temp_bytes = NULL;
    a->needs_ptr = NULL;
}

/* ---- run ---------------------------------------------------------------- */

/* A buffer a step writes: a tensor, or host memory for a CPU TEMP. */
static int
alloc_buffer(const tc_tensor_alloc *a, int b, PyObject **objs, void **ptrs)
{
    const tc_buffer *buf = &a->plan->buffers[b];
    if (buf->kind == TC_BUF_INPUT || buf->kind == TC_BUF_EXTERN) {
        return 0;   /* bound, or filled by its extern step */
    }
    PyObject *kept;
    if (tc_arena_buffer(a->arena, b, &ptrs[b], &kept)) {
        objs[b] = Py_XNewRef(kept);
        return 0;
    }
    if (buf->kind == TC_BUF_TEMP && !a->temp_tensors) {
        size_t n = (a->temp_bytes[b] + 63) & ~(size_t)63;
        ptrs[b] = aligned_alloc(64, n > 0 ? n : 64);
        if (ptrs[b] == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        return 0;
    }
    objs[b] = tc_alloc_empty(&a->alloc_argv[4 * b]);
    if (objs[b] == NULL) {
        return -1;
    }
    return a->needs_ptr[b] ? tc_alloc_data_ptr(objs[b], &ptrs[b]) : 0;
}

static void
free_buffer(const tc_tensor_alloc *a, int b, PyObject **objs, void **ptrs)
{
    void *kept_ptr;
    PyObject *kept;
    if (!a->temp_tensors && a->plan->buffers[b].kind == TC_BUF_TEMP
        && !tc_arena_buffer(a->arena, b, &kept_ptr, &kept)) {
        free(ptrs[b]);
    }
    ptrs[b] = NULL;
    Py_CLEAR(objs[b]);
}

int
tc_alloc_bind(const tc_tensor_alloc *a, PyObject *const *inputs,
              Py_ssize_t ninputs, PyObject **objs, void **ptrs)
{
    const tc_plan *p = a->plan;
    if (tc_arena_acquire(a->arena, a->device) < 0) {
        return -1;
    }
    for (int b = 0; b < p->nbuffers; b++) {
        const tc_buffer *buf = &p->buffers[b];
        if (buf->kind != TC_BUF_INPUT) {
            /* written by no step (cannot happen in a valid plan): now */
            if (a->first_step[b] < 0 && alloc_buffer(a, b, objs, ptrs) < 0) {
                return -1;
            }
            continue;
        }
        if (buf->index < 0 || buf->index >= ninputs) {
            PyErr_Format(PyExc_RuntimeError,
                         "%s: missing graph input", a->who);
            return -1;
        }
        objs[b] = Py_NewRef(inputs[buf->index]);
        if (a->needs_ptr[b] && tc_alloc_data_ptr(objs[b], &ptrs[b]) < 0) {
            return -1;
        }
    }
    return 0;
}

int
tc_alloc_step_begin(const tc_tensor_alloc *a, int step, PyObject **objs,
                    void **ptrs)
{
    for (int i = a->born_at[step]; i < a->born_at[step + 1]; i++) {
        if (alloc_buffer(a, a->born[i], objs, ptrs) < 0) {
            return -1;
        }
    }
    return 0;
}

void
tc_alloc_step_end(const tc_tensor_alloc *a, int step, PyObject **objs,
                  void **ptrs)
{
    for (int i = a->dead_at[step]; i < a->dead_at[step + 1]; i++) {
        free_buffer(a, a->dead[i], objs, ptrs);
    }
}

void
tc_alloc_release(const tc_tensor_alloc *a, PyObject **objs, void **ptrs)
{
    for (int b = 0; b < a->plan->nbuffers; b++) {
        free_buffer(a, b, objs, ptrs);
    }
    tc_arena_release(a->arena);
}

int
tc_alloc_view_argv(PyObject **va, const tc_output_desc *o)
{
    va[0] = tc_int_tuple(o->layout.ndim, o->layout.sizes);
    va[1] = tc_int_tuple(o->layout.ndim, o->layout.strides);
    va[2] = PyLong_FromLongLong(o->offset);
    return va[0] == NULL || va[1] == NULL || va[2] == NULL ? -1 : 0;
}

/* Graph output j: the buffer's tensor, or for a view output an alias of
 * the input (or of the output buffer) as eager returns. */
static PyObject *
make_output(const tc_tensor_alloc *a, int j, PyObject *base)
{
    const tc_plan *p = a->plan;
    if (p->outputs == NULL || !p->outputs[j].is_view) {
        return Py_NewRef(base);
    }
    return p->outputs[j].detached
           ? tc_alloc_view_detached(base, &a->view_argv[3 * j])
           : tc_alloc_view(base, &a->view_argv[3 * j]);
}

int
tc_alloc_outputs(const tc_tensor_alloc *a, PyObject *const *objs,
                 PyObject **outputs)
{
    const tc_plan *p = a->plan;
    for (int j = 0; j < p->noutputs; j++) {
        outputs[j] = make_output(a, j, objs[p->output_buffer[j]]);
        if (outputs[j] == NULL) {
            for (int q = 0; q < j; q++) {
                Py_CLEAR(outputs[q]);
            }
            return -1;
        }
    }
    return 0;
}
