/* graph.c - the tensor graph IR: dtypes, layouts, builders, DCE/CSE, printer.
 *
 * Type promotion follows at::native::result_type; output layouts follow
 * TensorIterator (fast setup, then compute_strides + reorder_dimensions),
 * so node metadata matches what eager PyTorch would produce.
 */
#include "graph.h"
#include "extern.h"
#include "ops.h"
#include "textbuf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TC_UNDEF (-1) /* "no dtype yet" in promotion state */

/* ---- dtypes ---------------------------------------------------------- */

static const char *const dtype_names[TC_NALLDTYPES] = {
    "bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64",
    "float16", "bfloat16", "complex32", "complex64", "complex128"};
static const char *const scalar_type_names[TC_NALLDTYPES] = {
    "Bool", "Byte", "Char", "Short", "Int", "Long", "Float", "Double",
    "Half", "BFloat16", "ComplexHalf", "ComplexFloat", "ComplexDouble"};
static const char *const dtype_short_names[TC_NALLDTYPES] = {
    "b8", "u8", "i8", "i16", "i32", "i64", "f32", "f64", "f16", "bf16",
    "c32", "c64", "c128"};
static const size_t dtype_sizes[TC_NALLDTYPES] = {1, 1, 1, 2, 4, 8, 4, 8, 2,
                                                  2, 4, 8, 16};

/* A dtype kernels compute. */
static int
dtype_valid(tc_dtype dt)
{
    return (int)dt >= 0 && dt < TC_NDTYPES;
}

/* Any dtype a graph value may have (complex included). */
static int
dtype_known(tc_dtype dt)
{
    return (int)dt >= 0 && dt < TC_NALLDTYPES;
}

const char *
tc_dtype_name(tc_dtype dt)
{
    return dtype_known(dt) ? dtype_names[dt] : "?";
}

const char *
tc_dtype_scalar_type_name(tc_dtype dt)
{
    return dtype_known(dt) ? scalar_type_names[dt] : "Undefined";
}

size_t
tc_dtype_size(tc_dtype dt)
{
    return dtype_known(dt) ? dtype_sizes[dt] : 0;
}

int
tc_dtype_is_complex(tc_dtype dt)
{
    return dt >= TC_C32 && dt < TC_NALLDTYPES;
}

int
tc_dtype_is_float(tc_dtype dt)
{
    return dt == TC_F32 || dt == TC_F64 || tc_dtype_is_reduced_float(dt);
}

int
tc_dtype_is_reduced_float(tc_dtype dt)
{
    return dt == TC_F16 || dt == TC_BF16;
}

tc_dtype
tc_dtype_opmath(tc_dtype dt)
{
    return tc_dtype_is_reduced_float(dt) ? TC_F32 : dt;
}

/* Rank among floats: float16 and bfloat16 share a rank, neither holds the
 * other. */
static int
float_rank(tc_dtype dt)
{
    return dt == TC_F64 ? 2 : dt == TC_F32 ? 1 : 0;
}

int
tc_dtype_is_int(tc_dtype dt)
{
    return dt >= TC_U8 && dt <= TC_I64;
}

/* c10::promoteTypes restricted to our dtypes. */
tc_dtype
tc_promote_types(tc_dtype a, tc_dtype b)
{
    if (a == b || b == TC_BOOL) {
        return a;
    }
    if (a == TC_BOOL) {
        return b;
    }
    if (tc_dtype_is_float(a) || tc_dtype_is_float(b)) {
        if (tc_dtype_is_float(a) && tc_dtype_is_float(b)) {
            if (float_rank(a) == float_rank(b)) {
                return TC_F32; /* float16 with bfloat16 */
            }
            return float_rank(a) > float_rank(b) ? a : b;
        }
        return tc_dtype_is_float(a) ? a : b;
    }
    if (a == TC_U8 || b == TC_U8) {
        tc_dtype other = a == TC_U8 ? b : a;
        return other == TC_I8 ? TC_I16 : other;
    }
    return a > b ? a : b;
}

/* ---- layouts --------------------------------------------------------- */

int64_t
tc_layout_numel(const tc_layout *l)
{
    int64_t n = 1;
    for (int d = 0; d < l->ndim; d++) {
        n *= l->sizes[d];
    }
    return n;
}

void
tc_layout_contiguous(tc_layout *l)
{
    int64_t s = 1;
    for (int d = l->ndim - 1; d >= 0; d--) {
        l->strides[d] = s;
        s *= l->sizes[d] > 1 ? l->sizes[d] : 1;
    }
}

int
tc_layout_same_sizes(const tc_layout *a, const tc_layout *b)
{
    if (a->ndim != b->ndim) {
        return 0;
    }
    for (int d = 0; d < a->ndim; d++) {
        if (a->sizes[d] != b->sizes[d]) {
            return 0;
        }
    }
    return 1;
}

int
tc_layout_same_strides(const tc_layout *a, const tc_layout *b)
{
    for (int d = 0; d < a->ndim; d++) {
        if (a->strides[d] != b->strides[d]) {
            return 0;
        }
    }
    return 1;
}

/* TensorImpl::compute_contiguous */
static int
layout_is_contiguous(const tc_layout *l)
{
    if (tc_layout_numel(l) == 0) {
        return 1;
    }
    int64_t z = 1;
    for (int d = l->ndim - 1; d >= 0; d--) {
        if (l->sizes[d] != 1) {
            if (l->strides[d] != z) {
                return 0;
            }
            z *= l->sizes[d];
        }
    }
    return 1;
}

/* Whether l has the strides at::empty gives its sizes, size-1 dims
 * included (layout_is_contiguous ignores those, as is_contiguous does):
 * the layout of results eager allocates so (softmax, layer_norm). */
static int
layout_is_canonical(const tc_layout *l)
{
    tc_layout c = *l;
    tc_layout_contiguous(&c);
    return !memcmp(c.strides, l->strides, sizeof(int64_t) * l->ndim);
}

/* Dim orders (innermost first) of channels-last formats. */
static const int cl2d_order[4] = {1, 3, 2, 0};
static const int cl3d_order[5] = {1, 4, 3, 2, 0};

static const int *
channels_last_order(int ndim)
{
    return ndim == 4 ? cl2d_order : ndim == 5 ? cl3d_order : NULL;
}

/* compute_channels_last_contiguous_2d / _3d */
static int
layout_is_channels_last_contiguous(const tc_layout *l, int ndim_wanted)
{
    const int *order = channels_last_order(l->ndim);
    if (l->ndim != ndim_wanted || !order) {
        return 0;
    }
    int64_t expected = 1;
    for (int i = 0; i < l->ndim; i++) {
        int d = order[i];
        if (l->sizes[d] != 1) {
            if (l->strides[d] != expected) {
                return 0;
            }
            expected *= l->sizes[d];
        }
    }
    return 1;
}

int
tc_layout_is_contiguous(const tc_layout *l)
{
    return layout_is_contiguous(l);
}

int
tc_layout_is_channels_last_contiguous(const tc_layout *l)
{
    return layout_is_channels_last_contiguous(l, l->ndim);
}

/* get_channels_last_strides_2d / _3d (no clamping of zero sizes). */
static void
layout_channels_last(tc_layout *l)
{
    const int *order = channels_last_order(l->ndim);
    int64_t s = 1;
    for (int i = 0; i < l->ndim; i++) {
        l->strides[order[i]] = s;
        s *= l->sizes[order[i]];
    }
}

/* _compute_non_overlapping_and_dense */
static int
layout_is_non_overlapping_and_dense(const tc_layout *l)
{
    int n = l->ndim, perm[TC_MAX_DIMS];
    if (n == 1) {
        return l->sizes[0] < 2 || l->strides[0] == 1;
    }
    /* stable insertion sort by stride, size<2 dims last */
    for (int i = 0; i < n; i++) {
        int j = i;
        perm[i] = i;
        while (j > 0) {
            int a = perm[j - 1], b = perm[j];
            int b_first = l->sizes[b] >= 2 &&
                          (l->sizes[a] < 2 || l->strides[b] < l->strides[a]);
            if (!b_first) {
                break;
            }
            perm[j - 1] = b;
            perm[j] = a;
            j--;
        }
    }
    int64_t require = 1;
    for (int i = 0; i < n; i++) {
        int64_t size = l->sizes[perm[i]];
        if (size < 2) {
            return 1;
        }
        if (l->strides[perm[i]] != require) {
            return 0;
        }
        require *= size;
    }
    return 1;
}

/* reorder_dimensions' should_swap: 1 = dim0 after dim1, -1 before, 0 ?. */
static int
should_swap(int n, const int64_t (*st)[TC_MAX_DIMS], const int64_t *shape,
            int d0, int d1)
{
    for (int k = 0; k < n; k++) {
        int64_t s0 = st[k][d0], s1 = st[k][d1];
        if (s0 == 0 || s1 == 0) {
            continue;
        }
        if (s0 < s1) {
            return -1;
        }
        if (s0 > s1) {
            return 1;
        }
        if (shape[d0] > shape[d1]) {
            return 1;
        }
    }
    return 0;
}

/* TensorIterator's reorder_dimensions: perm[0] is the fastest-moving dim,
 * found by insertion sort with should_swap over the operands' strides. */
static void
sort_dims(int nd, int n, const int64_t (*st)[TC_MAX_DIMS],
          const int64_t *shape, int *perm)
{
    for (int i = 0; i < nd; i++) {
        perm[i] = nd - 1 - i;
    }
    for (int i = 1; i < nd; i++) {
        int dim1 = i;
        for (int dim0 = i - 1; dim0 >= 0; dim0--) {
            int c = should_swap(n, st, shape, perm[dim0], perm[dim1]);
            if (c > 0) {
                int t = perm[dim0];
                perm[dim0] = perm[dim1];
                perm[dim1] = t;
                dim1 = dim0;
            } else if (c < 0) {
                break;
            }
        }
    }
}

/* at::infer_dense_strides: keep the input's dim order (same insertion sort
 * as TensorIterator, stride-0 dims ambiguous), dense strides. */
static void
infer_dense_strides(const tc_layout *src, tc_layout *out)
{
    int n = src->ndim, perm[TC_MAX_DIMS];
    sort_dims(n, 1, (const int64_t (*)[TC_MAX_DIMS])&src->strides, src->sizes,
              perm);
    int64_t cur = 1;
    for (int i = 0; i < n; i++) {
        out->strides[perm[i]] = cur;
        cur *= src->sizes[perm[i]] > 1 ? src->sizes[perm[i]] : 1;
    }
}

/* Layout of x.to(other_dtype): empty_like(x) with preserve_format. */
static void
layout_after_to(const tc_layout *src, tc_layout *out)
{
    *out = *src;
    if (!layout_is_non_overlapping_and_dense(src)) {
        infer_dense_strides(src, out);
    }
}

/* ---- TensorIterator output layout ------------------------------------ */

void
tc_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* infer_size over operands in order, with torch's message. */
static int
broadcast_shape(int n, const tc_layout *const *ops, tc_layout *out,
                char *err, size_t errlen)
{
    out->ndim = 0;
    for (int k = 0; k < n; k++) {
        const tc_layout *b = ops[k];
        int nd = out->ndim > b->ndim ? out->ndim : b->ndim;
        int64_t res[TC_MAX_DIMS];
        for (int i = nd - 1; i >= 0; i--) {
            int off = nd - 1 - i;
            int da = out->ndim - 1 - off, db = b->ndim - 1 - off;
            int64_t sa = da >= 0 ? out->sizes[da] : 1;
            int64_t sb = db >= 0 ? b->sizes[db] : 1;
            if (sa != sb && sa != 1 && sb != 1) {
                tc_set_err(err, errlen,
                        "The size of tensor a (%lld) must match the size of "
                        "tensor b (%lld) at non-singleton dimension %d",
                        (long long)sa, (long long)sb, i);
                return -1;
            }
            res[i] = sa == 1 ? sb : sa;
        }
        out->ndim = nd;
        memcpy(out->sizes, res, sizeof(int64_t) * nd);
    }
    return 0;
}

/* TensorIteratorBase::compute_fast_setup_type + fast_set_up.  Returns 1 if
 * the fast path decided the layout. */
static int
fast_setup_layout(int n, const tc_layout *const *ops, tc_layout *out)
{
    int contiguous = 1, channels_last = 1, dense = 1;
    for (int k = 0; k < n; k++) {
        if (!tc_layout_same_sizes(ops[k], out)) {
            return 0;
        }
        contiguous &= layout_is_contiguous(ops[k]);
        channels_last &= layout_is_channels_last_contiguous(ops[k], 4);
        dense &= layout_is_non_overlapping_and_dense(ops[k]);
    }
    if (contiguous || n == 0) {
        tc_layout_contiguous(out);
        return 1;
    }
    if (channels_last) {
        layout_channels_last(out);
        return 1;
    }
    if (!dense) {
        return 0;
    }
    for (int k = 1; k < n; k++) {
        if (!tc_layout_same_strides(ops[k], ops[0])) {
            return 0;
        }
    }
    memcpy(out->strides, ops[n - 1]->strides, sizeof(out->strides));
    return 1;
}

/* Operand strides in the broadcast shape (compute_strides). */
static void
broadcast_strides(const tc_layout *op, const tc_layout *shape, int64_t *st)
{
    int off = shape->ndim - op->ndim;
    for (int d = 0; d < shape->ndim; d++) {
        st[d] = 0;
    }
    for (int i = 0; i < op->ndim; i++) {
        int broadcast = op->sizes[i] == 1 && shape->sizes[off + i] != 1;
        st[off + i] = broadcast ? 0 : op->strides[i];
    }
}

