/* tracer.h - symbolic interpretation of a frame's bytecode.
 *
 * tc_trace_frame walks the code of a fresh frame from its first instruction
 * with symbolic values (vars.h), reading the frame's real argument values
 * only to specialize and guard them.  Tensor ops become graph nodes; Python
 * scalars are folded and guarded.  The result is a graph, its guards, the
 * graph inputs' sources, and a template that rebuilds the return value from
 * the graph outputs.
 */
#ifndef TCJIT_TRACER_H
#define TCJIT_TRACER_H

#include "../frame_eval/pyframe.h"
#include "../graph/graph.h"
#include "../guards/guards.h"

typedef enum {
    TC_TMPL_OUTPUT,   /* graph output `index` */
    TC_TMPL_CONST,    /* obj */
    TC_TMPL_TUPLE,    /* items */
    TC_TMPL_LIST
} tc_tmpl_kind;

typedef struct tc_template {
    tc_tmpl_kind kind;
    int index;
    PyObject *obj;
    int n;
    struct tc_template *items;
} tc_template;

typedef enum {
    TC_TRACE_COMPILED,     /* graph + guards + return template */
    TC_TRACE_EAGER,        /* run eagerly while the guards hold */
    TC_TRACE_NO_TENSORS    /* the frame touches no tensor: skip its code */
} tc_trace_status;

typedef struct {
    tc_trace_status status;
    tc_graph *graph;
    tc_guard_set *guards;
    int *input_sources;    /* graph input i -> guard source id */
    tc_template ret;
    int return_pc;         /* code unit index of the return instruction */
    int return_pushes;     /* 1: RETURN_VALUE, push the result; 0: RETURN_CONST */
    int device;            /* -1: cpu, k: cuda:k (all inputs agree) */
    PyObject *reason;      /* EAGER: what was unsupported (str) */
    int reason_line;
} tc_trace;

/* Trace a fresh frame.  Returns 0 with t->status set, or -1 with a Python
 * exception for internal failures (out of memory).  Exceptions raised by
 * user-visible operations while tracing become TC_TRACE_EAGER, so eager
 * execution raises them for real. */
int tc_trace_frame(tc_iframe *f, tc_trace *t);
void tc_trace_clear(tc_trace *t);
void tc_template_clear(tc_template *t);

#endif
