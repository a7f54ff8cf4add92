/* test_ptx.c - every kernel of tests/gpu/cases.c must assemble with ptxas
 * for sm_80 and sm_90 (no GPU needed).  Build and run (repo root):
 *
 *   gcc -std=gnu11 -O1 -ffp-contract=off -Isrc/graph -Isrc/gpu \
 *       -o /tmp/test_ptx tests/gpu/test_ptx.c tests/gpu/cases.c \
 *       tests/gpu/kir_ref.c tests/gpu/f32math_ref.c src/gpu/ptx_emit.c \
 *       src/gpu/ptx_math.c src/graph/[a-z]*.c -lm
 *   /tmp/test_ptx [outdir]        (PTXAS=/path/to/ptxas to override)
 */
#include "cases.h"
#include "ptx.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- math decompositions vs libm, on the CPU --------------------------
 * Every KIR decomposition of transcendental.c (tc_math_target_none: all
 * of them, float32 and float64): interpreting the rewritten kernels
 * (kir_ref.c) against the original ones (libm) checks the polynomials
 * with the harness's tolerances, including special inputs. */

static uint64_t rng = 0x9E3779B97F4A7C15ULL;

static uint64_t
rand64(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double
urand(void)
{
    return (double)(rand64() >> 11) / 9007199254740992.0;
}

static double
sample(int64_t i)
{
    static const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN,
                                     1e-310, -1e-310, 1e-40, 88.5, -104.0,
                                     709.0, -745.0, 1e6, -3e8, 1.0, -1.0,
                                     0.5, -2.0, 3.0, 1e-8};
    if (i % 7 == 3) {
        return special[(i / 7) % (sizeof(special) / sizeof(special[0]))];
    }
    double u = urand();
    return i % 3 == 0 ? 40 * u - 20 : i % 3 == 1 ? 6 * u - 3 : 2000 * u - 1000;
}

/* *q = p with its own copies of the kernels, every transcendental
 * decomposed; free with free_decomposed.  Returns 0 or -1. */
static int
decomposed(const tc_plan *p, tc_plan *q)
{
    *q = *p;
    q->kernels = calloc((size_t)p->nkernels, sizeof(tc_kernel));
    for (int i = 0; i < p->nkernels; i++) {
        tc_kernel *k = &q->kernels[i];
        *k = p->kernels[i];
        k->insts = malloc(sizeof(tc_kinst) * (size_t)k->ninsts);
        memcpy(k->insts, p->kernels[i].insts,
               sizeof(tc_kinst) * (size_t)k->ninsts);
        if (tc_kernel_decompose_math(k, &tc_math_target_none, NULL) < 0) {
            return -1;
        }
    }
    return 0;
}

static void
free_decomposed(tc_plan *q)
{
    for (int i = 0; i < q->nkernels; i++) {
        free(q->kernels[i].insts);
    }
    free(q->kernels);
}

static int
check_math(const char *name, const tc_plan *p)
{
    tc_plan q;
    if (decomposed(p, &q) < 0) {
        return 1;
    }
    int nb = p->nbuffers, bad = 0;
    void **a = calloc((size_t)nb, sizeof(void *));
    void **b = calloc((size_t)nb, sizeof(void *));
    for (int i = 0; i < nb; i++) {
        int64_t n = tc_test_span(&p->buffers[i].layout);
        size_t bytes = (size_t)n * 8 + 16;
        a[i] = calloc(bytes, 1);
        b[i] = calloc(bytes, 1);
        if (p->buffers[i].kind == TC_BUF_INPUT) {
            for (int64_t j = 0; j < n; j++) {
                double v = sample(j + 1000 * i);
                if (p->buffers[i].dtype == TC_F32) {
                    ((float *)a[i])[j] = (float)v;
                }
                else if (p->buffers[i].dtype == TC_F64) {
                    ((double *)a[i])[j] = v;
                }
            }
            memcpy(b[i], a[i], bytes);
        }
    }
    char err[256];
    if (tc_kir_ref_run(p, a, err, sizeof(err)) < 0
        || tc_kir_ref_run(&q, b, err, sizeof(err)) < 0) {
        printf("FAIL math %s: %s\n", name, err);
        return 1;
    }
    for (int i = 0; i < nb; i++) {
        tc_dtype dt = p->buffers[i].dtype;
        if (p->buffers[i].kind != TC_BUF_OUTPUT
            || (dt != TC_F32 && dt != TC_F64)) {
            continue;
        }
        int64_t n = tc_test_span(&p->buffers[i].layout), nbad = 0;
        for (int64_t j = 0; j < n; j++) {
            double w = dt == TC_F32 ? ((float *)a[i])[j] : ((double *)a[i])[j];
            double g = dt == TC_F32 ? ((float *)b[i])[j] : ((double *)b[i])[j];
            double rt = dt == TC_F32 ? 1.3e-6 : 1e-7;
            double at = dt == TC_F32 ? 1e-5 : 1e-7;
            int ok = (g != g && w != w) || g == w
                     || fabs(g - w) <= at + rt * fabs(w);
            if (!ok && nbad++ < 3) {
                printf("  math %s buffer %d [%lld]: got %.17g want %.17g\n",
                       name, i, (long long)j, g, w);
            }
        }
        bad += nbad != 0;
    }
    for (int i = 0; i < nb; i++) {
        free(a[i]);
        free(b[i]);
    }
    free(a);
    free(b);
    free_decomposed(&q);
    printf("%s math %s (decomposed vs libm)\n", bad ? "FAIL" : "PASS", name);
    return bad != 0;
}

