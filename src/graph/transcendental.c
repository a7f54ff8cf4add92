/* transcendental.c - the one decomposition of EXP, LOG, SIN, COS, TANH,
 * ERF and POW into basic KIR ops, applied for the ops a target lacks
 * (tc_kernel_decompose_math, kir.h; each target declares what it has in
 * a tc_math_target).  Constants: mathconst.h.
 *
 * Who uses what today: the CPU (libgccjit) target has float64 math and
 * float32 / float64 POW from libm and gets the float32 forms below: a call
 * to libm's expf/sinf per element stops GCC's vectorizer, while eager and
 * Inductor use SIMD versions (SLEEF).  The PTX target has nothing for
 * float64 (only libdevice, which tcjit does not ship) and gets the float64
 * forms and POW; its float32 EXP/LOG/SIN/COS/TANH are its own fma-based
 * sequences (src/gpu/ptx_math.c).
 *
 * float32 forms: range reduction + polynomial made of plain arithmetic,
 * bit tricks (BITCAST, SHL/SHR) and RINT.  The code is branch-free:
 * special inputs (inf, nan, 0, negatives, denormals) are fixed up with
 * WHERE, which the backends lower to bit selects.  Accuracy goal: a few
 * ulp everywhere, far inside torch.testing's float32 tolerances (rtol
 * 1.3e-6, atol 1e-5), for every float32 input including |x| up to 3.4e38
 * for sin/cos.  Polynomials were fitted (relative error, Chebyshev nodes,
 * reweighted least squares) with mpmath references.
 *
 * float64 forms: relative error ~1e-15 (float64 tolerances of assert_close
 * are rtol 1e-7, atol 1e-7); sin/cos reduce exactly for every finite x
 * (Cody-Waite below 1.6e6, a table-free Payne-Hanek above; max absolute
 * error measured over every exponent 2.3e-15).  POW is exp(y log|x|) in float64 with the C99
 * special cases (float32 rounds once).
 */
#include "kir.h"
#include "mathconst.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A private instruction appender: the rewritten body is built into a new
 * array and swapped in at the end, so a failure leaves k untouched. */
typedef tc_kbuf tbuf;

#define F TC_F32
#define D TC_F64
#define I TC_I32
#define L TC_I64
#define B TC_BOOL

#define put tc_kbuf_put

static int
kf(tbuf *t, tc_dtype dt, double v)
{
    int r = put(t, KOP_CONST, dt, -1, -1, -1);
    if (!t->failed) {
        t->v[r].imm.f = v;
    }
    return r;
}

static int
ki(tbuf *t, tc_dtype dt, int64_t v)
{
    int r = put(t, KOP_CONST, dt, -1, -1, -1);
    if (!t->failed) {
        t->v[r].imm.i = v;
    }
    return r;
}

/* Shorthands; dt is the operands' dtype. */
static int
add(tbuf *t, tc_dtype dt, int a, int b)
{
    return put(t, KOP_ADD, dt, a, b, -1);
}
static int
sub(tbuf *t, tc_dtype dt, int a, int b)
{
    return put(t, KOP_SUB, dt, a, b, -1);
}
static int
mul(tbuf *t, tc_dtype dt, int a, int b)
{
    return put(t, KOP_MUL, dt, a, b, -1);
}
static int
dv(tbuf *t, tc_dtype dt, int a, int b)
{
    return put(t, KOP_DIV, dt, a, b, -1);
}
static int
neg(tbuf *t, tc_dtype dt, int a)
{
    return put(t, KOP_NEG, dt, a, -1, -1);
}
static int
rint_(tbuf *t, tc_dtype dt, int a)
{
    return put(t, KOP_RINT, dt, a, -1, -1);
}
static int
where(tbuf *t, tc_dtype dt, int c, int a, int b)
{
    return put(t, KOP_WHERE, dt, c, a, b);
}
static int
cmp(tbuf *t, tc_kop op, int a, int b)
{
    return put(t, op, B, a, b, -1);
}
static int
conv(tbuf *t, tc_dtype to, int a)
{
    return put(t, KOP_CAST, to, a, -1, -1);
}
static int
bits(tbuf *t, tc_dtype to, int a)
{
    return put(t, KOP_BITCAST, to, a, -1, -1);
}
static int
band(tbuf *t, int a, int b)
{
    return put(t, KOP_AND, B, a, b, -1);
}
static int
bor(tbuf *t, int a, int b)
{
    return put(t, KOP_OR, B, a, b, -1);
}
static int
bnot(tbuf *t, int a)
{
    return put(t, KOP_NOT, B, a, -1, -1);
}
static int
isnan_(tbuf *t, int a)
{
    return cmp(t, KOP_NE, a, a);
}

/* c[0] + x * (c[1] + x * (... c[n-1])) */
static int
horner(tbuf *t, tc_dtype dt, int x, const double *c, int n)
{
    int p = kf(t, dt, c[n - 1]);
    for (int i = n - 2; i >= 0; i--) {
        p = add(t, dt, mul(t, dt, p, x), kf(t, dt, c[i]));
    }
    return p;
}

