/* extern.h - graph nodes computed by torch itself (Inductor's "extern
 * kernels"): matrix products, attention, convolution, embedding, cat/stack.
 *
 * Writing a GEMM or an attention kernel that beats torch's (oneDNN, cuBLAS,
 * flash attention) is not this project's job; fusing the pointwise and
 * reduction work around them is.  An extern node is therefore a graph node
 * like any other for the tracer, the optimizer and the scheduler: its output
 * is a buffer the runtime fills by calling the torch function, its operands
 * are buffers (or views of buffers) the kernels before it have stored.  The
 * builder computes the output's dtype and shape with torch's rules and gives
 * it the layout eager returns (contiguous for most ops here on the CPU;
 * group_norm keeps a channels-last input's format there; a convolution's
 * format is the tracer's, tc_graph_extern_relayout); the
 * runtime checks the real result and copies it into that layout when torch
 * chose another one (e.g. a different attention backend).
 *
 * Attributes live in tc_node.xattr / xfattr:
 *   sdpa            xattr[0] is_causal, [1] scale given (xfattr), [2] mask
 *                   given (operand 3), [3] the result's memory order is
 *                   [B, L, H, E] (what CUDA's flash / efficient kernels
 *                   return; the tracer sets it for CUDA graphs)
 *   conv1d, conv2d  xattr[0..1] stride, [2..3] padding, [4..5] dilation,
 *                   [6] groups (conv1d uses the first of each pair)
 *   cat, stack      xattr[0] dim
 *   cross_entropy,  xattr[0] reduction (0 none, 1 mean, 2 sum), [1]
 *   nll_loss        ignore_index; xfattr label_smoothing (cross_entropy);
 *                   operand 2 the class weights when given
 *   group_norm      xattr[0] num_groups; xfattr eps; operands 1, 2 weight
 *                   and bias when given (xattr[1], [2] say which)
 *   index           advanced indexing, torch's aten::index: operand 0 the
 *                   tensor (basic indexing already applied as views),
 *                   operands 1.. int64 / int32 index tensors for the dims
 *                   set in the bitmask xattr[0], in dim order
 *   extern          any other torch op (the registry's default entry):
 *                   xattr[0] the call's index in the runtime's call table
 *                   (src/runtime/extern_table.h), xattr[1] the number of
 *                   items when the call returns a tuple or list (the node
 *                   then holds that sequence and only extern_item nodes
 *                   read it), else 0
 *   extern_item     operand 0 a tuple-returning extern, xattr[0] the item
 *   write_box       xattr[0] the offset of the box operand 1 is copied
 *                   into, in operand 0's elements (reinplace.h)
 */
#ifndef TCJIT_EXTERN_H
#define TCJIT_EXTERN_H

#include "graph.h"
#include "ops.h"

/* The memory order of sdpa's result, as the kernel torch picks writes it
 * (python/tcjit/_sdpa.py says which kernel writes which; the values are
 * shared with it). */
enum {
    TC_SDPA_CONTIG = 0,       /* contiguous [B, H, L, Ev] */
    TC_SDPA_HEADS_INNER = 1,  /* [B, L, H, Ev] memory (CUDA efficient) */
    TC_SDPA_LIKE_Q = 2,       /* empty_like(q) (the CPU flash kernel) */
    TC_SDPA_PAD8 = 3,         /* contiguous [B, H, L, P], P = Ev rounded up
                                 to 8, sliced to Ev (CUDA flash) */
    TC_SDPA_MATH = 4,         /* torch's math kernel: the tracer records
                                 its ops (_sdpa.math_attention) instead of
                                 a node; contiguous if it cannot */
};

enum {
    TC_XA_SDPA_CAUSAL = 0,
    TC_XA_SDPA_HAS_SCALE = 1,
    TC_XA_SDPA_HAS_MASK = 2,
    TC_XA_SDPA_LAYOUT = 3,       /* the layout eager's result has: TC_SDPA_* */
    TC_XA_CONV_STRIDE = 0,
    TC_XA_CONV_PADDING = 2,
    TC_XA_CONV_DILATION = 4,
    TC_XA_CONV_GROUPS = 6,
    TC_XA_CAT_DIM = 0,
    TC_XA_LOSS_REDUCTION = 0,
    TC_XA_LOSS_IGNORE_INDEX = 1,
    TC_XA_EMB_PADDING_IDX = 0,   /* -1: none; only the derivative reads */
    TC_XA_EMB_SCALE_GRAD = 1,    /* these two (ops.c "embedding") */
    TC_XA_GN_GROUPS = 0,
    TC_XA_GN_HAS_WEIGHT = 1,
    TC_XA_GN_HAS_BIAS = 2,
    TC_XA_INDEX_DIMS = 0,
    TC_XA_GENERIC_CALL = 0,
    TC_XA_GENERIC_ITEMS = 1,
    TC_XA_GENERIC_DROPPED = 2,  /* built by a traced instruction that was
                                   then given up: no effects (DCE drops it) */
    TC_XA_GENERIC_PURE = 3,     /* a factory that cannot fail at run time
                                   (torch.empty, torch.tensor([])): no
                                   effects, so DCE drops it when unused;
                                   still never merged (each call is a
                                   tensor of its own) */
    TC_XA_ITEM = 0,
    TC_XA_BOX_OFFSET = 0
};

