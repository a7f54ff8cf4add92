/* ops.c - the op registry: names, dtype rules and KIR lowerings.
 *
 * Semantics follow eager PyTorch (CPU kernels): dtype promotion as
 * at::native::result_type, NaN propagation of maximum/minimum/clamp, the
 * same special cases as torch's pow kernel (x**2 = x*x, x**0.5 = sqrt).
 */
#include "ops.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define M(dt) (1u << (dt))
#define MASK_ALL ((1u << TC_NDTYPES) - 1)
#define MASK_NOBOOL (MASK_ALL & ~M(TC_BOOL))
#define MASK_FLOAT (M(TC_F32) | M(TC_F64) | M(TC_F16) | M(TC_BF16))
#define MASK_INTBOOL (MASK_ALL & ~MASK_FLOAT)

/* ---- lowering helpers ------------------------------------------------ */

static int
un(tc_kbuilder *kb, tc_kop op, tc_dtype dt, int a)
{
    return kb_emit(kb, op, dt, a, -1, -1);
}

static int
bin(tc_kbuilder *kb, tc_kop op, tc_dtype dt, int a, int b)
{
    return kb_emit(kb, op, dt, a, b, -1);
}

/* The instruction defining v if it is a constant, else NULL. */
static const tc_kinst *
const_inst(const tc_kbuilder *kb, int v)
{
    if (v < 0 || v >= kb->k->ninsts || kb->k->insts[v].op != KOP_CONST) {
        return NULL;
    }
    return &kb->k->insts[v];
}

static int
reciprocal_of(tc_kbuilder *kb, tc_dtype dt, int v)
{
    return bin(kb, KOP_DIV, dt, kb_const_i(kb, dt, 1), v);
}

/* ---- lowerings ------------------------------------------------------- */

#define LOWER(name) \
    static int name(tc_kbuilder *kb, const int *a, tc_dtype c, tc_dtype out)

/* bool arithmetic is logical: True + True == True, True * False == False */
LOWER(lower_add)
{
    (void)out;
    return bin(kb, c == TC_BOOL ? KOP_OR : KOP_ADD, c, a[0], a[1]);
}

LOWER(lower_sub)
{
    (void)out;
    return bin(kb, KOP_SUB, c, a[0], a[1]);
}

LOWER(lower_mul)
{
    (void)out;
    return bin(kb, c == TC_BOOL ? KOP_AND : KOP_MUL, c, a[0], a[1]);
}

LOWER(lower_div)
{
    (void)out;
    return bin(kb, KOP_DIV, c, a[0], a[1]);
}

LOWER(lower_neg)
{
    (void)out;
    return un(kb, KOP_NEG, c, a[0]);
}

LOWER(lower_abs)
{
    (void)out;
    return c == TC_U8 ? a[0] : un(kb, KOP_ABS, c, a[0]);
}

LOWER(lower_exp)
{
    (void)out;
    return un(kb, KOP_EXP, c, a[0]);
}

LOWER(lower_log)
{
    (void)out;
    return un(kb, KOP_LOG, c, a[0]);
}

LOWER(lower_sqrt)
{
    (void)out;
    return un(kb, KOP_SQRT, c, a[0]);
}

LOWER(lower_rsqrt)
{
    (void)out;
    return reciprocal_of(kb, c, un(kb, KOP_SQRT, c, a[0]));
}

LOWER(lower_sin)
{
    (void)out;
    return un(kb, KOP_SIN, c, a[0]);
}

LOWER(lower_cos)
{
    (void)out;
    return un(kb, KOP_COS, c, a[0]);
}

LOWER(lower_tanh)
{
    (void)out;
    return un(kb, KOP_TANH, c, a[0]);
}

/* 1 / (1 + exp(-x)) */
LOWER(lower_sigmoid)
{
    (void)out;
    int e = un(kb, KOP_EXP, c, un(kb, KOP_NEG, c, a[0]));
    return reciprocal_of(kb, c, bin(kb, KOP_ADD, c, kb_const_i(kb, c, 1), e));
}

/* x / (1 + exp(-x)), as ATen's vectorized silu computes it */
LOWER(lower_silu)
{
    (void)out;
    int e = un(kb, KOP_EXP, c, un(kb, KOP_NEG, c, a[0]));
    return bin(kb, KOP_DIV, c, a[0],
               bin(kb, KOP_ADD, c, kb_const_i(kb, c, 1), e));
}

/* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): gelu(approximate='tanh') */
LOWER(lower_gelu_tanh)
{
    (void)out;
    int x = a[0];
    int x3 = bin(kb, KOP_MUL, c, bin(kb, KOP_MUL, c, x, x), x);
    int inner = bin(kb, KOP_ADD, c, x,
                    bin(kb, KOP_MUL, c, kb_const_f(kb, c, 0.044715), x3));
    int t = un(kb, KOP_TANH, c, bin(kb, KOP_MUL, c,
                                    kb_const_f(kb, c, 0.7978845608028654),
                                    inner));
    int half_x = bin(kb, KOP_MUL, c, kb_const_f(kb, c, 0.5), x);
    return bin(kb, KOP_MUL, c, half_x,
               bin(kb, KOP_ADD, c, kb_const_i(kb, c, 1), t));
}

/* where(x < 0, 0, x): NaN stays NaN */
LOWER(lower_relu)
{
    (void)out;
    int zero = kb_const_i(kb, c, 0);
    int neg = bin(kb, KOP_LT, TC_BOOL, a[0], zero);
    return kb_emit(kb, KOP_WHERE, c, neg, zero, a[0]);
}

LOWER(lower_reciprocal)
{
    (void)out;
    return reciprocal_of(kb, c, a[0]);
}

LOWER(lower_square)
{
    (void)out;
    return bin(kb, KOP_MUL, c, a[0], a[0]);
}

/* x**n for integers by square-and-multiply (same result mod 2^bits). */
static int
int_pow(tc_kbuilder *kb, tc_dtype c, int x, int64_t n)
{
    int result = -1;
    while (n > 0) {
        if (n & 1) {
            result = result < 0 ? x : bin(kb, KOP_MUL, c, result, x);
        }
        n >>= 1;
        if (n) {
            x = bin(kb, KOP_MUL, c, x, x);
        }
    }
    return result < 0 ? kb_const_i(kb, c, 1) : result;
}

/* torch's pow kernel special-cases these scalar exponents exactly. */
static int
float_pow_const(tc_kbuilder *kb, tc_dtype c, int x, double e)
{
    if (e == 0) {
        return kb_const_i(kb, c, 1);
    }
    if (e == 1) {
        return x;
    }
    if (e == 2) {
        return bin(kb, KOP_MUL, c, x, x);
    }
    if (e == 3) {
        return bin(kb, KOP_MUL, c, bin(kb, KOP_MUL, c, x, x), x);
    }
    if (e == 0.5) {
        return un(kb, KOP_SQRT, c, x);
    }
    if (e == -0.5) {
        return reciprocal_of(kb, c, un(kb, KOP_SQRT, c, x));
    }
    if (e == -1) {
        return reciprocal_of(kb, c, x);
    }
    if (e == -2) {
        return reciprocal_of(kb, c, bin(kb, KOP_MUL, c, x, x));
    }
    return -2; /* not special */
}

LOWER(lower_pow)
{
    (void)out;
    const tc_kinst *e = const_inst(kb, a[1]);
    if (c == TC_BOOL) { /* x ** True is x, x ** False is True */
        return !e ? -1 : e->imm.i ? a[0] : kb_const_i(kb, c, 1);
    }
    if (tc_dtype_is_float(c)) {
        int v = e ? float_pow_const(kb, c, a[0], e->imm.f) : -2;
        return v != -2 ? v : bin(kb, KOP_POW, c, a[0], a[1]);
    }
    if (!e || e->imm.i < 0 || e->imm.i > 64) {
        return -1; /* rejected by tc_op_infer_dtypes already */
    }
    return int_pow(kb, c, a[0], e->imm.i);
}

LOWER(lower_maximum)
{
    (void)out;
    return bin(kb, c == TC_BOOL ? KOP_OR : KOP_MAX, c, a[0], a[1]);
}

LOWER(lower_minimum)
{
    (void)out;
    return bin(kb, c == TC_BOOL ? KOP_AND : KOP_MIN, c, a[0], a[1]);
}

LOWER(lower_clamp)
{
    (void)out;
    return bin(kb, KOP_MIN, c, bin(kb, KOP_MAX, c, a[0], a[1]), a[2]);
}

