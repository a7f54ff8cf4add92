/* bn_lower.c - eval-mode batch norm as pointwise ops (bn_lower.h).
 *
 * The ops compute what the eager kernel of the graph's device computes,
 * in the same order, in opmath (float32 for float16 / bfloat16 inputs,
 * the dtype itself otherwise), rounding once to the input's dtype:
 *
 *   CPU, input / output contiguous or channels-last, parameters contiguous
 *   (batch_norm_cpu_collect_linear_and_constant_terms):
 *       alpha = 1 / sqrt(var + eps) * w;  beta = b - mean * alpha
 *       y = x * alpha + beta
 *   CPU otherwise (batch_norm_cpu_transform_input_template's
 *   TensorIterator loop):
 *       y = ((x - mean) * (1 / sqrt(var + eps))) * w + b
 *   CUDA (batch_norm_transform_input_kernel, the elementwise loop):
 *       y = ((x - mean) * w) * rsqrt(var + eps) + b
 *
 * w = None multiplies by nothing (eager's 1 is exact), b = None adds 0
 * (as eager does: -0 + 0 is +0).  The CPU's general loop computes in the
 * parameters' dtype, so float16 / bfloat16 parameters there round after
 * every op: that case stays an extern.
 */
#include "bn_lower.h"

#include <stdlib.h>
#include <string.h>

#include "ops.h"

typedef enum { BN_LINEAR, BN_GENERAL, BN_CUDA } bn_formula;

/* param: -1 (None), or a 1-d node of c elements of dtype *pdt (set by
 * the first parameter seen). */
static int
param_ok(const tc_graph *g, int p, int64_t c, tc_dtype *pdt)
{
    if (p < 0) {
        return 1;
    }
    const tc_node *n = &g->nodes[p];
    if (n->layout.ndim != 1 || n->layout.sizes[0] != c
        || !tc_dtype_is_float(n->dtype)) {
        return 0;
    }
    if (*pdt == TC_NDTYPES) {
        *pdt = n->dtype;
    }
    return n->dtype == *pdt;
}

static int
param_contiguous(const tc_graph *g, int p)
{
    return p < 0 || tc_layout_is_contiguous(&g->nodes[p].layout);
}

/* The formula of eager's kernel for b, or -1 where this pass keeps the
 * extern (shapes or dtypes eager's kernels treat otherwise). */
static int
choose_formula(const tc_graph *g, const tc_bn_eval *b)
{
    const tc_node *n = &g->nodes[b->node];
    const tc_node *x = &g->nodes[b->x];
    tc_dtype pdt = TC_NDTYPES;
    if (!tc_dtype_is_float(x->dtype) || n->dtype != x->dtype
        || x->layout.ndim < 2 || b->mean < 0 || b->var < 0
        || !tc_layout_same_sizes(&n->layout, &x->layout)) {
        return -1;
    }
    int64_t c = x->layout.sizes[1];
    if (!param_ok(g, b->weight, c, &pdt) || !param_ok(g, b->bias, c, &pdt)
        || !param_ok(g, b->mean, c, &pdt) || !param_ok(g, b->var, c, &pdt)) {
        return -1;
    }
    /* parameters of the input's dtype, or float32 ones with a float16 /
     * bfloat16 input (eager's "mixed type") */
    if (pdt != x->dtype
        && !(tc_dtype_is_reduced_float(x->dtype) && pdt == TC_F32)) {
        return -1;
    }
    if (g->cuda) {
        return BN_CUDA;
    }
    int dense_in = tc_layout_is_contiguous(&x->layout)
                   || tc_layout_is_channels_last_contiguous(&x->layout);
    int dense_out = tc_layout_is_contiguous(&n->layout)
                    || tc_layout_is_channels_last_contiguous(&n->layout);
    if (dense_in && dense_out && param_contiguous(g, b->weight)
        && param_contiguous(g, b->bias) && param_contiguous(g, b->mean)
        && param_contiguous(g, b->var)) {
        return BN_LINEAR;
    }
    return tc_dtype_is_reduced_float(pdt) ? -1 : BN_GENERAL;
}

/* Builders over the new graph: each returns a node id or -1 (err set). */
typedef struct {
    tc_graph *g;
    tc_dtype opmath;
    int ndim;
    char *err;
    size_t errlen;
} bn_ctx;

static int
op2(bn_ctx *c, const char *op, int a, int b)
{
    if (a < 0 || b < 0) {
        return -1;
    }
    int in[2] = {a, b};
    return tc_graph_op(c->g, op, 2, in, TC_NDTYPES, c->err, c->errlen);
}

static int
cast(bn_ctx *c, int x, tc_dtype dt)
{
    if (x < 0 || c->g->nodes[x].dtype == dt) {
        return x;
    }
    return tc_graph_op(c->g, "to", 1, &x, dt, c->err, c->errlen);
}

/* A [C] parameter in opmath, viewed as [C, 1, ..., 1] so that it
 * broadcasts over dim 1 of the input. */
