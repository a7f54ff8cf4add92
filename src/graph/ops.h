/* ops.h - the op registry: one table entry per op.
 *
 * An entry is the one definition of an op: arity, kind, how torch promotes
 * its dtypes, how to lower one element of it to kernel IR (kir.h), how eager
 * PyTorch computes it (tcjit.Graph's replay), its docs line, its Python
 * spellings with their signatures and call kinds, and for extern ops the
 * shape rule and the torch function the runtime calls.  Everything else is
 * derived from it: the tracer's binding table (src/tracer/bindings.c binds
 * the spellings at init), its nn.Module table (src/tracer/inline.c), the
 * extern dispatch (extern.c, src/jit/extern_call.c) and docs/ops.md
 * (python/tcjit/tools/gen_ops_doc.py, `make docs-ops`).  Adding a pointwise
 * op is one entry in ops.c plus its test.
 *
 * Names the tracer understands that build no op of their own (mean, softmax,
 * transpose, zeros, size, ...) are rows of the registry's second table,
 * tc_decomps: the graph builders (graph.h) decompose them into registry ops.
 */
#ifndef TCJIT_OPS_H
#define TCJIT_OPS_H

#include "graph.h"
#include "kir.h"

typedef enum {
    TC_OPK_POINTWISE,
    TC_OPK_VIEW,      /* layout-only: no lowering; see tc_node view fields */
    TC_OPK_REDUCTION, /* one accumulator over tc_node.red_mask dims */
    TC_OPK_EXTERN,    /* computed by torch itself (matmul, attention, conv:
                         extern.h); nin is the most operands it takes */
} tc_op_kind;

typedef enum {
    TC_PROMOTE_DEFAULT,      /* result_type(inputs) */
    TC_PROMOTE_INT_TO_FLOAT, /* result_type, ints/bool -> float32 (sin, div) */
    TC_PROMOTE_BOOL_OUT,     /* compute in result_type, produce bool (lt) */
    TC_PROMOTE_LOGICAL,      /* inputs as bool, produce bool (logical_and) */
    TC_PROMOTE_WHERE,        /* input 0 is the bool condition, promote 1..2 */
    TC_PROMOTE_CAST,         /* node's attr_dtype */
    TC_PROMOTE_POW_INT,      /* result_type(x, <Python int>): bool -> int64
                                (square is pow(x, 2)) */
    TC_PROMOTE_FIRST,        /* input 0's dtype; the other operands are
                                parameters converted to it (softplus's
                                beta, masked_fill's value; a mask: bool) */
} tc_promote_rule;

/* How eager converts the op's Python-number operands: c10's Scalar::to
 * raises "value cannot be converted to type T without overflow" for a
 * value out of T's range (tc_op_infer_dtypes refuses it). */
typedef enum {
    TC_SCALARS_WRAPPED,   /* as 0-d tensors of their own: unchecked (add) */
    TC_SCALARS_TO_OUT,    /* to the result dtype (fill value, masked_fill's
                             value, clamp's limits) */
    TC_SCALARS_TO_OPMATH, /* to its opmath type, float32 for float16 /
                             bfloat16 (softplus, leaky_relu, elu) */
} tc_scalar_conv;

/* How the tracer turns a call's Python arguments into graph nodes
 * (src/tracer/torchcalls.c dispatches on it). */
