/* extern.c - shape and dtype rules of the ops torch computes for us (see
 * extern.h).  One small function per op family, named by the op's registry
 * entry (ops.h tc_extern_spec); each checks what eager
 * checks that matters for memory safety (ranks, inner sizes, dtypes) and
 * computes the output sizes.  Anything unusual is refused with a reason:
 * the call then runs eagerly and raises torch's own error if it is one.
 */
#include "extern.h"
#include "ops.h"
#include <stdint.h>
#include <stdlib.h>

#include <string.h>

struct tc_extern_ctx {
    const tc_graph *g;
    const int *in;
    int nin;
    const int64_t *xa;
    tc_layout *out;    /* sizes to fill; strides are made contiguous */
    tc_dtype dtype;    /* output dtype to fill */
    char *err;
    size_t errlen;
    const char *op;
};
typedef tc_extern_ctx xctx;

static const tc_layout *
L(const xctx *x, int k)
{
    return &x->g->nodes[x->in[k]].layout;
}

static tc_dtype
D(const xctx *x, int k)
{
    return x->g->nodes[x->in[k]].dtype;
}

static int
fail(const xctx *x, const char *what)
{
    tc_set_err(x->err, x->errlen, "%s: %s", x->op, what);
    return -1;
}

/* Operands first..nin-1 share operand first's dtype, a number type. */
static int
same_dtypes(xctx *x, int first)
{
    for (int k = first + 1; k < x->nin; k++) {
        if (D(x, k) != D(x, first)) {
            return fail(x, "operands of different dtypes (torch raises)");
        }
    }
    if (D(x, first) == TC_BOOL) {
        return fail(x, "bool operands are not supported by torch");
    }
    x->dtype = D(x, first);
    return 0;
}

static void
set_sizes(xctx *x, int n, const int64_t *sizes)
{
    x->out->ndim = n;
    memcpy(x->out->sizes, sizes, sizeof(int64_t) * n);
}

/* torch.broadcast_shapes of a and b (right-aligned). */
static int
broadcast(const xctx *x, const int64_t *a, int na, const int64_t *b, int nb,
          int64_t *out, int *nout)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t sa = i < n - na ? 1 : a[i - (n - na)];
        int64_t sb = i < n - nb ? 1 : b[i - (n - nb)];
        if (sa != sb && sa != 1 && sb != 1) {
            return fail(x, "batch dims do not broadcast");
        }
        out[i] = sa == 1 ? sb : sa;
    }
    *nout = n;
    return 0;
}

/* ---- matrix products ------------------------------------------------- */

int
tc_xshape_mm(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *a = L(x, 0), *b = L(x, 1);
    if (a->ndim != 2 || b->ndim != 2 || a->sizes[1] != b->sizes[0]) {
        return fail(x, "expects [n, k] @ [k, m]");
    }
    int64_t s[2] = {a->sizes[0], b->sizes[1]};
    set_sizes(x, 2, s);
    return same_dtypes(x, 0);
}

int
tc_xshape_bmm(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *a = L(x, 0), *b = L(x, 1);
    if (a->ndim != 3 || b->ndim != 3 || a->sizes[0] != b->sizes[0] ||
        a->sizes[2] != b->sizes[1]) {
        return fail(x, "expects [b, n, k] @ [b, k, m]");
    }
    int64_t s[3] = {a->sizes[0], a->sizes[1], b->sizes[2]};
    set_sizes(x, 3, s);
    return same_dtypes(x, 0);
}

/* torch.matmul: 1-d operands gain a dim that the result drops again, the
 * other leading dims broadcast. */
