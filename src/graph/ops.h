/* ops.h - the op registry: one table entry per op.
 *
 * An entry says everything the pipeline needs to know about an op: arity,
 * kind, how torch promotes its dtypes, and how to lower one element of it to
 * kernel IR (kir.h).  Adding an op is one entry in ops.c; docs/ops.md is
 * generated from the table (tcjit._C.op_table()).
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
} tc_op_def;

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