/* 2^n for int32 n in [-252, 254] as p * s1 * s2 (each factor normal). */
static int
scale_pow2(tbuf *t, int p, int n)
{
    int n1 = put(t, KOP_SHR, I, n, ki(t, I, 1), -1);
    int n2 = sub(t, I, n, n1);
    int s1 = put(t, KOP_SHL, I, add(t, I, n1, ki(t, I, 127)), ki(t, I, 23),
                 -1);
    int s2 = put(t, KOP_SHL, I, add(t, I, n2, ki(t, I, 127)), ki(t, I, 23),
                 -1);
    return mul(t, F, mul(t, F, p, bits(t, F, s1)), bits(t, F, s2));
}

/* ---- exp ----------------------------------------------------------------
 * x = n ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial fitted for
 * relative error on that interval (3.7e-9, below the degree-7 Taylor
 * series it replaced; c0 = c1 = 1 so the last two steps are r * p + 1),
 * then times 2^n.  n comes from the float shifter trick: z = x log2e +
 * 1.5 * 2^23 rounds x log2e to an integer n that sits in z's low mantissa
 * bits, so n = z - shifter is exact and bits(z) - bits(shifter) is n as
 * an int32, without a rint and a conversion.  r = x - n ln2 with ln2 in
 * two parts, the first short enough that n times it is exact.
 *
 * Everything here is counted in vector operations: a softmax spends most
 * of its time in this code, and every compare + select of a clamp costs
 * about as much as a polynomial step. */
/* e^r for x = n ln2 + r with x already in range; *z gets the shifter sum
 * (bits(*z) holds n). */
static int
exp_reduced(tbuf *t, int x, int *z)
{
    *z = add(t, F, mul(t, F, x, kf(t, F, TC_F32M_LOG2E)),
             kf(t, F, TC_F32M_MAGIC));
    int n = sub(t, F, *z, kf(t, F, TC_F32M_MAGIC));
    int r = sub(t, F, x, mul(t, F, n, kf(t, F, TC_F32M_LN2_1)));
    r = sub(t, F, r, mul(t, F, n, kf(t, F, TC_F32M_LN2_2)));
    return horner(t, F, r, tc_kf32_exp, 7);
}

/* Any x: |x| is clamped at 104 with its sign kept (one compare instead of
 * a clamp on each side: n stays in [-150, 150], and e^+-104 already
 * rounds to inf / 0); NaN fails the compare and passes through.  Then
 * 2^n in two steps (scale_pow2), so overflow gives inf and underflow
 * rounds once into the denormals. */
static int
emit_exp(tbuf *t, int x)
{
    int big = cmp(t, KOP_LT, kf(t, F, TC_KF32_EXP_LIMIT),
                  put(t, KOP_ABS, F, x, -1, -1));
    int sign = put(t, KOP_AND, I, bits(t, I, x), ki(t, I, INT32_MIN), -1);
    float limf = TC_KF32_EXP_LIMIT;
    int32_t limbits;
    memcpy(&limbits, &limf, 4);
    int lim = bits(t, F, put(t, KOP_OR, I, sign, ki(t, I, limbits), -1));
    int xc = where(t, F, big, lim, x);
    int z;
    int p = exp_reduced(t, xc, &z);
    int n = sub(t, I, bits(t, I, z), ki(t, I, TC_F32M_MAGIC_BITS));
    return scale_pow2(t, p, n);
}

/* x <= 0 or NaN (softmax's x - max(x)): only the lower clamp, and n in
 * [-150, 0] needs no sign-dependent split: p * 2^(n + 64) is normal and
 * exact, and the final * 2^-64 rounds once into the denormals.  The
 * exponent field comes straight from z's bits ((bits(z) << 23) is n << 23
 * modulo 2^32: the shifter's low 9 bits are 0).  A NaN x makes p NaN,
 * and the products keep it whatever the scale bits are. */
static int
emit_exp_nonpositive(tbuf *t, int x)
{
    int xc = put(t, KOP_MAX, F, x, kf(t, F, -TC_KF32_EXP_LIMIT), -1);
    int z;
    int p = exp_reduced(t, xc, &z);
    int e = put(t, KOP_SHL, I, bits(t, I, z), ki(t, I, 23), -1);
    int s = bits(t, F, add(t, I, e, ki(t, I, (127 + 64) << 23)));
    return mul(t, F, mul(t, F, p, s), kf(t, F, 0x1p-64));
}

/* ---- log ----------------------------------------------------------------
 * x = 2^e * m with m in [sqrt(2)/2, sqrt(2)); log(m) = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| <= 0.172, odd series to s^11 (error 2e-9).
 * Denormals are scaled by 2^23 first. */
