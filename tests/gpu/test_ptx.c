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

static double
urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
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

static int
check_math(const char *name, const tc_plan *p)
{
    tc_plan q = *p;
    q.kernels = calloc((size_t)p->nkernels, sizeof(tc_kernel));
    for (int i = 0; i < p->nkernels; i++) {
        tc_kernel *k = &q.kernels[i];
        *k = p->kernels[i];
        k->insts = malloc(sizeof(tc_kinst) * (size_t)k->ninsts);
        memcpy(k->insts, p->kernels[i].insts,
               sizeof(tc_kinst) * (size_t)k->ninsts);
        if (tc_kernel_decompose_math(k, &tc_math_target_none, NULL) < 0) {
            return 1;
        }
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
    for (int i = 0; i < p->nkernels; i++) {
        free(q.kernels[i].insts);
    }
    free(q.kernels);
    printf("%s math %s (decomposed vs libm)\n", bad ? "FAIL" : "PASS", name);
    return bad != 0;
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
            if (tc_gpu_emit_ptx_for_plan(p, sms[s], &ptx) < 0) {
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
