/* module.c - tcjit._C: the thin Python-facing glue.
 *
 * Argument parsing and module init only; the work happens in the stages
 * under src/.  The tcjit Python package wraps these functions.
 */
#include "frame_eval/eval_frame.h"
#include "frame_eval/bn_eval.h"

#include <structmember.h>

#include "graph/kir.h"
#include "graph/ops.h"
#include "guards/tensor_keys.h"
#include "jit/jit.h"
#include "runtime/diskcache.h"
#include "runtime/extern_table.h"
#include "runtime/tunetable.h"
#include "runtime/threadpool.h"
#include "tracer/bindings.h"

/* ---- CompiledFunction: what tcjit.compile(fn) returns ------------------- */

typedef struct {
    PyObject_HEAD
    PyObject *fn;
    PyObject *code;
    PyObject *backend;
    PyObject *dict;
    vectorcallfunc vectorcall;
} CompiledFunction;

static PyObject *
cf_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
              PyObject *kwnames)
{
    CompiledFunction *cf = (CompiledFunction *)self;
    tc_pending saved = tc_set_pending(cf->code, cf->backend);
    PyObject *r = PyObject_Vectorcall(cf->fn, args, nargsf, kwnames);
    tc_restore_pending(saved);
    return r;
}

static PyObject *
cf_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    PyObject *fn, *backend;
    static char *names[] = {"fn", "backend", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO", names, &fn, &backend)) {
        return NULL;
    }
    if (!PyFunction_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "tcjit.compile expects a Python "
                     "function, got %s", Py_TYPE(fn)->tp_name);
        return NULL;
    }
    CompiledFunction *cf = (CompiledFunction *)type->tp_alloc(type, 0);
    if (cf == NULL) {
        return NULL;
    }
    cf->fn = Py_NewRef(fn);
    cf->code = Py_NewRef(PyFunction_GET_CODE(fn));
    cf->backend = Py_NewRef(backend);
    cf->vectorcall = cf_vectorcall;
    tc_install_hook();
    return (PyObject *)cf;
}

static int
cf_traverse(CompiledFunction *cf, visitproc visit, void *arg)
{
    Py_VISIT(cf->fn);
    Py_VISIT(cf->code);
    Py_VISIT(cf->backend);
    Py_VISIT(cf->dict);
    return 0;
}

static int
cf_clear(CompiledFunction *cf)
{
    Py_CLEAR(cf->fn);
    Py_CLEAR(cf->code);
    Py_CLEAR(cf->backend);
    Py_CLEAR(cf->dict);
    return 0;
}

static void
cf_dealloc(CompiledFunction *cf)
{
    PyObject_GC_UnTrack(cf);
    cf_clear(cf);
    Py_TYPE(cf)->tp_free((PyObject *)cf);
}

/* Bind like a function so a compiled function works as a method. */
static PyObject *
cf_descr_get(PyObject *self, PyObject *obj, PyObject *type)
{
    if (obj == NULL || obj == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, obj);
}

static PyMemberDef cf_members[] = {
    {"backend", T_OBJECT, offsetof(CompiledFunction, backend), READONLY, NULL},
    {"__dictoffset__", T_PYSSIZET, offsetof(CompiledFunction, dict),
     READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET,
     offsetof(CompiledFunction, vectorcall), READONLY, NULL},
    {NULL}
};

static PyGetSetDef cf_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL},
    {NULL}
};

static PyType_Slot cf_slots[] = {
    {Py_tp_getset, cf_getset},
    {Py_tp_new, cf_new},
    {Py_tp_dealloc, cf_dealloc},
    {Py_tp_traverse, cf_traverse},
    {Py_tp_clear, cf_clear},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_descr_get, cf_descr_get},
    {Py_tp_members, cf_members},
    {Py_tp_doc, "A function compiled by tcjit; call it like the original."},
    {0, NULL}
};

static PyType_Spec cf_spec = {
    "tcjit._C.CompiledFunction", sizeof(CompiledFunction), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    cf_slots
};

/* ---- module functions ----------------------------------------------------- */

static PyObject *
mod_set_enabled(PyObject *m, PyObject *arg)
{
    int on = PyObject_IsTrue(arg);
    if (on < 0) {
        return NULL;
    }
    tc_set_enabled(on);
    Py_RETURN_NONE;
}

static PyObject *
mod_is_enabled(PyObject *m, PyObject *unused)
{
    return PyBool_FromLong(tc_is_enabled());
}

