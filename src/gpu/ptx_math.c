/* ptx_math.c - what the PTX target computes itself of the transcendentals
 * (tc_ptx_math_target) and how: float32 EXP, LOG, SIN, COS, TANH as PTX
 * text (tc_ptx_f32_unary).  Everything else (float64 math, ERF, POW) is
 * decomposed into KIR by src/graph/transcendental.c before emission: PTX
 * has no float64 exp/log/sin (only libdevice, which tcjit does not ship).
 */
#include "ptx.h"
#include "../graph/mathconst.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The float32 ops below, nothing else: not ERF (polynomials plus an EXP,
 * which then comes here), not POW (float64 exp(y log|x|) in KIR). */
const tc_math_target tc_ptx_math_target = {
    "ptx",
    {[KOP_EXP] = TC_MATH_F32, [KOP_LOG] = TC_MATH_F32,
     [KOP_SIN] = TC_MATH_F32, [KOP_COS] = TC_MATH_F32,
     [KOP_TANH] = TC_MATH_F32}};

/* ---- float32 transcendentals as PTX ---------------------------------------
 *
 * Why not the KIR decomposition of transcendental.c: KIR has no fused
 * multiply-add and no branch, and the float32 versions run in the innermost
 * loop of bandwidth-bound kernels (the 16M-element sin/cos chain of
 * DESIGN.md is compute-bound with the float64 reduction of
 * src/graph/transcendental.c: ~35 float64 ops per sin, 2011 GB/s on an H200
 * against 3940 for a copy). Written directly in PTX they can use fma.rn.f32
 * (one rounding, IEEE, so the CPU mirror tests/gpu/f32math_ref.c reproduces
 * every bit with fmaf) and a branch to an exact slow path that only huge
 * arguments take.  Each op is one `{ ... }` block with block-scoped
 * registers.  Constants and methods: graph/mathconst.h.  Max errors over
 * EVERY float32 input, measured by the CPU mirror against double libm
 * (f32math_ref.c --exhaustive; the device harness checks the GPU reproduces
 * the mirror bit for bit), in ulp of the float32 result; no input fails
 * assert_close's float32 tolerance:
 *
 *   sin  |x| <= 105615: fma Cody-Waite (n = rint(x 2/pi) by the 1.5 * 2^23
 *        trick, 3-part pi/2), degree-7 sin / degree-8 cos polynomials on
 *        |r| <= pi/4 picked and signed by n mod 4: 1.53 ulp (abs 7.3e-8).
 *        Beyond (and inf / nan) a per-thread branch to the float64
 *        reduction of transcendental.c (exact for every float32; rarely
 *        taken, so the divergence costs nothing): 1.80 ulp overall.
 *   cos  same with quadrant n + 1: 1.54 ulp fast path, 2.68 overall (the
 *        slow path's 2e-11 absolute error, next to zeros of cos at 1e28).
 *   exp  clamp to [-104, 89], fma Cody-Waite by ln2, degree-6 polynomial,
 *        2^n as two factors (denormal results round once): 1.01 ulp.
 *   log  integer split x = 2^e m, m in [2/3, 4/3), degree-10 log1p
 *        polynomial, e ln2 in two parts, denormals scaled by 2^23, special
 *        values by selects: 0.93 ulp.
 *   tanh |x| < 0.55: odd degree-13 polynomial; else 1 - 2 / (e^{2|x|} + 1)
 *        with the exp core and rcp.rn, sign copied: 1.46 ulp.
 *
 * Not used for float32 results: sin.approx / cos.approx (absolute error
 * 2^-20.9 only on |x| <= pi, no reduction; kernels whose results are all
 * float16 / bfloat16 use them after a reduction, see f32_sincos_half),
 * ex2.approx (2 ulp on top of the rounding of x log2(e), which alone is
 * 2^-18 relative at |x| ~ 88: more than rtol 1.3e-6), lg2.approx (absolute
 * error, large relative error near x = 1). The polynomials cost a few more
 * FMAs than those, but the FP32 pipe has headroom: ~25 ops per fast sin or
 * cos, so the 16M-element chain (sin + cos, relu, * 2 + 1) needs ~60 ops per
 * element, ~30 us of issue on an H200 (132 SMs x 128 lanes x 1.98 GHz)
 * against ~51 us for its 201 MB of memory traffic at copy bandwidth:
 * memory-bound, where the float64 reduction (~35 double ops per call, at
 * half rate) was not.
 */