int
tc_xshape_matmul(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *a = L(x, 0), *b = L(x, 1);
    if (a->ndim < 1 || b->ndim < 1) {
        return fail(x, "both arguments need at least 1 dim");
    }
    int64_t ka = a->sizes[a->ndim - 1];
    int64_t kb = b->ndim == 1 ? b->sizes[0] : b->sizes[b->ndim - 2];
    if (ka != kb) {
        return fail(x, "inner sizes differ");
    }
    int64_t s[TC_MAX_DIMS];
    int n = 0;
    int na = a->ndim >= 2 ? a->ndim - 2 : 0, nb = b->ndim >= 2 ? b->ndim - 2 : 0;
    if (broadcast(x, a->sizes, na, b->sizes, nb, s, &n) < 0) {
        return -1;
    }
    if (a->ndim >= 2) {
        s[n++] = a->sizes[a->ndim - 2];
    }
    if (b->ndim >= 2) {
        s[n++] = b->sizes[b->ndim - 1];
    }
    if (n > TC_MAX_DIMS) {
        return fail(x, "too many dims");
    }
    set_sizes(x, n, s);
    return same_dtypes(x, 0);
}

/* addmm(bias, a, b) / baddbmm(bias, a, b): bias broadcasts to a @ b. */
int
tc_xshape_add_product(xctx *x, int batched)
{
    xctx p = *x;
    p.in = x->in + 1;
    p.nin = 2;
    if ((batched ? tc_xshape_bmm(&p, 0) : tc_xshape_mm(&p, 0)) < 0) {
        return -1;
    }
    int64_t s[TC_MAX_DIMS];
    int n;
    const tc_layout *bias = L(x, 0);
    if (broadcast(x, bias->sizes, bias->ndim, x->out->sizes, x->out->ndim, s,
                  &n) < 0 || n != x->out->ndim ||
        memcmp(s, x->out->sizes, sizeof(int64_t) * n) != 0) {
        return fail(x, "bias does not broadcast to the product");
    }
    return same_dtypes(x, 0);
}

int
tc_xshape_linear(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *a = L(x, 0), *w = L(x, 1);
    if (a->ndim < 1 || w->ndim != 2 || a->sizes[a->ndim - 1] != w->sizes[1]) {
        return fail(x, "expects input [..., k] and weight [n, k]");
    }
    if (x->nin == 3 && (L(x, 2)->ndim != 1 ||
                        L(x, 2)->sizes[0] != w->sizes[0])) {
        return fail(x, "expects a bias of shape [n]");
    }
    int64_t s[TC_MAX_DIMS];
    memcpy(s, a->sizes, sizeof(int64_t) * a->ndim);
    s[a->ndim - 1] = w->sizes[0];
    set_sizes(x, a->ndim, s);
    return same_dtypes(x, 0);
}

/* ---- attention, embedding, convolution, cat ---------------------------- */

/* The strides of sdpa's result l (contiguous so far) as the kernel eager
 * takes writes it (extern.h TC_SDPA_*). */
static void
sdpa_layout(const xctx *x, tc_layout *l)
{
    int64_t kind = x->xa[TC_XA_SDPA_LAYOUT];
    if (l->ndim != 4) {
        return;
    }
    int64_t H = l->sizes[1], M = l->sizes[2], E = l->sizes[3];
    if (kind == TC_SDPA_HEADS_INNER) {
        l->strides[1] = E;
        l->strides[2] = H * E;
        l->strides[0] = M * H * E;
    }
    else if (kind == TC_SDPA_PAD8) {
        int64_t P = (E + 7) / 8 * 8;
        l->strides[2] = P;
        l->strides[1] = M * P;
        l->strides[0] = H * M * P;
    }
    else if (kind == TC_SDPA_LIKE_Q && L(x, 0)->ndim == 4
             && memcmp(l->sizes, L(x, 0)->sizes, sizeof(int64_t) * 4) == 0) {
        tc_layout_like(L(x, 0), l);
    }
}

