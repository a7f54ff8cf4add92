/* eval_frame.c - the frame evaluation hook and the per-call runtime.
 *
 * The pass-through path must stay a few loads and a branch: with any hook
 * installed CPython stops inlining Python-to-Python calls, so every frame of
 * the program comes through here.
 */
#include "eval_frame.h"

#include "convert.h"
#include "step.h"
#include "writeback.h"
#include "../runtime/extern_call.h"

#include <time.h>

static int enabled_all;
static int hook_installed;
static _Thread_local tc_pending pending;
/* > 0 while this thread runs tcjit's own Python (tracing, compiling,
 * logging, a custom backend's callable): those frames are never compiled,
 * as Dynamo's callback is off while it compiles. */
static _Thread_local int own_work;

#define MAX_SOURCES_ON_STACK 64

/* ---- enabling ------------------------------------------------------------ */

void
tc_set_enabled(int on)
{
    enabled_all = on;
    if (on) {
        tc_install_hook();
    }
}

int
tc_is_enabled(void)
{
    return enabled_all;
}

tc_pending
tc_set_pending(PyObject *code, PyObject *backend)
{
    tc_pending saved = pending;
    pending.code = code;
    pending.backend = backend;
    pending.scope = backend;
    return saved;
}

void
tc_restore_pending(tc_pending saved)
{
    pending = saved;
}

/* ---- deciding whether to look at a frame --------------------------------- */

static int
is_skipped_file(PyCodeObject *co)
{
    PyObject *prefixes = tc_config.skip_prefixes;
    if (!(co->co_flags & CO_OPTIMIZED)) {
        return 1;  /* module and class bodies */
    }
    if (PyUnicode_READ_CHAR(co->co_filename, 0) == '<') {
        return PyUnicode_CompareWithASCIIString(co->co_filename,
                                                "<stdin>") != 0
               && PyUnicode_CompareWithASCIIString(co->co_filename,
                                                   "<string>") != 0;
    }
    if (prefixes == NULL) {
        return 0;
    }
    /* (prefix, skip) pairs, first match wins: torch and tcjit are skipped
     * even though site-packages (inside the stdlib tree) is not. */
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(prefixes); i++) {
        PyObject *pair = PyTuple_GET_ITEM(prefixes, i);
        if (PyUnicode_Tailmatch(co->co_filename, PyTuple_GET_ITEM(pair, 0), 0,
                                PY_SSIZE_T_MAX, -1) == 1) {
            return PyObject_IsTrue(PyTuple_GET_ITEM(pair, 1)) == 1;
        }
    }
    return 0;
}

/* Frames tcjit must leave to CPython untouched. */
static int
must_pass_through(PyThreadState *ts, tc_iframe *f, int throwflag)
{
    PyCodeObject *co = f->f_code;
    return throwflag || f->owner == TC_FRAME_OWNED_BY_GENERATOR
           || (co->co_flags & (CO_GENERATOR | CO_COROUTINE
                               | CO_ASYNC_GENERATOR))
           || !pyframe_is_fresh(f) || pyframe_tracing_active(ts, co);
}

/* ---- running an entry ---------------------------------------------------- */

/* What templates are built from: the graph outputs, the fetched source
 * values, and the frame's globals (for deferred functions). */
typedef struct {
    PyObject **outputs;
    PyObject **vals;
    PyObject *globals;
    PyObject **memo;      /* built containers, by template memo slot */
    PyObject **localsplus;  /* the frame's (TC_TMPL_CELL) */
} build_ctx;

static void
memo_release(PyObject **memo, int n)
{
    for (int i = 0; i < n; i++) {
        Py_CLEAR(memo[i]);
    }
}

static PyObject *build_result(const tc_template *t, const build_ctx *cx);

/* An iterator of a loop the tracer unrolled: made afresh and advanced as
 * far as the segment got, so that CPython's FOR_ITER goes on from there
 * (items of a list are read from the list itself, as eager's iterator
 * does). */
static PyObject *
build_iterator(PyObject *factory, PyObject *args, int advance)
{
    PyObject *it = PyObject_CallObject(factory, args);
    for (int i = 0; it != NULL && i < advance; i++) {
        PyObject *item = PyIter_Next(it);
        if (item == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_SystemError,
                                "tcjit: an unrolled loop's iterator ended "
                                "early");
            }
            Py_CLEAR(it);
            break;
        }
        Py_DECREF(item);
    }
    return it;
}

/* `with` a context manager entered inside a segment: enter it for real
 * (the instruction the segment stopped at runs in its mode) and keep its
 * bound __exit__ on the stack, where CPython's exit sequence expects it. */
static PyObject *
build_entered(PyObject *ctx)
{
    PyObject *r = PyObject_CallMethod(ctx, "__enter__", NULL);
    if (r == NULL) {
        return NULL;
    }
    Py_DECREF(r);
    return PyObject_GetAttrString(ctx, "__exit__");
}

/* Values the tracer deferred to the exit (f-strings of tensors, lambdas,
 * loop iterators, context managers). */
