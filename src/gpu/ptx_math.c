/* ptx_math.c - float64 transcendentals and pow as plain KIR for the PTX
 * backend.
 *
 * PTX has no float64 exp/log/sin (only libdevice, which tcjit does not
 * ship), and its float32 *.approx instructions are not accurate enough
 * for torch's assert_close float32 tolerance over the whole input range
 * (sin.approx has an absolute error of ~2^-20.9 only for |x| <= pi and no
 * range reduction; ex2.approx has 2 ulp plus the error of x * log2(e)).
 * So every transcendental is range reduction + polynomial, in KIR, and the
 * emitter needs only basic ALU ops:
 *
 *   float32 exp/log/sin/cos/tanh  src/graph/transcendental.c (a few ulp,
 *                                  every input, sin/cos reduced in float64)
 *   float64 exp/log/sin/cos/tanh  here (rel. error ~1e-15; sin/cos exact
 *                                  reduction for |x| < 1.6e6, beyond that
 *                                  the absolute error grows like |x|*1e-16)
 *   float32/float64 pow           here, exp(y * log|x|) in float64 with the
 *                                  C99 special cases (float32 rounds once)
 *
 * float64 tolerances of assert_close are rtol 1e-7, atol 1e-7, so these are
 * far inside them.  Polynomials are Taylor series with exact reciprocal
 * factorial coefficients, on reduced ranges where the truncation error is
 * below 1e-17.
 */
#include "ptx.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    tc_kinst *v;
    int n, cap;
    int failed;
} tbuf;

#define D TC_F64
#define L TC_I64
#define B TC_BOOL

static int
put(tbuf *t, tc_kop op, tc_dtype dt, int a, int b, int c)
{
    if (t->failed) {
        return 0;
    }
    if (t->n == t->cap) {
        int cap = t->cap ? t->cap * 2 : 64;
        tc_kinst *v = realloc(t->v, sizeof(tc_kinst) * (size_t)cap);
        if (v == NULL) {
            t->failed = 1;
            return 0;
        }
        t->v = v;
        t->cap = cap;
    }
    tc_kinst *in = &t->v[t->n];
    memset(in, 0, sizeof(*in));
    in->op = op;
    in->dtype = dt;
    in->a = a;
    in->b = b;
    in->c = c;
    in->arg = -1;
    return t->n++;
}

static int
kf(tbuf *t, double v)
{
    int r = put(t, KOP_CONST, D, -1, -1, -1);
    if (!t->failed) {
        t->v[r].imm.f = v;
    }
    return r;
}

static int
kl(tbuf *t, int64_t v)
{
    int r = put(t, KOP_CONST, L, -1, -1, -1);
    if (!t->failed) {
        t->v[r].imm.i = v;
    }
    return r;
}

static int add(tbuf *t, int a, int b) { return put(t, KOP_ADD, D, a, b, -1); }
static int sub(tbuf *t, int a, int b) { return put(t, KOP_SUB, D, a, b, -1); }
static int mul(tbuf *t, int a, int b) { return put(t, KOP_MUL, D, a, b, -1); }
static int dv(tbuf *t, int a, int b) { return put(t, KOP_DIV, D, a, b, -1); }
static int neg(tbuf *t, int a) { return put(t, KOP_NEG, D, a, -1, -1); }
static int rint_(tbuf *t, int a) { return put(t, KOP_RINT, D, a, -1, -1); }
static int sel(tbuf *t, tc_dtype dt, int c, int a, int b)
{
    return put(t, KOP_WHERE, dt, c, a, b);
}
static int cmp(tbuf *t, tc_kop op, int a, int b)
{
    return put(t, op, B, a, b, -1);
}
static int band(tbuf *t, int a, int b) { return put(t, KOP_AND, B, a, b, -1); }
static int bor(tbuf *t, int a, int b) { return put(t, KOP_OR, B, a, b, -1); }
static int bnot(tbuf *t, int a) { return put(t, KOP_NOT, B, a, -1, -1); }
static int isnan_(tbuf *t, int a) { return cmp(t, KOP_NE, a, a); }