static int
channel_param(bn_ctx *c, int p)
{
    int64_t sizes[TC_MAX_DIMS];
    if (p < 0) {
        return -1;
    }
    sizes[0] = c->g->nodes[p].layout.sizes[0];
    for (int d = 1; d < c->ndim - 1; d++) {
        sizes[d] = 1;
    }
    int v = tc_graph_view(c->g, p, c->ndim - 1, sizes, c->err, c->errlen);
    return cast(c, v, c->opmath);
}

/* The value of b (operands of c->g), as the last node built. */
static int
lower_one(bn_ctx *c, const tc_bn_eval *b, bn_formula f, tc_dtype dt)
{
    tc_graph *g = c->g;
    int x = cast(c, b->x, c->opmath);
    int mean = channel_param(c, b->mean);
    int var = channel_param(c, b->var);
    int w = b->weight >= 0 ? channel_param(c, b->weight) : -2;
    int bias = b->bias >= 0 ? channel_param(c, b->bias)
                            : tc_graph_scalar_float(g, 0.0);
    /* eager adds eps in opmath (static_cast<opmath_t>(eps); a Python
     * scalar added to a float tensor), which a wrapped scalar does */
    int eps = tc_graph_scalar_float(g, b->eps);
    if (x < 0 || mean < 0 || var < 0 || w == -1 || bias < 0 || eps < 0) {
        return -1;
    }
    int one = tc_graph_scalar_float(g, 1.0);
    int y;
    if (f == BN_CUDA) {
        int t = op2(c, "sub", x, mean);
        if (w >= 0) {
            t = op2(c, "mul", t, w);
        }
        int in = op2(c, "add", var, eps);
        int inv = in < 0 ? -1 : tc_graph_op(g, "rsqrt", 1, &in, TC_NDTYPES,
                                            c->err, c->errlen);
        y = op2(c, "add", op2(c, "mul", t, inv), bias);
    }
    else {
        int s = op2(c, "add", var, eps);
        s = s < 0 ? -1 : tc_graph_op(g, "sqrt", 1, &s, TC_NDTYPES, c->err,
                                     c->errlen);
        int inv = op2(c, "div", one, s);
        if (f == BN_LINEAR) {
            int alpha = w >= 0 ? op2(c, "mul", inv, w) : inv;
            int beta = op2(c, "sub", bias, op2(c, "mul", mean, alpha));
            y = op2(c, "add", op2(c, "mul", x, alpha), beta);
        }
        else {
            int t = op2(c, "mul", op2(c, "sub", x, mean), inv);
            if (w >= 0) {
                t = op2(c, "mul", t, w);
            }
            y = op2(c, "add", t, bias);
        }
    }
    return cast(c, y, dt);
}

int
tc_graph_lower_batch_norm(tc_graph *g, int n, const tc_bn_eval *bns,
                          char *err, size_t errlen)
{
    int nn = g->nnodes, lowered = 0, rc = -1;
    int *map = malloc(sizeof(int) * (size_t)(nn ? nn : 1));
    signed char *formula = malloc((size_t)(nn ? nn : 1));
    const tc_bn_eval **at = calloc((size_t)(nn ? nn : 1), sizeof(*at));
    tc_graph *ng = tc_graph_new();
    if (map == NULL || formula == NULL || at == NULL || ng == NULL) {
        tc_set_err(err, errlen, "out of memory");
        goto done;
    }
    for (int k = 0; k < n; k++) {
        int f = choose_formula(g, &bns[k]);
        if (f >= 0) {
            at[bns[k].node] = &bns[k];
            formula[bns[k].node] = (signed char)f;
            lowered++;
        }
    }
    if (lowered == 0) {
        rc = 0;
        goto done;
    }
    ng->ninputs = g->ninputs;
    ng->cuda = g->cuda;
    ng->emulate_precision = g->emulate_precision;
    for (int i = 0; i < nn; i++) {
        const tc_node *old = &g->nodes[i];
        if (at[i] != NULL) {
            const tc_bn_eval *b = at[i];
            tc_bn_eval m = *b;
            m.x = map[b->x];
            m.mean = map[b->mean];
            m.var = map[b->var];
            m.weight = b->weight >= 0 ? map[b->weight] : -1;
            m.bias = b->bias >= 0 ? map[b->bias] : -1;
            bn_ctx c = {ng, tc_dtype_opmath(old->dtype), old->layout.ndim,
                        err, errlen};
            map[i] = lower_one(&c, &m, (bn_formula)formula[i], old->dtype);
            if (map[i] < 0) {
                goto done;
            }
            /* the result is laid out as eager's (the extern's meta run),
             * which may differ from the pointwise rule's (a channels-last
             * input with contiguous-looking strides, size-1 dims) */
            ng->nodes[map[i]].layout = old->layout;
            continue;
        }
        tc_node nd = *old;
        for (int k = 0; k < nd.nin; k++) {
            nd.in[k] = map[nd.in[k]];
        }
        if (nd.view_base >= 0) {
            nd.view_base = map[nd.view_base];
        }
        map[i] = tc_graph_push_node(ng, &nd);
        if (map[i] < 0) {
            tc_set_err(err, errlen, "out of memory");
            goto done;
        }
    }
    tc_graph_take_nodes(g, ng, map);
    rc = lowered;
done:
    tc_graph_free(ng);
    free(map);
    free(formula);
    free(at);
    return rc;
}