typedef struct {
    tc_ptx_printf pr;
    void *ctx;
} pp;

#define PL(...) p->pr(p->ctx, __VA_ARGS__)

/* immediate operand text */
static const char *
fi(char *buf, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    snprintf(buf, 16, "0f%08X", u);
    return buf;
}

static const char *
di(char *buf, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    snprintf(buf, 24, "0d%016llX", (unsigned long long)u);
    return buf;
}

/* e = e^r (r in %m<rr>, |r| <= ln2/2 + eps) into %m<ed>, uses %m<tmp> */
static void
f32_exp_poly(pp *p, int rr, int ed, int tmp)
{
    char a[16], b[16];
    PL("fma.rn.f32 %%m%d, %%m%d, %s, %s;", ed, rr, fi(a, tc_f32m_exp[4]),
      fi(b, tc_f32m_exp[3]));
    for (int i = 2; i >= 0; i--) {
        PL("fma.rn.f32 %%m%d, %%m%d, %%m%d, %s;", ed, ed, rr,
          fi(a, tc_f32m_exp[i]));
    }
    PL("mul.rn.f32 %%m%d, %%m%d, %%m%d;", tmp, rr, rr);
    PL("fma.rn.f32 %%m%d, %%m%d, %%m%d, %%m%d;", ed, ed, tmp, rr);
    PL("add.rn.f32 %%m%d, %%m%d, 0f3F800000;", ed, ed);
}

/* n (%n<nn>, integer) and r (%m<rr>) with x = n ln2 + r, for x in %m<xr> */
static void
f32_exp_reduce(pp *p, int xr, int nn, int rr, int tmp)
{
    char a[16], b[16];
    PL("fma.rn.f32 %%m%d, %%m%d, %s, %s;", tmp, xr, fi(a, TC_F32M_LOG2E),
      fi(b, TC_F32M_MAGIC));
    PL("mov.b32 %%n%d, %%m%d;", nn, tmp);
    PL("sub.s32 %%n%d, %%n%d, %d;", nn, nn, TC_F32M_MAGIC_BITS);
    PL("sub.rn.f32 %%m%d, %%m%d, %s;", tmp, tmp, fi(a, TC_F32M_MAGIC));
    PL("fma.rn.f32 %%m%d, %%m%d, %s, %%m%d;", rr, tmp, fi(a, -TC_F32M_LN2_1),
      xr);
    PL("fma.rn.f32 %%m%d, %%m%d, %s, %%m%d;", rr, tmp, fi(a, -TC_F32M_LN2_2),
      rr);
}

/* The slow path of both sin / cos forms (label $tcm_slow_<uid>): the
 * float64 reduction, exact for every float32 argument. */
static void
f32_sincos_slow(pp *p, const char *d, const char *x, int is_cos, int uid)
{
    char c[24];
    p->pr(p->ctx, "$tcm_slow_%d:", uid);
    PL("cvt.f64.f32 %%md0, %s;", x);
    for (int j = 0; j < 5; j++) {
        PL("mul.rn.f64 %%md1, %%md0, %s;", di(c, tc_f32m_inv2pi[j]));
        PL("cvt.rni.f64.f64 %%md2, %%md1;");
        if (j == 0) {
            PL("sub.rn.f64 %%md3, %%md1, %%md2;");
        }
        else {
            PL("sub.rn.f64 %%md1, %%md1, %%md2;");
            PL("add.rn.f64 %%md3, %%md3, %%md1;");
        }
    }
    PL("add.rn.f64 %%md4, %%md3, %%md3;");
    if (is_cos) {
        PL("add.rn.f64 %%md4, %%md4, 0d3FE0000000000000;");
    }
    PL("cvt.rni.f64.f64 %%md5, %%md4;");
    PL("sub.rn.f64 %%md6, %%md4, %%md5;");
    PL("mul.rn.f64 %%md7, %%md6, %%md6;");
    PL("mov.f64 %%md8, %s;", di(c, tc_f32m_sinpi[5]));
    for (int i = 4; i >= 0; i--) {
        PL("mul.rn.f64 %%md8, %%md8, %%md7;");
        PL("add.rn.f64 %%md8, %%md8, %s;", di(c, tc_f32m_sinpi[i]));
    }
    PL("mul.rn.f64 %%md8, %%md6, %%md8;");
    PL("cvt.rn.f32.f64 %%m9, %%md8;");
    PL("cvt.rzi.s32.f64 %%n4, %%md5;");
    PL("and.b32 %%n4, %%n4, 1;");
    PL("shl.b32 %%n4, %%n4, 31;");
    PL("mov.b32 %%n5, %%m9;");
    PL("xor.b32 %%n5, %%n5, %%n4;");
    PL("mov.b32 %s, %%n5;", d);
}