static int
emit_log(tbuf *t, int x)
{
    int tiny = cmp(t, KOP_LT, x, kf(t, F, 1.17549435082228751e-38));
    int xs = where(t, F, tiny, mul(t, F, x, kf(t, F, 8388608.0)), x);
    int ib = bits(t, I, xs);
    int e = sub(t, I, put(t, KOP_SHR, I, ib, ki(t, I, 23), -1),
                where(t, I, tiny, ki(t, I, 127 + 23), ki(t, I, 127)));
    int mb = put(t, KOP_OR, I, put(t, KOP_AND, I, ib, ki(t, I, 0x7fffff), -1),
                 ki(t, I, 0x3f800000), -1);
    int m = bits(t, F, mb);
    int big = cmp(t, KOP_LT, kf(t, F, 1.41421356237309505), m);
    m = where(t, F, big, mul(t, F, m, kf(t, F, 0.5)), m);
    e = add(t, I, e, conv(t, I, big));
    int f = sub(t, F, m, kf(t, F, 1.0));
    int s = put(t, KOP_DIV, F, f, add(t, F, f, kf(t, F, 2.0)), -1);
    int z = mul(t, F, s, s);
    int s2 = add(t, F, s, s);
    int lm = add(t, F, s2, mul(t, F, mul(t, F, s2, z),
                               horner(t, F, z, tc_kf32_log, 5)));
    int ef = conv(t, F, e);
    int r = add(t, F, mul(t, F, ef, kf(t, F, TC_F32M_LN2_2)), lm);
    r = add(t, F, mul(t, F, ef, kf(t, F, TC_F32M_LN2_1)), r);
    /* log(inf) = inf, log(+-0) = -inf, log(<0) = nan, log(nan) = nan */
    r = where(t, F, cmp(t, KOP_EQ, x, kf(t, F, INFINITY)), x, r);
    r = where(t, F, cmp(t, KOP_EQ, x, kf(t, F, 0.0)), kf(t, F, -INFINITY), r);
    r = where(t, F, cmp(t, KOP_LT, x, kf(t, F, 0.0)), kf(t, F, NAN), r);
    return where(t, F, cmp(t, KOP_NE, x, x), x, r);
}

/* ---- sin / cos ----------------------------------------------------------
 * Reduction in float64 without a table, exact for every float32 x:
 * 1/(2 pi) is split into 29-bit pieces C1..C4 plus a double tail, so each
 * x * Cj (24 x 29 bits) is exact, and its fractional part p - rint(p) is
 * exact too.  Their sum is x / (2 pi) mod 1 to ~2^-50 for any |x| <= 2^128
 * (Payne-Hanek without the table lookup).  Then with T = 2 * frac (+ 0.5
 * for cos), k = rint(T), r = T - k in [-1/2, 1/2]:
 *     sin(x) = (-1)^k sin(pi r),   cos(x) = sin(x + pi/2).
 * sin(pi r) is an odd degree-11 polynomial in double (error 2e-11).  inf
 * and nan give inf - inf = nan in the reduction. */
static int
emit_sincos(tbuf *t, int x, int is_cos)
{
    int xd = conv(t, D, x);
    int g = -1;
    for (int j = 0; j < 5; j++) {
        int p = mul(t, D, xd, kf(t, D, tc_f32m_inv2pi[j]));
        int fr = sub(t, D, p, put(t, KOP_RINT, D, p, -1, -1));
        g = g < 0 ? fr : add(t, D, g, fr);
    }
    int tt = add(t, D, g, g);
    if (is_cos) {
        tt = add(t, D, tt, kf(t, D, 0.5));
    }
    int k = put(t, KOP_RINT, D, tt, -1, -1);
    int r = sub(t, D, tt, k);
    int y = mul(t, D, r, horner(t, D, mul(t, D, r, r), tc_f32m_sinpi, 6));
    int yf = conv(t, F, y);
    /* odd k flips the sign bit */
    int odd = put(t, KOP_AND, I, conv(t, I, k), ki(t, I, 1), -1);
    int sbit = put(t, KOP_SHL, I, odd, ki(t, I, 31), -1);
    return bits(t, F, put(t, KOP_XOR, I, bits(t, I, yf), sbit, -1));
}

/* ---- sin / cos, CPU fast path -----------------------------------------
 * For |x| <= 8192 only: Cody-Waite by pi in float32, pi split into three
 * 11-bit pieces plus a float tail; q (a multiple of 1/2, < 2^12) times a
 * piece is exact, so the reduction is good to ~2^-50 where it matters
 * (near zeros of the result); then sin(r), |r| <= pi/2, as
 * r + r^3 Q(r^2) with a fitted float Q (relative error 9e-9).  Pure
 * float32, about a third of the float64 path's work.  Inputs it cannot
 * handle set *flag, and the backend reruns such blocks with the exact
 * path above (tc_kernel_decompose_math with a sincos_flag).  NaN gives NaN
 * here and is not flagged; inf is flagged. */
static int
emit_sincos_fast(tbuf *t, int x, int is_cos, int *flag)
{
    int big = cmp(t, KOP_LT, kf(t, F, TC_KF32_TRIG_MAX),
                  put(t, KOP_ABS, F, x, -1, -1));
    *flag = *flag < 0 ? big : put(t, KOP_OR, B, *flag, big, -1);
    int q = mul(t, F, x, kf(t, F, TC_KF32_1_PI));
    if (is_cos) {
        /* cos(x) = sin(x + pi/2): q odd multiples of 1/2 -> pi (k + 1/2) */
        q = put(t, KOP_RINT, F, sub(t, F, q, kf(t, F, 0.5)), -1, -1);
        q = add(t, F, q, kf(t, F, 0.5));
    }
    else {
        q = put(t, KOP_RINT, F, q, -1, -1);
    }
    int r = x;
    for (int j = 0; j < 4; j++) {
        r = sub(t, F, r, mul(t, F, q, kf(t, F, tc_kf32_pi_parts[j])));
    }
    int z = mul(t, F, r, r);
    int y = add(t, F, r,
                mul(t, F, mul(t, F, r, z), horner(t, F, z, tc_kf32_sin, 4)));
    /* sin(x) = (-1)^k sin(r) with x = k pi + r; for cos x = (k+1/2) pi + r
     * gives cos(x) = (-1)^(k+1) sin(r) */
    int kk = conv(t, I, is_cos ? sub(t, F, q, kf(t, F, 0.5)) : q);
    if (is_cos) {
        kk = add(t, I, kk, ki(t, I, 1));
    }
    int sbit = put(t, KOP_SHL, I, put(t, KOP_AND, I, kk, ki(t, I, 1), -1),
                   ki(t, I, 31), -1);
    return bits(t, F, put(t, KOP_XOR, I, bits(t, I, y), sbit, -1));
}