static void
general_layout(int n, const tc_layout *const *ops, tc_layout *out)
{
    int nd = out->ndim, perm[TC_MAX_DIMS];
    int64_t st[TC_MAX_OP_INPUTS][TC_MAX_DIMS];
    for (int k = 0; k < n; k++) {
        broadcast_strides(ops[k], out, st[k]);
    }
    sort_dims(nd, n, (const int64_t (*)[TC_MAX_DIMS])st, out->sizes, perm);
    int inverted = 1;
    for (int j = 0; j < nd; j++) {
        inverted &= perm[j] == nd - 1 - j;
    }
    if (inverted) {
        tc_layout_contiguous(out);
        return;
    }
    int64_t next = 1;
    for (int j = 0; j < nd; j++) {
        out->strides[perm[j]] = next;
        next *= out->sizes[perm[j]];
    }
}

int
tc_iter_layout(int n, const tc_layout *const *ops, tc_layout *out,
               char *err, size_t errlen)
{
    if (n > TC_MAX_OP_INPUTS) {
        tc_set_err(err, errlen, "too many operands (%d)", n);
        return -1;
    }
    if (broadcast_shape(n, ops, out, err, errlen) < 0) {
        return -1;
    }
    if (!fast_setup_layout(n, ops, out)) {
        general_layout(n, ops, out);
    }
    return 0;
}

/* ---- graph construction ---------------------------------------------- */

tc_graph *
tc_graph_new(void)
{
    return calloc(1, sizeof(tc_graph));
}

void
tc_graph_free(tc_graph *g)
{
    if (!g) {
        return;
    }
    free(g->nodes);
    free(g->outputs);
    free(g->output_writes);
    free(g);
}

int
tc_graph_push_node(tc_graph *g, const tc_node *n)
{
    if (g->nnodes == g->cap) {
        int cap = g->cap ? g->cap * 2 : 16;
        tc_node *nodes = realloc(g->nodes, sizeof(tc_node) * cap);
        if (!nodes) {
            return -1;
        }
        g->nodes = nodes;
        g->cap = cap;
    }
    g->nodes[g->nnodes] = *n;
    return g->nnodes++;
}

int
tc_graph_push_op(tc_graph *g, const tc_node *n, char *err, size_t errlen)
{
    const char *opname = n->op >= 0 ? tc_ops[n->op].name : "?";
    int generic = !strcmp(opname, "extern") || !strcmp(opname, "extern_item");
    for (int k = -1; k < n->nin && !generic; k++) {
        tc_dtype dt = k < 0 ? n->dtype : g->nodes[n->in[k]].dtype;
        if (tc_dtype_is_complex(dt)) {
            tc_set_err(err, errlen, "%s of a %s tensor: tcjit's kernels "
                       "compute real dtypes only (complex values stay in "
                       "torch's own ops)", opname, tc_dtype_name(dt));
            return -1;
        }
    }
    int id = tc_graph_push_node(g, n);
    if (id < 0) {
        tc_set_err(err, errlen, "out of memory");
    }
    return id;
}

void
tc_node_init(tc_node *n, tc_node_kind kind, tc_dtype dt)
{
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->op = -1;
    n->dtype = dt;
    n->input_index = -1;
    n->attr_dtype = dt;
    n->view_base = -1;
    for (int i = 0; i < TC_MAX_OP_INPUTS; i++) {
        n->in[i] = -1;
    }
}

int
tc_graph_push_mapped(tc_graph *ng, const tc_node *n, const int *map)
{
    tc_node nd = *n;
    for (int k = 0; k < nd.nin; k++) {
        nd.in[k] = map[nd.in[k]];
    }
    if (nd.view_base >= 0) {
        nd.view_base = map[nd.view_base];
    }
    /* a position, not a node: the passes that rebuild a graph (eval-mode
     * batch norm, freezing) run without autograd, which alone reads it */
    nd.overwritten_at = 0;
    return tc_graph_push_node(ng, &nd);
}

void
tc_graph_take_nodes(tc_graph *g, tc_graph *ng, const int *map)
{
    for (int j = 0; j < g->noutputs; j++) {
        g->outputs[j] = map[g->outputs[j]];
    }
    tc_node *old = g->nodes;
    g->nodes = ng->nodes;
    g->nnodes = ng->nnodes;
    g->cap = ng->cap;
    g->ninputs = ng->ninputs;
    ng->nodes = old;
}

int
tc_graph_input(tc_graph *g, tc_dtype dt, const tc_layout *layout)
{
    if (!dtype_valid(dt) || layout->ndim < 0 || layout->ndim > TC_MAX_DIMS) {
        return -1;
    }
    for (int d = 0; d < layout->ndim; d++) {
        if (layout->sizes[d] < 0) {
            return -1;
        }
    }
    tc_node n;
    tc_node_init(&n, TC_NODE_INPUT, dt);
    n.layout = *layout;
    n.input_index = g->ninputs;
    int id = tc_graph_push_node(g, &n);
    if (id >= 0) {
        g->ninputs++;
    }
    return id;
}

/* Python numbers: a float is a wrapped double, an int a wrapped int64. */
int
tc_graph_scalar_float(tc_graph *g, double v)
{
    tc_node n;
    tc_node_init(&n, TC_NODE_SCALAR, TC_F64);
    n.wrapped = 1;
    n.scalar.f = v;
    return tc_graph_push_node(g, &n);
}

int
tc_graph_scalar_int(tc_graph *g, int64_t v)
{
    tc_node n;
    tc_node_init(&n, TC_NODE_SCALAR, TC_I64);
    n.wrapped = 1;
    n.scalar.i = v;
    return tc_graph_push_node(g, &n);
}

int
tc_graph_scalar_bool(tc_graph *g, int v)
{
    tc_node n;
    tc_node_init(&n, TC_NODE_SCALAR, TC_BOOL);
    n.wrapped = 1;
    n.scalar.i = v != 0;
    return tc_graph_push_node(g, &n);
}

/* ---- promotion ------------------------------------------------------- */

static int
promote_skip_undefined(int a, int b)
{
    if (a == TC_UNDEF) {
        return b;
    }
    if (b == TC_UNDEF) {
        return a;
    }
    return tc_promote_types(a, b);
}

static int
combine_categories(int higher, int lower)
{
    if (higher != TC_UNDEF && tc_dtype_is_float(higher)) {
        return higher;
    }
    if (higher == TC_BOOL || (lower != TC_UNDEF && tc_dtype_is_float(lower))) {
        return promote_skip_undefined(higher, lower);
    }
    return higher != TC_UNDEF ? higher : lower;
}

tc_dtype
tc_promote_nodes(const tc_graph *g, int nin, const int *in)
{
    int dim = TC_UNDEF, zero = TC_UNDEF, wrapped = TC_UNDEF;
    for (int k = 0; k < nin; k++) {
        const tc_node *n = &g->nodes[in[k]];
        int cur = n->dtype;
        if (n->wrapped && tc_dtype_is_float(n->dtype)) {
            cur = TC_F32; /* the default dtype */
        }
        if (n->layout.ndim > 0) {
            dim = promote_skip_undefined(dim, cur);
        } else if (n->wrapped) {
            wrapped = promote_skip_undefined(wrapped, cur);
        } else {
            zero = promote_skip_undefined(zero, cur);
        }
    }
    int r = combine_categories(dim, combine_categories(zero, wrapped));
    return r == TC_UNDEF ? TC_F32 : (tc_dtype)r;
}

/* ---- op nodes -------------------------------------------------------- */

static int
is_wrapped_scalar(const tc_graph *g, int id)
{
    return g->nodes[id].kind == TC_NODE_SCALAR;
}

/* Ops that torch implements as a unary TensorIterator over self.to(common)
 * when the other operands are Python numbers (clamp(x, 0, 1), x ** 2, and
 * the parameters of TC_PROMOTE_FIRST ops: F.elu(x, alpha)). */
static int
is_unary_with_scalars(const tc_graph *g, const tc_op_def *def, int nin,
                      const int *in)
{
    const char *name = def->name;
    if (strcmp(name, "clamp") && strcmp(name, "clamp_min") &&
        strcmp(name, "clamp_max") && strcmp(name, "pow") &&
        def->promote != TC_PROMOTE_FIRST) {
        return 0;
    }
    if (is_wrapped_scalar(g, in[0])) {
        return 0;
    }
    for (int k = 1; k < nin; k++) {
        if (!is_wrapped_scalar(g, in[k])) {
            return 0;
        }
    }
    return 1;
}

static int
op_layout(const tc_graph *g, int op, int nin, const int *in, tc_dtype compute,
          tc_layout *out, char *err, size_t errlen)
{
    const tc_op_def *def = &tc_ops[op];
    tc_layout conv[TC_MAX_OP_INPUTS];
    const tc_layout *ops[TC_MAX_OP_INPUTS];
    int n = 0;
    if (def->promote == TC_PROMOTE_CAST) {
        layout_after_to(&g->nodes[in[0]].layout, out);
        return 0;
    }
    if (!strcmp(def->name, "contiguous")) {
        *out = g->nodes[in[0]].layout;
        tc_layout_contiguous(out);
        return 0;
    }
    if (!strcmp(def->name, "masked_fill")) {
        /* expand_outplace(mask, x), then a contiguous clone */
        const tc_layout *ops2[2] = {&g->nodes[in[0]].layout,
                                    &g->nodes[in[1]].layout};
        if (tc_iter_layout(2, ops2, out, err, errlen) < 0) {
            return -1;
        }
        tc_layout_contiguous(out);
        return 0;
    }
    if (!strcmp(def->name, "pow") && is_wrapped_scalar(g, in[0]) &&
        !is_wrapped_scalar(g, in[1])) {
        /* pow(Scalar, Tensor) allocates a contiguous output */
        *out = g->nodes[in[1]].layout;
        tc_layout_contiguous(out);
        return 0;
    }
    if (is_unary_with_scalars(g, def, nin, in)) {
        const tc_node *x = &g->nodes[in[0]];
        conv[0] = x->layout;
        if (x->dtype != compute) {
            layout_after_to(&x->layout, &conv[0]);
        }
        ops[n++] = &conv[0];
        return tc_iter_layout(n, ops, out, err, errlen);
    }
    /* On the CPU, TensorIterator's compute_types converts every input of
     * another dtype than the common one with .to() before it picks the
     * output's layout (a broadcast or sliced input turns dense) */
    int cpu_promotes = !g->cuda && (def->promote == TC_PROMOTE_DEFAULT
                                    || def->promote == TC_PROMOTE_INT_TO_FLOAT
                                    || def->promote == TC_PROMOTE_BOOL_OUT);
    if (!g->cuda && def->promote == TC_PROMOTE_LOGICAL && nin == 2) {
        /* logical_and/or/xor iterate as comparisons: the inputs become
         * result_type(a, b) (bool is only the kernel's compute dtype) */
        cpu_promotes = 1;
        compute = tc_promote_nodes(g, nin, in);
    }
    for (int k = 0; k < nin; k++) {
        const tc_node *x = &g->nodes[in[k]];
        conv[k] = x->layout;
        /* where() converts self/other with .to() before iterating */
        int converts = cpu_promotes
                       || (def->promote == TC_PROMOTE_WHERE && k > 0);
        if (converts && x->dtype != compute) {
            layout_after_to(&x->layout, &conv[k]);
        }
        ops[n++] = &conv[k];
    }
    return tc_iter_layout(n, ops, out, err, errlen);
}

int
tc_graph_op(tc_graph *g, const char *opname, int nin, const int *in,
            tc_dtype attr_dtype, char *err, size_t errlen)
{
    int op = tc_op_lookup(opname);
    if (op < 0) {
        tc_set_err(err, errlen, "tcjit does not support the op '%s'", opname);
        return -1;
    }
    const tc_op_def *def = &tc_ops[op];
    if (def->kind != TC_OPK_POINTWISE) {
        tc_set_err(err, errlen, "tcjit does not support the op '%s' through "
                "tc_graph_op (use the view / reduction builders)", opname);
        return -1;
    }
    if (nin != def->nin) {
        tc_set_err(err, errlen, "%s expects %d operands, got %d", opname,
                def->nin, nin);
        return -1;
    }
    for (int k = 0; k < nin; k++) {
        if (in[k] < 0 || in[k] >= g->nnodes) {
            tc_set_err(err, errlen, "%s: invalid operand node %d", opname, in[k]);
            return -1;
        }
    }
    if (def->promote == TC_PROMOTE_CAST && !dtype_valid(attr_dtype)) {
        tc_set_err(err, errlen, "to: invalid dtype %d", (int)attr_dtype);
        return -1;
    }
    if (def->promote == TC_PROMOTE_CAST && !is_wrapped_scalar(g, in[0]) &&
        g->nodes[in[0]].dtype == attr_dtype) {
        return in[0]; /* x.to(x.dtype) is x itself */
    }
    tc_dtype compute, out;
    if (tc_op_infer_dtypes(g, op, in, attr_dtype, &compute, &out, err,
                           errlen) < 0) {
        return -1;
    }
    tc_node n;
    tc_node_init(&n, TC_NODE_OP, out);
    n.op = op;
    n.nin = nin;
    memcpy(n.in, in, sizeof(int) * nin);
    n.attr_dtype = def->promote == TC_PROMOTE_CAST ? attr_dtype : out;
    if (op_layout(g, op, nin, in, compute, &n.layout, err, errlen) < 0) {
        return -1;
    }
    return tc_graph_push_op(g, &n, err, errlen);
}

int
tc_graph_set_outputs(tc_graph *g, int n, const int *nodes)
{
    int *outs = malloc(sizeof(int) * (n > 0 ? n : 1));
    if (!outs) {
        return -1;
    }
    for (int k = 0; k < n; k++) {
        if (nodes[k] < 0 || nodes[k] >= g->nnodes) {
            free(outs);
            return -1;
        }
        outs[k] = nodes[k];
    }
    free(g->outputs);
    free(g->output_writes);
    g->output_writes = NULL;
    g->outputs = outs;
    g->noutputs = n;
    return 0;
}

