/* convert.c - turn a fresh frame into a cache entry: trace, optimize the
 * graph, hand it to a backend, log what happened. */
#include "convert.h"

#include "autograd.h"
#include "bn_eval.h"
#include "colsum.h"
#include "cudagraphs.h"
#include "freezing.h"
#include "hostsplit.h"
#include "report.h"

#include <time.h>

#include "../graph/extern.h"
#include "../graph/ops.h"
#include "../graph/reinplace.h"
#include "../graph/schedule.h"
#include "../gpu/gpu.h"
#include "../jit/jit.h"
#include "../runtime/diskcache.h"
#include "../runtime/extern_call.h"
#include "../pyrt/pyvalue.h"

static int next_frame_id;

static double
now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- logging helpers ---------------------------------------------------- */

static const char *const exit_hints[] = {
    [TC_EXIT_RETURN] = "",
    [TC_EXIT_STEP] = "tcjit runs this one instruction in Python and goes on "
                     "with compiled code after it.",
    [TC_EXIT_BRANCH] = "tcjit evaluates the condition in Python and goes on "
                       "with the compiled code of the branch taken.",
    [TC_EXIT_FALLBACK] = "CPython runs the rest of this frame.",
};

/* 1 the first time key (stolen; NULL after a failed build) is reported,
 * 0 after that, -1 with an exception. */
static int
first_report(PyObject *key)
{
    int seen = key ? PySet_Contains(tc_reported_breaks, key) : -1;
    if (seen == 0) {
        seen = PySet_Add(tc_reported_breaks, key);
    }
    Py_XDECREF(key);
    return seen < 0 ? -1 : seen == 0;
}

static int
log_graph_break(PyCodeObject *co, PyObject *reason, int line,
                const char *hint)
{
    if (tc_hooks.recorder != NULL
        && tc_recordf("break", "{s:O,s:O,s:i,s:O,s:s}", "reason", reason,
                      "filename", co->co_filename, "lineno", line, "name",
                      co->co_name, "hint", hint) < 0) {
        return -1;
    }
    if (!tc_log_on(TC_LOG_GRAPH_BREAKS)) {
        return 0;
    }
    /* each break is reported once, however often its segment recompiles */
    int first = first_report(Py_BuildValue("(OiO)", co->co_filename, line,
                                           reason));
    if (first <= 0) {
        return first;
    }
    return tc_logf(TC_LOG_GRAPH_BREAKS, "graph_breaks",
        "Graph break in user code at %U:%d\nReason: Unsupported: %U\n"
        "User code traceback:\n  File \"%U\", line %d, in %U\nHint: %s",
        co->co_filename, line, reason, co->co_filename, line, co->co_name,
        hint);
}

/* A frame left to CPython because its trace stopped at something
 * unsupported before any tensor work: explain() lists it with the reason
 * (skipped_frames), TCJIT_LOGS=graph_breaks says so once. */
static int
log_skip(PyCodeObject *co, PyObject *reason, int line)
{
    if (tc_hooks.recorder != NULL
        && tc_recordf("skip", "{s:O,s:O,s:i,s:O}", "reason", reason,
                      "filename", co->co_filename, "lineno", line, "name",
                      co->co_name) < 0) {
        return -1;
    }
    if (!tc_log_on(TC_LOG_GRAPH_BREAKS)) {
        return 0;
    }
    int first = first_report(Py_BuildValue("(OiOs)", co->co_filename, line,
                                           reason, "skip"));
    if (first <= 0) {
        return first;
    }
    return tc_logf(TC_LOG_GRAPH_BREAKS, "graph_breaks",
        "Frame skipped: %U at %U:%d ran in Python\nReason: Unsupported: %U "
        "(before any tensor work was traced)", co->co_name,
        co->co_filename, line, reason);
}

static int
log_guards(tc_code_state *st, tc_entry *e)
{
    if (tc_hooks.recorder != NULL
        && tc_recordf("guards", "N", tc_guards_format(e->guards)) < 0) {
        return -1;
    }
    if (!tc_log_on(TC_LOG_GUARDS)) {
        return 0;
    }
    PyObject *lines = tc_guards_format(e->guards);
    PyObject *sep = PyUnicode_FromString("\n  ");
    PyObject *joined = lines && sep ? PyUnicode_Join(sep, lines) : NULL;
    Py_XDECREF(lines);
    Py_XDECREF(sep);
    if (joined == NULL) {
        return -1;
    }
    int rc = tc_logf(TC_LOG_GUARDS, "guards", "GUARDS [%d/%d]:\n  %U",
                     st->frame_id, e->compile_id, joined);
    Py_DECREF(joined);
    return rc;
}

/* ---- graph description for Python backends ------------------------------ */

static PyObject *
scalar_value(const tc_node *n)
{
    if (n->kind != TC_NODE_SCALAR) {
        return Py_NewRef(Py_None);
    }
    if (tc_dtype_is_float(n->dtype)) {
        return PyFloat_FromDouble(n->scalar.f);
    }
    if (n->dtype == TC_BOOL) {
        return PyBool_FromLong((long)n->scalar.i);
    }
    return PyLong_FromLongLong(n->scalar.i);
}