/* Append extern op `op` ("mm", "bmm", "matmul", "addmm", "baddbmm",
 * "linear", "sdpa", "embedding", "conv1d", "conv2d", "cat", "stack",
 * "cross_entropy", "nll_loss", "group_norm", "index") over
 * tensor nodes in[0..nin-1].  xattr may be NULL (all zero).  Returns the
 * node id, or -1 with a message naming what torch would reject or what
 * tcjit does not handle (the tracer turns that into a graph break, so the
 * real call then raises torch's own error). */
int tc_graph_extern(tc_graph *g, const char *op, int nin, const int *in,
                    const int64_t *xattr, double xfattr, char *err,
                    size_t errlen);

int tc_node_is_extern(const tc_graph *g, int id);

/* The extern node just built (the graph's last; nothing reads it yet) is
 * laid out as layout (same sizes): where the layout eager gives depends
 * on what torch's shape rule cannot see here (the backend a convolution
 * takes), the tracer asks torch and sets it.  0, or -1 if node is not
 * such a node. */
int tc_graph_extern_relayout(tc_graph *g, int node, const tc_layout *layout);

/* The registry's default entry, "extern": a node whose value is the torch
 * call `call` (the runtime's call table) over tensor nodes
 * in[0..nin-1].  The caller gives the result's dtype and layout (from the
 * call's meta run).  items > 0: the call returns a sequence of that many
 * tensors; dt/layout are then item 0's, and tc_graph_extern_item reads
 * the items.  Node id, or -1 with a message. */
int tc_graph_extern_generic(tc_graph *g, int call, int nin, const int *in,
                            int items, tc_dtype dt, const tc_layout *layout,
                            char *err, size_t errlen);
int tc_graph_extern_item(tc_graph *g, int x, int item, tc_dtype dt,
                         const tc_layout *layout, char *err, size_t errlen);

/* Reduction node id becomes the generic extern `call` over its operand
 * (a torch call computing the same value, dtype and layout; the caller
 * interned it): same id, inputs and users, so no pass rebuilds the graph.
 * The call cannot fail at run time and has no effects (PURE).  0, or -1
 * with a message if id is not a one-operand reduction. */
int tc_graph_reduction_as_extern(tc_graph *g, int id, int call, char *err,
                                 size_t errlen);

/* A generic extern: it may consume the random stream (torch.rand_like,
 * dropout) or raise at run time on values (an index out of range), so it
 * is never merged with an equal node, never dropped when unused, and runs
 * in program order with the other generic externs.  Not one marked
 * TC_XA_GENERIC_PURE or _DROPPED. */
int tc_node_has_effects(const tc_graph *g, int id);

/* Nodes from id `from` on were built by an instruction (or an inlining
 * attempt) the tracer gave up: Python runs that code instead, so their
 * generic externs must not run too.  They lose their effects; nothing
 * reads them, so DCE removes them. */
void tc_graph_drop_effects(tc_graph *g, int from);

/* Shape and dtype rules, named by the ops' registry entries (ops.h
 * tc_extern_spec): 0, or -1 with a message. */
int tc_xshape_mm(tc_extern_ctx *x, int variant);
int tc_xshape_bmm(tc_extern_ctx *x, int variant);
int tc_xshape_matmul(tc_extern_ctx *x, int variant);
int tc_xshape_add_product(tc_extern_ctx *x, int batched);
int tc_xshape_linear(tc_extern_ctx *x, int variant);
int tc_xshape_sdpa(tc_extern_ctx *x, int variant);
int tc_xshape_embedding(tc_extern_ctx *x, int variant);
int tc_xshape_conv(tc_extern_ctx *x, int nsp);
int tc_xshape_cat(tc_extern_ctx *x, int stack);
int tc_xshape_loss(tc_extern_ctx *x, int variant);
int tc_xshape_group_norm(tc_extern_ctx *x, int variant);
int tc_xshape_index(tc_extern_ctx *x, int variant);

/* Rewrites linear(x, w, b) into linear(x, w) + b where the add can fuse
 * into the kernels of the product's users (see extern.c).  Node ids after
 * the first rewritten node change; g->outputs is updated.  Returns 0, or
 * -1 with a message in err. */
int tc_graph_unfuse_bias(tc_graph *g, char *err, size_t errlen);

#endif