static PyObject *
build_deferred(const tc_template *t, const build_ctx *cx)
{
    if (t->kind == TC_TMPL_FUNCTION && t->n == 0) {
        PyObject *none[TC_FN_NPARTS] = {NULL};
        return pyframe_make_function(t->obj, cx->globals, none);
    }
    PyObject *items = PyTuple_New(t->n), *r = NULL;
    for (int i = 0; items && i < t->n; i++) {
        PyObject *v = build_result(&t->items[i], cx);
        if (v == NULL) {
            Py_CLEAR(items);
            break;
        }
        PyTuple_SET_ITEM(items, i, v);
    }
    if (items == NULL) {
        return NULL;
    }
    if (t->kind == TC_TMPL_JOIN) {
        PyObject *empty = PyUnicode_FromString("");
        r = empty ? PyUnicode_Join(empty, items) : NULL;
        Py_XDECREF(empty);
    }
    else if (t->kind == TC_TMPL_CALL) {
        r = PyObject_CallObject(t->obj, items);
    }
    else if (t->kind == TC_TMPL_FUNCTION) {
        /* a closure over the frame's cells (items) */
        PyObject *parts[TC_FN_NPARTS] = {[TC_FN_CLOSURE] = items};
        r = pyframe_make_function(t->obj, cx->globals, parts);
    }
    else if (t->kind == TC_TMPL_ITER) {
        r = build_iterator(t->obj, items, t->index);
    }
    else if (t->kind == TC_TMPL_ENTER) {
        r = build_entered(PyTuple_GET_ITEM(items, 0));
    }
    else if (t->kind == TC_TMPL_DICT) {
        r = PyDict_New();
        for (int i = 0; r != NULL && i < t->n; i++) {
            if (PyDict_SetItem(r, PyTuple_GET_ITEM(t->obj, i),
                               PyTuple_GET_ITEM(items, i)) < 0) {
                Py_CLEAR(r);
            }
        }
    }
    else {
        r = tc_format_value(PyTuple_GET_ITEM(items, 0),
                            t->n > 1 ? PyTuple_GET_ITEM(items, 1) : NULL,
                            (int)PyLong_AsLong(t->obj));
    }
    Py_DECREF(items);
    return r;
}

static PyObject *build_value(const tc_template *t, const build_ctx *cx);

static PyObject *
build_result(const tc_template *t, const build_ctx *cx)
{
    if (t->memo < 0) {
        return build_value(t, cx);
    }
    if (cx->memo[t->memo] == NULL) {
        cx->memo[t->memo] = build_value(t, cx);
    }
    return Py_XNewRef(cx->memo[t->memo]);
}

static PyObject *
build_value(const tc_template *t, const build_ctx *cx)
{
    PyObject **outputs = cx->outputs, **vals = cx->vals;
    PyObject *r;
    switch (t->kind) {
    case TC_TMPL_OUTPUT:
        return Py_NewRef(outputs[t->index]);
    case TC_TMPL_SOURCE:
        if (vals[t->index] == NULL) {
            PyErr_SetString(PyExc_SystemError, "tcjit: missing source value");
        }
        return Py_XNewRef(vals[t->index]);
    case TC_TMPL_NULL:
        PyErr_SetString(PyExc_SystemError, "tcjit: NULL in a container");
        return NULL;
    case TC_TMPL_CELL:
        r = cx->localsplus[t->index];
        if (r == NULL || !PyCell_Check(r)) {
            PyErr_SetString(PyExc_SystemError, "tcjit: no cell in the frame");
            return NULL;
        }
        return Py_NewRef(r);
    case TC_TMPL_ATTR:
        r = build_result(&t->items[0], cx);
        if (r != NULL) {
            Py_SETREF(r, PyObject_GetAttr(r, t->obj));
        }
        return r;
    case TC_TMPL_FORMAT:
    case TC_TMPL_JOIN:
    case TC_TMPL_FUNCTION:
    case TC_TMPL_CALL:
    case TC_TMPL_ITER:
    case TC_TMPL_ENTER:
    case TC_TMPL_DICT:
        return build_deferred(t, cx);
    case TC_TMPL_CONST:
        return Py_NewRef(t->obj);
    case TC_TMPL_TUPLE:
    case TC_TMPL_LIST:
        r = t->kind == TC_TMPL_TUPLE ? PyTuple_New(t->n) : PyList_New(t->n);
        for (int i = 0; r && i < t->n; i++) {
            PyObject *item = build_result(&t->items[i], cx);
            if (item == NULL) {
                Py_CLEAR(r);
                break;
            }
            if (t->kind == TC_TMPL_TUPLE) {
                PyTuple_SET_ITEM(r, i, item);
            }
            else {
                PyList_SET_ITEM(r, i, item);
            }
        }
        return r;
    }
    return NULL;
}

static int
run_backend_fn(tc_entry *e, PyObject **inputs, PyObject **outputs)
{
    own_work++;
    PyObject *r = PyObject_Vectorcall(e->backend_fn, inputs, e->ninputs, NULL);
    own_work--;
    if (r == NULL) {
        return -1;
    }
    PyObject *seq = PySequence_Fast(r, "a tcjit backend must return a "
                                       "sequence of tensors");
    Py_DECREF(r);
    if (seq == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(seq) != e->noutputs) {
        PyErr_Format(PyExc_RuntimeError, "tcjit backend returned %zd "
                     "outputs, the graph has %d",
                     PySequence_Fast_GET_SIZE(seq), e->noutputs);
        Py_DECREF(seq);
        return -1;
    }
    for (int i = 0; i < e->noutputs; i++) {
        outputs[i] = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
    }
    Py_DECREF(seq);
    return 0;
}

