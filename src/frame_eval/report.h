/* report.h - process state of the frame_eval stage (counters, settings,
 * log channels, the hooks the tcjit package installs) and the reporting
 * helpers built on it.
 *
 * Its own file so that the hook (eval_frame.c) and the compiler driver
 * (convert.c) share it without including each other.
 */
#ifndef TCJIT_REPORT_H
#define TCJIT_REPORT_H

#include <Python.h>

typedef struct {
    long frames_compiled, cache_hits, cache_misses, recompiles, graphs,
        kernels_compiled, eager_fallbacks, frames_skipped,
        dynamic_reuses;       /* entries for new sizes that compiled
                                 nothing (size-generic kernels reused) */
} tc_counters;

extern tc_counters tc_stats;

typedef struct {
    int recompile_limit;
    PyObject *skip_prefixes;  /* ((prefix, skip), ...): roots never traced */
    char *ptx_dump_dir;       /* also write PTX of CPU graphs here (tests) */
    int emulate_precision_casts;  /* graph.h tc_graph.emulate_precision */
} tc_settings;

extern tc_settings tc_config;


enum {
    TC_LOG_RECOMPILES = 1 << 0,
    TC_LOG_GUARDS = 1 << 1,
    TC_LOG_GRAPH = 1 << 2,
    TC_LOG_OUTPUT_CODE = 1 << 3,
    TC_LOG_GRAPH_BREAKS = 1 << 4,
    TC_LOG_DYNAMIC = 1 << 5,
    TC_LOG_PERF_HINTS = 1 << 6,  /* reported from Python (_modes_cudagraphs) */
    TC_LOG_CACHE = 1 << 7
};

extern unsigned tc_log_mask;

/* Python-side hooks installed by the tcjit package at import. */
typedef struct {
    PyObject *log;             /* log(channel: str, message: str) */
    PyObject *compile_backend; /* (backend, graph_desc, text, inputs) -> fn */
    PyObject *warn;            /* warn(message: str) */
    PyObject *auto_backend;    /* the backend tcjit.enable() uses */
    PyObject *unsupported;     /* tcjit.Unsupported (fullgraph=True) */
    PyObject *recorder;        /* explain(): recorder(event, data) or NULL */
} tc_python_hooks;

extern tc_python_hooks tc_hooks;

/* Breaks already logged: (filename, line, reason); cleared by reset(). */
extern PyObject *tc_reported_breaks;

/* Reporting helpers.  They build their message or data themselves, only
 * when someone listens (a channel that is off costs a test), and own what
 * they build: callers never pass a reference in.  Each returns 0, or -1
 * with an exception. */

/* Whether a log channel is on: test it before building a costly message. */
static inline int
tc_log_on(unsigned channel)
{
    return (tc_log_mask & channel) && tc_hooks.log != NULL;
}

/* Log PyUnicode_FromFormat(fmt, ...) on a channel if it is on. */
int tc_logf(unsigned channel, const char *name, const char *fmt, ...);

/* Tell tcjit.explain() about a compile event ("break", "guards", "graph",
 * "compile_time") with data Py_BuildValue(fmt, ...) makes; a no-op unless
 * explain is running ("N" arguments are released either way). */
int tc_recordf(const char *event, const char *fmt, ...);

/* Warn (RuntimeWarning) PyUnicode_FromFormat(fmt, ...) about the function
 * of co, attributed to its definition line; -1 if the warning was raised. */
int tc_warnf(PyCodeObject *co, const char *fmt, ...);

/* "f in /path/file.py:3" for logs. */
PyObject *tc_describe_code(PyCodeObject *co);

#endif
