/* vars.h - symbolic values of the tracer (Dynamo's VariableTrackers).
 *
 * Every value on the symbolic stack or in a symbolic local is a tc_var.  A
 * var knows its kind, its graph node (tensors), the Python object it stands
 * for (constants and known objects) and, when it was read from the frame,
 * its guard source.  Vars live in an arena owned by one trace and are
 * immutable once built, so the stack and locals can share them freely.
 */
#ifndef TCJIT_VARS_H
#define TCJIT_VARS_H

#include <Python.h>

typedef enum {
    TC_VAR_NULL,     /* the NULL marker of CPython's call protocol */
    TC_VAR_TENSOR,   /* a graph node */
    TC_VAR_CONST,    /* int, float, bool, None, str, torch.dtype, ... */
    TC_VAR_TUPLE,
    TC_VAR_LIST,
    TC_VAR_OBJECT,   /* a module, function or method descriptor we know */
    TC_VAR_LAZY,     /* a Python scalar read from the frame, not yet
                        guarded: it becomes CONST (with an EQUALS guard)
                        only if the traced code depends on its value */
    TC_VAR_METHOD,   /* getattr(items[0], obj) not traced: a bound method */
    TC_VAR_DEFERRED, /* a value built only when the segment exits: an
                        f-string of a tensor, a lambda, an iterator of an
                        unrolled loop, a grad-mode context manager;
                        node = template kind */
    TC_VAR_NN_MODULE,/* a torch.nn.Module read from the frame: guarded by
                        type (not identity, so every instance of a class
                        shares the compiled code), its attributes are
                        sources of their own */
    TC_VAR_DICT,     /* a dict with constant keys: obj = tuple of keys,
                        items = values */
    TC_VAR_CELL,     /* the cell of a variable of the frame (not of an
                        inlined callee), in a closure the traced code
                        builds (LOAD_CLOSURE): node = the slot */
    TC_VAR_UNKNOWN   /* anything else: using it is unsupported */
} tc_var_kind;

typedef struct tc_var {
    tc_var_kind kind;
    int source;              /* guard source id, -1 if computed */
    int node;                /* TENSOR: graph node id */
    PyObject *obj;           /* CONST/OBJECT/UNKNOWN: owned reference;
                                TENSOR read from the frame: the tensor
                                seen while tracing (else NULL) */
    int index;               /* DEFERRED iterator: items yielded so far;
                                grad-mode context: the mode it sets */
    int nitems;              /* TUPLE/LIST/DICT, DEFERRED arguments */
    struct tc_var **items;
} tc_var;

typedef struct {
    tc_var **vars;
    int n, cap;
} tc_var_arena;

tc_var *tc_var_new(tc_var_arena *a, tc_var_kind kind, int source);
tc_var *tc_var_const(tc_var_arena *a, PyObject *value, int source);
tc_var *tc_var_seq(tc_var_arena *a, tc_var_kind kind, int n,
                   tc_var *const *items);
void tc_var_arena_clear(tc_var_arena *a);

/* "a tensor", "an int", "<module 'math'>" for unsupported-reasons. */
const char *tc_var_kind_name(const tc_var *v);

#endif