static void
release_outputs(tc_entry *e, PyObject **outputs)
{
    for (int i = 0; i < e->noutputs; i++) {
        Py_DECREF(outputs[i]);
    }
}

/* Output slots are distinct traced tensors (the tracer gives one node one
 * slot), so eager has distinct objects for them; after CSE merged equal
 * views (x[3] and x.select(0, 3)) a backend may give one object for two
 * slots.  Each later one becomes a view of its own, as eager's is. */
static int
split_merged_outputs(tc_entry *e, PyObject **outputs)
{
    for (int j = 1; j < e->noutputs; j++) {
        for (int k = 0; k < j; k++) {
            if (outputs[j] != outputs[k]) {
                continue;
            }
            /* t[...]: an alias with t's strides exactly (view_as
             * recomputes those of size-1 dims) */
            PyObject *v = PyObject_GetItem(outputs[j], Py_Ellipsis);
            if (v == NULL) {
                return -1;
            }
            Py_SETREF(outputs[j], v);
            break;
        }
    }
    return 0;
}

/* Run the graph of a compiled entry: outputs get new references.  0, 1
 * (no outputs: the segment must run in CPython), or -1 with an exception. */
static int
run_graph(tc_entry *e, PyObject **vals, PyObject **outputs)
{
    PyObject *small[MAX_SOURCES_ON_STACK];
    if (e->be == NULL && e->backend_fn == NULL) {
        return 0;  /* a segment without tensor work (compile_entry) */
    }
    PyObject **inputs = e->ninputs <= MAX_SOURCES_ON_STACK
        ? small : PyMem_Malloc(sizeof(PyObject *) * (size_t)e->ninputs);
    if (inputs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int nsrc = e->ninputs - e->nconsts;
    for (int i = 0; i < nsrc; i++) {
        inputs[i] = vals[e->input_sources[i]];
    }
    for (int k = 0; k < e->nconsts; k++) {
        inputs[nsrc + k] = e->consts[k];  /* freezing's folded values */
    }
    int rc = e->wb.n ? tc_writeback_aliased(&e->wb, inputs) : 0;
    if (rc == 0 && e->wb.checks_leaf) {
        rc = tc_writeback_eager_error(&e->wb, inputs);
        if (rc == 1 && !e->eager_write_logged
            && tc_log_on(TC_LOG_GRAPH_BREAKS)) {
            e->eager_write_logged = 1;
            rc = tc_logf(TC_LOG_GRAPH_BREAKS, "graph_breaks",
                         "Segment run in CPython: an in-place write under "
                         "grad mode into an input that requires grad and "
                         "is a leaf (eager raises) or a view (eager's rules "
                         "for views); compiled code runs for other inputs")
                 < 0 ? -1 : 1;
        }
    }
    if (rc != 0) {
        /* 1: inputs alias a written one, or a leaf that requires grad is
         * written under grad mode (eager raises): CPython runs the
         * segment */
        if (inputs != small) {
            PyMem_Free(inputs);
        }
        return rc;
    }
    rc = e->be ? e->be->run(e->code, inputs, e->ninputs, outputs)
               : run_backend_fn(e, inputs, outputs);
    if (rc == 0 && e->wb.n
        && tc_writeback_apply(&e->wb, inputs, outputs) < 0) {
        release_outputs(e, outputs);
        rc = -1;
    }
    if (rc == 0 && e->merged_outputs && split_merged_outputs(e, outputs) < 0) {
        release_outputs(e, outputs);
        rc = -1;
    }
    if (inputs != small) {
        PyMem_Free(inputs);
    }
    return rc;
}

/* Make the frame hold what the segment computed: the locals it wrote and
 * its whole value stack (which replaces the stack it started from). */
static int
write_back(tc_iframe *f, const tc_exit *x, const build_ctx *cxp)
{
    PyCodeObject *co = f->f_code;
    build_ctx cx = *cxp;
    PyObject *stack[x->nstack + 1];
    const unsigned char *kinds =
        (const unsigned char *)PyBytes_AS_STRING(co->co_localspluskinds);
    for (int i = 0; i < x->nstack; i++) {
        const tc_template *t = &x->stack_vals[i];
        stack[i] = t->kind == TC_TMPL_NULL ? NULL : build_result(t, &cx);
        if (stack[i] == NULL && t->kind != TC_TMPL_NULL) {
            while (--i >= 0) {
                Py_XDECREF(stack[i]);
            }
            return -1;
        }
    }
    for (int k = 0; k < x->nlocals; k++) {
        int slot = x->local_slots[k];
        int unbound = x->local_vals[k].kind == TC_TMPL_NULL;  /* 3.12
            comprehension variables that had no outer value */
        PyObject *v = unbound ? NULL : build_result(&x->local_vals[k], &cx);
        if (v == NULL && !unbound) {
            for (int i = 0; i < x->nstack; i++) {
                Py_XDECREF(stack[i]);
            }
            return -1;
        }
        if (kinds[slot] & (TC_CO_FAST_CELL | TC_CO_FAST_FREE)) {
            int rc = PyCell_Set(f->localsplus[slot], v);
            Py_XDECREF(v);
            if (rc < 0) {
                return -1;  /* cannot happen: the prologue made the cell */
            }
        }
        else {
            Py_XSETREF(f->localsplus[slot], v);
        }
    }
    while (f->stacktop > co->co_nlocalsplus) {
        Py_XDECREF(f->localsplus[--f->stacktop]);
    }
    for (int i = 0; i < x->nstack; i++) {
        pyframe_push(f, stack[i]);
    }
    return 0;
}

/* Resume the frame at a return instruction: CPython then pops and clears it
 * through its own return path (on 3.12 the hook owns frame cleanup, and this
 * keeps us out of private frame-clearing code). */
static PyObject *
resume_at_return(PyThreadState *ts, tc_iframe *f, int pc, int pushes,
                 PyObject *value)
{
    if (pushes) {
        pyframe_push(f, value);
    }
    else {
        Py_DECREF(value);
    }
    pyframe_set_resume(f, pc);
    return pyframe_eval_default(ts, f, 0);
}

/* A compiled call failed before the frame ran: unwind the frame through a
 * return instruction, then report the saved exception to the caller. */
static PyObject *
fail_frame(PyThreadState *ts, tc_iframe *f, tc_code_state *st)
{
    if (st->fail_pc < 0) {
        /* No return instruction to unwind through (the function never
         * returns normally): let CPython run it. */
        PyErr_WriteUnraisable((PyObject *)f->f_code);
        return pyframe_eval_default(ts, f, 0);
    }
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *r = resume_at_return(ts, f, st->fail_pc, st->fail_pushes,
                                   Py_NewRef(Py_None));
    Py_XDECREF(r);
    PyErr_Restore(type, value, tb);
    return NULL;
}

/* ---- cache lookup --------------------------------------------------------- */

/* An array of object pointers: inline for the few dozen a segment usually
 * has, on the heap for a model inlined whole (every parameter of twelve
 * blocks is a guard source and a graph input). */
typedef struct {
    PyObject **v;
    int cap;
    PyObject *small[MAX_SOURCES_ON_STACK];
} ptrbuf;

static void
ptrbuf_init(ptrbuf *b)
{
    b->v = b->small;
    b->cap = MAX_SOURCES_ON_STACK;
}

/* Room for n pointers; only called while none is held. */
static int
ptrbuf_reserve(ptrbuf *b, int n)
{
    if (n <= b->cap) {
        return 0;
    }
    PyObject **v = PyMem_Calloc((size_t)n, sizeof(PyObject *));
    if (v == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (b->v != b->small) {
        PyMem_Free(b->v);
    }
    b->v = v;
    b->cap = n;
    return 0;
}

static void
ptrbuf_free(ptrbuf *b)
{
    if (b->v != b->small) {
        PyMem_Free(b->v);
    }
    ptrbuf_init(b);
}

/* Source values of the entry being looked up. */
typedef struct {
    tc_entry *entry;
    ptrbuf buf;
    PyObject **vals;          /* buf.v once reserved */
    PyObject *reasons;        /* list of failure lines, on a miss */
    int nfailed;              /* entries whose guards failed */
    int size_fail;            /* the first of them failed only on a
                                 tensor's sizes (automatic dynamic) */
} lookup_result;

static int
lr_reserve(lookup_result *lr, int n)
{
    int rc = ptrbuf_reserve(&lr->buf, n);
    lr->vals = lr->buf.v;
    return rc;
}

/* mark_static(t, dim) (torch's attribute): that dim never becomes
 * dynamic. */
static int
dim_marked_static(PyObject *t, int dim)
{
    PyObject *s = PyObject_GetAttrString(t, "_dynamo_static_indices");
    if (s == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *d = PyLong_FromLong(dim);
    int r = d != NULL ? PySequence_Contains(s, d) : -1;
    Py_XDECREF(d);
    Py_DECREF(s);
    if (r < 0) {
        PyErr_Clear();
        return 0;
    }
    return r;
}

static int
note_failure(lookup_result *lr, tc_code_state *st, tc_entry *e, int guard)
{
    if (lr->reasons == NULL && (lr->reasons = PyList_New(0)) == NULL) {
        return -1;
    }
    if (lr->nfailed++ == 0) {
        PyObject *t;
        int dim;
        lr->size_fail = tc_guard_size_failure(e->guards, guard, lr->vals, &t,
                                              &dim)
                        && !(dim >= 0 && dim_marked_static(t, dim));
    }
    PyObject *why = tc_guard_fail_reason(e->guards, guard, lr->vals);
    PyObject *line = why ? PyUnicode_FromFormat("%d/%d: %U", st->frame_id,
                                                e->compile_id, why)
                         : NULL;
    Py_XDECREF(why);
    int rc = line ? PyList_Append(lr->reasons, line) : -1;
    Py_XDECREF(line);
    return rc;
}

/* Whether an entry after e may be tried for the segment at pc. */
static int
more_candidates(tc_entry *e, int pc, PyObject *backend)
{
    for (e = e->next; e; e = e->next) {
        if (e->start_pc == pc && e->backend == backend) {
            return 1;
        }
    }
    return 0;
}

/* Find the entry whose guards pass, most recently hit first; its fetched
 * values stay in lr->vals.  Entries tried after a failing one reuse the
 * values it fetched. */
static int
lookup_pass(const tc_frame_view *fv, int pc, tc_code_state *st,
            PyObject *backend, lookup_result *lr, int notes)
{
    tc_entry *prev = NULL;
    tc_fetched fetched = {NULL, NULL, 0};
    int rc = 0;
    lr->nfailed = 0;
    lr->size_fail = 0;
    for (tc_entry *e = st->entries; e; prev = e, e = e->next) {
        if (e->start_pc != pc || e->backend != backend) {
            continue;
        }
        int failed = -1;
        int ok = lr_reserve(lr, e->guards->nsources) < 0 ? -1
            : tc_guards_eval(e->guards, fv, lr->vals,
                             fetched.vals ? &fetched : NULL, &failed);
        if (ok == 1) {
            if (prev) { /* most recently hit first */
                prev->next = e->next;
                e->next = st->entries;
                st->entries = e;
            }
            lr->entry = e;
            break;
        }
        lr->nfailed += !notes;
        if (ok < 0 || (notes && note_failure(lr, st, e, failed) < 0)) {
            if (ok == 0) {
                tc_guards_release(e->guards, lr->vals);
            }
            rc = -1;
            break;
        }
        if (!more_candidates(e, pc, backend)
            || (fetched.vals == NULL
                && tc_fetched_init(&fetched, st->sources->nsources) < 0)) {
            tc_guards_release(e->guards, lr->vals);
            rc = PyErr_Occurred() ? -1 : 0;
            if (rc < 0) {
                break;
            }
            continue;
        }
        tc_guards_stash(e->guards, lr->vals, &fetched);
    }
    tc_fetched_release(&fetched);
    return rc;
}

/* The failure reasons (and whether sizes alone failed) are only wanted
 * on a miss: formatting them for every entry tried before a hit cost a
 * few us per call when calls alternate between entries (two batch
 * sizes).  So a miss evaluates the guards a second time, noting why. */
static int
lookup_view(const tc_frame_view *fv, int pc, tc_code_state *st,
            PyObject *backend, lookup_result *lr)
{
    int rc = lookup_pass(fv, pc, st, backend, lr, 0);
    if (rc == 0 && lr->entry == NULL && lr->nfailed > 0) {
        rc = lookup_pass(fv, pc, st, backend, lr, 1);
    }
    return rc;
}

static int
lookup(tc_iframe *f, int pc, tc_code_state *st, PyObject *backend,
       lookup_result *lr)
{
    tc_frame_view fv;
    tc_view_of(f, &fv);
    return lookup_view(&fv, pc, st, backend, lr);
}

double
tc_guard_time(PyObject *fn, PyObject *args, long n)
{
    PyFunctionObject *func = (PyFunctionObject *)fn;
    PyCodeObject *co = (PyCodeObject *)func->func_code;
    tc_code_state *st = tc_code_state_get(co);
    tc_entry *first = NULL;
    for (tc_entry *e = st ? st->entries : NULL; e; e = e->next) {
        first = e->start_pc == 0 ? e : first;
    }
    Py_ssize_t nargs = PyTuple_GET_SIZE(args);
    if (first == NULL || nargs > co->co_argcount) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "no compiled entry at the "
                            "frame's start, or too many arguments");
        }
        return -1;
    }
    /* A frame view of a call fn(*args): the arguments in their local
     * slots, the other locals unbound (the entry's guards read only
     * arguments, globals and cells of a frame's start). */
    PyObject **locals = PyMem_Calloc((size_t)co->co_nlocalsplus + 1,
                                     sizeof(PyObject *));
    if (locals == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < nargs; i++) {
        locals[i] = PyTuple_GET_ITEM(args, i);
    }
    PyObject *builtins = PyEval_GetBuiltins();
    tc_frame_view fv = {locals, func->func_globals, builtins,
                        func->func_closure, locals + co->co_nlocalsplus};
    lookup_result lr;
    ptrbuf_init(&lr.buf);
    lr.vals = lr.buf.v;
    double ns = -1;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long i;
    for (i = 0; i < n; i++) {
        lr.entry = NULL;
        lr.reasons = NULL;
        if (lookup_view(&fv, 0, st, first->backend, &lr) < 0) {
            break;
        }
        Py_CLEAR(lr.reasons);
        if (lr.entry == NULL) {
            PyErr_SetString(PyExc_ValueError, "the guards fail for these "
                            "arguments");
            break;
        }
        tc_guards_release(lr.entry->guards, lr.vals);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (i == n) {
        ns = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec))
             / (double)n;
    }
    Py_XDECREF(lr.reasons);
    ptrbuf_free(&lr.buf);
    PyMem_Free(locals);
    return ns;
}

