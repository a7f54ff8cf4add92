/* eval_frame.h - the PEP 523 hook, its runtime loop, and process state.
 *
 * The hook decides per frame: pass through (SKIP, generators, tracing,
 * frames already running), run a cached entry whose guards pass, or convert
 * the frame (trace + compile) and run the new entry.  A compiled entry's
 * RETURN exit pushes the result and resumes the frame at its own return
 * instruction, so CPython pops and clears the frame as usual.
 */
#ifndef TCJIT_EVAL_FRAME_H
#define TCJIT_EVAL_FRAME_H

#include "cache.h"

typedef struct {
    long frames_compiled, cache_hits, cache_misses, recompiles, graphs,
        kernels_compiled, eager_fallbacks, frames_skipped;
} tc_counters;

extern tc_counters tc_stats;

typedef struct {
    int recompile_limit;
    PyObject *skip_prefixes;  /* ((prefix, skip), ...): roots never traced */
    char *ptx_dump_dir;       /* also write PTX of CPU graphs here (tests) */
} tc_settings;

extern tc_settings tc_config;

enum {
    TC_LOG_RECOMPILES = 1 << 0,
    TC_LOG_GUARDS = 1 << 1,
    TC_LOG_GRAPH = 1 << 2,
    TC_LOG_OUTPUT_CODE = 1 << 3,
    TC_LOG_GRAPH_BREAKS = 1 << 4
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

/* Turn the hook on for every frame (enable) or only for frames that a
 * tcjit.compile wrapper asks for. */
void tc_set_enabled(int on);
int tc_is_enabled(void);
void tc_install_hook(void);

/* Called by a compile wrapper around the call of its function: the next
 * frame running `code` is compiled for `backend`, and so is every frame
 * it calls (scope), as torch.compile compiles what its function calls;
 * library roots (torch, the standard library) are skipped as under
 * enable().  Per thread: another thread's calls are not in the scope. */
typedef struct {
    PyObject *code;
    PyObject *backend;
    PyObject *scope;
} tc_pending;

tc_pending tc_set_pending(PyObject *code, PyObject *backend);
void tc_restore_pending(tc_pending saved);

/* convert.c: trace and compile the segment of a frame starting at code
 * unit pc into a new cache entry.
 * Returns the entry, NULL with *skip set when the code should be skipped,
 * or NULL with an exception. */
tc_entry *tc_convert_frame(tc_iframe *f, int pc, tc_code_state *st,
                           PyObject *backend, int *skip);

/* Where guard sources of this frame are read from. */
void tc_view_of(tc_iframe *f, tc_frame_view *fv);

/* Nanoseconds per guard evaluation (cache lookup: fetch, check, release)
 * of the entries at the start of fn's code, for a call fn(*args) with
 * positional arguments; for bench/guards.py.  -1 with an exception. */
double tc_guard_time(PyObject *fn, PyObject *args, long n);

/* "f in /path/file.py:3" for logs. */
PyObject *tc_describe_code(PyCodeObject *co);

#endif
