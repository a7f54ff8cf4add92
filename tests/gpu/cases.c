/* cases.c - plans for the GPU tests (see cases.h). */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tc_graph *g;
    char *err;
    size_t errlen;
    int bad;
} G;

static int
in_(G *b, tc_dtype dt, int nd, const int64_t *sizes, const int64_t *strides)
{
    tc_layout l;
    memset(&l, 0, sizeof(l));
    l.ndim = nd;
    memcpy(l.sizes, sizes, sizeof(int64_t) * (size_t)nd);
    if (strides) {
        memcpy(l.strides, strides, sizeof(int64_t) * (size_t)nd);
    }
    else {
        tc_layout_contiguous(&l);
    }
    int r = tc_graph_input(b->g, dt, &l);
    b->bad |= r < 0;
    return r;
}

static int
op3(G *b, const char *name, int x, int y, int z, tc_dtype attr)
{
    if (b->bad) {
        return -1;
    }
    int in[3] = {x, y, z};
    int n = z >= 0 ? 3 : y >= 0 ? 2 : 1;
    int r = tc_graph_op(b->g, name, n, in, attr, b->err, b->errlen);
    b->bad |= r < 0;
    return r;
}

#define OP1(b, n, x) op3(b, n, x, -1, -1, TC_F32)
#define OP2(b, n, x, y) op3(b, n, x, y, -1, TC_F32)
#define TO(b, x, dt) op3(b, "to", x, -1, -1, dt)
#define SF(b, v) tc_graph_scalar_float((b)->g, v)
#define SI(b, v) tc_graph_scalar_int((b)->g, v)

static tc_plan *
finish(G *b, int n, const int *outs)
{
    tc_plan *p = NULL;
    if (!b->bad && tc_graph_set_outputs(b->g, n, outs) == 0
        && tc_graph_optimize(b->g) == 0) {
        p = tc_schedule(b->g, b->err, b->errlen);
    }
    else if (b->err[0] == '\0') {
        snprintf(b->err, b->errlen, "graph construction failed");
    }
    tc_graph_free(b->g);
    return p;
}

#define BEGIN G b_ = {tc_graph_new(), err, errlen, 0}; G *b = &b_; err[0] = 0

tc_plan *
tc_gpu_case_chain(int64_t n, char *err, size_t errlen)
{
    BEGIN;
    int64_t s[1] = {n};
    int x = in_(b, TC_F32, 1, s, NULL), y = in_(b, TC_F32, 1, s, NULL);
    int r = OP2(b, "add", OP1(b, "sin", x), OP1(b, "cos", y));
    r = OP1(b, "relu", r);
    r = OP2(b, "add", OP2(b, "mul", r, SF(b, 2.0)), SF(b, 1.0));
    return finish(b, 1, &r);
}

tc_plan *
tc_gpu_case_f32_unary5(int64_t n, char *err, size_t errlen)
{
    BEGIN;
    int64_t s[1] = {n};
    int x = in_(b, TC_F32, 1, s, NULL);
    int outs[5] = {OP1(b, "sin", x), OP1(b, "cos", x), OP1(b, "exp", x),
                   OP1(b, "log", x), OP1(b, "tanh", x)};
    return finish(b, 5, outs);
}

static tc_plan *
c_f32_unary5(char *err, size_t errlen)
{
    return tc_gpu_case_f32_unary5(4099, err, errlen);
}

/* f32 transcendentals over wide ranges (the fast/slow sin path split,
 * exp overflow/underflow, log of denormals, tanh saturation), from the
 * harness's [-3, 3) inputs */
static tc_plan *
c_f32_math_wide(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[1] = {100003};
    int x = in_(b, TC_F32, 1, s, NULL);
    int outs[8] = {
        OP1(b, "sin", OP2(b, "mul", x, SF(b, 4.0e4))),
        OP1(b, "cos", OP2(b, "mul", x, SF(b, 3.0e7))),
        OP1(b, "exp", OP2(b, "mul", x, SF(b, 35.0))),
        OP1(b, "log", OP2(b, "mul", OP1(b, "abs", x), SF(b, 1e-38))),
        OP1(b, "log", OP2(b, "mul", OP1(b, "abs", x), SF(b, 1e30))),
        OP1(b, "tanh", OP2(b, "mul", x, SF(b, 4.0))),
        OP1(b, "sin", OP2(b, "mul", x, SF(b, 1e38))),
        OP1(b, "exp", OP2(b, "div", x, SF(b, 1e-4))),
    };
    return finish(b, 8, outs);
}

static tc_plan *
c_chain_small(char *err, size_t errlen)
{
    return tc_gpu_case_chain(1000003, err, errlen);
}