static int
log_recompile(PyCodeObject *co, PyObject *reasons, int recompiling,
              const char *note)
{
    if (!tc_log_on(TC_LOG_RECOMPILES)) {
        return 0;
    }
    PyObject *where = tc_describe_code(co);
    PyObject *sep = PyUnicode_FromString("\n    - ");
    PyObject *joined = (where && sep) ? PyUnicode_Join(sep, reasons) : NULL;
    int rc = joined
        ? tc_logf(TC_LOG_RECOMPILES, "recompiles",
                  "%s function %U\n    triggered by the following guard "
                  "failure(s):\n    - %U%s%s",
                  recompiling ? "Recompiling"
                              : "Recompile limit reached, running eagerly:",
                  where, joined, note ? "\n    " : "", note ? note : "")
        : -1;
    Py_XDECREF(where);
    Py_XDECREF(sep);
    Py_XDECREF(joined);
    return rc;
}

static int
warn_recompile_limit(PyCodeObject *co, PyObject *reasons)
{
    PyObject *last = PyList_GET_SIZE(reasons)
        ? PyList_GET_ITEM(reasons, PyList_GET_SIZE(reasons) - 1) : Py_None;
    return tc_warnf(
        co, "tcjit hit config.recompile_limit (%d)\n   function: '%U' "
        "(%U:%d)\n   last reason: %S\nTo log all recompilation reasons, use "
        "TCJIT_LOGS=\"recompiles\".", tc_config.recompile_limit, co->co_name,
        co->co_filename, co->co_firstlineno, last);
}