int
tc_xshape_sdpa(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *q = L(x, 0), *k = L(x, 1), *v = L(x, 2);
    int n = q->ndim;
    if (n < 2 || k->ndim != n || v->ndim != n) {
        return fail(x, "q, k and v need the same rank (>= 2)");
    }
    if (memcmp(q->sizes, k->sizes, sizeof(int64_t) * (n - 2)) ||
        memcmp(q->sizes, v->sizes, sizeof(int64_t) * (n - 2)) ||
        q->sizes[n - 1] != k->sizes[n - 1] ||
        k->sizes[n - 2] != v->sizes[n - 2]) {
        return fail(x, "q, k, v sizes do not match");
    }
    if (D(x, 1) != D(x, 0) || D(x, 2) != D(x, 0) ||
        !tc_dtype_is_float(D(x, 0))) {
        return fail(x, "q, k, v must share one floating dtype");
    }
    if (x->nin == 4) {
        const tc_layout *m = L(x, 3);
        int64_t want[TC_MAX_DIMS], s[TC_MAX_DIMS];
        int nb;
        memcpy(want, q->sizes, sizeof(int64_t) * n);
        want[n - 1] = k->sizes[n - 2];
        if ((D(x, 3) != TC_BOOL && D(x, 3) != D(x, 0)) ||
            broadcast(x, m->sizes, m->ndim, want, n, s, &nb) < 0 || nb != n ||
            memcmp(s, want, sizeof(int64_t) * n) != 0) {
            return fail(x, "attn_mask must be bool or q's dtype and "
                        "broadcast to [..., L, S]");
        }
        if (x->xa[TC_XA_SDPA_CAUSAL]) {
            return fail(x, "attn_mask together with is_causal=True "
                        "(torch raises)");
        }
    }
    int64_t s[TC_MAX_DIMS];
    memcpy(s, q->sizes, sizeof(int64_t) * n);
    s[n - 1] = v->sizes[n - 1];
    set_sizes(x, n, s);
    x->dtype = D(x, 0);
    return 0;
}

int
tc_xshape_embedding(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *idx = L(x, 0), *w = L(x, 1);
    if ((D(x, 0) != TC_I64 && D(x, 0) != TC_I32) || w->ndim != 2 ||
        idx->ndim + 1 > TC_MAX_DIMS) {
        return fail(x, "expects int32/int64 indices and a 2-d weight");
    }
    int64_t s[TC_MAX_DIMS];
    memcpy(s, idx->sizes, sizeof(int64_t) * idx->ndim);
    s[idx->ndim] = w->sizes[1];
    set_sizes(x, idx->ndim + 1, s);
    x->dtype = D(x, 1);
    return 0;
}

/* conv1d / conv2d over batched [N, C, *spatial] input (or unbatched). */
int
tc_xshape_conv(xctx *x, int nsp)
{
    const tc_layout *in = L(x, 0), *w = L(x, 1);
    int batched = in->ndim == nsp + 2;
    int64_t groups = x->xa[TC_XA_CONV_GROUPS];
    if ((!batched && in->ndim != nsp + 1) || w->ndim != nsp + 2 ||
        groups < 1 || w->sizes[0] % groups != 0 ||
        in->sizes[batched] != w->sizes[1] * groups) {
        return fail(x, "input, weight and groups do not match");
    }
    if (x->nin == 3 && (L(x, 2)->ndim != 1 ||
                        L(x, 2)->sizes[0] != w->sizes[0])) {
        return fail(x, "expects a bias of shape [out_channels]");
    }
    int64_t s[TC_MAX_DIMS];
    int n = 0;
    if (batched) {
        s[n++] = in->sizes[0];
    }
    s[n++] = w->sizes[0];
    for (int d = 0; d < nsp; d++) {
        int64_t st = x->xa[TC_XA_CONV_STRIDE + d];
        int64_t pad = x->xa[TC_XA_CONV_PADDING + d];
        int64_t dil = x->xa[TC_XA_CONV_DILATION + d];
        int64_t size = in->sizes[batched + 1 + d];
        int64_t k = w->sizes[2 + d];
        int64_t span = size + 2 * pad - dil * (k - 1) - 1;
        if (st < 1 || pad < 0 || dil < 1 || span < 0) {
            return fail(x, "bad stride/padding/dilation or kernel larger "
                        "than input");
        }
        s[n++] = span / st + 1;
    }
    set_sizes(x, n, s);
    return same_dtypes(x, 0);
}