/* What a node's kind adds to its description: reductions their dims
 * (ascending) and keepdim; views their base node and storage offset
 * (graph.h: the view is torch.as_strided(base, shape, stride,
 * base.storage_offset() + offset)); extern ops their attributes (extern.h)
 * and "call", the torch call the runtime makes for them
 * (tc_extern_callable).  A new dict. */
static PyObject *
kind_fields(const tc_graph *g, int id)
{
    const tc_node *n = &g->nodes[id];
    int64_t dims[TC_MAX_DIMS];
    int nd = 0;
    switch (n->kind == TC_NODE_OP ? (int)tc_ops[n->op].kind : -1) {
    case TC_OPK_REDUCTION:
        for (int k = 0; k < g->nodes[n->in[0]].layout.ndim; k++) {
            if (n->red_mask & (1u << k)) {
                dims[nd++] = k;
            }
        }
        return Py_BuildValue("{s:N,s:O,s:O}", "dims", tc_int_tuple(nd, dims),
                             "keepdim", n->keepdim ? Py_True : Py_False,
                             "first", n->first_index ? Py_True : Py_False);
    case TC_OPK_VIEW:
        /* vmap: the affine index map onto the operand (graph.h), what a
         * view's derivative scatters through (_autograd.py) */
        if (n->vmap_affine) {
            int64_t src[TC_MAX_DIMS];
            for (int d = 0; d < n->layout.ndim; d++) {
                src[d] = n->vsrc[d];
            }
            return Py_BuildValue(
                "{s:i,s:L,s:(NNN),s:O}", "view_base", n->view_base, "offset",
                (long long)n->offset, "vmap",
                tc_int_tuple(n->layout.ndim, src),
                tc_int_tuple(n->layout.ndim, n->vcoef),
                tc_int_tuple(g->nodes[n->in[0]].layout.ndim, n->voff),
                "multi_view", n->multi_view ? Py_True : Py_False);
        }
        return Py_BuildValue("{s:i,s:L,s:O}", "view_base", n->view_base,
                             "offset", (long long)n->offset, "multi_view",
                             n->multi_view ? Py_True : Py_False);
    case TC_OPK_EXTERN:
        return Py_BuildValue("{s:N,s:d,s:N}", "xattr",
                             tc_int_tuple(TC_MAX_XATTR, n->xattr), "xfattr",
                             n->xfattr, "call", tc_extern_callable(g, id));
    default:
        return PyDict_New();
    }
}

static PyObject *
node_desc(const tc_graph *g, int id)
{
    static const char *const kinds[] = {"input", "scalar", "op"};
    const tc_node *n = &g->nodes[id];
    PyObject *ins = PyTuple_New(n->nin);
    for (int i = 0; ins && i < n->nin; i++) {
        PyTuple_SET_ITEM(ins, i, PyLong_FromLong(n->in[i]));
    }
    PyObject *sizes = tc_int_tuple(n->layout.ndim, n->layout.sizes);
    PyObject *strides = tc_int_tuple(n->layout.ndim, n->layout.strides);
    PyObject *value = scalar_value(n);
    PyObject *r = NULL;
    if (ins && sizes && strides && value) {
        r = Py_BuildValue(
            "{s:s,s:s,s:O,s:s,s:O,s:O,s:O,s:i,s:s,s:O,s:i}", "kind",
            kinds[n->kind], "op", n->kind == TC_NODE_OP ? tc_ops[n->op].name : "",
            "inputs", ins, "dtype", tc_dtype_name(n->dtype), "shape", sizes,
            "stride", strides, "value", value, "input_index", n->input_index,
            "to_dtype", tc_dtype_name(n->attr_dtype), "requires_grad",
            n->requires_grad ? Py_True : Py_False, "overwritten_at",
            n->overwritten_at);
    }
    PyObject *more = r ? kind_fields(g, id) : NULL;
    if (more == NULL || PyDict_Update(r, more) < 0) {
        Py_CLEAR(r);
    }
    Py_XDECREF(more);
    Py_XDECREF(ins);
    Py_XDECREF(sizes);
    Py_XDECREF(strides);
    Py_XDECREF(value);
    return r;
}

/* device: -1 for the CPU, else the CUDA device index */
PyObject *
tc_graph_desc(const tc_graph *g, int device)
{
    PyObject *nodes = PyList_New(g->nnodes);
    PyObject *outs = PyTuple_New(g->noutputs);
    for (int i = 0; nodes && i < g->nnodes; i++) {
        PyObject *d = node_desc(g, i);
        if (d == NULL) {
            Py_CLEAR(nodes);
            break;
        }
        PyList_SET_ITEM(nodes, i, d);
    }
    for (int i = 0; outs && i < g->noutputs; i++) {
        PyTuple_SET_ITEM(outs, i, PyLong_FromLong(g->outputs[i]));
    }
    PyObject *dev = device < 0 ? PyUnicode_FromString("cpu")
                               : PyUnicode_FromFormat("cuda:%d", device);
    PyObject *r = nodes && outs && dev
        ? Py_BuildValue("{s:i,s:O,s:O,s:O}", "ninputs", g->ninputs, "nodes",
                        nodes, "outputs", outs, "device", dev)
        : NULL;
    Py_XDECREF(nodes);
    Py_XDECREF(outs);
    Py_XDECREF(dev);
    return r;
}

