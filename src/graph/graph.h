/* graph.h - the tensor graph IR: nodes with dtype/shape/stride meta.
 *
 * A graph is built by the tracer one node at a time.  Every node knows its
 * dtype and layout (sizes and strides, in elements) as eager PyTorch would
 * produce them: the op registry (ops.h) applies torch's type promotion,
 * broadcasting and TensorIterator's output-stride rule when a node is added,
 * so the tracer never runs a real op to learn a shape.
 *
 * Data flows one way: tracer -> graph -> (schedule.h) kernel plan -> jit.
 * This header has no Python dependency.
 */
#ifndef TCJIT_GRAPH_H
#define TCJIT_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#define TC_MAX_DIMS 8
#define TC_MAX_OP_INPUTS 8  /* cat/stack of up to 8; sdpa q, k, v, mask */
#define TC_MAX_XATTR 8

typedef enum {
    TC_BOOL = 0,
    TC_U8,
    TC_I8,
    TC_I16,
    TC_I32,
    TC_I64,
    TC_F32,
    TC_F64,
    TC_F16,  /* torch.float16 (torch.half) */
    TC_BF16, /* torch.bfloat16 */
    TC_NDTYPES, /* the dtypes tcjit's kernels compute; then: */
    /* complex tensors: values of the graph that only generic extern nodes
     * (torch's own ops) make and take, never a kernel (tc_graph_push_op) */
    TC_C32 = TC_NDTYPES, /* torch.complex32 (torch.chalf) */
    TC_C64,              /* torch.complex64 */
    TC_C128,             /* torch.complex128 */
    TC_NALLDTYPES
} tc_dtype;

/* Names as torch spells them ("float32") and as c10::ScalarType does ("Float"). */
const char *tc_dtype_name(tc_dtype dt);
const char *tc_dtype_scalar_type_name(tc_dtype dt);
size_t tc_dtype_size(tc_dtype dt);
int tc_dtype_is_float(tc_dtype dt);
int tc_dtype_is_int(tc_dtype dt); /* integral, bool excluded */
int tc_dtype_is_complex(tc_dtype dt);

/* float16 / bfloat16: storage-only dtypes.  As in ATen and Inductor, values
 * of these dtypes are computed in float32 (at::opmath_type) and rounded to
 * the storage dtype when stored or explicitly cast. */
int tc_dtype_is_reduced_float(tc_dtype dt);
tc_dtype tc_dtype_opmath(tc_dtype dt); /* float32 for reduced floats */

/* Round-to-nearest-even conversions between float32 and the bits of a
 * reduced float, as eager PyTorch does them on the CPU (NaN: float16 keeps
 * the sign and the top payload bits, quieted, like F16C's vcvtps2ph;
 * bfloat16 gives 0xffff, like ATen's vectorized conversion). */
uint16_t tc_f32_to_f16_bits(float f);
float tc_f16_bits_to_f32(uint16_t h);
uint16_t tc_f32_to_bf16_bits(float f);
float tc_bf16_bits_to_f32(uint16_t h);
/* v rounded to dt's precision, as eager converts a Python number to a
 * tensor of dt (through float32 for the reduced floats, like c10).  Floats
 * only; v itself for float64. */
double tc_round_to_dtype(double v, tc_dtype dt);

typedef struct {
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    int64_t strides[TC_MAX_DIMS]; /* in elements */
} tc_layout;

int64_t tc_layout_numel(const tc_layout *l);
void tc_layout_contiguous(tc_layout *l); /* fill strides from sizes */
int tc_layout_same_sizes(const tc_layout *a, const tc_layout *b);
/* strides of a's ndim dims equal (sizes not compared) */
int tc_layout_same_strides(const tc_layout *a, const tc_layout *b);
/* TensorImpl's is_contiguous(), and is_contiguous(channels_last) for 4-d
 * / is_contiguous(channels_last_3d) for 5-d layouts (0 for other ranks). */
