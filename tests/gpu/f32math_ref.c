/* f32math_ref.c - CPU mirror of the float32 transcendentals that
 * src/gpu/ptx_math.c emits as PTX (tc_ptx_f32_unary), operation by
 * operation: fmaf for fma.rn.f32, one float rounding per add/mul, integer
 * ops on the bits, 1.0f / x for rcp.rn.f32.  Built with -ffp-contract=off
 * so the compiler adds no fusions of its own.  Measures the error against
 * double-precision libm (correctly rounded for these purposes) in ulp of
 * the float32 result, and counts inputs that would fail
 * torch.testing.assert_close's float32 tolerance (rtol 1.3e-6, atol 1e-5)
 * against the correctly rounded result.
 *
 *   tc_f32m_check(0)   ~2M inputs per function (test_ptx.c runs this)
 *   tc_f32m_check(1)   every float32 input (minutes; see f32math_main)
 */
#include "mathconst.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t
fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static float
bitsf(uint32_t u)
{
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* max.NaN / min.NaN */
static float
maxn(float a, float b)
{
    return a != a ? a : b != b ? b : a > b ? a : b;
}

static float
minn(float a, float b)
{
    return a != a ? a : b != b ? b : a < b ? a : b;
}

static float
trig_slow(float x, int is_cos)
{
    double xd = x, g = 0;
    for (int j = 0; j < 5; j++) {
        double p = xd * tc_f32m_inv2pi[j];
        double fr = p - nearbyint(p);
        g = j == 0 ? fr : g + fr;
    }
    double tt = g + g;
    if (is_cos) {
        tt = tt + 0.5;
    }
    double k = nearbyint(tt);
    double r = tt - k;
    double z = r * r;
    double p = tc_f32m_sinpi[5];
    for (int i = 4; i >= 0; i--) {
        p = p * z + tc_f32m_sinpi[i];
    }
    float y = (float)(r * p);
    /* cvt.rzi.s32.f64 of nan is 0 */
    int32_t ki = k != k ? 0 : (int32_t)k;
    return bitsf(fbits(y) ^ ((uint32_t)(ki & 1) << 31));
}

float
tc_ref_sincosf(float x, int is_cos)
{
    if (!(fabsf(x) <= TC_F32M_TRIG_MAX)) {
        return trig_slow(x, is_cos);
    }
    float j = fmaf(x, TC_F32M_2_PI, TC_F32M_MAGIC);
    uint32_t k = fbits(j);
    float q = j - TC_F32M_MAGIC;
    float r = fmaf(q, -TC_F32M_PIO2_1, x);
    r = fmaf(q, -TC_F32M_PIO2_2, r);
    r = fmaf(q, -TC_F32M_PIO2_3, r);
    float s = r * r;
    float ps = fmaf(tc_f32m_sin[2], s, tc_f32m_sin[1]);
    ps = fmaf(ps, s, tc_f32m_sin[0]);
    float t = s * r;
    float sn = fmaf(ps, t, r);
    float pc = fmaf(tc_f32m_cos[3], s, tc_f32m_cos[2]);
    pc = fmaf(pc, s, tc_f32m_cos[1]);
    pc = fmaf(pc, s, tc_f32m_cos[0]);
    float cs = fmaf(pc, s, 1.0f);
    if (is_cos) {
        k += 1;
    }
    float v = (k & 1) ? cs : sn;
    v = bitsf(fbits(v) ^ ((k & 2) << 30));
    return !is_cos && x == 0 ? x : v;   /* sin(-0) is -0 */
}

/* e^r * 2^n for the exp core: r reduced, n = bits(j) - MAGIC_BITS */
static float
exp_poly(float r)
{
    float p = fmaf(tc_f32m_exp[4], r, tc_f32m_exp[3]);
    p = fmaf(p, r, tc_f32m_exp[2]);
    p = fmaf(p, r, tc_f32m_exp[1]);
    p = fmaf(p, r, tc_f32m_exp[0]);
    float t = r * r;
    float u = fmaf(p, t, r);
    return u + 1.0f;
}

float
tc_ref_expf(float x)
{
    float xc = minn(maxn(x, TC_F32M_EXP_LO), TC_F32M_EXP_HI);
    float j = fmaf(xc, TC_F32M_LOG2E, TC_F32M_MAGIC);
    int32_t n = (int32_t)(fbits(j) - TC_F32M_MAGIC_BITS);
    float q = j - TC_F32M_MAGIC;
    float r = fmaf(q, -TC_F32M_LN2_1, xc);
    r = fmaf(q, -TC_F32M_LN2_2, r);
    float e = exp_poly(r);
    int32_t n1 = n >> 1, n2 = n - n1;
    float s1 = bitsf((uint32_t)(n1 + 127) << 23);
    float s2 = bitsf((uint32_t)(n2 + 127) << 23);
    return (e * s1) * s2;
}

float
tc_ref_logf(float x)
{
    int tiny = x < 0x1p-126f;
    float xs = tiny ? x * 0x1p23f : x;
    int32_t ix = (int32_t)fbits(xs);
    int32_t e = (ix - TC_F32M_LOG_MBIAS) >> 23;
    float m = bitsf((uint32_t)(ix - (int32_t)((uint32_t)e << 23)));
    e = e - (tiny ? 23 : 0);
    float ef = (float)e;
    float f = m - 1.0f;
    float p = tc_f32m_log[7];
    for (int i = 6; i >= 0; i--) {
        p = fmaf(p, f, tc_f32m_log[i]);
    }
    p = fmaf(p, f, -0.5f);
    float t = f * f;
    float r = fmaf(p, t, f);
    r = fmaf(ef, TC_F32M_LN2_2, r);
    r = fmaf(ef, TC_F32M_LN2_1, r);
    if (x == INFINITY) {
        r = x;
    }
    if (x == 0.0f) {
        r = -INFINITY;
    }
    if (!(x >= 0.0f)) {         /* setp.ltu: negative or nan */
        r = NAN;
    }
    return r;
}

float
tc_ref_tanhf(float x)
{
    float ax = fabsf(x);
    float z = x * x;
    float p = fmaf(tc_f32m_tanh[4], z, tc_f32m_tanh[3]);
    p = fmaf(p, z, tc_f32m_tanh[2]);
    p = fmaf(p, z, tc_f32m_tanh[1]);
    p = fmaf(p, z, tc_f32m_tanh[0]);
    float small = fmaf(p, z * x, x);
    /* min.f32 (not NaN-propagating: nan takes the small path below) */
    float a2 = fminf(ax, TC_F32M_TANH_CLAMP);
    a2 = a2 + a2;
    float j = fmaf(a2, TC_F32M_LOG2E, TC_F32M_MAGIC);
    int32_t n = (int32_t)(fbits(j) - TC_F32M_MAGIC_BITS);
    float q = j - TC_F32M_MAGIC;
    float r = fmaf(q, -TC_F32M_LN2_1, a2);
    r = fmaf(q, -TC_F32M_LN2_2, r);
    float e = exp_poly(r) * bitsf((uint32_t)(n + 127) << 23);
    float big = fmaf(-2.0f, 1.0f / (e + 1.0f), 1.0f);
    big = bitsf(fbits(big) | (fbits(x) & 0x80000000u));
    return !(ax >= TC_F32M_TANH_SMALL) ? small : big;   /* setp.ltu */
}

/* ---- error measurement ---------------------------------------------------- */

static double
ulp_of(double w)
{
    float f = (float)w;
    if (f != f || isinf(f)) {
        return INFINITY;
    }
    int e;
    frexpf(fabsf(f) > 0 ? fabsf(f) : 0x1p-149f, &e);
    /* f in [2^(e-1), 2^e): ulp 2^(e-24), at least 2^-149 */
    double u = ldexp(1.0, e - 24);
    return u < 0x1p-149 ? 0x1p-149 : u;
}

typedef struct {
    const char *name;
    double max_ulp, max_ulp_x;
    double max_abs, max_abs_x;
    long long n, fails, nonfinite_bad;
} stat;

static void
account(stat *s, float x, float g, double w)
{
    s->n++;
    float wf = (float)w;
    if (wf != wf || isinf(wf)) {
        /* nan / overflow: must agree exactly in kind */
        int ok = (wf != wf && g != g) || (isinf(wf) && g == wf);
        if (!ok && fabs(w) < 3.4028234663852886e38) {
            /* w finite in double, rounds to inf: g may be FLT_MAX */
            ok = isinf(g) || fabsf(g) == 3.40282347e38f;
        }
        s->nonfinite_bad += !ok;
        s->fails += !ok;
        return;
    }
    if (g != g || isinf(g)) {
        s->fails++;
        s->nonfinite_bad++;
        return;
    }
    double d = fabs((double)g - w);
    double u = d / ulp_of(w);
    if (u > s->max_ulp) {
        s->max_ulp = u;
        s->max_ulp_x = x;
    }
    if (d > s->max_abs) {
        s->max_abs = d;
        s->max_abs_x = x;
    }
    /* assert_close against eager's (correctly rounded) float result */
    if (!((double)g == (double)wf
          || fabs((double)g - (double)wf) <= 1e-5 + 1.3e-6 * fabs(wf))) {
        s->fails++;
    }
}

static void
report(const stat *s)
{
    printf("%s f32 %-5s n=%lld max %.3f ulp (x=%.9g) max abs %.3g (x=%.9g)"
           " assert_close failures %lld\n",
           s->fails ? "FAIL" : "PASS", s->name, s->n, s->max_ulp,
           s->max_ulp_x, s->max_abs, s->max_abs_x, s->fails);
}

/* Inputs: exhaustive over the non-negative floats (the functions are odd
 * or even, or sign-handled, except exp which also runs the negatives), or
 * a stride through the bit patterns plus specials. */
static int
check(int exhaustive, int only)
{
    static const char *names[5] = {"sin", "cos", "exp", "log", "tanh"};
    int fails = 0;
    uint32_t step = exhaustive ? 1 : 2039;
    for (int f = 0; f < 5; f++) {
        if (only >= 0 && f != only) {
            continue;
        }
        stat s;
        memset(&s, 0, sizeof(s));
        s.name = names[f];
        int both_signs = f == 2 || !exhaustive;
        for (int sign = 0; sign <= both_signs; sign++) {
            for (uint64_t b = 0; b <= 0x7f800000u; b += step) {
                float x = bitsf((uint32_t)b | (sign ? 0x80000000u : 0));
                float g;
                double w;
                switch (f) {
                case 0: g = tc_ref_sincosf(x, 0); w = sin((double)x); break;
                case 1: g = tc_ref_sincosf(x, 1); w = cos((double)x); break;
                case 2: g = tc_ref_expf(x); w = exp((double)x); break;
                case 3: g = tc_ref_logf(x); w = log((double)x); break;
                default: g = tc_ref_tanhf(x); w = tanh((double)x); break;
                }
                account(&s, x, g, w);
            }
        }
        /* specials and the fast / slow trig boundary */
        static const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN,
                                   1e-45f, -1e-45f, 0x1p-126f, 88.72f, 89.0f,
                                   -103.9f, -104.0f, 105615.0f, 105616.0f,
                                   -105615.0f, 3.4e38f, -3.4e38f, 0.55f,
                                   -0.55f, 9.5f, 1.0f};
        for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++) {
            float x = sp[i], g;
            double w;
            switch (f) {
            case 0: g = tc_ref_sincosf(x, 0); w = sin((double)x); break;
            case 1: g = tc_ref_sincosf(x, 1); w = cos((double)x); break;
            case 2: g = tc_ref_expf(x); w = exp((double)x); break;
            case 3: g = tc_ref_logf(x); w = log((double)x); break;
            default: g = tc_ref_tanhf(x); w = tanh((double)x); break;
            }
            account(&s, x, g, w);
        }
        report(&s);
        fails += s.fails != 0;
    }
    return fails;
}

int
tc_f32m_check(int exhaustive)
{
    return check(exhaustive, -1);
}

#ifdef TC_F32MATH_MAIN
/* gcc -O2 -ffp-contract=off -DTC_F32MATH_MAIN -Isrc/gpu \
 *     tests/gpu/f32math_ref.c -lm && ./a.out [--exhaustive [0-4]]
 * (0 sin, 1 cos, 2 exp, 3 log, 4 tanh; one function per process to run
 * them in parallel: each takes ~7 minutes exhaustively) */
int
main(int argc, char **argv)
{
    int ex = argc > 1 && strcmp(argv[1], "--exhaustive") == 0;
    return check(ex, argc > 2 ? atoi(argv[2]) : -1) != 0;
}
#endif