/* f32 transcendentals on a broadcast 2-D domain */
static tc_plan *
c_f32_math(char *err, size_t errlen)
{
    BEGIN;
    int64_t s2[2] = {64, 130}, s1[1] = {130};
    int x = in_(b, TC_F32, 2, s2, NULL), y = in_(b, TC_F32, 1, s1, NULL);
    int e = OP1(b, "exp", x);
    int l = OP1(b, "log", OP1(b, "abs", y));
    int t = OP1(b, "tanh", OP2(b, "mul", x, y));
    int sg = OP1(b, "sigmoid", x);
    int sq = OP1(b, "rsqrt", OP2(b, "add", OP1(b, "abs", x), SF(b, 1.0)));
    int pw = OP2(b, "pow", OP1(b, "abs", x), y);
    int mx = OP2(b, "maximum", x, y);
    int outs[7] = {OP2(b, "add", e, l), t, sg, sq, pw, mx,
                   OP2(b, "div", x, y)};
    return finish(b, 7, outs);
}

static tc_plan *
c_f64_math(char *err, size_t errlen)
{
    BEGIN;
    int64_t s2[2] = {33, 70};
    int x = in_(b, TC_F64, 2, s2, NULL), y = in_(b, TC_F64, 2, s2, NULL);
    int outs[8] = {OP1(b, "exp", x), OP1(b, "log", OP1(b, "abs", y)),
                   OP1(b, "sin", OP2(b, "mul", x, SF(b, 100.0))),
                   OP1(b, "cos", x), OP1(b, "tanh", y),
                   OP2(b, "pow", OP1(b, "abs", x), y),
                   OP2(b, "minimum", x, y), OP1(b, "sqrt", OP1(b, "abs", x))};
    return finish(b, 8, outs);
}

tc_plan *
tc_gpu_case_f64_trig(int64_t n, char *err, size_t errlen)
{
    BEGIN;
    int64_t s[1] = {n};
    int x = in_(b, TC_F64, 1, s, NULL);
    int outs[2] = {OP1(b, "sin", x), OP1(b, "cos", x)};
    return finish(b, 2, outs);
}

/* f64 sin / cos of huge arguments (the exact reduction: every exponent
 * band, DBL_MAX, inf from the overflowing products), from the harness's
 * [-3, 3) inputs */
static tc_plan *
c_f64_math_wide(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[1] = {20011};
    int x = in_(b, TC_F64, 1, s, NULL);
    static const double scale[8] = {1e6, 3e7, 1e30, 1e60, 1e120, 1e200,
                                    1e290, 1e308};
    int outs[8];
    for (int i = 0; i < 8; i++) {
        outs[i] = OP1(b, i % 2 ? "cos" : "sin",
                      OP2(b, "mul", x, SF(b, scale[i])));
    }
    return finish(b, 8, outs);
}

/* integer dtypes: arithmetic wraps, comparisons, where, casts */
static tc_plan *
c_ints(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[1] = {1027};
    int a = in_(b, TC_I32, 1, s, NULL), c = in_(b, TC_I64, 1, s, NULL);
    int i8 = in_(b, TC_I8, 1, s, NULL), u8 = in_(b, TC_U8, 1, s, NULL);
    int i16 = in_(b, TC_I16, 1, s, NULL), bl = in_(b, TC_BOOL, 1, s, NULL);
    int outs[12] = {
        OP2(b, "mul", OP2(b, "add", a, SI(b, 7)), a),
        OP2(b, "sub", OP2(b, "mul", c, c), OP1(b, "neg", c)),
        OP2(b, "mul", i8, i8),
        OP2(b, "add", u8, u8),
        OP1(b, "abs", OP2(b, "mul", i16, SI(b, 3))),
        op3(b, "where", bl, a, OP1(b, "neg", a), TC_F32),
        OP2(b, "lt", i8, u8),
        OP2(b, "bitwise_xor", OP1(b, "bitwise_not", i16), i16),
        OP2(b, "maximum", i8, i16),
        TO(b, OP2(b, "mul", TO(b, a, TC_F32), SF(b, 0.37)), TC_I8),
        OP2(b, "logical_and", bl, OP2(b, "ne", a, SI(b, 3))),
        OP2(b, "div", a, SI(b, 3)),
    };
    return finish(b, 12, outs);
}

static tc_plan *
c_casts(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[2] = {17, 31};
    int x = in_(b, TC_F32, 2, s, NULL);
    int outs[7] = {TO(b, x, TC_F64), TO(b, x, TC_I64), TO(b, x, TC_BOOL),
                   TO(b, TO(b, x, TC_I32), TC_F32), TO(b, x, TC_U8),
                   TO(b, TO(b, x, TC_I16), TC_F64),
                   OP2(b, "add", TO(b, x, TC_F64), SF(b, 0.5))};
    return finish(b, 7, outs);
}

