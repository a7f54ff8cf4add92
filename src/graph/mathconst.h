/* mathconst.h - every constant of tcjit's transcendentals, defined once:
 * the KIR decompositions (src/graph/transcendental.c, all targets), the
 * float32 PTX sequences (src/gpu/ptx_math.c, tc_ptx_f32_unary) and the
 * CPU mirror of those sequences (tests/gpu/f32math_ref.c, which measures
 * their ulp error exhaustively).
 *
 * Header-only data (static const): generated code and its mirrors read the
 * very same numbers.  Polynomial coefficients were fitted for relative
 * error (iteratively reweighted least squares on Chebyshev nodes, mpmath
 * references); fit errors are in the comments, the errors of the evaluated
 * functions next to the code that evaluates them.
 *
 * Sections: shared float32 reduction constants; the float32 PTX sequences
 * (TC_F32M_*, tc_f32m_*); the float32 KIR forms (tc_kf32_*); the float64
 * KIR forms (TC_F64M_*).
 */
#ifndef TCJIT_MATHCONST_H
#define TCJIT_MATHCONST_H

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
/* Slow path (|x| > TC_F32M_TRIG_MAX, inf, nan), and the exact float32
 * sin/cos of the KIR decomposition (transcendental.c, emit_sincos): a
 * float64 reduction, exact for every float32: 1/(2 pi) in 29-bit pieces,
 * so x * piece and its fraction are exact; sin(pi r) on |r| <= 1/2 by an
 * odd degree-11 double polynomial (error 2e-11). */
static const double tc_f32m_inv2pi[5] = {
    0x1.45f306ep-3, -0x1.b1bbeadp-34, -0x1.80f62a1p-64, 0x1.1f534dep-94,
    -0x1.f924eb53361dep-125};
static const double tc_f32m_sinpi[6] = {
    3.141592653523911, -5.167712762159022, 2.550163241252819,
    -0.5992513384249386, 0.08204651137981177, -0.007022210027350119};

/* ---- exp ---------------------------------------------------------------
 * (LOG2E, LN2_1 / LN2_2 and MAGIC are shared with the KIR form of exp and
 * log, transcendental.c.)  PTX: x clamped to [-104, 89] (results 0 / inf beyond), n = rint(x log2 e),
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

/* ---- float32 KIR forms (transcendental.c) -------------------------------
 * They avoid fma (the CPU target compiles with -ffp-contract=off and may
 * lack FMA), so they are fitted separately from the PTX ones above. */

/* exp: e^r on |r| <= ln2/2, degree 6 (relative error 3.7e-9); c0 = c1 = 1 */
static const double tc_kf32_exp[7] = {
    1.0, 1.0, 0x1.fffffep-2, 0x1.555492p-3, 0x1.555682p-5, 0x1.1239b2p-7,
    0x1.6bd8fep-10};
/* exp: |x| clamp; e^+-104 already rounds to inf / 0 */
#define TC_KF32_EXP_LIMIT 104.0
/* log: 2 atanh(s) = 2 s (1 + s^2 P(s^2)), the odd Taylor series to s^11
 * on |s| <= 0.172 (error 2e-9) */
static const double tc_kf32_log[5] = {1.0 / 3, 1.0 / 5, 1.0 / 7, 1.0 / 9,
                                      1.0 / 11};
/* sin/cos fast path (|x| <= TC_KF32_TRIG_MAX): Cody-Waite by pi in three
 * 11-bit pieces plus a float tail, sin r = r + r^3 Q(r^2) on |r| <= pi/2
 * (relative error 9e-9) */
#define TC_KF32_TRIG_MAX 8192.0
#define TC_KF32_1_PI 0.318309886183790672
static const double tc_kf32_pi_parts[4] = {0x1.92p+1, 0x1.fb4p-11,
                                           0x1.444p-23, 0x1.68c234p-38};
static const double tc_kf32_sin[4] = {-0x1.55554cp-3, 0x1.110ed4p-7,
                                      -0x1.9f6feep-13, 0x1.5dbceep-19};