int tc_layout_is_contiguous(const tc_layout *l);
int tc_layout_is_channels_last_contiguous(const tc_layout *l);
/* "[2, 3]" as torch's messages print a shape */
void tc_shape_text(char *buf, size_t n, const int64_t *sizes, int ndim);

typedef enum {
    TC_NODE_INPUT,  /* a tensor graph input (placeholder) */
    TC_NODE_SCALAR, /* a Python number baked into the graph */
    TC_NODE_OP      /* an op from the registry */
} tc_node_kind;

typedef struct {
    tc_node_kind kind;
    int op;                      /* registry index (TC_NODE_OP) */
    int nin;
    int in[TC_MAX_OP_INPUTS];    /* node ids */
    tc_dtype dtype;
    tc_layout layout;
    int wrapped;                 /* Python scalar: lowest promotion priority */
    union {
        double f;
        int64_t i;
    } scalar;                    /* TC_NODE_SCALAR value (i for ints/bools) */
    int input_index;             /* TC_NODE_INPUT: position in graph inputs */
    tc_dtype attr_dtype;         /* TC_NODE_OP "to": target dtype */
    /* ---- additions: views and reductions (defaults 0 / -1, so nodes
     * built by the older builders are unaffected) ---- */
    /* Views (registry kind TC_OPK_VIEW): layout is the view's sizes and
     * strides exactly as eager computes them; storage position of element
     * i is offset + sum(i[d] * strides[d]) in the storage of view_base (the
     * first non-view node of the chain: an input, whose data pointer is the
     * origin, or a computed node, whose eager layout is the origin). */
    int64_t offset;              /* elements, relative to view_base */
    int view_base;               /* node id, -1 for non-views */
    /* Logical index map view -> in[0] when it is affine (everything but a
     * reshape that merges dims): src[d] = voff[d] + sum over view dims e
     * with vsrc[e] == d of vcoef[e] * i[e]. */
    int vmap_affine;
    int vsrc[TC_MAX_DIMS];       /* -1: view dim e does not index in[0] */
    int64_t vcoef[TC_MAX_DIMS];
    int64_t voff[TC_MAX_DIMS];
    int multi_view;              /* a piece of split / chunk / unbind:
                                    eager forbids writing it in place */
    int overwritten_at;          /* > 0: a computed value whose storage
                                    an in-place op wrote later, the op's
                                    first node: the copies that nodes
                                    before it saved (of it or its views)
                                    are stale in eager, whose backward
                                    raises where it reads one
                                    (_autograd.py) */
    /* Reductions (registry kind TC_OPK_REDUCTION): bit d set = dim d of
     * in[0] is reduced; keepdim as in torch. */
    unsigned red_mask;
    int keepdim;
    int first_index;             /* amax / amin as the values of torch.max
                                    / min(x, dim): the gradient goes to
                                    the first extreme (eager's index), not
                                    spread over ties as amax's */
    /* Extern ops (registry kind TC_OPK_EXTERN, extern.h): integer and
     * float attributes whose meaning the op's entry in extern.c gives. */
    int64_t xattr[TC_MAX_XATTR];
    double xfattr;
    /* Autograd (docs/training.md): the tracer sets it when the node was
     * made with grad mode on from an operand that requires grad (inputs:
     * the tensor's requires_grad).  python/tcjit/_autograd.py refines it
     * (float dtypes only, torch's answer for generic externs).  Equal
     * nodes with different flags stay apart (x * 2 under no_grad is a
     * constant of the backward, x * 2 outside it is not).  The tracer
     * may preset TC_GRAD_STOP on a node it makes (detach()'s alias):
     * the node never requires grad. */
    unsigned char requires_grad;
    /* A view made by detach() (the tracer sets it): the runtime returns it
     * as a view of its base's detach(), so it does not require grad and
     * has no grad_fn, as eager's.  (requires_grad's TC_GRAD_STOP is gone
     * once the tracer has synced the flags: this one stays.) */
    unsigned char detached;
    /* In a graph on a CUDA device: where the value lives (TC_PLACE_*).
     * The tracer marks leaves (a CPU tensor input, a CPU creation op, a
     * copy between devices); other nodes follow their operands (place.c). */
    unsigned char place;
} tc_node;

