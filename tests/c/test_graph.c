/* test_graph.c - standalone tests of src/graph (no Python needed).
 *
 * Expected dtypes, layouts and error messages come from eager PyTorch via
 * gen_test_graph_cases.py (test_graph_cases.h); numeric expectations of the
 * lowerings were computed with torch and are checked by a small KIR
 * interpreter (which also runs reduction kernels: phases, accumulators,
 * argument offsets).  Views, reductions and normalizations are checked
 * against eager by gen_test_graph_rv.py (test_graph_rv.h: layouts, storage
 * offsets, dtypes, torch's error messages and values).  Build and run:
 *
 *   gcc -std=gnu11 -Wall -Wextra -g -Isrc/graph tests/c/test_graph.c \
 *       src/graph/[a-z]*.c -lm -o /tmp/test_graph && /tmp/test_graph
 */
#include "graph.h"
#include "kir.h"
#include "ops.h"
#include "reduce_plan.h"
#include "schedule.h"
#include "textbuf.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, checks;

#define CHECK(cond, ...)                                               \
    do {                                                               \
        checks++;                                                      \
        if (!(cond)) {                                                 \
            failures++;                                                \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                \
            printf(__VA_ARGS__);                                       \
            printf("\n");                                              \
        }                                                              \
    } while (0)

/* ---- generated cases ------------------------------------------------- */

typedef struct {
    char kind; /* 't' tensor, 'f' float, 'i' int, 'b' bool (Python numbers) */
    tc_dtype dt;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    int64_t strides[TC_MAX_DIMS];
    double v;
} operand;

typedef struct {
    const char *op;
    int nin;
    operand in[3];
    tc_dtype attr;
    int ok;
    tc_dtype dt;
    int ndim;
    int64_t sizes[TC_MAX_DIMS];
    int64_t strides[TC_MAX_DIMS];
    const char *err; /* torch's message, NULL: tcjit rejects, torch doesn't */
} op_case;

typedef struct {
    int kind; /* 1 dim tensor, 0 0-d tensor, 2 wrapped Python number */
    tc_dtype dt;
} promo_operand;

typedef struct {
    promo_operand a, b;
    tc_dtype expected;
} promo_case;

static const op_case op_cases[] = {
#include "test_graph_cases.h"
};

static const promo_case promo_cases[] = {
#include "test_graph_promo.h"
};

static int
add_operand(tc_graph *g, const operand *o)
{
    tc_layout l;
    switch (o->kind) {
    case 'f':
        return tc_graph_scalar_float(g, o->v);
    case 'i':
        return tc_graph_scalar_int(g, (int64_t)o->v);
    case 'b':
        return tc_graph_scalar_bool(g, o->v != 0);
    default:
        l.ndim = o->ndim;
        memcpy(l.sizes, o->sizes, sizeof(l.sizes));
        memcpy(l.strides, o->strides, sizeof(l.strides));
        return tc_graph_input(g, o->dt, &l);
    }
}

static void
describe_case(const op_case *c, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "%s(", c->op);
    for (int k = 0; k < c->nin && len < n; k++) {
        const operand *o = &c->in[k];
        if (o->kind != 't') {
            len += (size_t)snprintf(buf + len, n - len, "%s%c:%g", k ? ", " : "",
                                    o->kind, o->v);
            continue;
        }
        len += (size_t)snprintf(buf + len, n - len, "%s%s[", k ? ", " : "",
                                tc_dtype_name(o->dt));
        for (int d = 0; d < o->ndim && len < n; d++) {
            len += (size_t)snprintf(buf + len, n - len, "%s%lld@%lld",
                                    d ? "," : "", (long long)o->sizes[d],
                                    (long long)o->strides[d]);
        }
        len += (size_t)snprintf(buf + len, n - len, "]");
    }
    if (len < n) {
        snprintf(buf + len, n - len, ") to=%s", tc_dtype_name(c->attr));
    }
}

static void
check_op_case(const op_case *c)
{
    tc_graph *g = tc_graph_new();
    int in[3];
    char err[512] = "", what[256];
    for (int k = 0; k < c->nin; k++) {
        in[k] = add_operand(g, &c->in[k]);
    }
    int id = tc_graph_op(g, c->op, c->nin, in, c->attr, err, sizeof(err));
    describe_case(c, what, sizeof(what));
    if (!c->ok) {
        CHECK(id < 0, "%s: expected error '%s'", what,
              c->err ? c->err : "(tcjit unsupported)");
        if (id < 0 && c->err) {
            CHECK(!strcmp(err, c->err), "%s: message\n  got  '%s'\n  want '%s'",
                  what, err, c->err);
        }
        tc_graph_free(g);
        return;
    }
    CHECK(id >= 0, "%s: unexpected error: %s", what, err);
    if (id >= 0) {
        const tc_node *n = &g->nodes[id];
        int same = n->dtype == c->dt && n->layout.ndim == c->ndim;
        for (int d = 0; same && d < c->ndim; d++) {
            same = n->layout.sizes[d] == c->sizes[d] &&
                   n->layout.strides[d] == c->strides[d];
        }
        char got[128] = "", want[128] = "";
        for (int d = 0; d < n->layout.ndim; d++) {
            snprintf(got + strlen(got), sizeof(got) - strlen(got), "%lld@%lld ",
                     (long long)n->layout.sizes[d],
                     (long long)n->layout.strides[d]);
        }
        for (int d = 0; d < c->ndim; d++) {
            snprintf(want + strlen(want), sizeof(want) - strlen(want),
                     "%lld@%lld ", (long long)c->sizes[d],
                     (long long)c->strides[d]);
        }
        CHECK(same, "%s: got %s [%s] want %s [%s]", what,
              tc_dtype_name(n->dtype), got, tc_dtype_name(c->dt), want);
    }
    tc_graph_free(g);
}

static void
test_op_cases(void)
{
    int n = (int)(sizeof(op_cases) / sizeof(op_cases[0]));
    for (int i = 0; i < n; i++) {
        check_op_case(&op_cases[i]);
    }
    printf("op cases: %d\n", n);
}

static int
promo_node(tc_graph *g, const promo_operand *o)
{
    tc_layout l = {1, {4}, {1}};
    tc_layout z = {0, {0}, {0}};
    if (o->kind == 1) {
        return tc_graph_input(g, o->dt, &l);
    }
    if (o->kind == 0) {
        return tc_graph_input(g, o->dt, &z);
    }
    if (o->dt == TC_BOOL) {
        return tc_graph_scalar_bool(g, 1);
    }
    if (o->dt == TC_I64) {
        return tc_graph_scalar_int(g, 3);
    }
    return tc_graph_scalar_float(g, 1.5);
}

static void
test_promotion(void)
{
    int n = (int)(sizeof(promo_cases) / sizeof(promo_cases[0]));
    for (int i = 0; i < n; i++) {
        const promo_case *c = &promo_cases[i];
        tc_graph *g = tc_graph_new();
        int in[2] = {promo_node(g, &c->a), promo_node(g, &c->b)};
        tc_dtype r = tc_promote_nodes(g, 2, in);
        CHECK(r == c->expected, "result_type(%d:%s, %d:%s) = %s, want %s",
              c->a.kind, tc_dtype_name(c->a.dt), c->b.kind,
              tc_dtype_name(c->b.dt), tc_dtype_name(r),
              tc_dtype_name(c->expected));
        tc_graph_free(g);
    }
    /* promote_types spot checks */
    CHECK(tc_promote_types(TC_U8, TC_I8) == TC_I16, "u8+i8");
    CHECK(tc_promote_types(TC_BOOL, TC_U8) == TC_U8, "bool+u8");
    CHECK(tc_promote_types(TC_I64, TC_F32) == TC_F32, "i64+f32");
    CHECK(tc_promote_types(TC_F32, TC_F64) == TC_F64, "f32+f64");
    CHECK(tc_promote_types(TC_F16, TC_BF16) == TC_F32, "f16+bf16");
    CHECK(tc_promote_types(TC_BF16, TC_I64) == TC_BF16, "bf16+i64");
    CHECK(tc_promote_types(TC_F16, TC_F32) == TC_F32, "f16+f32");
    printf("promotion cases: %d\n", n);
}

static void
test_dtype_names(void)
{
    static const char *names[] = {"bool", "uint8", "int8", "int16",
                                  "int32", "int64", "float32", "float64",
                                  "float16", "bfloat16"};
    static const char *st[] = {"Bool", "Byte", "Char", "Short",
                               "Int", "Long", "Float", "Double", "Half",
                               "BFloat16"};
    static const size_t sizes[] = {1, 1, 1, 2, 4, 8, 4, 8, 2, 2};
    for (int d = 0; d < TC_NDTYPES; d++) {
        CHECK(!strcmp(tc_dtype_name(d), names[d]), "name %d", d);
        CHECK(!strcmp(tc_dtype_scalar_type_name(d), st[d]), "st name %d", d);
        CHECK(tc_dtype_size(d) == sizes[d], "size %d", d);
        CHECK(tc_dtype_is_float(d) == (d >= TC_F32), "is_float %d", d);
        CHECK(tc_dtype_is_int(d) == (d >= TC_U8 && d <= TC_I64), "is_int %d", d);
    }
}

/* Host conversions (half.c): exact widening, and rounding of a few
 * values whose float16 / bfloat16 bits are known. */
static void
test_half_conversions(void)
{
    static const struct {
        float f;
        uint16_t h, b;
    } cases[] = {
        {1.0f, 0x3c00, 0x3f80},
        {-2.0f, 0xc000, 0xc000},
        {65504.0f, 0x7bff, 0x4780},
        {65520.0f, 0x7c00, 0x4780},       /* f16: the tie above max -> inf */
        {0x1p-24f, 0x0001, 0x3380},       /* smallest f16 subnormal */
        {0x1p-25f, 0x0000, 0x3300},       /* tie -> even (0) */
        {0x1.8p-25f, 0x0001, 0x3340},
        {1.0f + 0x1p-11f, 0x3c00, 0x3f80}, /* tie -> even */
        {1.0f + 0x3p-11f, 0x3c02, 0x3f80},
        {1.0f + 0x1p-8f, 0x3c04, 0x3f80},  /* bf16 tie -> even */
        {1.0f + 0x3p-8f, 0x3c0c, 0x3f82},
        {3.4e38f, 0x7c00, 0x7f80},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        CHECK(tc_f32_to_f16_bits(cases[i].f) == cases[i].h, "f16 %zu: %04x",
              i, tc_f32_to_f16_bits(cases[i].f));
        CHECK(tc_f32_to_bf16_bits(cases[i].f) == cases[i].b, "bf16 %zu: %04x",
              i, tc_f32_to_bf16_bits(cases[i].f));
    }
    for (uint32_t h = 0; h < 0x10000; h++) {
        float f = tc_f16_bits_to_f32((uint16_t)h);
        float g = tc_bf16_bits_to_f32((uint16_t)h);
        if (f == f) {
            CHECK(tc_f32_to_f16_bits(f) == h, "f16 round trip %04x", h);
        }
        if (g == g) {
            CHECK(tc_f32_to_bf16_bits(g) == h, "bf16 round trip %04x", h);
        }
    }
    CHECK(tc_round_to_dtype(0.1, TC_F16) == 0.0999755859375, "0.1 as f16");
}

static void
test_registry(void)
{
    static const char *names[] = {
        "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt",
        "rsqrt", "sin", "cos", "tanh", "sigmoid", "relu", "pow", "maximum",
        "minimum", "clamp", "clamp_min", "clamp_max", "where", "lt", "le",
        "gt", "ge", "eq", "ne", "logical_and", "logical_or", "logical_xor",
        "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
        "bitwise_not", "to", "square", "reciprocal"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int op = tc_op_lookup(names[i]);
        CHECK(op >= 0 && tc_ops[op].lower && tc_ops[op].doc,
              "op %s missing", names[i]);
    }
    CHECK(tc_op_lookup("nope") < 0, "unknown op found");
}

/* ---- graph building helpers ------------------------------------------ */

static int
input(tc_graph *g, tc_dtype dt, int ndim, const int64_t *sizes,
      const int64_t *strides)
{
    tc_layout l;
    l.ndim = ndim;
    memcpy(l.sizes, sizes, sizeof(int64_t) * ndim);
    if (strides) {
        memcpy(l.strides, strides, sizeof(int64_t) * ndim);
    } else {
        tc_layout_contiguous(&l);
    }
    return tc_graph_input(g, dt, &l);
}