/* ---- tanh ---------------------------------------------------------------
 * |x| < 0.625: x + x^3 Q(x^2), Q fitted (relative error 4e-9), exact near
 * 0.  Otherwise 1 - 2 / (e^{2|x|} + 1) with |x| clamped at 9.5 where tanh
 * rounds to 1; the sign is copied from x. */
static int
emit_tanh(tbuf *t, int x)
{
    int ax = put(t, KOP_ABS, F, x, -1, -1);
    int z = mul(t, F, x, x);
    int x3 = mul(t, F, x, z);
    int small = add(t, F, x, mul(t, F, x3, horner(t, F, z, tc_kf32_tanh, 5)));
    int ac = put(t, KOP_MIN, F, ax, kf(t, F, TC_KF32_TANH_CLAMP), -1);
    int e = emit_exp(t, add(t, F, ac, ac));
    int big = sub(t, F, kf(t, F, 1.0),
                  put(t, KOP_DIV, F, kf(t, F, 2.0),
                      add(t, F, e, kf(t, F, 1.0)), -1));
    int sign = put(t, KOP_AND, I, bits(t, I, x), ki(t, I, INT32_MIN), -1);
    big = bits(t, F, put(t, KOP_OR, I, bits(t, I, big), sign, -1));
    return where(t, F, cmp(t, KOP_LT, ax, kf(t, F, TC_KF32_TANH_SMALL)),
                 small, big);
}

/* ---- erf ------------------------------------------------------------------
 * Two pieces, picked by a select (branch-free), for float32 and float64
 * with their own coefficients:
 *   |x| < 1:  erf(x) = x P(x^2), P fitted for relative error;
 *   |x| >= 1: erf(|x|) = 1 - erfc(|x|) with erfc(a) = exp(-a^2 + L(a)),
 *             L(a) = log(erfcx(a)) a polynomial in a - c on [1, A], the
 *             sign copied from x.
 * L is smooth where erfcx itself is not polynomial-friendly: erfcx grows
 * like exp(y^2) off the real axis, its logarithm only like y^2, so a
 * polynomial of modest degree fits it.  a is clamped to A, where
 * erf(A) rounds to 1 (float32 A = 4, float64 A = 6), so inf gives +-1 and
 * NaN passes through the NaN-propagating MIN.  The EXP stays an EXP: each
 * target lowers it as it lowers other exps.  Coefficients were fitted
 * (weighted least squares on Chebyshev nodes, mpmath at 50 digits); max
 * error measured against mpmath over [0, A + 0.5] with the arithmetic
 * rounded to the dtype: 2.3 ulp (float32), 1 ulp (float64). */
static int
emit_erf(tbuf *t, tc_dtype dt, int x)
{
    int f64 = dt == D;
    double lim = f64 ? TC_KF64_ERF_LIMIT : TC_KF32_ERF_LIMIT;
    double center = f64 ? TC_KF64_ERF_CENTER : TC_KF32_ERF_CENTER;
    int a = put(t, KOP_ABS, dt, x, -1, -1);
    int small = mul(t, dt, x,
                    horner(t, dt, mul(t, dt, x, x),
                           f64 ? tc_kf64_erf_p : tc_kf32_erf_p, f64 ? 12 : 6));
    int ac = put(t, KOP_MIN, dt, a, kf(t, dt, lim), -1);
    int l = horner(t, dt, sub(t, dt, ac, kf(t, dt, center)),
                   f64 ? tc_kf64_erf_l : tc_kf32_erf_l, f64 ? 25 : 11);
    int arg = sub(t, dt, l, mul(t, dt, ac, ac));
    int big = sub(t, dt, kf(t, dt, 1.0), put(t, KOP_EXP, dt, arg, -1, -1));
    big = where(t, dt, cmp(t, KOP_LT, x, kf(t, dt, 0.0)),
                put(t, KOP_NEG, dt, big, -1, -1), big);
    return where(t, dt, cmp(t, KOP_LT, a, kf(t, dt, 1.0)), small, big);
}

/* ---- float64 ------------------------------------------------------------ */

/* 2^n as a double for an int64 n in [-1022, 1023] (bit pattern). */
static int
pow2_64(tbuf *t, int n)
{
    int e = put(t, KOP_SHL, L, put(t, KOP_ADD, L, n, ki(t, L, 1023), -1),
                ki(t, L, 52), -1);
    return put(t, KOP_BITCAST, D, e, -1, -1);
}

