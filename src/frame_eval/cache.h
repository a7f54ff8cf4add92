/* cache.h - per-code state and cache entries, kept in co_extra.
 *
 * Every code object the hook has seen gets a tc_code_state: either SKIP
 * (never trace it: no tensors, standard library, torch itself) or a list of
 * cache entries, most recently hit first.  An entry is what one trace made:
 * guards, and either compiled code or the decision to run eagerly.
 */
#ifndef TCJIT_CACHE_H
#define TCJIT_CACHE_H

#include "../pyrt/pyframe.h"
#include "../guards/guards.h"
#include "../tracer/tracer.h"
#include "../runtime/backend.h"

typedef enum {
    TC_ENTRY_COMPILED,
    TC_ENTRY_EAGER
} tc_entry_kind;

typedef struct tc_entry {
    struct tc_entry *next;
    tc_entry_kind kind;
    int compile_id;           /* n in "frame/n" of the logs */
    int start_pc;             /* the segment starts here (0: frame entry) */
    PyObject *backend;        /* the backend it was made for (owned) */
    int is_auto;              /* backend.is_auto: tcjit's own code generators */
    tc_guard_set *guards;
    int ninputs;
    int *input_sources;       /* of the first ninputs - nconsts inputs */
    int nconsts;              /* freezing: the last inputs are constants */
    PyObject **consts;        /* the entry holds (freezing.h) */
    int noutputs;
    int merged_outputs;       /* two output slots are one graph node (CSE
                                 merged equal views): eval_frame.c makes
                                 them two objects, as eager has them */
    tc_template ret;
    int return_pc;
    int return_pushes;
    tc_exit exit;             /* how the segment ends */
    tc_writebacks wb;         /* inputs in-place ops wrote (writeback.h) */
    int eager_write_logged;   /* graph_breaks said once that CPython ran
                                 it for a leaf or view written under grad */
    int nmemo;                /* template memo slots (tracer.h) */
    /* backend "auto": the code generator that compiled the graph (CPU or
     * CUDA tensors) and its handle; NULL for other backends */
    const tc_backend *be;
    void *code;
    PyObject *backend_fn;     /* other backends: callable(*inputs) */
    int reused;               /* dynamic shapes: made without compiling a
                                 kernel (all shared size-generic ones); not
                                 counted against recompile_limit */
} tc_entry;

typedef struct {
    int skip;
    int dynamic;              /* dynamic shapes: sizes changed (automatic
                                 dynamic) or were declared dynamic, so
                                 compiles make size-generic kernels */
    int frame_id;             /* assigned at first compile, for logs */
    int ncompiles;            /* entries ever made: 1 + recompiles */
    int limit_hit;            /* recompile limit reached: run eagerly */
    int fail_pc;              /* a return instruction to unwind through */
    int fail_pushes;
    tc_entry *entries;
    tc_guard_set *sources;    /* every entry's sources, interned once
                                 (tc_guards_share), or NULL */
} tc_code_state;

int tc_cache_init(void);

/* NULL if the code has no state yet (no exception set), or on error. */
tc_code_state *tc_code_state_get(PyCodeObject *co);
tc_code_state *tc_code_state_create(PyCodeObject *co);

void tc_entry_free(tc_entry *e);

/* Drop every code state (tcjit.reset()). */
int tc_cache_reset(void);

/* Where the guard sources of an entry are read from in frame f: the
 * runtime loop's lookup and a custom backend's example inputs. */
void tc_view_of(tc_iframe *f, tc_frame_view *fv);

#endif