static int
op(tc_graph *g, const char *name, int a, int b, int c)
{
    int in[3] = {a, b, c};
    int n = c >= 0 ? 3 : b >= 0 ? 2 : 1;
    char err[256] = "";
    int id = tc_graph_op(g, name, n, in, TC_F32, err, sizeof(err));
    CHECK(id >= 0, "op %s failed: %s", name, err);
    return id;
}

static int
cast(tc_graph *g, int a, tc_dtype dt)
{
    char err[256] = "";
    int id = tc_graph_op(g, "to", 1, &a, dt, err, sizeof(err));
    CHECK(id >= 0, "to failed: %s", err);
    return id;
}

/* ---- unsupported / tcjit-specific errors ----------------------------- */

static void
test_errors(void)
{
    tc_graph *g = tc_graph_new();
    int64_t s[1] = {4};
    char err[256] = "";
    int xi = input(g, TC_I32, 1, s, NULL);
    int yi = input(g, TC_I32, 1, s, NULL);
    int in[2] = {xi, yi};
    CHECK(tc_graph_op(g, "pow", 2, in, TC_F32, err, sizeof(err)) < 0,
          "int ** int tensor must be unsupported");
    CHECK(strstr(err, "tcjit") != NULL, "pow message: %s", err);
    in[1] = tc_graph_scalar_int(g, 65);
    CHECK(tc_graph_op(g, "pow", 2, in, TC_F32, err, sizeof(err)) < 0,
          "int ** 65 must be unsupported");
    CHECK(tc_graph_op(g, "frobnicate", 2, in, TC_F32, err, sizeof(err)) < 0,
          "unknown op accepted");
    CHECK(strstr(err, "frobnicate") != NULL, "unknown op message: %s", err);
    CHECK(tc_graph_op(g, "add", 1, in, TC_F32, err, sizeof(err)) < 0,
          "wrong arity accepted");
    /* same-dtype cast is the input itself (eager returns self) */
    CHECK(cast(g, xi, TC_I32) == xi, "to(same dtype) should alias");
    tc_layout big = {9, {1}, {1}};
    CHECK(tc_graph_input(g, TC_F32, &big) < 0, "ndim 9 accepted");
    tc_graph_free(g);
}

/* ---- optimize + format ------------------------------------------------ */

static void
test_optimize_format(void)
{
    tc_graph *g = tc_graph_new();
    int64_t s0[2] = {1000, 64}, s1[1] = {64};
    int x0 = input(g, TC_F32, 2, s0, NULL);
    int x1 = input(g, TC_F32, 1, s1, NULL);
    int c1 = op(g, "cos", x1, -1, -1);
    int h1 = tc_graph_scalar_float(g, 0.5);
    int m1 = op(g, "mul", c1, h1, -1);
    int dead = op(g, "sin", x0, -1, -1);
    int c2 = op(g, "cos", x1, -1, -1);        /* CSE with c1 */
    int h2 = tc_graph_scalar_float(g, 0.5);  /* CSE with h1 */
    int m2 = op(g, "mul", c2, h2, -1);        /* CSE with m1 */
    int a = op(g, "add", m2, x0, -1);
    int t = tc_graph_scalar_bool(g, 1);
    int w = op(g, "where", op(g, "gt", a, tc_graph_scalar_int(g, 2), -1), a, t);
    (void)dead, (void)m1;
    int outs[3] = {a, w, x1};
    CHECK(tc_graph_set_outputs(g, 3, outs) == 0, "set_outputs");
    CHECK(tc_graph_op_count(g) == 8, "op count before: %d",
          tc_graph_op_count(g));
    CHECK(tc_graph_optimize(g) == 0, "optimize");
    CHECK(tc_graph_op_count(g) == 5, "op count after: %d",
          tc_graph_op_count(g));
    CHECK(g->ninputs == 2 && g->nodes[0].kind == TC_NODE_INPUT &&
              g->nodes[1].input_index == 1,
          "inputs kept");
    char *text = tc_graph_format(g, "f");
    const char *want =
        "graph f (2 inputs, 5 ops):\n"
        "  %x0 : f32[1000, 64] stride (64, 1) = input[0]\n"
        "  %x1 : f32[64] stride (1,) = input[1]\n"
        "  %2  : f32[64] = cos(%x1)\n"
        "  %4  : f32[64] = mul(%2, 0.5)\n"
        "  %5  : f32[1000, 64] = add(%4, %x0)\n"
        "  %8  : b8[1000, 64] = gt(%5, 2)\n"
        "  %9  : f32[1000, 64] = where(%8, %5, True)\n"
        "  return (%5, %9, %x1)\n";
    CHECK(text && !strcmp(text, want), "format:\n%s\nwant:\n%s", text, want);
    free(text);
    /* optimizing twice changes nothing */
    int before = g->nnodes;
    CHECK(tc_graph_optimize(g) == 0 && g->nnodes == before, "idempotent");
    char *nf = tc_node_format(g, 4);
    CHECK(nf && !strcmp(nf, "%4 = mul(%2, 0.5)"), "node format %s", nf);
    free(nf);
    tc_graph_free(g);
}

/* Outputs keep eager's identity through CSE: an output returned twice is
 * one node; equal nodes returned as different tensors stay different
 * nodes (a copy of the first), and so do the bases of equal views;
 * equal nodes that are not returned still merge. */
static void
test_optimize_output_identity(void)
{
    tc_graph *g = tc_graph_new();
    int64_t s0[2] = {4, 6};
    char err[256];
    int x = input(g, TC_F32, 2, s0, NULL);
    int one = tc_graph_scalar_float(g, 1.0);
    int a = op(g, "add", x, one, -1);
    int b = op(g, "add", x, one, -1);   /* returned: a copy of a */
    int c = op(g, "add", x, one, -1);   /* not returned: merges into a */
    int m = op(g, "mul", c, one, -1);
    int d = op(g, "add", x, one, -1);   /* the base of a returned view */
    int dt = tc_graph_select(g, d, 0, 1, err, sizeof(err));
    int at = tc_graph_select(g, a, 0, 1, err, sizeof(err));
    int outs[6] = {a, b, a, m, dt, at};
    CHECK(tc_graph_set_outputs(g, 6, outs) == 0, "set_outputs");
    CHECK(tc_graph_optimize(g) == 0, "optimize");
    const int *o = g->outputs;
    const tc_node *nb = &g->nodes[o[1]], *nm = &g->nodes[o[3]];
    CHECK(o[0] == o[2] && o[0] != o[1], "outputs %d %d %d", o[0], o[1], o[2]);
    CHECK(!strcmp(tc_ops[nb->op].name, "clone") && nb->in[0] == o[0] &&
              nb->layout.strides[0] == 6,
          "second add is a clone of the first");
    CHECK(nm->in[0] == o[0], "unreturned add merged");
    int vd = g->nodes[o[4]].view_base, va = g->nodes[o[5]].view_base;
    CHECK(o[4] != o[5] && va == o[0] && vd != o[0] && vd != o[1] &&
              !strcmp(tc_ops[g->nodes[vd].op].name, "clone"),
          "view bases %d %d", vd, va);
    CHECK(tc_graph_op_count(g) == 6, "ops: %d", tc_graph_op_count(g));
    tc_graph_free(g);
}

/* ---- KIR interpreter (for checking lowerings and plans) --------------- */

typedef union {
    double f;
    int64_t i;
} val;

static int64_t
wrap(tc_dtype dt, int64_t v)
{
    switch (dt) {
    case TC_BOOL: return v != 0;
    case TC_U8: return (uint8_t)v;
    case TC_I8: return (int8_t)v;
    case TC_I16: return (int16_t)v;
    case TC_I32: return (int32_t)v;
    default: return v;
    }
}

static val
norm(tc_dtype dt, val v)
{
    if (dt == TC_F32) {
        v.f = (float)v.f;
    } else if (!tc_dtype_is_float(dt)) {
        v.i = wrap(dt, v.i);
    }
    return v;
}

static val
do_cast(tc_dtype from, tc_dtype to, val v)
{
    val r;
    int ff = tc_dtype_is_float(from), tf = tc_dtype_is_float(to);
    if (to == TC_BOOL) {
        r.i = ff ? v.f != 0 : v.i != 0;
    } else if (ff && tf) {
        r.f = v.f;
    } else if (ff) {
        r.i = isfinite(v.f) ? (int64_t)v.f : 0;
    } else if (tf) {
        r.f = (double)v.i;
    } else {
        r.i = v.i;
    }
    return norm(to, r);
}

static double
nan_max(double a, double b, int is_max)
{
    if (isnan(a) || isnan(b)) {
        return NAN;
    }
    return is_max ? (a > b ? a : b) : (a < b ? a : b);
}

static val
eval_float(const tc_kinst *in, val a, val b, int *handled)
{
    val r;
    *handled = 1;
    switch (in->op) {
    case KOP_NEG: r.f = -a.f; break;
    case KOP_ABS: r.f = fabs(a.f); break;
    case KOP_SQRT: r.f = sqrt(a.f); break;
    case KOP_EXP: r.f = exp(a.f); break;
    case KOP_LOG: r.f = log(a.f); break;
    case KOP_SIN: r.f = sin(a.f); break;
    case KOP_COS: r.f = cos(a.f); break;
    case KOP_TANH: r.f = tanh(a.f); break;
    case KOP_ADD: r.f = a.f + b.f; break;
    case KOP_SUB: r.f = a.f - b.f; break;
    case KOP_MUL: r.f = a.f * b.f; break;
    case KOP_DIV: r.f = a.f / b.f; break;
    case KOP_POW: r.f = pow(a.f, b.f); break;
    case KOP_MAX: r.f = nan_max(a.f, b.f, 1); break;
    case KOP_MIN: r.f = nan_max(a.f, b.f, 0); break;
    default: *handled = 0; r.f = 0;
    }
    return r;
}

static val
eval_int(const tc_kinst *in, val a, val b)
{
    val r;
    switch (in->op) {
    case KOP_NEG: r.i = -a.i; break;
    case KOP_ABS: r.i = a.i < 0 ? -a.i : a.i; break;
    case KOP_NOT: r.i = in->dtype == TC_BOOL ? !a.i : ~a.i; break;
    case KOP_ADD: r.i = a.i + b.i; break;
    case KOP_SUB: r.i = a.i - b.i; break;
    case KOP_MUL: r.i = (int64_t)((uint64_t)a.i * (uint64_t)b.i); break;
    case KOP_MAX: r.i = a.i > b.i ? a.i : b.i; break;
    case KOP_MIN: r.i = a.i < b.i ? a.i : b.i; break;
    case KOP_AND: r.i = a.i & b.i; break;
    case KOP_OR: r.i = a.i | b.i; break;
    case KOP_XOR: r.i = a.i ^ b.i; break;
    default: r.i = 0x7eadbeef;
    }
    return r;
}

static val
eval_compare(const tc_kinst *in, tc_dtype dt, val a, val b)
{
    val r;
    int fl = tc_dtype_is_float(dt);
    switch (in->op) {
    case KOP_LT: r.i = fl ? a.f < b.f : a.i < b.i; break;
    case KOP_LE: r.i = fl ? a.f <= b.f : a.i <= b.i; break;
    case KOP_EQ: r.i = fl ? a.f == b.f : a.i == b.i; break;
    default: r.i = fl ? a.f != b.f : a.i != b.i; break;
    }
    return r;
}

static int64_t
arg_offset(const tc_kernel *k, int arg, const int64_t *idx)
{
    int64_t off = k->args[arg].offset;
    for (int d = 0; d < k->ndim + k->nred; d++) {
        off += idx[d] * k->args[arg].strides[d];
    }
    return off;
}

/* Accumulator state; float sums keep 8 partial lanes (blocked order, as
 * kir.h asks emitters to do) combined pairwise at the end. */
#define LANES 8
typedef struct {
    val lane[LANES];
    val v;
    int64_t index;
} accst;

static int
is_nan_val(tc_dtype dt, val v)
{
    return tc_dtype_is_float(dt) && isnan(v.f);
}

static int
val_less(tc_dtype dt, val a, val b)
{
    return tc_dtype_is_float(dt) ? a.f < b.f : a.i < b.i;
}