/* exp: x = n ln2 + r, |r| <= ln2/2 (fdlibm's two-part ln2: n * hi is
 * exact), Taylor to r^13 (truncation < 1e-17), times 2^n in two factors so
 * overflow gives inf and underflow rounds into the denormals.  The clamp
 * keeps n in range; NaN passes through the NaN-propagating MAX/MIN. */
static int
exp64(tbuf *t, int x)
{
    double c[14];
    c[0] = 1.0;
    for (int i = 1; i < 14; i++) {
        c[i] = c[i - 1] / i;
    }
    int xc = put(t, KOP_MAX, D, x, kf(t, D, TC_F64M_EXP_LO), -1);
    xc = put(t, KOP_MIN, D, xc, kf(t, D, TC_F64M_EXP_HI), -1);
    int n = rint_(t, D, mul(t, D, xc, kf(t, D, TC_F64M_LOG2E)));
    int r = sub(t, D, xc, mul(t, D, n, kf(t, D, TC_F64M_LN2_HI)));
    r = sub(t, D, r, mul(t, D, n, kf(t, D, TC_F64M_LN2_LO)));
    int p = horner(t, D, r, c, 14);
    int ni = put(t, KOP_CAST, L, n, -1, -1);
    int n1 = put(t, KOP_SHR, L, ni, ki(t, L, 1), -1);
    int n2 = put(t, KOP_SUB, L, ni, n1, -1);
    return mul(t, D, mul(t, D, p, pow2_64(t, n1)), pow2_64(t, n2));
}

/* log: x = 2^e m, m in [sqrt(2)/2, sqrt(2)); log m = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| <= 0.172, odd series to s^21.  Denormals are
 * scaled by 2^52 first. */
static int
log64(tbuf *t, int x)
{
    double c[10];
    for (int i = 0; i < 10; i++) {
        c[i] = 1.0 / (2 * i + 3);
    }
    int tiny = cmp(t, KOP_LT, x, kf(t, D, 2.2250738585072014e-308));
    int xs = where(t, D, tiny, mul(t, D, x, kf(t, D, 4503599627370496.0)), x);
    int ib = put(t, KOP_BITCAST, L, xs, -1, -1);
    int e = put(t, KOP_SUB, L, put(t, KOP_SHR, L, ib, ki(t, L, 52), -1),
                where(t, L, tiny, ki(t, L, 1023 + 52), ki(t, L, 1023)), -1);
    int mb = put(t, KOP_OR, L,
                 put(t, KOP_AND, L, ib, ki(t, L, 0xfffffffffffffLL), -1),
                 ki(t, L, 0x3ff0000000000000LL), -1);
    int m = put(t, KOP_BITCAST, D, mb, -1, -1);
    int big = cmp(t, KOP_LT, kf(t, D, 1.41421356237309505), m);
    m = where(t, D, big, mul(t, D, m, kf(t, D, 0.5)), m);
    e = put(t, KOP_ADD, L, e, put(t, KOP_CAST, L, big, -1, -1), -1);
    int f = sub(t, D, m, kf(t, D, 1.0));
    int s = dv(t, D, f, add(t, D, f, kf(t, D, 2.0)));
    int z = mul(t, D, s, s);
    int s2 = add(t, D, s, s);
    int lm = add(t, D, s2,
                 mul(t, D, mul(t, D, s2, z), horner(t, D, z, c, 10)));
    int ef = put(t, KOP_CAST, D, e, -1, -1);
    int r = add(t, D, mul(t, D, ef, kf(t, D, TC_F64M_LN2_LO)), lm);
    r = add(t, D, mul(t, D, ef, kf(t, D, TC_F64M_LN2_HI)), r);
    r = where(t, D, cmp(t, KOP_EQ, x, kf(t, D, INFINITY)), x, r);
    r = where(t, D, cmp(t, KOP_EQ, x, kf(t, D, 0.0)), kf(t, D, -INFINITY), r);
    r = where(t, D, cmp(t, KOP_LT, x, kf(t, D, 0.0)), kf(t, D, NAN), r);
    return where(t, D, isnan_(t, x), x, r);
}

/* x = n pi/2 + r (mod 2 pi), |r| <= pi/4, for every finite x: *n gets
 * the quadrant count n (a small integer, only n mod 4 matters), the
 * result is r; inf and nan give nan for both.
 *
 * Payne-Hanek without the table lookup, as emit_sincos (float32) does it,
 * but a double's exponent reaches 1023, so the bits of 1/(2 pi) that
 * matter for x sit anywhere among ~1080: for x = M 2^(E-52) (M a 53-bit
 * integer) the bits of weight above 2^-(E-51) times x are integers
 * (whole turns), and what follows the first ~55 bits after those times x
 * is so small that it can be multiplied in rounded.  So the exponent
 * range is cut into bands of 126 exponents (mathconst.h,
 * tc_f64m_trig_band), and each band gets the 182 bits from 2^-(E_k - 51)
 * on as seven 26-bit chunks, plus a double tail for the rest (x * tail <
 * 1/16 in the band); the band's row is picked by
 * comparing |x| with the bands' lower bounds (a select chain per chunk:
 * no table, no branch).  x = xh + xl with xh its top 26 significant bits
 * (a mask of the low 27 mantissa bits: no splitter constant times x to
 * overflow near DBL_MAX), so xh * chunk and xl * chunk are exact (<= 53
 * bits) and so are their fractions p - rint(p); xh times the band's first
 * chunk is always an even integer and is skipped, xl times the last one
 * is below 1/16 and needs no rint.  The fractions (12 of them <= 1/2 in
 * magnitude) and the two small terms sum to x / (2 pi) mod 1 within a few
 * 1e-16; four times that, minus its rint n, times pi/2 is r.  Measured
 * against long double libm over every exponent (tests/gpu/test_ptx.c):
 * max |error| of sin/cos 2.3e-15.
 *
 * Cost, in KIR instructions without constants: 7 compares, 8 chains of
 * 7 selects, 12 exact products at 4 ops (mul, rint, sub, add), xl times
 * the last chunk 2, x times the tail 1, the split 5 (with the abs), the
 * end 4: 123.  With the 3 that pick (n, r), a float64 sin or cos costs
 * 180 instead of the fast path's 54 (fewer bands mean more chunks per
 * band, more bands longer chains: 8 x 7 is about the minimum). */