/* Eager keeps CPU tensors on the CPU beside CUDA ones (an optimizer's step
 * counter, torch.tensor(1.0), torch.rand([]) for layer drop) and lets a
 * 0-d one join a CUDA op as a scalar, so a graph on a CUDA device may hold
 * a host part: nodes computed on the CPU (place.c splits it off). */
enum { TC_PLACE_AUTO = 0, TC_PLACE_HOST = 1, TC_PLACE_DEVICE = 2 };

#define TC_GRAD_STOP 2

typedef struct tc_graph {
    tc_node *nodes;
    int nnodes, cap;
    int ninputs;
    int *outputs;                /* node ids; may repeat, may be inputs */
    int noutputs;
    int cuda;                    /* its tensors are on a CUDA device, where
                                    some result layouts differ (op_layout) */
    int emulate_precision;       /* kernels round every float16 / bfloat16
                                    op result as eager stores it
                                    (config.emulate_precision_casts) */
    int *output_writes;          /* by output: the graph input whose storage
                                    the output's value is written back into
                                    after the run (an in-place op's), or -1;
                                    NULL: none.  The scheduler may store it
                                    there directly (schedule.h) */
} tc_graph;

tc_graph *tc_graph_new(void);
void tc_graph_free(tc_graph *g);

/* Builders return a node id, or -1 with a message in err (the message says
 * what is unsupported and is shown to users as a graph-break reason). */
int tc_graph_input(tc_graph *g, tc_dtype dt, const tc_layout *layout);
int tc_graph_scalar_float(tc_graph *g, double v);
int tc_graph_scalar_int(tc_graph *g, int64_t v);
int tc_graph_scalar_bool(tc_graph *g, int v);

/* Add an op by registry name.  attr_dtype is used by "to" only. */
int tc_graph_op(tc_graph *g, const char *opname, int nin, const int *in,
                tc_dtype attr_dtype, char *err, size_t errlen);

int tc_graph_set_outputs(tc_graph *g, int n, const int *nodes);
/* Output j's value is written back into graph input `input` after the
 * run (output_writes).  0, or -1 when out of memory or out of range. */
int tc_graph_set_output_write(tc_graph *g, int j, int input);

/* Dead-code elimination and common-subexpression elimination.  Node ids
 * change; outputs are remapped.  Outputs keep eager's identity: equal
 * nodes holding the storage of different outputs are not merged (the later
 * becomes a "clone" of the first; graph.c cse_map).  Returns 0 or -1 on
 * allocation failure. */
int tc_graph_optimize(tc_graph *g);

/* 1: node id runs although no output depends on it: an op that checks its
 * operands' values (ops.h tc_op_def.checks_values), such as an index that
 * eager raises IndexError for, or a generic extern (extern.h
 * tc_node_has_effects: it may draw random numbers or raise).  DCE and the
 * scheduler keep it live. */
int tc_node_must_run(const tc_graph *g, int id);

/* Number of op nodes (what users see as "ops" of a graph). */
int tc_graph_op_count(const tc_graph *g);

/* Readable printer (TCJIT_LOGS=graph).  Returns malloc'd text. */
char *tc_graph_format(const tc_graph *g, const char *title);

/* Result type of torch's promotion over nodes (dim tensors > 0-d tensors >
 * wrapped Python scalars), as at::native::result_type computes it. */
tc_dtype tc_promote_nodes(const tc_graph *g, int nin, const int *in);

/* ---- additions (graph stage helpers used by ops.c / schedule.c) ---- */

/* c10::promoteTypes. */
tc_dtype tc_promote_types(tc_dtype a, tc_dtype b);