static void
acc_init(accst *s, int kind, tc_dtype dt)
{
    val z;
    int fl = tc_dtype_is_float(dt);
    memset(s, 0, sizeof(*s));
    s->index = -1;
    switch (kind) {
    case TC_ACC_PROD:
        z.i = 1;
        if (fl) {
            z.f = 1;
        }
        break;
    case TC_ACC_MAX:
    case TC_ACC_ARGMAX:
        if (fl) {
            z.f = -INFINITY;
        } else {
            z.i = dt == TC_BOOL ? 0 : INT64_MIN;
        }
        break;
    case TC_ACC_MIN:
    case TC_ACC_ARGMIN:
        if (fl) {
            z.f = INFINITY;
        } else {
            z.i = dt == TC_BOOL ? 1 : INT64_MAX;
        }
        break;
    case TC_ACC_ALL:
        z.i = 1;
        break;
    default:
        z.i = 0;
        if (fl) {
            z.f = 0;
        }
    }
    for (int l = 0; l < LANES; l++) {
        s->lane[l] = z;
    }
    s->v = z;
    if (kind == TC_ACC_SOFTMAX) {   /* (max, sum) = (-inf, 0) */
        s->v.f = -INFINITY;
        s->lane[0].f = 0;
    }
}

/* kir.h's SOFTMAX combine of (v, lane[0]) with the partial (m2, s2). */
static void
softmax_combine(accst *s, double m2, double s2)
{
    double m1 = s->v.f, s1 = s->lane[0].f;
    double d = (float)(nan_max(m2, -FLT_MAX, 1) - m1);
    double t = (float)exp(-fabs(d));
    s->lane[0].f = (float)(m2 > m1 ? s1 * t + s2 : s1 + s2 * t);
    s->v.f = nan_max(m1, m2, 1);
}

static void
acc_update(accst *s, int kind, tc_dtype dt, val x, int64_t r)
{
    val *l = &s->lane[r % LANES];
    int fl = tc_dtype_is_float(dt);
    switch (kind) {
    case TC_ACC_SUM:
        if (fl) {
            l->f += x.f;
        } else {
            l->i = (int64_t)((uint64_t)l->i + (uint64_t)x.i);
        }
        *l = norm(dt, *l);
        break;
    case TC_ACC_PROD:
        if (fl) {
            l->f *= x.f;
        } else {
            l->i = (int64_t)((uint64_t)l->i * (uint64_t)x.i);
        }
        *l = norm(dt, *l);
        break;
    case TC_ACC_ANY:
        s->v.i |= x.i != 0;
        break;
    case TC_ACC_ALL:
        s->v.i &= x.i != 0;
        break;
    case TC_ACC_SOFTMAX:
        softmax_combine(s, x.f, 1.0);
        break;
    case TC_ACC_MAX:
    case TC_ACC_MIN:
        if (is_nan_val(dt, s->v)) {
            break;
        }
        if (is_nan_val(dt, x) ||
            (kind == TC_ACC_MAX ? val_less(dt, s->v, x)
                                : val_less(dt, x, s->v))) {
            s->v = x;
        }
        break;
    default: /* ARGMAX / ARGMIN: first max, first NaN */
        if (s->index >= 0 && is_nan_val(dt, s->v)) {
            break;
        }
        if (s->index < 0 || is_nan_val(dt, x) ||
            (kind == TC_ACC_ARGMAX ? val_less(dt, s->v, x)
                                   : val_less(dt, x, s->v))) {
            s->v = x;
            s->index = r;
        }
    }
}

static val
acc_result(accst *s, int kind, tc_dtype dt, int comp)
{
    val r;
    if (kind == TC_ACC_SOFTMAX) {
        return comp ? s->lane[0] : s->v;
    }
    if (comp) {
        r.i = s->index < 0 ? 0 : s->index;
        return r;
    }
    if (kind != TC_ACC_SUM && kind != TC_ACC_PROD) {
        return s->v;
    }
    val t[LANES];
    memcpy(t, s->lane, sizeof(t));
    for (int w = LANES / 2; w >= 1; w /= 2) {
        for (int l = 0; l < w; l++) {
            if (tc_dtype_is_float(dt)) {
                t[l].f = kind == TC_ACC_SUM ? t[l].f + t[l + w].f
                                            : t[l].f * t[l + w].f;
            } else {
                t[l].i = kind == TC_ACC_SUM
                             ? (int64_t)((uint64_t)t[l].i + (uint64_t)t[l + w].i)
                             : (int64_t)((uint64_t)t[l].i * (uint64_t)t[l + w].i);
            }
            t[l] = norm(dt, t[l]);
        }
    }
    return t[0];
}

static void
eval_range(const tc_kernel *k, val **bufs, const int64_t *idx, val *v,
           accst *accs, int64_t rlin, int from, int to)
{
    for (int i = from; i < to; i++) {
        const tc_kinst *in = &k->insts[i];
        val a = in->a >= 0 ? v[in->a] : (val){0};
        val b = in->b >= 0 ? v[in->b] : (val){0};
        tc_dtype adt = in->a >= 0 ? k->insts[in->a].dtype : in->dtype;
        int handled = 0;
        if (in->op == KOP_ACC) {
            acc_init(&accs[i], (int)in->imm.i, in->dtype);
        } else if (in->op == KOP_ACC_UPDATE) {
            acc_update(&accs[in->a], (int)k->insts[in->a].imm.i, in->dtype, b,
                       rlin);
        } else if (in->op == KOP_ACC_RESULT) {
            v[i] = acc_result(&accs[in->a], (int)k->insts[in->a].imm.i,
                              k->insts[in->a].dtype, (int)in->imm.i);
        } else if (in->op == KOP_CONST) {
            val c;
            memcpy(&c, &in->imm, sizeof(c));
            v[i] = norm(in->dtype, c);
        } else if (in->op == KOP_LOAD) {
            v[i] = bufs[k->args[in->arg].buffer][arg_offset(k, in->arg, idx)];
        } else if (in->op == KOP_STORE) {
            bufs[k->args[in->arg].buffer][arg_offset(k, in->arg, idx)] = a;
        } else if (in->op == KOP_CAST) {
            v[i] = do_cast(adt, in->dtype, a);
        } else if (in->op == KOP_WHERE) {
            v[i] = a.i ? b : v[in->c];
        } else if (in->op >= KOP_LT && in->op <= KOP_NE) {
            v[i] = eval_compare(in, adt, a, b);
        } else {
            if (tc_dtype_is_float(in->dtype)) {
                v[i] = eval_float(in, a, b, &handled);
            }
            if (!handled) {
                v[i] = eval_int(in, a, b);
            }
            v[i] = norm(in->dtype, v[i]);
        }
    }
}

/* Structural checks of the region rules of kir.h. */
static void
check_regions(const tc_kernel *k)
{
    int region = -1; /* -1 pre/post, p >= 0 body p */
    int *where = calloc(k->ninsts + 1, sizeof(int));
    for (int i = 0; i < k->ninsts; i++) {
        region = -1;
        for (int p = 0; p < k->nphases; p++) {
            if (i >= k->phases[p].begin && i < k->phases[p].end) {
                region = p;
            }
        }
        where[i] = region;
        const tc_kinst *in = &k->insts[i];
        int ops[3] = {in->a, in->b, in->c};
        for (int j = 0; j < 3; j++) {
            if (ops[j] < 0) {
                continue;
            }
            int ok = where[ops[j]] == -1 || where[ops[j]] == region;
            if (in->op == KOP_ACC_UPDATE && j == 0) {
                ok = region >= 0;
            }
            CHECK(ok, "%s: inst %d uses v%d from another body", k->name, i,
                  ops[j]);
        }
        if ((in->op == KOP_LOAD || in->op == KOP_STORE) && region < 0) {
            for (int d = k->ndim; d < k->ndim + k->nred; d++) {
                CHECK(k->args[in->arg].strides[d] == 0,
                      "%s: row load/store %d varies along r", k->name, i);
            }
        }
    }
    free(where);
}

static void
run_kernel(const tc_kernel *k, val **bufs)
{
    int64_t idx[TC_MAX_DIMS] = {0};
    val *v = calloc(k->ninsts + 1, sizeof(val));
    accst *accs = calloc(k->ninsts + 1, sizeof(accst));
    check_regions(k);
    for (int64_t e = 0; e < k->numel; e++) {
        int prev = 0;
        for (int p = 0; p < k->nphases; p++) {
            eval_range(k, bufs, idx, v, accs, 0, prev, k->phases[p].begin);
            for (int64_t r = 0; r < k->red_numel; r++) {
                int64_t rem = r;
                for (int d = k->ndim + k->nred - 1; d >= k->ndim; d--) {
                    idx[d] = rem % k->sizes[d];
                    rem /= k->sizes[d];
                }
                eval_range(k, bufs, idx, v, accs, r, k->phases[p].begin,
                           k->phases[p].end);
            }
            for (int d = k->ndim; d < k->ndim + k->nred; d++) {
                idx[d] = 0;
            }
            prev = k->phases[p].end;
        }
        eval_range(k, bufs, idx, v, accs, 0, prev, k->ninsts);
        for (int d = k->ndim - 1; d >= 0; d--) {
            if (++idx[d] < k->sizes[d]) {
                break;
            }
            idx[d] = 0;
        }
    }
    free(v);
    free(accs);
}

static int64_t
storage_extent(const tc_layout *l)
{
    int64_t n = 1;
    for (int d = 0; d < l->ndim; d++) {
        if (l->sizes[d] == 0) {
            return 1;
        }
        n += (l->sizes[d] - 1) * l->strides[d];
    }
    return n;
}

/* Run a plan; inputs as contiguous arrays of val; returns output j's
 * buffer (caller frees bufs via free_bufs). */
static val **
run_plan(const tc_plan *p, val *const *inputs)
{
    val **bufs = calloc(p->nbuffers, sizeof(val *));
    for (int b = 0; b < p->nbuffers; b++) {
        if (p->buffers[b].kind == TC_BUF_INPUT) {
            int64_t n = storage_extent(&p->buffers[b].layout);
            bufs[b] = malloc(sizeof(val) * n);
            memcpy(bufs[b], inputs[p->buffers[b].index], sizeof(val) * n);
        } else {
            bufs[b] = calloc(storage_extent(&p->buffers[b].layout), sizeof(val));
        }
    }
    for (int k = 0; k < p->nkernels; k++) {
        run_kernel(&p->kernels[k], bufs);
    }
    return bufs;
}

static void
free_bufs(const tc_plan *p, val **bufs)
{
    for (int b = 0; b < p->nbuffers; b++) {
        free(bufs[b]);
    }
    free(bufs);
}

/* ---- numeric lowering checks ----------------------------------------- */

#define N8 8
static const double xf[N8] = {-2, -0.5, 0, NAN, INFINITY, 3, -INFINITY, 0.25};

typedef struct {
    const char *name;
    tc_dtype dt;
    double want[N8];
} expect;

static int
same_value(double got, double want)
{
    if (isnan(want)) {
        return isnan(got);
    }
    if (isinf(want)) {
        return got == want;
    }
    return fabs(got - want) <= 1e-6 * (1 + fabs(want));
}

/* Schedule g (one output), run it on inputs, compare output 0. */
static void
check_numeric(tc_graph *g, val *const *inputs, const expect *e, int n)
{
    char err[256] = "";
    tc_plan *p = tc_schedule(g, err, sizeof(err));
    CHECK(p != NULL, "%s: schedule failed: %s", e->name, err);
    if (!p) {
        return;
    }
    int ob = p->output_buffer[0];
    CHECK(p->buffers[ob].dtype == e->dt, "%s: dtype %s want %s", e->name,
          tc_dtype_name(p->buffers[ob].dtype), tc_dtype_name(e->dt));
    val **bufs = run_plan(p, inputs);
    for (int i = 0; i < n; i++) {
        val v = bufs[ob][i];
        double got = tc_dtype_is_float(e->dt) ? v.f : (double)v.i;
        CHECK(same_value(got, e->want[i]), "%s[%d] = %g, want %g", e->name, i,
              got, e->want[i]);
    }
    free_bufs(p, bufs);
    tc_plan_free(p);
}

typedef int (*build_fn)(tc_graph *g, int x);

