/* ops.c - the op registry: names, dtype rules and KIR lowerings.
 *
 * Semantics follow eager PyTorch (CPU kernels): dtype promotion as
 * at::native::result_type, NaN propagation of maximum/minimum/clamp, the
 * same special cases as torch's pow kernel (x**2 = x*x, x**0.5 = sqrt).
 */
#include "ops.h"
#include "extern.h"

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

/* sin(pi x) / (pi x), 1 at 0: ATen's sinc kernel, pi x rounded in the
 * compute dtype first */
LOWER(lower_sinc)
{
    (void)out;
    int px = bin(kb, KOP_MUL, c, kb_const_f(kb, c, M_PI), a[0]);
    int zero = bin(kb, KOP_EQ, TC_BOOL, a[0], kb_const_i(kb, c, 0));
    return kb_emit(kb, KOP_WHERE, c, zero, kb_const_i(kb, c, 1),
                   bin(kb, KOP_DIV, c, un(kb, KOP_SIN, c, px), px));
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
/* amax / amin: eager's amax spreads the gradient evenly over ties; the
 * values of torch.max / min(x, dim) (n.first) send it to the first
 * extreme, the index eager returns (a NaN counts as the extreme: its
 * first one, as torch.argmax picks), and the other elements get exactly 0
 * (eager scatters into zeros: an inf gradient is no NaN there) */
#define AMAX_HIT "((x0 == keep(y, n)) | (torch.isnan(x0) & " \
                 "torch.isnan(keep(y, n))))"
#define AMAX_GRAD                                                            \
    "torch.where(" AMAX_HIT " & (" AMAX_HIT ".cumsum(n.dims[0]) == 1), "     \
    "keep(g, n), 0.0) if n.first else keep(g, n) * (x0 == keep(y, n)) / "    \
    "(x0 == keep(y, n)).sum(n.dims, keepdim=True)"
#define VW TC_OPK_VIEW
#define RD TC_OPK_REDUCTION
#define EX TC_OPK_EXTERN

/* Python spellings (ops.h tc_op_spelling) */
#define CALL(kind, names, sig) {TC_CALL_##kind, names, sig, NULL}
#define NEW_KW "dtype=None, layout=None, device=None, pin_memory=False, " \
               "requires_grad=False"
#define LIKE_KW NEW_KW ", memory_format=None"
#define CONV_SIG "input, weight, bias=None, stride=1, padding=0, " \
                 "dilation=1, groups=1"

const tc_op_def tc_ops[] = {
    {"add", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_add, "a + b",
     .eager = "x0 + x1",
     .py = {CALL(ADD_SUB, "torch.add Tensor.add",
                 "input, other, *, alpha=1")},
     .grad = "g; g"
     },
    {"sub", 2, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_sub, "a - b",
     .eager = "x0 - x1",
     .py = {CALL(ADD_SUB, "torch.sub torch.subtract Tensor.sub",
                 "input, other, *, alpha=1")},
     .grad = "g; -g"
     },
    {"mul", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_mul, "a * b",
     .eager = "x0 * x1",
     .py = {CALL(OP, "torch.mul torch.multiply Tensor.mul", "input, other")},
     .grad = "g * x1; g * x0"
     },
    {"div", 2, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_div,
     "true division a / b",
     .grad = "g / x1; -g * x0 / (x1 * x1)",
     .eager = "x0 / x1",
     .py = {CALL(DIV, "torch.div torch.divide Tensor.div",
                 "input, other, *, rounding_mode=None"),
            CALL(OP, "torch.true_divide", "input, other")}},
    {"neg", 1, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_neg, "-x",
     .eager = "-x0",
     .py = {CALL(OP, "torch.neg torch.negative Tensor.neg", "input")},
     .grad = "-g"
     },
    {"abs", 1, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_abs, "|x|",
     .py = {CALL(OP, "torch.abs torch.absolute Tensor.abs builtins.abs",
                 "input")},
     .grad = "g * torch.sgn(x0)"
     },
    {"exp", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_exp, "e**x",
     .py = {CALL(OP, "torch.exp Tensor.exp", "input")},
     .grad = "g * y"
     },
    {"log", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_log,
     "natural logarithm",
     .py = {CALL(OP, "torch.log Tensor.log", "input")},
     .grad = "g / x0"
     },
    {"sqrt", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_sqrt,
     "square root",
     .py = {CALL(OP, "torch.sqrt Tensor.sqrt", "input")},
     .grad = "g / (2 * y)"
     },
    /* std = sqrt0(var), the 2-norm = sqrt0(sum of squares): eager's
     * std_backward and norm_backward give 0 where the result is 0 (a
     * constant row), where sqrt's g / (2 * y) times the inner
     * derivative 0 would be NaN */
    {"sqrt0", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_sqrt,
     "square root inside std and the 2-norm (gradient 0 where the result "
     "is 0)",
     .eager = "torch.sqrt(x0)",
     .grad = "torch.where(y == 0, 0.0, g / (2 * y))"
     },
    {"rsqrt", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_rsqrt,
     "1 / sqrt(x)",
     .py = {CALL(OP, "torch.rsqrt Tensor.rsqrt", "input")},
     .grad = "-0.5 * g * y * y * y"
     },
    {"sin", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_sin, "sine",
     .py = {CALL(OP, "torch.sin Tensor.sin", "input")},
     .grad = "g * torch.cos(x0)"
     },
    {"cos", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_cos, "cosine",
     .py = {CALL(OP, "torch.cos Tensor.cos", "input")},
     .grad = "-g * torch.sin(x0)"
     },
    {"tanh", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_tanh,
     "hyperbolic tangent",
     .py = {CALL(OP, "torch.tanh Tensor.tanh F.tanh", "input")},
     .nn = {"Tanh", "torch.tanh", ""},
     .grad = "g * (1 - y * y)"
     },
    {"sigmoid", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_sigmoid,
     "1 / (1 + exp(-x))",
     .py = {CALL(OP, "torch.sigmoid Tensor.sigmoid F.sigmoid", "input")},
     .nn = {"Sigmoid", "torch.sigmoid", ""},
     .grad = "g * y * (1 - y)"
     },
    {"silu", 1, PW, TC_PROMOTE_DEFAULT, MASK_FLOAT, lower_silu,
     "x * sigmoid(x)",
     .grad = "g * torch.sigmoid(x0) * (1 + x0 * (1 - torch.sigmoid(x0)))",
     .eager = "F.silu(x0)",
     .py = {CALL(NO_INPLACE, "F.silu", "input, inplace=False")},
     .nn = {"SiLU", "F.silu", "inplace"}},
    {"gelu_tanh", 1, PW, TC_PROMOTE_DEFAULT, MASK_FLOAT, lower_gelu_tanh,
     "gelu(x, approximate='tanh')",
     .eager = "F.gelu(x0, approximate=\"tanh\")",
     .grad = "g * (0.5 * (1 + torch.tanh(0.7978845608028654 * (x0 + "
             "0.044715 * x0 * x0 * x0))) + 0.5 * x0 * (1 - "
             "torch.tanh(0.7978845608028654 * (x0 + 0.044715 * x0 * x0 * "
             "x0)) ** 2) * 0.7978845608028654 * (1 + 0.134145 * x0 * x0))"
     },
    {"gelu", 1, PW, TC_PROMOTE_DEFAULT, MASK_FLOAT, lower_gelu,
     "0.5 x (1 + erf(x / sqrt(2))): gelu(x, approximate='none')",
     .eager = "F.gelu(x0)",
     .py = {CALL(GELU, "F.gelu", "input, *, approximate=None")},
     .grad = "g * (0.5 * (1 + torch.erf(x0 * 0.7071067811865476)) + x0 * "
             "0.3989422804014327 * torch.exp(-0.5 * x0 * x0))"
     },
    {"erf", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_erf,
     "error function (polynomial + exp, tcjit's own fit)",
     .py = {CALL(OP, "torch.erf torch.special.erf Tensor.erf", "input")},
     .grad = "g * 1.1283791670955126 * torch.exp(-x0 * x0)"
     },
    {"sinc", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT, lower_sinc,
     "sin(pi x) / (pi x), 1 at x = 0",
     .py = {CALL(OP, "torch.sinc torch.special.sinc Tensor.sinc", "input")},
     .grad = "g * torch.where(x0 == 0, 0.0, (torch.cos(math.pi * x0) * "
             "math.pi * x0 - torch.sin(math.pi * x0)) / (math.pi * x0 * x0))"
     },
    {"softplus", 3, PW, TC_PROMOTE_FIRST, MASK_FLOAT, lower_softplus,
     "softplus(x, beta, threshold): x where x*beta > threshold, else "
     "log1p(exp(x*beta)) / beta",
     .grad = "g * torch.where(x0 * x1 > x2, 1.0, torch.sigmoid(x0 * x1)); ; ",
     .eager = "F.softplus(x0, x1, x2)",
     .py = {CALL(OP, "F.softplus", "input, beta=1, threshold=20")},
     .scalars = TC_SCALARS_TO_OPMATH},
    {"leaky_relu", 2, PW, TC_PROMOTE_FIRST, MASK_FLOAT, lower_leaky_relu,
     "x > 0 ? x : x * negative_slope",
     .grad = "g * torch.where(x0 > 0, 1.0, x1); ",
     .eager = "F.leaky_relu(x0, x1)",
     .py = {CALL(NO_INPLACE, "F.leaky_relu",
                 "input, negative_slope=0.01, inplace=False")},
     .scalars = TC_SCALARS_TO_OPMATH},
    {"elu", 2, PW, TC_PROMOTE_FIRST, MASK_FLOAT, lower_elu,
     "x > 0 ? x : alpha * expm1(x)",
     .grad = "g * torch.where(x0 > 0, 1.0, x1 * torch.exp(x0)); ",
     .eager = "F.elu(x0, x1)",
     .py = {CALL(NO_INPLACE, "F.elu", "input, alpha=1.0, inplace=False")},
     .scalars = TC_SCALARS_TO_OPMATH},
    {"mish", 1, PW, TC_PROMOTE_DEFAULT, MASK_FLOAT, lower_mish,
     "x * tanh(softplus(x))",
     .grad = "g * (torch.tanh(F.softplus(x0)) + x0 * torch.sigmoid(x0) * (1 "
             "- torch.tanh(F.softplus(x0)) ** 2))",
     .eager = "F.mish(x0)",
     .py = {CALL(NO_INPLACE, "F.mish", "input, inplace=False")}},
    {"masked_fill", 3, PW, TC_PROMOTE_FIRST, MASK_ALL, lower_masked_fill,
     "mask ? value : x (contiguous result, x's dtype)",
     .py = {CALL(OP, "torch.masked_fill Tensor.masked_fill",
                 "input, mask, value")},
     .scalars = TC_SCALARS_TO_OUT,
     .grad = "torch.where(x1, 0.0, g); ; torch.where(x1, g, 0.0)"
     },
    {"full", 1, PW, TC_PROMOTE_CAST, MASK_ALL, lower_to,
     "a new tensor filled with a number (zeros, ones, full, empty, *_like)",
     .eager = "torch.empty_strided(n.shape, n.stride, dtype=n.dtype, "
              "device=n.device).fill_(x0)",
     .py = {CALL(NEW, "torch.full", "size, fill_value, *, " NEW_KW),
            CALL(NEW, "torch.full_like", "input, fill_value, *, " LIKE_KW),
            CALL(NEW, "Tensor.new_full",
                 "input, size, fill_value, *, " NEW_KW)},
     .scalars = TC_SCALARS_TO_OUT,
     .grad = ""
     },
    {"arange", 2, PW, TC_PROMOTE_CAST, MASK_ALL & ~M(TC_BOOL), lower_arange,
     "start + step * i over a new tensor (arange; positions for tril/triu)",
     1,
     .grad = "; ",
     .eager = "torch.empty_strided(n.shape, n.stride, dtype=n.dtype, "
                 "device=n.device).copy_((x0 + x1 * torch.arange("
                 "n.shape.numel(), device=n.device, dtype=torch.float64 "
                 "if n.dtype.is_floating_point else torch.int64))"
                 ".view(n.shape))",
     .py = {CALL(NEW, "torch.arange",
                 "start=0, end=None, step=1, *, " NEW_KW)}},
    {"relu", 1, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_relu,
     "max(x, 0), NaN propagating",
     .py = {CALL(OP, "torch.relu Tensor.relu", "input"),
            CALL(NO_INPLACE, "F.relu", "input, inplace=False")},
     .nn = {"ReLU", "F.relu", "inplace"},
     .grad = "torch.where(y <= 0, 0.0, g)"  /* NaN passes g, as eager */
     },
    {"pow", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_pow,
     "a ** b (integer: constant exponent 0..64 only)",
     .grad = "(torch.where(x1 == 0, 0.0, g * x1 * x0 ** (x1 - 1)) if "
             "isinstance(x1, torch.Tensor) else g * 0.0 if x1 == 0 else g * "
             "x1 * x0 ** (x1 - 1)); torch.where((x0 == 0) & (x1 >= 0), 0.0, "
             "g * y * (torch.log(x0.to(y.dtype)) if isinstance(x0, "
             "torch.Tensor) else math.log(x0)))",
     .eager = "x0 ** x1",
     .py = {CALL(OP, "torch.pow Tensor.pow", "input, exponent")}},
    {"maximum", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_maximum,
     "elementwise max, NaN propagating",
     .py = {CALL(OP, "torch.maximum Tensor.maximum",
                 "input: Tensor, other: Tensor")},
     .grad = "torch.where(x0 == x1, g / 2, torch.where(x0 < x1, 0.0, g)); "
             "torch.where(x0 == x1, g / 2, torch.where(x0 > x1, 0.0, g))"
     },
    {"minimum", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_minimum,
     "elementwise min, NaN propagating",
     .py = {CALL(OP, "torch.minimum Tensor.minimum",
                 "input: Tensor, other: Tensor")},
     .grad = "torch.where(x0 == x1, g / 2, torch.where(x0 > x1, 0.0, g)); "
             "torch.where(x0 == x1, g / 2, torch.where(x0 < x1, 0.0, g))"
     },
    {"clamp", 3, PW, TC_PROMOTE_DEFAULT, MASK_NOBOOL, lower_clamp,
     "min(max(x, lo), hi), NaN propagating",
     .py = {CALL(CLAMP, "torch.clamp torch.clip Tensor.clamp Tensor.clip",
                 "input, min=None, max=None"),
            CALL(HARDTANH, "F.hardtanh",
                 "input, min_val=-1.0, max_val=1.0, inplace=False"),
            CALL(HARDTANH, "F.relu6", "input, inplace=False")},
     .scalars = TC_SCALARS_TO_OUT,
     .grad = "torch.where((x0 >= x1) & (x0 <= x2), g, 0.0)"
     },
    {"clamp_min", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_maximum,
     "max(x, lo), NaN propagating",
     .py = {CALL(OP, "torch.clamp_min Tensor.clamp_min", "input, min")},
     .scalars = TC_SCALARS_TO_OUT,
     .grad = "torch.where(x0 >= x1, g, 0.0); torch.where(x0 < x1, g, 0.0)"
     },
    {"clamp_max", 2, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_minimum,
     "min(x, hi), NaN propagating",
     .py = {CALL(OP, "torch.clamp_max Tensor.clamp_max", "input, max")},
     .scalars = TC_SCALARS_TO_OUT,
     .grad = "torch.where(x0 <= x1, g, 0.0); torch.where(x0 > x1, g, 0.0)"
     },
    {"where", 3, PW, TC_PROMOTE_WHERE, MASK_ALL, lower_where,
     "cond ? a : b",
     .py = {CALL(OP, "torch.where", "condition, input, other"),
            CALL(WHERE_METHOD, "Tensor.where", "input, condition, other")},
     .grad = "; torch.where(x0, g, 0.0); torch.where(x0, 0.0, g)"
     },
    {"lt", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_lt, "a < b",
     .eager = "x0 < x1",
     .py = {CALL(OP, "torch.lt torch.less Tensor.lt", "input, other")}},
    {"le", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_le, "a <= b",
     .eager = "x0 <= x1",
     .py = {CALL(OP, "torch.le torch.less_equal Tensor.le", "input, other")}},
    {"gt", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_gt, "a > b",
     .eager = "x0 > x1",
     .py = {CALL(OP, "torch.gt torch.greater Tensor.gt", "input, other")}},
    {"ge", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_ge, "a >= b",
     .eager = "x0 >= x1",
     .py = {CALL(OP, "torch.ge torch.greater_equal Tensor.ge",
                 "input, other")}},
    {"eq", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_eq, "a == b",
     .eager = "x0 == x1",
     .py = {CALL(OP, "torch.eq Tensor.eq", "input, other")}},
    {"ne", 2, PW, TC_PROMOTE_BOOL_OUT, MASK_ALL, lower_ne, "a != b",
     .eager = "x0 != x1",
     .py = {CALL(OP, "torch.ne torch.not_equal Tensor.ne", "input, other")}},
    {"logical_and", 2, PW, TC_PROMOTE_LOGICAL, MASK_ALL, lower_and,
     "bool(a) and bool(b)",
     .py = {CALL(OP, "torch.logical_and Tensor.logical_and",
                 "input: Tensor, other: Tensor")}},
    {"logical_or", 2, PW, TC_PROMOTE_LOGICAL, MASK_ALL, lower_or,
     "bool(a) or bool(b)",
     .py = {CALL(OP, "torch.logical_or Tensor.logical_or",
                 "input: Tensor, other: Tensor")}},
    {"logical_xor", 2, PW, TC_PROMOTE_LOGICAL, MASK_ALL, lower_xor,
     "bool(a) != bool(b)",
     .py = {CALL(OP, "torch.logical_xor Tensor.logical_xor",
                 "input: Tensor, other: Tensor")}},
    {"logical_not", 1, PW, TC_PROMOTE_LOGICAL, MASK_ALL, lower_not,
     "not bool(x)",
     .py = {CALL(OP, "torch.logical_not Tensor.logical_not", "input")}},
    {"bitwise_and", 2, PW, TC_PROMOTE_DEFAULT, MASK_INTBOOL, lower_and,
     "a & b (integers and bool)", .eager = "x0 & x1",
     .py = {CALL(OP, "torch.bitwise_and Tensor.bitwise_and", "input, other")}},
    {"bitwise_or", 2, PW, TC_PROMOTE_DEFAULT, MASK_INTBOOL, lower_or,
     "a | b (integers and bool)", .eager = "x0 | x1",
     .py = {CALL(OP, "torch.bitwise_or Tensor.bitwise_or", "input, other")}},
    {"bitwise_xor", 2, PW, TC_PROMOTE_DEFAULT, MASK_INTBOOL, lower_xor,
     "a ^ b (integers and bool)", .eager = "x0 ^ x1",
     .py = {CALL(OP, "torch.bitwise_xor Tensor.bitwise_xor", "input, other")}},
    {"bitwise_not", 1, PW, TC_PROMOTE_DEFAULT, MASK_INTBOOL, lower_not,
     "~x (integers and bool)", .eager = "~x0",
     .py = {CALL(OP, "torch.bitwise_not Tensor.bitwise_not", "input")}},
    {"to", 1, PW, TC_PROMOTE_CAST, MASK_ALL, lower_to,
     "cast to a dtype (bool: x != 0)",
     .eager = "x0.to(n.to_dtype, copy=True)",
     .py = {CALL(CAST, "Tensor.to Tensor.type", "input, dtype"),
            {TC_CALL_CAST_TO, "Tensor.float Tensor.double Tensor.int "
             "Tensor.long Tensor.bool Tensor.short Tensor.char Tensor.byte "
             "Tensor.half Tensor.bfloat16", "input",
             "float32 float64 int32 int64 bool int16 int8 uint8 float16 "
             "bfloat16"}},
     .grad = "g"
     },
    {"square", 1, PW, TC_PROMOTE_POW_INT, MASK_NOBOOL, lower_square,
     "x * x (bool -> int64, as pow(x, 2))",
     .py = {CALL(OP, "torch.square Tensor.square", "input")},
     .grad = "g * 2 * x0"
     },
    {"reciprocal", 1, PW, TC_PROMOTE_INT_TO_FLOAT, MASK_FLOAT,
     lower_reciprocal, "1 / x",
     .py = {CALL(OP, "torch.reciprocal Tensor.reciprocal", "input")},
     .grad = "-g * y * y"
     },
    {"contiguous", 1, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_copy,
     "copy into a contiguous tensor (reshape of a non-viewable input)",
     .eager = "x0.clone(memory_format=torch.contiguous_format)",
     .py = {CALL(VIEW, "Tensor.contiguous", "input")},
     .grad = "g"
     },
    {"clone", 1, PW, TC_PROMOTE_DEFAULT, MASK_ALL, lower_copy,
     "copy with the node's layout (a graph output that eager returns as a "
     "tensor of its own)",
     .grad = "g"
     },
    /* views: layout-only nodes (graph.h), read through index arithmetic */
    {"permute", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: permute / transpose / t",
     .py = {CALL(VIEW, "Tensor.permute", "input, *dims"),
            CALL(VIEW, "torch.permute", "input, dims")}},
    {"unsqueeze", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: insert a size-1 dim",
     .py = {CALL(VIEW, "Tensor.unsqueeze torch.unsqueeze", "input, dim")}},
    {"squeeze", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: drop size-1 dims",
     .py = {CALL(VIEW, "Tensor.squeeze torch.squeeze", "input, dim=None")}},
    {"expand", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: broadcast size-1 dims (stride 0)",
     .py = {CALL(VIEW, "Tensor.expand", "input, *dims")}},
    {"select", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: x[..., i, ...]",
     .py = {CALL(VIEW, "Tensor.select torch.select", "input, dim, index")}},
    {"slice", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: x[..., a:b:s, ...] / narrow"},
    {"view", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: view / reshape / flatten / unflatten without a copy",
     .py = {CALL(VIEW, "Tensor.view", "input, *dims")}},
    {"as_strided", 1, VW, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "view: the alias a generic extern op returns (Tensor.diagonal, "
     "unfold, ...), as its meta run lays it out"},
    /* primitive reductions: one accumulator each (kir.h KOP_ACC) */
    {"sum", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "sum over dims (ints and bool -> int64)",
     .eager = "torch.sum(x0, n.dims, n.keepdim, dtype=n.dtype)",
     .py = {CALL(REDUCE, "torch.sum Tensor.sum",
                 "input, dim=None, keepdim: bool=False, *, dtype=None")},
     .grad = "keep(g, n).expand(x0.shape)"
     },
    {"prod", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "product over dims (ints and bool -> int64)",
     .eager = "torch.prod(x0, n.dims[0], n.keepdim, dtype=n.dtype) "
              "if len(n.dims) == 1 else torch.prod(x0, dtype=n.dtype)",
     /* dim: torch.prod(input, *, dtype) or (input, dim, keepdim, *, dtype):
      * no dim=None */
     .py = {CALL(REDUCE, "torch.prod Tensor.prod",
                 "input, dim: int=None, keepdim: bool=False, *, dtype=None")}},
    {"amax", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "max over dims, NaN propagating",
     .py = {CALL(REDUCE, "torch.amax Tensor.amax",
                 "input, dim=None, keepdim: bool=False")},
     .grad = AMAX_GRAD
     },
    {"amin", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "min over dims, NaN propagating",
     .py = {CALL(REDUCE, "torch.amin Tensor.amin",
                 "input, dim=None, keepdim: bool=False")},
     .grad = AMAX_GRAD
     },
    {"argmax", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "index of the first max (first NaN) -> int64",
     /* over bool only as max(dim) / min(dim)'s indices: eager's argmax
      * rejects bool, uint8 orders the same */
     .eager = "torch.argmax(x0.to(torch.uint8) if x0.dtype == torch.bool "
              "else x0, n.dims[0] if len(n.dims) == 1 else None, n.keepdim)",
     .py = {CALL(REDUCE, "torch.argmax Tensor.argmax",
                 "input, dim=None, keepdim: bool=False")}},
    {"argmin", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "index of the first min (first NaN) -> int64",
     /* over bool only as max(dim) / min(dim)'s indices: eager's argmin
      * rejects bool, uint8 orders the same */
     .eager = "torch.argmin(x0.to(torch.uint8) if x0.dtype == torch.bool "
              "else x0, n.dims[0] if len(n.dims) == 1 else None, n.keepdim)",
     .py = {CALL(REDUCE, "torch.argmin Tensor.argmin",
                 "input, dim=None, keepdim: bool=False")}},
    {"any", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "logical or over dims (bool; uint8 stays uint8)",
     .py = {CALL(REDUCE, "torch.any Tensor.any",
                 "input, dim=None, keepdim: bool=False")}},
    {"all", 1, RD, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "logical and over dims (bool; uint8 stays uint8)",
     .py = {CALL(REDUCE, "torch.all Tensor.all",
                 "input, dim=None, keepdim: bool=False")}},
    /* extern ops: torch computes them, kernels fuse around (extern.h) */
    {"mm", 2, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: [n, k] @ [k, m]",
     .py = {CALL(EXTERN, "torch.mm Tensor.mm", "input, mat2")},
     .xspec = {2, tc_xshape_mm, 0, "torch.mm"},
     .grad = "torch.mm(g, x1.t()); torch.mm(x0.t(), g)"
     },
    {"bmm", 2, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: batched [b, n, k] @ [b, k, m]",
     .py = {CALL(EXTERN, "torch.bmm Tensor.bmm", "input, mat2")},
     .xspec = {2, tc_xshape_bmm, 0, "torch.bmm"},
     .grad = "torch.bmm(g, x1.transpose(1, 2)); torch.bmm(x0.transpose(1, "
             "2), g)"
     },
    {"matmul", 2, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: torch.matmul (1-d operands, broadcast batch dims)",
     .py = {CALL(EXTERN, "torch.matmul Tensor.matmul", "input, other")},
     .xspec = {2, tc_xshape_matmul, 0, "torch.matmul"},
     .grad = "torch.matmul(g, x1.transpose(-1, -2)) if x0.dim() > 1 "
             "and x1.dim() > 1 else vjp; torch.matmul(x0.transpose(-1, "
             "-2), g) if x0.dim() > 1 and x1.dim() > 1 else vjp"
     },
    {"addmm", 3, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: bias + a @ b (beta = alpha = 1)",
     .py = {CALL(EXTERN, "torch.addmm",
                 "input, mat1, mat2, *, beta=1, alpha=1")},
     .xspec = {3, tc_xshape_add_product, 0, "torch.addmm"},
     .grad = "g; torch.mm(g, x2.t()); torch.mm(x1.t(), g)"
     },
    {"baddbmm", 3, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: bias + bmm(a, b) (beta = alpha = 1)",
     .py = {CALL(EXTERN, "torch.baddbmm",
                 "input, batch1, batch2, *, beta=1, alpha=1")},
     .xspec = {3, tc_xshape_add_product, 1, "torch.baddbmm"},
     .grad = "g; torch.bmm(g, x2.transpose(1, 2)); "
             "torch.bmm(x1.transpose(1, 2), g)"
     },
    {"linear", 3, EX, TC_PROMOTE_DEFAULT, MASK_NOBOOL, NULL,
     "extern: x @ w.T (+ b); a bias followed by pointwise ops is fused "
     "into their kernel instead",
     .py = {CALL(EXTERN, "F.linear", "input, weight, bias=None")},
     .nn = {"Linear", "F.linear", "weight bias"},
     .xspec = {2, tc_xshape_linear, 0, "torch._C._nn.linear"},
     .grad = "torch.matmul(g, x1); torch.mm(g.reshape(-1, g.shape[-1]).t(), "
             "x0.reshape(-1, x0.shape[-1])) if x0.dim() > 1 else "
             "torch.outer(g, x0); g"
     },
    {"sdpa", 4, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: scaled_dot_product_attention (attn_mask, is_causal, scale; "
     "dropout_p = 0)",
     .py = {CALL(SDPA, "F.scaled_dot_product_attention",
                 "query, key, value, attn_mask=None, dropout_p=0.0, "
                 "is_causal=False, scale=None, enable_gqa=False")},
     .xspec = {3, tc_xshape_sdpa, 0, "F.scaled_dot_product_attention"},
     .grad = "vjp"
     },
    {"embedding", 2, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: rows of weight picked by int indices",
     .py = {CALL(EMBEDDING, "F.embedding",
                 "input, weight, padding_idx=None, max_norm=None, "
                 "norm_type=2.0, scale_grad_by_freq=False, sparse=False")},
     .nn = {"Embedding", "F.embedding", "weight padding_idx max_norm"},
     .xspec = {2, tc_xshape_embedding, 0, "torch.embedding"},
     .checks_values = 1,
     .grad = "; torch.ops.aten.embedding_dense_backward(g, x0, "
             "x1.shape[0], n.xattr[0], bool(n.xattr[1]))"
     },
    {"conv1d", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: 1-d convolution (int stride/padding/dilation, groups)",
     .py = {CALL(CONV, "F.conv1d torch.conv1d", CONV_SIG)},
     .nn = {"Conv1d", "F.conv1d",
            "weight bias stride padding dilation groups"},
     .xspec = {2, tc_xshape_conv, 1, "torch.conv1d"},
     .grad = "vjp"
     },
    {"conv2d", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: 2-d convolution (int stride/padding/dilation, groups)",
     .py = {CALL(CONV, "F.conv2d torch.conv2d", CONV_SIG)},
     .nn = {"Conv2d", "F.conv2d",
            "weight bias stride padding dilation groups"},
     .xspec = {2, tc_xshape_conv, 2, "torch.conv2d"},
     .grad = "vjp"
     },
    {"cat", TC_MAX_OP_INPUTS, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: concatenate along dim (up to 8 tensors)",
     .py = {CALL(CAT, "torch.cat torch.concat torch.concatenate",
                 "tensors, dim=0")},
     .xspec = {1, tc_xshape_cat, 0, "torch.cat"},
     .grad = "vjp"
     },
    {"stack", TC_MAX_OP_INPUTS, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: stack along a new dim (up to 8 tensors)",
     .py = {CALL(CAT, "torch.stack", "tensors, dim=0")},
     .xspec = {1, tc_xshape_cat, 1, "torch.stack"},
     .grad = "vjp"
     },
    {"cross_entropy", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: class-index targets, weight, ignore_index, reduction, "
     "label_smoothing",
     .py = {CALL(LOSS, "F.cross_entropy",
                 "input, target, weight=None, size_average=None, "
                 "ignore_index=-100, reduce=None, reduction=None, "
                 "label_smoothing=0.0")},
     .xspec = {2, tc_xshape_loss, 0, "F.cross_entropy"},
     .checks_values = 1,
     .grad = "(torch.softmax(x0, 1) - (torch.arange(x0.shape[1], "
             "device=x0.device) == x1.unsqueeze(1)).to(x0.dtype)) * (x1 != "
             "n.xattr[1]).unsqueeze(1) * (g / (x1 != n.xattr[1]).sum() if "
             "n.xattr[0] == 1 else g if n.xattr[0] == 2 else g.unsqueeze(1)) "
             "if x0.dim() == 2 and n.nin == 2 and n.xfattr == 0 else vjp"
     },
    {"nll_loss", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: class-index targets, weight, ignore_index, reduction",
     .py = {CALL(LOSS, "F.nll_loss",
                 "input, target, weight=None, size_average=None, "
                 "ignore_index=-100, reduce=None, reduction=None")},
     .xspec = {2, tc_xshape_loss, 0, "F.nll_loss"},
     .checks_values = 1,
     .grad = "-(torch.arange(x0.shape[1], device=x0.device) == "
             "x1.unsqueeze(1)).to(x0.dtype) * (x1 != n.xattr[1]).unsqueeze(1) "
             "* (g / (x1 != n.xattr[1]).sum() if n.xattr[0] == 1 else g if "
             "n.xattr[0] == 2 else g.unsqueeze(1)) if x0.dim() == 2 and "
             "n.nin == 2 else vjp"
     },
    {"group_norm", 3, EX, TC_PROMOTE_DEFAULT, MASK_FLOAT, NULL,
     "extern: num_groups, weight, bias, eps",
     .py = {CALL(GROUP_NORM, "F.group_norm",
                 "input, num_groups, weight=None, bias=None, eps=0.00001")},
     .nn = {"GroupNorm", "F.group_norm", "num_groups weight bias eps"},
     .xspec = {1, tc_xshape_group_norm, 0, "F.group_norm"},
     .grad = "vjp"
     },
    {"index", TC_MAX_OP_INPUTS, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: advanced indexing by int64 / int32 index tensors (aten.index; "
     "ints and slices in the same index are applied first, as views)",
     .xspec = {2, tc_xshape_index, 0, "Tensor.__getitem__"},
     .checks_values = 1,
     .grad = "vjp"
     },
    /* The default entry: any other torch op.  The tracer calls it with
     * the operands it knows, its result's metadata comes from a meta run
     * (src/runtime/extern_table.h), xattr[TC_XA_GENERIC_CALL] names the
     * call.  Never merged or dropped (extern.h tc_node_has_effects). */
    {"extern", TC_MAX_OP_INPUTS, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: any other torch op (torch.*, Tensor methods, "
     "torch.nn.functional, torch.special / linalg / fft), called by torch "
     "at run time; its result's dtype and layout come from running it once "
     "on meta tensors at trace time",
     .xspec = {0, NULL, 0, NULL},
     .grad = "vjp"
     },
    {"extern_item", 1, EX, TC_PROMOTE_DEFAULT, MASK_ALL, NULL,
     "extern: item xattr[0] of a generic extern's tuple result (torch.sort's "
     "values and indices)",
     .xspec = {1, NULL, 0, NULL}},
    /* Internal (no Python spelling): graph/reinplace.c turns the new
     * value of a written-back input built as cat(its views, w, its views)
     * into this; the result is operand 0 itself. */
    {"write_box", 2, EX, TC_PROMOTE_FIRST, MASK_ALL, NULL,
     "extern: operand 1 copied into a box of operand 0 (xattr[0]: the "
     "box's offset in operand 0's elements, strides operand 0's, sizes "
     "operand 1's), which the call returns: an in-place write of a slice "
     "(graph/reinplace.c)",
     .xspec = {2, NULL, 0, NULL}},
};

const int tc_nops = (int)(sizeof(tc_ops) / sizeof(tc_ops[0]));

/* Names that decompose into the ops above (graph.h builders) or read the
 * traced layout; rows of the registry like the ops themselves. */
#define RED_SIG "input, dim=None, keepdim: bool=False"
#define VAR_SIG \
    "input, dim=None, unbiased: bool=None, keepdim: bool=False, *, " \
    "correction=None"

const tc_decomp_def tc_decomps[] = {
    {"mean", "sum / n",
     {CALL(REDUCE, "torch.mean Tensor.mean",
           RED_SIG ", *, dtype=None")}},
    {"var", "two-pass: mean, sum of squared deviations",
     {CALL(REDUCE, "torch.var Tensor.var", VAR_SIG)}},
    {"std", "sqrt(var)", {CALL(REDUCE, "torch.std Tensor.std", VAR_SIG)}},
    {"logsumexp", "amax, exp, sum, log (inf-safe)",
     {CALL(REDUCE, "torch.logsumexp Tensor.logsumexp",
           "input, dim: ints, keepdim: bool=False")}},
    {"norm", "p=1: sum(abs); p=2: sqrt(sum(x*x))",
     {CALL(REDUCE, "torch.norm Tensor.norm",
           "input, p=2, dim=None, keepdim: bool=False, dtype=None")}},
    {"softmax", "amax, sub, exp, sum, div; one kernel per row",
     {CALL(SOFTMAX, "torch.softmax Tensor.softmax", "input, dim, dtype=None"),
      CALL(SOFTMAX, "F.softmax",
           "input, dim=None, _stacklevel=3, dtype=None")},
     {"Softmax", "F.softmax", "dim"}},
    {"log_softmax", "amax, sub, exp, sum, log, sub; one kernel per row",
     {CALL(SOFTMAX, "torch.log_softmax Tensor.log_softmax",
           "input, dim, dtype=None"),
      CALL(SOFTMAX, "F.log_softmax",
           "input, dim=None, _stacklevel=3, dtype=None")},
     {"LogSoftmax", "F.log_softmax", "dim"}},
    {"layer_norm", "mean, var, rsqrt, weight and bias; one kernel per row",
     {CALL(LAYER_NORM, "F.layer_norm",
           "input, normalized_shape, weight=None, bias=None, eps=0.00001")},
     {"LayerNorm", "F.layer_norm", "normalized_shape weight bias eps"}},
    {"rms_norm", "mean of squares, rsqrt, weight; one kernel per row",
     {CALL(RMS_NORM, "F.rms_norm",
           "input, normalized_shape, weight=None, eps=None")},
     {"RMSNorm", "F.rms_norm", "normalized_shape weight eps"}},
    {"normalize", "norm, clamp_min, div (p = 1 or 2)",
     {CALL(NORMALIZE, "F.normalize",
           "input, p=2.0, dim=1, eps=0.000000000001, out=None")}},
    {"dropout", "the identity with training=False or p=0",
     {CALL(DROPOUT, "F.dropout",
           "input, p=0.5, training=True, inplace=False")},
     {"Dropout", "F.dropout", "p training inplace"}},
    {"transpose", "view",
     {CALL(VIEW, "Tensor.transpose torch.transpose", "input, dim0, dim1")}},
    {"t", "view", {CALL(VIEW, "Tensor.t torch.t", "input")}},
    {"flatten", "view (or a copy, like reshape)",
     {CALL(VIEW, "Tensor.flatten torch.flatten",
           "input, start_dim=0, end_dim=-1")}},
    {"reshape", "view or copy",
     {CALL(VIEW, "Tensor.reshape", "input, *dims"),
      CALL(VIEW, "torch.reshape", "input, shape")}},
    {"split", "narrow views (a tuple)",
     {CALL(SPLIT, "Tensor.split", "input, split_size, dim=0"),
      CALL(SPLIT, "torch.split", "tensor, split_size_or_sections, dim=0")}},
    {"chunk", "narrow views (a tuple)",
     {CALL(SPLIT, "Tensor.chunk torch.chunk", "input, chunks, dim=0")}},
    {"unbind", "select views (a tuple)",
     {CALL(SPLIT, "Tensor.unbind torch.unbind", "input, dim=0")}},
    {"expand_as", "view (expand)",
     {CALL(VIEW, "Tensor.expand_as", "input, other")}},
    {"view_as", "view", {CALL(VIEW, "Tensor.view_as", "input, other")}},
    {"reshape_as", "view or copy",
     {CALL(VIEW, "Tensor.reshape_as", "input, other")}},
    {"narrow", "view (slice)",
     {CALL(VIEW, "Tensor.narrow torch.narrow",
           "input, dim, start, length")}},
    {"unflatten", "view",
     {CALL(VIEW, "Tensor.unflatten torch.unflatten", "input, dim, sizes")}},
    {"is_contiguous", "a Python bool from the traced layout",
     {CALL(VIEW, "Tensor.is_contiguous", "input, memory_format=None")}},
    {"size", "Python ints / a torch.Size from the traced layout",
     {CALL(SIZE, "Tensor.size", "input, dim=None")}},
    {"dim", "a Python int from the traced layout",
     {CALL(DIM, "Tensor.dim Tensor.ndimension", "input")}},
    {"numel", "a Python int from the traced layout",
     {CALL(NUMEL, "Tensor.numel", "input")}},
    {"stride", "Python ints / a tuple from the traced layout (eager's)",
     {CALL(STRIDE, "Tensor.stride", "input, dim=None")}},
    {"type_as", "to(other.dtype)",
     {CALL(TYPE_AS, "Tensor.type_as", "input, other")}},
    {"max", "all dims: amax; with dim: (amax, argmax) as "
     "torch.return_types.max; of two tensors: maximum",
     /* torch.max(input) or (input, other) or (input, dim, keepdim) */
     {CALL(MAX_MIN, "torch.max Tensor.max",
           "input, dim: int=None, keepdim: bool=False")}},
    {"min", "all dims: amin; with dim: (amin, argmin) as "
     "torch.return_types.min; of two tensors: minimum",
     {CALL(MAX_MIN, "torch.min Tensor.min",
           "input, dim: int=None, keepdim: bool=False")}},
    {"tril", "where(col - row <= k, x, 0), positions from arange nodes",
     {CALL(TRIL, "torch.tril Tensor.tril", "input, diagonal=0")}},
    {"triu", "where(col - row >= k, x, 0), positions from arange nodes",
     {CALL(TRIL, "torch.triu Tensor.triu", "input, diagonal=0")}},
    {"zeros", "full(0) (`empty` is zero-filled too)",
     {CALL(NEW, "torch.zeros", "*size, " NEW_KW),
      CALL(NEW, "torch.zeros_like", "input, *, " LIKE_KW),
      CALL(NEW, "Tensor.new_zeros", "input, *size, " NEW_KW)}},
    {"ones", "full(1)",
     {CALL(NEW, "torch.ones", "*size, " NEW_KW),
      CALL(NEW, "torch.ones_like", "input, *, " LIKE_KW),
      CALL(NEW, "Tensor.new_ones", "input, *size, " NEW_KW)}},
    {"empty", "full(0): uninitialized memory in eager",
     {CALL(NEW, "torch.empty", "*size, " NEW_KW ", memory_format=None"),
      CALL(NEW, "torch.empty_like", "input, *, " LIKE_KW),
      CALL(NEW, "Tensor.new_empty", "input, *size, " NEW_KW)}},
};

const int tc_ndecomps = (int)(sizeof(tc_decomps) / sizeof(tc_decomps[0]));

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

/* c10's checked_convert (Scalar::to<T>): does Python number s overflow
 * dtype `to`?  An int may wrap into an unsigned type (-255 as uint8); a
 * float must lie in [lowest, max], inf and NaN only for floating types;
 * bool takes any value, a bool converts anywhere. */
static int
scalar_overflows(const tc_node *s, tc_dtype to)
{
    static const int64_t imax[] = {[TC_U8] = UINT8_MAX, [TC_I8] = INT8_MAX,
                                   [TC_I16] = INT16_MAX,
                                   [TC_I32] = INT32_MAX,
                                   [TC_I64] = INT64_MAX};
    static const double fmax[] = {[TC_F16] = 65504.0,
                                  [TC_BF16] = 3.3895313892515355e38,
                                  [TC_F32] = 3.4028234663852886e38,
                                  [TC_F64] = INFINITY};
    if (to == TC_BOOL || s->dtype == TC_BOOL) {
        return 0;
    }
    if (tc_dtype_is_float(to)) {
        double v = s->dtype == TC_F64 ? s->scalar.f : (double)s->scalar.i;
        return isfinite(v) && fabs(v) > fmax[to];
    }
    int64_t hi = imax[to], lo = to == TC_U8 ? 0 : -hi - 1;
    if (s->dtype == TC_F64) {
        double v = s->scalar.f;
        return !(v >= (double)lo && v <= (double)hi);
    }
    int64_t v = s->scalar.i;
    return v > hi || (to == TC_U8 ? v < -hi : v < lo);
}

static const char *
c10_type_name(tc_dtype dt)
{
    static const char *const names[] = {
        [TC_BOOL] = "bool", [TC_U8] = "uint8_t", [TC_I8] = "int8_t",
        [TC_I16] = "int16_t", [TC_I32] = "int", [TC_I64] = "int64_t",
        [TC_F32] = "float", [TC_F64] = "double", [TC_F16] = "c10::Half",
        [TC_BF16] = "c10::BFloat16"};
    return names[dt];
}

/* Eager converts the op's Python-number operands to `to` (ops.h
 * tc_scalar_conv; pow: the exponent). */
static int
check_scalars(const tc_graph *g, const tc_op_def *def, const int *in,
              tc_dtype to, char *err, size_t errlen)
{
    int first = !strcmp(def->name, "pow") ? 1 : 0;
    for (int k = first; k < def->nin; k++) {
        const tc_node *s = &g->nodes[in[k]];
        if (s->kind == TC_NODE_SCALAR && scalar_overflows(s, to)) {
            return fail(err, errlen, "value cannot be converted to type %s "
                        "without overflow", c10_type_name(to));
        }
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
        if (c == TC_BOOL) {
            return 0;
        }
        /* the exponent is converted to the base's dtype, except for a
         * float32 / float64 base (double) */
        if (c != TC_F32 && check_scalars(g, def, in, c, err, errlen) < 0) {
            return -1;
        }
        return check_pow(g, in, c, err, errlen);
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
    *compute = c;
    *out = rule_out_dtype(def, c, attr_dtype);
    /* a cast or creation op's mask is of the dtype it makes (arange) */
    tc_dtype kernel = def->promote == TC_PROMOTE_CAST ? *out : c;
    if (!(def->dtype_mask & (1u << kernel))) {
        return fail(err, errlen, "\"%s_cpu\" not implemented for '%s'",
                    def->name, tc_dtype_scalar_type_name(kernel));
    }
    if (def->scalars != TC_SCALARS_WRAPPED) {
        tc_dtype to = def->scalars == TC_SCALARS_TO_OUT
                      || !tc_dtype_is_reduced_float(*out) ? *out : TC_F32;
        return check_scalars(g, def, in, to, err, errlen);
    }
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