/* c[0] + x * (c[1] + x * (... c[n-1])) */
static int
horner(tbuf *t, int x, const double *c, int n)
{
    int p = kf(t, c[n - 1]);
    for (int i = n - 2; i >= 0; i--) {
        p = add(t, mul(t, p, x), kf(t, c[i]));
    }
    return p;
}

/* 2^n as a double for an int64 n in [-1022, 1023] (bit pattern). */
static int
pow2(tbuf *t, int n)
{
    int e = put(t, KOP_SHL, L, put(t, KOP_ADD, L, n, kl(t, 1023), -1),
                kl(t, 52), -1);
    return put(t, KOP_BITCAST, D, e, -1, -1);
}

/* exp: x = n ln2 + r, |r| <= ln2/2 (fdlibm's two-part ln2: n * hi is
 * exact), Taylor to r^13 (truncation < 1e-17), times 2^n in two factors so
 * overflow gives inf and underflow rounds into the denormals.  The clamp
 * keeps n in range; NaN passes through the NaN-propagating MAX/MIN. */
static int
emit_exp(tbuf *t, int x)
{
    double c[14];
    c[0] = 1.0;
    for (int i = 1; i < 14; i++) {
        c[i] = c[i - 1] / i;
    }
    int xc = put(t, KOP_MAX, D, x, kf(t, -746.0), -1);
    xc = put(t, KOP_MIN, D, xc, kf(t, 710.0), -1);
    int n = rint_(t, mul(t, xc, kf(t, 1.44269504088896338700e+00)));
    int r = sub(t, xc, mul(t, n, kf(t, 6.93147180369123816490e-01)));
    r = sub(t, r, mul(t, n, kf(t, 1.90821492927058770002e-10)));
    int p = horner(t, r, c, 14);
    int ni = put(t, KOP_CAST, L, n, -1, -1);
    int n1 = put(t, KOP_SHR, L, ni, kl(t, 1), -1);
    int n2 = put(t, KOP_SUB, L, ni, n1, -1);
    return mul(t, mul(t, p, pow2(t, n1)), pow2(t, n2));
}

/* log: x = 2^e m, m in [sqrt(2)/2, sqrt(2)); log m = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| <= 0.172, odd series to s^21.  Denormals are
 * scaled by 2^52 first. */
static int
emit_log(tbuf *t, int x)
{
    double c[10];
    for (int i = 0; i < 10; i++) {
        c[i] = 1.0 / (2 * i + 3);
    }
    int tiny = cmp(t, KOP_LT, x, kf(t, 2.2250738585072014e-308));
    int xs = sel(t, D, tiny, mul(t, x, kf(t, 4503599627370496.0)), x);
    int ib = put(t, KOP_BITCAST, L, xs, -1, -1);
    int e = put(t, KOP_SUB, L, put(t, KOP_SHR, L, ib, kl(t, 52), -1),
                sel(t, L, tiny, kl(t, 1023 + 52), kl(t, 1023)), -1);
    int mb = put(t, KOP_OR, L,
                 put(t, KOP_AND, L, ib, kl(t, 0xfffffffffffffLL), -1),
                 kl(t, 0x3ff0000000000000LL), -1);
    int m = put(t, KOP_BITCAST, D, mb, -1, -1);
    int big = cmp(t, KOP_LT, kf(t, 1.41421356237309505), m);
    m = sel(t, D, big, mul(t, m, kf(t, 0.5)), m);
    e = put(t, KOP_ADD, L, e, put(t, KOP_CAST, L, big, -1, -1), -1);
    int f = sub(t, m, kf(t, 1.0));
    int s = dv(t, f, add(t, f, kf(t, 2.0)));
    int z = mul(t, s, s);
    int s2 = add(t, s, s);
    int lm = add(t, s2, mul(t, mul(t, s2, z), horner(t, z, c, 10)));
    int ef = put(t, KOP_CAST, D, e, -1, -1);
    int r = add(t, mul(t, ef, kf(t, 1.90821492927058770002e-10)), lm);
    r = add(t, mul(t, ef, kf(t, 6.93147180369123816490e-01)), r);
    r = sel(t, D, cmp(t, KOP_EQ, x, kf(t, INFINITY)), x, r);
    r = sel(t, D, cmp(t, KOP_EQ, x, kf(t, 0.0)), kf(t, -INFINITY), r);
    r = sel(t, D, cmp(t, KOP_LT, x, kf(t, 0.0)), kf(t, NAN), r);
    return sel(t, D, isnan_(t, x), x, r);
}