static int b_relu(tc_graph *g, int x) { return op(g, "relu", x, -1, -1); }
static int b_clamp(tc_graph *g, int x)
{
    return op(g, "clamp", x, tc_graph_scalar_int(g, -1),
              tc_graph_scalar_int(g, 1));
}
static int b_clamp_min(tc_graph *g, int x)
{
    return op(g, "clamp_min", x, tc_graph_scalar_int(g, 0), -1);
}
static int b_sigmoid(tc_graph *g, int x) { return op(g, "sigmoid", x, -1, -1); }
static int b_pow2(tc_graph *g, int x)
{
    return op(g, "pow", x, tc_graph_scalar_int(g, 2), -1);
}
static int b_pow05(tc_graph *g, int x)
{
    return op(g, "pow", x, tc_graph_scalar_float(g, 0.5), -1);
}
static int b_powm1(tc_graph *g, int x)
{
    return op(g, "pow", x, tc_graph_scalar_int(g, -1), -1);
}
static int b_pow3(tc_graph *g, int x)
{
    return op(g, "pow", x, tc_graph_scalar_float(g, 3.0), -1);
}
static int b_pow0(tc_graph *g, int x)
{
    return op(g, "pow", x, tc_graph_scalar_int(g, 0), -1);
}
static int b_rsqrt(tc_graph *g, int x) { return op(g, "rsqrt", x, -1, -1); }
static int b_recip(tc_graph *g, int x) { return op(g, "reciprocal", x, -1, -1); }
static int b_where(tc_graph *g, int x)
{
    int c = op(g, "lt", x, tc_graph_scalar_int(g, 0), -1);
    return op(g, "where", c, x, tc_graph_scalar_float(g, 2.0));
}
static int b_gt(tc_graph *g, int x)
{
    return op(g, "gt", x, tc_graph_scalar_float(g, 0.25), -1);
}
static int b_ge(tc_graph *g, int x)
{
    return op(g, "ge", x, tc_graph_scalar_float(g, 0.25), -1);
}

static void
test_float_lowerings(void)
{
    static const struct {
        build_fn fn;
        expect e;
    } cases[] = {
        {b_relu, {"relu", TC_F32, {0, 0, 0, NAN, INFINITY, 3, 0, 0.25}}},
        {b_clamp, {"clamp", TC_F32, {-1, -0.5, 0, NAN, 1, 1, -1, 0.25}}},
        {b_clamp_min, {"clamp_min", TC_F32, {0, 0, 0, NAN, INFINITY, 3, 0, 0.25}}},
        {b_sigmoid, {"sigmoid", TC_F32, {0.11920291930437088, 0.3775406777858734,
                                         0.5, NAN, 1, 0.9525741338729858, 0,
                                         0.562176525592804}}},
        {b_pow2, {"pow2", TC_F32, {4, 0.25, 0, NAN, INFINITY, 9, INFINITY, 0.0625}}},
        {b_pow05, {"pow05", TC_F32, {NAN, NAN, 0, NAN, INFINITY, 1.7320507764816284,
                                     NAN, 0.5}}},
        {b_powm1, {"powm1", TC_F32, {-0.5, -2, INFINITY, NAN, 0, 0.3333333432674408,
                                     -0.0, 4}}},
        {b_pow3, {"pow3", TC_F32, {-8, -0.125, 0, NAN, INFINITY, 27, -INFINITY,
                                   0.015625}}},
        {b_pow0, {"pow0", TC_F32, {1, 1, 1, 1, 1, 1, 1, 1}}},
        {b_rsqrt, {"rsqrt", TC_F32, {NAN, NAN, INFINITY, NAN, 0, 0.5773502588272095,
                                     NAN, 2}}},
        {b_recip, {"recip", TC_F32, {-0.5, -2, INFINITY, NAN, 0, 0.3333333432674408,
                                     -0.0, 4}}},
        {b_where, {"where", TC_F32, {-2, -0.5, 2, 2, 2, 2, -INFINITY, 2}}},
        {b_gt, {"gt", TC_BOOL, {0, 0, 0, 0, 1, 1, 0, 0}}},
        {b_ge, {"ge", TC_BOOL, {0, 0, 0, 0, 1, 1, 0, 1}}},
    };
    int64_t s[1] = {N8};
    val xv[N8];
    for (int i = 0; i < N8; i++) {
        xv[i].f = (float)xf[i];
    }
    val *inputs[1] = {xv};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        tc_graph *g = tc_graph_new();
        int x = input(g, TC_F32, 1, s, NULL);
        int y = cases[c].fn(g, x);
        tc_graph_set_outputs(g, 1, &y);
        check_numeric(g, inputs, &cases[c].e, N8);
        tc_graph_free(g);
    }
}

/* Two-input integer/bool programs on 4 elements. */
static void
check_int_program(const char *name, tc_dtype adt, const int64_t *a,
                  tc_dtype bdt, const int64_t *b, const char *opname,
                  int scalar, int64_t sv, tc_dtype want_dt,
                  const double *want)
{
    int64_t s[1] = {4};
    val av[4], bv[4];
    for (int i = 0; i < 4; i++) {
        av[i].i = a[i];
        bv[i].i = b ? b[i] : 0;
    }
    val *inputs[2] = {av, bv};
    tc_graph *g = tc_graph_new();
    int x = input(g, adt, 1, s, NULL);
    int y = input(g, bdt, 1, s, NULL);
    int r;
    if (scalar) {
        r = op(g, opname, x, tc_graph_scalar_int(g, sv), -1);
    } else if (b) {
        r = op(g, opname, x, y, -1);
    } else {
        r = op(g, opname, x, -1, -1);
    }
    tc_graph_set_outputs(g, 1, &r);
    expect e = {name, want_dt, {0}};
    memcpy(e.want, want, sizeof(double) * 4);
    check_numeric(g, inputs, &e, 4);
    tc_graph_free(g);
}

static void
test_int_lowerings(void)
{
    static const int64_t u[4] = {250, 3, 0, 128};
    static const int64_t i32[4] = {-3, 2, 7, -1};
    static const int64_t bb[4] = {1, 0, 1, 0}, cc[4] = {1, 1, 0, 0};
    check_int_program("u8add", TC_U8, u, TC_U8, NULL, "add", 1, 10, TC_U8,
                      (double[]){4, 13, 10, 138});
    check_int_program("u8neg", TC_U8, u, TC_U8, NULL, "neg", 0, 0, TC_U8,
                      (double[]){6, 253, 0, 128});
    check_int_program("u8sub", TC_U8, u, TC_U8, NULL, "sub", 1, 300, TC_U8,
                      (double[]){206, 215, 212, 84});
    check_int_program("i32pow3", TC_I32, i32, TC_I32, NULL, "pow", 1, 3,
                      TC_I32, (double[]){-27, 8, 343, -1});
    check_int_program("i32pow5", TC_I32, i32, TC_I32, NULL, "pow", 1, 5,
                      TC_I32, (double[]){-243, 32, 16807, -1});
    check_int_program("i32pow0", TC_I32, i32, TC_I32, NULL, "pow", 1, 0,
                      TC_I32, (double[]){1, 1, 1, 1});
    check_int_program("i32div", TC_I32, i32, TC_I32, NULL, "div", 1, 2,
                      TC_F32, (double[]){-1.5, 1, 3.5, -0.5});
    check_int_program("i32relu", TC_I32, i32, TC_I32, NULL, "relu", 0, 0,
                      TC_I32, (double[]){0, 2, 7, 0});
    check_int_program("i32abs", TC_I32, i32, TC_I32, NULL, "abs", 0, 0,
                      TC_I32, (double[]){3, 2, 7, 1});
    check_int_program("bnot", TC_I32, i32, TC_I32, NULL, "bitwise_not", 0, 0,
                      TC_I32, (double[]){2, -3, -8, 0});
    check_int_program("badd", TC_BOOL, bb, TC_BOOL, cc, "add", 0, 0, TC_BOOL,
                      (double[]){1, 1, 1, 0});
    check_int_program("bmul", TC_BOOL, bb, TC_BOOL, cc, "mul", 0, 0, TC_BOOL,
                      (double[]){1, 0, 0, 0});
    check_int_program("bsq", TC_BOOL, bb, TC_BOOL, NULL, "square", 0, 0,
                      TC_I64, (double[]){1, 0, 1, 0});
    check_int_program("bxor", TC_BOOL, bb, TC_BOOL, cc, "bitwise_xor", 0, 0,
                      TC_BOOL, (double[]){0, 1, 1, 0});
    check_int_program("lxor", TC_I32, i32, TC_BOOL, bb, "logical_xor", 0, 0,
                      TC_BOOL, (double[]){0, 1, 0, 1});
    check_int_program("lnot", TC_I32, i32, TC_BOOL, NULL, "logical_not", 0, 0,
                      TC_BOOL, (double[]){0, 0, 0, 0});
    check_int_program("bmax", TC_BOOL, bb, TC_BOOL, cc, "maximum", 0, 0,
                      TC_BOOL, (double[]){1, 1, 1, 0});
    check_int_program("bnotb", TC_BOOL, bb, TC_BOOL, NULL, "bitwise_not", 0, 0,
                      TC_BOOL, (double[]){0, 1, 0, 1});
}

/* ---- schedule -------------------------------------------------------- */

static int
count_insts(const tc_kernel *k, tc_kop kop)
{
    int n = 0;
    for (int i = 0; i < k->ninsts; i++) {
        n += k->insts[i].op == kop;
    }
    return n;
}

/* cos(x1) * 0.5 is broadcast over 1000 rows: stored once as a temp. */
static void
test_schedule_temp(void)
{
    tc_graph *g = tc_graph_new();
    int64_t s0[2] = {1000, 64}, s1[1] = {64};
    int x0 = input(g, TC_F32, 2, s0, NULL);
    int x1 = input(g, TC_F32, 1, s1, NULL);
    int c = op(g, "cos", x1, -1, -1);
    int m = op(g, "mul", c, tc_graph_scalar_float(g, 0.5), -1);
    int a = op(g, "add", m, x0, -1);
    int outs[2] = {a, x1};
    tc_graph_set_outputs(g, 2, outs);
    char err[256] = "";
    tc_plan *p = tc_schedule(g, err, sizeof(err));
    CHECK(p != NULL, "schedule: %s", err);
    if (!p) {
        tc_graph_free(g);
        return;
    }
    CHECK(p->nkernels == 2, "nkernels %d", p->nkernels);
    CHECK(p->nbuffers == 4, "nbuffers %d", p->nbuffers);
    CHECK(p->buffers[0].kind == TC_BUF_INPUT && p->buffers[1].kind == TC_BUF_INPUT,
          "input buffers");
    CHECK(p->output_buffer[1] == 1, "output 1 is input buffer 1");
    const tc_buffer *ob = &p->buffers[p->output_buffer[0]];
    CHECK(ob->kind == TC_BUF_OUTPUT && ob->index == a, "output buffer");
    const tc_kernel *k0 = &p->kernels[0], *k1 = &p->kernels[1];
    CHECK(p->buffers[k0->args[0].buffer].kind == TC_BUF_TEMP, "k0 stores temp");
    CHECK(k0->ndim == 1 && k0->sizes[0] == 64 && k0->numel == 64, "k0 dims");
    CHECK(!strcmp(k0->desc, "%2 = cos(%x1); %4 = mul(%2, 0.5)"), "k0 desc %s",
          k0->desc);
    /* the temp is broadcast over rows: the two dims cannot be merged */
    CHECK(k1->ndim == 2 && k1->sizes[0] == 1000 && k1->sizes[1] == 64,
          "k1 dims: ndim %d", k1->ndim);
    CHECK(k1->nargs == 3 && count_insts(k1, KOP_COS) == 0, "k1 loads temp");
    char *src = tc_kernel_format(k0);
    const char *want =
        "void k0_pw_cos_mul(float *out0, const float *in0) {   "
        "// %2 = cos(%x1); %4 = mul(%2, 0.5)\n"
        "  for (int64_t i0 = 0; i0 < 64; i0++) {\n"
        "    float v0 = in0[i0];\n"
        "    float v1 = cos(v0);\n"
        "    float v2 = 0.5f;\n"
        "    float v3 = v1 * v2;\n"
        "    out0[i0] = v3;\n"
        "  }\n"
        "}\n";
    CHECK(src && !strcmp(src, want), "kernel format:\n%s\nwant:\n%s", src, want);
    free(src);
    tc_plan_free(p);
    tc_graph_free(g);
}

/* Broadcast input strides, loop order from the output, one arg per buffer,
 * several stores in one kernel, non-coalescable dims. */