/* Entries of the segment that count against recompile_limit (those that
 * reuse size-generic kernels do not: they are one compile's code). */
static int
entries_at(tc_code_state *st, int pc, PyObject *backend)
{
    int n = 0;
    for (tc_entry *e = st->entries; e; e = e->next) {
        n += e->start_pc == pc && e->backend == backend && !e->reused;
    }
    return n;
}

static int
log_dynamic(unsigned channel, const char *name, PyCodeObject *co,
            PyObject *reasons, const char *what)
{
    if (!tc_log_on(channel)) {
        return 0;
    }
    PyObject *where = tc_describe_code(co);
    PyObject *first = PyList_GET_SIZE(reasons)
        ? PyList_GET_ITEM(reasons, 0) : Py_None;
    int rc = where ? tc_logf(channel, name, "%s function %U: %S", what,
                             where, first)
                   : -1;
    Py_XDECREF(where);
    return rc;
}

/* Automatic dynamic shapes: a miss of a segment that has entries, whose
 * most recently hit entry failed only on sizes, makes the code's compiles
 * size-generic from now on (tcjit.compile(dynamic=None), the default);
 * dynamic=True makes them so from the first compile, dynamic=False
 * never.  Returns 1 when this miss turned it on, 0, or -1 with an
 * exception. */