int
tc_graph_set_output_write(tc_graph *g, int j, int input)
{
    if (j < 0 || j >= g->noutputs || input < 0 || input >= g->ninputs) {
        return -1;
    }
    if (g->output_writes == NULL) {
        g->output_writes = malloc(sizeof(int) * (size_t)g->noutputs);
        if (g->output_writes == NULL) {
            return -1;
        }
        for (int k = 0; k < g->noutputs; k++) {
            g->output_writes[k] = -1;
        }
    }
    g->output_writes[j] = input;
    return 0;
}

int
tc_graph_op_count(const tc_graph *g)
{
    int c = 0;
    for (int i = 0; i < g->nnodes; i++) {
        c += g->nodes[i].kind == TC_NODE_OP;
    }
    return c;
}

/* ---- DCE / CSE ------------------------------------------------------- */

int
tc_node_must_run(const tc_graph *g, int id)
{
    const tc_node *n = &g->nodes[id];
    return (n->kind == TC_NODE_OP && tc_ops[n->op].checks_values)
           || tc_node_has_effects(g, id);
}

static int
nodes_equal(const tc_node *a, const tc_node *b)
{
    static int generic = -2;
    if (generic == -2) {
        generic = tc_op_lookup("extern");
    }
    if (a->kind != b->kind || a->dtype != b->dtype
        || a->requires_grad != b->requires_grad || a->place != b->place
        || a->detached != b->detached
        /* a value an in-place op replaced and an equal fresh one: eager's
         * backward reads the fresh one's saved copy unchanged (graph.h
         * overwritten_at; grad fuzz seed 28112) */
        || (a->overwritten_at != 0) != (b->overwritten_at != 0)
        || (a->kind == TC_NODE_OP && a->op == generic
            && !a->xattr[TC_XA_GENERIC_DROPPED])) {
        return 0;   /* extern.h tc_node_has_effects */
    }
    if (a->kind == TC_NODE_SCALAR) {
        return a->wrapped == b->wrapped &&
               memcmp(&a->scalar, &b->scalar, sizeof(a->scalar)) == 0;
    }
    if (a->kind != TC_NODE_OP || a->op != b->op || a->nin != b->nin ||
        a->attr_dtype != b->attr_dtype) {
        return 0;
    }
    /* views and reductions differ by their attributes (layout, offset,
     * reduced dims), pointwise nodes never do for equal inputs */
    if (a->red_mask != b->red_mask || a->keepdim != b->keepdim ||
        a->first_index != b->first_index ||
        a->offset != b->offset || a->xfattr != b->xfattr ||
        memcmp(a->xattr, b->xattr, sizeof(a->xattr)) != 0 || !tc_layout_same_sizes(&a->layout, &b->layout) ||
        !tc_layout_same_strides(&a->layout, &b->layout)) {
        return 0;
    }
    /* a view's index map too: a[0] and a[1] of an expanded a (stride 0)
     * have one layout and offset, but are two elements of a's gradient
     * (fuzz seed 20203, backend grad: merged, row 1's gradient went to
     * row 0) */
    if (tc_ops[a->op].kind == TC_OPK_VIEW
        && (a->vmap_affine != b->vmap_affine
            || memcmp(a->vsrc, b->vsrc, sizeof(a->vsrc)) != 0
            || memcmp(a->vcoef, b->vcoef, sizeof(a->vcoef)) != 0
            || memcmp(a->voff, b->voff, sizeof(a->voff)) != 0)) {
        return 0;
    }
    return memcmp(a->in, b->in, sizeof(int) * a->nin) == 0;
}

static uint64_t
node_hash(const tc_node *n)
{
    uint64_t h = 1469598103934665603ull;
    uint64_t parts[8] = {(uint64_t)n->kind, (uint64_t)n->dtype,
                         (uint64_t)n->op, (uint64_t)n->nin,
                         (uint64_t)n->attr_dtype, 0, 0, 0};
    if (n->kind == TC_NODE_SCALAR) {
        memcpy(&parts[5], &n->scalar, sizeof(n->scalar));
        parts[6] = (uint64_t)n->wrapped;
    } else {
        for (int k = 0; k < n->nin; k++) {
            parts[5] = parts[5] * 1000003u + (uint64_t)n->in[k];
        }
        parts[6] = (uint64_t)n->red_mask * 31u + (uint64_t)n->keepdim;
        for (int k = 0; k < TC_MAX_XATTR; k++) {
            parts[6] = parts[6] * 1000003u + (uint64_t)n->xattr[k];
        }
        parts[7] = (uint64_t)n->offset;
        for (int d = 0; d < n->layout.ndim; d++) {
            parts[7] = parts[7] * 1000003u + (uint64_t)n->layout.strides[d];
        }
    }
    for (int i = 0; i < 8; i++) {
        h = (h ^ parts[i]) * 1099511628211ull;
    }
    return h;
}

/* root[i] = 1: node i holds the storage of a graph output (the output
 * itself, or the base of an output that is a view). */
static void
mark_output_roots(const tc_graph *g, char *root)
{
    for (int j = 0; j < g->noutputs; j++) {
        const tc_node *n = &g->nodes[g->outputs[j]];
        root[n->view_base >= 0 ? n->view_base : g->outputs[j]] = 1;
    }
}

/* Map every node to the first equal node (inputs are never merged).
 * Distinct nodes are distinct tensors in eager: two equal nodes that both
 * hold an output's storage (x + 1 returned twice, a @ b and torch.mm(a, b))
 * must stay two tensors, or an in-place change of one output would show in
 * the other.  The later one becomes a copy of the first (copy_of[i]), which
 * costs one store where recomputing would cost the op again (a matmul),
 * except a reduction: computed again, it is one more accumulator in the
 * first one's loop, where its copy would be a kernel of its own.  Other
 * nodes equal to them still merge into the first. */
static int
cse_map(const tc_graph *g, int *canon, int *copy_of)
{
    int cap = 16;
    while (cap < 2 * g->nnodes) {
        cap *= 2;
    }
    int *table = malloc(sizeof(int) * cap);
    if (!table) {
        return -1;
    }
    char *root = calloc(g->nnodes + 1, 1);
    char *claimed = calloc(g->nnodes + 1, 1); /* storage of an output */
    if (!root || !claimed) {
        free(table), free(root), free(claimed);
        return -1;
    }
    mark_output_roots(g, root);
    for (int i = 0; i < cap; i++) {
        table[i] = -1;
    }
    for (int i = 0; i < g->nnodes; i++) {
        tc_node n = g->nodes[i];
        canon[i] = i;
        copy_of[i] = -1;
        if (n.kind == TC_NODE_INPUT) {
            continue;
        }
        for (int k = 0; k < n.nin; k++) {
            n.in[k] = canon[n.in[k]];
        }
        size_t slot = node_hash(&n) & (cap - 1);
        while (table[slot] >= 0) {
            tc_node m = g->nodes[table[slot]];
            for (int k = 0; k < m.nin; k++) {
                m.in[k] = canon[m.in[k]];
            }
            if (nodes_equal(&n, &m)) {
                canon[i] = table[slot];
                break;
            }
            slot = (slot + 1) & (cap - 1);
        }
        if (root[i] && canon[i] != i && claimed[canon[i]]) {
            int reduction = tc_ops[n.op].kind == TC_OPK_REDUCTION;
            copy_of[i] = reduction ? -1 : canon[i];
            canon[i] = i;
        } else if (canon[i] == i) {
            table[slot] = i;
        }
        claimed[canon[i]] |= root[i];
    }
    free(table), free(root), free(claimed);
    return 0;
}

/* Node i becomes a copy of node src, keeping its dtype and layout. */
static void
make_copy(tc_graph *g, int i, int src)
{
    tc_node *n = &g->nodes[i];
    tc_node c;
    tc_node_init(&c, TC_NODE_OP, n->dtype);
    c.op = tc_op_lookup("clone");
    c.nin = 1;
    c.in[0] = src;
    c.layout = n->layout;
    c.requires_grad = n->requires_grad;
    *n = c;
}

/* overwritten_at is a position in program order (graph.h): the first
 * node the writing in-place op made, or the node count at a bump.  After
 * compaction (live: old id -> new id, or -1), the new id of the first
 * node kept at or after it. */
static void
remap_positions(tc_graph *g, const int *live, int n)
{
    for (int i = 0; i < g->nnodes; i++) {
        int at = g->nodes[i].overwritten_at, to = g->nnodes;
        if (at <= 0) {
            continue;
        }
        for (int j = at; j < n; j++) {
            if (live[j] >= 0) {
                to = live[j];
                break;
            }
        }
        g->nodes[i].overwritten_at = to;
    }
}

int
tc_graph_optimize(tc_graph *g)
{
    tc_graph_place_all(g);
    int n = g->nnodes;
    int *canon = malloc(sizeof(int) * (n ? n : 1));
    int *copy_of = malloc(sizeof(int) * (n ? n : 1));
    int *live = calloc(n ? n : 1, sizeof(int));
    if (!canon || !copy_of || !live || cse_map(g, canon, copy_of) < 0) {
        free(canon);
        free(copy_of);
        free(live);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (copy_of[i] >= 0) {
            make_copy(g, i, copy_of[i]);
        }
    }
    free(copy_of);
    for (int j = 0; j < g->noutputs; j++) {
        g->outputs[j] = canon[g->outputs[j]];
        live[g->outputs[j]] = 1;
    }
    for (int i = n - 1; i >= 0; i--) {
        tc_node *nd = &g->nodes[i];
        live[i] |= nd->kind == TC_NODE_INPUT || tc_node_must_run(g, i);
        if (!live[i] || canon[i] != i) {
            continue;
        }
        for (int k = 0; k < nd->nin; k++) {
            nd->in[k] = canon[nd->in[k]];
            live[nd->in[k]] = 1;
        }
    }
    /* compact: live[i] becomes the new id (or -1) */
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (!live[i] || canon[i] != i) {
            live[i] = -1;
            continue;
        }
        tc_node nd = g->nodes[i];
        for (int k = 0; k < nd.nin; k++) {
            nd.in[k] = live[nd.in[k]];
        }
        if (nd.view_base >= 0) {
            nd.view_base = live[canon[nd.view_base]];
        }
        live[i] = m;
        g->nodes[m++] = nd;
    }
    for (int j = 0; j < g->noutputs; j++) {
        g->outputs[j] = live[g->outputs[j]];
    }
    g->nnodes = m;
    remap_positions(g, live, n);
    free(canon);
    free(live);
    return 0;
}

/* ---- printer --------------------------------------------------------- */

/* short names for the shared text buffer (textbuf.h) */
typedef tc_textbuf strbuf;
#define sb_printf tc_textbuf_printf
#define sb_finish tc_textbuf_finish

/* Python's repr() of a float. */
void
tc_format_double(char *buf, size_t n, double v)
{
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == floor(v) && fabs(v) < 1e16) {
        snprintf(buf, n, "%.1f", v);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, n, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) {
            return;
        }
    }
}

static void
sb_node_ref(strbuf *b, const tc_graph *g, int id)
{
    const tc_node *n = &g->nodes[id];
    char num[40];
    switch (n->kind) {
    case TC_NODE_INPUT:
        sb_printf(b, "%%x%d", n->input_index);
        break;
    case TC_NODE_SCALAR:
        if (n->dtype == TC_BOOL) {
            sb_printf(b, "%s", n->scalar.i ? "True" : "False");
        } else if (tc_dtype_is_float(n->dtype)) {
            tc_format_double(num, sizeof(num), n->scalar.f);
            sb_printf(b, "%s", num);
        } else {
            sb_printf(b, "%lld", (long long)n->scalar.i);
        }
        break;
    default:
        sb_printf(b, "%%%d", id);
    }
}

static void
sb_rhs(strbuf *b, const tc_graph *g, const tc_node *n)
{
    sb_printf(b, "%s(", tc_ops[n->op].name);
    for (int k = 0; k < n->nin; k++) {
        sb_printf(b, k ? ", " : "");
        sb_node_ref(b, g, n->in[k]);
    }
    if (tc_ops[n->op].promote == TC_PROMOTE_CAST) {
        sb_printf(b, ", %s", tc_dtype_name(n->attr_dtype));
    }
    if (tc_ops[n->op].kind == TC_OPK_REDUCTION) {
        const tc_layout *x = &g->nodes[n->in[0]].layout;
        int first = 1;
        sb_printf(b, ", dims=[");
        for (int d = 0; d < x->ndim; d++) {
            if (n->red_mask & (1u << d)) {
                sb_printf(b, "%s%d", first ? "" : ", ", d);
                first = 0;
            }
        }
        sb_printf(b, "]%s", n->keepdim ? ", keepdim" : "");
    }
    if (tc_ops[n->op].kind == TC_OPK_VIEW && n->offset) {
        sb_printf(b, ", offset=%lld", (long long)n->offset);
    }
    sb_printf(b, ")");
}

char *
tc_node_format(const tc_graph *g, int id)
{
    strbuf b = {0};
    sb_node_ref(&b, g, id);
    if (g->nodes[id].kind == TC_NODE_OP) {
        sb_printf(&b, " = ");
        sb_rhs(&b, g, &g->nodes[id]);
    }
    return sb_finish(&b);
}

static void
sb_ints(strbuf *b, const int64_t *v, int n, const char *open,
        const char *close, int trailing_comma)
{
    sb_printf(b, "%s", open);
    for (int d = 0; d < n; d++) {
        sb_printf(b, "%s%lld", d ? ", " : "", (long long)v[d]);
    }
    sb_printf(b, "%s%s", n == 1 && trailing_comma ? "," : "", close);
}