/* Both sin / cos forms: arguments beyond the fast path's reduction (and
 * inf / nan) branch to the slow path; the fast path ends by jumping over
 * it. */
static void
f32_sincos_enter(pp *p, const char *x, int uid)
{
    char a[16];
    PL("abs.f32 %%m0, %s;", x);
    PL("setp.gtu.f32 %%o0, %%m0, %s;", fi(a, TC_F32M_TRIG_MAX));
    PL("@%%o0 bra $tcm_slow_%d;", uid);
}

static void
f32_sincos_leave(pp *p, const char *d, const char *x, int is_cos, int uid)
{
    PL("bra $tcm_done_%d;", uid);
    f32_sincos_slow(p, d, x, is_cos, uid);
    p->pr(p->ctx, "$tcm_done_%d:", uid);
}

static void
f32_sincos(pp *p, const char *d, const char *x, int is_cos, int uid)
{
    char a[16], b[16];
    f32_sincos_enter(p, x, uid);
    PL("fma.rn.f32 %%m1, %s, %s, %s;", x, fi(a, TC_F32M_2_PI),
      fi(b, TC_F32M_MAGIC));
    PL("mov.b32 %%n0, %%m1;");
    PL("sub.rn.f32 %%m2, %%m1, %s;", fi(a, TC_F32M_MAGIC));
    PL("fma.rn.f32 %%m3, %%m2, %s, %s;", fi(a, -TC_F32M_PIO2_1), x);
    PL("fma.rn.f32 %%m3, %%m2, %s, %%m3;", fi(a, -TC_F32M_PIO2_2));
    PL("fma.rn.f32 %%m3, %%m2, %s, %%m3;", fi(a, -TC_F32M_PIO2_3));
    PL("mul.rn.f32 %%m4, %%m3, %%m3;");
    PL("fma.rn.f32 %%m5, %%m4, %s, %s;", fi(a, tc_f32m_sin[2]),
      fi(b, tc_f32m_sin[1]));
    PL("fma.rn.f32 %%m5, %%m5, %%m4, %s;", fi(a, tc_f32m_sin[0]));
    PL("mul.rn.f32 %%m6, %%m4, %%m3;");
    PL("fma.rn.f32 %%m6, %%m5, %%m6, %%m3;");
    PL("fma.rn.f32 %%m7, %%m4, %s, %s;", fi(a, tc_f32m_cos[3]),
      fi(b, tc_f32m_cos[2]));
    PL("fma.rn.f32 %%m7, %%m7, %%m4, %s;", fi(a, tc_f32m_cos[1]));
    PL("fma.rn.f32 %%m7, %%m7, %%m4, %s;", fi(a, tc_f32m_cos[0]));
    PL("fma.rn.f32 %%m7, %%m7, %%m4, 0f3F800000;");
    if (is_cos) {
        PL("add.s32 %%n0, %%n0, 1;");
    }
    PL("and.b32 %%n1, %%n0, 1;");
    PL("setp.ne.u32 %%o1, %%n1, 0;");
    PL("selp.f32 %%m8, %%m7, %%m6, %%o1;");
    PL("and.b32 %%n2, %%n0, 2;");
    PL("shl.b32 %%n2, %%n2, 30;");
    PL("mov.b32 %%n3, %%m8;");
    PL("xor.b32 %%n3, %%n3, %%n2;");
    PL("mov.b32 %%m8, %%n3;");
    if (!is_cos) {
        /* sin(-0) is -0 (the reduction may give +0) */
        PL("setp.eq.f32 %%o1, %s, 0f00000000;", x);
        PL("selp.f32 %%m8, %s, %%m8, %%o1;", x);
    }
    PL("mov.f32 %s, %%m8;", d);
    f32_sincos_leave(p, d, x, is_cos, uid);
}