/* ---- float64 sin / cos over every exponent -------------------------------
 * The decomposition (transcendental.c, sincos64: Cody-Waite below 1.6e6,
 * the banded exact reduction above) interpreted by kir_ref.c against
 * long double libm (tc_trig64_check). */

/* input i: specials first, then by i % 4 random bit patterns (every
 * exponent, inf, nan, denormals), log-uniform magnitudes over every
 * exponent, doubles next to multiples of pi/2 (sin or cos near 0) and
 * next to powers of two, and the fast path / exact path boundary */
static double
trig64_input(int64_t i)
{
    static const double special[] = {
        0.0, -0.0, INFINITY, -INFINITY, NAN, 1.7976931348623157e308,
        -1.7976931348623157e308, 2.2250738585072014e-308, 4.9e-324,
        1e30, -3e200, 1e6 * M_PI, 1e22, 0x1.6ac5b262ca1ffp+849,
        0x1.6ac5b262ca1ffp+799 /* 6381956970095103 * 2^797 */, 0x1p1023,
        -0x1p1000, 1.6e6, -1.6e6, 1.6000000000000002e6, 0x1p20, 0x1p21,
        5.319372648326541e255, 1e300, 8.98846567431158e307};
    const int64_t ns = (int64_t)(sizeof(special) / sizeof(special[0]));
    if (i < ns) {
        return special[i];
    }
    uint64_t r = rand64();
    double m = urand();
    int e = (int)(urand() * 2098) - 1074;
    double sign = r & 1 ? -1.0 : 1.0;
    switch (i % 4) {
    case 0:
        memcpy(&m, &r, 8);
        return m;
    case 1:
        return sign * ldexp(1 + m, e < -1074 ? -1074 : e > 1023 ? 1023 : e);
    case 2: {
        /* a multiple k of pi/2, k of up to 53 bits scaled to any exponent,
         * rounded, then a few ulp either way */
        double x = ldexp((double)(r >> 11), (int)(urand() * 1000) - 40)
                   * (M_PI / 2);
        if (!isfinite(x)) {
            x = 0x1.921fb54442d18p+1020;
        }
        for (int s = (int)(r & 7); s > 0; s--) {
            x = nextafter(x, r & 8 ? INFINITY : -INFINITY);
        }
        return sign * x;
    }
    default:
        if (i % 8 == 3) {
            return nextafter(sign * ldexp(1.0, (int)(urand() * 1024)),
                             m < 0.5 ? 0 : INFINITY);
        }
        return sign * (m < 0.5 ? 1.6e6 * (1 + (m - 0.25) * 1e-6)
                                : ldexp(1 + m, (int)(urand() * 30)));
    }
}

/* Non-constant KIR instructions of sin after decomposition: what every
 * float64 sin element pays on the GPU. */