static void
test_schedule_layouts(void)
{
    tc_graph *g = tc_graph_new();
    int64_t s0[2] = {4, 3}, st0[2] = {1, 4}; /* randn(3,4).t() */
    int64_t s1[2] = {4, 1};
    int x = input(g, TC_F32, 2, s0, st0);
    int y = input(g, TC_I64, 2, s1, NULL);
    int a = op(g, "add", x, tc_graph_scalar_int(g, 1), -1); /* stride (1,4) */
    int b = op(g, "mul", x, y, -1);
    int c = op(g, "sin", cast(g, y, TC_F32), -1, -1);       /* [4,1] */
    int outs[3] = {a, b, c};
    tc_graph_set_outputs(g, 3, outs);
    CHECK(g->nodes[a].layout.strides[0] == 1 &&
              g->nodes[a].layout.strides[1] == 4,
          "x.t()+1 strides");
    char err[256] = "";
    tc_plan *p = tc_schedule(g, err, sizeof(err));
    CHECK(p != NULL, "schedule: %s", err);
    if (!p) {
        tc_graph_free(g);
        return;
    }
    CHECK(p->nkernels == 2, "nkernels %d", p->nkernels);
    const tc_kernel *k = &p->kernels[0];
    /* out a, out b, in x, in y: loop over dims (1, 0) of [4,3] */
    CHECK(k->nargs == 4, "nargs %d", k->nargs);
    CHECK(k->ndim == 2 && k->sizes[0] == 3 && k->sizes[1] == 4,
          "loop sizes %d: %lld %lld", k->ndim, (long long)k->sizes[0],
          (long long)k->sizes[1]);
    CHECK(count_insts(k, KOP_STORE) == 2, "two stores");
    int ya = -1;
    for (int i = 0; i < k->nargs; i++) {
        ya = k->args[i].buffer == 1 ? i : ya;
    }
    CHECK(ya >= 0 && k->args[ya].strides[0] == 0 && k->args[ya].strides[1] == 1,
          "y broadcast strides");
    /* numeric check of the whole plan */
    val xv[12], yv[4];
    for (int i = 0; i < 12; i++) {
        xv[i].f = i; /* storage of the (3,4) tensor */
    }
    for (int i = 0; i < 4; i++) {
        yv[i].i = i + 1;
    }
    val *inputs[2] = {xv, yv};
    val **bufs = run_plan(p, inputs);
    const tc_buffer *bb = &p->buffers[p->output_buffer[1]];
    for (int i = 0; i < 4; i++) {
        for (int j = 0; j < 3; j++) {
            double xe = j * 4 + i, got;
            got = bufs[p->output_buffer[0]][i * 1 + j * 4].f;
            CHECK(got == xe + 1, "a[%d,%d]=%g", i, j, got);
            got = bufs[p->output_buffer[1]][i * bb->layout.strides[0] +
                                            j * bb->layout.strides[1]].f;
            CHECK(got == xe * (i + 1), "b[%d,%d]=%g", i, j, got);
        }
        double got = bufs[p->output_buffer[2]][i].f;
        CHECK(fabs(got - (float)sin(i + 1)) < 1e-6, "c[%d]=%g", i, got);
    }
    free_bufs(p, bufs);
    tc_plan_free(p);
    tc_graph_free(g);
}

/* Empty tensors still get a kernel; 0-d graphs get ndim 0. */
static void
test_schedule_edge(void)
{
    tc_graph *g = tc_graph_new();
    int64_t s0[2] = {0, 3};
    int x = input(g, TC_F32, 2, s0, NULL);
    int z = input(g, TC_F64, 0, s0, NULL);
    int a = op(g, "exp", x, -1, -1);
    int b = op(g, "mul", z, tc_graph_scalar_float(g, 2.5), -1);
    int outs[2] = {a, b};
    tc_graph_set_outputs(g, 2, outs);
    char err[256] = "";
    tc_plan *p = tc_schedule(g, err, sizeof(err));
    CHECK(p != NULL, "schedule: %s", err);
    if (p) {
        CHECK(p->nkernels == 2, "nkernels %d", p->nkernels);
        CHECK(p->kernels[0].numel == 0, "empty kernel numel");
        CHECK(p->kernels[1].ndim == 0 && p->kernels[1].numel == 1, "0-d kernel");
        CHECK(p->buffers[p->output_buffer[1]].dtype == TC_F64, "0-d dtype");
        char *src = tc_kernel_format(&p->kernels[1]);
        CHECK(src && strstr(src, "out0[0] = "), "0-d format:\n%s", src);
        free(src);
        tc_plan_free(p);
    }
    tc_graph_free(g);
}

/* ---- views and reductions against eager (test_graph_rv.h) ------------ */

#define NONE_I INT64_MIN

typedef struct {
    const char *op;
    tc_dtype dt;
    int ndim;
    int64_t sizes[TC_MAX_DIMS], strides[TC_MAX_DIMS];
    int nargs;
    int64_t args[TC_MAX_DIMS];
    int keepdim, has_dtype;
    tc_dtype dtype;
    double fparam;
    int ok;
    const char *err;
    tc_dtype odt;
    int ondim;
    int64_t osizes[TC_MAX_DIMS], ostrides[TC_MAX_DIMS], ooffset;
    int nvals;
    const double *vals;
} rv_case;

static const rv_case rv_cases[] = {
#include "test_graph_rv.h"
};

/* Same formula as storage_value() in gen_test_graph_rv.py. */
static val
storage_value(int64_t s, tc_dtype dt)
{
    val v;
    if (dt == TC_BOOL) {
        v.i = s % 3 == 0;
    } else if (tc_dtype_is_float(dt)) {
        v.f = (double)((s * 7919) % 23 - 11) / 4.0;
    } else {
        v.i = (s * 37) % 11 - 5 + (dt == TC_U8 ? 5 : 0);
    }
    return v;
}

static int
build_rv(tc_graph *g, const rv_case *c, int x, char *err, size_t n)
{
    const char *op = c->op;
    const int64_t *a = c->args;
    if (!strcmp(op, "permute")) {
        return tc_graph_permute(g, x, c->nargs, a, err, n);
    }
    if (!strcmp(op, "transpose")) {
        return tc_graph_transpose(g, x, a[0], a[1], err, n);
    }
    if (!strcmp(op, "t")) {
        return tc_graph_t(g, x, err, n);
    }
    if (!strcmp(op, "unsqueeze")) {
        return tc_graph_unsqueeze(g, x, a[0], err, n);
    }
    if (!strcmp(op, "squeeze_all")) {
        return tc_graph_squeeze(g, x, -1, NULL, err, n);
    }
    if (!strcmp(op, "squeeze")) {
        return tc_graph_squeeze(g, x, c->nargs, a, err, n);
    }
    if (!strcmp(op, "expand")) {
        return tc_graph_expand(g, x, c->nargs, a, err, n);
    }
    if (!strcmp(op, "select")) {
        return tc_graph_select(g, x, a[0], a[1], err, n);
    }
    if (!strcmp(op, "slice")) {
        return tc_graph_slice(g, x, a[0], a[1] == NONE_I ? NULL : &a[1],
                              a[2] == NONE_I ? NULL : &a[2], a[3], err, n);
    }
    if (!strcmp(op, "narrow")) {
        return tc_graph_narrow(g, x, a[0], a[1], a[2], err, n);
    }
    if (!strcmp(op, "view")) {
        return tc_graph_view(g, x, c->nargs, a, err, n);
    }
    if (!strcmp(op, "reshape")) {
        return tc_graph_reshape(g, x, c->nargs, a, err, n);
    }
    if (!strcmp(op, "flatten")) {
        return tc_graph_flatten(g, x, a[0], a[1], err, n);
    }
    if (!strcmp(op, "unflatten")) {
        return tc_graph_unflatten(g, x, a[0], c->nargs - 1, a + 1, err, n);
    }
    if (!strcmp(op, "softmax") || !strcmp(op, "log_softmax")) {
        return tc_graph_softmax(g, x, a[0], c->has_dtype, c->dtype,
                                op[0] == 'l', err, n);
    }
    if (!strcmp(op, "layer_norm")) {
        return tc_graph_layer_norm(g, x, c->nargs, a, -1, -1, c->fparam, err,
                                   n);
    }
    if (!strcmp(op, "rms_norm")) {
        return tc_graph_rms_norm(g, x, c->nargs, a, -1, 0, 0, err, n);
    }
    if (!strncmp(op, "max_dim", 7) || !strncmp(op, "min_dim", 7)) {
        int v, i;
        if (tc_graph_max_dim(g, op[1] == 'a', x, a[0], c->keepdim, &v, &i, err,
                             n) < 0) {
            return -1;
        }
        return strstr(op, "_idx") ? i : v;
    }
    tc_reduce_args ra;
    memset(&ra, 0, sizeof(ra));
    ra.ndims = c->nargs;
    memcpy(ra.dims, a, sizeof(ra.dims));
    ra.keepdim = c->keepdim;
    ra.has_dtype = c->has_dtype;
    ra.dtype = c->dtype;
    ra.correction = c->fparam;
    char name[32];
    snprintf(name, sizeof(name), "%s", op);
    char *us = strstr(name, "_nan");
    if (us) {
        *us = '\0';
        ra.ndims = c->nargs;
    }
    if (!strcmp(name, "norm1") || !strcmp(name, "norm2")) {
        ra.p = name[4] - '0';
        name[4] = '\0';
    }
    if (!strcmp(name, "max_all") || !strcmp(name, "min_all")) {
        name[3] = '\0';
    }
    return tc_graph_reduce(g, name, x, &ra, err, n);
}

/* Value of logical element e (row-major) of graph output j. */
static val
output_value(const tc_plan *p, val **bufs, int j, int64_t e)
{
    const tc_output_desc *o = &p->outputs[j];
    const tc_layout *l = &o->layout;
    int64_t off = o->offset;
    for (int d = l->ndim - 1; d >= 0; d--) {
        off += (e % l->sizes[d]) * l->strides[d];
        e /= l->sizes[d];
    }
    return bufs[o->buffer][off];
}

static int
close_enough(tc_dtype dt, double got, double want)
{
    if (isnan(want)) {
        return isnan(got);
    }
    if (isinf(want)) {
        return got == want;
    }
    if (!tc_dtype_is_float(dt)) {
        return got == want;
    }
    double tol = dt == TC_F32 ? 2e-5 : 1e-11;
    return fabs(got - want) <= tol * (1 + fabs(want));
}

static int rv_numeric_checked, rv_kernels;

static void
check_rv_case(const rv_case *c, int index)
{
    tc_graph *g = tc_graph_new();
    tc_layout l;
    char err[512] = "", what[64];
    l.ndim = c->ndim;
    memcpy(l.sizes, c->sizes, sizeof(l.sizes));
    memcpy(l.strides, c->strides, sizeof(l.strides));
    snprintf(what, sizeof(what), "rv case %d (%s)", index, c->op);
    int x = tc_graph_input(g, c->dt, &l);
    int id = build_rv(g, c, x, err, sizeof(err));
    if (!c->ok) {
        CHECK(id < 0, "%s: expected error '%s'", what, c->err);
        if (id < 0 && c->err) {
            CHECK(!strcmp(err, c->err), "%s: message\n  got  '%s'\n  want '%s'",
                  what, err, c->err);
        }
        tc_graph_free(g);
        return;
    }
    CHECK(id >= 0, "%s: unexpected error: %s", what, err);
    if (id < 0) {
        tc_graph_free(g);
        return;
    }
    const tc_node *n = &g->nodes[id];
    int same = n->dtype == c->odt && n->layout.ndim == c->ondim;
    for (int d = 0; same && d < c->ondim; d++) {
        same = n->layout.sizes[d] == c->osizes[d] &&
               (n->layout.strides[d] == c->ostrides[d] || c->osizes[d] < 2);
    }
    int viewlike = n->kind != TC_NODE_OP || tc_ops[n->op].kind == TC_OPK_VIEW;
    CHECK(same, "%s: layout/dtype differs from eager (%s nd %d)", what,
          tc_dtype_name(n->dtype), n->layout.ndim);
    CHECK(!viewlike || n->offset == c->ooffset || c->ooffset == 0 ||
              n->kind == TC_NODE_INPUT,
          "%s: offset %lld want %lld", what, (long long)n->offset,
          (long long)c->ooffset);
    if (viewlike && n->kind == TC_NODE_OP) {
        CHECK(n->offset == c->ooffset, "%s: offset %lld want %lld", what,
              (long long)n->offset, (long long)c->ooffset);
    }
    /* numerics: schedule with the result as the only output */
    tc_graph_set_outputs(g, 1, &id);
    CHECK(tc_graph_optimize(g) == 0, "%s: optimize", what);
    tc_plan *p = tc_schedule(g, err, sizeof(err));
    CHECK(p != NULL, "%s: schedule failed: %s", what, err);
    if (!p) {
        tc_graph_free(g);
        return;
    }
    for (int k = 0; k < p->nkernels; k++) {
        char *src = tc_kernel_format(&p->kernels[k]);
        CHECK(src != NULL, "%s: format", what);
        free(src);
    }
    rv_kernels += p->nkernels;
    int64_t ext = storage_extent(&l);
    val *xs = malloc(sizeof(val) * ext);
    for (int64_t e = 0; e < ext; e++) {
        xs[e] = storage_value(e, c->dt);
    }
    val *inputs[1] = {xs};
    val **bufs = run_plan(p, inputs);
    int64_t cnt = tc_layout_numel(&p->outputs[0].layout);
    CHECK(cnt == c->nvals, "%s: %lld values, want %d", what, (long long)cnt,
          c->nvals);
    for (int64_t e = 0; e < cnt && e < c->nvals; e++) {
        val v = output_value(p, bufs, 0, e);
        double got = tc_dtype_is_float(c->odt) ? v.f : (double)v.i;
        CHECK(close_enough(c->odt, got, c->vals[e]), "%s: [%lld] = %.9g, "
              "want %.9g", what, (long long)e, got, c->vals[e]);
    }
    rv_numeric_checked++;
    free_bufs(p, bufs);
    free(xs);
    tc_plan_free(p);
    tc_graph_free(g);
}