/* ---- backends -------------------------------------------------------------- */

/* Tests set ptx_dump_dir so that CI, which has no GPU, still assembles
 * the PTX of every graph the suite compiles for the CPU (ptxas): the
 * plan's module, its parts (_p<N>, what the runtime loads when there are
 * any) and the module of each size-generic kernel (_k<N>, ptx.h). */
static void
dump_file(const char *title, const char *text, int serial, const char *var,
          const char *what, int index, int sm, int failed)
{
    char path[1024], kn[24] = "";
    if (index >= 0) {
        PyOS_snprintf(kn, sizeof(kn), "_%s%d", what, index);
    }
    PyOS_snprintf(path, sizeof(path), "%s/g%05d%s%s_sm%d.%s",
                  tc_config.ptx_dump_dir, serial, var, kn, sm,
                  failed ? "error" : "ptx");
    FILE *fp = fopen(path, "w");
    if (fp != NULL) {
        fprintf(fp, "// %s\n%s", title, text ? text : "(no text)");
        fclose(fp);
    }
}

static void
dump_ptx(const tc_plan *plan, const char *title)
{
    static int serial;
    static const int sms[] = {80, 90};
    /* max-autotune: every candidate module the GPU tuner may pick */
    int nvar = plan->autotune ? TC_PTX_VARIANTS : 1;
    for (int i = 0; i < 2 * nvar; i++) {
        char err[512], var[16] = "";
        int sm = sms[i % 2], v = i / 2;
        if (v > 0) {
            PyOS_snprintf(var, sizeof(var), "_v%d", v);
        }
        tc_ptx_module m;
        if (tc_ptx_emit_variant(plan, sm, TC_PTX_TEST_SMS, v, &m, err,
                                sizeof(err)) < 0) {
            dump_file(title, err, serial, var, "", -1, sm, 1);
            continue;
        }
        dump_file(title, m.text, serial, var, "", -1, sm, 0);
        for (int p = 0; p < m.nparts; p++) {
            dump_file(title, m.parts[p], serial, var, "p", p, sm, 0);
        }
        for (int k = 0; k < m.nkernels; k++) {
            if (m.kernels[k].text != NULL
                && tc_plan_first_same_kernel(plan, k) == k) {
                dump_file(title, m.kernels[k].text, serial, var, "k", k, sm,
                          0);
            }
        }
        tc_ptx_module_clear(&m);
    }
    serial++;
}

static void
cache_sink(int warning, const char *text, void *ctx)
{
    int *failed = ctx;
    if (*failed) {
        return;   /* an exception is set: drop the rest */
    }
    if (warning) {
        *failed = PyErr_WarnEx(PyExc_RuntimeWarning, text, 1) < 0;
    }
    else {
        *failed = tc_logf(TC_LOG_CACHE, "cache", "%s", text) < 0;
    }
}

/* What the on-disk cache had to say during a compile (diskcache.h): lines
 * of the `cache` log channel, warnings about invalid entries.  Keeps an
 * exception the compile raised; -1 if reporting raised one. */
static int
report_cache(void)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int failed = 0;
    tc_diskcache_drain(cache_sink, &failed);
    if (type != NULL) {
        PyErr_Clear();
        PyErr_Restore(type, value, tb);
        return -1;
    }
    return failed ? -1 : 0;
}

/* g scheduled and compiled by be: the handle, or NULL with an exception.
 * *code: the generated code when the output_code log is on. */
static void *
compile_graph(const tc_backend *be, tc_graph *g, const char *title,
              int device, int dynamic, int autotune, char **code)
{
    char err[256];
    g->emulate_precision = tc_config.emulate_precision_casts;
    tc_plan *plan = tc_schedule(g, err, sizeof(err));
    if (plan == NULL) {
        PyErr_Format(PyExc_RuntimeError, "tcjit scheduling failed: %s", err);
        return NULL;
    }
    plan->dynamic = dynamic;
    plan->autotune = autotune;
    if (tc_config.ptx_dump_dir != NULL && device < 0) {
        dump_ptx(plan, title);
    }
    void *h = be->compile(plan, device, tc_log_on(TC_LOG_OUTPUT_CODE) ? code
                                                                      : NULL);
    if (report_cache() < 0 && h != NULL) {
        be->free(h);
        h = NULL;
    }
    return h;
}

/* A graph with a host part (place.c): both parts compiled, then one
 * handle that runs them in turn (hostsplit.h).  *code: both parts' code. */