typedef enum {
    TC_CALL_OP,        /* every param is an operand of the op, in order */
    TC_CALL_WHERE_METHOD, /* self.where(condition, other) */
    TC_CALL_ADD_SUB,   /* input, other, alpha: input op alpha*other */
    TC_CALL_CLAMP,     /* input, min, max: clamp / clamp_min / clamp_max */
    TC_CALL_CAST,      /* to(dtype): target from the dtype param */
    TC_CALL_CAST_TO,   /* float()/int()/...: target fixed by the spelling's
                          arg (tc_op_spelling) */
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
    TC_CALL_STRIDE,    /* Tensor.stride(dim=None): Python ints */
    TC_CALL_EXTERN,    /* tensor params -> extern op (extern.h); None
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

/* A group of Python spellings that share a call kind and a signature.
 * names: space-separated "torch.add Tensor.add" ("F." is
 * torch.nn.functional, "builtins." Python's builtins).  sig: the
 * signature as torch documents the torch.* form ("input, other, *,
 * alpha=1"); a Tensor.* spelling binds its first parameter as `self`, so
 * the method form is never written out.  arg: for TC_CALL_CAST_TO the
 * target dtypes, one word per name ("float32 float64"). */
typedef struct {
    tc_call_kind call;
    const char *names;
    const char *sig;
    const char *arg;
} tc_op_spelling;

#define TC_OP_MAX_SPELLINGS 4

/* A torch.nn module whose forward is one functional call of the op: the
 * tracer inlines module(x) as path(x, module.attr, ...). */
typedef struct {
    const char *cls;   /* "ReLU": a class of torch.nn.modules */
    const char *path;  /* a spelling of the op: "F.relu" */
    const char *attrs; /* module attributes passed after x, in the
                          signature's order, space-separated */
} tc_op_module;

/* How an extern op (extern.h) is computed by torch.  The shape rule
 * (extern.c) checks the operands as torch would and computes the result's
 * sizes and dtype; the runtime calls callee with the arguments
 * src/jit/extern_call.c builds for the op. */
typedef struct tc_extern_ctx tc_extern_ctx;

typedef struct {
    int min_in;         /* fewest tensor operands (nin: the most) */
    int (*shape)(tc_extern_ctx *x, int variant);
    int variant;        /* shape's second argument (conv: spatial dims) */
    const char *callee; /* "torch.mm", "F.group_norm", "Tensor.__getitem__",
                           "torch._C._nn.linear" */
} tc_extern_spec;

/* Lower one element: given KIR values of the inputs already cast to the
 * op's compute dtype, append instructions to kb and return the value id of
 * the result (in the node's dtype), or -1. */
typedef int (*tc_lower_fn)(tc_kbuilder *kb, const int *args, tc_dtype compute,
                           tc_dtype out);

typedef struct {
    const char *name;         /* registry name, also torch's function name */
    int nin;                  /* number of tensor/scalar operands */
    tc_op_kind kind;
    tc_promote_rule promote;
    unsigned dtype_mask;      /* compute dtypes accepted (1u << tc_dtype) */
    tc_lower_fn lower;
    const char *doc;          /* one line for docs/ops.md */
    int index_arg;            /* lower gets one more operand, args[nin]:
                                 the element's row-major linear index in
                                 the node's shape (TC_I64; arange) */
    /* How eager PyTorch computes the op (tcjit.Graph replays a graph with
     * it for backend="eager" and custom backends): a Python expression
     * over the operands x0, x1, ... (tensors or Python numbers) and the
     * node n (n.dtype, n.shape, n.stride, n.to_dtype, n.device, n.dims,
     * n.keepdim), with torch and F (torch.nn.functional) in scope.  NULL:
     * torch.<name>(x0, ...) for pointwise ops, torch.<name>(x0, n.dims,
     * n.keepdim) for reductions.  Views replay as torch.as_strided of their
     * base (graph.h), extern ops as the call the runtime makes
     * (src/jit/extern_call.c). */
    const char *eager;
    /* Python spellings (unused slots: names NULL) and the nn.Module class
     * that is one call of the op (cls NULL: none). */
    tc_op_spelling py[TC_OP_MAX_SPELLINGS];
    tc_op_module nn;
    tc_extern_spec xspec;     /* TC_OPK_EXTERN only */
    /* 1: the op raises on some operand values, which only the call sees
     * (an index out of range: eager's IndexError).  A node of it runs on
     * every call even when its result is dead (tc_node_must_run): DCE
     * would drop the check eager makes. */
    int checks_values;
    tc_scalar_conv scalars;
    /* The derivative (docs/training.md): one Python expression per
     * operand, separated by ";", for the gradient flowing into that
     * operand, over the operands x0, x1, ..., the result y, the incoming
     * gradient g and the node n (as in eager), with torch, F, math and the
     * helpers of python/tcjit/_autograd.py (keep, vjp) in scope.  The
     * result is summed to the operand's shape and cast to its dtype by
     * the caller.  An empty expression: no gradient flows there (a mask,
     * a fill value); "vjp": torch's own backward of the op (externs).
     * NULL: no rule (a graph needing one runs its backward through
     * torch's autograd, with the reason in the logs).  Views need none:
     * their affine index map is their derivative. */
    const char *grad;
    /* Issue 20's next field belongs here, beside the lowering: the
     * symbolic shape rule. */
} tc_op_def;

/* A name the tracer understands that is not a registry op: the graph
 * builders (graph.h) decompose it into registry ops, or it only reads the
 * traced layout (size, dim).  doc says how, for docs/ops.md. */
typedef struct {
    const char *name;
    const char *doc;
    tc_op_spelling py[TC_OP_MAX_SPELLINGS];
    tc_op_module nn;
} tc_decomp_def;

extern const tc_decomp_def tc_decomps[];
extern const int tc_ndecomps;

extern const tc_op_def tc_ops[];
extern const int tc_nops;

int tc_op_lookup(const char *name); /* registry index or -1 */

/* Compute dtype (what operands are cast to before lowering) and output
 * dtype of op applied to nodes in[0..nin-1]; checks what torch rejects
 * (dtype_mask, bool negation, ...).  Returns 0, or -1 with a message. */
int tc_op_infer_dtypes(const tc_graph *g, int op, const int *in,
                       tc_dtype attr_dtype, tc_dtype *compute, tc_dtype *out,
                       char *err, size_t errlen);

/* Dtype operand k is cast to before lowering: compute, except the
 * condition of where and the mask of masked_fill (bool), logical ops
 * (bool) and casts (unchanged). */
tc_dtype tc_op_operand_dtype(int op, int k, tc_dtype compute,
                             tc_dtype operand_dtype);

#endif
