/* guards.h - sources and guards of one cache entry.
 *
 * A *source* says where a value the traced code read comes from: a local
 * slot, a global name, a closure cell, an item or attribute of another
 * source.  Sources print the way Dynamo's do (L['x'], G['W'], L['xs'][1]).
 * A *guard* is a leaf check on the value of one source (or on global state).
 * Before every compiled call the runtime fetches each source once and runs
 * the guards in order; the first failure is reported, Dynamo-style, by
 * TCJIT_LOGS=recompiles.
 */
#ifndef TCJIT_GUARDS_H
#define TCJIT_GUARDS_H

#include <Python.h>
#include "../graph/graph.h"

typedef enum {
    TC_SRC_LOCAL,    /* frame local slot `index`, named `name` */
    TC_SRC_GLOBAL,   /* globals[name], then builtins[name] */
    TC_SRC_CLOSURE,  /* func.__closure__[index].cell_contents, named `name` */
    TC_SRC_CELL,     /* cell in local slot `index` (after the prologue) */
    TC_SRC_STACK,    /* value stack slot `index` (segments after a break) */
    TC_SRC_ITEM,     /* parent[index] of a tuple or list */
    TC_SRC_ATTR,     /* getattr(parent, name) */
    TC_SRC_FUNC_GLOBAL,  /* parent.__globals__[name], then its builtins:
                            a global read by a function of another module */
    TC_SRC_FUNC_CLOSURE, /* parent.__closure__[index].cell_contents */
    TC_SRC_DICT_ITEM,    /* parent[name] of a dict (str keys) */
    TC_SRC_CONST,        /* the object `name` itself: a function another
                            guard pins (a method of a type-guarded class),
                            the root of its globals and cells */
    TC_SRC_CALL          /* name() (parent -1) or name(parent): a pure
                            builtin the tracer folded, such as a query of
                            torch's global state; a call that raises reads
                            as missing */
} tc_source_kind;

typedef struct {
    tc_source_kind kind;
    int parent;           /* ITEM/ATTR: source id */
    Py_ssize_t index;
    PyObject *name;       /* owned str */
} tc_source;

typedef enum {
    TC_GUARD_TYPE_MATCH,
    TC_GUARD_ID_MATCH,
    TC_GUARD_EQUALS,       /* TYPE_MATCH and value equality */
    TC_GUARD_TENSOR_MATCH,
    TC_GUARD_LENGTH,       /* TYPE_MATCH and len() */
    TC_GUARD_GLOBAL_STATE,
    TC_GUARD_NO_HOOKS,     /* an nn.Module whose call runs no hooks */
    TC_GUARD_FROZEN        /* the very tensor obj, its version counter and
                              data pointer unchanged: a parameter whose
                              value was folded at compile time (freezing) */
} tc_guard_kind;

typedef struct {
    PyObject *type;       /* exact type (torch.Tensor or nn.Parameter) */
    uint64_t keys;        /* dispatch key set (tensor_keys.h): a plain
                             tensor's, with or without autograd keys */
    PyObject *dtype;      /* torch.dtype object, compared by identity */
    int device_index;     /* -1 = cpu */
    int requires_grad;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    int64_t strides[TC_MAX_DIMS];
} tc_tensor_meta;

typedef struct {
    tc_guard_kind kind;
    int source;           /* -1 for GLOBAL_STATE */
    PyObject *obj;        /* TYPE_MATCH: type; ID_MATCH: object; EQUALS: value */
    Py_ssize_t length;    /* LENGTH */
    int grad_mode;        /* GLOBAL_STATE */
    int autocast;         /* GLOBAL_STATE: any device's autocast is on */
    int dispatch_modes;   /* GLOBAL_STATE: a TorchDispatchMode is active */
    int forward_ad;       /* GLOBAL_STATE: a forward-AD dual_level is */
    PyObject *default_dtype; /* GLOBAL_STATE: torch.get_default_dtype() */
    tc_tensor_meta tensor;
    int64_t version;      /* FROZEN: obj._version */
    void *data_ptr;       /* FROZEN: obj.data_ptr() */
} tc_guard;