static int
reduce_huge64(tbuf *t, int x, int ax, int *n)
{
    enum { NB = TC_F64M_TRIG_NBANDS, NC = TC_F64M_TRIG_NCHUNKS };
    int in_band[NB];
    for (int b = 1; b < NB; b++) {
        in_band[b] = cmp(t, KOP_LE, kf(t, D, tc_f64m_trig_band[b]), ax);
    }
    /* chunk j (j == NC: the tail) of x's band */
    int c[NC + 1];
    for (int j = 0; j <= NC; j++) {
        c[j] = kf(t, D, tc_f64m_inv2pi_band[0][j]);
        for (int b = 1; b < NB; b++) {
            c[j] = where(t, D, in_band[b], kf(t, D, tc_f64m_inv2pi_band[b][j]),
                         c[j]);
        }
    }
    int xh = bits(t, D, put(t, KOP_AND, L, bits(t, L, x),
                            ki(t, L, ~(int64_t)0x7ffffff), -1));
    int xl = sub(t, D, x, xh);
    int g = mul(t, D, x, c[NC]);
    for (int j = NC - 1; j >= 0; j--) {
        int p = mul(t, D, xl, c[j]);
        g = add(t, D, g, j == NC - 1 ? p : sub(t, D, p, rint_(t, D, p)));
        if (j > 0) {
            p = mul(t, D, xh, c[j]);
            g = add(t, D, g, sub(t, D, p, rint_(t, D, p)));
        }
    }
    int q = mul(t, D, g, kf(t, D, 4.0));
    *n = rint_(t, D, q);
    return mul(t, D, sub(t, D, q, *n), kf(t, D, TC_F64M_PIO2));
}

/* sin / cos.  |x| < TC_F64M_TRIG_FAST: n = rint(x * 2/pi), r = x - n pi/2
 * with pi/2 in four parts (fdlibm's pio2_1, _2, _3 have 33 bits, so
 * n * part is exact for |n| < 2^20), |r| <= pi/4.  Otherwise (and for inf
 * and nan) the exact reduction above; both are computed and a select
 * picks (n, r).  sin r and cos r by Taylor series to r^17 / r^18; the
 * quadrant n mod 4 (plus one for cos) picks and negates. */
static int
sincos64(tbuf *t, int x, int is_cos)
{
    double sc[9], cc[9];
    double f = 1.0;
    for (int i = 0; i < 9; i++) {
        /* sc[i] = (-1)^i / (2i+1)!, cc[i] = (-1)^i / (2i)! */
        cc[i] = (i % 2 ? -1.0 : 1.0) / f;
        f *= (2 * i + 1);
        sc[i] = (i % 2 ? -1.0 : 1.0) / f;
        f *= (2 * i + 2);
    }
    int n = rint_(t, D, mul(t, D, x, kf(t, D, TC_F64M_2_PI)));
    int r = sub(t, D, x, mul(t, D, n, kf(t, D, TC_F64M_PIO2_1)));
    r = sub(t, D, r, mul(t, D, n, kf(t, D, TC_F64M_PIO2_2)));
    r = sub(t, D, r, mul(t, D, n, kf(t, D, TC_F64M_PIO2_3)));
    r = sub(t, D, r, mul(t, D, n, kf(t, D, TC_F64M_PIO2_4)));
    int ax = put(t, KOP_ABS, D, x, -1, -1);
    int nh;
    int rh = reduce_huge64(t, x, ax, &nh);
    int fast = cmp(t, KOP_LT, ax, kf(t, D, TC_F64M_TRIG_FAST));
    n = where(t, D, fast, n, nh);
    r = where(t, D, fast, r, rh);
    int z = mul(t, D, r, r);
    int s = mul(t, D, r, horner(t, D, z, sc, 9));
    int c = horner(t, D, z, cc, 9);
    int q = put(t, KOP_CAST, L, n, -1, -1);
    if (is_cos) {
        q = put(t, KOP_ADD, L, q, ki(t, L, 1), -1);
    }
    int q1 = cmp(t, KOP_NE, put(t, KOP_AND, L, q, ki(t, L, 1), -1),
                 ki(t, L, 0));
    int q2 = cmp(t, KOP_NE, put(t, KOP_AND, L, q, ki(t, L, 2), -1),
                 ki(t, L, 0));
    int v = where(t, D, q1, c, s);
    v = where(t, D, q2, neg(t, D, v), v);
    /* n is nan for inf / nan inputs; the cast of nan is 0 in PTX, so make
     * the nan explicit rather than trusting r */
    return where(t, D, isnan_(t, n), kf(t, D, NAN), v);
}