static void *
compile_split(tc_split *s, int noutputs, const char *title, int device,
              int dynamic, int autotune, char **code)
{
    const tc_backend *be[2] = {&tc_jit_backend, &tc_gpu_backend};
    tc_graph *gs[2] = {s->host, s->dev};
    void *handles[2] = {NULL, NULL};
    char *text[2] = {NULL, NULL};
    for (int p = 0; p < 2; p++) {
        if (gs[p]->noutputs == 0 && tc_graph_op_count(gs[p]) == 0) {
            continue;   /* nothing to run on that side */
        }
        handles[p] = compile_graph(be[p], gs[p], title, p ? device : -1,
                                   dynamic, autotune, &text[p]);
        if (handles[p] == NULL) {
            if (p == 1 && handles[0] != NULL) {
                be[0]->free(handles[0]);
            }
            free(text[0]);
            return NULL;
        }
    }
    if (code != NULL && (text[0] != NULL || text[1] != NULL)) {
        size_t n = (text[0] ? strlen(text[0]) : 0)
                   + (text[1] ? strlen(text[1]) : 0) + 64;
        *code = malloc(n);
        if (*code != NULL) {
            snprintf(*code, n, "// host part (CPU)\n%s\n// device part\n%s",
                     text[0] ? text[0] : "", text[1] ? text[1] : "");
        }
    }
    free(text[0]);
    free(text[1]);
    return tc_hostsplit_make(s, noutputs, be, handles, device);
}

static int
compile_auto(tc_entry *e, tc_graph *g, tc_split *split, const char *title,
             int device, int dynamic)
{
    char *code = NULL;
    const tc_backend *be = split->dev != NULL ? &tc_hostsplit_backend
                           : device >= 0 ? &tc_gpu_backend : &tc_jit_backend;
    int autotune = tc_backend_option(e->backend, "max_autotune");
    if (autotune < 0) {
        return -1;
    }
    e->code = split->dev != NULL
        ? compile_split(split, g->noutputs, title, device, dynamic, autotune,
                        &code)
        : compile_graph(be, g, title, device, dynamic, autotune, &code);
    if (e->code == NULL) {
        if (code != NULL) {
            /* the source of what failed, for TCJIT_LOGS=output_code */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            if (tc_logf(TC_LOG_OUTPUT_CODE, "output_code",
                        "// %s: failed to compile\n%s", title, code) < 0) {
                PyErr_Clear();
            }
            PyErr_Restore(type, value, tb);
        }
        free(code);
        return -1;
    }
    e->be = be;
    int nkernels = be->nkernels(e->code);
    int built = be->ncompiled != NULL ? be->ncompiled(e->code) : nkernels;
    tc_stats.kernels_compiled += built;
    e->reused = dynamic && built == 0;
    if (code == NULL) {
        return 0;
    }
    int rc = tc_logf(TC_LOG_OUTPUT_CODE, "output_code",
                     "// %s: %d kernel(s), %s\n%s", title, nkernels,
                     be->code_kind(), code);
    free(code);
    return rc;
}

PyObject **
tc_entry_fetch(tc_entry *e, tc_iframe *f)
{
    tc_frame_view fv;
    tc_view_of(f, &fv);
    PyObject **vals = PyMem_Calloc((size_t)e->guards->nsources + 1,
                                   sizeof(PyObject *));
    if (vals == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    if (tc_guards_fetch(e->guards, &fv, vals) < 0) {
        PyMem_Free(vals);
        return NULL;
    }
    return vals;
}

void
tc_entry_fetch_release(tc_entry *e, PyObject **vals)
{
    tc_guards_release(e->guards, vals);
    PyMem_Free(vals);
}

static int
compile_python(tc_entry *e, tc_graph *g, tc_iframe *f, const char *text,
               int device)
{
    PyObject **vals = tc_entry_fetch(e, f);
    PyObject *desc = NULL, *inputs = NULL;
    if (vals == NULL) {
        return -1;
    }
    inputs = PyTuple_New(e->ninputs);
    for (int i = 0; inputs && i < e->ninputs; i++) {
        PyTuple_SET_ITEM(inputs, i, Py_NewRef(vals[e->input_sources[i]]));
    }
    tc_entry_fetch_release(e, vals);
    desc = tc_graph_desc(g, device);
    if (inputs && desc) {
        e->backend_fn = PyObject_CallFunction(tc_hooks.compile_backend, "OOsO",
                                              e->backend, desc, text, inputs);
    }
    Py_XDECREF(inputs);
    Py_XDECREF(desc);
    return e->backend_fn ? 0 : -1;
}

/* A backend failure is reported as a warning and the frame runs eagerly:
 * a bug in tcjit's code generation must not take the user's program down.
 * It is a graph break too, so that explain() and TCJIT_LOGS=graph_breaks
 * name it: never a silent fallback. */
static int
demote_to_eager(tc_entry *e, PyCodeObject *co)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *reason = PyUnicode_FromFormat("tcjit backend failed: %S",
                                            value ? value : Py_None);
    int rc = reason ? tc_warnf(co, "tcjit backend failed, running eagerly: "
                               "%S", value ? value : Py_None) : -1;
    if (rc == 0) {
        rc = log_graph_break(co, reason, co->co_firstlineno,
                             "the whole frame runs eagerly for these "
                             "inputs; please report it as a tcjit bug.");
    }
    Py_XDECREF(reason);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (rc < 0) {
        return -1;
    }
    e->kind = TC_ENTRY_EAGER;
    return 0;
}