/* sin / cos: n = rint(x * 2/pi), r = x - n pi/2 with pi/2 in four parts
 * (fdlibm's pio2_1, _2, _3 have 33 bits, so n * part is exact for
 * |n| < 2^20), |r| <= pi/4; sin r and cos r by Taylor series to r^17 /
 * r^18; the quadrant n mod 4 (plus one for cos) picks and negates.  inf
 * and nan give nan through inf - inf. */
static int
emit_sincos(tbuf *t, int x, int is_cos)
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
    int n = rint_(t, mul(t, x, kf(t, 6.36619772367581382433e-01)));
    int r = sub(t, x, mul(t, n, kf(t, 1.57079632673412561417e+00)));
    r = sub(t, r, mul(t, n, kf(t, 6.07710050630396597660e-11)));
    r = sub(t, r, mul(t, n, kf(t, 2.02226624871116645580e-21)));
    r = sub(t, r, mul(t, n, kf(t, 8.47842766036889956997e-32)));
    int z = mul(t, r, r);
    int s = mul(t, r, horner(t, z, sc, 9));
    int c = horner(t, z, cc, 9);
    int q = put(t, KOP_CAST, L, n, -1, -1);
    if (is_cos) {
        q = put(t, KOP_ADD, L, q, kl(t, 1), -1);
    }
    int q1 = cmp(t, KOP_NE, put(t, KOP_AND, L, q, kl(t, 1), -1), kl(t, 0));
    int q2 = cmp(t, KOP_NE, put(t, KOP_AND, L, q, kl(t, 2), -1), kl(t, 0));
    int v = sel(t, D, q1, c, s);
    v = sel(t, D, q2, neg(t, v), v);
    /* n is nan for inf / nan inputs; the cast of nan is 0 in PTX, so make
     * the nan explicit rather than trusting r */
    return sel(t, D, isnan_(t, n), kf(t, NAN), v);
}

/* tanh: |x| < 0.1: Taylor to x^13 (truncation < 2e-17 relative);
 * otherwise 1 - 2 / (e^{2|x|} + 1) with |x| clamped at 19.1 (tanh rounds
 * to 1 there), sign copied from x. */
static int
emit_tanh(tbuf *t, int x)
{
    static const double c[7] = {
        1.0, -1.0 / 3, 2.0 / 15, -17.0 / 315, 62.0 / 2835,
        -1382.0 / 155925, 21844.0 / 6081075};
    int ax = put(t, KOP_ABS, D, x, -1, -1);
    int small = mul(t, x, horner(t, mul(t, x, x), c, 7));
    int ac = put(t, KOP_MIN, D, ax, kf(t, 19.1), -1);
    int e = emit_exp(t, add(t, ac, ac));
    int big = sub(t, kf(t, 1.0), dv(t, kf(t, 2.0), add(t, e, kf(t, 1.0))));
    big = sel(t, D, cmp(t, KOP_LT, x, kf(t, 0.0)), neg(t, big), big);
    return sel(t, D, cmp(t, KOP_LT, ax, kf(t, 0.1)), small, big);
}