/* tanh: |x| < 0.1: Taylor to x^13 (truncation < 2e-17 relative);
 * otherwise 1 - 2 / (e^{2|x|} + 1) with |x| clamped at 19.1 (tanh rounds
 * to 1 there), sign copied from x. */
static int
tanh64(tbuf *t, int x)
{
    static const double c[7] = {
        1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835,
        -1382.0 / 155925, 21844.0 / 6081075};
    int ax = put(t, KOP_ABS, D, x, -1, -1);
    int small = mul(t, D, x, horner(t, D, mul(t, D, x, x), c, 7));
    int ac = put(t, KOP_MIN, D, ax, kf(t, D, TC_F64M_TANH_CLAMP), -1);
    int e = exp64(t, add(t, D, ac, ac));
    int big = sub(t, D, kf(t, D, 1.0),
                  dv(t, D, kf(t, D, 2.0), add(t, D, e, kf(t, D, 1.0))));
    big = where(t, D, cmp(t, KOP_LT, x, kf(t, D, 0.0)), neg(t, D, big), big);
    return where(t, D, cmp(t, KOP_LT, ax, kf(t, D, TC_F64M_TANH_SMALL)),
                 small, big);
}

/* pow(x, y) in float64 (C99 / torch special cases). */
static int
emit_pow(tbuf *t, int x, int y)
{
    int ax = put(t, KOP_ABS, D, x, -1, -1);
    int e = exp64(t, mul(t, D, y, log64(t, ax)));
    int fy = put(t, KOP_FLOOR, D, y, -1, -1);
    int isint = cmp(t, KOP_EQ, fy, y);
    int hy = mul(t, D, y, kf(t, D, 0.5));
    int odd = band(t, isint, cmp(t, KOP_NE, put(t, KOP_FLOOR, D, hy, -1, -1),
                                 hy));
    int negx = cmp(t, KOP_LT, x, kf(t, D, 0.0));
    /* x's sign bit: -0 ** -3 is -inf and -0 ** 3 is -0 (x < 0 misses
     * -0; 1 / -0 = -inf tells it apart; GPU fuzz seed 260683), while
     * -0 ** 0.5 is +0, not the nan of a negative base */
    int sgnx = bor(t, negx,
                   band(t, cmp(t, KOP_EQ, x, kf(t, D, 0.0)),
                        cmp(t, KOP_LT,
                            put(t, KOP_DIV, D, kf(t, D, 1.0), x, -1),
                            kf(t, D, 0.0))));
    int xinf = cmp(t, KOP_EQ, ax, kf(t, D, INFINITY));
    int yinf = cmp(t, KOP_EQ, put(t, KOP_ABS, D, y, -1, -1),
                   kf(t, D, INFINITY));
    int r = where(t, D, band(t, sgnx, odd), neg(t, D, e), e);
    /* negative finite base, finite non-integer exponent: nan */
    r = where(t, D, band(t, band(t, negx, bnot(t, isint)), bnot(t, xinf)),
            kf(t, D, NAN), r);
    /* (-1) ** +-inf = 1, x ** 0 = 1 (even nan), 1 ** y = 1 (even nan) */
    int one = bor(t, band(t, cmp(t, KOP_EQ, ax, kf(t, D, 1.0)), yinf),
                  bor(t, cmp(t, KOP_EQ, y, kf(t, D, 0.0)),
                      cmp(t, KOP_EQ, x, kf(t, D, 1.0))));
    return where(t, D, one, kf(t, D, 1.0), r);
}

/* ---- the driver -------------------------------------------------------- */

const tc_math_target tc_math_target_none = {"none", {0}};

/* What the rewrite of one kernel knows: the target, which ops this pass
 * rewrites (ERF alone first, its EXP then with the others), the sin/cos
 * flag (NULL: exact sin/cos), and which of k's instructions are <= 0 or
 * NaN (NULL: none known). */
typedef struct {
    const tc_math_target *target;
    int erf_pass;
    int *flag;
    const unsigned char *nonpos;
} expand_ctx;

static int
is_math_op(tc_kop op)
{
    return op == KOP_EXP || op == KOP_LOG || op == KOP_SIN || op == KOP_COS
           || op == KOP_TANH || op == KOP_ERF || op == KOP_POW;
}

/* Does target t lack op in dtype dt?  Only float32 / float64 math is
 * ever decomposed. */
static int
lacks(const tc_math_target *t, tc_kop op, tc_dtype dt)
{
    int bit = dt == F ? TC_MATH_F32 : dt == D ? TC_MATH_F64 : 0;
    return bit != 0 && is_math_op(op) && !(t->native[op] & bit);
}

static int
wanted(const tc_kinst *in, void *ctx)
{
    const expand_ctx *c = ctx;
    if ((in->op == KOP_ERF) != c->erf_pass) {
        return 0;
    }
    return lacks(c->target, in->op, in->dtype);
}