/* views: transposed and sliced reads (strides, storage offsets) */
static tc_plan *
c_views(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[2] = {96, 80}, s2[2] = {106, 80};
    int x = in_(b, TC_F32, 2, s, NULL), y = in_(b, TC_F32, 2, s2, NULL);
    int xt = tc_graph_t(b->g, x, err, errlen);
    int64_t st = 5, sp = 101;
    int ys = tc_graph_slice(b->g, y, 0, &st, &sp, 1, err, errlen);
    b->bad |= xt < 0 || ys < 0;
    int outs[2] = {OP2(b, "add", xt, SF(b, 1.0)),
                   OP2(b, "mul", OP1(b, "exp", tc_graph_t(b->g, ys, err,
                                                          errlen)), xt)};
    return finish(b, 2, outs);
}

static tc_plan *
c_softmax(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[2] = {64, 1000};
    int x = in_(b, TC_F32, 2, s, NULL);
    int y = tc_graph_softmax(b->g, x, -1, 0, TC_F32, 0, err, errlen);
    int z = tc_graph_softmax(b->g, x, 0, 0, TC_F32, 1, err, errlen);
    b->bad |= y < 0 || z < 0;
    int outs[2] = {y, z};
    return finish(b, 2, outs);
}

static tc_plan *
c_layer_norm(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[2] = {128, 768}, w[1] = {768};
    int x = in_(b, TC_F32, 2, s, NULL);
    int wt = in_(b, TC_F32, 1, w, NULL), bs = in_(b, TC_F32, 1, w, NULL);
    int y = tc_graph_layer_norm(b->g, x, 1, w, wt, bs, 1e-5, err, errlen);
    b->bad |= y < 0;
    return finish(b, 1, &y);
}

static tc_plan *
c_reductions(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[3] = {6, 50, 40};
    int x = in_(b, TC_F32, 3, s, NULL);
    int xi = in_(b, TC_I32, 3, s, NULL);
    int xd = in_(b, TC_F64, 3, s, NULL);
    tc_reduce_args a;
    int outs[9];
    const char *names[9] = {"sum", "amax", "argmax", "argmin", "prod",
                            "any", "amin", "sum", "mean"};
    for (int i = 0; i < 9; i++) {
        memset(&a, 0, sizeof(a));
        a.ndims = 1;
        a.dims[0] = i % 3 == 0 ? -1 : i % 3 == 1 ? 1 : 0;
        if (i == 0) {
            a.ndims = 2;
            a.dims[0] = 0;
            a.dims[1] = 2;
        }
        int src = i == 4 ? OP2(b, "mul", x, SF(b, 0.05))
                  : i == 5 ? OP2(b, "gt", x, SF(b, 2.5))
                  : i == 6 ? xi : i == 7 ? xd : x;
        outs[i] = tc_graph_reduce(b->g, names[i], src, &a, err, errlen);
        b->bad |= outs[i] < 0;
    }
    return finish(b, 9, outs);
}

static tc_plan *
c_full_sum(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[1] = {1 << 20};
    int x = in_(b, TC_F32, 1, s, NULL);
    tc_reduce_args a;
    memset(&a, 0, sizeof(a));
    int y = tc_graph_reduce(b->g, "sum", x, &a, err, errlen);
    int z = tc_graph_reduce(b->g, "argmax", x, &a, err, errlen);
    b->bad |= y < 0 || z < 0;
    int outs[2] = {y, z};
    return finish(b, 2, outs);
}

/* ---- hand-built KIR ------------------------------------------------------ */

static tc_plan *
hand_plan(int nbuf, int ndim, const int64_t *sizes, int nargs)
{
    tc_plan *p = calloc(1, sizeof(*p));
    p->nbuffers = nbuf;
    p->buffers = calloc((size_t)nbuf, sizeof(tc_buffer));
    p->nkernels = 1;
    p->kernels = calloc(1, sizeof(tc_kernel));
    tc_kernel *k = &p->kernels[0];
    snprintf(k->name, sizeof(k->name), "hand");
    k->ndim = ndim;
    k->numel = 1;
    for (int d = 0; d < ndim; d++) {
        k->sizes[d] = sizes[d];
        k->numel *= sizes[d];
    }
    k->nargs = nargs;
    k->args = calloc((size_t)nargs, sizeof(tc_karg));
    return p;
}

static int
inst(tc_kernel *k, tc_kop op, tc_dtype dt, int a, int b, int c)
{
    k->insts = realloc(k->insts, sizeof(tc_kinst) * (size_t)(k->ninsts + 1));
    tc_kinst *in = &k->insts[k->ninsts];
    memset(in, 0, sizeof(*in));
    in->op = op;
    in->dtype = dt;
    in->a = a;
    in->b = b;
    in->c = c;
    in->arg = -1;
    return k->ninsts++;
}

