/* ptx_f32math.h - constants of the float32 transcendentals that
 * ptx_math.c emits as PTX (tc_ptx_f32_unary), shared with the CPU mirror
 * tests/gpu/f32math_ref.c that measures their ulp error exhaustively.
 *
 * Header-only data (static const): the PTX text and the CPU mirror read the
 * very same numbers.  Polynomial coefficients were fitted for relative
 * error (iteratively reweighted least squares on Chebyshev nodes, mpmath
 * references) and rounded to float32; their fit errors are in the comments,
 * the errors of the evaluated functions are in ptx_math.c.
 */
#ifndef TCJIT_PTX_F32MATH_H
#define TCJIT_PTX_F32MATH_H

/* 1.5 * 2^23: fma(x, c, MAGIC) rounds x * c to an integer n (|n| < 2^22)
 * whose value sits in the low mantissa bits: bits(result) = 0x4B400000 + n */
#define TC_F32M_MAGIC 0x1.8p23f
#define TC_F32M_MAGIC_BITS 0x4B400000

/* ---- sin / cos ---------------------------------------------------------
 * Fast path for |x| <= TC_F32M_TRIG_MAX: n = rint(x * 2/pi), r = x - n pi/2
 * with pi/2 in three float parts (PIO2_1 has 20 significant bits; with fma
 * each step rounds once; the sum of the parts is pi/2 to 1e-22), then
 * sin(r) or cos(r), |r| <= pi/4, by quadrant. */
#define TC_F32M_TRIG_MAX 105615.0f
#define TC_F32M_2_PI 0x1.45f306p-1f
#define TC_F32M_PIO2_1 0x1.921fb0p+0f
#define TC_F32M_PIO2_2 0x1.5110b4p-22f
#define TC_F32M_PIO2_3 0x1.84698ap-48f
/* Reduction by 2 pi for the sin.approx / cos.approx form of kernels with
 * float16 / bfloat16 results: 1/(2 pi), and 2 pi as float(2 pi) plus the
 * float of the rest (sum = 2 pi to 1e-14). */
#define TC_F32M_INV_2PI 0x1.45f306p-3f
#define TC_F32M_2PI_1 0x1.921fb6p+2f
#define TC_F32M_2PI_2 -0x1.777a5cp-23f
/* sin r = r + r^3 (S1 + S2 r^2 + S3 r^4) on |r| <= pi/4 (fit 8.5e-9) */
static const float tc_f32m_sin[3] = {-0x1.555546p-3f, 0x1.110732p-7f,
                                     -0x1.99406cp-13f};
/* cos r = 1 + r^2 (C1 + C2 r^2 + C3 r^4 + C4 r^6) (fit 2.9e-9) */
static const float tc_f32m_cos[4] = {-0x1.000000p-1f, 0x1.55553cp-5f,
                                     -0x1.6c07e2p-10f, 0x1.99130ap-16f};
/* Slow path (|x| > TC_F32M_TRIG_MAX, inf, nan): the float64 reduction of
 * src/graph/transcendental.c, exact for every float32: 1/(2 pi) in 29-bit
 * pieces, so x * piece and its fraction are exact; sin(pi r) on
 * |r| <= 1/2 by an odd degree-11 double polynomial (error 2e-11). */
static const double tc_f32m_inv2pi[5] = {
    0x1.45f306ep-3, -0x1.b1bbeadp-34, -0x1.80f62a1p-64, 0x1.1f534dep-94,
    -0x1.f924eb53361dep-125};
static const double tc_f32m_sinpi[6] = {
    3.141592653523911, -5.167712762159022, 2.550163241252819,
    -0.5992513384249386, 0.08204651137981177, -0.007022210027350119};

/* ---- exp ---------------------------------------------------------------
 * x clamped to [-104, 89] (results 0 / inf beyond), n = rint(x log2 e),
 * r = x - n ln2 (ln2 in two parts; LN2_1 has 16 significant bits),
 * e^r = 1 + r + r^2 P(r) on |r| <= ln2/2 (fit 4.2e-9), times 2^n as two
 * factors 2^(n>>1) and 2^(n - (n>>1)) so overflow gives inf and underflow
 * rounds once into the denormals. */
#define TC_F32M_EXP_LO -104.0f
#define TC_F32M_EXP_HI 89.0f
#define TC_F32M_LOG2E 0x1.715476p+0f
#define TC_F32M_LN2_1 0x1.62e400p-1f
#define TC_F32M_LN2_2 0x1.7f7d1cp-20f
static const float tc_f32m_exp[5] = {0x1.fffffcp-2f, 0x1.555490p-3f,
                                     0x1.5558fap-5f, 0x1.123b14p-7f,
                                     0x1.6a221cp-10f};

/* ---- log ---------------------------------------------------------------
 * x = 2^e m with m in [2/3, 4/3) (integer ops on the bits; denormals are
 * scaled by 2^23 first), f = m - 1 (exact), log1p(f) = f + f^2 (-1/2 +
 * f P(f)) on |f| <= 1/3 (fit 5.0e-9), + e ln2 in two parts. */
#define TC_F32M_LOG_MBIAS 0x3f2aaaab   /* bits of 2/3 */
static const float tc_f32m_log[8] = {
    0x1.555506p-2f, -0x1.fffef4p-3f, 0x1.99d04cp-3f, -0x1.559d1cp-3f,
    0x1.1ed528p-3f, -0x1.f3233ep-4f, 0x1.1e6f0cp-3f, -0x1.07dfdep-3f};

/* ---- tanh --------------------------------------------------------------
 * |x| < TANH_SMALL (or nan): x + x^3 P(x^2) (fit 4.9e-9); otherwise
 * 1 - 2 / (e^{2|x|} + 1) with |x| clamped at 9.5 (tanh rounds to 1 there),
 * e^{2|x|} by the exp core above, the reciprocal IEEE-rounded (rcp.rn),
 * sign copied from x. */
#define TC_F32M_TANH_SMALL 0.55f
#define TC_F32M_TANH_CLAMP 9.5f
static const float tc_f32m_tanh[5] = {-0x1.55553ep-2f, 0x1.1109aep-3f,
                                      -0x1.b898e4p-5f, 0x1.54b8c6p-6f,
                                      -0x1.8258fap-8f};

#endif
