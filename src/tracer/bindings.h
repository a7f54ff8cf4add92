/* bindings.h - which Python callables the tracer understands.
 *
 * The binding table is derived at init from the op registry's spellings
 * (src/graph/ops.h tc_op_spelling: torch functions, Tensor methods,
 * torch.nn.functional functions and a few builtins, each with its call kind
 * and the signature torch documents, "input, other, *, alpha=1").  It is
 * resolved against the live torch module once; the tracer then finds a
 * callable's binding by identity.
 */
#ifndef TCJIT_BINDINGS_H
#define TCJIT_BINDINGS_H

#include <Python.h>

#include "../graph/ops.h"

#define TC_MAX_PARAMS 10

/* One spelling, derived from a registry entry's tc_op_spelling. */
typedef struct {
    const char *path;            /* "torch.sin", "Tensor.sin", "F.relu" */
    const char *op;              /* registry op name, or dtype for CAST_TO */
    tc_call_kind call;
    const char *sig;             /* signature; Tensor.*: "self, ..." */
} tc_binding_def;

typedef struct {
    const tc_binding_def *def;
    int nparams;
    int nkwonly_from;            /* index of the first keyword-only param */
    int varargs;                 /* "*size": index of the param that takes
                                    the remaining positionals, or -1 */
    const char *names[TC_MAX_PARAMS];
    PyObject *defaults[TC_MAX_PARAMS]; /* owned; NULL = required */
    unsigned tensor_only;        /* bit i: param i is "name: Tensor" (eager
                                    raises TypeError for a Python number) */
    unsigned bool_only;          /* bit i: "name: bool", an argument given
                                    must be a Python bool (keepdim) */
    unsigned not_none;           /* bit i: "name: int" / "name: ints", an
                                    argument given must not be None (the
                                    default may be: prod's dim) */
} tc_binding;

int tc_bindings_init(void);

/* [(python spelling, registry op or decomposed name), ...] for
 * docs/ops.md; torch.nn classes as ("nn.ReLU", op). */
PyObject *tc_bindings_table(void);

/* [(decomposed name, how), ...] (ops.h tc_decomps) for docs/ops.md. */
PyObject *tc_decomposed_table(void);

/* The binding for a callable object, or NULL. */
const tc_binding *tc_binding_find(PyObject *callable);

/* The binding of a table entry by its spelling ("F.linear"), or NULL. */
const tc_binding *tc_binding_by_path(const char *path);

/* A torch.nn module whose forward is one functional call (ops.h
 * tc_op_module): path(x, module.attrs[1], ...); attrs[0] is NULL (x). */
typedef struct {
    const char *cls;
    const char *path;
    int n;
    const char *attrs[TC_MAX_PARAMS];
} tc_nn_binding;

/* The nn binding of a torch.nn class name ("ReLU"), or NULL. */
const tc_nn_binding *tc_binding_nn(const char *cls);

/* Is this a module whose attributes may be read at trace time without a
 * guard (torch, torch.nn.functional, math)? */
int tc_is_trusted_module(PyObject *obj);

#endif