/* Output layout of a TensorIterator over operands (broadcast shape, fast
 * setup, reorder_dimensions), as eager allocates it.  0-d operands take
 * part as 0-d tensors.  Returns 0, or -1 with torch's broadcast message. */
int tc_iter_layout(int n, const tc_layout *const *ops, tc_layout *out,
                   char *err, size_t errlen);

/* at::detail::computeStride: the strides of old viewed as shape[0..n-1]
 * into st; 0, or -1 if no view has that shape. */
int tc_layout_view_strides(const tc_layout *old, const int64_t *shape, int n,
                           int64_t *st);

/* "%3 = mul(%2, 0.5)" for an op node, "%x0" / literal otherwise.  malloc'd,
 * NULL on allocation failure. */
char *tc_node_format(const tc_graph *g, int id);

/* Python repr() of a float ("0.5", "2.0", "inf", "nan"). */
void tc_format_double(char *buf, size_t n, double v);

/* Builder plumbing shared by the graph-stage files (graph.c, extern.c):
 * a node with defaults (no inputs, not a view), appending a node (its id,
 * or -1 when out of memory), and snprintf into an error buffer. */
void tc_node_init(tc_node *n, tc_node_kind kind, tc_dtype dt);
int tc_graph_push_node(tc_graph *g, const tc_node *n);

/* ---- host and device parts (place.c) ----------------------------------- */

/* A CUDA graph with a host part, as two graphs: the host graph runs first
 * on the CPU, then the device graph, whose inputs are the original graph's
 * inputs or the host graph's results.  The 0-d host values that kernels of
 * the device graph read are copied to the device first, those of a dtype
 * in one copy (eager passes them to its kernels as scalars); a host value
 * an extern reads is passed as it is (torch takes CPU scalars where eager
 * does, and raises where it does). */
typedef struct {
    tc_graph *host, *dev;
    int *host_in;           /* host input k: the graph input it is */
    int *dev_in;            /* device input k when dev_pack[k] < 0: >= 0 a
                               graph input; < 0 host output -1 - dev_in[k] */
    int *dev_pack;          /* device input k is pack p (>= 0), or -1 */
    int *out;               /* graph output j: >= 0 device output; < 0 host
                               output -1 - out[j] */
    /* The 0-d host values kernels read travel in one copy per dtype: pack
     * p is a 1-d device input whose item k (a view in the device graph) is
     * pack_src[p][k], coded as dev_in is. */
    int npacks;
    tc_dtype pack_dtype[TC_NDTYPES];
    int pack_n[TC_NDTYPES];
    int *pack_src[TC_NDTYPES];
} tc_split;

/* 1 when g (on CUDA device `device`) has host nodes: *s filled
 * (tc_split_free); 0 when it has none; -1 with a message in err when a
 * kernel would read a host tensor that is not 0-d (eager raises there: the
 * message is eager's) or a host node reads a device value; -2 when out of
 * memory.  Resolves every node's place (stored in the nodes). */
int tc_graph_split(tc_graph *g, tc_split *s, int device, char *err,
                   size_t errlen);
/* Node id is on the host (the tracer asks for x.device and the like). */
int tc_graph_is_host(tc_graph *g, int id);
/* Every node's place resolved (common-subexpression elimination compares
 * them: equal nodes on different devices stay apart). */
void tc_graph_place_all(tc_graph *g);
void tc_split_free(tc_split *s);
/* tc_graph_push_node of an op node, or -1 with a message: out of memory,
 * or a complex tensor that a node other than a generic extern would make
 * or take (kernels compute real dtypes only). */
int tc_graph_push_op(tc_graph *g, const tc_node *n, char *err, size_t errlen);
void tc_set_err(char *err, size_t errlen, const char *fmt, ...);
/* The end of a pass that rebuilt g into ng (extern.c, freeze.c): g takes
 * ng's nodes and input count, g's outputs are renumbered through map (old
 * node id -> new), and ng keeps g's old nodes for tc_graph_free. */
