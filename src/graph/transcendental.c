/* transcendental.c - float32 exp/log/sin/cos/tanh/erf as vectorizable KIR.
 *
 * A call to libm's expf/sinf per element stops GCC's vectorizer, while
 * eager and Inductor use SIMD versions (SLEEF).  So float32 EXP, LOG, SIN,
 * COS and TANH are rewritten here into range reduction + polynomial made of
 * plain arithmetic, bit tricks (BITCAST, SHL/SHR) and RINT.  The code is
 * branch-free: special inputs (inf, nan, 0, negatives, denormals) are fixed
 * up with WHERE, which the backends lower to bit selects.  float64 ops are
 * left alone (the CPU backend calls libm for them, as eager's accuracy
 * needs).
 *
 * Accuracy goal: a few ulp everywhere, far inside torch.testing's float32
 * tolerances (rtol 1.3e-6, atol 1e-5), for every float32 input including
 * |x| up to 3.4e38 for sin/cos.  Polynomials were fitted (relative error,
 * Chebyshev nodes, reweighted least squares) with mpmath references.
 */
#include "kir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A private instruction appender: the rewritten body is built into a new
 * array and swapped in at the end, so a failure leaves k untouched. */
typedef tc_kbuf tbuf;

#define F TC_F32
#define D TC_F64
#define I TC_I32
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
#define EXP_SHIFTER 12582912.0           /* 1.5 * 2^23 */
#define EXP_SHIFTER_BITS 0x4b400000

static const double exp_poly[7] = {
    1.0, 1.0, 0x1.fffffep-2, 0x1.555492p-3, 0x1.555682p-5, 0x1.1239b2p-7,
    0x1.6bd8fep-10};

/* e^r for x = n ln2 + r with x already in range; *z gets the shifter sum
 * (bits(*z) holds n). */
static int
exp_reduced(tbuf *t, int x, int *z)
{
    *z = add(t, F, mul(t, F, x, kf(t, F, 1.44269504088896341)),
             kf(t, F, EXP_SHIFTER));
    int n = sub(t, F, *z, kf(t, F, EXP_SHIFTER));
    int r = sub(t, F, x, mul(t, F, n, kf(t, F, 0.693145751953125)));
    r = sub(t, F, r, mul(t, F, n, kf(t, F, 1.428606765330187e-06)));
    return horner(t, F, r, exp_poly, 7);
}

/* Any x: |x| is clamped at 104 with its sign kept (one compare instead of
 * a clamp on each side: n stays in [-150, 150], and e^+-104 already
 * rounds to inf / 0); NaN fails the compare and passes through.  Then
 * 2^n in two steps (scale_pow2), so overflow gives inf and underflow
 * rounds once into the denormals. */
