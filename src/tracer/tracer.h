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

#include "../pyrt/pyframe.h"
#include "../graph/graph.h"
#include "../guards/guards.h"

typedef enum {
    TC_TMPL_OUTPUT,   /* graph output `index` */
    TC_TMPL_CONST,    /* obj */
    TC_TMPL_TUPLE,    /* items */
    TC_TMPL_LIST,
    TC_TMPL_SOURCE,   /* the value of guard source `index` (identity kept) */
    TC_TMPL_NULL,     /* CPython's NULL stack marker */
    TC_TMPL_ATTR,     /* getattr(items[0], obj) */
    TC_TMPL_FORMAT,   /* f-string field: format(items[0], items[1]?),
                         index = FORMAT_VALUE's oparg */
    TC_TMPL_JOIN,     /* "".join(items) */
    TC_TMPL_FUNCTION, /* a function made from the code object obj, with
                         the closure items (cells) if any */
    TC_TMPL_CALL,     /* obj(*items): a context manager made in a segment */
    TC_TMPL_ITER,     /* obj(*items) (iter, enumerate, zip, reversed), then
                         next() `index` times: the iterator of a loop the
                         tracer unrolled, as far as the segment got */
    TC_TMPL_ENTER,    /* items[0].__enter__(), giving items[0].__exit__:
                         the value a `with` keeps on the stack */
    TC_TMPL_DICT,     /* dict(zip(obj, items)) */
    TC_TMPL_CELL      /* the frame's cell object in slot index */
} tc_tmpl_kind;

typedef struct tc_template {
    tc_tmpl_kind kind;
    int memo;          /* containers: slot shared by every template of the
                          same symbolic value, so it is built once per exit
                          (a list appended to must stay one list) */
    int index;
    PyObject *obj;
    int n;
    struct tc_template *items;
} tc_template;

/* How a segment ends (DESIGN.md, "resume, don't rewrite"). */
typedef enum {
    TC_EXIT_RETURN,    /* push the result, resume at the return instruction */
    TC_EXIT_STEP,      /* perform one instruction in C, go on at next_pc */
    TC_EXIT_BRANCH,    /* bool() of the top of stack picks the next segment */
    TC_EXIT_FALLBACK   /* write the state back, CPython runs the rest */
} tc_exit_kind;

typedef struct {
    tc_exit_kind kind;
    int pc;                /* first code unit of the exit instruction */
    int op_pc;             /* its opcode unit (past EXTENDED_ARG prefixes) */
    int next_pc;           /* the instruction after it */
    int opcode, oparg;
    PyObject *kwnames;     /* STEP of a CALL with keywords (owned) */
    int jump;              /* BRANCH: tc_jump_kind */
    int target;            /* BRANCH: where the jump goes */
    int nlocals;           /* locals the segment wrote */
    int *local_slots;
    tc_template *local_vals;
    int nstack;            /* the value stack at the exit, bottom first */
    tc_template *stack_vals;
    int stack_base;        /* stack depth when the segment started */
    PyObject *reason;      /* why the segment ended (str), not for RETURN */
    int reason_line;
    int set_grad;          /* 0, or 1 + the grad mode the exit sets first
                              (a traced torch.set_grad_enabled(mode)
                              call; RETURN too) */
} tc_exit;

/* A storage an in-place op wrote (tracer/mutation.c): after the graph ran,
 * the runtime copies graph output `output` into graph input `input` (eager
 * wrote into that tensor) and moves its version counter by `bumps`, the
 * in-place ops eager ran on it.  input -1: a tensor the graph made, output
 * `output` (or its base), only needs its version counter set to bumps. */
typedef struct {
    int input;
    int output;
    int bumps;
    /* grad mode of the in-place ops: 0 all ran under no_grad, 1 all under
     * grad mode (autograd records them: the runtime copies with grad mode
     * on, so the input gets eager's history, or eager's error for a leaf
     * that requires grad), 2 mixed (frame_eval/convert.c breaks when a
     * value or the input requires grad) */
    unsigned char grad;
    unsigned char target_rg;   /* the input requires grad (guarded) */
} tc_writeback;

typedef struct {
    int n;
    tc_writeback *items;
    int checks_leaf;   /* one is written under grad mode: the runtime
                          checks it is no leaf (writeback.h) */
    int ngw_read;      /* a tensor that requires grad, written under
                          no_grad, is read under grad mode or returned
                          (frame_eval/convert.c breaks) */
    int ninputs;
    int64_t *span;     /* by graph input: bytes its elements cover from its
                          data pointer (inputs that overlap a written one
                          make the runtime run the segment eagerly) */
    unsigned char *written;  /* by graph input: an item writes it */
} tc_writebacks;

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
    tc_exit exit;          /* COMPILED: how the segment ends */
    tc_writebacks wb;      /* COMPILED: inputs written by in-place ops */
    int nmemo;             /* memo slots used by ret and exit templates */
    int device;            /* -1: cpu, k: cuda:k (all inputs agree) */
    PyObject *reason;      /* EAGER: what was unsupported (str) */
    int reason_line;
} tc_trace;

/* Trace the segment of a frame that starts at code unit start_pc (0 for a
 * fresh frame; else the frame's locals and value stack hold the state a
 * previous exit wrote back).  Returns 0 with t->status set, or -1 with a
 * Python exception for internal failures (out of memory).  What cannot be
 * traced ends the segment (t->exit), so CPython or the runtime performs it
 * for real, exceptions included. */
int tc_trace_frame(tc_iframe *f, int start_pc, tc_trace *t);

/* Looks up the Python objects the tracer recognizes (module import).
 * 0, or -1 with an exception. */
int tc_tracer_init(void);
void tc_exit_clear(tc_exit *x);

/* FORMAT_VALUE's semantics (conversion in oparg & FVC_MASK, spec may be
 * NULL): one implementation for tracing, STEP and deferred values. */
PyObject *tc_format_value(PyObject *value, PyObject *spec, int oparg);
void tc_trace_clear(tc_trace *t);
void tc_template_clear(tc_template *t);
void tc_writebacks_clear(tc_writebacks *w);

#endif
