/* graph.c - the tensor graph IR: dtypes, layouts, builders, DCE/CSE, printer.
 *
 * Type promotion follows at::native::result_type; output layouts follow
 * TensorIterator (fast setup, then compute_strides + reorder_dimensions),
 * so node metadata matches what eager PyTorch would produce.
 */
#include "graph.h"
#include "ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TC_UNDEF (-1) /* "no dtype yet" in promotion state */

/* ---- dtypes ---------------------------------------------------------- */

static const char *const dtype_names[TC_NDTYPES] = {
    "bool", "uint8", "int8", "int16", "int32", "int64", "float32", "float64"};
static const char *const scalar_type_names[TC_NDTYPES] = {
    "Bool", "Byte", "Char", "Short", "Int", "Long", "Float", "Double"};
static const char *const dtype_short_names[TC_NDTYPES] = {
    "b8", "u8", "i8", "i16", "i32", "i64", "f32", "f64"};
static const size_t dtype_sizes[TC_NDTYPES] = {1, 1, 1, 2, 4, 8, 4, 8};

static int
dtype_valid(tc_dtype dt)
{
    return (int)dt >= 0 && dt < TC_NDTYPES;
}

const char *
tc_dtype_name(tc_dtype dt)
{
    return dtype_valid(dt) ? dtype_names[dt] : "?";
}

const char *
tc_dtype_scalar_type_name(tc_dtype dt)
{
    return dtype_valid(dt) ? scalar_type_names[dt] : "Undefined";
}

size_t
tc_dtype_size(tc_dtype dt)
{
    return dtype_valid(dt) ? dtype_sizes[dt] : 0;
}