LOWER(lower_where)
{
    (void)out;
    return kb_emit(kb, KOP_WHERE, c, a[0], a[1], a[2]);
}

LOWER(lower_lt)
{
    (void)c, (void)out;
    return bin(kb, KOP_LT, TC_BOOL, a[0], a[1]);
}

LOWER(lower_le)
{
    (void)c, (void)out;
    return bin(kb, KOP_LE, TC_BOOL, a[0], a[1]);
}

LOWER(lower_gt)
{
    (void)c, (void)out;
    return bin(kb, KOP_LT, TC_BOOL, a[1], a[0]);
}

LOWER(lower_ge)
{
    (void)c, (void)out;
    return bin(kb, KOP_LE, TC_BOOL, a[1], a[0]);
}

LOWER(lower_eq)
{
    (void)c, (void)out;
    return bin(kb, KOP_EQ, TC_BOOL, a[0], a[1]);
}

LOWER(lower_ne)
{
    (void)c, (void)out;
    return bin(kb, KOP_NE, TC_BOOL, a[0], a[1]);
}

/* and/or/xor/not: bitwise on ints, logical on bool operands */
LOWER(lower_and)
{
    (void)out;
    return bin(kb, KOP_AND, c, a[0], a[1]);
}

LOWER(lower_or)
{
    (void)out;
    return bin(kb, KOP_OR, c, a[0], a[1]);
}

LOWER(lower_xor)
{
    (void)out;
    return bin(kb, KOP_XOR, c, a[0], a[1]);
}

LOWER(lower_not)
{
    (void)out;
    return un(kb, KOP_NOT, c, a[0]);
}

/* contiguous copy (reshape of a non-viewable tensor) */
LOWER(lower_copy)
{
    (void)c, (void)kb, (void)out;
    return a[0];
}

LOWER(lower_to)
{
    (void)c;
    return kb_cast(kb, a[0], out);
}

LOWER(lower_erf)
{
    (void)out;
    return un(kb, KOP_ERF, c, a[0]);
}

/* 0.5 x (1 + erf(x / sqrt(2))): gelu(approximate='none'), ATen's order */
LOWER(lower_gelu)
{
    (void)out;
    int e = un(kb, KOP_ERF, c, bin(kb, KOP_MUL, c, a[0],
                                   kb_const_f(kb, c, 0.70710678118654752440)));
    int half_x = bin(kb, KOP_MUL, c, a[0], kb_const_f(kb, c, 0.5));
    return bin(kb, KOP_MUL, c, half_x,
               bin(kb, KOP_ADD, c, kb_const_i(kb, c, 1), e));
}

/* log1p(u) for u >= 0 without libm's log1p: log(w) * u / (w - 1) with
 * w = 1 + u corrects the rounding of w (Goldberg); u itself where w
 * rounds to 1, inf for inf. */
static int
log1p_of(tc_kbuilder *kb, tc_dtype c, int u)
{
    int w = bin(kb, KOP_ADD, c, kb_const_i(kb, c, 1), u);
    int r = bin(kb, KOP_MUL, c, un(kb, KOP_LOG, c, w),
                bin(kb, KOP_DIV, c, u,
                    bin(kb, KOP_SUB, c, w, kb_const_i(kb, c, 1))));
    r = kb_emit(kb, KOP_WHERE, c,
                bin(kb, KOP_EQ, TC_BOOL, w, kb_const_i(kb, c, 1)), u, r);
    return kb_emit(kb, KOP_WHERE, c,
                   bin(kb, KOP_EQ, TC_BOOL, w, kb_const_f(kb, c, INFINITY)),
                   w, r);
}

/* expm1(x) for x <= 0: near 0 (Kahan) (u - 1) x / log(u) with u = e^x,
 * x itself where u rounds to 1; below -1 plain u - 1, which has no
 * cancellation there (and Kahan's form would divide by the log of an
 * inexact denormal). */