/* u8 copy + 1 over 2^31 + 5 elements: 64-bit indexing, vector + tail */
static tc_plan *
c_wide(char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    int64_t n = ((int64_t)1 << 31) + 5;
    tc_plan *p = hand_plan(2, 1, &n, 2);
    tc_kernel *k = &p->kernels[0];
    for (int a = 0; a < 2; a++) {
        p->buffers[a].kind = a ? TC_BUF_OUTPUT : TC_BUF_INPUT;
        p->buffers[a].dtype = TC_U8;
        p->buffers[a].layout.ndim = 1;
        p->buffers[a].layout.sizes[0] = n;
        p->buffers[a].layout.strides[0] = 1;
        k->args[a].buffer = a;
        k->args[a].dtype = TC_U8;
        k->args[a].strides[0] = 1;
        k->args[a].is_output = a;
    }
    int l = inst(k, KOP_LOAD, TC_U8, -1, -1, -1);
    k->insts[l].arg = 0;
    int one = inst(k, KOP_CONST, TC_U8, -1, -1, -1);
    k->insts[one].imm.i = 1;
    int s = inst(k, KOP_ADD, TC_U8, l, one, -1);
    int st = inst(k, KOP_STORE, TC_U8, s, -1, -1);
    k->insts[st].arg = 1;
    p->noutputs = 1;
    p->output_buffer = calloc(1, sizeof(int));
    p->output_buffer[0] = 1;
    return p;
}

/* every dtype through the vector path: out_T = in_T * 3 - 1, plus a
 * broadcast scalar argument (stride 0); 1 + 4k elements for the tail */
static tc_plan *
c_vec_dtypes(char *err, size_t errlen)
{
    BEGIN;
    int64_t s[1] = {4097}, one[1] = {1};
    static const tc_dtype dts[7] = {TC_U8, TC_I8, TC_I16, TC_I32, TC_I64,
                                    TC_F32, TC_F64};
    int outs[7];
    for (int i = 0; i < 7; i++) {
        int x = in_(b, dts[i], 1, s, NULL);
        int c = in_(b, dts[i], 1, one, NULL);
        int y = OP2(b, "sub", OP2(b, "mul", x, SI(b, 3)), c);
        outs[i] = OP2(b, "eq", y, x);
        outs[i] = i % 2 ? y : op3(b, "where", outs[i], x, y, TC_F32);
    }
    return finish(b, 7, outs);
}

const tc_gpu_case tc_gpu_cases[] = {
    {"chain_f32_1M", c_chain_small, 1},
    {"f32_math_bcast", c_f32_math, 1},
    {"f32_math_wide", c_f32_math_wide, 1},
    {"f32_unary5", c_f32_unary5, 1},
    {"f64_math", c_f64_math, 1},
    {"f64_math_wide", c_f64_math_wide, 1},
    {"int_dtypes", c_ints, 1},
    {"casts", c_casts, 1},
    {"views", c_views, 1},
    {"vec_dtypes", c_vec_dtypes, 1},
    {"softmax", c_softmax, 1},
    {"layer_norm", c_layer_norm, 1},
    {"reductions", c_reductions, 1},
    {"full_sum_argmax", c_full_sum, 1},
    {"wide_u8_2G", c_wide, 0},
};
const int tc_gpu_ncases = (int)(sizeof(tc_gpu_cases) / sizeof(tc_gpu_cases[0]));

int64_t
tc_test_span(const tc_layout *l)
{
    int64_t span = 1;
    for (int d = 0; d < l->ndim; d++) {
        if (l->sizes[d] == 0) {
            return 0;
        }
        span += (l->sizes[d] - 1) * (l->strides[d] < 0 ? -l->strides[d]
                                                      : l->strides[d]);
    }
    return span;
}

int64_t
tc_trig64_check(const char *what, const double *x, const double *y,
                int64_t n, int is_cos)
{
    double worst = 0, at = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        long double w = is_cos ? cosl((long double)x[i])
                               : sinl((long double)x[i]);
        double d = fabs((double)((long double)y[i] - w));
        int ok = isfinite(x[i]) ? d <= TC_TRIG64_TOL : y[i] != y[i];
        if (isfinite(x[i]) && d > worst) {
            worst = d;
            at = x[i];
        }
        if (!ok && bad++ < 3) {
            printf("  %s(%a) = %.17g, want %.17Lg\n", is_cos ? "cos" : "sin",
                   x[i], y[i], w);
        }
    }
    printf("%s %s %s: max abs error %.3g (at %a) over %lld inputs vs long"
           " double libm; %lld fail\n", bad ? "FAIL" : "PASS", what,
           is_cos ? "cos" : "sin", worst, at, (long long)n, (long long)bad);
    return bad;
}