/* The sources and guards of one cache entry: a tree of sources (a local,
 * global or cell at the root; an item or attribute of its parent below),
 * stored parents first, each with the leaf guards on its value. */
typedef struct tc_guard_set {
    tc_source *sources;
    int nsources, srccap;
    tc_guard *guards;
    int nguards, gcap;
    /* The evaluation plan, made by tc_guards_share once tracing is done:
     * guard ids grouped by source, global-state guards first:
     * plan[plan_start[s + 1] .. plan_start[s + 2]) are source s's guards,
     * plan[0 .. plan_start[1]) those on no source. */
    int *plan;
    int *plan_start;
    /* shared[s]: source s's id in the code's shared table (all entries of
     * one code object intern their sources there), or NULL. */
    int *shared;
} tc_guard_set;

/* Values fetched during one cache lookup, by shared source id: an entry
 * whose guards fail leaves its values here for the next entry tried, so a
 * lookup fetches each source once however many entries it tries. */
typedef struct {
    PyObject **vals;      /* owned where have[i] */
    char *have;
    int n;
} tc_fetched;

/* What the runtime needs to fetch source values from a frame. */
typedef struct {
    PyObject **localsplus;
    PyObject *globals;
    PyObject *builtins;
    PyObject *closure;    /* tuple of cells or NULL */
    PyObject **stack;     /* bottom of the value stack */
} tc_frame_view;

tc_guard_set *tc_guards_new(void);
void tc_guards_free(tc_guard_set *gs);

/* Intern a source; returns its id (same id for an equal source), -1 on
 * error.  name is borrowed. */
int tc_source_add(tc_guard_set *gs, tc_source_kind kind, int parent,
                  Py_ssize_t index, PyObject *name);

/* Printable form: L['x'], G['torch'], C['scale'], S[0], L['xs'][1],
 * L['m'].w */
PyObject *tc_source_repr(const tc_guard_set *gs, int src);

/* Guard constructors; values are the real objects seen while tracing.
 * Adding the same guard twice is a no-op.  Return 0 or -1 (exception). */
int tc_guard_type(tc_guard_set *gs, int src, PyObject *value);
int tc_guard_id(tc_guard_set *gs, int src, PyObject *value);
int tc_guard_equals(tc_guard_set *gs, int src, PyObject *value);
int tc_guard_length(tc_guard_set *gs, int src, PyObject *value);
int tc_guard_tensor(tc_guard_set *gs, int src, PyObject *tensor);
int tc_guard_global_state(tc_guard_set *gs);
/* A Python function the tracer inlines, read from src.  What the traced
 * code depends on is its code, globals and defaults (its cells' contents
 * are sources of their own), not its identity: a function the frame makes
 * (a comprehension, a lambda in a list) is a new object on every call, so
 * TYPE_MATCH, ID_MATCH on src.__code__ and .__globals__, and the items of
 * .__defaults__ / .__kwdefaults__ (built per call too; EQUALS for
 * scalars, else ID_MATCH).  A function with cells (which may be the
 * frame's own, read from its slots), one read from a module's globals, or
 * another callable: ID_MATCH. */
int tc_guard_function(tc_guard_set *gs, int src, PyObject *value);
int tc_guard_no_hooks(tc_guard_set *gs, int src);
/* FROZEN on tensor (src's value at compile time): recompile when it is
 * another object or was written (in place, .data = ...) since. */
int tc_guard_frozen(tc_guard_set *gs, int src, PyObject *tensor);

/* Read a tensor's metadata (used by the tracer and by TENSOR_MATCH).
 * Returns 0, 1 if tcjit does not compile for the tensor (a subclass, a
 * tensor of another kind: tensor_keys.h; too many dims, unknown dtype,
 * unsupported device: tc_tensor_unsupported_reason says which), or -1
 * with an exception. */