static void
sb_node_line(strbuf *b, const tc_graph *g, int id, int width)
{
    const tc_node *n = &g->nodes[id];
    strbuf name = {0};
    sb_node_ref(&name, g, id);
    sb_printf(b, "  %-*s : %s", width, name.s ? name.s : "?",
              dtype_short_names[n->dtype]);
    tc_textbuf_free(&name);
    sb_ints(b, n->layout.sizes, n->layout.ndim, "[", "]", 0);
    if (n->kind == TC_NODE_INPUT || !layout_is_contiguous(&n->layout)) {
        sb_printf(b, " stride ");
        sb_ints(b, n->layout.strides, n->layout.ndim, "(", ")", 1);
    }
    if (n->kind == TC_NODE_INPUT) {
        sb_printf(b, " = input[%d]\n", n->input_index);
    } else {
        sb_printf(b, " = ");
        sb_rhs(b, g, n);
        sb_printf(b, "\n");
    }
}

char *
tc_graph_format(const tc_graph *g, const char *title)
{
    strbuf b = {0};
    int width = 0;
    for (int i = 0; i < g->nnodes; i++) {
        const tc_node *n = &g->nodes[i];
        char tmp[32];
        int w = n->kind == TC_NODE_INPUT
                    ? snprintf(tmp, sizeof(tmp), "%%x%d", n->input_index)
                    : snprintf(tmp, sizeof(tmp), "%%%d", i);
        width = n->kind != TC_NODE_SCALAR && w > width ? w : width;
    }
    sb_printf(&b, "graph %s (%d inputs, %d ops):\n", title ? title : "",
              g->ninputs, tc_graph_op_count(g));
    for (int i = 0; i < g->nnodes; i++) {
        if (g->nodes[i].kind != TC_NODE_SCALAR) {
            sb_node_line(&b, g, i, width);
        }
    }
    sb_printf(&b, "  return (");
    for (int j = 0; j < g->noutputs; j++) {
        sb_printf(&b, j ? ", " : "");
        sb_node_ref(&b, g, g->outputs[j]);
    }
    sb_printf(&b, "%s)\n", g->noutputs == 1 ? "," : "");
    return sb_finish(&b);
}

/* ---- views ------------------------------------------------------------
 *
 * Layouts follow ATen's view functions (TensorShape.cpp): strides of the
 * view are derived from the strides of the source, the storage offset
 * accumulates.  Each view also records its logical index map onto in[0]
 * (graph.h) so the scheduler can recompute an unmaterialized producer
 * under the view's indexing.
 */

static int
wrap_dim(int64_t dim, int ndim, int *out, char *err, size_t errlen)
{
    int n = ndim > 0 ? ndim : 1;
    if (dim < -n || dim >= n) {
        tc_set_err(err, errlen, "Dimension out of range (expected to be in "
                "range of [%d, %d], but got %lld)", -n, n - 1,
                (long long)dim);
        return -1;
    }
    *out = (int)(dim < 0 ? dim + n : dim);
    return 0;
}

/* mask of dims[0..n-1] (wrapped; 0-d: dim 0 or -1, an empty mask), as
 * torch's dim lists: a duplicate is torch's error unless allow_dup. */
static int
dims_mask(int ndim, int n, const int64_t *dims, int allow_dup,
          unsigned *mask, char *err, size_t errlen)
{
    *mask = 0;
    for (int i = 0; i < n; i++) {
        int d;
        if (wrap_dim(dims[i], ndim, &d, err, errlen) < 0) {
            return -1;
        }
        if (!allow_dup && (*mask & (1u << d) || (ndim == 0 && i > 0))) {
            tc_set_err(err, errlen, "dim %d appears multiple times in the list "
                    "of dims", d);
            return -1;
        }
        *mask |= ndim ? 1u << d : 0;
    }
    return 0;
}

void
tc_shape_text(char *buf, size_t n, const int64_t *v, int nd)
{
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < nd && len < n; d++) {
        len += (size_t)snprintf(buf + len, n - len, "%s%lld", d ? ", " : "",
                                (long long)v[d]);
    }
    if (len < n) {
        snprintf(buf + len, n - len, "]");
    }
}

static int
check_node(const tc_graph *g, int x, const char *what, char *err,
           size_t errlen)
{
    if (x < 0 || x >= g->nnodes || g->nodes[x].kind == TC_NODE_SCALAR) {
        tc_set_err(err, errlen, "%s: operand %d is not a tensor node", what, x);
        return -1;
    }
    return 0;
}

/* A view node of x: caller fills layout, offset delta and the map. */
static void
view_init(const tc_graph *g, tc_node *n, const char *op, int x)
{
    const tc_node *src = &g->nodes[x];
    tc_node_init(n, TC_NODE_OP, src->dtype);
    n->op = tc_op_lookup(op);
    n->nin = 1;
    n->in[0] = x;
    n->attr_dtype = src->dtype;
    n->wrapped = 0;
    int is_view = src->kind == TC_NODE_OP &&
                  tc_ops[src->op].kind == TC_OPK_VIEW;
    n->view_base = is_view ? src->view_base : x;
    n->offset = is_view ? src->offset : 0;
    n->vmap_affine = 1;
    for (int d = 0; d < TC_MAX_DIMS; d++) {
        n->vsrc[d] = -1;
    }
}

static int
push_view(tc_graph *g, tc_node *n, char *err, size_t errlen)
{
    return tc_graph_push_op(g, n, err, errlen);
}