static int
emit_exp(tbuf *t, int x)
{
    int big = cmp(t, KOP_LT, kf(t, F, 104.0), put(t, KOP_ABS, F, x, -1, -1));
    int sign = put(t, KOP_AND, I, bits(t, I, x), ki(t, I, INT32_MIN), -1);
    int lim = bits(t, F, put(t, KOP_OR, I, sign, ki(t, I, 0x42d00000), -1));
    int xc = where(t, F, big, lim, x);
    int z;
    int p = exp_reduced(t, xc, &z);
    int n = sub(t, I, bits(t, I, z), ki(t, I, EXP_SHIFTER_BITS));
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
    int xc = put(t, KOP_MAX, F, x, kf(t, F, -104.0), -1);
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
    static const double c[5] = {1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9,
                                1.0 / 11};
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
    int lm = add(t, F, s2, mul(t, F, mul(t, F, s2, z), horner(t, F, z, c, 5)));
    int ef = conv(t, F, e);
    int r = add(t, F, mul(t, F, ef, kf(t, F, 1.428606765330187e-06)), lm);
    r = add(t, F, mul(t, F, ef, kf(t, F, 0.693145751953125)), r);
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
    static const double inv2pi[5] = {
        0x1.45f306ep-3, -0x1.b1bbeadp-34, -0x1.80f62a1p-64, 0x1.1f534dep-94,
        -0x1.f924eb53361dep-125};
    static const double sinpi[6] = {
        3.141592653523911, -5.167712762159022, 2.550163241252819,
        -0.5992513384249386, 0.08204651137981177, -0.007022210027350119};
    int xd = conv(t, D, x);
    int g = -1;
    for (int j = 0; j < 5; j++) {
        int p = mul(t, D, xd, kf(t, D, inv2pi[j]));
        int fr = sub(t, D, p, put(t, KOP_RINT, D, p, -1, -1));
        g = g < 0 ? fr : add(t, D, g, fr);
    }
    int tt = add(t, D, g, g);
    if (is_cos) {
        tt = add(t, D, tt, kf(t, D, 0.5));
    }
    int k = put(t, KOP_RINT, D, tt, -1, -1);
    int r = sub(t, D, tt, k);
    int y = mul(t, D, r, horner(t, D, mul(t, D, r, r), sinpi, 6));
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
 * path above (see tc_kernel_decompose_transcendentals_cpu).  NaN gives NaN
 * here and is not flagged; inf is flagged. */
static int
emit_sincos_fast(tbuf *t, int x, int is_cos, int *flag)
{
    static const double pi_parts[4] = {0x1.92p+1, 0x1.fb4p-11, 0x1.444p-23,
                                       0x1.68c234p-38};
    static const double q4[4] = {-0x1.55554cp-3, 0x1.110ed4p-7,
                                 -0x1.9f6feep-13, 0x1.5dbceep-19};
    int big = cmp(t, KOP_LT, kf(t, F, 8192.0), put(t, KOP_ABS, F, x, -1, -1));
    *flag = *flag < 0 ? big : put(t, KOP_OR, B, *flag, big, -1);
    int q = mul(t, F, x, kf(t, F, 0.318309886183790672));
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
        r = sub(t, F, r, mul(t, F, q, kf(t, F, pi_parts[j])));
    }
    int z = mul(t, F, r, r);
    int y = add(t, F, r, mul(t, F, mul(t, F, r, z), horner(t, F, z, q4, 4)));
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
    static const double q[5] = {-0.3333328194286445, 0.1333144221705863,
                                -0.053739716428718144, 0.020639091087746,
                                -0.005704990838361345};
    int ax = put(t, KOP_ABS, F, x, -1, -1);
    int z = mul(t, F, x, x);
    int x3 = mul(t, F, x, z);
    int small = add(t, F, x, mul(t, F, x3, horner(t, F, z, q, 5)));
    int ac = put(t, KOP_MIN, F, ax, kf(t, F, 9.5), -1);
    int e = emit_exp(t, add(t, F, ac, ac));
    int big = sub(t, F, kf(t, F, 1.0),
                  put(t, KOP_DIV, F, kf(t, F, 2.0),
                      add(t, F, e, kf(t, F, 1.0)), -1));
    int sign = put(t, KOP_AND, I, bits(t, I, x), ki(t, I, INT32_MIN), -1);
    big = bits(t, F, put(t, KOP_OR, I, bits(t, I, big), sign, -1));
    return where(t, F, cmp(t, KOP_LT, ax, kf(t, F, 0.625)), small, big);
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
static const double erf_p32[6] = {
    0x1.20dd74ae4ca00p+0, -0x1.8126a01b1d0eap-2, 0x1.ce0d7158328b4p-4,
    -0x1.b5cb8d07f7fa3p-6, 0x1.42ec631f523b3p-8, -0x1.292a8b2ae12eep-11};
static const double erf_l32[11] = {
    -0x1.8e8b7218feacep+0, -0x1.692523d789eaep-2, 0x1.cb9f595bf8ad4p-5,
    -0x1.63cce4ec85843p-7, 0x1.1bd6fb3dbc7e0p-9, -0x1.b924a8b5c54dcp-12,
    0x1.42b5878e41bdap-14, -0x1.b36822a9ee610p-17, 0x1.ef40a986442d3p-20,
    -0x1.1abb4a636df8fp-24, -0x1.609ab29b33996p-25};
static const double erf_p64[12] = {
    0x1.20dd750429b6dp+0, -0x1.812746b0379cap-2, 0x1.ce2f21a0413a6p-4,
    -0x1.b82ce31210955p-6, 0x1.565bccfba1ea3p-8, -0x1.c02db09245cd7p-11,
    0x1.f9a2c1d28f564p-14, -0x1.f4cab27f76e7bp-17, 0x1.b9836ff4e71dfp-20,
    -0x1.5c1bc9652eff7p-23, 0x1.d7a117251fe90p-27, -0x1.ad27df3ff0f7ep-31};
static const double erf_l64[25] = {
    -0x1.dcc8b29512d7ep+0, -0x1.107c691607bcdp-2, 0x1.105be5d25e6a2p-5,
    -0x1.5677ff29cf105p-8, 0x1.ca1053db0bd0dp-11, -0x1.34e7e40796e56p-13,
    0x1.9922ad45f6fcbp-16, -0x1.0506155acd9d2p-18, 0x1.3a66387ab1eb7p-21,
    -0x1.5a92e8369439dp-24, 0x1.47817cf434afcp-27, -0x1.aa026d5d8e494p-31,
    -0x1.b45df07c082c2p-36, 0x1.0da8be569c593p-35, -0x1.42f5d76e6ab1ap-37,
    0x1.2116d90d7ca89p-39, -0x1.bbf39cccbb9eep-42, 0x1.2eebeb7b73057p-44,
    -0x1.3de2063575f22p-47, 0x1.2edd5c1980c52p-51, -0x1.47bf5f537eeefp-55,
    0x1.7590fcfd36825p-56, 0x1.4038d9ccb662ap-57, -0x1.77007991f4f53p-58,
    0x1.69e38bb2edb1bp-61};

static int
emit_erf(tbuf *t, tc_dtype dt, int x)
{
    int f64 = dt == D;
    double lim = f64 ? 6.0 : 4.0, center = f64 ? 3.5 : 2.5;
    int a = put(t, KOP_ABS, dt, x, -1, -1);
    int small = mul(t, dt, x, horner(t, dt, mul(t, dt, x, x),
                                     f64 ? erf_p64 : erf_p32, f64 ? 12 : 6));
    int ac = put(t, KOP_MIN, dt, a, kf(t, dt, lim), -1);
    int l = horner(t, dt, sub(t, dt, ac, kf(t, dt, center)),
                   f64 ? erf_l64 : erf_l32, f64 ? 25 : 11);
    int arg = sub(t, dt, l, mul(t, dt, ac, ac));
    int big = sub(t, dt, kf(t, dt, 1.0), put(t, KOP_EXP, dt, arg, -1, -1));
    big = where(t, dt, cmp(t, KOP_LT, x, kf(t, dt, 0.0)),
                put(t, KOP_NEG, dt, big, -1, -1), big);
    return where(t, dt, cmp(t, KOP_LT, a, kf(t, dt, 1.0)), small, big);
}

static int
erf_wanted_f32(const tc_kinst *in)
{
    return in->op == KOP_ERF && in->dtype == F;
}

static int
erf_wanted_all(const tc_kinst *in)
{
    return in->op == KOP_ERF && (in->dtype == F || in->dtype == D);
}

static int
expand_erf(tc_kbuf *t, const tc_kinst *in, const int *map, void *ctx)
{
    (void)ctx;
    return emit_erf(t, in->dtype, map[in->a]);
}

int
tc_kernel_decompose_erf(tc_kernel *k, int with_f64)
{
    return tc_kernel_rewrite(k, with_f64 ? erf_wanted_all : erf_wanted_f32,
                             expand_erf, NULL);
}

/* What the rewrite of one kernel knows: the sin/cos flag (NULL: exact
 * sin/cos), and which of k's instructions are <= 0 or NaN (NULL: none
 * known). */
typedef struct {
    int *flag;
    const unsigned char *nonpos;
} expand_ctx;

static int
expand(tbuf *t, tc_kop op, int x, int *flag, int nonpos)
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
is_decomposed(const tc_kinst *in)
{
    if (in->dtype != TC_F32) {
        return 0;
    }
    return in->op == KOP_EXP || in->op == KOP_LOG || in->op == KOP_SIN
           || in->op == KOP_COS || in->op == KOP_TANH;
}

/* Rewrites k; with flag != NULL sin/cos take the fast path and *flag
 * gets the id of a TC_BOOL value, true where the fast result is invalid
 * (-1 when the kernel has no sin/cos). */
static int
expand_in_kir(tc_kbuf *t, const tc_kinst *in, const int *map, void *ctx)
{
    const expand_ctx *c = ctx;
    int nonpos = c->nonpos != NULL && c->nonpos[in->a];
    return expand(t, in->op, map[in->a], c->flag, nonpos);
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
    if (acc->imm.i != TC_ACC_MAX || acc->dtype != TC_F32) {
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

static int
decompose(tc_kernel *k, int *flag)
{
    if (flag != NULL) {
        *flag = -1;
    }
    /* erf first: its EXP is then decomposed with the others */
    if (tc_kernel_decompose_erf(k, 0) < 0) {
        return -1;
    }
    unsigned char *nonpos = nonpositive_values(k);
    expand_ctx c = {flag, nonpos};
    int rc = tc_kernel_rewrite(k, is_decomposed, expand_in_kir, &c);
    free(nonpos);
    return rc;
}

int
tc_kernel_decompose_transcendentals(tc_kernel *k)
{
    return decompose(k, NULL);
}

/* Reduction kernels (nphases > 0) get the exact sin/cos: the fast path's
 * flag is one value OR-ed over the whole kernel, which would cross region
 * boundaries (kir.h visibility), and a reduction block cannot be redone
 * after its accumulators saw it.  *flag is -1 then. */
int
tc_kernel_decompose_transcendentals_cpu(tc_kernel *k, int *flag)
{
    if (k->nphases > 0) {
        *flag = -1;
        return decompose(k, NULL);
    }
    return decompose(k, flag);
}