int
tc_xshape_cat(xctx *x, int stack)
{
    const tc_layout *a = L(x, 0);
    int nd = a->ndim + stack;
    int64_t dim = x->xa[TC_XA_CAT_DIM];
    if (dim < 0) {
        dim += nd;
    }
    if (nd < 1 || nd > TC_MAX_DIMS || dim < 0 || dim >= nd) {
        return fail(x, "dim out of range");
    }
    tc_dtype dt = D(x, 0);
    int64_t total = 0;
    for (int k = 0; k < x->nin; k++) {
        const tc_layout *b = L(x, k);
        if (b->ndim != a->ndim) {
            return fail(x, "tensors of different ranks");
        }
        for (int d = 0; d < a->ndim; d++) {
            if (b->sizes[d] != a->sizes[d] && (stack || d != dim)) {
                return fail(x, "sizes differ outside the cat dim");
            }
        }
        total += stack ? 1 : b->sizes[dim];
        dt = tc_promote_types(dt, D(x, k));
    }
    int64_t s[TC_MAX_DIMS];
    for (int d = 0, e = 0; d < nd; d++) {
        s[d] = d == dim ? (stack ? x->nin : total) : a->sizes[e];
        e += !(stack && d == dim);
    }
    set_sizes(x, nd, s);
    x->dtype = dt;
    return 0;
}

/* cross_entropy / nll_loss with class-index targets: input [N, C, d...] or
 * [C], target [N, d...] or [] of int64. */
int
tc_xshape_loss(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *in = L(x, 0), *t = L(x, 1);
    int batched = in->ndim >= 2;
    if (!tc_dtype_is_float(D(x, 0)) || D(x, 1) != TC_I64 ||
        t->ndim != in->ndim - 1) {
        return fail(x, "needs float scores and int64 class-index targets");
    }
    for (int d = 0, e = 0; d < in->ndim; d++) {
        if (d == batched) {
            continue;               /* the class dim */
        }
        if (in->sizes[d] != t->sizes[e++]) {
            return fail(x, "target sizes do not match the input");
        }
    }
    if (x->nin == 3 && (L(x, 2)->ndim != 1 ||
                        L(x, 2)->sizes[0] != in->sizes[batched] ||
                        D(x, 2) != D(x, 0))) {
        return fail(x, "weight must be [C] of the input's dtype");
    }
    if (x->xa[TC_XA_LOSS_REDUCTION] == 0) {
        set_sizes(x, t->ndim, t->sizes);
    } else {
        set_sizes(x, 0, NULL);
    }
    x->dtype = D(x, 0);
    return 0;
}

int
tc_xshape_group_norm(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *in = L(x, 0);
    int64_t groups = x->xa[TC_XA_GN_GROUPS];
    int nparams = (int)(x->xa[TC_XA_GN_HAS_WEIGHT] + x->xa[TC_XA_GN_HAS_BIAS]);
    if (in->ndim < 2 || groups < 1 || in->sizes[1] % groups != 0 ||
        !tc_dtype_is_float(D(x, 0)) || x->nin != 1 + nparams) {
        return fail(x, "channels must divide into num_groups");
    }
    for (int k = 1; k < x->nin; k++) {
        if (L(x, k)->ndim != 1 || L(x, k)->sizes[0] != in->sizes[1] ||
            D(x, k) != D(x, 0)) {
            return fail(x, "weight / bias must be [C] of the input's dtype");
        }
    }
    set_sizes(x, in->ndim, in->sizes);
    x->dtype = D(x, 0);
    return 0;
}

/* x[..., i, j, ...] with index tensors i, j for the dims in the mask
 * (aten::index): the indices broadcast to B; if the indexed dims are
 * adjacent, B replaces them in place, else B comes first and the other
 * dims follow in order.  Eager's result is contiguous when x's strides
 * (of dims that are stepped: size > 1, stride > 0) do not increase from
 * outer to inner dims, and follows x's stride order otherwise; only the
 * first case is compiled, so the result has the layout eager gives. */