/* tanh: |x| < TC_KF32_TANH_SMALL: x + x^3 Q(x^2) (relative error 4e-9) */
#define TC_KF32_TANH_SMALL 0.625
#define TC_KF32_TANH_CLAMP 9.5
static const double tc_kf32_tanh[5] = {
    -0.3333328194286445, 0.1333144221705863, -0.053739716428718144,
    0.020639091087746, -0.005704990838361345};

/* erf, float32 and float64: x P(x^2) on |x| < 1; 1 - exp(-a^2 + L(a - C))
 * beyond, a clamped to LIMIT (erf rounds to 1 there); see
 * transcendental.c, emit_erf */
#define TC_KF32_ERF_LIMIT 4.0
#define TC_KF32_ERF_CENTER 2.5
static const double tc_kf32_erf_p[6] = {
    0x1.20dd74ae4ca00p+0, -0x1.8126a01b1d0eap-2, 0x1.ce0d7158328b4p-4,
    -0x1.b5cb8d07f7fa3p-6, 0x1.42ec631f523b3p-8, -0x1.292a8b2ae12eep-11};
static const double tc_kf32_erf_l[11] = {
    -0x1.8e8b7218feacep+0, -0x1.692523d789eaep-2, 0x1.cb9f595bf8ad4p-5,
    -0x1.63cce4ec85843p-7, 0x1.1bd6fb3dbc7e0p-9, -0x1.b924a8b5c54dcp-12,
    0x1.42b5878e41bdap-14, -0x1.b36822a9ee610p-17, 0x1.ef40a986442d3p-20,
    -0x1.1abb4a636df8fp-24, -0x1.609ab29b33996p-25};
#define TC_KF64_ERF_LIMIT 6.0
#define TC_KF64_ERF_CENTER 3.5
static const double tc_kf64_erf_p[12] = {
    0x1.20dd750429b6dp+0, -0x1.812746b0379cap-2, 0x1.ce2f21a0413a6p-4,
    -0x1.b82ce31210955p-6, 0x1.565bccfba1ea3p-8, -0x1.c02db09245cd7p-11,
    0x1.f9a2c1d28f564p-14, -0x1.f4cab27f76e7bp-17, 0x1.b9836ff4e71dfp-20,
    -0x1.5c1bc9652eff7p-23, 0x1.d7a117251fe90p-27, -0x1.ad27df3ff0f7ep-31};
static const double tc_kf64_erf_l[25] = {
    -0x1.dcc8b29512d7ep+0, -0x1.107c691607bcdp-2, 0x1.105be5d25e6a2p-5,
    -0x1.5677ff29cf105p-8, 0x1.ca1053db0bd0dp-11, -0x1.34e7e40796e56p-13,
    0x1.9922ad45f6fcbp-16, -0x1.0506155acd9d2p-18, 0x1.3a66387ab1eb7p-21,
    -0x1.5a92e8369439dp-24, 0x1.47817cf434afcp-27, -0x1.aa026d5d8e494p-31,
    -0x1.b45df07c082c2p-36, 0x1.0da8be569c593p-35, -0x1.42f5d76e6ab1ap-37,
    0x1.2116d90d7ca89p-39, -0x1.bbf39cccbb9eep-42, 0x1.2eebeb7b73057p-44,
    -0x1.3de2063575f22p-47, 0x1.2edd5c1980c52p-51, -0x1.47bf5f537eeefp-55,
    0x1.7590fcfd36825p-56, 0x1.4038d9ccb662ap-57, -0x1.77007991f4f53p-58,
    0x1.69e38bb2edb1bp-61};

/* ---- float64 KIR forms (transcendental.c) -------------------------------
 * fdlibm's splits: LN2_HI and PIO2_1..3 have 33 significant bits, so n
 * times them is exact for the n these reductions produce.  Polynomials are
 * Taylor series with exact reciprocal factorials (computed where used). */