static void
test_rv_cases(void)
{
    int n = (int)(sizeof(rv_cases) / sizeof(rv_cases[0]));
    for (int i = 0; i < n; i++) {
        check_rv_case(&rv_cases[i], i);
    }
    printf("view/reduction cases: %d (%d run numerically, %d kernels)\n", n,
           rv_numeric_checked, rv_kernels);
}

/* ---- structure of reduction / view plans ----------------------------- */

static tc_plan *
plan_of(tc_graph *g, int nout, const int *outs)
{
    char err[256] = "";
    tc_graph_set_outputs(g, nout, outs);
    tc_plan *p = tc_schedule(g, err, sizeof(err));
    CHECK(p != NULL, "schedule: %s", err);
    return p;
}

static void
test_schedule_rowwise(void)
{
    char err[256] = "";
    int64_t s2[2] = {4, 37}, w1[1] = {37};
    /* softmax: one kernel, three passes (max, sum, write) */
    tc_graph *g = tc_graph_new();
    int x = input(g, TC_F32, 2, s2, NULL);
    int y = tc_graph_softmax(g, x, -1, 0, TC_F32, 0, err, sizeof(err));
    tc_plan *p = plan_of(g, 1, &y);
    if (p) {
        const tc_kernel *k = &p->kernels[0];
        CHECK(p->nkernels == 1, "softmax kernels %d", p->nkernels);
        CHECK(k->nphases == 3 && k->ndim == 1 && k->nred == 1 &&
                  k->numel == 4 && k->red_numel == 37,
              "softmax phases %d ndim %d nred %d", k->nphases, k->ndim,
              k->nred);
        CHECK(count_insts(k, KOP_ACC) == 2 && count_insts(k, KOP_STORE) == 1,
              "softmax accs");
        /* polynomial exp keeps the phase structure (boundaries remapped) */
        tc_kernel dk = *k;
        dk.insts = malloc(sizeof(tc_kinst) * k->ninsts);
        memcpy(dk.insts, k->insts, sizeof(tc_kinst) * k->ninsts);
        CHECK(tc_kernel_decompose_math(&dk, &tc_math_target_none, NULL)
                      == 0 &&
                  count_insts(&dk, KOP_EXP) == 0 && dk.ninsts > k->ninsts,
              "decompose softmax");
        for (int i = 0; i < dk.ninsts; i++) {
            if (dk.insts[i].op == KOP_ACC_UPDATE || dk.insts[i].op == KOP_STORE) {
                int in = 0;
                for (int q = 0; q < dk.nphases; q++) {
                    in |= i >= dk.phases[q].begin && i < dk.phases[q].end;
                }
                CHECK(in, "decomposed inst %d left its body", i);
            }
        }
        check_regions(&dk);
        free(dk.insts);
        char *src = tc_kernel_format(k);
        CHECK(src && strstr(src, "acc_max<float>") && strstr(src, "// phase 2") &&
                  strstr(src, "for (int64_t r0 = 0; r0 < 37; r0++)"),
              "softmax format:\n%s", src);
        free(src);
        tc_plan_free(p);
    }
    tc_graph_free(g);
    /* layer_norm with weight and bias: one kernel */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    int w = input(g, TC_F32, 1, w1, NULL), b = input(g, TC_F32, 1, w1, NULL);
    y = tc_graph_layer_norm(g, x, 1, w1, w, b, 1e-5, err, sizeof(err));
    CHECK(y >= 0, "layer_norm: %s", err);
    p = plan_of(g, 1, &y);
    if (p) {
        CHECK(p->nkernels == 1 && p->kernels[0].nphases == 3,
              "layer_norm kernels %d phases %d", p->nkernels,
              p->kernels[0].nphases);
        /* numerics: x storage values, w = 2, b = 0.5 */
        val xv[148], wv[37], bv[37];
        for (int i = 0; i < 148; i++) {
            xv[i] = storage_value(i, TC_F32);
        }
        for (int i = 0; i < 37; i++) {
            wv[i].f = 2;
            bv[i].f = 0.5;
        }
        val *ins[3] = {xv, wv, bv};
        val **bufs = run_plan(p, ins);
        for (int r = 0; r < 4; r++) {
            double m = 0, v = 0;
            for (int i = 0; i < 37; i++) {
                m += xv[r * 37 + i].f / 37;
            }
            for (int i = 0; i < 37; i++) {
                v += (xv[r * 37 + i].f - m) * (xv[r * 37 + i].f - m) / 37;
            }
            for (int i = 0; i < 37; i++) {
                double want = (xv[r * 37 + i].f - m) / sqrt(v + 1e-5) * 2 + 0.5;
                double got = output_value(p, bufs, 0, r * 37 + i).f;
                CHECK(fabs(got - want) < 1e-5, "ln[%d,%d] %g want %g", r, i,
                      got, want);
            }
        }
        free_bufs(p, bufs);
        tc_plan_free(p);
    }
    tc_graph_free(g);
    /* sum(relu(x) * 2, 1) + 1: producers in the loop, epilogue after */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    int r = op(g, "mul", op(g, "relu", x, -1, -1), tc_graph_scalar_int(g, 2),
               -1);
    tc_reduce_args ra = {1, {1}, 0, 0, TC_F32, 1, 2};
    int sm = tc_graph_reduce(g, "sum", r, &ra, err, sizeof(err));
    y = op(g, "add", sm, tc_graph_scalar_int(g, 1), -1);
    p = plan_of(g, 1, &y);
    if (p) {
        const tc_kernel *k = &p->kernels[0];
        CHECK(p->nkernels == 1 && k->nphases == 1 && p->nbuffers == 2,
              "sum fusion: kernels %d buffers %d", p->nkernels, p->nbuffers);
        CHECK(k->phases[0].end < k->ninsts &&
                  k->insts[k->ninsts - 1].op == KOP_STORE,
              "epilogue after the reduction");
        tc_plan_free(p);
    }
    tc_graph_free(g);
    /* full reduction: one kernel, no outer dims */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    ra.ndims = 0;
    y = tc_graph_reduce(g, "mean", x, &ra, err, sizeof(err));
    p = plan_of(g, 1, &y);
    if (p) {
        CHECK(p->nkernels == 1 && p->kernels[0].ndim == 0 &&
                  p->kernels[0].numel == 1 && p->kernels[0].nred == 1 &&
                  p->kernels[0].red_numel == 148,
              "full reduction coalesced: nred %d", p->kernels[0].nred);
        tc_plan_free(p);
    }
    tc_graph_free(g);
    /* two reductions over different rows: one is materialized */
    g = tc_graph_new();
    int64_t sq[2] = {5, 5};
    x = input(g, TC_F32, 2, sq, NULL);
    ra.ndims = 1;
    ra.dims[0] = 0;
    int a0 = tc_graph_reduce(g, "sum", x, &ra, err, sizeof(err));
    ra.dims[0] = 1;
    int a1 = tc_graph_reduce(g, "amax", x, &ra, err, sizeof(err));
    int t = tc_graph_unsqueeze(g, a1, 1, err, sizeof(err)); /* [5,1] */
    y = op(g, "add", a0, t, -1);                             /* [5,5] */
    p = plan_of(g, 1, &y);
    if (p) {
        val xv[25];
        for (int i = 0; i < 25; i++) {
            xv[i] = storage_value(i, TC_F32);
        }
        val *ins[1] = {xv};
        val **bufs = run_plan(p, ins);
        for (int i = 0; i < 5; i++) {
            for (int j = 0; j < 5; j++) {
                double s0 = 0, m1 = -INFINITY;
                for (int q = 0; q < 5; q++) {
                    s0 += xv[q * 5 + j].f;
                    m1 = fmax(m1, xv[i * 5 + q].f);
                }
                double got = output_value(p, bufs, 0, i * 5 + j).f;
                CHECK(fabs(got - (s0 + m1)) < 1e-5, "mixed[%d,%d] %g want %g",
                      i, j, got, s0 + m1);
            }
        }
        free_bufs(p, bufs);
        tc_plan_free(p);
    }
    tc_graph_free(g);
}

static void
test_schedule_views(void)
{
    char err[256] = "";
    int64_t s2[2] = {6, 8};
    /* a view of an input is read in place (strides + offset) */
    tc_graph *g = tc_graph_new();
    int x = input(g, TC_F32, 2, s2, NULL);
    int64_t a = 1, b = 5;
    int v = tc_graph_slice(g, tc_graph_t(g, x, err, sizeof(err)), 0, &a, &b, 2,
                           err, sizeof(err)); /* x.t()[1:5:2]: [2,6] */
    CHECK(v >= 0 && g->nodes[v].offset == 1 &&
              g->nodes[v].layout.strides[0] == 2 &&
              g->nodes[v].layout.strides[1] == 8,
          "slice of t(): %s", err);
    int y = op(g, "mul", v, tc_graph_scalar_int(g, 3), -1);
    int outs[2] = {y, v};
    tc_plan *p = plan_of(g, 2, outs);
    if (p) {
        CHECK(p->nkernels == 1 && p->nbuffers == 2, "view: no copy (%d, %d)",
              p->nkernels, p->nbuffers);
        const tc_kernel *k = &p->kernels[0];
        int found = 0;
        for (int i = 0; i < k->nargs; i++) {
            found |= !k->args[i].is_output && k->args[i].offset == 1;
        }
        CHECK(found, "input arg carries the storage offset");
        const tc_output_desc *o = &p->outputs[1];
        CHECK(o->is_view && o->buffer == 0 && o->offset == 1 &&
                  o->layout.strides[0] == 2 && o->layout.strides[1] == 8,
              "output 1 is an alias of input 0");
        CHECK(!p->outputs[0].is_view && p->output_buffer[1] == 0,
              "output descs");
        val xv[48];
        for (int i = 0; i < 48; i++) {
            xv[i].f = i;
        }
        val *ins[1] = {xv};
        val **bufs = run_plan(p, ins);
        for (int i = 0; i < 2; i++) {
            for (int j = 0; j < 6; j++) {
                double want = 3.0 * (j * 8 + 1 + 2 * i);
                double got = output_value(p, bufs, 0, i * 6 + j).f;
                CHECK(got == want, "view mul[%d,%d] %g want %g", i, j, got,
                      want);
            }
        }
        free_bufs(p, bufs);
        tc_plan_free(p);
    }
    tc_graph_free(g);
    /* a view of a computed node: affine -> recomputed, no temp */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    int e = op(g, "exp", x, -1, -1);
    int sel = tc_graph_select(g, tc_graph_t(g, e, err, sizeof(err)), 0, 3, err,
                              sizeof(err)); /* exp(x)[:, 3] */
    y = op(g, "add", sel, tc_graph_scalar_int(g, 1), -1);
    p = plan_of(g, 1, &y);
    if (p) {
        CHECK(p->nkernels == 1 && p->nbuffers == 2 &&
                  p->kernels[0].args[1].offset == 3 &&
                  p->kernels[0].args[1].strides[0] == 8,
              "select of computed node inlined");
        tc_plan_free(p);
    }
    tc_graph_free(g);
    /* reshape merging dims of a computed, transposed node: materialized */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    e = op(g, "exp", tc_graph_t(g, x, err, sizeof(err)), -1, -1); /* [8,6] */
    int64_t flat = 48;
    int rs = tc_graph_reshape(g, e, 1, &flat, err, sizeof(err));
    y = op(g, "add", rs, tc_graph_scalar_int(g, 1), -1);
    p = plan_of(g, 1, &y);
    if (p) {
        CHECK(p->nkernels == 2, "merge reshape: %d kernels", p->nkernels);
        val xv[48];
        for (int i = 0; i < 48; i++) {
            xv[i].f = i * 0.01;
        }
        val *ins[1] = {xv};
        val **bufs = run_plan(p, ins);
        for (int i = 0; i < 48; i++) {
            int r = i / 6, c = i % 6; /* element [r, c] of x.t() */
            double want = exp(xv[c * 8 + r].f) + 1;
            double got = output_value(p, bufs, 0, i).f;
            CHECK(fabs(got - want) < 1e-5, "reshape[%d] %g want %g", i, got,
                  want);
        }
        free_bufs(p, bufs);
        tc_plan_free(p);
    }
    tc_graph_free(g);
    /* output that is a view of a computed node: base stored, view reported */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    e = op(g, "exp", x, -1, -1);
    v = tc_graph_t(g, e, err, sizeof(err));
    p = plan_of(g, 1, &v);
    if (p) {
        const tc_output_desc *o = &p->outputs[0];
        CHECK(o->is_view && p->buffers[o->buffer].kind == TC_BUF_OUTPUT &&
                  o->layout.strides[0] == 1 && o->layout.strides[1] == 8,
              "view output of computed node");
        tc_plan_free(p);
    }
    tc_graph_free(g);
    /* printer shows reductions and view offsets; CSE keeps distinct dims */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    tc_reduce_args ra = {1, {0}, 1, 0, TC_F32, 1, 2};
    int r0 = tc_graph_reduce(g, "sum", x, &ra, err, sizeof(err));
    ra.dims[0] = 1;
    int r1 = tc_graph_reduce(g, "sum", x, &ra, err, sizeof(err));
    int r2 = tc_graph_reduce(g, "sum", x, &ra, err, sizeof(err));
    int s3 = tc_graph_select(g, x, 0, 2, err, sizeof(err));
    int o4[4] = {r0, r1, r2, s3};
    tc_graph_set_outputs(g, 4, o4);
    /* r1 and r2 are both returned: eager's two tensors stay two (the
     * second is computed again, an accumulator in the first one's loop) */
    CHECK(tc_graph_optimize(g) == 0 && tc_graph_op_count(g) == 4 &&
              g->outputs[1] != g->outputs[2],
          "CSE of reductions: %d ops", tc_graph_op_count(g));
    char *txt = tc_graph_format(g, "r");
    CHECK(txt && strstr(txt, "sum(%x0, dims=[0], keepdim)") &&
              strstr(txt, "sum(%x0, dims=[1], keepdim)") &&
              strstr(txt, "select(%x0, offset=16)"),
          "format:\n%s", txt);
    free(txt);
    tc_graph_free(g);
    /* tc_graph_op refuses view / reduction ops */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    CHECK(tc_graph_op(g, "sum", 1, &x, TC_F32, err, sizeof(err)) < 0 &&
              strstr(err, "tcjit does not support"),
          "sum via tc_graph_op");
    tc_graph_free(g);
}