/* tcjit.mark_dynamic(t, dim) on a graph input (torch's attribute): its
 * code compiles size-generic kernels from the first compile.  1, 0, or -1
 * with an exception. */
static int
inputs_marked_dynamic(tc_entry *e, tc_iframe *f)
{
    PyObject **vals = tc_entry_fetch(e, f);
    if (vals == NULL) {
        return -1;
    }
    int marked = 0;
    for (int i = 0; i < e->ninputs - e->nconsts && !marked; i++) {
        PyObject *d = PyObject_GetAttrString(vals[e->input_sources[i]],
                                             "_dynamo_dynamic_indices");
        if (d == NULL) {
            PyErr_Clear();
            continue;
        }
        marked = PyObject_Size(d) > 0;
        PyErr_Clear();
        Py_DECREF(d);
    }
    tc_entry_fetch_release(e, vals);
    return marked;
}

/* In-place writes into graph inputs under grad (tracer.h tc_writeback):
 * the runtime applies each with torch's copy_ in the grad mode of the
 * ops it stands for (writeback.c), so autograd records the write as
 * eager's in-place op: the input gets a history through the graph's
 * autograd node when the written value requires grad, or a
 * CopyBackwards one when the input requires grad.  What one copy cannot
 * stand for is a graph break: writes into one input both under grad mode
 * and under no_grad, where the input or a value requires grad (eager's
 * history then skips the no_grad ones).  A new str, NULL with no reason
 * (or with an exception). */
static PyObject *
writeback_reason(const tc_entry *e, const tc_graph *g)
{
    if (e->wb.ngw_read) {
        return PyUnicode_FromString(
            "a tensor that requires grad, written in place under "
            "torch.no_grad(), is read under grad mode or returned: eager's "
            "gradient flows through it to the tensor's history (not "
            "compiled yet)");
    }
    for (int k = 0; k < e->wb.n; k++) {
        const tc_writeback *b = &e->wb.items[k];
        if (b->input < 0 || b->grad != 2) {
            continue;
        }
        if (b->target_rg
            || g->nodes[g->outputs[b->output]].requires_grad) {
            return PyUnicode_FromString(
                "in-place writes into one input both under grad mode and "
                "under torch.no_grad(), where the input or the value "
                "written requires grad (not compiled yet)");
        }
    }
    return NULL;
}

/* 1 if a write into an input that requires grad is recorded by autograd
 * (under grad mode): torch's copy_ must apply it, never a kernel storing
 * into the input (reinplace.h, schedule.c inplace_buffer). */
static int
writes_recorded(const tc_entry *e)
{
    for (int k = 0; k < e->wb.n; k++) {
        const tc_writeback *b = &e->wb.items[k];
        if (b->input >= 0 && b->target_rg && b->grad == 1) {
            return 1;
        }
    }
    return 0;
}

/* desc["written"]: (graph input, output of its new value) for each input
 * that in-place ops write (the plan snapshots what the backward reads of
 * their old values: _autograd.py).  0, or -1. */
/* The write-backs into inputs as (input, output) pairs (of_inputs), or
 * those into tensors the graph made as (output, bumps); new list. */
static PyObject *
written_pairs(const tc_entry *e, int of_inputs)
{
    PyObject *l = PyList_New(0);
    for (int k = 0; l != NULL && k < e->wb.n; k++) {
        const tc_writeback *w = &e->wb.items[k];
        if ((w->input >= 0) != of_inputs) {
            continue;
        }
        PyObject *i = of_inputs ? Py_BuildValue("(ii)", w->input, w->output)
                                : Py_BuildValue("(ii)", w->output, w->bumps);
        if (i == NULL || PyList_Append(l, i) < 0) {
            Py_CLEAR(l);
        }
        Py_XDECREF(i);
    }
    return l;
}

static int
desc_written(const tc_entry *e, PyObject *desc)
{
    /* desc["bumped"]: the tensors the graph made and wrote in place,
     * whose version counters the node sets */
    int rc = -1;
    for (int of_inputs = 1; of_inputs >= 0; of_inputs--) {
        PyObject *l = written_pairs(e, of_inputs);
        rc = l ? PyDict_SetItemString(desc, of_inputs ? "written" : "bumped",
                                      l) : -1;
        Py_XDECREF(l);
        if (rc < 0) {
            break;
        }
    }
    return rc;
}

/* The autograd node sets the version counters of the tensors the graph
 * made and wrote (plan.node_bumps): inside its forward, before autograd
 * wraps its outputs, as eager's counter moved before any view of such a
 * tensor was made.  Set after the call, autograd would see the base of
 * an output view written since the view was made, and refuse the view
 * (an output of a multi-output node: HF LED's `query /= sqrt(d)`
 * before `query.view(...).transpose(0, 1)`).  The write-back keeps only
 * the copies into inputs.  0, or -1 with an exception. */