int
tc_xshape_index(xctx *x, int variant)
{
    (void)variant;
    const tc_layout *src = L(x, 0);
    int64_t mask = x->xa[TC_XA_INDEX_DIMS], b[TC_MAX_DIMS], t[TC_MAX_DIMS];
    int nb = 0, nidx = 0, first = -1, last = -1, n = 0;
    for (int d = 0; d < src->ndim; d++) {
        if (mask >> d & 1) {
            first = first < 0 ? d : first;
            last = d;
            nidx++;
        }
    }
    if (nidx != x->nin - 1 || nidx == 0 || mask >> src->ndim != 0) {
        return fail(x, "index tensors do not match the indexed dims");
    }
    for (int k = 1; k < x->nin; k++) {
        const tc_layout *ix = L(x, k);
        if (D(x, k) != TC_I64 && D(x, k) != TC_I32) {
            return fail(x, "index tensors must be int64 or int32");
        }
        if (broadcast(x, b, nb, ix->sizes, ix->ndim, t, &nb) < 0) {
            return fail(x, "index tensors do not broadcast (torch raises)");
        }
        memcpy(b, t, sizeof(int64_t) * nb);
    }
    int64_t prev = INT64_MAX;
    for (int d = 0; d < src->ndim; d++) {
        if (src->sizes[d] > 1 && src->strides[d] > 0) {
            if (src->strides[d] > prev) {
                return fail(x, "indexing a permuted view (eager's result "
                            "follows its strides)");
            }
            prev = src->strides[d];
        }
    }
    int adjacent = last - first + 1 == nidx;
    if (src->ndim - nidx + nb > TC_MAX_DIMS) {
        return fail(x, "too many dims");
    }
    int64_t s[TC_MAX_DIMS];
    for (int d = 0; d < src->ndim; d++) {
        if (d == (adjacent ? first : 0)) {
            memcpy(s + n, b, sizeof(int64_t) * nb);
            n += nb;
        }
        if (!(mask >> d & 1)) {
            s[n++] = src->sizes[d];
        }
    }
    set_sizes(x, n, s);
    x->dtype = D(x, 0);
    return 0;
}

/* aten::index's result layout: a TensorIterator (build_index_op) over the
 * source restrided to the result's shape (stride 0 in the indexed dims,
 * which move to the front when they are not adjacent) and each index
 * tensor viewed as [1] * before + its shape + [1] * after, so the strides
 * of size-1 dims follow eager (fuzz seed 66371).  Index tensors of
 * different shapes (expanded first) keep the contiguous result. */
static void
index_layout(const xctx *x, tc_layout *out)
{
    const tc_layout *src = L(x, 0);
    int64_t mask = x->xa[TC_XA_INDEX_DIMS];
    tc_layout ops[TC_MAX_OP_INPUTS];
    const tc_layout *opp[TC_MAX_OP_INPUTS];
    const tc_layout *ix = L(x, 1);
    int first = -1, last = -1, nidx = x->nin - 1;
    for (int d = 0; d < src->ndim; d++) {
        if (mask >> d & 1) {
            first = first < 0 ? d : first;
            last = d;
        }
    }
    for (int k = 2; k < x->nin; k++) {
        if (!tc_layout_same_sizes(L(x, k), ix)) {
            return;
        }
    }
    int before = last - first + 1 == nidx ? first : 0;
    /* the source: its non-indexed dims around ix->ndim dims of stride 0 */
    ops[0] = *out;
    for (int d = 0, o = 0; d < src->ndim; d++) {
        if (o == before) {
            for (int j = 0; j < ix->ndim; j++) {
                ops[0].strides[o++] = 0;
            }
        }
        if (!(mask >> d & 1)) {
            ops[0].strides[o++] = src->strides[d];
        }
    }
    opp[0] = &ops[0];
    for (int k = 1; k < x->nin; k++) {
        tc_layout *v = &ops[k];
        v->ndim = out->ndim;
        for (int d = 0; d < out->ndim; d++) {
            v->sizes[d] = d < before || d >= before + ix->ndim
                ? 1 : ix->sizes[d - before];
        }
        if (tc_layout_view_strides(L(x, k), v->sizes, v->ndim, v->strides)
            < 0) {
            return;
        }
        opp[k] = v;
    }
    tc_iter_layout(x->nin, opp, out, NULL, 0);
}