#define TC_F64M_LOG2E 1.44269504088896338700e+00
#define TC_F64M_LN2_HI 6.93147180369123816490e-01
#define TC_F64M_LN2_LO 1.90821492927058770002e-10
#define TC_F64M_EXP_LO -746.0
#define TC_F64M_EXP_HI 710.0
#define TC_F64M_2_PI 6.36619772367581382433e-01
#define TC_F64M_PIO2_1 1.57079632673412561417e+00
#define TC_F64M_PIO2_2 6.07710050630396597660e-11
#define TC_F64M_PIO2_3 2.02226624871116645580e-21
#define TC_F64M_PIO2_4 8.47842766036889956997e-32
/* sin / cos of |x| >= TC_F64M_TRIG_FAST (and inf, nan): exact reduction
 * (transcendental.c, reduce_huge64).  Band k holds |x| >= band[k] (the
 * first band also everything below); its row is 1/(2 pi) cut into 26-bit
 * chunks from the bit of weight 2^-(E_k - 51) on, 2^E_k = band[k], then
 * the double nearest to the rest (the tail).  Generated by
 *   python3 scripts/gen_trig64_consts.py      (mpmath, 1600 bits) */
#define TC_F64M_TRIG_FAST 1.6e6
#define TC_F64M_PIO2 1.57079632679489661923
#define TC_F64M_TRIG_NBANDS 8
#define TC_F64M_TRIG_NCHUNKS 7
static const double tc_f64m_trig_band[TC_F64M_TRIG_NBANDS] = {
    0x1p16, 0x1p142, 0x1p268, 0x1p394, 0x1p520, 0x1p646, 0x1p772, 0x1p898};
static const double tc_f64m_inv2pi_band[TC_F64M_TRIG_NBANDS][TC_F64M_TRIG_NCHUNKS + 1] = {
    {0.0, 0x1.45fp-3, 0x1.836e4ep-18, 0x1.1054a7p-44,
     0x1.e13abe8p-69, 0x1.f534dcp-98, 0x1.c0db62p-122, 0x1.2b3278872084p-147},
    {0x1.a3ea698p-91, 0x1.dc0db6p-118, 0x1.4acc9ep-145, 0x1.0e4104p-172,
     0x1.fca2c7p-195, 0x1.5ef5dep-221, 0x1.586dc9p-248, 0x1.b8e909374b802p-276},
    {0x1.d5ef5d8p-217, 0x1.8ac36ep-243, 0x1.2371d2p-269, 0x1.26e97p-297,
     0x1.924b8p-328, 0x1.d413a3p-347, 0x1.21cfe1p-374, 0x1.bd63962534e7ep-399},
    {0x1.dd413ap-343, 0x1.921cfep-370, 0x1.deb1c8p-398, 0x1.894d398p-421,
     0x1.dd10468p-447, 0x1.f52ebbp-474, 0x1.1213a6p-500, 0x1.c7026b45f7e41p-526},
    {0x1.afa9758p-469, 0x1.68909dp-495, 0x1.9c7026p-522, 0x1.68befc8p-547,
     0x1.3991dp-578, 0x1.8e60d4p-600, 0x1.9cfa4ep-625, 0x1.08bf177bf2507p-651},
    {0x1.ac73068p-595, 0x1.339f49p-622, 0x1.908bf1p-647, 0x1.defc94p-673,
     0x1.d8ffc4p-701, 0x1.7ffdep-726, 0x1.6603fbp-752, 0x1.9788c5ad05369p-777},
    {0x1.2fffbcp-723, 0x1.6603fp-752, 0x1.79788cp-773, 0x1.6b414d8p-799,
     0x1.1f6d36p-826, 0x1.fb3c9fp-852, 0x1.6136e8p-879, 0x1.e8c7ecd3cbfd4p-903},
    {0x1.9fb3c9p-848, 0x1.e584db8p-873, 0x1.3d18fdp-900, 0x1.34f2ffp-925,
     0x1.45aea48p-951, 0x1.dd63f58p-977, 0x1.cbe2f6p-1003, 0x0.03d0739f78a53p-1022},
};
#define TC_F64M_TANH_SMALL 0.1
#define TC_F64M_TANH_CLAMP 19.1

#endif