int
tc_dtype_is_float(tc_dtype dt)
{
    return dt == TC_F32 || dt == TC_F64;
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
            return a > b ? a : b;
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

static int
layout_same_sizes(const tc_layout *a, const tc_layout *b)
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

static int
layout_same_strides(const tc_layout *a, const tc_layout *b)
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

/* at::infer_dense_strides: keep the input's dim order (same insertion sort
 * as TensorIterator, stride-0 dims ambiguous), dense strides. */
static void
infer_dense_strides(const tc_layout *src, tc_layout *out)
{
    int n = src->ndim, perm[TC_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        perm[i] = n - 1 - i;
    }
    for (int i = 1; i < n; i++) {
        int dim1 = i;
        for (int dim0 = i - 1; dim0 >= 0; dim0--) {
            int64_t s0 = src->strides[perm[dim0]], s1 = src->strides[perm[dim1]];
            int c = 0;
            if (s0 != 0 && s1 != 0) {
                c = s0 < s1 ? -1 : s0 > s1 ? 1
                    : src->sizes[perm[dim0]] > src->sizes[perm[dim1]];
            }
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

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
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
                set_err(err, errlen,
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
        if (!layout_same_sizes(ops[k], out)) {
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
        if (!layout_same_strides(ops[k], ops[0])) {
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

/* reorder_dimensions' should_swap: 1 = dim0 after dim1, -1 before, 0 ?. */
static int
should_swap(int n, int64_t (*st)[TC_MAX_DIMS], const int64_t *shape,
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

static void
general_layout(int n, const tc_layout *const *ops, tc_layout *out)
{
    int nd = out->ndim, perm[TC_MAX_DIMS];
    int64_t st[TC_MAX_OP_INPUTS][TC_MAX_DIMS];
    for (int k = 0; k < n; k++) {
        broadcast_strides(ops[k], out, st[k]);
    }
    for (int i = 0; i < nd; i++) {
        perm[i] = nd - 1 - i;
    }
    for (int i = 1; i < nd; i++) {
        int dim1 = i;
        for (int dim0 = i - 1; dim0 >= 0; dim0--) {
            int c = should_swap(n, st, out->sizes, perm[dim0], perm[dim1]);
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
        set_err(err, errlen, "too many operands (%d)", n);
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
    free(g);
}

static int
push_node(tc_graph *g, const tc_node *n)
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

static void
node_init(tc_node *n, tc_node_kind kind, tc_dtype dt)
{
    memset(n, 0, sizeof(*n));
    n->kind = kind;
    n->op = -1;
    n->dtype = dt;
    n->input_index = -1;
    n->attr_dtype = dt;
    for (int i = 0; i < TC_MAX_OP_INPUTS; i++) {
        n->in[i] = -1;
    }
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
    node_init(&n, TC_NODE_INPUT, dt);
    n.layout = *layout;
    n.input_index = g->ninputs;
    int id = push_node(g, &n);
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
    node_init(&n, TC_NODE_SCALAR, TC_F64);
    n.wrapped = 1;
    n.scalar.f = v;
    return push_node(g, &n);
}

int
tc_graph_scalar_int(tc_graph *g, int64_t v)
{
    tc_node n;
    node_init(&n, TC_NODE_SCALAR, TC_I64);
    n.wrapped = 1;
    n.scalar.i = v;
    return push_node(g, &n);
}

int
tc_graph_scalar_bool(tc_graph *g, int v)
{
    tc_node n;
    node_init(&n, TC_NODE_SCALAR, TC_BOOL);
    n.wrapped = 1;
    n.scalar.i = v != 0;
    return push_node(g, &n);
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
 * when the other operands are Python numbers (clamp(x, 0, 1), x ** 2). */
static int
is_unary_with_scalars(const tc_graph *g, const char *name, int nin,
                      const int *in)
{
    if (strcmp(name, "clamp") && strcmp(name, "clamp_min") &&
        strcmp(name, "clamp_max") && strcmp(name, "pow")) {
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
    if (!strcmp(def->name, "pow") && is_wrapped_scalar(g, in[0]) &&
        !is_wrapped_scalar(g, in[1])) {
        /* pow(Scalar, Tensor) allocates a contiguous output */
        *out = g->nodes[in[1]].layout;
        tc_layout_contiguous(out);
        return 0;
    }
    if (is_unary_with_scalars(g, def->name, nin, in)) {
        const tc_node *x = &g->nodes[in[0]];
        conv[0] = x->layout;
        if (x->dtype != compute) {
            layout_after_to(&x->layout, &conv[0]);
        }
        ops[n++] = &conv[0];
        return tc_iter_layout(n, ops, out, err, errlen);
    }
    for (int k = 0; k < nin; k++) {
        const tc_node *x = &g->nodes[in[k]];
        conv[k] = x->layout;
        /* where() converts self/other with .to() before iterating */
        if (def->promote == TC_PROMOTE_WHERE && k > 0 && x->dtype != compute) {
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
        set_err(err, errlen, "tcjit does not support the op '%s'", opname);
        return -1;
    }
    const tc_op_def *def = &tc_ops[op];
    if (nin != def->nin) {
        set_err(err, errlen, "%s expects %d operands, got %d", opname,
                def->nin, nin);
        return -1;
    }
    for (int k = 0; k < nin; k++) {
        if (in[k] < 0 || in[k] >= g->nnodes) {
            set_err(err, errlen, "%s: invalid operand node %d", opname, in[k]);
            return -1;
        }
    }
    if (def->promote == TC_PROMOTE_CAST && !dtype_valid(attr_dtype)) {
        set_err(err, errlen, "to: invalid dtype %d", (int)attr_dtype);
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
    node_init(&n, TC_NODE_OP, out);
    n.op = op;
    n.nin = nin;
    memcpy(n.in, in, sizeof(int) * nin);
    n.attr_dtype = def->promote == TC_PROMOTE_CAST ? attr_dtype : out;
    if (op_layout(g, op, nin, in, compute, &n.layout, err, errlen) < 0) {
        return -1;
    }
    int id = push_node(g, &n);
    if (id < 0) {
        set_err(err, errlen, "out of memory");
    }
    return id;
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
    g->outputs = outs;
    g->noutputs = n;
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

static int
nodes_equal(const tc_node *a, const tc_node *b)
{
    if (a->kind != b->kind || a->dtype != b->dtype) {
        return 0;
    }
    if (a->kind == TC_NODE_SCALAR) {
        return a->wrapped == b->wrapped &&
               memcmp(&a->scalar, &b->scalar, sizeof(a->scalar)) == 0;
    }
    if (a->kind != TC_NODE_OP || a->op != b->op || a->nin != b->nin ||
        a->attr_dtype != b->attr_dtype) {
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
    }
    for (int i = 0; i < 8; i++) {
        h = (h ^ parts[i]) * 1099511628211ull;
    }
    return h;
}

/* Map every node to the first equal node (inputs are never merged). */
static int
cse_map(const tc_graph *g, int *canon)
{
    int cap = 16;
    while (cap < 2 * g->nnodes) {
        cap *= 2;
    }
    int *table = malloc(sizeof(int) * cap);
    if (!table) {
        return -1;
    }
    for (int i = 0; i < cap; i++) {
        table[i] = -1;
    }
    for (int i = 0; i < g->nnodes; i++) {
        tc_node n = g->nodes[i];
        canon[i] = i;
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
        if (canon[i] == i) {
            table[slot] = i;
        }
    }
    free(table);
    return 0;
}

int
tc_graph_optimize(tc_graph *g)
{
    int n = g->nnodes;
    int *canon = malloc(sizeof(int) * (n ? n : 1));
    int *live = calloc(n ? n : 1, sizeof(int));
    if (!canon || !live || cse_map(g, canon) < 0) {
        free(canon);
        free(live);
        return -1;
    }
    for (int j = 0; j < g->noutputs; j++) {
        g->outputs[j] = canon[g->outputs[j]];
        live[g->outputs[j]] = 1;
    }
    for (int i = n - 1; i >= 0; i--) {
        tc_node *nd = &g->nodes[i];
        live[i] |= nd->kind == TC_NODE_INPUT;
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
        live[i] = m;
        g->nodes[m++] = nd;
    }
    for (int j = 0; j < g->noutputs; j++) {
        g->outputs[j] = live[g->outputs[j]];
    }
    g->nnodes = m;
    free(canon);
    free(live);
    return 0;
}

/* ---- printer --------------------------------------------------------- */

typedef struct {
    char *s;
    size_t len, cap;
    int failed;
} strbuf;

static void
sb_printf(strbuf *b, const char *fmt, ...)
{
    if (b->failed) {
        return;
    }
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        size_t room = b->cap - b->len;
        int k = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0,
                          fmt, ap);
        va_end(ap);
        if (k < 0) {
            b->failed = 1;
            return;
        }
        if (b->s && (size_t)k < room) {
            b->len += (size_t)k;
            return;
        }
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + (size_t)k + 1) {
            cap *= 2;
        }
        char *s = realloc(b->s, cap);
        if (!s) {
            b->failed = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

static char *
sb_finish(strbuf *b)
{
    if (b->failed || !b->s) {
        free(b->s);
        return b->failed ? NULL : strdup("");
    }
    return b->s;
}

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
    free(name.s);
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