static int
expm1_of(tc_kbuilder *kb, tc_dtype c, int x)
{
    int u = un(kb, KOP_EXP, c, x);
    int um1 = bin(kb, KOP_SUB, c, u, kb_const_i(kb, c, 1));
    int r = bin(kb, KOP_DIV, c, bin(kb, KOP_MUL, c, um1, x),
                un(kb, KOP_LOG, c, u));
    r = kb_emit(kb, KOP_WHERE, c,
                bin(kb, KOP_EQ, TC_BOOL, u, kb_const_i(kb, c, 1)), x, r);
    return kb_emit(kb, KOP_WHERE, c,
                   bin(kb, KOP_LT, TC_BOOL, x, kb_const_i(kb, c, -1)), um1, r);
}

/* softplus(x, beta, threshold): x where x * beta > threshold, else
 * log1p(exp(x * beta)) / beta (ATen's CPU kernel) */
LOWER(lower_softplus)
{
    (void)out;
    int xb = bin(kb, KOP_MUL, c, a[0], a[1]);
    int soft = bin(kb, KOP_DIV, c, log1p_of(kb, c, un(kb, KOP_EXP, c, xb)),
                   a[1]);
    return kb_emit(kb, KOP_WHERE, c, bin(kb, KOP_LT, TC_BOOL, a[2], xb), a[0],
                   soft);
}

/* x > 0 ? x : x * negative_slope (NaN: NaN * slope) */
LOWER(lower_leaky_relu)
{
    (void)out;
    int pos = bin(kb, KOP_LT, TC_BOOL, kb_const_i(kb, c, 0), a[0]);
    return kb_emit(kb, KOP_WHERE, c, pos, a[0],
                   bin(kb, KOP_MUL, c, a[0], a[1]));
}

/* elu(x, alpha): x > 0 ? x : alpha * expm1(x) */
LOWER(lower_elu)
{
    (void)out;
    int pos = bin(kb, KOP_LT, TC_BOOL, kb_const_i(kb, c, 0), a[0]);
    int neg = bin(kb, KOP_MUL, c, expm1_of(kb, c, a[0]), a[1]);
    return kb_emit(kb, KOP_WHERE, c, pos, a[0], neg);
}

/* mish(x) = x * tanh(log1p(exp(x))) */
LOWER(lower_mish)
{
    (void)out;
    int sp = log1p_of(kb, c, un(kb, KOP_EXP, c, a[0]));
    return bin(kb, KOP_MUL, c, a[0], un(kb, KOP_TANH, c, sp));
}

/* masked_fill(x, mask, value) */
LOWER(lower_masked_fill)
{
    (void)out;
    return kb_emit(kb, KOP_WHERE, c, a[1], a[2], a[0]);
}

/* arange(start, step) over the node's elements: start + step * i,
 * computed in double (int64 for integers) and rounded once, as ATen's
 * scalar loop does */
LOWER(lower_arange)
{
    tc_dtype acc = tc_dtype_is_float(out) ? TC_F64 : TC_I64;
    int i = kb_cast(kb, a[2], acc);
    int v = bin(kb, KOP_ADD, acc, kb_cast(kb, a[0], acc),
                bin(kb, KOP_MUL, acc, kb_cast(kb, a[1], acc), i));
    (void)c;
    return kb_cast(kb, v, out);
}

/* ---- the table ------------------------------------------------------- */

#define PW TC_OPK_POINTWISE
#define VW TC_OPK_VIEW
#define RD TC_OPK_REDUCTION
#define EX TC_OPK_EXTERN