static PyObject *
mod_counters(PyObject *m, PyObject *unused)
{
    tc_counters *c = &tc_stats;
    long meta_runs, meta_hits;
    double meta_seconds;
    tc_diskcache_stats dc;
    tc_xtable_stats(&meta_runs, &meta_hits, &meta_seconds);
    tc_diskcache_get_stats(&dc);
    /* extern_meta_*: generic extern nodes' meta runs at trace time (and
     * the signatures found in their cache), the seconds they took;
     * kernel_cache_*: the on-disk cache (docs/cache.md) */
    return Py_BuildValue(
        "{s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:l,s:d,s:l,s:l,s:d,"
        "s:l,s:l,s:l,s:l,s:l,s:d,s:l}",
        "frames_compiled",
        c->frames_compiled, "cache_hits", c->cache_hits, "cache_misses",
        c->cache_misses, "recompiles", c->recompiles, "graphs", c->graphs,
        "kernels_compiled", c->kernels_compiled, "eager_fallbacks",
        c->eager_fallbacks, "frames_skipped", c->frames_skipped,
        "dynamic_reuses", c->dynamic_reuses,
        "extern_meta_runs", meta_runs, "extern_meta_hits", meta_hits,
        "extern_meta_seconds", meta_seconds,
        /* max-autotune: plans tuned, plans whose configuration came from
         * the table on disk, seconds spent timing (docs/autotune.md) */
        "autotune_runs", tc_tune_counters.runs, "autotune_hits",
        tc_tune_counters.hits, "autotune_seconds", tc_tune_counters.seconds,
        "kernel_cache_hits", dc.hits, "kernel_cache_misses", dc.misses,
        "kernel_cache_writes", dc.writes, "kernel_cache_corrupt", dc.corrupt,
        "kernel_cache_evicted", dc.evicted,
        "kernel_compile_seconds", tc_jit_compile_seconds(),
        /* kernels whose softmax max and sum became one pass (kir.h) */
        "online_softmax_kernels", tc_kernel_online_count(0));
}

static PyObject *
mod_reset(PyObject *m, PyObject *unused)
{
    if (tc_cache_reset() < 0 || PySet_Clear(tc_reported_breaks) < 0) {
        return NULL;
    }
    memset(&tc_stats, 0, sizeof(tc_stats));
    memset(&tc_tune_counters, 0, sizeof(tc_tune_counters));
    (void)tc_kernel_online_count(1);
    tc_diskcache_reset_stats();
    tc_jit_forget_shared();
    Py_RETURN_NONE;
}

static PyObject *
mod_set_config(PyObject *m, PyObject *args, PyObject *kw)
{
    static char *names[] = {"recompile_limit", "num_threads",
                            "parallel_threshold", "skip_prefixes",
                            "ptx_dump_dir", "cache", "cache_dir",
                            "cache_size_mb", "compile_workers",
                            "emulate_precision_casts", NULL};
    int limit = -1, threads = -1, cache = -1, workers = -1, emulate = -1;
    long long threshold = -1, cache_mb = -1;
    PyObject *prefixes = NULL, *ptx_dir = NULL, *cache_dir = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$iiLO!OiOLii", names,
                                     &limit, &threads, &threshold,
                                     &PyTuple_Type, &prefixes, &ptx_dir,
                                     &cache, &cache_dir, &cache_mb,
                                     &workers, &emulate)) {
        return NULL;
    }
    if (workers >= 0) {
        tc_jit_set_compile_workers(workers);
    }
    if (cache_dir != NULL) {
        const char *dir = cache_dir == Py_None ? NULL
                                               : PyUnicode_AsUTF8(cache_dir);
        if (dir == NULL && cache_dir != Py_None) {
            return NULL;
        }
        tc_diskcache_set_dir(dir);
    }
    if (cache >= 0) {
        tc_diskcache_set_enabled(cache);
    }
    if (cache_mb >= 0) {
        tc_diskcache_set_max_bytes(cache_mb << 20);
    }
    if (ptx_dir != NULL) {
        const char *dir = ptx_dir == Py_None ? NULL : PyUnicode_AsUTF8(ptx_dir);
        if (dir == NULL && ptx_dir != Py_None) {
            return NULL;
        }
        free(tc_config.ptx_dump_dir);
        tc_config.ptx_dump_dir = dir ? strdup(dir) : NULL;
    }
    if (limit >= 0) {
        tc_config.recompile_limit = limit;
    }
    if (emulate >= 0) {
        tc_config.emulate_precision_casts = emulate != 0;
    }
    if (threads >= 0) {
        tc_threadpool_set_threads(threads);
    }
    if (threshold >= 0) {
        tc_jit_set_parallel_threshold(threshold);
    }
    if (prefixes != NULL) {
        Py_XSETREF(tc_config.skip_prefixes, Py_NewRef(prefixes));
    }
    Py_RETURN_NONE;
}