static int
expand32(tbuf *t, tc_kop op, int x, int *flag, int nonpos)
{
    if (flag != NULL && (op == KOP_SIN || op == KOP_COS)) {
        return emit_sincos_fast(t, x, op == KOP_COS, flag);
    }
    switch (op) {
    case KOP_EXP:
        return nonpos ? emit_exp_nonpositive(t, x) : emit_exp(t, x);
    case KOP_LOG:
        return emit_log(t, x);
    case KOP_SIN:
        return emit_sincos(t, x, 0);
    case KOP_COS:
        return emit_sincos(t, x, 1);
    default:
        return emit_tanh(t, x);
    }
}

static int
expand64(tbuf *t, tc_kop op, int x)
{
    switch (op) {
    case KOP_EXP:
        return exp64(t, x);
    case KOP_LOG:
        return log64(t, x);
    case KOP_SIN:
        return sincos64(t, x, 0);
    case KOP_COS:
        return sincos64(t, x, 1);
    default:
        return tanh64(t, x);
    }
}

static int
expand(tc_kbuf *t, const tc_kinst *in, const int *map, void *ctx)
{
    const expand_ctx *c = ctx;
    int x = map[in->a];
    if (in->op == KOP_ERF) {
        return emit_erf(t, in->dtype, x);
    }
    if (in->op == KOP_POW) {
        int y = map[in->b];
        if (in->dtype == D) {
            return emit_pow(t, x, y);
        }
        int r = emit_pow(t, conv(t, D, x), conv(t, D, y));
        return conv(t, F, r);
    }
    int nonpos = c->nonpos != NULL && c->nonpos[in->a];
    int r = in->dtype == D ? expand64(t, in->op, x)
                           : expand32(t, in->op, x, c->flag, nonpos);
    if ((in->op == KOP_SIN || in->op == KOP_TANH) && r >= 0) {
        /* sin(-0) and tanh(-0) are -0 (1 / sin(x) is -inf there): every
         * reduction's x - n pi/2, and tanh's sign taken from x < 0, make
         * it +0 */
        r = where(t, in->dtype, cmp(t, KOP_EQ, x, kf(t, in->dtype, 0.0)), x,
                  r);
    }
    return r;
}

/* Is the float32 value i "v - max(v)" with the max an accumulator of
 * this kernel over the same v (vn: body value numbers)?  Then it is <= 0
 * or NaN at every reduction point: softmax's and log_softmax's exp
 * argument. */
static int
is_minus_own_max(const tc_kernel *k, const int *vn, int i)
{
    const tc_kinst *in = &k->insts[i];
    if (in->op != KOP_SUB || in->dtype != TC_F32) {
        return 0;
    }
    const tc_kinst *res = &k->insts[in->b];
    if (res->op != KOP_ACC_RESULT || res->imm.i != 0) {
        return 0;
    }
    const tc_kinst *acc = &k->insts[res->a];
    /* SOFTMAX's component 0 is the max too (kir_online.c) */
    if ((acc->imm.i != TC_ACC_MAX && acc->imm.i != TC_ACC_SOFTMAX)
        || acc->dtype != TC_F32) {
        return 0;
    }
    int updates = 0;
    for (int u = 0; u < k->ninsts; u++) {
        const tc_kinst *up = &k->insts[u];
        if (up->op == KOP_ACC_UPDATE && up->a == res->a) {
            if (vn[up->b] != vn[in->a]) {
                return 0;
            }
            updates++;
        }
    }
    return updates > 0;
}

/* nonpos[i] for the instructions of a reduction kernel, or NULL (no
 * reductions, out of memory, or an output that aliases an input: then
 * the loads of the max pass and of a later pass may differ). */
static unsigned char *
nonpositive_values(const tc_kernel *k)
{
    if (k->nphases == 0 || tc_kernel_writes_its_input(k)) {
        return NULL;
    }
    int *region = malloc(sizeof(int) * (size_t)k->ninsts);
    int *vn = malloc(sizeof(int) * (size_t)k->ninsts);
    unsigned char *nonpos = calloc((size_t)k->ninsts, 1);
    if (region != NULL && vn != NULL && nonpos != NULL) {
        tc_kernel_regions(k, region);
        tc_kernel_body_value_numbers(k, region, vn);
        for (int i = 0; i < k->ninsts; i++) {
            nonpos[i] = is_minus_own_max(k, vn, i);
        }
    }
    else {
        free(nonpos);
        nonpos = NULL;
    }
    free(region);
    free(vn);
    return nonpos;
}

int
tc_kernel_decompose_math(tc_kernel *k, const tc_math_target *t,
                         int *sincos_flag)
{
    if (sincos_flag != NULL) {
        *sincos_flag = -1;
    }
    /* the fast sin/cos flag is one value OR-ed over the whole kernel,
     * which would cross region boundaries in a reduction kernel (kir.h
     * visibility), and a reduction block cannot be redone */
    expand_ctx c = {t, 1, k->nphases > 0 ? NULL : sincos_flag, NULL};
    if (tc_kernel_rewrite(k, wanted, expand, &c) < 0) {
        return -1;
    }
    c.erf_pass = 0;
    unsigned char *nonpos = NULL;
    if (lacks(t, KOP_EXP, F)) {
        nonpos = nonpositive_values(k);
    }
    c.nonpos = nonpos;
    int rc = tc_kernel_rewrite(k, wanted, expand, &c);
    free(nonpos);
    return rc;
}
