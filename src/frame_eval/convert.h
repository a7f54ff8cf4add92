/* convert.h - trace and compile a frame's segment into a cache entry
 * (convert.c), for the runtime loop of eval_frame.c. */
#ifndef TCJIT_CONVERT_H
#define TCJIT_CONVERT_H

#include "cache.h"

/* Trace and compile the segment of a frame starting at code unit pc into a
 * new cache entry.  Returns the entry, NULL with *skip set when the code
 * should be skipped, or NULL with an exception. */
tc_entry *tc_convert_frame(tc_iframe *f, int pc, tc_code_state *st,
                           PyObject *backend, int *skip);

/* tcjit.compile(dynamic=...) of a backend object: 1 True, 0 None, -1
 * False, -2 with an exception. */
int tc_backend_dynamic(PyObject *backend);

/* The effective value of a compile option ("cudagraphs", "max_autotune",
 * "freezing": docs/modes.md) for a compile made now with this backend
 * object: tcjit.compile's options/mode/template over tcjit.config's.
 * Read once per compile, never per call.  1, 0, or -1 with an exception
 * (ValueError for an unknown name). */
int tc_backend_option(PyObject *backend, const char *name);

/* The values of e's sources in frame f at compile time (new references,
 * NULL where missing), or NULL with an exception; release them with
 * tc_entry_fetch_release. */
PyObject **tc_entry_fetch(tc_entry *e, tc_iframe *f);
void tc_entry_fetch_release(tc_entry *e, PyObject **vals);

/* The graph as data (tcjit.Graph's desc): what Python-side passes and
 * custom backends read.  device: -1 for the CPU, else the CUDA device
 * index.  A new dict, or NULL with an exception. */
PyObject *tc_graph_desc(const tc_graph *g, int device);

#endif