static PyObject *
mod_set_recorder(PyObject *m, PyObject *arg)
{
    Py_XSETREF(tc_hooks.recorder, arg == Py_None ? NULL : Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyObject *
mod_set_log_mask(PyObject *m, PyObject *arg)
{
    unsigned long mask = PyLong_AsUnsignedLong(arg);
    if (mask == (unsigned long)-1 && PyErr_Occurred()) {
        return NULL;
    }
    tc_log_mask = (unsigned)mask;
    Py_RETURN_NONE;
}

static PyObject *
mod_set_hooks(PyObject *m, PyObject *args)
{
    PyObject *log, *compile_backend, *warn, *auto_backend, *unsupported;
    if (!PyArg_ParseTuple(args, "OOOOO", &log, &compile_backend, &warn,
                          &auto_backend, &unsupported)) {
        return NULL;
    }
    Py_XSETREF(tc_hooks.log, Py_NewRef(log));
    Py_XSETREF(tc_hooks.compile_backend, Py_NewRef(compile_backend));
    Py_XSETREF(tc_hooks.warn, Py_NewRef(warn));
    Py_XSETREF(tc_hooks.auto_backend, Py_NewRef(auto_backend));
    Py_XSETREF(tc_hooks.unsupported, Py_NewRef(unsupported));
    Py_RETURN_NONE;
}

/* A generic extern node's call as data (extern_table.h tc_xtable_args):
 * what compile-time passes match on (python/tcjit/_freezing.py). */
static PyObject *
mod_extern_call_args(PyObject *m, PyObject *arg)
{
    long id = PyLong_AsLong(arg);
    if (id == -1 && PyErr_Occurred()) {
        return NULL;
    }
    return tc_xtable_args((int)id);
}

/* (input, weight, bias, running_mean, running_var) operand indices (-1:
 * None) and eps of an eval-mode torch.batch_norm call, or None
 * (frame_eval/bn_eval.h; python/tcjit/_freezing.py folds these). */
static PyObject *
mod_eval_batch_norm_call(PyObject *m, PyObject *arg)
{
    long id = PyLong_AsLong(arg);
    int ops[5];
    double eps;
    if (id == -1 && PyErr_Occurred()) {
        return NULL;
    }
    int r = tc_bn_eval_call((int)id, ops, &eps);
    if (r <= 0) {
        return r < 0 ? NULL : Py_NewRef(Py_None);
    }
    return Py_BuildValue("(iiiiid)", ops[0], ops[1], ops[2], ops[3], ops[4],
                         eps);
}

/* The op registry as data, for docs/ops.md and users. */
static PyObject *
mod_op_table(PyObject *m, PyObject *unused)
{
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < tc_nops; i++) {
        const tc_op_def *op = &tc_ops[i];
        PyObject *dtypes = PyList_New(0);
        for (int d = 0; dtypes && d < TC_NDTYPES; d++) {
            if (op->dtype_mask & (1u << d)) {
                PyObject *s = PyUnicode_FromString(tc_dtype_name((tc_dtype)d));
                if (s == NULL || PyList_Append(dtypes, s) < 0) {
                    Py_CLEAR(dtypes);
                }
                Py_XDECREF(s);
            }
        }
        static const char *const kinds[] = {
            [TC_OPK_POINTWISE] = "pointwise", [TC_OPK_VIEW] = "view",
            [TC_OPK_REDUCTION] = "reduction", [TC_OPK_EXTERN] = "extern"};
        PyObject *row = dtypes ? Py_BuildValue("{s:s,s:i,s:s,s:O,s:s,s:z,s:z}",
                                               "name", op->name, "arity",
                                               op->nin, "kind",
                                               kinds[op->kind], "dtypes",
                                               dtypes, "doc",
                                               op->doc ? op->doc : "",
                                               "eager", op->eager,
                                               "grad", op->grad)
                               : NULL;
        Py_XDECREF(dtypes);
        if (row == NULL || PyList_Append(list, row) < 0) {
            Py_XDECREF(row);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(row);
    }
    return list;
}

/* (tensor's dispatch key set as the guards read it, read in C?) for
 * tests: the fast path must agree with torch._C._dispatch_keys. */
static PyObject *
mod_tensor_keys(PyObject *m, PyObject *t)
{
    uint64_t keys;
    if (!PyObject_TypeCheck(t, (PyTypeObject *)tc_tensor_type)) {
        PyErr_SetString(PyExc_TypeError, "expected a tensor");
        return NULL;
    }
    if (tc_tensor_keys(t, &keys) < 0) {
        return NULL;
    }
    return Py_BuildValue("(KO)", (unsigned long long)keys,
                         tc_tensor_keys_direct() ? Py_True : Py_False);
}

/* _guard_time(fn, args, n): ns per cache lookup of fn's entries for a
 * call fn(*args); bench/guards.py measures guard evaluation with it. */
static PyObject *
mod_guard_time(PyObject *m, PyObject *args)
{
    PyObject *fn, *fargs;
    long n;
    if (!PyArg_ParseTuple(args, "O!O!l", &PyFunction_Type, &fn,
                          &PyTuple_Type, &fargs, &n)) {
        return NULL;
    }
    double ns = tc_guard_time(fn, fargs, n);
    return ns < 0 ? NULL : PyFloat_FromDouble(ns);
}

static PyObject *
mod_bindings(PyObject *m, PyObject *unused)
{
    return tc_bindings_table();
}

static PyObject *
mod_decomposed(PyObject *m, PyObject *unused)
{
    return tc_decomposed_table();
}

static PyObject *
mod_cflags(PyObject *m, PyObject *unused)
{
    return PyUnicode_FromString(tc_jit_cflags());
}

static PyMethodDef module_methods[] = {
    {"set_enabled", mod_set_enabled, METH_O, NULL},
    {"is_enabled", mod_is_enabled, METH_NOARGS, NULL},
    {"counters", mod_counters, METH_NOARGS, NULL},
    {"reset", mod_reset, METH_NOARGS, NULL},
    {"set_config", (PyCFunction)(void (*)(void))mod_set_config,
     METH_VARARGS | METH_KEYWORDS, NULL},
    {"set_log_mask", mod_set_log_mask, METH_O, NULL},
    {"set_recorder", mod_set_recorder, METH_O, NULL},
    {"set_hooks", mod_set_hooks, METH_VARARGS, NULL},
    {"op_table", mod_op_table, METH_NOARGS, NULL},
    {"extern_call_args", mod_extern_call_args, METH_O, NULL},
    {"eval_batch_norm_call", mod_eval_batch_norm_call, METH_O, NULL},
    {"bindings", mod_bindings, METH_NOARGS, NULL},
    {"decomposed", mod_decomposed, METH_NOARGS, NULL},
    {"tensor_keys", mod_tensor_keys, METH_O, NULL},
    {"_guard_time", mod_guard_time, METH_VARARGS, NULL},
    {"cudagraph_moved", tc_cudagraph_moved, METH_VARARGS, NULL},
    {"cflags", mod_cflags, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL}
};

static int
module_exec(PyObject *m)
{
    if (pyframe_init_opcode_info() < 0 || tc_guards_init() < 0
        || tc_bindings_init() < 0 || tc_tracer_init() < 0
        || tc_cache_init() < 0
        || tc_jit_init() < 0) {
        return -1;
    }
    tc_reported_breaks = PySet_New(NULL);
    if (tc_reported_breaks == NULL) {
        return -1;
    }
    PyObject *cf_type = PyType_FromSpec(&cf_spec);
    if (cf_type == NULL || PyModule_AddObject(m, "CompiledFunction",
                                              cf_type) < 0) {
        Py_XDECREF(cf_type);
        return -1;
    }
    return PyModule_AddIntConstant(m, "LOG_RECOMPILES", TC_LOG_RECOMPILES)
        || PyModule_AddIntConstant(m, "LOG_GUARDS", TC_LOG_GUARDS)
        || PyModule_AddIntConstant(m, "LOG_GRAPH", TC_LOG_GRAPH)
        || PyModule_AddIntConstant(m, "LOG_OUTPUT_CODE", TC_LOG_OUTPUT_CODE)
        || PyModule_AddIntConstant(m, "LOG_GRAPH_BREAKS", TC_LOG_GRAPH_BREAKS)
        || PyModule_AddIntConstant(m, "LOG_DYNAMIC", TC_LOG_DYNAMIC)
        || PyModule_AddIntConstant(m, "LOG_PERF_HINTS", TC_LOG_PERF_HINTS)
        || PyModule_AddIntConstant(m, "LOG_CACHE", TC_LOG_CACHE);
}

static PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "tcjit._C",
    "tcjit's C runtime: frame hook, tracer, guards, graph and code generators.",
    0, module_methods, NULL, NULL, NULL, NULL
};

PyMODINIT_FUNC
PyInit__C(void)
{
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && module_exec(m) < 0) {
        Py_CLEAR(m);
    }
    return m;
}