static int
decide_dynamic(tc_code_state *st, PyObject *backend, int previous,
               int size_fail)
{
    int policy = tc_backend_dynamic(backend);
    if (policy < -1) {
        return -1;
    }
    if (st->dynamic || policy < 0) {
        return 0;
    }
    if (policy > 0 || (previous > 0 && size_fail)) {
        st->dynamic = 1;
        return policy > 0 ? 0 : 1;
    }
    return 0;
}

/* A miss: log, honour the recompile limit, convert.  Returns the new entry,
 * NULL with *eager set to let CPython run the frame from pc, or NULL with
 * an error.  The limit counts entries per segment start, as Dynamo's counts
 * per code object (its resume functions are code objects of their own). */
static tc_entry *
convert_miss(tc_iframe *f, int pc, tc_code_state *st, PyObject *backend,
             PyObject *reasons, int size_fail, int *eager)
{
    PyCodeObject *co = f->f_code;
    int previous = entries_at(st, pc, backend);
    tc_stats.cache_misses++;
    *eager = 0;
    int was_dynamic = st->dynamic;
    int turned = decide_dynamic(st, backend, previous, size_fail);
    if (turned < 0) {
        return NULL;
    }
    if (previous > 0 && previous >= tc_config.recompile_limit) {
        if (!st->limit_hit) {
            st->limit_hit = 1;
            if (log_recompile(co, reasons, 0, NULL) < 0
                || warn_recompile_limit(co, reasons) < 0) {
                return NULL;  /* e.g. the warning filtered into an error */
            }
        }
        *eager = 1;
        return NULL;
    }
    /* a new size of a dynamic segment is traced again and its kernels
     * are looked up among the size-generic ones: logged as a recompile
     * only if it compiles something (below) */
    int resize = was_dynamic && size_fail && previous > 0;
    if (previous > 0 && !resize) {
        tc_stats.recompiles++;
        const char *why = "automatic dynamic shapes: recompiling with "
                          "size-generic kernels (sizes are dynamic from now "
                          "on)";
        if (log_recompile(co, reasons, 1, turned ? why : NULL) < 0
            || (turned && log_dynamic(TC_LOG_DYNAMIC, "dynamic", co,
                                      reasons, why) < 0)) {
            return NULL;
        }
    }
    int skip = 0;
    tc_entry *e = tc_convert_frame(f, pc, st, backend, &skip);
    if (e != NULL && st->dynamic && e->code == NULL
        && e->backend_fn == NULL) {
        /* a segment with nothing to compile (no tensor work, or one that
         * runs in CPython): a new size of it costs a trace, as one whose
         * kernels are shared */
        e->reused = 1;
    }
    if (e != NULL && resize) {
        if (!e->reused) {
            tc_stats.recompiles++;
        }
        else if (e->code != NULL) {
            tc_stats.dynamic_reuses++;   /* a compiled entry (graphs) */
        }
        if ((!e->reused
             && log_recompile(co, reasons, 1, "dynamic shapes: these sizes "
                              "need kernels of their own (a size 0 or 1, "
                              "another layout or schedule)") < 0)
            || log_dynamic(TC_LOG_DYNAMIC, "dynamic", co, reasons,
                           e->reused
                           ? "new sizes, size-generic kernels reused, in"
                           : "new sizes, new kernels compiled, in") < 0) {
            tc_entry_free(e);
            return NULL;
        }
    }
    if (e == NULL && skip) {
        st->skip = 1;
        tc_stats.frames_skipped++;
        *eager = 1;
        return NULL;
    }
    if (e == NULL) {
        return NULL;
    }
    if ((st->sources == NULL && (st->sources = tc_guards_new()) == NULL)
        || tc_guards_share(st->sources, e->guards) < 0) {
        tc_entry_free(e);
        return NULL;
    }
    e->next = st->entries;
    st->entries = e;
    return e;
}