/* pow(x, y) in float64 (C99 / torch special cases). */
static int
emit_pow(tbuf *t, int x, int y)
{
    int ax = put(t, KOP_ABS, D, x, -1, -1);
    int e = emit_exp(t, mul(t, y, emit_log(t, ax)));
    int fy = put(t, KOP_FLOOR, D, y, -1, -1);
    int isint = cmp(t, KOP_EQ, fy, y);
    int hy = mul(t, y, kf(t, 0.5));
    int odd = band(t, isint, cmp(t, KOP_NE, put(t, KOP_FLOOR, D, hy, -1, -1),
                                 hy));
    int negx = cmp(t, KOP_LT, x, kf(t, 0.0));
    int xinf = cmp(t, KOP_EQ, ax, kf(t, INFINITY));
    int yinf = cmp(t, KOP_EQ, put(t, KOP_ABS, D, y, -1, -1), kf(t, INFINITY));
    int r = sel(t, D, band(t, negx, odd), neg(t, e), e);
    /* negative finite base, finite non-integer exponent: nan */
    r = sel(t, D, band(t, band(t, negx, bnot(t, isint)), bnot(t, xinf)),
            kf(t, NAN), r);
    /* (-1) ** +-inf = 1, x ** 0 = 1 (even nan), 1 ** y = 1 (even nan) */
    int one = bor(t, band(t, cmp(t, KOP_EQ, ax, kf(t, 1.0)), yinf),
                  bor(t, cmp(t, KOP_EQ, y, kf(t, 0.0)),
                      cmp(t, KOP_EQ, x, kf(t, 1.0))));
    return sel(t, D, one, kf(t, 1.0), r);
}

static int
is_rewritten(const tc_kinst *in)
{
    if (in->op == KOP_POW) {
        return in->dtype == TC_F32 || in->dtype == TC_F64;
    }
    if (in->dtype != TC_F64) {
        return 0;
    }
    return in->op == KOP_EXP || in->op == KOP_LOG || in->op == KOP_SIN
           || in->op == KOP_COS || in->op == KOP_TANH;
}

static int
expand(tbuf *t, const tc_kinst *in, const int *map)
{
    int x = map[in->a];
    if (in->op == KOP_POW) {
        int y = map[in->b];
        if (in->dtype == TC_F64) {
            return emit_pow(t, x, y);
        }
        int r = emit_pow(t, put(t, KOP_CAST, D, x, -1, -1),
                         put(t, KOP_CAST, D, y, -1, -1));
        return put(t, KOP_CAST, TC_F32, r, -1, -1);
    }
    switch (in->op) {
    case KOP_EXP:
        return emit_exp(t, x);
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

int
tc_ptx_decompose_math(tc_kernel *k)
{
    int any = 0;
    for (int i = 0; i < k->ninsts; i++) {
        any |= is_rewritten(&k->insts[i]);
    }
    if (!any) {
        return 0;
    }
    int *map = malloc(sizeof(int) * (size_t)k->ninsts);
    int *start = malloc(sizeof(int) * (size_t)(k->ninsts + 1));
    tbuf t = {0};
    if (map == NULL || start == NULL) {
        free(map);
        free(start);
        return -1;
    }
    for (int i = 0; i < k->ninsts && !t.failed; i++) {
        const tc_kinst *in = &k->insts[i];
        start[i] = t.n;
        if (is_rewritten(in)) {
            map[i] = expand(&t, in, map);
            continue;
        }
        int r = put(&t, in->op, in->dtype, -1, -1, -1);
        if (t.failed) {
            break;
        }
        t.v[r] = *in;
        t.v[r].a = in->a >= 0 ? map[in->a] : -1;
        t.v[r].b = in->b >= 0 ? map[in->b] : -1;
        t.v[r].c = in->c >= 0 ? map[in->c] : -1;
        map[i] = r;
    }
    free(map);
    if (t.failed) {
        free(t.v);
        free(start);
        return -1;
    }
    start[k->ninsts] = t.n;
    for (int p = 0; p < k->nphases; p++) {
        k->phases[p].begin = start[k->phases[p].begin];
        k->phases[p].end = start[k->phases[p].end];
    }
    free(start);
    free(k->insts);
    k->insts = t.v;
    k->ninsts = t.n;
    return 0;
}