int tc_tensor_read_meta(PyObject *t, tc_tensor_meta *m, tc_dtype *dt);

/* Whether t's type is one tcjit compiles for: torch.Tensor or
 * nn.Parameter exactly (a subclass's __torch_function__ /
 * __torch_dispatch__ decide what ops do). */
int tc_tensor_type_plain(PyObject *t);

/* Why tcjit does not compile for tensor t (its type, kind, dtype, device
 * or rank), for a graph-break reason.  A new str, or NULL with an
 * exception. */
PyObject *tc_tensor_unsupported_reason(PyObject *t);

/* Fetch every source of gs into vals (new references; NULL where a source is
 * missing, e.g. an unbound global).  Returns 0, -1 on exception. */
int tc_guards_fetch(const tc_guard_set *gs, const tc_frame_view *fv,
                    PyObject **vals);
void tc_guards_release(const tc_guard_set *gs, PyObject **vals);

/* Intern gs's sources into table (the code's shared sources: a
 * tc_guard_set with no guards) and make gs's evaluation plan.  Called
 * once, when the entry joins the cache.  0, or -1 with an exception. */
int tc_guards_share(tc_guard_set *table, tc_guard_set *gs);

/* The cache lookup's check of one entry: walk gs's source tree, fetching
 * each source (from `fetched` where an entry tried before left it) and
 * running its guards as soon as it is fetched; stop at the first failure.
 * 1 pass (vals holds every source's value, new references), 0 fail
 * (*failed is the guard; vals holds the sources fetched so far and NULL
 * after them), -1 exception (vals released).  fetched may be NULL. */
int tc_guards_eval(const tc_guard_set *gs, const tc_frame_view *fv,
                   PyObject **vals, tc_fetched *fetched, int *failed);

/* After a failed tc_guards_eval: move gs's fetched values into fetched
 * (sized for the shared table) for the next entry; vals is left empty. */
void tc_guards_stash(const tc_guard_set *gs, PyObject **vals,
                     tc_fetched *fetched);

/* 0, or -1 with an exception. */
int tc_fetched_init(tc_fetched *f, int n);
void tc_fetched_release(tc_fetched *f);

/* Dynamo-style reason for a failing guard, e.g.
 * "tensor 'x' size mismatch at index 0. expected 4, actual 8". */
PyObject *tc_guard_fail_reason(const tc_guard_set *gs, int guard,
                               PyObject *const *vals);

/* Dynamic shapes: 1 when the failing guard is a tensor's that differs
 * only in sizes or strides (same type, dispatch keys, dtype, device,
 * requires_grad and rank), what automatic dynamic shapes react to; then
 * *tensor (borrowed) is the tensor and *dim its first size that changed
 * (-1: only strides).  0 otherwise (also for errors, cleared: this only
 * decides how to recompile). */
int tc_guard_size_failure(const tc_guard_set *gs, int guard,
                          PyObject *const *vals, PyObject **tensor, int *dim);

/* One line per guard for TCJIT_LOGS=guards and explain(). */
PyObject *tc_guards_format(const tc_guard_set *gs);

/* Module-level torch handles, set once at init. */
int tc_guards_init(void);
int tc_grad_enabled(void); /* -1 on exception */
PyObject *tc_default_dtype(void); /* borrowed; NULL on exception */
int tc_autocast_enabled(void);     /* 1, 0, -1 on exception */
int tc_dispatch_modes_active(void); /* 1, 0, -1 on exception */
int tc_forward_ad_active(void);     /* a dual_level: 1, 0, -1 */
extern PyObject *tc_torch_module;
/* torch.dtype object <-> tc_dtype; borrowed references.  -1 if unknown. */
int tc_dtype_from_torch(PyObject *dtype_obj);
PyObject *tc_dtype_to_torch(tc_dtype dt);
extern PyObject *tc_tensor_type;

#endif
