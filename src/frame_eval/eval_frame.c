/* eval_frame.c - the frame evaluation hook and the per-call runtime.
 *
 * The pass-through path must stay a few loads and a branch: with any hook
 * installed CPython stops inlining Python-to-Python calls, so every frame of
 * the program comes through here.
 */
#include "eval_frame.h"

tc_counters tc_stats;
tc_settings tc_config = {8, NULL, NULL};
unsigned tc_log_mask;
tc_python_hooks tc_hooks;

static int enabled_all;
static int hook_installed;
static tc_pending pending;

#define MAX_SOURCES_ON_STACK 64

/* ---- process state ------------------------------------------------------- */

int
tc_log(unsigned channel, const char *name, PyObject *msg)
{
    if (!(tc_log_mask & channel) || tc_hooks.log == NULL || msg == NULL) {
        return msg == NULL && PyErr_Occurred() ? -1 : 0;
    }
    PyObject *r = PyObject_CallFunction(tc_hooks.log, "sO", name, msg);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

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
    return saved;
}

void
tc_restore_pending(tc_pending saved)
{
    pending = saved;
}

PyObject *
tc_describe_code(PyCodeObject *co)
{
    return PyUnicode_FromFormat("%U in %U:%d", co->co_name, co->co_filename,
                                co->co_firstlineno);
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

static PyObject *
build_result(const tc_template *t, PyObject **outputs)
{
    PyObject *r;
    switch (t->kind) {
    case TC_TMPL_OUTPUT:
        return Py_NewRef(outputs[t->index]);
    case TC_TMPL_CONST:
        return Py_NewRef(t->obj);
    case TC_TMPL_TUPLE:
    case TC_TMPL_LIST:
        r = t->kind == TC_TMPL_TUPLE ? PyTuple_New(t->n) : PyList_New(t->n);
        for (int i = 0; r && i < t->n; i++) {
            PyObject *item = build_result(&t->items[i], outputs);
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
    PyObject *r = PyObject_Vectorcall(e->backend_fn, inputs, e->ninputs, NULL);
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

/* Run the graph of a compiled entry; returns the frame's return value. */
static PyObject *
run_compiled(tc_entry *e, PyObject **vals)
{
    PyObject *inputs[MAX_SOURCES_ON_STACK];
    PyObject *outputs[MAX_SOURCES_ON_STACK];
    if (e->ninputs > MAX_SOURCES_ON_STACK
        || e->noutputs > MAX_SOURCES_ON_STACK) {
        PyErr_SetString(PyExc_RuntimeError, "tcjit: too many graph inputs");
        return NULL;
    }
    for (int i = 0; i < e->ninputs; i++) {
        inputs[i] = vals[e->input_sources[i]];
    }
    int rc = e->compiled ? tc_jit_run(e->compiled, inputs, e->ninputs, outputs)
           : e->gpu ? tc_gpu_run(e->gpu, inputs, e->ninputs, outputs)
           : run_backend_fn(e, inputs, outputs);
    if (rc < 0) {
        return NULL;
    }
    PyObject *result = build_result(&e->ret, outputs);
    for (int i = 0; i < e->noutputs; i++) {
        Py_DECREF(outputs[i]);
    }
    return result;
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

typedef struct {
    tc_entry *entry;
    PyObject *vals[MAX_SOURCES_ON_STACK];
    PyObject *reasons;        /* list of failure lines, on a miss */
} lookup_result;

void
tc_view_of(tc_iframe *f, tc_frame_view *fv)
{
    PyObject *func = pyframe_func(f);
    fv->localsplus = f->localsplus;
    fv->globals = f->f_globals;
    fv->builtins = f->f_builtins;
    fv->closure = func ? PyFunction_GET_CLOSURE(func) : NULL;
}

static int
note_failure(lookup_result *lr, tc_code_state *st, tc_entry *e, int guard)
{
    if (lr->reasons == NULL && (lr->reasons = PyList_New(0)) == NULL) {
        return -1;
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

/* Find the entry whose guards pass; its fetched values stay in lr->vals. */
static int
lookup(tc_iframe *f, tc_code_state *st, PyObject *backend, lookup_result *lr)
{
    tc_frame_view fv;
    tc_view_of(f, &fv);
    tc_entry *prev = NULL;
    for (tc_entry *e = st->entries; e; prev = e, e = e->next) {
        if (e->backend != backend
            || e->guards->nsources > MAX_SOURCES_ON_STACK) {
            continue;
        }
        if (tc_guards_fetch(e->guards, &fv, lr->vals) < 0) {
            return -1;
        }
        int failed = -1;
        int ok = tc_guards_check(e->guards, lr->vals, &failed);
        if (ok == 1) {
            if (prev) { /* most recently hit first */
                prev->next = e->next;
                e->next = st->entries;
                st->entries = e;
            }
            lr->entry = e;
            return 0;
        }
        int rc = ok < 0 ? -1 : note_failure(lr, st, e, failed);
        tc_guards_release(e->guards, lr->vals);
        if (rc < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *
format_recompile(PyCodeObject *co, PyObject *reasons, int recompiling)
{
    PyObject *where = tc_describe_code(co);
    PyObject *sep = PyUnicode_FromString("\n    - ");
    PyObject *joined = (where && sep) ? PyUnicode_Join(sep, reasons) : NULL;
    PyObject *msg = joined
        ? PyUnicode_FromFormat("%s function %U\n    triggered by the "
                               "following guard failure(s):\n    - %U",
                               recompiling ? "Recompiling"
                                           : "Recompile limit reached, running "
                                             "eagerly:", where, joined)
        : NULL;
    Py_XDECREF(where);
    Py_XDECREF(sep);
    Py_XDECREF(joined);
    return msg;
}

static int
warn_recompile_limit(PyCodeObject *co, PyObject *reasons)
{
    PyObject *last = PyList_GET_SIZE(reasons)
        ? PyList_GET_ITEM(reasons, PyList_GET_SIZE(reasons) - 1) : Py_None;
    PyObject *msg = PyUnicode_FromFormat(
        "tcjit hit config.recompile_limit (%d)\n   function: '%U' (%U:%d)\n"
        "   last reason: %S\nTo log all recompilation reasons, use "
        "TCJIT_LOGS=\"recompiles\".", tc_config.recompile_limit, co->co_name,
        co->co_filename, co->co_firstlineno, last);
    if (msg == NULL) {
        return -1;
    }
    PyObject *r = tc_hooks.warn ? PyObject_CallOneArg(tc_hooks.warn, msg)
                                : Py_NewRef(Py_None);
    Py_DECREF(msg);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* A miss: log, honour the recompile limit, convert.  Returns the new entry,
 * NULL with *eager set to run this call eagerly, or NULL with an error. */
static tc_entry *
handle_miss(tc_iframe *f, tc_code_state *st, PyObject *backend,
            PyObject *reasons, int *eager)
{
    PyCodeObject *co = f->f_code;
    tc_stats.cache_misses++;
    *eager = 0;
    if (st->ncompiles > 0 && st->ncompiles >= tc_config.recompile_limit) {
        *eager = 1;
        if (!st->limit_hit) {
            st->limit_hit = 1;
            if (tc_log(TC_LOG_RECOMPILES, "recompiles",
                       format_recompile(co, reasons, 0)) < 0
                || warn_recompile_limit(co, reasons) < 0) {
                return NULL;
            }
        }
        return NULL;
    }
    if (st->ncompiles > 0) {
        tc_stats.recompiles++;
        if (tc_log(TC_LOG_RECOMPILES, "recompiles",
                   format_recompile(co, reasons, 1)) < 0) {
            return NULL;
        }
    }
    int skip = 0;
    tc_entry *e = tc_convert_frame(f, st, backend, &skip);
    if (e == NULL && skip) {
        st->skip = 1;
        tc_stats.frames_skipped++;
        *eager = 1;
        return NULL;
    }
    if (e == NULL) {
        return NULL;
    }
    e->next = st->entries;
    st->entries = e;
    return e;
}

/* ---- the hook ---------------------------------------------------------------- */

static PyObject *
run_entry(PyThreadState *ts, tc_iframe *f, tc_code_state *st, tc_entry *e,
          PyObject **vals)
{
    if (e->kind == TC_ENTRY_EAGER) {
        tc_guards_release(e->guards, vals);
        tc_stats.eager_fallbacks++;
        return pyframe_eval_default(ts, f, 0);
    }
    PyObject *result = run_compiled(e, vals);
    tc_guards_release(e->guards, vals);
    if (result == NULL) {
        return fail_frame(ts, f, st);
    }
    return resume_at_return(ts, f, e->return_pc, e->return_pushes, result);
}

static PyObject *
eval_known(PyThreadState *ts, tc_iframe *f, tc_code_state *st,
           PyObject *backend)
{
    lookup_result lr;
    lr.entry = NULL;
    lr.reasons = NULL;
    if (lookup(f, st, backend, &lr) < 0) {
        Py_XDECREF(lr.reasons);
        return fail_frame(ts, f, st);
    }
    if (lr.entry != NULL) {
        tc_stats.cache_hits++;
        Py_XDECREF(lr.reasons);
        return run_entry(ts, f, st, lr.entry, lr.vals);
    }
    if (lr.reasons == NULL && (lr.reasons = PyList_New(0)) == NULL) {
        return fail_frame(ts, f, st);
    }
    int eager = 0;
    tc_entry *e = handle_miss(f, st, backend, lr.reasons, &eager);
    Py_DECREF(lr.reasons);
    if (e == NULL) {
        if (!eager) {
            return fail_frame(ts, f, st);
        }
        tc_stats.eager_fallbacks += !st->skip;
        return pyframe_eval_default(ts, f, 0);
    }
    /* Fetch the new entry's sources (its guards pass by construction). */
    tc_frame_view fv;
    tc_view_of(f, &fv);
    if (e->guards->nsources > MAX_SOURCES_ON_STACK) {
        return pyframe_eval_default(ts, f, 0);
    }
    if (tc_guards_fetch(e->guards, &fv, lr.vals) < 0) {
        return fail_frame(ts, f, st);
    }
    return run_entry(ts, f, st, e, lr.vals);
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
    return eval_known(ts, f, st, backend);
}

void
tc_install_hook(void)
{
    if (!hook_installed) {
        pyframe_set_eval(tcjit_eval_frame);
        hook_installed = 1;
    }
}