/* ---- transcendentals: one decomposition, per-target native ops ------- */

static int
count_math(const tc_kernel *k)
{
    static const tc_kop ops[] = {KOP_EXP, KOP_LOG, KOP_SIN, KOP_COS,
                                 KOP_TANH, KOP_ERF, KOP_POW};
    int n = 0;
    for (size_t j = 0; j < sizeof(ops) / sizeof(ops[0]); j++) {
        n += count_insts(k, ops[j]);
    }
    return n;
}

/* The kernel of opname(x) (pow(x, x)) for x of dtype dt, copied. */
static int
math_kernel(const char *opname, tc_dtype dt, tc_kernel *out)
{
    char err[256] = "";
    int64_t s1[1] = {33};
    tc_graph *g = tc_graph_new();
    int x = input(g, dt, 1, s1, NULL);
    int in[2] = {x, x};
    int y = tc_graph_op(g, opname, strcmp(opname, "pow") ? 1 : 2, in, dt, err,
                        sizeof(err));
    CHECK(y >= 0, "%s: %s", opname, err);
    tc_plan *p = y >= 0 ? plan_of(g, 1, &y) : NULL;
    int ok = p != NULL && p->nkernels == 1;
    if (ok) {
        *out = p->kernels[0];
        out->insts = malloc(sizeof(tc_kinst) * (size_t)out->ninsts);
        memcpy(out->insts, p->kernels[0].insts,
               sizeof(tc_kinst) * (size_t)out->ninsts);
    }
    tc_plan_free(p);
    tc_graph_free(g);
    return ok ? 0 : -1;
}

/* tc_kernel_decompose_math rewrites exactly the (op, dtype) pairs the
 * target lacks, and ERF's EXP only when the target lacks EXP too. */
static void
test_math_targets(void)
{
    static const char *const names[] = {"exp", "log", "sin", "cos",
                                        "tanh", "erf", "pow"};
    static const tc_kop kops[] = {KOP_EXP, KOP_LOG, KOP_SIN, KOP_COS,
                                  KOP_TANH, KOP_ERF, KOP_POW};
    tc_math_target all = {"all", {0}};
    for (int j = 0; j < 7; j++) {
        all.native[kops[j]] = TC_MATH_F32 | TC_MATH_F64;
    }
    for (int j = 0; j < 7; j++) {
        for (int f64 = 0; f64 < 2; f64++) {
            tc_dtype dt = f64 ? TC_F64 : TC_F32;
            int bit = f64 ? TC_MATH_F64 : TC_MATH_F32;
            tc_kernel k;
            if (math_kernel(names[j], dt, &k) < 0) {
                continue;
            }
            int n0 = k.ninsts;
            CHECK(count_insts(&k, kops[j]) == 1, "%s: one op", names[j]);
            /* native: untouched */
            CHECK(tc_kernel_decompose_math(&k, &all, NULL) == 0
                      && k.ninsts == n0 && count_insts(&k, kops[j]) == 1,
                  "%s %s native kept", names[j], tc_dtype_name(dt));
            /* native in the other dtype only: decomposed; ERF keeps the
             * EXP the target has */
            tc_math_target other = all;
            other.native[kops[j]] = (unsigned char)(bit ^ 3);
            CHECK(tc_kernel_decompose_math(&k, &other, NULL) == 0
                      && k.ninsts > n0 && count_insts(&k, kops[j]) == 0
                      && count_math(&k) == (kops[j] == KOP_ERF),
                  "%s %s decomposed for a target lacking it", names[j],
                  tc_dtype_name(dt));
            /* nothing native: no transcendental left at all */
            CHECK(tc_kernel_decompose_math(&k, &tc_math_target_none, NULL)
                          == 0
                      && count_math(&k) == 0,
                  "%s %s fully decomposed", names[j], tc_dtype_name(dt));
            free(k.insts);
        }
    }
}

/* The shared text buffer grows across its first capacity, and an empty
 * one finishes as "". */
static void
test_textbuf(void)
{
    tc_textbuf b = {0};
    char *e = tc_textbuf_finish(&b);
    CHECK(e != NULL && e[0] == '\0', "empty textbuf");
    free(e);
    for (int i = 0; i < 1000; i++) {
        tc_textbuf_printf(&b, "%03d,", i);
    }
    CHECK(!b.failed && b.len == 4000 && strlen(b.s) == 4000
              && strncmp(b.s + 3996, "999,", 4) == 0,
          "textbuf growth (len %zu)", b.len);
    char *t = tc_textbuf_finish(&b);
    CHECK(t != NULL && b.s == NULL && b.len == 0
              && strncmp(t, "000,001,", 8) == 0,
          "textbuf finish");
    free(t);
}

/* ---- reduction schedule (reduce_plan.c) ------------------------------- */

/* A one-phase kernel: rows x n points, acc = kind(load x); store acc. */
static void
red_kernel(tc_kernel *k, tc_kinst *ins, int64_t rows, int64_t n,
           tc_acc_kind kind, int store_in_body)
{
    memset(k, 0, sizeof(*k));
    k->ndim = 1;
    k->sizes[0] = rows;
    k->sizes[1] = n;
    k->numel = rows;
    k->nred = 1;
    k->red_numel = n;
    k->nphases = 1;
    tc_kinst acc = {KOP_ACC, TC_F32, -1, -1, -1, 0, {.i = kind}};
    tc_kinst ld = {KOP_LOAD, TC_F32, -1, -1, -1, 0, {0}};
    tc_kinst up = {KOP_ACC_UPDATE, TC_F32, 0, 1, -1, 0, {0}};
    tc_kinst st = {KOP_STORE, TC_F32, 1, -1, -1, 1, {0}};
    tc_kinst res = {KOP_ACC_RESULT, TC_F32, 0, -1, -1, 0, {0}};
    int n_ins = 0;
    ins[n_ins++] = acc;
    ins[n_ins++] = ld;
    ins[n_ins++] = up;
    if (store_in_body) {
        ins[n_ins++] = st;
    }
    k->phases[0].begin = 1;
    k->phases[0].end = n_ins;
    ins[n_ins++] = res;
    k->insts = ins;
    k->ninsts = n_ins;
}

static void
test_reduce_plan(void)
{
    double f;
    int64_t i;
    tc_acc_identity(TC_ACC_ARGMIN, TC_I16, &f, &i);
    CHECK(i == 32767 && f == INFINITY, "argmin i16 identity %lld",
          (long long)i);
    tc_acc_identity(TC_ACC_MAX, TC_U8, &f, &i);
    CHECK(i == 0 && f == -INFINITY, "amax u8 identity");
    tc_acc_identity(TC_ACC_ALL, TC_BOOL, &f, &i);
    CHECK(i == 1, "all identity");
    CHECK(tc_acc_value_op(TC_ACC_MAX, TC_BOOL) == KOP_OR, "amax bool = or");
    CHECK(tc_acc_value_op(TC_ACC_MIN, TC_F32) == KOP_MIN, "amin f32 = min");
    CHECK(tc_acc_sems[TC_ACC_ARGMAX].has_index
          && tc_acc_sems[TC_ACC_ARGMAX].greater
          && !tc_acc_sems[TC_ACC_ARGMIN].greater, "arg kinds");
    CHECK(tc_acc_cascaded(TC_ACC_SUM, TC_F64)
          && !tc_acc_cascaded(TC_ACC_SUM, TC_I64), "cascaded");

    /* a GPU-like target with 100 SMs, a CPU-like one */
    tc_red_target gpu = {
        .cross_thread = 1, .warp = 32, .block_rows = 256,
        .block_one_row = 1024, .persist_points = 16,
        .persist_points_big = 8, .persist_budget = 4096, .sets = 4,
        .sets_long = 4, .long_row = INT64_MAX, .sets_heavy = 4,
        .heavy_body = 1 << 30, .sets_min_points = 2,
        .split_min_points = 32768, .split_max_rows = 200,
        .split_chunk = 2048, .split_fill = 800, .split_max_chunks = 4096,
        .split_min_chunks = 4,
    };
    tc_red_target cpu = {
        .sets = 32, .sets_long = 64, .long_row = 512, .sets_heavy = 16,
        .heavy_body = 24, .fsum_fan = 16, .split_min_points = 65536,
        .split_max_rows = 1, .split_chunk = 16384, .split_max_chunks = 4096,
        .split_min_chunks = 2, .split_any_kernel = 1, .split_outer_dim = 1,
    };
    tc_kernel k;
    tc_kinst ins[8];
    tc_red_plan p;
    /* a whole tensor of 1M points */
    red_kernel(&k, ins, 1, 1 << 20, TC_ACC_SUM, 0);
    CHECK(tc_red_schedule(&k, 0, &gpu, &p) == 0, "gpu plan");
    CHECK(p.nsplit == 512 && p.threads == 256 && p.final_threads == 256
          && p.persist == 0 && p.sets[0] == 4 && p.levels[0] == 0,
          "gpu split: %lld x %d, final %d", (long long)p.nsplit, p.threads,
          p.final_threads);
    CHECK(tc_red_scratch_layout(&k, &p, NULL) == 512, "gpu scratch");
    CHECK(p.npasses == 2 && p.passes[0].kind == TC_RED_PASS_PARTIAL
          && p.passes[1].kind == TC_RED_PASS_FINAL, "gpu split passes");
    CHECK(tc_red_schedule(&k, 1024, &cpu, &p) == 0, "cpu plan");
    /* 1024 x 1024 points: chunks of 16 outer indices (16K points) */
    CHECK(p.nsplit == 64 && p.chunk_rows == 16 && p.threads == 1
          && p.sets[0] == 64, "cpu split: %lld x %lld", (long long)p.nsplit,
          (long long)p.chunk_rows);
    CHECK(p.npasses == 3 && p.passes[0].kind == TC_RED_PASS_PARTIAL
          && p.passes[1].kind == TC_RED_PASS_COMBINE
          && p.passes[2].kind == TC_RED_PASS_FINAL, "cpu split passes");
    /* 1M / 64 lanes = 16K per lane: 16 * 16 * 16 * 16 > 16K -> 3 levels;
     * a 16K chunk: 256 per lane -> 1 level */
    CHECK(p.levels[0] == 3 && p.levels_chunk[0] == 1, "cpu levels %d %d",
          p.levels[0], p.levels_chunk[0]);
    /* argmax: value and index slots */
    red_kernel(&k, ins, 1, 1 << 20, TC_ACC_ARGMAX, 0);
    CHECK(tc_red_schedule(&k, 1024, &cpu, &p) == 0
          && tc_red_scratch_layout(&k, &p, NULL) == 128
          && p.levels[0] == 0, "cpu argmax scratch");
    /* a store before the combine: the GPU does not split, the CPU does */
    red_kernel(&k, ins, 1, 1 << 20, TC_ACC_SUM, 1);
    CHECK(tc_red_schedule(&k, 0, &gpu, &p) == 0 && p.nsplit == 1
          && p.threads == 1024 && p.persist == 0, "gpu no split %d",
          p.threads);
    CHECK(tc_red_schedule(&k, 0, &cpu, &p) == 0 && p.nsplit > 1,
          "cpu split with stores");
    /* many rows of 6000 points: 512 threads, persistent (12 points) */
    red_kernel(&k, ins, 4096, 6000, TC_ACC_MAX, 0);
    CHECK(tc_red_schedule(&k, 0, &gpu, &p) == 0 && p.nsplit == 1
          && p.threads == 512 && p.persist == 12 && p.sets[0] == 4
          && p.npasses == 1 && p.passes[0].kind == TC_RED_PASS_ROWS,
          "gpu rows %d %d", p.threads, p.persist);
    /* short rows: 3 points, one warp, one set */
    red_kernel(&k, ins, 4096, 3, TC_ACC_ARGMAX, 0);
    CHECK(tc_red_schedule(&k, 0, &gpu, &p) == 0 && p.threads == 32
          && p.persist == 1 && p.sets[0] == 1, "gpu short rows");
    CHECK(tc_red_schedule(&k, 0, &cpu, &p) == 0 && p.sets[0] == 32
          && p.nsplit == 1, "cpu short rows");
}