static int
node_sets_versions(tc_entry *e, PyObject *plan)
{
    PyObject *v = PyObject_GetAttrString(plan, "node_bumps");
    int on = v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    if (on <= 0) {
        return on;
    }
    int n = 0;
    for (int k = 0; k < e->wb.n; k++) {
        if (e->wb.items[k].input >= 0) {
            e->wb.items[n++] = e->wb.items[k];
        }
    }
    e->wb.n = n;
    return 0;
}

/* A graph whose results require grad runs as an autograd node
 * (autograd.h); what that does not cover yet runs eagerly, with the
 * reason as a graph break. */
static int
plan_training(tc_entry *e, tc_graph *g, PyCodeObject *co, int device,
              PyObject **plan)
{
    PyObject *reason = NULL;
    int rc = 1;
    if (!e->is_auto) {
        reason = PyUnicode_FromString("a custom backend gets no autograd "
                                      "graph (training is compiled by the "
                                      "'auto' backend only)");
    }
    else {
        /* (planning appends the saved values to the outputs, which
         * drops output_writes: the graph never stores into an input, the
         * runtime's copy_ applies each write, recorded by autograd) */
        PyObject *desc = tc_graph_desc(g, device);
        rc = desc ? desc_written(e, desc) : -1;
        rc = rc == 0 ? tc_autograd_plan(g, desc, plan, &reason) : -1;
        Py_XDECREF(desc);
        if (rc == 0 && node_sets_versions(e, *plan) < 0) {
            Py_CLEAR(*plan);
            rc = -1;
        }
    }
    if (rc != 1) {
        return rc;
    }
    rc = reason ? log_graph_break(co, reason, co->co_firstlineno,
                                  "the whole frame runs eagerly for these "
                                  "inputs.") : -1;
    Py_XDECREF(reason);
    e->kind = TC_ENTRY_EAGER;
    return rc;
}

/* A graph on a CUDA device with CPU tensors in it (graph.h
 * TC_PLACE_HOST): split into its host and device parts for the 'auto'
 * backend; what the split does not cover runs eagerly, with the reason as
 * a graph break (eager raises its own error where a kernel would read a
 * CPU tensor that is not 0-d). */