/* ---- entry point ----------------------------------------------------- */

int
tc_graph_extern(tc_graph *g, const char *op, int nin, const int *in,
                const int64_t *xattr, double xfattr, char *err,
                size_t errlen)
{
    static const int64_t zeros[TC_MAX_XATTR];
    int opi = tc_op_lookup(op);
    if (opi < 0 || tc_ops[opi].kind != TC_OPK_EXTERN) {
        tc_set_err(err, errlen, "tcjit does not support the op '%s'", op);
        return -1;
    }
    const tc_extern_spec *spec = &tc_ops[opi].xspec;
    if (spec->shape == NULL) {
        tc_set_err(err, errlen, "%s: built by its own builder", op);
        return -1;
    }
    if (nin < spec->min_in || nin > tc_ops[opi].nin) {
        tc_set_err(err, errlen, "%s: %d tensor operands", op, nin);
        return -1;
    }
    for (int k = 0; k < nin; k++) {
        if (in[k] < 0 || in[k] >= g->nnodes ||
            g->nodes[in[k]].kind == TC_NODE_SCALAR) {
            tc_set_err(err, errlen, "%s: operand %d is not a tensor", op, k);
            return -1;
        }
    }
    tc_node n;
    tc_node_init(&n, TC_NODE_OP, TC_F32);
    xctx x = {g, in, nin, xattr ? xattr : zeros, &n.layout, TC_F32, err,
              errlen, op};
    if (spec->shape(&x, spec->variant) < 0) {
        return -1;
    }
    tc_layout_contiguous(&n.layout);
    if (!strcmp(op, "sdpa")) {
        sdpa_layout(&x, &n.layout);
    }
    if (!strcmp(op, "index")) {
        index_layout(&x, &n.layout);
    }
    if (!strcmp(op, "group_norm") && !g->cuda
        && tc_layout_suggests_channels_last(L(&x, 0))) {
        /* ATen's CPU native_group_norm: empty_like(x,
         * x.suggest_memory_format()) (and x.contiguous() of that format
         * first) */
        tc_layout_channels_last(&n.layout);
    }
    if (!strcmp(op, "cat") && nin <= TC_MAX_OP_INPUTS) {
        const tc_layout *ins[TC_MAX_OP_INPUTS];
        for (int k = 0; k < nin; k++) {
            ins[k] = &g->nodes[in[k]].layout;
        }
        tc_layout_of_cat(ins, nin, &n.layout);
    }
    n.op = opi;
    n.nin = nin;
    memcpy(n.in, in, sizeof(int) * nin);
    n.dtype = n.attr_dtype = x.dtype;
    memcpy(n.xattr, x.xa, sizeof(n.xattr));
    n.xfattr = xfattr;
    return tc_graph_push_op(g, &n, err, errlen);
}

int
tc_node_is_extern(const tc_graph *g, int id)
{
    const tc_node *n = &g->nodes[id];
    return n->kind == TC_NODE_OP && tc_ops[n->op].kind == TC_OPK_EXTERN;
}

int
tc_graph_extern_relayout(tc_graph *g, int node, const tc_layout *layout)
{
    if (node < 0 || node != g->nnodes - 1 || !tc_node_is_extern(g, node)
        || !tc_layout_same_sizes(&g->nodes[node].layout, layout)) {
        return -1;
    }
    memcpy(g->nodes[node].layout.strides, layout->strides,
           sizeof(int64_t) * layout->ndim);
    return 0;
}