void tc_graph_take_nodes(tc_graph *g, tc_graph *ng, const int *map);
/* Such a pass's copy of node n into ng, its operands and view base
 * renumbered through map: the new id, or -1 when out of memory. */
int tc_graph_push_mapped(tc_graph *ng, const tc_node *n, const int *map);

/* ---- views (eager layouts, no copies) ------------------------------- *
 * Every builder returns a node id (possibly x itself when torch returns
 * self, e.g. flatten(x, 1, 1)) or -1 with torch's error message.  dims may
 * be negative (wrapped as torch does; a 0-d tensor accepts 0 and -1). */
int tc_graph_permute(tc_graph *g, int x, int n, const int64_t *dims,
                     char *err, size_t errlen);
int tc_graph_transpose(tc_graph *g, int x, int64_t d0, int64_t d1,
                       char *err, size_t errlen);
int tc_graph_t(tc_graph *g, int x, char *err, size_t errlen);
int tc_graph_unsqueeze(tc_graph *g, int x, int64_t dim, char *err,
                       size_t errlen);
/* n < 0: squeeze all size-1 dims; else only those of dims[0..n-1]. */
int tc_graph_squeeze(tc_graph *g, int x, int n, const int64_t *dims,
                     char *err, size_t errlen);
/* sizes may contain -1 (keep). */
int tc_graph_expand(tc_graph *g, int x, int n, const int64_t *sizes,
                    char *err, size_t errlen);
int tc_graph_select(tc_graph *g, int x, int64_t dim, int64_t index,
                    char *err, size_t errlen);
/* start / stop NULL = None; step > 0 (aten::slice). */
int tc_graph_slice(tc_graph *g, int x, int64_t dim, const int64_t *start,
                   const int64_t *stop, int64_t step, char *err,
                   size_t errlen);
int tc_graph_narrow(tc_graph *g, int x, int64_t dim, int64_t start,
                    int64_t length, char *err, size_t errlen);
/* view: error (torch's) when computeStride fails.  reshape: a view when
 * possible, else a contiguous copy ("contiguous" node) viewed.  sizes may
 * hold one -1. */
int tc_graph_view(tc_graph *g, int x, int n, const int64_t *sizes,
                  char *err, size_t errlen);
int tc_graph_reshape(tc_graph *g, int x, int n, const int64_t *sizes,
                     char *err, size_t errlen);
int tc_graph_flatten(tc_graph *g, int x, int64_t start, int64_t end,
                     char *err, size_t errlen);
/* x as another view node of exactly x's layout (eager's x.t() of a 1-d
 * x, a squeeze with nothing to squeeze, x[...]: another tensor object,
 * the same strides, size-1 dims included). */
int tc_graph_alias(tc_graph *g, int x, char *err, size_t errlen);
/* torch.as_strided(x, layout, x.storage_offset() + offset): the alias a
 * generic extern op returns (Tensor.diagonal, unfold, ...; extern.h), laid
 * out as its meta run says.  Same dtype as x. */
int tc_graph_as_strided(tc_graph *g, int x, const tc_layout *layout,
                        int64_t offset, char *err, size_t errlen);
int tc_graph_unflatten(tc_graph *g, int x, int64_t dim, int n,
                       const int64_t *sizes, char *err, size_t errlen);

/* ---- reductions ------------------------------------------------------ */

typedef struct {
    int ndims;                   /* <= 0: all dims (dim=None or dim=[]) */
    int64_t dims[TC_MAX_DIMS];   /* may be negative */
    int keepdim;
    int has_dtype;               /* dtype= given */
    tc_dtype dtype;
    double correction;           /* var / std (torch default 1) */
    double p;                    /* norm: 1 or 2 */
} tc_reduce_args;