/* sin / cos of a kernel whose float results are all float16 / bfloat16
 * (TC_PTX_MATH_HALF_RESULTS): r = x - k 2pi with 2pi in two float parts
 * (k = rint(x / 2pi) by the MAGIC trick; |r| <= pi plus a rounding),
 * then the hardware's sin.approx / cos.approx (MUFU) on r.  sin.approx is
 * specified to 2^-20.9 absolute error on [-pi, pi]; with the reduction's
 * rounding the device harness (tests/gpu/harness.c, f32_trig_half)
 * measures at most ~1e-6 over |x| <= TC_F32M_TRIG_MAX.  That is below the
 * tolerance a reduced-float result is compared at (assert_close: atol
 * 1e-5, rtol 1e-3 for float16 and 1.6e-2 for bfloat16) and below the
 * rounding eager itself applies after every op (2^-9 relative for
 * bfloat16, 2^-12 for float16, i.e. >= 2e-6 wherever |sin x| > 1e-3).
 * Float32 results never take this path: 2^-20.9 absolute is far beyond
 * rtol 1.3e-6 near the zeros of sin and cos.  Larger |x|, inf and nan
 * branch to the exact slow path as in f32_sincos.  The fast path is 6
 * ops instead of ~25: the 16M bfloat16 chain of DESIGN.md (sin + cos per
 * element) was compute-bound with the polynomial form.  Tiny arguments of
 * sin return x itself: bfloat16 has float32's range, and an absolute error
 * of 1e-6 on sin(1e-28) is no rounding. */
static void
f32_sincos_half(pp *p, const char *d, const char *x, int is_cos, int uid)
{
    char a[16], b[16];
    f32_sincos_enter(p, x, uid);
    PL("fma.rn.f32 %%m1, %s, %s, %s;", x, fi(a, TC_F32M_INV_2PI),
      fi(b, TC_F32M_MAGIC));
    PL("sub.rn.f32 %%m1, %%m1, %s;", fi(a, TC_F32M_MAGIC));
    PL("fma.rn.f32 %%m2, %%m1, %s, %s;", fi(a, -TC_F32M_2PI_1), x);
    PL("fma.rn.f32 %%m2, %%m1, %s, %%m2;", fi(a, -TC_F32M_2PI_2));
    PL("%s.approx.f32 %%m3, %%m2;", is_cos ? "cos" : "sin");
    if (!is_cos) {
        /* sin x = x (to 2^-14 relative) for |x| < 2^-6, where the absolute
         * error of sin.approx would be a large relative one (a later
         * division by a tiny sin showed it: fuzzer, bfloat16) */
        PL("setp.lt.f32 %%o1, %%m0, 0f3C800000;");
        PL("selp.f32 %%m3, %s, %%m3, %%o1;", x);
    }
    PL("mov.f32 %s, %%m3;", d);
    f32_sincos_leave(p, d, x, is_cos, uid);
}

static void
f32_exp(pp *p, const char *d, const char *x, int sm)
{
    char a[16];
    /* NaN-propagating clamp (sm_80+); older targets fix NaN at the end */
    const char *nan = sm >= 80 ? ".NaN" : "";
    PL("max%s.f32 %%m0, %s, %s;", nan, x, fi(a, TC_F32M_EXP_LO));
    PL("min%s.f32 %%m0, %%m0, %s;", nan, fi(a, TC_F32M_EXP_HI));
    f32_exp_reduce(p, 0, 0, 1, 2);
    f32_exp_poly(p, 1, 3, 2);
    PL("shr.s32 %%n1, %%n0, 1;");
    PL("sub.s32 %%n2, %%n0, %%n1;");
    PL("add.s32 %%n1, %%n1, 127;");
    PL("shl.b32 %%n1, %%n1, 23;");
    PL("add.s32 %%n2, %%n2, 127;");
    PL("shl.b32 %%n2, %%n2, 23;");
    PL("mov.b32 %%m4, %%n1;");
    PL("mov.b32 %%m5, %%n2;");
    PL("mul.rn.f32 %%m3, %%m3, %%m4;");
    if (sm >= 80) {
        PL("mul.rn.f32 %s, %%m3, %%m5;", d);
        return;
    }
    PL("mul.rn.f32 %%m3, %%m3, %%m5;");
    PL("setp.nan.f32 %%o0, %s, %s;", x, x);
    PL("selp.f32 %s, %s, %%m3, %%o0;", d, x);
}