static int
generic_op(void)
{
    static int op = -2;
    if (op == -2) {
        op = tc_op_lookup("extern");
    }
    return op;
}

int
tc_node_has_effects(const tc_graph *g, int id)
{
    const tc_node *n = &g->nodes[id];
    return n->kind == TC_NODE_OP && n->op == generic_op()
           && !n->xattr[TC_XA_GENERIC_DROPPED]
           && !n->xattr[TC_XA_GENERIC_PURE];
}

void
tc_graph_drop_effects(tc_graph *g, int from)
{
    for (int i = from < 0 ? 0 : from; i < g->nnodes; i++) {
        if (tc_node_has_effects(g, i)) {
            g->nodes[i].xattr[TC_XA_GENERIC_DROPPED] = 1;
        }
    }
}

static int
push_generic(tc_graph *g, const char *op, int nin, const int *in,
             const int64_t *xattr, tc_dtype dt, const tc_layout *layout,
             char *err, size_t errlen)
{
    if (nin > TC_MAX_OP_INPUTS || layout->ndim > TC_MAX_DIMS) {
        tc_set_err(err, errlen, "%s: %d operands, %d dims", op, nin,
                   layout->ndim);
        return -1;
    }
    for (int k = 0; k < nin; k++) {
        if (in[k] < 0 || in[k] >= g->nnodes
            || g->nodes[in[k]].kind == TC_NODE_SCALAR) {
            tc_set_err(err, errlen, "%s: operand %d is not a tensor", op, k);
            return -1;
        }
    }
    tc_node n;
    tc_node_init(&n, TC_NODE_OP, dt);
    n.op = tc_op_lookup(op);
    n.nin = nin;
    memcpy(n.in, in, sizeof(int) * nin);
    n.attr_dtype = dt;
    n.layout = *layout;
    memcpy(n.xattr, xattr, sizeof(n.xattr));
    return tc_graph_push_op(g, &n, err, errlen);
}

int
tc_graph_extern_generic(tc_graph *g, int call, int nin, const int *in,
                        int items, tc_dtype dt, const tc_layout *layout,
                        char *err, size_t errlen)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    xa[TC_XA_GENERIC_CALL] = call;
    xa[TC_XA_GENERIC_ITEMS] = items;
    return push_generic(g, "extern", nin, in, xa, dt, layout, err, errlen);
}

int
tc_graph_reduction_as_extern(tc_graph *g, int id, int call, char *err,
                             size_t errlen)
{
    tc_node *n = id >= 0 && id < g->nnodes ? &g->nodes[id] : NULL;
    if (n == NULL || n->kind != TC_NODE_OP || n->nin != 1
        || tc_ops[n->op].kind != TC_OPK_REDUCTION) {
        tc_set_err(err, errlen, "node %d is not a reduction", id);
        return -1;
    }
    n->op = tc_op_lookup("extern");
    n->red_mask = 0;
    n->keepdim = 0;
    n->first_index = 0;
    memset(n->xattr, 0, sizeof(n->xattr));
    n->xattr[TC_XA_GENERIC_CALL] = call;
    n->xattr[TC_XA_GENERIC_PURE] = 1;
    n->attr_dtype = n->dtype;
    return 0;
}

int
tc_graph_extern_item(tc_graph *g, int x, int item, tc_dtype dt,
                     const tc_layout *layout, char *err, size_t errlen)
{
    int64_t xa[TC_MAX_XATTR] = {0};
    if (!tc_node_has_effects(g, x)
        || item >= g->nodes[x].xattr[TC_XA_GENERIC_ITEMS]) {
        tc_set_err(err, errlen, "extern_item: node %d has no item %d", x,
                   item);
        return -1;
    }
    xa[TC_XA_ITEM] = item;
    return push_generic(g, "extern_item", 1, &x, xa, dt, layout, err,
                        errlen);
}