/* convert_miss as tcjit's own work: the Python it runs (log handlers,
 * warnings filters, a custom backend compiling) is not compiled. */
static tc_entry *
handle_miss(tc_iframe *f, int pc, tc_code_state *st, PyObject *backend,
            PyObject *reasons, int size_fail, int *eager)
{
    own_work++;
    tc_entry *e = convert_miss(f, pc, st, backend, reasons, size_fail,
                               eager);
    own_work--;
    return e;
}

/* ---- the hook ---------------------------------------------------------------- */

typedef enum { GOT_ENTRY, GOT_EAGER, GOT_ERROR } got_kind;

/* The entry for the segment at pc whose guards pass, converting one on a
 * miss; its source values are left in lr->vals. */
static got_kind
get_entry(tc_iframe *f, int pc, tc_code_state *st, PyObject *backend,
          lookup_result *lr)
{
    lr->entry = NULL;
    lr->reasons = NULL;
    if (lookup(f, pc, st, backend, lr) < 0) {
        Py_XDECREF(lr->reasons);
        return GOT_ERROR;
    }
    if (lr->entry != NULL) {
        tc_stats.cache_hits++;
        Py_XDECREF(lr->reasons);
        return GOT_ENTRY;
    }
    if (lr->reasons == NULL && (lr->reasons = PyList_New(0)) == NULL) {
        return GOT_ERROR;
    }
    int eager = 0;
    tc_entry *e = handle_miss(f, pc, st, backend, lr->reasons,
                              lr->size_fail, &eager);
    Py_CLEAR(lr->reasons);
    if (e == NULL) {
        return eager ? GOT_EAGER : GOT_ERROR;
    }
    /* Fetch the new entry's sources (its guards pass by construction). */
    tc_frame_view fv;
    tc_view_of(f, &fv);
    if (lr_reserve(lr, e->guards->nsources) < 0
        || tc_guards_fetch(e->guards, &fv, lr->vals) < 0) {
        return GOT_ERROR;
    }
    lr->entry = e;
    return GOT_ENTRY;
}

/* Let CPython run the frame from code unit pc on.  A frame skipped for
 * having no tensor work (st->skip, counted in frames_skipped) is no eager
 * fallback: nothing in it could have been compiled. */
static PyObject *
continue_in_cpython(PyThreadState *ts, tc_iframe *f, tc_code_state *st,
                    int pc)
{
    tc_stats.eager_fallbacks += !st->skip;
    if (pc > 0) {
        pyframe_set_resume(f, pc);
    }
    return pyframe_eval_default(ts, f, 0);
}

/* An error raised while a first segment's graph ran (torch's own, e.g.
 * an embedding index out of range in an extern op): raise it in the frame
 * at its first instruction, so the traceback has the user's function (at
 * its def line: which op failed is not tracked).  Nothing observable has
 * happened in the frame yet, and no handler covers its entry. */
static PyObject *
raise_at_entry(PyThreadState *ts, tc_iframe *f, tc_code_state *st)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    int rc = pyframe_run_prologue(f);
    PyErr_Restore(type, value, tb);
    return rc == 0 ? pyframe_throw_at(ts, f, 0) : fail_frame(ts, f, st);
}

/* An error of tcjit's own at pc: before anything ran, unwind the frame
 * silently; later, raise it in the frame like an instruction would. */
static PyObject *
fail_at(PyThreadState *ts, tc_iframe *f, tc_code_state *st, int pc)
{
    return pc == 0 ? fail_frame(ts, f, st) : pyframe_throw_at(ts, f, pc);
}

/* The exit of a segment that does not return: write the state back, then
 * STEP / BRANCH (*pc is the next segment) or hand the frame to CPython.
 * The frame is current while the runtime performs its instruction. */