/* exp(x) for x <= 0 or NaN (TC_PTX_MATH_EXP_NONPOS): the reduction x =
 * n ln2 + r of f32_exp, 2^(r log2e) by the hardware (|r log2e| <= 0.5:
 * relative error about 2^-22), times 2^n built in the exponent field (n
 * >= -126 after the clamp at -87, where e^x is still a normal float);
 * 0 below -87, NaN for NaN (the setp is false for it). */
static void
f32_exp_nonpos(pp *p, const char *d, const char *x, int sm)
{
    char a[16];
    /* NaN-propagating clamp (sm_80+); older targets fix NaN at the end */
    PL("max%s.f32 %%m0, %s, 0fC2AE0000;", sm >= 80 ? ".NaN" : "", x);
    f32_exp_reduce(p, 0, 0, 1, 2);
    PL("mul.rn.f32 %%m1, %%m1, %s;", fi(a, TC_F32M_LOG2E));
    PL("ex2.approx.ftz.f32 %%m3, %%m1;");
    PL("add.s32 %%n0, %%n0, 127;");
    PL("shl.b32 %%n0, %%n0, 23;");
    PL("mov.b32 %%m4, %%n0;");
    PL("mul.rn.f32 %%m3, %%m3, %%m4;");
    PL("setp.lt.f32 %%o0, %s, 0fC2AE0000;", x);         /* -87 */
    PL("selp.f32 %%m3, 0f00000000, %%m3, %%o0;");
    if (sm < 80) {
        PL("setp.nan.f32 %%o0, %s, %s;", x, x);
        PL("selp.f32 %%m3, %s, %%m3, %%o0;", x);
    }
    PL("mov.f32 %s, %%m3;", d);
}

static void
f32_log(pp *p, const char *d, const char *x)
{
    char a[16], b[16];
    PL("setp.lt.f32 %%o0, %s, 0f00800000;", x);
    PL("mul.rn.f32 %%m0, %s, 0f4B000000;", x);
    PL("selp.f32 %%m0, %%m0, %s, %%o0;", x);
    PL("mov.b32 %%n0, %%m0;");
    PL("sub.s32 %%n1, %%n0, %d;", TC_F32M_LOG_MBIAS);
    PL("shr.s32 %%n1, %%n1, 23;");
    PL("shl.b32 %%n2, %%n1, 23;");
    PL("sub.s32 %%n2, %%n0, %%n2;");
    PL("mov.b32 %%m1, %%n2;");
    PL("selp.s32 %%n3, 23, 0, %%o0;");
    PL("sub.s32 %%n1, %%n1, %%n3;");
    PL("cvt.rn.f32.s32 %%m2, %%n1;");
    PL("sub.rn.f32 %%m3, %%m1, 0f3F800000;");
    PL("fma.rn.f32 %%m4, %%m3, %s, %s;", fi(a, tc_f32m_log[7]),
      fi(b, tc_f32m_log[6]));
    for (int i = 5; i >= 0; i--) {
        PL("fma.rn.f32 %%m4, %%m4, %%m3, %s;", fi(a, tc_f32m_log[i]));
    }
    PL("fma.rn.f32 %%m4, %%m4, %%m3, 0fBF000000;");
    PL("mul.rn.f32 %%m5, %%m3, %%m3;");
    PL("fma.rn.f32 %%m5, %%m4, %%m5, %%m3;");
    PL("fma.rn.f32 %%m5, %%m2, %s, %%m5;", fi(a, TC_F32M_LN2_2));
    PL("fma.rn.f32 %%m5, %%m2, %s, %%m5;", fi(a, TC_F32M_LN2_1));
    PL("setp.eq.f32 %%o1, %s, 0f7F800000;", x);
    PL("selp.f32 %%m5, %s, %%m5, %%o1;", x);
    PL("setp.eq.f32 %%o1, %s, 0f00000000;", x);
    PL("selp.f32 %%m5, 0fFF800000, %%m5, %%o1;");
    PL("setp.ltu.f32 %%o1, %s, 0f00000000;", x);
    PL("selp.f32 %s, 0f7FFFFFFF, %%m5, %%o1;", d);
}

/* 1 - 2 / (e^{2|x|} + 1): the reciprocal's operand lies in [2, 1.8e8]
 * (|x| clamped to TC_F32M_TANH_CLAMP).  On that range rcp.approx.ftz and
 * one fma Newton step equal rcp.rn bit for bit: checked for every float in
 * [2, 2^29) and [2^-100, 2^100) on an H200 (sm_90; a kernel of one thread
 * per bit pattern counting the differences: none).  rcp.rn branches to a
 * slow path, and ptxas moved no load above that branch: GPT-2's GELU
 * forward [4096, 3072] + bias took 33.0 us with it, 30.0 with the Newton
 * step.  Reductions keep rcp.rn (newton 0): with the Newton step, ptxas
 * gave the split column tiles of GELU's backward fewer registers, 40.2 ->
 * 44.3 us. */