/* ---- bias unfusing -------------------------------------------------------
 *
 * linear(x, w, b) whose users are all pointwise ops or reductions becomes
 * linear(x, w) + b.  The add then fuses into the kernel that reads the
 * product anyway (GELU after c_fc, the residual add after c_proj), and
 * the product without a bias is a plain GEMM, for which cuBLAS picks
 * larger tiles than with its bias epilogue: on an H200 the GPT-2 MLP's
 * 2048x768x3072 product takes 143 us as mm against 169 us as addmm.
 * Inductor unfuses the same way.  A product that is a graph output or
 * feeds a view or another extern keeps its bias: nothing would absorb the
 * add.  float32/float64 only, so that no product is rounded twice. */

static int
bias_unfusable(const tc_graph *g, int id, const char *users_ok)
{
    const tc_node *n = &g->nodes[id];
    return tc_node_is_extern(g, id) && n->nin == 3 && users_ok[id]
           && !strcmp(tc_ops[n->op].name, "linear")
           && (n->dtype == TC_F32 || n->dtype == TC_F64);
}

/* users_ok[i]: node i has users and each is a pointwise op or reduction. */
static void
find_absorbing_users(const tc_graph *g, char *users_ok)
{
    char *bad = users_ok + g->nnodes;
    memset(users_ok, 0, 2 * (size_t)g->nnodes);
    for (int j = 0; j < g->noutputs; j++) {
        bad[g->outputs[j]] = 1;
    }
    for (int i = 0; i < g->nnodes; i++) {
        const tc_node *n = &g->nodes[i];
        int kind = n->kind == TC_NODE_OP ? (int)tc_ops[n->op].kind : -1;
        int absorbs = kind == TC_OPK_POINTWISE || kind == TC_OPK_REDUCTION;
        for (int k = 0; k < n->nin; k++) {
            users_ok[n->in[k]] = 1;
            bad[n->in[k]] |= !absorbs;
        }
        if (n->view_base >= 0) {
            bad[n->view_base] = 1;
        }
    }
    for (int i = 0; i < g->nnodes; i++) {
        users_ok[i] &= !bad[i];
    }
}

int
tc_graph_unfuse_bias(tc_graph *g, char *err, size_t errlen)
{
    int n = g->nnodes, any = 0;
    char *users_ok = malloc(2 * (size_t)(n ? n : 1));
    int *map = malloc(sizeof(int) * (size_t)(n ? n : 1));
    tc_graph *ng = tc_graph_new();
    int rc = -1;
    if (users_ok == NULL || map == NULL || ng == NULL) {
        tc_set_err(err, errlen, "out of memory");
        goto done;
    }
    find_absorbing_users(g, users_ok);
    for (int i = 0; i < n; i++) {
        any |= bias_unfusable(g, i, users_ok);
    }
    if (!any) {
        rc = 0;
        goto done;
    }
    ng->ninputs = g->ninputs;
    for (int i = 0; i < n; i++) {
        tc_node nd = g->nodes[i];
        for (int k = 0; k < nd.nin; k++) {
            nd.in[k] = map[nd.in[k]];
        }
        if (nd.view_base >= 0) {
            nd.view_base = map[nd.view_base];
        }
        int split = bias_unfusable(g, i, users_ok);
        if (split) {
            nd.nin = 2;
        }
        map[i] = tc_graph_push_node(ng, &nd);
        if (map[i] >= 0 && split) {
            int in[2] = {map[i], nd.in[2]};
            map[i] = tc_graph_op(ng, "add", 2, in, nd.dtype, err, errlen);
            if (map[i] >= 0) {
                ng->nodes[map[i]].requires_grad = nd.requires_grad;
            }
        }
        if (map[i] < 0) {
            tc_set_err(err, errlen, "out of memory");
            goto done;
        }
    }
    tc_graph_take_nodes(g, ng, map);
    rc = 0;
done:
    tc_graph_free(ng);
    free(users_ok);
    free(map);
    return rc;
}