/* name: sum prod mean amax amin max min (all dims) argmax argmin any all
 * var std logsumexp norm.  Primitive reductions (sum prod amax amin argmax
 * argmin any all) become one node; the others decompose into primitives
 * and pointwise ops.  argmax/argmin: ndims 0 = flattened (dim=None), else
 * exactly one dim. */
int tc_graph_reduce(tc_graph *g, const char *name, int x,
                    const tc_reduce_args *a, char *err, size_t errlen);
/* torch.max(x, dim) / torch.min: values and indices (amax/argmax). */
int tc_graph_max_dim(tc_graph *g, int is_max, int x, int64_t dim,
                     int keepdim, int *values, int *indices, char *err,
                     size_t errlen);
/* softmax / log_softmax(x, dim, dtype=None). */
int tc_graph_cross_entropy(tc_graph *g, int x, int t, int reduction,
                           int64_t ignore_index, char *err, size_t errlen);
int tc_graph_softmax(tc_graph *g, int x, int64_t dim, int has_dtype,
                     tc_dtype dtype, int log, char *err, size_t errlen);
/* layer_norm(x, normalized_shape, weight=-1, bias=-1, eps). */
int tc_graph_layer_norm(tc_graph *g, int x, int n, const int64_t *shape,
                        int weight, int bias, double eps, char *err,
                        size_t errlen);
/* rms_norm(x, normalized_shape, weight=-1, eps=None -> finfo.eps). */
int tc_graph_rms_norm(tc_graph *g, int x, int n, const int64_t *shape,
                      int weight, int has_eps, double eps, char *err,
                      size_t errlen);

/* ---- creation ops, tril / triu, normalize ------------------------------ */

/* Layout of empty_like(x) (preserve_format): x's strides when dense, else
 * dense strides in x's dim order. */
void tc_layout_like(const tc_layout *src, tc_layout *out);
/* Whether c10's suggest_memory_format() of a tensor laid out as l is
 * channels last (4-d) / channels last 3d (5-d): is_channels_last_strides
 * _2d / _3d, the test on which eager's kernels pick their result's
 * memory format. */
int tc_layout_suggests_channels_last(const tc_layout *l);
/* l's strides as at::empty(l's sizes, memory_format=channels_last /
 * channels_last_3d) gives them (4-d / 5-d; other ranks contiguous). */
void tc_layout_channels_last(tc_layout *l);
/* torch.cat's result format (compute_output_memory_format): channels
 * last when every input's strides suggest it (4-d / 5-d), else
 * contiguous.  out has the result's sizes. */
void tc_layout_of_cat(const tc_layout *const *ins, int n, tc_layout *out);
/* The pointwise node just built (the graph's last, nothing reads it yet)
 * writes into a tensor laid out like node like's empty_like, as eager's
 * out= functions called on empty_like(input) do (F.hardtanh).  0, or -1
 * if node is not such a node. */
int tc_graph_result_like(tc_graph *g, int node, int like);
/* A new tensor with layout (sizes and strides as given) and dtype dt,
 * every element the scalar node value converted to dt. */
int tc_graph_full(tc_graph *g, const tc_layout *layout, tc_dtype dt,
                  int value, char *err, size_t errlen);
/* start + step * i, i the row-major linear index of the element in
 * layout's sizes, computed in double (int64 for integer dt) and converted
 * to dt; start and step are scalar nodes. */
int tc_graph_arange(tc_graph *g, const tc_layout *layout, tc_dtype dt,
                    int start, int step, char *err, size_t errlen);
/* tril(x, k) (upper = 0) / triu(x, k) (upper = 1): contiguous result. */
int tc_graph_tril(tc_graph *g, int x, int64_t k, int upper, char *err,
                  size_t errlen);
/* F.normalize(x, p, dim, eps) = x / norm(x, p, dim, keepdim).clamp_min(eps)
 * (p = 1 or 2, as the norm reduction). */
int tc_graph_normalize(tc_graph *g, int x, double p, int64_t dim, double eps,
                       char *err, size_t errlen);

#endif