static int
trig64_ops(const tc_plan *q)
{
    int ops = 0;
    const tc_kernel *k = &q->kernels[0];
    for (int i = 0; i < k->ninsts; i++) {
        ops += k->insts[i].op != KOP_CONST && k->insts[i].op != KOP_LOAD
               && k->insts[i].op != KOP_STORE;
    }
    return ops;
}

static int
check_trig64(void)
{
    int64_t n = 1 << 17;
    char err[256] = "";
    tc_plan *p = tc_gpu_case_f64_trig(n, err, sizeof(err));
    tc_plan q;
    if (p == NULL || p->nkernels != 1 || decomposed(p, &q) < 0) {
        printf("FAIL trig64: plan: %s\n", err);
        return 1;
    }
    void **bufs = calloc((size_t)p->nbuffers, sizeof(void *));
    int xb = -1;
    for (int b = 0; b < p->nbuffers; b++) {
        bufs[b] = calloc((size_t)tc_test_span(&p->buffers[b].layout), 8);
        if (p->buffers[b].kind == TC_BUF_INPUT) {
            xb = b;
        }
    }
    double *x = bufs[xb];
    for (int64_t i = 0; i < n; i++) {
        x[i] = trig64_input(i);
    }
    int bad = 0;
    if (p->noutputs != 2 || tc_kir_ref_run(&q, bufs, err, sizeof(err)) < 0) {
        printf("FAIL trig64: %s\n", err);
        bad = 1;
    }
    /* outputs in plan order: sin, cos (tc_gpu_case_f64_trig) */
    for (int j = 0; j < 2 && !bad; j++) {
        bad += tc_trig64_check("trig64", x, bufs[p->output_buffer[j]], n, j)
               != 0;
    }
    printf("trig64: %d KIR instructions per float64 sin or cos element"
           " (half of the sin + cos kernel)\n", trig64_ops(&q) / 2);
    for (int b = 0; b < p->nbuffers; b++) {
        free(bufs[b]);
    }
    free(bufs);
    free_decomposed(&q);
    tc_plan_free(p);
    return bad;
}

int
main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp/tcjit_ptx";
    const char *ptxas = getenv("PTXAS") ? getenv("PTXAS")
                                        : "/usr/local/bin/ptxas";
    char cmd[2048];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
    if (system(cmd) != 0) {
        return 2;
    }
    static const int sms[2] = {80, 90};
    int fails = 0, checked = 0;
    /* float32 transcendentals (PTX blocks) through their CPU mirror */
    fails += tc_f32m_check(0);
    fails += check_trig64();
    for (int i = 0; i < tc_gpu_ncases; i++) {
        char err[512] = "";
        tc_plan *p = tc_gpu_cases[i].build(err, sizeof(err));
        if (p == NULL) {
            printf("FAIL %s: plan: %s\n", tc_gpu_cases[i].name, err);
            fails++;
            continue;
        }
        if (strstr(tc_gpu_cases[i].name, "math") != NULL
            || strstr(tc_gpu_cases[i].name, "chain") != NULL) {
            fails += check_math(tc_gpu_cases[i].name, p);
        }
        for (int s = 0; s < 2; s++) {
            char *ptx = NULL;
            if (tc_gpu_emit_ptx_for_plan(p, sms[s], 0, &ptx) < 0) {
                printf("FAIL %s sm_%d: emit: %s\n", tc_gpu_cases[i].name,
                       sms[s], ptx ? ptx : "?");
                free(ptx);
                fails++;
                continue;
            }
            char path[600];
            snprintf(path, sizeof(path), "%s/%s_sm%d.ptx", dir,
                     tc_gpu_cases[i].name, sms[s]);
            FILE *f = fopen(path, "w");
            if (f == NULL) {
                free(ptx);
                return 2;
            }
            fputs(ptx, f);
            fclose(f);
            free(ptx);
            snprintf(cmd, sizeof(cmd), "%s -arch=sm_%d %s -o %s.cubin 2>&1",
                     ptxas, sms[s], path, path);
            int rc = system(cmd);
            checked++;
            printf("%s %s sm_%d (%d kernels)\n", rc == 0 ? "PASS" : "FAIL",
                   tc_gpu_cases[i].name, sms[s], p->nkernels);
            fails += rc != 0;
        }
        tc_plan_free(p);
    }
    printf("%d/%d modules assembled\n", checked - fails, checked);
    return fails != 0;
}