static void
f32_tanh(pp *p, const char *d, const char *x, int newton)
{
    char a[16], b[16];
    PL("abs.f32 %%m0, %s;", x);
    PL("mul.rn.f32 %%m1, %s, %s;", x, x);
    PL("fma.rn.f32 %%m2, %%m1, %s, %s;", fi(a, tc_f32m_tanh[4]),
      fi(b, tc_f32m_tanh[3]));
    for (int i = 2; i >= 0; i--) {
        PL("fma.rn.f32 %%m2, %%m2, %%m1, %s;", fi(a, tc_f32m_tanh[i]));
    }
    PL("mul.rn.f32 %%m3, %%m1, %s;", x);
    PL("fma.rn.f32 %%m3, %%m2, %%m3, %s;", x);
    PL("min.f32 %%m4, %%m0, %s;", fi(a, TC_F32M_TANH_CLAMP));
    PL("add.rn.f32 %%m4, %%m4, %%m4;");
    f32_exp_reduce(p, 4, 0, 5, 6);
    f32_exp_poly(p, 5, 7, 6);
    PL("add.s32 %%n0, %%n0, 127;");
    PL("shl.b32 %%n0, %%n0, 23;");
    PL("mov.b32 %%m8, %%n0;");
    PL("mul.rn.f32 %%m7, %%m7, %%m8;");
    PL("add.rn.f32 %%m7, %%m7, 0f3F800000;");
    if (newton) {
        PL("rcp.approx.ftz.f32 %%m8, %%m7;");
        PL("neg.f32 %%m7, %%m7;");
        PL("fma.rn.f32 %%m7, %%m7, %%m8, 0f3F800000;");
        PL("fma.rn.f32 %%m7, %%m8, %%m7, %%m8;");
    }
    else {
        PL("rcp.rn.f32 %%m7, %%m7;");
    }
    PL("fma.rn.f32 %%m7, %%m7, 0fC0000000, 0f3F800000;");
    PL("mov.b32 %%n1, %%m7;");
    PL("mov.b32 %%n2, %s;", x);
    PL("and.b32 %%n2, %%n2, -2147483648;");
    PL("or.b32 %%n1, %%n1, %%n2;");
    PL("mov.b32 %%m7, %%n1;");
    PL("setp.ltu.f32 %%o0, %%m0, %s;", fi(a, TC_F32M_TANH_SMALL));
    PL("selp.f32 %s, %%m3, %%m7, %%o0;", d);
}

int
tc_ptx_f32_unary(tc_kop op, int sm, int flags, const char *d, const char *x,
                 int uid, tc_ptx_printf pr, void *ctx)
{
    pp p0 = {pr, ctx}, *p = &p0;
    if (op != KOP_EXP && op != KOP_LOG && op != KOP_SIN && op != KOP_COS
        && op != KOP_TANH) {
        return -1;
    }
    /* block-scoped temporaries: %m f32, %n b32, %o pred, %md f64 */
    PL("{");
    PL(".reg .f32 %%m<10>;");
    PL(".reg .b32 %%n<6>;");
    PL(".reg .pred %%o<2>;");
    if (op == KOP_SIN || op == KOP_COS) {
        PL(".reg .f64 %%md<9>;");
    }
    switch (op) {
    case KOP_SIN:
    case KOP_COS:
        if (flags & TC_PTX_MATH_HALF_RESULTS) {
            f32_sincos_half(p, d, x, op == KOP_COS, uid);
        }
        else {
            f32_sincos(p, d, x, op == KOP_COS, uid);
        }
        break;
    case KOP_EXP:
        if (flags & TC_PTX_MATH_EXP_NONPOS) {
            f32_exp_nonpos(p, d, x, sm);
        }
        else {
            f32_exp(p, d, x, sm);
        }
        break;
    case KOP_LOG:
        f32_log(p, d, x);
        break;
    default:
        f32_tanh(p, d, x, (flags & TC_PTX_MATH_RCP_NEWTON) != 0);
        break;
    }
    PL("}");
    return 0;
}
