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
 * parameters' dtype (c10::Half / BFloat16 arithmetic), so with float16 /
 * bfloat16 parameters there every op's result is rounded to that dtype.
 *
 * Eager's CPU kernel is compiled with FMA contraction (measured: torch
 * 2.13's float32 result is bitwise fma(x, alpha, fma(-mean, alpha, b)));
 * tcjit's kernels are not (-ffp-contract=off), so the linear form differs
 * from eager's by up to an ulp of its terms (tests/test_batch_norm.py).
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
    return BN_GENERAL;
}

/* Builders over the new graph: each returns a node id or -1 (err set). */
typedef struct {
    tc_graph *g;
    tc_dtype opmath;
    tc_dtype round;     /* every op's result rounded to it; TC_NDTYPES: no */
    int ndim;
    char *err;
    size_t errlen;
} bn_ctx;

static int
cast(bn_ctx *c, int x, tc_dtype dt)
{
    if (x < 0 || c->g->nodes[x].dtype == dt) {
        return x;
    }
    return tc_graph_op(c->g, "to", 1, &x, dt, c->err, c->errlen);
}

/* op over in[0..nin-1] (unary / binary), rounded as c says */
static int
opn(bn_ctx *c, const char *op, int nin, int a, int b)
{
    int in[2] = {a, b};
    if (a < 0 || (nin == 2 && b < 0)) {
        return -1;
    }
    int r = tc_graph_op(c->g, op, nin, in, TC_NDTYPES, c->err, c->errlen);
    if (c->round != TC_NDTYPES) {
        r = cast(c, cast(c, r, c->round), c->opmath);
    }
    return r;
}

static int
op2(bn_ctx *c, const char *op, int a, int b)
{
    return opn(c, op, 2, a, b);
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
        int inv = opn(c, "rsqrt", 1, op2(c, "add", var, eps), -1);
        y = op2(c, "add", op2(c, "mul", t, inv), bias);
    }
    else {
        int inv = op2(c, "div", one, opn(c, "sqrt", 1,
                                         op2(c, "add", var, eps), -1));
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

/* The result's layout as eager's kernel allocates it, which the
 * pointwise rule need not give (size-1 dims, a permuted input).  The CPU
 * kernel allocates empty_like(x, x.suggest_memory_format()) (what the
 * meta run, which preserves x's strides, does not say for a permuted 3-d
 * input); on CUDA the extern's layout is the meta run's: empty_like(x). */
static void
set_eager_layout(const tc_graph *g, const tc_bn_eval *b, tc_layout *out)
{
    if (g->cuda) {
        *out = g->nodes[b->node].layout;
        return;
    }
    const tc_layout *x = &g->nodes[b->x].layout;
    *out = *x;
    tc_layout_of_cat(&x, 1, out);
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
            tc_dtype pdt = g->nodes[b->mean].dtype;
            bn_ctx c = {ng, tc_dtype_opmath(old->dtype),
                        formula[i] == BN_GENERAL
                        && tc_dtype_is_reduced_float(pdt) ? pdt : TC_NDTYPES,
                        old->layout.ndim, err, errlen};
            map[i] = lower_one(&c, &m, (bn_formula)formula[i], old->dtype);
            if (map[i] < 0) {
                goto done;
            }
            set_eager_layout(g, b, &ng->nodes[map[i]].layout);
            continue;
        }
        map[i] = tc_graph_push_mapped(ng, old, map);
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