static int
place_host_part(tc_entry *e, tc_graph *g, PyCodeObject *co, int device,
                int training, tc_split *split)
{
    char err[256];
    int r = tc_graph_split(g, split, device, err, sizeof(err));
    if (r == 0) {
        return 0;
    }
    if (r == -2) {
        PyErr_NoMemory();
        return -1;
    }
    PyObject *reason =
        r == -1 ? PyUnicode_FromString(err)
        : !e->is_auto ? PyUnicode_FromString(
            "CPU tensors in a graph on a CUDA device, for a custom backend "
            "(the 'auto' backend runs them on the CPU)")
        : training ? PyUnicode_FromString(
            "CPU tensors in a graph on a CUDA device that requires grad "
            "(not compiled yet)")
        : NULL;
    if (reason == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    tc_split_free(split);
    int rc = log_graph_break(co, reason, co->co_firstlineno,
                             "the whole frame runs eagerly for these inputs.");
    Py_DECREF(reason);
    e->kind = TC_ENTRY_EAGER;
    return rc;
}

/* reduce-overhead (cudagraphs.h): read once per compile */
static int
use_cudagraphs(tc_entry *e, tc_graph *g, PyCodeObject *co, int device,
               int dynamic, int training)
{
    int on = tc_backend_option(e->backend, "cudagraphs");
    if (on <= 0) {
        return on;
    }
    PyObject *desc = tc_graph_desc(g, device);
    int rc = desc ? tc_cudagraphs_apply(e, co, desc, device, dynamic,
                                        training) : -1;
    Py_XDECREF(desc);
    return rc;
}

static int
compile_entry(tc_entry *e, tc_graph *g, tc_iframe *f, tc_code_state *st,
              int device)
{
    PyCodeObject *co = f->f_code;
    char err[256];
    /* a linear's bias into the pointwise kernel after it: for cuBLAS's
     * larger tiles without the bias epilogue (extern.c).  Not on the CPU,
     * where MKL's addmm is no slower than its mm (GPT-2's MLP product
     * [256, 256] x [256, 1024]: 0.79 ms against 1.05 in the training
     * step) and the pointwise kernel reads the product either way; but
     * where the CPU graphs' PTX is dumped, as the GPU would have it */
    if (tc_graph_optimize(g) < 0
        || ((device >= 0 || tc_config.ptx_dump_dir != NULL)
            && tc_graph_unfuse_bias(g, err, sizeof(err)) < 0)) {
        PyErr_NoMemory();
        return -1;
    }
    /* freezing: only for tcjit's own code generators, and not where
     * autograd needs the parameters */
    int freezing = e->is_auto ? tc_backend_option(e->backend, "freezing") : 0;
    if (freezing < 0) {
        return -1;
    }
    if (freezing && !tc_graph_requires_grad(g)) {
        int nin = g->ninputs;
        if (tc_freeze(e, g, f, device) < 0) {
            return demote_to_eager(e, co);
        }
        if (g->ninputs != nin && tc_graph_optimize(g) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    /* the eval-mode batch norms freezing left: pointwise ops that fuse
     * (for tcjit's own code generators; a training graph keeps them) */
    if (e->is_auto && !tc_graph_requires_grad(g)) {
        int lowered = tc_lower_eval_batch_norms(g);
        if (lowered < 0) {
            return -1;
        }
        if (lowered > 0 && tc_graph_optimize(g) < 0) {
            PyErr_NoMemory();
            return -1;
        }
    }
    /* column sums: torch's kernel on the CPU (colsum.h); static
     * compiles only, and not where the CPU graphs' PTX is dumped, whose
     * column reductions CI assembles */
    if (e->is_auto && device < 0 && !st->dynamic
        && !tc_graph_requires_grad(g) && tc_config.ptx_dump_dir == NULL
        && tc_cpu_column_sums(g) < 0) {
        return -1;
    }
    PyObject *wb_reason = writeback_reason(e, g);
    if (wb_reason != NULL || PyErr_Occurred()) {
        int rc = wb_reason ? log_graph_break(co, wb_reason,
                                             co->co_firstlineno,
                                             "the whole frame runs eagerly "
                                             "for these inputs.") : -1;
        Py_XDECREF(wb_reason);
        e->kind = TC_ENTRY_EAGER;
        return rc;
    }
    /* a slice written into an input in place, not copied twice
     * (reinplace.h): tcjit's own code generators run the write_box node;
     * a graph that records autograd keeps the functional value, and so
     * does a write that autograd records (torch's copy_ applies it) */
    int recorded = writes_recorded(e);
    if (recorded && tc_graph_set_outputs(g, g->noutputs, g->outputs) < 0) {
        PyErr_NoMemory();   /* (drops output_writes) */
        return -1;
    }
    if (e->is_auto && !tc_graph_requires_grad(g) && !recorded
        && tc_graph_reinplace(g) < 0) {
        PyErr_NoMemory();
        return -1;
    }
    e->noutputs = g->noutputs;
    e->merged_outputs = 0;
    for (int j = 0; j < g->noutputs; j++) {
        for (int k = 0; k < j; k++) {
            e->merged_outputs |= g->outputs[j] == g->outputs[k];
        }
    }
    char title[256];
    PyOS_snprintf(title, sizeof(title), "%s [%d/%d]",
                  PyUnicode_AsUTF8(co->co_name), st->frame_id, e->compile_id);
    char *text = tc_graph_format(g, title);
    if (text == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int rc = tc_logf(TC_LOG_GRAPH, "graph", "%s", text);
    if (rc == 0 && g->noutputs == 0 && tc_graph_op_count(g) == 0) {
        /* no tensor work before the exit: nothing to compile (an op node
         * left by DCE is an output's or checks values: tc_node_must_run) */
        free(text);
        return 0;
    }
    /* explain() sees the graph that is compiled, whatever the backend
     * (a training graph without the saved values it also returns) */
    PyObject *seen = NULL, *plan = NULL;
    if (rc == 0 && tc_hooks.recorder != NULL) {
        seen = tc_graph_desc(g, device);
        rc = seen ? 0 : -1;
    }
    int nresults = g->noutputs;
    if (rc == 0 && tc_graph_requires_grad(g)) {
        rc = plan_training(e, g, co, device, &plan);
        nresults = g->noutputs;
        if (rc < 0 && e->is_auto) {
            rc = demote_to_eager(e, co);
        }
    }
    if (rc == 0 && seen != NULL && e->kind == TC_ENTRY_COMPILED) {
        rc = tc_recordf("graph", "(Os)", seen, text);
    }
    Py_XDECREF(seen);
    /* size-generic kernels: the code's sizes changed or were marked
     * dynamic, unless this backend says dynamic=False */
    int policy = e->is_auto ? tc_backend_dynamic(e->backend) : -1;
    rc = rc == 0 && policy < -1 ? -1 : rc;
    if (rc == 0 && !st->dynamic && policy == 0) {
        int marked = inputs_marked_dynamic(e, f);
        rc = marked < 0 ? -1 : 0;
        st->dynamic = marked > 0;
    }
    tc_split split = {0};
    if (rc == 0 && e->kind == TC_ENTRY_COMPILED && device >= 0) {
        rc = place_host_part(e, g, co, device, plan != NULL, &split);
    }
    if (rc == 0 && e->kind == TC_ENTRY_COMPILED) {
        int dynamic = policy > 0 || (policy == 0 && st->dynamic);
        rc = e->is_auto ? compile_auto(e, g, &split, title, device, dynamic)
                        : compile_python(e, g, f, text, device);
        int training = plan != NULL;
        if (rc == 0 && plan != NULL) {
            rc = tc_autograd_finish(e, plan, nresults);
            plan = NULL;
        }
        if (rc == 0) {
            rc = use_cudagraphs(e, g, co, device, dynamic, training);
        }
        if (rc < 0 && e->is_auto) {
            rc = demote_to_eager(e, co);
        }
    }
    tc_split_free(&split);
    Py_XDECREF(plan);
    free(text);
    if (rc == 0 && e->kind == TC_ENTRY_COMPILED) {
        tc_stats.frames_compiled++;
        tc_stats.graphs++;
    }
    return rc;
}

int
tc_backend_dynamic(PyObject *backend)
{
    PyObject *v = PyObject_GetAttrString(backend, "dynamic");
    if (v == NULL) {
        return -2;
    }
    int r = v == Py_None ? 0 : PyObject_IsTrue(v) ? 1 : -1;
    if (v != Py_None && PyErr_Occurred()) {
        r = -2;
    }
    Py_DECREF(v);
    return r;
}

int
tc_backend_option(PyObject *backend, const char *name)
{
    PyObject *v = PyObject_CallMethod(backend, "option", "s", name);
    int r = v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    return r;
}

/* Backend options are read once per compile, never per call. */
static int
backend_flag(PyObject *backend, const char *name)
{
    PyObject *v = PyObject_GetAttrString(backend, name);
    int r = v ? PyObject_IsTrue(v) : -1;
    Py_XDECREF(v);
    return r;
}

static int
raise_fullgraph(PyCodeObject *co, PyObject *reason, int line)
{
    PyObject *msg = PyUnicode_FromFormat(
        "fullgraph=True: graph break in %U at %U:%d: %U", co->co_name,
        co->co_filename, line, reason);
    if (msg != NULL) {
        PyErr_SetObject(tc_hooks.unsupported, msg);
        Py_DECREF(msg);
    }
    return -1;
}

tc_entry *
tc_convert_frame(tc_iframe *f, int pc, tc_code_state *st, PyObject *backend,
                 int *skip)
{
    tc_trace t;
    *skip = 0;
    double started = now_seconds();
    if (tc_trace_frame(f, pc, &t) < 0) {
        return NULL;
    }
    if (t.status == TC_TRACE_NO_TENSORS) {
        /* nothing compiled; if the trace stopped at something unsupported
         * (rather than finding no tensor at all), say what */
        int rc = t.reason != NULL
            ? log_skip(f->f_code, t.reason, t.reason_line) : 0;
        tc_trace_clear(&t);
        *skip = rc == 0;
        return NULL;
    }
    tc_entry *e = PyMem_Calloc(1, sizeof(*e));
    if (e == NULL) {
        tc_trace_clear(&t);
        PyErr_NoMemory();
        return NULL;
    }
    if (st->frame_id < 0) {
        st->frame_id = next_frame_id++;
    }
    e->compile_id = st->ncompiles++;
    e->start_pc = pc;
    e->backend = Py_NewRef(backend);
    e->is_auto = backend_flag(backend, "is_auto");
    int fullgraph = backend_flag(backend, "fullgraph");
    e->guards = t.guards;
    t.guards = NULL;
    e->ninputs = t.graph->ninputs;
    e->input_sources = t.input_sources;
    t.input_sources = NULL;
    e->ret = t.ret;
    memset(&t.ret, 0, sizeof(t.ret));
    e->return_pc = t.return_pc;
    e->return_pushes = t.return_pushes;
    e->exit = t.exit;
    e->nmemo = t.nmemo;
    memset(&t.exit, 0, sizeof(t.exit));
    e->wb = t.wb;
    memset(&t.wb, 0, sizeof(t.wb));
    int rc = (e->is_auto < 0 || fullgraph < 0) ? -1 : 0;
    PyCodeObject *co = f->f_code;
    if (rc == 0 && t.status == TC_TRACE_EAGER) {
        e->kind = TC_ENTRY_EAGER;
        rc = fullgraph ? raise_fullgraph(co, t.reason, t.reason_line)
                       : log_graph_break(co, t.reason, t.reason_line,
                                         pc ? exit_hints[TC_EXIT_FALLBACK]
                                            : "the whole frame runs eagerly "
                                              "for these inputs.");
    }
    else if (rc == 0) {
        e->kind = TC_ENTRY_COMPILED;
        if (e->exit.kind != TC_EXIT_RETURN) {
            rc = fullgraph ? raise_fullgraph(co, e->exit.reason,
                                             e->exit.reason_line)
                           : log_graph_break(co, e->exit.reason,
                                             e->exit.reason_line,
                                             exit_hints[e->exit.kind]);
        }
        if (rc == 0) {
            rc = compile_entry(e, t.graph, f, st, t.device);
        }
    }
    if (rc == 0) {
        rc = log_guards(st, e);
    }
    tc_trace_clear(&t);
    if (rc == 0 && tc_hooks.recorder != NULL) {
        rc = tc_recordf("compile_time", "d", now_seconds() - started);
    }
    if (rc < 0) {
        tc_entry_free(e);
        return NULL;
    }
    return e;
}
