/* bindings.h - which Python callables the tracer understands.
 *
 * One table maps torch functions, Tensor methods, torch.nn.functional
 * functions and a few builtins to a registry op and a signature, written the
 * way torch documents it ("input, other, *, alpha=1").  The table is
 * resolved against the live torch module once at init; the tracer then finds
 * a callable's binding by identity.
 */
#ifndef TCJIT_BINDINGS_H
#define TCJIT_BINDINGS_H

#include <Python.h>

#define TC_MAX_PARAMS 10

/* How the parsed arguments become graph nodes. */
typedef enum {
    TC_CALL_OP,        /* every param is an operand of `op`, in order */
    TC_CALL_WHERE_METHOD, /* self.where(condition, other) */
    TC_CALL_ADD_SUB,   /* input, other, alpha: input op alpha*other */
    TC_CALL_CLAMP,     /* input, min, max: clamp / clamp_min / clamp_max */
    TC_CALL_CAST,      /* to(dtype): target from the dtype param */
    TC_CALL_CAST_TO,   /* float()/int()/...: target fixed by `op` name */
    TC_CALL_NO_INPLACE,/* like OP (operands: every param but the last), but
                          the last param `inplace` must be False */
    TC_CALL_DIV,       /* input, other, rounding_mode=None */
    TC_CALL_GELU,      /* input, *, approximate: 'none' or 'tanh' */
    TC_CALL_HARDTANH,  /* input, min_val, max_val, inplace (relu6: input,
                          inplace): clamp in input's dtype */
    TC_CALL_TRIL,      /* input, diagonal; op "tril" / "triu" */
    TC_CALL_NEW,       /* creation ops; op: zeros ones empty full arange
                          (torch.*), *_like, new_* (Tensor methods) */
    TC_CALL_NORMALIZE, /* F.normalize(input, p, dim, eps) */
    TC_CALL_TYPE_AS,   /* self.type_as(other) */
    TC_CALL_REDUCE,    /* input, dim, keepdim, dtype/correction/p... */
    TC_CALL_SOFTMAX,   /* input, dim, dtype; op "softmax"/"log_softmax" */
    TC_CALL_LAYER_NORM,/* input, normalized_shape, weight, bias, eps */
    TC_CALL_RMS_NORM,  /* input, normalized_shape, weight, eps */
    TC_CALL_VIEW,      /* shape ops: op names the builder; "self, *dims"
                          takes the dims as varargs or one sequence */
    TC_CALL_SIZE,      /* Tensor.size(dim=None): Python ints */
    TC_CALL_DIM,       /* Tensor.dim() */
    TC_CALL_NUMEL,     /* Tensor.numel() */
    TC_CALL_EXTERN,    /* tensor params -> extern op `op` (extern.h); None
                          optional tensors are dropped, number params
                          (beta, alpha) must be 1 */
    TC_CALL_SDPA,      /* F.scaled_dot_product_attention */
    TC_CALL_EMBEDDING, /* F.embedding(input, weight, ...) */
    TC_CALL_CONV,      /* conv1d / conv2d: op names the extern */
    TC_CALL_CAT,       /* cat / stack (op): tensors, dim */
    TC_CALL_SPLIT,     /* split / chunk / unbind (op): a tuple of views */
    TC_CALL_DROPOUT,   /* F.dropout: identity when not training or p == 0 */
    TC_CALL_LOSS,      /* cross_entropy / nll_loss (op) */
    TC_CALL_GROUP_NORM,/* F.group_norm */
    TC_CALL_MAX_MIN,   /* torch.max / min (op): of all, along a dim
                          (values, indices), or elementwise of two */
} tc_call_kind;

typedef struct {
    const char *path;            /* "torch.sin", "Tensor.sin", "F.relu" */
    const char *op;              /* registry op name, or dtype for CAST_TO */
    tc_call_kind call;
    const char *sig;             /* documented signature */
} tc_binding_def;

typedef struct {
    const tc_binding_def *def;
    int nparams;
    int nkwonly_from;            /* index of the first keyword-only param */
    int varargs;                 /* "*size": index of the param that takes
                                    the remaining positionals, or -1 */
    const char *names[TC_MAX_PARAMS];
    PyObject *defaults[TC_MAX_PARAMS]; /* owned; NULL = required */
} tc_binding;

int tc_bindings_init(void);

/* [(python spelling, registry op or None), ...] for docs/ops.md. */
PyObject *tc_bindings_table(void);

/* The binding for a callable object, or NULL. */
const tc_binding *tc_binding_find(PyObject *callable);

/* The binding of a table entry by its spelling ("F.linear"), or NULL. */
const tc_binding *tc_binding_by_path(const char *path);

/* Is this a module whose attributes may be read at trace time without a
 * guard (torch, torch.nn.functional, math)? */
int tc_is_trusted_module(PyObject *obj);

#endif