/* place.c: a CUDA graph with CPU values (an optimizer's step counter)
 * becomes a host graph run first and a device graph; a 0-d host value a
 * kernel reads crosses by a copy; a host tensor that is not 0-d read by a
 * kernel is eager's device error. */
/* ---- online softmax (kir_online.c) ----------------------------------- */

/* Row r of a [10, 37] input: one edge case each (kir_online.c's table). */
static double
online_input(int r, int c)
{
    double x = (double)((r * 37 + c) * 7919 % 41 - 20) / 3.0;
    switch (r) {
    case 1: return c == 5 ? INFINITY : x;
    case 2: return c == 0 || c == 36 ? INFINITY : x;
    case 3: return -INFINITY;
    case 4: return c < 36 ? -INFINITY : x;
    case 5: return c == 11 ? NAN : x;
    case 6: return c == 0 ? -INFINITY : x;
    case 7: return -FLT_MAX;
    case 8: return 2.5;
    case 9: return c % 2 ? 80.0 : -80.0;
    default: return x;
    }
}

static int
same_or_close(double a, double b)
{
    if (isnan(a) || isnan(b)) {
        return isnan(a) && isnan(b);
    }
    if (isinf(a) || isinf(b)) {
        return a == b;
    }
    return fabs(a - b) <= 1e-5 * fabs(b) + 1e-6;
}

/* The plan of out run as scheduled and with every kernel rewritten: one
 * phase fewer (removed phases in all: want), the same output. */
static void
check_online(const char *what, tc_graph *g, int out, int want)
{
    tc_plan *p = plan_of(g, 1, &out);
    if (p == NULL) {
        return;
    }
    val in[370];
    for (int i = 0; i < 370; i++) {
        in[i].f = (float)online_input(i / 37, i % 37);
    }
    val *inputs[1] = {in};
    val **ref = run_plan(p, inputs);
    int removed = 0;
    for (int k = 0; k < p->nkernels; k++) {
        int before = p->kernels[k].nphases;
        CHECK(tc_kernel_online_applies(&p->kernels[k])
                  == (tc_kernel_online_softmax(&p->kernels[k]) > 0),
              "%s: applies != rewrites", what);
        removed += before - p->kernels[k].nphases;
        check_regions(&p->kernels[k]);
    }
    CHECK(removed == want, "%s: %d phases removed, want %d", what, removed,
          want);
    val **got = run_plan(p, inputs);
    for (int b = 0; b < p->nbuffers; b++) {
        if (p->buffers[b].kind != TC_BUF_OUTPUT) {
            continue;
        }
        int64_t n = storage_extent(&p->buffers[b].layout);
        for (int64_t i = 0; i < n; i++) {
            CHECK(same_or_close(got[b][i].f, ref[b][i].f),
                  "%s: element %lld: %g, two passes %g", what, (long long)i,
                  got[b][i].f, ref[b][i].f);
        }
    }
    free_bufs(p, ref);
    free_bufs(p, got);
    tc_plan_free(p);
}

static void
test_online_softmax(void)
{
    char err[256] = "";
    int64_t s2[2] = {10, 37};
    for (int log = 0; log < 2; log++) {
        tc_graph *g = tc_graph_new();
        int x = input(g, TC_F32, 2, s2, NULL);
        int y = tc_graph_softmax(g, x, -1, 0, TC_F32, log, err, sizeof(err));
        check_online(log ? "log_softmax" : "softmax", g, y, 1);
        tc_graph_free(g);
    }
    /* logsumexp: the guarded max, where(|m| == inf, 0, m) */
    tc_graph *g = tc_graph_new();
    int x = input(g, TC_F32, 2, s2, NULL);
    tc_reduce_args a = {.ndims = 1, .dims = {1}};
    int y = tc_graph_reduce(g, "logsumexp", x, &a, err, sizeof(err));
    CHECK(y >= 0, "logsumexp: %s", err);
    check_online("logsumexp", g, y, 1);
    tc_graph_free(g);
    /* sum(exp(2x - max(x))): not the max's values, left alone */
    g = tc_graph_new();
    x = input(g, TC_F32, 2, s2, NULL);
    tc_reduce_args keep = {.ndims = 1, .dims = {1}, .keepdim = 1};
    int m = tc_graph_reduce(g, "amax", x, &keep, err, sizeof(err));
    int two = tc_graph_scalar_float(g, 2.0);
    int e = op(g, "exp", op(g, "sub", op(g, "mul", x, two, -1), m, -1), -1,
               -1);
    y = tc_graph_reduce(g, "sum", e, &a, err, sizeof(err));
    CHECK(m >= 0 && y >= 0, "sum of exp: %s", err);
    check_online("other values", g, y, 0);
    tc_graph_free(g);
}

static void
test_split_host(void)
{
    char err[256];
    tc_layout l0 = {0}, l1 = {1, {8}, {1}};
    tc_graph *g = tc_graph_new();
    g->cuda = 1;
    int x = tc_graph_input(g, TC_F32, &l1);         /* cuda */
    int step = tc_graph_input(g, TC_F32, &l0);      /* cpu step counter */
    g->nodes[step].place = TC_PLACE_HOST;
    int one = tc_graph_scalar_float(g, 1.0);
    int in[2] = {step, one};
    int step2 = tc_graph_op(g, "add", 2, in, TC_F32, err, sizeof(err));
    int in2[2] = {x, step2};
    int y = tc_graph_op(g, "mul", 2, in2, TC_F32, err, sizeof(err));
    int outs[2] = {y, step2};
    tc_graph_set_outputs(g, 2, outs);
    tc_graph_set_output_write(g, 1, 1);   /* step += 1 */
    tc_split s;
    int r = tc_graph_split(g, &s, 0, err, sizeof(err));
    CHECK(r == 1, "split: %d %s", r, err);
    if (r == 1) {
        CHECK(s.host->ninputs == 1 && s.host_in[0] == 1, "host inputs");
        CHECK(s.host->noutputs == 1 && s.host->nodes[s.host->outputs[0]].op
              == tc_op_lookup("add"), "host output: step + 1");
        CHECK(s.dev->ninputs == 2 && s.dev_pack[0] == 0
              && s.dev_pack[1] == -1 && s.dev_in[1] == 0, "device inputs: "
              "the pack of float32 host values, then x");
        CHECK(s.npacks == 1 && s.pack_dtype[0] == TC_F32 && s.pack_n[0] == 1
              && s.pack_src[0][0] == -1, "the pack: step + 1, host output 0");
        CHECK(s.dev->noutputs == 1 && s.out[0] == 0 && s.out[1] == -1,
              "outputs: device y, host step + 1");
        CHECK(s.dev->cuda == 1 && s.host->cuda == 0, "devices");
        CHECK(s.host->output_writes != NULL && s.host->output_writes[0] == 0
              && s.dev->output_writes == NULL, "the in-place write stays "
              "marked in the host part");
        tc_split_free(&s);
    }
    tc_graph_free(g);

    g = tc_graph_new();
    g->cuda = 1;
    x = tc_graph_input(g, TC_F32, &l1);
    int m = tc_graph_input(g, TC_F32, &l1);          /* cpu, not 0-d */
    g->nodes[m].place = TC_PLACE_HOST;
    int in3[2] = {x, m};
    y = tc_graph_op(g, "add", 2, in3, TC_F32, err, sizeof(err));
    tc_graph_set_outputs(g, 1, &y);
    r = tc_graph_split(g, &s, 0, err, sizeof(err));
    CHECK(r == -1 && strstr(err, "Expected all tensors to be on the same "
                            "device") != NULL, "non-0-d host operand: %d %s",
          r, err);
    tc_graph_free(g);

    g = tc_graph_new();          /* a tensor of numbers alone: both parts */
    g->cuda = 1;
    x = tc_graph_input(g, TC_F32, &l1);
    step = tc_graph_input(g, TC_F32, &l0);
    g->nodes[step].place = TC_PLACE_HOST;
    int two = tc_graph_scalar_float(g, 2.0);
    int c = tc_graph_full(g, &l0, TC_F32, two, err, sizeof(err));
    int in4[2] = {x, c}, in5[2] = {step, c};
    int outs2[2] = {tc_graph_op(g, "mul", 2, in4, TC_F32, err, sizeof(err)),
                    tc_graph_op(g, "mul", 2, in5, TC_F32, err, sizeof(err))};
    tc_graph_set_outputs(g, 2, outs2);
    r = tc_graph_split(g, &s, 0, err, sizeof(err));
    CHECK(r == 1 && s.npacks == 0 && s.dev->ninputs == 1
          && s.host->noutputs == 1 && s.out[0] == 0 && s.out[1] == -1,
          "full(2.0) copied into both parts, no pack: %d %s", r, err);
    if (r == 1) {
        tc_split_free(&s);
    }
    tc_graph_free(g);

    g = tc_graph_new();          /* a CPU graph: nothing to split */
    x = tc_graph_input(g, TC_F32, &l1);
    g->nodes[x].place = TC_PLACE_HOST;
    tc_graph_set_outputs(g, 1, &x);
    CHECK(tc_graph_split(g, &s, 0, err, sizeof(err)) == 0, "cpu graph");
    tc_graph_free(g);
}

int
main(void)
{
    test_dtype_names();
    test_half_conversions();
    test_registry();
    test_promotion();
    test_op_cases();
    test_errors();
    test_optimize_format();
    test_optimize_output_identity();
    test_float_lowerings();
    test_int_lowerings();
    test_schedule_temp();
    test_schedule_layouts();
    test_schedule_edge();
    test_rv_cases();
    test_schedule_rowwise();
    test_schedule_views();
    test_math_targets();
    test_textbuf();
    test_reduce_plan();
    test_online_softmax();
    test_split_host();
    printf("%d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}