const tc_op_def tc_ops[] = {
    {"add", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_add, "a + b",
     .eager = "x0 + x1"},
    {"sub", 2, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_sub, "a - b",
     .eager = "x0 - x1"},
    {"mul", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_mul, "a * b",
     .eager = "x0 * x1"},
    {"div", 2, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_div,
     "true division a / b", .eager = "x0 / x1"},
    {"neg", 1, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_neg, "-x",
     .eager = "-x0"},
    {"abs", 1, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_abs, "|x|"},
    {"exp", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_exp, "e**x"},
    {"log", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_log,
     "natural logarithm"},
    {"sqrt", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_sqrt,
     "square root"},
    {"rsqrt", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_rsqrt,
     "1 / sqrt(x)"},
    {"sin", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_sin, "sine"},
    {"cos", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_cos, "cosine"},
    {"tanh", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_tanh,
     "hyperbolic tangent"},
    {"sigmoid", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_sigmoid,
     "1 / (1 + exp(-x))"},
    {"silu", 1, PW, TC_PROMOTE_DEFAULT, MASK_FLOAT, lower_silu,
     "x * sigmoid(x)", .eager = "F.silu(x0)"},
    {"gelu_tanh", 1, PW, TC_PROMOTE_DEFAULT, MASK_FLOAT, lower_gelu_tanh,
     "gelu(x, approximate='tanh')",
     .eager = "F.gelu(x0, approximate=\"tanh\")"},
    {"gelu", 1, PW, TC_PROMOTE_DEFAULT, MASK_FLOAT, lower_gelu,
     "0.5 x (1 + erf(x / sqrt(2))): gelu(x, approximate='none')",
     .eager = "F.gelu(x0)"},
    {"erf", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_erf,
     "error function (polynomial + exp, tcjit's own fit)"},
    {"softplus", 3, PW, TC_PROMOTE_FIRST, MASK_FLOAT, lower_softplus,
     "softplus(x, beta, threshold): x where x*beta > threshold, else "
     "log1p(exp(x*beta)) / beta", .eager = "F.softplus(x0, x1, x2)"},
    {"leaky_relu", 2, PW, TC_PROMOTE_FIRST, MASK_FLOAT, lower_leaky_relu,
     "x > 0 ? x : x * negative_slope", .eager = "F.leaky_relu(x0, x1)"},
    {"elu", 2, PW, TC_PROMOTE_FIRST, MASK_FLOAT, lower_elu,
     "x > 0 ? x : alpha * expm1(x)", .eager = "F.elu(x0, x1)"},
    {"mish", 1, PW, TC_PROMOTE_DEFAULT, MASK_FLOAT, lower_mish,
     "x * tanh(softplus(x))", .eager = "F.mish(x0)"},
    {"masked_fill", 3, PW, TC_PROMOTE_FIRST, MASK_ALL, lower_masked_fill,
     "mask ? value : x (contiguous result, x's dtype)"},
    {"full", 1, PW, TC_PROMOTE_CAST, MASK_ALL, lower_to,
     "a new tensor filled with a number (zeros, ones, full, empty, *_like)",
     .eager = "torch.empty_strided(n.shape, n.stride, dtype=n.dtype, "
              "device=n.device).fill_(x0)"},
    {"arange", 2, PW, TC_PROMOTE_CAST, MASK_ALL & ~M(TC_BOOL), lower_arange,
     "start + step * i over a new tensor (arange; positions for tril/triu)",
     1, .eager = "torch.empty_strided(n.shape, n.stride, dtype=n.dtype, "
                 "device=n.device).copy_((x0 + x1 * torch.arange("
                 "n.shape.numel(), device=n.device, dtype=torch.float64 "
                 "if n.dtype.is_floating_point else torch.int64))"
                 ".view(n.shape))"},
    {"relu", 1, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_relu,
     "max(x, 0), NaN propagating"},
    {"pow", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_pow,
     "a ** b (integer: constant exponent 0..64 only)", .eager = "x0 ** x1"},
    {"maximum", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_maximum,
     "elementwise max, NaN propagating"},
    {"minimum", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_minimum,
     "elementwise min, NaN propagating"},
    {"clamp", 3, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_clamp,
     "min(max(x, lo), hi), NaN propagating"},
    {"clamp_min", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_maximum,
     "max(x, lo), NaN propagating"},
    {"clamp_max", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_minimum,
     "min(x, hi), NaN propagating"},
    {"where", 3, PW, TC_PROMOTE_WHERE, MASK_ALL, lower_where,
     "cond ? a : b"},
    {"lt", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_lt, "a < b",
     .eager = "x0 < x1"},
    {"le", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_le, "a <= b",
     .eager = "x0 <= x1"},
    {"gt", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_gt, "a > b",
     .eager = "x0 > x1"},
    {"ge", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_ge, "a >= b",
     .eager = "x0 >= x1"},
    {"eq", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_eq, "a == b",
     .eager = "x0 == x1"},
    {"ne", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_ne, "a != b",
     .eager = "x0 != x1"},
    {"logical_and", 2, PW, TC_PROMOTE_LOGICAL, MASK_ALL, lower_and,
     "bool(a) and bool(b)"},
    {"logical_or", 2, PW, TC_PROMOTE_LOGICAL, MASK_ALL, lower_or,
     "bool(a) or bool(b)"},
    {"logical_xor", 2, PW, TC_PROMOTE_LOGICAL, MASK_ALL, lower_xor,
     "bool(a) != bool(b)"},
    {"logical_not", 1, PW, TC_PROMOTE_LOGICAL, MASK_ALL, lower_not,
     "not bool(x)"},
    {"bitwise_and", 2, PW, TC_PROMOTE_DEFAULT, MASK_INTBOOL, lower_and,
     "a & b (integers and bool)", .eager = "x0 & x1"},
    {"bitwise_or", 2, PW, TC_PROMOTE_DEFAULT, MASK_INTBOOL, lower_or,
     "a | b (integers and bool)", .eager = "x0 | x1"},
    {"bitwise_xor", 2, PW, TC_PROMOTE_DEFAULT, MASK_INTBOOL, lower_xor,
     "a ^ b (integers and bool)", .eager = "x0 ^ x1"},
    {"bitwise_not", 1, PW, TC_PROMOTE_DEFAULT, MASK_INTBOOL, lower_not,
     "~x (integers and bool)", .eager = "~x0"},
    {"to", 1, PW, TC_PROMOTE_CAST, MASK_ALL, lower_to,
     "cast to a dtype (bool: x != 0)",
     .eager = "x0.to(n.to_dtype, copy=True)"},
    {"square", 1, PW, TC_PROMOTE_POW_INT, MASK_NOBOOL, lower_square,
     "x * x (bool -> int64, as pow(x, 2))"},
    {"reciprocal", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT,
     lower_reciprocal, "1 / x"},
    {"contiguous", 1, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_copy,
     "copy into a contiguous tensor (reshape of a non-viewable input)",
     .eager = "x0.clone(memory_format=torch.contiguous_format)"},
    {"clone", 1, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_copy,
     "copy with the node's layout (a graph output that eager returns as a "
     "tensor of its own)"},
    /* views: layout-only nodes (graph.h), read through index arithmetic */
    {"permute", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: permute / transpose / t"},
    {"unsqueeze", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: insert a size-1 dim"},
    {"squeeze", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: drop size-1 dims"},
    {"expand", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: broadcast size-1 dims (stride 0)"},
    {"select", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: x[..., i, ...]"},
    {"slice", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: x[..., a:b:s, ...] / narrow"},
    {"view", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: view / reshape / flatten / unflatten without a copy"},
    /* primitive reductions: one accumulator each (kir.h KOP_ACC) */
    {"sum", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "sum over dims (ints and bool -> int64)",
     .eager = "torch.sum(x0, n.dims, n.keepdim, dtype=n.dtype)"},
    {"prod", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "product over dims (ints and bool -> int64)",
     .eager = "torch.prod(x0, n.dims[0], n.keepdim, dtype=n.dtype) "
              "if len(n.dims) == 1 else torch.prod(x0, dtype=n.dtype)"},
    {"amax", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "max over dims, NaN propagating"},
    {"amin", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "min over dims, NaN propagating"},
    {"argmax", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "index of the first max (first NaN) -> int64",
     .eager = "torch.argmax(x0, n.dims[0] if len(n.dims) == 1 else None, "
              "n.keepdim)"},
    {"argmin", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "index of the first min (first NaN) -> int64",
     .eager = "torch.argmin(x0, n.dims[0] if len(n.dims) == 1 else None, "
              "n.keepdim)"},
    {"any", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "logical or over dims (bool; uint8 stays uint8)"},
    {"all", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "logical and over dims (bool; uint8 stays uint8)"},
    /* extern ops: torch computes them, kernels fuse around (extern.h) */
    {"mm", 2, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: [n, k] @ [k, m]"},
    {"bmm", 2, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: batched [b, n, k] @ [b, k, m]"},
    {"matmul", 2, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: torch.matmul (1-d operands, broadcast batch dims)"},
    {"addmm", 3, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: bias + a @ b (beta = alpha = 1)"},
    {"baddbmm", 3, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: bias + bmm(a, b) (beta = alpha = 1)"},
    {"linear", 3, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: x @ w.T (+ b); a bias followed by pointwise ops is fused "
     "into their kernel instead"},
    {"sdpa", 4, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: scaled_dot_product_attention (attn_mask, is_causal, scale; "
     "dropout_p = 0)"},
    {"embedding", 2, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: rows of weight picked by int indices"},
    {"conv1d", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: 1-d convolution (int stride/padding/dilation, groups)"},
    {"conv2d", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: 2-d convolution (int stride/padding/dilation, groups)"},
    {"cat", TC_MAX_OP_INPUTS, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: concatenate along dim (up to 8 tensors)"},
    {"stack", TC_MAX_OP_INPUTS, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: stack along a new dim (up to 8 tensors)"},
    {"cross_entropy", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: class-index targets, weight, ignore_index, reduction, "
     "label_smoothing"},
    {"nll_loss", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: class-index targets, weight, ignore_index, reduction"},
    {"group_norm", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: num_groups, weight, bias, eps"},
    {"index", TC_MAX_OP_INPUTS, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: advanced indexing by int64 / int32 index tensors (aten.index; "
     "ints and slices in the same index are applied first, as views)"},
};

const int tc_nops = (int)(sizeof(tc_ops) / sizeof(tc_ops[0]));

int
tc_op_lookup(const char *name)
{
    for (int i = 0; i < tc_nops; i++) {
        if (!strcmp(tc_ops[i].name, name)) {
            return i;
        }
    }
    return -1;
}

/* ---- dtype inference ------------------------------------------------- */

static int
fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static tc_dtype
rule_compute_dtype(const tc_graph *g, const tc_op_def *def, const int *in,
                   tc_dtype attr)
{
    tc_dtype r;
    switch (def->promote) {
    case TC_PROMOTE_LOGICAL:
        return TC_BOOL;
    case TC_PROMOTE_WHERE:
        return tc_promote_nodes(g, def->nin - 1, in + 1);
    case TC_PROMOTE_CAST:
        (void)attr;
        return g->nodes[in[0]].dtype;
    case TC_PROMOTE_INT_TO_FLOAT:
        r = tc_promote_nodes(g, def->nin, in);
        return tc_dtype_is_float(r) ? r : TC_F32;
    case TC_PROMOTE_POW_INT:
        r = tc_promote_nodes(g, def->nin, in);
        return r == TC_BOOL ? TC_I64 : r;
    case TC_PROMOTE_FIRST:
        return g->nodes[in[0]].dtype;
    default:
        return tc_promote_nodes(g, def->nin, in);
    }
}

static tc_dtype
rule_out_dtype(const tc_op_def *def, tc_dtype compute, tc_dtype attr)
{
    switch (def->promote) {
    case TC_PROMOTE_BOOL_OUT:
    case TC_PROMOTE_LOGICAL:
        return TC_BOOL;
    case TC_PROMOTE_CAST:
        return attr;
    default:
        return compute;
    }
}

/* Integer pow lowers to repeated multiplication: needs a constant
 * non-negative exponent. */
static int
check_pow(const tc_graph *g, const int *in, tc_dtype c, char *err,
          size_t errlen)
{
    const tc_node *base = &g->nodes[in[0]], *e = &g->nodes[in[1]];
    int e_const_int = e->kind == TC_NODE_SCALAR && !tc_dtype_is_float(e->dtype);
    if (e_const_int && e->scalar.i < 0 && !tc_dtype_is_float(base->dtype)) {
        return fail(err, errlen,
                    "Integers to negative integer powers are not allowed.");
    }
    if (tc_dtype_is_float(c)) {
        return 0;
    }
    if (!e_const_int || base->kind == TC_NODE_SCALAR || e->scalar.i > 64) {
        return fail(err, errlen,
                    "pow on integer tensors is only supported with a "
                    "constant exponent in 0..64 (tcjit)");
    }
    return 0;
}

static int
check_sub(const tc_graph *g, const int *in, char *err, size_t errlen)
{
    int b0 = g->nodes[in[0]].dtype == TC_BOOL;
    int b1 = g->nodes[in[1]].dtype == TC_BOOL;
    if (b0 && b1) {
        return fail(err, errlen,
                    "Subtraction, the `-` operator, with two bool tensors is "
                    "not supported. Use the `^` or `logical_xor()` operator "
                    "instead.");
    }
    if (b0 || b1) {
        return fail(err, errlen,
                    "Subtraction, the `-` operator, with a bool tensor is not "
                    "supported. If you are trying to invert a mask, use the "
                    "`~` or `logical_not()` operator instead.");
    }
    return 0;
}

/* Eager converts the value to x's dtype (value.to<scalar_t>()); tcjit
 * only does that where no rounding or range check is involved. */
static int
check_masked_fill(const tc_graph *g, const int *in, tc_dtype c, char *err,
                  size_t errlen)
{
    const tc_node *mask = &g->nodes[in[1]], *v = &g->nodes[in[2]];
    if (mask->dtype != TC_BOOL) {
        return fail(err, errlen, "masked_fill_ only supports boolean masks, "
                    "but got mask with dtype %s", tc_dtype_name(mask->dtype));
    }
    if (v->layout.ndim != 0) {
        return fail(err, errlen, "masked_fill_ only supports a 0-dimensional "
                    "value tensor, but got tensor with %d dimension(s).",
                    v->layout.ndim);
    }
    if (!tc_dtype_is_float(c) && tc_dtype_is_float(v->dtype)) {
        return fail(err, errlen, "masked_fill of an integer tensor with a "
                    "float value (tcjit)");
    }
    return 0;
}

/* Errors torch raises with op-specific wording. */
static int
check_special(const tc_graph *g, const tc_op_def *def, const int *in,
              tc_dtype c, char *err, size_t errlen)
{
    const char *name = def->name;
    if (!strcmp(name, "sub")) {
        return check_sub(g, in, err, errlen);
    }
    if (!strcmp(name, "neg") && c == TC_BOOL) {
        return fail(err, errlen,
                    "Negation, the `-` operator, on a bool tensor is not "
                    "supported. If you are trying to invert a mask, use the "
                    "`~` or `logical_not()` operator instead.");
    }
    if (!strcmp(name, "relu") && c == TC_BOOL) {
        return fail(err, errlen, "Boolean inputs not supported for relu");
    }
    if (!strcmp(name, "pow")) {
        /* bool ** Python bool is special-cased by torch (fill / copy) */
        if (c == TC_BOOL && g->nodes[in[1]].kind != TC_NODE_SCALAR) {
            return fail(err, errlen, "\"pow\" not implemented for 'Bool'");
        }
        return c == TC_BOOL ? 0 : check_pow(g, in, c, err, errlen);
    }
    if (!strncmp(name, "clamp", 5) && c == TC_BOOL &&
        g->nodes[in[1]].kind == TC_NODE_SCALAR) {
        return fail(err, errlen, "\"%s_scalar_cpu\" not implemented for "
                    "'Bool'", name);
    }
    if (!strcmp(name, "masked_fill")) {
        return check_masked_fill(g, in, c, err, errlen);
    }
    if (def->promote == TC_PROMOTE_WHERE && g->nodes[in[0]].dtype != TC_BOOL) {
        return fail(err, errlen,
                    "where expected condition to be a boolean tensor, but "
                    "got a tensor with dtype %s",
                    tc_dtype_scalar_type_name(g->nodes[in[0]].dtype));
    }
    return 0;
}

int
tc_op_infer_dtypes(const tc_graph *g, int op, const int *in,
                   tc_dtype attr_dtype, tc_dtype *compute, tc_dtype *out,
                   char *err, size_t errlen)
{
    const tc_op_def *def = &tc_ops[op];
    tc_dtype c = rule_compute_dtype(g, def, in, attr_dtype);
    if (check_special(g, def, in, c, err, errlen) < 0) {
        return -1;
    }
    if (!(def->dtype_mask & (1u << c))) {
        return fail(err, errlen, "\"%s_cpu\" not implemented for '%s'",
                    def->name, tc_dtype_scalar_type_name(c));
    }
    *compute = c;
    *out = rule_out_dtype(def, c, attr_dtype);
    return 0;
}

tc_dtype
tc_op_operand_dtype(int op, int k, tc_dtype compute, tc_dtype operand_dtype)
{
    switch (tc_ops[op].promote) {
    case TC_PROMOTE_WHERE:
        return k == 0 ? TC_BOOL : compute;
    case TC_PROMOTE_FIRST:
        return !strcmp(tc_ops[op].name, "masked_fill") && k == 1 ? TC_BOOL
                                                                 : compute;
    case TC_PROMOTE_LOGICAL:
        return TC_BOOL;
    case TC_PROMOTE_CAST:
        return operand_dtype;
    default:
        return compute;
    }
}