int
tc_graph_permute(tc_graph *g, int x, int n, const int64_t *dims, char *err,
                 size_t errlen)
{
    if (check_node(g, x, "permute", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    if (n != l->ndim) {
        tc_set_err(err, errlen, "permute(sparse_coo): number of dimensions in "
                "the tensor input does not match the length of the desired "
                "ordering of dimensions i.e. input.dim() = %d is not equal "
                "to len(dims) = %d", l->ndim, n);
        return -1;
    }
    tc_node v;
    view_init(g, &v, "permute", x);
    unsigned seen = 0;
    v.layout.ndim = n;
    for (int i = 0; i < n; i++) {
        int d;
        if (wrap_dim(dims[i], l->ndim, &d, err, errlen) < 0) {
            return -1;
        }
        if (seen & (1u << d)) {
            tc_set_err(err, errlen, "permute(): duplicate dims are not allowed.");
            return -1;
        }
        seen |= 1u << d;
        v.layout.sizes[i] = l->sizes[d];
        v.layout.strides[i] = l->strides[d];
        v.vsrc[i] = d;
        v.vcoef[i] = 1;
    }
    return push_view(g, &v, err, errlen);
}

int
tc_graph_alias(tc_graph *g, int x, char *err, size_t errlen)
{
    if (check_node(g, x, "alias", err, errlen) < 0) {
        return -1;
    }
    int64_t dims[TC_MAX_DIMS];
    int n = g->nodes[x].layout.ndim;
    for (int d = 0; d < n; d++) {
        dims[d] = d;
    }
    return tc_graph_permute(g, x, n, dims, err, errlen);   /* identity */
}

int
tc_graph_as_strided(tc_graph *g, int x, const tc_layout *layout,
                    int64_t offset, char *err, size_t errlen)
{
    if (check_node(g, x, "as_strided", err, errlen) < 0) {
        return -1;
    }
    if (layout->ndim > TC_MAX_DIMS || offset < 0) {
        tc_set_err(err, errlen, "as_strided: %d dims, offset %lld",
                   layout->ndim, (long long)offset);
        return -1;
    }
    tc_node v;
    view_init(g, &v, "as_strided", x);
    v.layout = *layout;
    v.offset += offset;
    v.vmap_affine = 0;   /* no index map: read through the storage */
    return push_view(g, &v, err, errlen);
}

int
tc_graph_transpose(tc_graph *g, int x, int64_t d0, int64_t d1, char *err,
                   size_t errlen)
{
    if (check_node(g, x, "transpose", err, errlen) < 0) {
        return -1;
    }
    int nd = g->nodes[x].layout.ndim, a, b;
    if (wrap_dim(d0, nd, &a, err, errlen) < 0 ||
        wrap_dim(d1, nd, &b, err, errlen) < 0) {
        return -1;
    }
    if (nd == 0) {
        return x; /* transpose of a 0-d tensor is itself (a view) */
    }
    int64_t perm[TC_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        perm[d] = d;
    }
    perm[a] = b;
    perm[b] = a;
    return tc_graph_permute(g, x, nd, perm, err, errlen);
}

int
tc_graph_t(tc_graph *g, int x, char *err, size_t errlen)
{
    if (check_node(g, x, "t", err, errlen) < 0) {
        return -1;
    }
    int nd = g->nodes[x].layout.ndim;
    if (nd > 2) {
        tc_set_err(err, errlen, "t() expects a tensor with <= 2 dimensions, but "
                "self is %dD", nd);
        return -1;
    }
    if (nd < 2) {
        return x;
    }
    return tc_graph_transpose(g, x, 0, 1, err, errlen);
}

int
tc_graph_unsqueeze(tc_graph *g, int x, int64_t dim, char *err, size_t errlen)
{
    if (check_node(g, x, "unsqueeze", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    int d;
    if (l->ndim >= TC_MAX_DIMS) {
        tc_set_err(err, errlen, "tcjit supports at most %d dims", TC_MAX_DIMS);
        return -1;
    }
    if (wrap_dim(dim, l->ndim + 1, &d, err, errlen) < 0) {
        return -1;
    }
    tc_node v;
    view_init(g, &v, "unsqueeze", x);
    v.layout.ndim = l->ndim + 1;
    for (int i = 0, j = 0; i < l->ndim + 1; i++) {
        if (i == d) {
            v.layout.sizes[i] = 1;
            v.layout.strides[i] = d >= l->ndim ? 1
                                  : l->sizes[d] * l->strides[d];
            continue;
        }
        v.layout.sizes[i] = l->sizes[j];
        v.layout.strides[i] = l->strides[j];
        v.vsrc[i] = j++;
        v.vcoef[i] = 1;
    }
    return push_view(g, &v, err, errlen);
}

int
tc_graph_squeeze(tc_graph *g, int x, int n, const int64_t *dims, char *err,
                 size_t errlen)
{
    if (check_node(g, x, "squeeze", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    unsigned mask = 0;
    if (dims_mask(l->ndim, n, dims, 0, &mask, err, errlen) < 0) {
        return -1;
    }
    tc_node v;
    view_init(g, &v, "squeeze", x);
    int k = 0;
    for (int d = 0; d < l->ndim; d++) {
        int drop = l->sizes[d] == 1 && (n < 0 || (mask & (1u << d)));
        if (drop) {
            continue;
        }
        v.layout.sizes[k] = l->sizes[d];
        v.layout.strides[k] = l->strides[d];
        v.vsrc[k] = d;
        v.vcoef[k++] = 1;
    }
    v.layout.ndim = k;
    return push_view(g, &v, err, errlen);
}

int
tc_graph_expand(tc_graph *g, int x, int n, const int64_t *sizes, char *err,
                size_t errlen)
{
    if (check_node(g, x, "expand", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    char want[160], have[160];
    tc_shape_text(want, sizeof(want), sizes, n);
    tc_shape_text(have, sizeof(have), l->sizes, l->ndim);
    if (n < l->ndim) {
        tc_set_err(err, errlen, "expand(torch.%sTensor{%s}, size=%s): the number "
                "of sizes provided (%d) must be greater or equal to the "
                "number of dimensions in the tensor (%d)",
                tc_dtype_scalar_type_name(g->nodes[x].dtype), have, want, n,
                l->ndim);
        return -1;
    }
    if (n > TC_MAX_DIMS) {
        tc_set_err(err, errlen, "tcjit supports at most %d dims", TC_MAX_DIMS);
        return -1;
    }
    tc_node v;
    view_init(g, &v, "expand", x);
    v.layout.ndim = n;
    for (int i = n - 1; i >= 0; i--) {
        int d = i - (n - l->ndim);
        int64_t sz = sizes[i];
        if (d < 0) {
            if (sz < 0) {
                tc_set_err(err, errlen, "The expanded size of the tensor (%lld) "
                        "isn't allowed in a leading, non-existing dimension "
                        "%d", (long long)sz, i);
                return -1;
            }
            /* eager's inferExpandGeometry: a new dim of size 1 gets the
             * stride it would have if contiguous with the next (a 0-d
             * tensor's expand is all zeros), a broadcast one 0 */
            v.layout.sizes[i] = sz;
            v.layout.strides[i] = sz == 1 && l->ndim > 0
                ? v.layout.sizes[i + 1] * v.layout.strides[i + 1] : 0;
            continue;
        }
        if (sz == -1) {
            sz = l->sizes[d];
        }
        if (l->sizes[d] == sz) {
            v.layout.sizes[i] = sz;
            v.layout.strides[i] = l->strides[d];
            v.vsrc[i] = d;
            v.vcoef[i] = 1;
        } else if (l->sizes[d] == 1) {
            if (sz < 0) {
                tc_set_err(err, errlen, "The expanded size of the tensor (%lld) "
                        "must be non-negative", (long long)sz);
                return -1;
            }
            v.layout.sizes[i] = sz;
            v.layout.strides[i] = 0;
        } else {
            tc_set_err(err, errlen, "The expanded size of the tensor (%lld) must "
                    "match the existing size (%lld) at non-singleton "
                    "dimension %d.  Target sizes: %s.  Tensor sizes: %s",
                    (long long)sz, (long long)l->sizes[d], i, want, have);
            return -1;
        }
    }
    return push_view(g, &v, err, errlen);
}

int
tc_graph_select(tc_graph *g, int x, int64_t dim, int64_t index, char *err,
                size_t errlen)
{
    if (check_node(g, x, "select", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    int d;
    if (l->ndim == 0) {
        tc_set_err(err, errlen, "select() cannot be applied to a 0-dim tensor.");
        return -1;
    }
    if (wrap_dim(dim, l->ndim, &d, err, errlen) < 0) {
        return -1;
    }
    if (index < -l->sizes[d] || index >= l->sizes[d]) {
        char have[160];
        tc_shape_text(have, sizeof(have), l->sizes, l->ndim);
        tc_set_err(err, errlen, "select(): index %lld out of range for tensor of "
                "size %s at dimension %d", (long long)index, have, d);
        return -1;
    }
    if (index < 0) {
        index += l->sizes[d];
    }
    tc_node v;
    view_init(g, &v, "select", x);
    v.offset += index * l->strides[d];
    v.voff[d] = index;
    int k = 0;
    for (int i = 0; i < l->ndim; i++) {
        if (i == d) {
            continue;
        }
        v.layout.sizes[k] = l->sizes[i];
        v.layout.strides[k] = l->strides[i];
        v.vsrc[k] = i;
        v.vcoef[k++] = 1;
    }
    v.layout.ndim = k;
    return push_view(g, &v, err, errlen);
}

int
tc_graph_slice(tc_graph *g, int x, int64_t dim, const int64_t *start,
               const int64_t *stop, int64_t step, char *err, size_t errlen)
{
    if (check_node(g, x, "slice", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    int d;
    if (l->ndim == 0) {
        tc_set_err(err, errlen, "slice() cannot be applied to a 0-dim tensor.");
        return -1;
    }
    if (wrap_dim(dim, l->ndim, &d, err, errlen) < 0) {
        return -1;
    }
    if (step <= 0) {
        tc_set_err(err, errlen, "slice step must be positive");
        return -1;
    }
    int64_t size = l->sizes[d];
    int64_t a = start ? *start : 0, b = stop ? *stop : INT64_MAX;
    /* at::native::slice normalisation */
    if (a < 0) {
        a += size;
    }
    if (b < 0) {
        b += size;
    }
    a = a < 0 ? 0 : a >= size ? size : a;
    b = b < a ? a : b >= size ? size : b;
    tc_node v;
    view_init(g, &v, "slice", x);
    v.layout = *l;
    v.layout.sizes[d] = (b - a + step - 1) / step;
    v.layout.strides[d] = l->strides[d] * step;
    v.offset += a * l->strides[d];
    for (int i = 0; i < l->ndim; i++) {
        v.vsrc[i] = i;
        v.vcoef[i] = i == d ? step : 1;
    }
    v.voff[d] = a;
    return push_view(g, &v, err, errlen);
}

int
tc_graph_narrow(tc_graph *g, int x, int64_t dim, int64_t start,
                int64_t length, char *err, size_t errlen)
{
    if (check_node(g, x, "narrow", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    int d;
    if (l->ndim == 0) {
        tc_set_err(err, errlen, "narrow() cannot be applied to a 0-dim tensor.");
        return -1;
    }
    if (wrap_dim(dim, l->ndim, &d, err, errlen) < 0) {
        return -1;
    }
    if (length < 0) {
        tc_set_err(err, errlen, "narrow(): length must be non-negative.");
        return -1;
    }
    int64_t size = l->sizes[d];
    if (start < -size || start > size) {
        tc_set_err(err, errlen, "start out of range (expected to be in range of "
                "[%lld, %lld], but got %lld)", (long long)-size,
                (long long)size, (long long)start);
        return -1;
    }
    if (start < 0) {
        start += size;
    }
    if (start + length > size) {
        tc_set_err(err, errlen, "start (%lld) + length (%lld) exceeds dimension "
                "size (%lld).", (long long)start, (long long)length,
                (long long)size);
        return -1;
    }
    int64_t stop = start + length;
    return tc_graph_slice(g, x, d, &start, &stop, 1, err, errlen);
}

/* at::infer_size_dv: resolve one -1. */
static int
infer_size(const int64_t *in, int n, int64_t numel, int64_t *out, char *err,
           size_t errlen)
{
    int64_t prod = 1;
    int infer = -1;
    char shape[200];
    for (int i = 0; i < n; i++) {
        if (in[i] == -1) {
            if (infer >= 0) {
                tc_set_err(err, errlen, "only one dimension can be inferred");
                return -1;
            }
            infer = i;
        } else if (in[i] >= 0) {
            prod *= in[i];
        } else {
            tc_set_err(err, errlen, "invalid shape dimension %lld",
                    (long long)in[i]);
            return -1;
        }
        out[i] = in[i];
    }
    tc_shape_text(shape, sizeof(shape), in, n);
    if (numel == prod || (infer >= 0 && prod > 0 && numel % prod == 0)) {
        if (infer >= 0) {
            if (prod == 0) {
                tc_set_err(err, errlen, "cannot reshape tensor of 0 elements "
                        "into shape %s because the unspecified dimension "
                        "size -1 can be any value and is ambiguous", shape);
                return -1;
            }
            out[infer] = numel / prod;
        }
        return 0;
    }
    if (infer >= 0 && prod == 0 && numel == 0) {
        tc_set_err(err, errlen, "cannot reshape tensor of 0 elements into shape "
                "%s because the unspecified dimension size -1 can be any "
                "value and is ambiguous", shape);
        return -1;
    }
    tc_set_err(err, errlen, "shape '%s' is invalid for input of size %lld",
            shape, (long long)numel);
    return -1;
}

/* at::detail::computeStride: 0 and strides of the view, or -1. */
int
tc_layout_view_strides(const tc_layout *old, const int64_t *shape, int n,
                       int64_t *st)
{
    int64_t numel = tc_layout_numel(old);
    if (numel == 0 && old->ndim == n &&
        !memcmp(old->sizes, shape, sizeof(int64_t) * n)) {
        memcpy(st, old->strides, sizeof(int64_t) * n);
        return 0;
    }
    if (numel == 0 || old->ndim == 0) {
        for (int d = n - 1; d >= 0; d--) {
            st[d] = d == n - 1 ? 1 : (shape[d + 1] > 1 ? shape[d + 1] : 1) *
                                         st[d + 1];
        }
        return 0;
    }
    int view_d = n - 1;
    int64_t chunk = old->strides[old->ndim - 1], tnumel = 1, vnumel = 1;
    for (int td = old->ndim - 1; td >= 0; td--) {
        tnumel *= old->sizes[td];
        if (td == 0 || (old->sizes[td - 1] != 1 &&
                        old->strides[td - 1] != tnumel * chunk)) {
            while (view_d >= 0 && (vnumel < tnumel || shape[view_d] == 1)) {
                st[view_d] = vnumel * chunk;
                vnumel *= shape[view_d];
                view_d--;
            }
            if (vnumel != tnumel) {
                return -1;
            }
            if (td > 0) {
                chunk = old->strides[td - 1];
                tnumel = 1;
                vnumel = 1;
            }
        }
    }
    return view_d == -1 ? 0 : -1;
}

/* Logical map of a reshape view: affine when every group of old dims with
 * equal product is a single old dim split into new dims. */
static void
reshape_map(tc_node *v, const tc_layout *old)
{
    const tc_layout *nw = &v->layout;
    int i = 0, j = 0;
    if (tc_layout_numel(old) == 0) {
        v->vmap_affine = 0;
        return;
    }
    while (i < old->ndim || j < nw->ndim) {
        if (i < old->ndim && old->sizes[i] == 1) {
            i++;
            continue;
        }
        if (j < nw->ndim && nw->sizes[j] == 1) {
            j++;
            continue;
        }
        if (i >= old->ndim || j >= nw->ndim) {
            break;
        }
        int i0 = i, j0 = j;
        int64_t po = old->sizes[i++], pn = nw->sizes[j++];
        while (po != pn) {
            if (po < pn) {
                po *= old->sizes[i++];
            } else {
                pn *= nw->sizes[j++];
            }
        }
        int nold = 0;
        for (int k = i0; k < i; k++) {
            nold += old->sizes[k] != 1;
        }
        if (nold != 1) {
            v->vmap_affine = 0;
            return;
        }
        int src = i0;
        while (old->sizes[src] == 1) {
            src++;
        }
        int64_t c = 1;
        for (int k = j - 1; k >= j0; k--) {
            if (nw->sizes[k] != 1) {
                v->vsrc[k] = src;
                v->vcoef[k] = c;
                c *= nw->sizes[k];
            }
        }
    }
}

static int
make_view(tc_graph *g, int x, int n, const int64_t *sizes, int copy_ok,
          char *err, size_t errlen)
{
    if (check_node(g, x, copy_ok ? "reshape" : "view", err, errlen) < 0) {
        return -1;
    }
    if (n > TC_MAX_DIMS) {
        tc_set_err(err, errlen, "tcjit supports at most %d dims", TC_MAX_DIMS);
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    int64_t shape[TC_MAX_DIMS], st[TC_MAX_DIMS];
    if (infer_size(sizes, n, tc_layout_numel(l), shape, err, errlen) < 0) {
        return -1;
    }
    if (tc_layout_view_strides(l, shape, n, st) < 0) {
        if (!copy_ok) {
            tc_set_err(err, errlen, "view size is not compatible with input "
                    "tensor's size and stride (at least one dimension spans "
                    "across two contiguous subspaces). Use .reshape(...) "
                    "instead.");
            return -1;
        }
        int c = tc_graph_op(g, "contiguous", 1, &x, TC_F32, err, errlen);
        if (c < 0) {
            return -1;
        }
        return make_view(g, c, n, shape, 0, err, errlen);
    }
    tc_node v;
    view_init(g, &v, "view", x);
    v.layout.ndim = n;
    memcpy(v.layout.sizes, shape, sizeof(int64_t) * n);
    memcpy(v.layout.strides, st, sizeof(int64_t) * n);
    reshape_map(&v, &g->nodes[x].layout);
    return push_view(g, &v, err, errlen);
}

int
tc_graph_view(tc_graph *g, int x, int n, const int64_t *sizes, char *err,
              size_t errlen)
{
    return make_view(g, x, n, sizes, 0, err, errlen);
}

int
tc_graph_reshape(tc_graph *g, int x, int n, const int64_t *sizes, char *err,
                 size_t errlen)
{
    return make_view(g, x, n, sizes, 1, err, errlen);
}

int
tc_graph_flatten(tc_graph *g, int x, int64_t start, int64_t end, char *err,
                 size_t errlen)
{
    if (check_node(g, x, "flatten", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    int a, b;
    if (wrap_dim(start, l->ndim, &a, err, errlen) < 0 ||
        wrap_dim(end, l->ndim, &b, err, errlen) < 0) {
        return -1;
    }
    if (a > b) {
        tc_set_err(err, errlen, "flatten() has invalid args: start_dim cannot "
                "come after end_dim");
        return -1;
    }
    if (l->ndim == 0) {
        int64_t one = 1;
        return tc_graph_reshape(g, x, 1, &one, err, errlen);
    }
    if (a == b) {
        return x;
    }
    int64_t shape[TC_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < l->ndim; d++) {
        if (d <= a || d > b) {
            shape[k++] = l->sizes[d];
        } else {
            shape[k - 1] *= l->sizes[d];
        }
    }
    return tc_graph_reshape(g, x, k, shape, err, errlen);
}

int
tc_graph_unflatten(tc_graph *g, int x, int64_t dim, int n,
                   const int64_t *sizes, char *err, size_t errlen)
{
    if (check_node(g, x, "unflatten", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    int d;
    if (wrap_dim(dim, l->ndim, &d, err, errlen) < 0) {
        return -1;
    }
    if (n == 0) {
        tc_set_err(err, errlen, "unflatten: sizes must be non-empty");
        return -1;
    }
    if (l->ndim - 1 + n > TC_MAX_DIMS) {
        tc_set_err(err, errlen, "tcjit supports at most %d dims", TC_MAX_DIMS);
        return -1;
    }
    int64_t part[TC_MAX_DIMS], shape[TC_MAX_DIMS];
    char tmp[8];
    if (infer_size(sizes, n, l->sizes[d], part, tmp, sizeof(tmp)) < 0) {
        char s[200];
        tc_shape_text(s, sizeof(s), sizes, n);
        tc_set_err(err, errlen, "unflatten: Provided sizes %s don't multiply up "
                "to the size of dim %d (%lld) in the input tensor", s, d,
                (long long)l->sizes[d]);
        return -1;
    }
    int k = 0;
    for (int i = 0; i < l->ndim; i++) {
        if (i == d) {
            for (int j = 0; j < n; j++) {
                shape[k++] = part[j];
            }
        } else {
            shape[k++] = l->sizes[i];
        }
    }
    return tc_graph_view(g, x, k, shape, err, errlen);
}

/* ---- reductions -------------------------------------------------------
 *
 * Primitive reductions (sum prod amax amin argmax argmin any all) are one
 * node each; mean, var, std, logsumexp, norm, softmax, log_softmax,
 * layer_norm and rms_norm decompose into primitives plus pointwise ops, so
 * the scheduler only sees accumulators and elementwise math.
 */

static int
resolve_dims_dup(const tc_layout *l, const tc_reduce_args *a, unsigned *mask,
                 int allow_dup, char *err, size_t errlen);

static int
resolve_dims(const tc_layout *l, const tc_reduce_args *a, unsigned *mask,
             char *err, size_t errlen)
{
    return resolve_dims_dup(l, a, mask, 0, err, errlen);
}

static int
resolve_dims_dup(const tc_layout *l, const tc_reduce_args *a, unsigned *mask,
                 int allow_dup, char *err, size_t errlen)
{
    if (a->ndims <= 0) {
        *mask = l->ndim ? (1u << l->ndim) - 1 : 0;
        return 0;
    }
    return dims_mask(l->ndim, a->ndims, a->dims, allow_dup, mask, err,
                     errlen);
}

static int64_t
reduced_numel(const tc_layout *l, unsigned mask)
{
    int64_t n = 1;
    for (int d = 0; d < l->ndim; d++) {
        n *= (mask & (1u << d)) ? l->sizes[d] : 1;
    }
    return n;
}

static int
reduce_node(tc_graph *g, const char *op, int x, unsigned mask, int keepdim,
            tc_dtype out, char *err, size_t errlen)
{
    const tc_layout *l = &g->nodes[x].layout;
    tc_node n;
    tc_node_init(&n, TC_NODE_OP, out);
    n.op = tc_op_lookup(op);
    n.nin = 1;
    n.in[0] = x;
    n.red_mask = mask;
    n.keepdim = keepdim;
    int k = 0;
    for (int d = 0; d < l->ndim; d++) {
        if (!(mask & (1u << d))) {
            n.layout.sizes[k++] = l->sizes[d];
        } else if (keepdim) {
            n.layout.sizes[k++] = 1;
        }
    }
    n.layout.ndim = k;
    tc_layout_contiguous(&n.layout); /* eager allocates reductions so */
    return tc_graph_push_op(g, &n, err, errlen);
}

/* Pointwise helpers for decompositions (errors propagate as -1). */
static int
pw(tc_graph *g, const char *name, int a, int b, char *err, size_t errlen)
{
    int in[2] = {a, b};
    if (a < 0 || (b < 0 && b != -2)) {
        return -1;
    }
    return tc_graph_op(g, name, b == -2 ? 1 : 2, in, TC_F32, err, errlen);
}

#define PW1(name, a) pw(g, name, a, -2, err, errlen)
#define PW2(name, a, b) pw(g, name, a, b, err, errlen)

static int
cast_node(tc_graph *g, int x, tc_dtype dt, char *err, size_t errlen)
{
    if (x < 0) {
        return -1;
    }
    return tc_graph_op(g, "to", 1, &x, dt, err, errlen);
}

/* "amax(): Expected reduction dim ..." checks of max-like reductions. */
static int
check_nonempty(const tc_layout *l, unsigned mask, int all, const char *name,
               char *err, size_t errlen)
{
    if (all && tc_layout_numel(l) == 0) {
        tc_set_err(err, errlen, "%s(): Expected reduction dim to be specified "
                "for input.numel() == 0.%s", name,
                strncmp(name, "arg", 3) ? " Specify the reduction dim with "
                "the 'dim' argument." : "");
        return -1;
    }
    for (int d = 0; d < l->ndim; d++) {
        if ((mask & (1u << d)) && l->sizes[d] == 0) {
            tc_set_err(err, errlen, "%s(): Expected reduction dim %d to have "
                    "non-zero size.", name, d);
            return -1;
        }
    }
    return 0;
}

static int
float_only(const tc_graph *g, int x, const char *msg, char *err,
           size_t errlen)
{
    tc_dtype dt = g->nodes[x].dtype;
    if (!tc_dtype_is_float(dt)) {
        tc_set_err(err, errlen, msg, tc_dtype_scalar_type_name(dt));
        return -1;
    }
    return 0;
}

static int
reduce_mean(tc_graph *g, int x, unsigned mask, int keepdim, char *err,
            size_t errlen)
{
    const tc_layout *l = &g->nodes[x].layout;
    int64_t n = reduced_numel(l, mask);
    tc_dtype dt = g->nodes[x].dtype;
    if (tc_dtype_is_reduced_float(dt)) {
        /* ATen sums and divides a float16/bfloat16 mean in float32 and
         * rounds once: a sum past the dtype's max is no inf */
        int m = reduce_mean(g, cast_node(g, x, TC_F32, err, errlen), mask,
                            keepdim, err, errlen);
        return cast_node(g, m, dt, err, errlen);
    }
    int s = reduce_node(g, "sum", x, mask, keepdim, dt, err, errlen);
    return PW2("div", s, tc_graph_scalar_int(g, n));
}

/* squeeze dims of mask from a keepdim result (view). */
static int
squeeze_mask(tc_graph *g, int x, unsigned mask, int ndim, char *err,
             size_t errlen)
{
    int64_t dims[TC_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < ndim; d++) {
        if (mask & (1u << d)) {
            dims[n++] = d;
        }
    }
    return n ? tc_graph_squeeze(g, x, n, dims, err, errlen) : x;
}

/* x minus its mean over mask (keepdim), exactly 0 where eager's Welford
 * gives 0.  The two uses of x can be computed differently (a recomputed
 * producer contracted into an FMA in one kernel and not in the other), so
 * over one element the difference is x - x itself (NaN for inf / NaN).
 * A float32 mean is summed in float64: a row of equal values then has
 * exactly that mean (in float32, 3 * x / 3 can be x's neighbour, which
 * layer_norm's rsqrt(eps) turns into 1e-4). */
static int
centered(tc_graph *g, int x, unsigned mask, char *err, size_t errlen)
{
    tc_dtype dt = g->nodes[x].dtype;
    if (reduced_numel(&g->nodes[x].layout, mask) == 1) {
        return PW2("sub", x, x);
    }
    if (dt == TC_F64 && reduced_numel(&g->nodes[x].layout, mask) > 0) {
        /* nor is a float64 mean of equal values always that value (fuzz
         * seed 213701: std of nine equal doubles 1.2e-16, not 0); shifted
         * by the row's first element, equal values are exactly 0, and the
         * variance does not change with the shift */
        int k = x;
        for (int d = 0; d < g->nodes[x].layout.ndim && k >= 0; d++) {
            if (mask & (1u << d)) {
                k = tc_graph_narrow(g, k, d, 0, 1, err, errlen);
            }
        }
        int y = PW2("sub", x, k);
        return y < 0 ? -1
             : PW2("sub", y, reduce_mean(g, y, mask, 1, err, errlen));
    }
    if (dt != TC_F32) {
        return PW2("sub", x, reduce_mean(g, x, mask, 1, err, errlen));
    }
    int m = reduce_mean(g, cast_node(g, x, TC_F64, err, errlen), mask, 1,
                        err, errlen);
    return PW2("sub", x, cast_node(g, m, TC_F32, err, errlen));
}

static int
reduce_var(tc_graph *g, int x, unsigned mask, int keepdim, double corr,
           int is_std, char *err, size_t errlen)
{
    const tc_layout *l = &g->nodes[x].layout;
    tc_dtype dt = g->nodes[x].dtype;
    double n = (double)reduced_numel(l, mask) - corr;
    /* Eager's CPU kernels accumulate float32 / half variances in double
     * (WelfordOps<scalar_t, double>, std_var_all_cpu): squares of values
     * above ~1e19 stay finite, and std of values near 1e30 is finite. */
    int xd = dt == TC_F64 ? x : cast_node(g, x, TC_F64, err, errlen);
    if (xd < 0) {
        return -1;
    }
    int d = centered(g, xd, mask, err, errlen);
    int ss = d < 0 ? -1 : reduce_node(g, "sum", PW2("mul", d, d), mask,
                                      keepdim, TC_F64, err, errlen);
    int v = PW2("div", ss, tc_graph_scalar_float(g, n > 0 ? n : 0));
    v = is_std ? PW1("sqrt0", v) : v;
    return dt == TC_F64 ? v : cast_node(g, v, dt, err, errlen);
}

/* v (float32) rounded to dt and back: the value eager's op of dt stores
 * (a fused kernel would keep float32 otherwise) */
static int
rounded(tc_graph *g, int v, tc_dtype dt, char *err, size_t errlen)
{
    return cast_node(g, cast_node(g, v, dt, err, errlen), TC_F32, err,
                     errlen);
}

/* at::logsumexp of float16 / bfloat16 is composite: amax, sub, exp, sum
 * (float32 accumulation), log_ and add_, each rounded to the input's
 * dtype; so is this (a float16 logsumexp of log_softmax's output is then
 * eager's 0, not 1e-4). */
static int
reduce_logsumexp_half(tc_graph *g, int x, unsigned mask, int keepdim,
                      char *err, size_t errlen)
{
    tc_dtype dt = g->nodes[x].dtype;
    int ndim = g->nodes[x].layout.ndim;
    int m = reduce_node(g, "amax", x, mask, 1, dt, err, errlen);
    int inf = PW2("eq", PW1("abs", m), tc_graph_scalar_float(g, INFINITY));
    int in[3] = {inf, tc_graph_scalar_float(g, 0.0), m};
    int mz = inf < 0 ? -1 : tc_graph_op(g, "where", 3, in, TC_F32, err,
                                        errlen);
    int d = cast_node(g, PW2("sub", x, mz), TC_F32, err, errlen);
    int e = rounded(g, PW1("exp", d), dt, err, errlen);
    int s = e < 0 ? -1 : reduce_node(g, "sum", e, mask, keepdim, TC_F32,
                                     err, errlen);
    int l = rounded(g, PW1("log", rounded(g, s, dt, err, errlen)), dt, err,
                    errlen);
    int ms = keepdim || mz < 0 ? mz : squeeze_mask(g, mz, mask, ndim, err,
                                                   errlen);
    return cast_node(g, PW2("add", l, cast_node(g, ms, TC_F32, err, errlen)),
                     dt, err, errlen);
}

static int
reduce_logsumexp(tc_graph *g, int x, unsigned mask, int keepdim, char *err,
                 size_t errlen)
{
    if (!tc_dtype_is_float(g->nodes[x].dtype)) {
        x = cast_node(g, x, TC_F32, err, errlen);
        if (x < 0) {
            return -1;
        }
    }
    const tc_layout *l = &g->nodes[x].layout;
    tc_dtype dt = g->nodes[x].dtype;
    int ndim = l->ndim;   /* l dangles once a node is added (realloc) */
    if (reduced_numel(l, mask) == 0 || tc_layout_numel(l) == 0) {
        int s = reduce_node(g, "sum", PW1("exp", x), mask, keepdim, dt, err,
                            errlen);
        return PW1("log", s);
    }
    if (tc_dtype_is_reduced_float(dt)) {
        return reduce_logsumexp_half(g, x, mask, keepdim, err, errlen);
    }
    /* at::logsumexp: maxes with +-inf replaced by 0; the gradient does
     * not flow through them (logsumexp_backward: g * exp(x - result)),
     * so the backward is one pass over x, not two reductions more */
    int m = reduce_node(g, "amax", x, mask, 1, dt, err, errlen);
    if (m >= 0) {
        g->nodes[m].requires_grad = TC_GRAD_STOP;
    }
    int inf = PW2("eq", PW1("abs", m), tc_graph_scalar_float(g, INFINITY));
    int in[3] = {inf, tc_graph_scalar_float(g, 0.0), m};
    int mz = inf < 0 ? -1 : tc_graph_op(g, "where", 3, in, TC_F32, err,
                                        errlen);
    int e = PW1("exp", PW2("sub", x, mz));
    int s = e < 0 ? -1 : reduce_node(g, "sum", e, mask, keepdim, dt, err,
                                     errlen);
    int ms = keepdim || mz < 0 ? mz : squeeze_mask(g, mz, mask, ndim, err,
                                                   errlen);
    return PW2("add", PW1("log", s), ms);
}

/* Row i's loss, log(sum_j exp(x_ij - m_i)) + (m_i - x_it), with m_i the
 * row's max as eager's log_softmax has it: no guard for infinite maxes
 * (a row with a +inf score, or of -inf only, is NaN, as eager's), and
 * (m_i - x_it) added last: with scores of 1e30 the loss is still the
 * log of the sum, not 0.  nll is -x_it (0 where ignored).  The gradient
 * does not flow through m (its two uses cancel), so the backward is
 * exp(x - m) / sum minus the one-hot: one pass over the scores. */
static int
cross_entropy_rows(tc_graph *g, int x, int nll, char *err, size_t errlen)
{
    int m = reduce_node(g, "amax", x, 1u << 1, 1, g->nodes[x].dtype, err,
                        errlen);
    if (m < 0) {
        return -1;
    }
    g->nodes[m].requires_grad = TC_GRAD_STOP;
    int e = PW1("exp", PW2("sub", x, m));
    int s = e < 0 ? -1 : reduce_node(g, "sum", e, 1u << 1, 0,
                                     g->nodes[x].dtype, err, errlen);
    int ms = squeeze_mask(g, m, 1u << 1, 2, err, errlen);
    return PW2("add", PW1("log", s), PW2("add", ms, nll));
}

/* F.cross_entropy of [N, C] float scores with class-index targets, no
 * weight and no smoothing (reduction 0 none, 1 mean, 2 sum), as each
 * row's log-sum-exp minus its target's score: the sum a row reduction
 * of ours, the score an nll_loss extern over the scores themselves
 * (-x[i, t[i]], 0 where t[i] is ignore_index), which checks the targets
 * as eager's cross_entropy does.  The backward is then exp(x - max) /
 * sum minus the one-hot, one pass over the scores from the saved row
 * statistics; the extern's recomputed the softmax (three).  float16 /
 * bfloat16 scores take logsumexp's composite (its roundings). */
int
tc_graph_cross_entropy(tc_graph *g, int x, int t, int reduction,
                       int64_t ignore_index, char *err, size_t errlen)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    xa[TC_XA_LOSS_REDUCTION] = 0;
    xa[TC_XA_LOSS_IGNORE_INDEX] = ignore_index;
    int in[3] = {x, t, -1};
    int nll = tc_graph_extern(g, "nll_loss", 2, in, xa, 0.0, err, errlen);
    int valid = PW2("ne", t, tc_graph_scalar_int(g, ignore_index));
    int row = -1;
    const tc_layout *l = &g->nodes[x].layout;
    if (nll >= 0 && !tc_dtype_is_reduced_float(g->nodes[x].dtype)
        && reduced_numel(l, 1u << 1) > 0 && tc_layout_numel(l) > 0) {
        in[0] = valid;
        in[1] = cross_entropy_rows(g, x, nll, err, errlen);
        in[2] = tc_graph_scalar_float(g, 0.0);
        row = valid < 0 || in[1] < 0 ? -1 : tc_graph_op(g, "where", 3, in,
                                                        TC_F32, err, errlen);
    }
    else if (nll >= 0) {
        int lse = reduce_logsumexp(g, x, 1u << 1, 0, err, errlen);
        in[0] = valid;
        in[1] = lse;
        in[2] = tc_graph_scalar_float(g, 0.0);
        int kept = valid < 0 || lse < 0 ? -1 : tc_graph_op(g, "where", 3, in,
                                                           TC_F32, err,
                                                           errlen);
        row = PW2("add", kept, nll);
    }
    if (row < 0 || reduction == 0) {
        return row;
    }
    int total = reduce_node(g, "sum", row, 1u, 0, g->nodes[row].dtype, err,
                            errlen);
    if (reduction == 2) {
        return total;
    }
    int count = reduce_node(g, "sum", valid, 1u, 0, TC_I64, err, errlen);
    return PW2("div", total, count);
}

int
tc_graph_reduce(tc_graph *g, const char *name, int x,
                const tc_reduce_args *a, char *err, size_t errlen)
{
    if (check_node(g, x, name, err, errlen) < 0) {
        return -1;
    }
    unsigned mask;
    int all = a->ndims <= 0;
    const tc_layout *l = &g->nodes[x].layout;
    tc_dtype dt = g->nodes[x].dtype;
    int is_arg = !strcmp(name, "argmax") || !strcmp(name, "argmin");
    if ((is_arg || !strcmp(name, "prod")) && a->ndims > 1) {
        /* (torch.prod raises TypeError for a tuple: the call runs eagerly) */
        tc_set_err(err, errlen, "%s: dim must be a single int or None", name);
        return -1;
    }
    /* torch checks max-like reductions for bool / empty dims before the
     * dims themselves (range in order, then duplicates) */
    if (is_arg && dt == TC_BOOL) {
        tc_set_err(err, errlen, "%s(): does not support bool input", name);
        return -1;
    }
    if (!strcmp(name, "amax") || !strcmp(name, "amin") || is_arg ||
        !strcmp(name, "max") || !strcmp(name, "min")) {
        if (all && check_nonempty(l, 0, 1, name, err, errlen) < 0) {
            return -1;
        }
        for (int i = 0; i < a->ndims; i++) {
            tc_reduce_args one = *a;
            one.ndims = 1;
            one.dims[0] = a->dims[i];
            if (resolve_dims_dup(l, &one, &mask, 1, err, errlen) < 0) {
                return -1;
            }
            for (int d = 0; d < l->ndim; d++) {
                if ((mask & (1u << d)) && l->sizes[d] == 0) {
                    tc_set_err(err, errlen, "%s(): Expected reduction dim %lld "
                            "to have non-zero size.", name,
                            is_arg ? (long long)d : (long long)a->dims[i]);
                    return -1;
                }
            }
        }
    }
    if (resolve_dims(l, a, &mask, err, errlen) < 0) {
        return -1;
    }
    int kd = a->keepdim;
    if (!strcmp(name, "sum") || !strcmp(name, "prod")) {
        if (a->has_dtype) {
            x = cast_node(g, x, a->dtype, err, errlen);
            dt = a->dtype;
        } else if (!tc_dtype_is_float(dt)) {
            dt = TC_I64;
        }
        return x < 0 ? -1 : reduce_node(g, name, x, mask, kd, dt, err, errlen);
    }
    if (!strcmp(name, "mean")) {
        if (a->has_dtype && !tc_dtype_is_float(a->dtype)) {
            tc_set_err(err, errlen, "mean(): could not infer output dtype. "
                    "Optional dtype must be either a floating point or "
                    "complex dtype. Got: %s",
                    tc_dtype_scalar_type_name(a->dtype));
            return -1;
        }
        if (a->has_dtype && tc_dtype_is_reduced_float(a->dtype)
            && !g->cuda) {
            /* the CPU sums the input in float32 (not first rounded to
             * dtype), divides, rounds once */
            x = cast_node(g, x, TC_F32, err, errlen);
            x = x < 0 ? -1 : reduce_mean(g, x, mask, kd, err, errlen);
            return x < 0 ? -1 : cast_node(g, x, a->dtype, err, errlen);
        }
        if (a->has_dtype) {
            x = cast_node(g, x, a->dtype, err, errlen);
        } else if (float_only(g, x, "mean(): could not infer output dtype. "
                              "Input dtype must be either a floating point "
                              "or complex dtype. Got: %s", err, errlen) < 0) {
            return -1;
        }
        return x < 0 ? -1 : reduce_mean(g, x, mask, kd, err, errlen);
    }
    if (!strcmp(name, "amax") || !strcmp(name, "amin") ||
        !strcmp(name, "max") || !strcmp(name, "min")) {
        int is_max = name[1] == 'm' ? name[2] == 'a' : name[1] == 'a';
        if (check_nonempty(l, mask, all, name, err, errlen) < 0) {
            return -1;
        }
        return reduce_node(g, is_max ? "amax" : "amin", x, mask, kd, dt, err,
                           errlen);
    }
    if (is_arg) {
        if (dt == TC_BOOL) {
            tc_set_err(err, errlen, "%s(): does not support bool input", name);
            return -1;
        }
        if (check_nonempty(l, mask, all, name, err, errlen) < 0) {
            return -1;
        }
        return reduce_node(g, name, x, mask, kd, TC_I64, err, errlen);
    }
    if (!strcmp(name, "any") || !strcmp(name, "all")) {
        return reduce_node(g, name, x, mask, kd, dt == TC_U8 ? TC_U8 : TC_BOOL,
                           err, errlen);
    }
    if (!strcmp(name, "var") || !strcmp(name, "std")) {
        if (float_only(g, x, "std and var only support floating point and "
                       "complex dtypes%.0s", err, errlen) < 0) {
            return -1;
        }
        return reduce_var(g, x, mask, kd, a->correction, name[0] == 's', err,
                          errlen);
    }
    if (!strcmp(name, "logsumexp")) {
        return reduce_logsumexp(g, x, mask, kd, err, errlen);
    }
    if (!strcmp(name, "norm")) {
        if (float_only(g, x, "linalg.vector_norm: Expected a floating point "
                       "or complex tensor as input. Got %s", err,
                       errlen) < 0) {
            return -1;
        }
        if (a->has_dtype && !tc_dtype_is_float(a->dtype)) {
            tc_set_err(err, errlen, "linalg.vector_norm: dtype should be floating "
                    "point or complex, but got %s",
                    tc_dtype_scalar_type_name(a->dtype));
            return -1;
        }
        if (a->has_dtype) {
            x = cast_node(g, x, a->dtype, err, errlen);
            if (x < 0) {
                return -1;
            }
        }
        dt = g->nodes[x].dtype;
        if (a->p != 1 && a->p != 2) {
            tc_set_err(err, errlen, "tcjit supports norm with p=1 or p=2 "
                       "only");
            return -1;
        }
        /* eager: float16 / bfloat16 in float32 (no overflow of x * x),
         * rounded once; the norm of one element is its abs, which does not
         * overflow / underflow as sqrt(x * x) does (1e30 in float32) */
        tc_dtype ct = tc_dtype_opmath(dt);
        int r;
        x = cast_node(g, x, ct, err, errlen);
        if (x < 0) {
            return -1;
        }
        if (a->p == 1 || reduced_numel(&g->nodes[x].layout, mask) == 1) {
            r = reduce_node(g, "sum", PW1("abs", x), mask, kd, ct, err,
                            errlen);
        } else {
            int sq = PW2("mul", x, x);
            int s = sq < 0 ? -1 : reduce_node(g, "sum", sq, mask, kd, ct, err,
                                              errlen);
            r = PW1("sqrt0", s);
        }
        return cast_node(g, r, dt, err, errlen);
    }
    tc_set_err(err, errlen, "tcjit does not support the reduction '%s'", name);
    return -1;
}

int
tc_graph_max_dim(tc_graph *g, int is_max, int x, int64_t dim, int keepdim,
                 int *values, int *indices, char *err, size_t errlen)
{
    const char *name = is_max ? "max" : "min";
    if (check_node(g, x, name, err, errlen) < 0) {
        return -1;
    }
    tc_reduce_args a = {1, {dim}, keepdim, 0, TC_F32, 1, 2};
    const tc_layout *l = &g->nodes[x].layout;
    unsigned mask;
    if (resolve_dims(l, &a, &mask, err, errlen) < 0 ||
        check_nonempty(l, mask, 0, name, err, errlen) < 0) {
        return -1;
    }
    *values = reduce_node(g, is_max ? "amax" : "amin", x, mask, keepdim,
                          g->nodes[x].dtype, err, errlen);
    if (*values >= 0 && g->nodes[*values].kind == TC_NODE_OP
        && tc_ops[g->nodes[*values].op].kind == TC_OPK_REDUCTION) {
        g->nodes[*values].first_index = 1;
    }
    *indices = reduce_node(g, is_max ? "argmax" : "argmin", x, mask, keepdim,
                           TC_I64, err, errlen);
    return *values < 0 || *indices < 0 ? -1 : *values;
}

int
tc_graph_softmax(tc_graph *g, int x, int64_t dim, int has_dtype,
                 tc_dtype dtype, int log, char *err, size_t errlen)
{
    if (check_node(g, x, log ? "log_softmax" : "softmax", err, errlen) < 0) {
        return -1;
    }
    const tc_layout *l = &g->nodes[x].layout;
    int d;
    if (wrap_dim(dim, l->ndim, &d, err, errlen) < 0) {
        return -1;
    }
    if (has_dtype) {
        x = cast_node(g, x, dtype, err, errlen);
        if (x < 0) {
            return -1;
        }
        l = &g->nodes[x].layout;
    }
    tc_dtype dt = g->nodes[x].dtype;
    if (!tc_dtype_is_float(dt)) {
        tc_set_err(err, errlen, "\"%ssoftmax_%skernel_impl\" not implemented for "
                "'%s'", log ? "log_" : "",
                l->ndim == 0 || d == l->ndim - 1 ? "lastdim_" : "",
                tc_dtype_scalar_type_name(dt));
        return -1;
    }
    unsigned mask = l->ndim ? 1u << d : 0;
    if (tc_layout_numel(l) == 0) {
        return PW1("contiguous", x);
    }
    /* eager: float16 / bfloat16 in float32, rounded once (a bfloat16
     * log(sum) of 1.0036 would be 0), as the eager replay of this graph
     * (backend="eager") must, which runs each node in its own dtype --
     * except ATen's CPU log_softmax over the last dim, which keeps the row
     * sum and its log in the input's dtype (_vec_log_softmax_lastdim). */
    int lastdim = l->ndim == 0 || d == l->ndim - 1;
    tc_dtype ct = !g->cuda && log && lastdim ? dt : tc_dtype_opmath(dt);
    if (ct != dt) {
        x = cast_node(g, x, ct, err, errlen);
    }
    int m = x < 0 ? -1 : reduce_node(g, "amax", x, mask, 1, ct, err, errlen);
    int sh = PW2("sub", x, m);
    int e = PW1("exp", sh);
    int s = e < 0 ? -1 : reduce_node(g, "sum", e, mask, 1, ct, err, errlen);
    /* eager multiplies by the reciprocal of the row sum (ATen's
     * _vec_softmax): one division per row, not per element */
    int r = log ? PW2("sub", sh, PW1("log", s))
                : PW2("mul", e, PW1("reciprocal", s));
    if (r >= 0 && ct != dt) {
        r = cast_node(g, r, dt, err, errlen);
    }
    if (r >= 0 && !layout_is_canonical(&g->nodes[r].layout)) {
        r = PW1("contiguous", r); /* eager: at::empty of the sizes */
    }
    return r;
}

static int
check_norm_shape(const tc_graph *g, int x, int n, const int64_t *shape,
                 int rms, unsigned *mask, char *err, size_t errlen)
{
    const tc_layout *l = &g->nodes[x].layout;
    if (n < 1) {
        tc_set_err(err, errlen, "Expected normalized_shape to be at least "
                "1-dimensional, i.e., containing at least one element, but "
                "got normalized_shape = []");
        return -1;
    }
    int ok = n <= l->ndim;
    for (int i = 0; ok && i < n; i++) {
        ok = l->sizes[l->ndim - n + i] == shape[i];
    }
    if (!ok) {
        char s[200], in[200], star[210];
        tc_shape_text(s, sizeof(s), shape, n);
        tc_shape_text(in, sizeof(in), l->sizes, l->ndim);
        snprintf(star, sizeof(star), "[*%s%s", rms ? "" : ", ", s + 1);
        tc_set_err(err, errlen, "Given normalized_shape=%s, expected input with "
                "shape %s, but got input of size%s", s, star, in);
        return -1;
    }
    *mask = 0;
    for (int i = 0; i < n; i++) {
        *mask |= 1u << (l->ndim - n + i);
    }
    return 0;
}

/* Weight / bias (or -1) of a norm: eager wants normalized_shape exactly,
 * no broadcasting. */
static int
check_norm_param(const tc_graph *g, int p, const char *what, int n,
                 const int64_t *shape, char *err, size_t errlen)
{
    if (p < 0) {
        return 0;
    }
    const tc_layout *l = &g->nodes[p].layout;
    if (l->ndim == n && !memcmp(l->sizes, shape, sizeof(int64_t) * n)) {
        return 0;
    }
    char want[200], have[200];
    tc_shape_text(want, sizeof(want), shape, n);
    tc_shape_text(have, sizeof(have), l->sizes, l->ndim);
    tc_set_err(err, errlen, "Expected %s to be of same shape as "
            "normalized_shape, but got %s of shape %s and normalized_shape = %s",
            what, what, have, want);
    return -1;
}

int
tc_graph_layer_norm(tc_graph *g, int x, int n, const int64_t *shape,
                    int weight, int bias, double eps, char *err,
                    size_t errlen)
{
    unsigned mask;
    if (check_node(g, x, "layer_norm", err, errlen) < 0 ||
        check_norm_shape(g, x, n, shape, 0, &mask, err, errlen) < 0 ||
        check_norm_param(g, weight, "weight", n, shape, err, errlen) < 0 ||
        check_norm_param(g, bias, "bias", n, shape, err, errlen) < 0) {
        return -1;
    }
    if (!tc_dtype_is_float(g->nodes[x].dtype)) {
        tc_set_err(err, errlen, "\"LayerNormKernelImpl\" not implemented for "
                "'%s'", tc_dtype_scalar_type_name(g->nodes[x].dtype));
        return -1;
    }
    tc_dtype dt = g->nodes[x].dtype;
    /* eager computes float16 / bfloat16 norms in float32 and rounds once
     * (LayerNormKernelImplInternal<T, float>); so does replaying this
     * graph eagerly (backend="eager") */
    x = cast_node(g, x, tc_dtype_opmath(dt), err, errlen);
    int xc = x < 0 ? -1 : centered(g, x, mask, err, errlen);
    int var = xc < 0 ? -1 : reduce_mean(g, PW2("mul", xc, xc), mask, 1, err,
                                        errlen);
    int rstd = PW1("rsqrt", PW2("add", var, tc_graph_scalar_float(g, eps)));
    int y = PW2("mul", xc, rstd);
    if (weight >= 0) {
        y = PW2("mul", y, weight);
    }
    if (bias >= 0) {
        y = PW2("add", y, bias);
    } else if (weight >= 0) {
        /* eager adds a zero bias: 0 * a negative weight is +0, not -0 */
        y = PW2("add", y, tc_graph_scalar_float(g, 0.0));
    }
    if (y >= 0 && g->nodes[y].dtype != dt) {
        /* float32 weight/bias of a half x: eager's result keeps x's dtype */
        y = cast_node(g, y, dt, err, errlen);
    }
    if (y >= 0 && !layout_is_canonical(&g->nodes[y].layout)) {
        y = PW1("contiguous", y); /* eager: at::empty of the sizes */
    }
    return y;
}

static int strides_like_channels_last(const tc_layout *l);

/* Whether torch 2.11's CUDA rms_norm takes its scalar (not vectorized)
 * path for x: a double, a row length not a multiple of 4, or rows that do
 * not start 4-element aligned -- x is used as is when contiguous, so a
 * view at an odd offset of a fresh tensor is misaligned.  A graph input's
 * own data pointer is taken to be aligned (fresh tensors are; its offset
 * is not guarded). */
static int
cuda_norm_is_scalar(const tc_graph *g, int x, unsigned mask)
{
    const tc_node *n = &g->nodes[x];
    return n->dtype == TC_F64 || reduced_numel(&n->layout, mask) % 4 != 0
           || (n->view_base >= 0 && layout_is_contiguous(&n->layout)
               && n->offset % 4 != 0);
}

int
tc_graph_rms_norm(tc_graph *g, int x, int n, const int64_t *shape,
                  int weight, int has_eps, double eps, char *err,
                  size_t errlen)
{
    unsigned mask;
    if (check_node(g, x, "rms_norm", err, errlen) < 0) {
        return -1;
    }
    if (n >= 1 && g->nodes[x].layout.ndim == 0) {
        tc_set_err(err, errlen, "Input tensor must have at least 1 dimensions, "
                "but got 0");
        return -1;
    }
    if (check_norm_shape(g, x, n, shape, 1, &mask, err, errlen) < 0 ||
        check_norm_param(g, weight, "weight", n, shape, err, errlen) < 0) {
        return -1;
    }
    tc_dtype dt = g->nodes[x].dtype;
    /* the composite keeps the layout of a channels-last x (below) */
    int keep_cl = strides_like_channels_last(&g->nodes[x].layout);
    /* torch 2.11 on CUDA: a fused kernel where the weight (if any) has
     * x's dtype, else the composite decomposition (as on the CPU) */
    int fused = g->cuda && (weight < 0 || g->nodes[weight].dtype == dt);
    int scalar_path = fused && cuda_norm_is_scalar(g, x, mask);
    if (!tc_dtype_is_float(dt)) {
        tc_set_err(err, errlen, "\"rms_norm\" not implemented for '%s'",
                tc_dtype_scalar_type_name(dt));
        return -1;
    }
    /* eager: float16 / bfloat16 in float32 (and its epsilon by default),
     * times the weight, rounded to x's dtype once */
    x = cast_node(g, x, tc_dtype_opmath(dt), err, errlen);
    if (!has_eps) {
        eps = dt == TC_F64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
    }
    int ms = x < 0 ? -1 : reduce_mean(g, PW2("mul", x, x), mask, 1, err,
                                      errlen);
    if (ms >= 0 && scalar_path && reduced_numel(&g->nodes[x].layout,
                                                 mask) > 0) {
        /* torch 2.11's CUDA kernel accumulates rows it cannot vectorize
         * with Welford's update, so an infinite element makes its whole
         * row NaN; an overflowing square does not.  0 * amax(|x|) is NaN
         * exactly then (empty rows are NaN already; amax of them raises) */
        int big = reduce_node(g, "amax", PW1("abs", x), mask, 1,
                              g->nodes[x].dtype, err, errlen);
        ms = PW2("add", ms, PW2("mul", big, tc_graph_scalar_float(g, 0.0)));
    }
    int r = PW1("rsqrt", PW2("add", ms, tc_graph_scalar_float(g, eps)));
    int y = PW2("mul", x, r);
    if (weight >= 0) {
        y = PW2("mul", y, weight);
    }
    if (y >= 0 && g->nodes[y].dtype != dt) {
        y = cast_node(g, y, dt, err, errlen);
    }
    /* On CUDA the fused kernel allocates the output (torch 2.11), so even
     * the strides of its size-1 dims are fresh.  The composite (the CPU,
     * and CUDA with a weight of another dtype) ends in
     * result.contiguous() unless x.suggest_memory_format() is channels
     * last: then the result keeps the layout its pointwise ops gave it
     * (from x's), and contiguous() of an is_contiguous() result is the
     * result itself, size-1 strides and all.  The cast to x's dtype comes
     * after it in eager; a cast keeps a dense layout, so the order does
     * not show. */
    if (y >= 0 && (fused ? !layout_is_canonical(&g->nodes[y].layout)
                         : !keep_cl
                           && !layout_is_contiguous(&g->nodes[y].layout))) {
        y = PW1("contiguous", y);
    }
    return y;
}

/* ---- creation ops, tril / triu, normalize ------------------------------ */

/* c10's is_channels_last_strides_2d / _3d: the test behind
 * suggest_memory_format. */
static int
strides_like_channels_last(const tc_layout *l)
{
    const int *order = channels_last_order(l->ndim);
    if (order == NULL || l->strides[1] == 0) {
        return 0;
    }
    int64_t min = 0;
    for (int i = 0; i < l->ndim; i++) {
        int d = order[i];
        if (l->sizes[d] == 0 || l->strides[d] < min
            || (d == 0 && min == l->strides[1])) {
            return 0;
        }
        min = l->strides[d] * (l->sizes[d] > 1 ? l->sizes[d] : 1);
    }
    return 1;
}

int
tc_layout_suggests_channels_last(const tc_layout *l)
{
    return strides_like_channels_last(l);
}

void
tc_layout_channels_last(tc_layout *l)
{
    tc_layout_contiguous(l);
    if (channels_last_order(l->ndim) != NULL) {
        layout_channels_last(l);
    }
}

void
tc_layout_of_cat(const tc_layout *const *ins, int n, tc_layout *out)
{
    int cl = n > 0 && channels_last_order(out->ndim) != NULL;
    for (int k = 0; k < n && cl; k++) {
        cl = ins[k]->ndim == out->ndim && strides_like_channels_last(ins[k]);
    }
    tc_layout_contiguous(out);
    if (cl) {
        layout_channels_last(out);
    }
}

void
tc_layout_like(const tc_layout *src, tc_layout *out)
{
    layout_after_to(src, out);
}

int
tc_graph_result_like(tc_graph *g, int node, int like)
{
    if (node != g->nnodes - 1 || like < 0 || like >= node
        || g->nodes[node].kind != TC_NODE_OP
        || tc_ops[g->nodes[node].op].kind != TC_OPK_POINTWISE
        || !tc_layout_same_sizes(&g->nodes[node].layout,
                              &g->nodes[like].layout)) {
        return -1;
    }
    tc_layout_like(&g->nodes[like].layout, &g->nodes[node].layout);
    return 0;
}

/* An op node whose layout is given rather than inferred from operands
 * (creation ops have no tensor operand to infer it from). */
static int
explicit_node(tc_graph *g, const char *opname, int nin, const int *in,
              tc_dtype dt, const tc_layout *layout, char *err, size_t errlen)
{
    int op = tc_op_lookup(opname);
    if (op < 0 || layout->ndim < 0 || layout->ndim > TC_MAX_DIMS) {
        tc_set_err(err, errlen, "%s: invalid arguments", opname);
        return -1;
    }
    for (int d = 0; d < layout->ndim; d++) {
        if (layout->sizes[d] < 0) {
            tc_set_err(err, errlen, "Trying to create tensor with negative "
                    "dimension %lld: [%lld]", (long long)layout->sizes[d],
                    (long long)layout->sizes[d]);
            return -1;
        }
    }
    for (int k = 0; k < nin; k++) {
        if (in[k] < 0 || in[k] >= g->nnodes) {
            tc_set_err(err, errlen, "%s: invalid operand node", opname);
            return -1;
        }
    }
    tc_dtype compute, out;
    if (tc_op_infer_dtypes(g, op, in, dt, &compute, &out, err, errlen) < 0) {
        return -1;
    }
    tc_node n;
    tc_node_init(&n, TC_NODE_OP, out);
    n.op = op;
    n.nin = nin;
    memcpy(n.in, in, sizeof(int) * nin);
    n.attr_dtype = dt;
    n.layout = *layout;
    return tc_graph_push_op(g, &n, err, errlen);
}

int
tc_graph_full(tc_graph *g, const tc_layout *layout, tc_dtype dt, int value,
              char *err, size_t errlen)
{
    if (value < 0 || g->nodes[value].kind != TC_NODE_SCALAR) {
        tc_set_err(err, errlen, "full: the fill value must be a number");
        return -1;
    }
    return explicit_node(g, "full", 1, &value, dt, layout, err, errlen);
}

int
tc_graph_arange(tc_graph *g, const tc_layout *layout, tc_dtype dt, int start,
                int step, char *err, size_t errlen)
{
    int in[2] = {start, step};
    return explicit_node(g, "arange", 2, in, dt, layout, err, errlen);
}

/* Positions along dim d of x's last two dims as an int64 node broadcasting
 * against them: [R, 1] rows (d = 0) or [1, C] columns (d = 1). */
static int
position_node(tc_graph *g, const tc_layout *x, int d, char *err,
              size_t errlen)
{
    tc_layout l = {.ndim = 2, .sizes = {1, 1}};
    l.sizes[d] = x->sizes[x->ndim - 2 + d];
    tc_layout_contiguous(&l);
    int zero = tc_graph_scalar_int(g, 0), one = tc_graph_scalar_int(g, 1);
    if (zero < 0 || one < 0) {
        tc_set_err(err, errlen, "out of memory");
        return -1;
    }
    return tc_graph_arange(g, &l, TC_I64, zero, one, err, errlen);
}

/* tril keeps col - row <= k, triu col - row >= k; the rest is 0 (False).
 * The result is contiguous, as eager allocates it. */
int
tc_graph_tril(tc_graph *g, int x, int64_t k, int upper, char *err,
              size_t errlen)
{
    const char *name = upper ? "triu" : "tril";
    if (check_node(g, x, name, err, errlen) < 0) {
        return -1;
    }
    tc_layout xl = g->nodes[x].layout;
    if (xl.ndim < 2) {
        tc_set_err(err, errlen, "%s: input tensor must have at least 2 "
                "dimensions", name);
        return -1;
    }
    int rows = position_node(g, &xl, 0, err, errlen);
    int cols = position_node(g, &xl, 1, err, errlen);
    int diff = PW2("sub", cols, rows);
    int kk = tc_graph_scalar_int(g, k);
    int keep = upper ? PW2("ge", diff, kk) : PW2("le", diff, kk);
    int zero = g->nodes[x].dtype == TC_BOOL ? tc_graph_scalar_bool(g, 0)
                                            : tc_graph_scalar_int(g, 0);
    int in[3] = {keep, x, zero};
    if (keep < 0 || zero < 0) {
        return -1;
    }
    int r = tc_graph_op(g, "where", 3, in, TC_F32, err, errlen);
    if (r < 0) {
        return -1;
    }
    if (layout_is_canonical(&g->nodes[r].layout)) {
        return r; /* eager: at::empty of the sizes */
    }
    return tc_graph_op(g, "contiguous", 1, &r, TC_F32, err, errlen);
}

/* F.normalize: x / norm(x, p, dim, keepdim).clamp_min(eps), as ATen. */
int
tc_graph_normalize(tc_graph *g, int x, double p, int64_t dim, double eps,
                   char *err, size_t errlen)
{
    if (check_node(g, x, "normalize", err, errlen) < 0) {
        return -1;
    }
    tc_reduce_args a;
    memset(&a, 0, sizeof(a));
    a.ndims = 1;
    a.dims[0] = dim;
    a.keepdim = 1;
    a.p = p;
    int n = tc_graph_reduce(g, "norm", x, &a, err, errlen);
    int d = PW2("clamp_min", n, n < 0 ? -1 : tc_graph_scalar_float(g, eps));
    return PW2("div", x, d);
}