static PyObject *
take_exit(PyThreadState *ts, tc_iframe *f, tc_entry *e, PyObject **outputs,
          PyObject **vals, int *pc)
{
    const tc_exit *x = &e->exit;
    PyObject *memo[e->nmemo + 1];
    memset(memo, 0, sizeof(memo));
    build_ctx cx = {outputs, vals, f->f_globals, memo, f->localsplus};
    int rc = (*pc == 0) ? pyframe_run_prologue(f) : 0;
    tc_iframe *outer = pyframe_make_current(ts, f, x->op_pc);
    if (rc == 0 && x->set_grad) {
        /* before with blocks the exit enters record the mode */
        rc = tc_set_grad_mode(x->set_grad - 1);
    }
    if (rc == 0) {
        rc = write_back(f, x, &cx);
    }
    memo_release(memo, e->nmemo);
    release_outputs(e, outputs);
    tc_guards_release(e->guards, vals);
    if (rc == 0 && x->kind == TC_EXIT_STEP) {
        rc = tc_step(f, x);
        *pc = x->next_pc;
    }
    else if (rc == 0 && x->kind == TC_EXIT_BRANCH) {
        rc = tc_branch(f, x, pc);
    }
    pyframe_restore_current(ts, outer);
    if (rc < 0) {
        return pyframe_throw_at(ts, f, x->op_pc);
    }
    if (x->kind == TC_EXIT_STEP || x->kind == TC_EXIT_BRANCH) {
        return NULL;
    }
    pyframe_set_resume(f, x->pc);
    return pyframe_eval_default(ts, f, 0);
}

/* The runtime loop: guards -> kernels -> write-back -> exit -> next
 * segment, until a RETURN or until CPython takes the frame over. */
static PyObject *
run_frame(PyThreadState *ts, tc_iframe *f, tc_code_state *st,
          PyObject *backend)
{
    int pc = 0;
    lookup_result lr;
    ptrbuf out;
    PyObject *r = NULL;
    ptrbuf_init(&lr.buf);
    lr.vals = lr.buf.v;
    ptrbuf_init(&out);
    for (;;) {
        got_kind got = get_entry(f, pc, st, backend, &lr);
        if (got == GOT_ERROR) {
            r = fail_at(ts, f, st, pc);
            break;
        }
        tc_entry *e = lr.entry;
        if (got == GOT_EAGER || e->kind == TC_ENTRY_EAGER) {
            if (e != NULL) {
                tc_guards_release(e->guards, lr.vals);
            }
            r = continue_in_cpython(ts, f, st, pc);
            break;
        }
        if (ptrbuf_reserve(&out, e->noutputs) < 0) {
            tc_guards_release(e->guards, lr.vals);
            r = fail_at(ts, f, st, pc);
            break;
        }
        PyObject **outputs = out.v;
        int ran = run_graph(e, lr.vals, outputs);
        if (ran < 0) {
            tc_guards_release(e->guards, lr.vals);
            r = pc == 0 ? raise_at_entry(ts, f, st) : fail_at(ts, f, st, pc);
            break;
        }
        if (ran > 0) {
            tc_guards_release(e->guards, lr.vals);
            r = continue_in_cpython(ts, f, st, pc);
            break;
        }
        if (e->exit.kind == TC_EXIT_RETURN) {
            PyObject *memo[e->nmemo + 1];
            memset(memo, 0, sizeof(memo));
            build_ctx cx = {outputs, lr.vals, f->f_globals, memo,
                            f->localsplus};
            PyObject *result = build_result(&e->ret, &cx);
            if (result != NULL && e->exit.set_grad
                && tc_set_grad_mode(e->exit.set_grad - 1) < 0) {
                Py_CLEAR(result);
            }
            memo_release(memo, e->nmemo);
            release_outputs(e, outputs);
            tc_guards_release(e->guards, lr.vals);
            r = result == NULL ? fail_at(ts, f, st, pc)
                : resume_at_return(ts, f, e->return_pc, e->return_pushes,
                                   result);
            break;
        }
        r = take_exit(ts, f, e, outputs, lr.vals, &pc);
        if (r != NULL || PyErr_Occurred()) {
            break;
        }
    }
    ptrbuf_free(&lr.buf);
    ptrbuf_free(&out);
    return r;
}

static PyObject *
tcjit_eval_frame(PyThreadState *ts, tc_iframe *f, int throwflag)
{
    PyCodeObject *co = f->f_code;
    PyObject *backend;
    int wrapped = (PyObject *)co == pending.code;
    if (wrapped) {
        backend = pending.backend;
        pending.code = NULL;
    }
    else if (own_work > 0 || tc_extern_running > 0) {
        return pyframe_eval_default(ts, f, throwflag);
    }
    else if (pending.scope != NULL) {
        backend = pending.scope;
    }
    else if (enabled_all) {
        backend = tc_hooks.auto_backend;
    }
    else {
        return pyframe_eval_default(ts, f, throwflag);
    }
    if (must_pass_through(ts, f, throwflag)) {
        return pyframe_eval_default(ts, f, throwflag);
    }
    tc_code_state *st = tc_code_state_get(co);
    if (st == NULL) {
        if (PyErr_Occurred()) {
            return NULL;
        }
        st = tc_code_state_create(co);
        if (st == NULL) {
            PyErr_Clear();
            return pyframe_eval_default(ts, f, throwflag);
        }
        /* Roots from the standard library or torch are never traced; a
         * compile wrapper's own function is, wherever it lives. */
        st->skip = !wrapped && is_skipped_file(co);
    }
    if (st->skip || st->limit_hit) {
        tc_stats.eager_fallbacks += st->limit_hit;
        return pyframe_eval_default(ts, f, throwflag);
    }
    return run_frame(ts, f, st, backend);
}

void
tc_install_hook(void)
{
    if (!hook_installed) {
        pyframe_set_eval(tcjit_eval_frame);
        hook_installed = 1;
    }
}
