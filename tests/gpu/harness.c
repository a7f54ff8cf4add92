/* harness.c - standalone device test of the PTX backend: no Python, no
 * torch, no libgccjit.  For every case of cases.c: emit the module for the
 * device's sm, load it through driver.c, run the kernels on cuMemAlloc'd
 * buffers (scalar entries, then the 16-byte-aligned vector entries), and
 * compare every output buffer with the KIR interpreter (kir_ref.c) under
 * torch.testing.assert_close's default tolerances.  Then the float32
 * transcendentals bit for bit against their CPU mirror (f32math_ref.c),
 * the error of the sin / cos form used for float16 / bfloat16 results,
 * float64 sin / cos over every exponent vs long double libm, and the
 * bandwidth of
 * the 16M-element float32 chain vs cuMemcpyDtoD.  Built and run by
 * tests/gpu/run_device.sh. */
#include "cases.h"
#include "driver.h"
#include "ptx.h"
#include "mathconst.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const tc_cu_api *cu;
static int sm, nsm, fails;
static char err[8192];

#define CK(call)                                                             \
    do {                                                                     \
        CUresult r_ = (call);                                                \
        if (r_ != 0) {                                                       \
            char d_[200];                                                    \
            tc_cu_describe(r_, d_, sizeof(d_));                              \
            printf("FAIL %s:%d %s: %s\n", __FILE__, __LINE__, #call, d_);    \
            exit(1);                                                         \
        }                                                                    \
    } while (0)

static size_t
esz(tc_dtype dt)
{
    static const size_t s[TC_NDTYPES] = {1, 1, 1, 2, 4, 8, 4, 8};
    return s[dt];
}

static uint64_t rng = 88172645463325252ULL;
static uint64_t
next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void
fill(tc_dtype dt, void *p, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(next() >> 11) / 9007199254740992.0;
        int64_t r = (int64_t)(next() >> 1);
        switch (dt) {
        case TC_BOOL: ((uint8_t *)p)[i] = r & 1; break;
        case TC_U8: ((uint8_t *)p)[i] = (uint8_t)r; break;
        case TC_I8: ((int8_t *)p)[i] = (int8_t)r; break;
        case TC_I16: ((int16_t *)p)[i] = (int16_t)r; break;
        case TC_I32: ((int32_t *)p)[i] = (int32_t)(r % 2001) - 1000; break;
        case TC_I64: ((int64_t *)p)[i] = r - (INT64_MAX / 2); break;
        case TC_F32: ((float *)p)[i] = (float)(6 * u - 3); break;
        default: ((double *)p)[i] = 6 * u - 3; break;
        }
    }
}

/* torch.testing.assert_close defaults; NaN == NaN */
static int64_t
compare(tc_dtype dt, const void *got, const void *want, int64_t n,
        int64_t *first)
{
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        int ok;
        if (dt == TC_F32 || dt == TC_F64) {
            double g = dt == TC_F32 ? ((const float *)got)[i] : ((const double *)got)[i];
            double w = dt == TC_F32 ? ((const float *)want)[i] : ((const double *)want)[i];
            double rt = dt == TC_F32 ? 1.3e-6 : 1e-7, at = dt == TC_F32 ? 1e-5 : 1e-7;
            ok = (g != g && w != w) || g == w || fabs(g - w) <= at + rt * fabs(w);
        }
        else {
            ok = memcmp((const char *)got + i * esz(dt),
                        (const char *)want + i * esz(dt), esz(dt)) == 0;
        }
        if (!ok && bad++ == 0) {
            *first = i;
        }
    }
    return bad;
}

typedef struct {
    tc_plan *p;
    tc_ptx_module mod;
    CUfunction *fn, *fnv, *fnf;
    CUdeviceptr scratch;   /* split reductions (ptx.h), 0 if none */
    CUdeviceptr *dptr;
    void **host;
    int64_t *bytes;
} prog;

static int
prog_load(prog *g, tc_plan *p)
{
    memset(g, 0, sizeof(*g));
    g->p = p;
    if (tc_ptx_emit(p, sm, nsm, &g->mod, err, sizeof(err)) < 0) {
        return -1;
    }
    CUmodule m;
    if (tc_cu_module(g->mod.text, 0, &m, err, sizeof(err)) < 0) {
        return -1;
    }
    g->fn = calloc((size_t)p->nkernels + 1, sizeof(CUfunction));
    g->fnv = calloc((size_t)p->nkernels + 1, sizeof(CUfunction));
    g->fnf = calloc((size_t)p->nkernels + 1, sizeof(CUfunction));
    int64_t scratch = 0;
    for (int i = 0; i < p->nkernels; i++) {
        if (g->mod.kernels[i].entry_final[0]
            && tc_cu_function(m, g->mod.kernels[i].entry_final, &g->fnf[i], err, sizeof(err)) < 0) {
            return -1;
        }
        if (g->mod.kernels[i].scratch_bytes > scratch) {
            scratch = g->mod.kernels[i].scratch_bytes;
        }
        if (tc_cu_function(m, g->mod.kernels[i].entry, &g->fn[i], err, sizeof(err)) < 0) {
            return -1;
        }
        if (g->mod.kernels[i].entry_vec[0]
            && tc_cu_function(m, g->mod.kernels[i].entry_vec, &g->fnv[i], err, sizeof(err)) < 0) {
            return -1;
        }
    }
    if (scratch > 0) {
        CK(cu->cuMemAlloc(&g->scratch, (size_t)scratch));
    }
    int nb = p->nbuffers;
    g->dptr = calloc((size_t)nb + 1, sizeof(CUdeviceptr));
    g->host = calloc((size_t)nb + 1, sizeof(void *));
    g->bytes = calloc((size_t)nb + 1, sizeof(int64_t));
    for (int b = 0; b < nb; b++) {
        g->bytes[b] = tc_test_span(&p->buffers[b].layout) * (int64_t)esz(p->buffers[b].dtype);
        size_t alloc = ((size_t)g->bytes[b] + 16 + 15) & ~(size_t)15;
        g->host[b] = calloc(alloc, 1);
        CK(cu->cuMemAlloc(&g->dptr[b], alloc));
        if (p->buffers[b].kind == TC_BUF_INPUT) {
            fill(p->buffers[b].dtype, g->host[b], tc_test_span(&p->buffers[b].layout));
        }
        CK(cu->cuMemcpyHtoD(g->dptr[b], g->host[b], alloc));
    }
    return 0;
}

static int
prog_launch(prog *g, int vec)
{
    for (int i = 0; i < g->p->nkernels; i++) {
        const tc_kernel *k = &g->p->kernels[i];
        const tc_ptx_kernel *ki = &g->mod.kernels[i];
        if (ki->skip) {
            continue;
        }
        CUdeviceptr args[65];
        void *params[65];
        for (int a = 0; a < k->nargs; a++) {
            args[a] = g->dptr[k->args[a].buffer];
            params[a] = &args[a];
        }
        args[k->nargs] = g->scratch;
        params[k->nargs] = &args[k->nargs];
        int v = vec && g->fnv[i] != NULL;
        if (tc_cu_launch(v ? g->fnv[i] : g->fn[i], v ? ki->entry_vec : ki->entry,
                         (unsigned)(v ? ki->grid_vec : ki->grid), (unsigned)ki->block,
                         NULL, params, err, sizeof(err)) < 0) {
            return -1;
        }
        if (g->fnf[i] != NULL
            && tc_cu_launch(g->fnf[i], ki->entry_final, (unsigned)ki->grid_final,
                            (unsigned)ki->block_final, NULL, params, err,
                            sizeof(err)) < 0) {
            return -1;
        }
    }
    return 0;
}

static void
prog_free(prog *g)
{
    for (int b = 0; g->host && b < g->p->nbuffers; b++) {
        free(g->host[b]);
        cu->cuMemFree(g->dptr[b]);
    }
    free(g->host);
    free(g->dptr);
    free(g->bytes);
    free(g->fn);
    free(g->fnv);
    free(g->fnf);
    if (g->scratch) {
        cu->cuMemFree(g->scratch);
    }
    tc_ptx_module_clear(&g->mod);
    tc_plan_free(g->p);
}

static void
run_case(const char *name, tc_plan *p)
{
    prog g;
    if (prog_load(&g, p) < 0) {
        printf("FAIL %s: load: %s\n", name, err);
        fails++;
        prog_free(&g);
        return;
    }
    int nb = p->nbuffers;
    void **ref = calloc((size_t)nb, sizeof(void *));
    for (int b = 0; b < nb; b++) {
        ref[b] = calloc((size_t)g.bytes[b] + 16, 1);
        memcpy(ref[b], g.host[b], (size_t)g.bytes[b]);
    }
    if (tc_kir_ref_run(p, ref, err, sizeof(err)) < 0) {
        printf("FAIL %s: reference: %s\n", name, err);
        fails++;
    }
    int has_vec = 0;
    for (int i = 0; i < p->nkernels; i++) {
        has_vec |= g.fnv[i] != NULL;
    }
    for (int vec = 0; vec <= has_vec; vec++) {
        for (int b = 0; b < nb; b++) {  /* reset outputs */
            if (p->buffers[b].kind != TC_BUF_INPUT) {
                memset(g.host[b], 0, (size_t)g.bytes[b]);
                CK(cu->cuMemcpyHtoD(g.dptr[b], g.host[b], (size_t)g.bytes[b] + 1));
            }
        }
        if (prog_launch(&g, vec) < 0) {
            printf("FAIL %s (%s): %s\n", name, vec ? "vec" : "scalar", err);
            fails++;
            continue;
        }
        CUresult r = cu->cuCtxSynchronize();
        if (r != 0) {
            tc_cu_describe(r, err, sizeof(err));
            printf("FAIL %s (%s): sync: %s\n", name, vec ? "vec" : "scalar", err);
            exit(1);   /* the context is unusable after a fault */
        }
        int ok = 1;
        for (int b = 0; b < nb; b++) {
            if (p->buffers[b].kind != TC_BUF_OUTPUT) {
                continue;
            }
            CK(cu->cuMemcpyDtoH(g.host[b], g.dptr[b], (size_t)g.bytes[b]));
            int64_t n = g.bytes[b] / (int64_t)esz(p->buffers[b].dtype), first = -1;
            int64_t bad = compare(p->buffers[b].dtype, g.host[b], ref[b], n, &first);
            if (bad) {
                ok = 0;
                double gv = 0, wv = 0;
                tc_dtype dt = p->buffers[b].dtype;
                if (dt == TC_F32) { gv = ((float *)g.host[b])[first]; wv = ((float *)ref[b])[first]; }
                else if (dt == TC_F64) { gv = ((double *)g.host[b])[first]; wv = ((double *)ref[b])[first]; }
                printf("  %s buffer %d (%s): %lld/%lld mismatches, first at %lld"
                       " (got %.9g want %.9g)\n", name, b, tc_dtype_name(dt),
                       (long long)bad, (long long)n, (long long)first, gv, wv);
            }
        }
        printf("%s %s (%s, %d kernels)\n", ok ? "PASS" : "FAIL", name,
               vec ? "vec" : "scalar", p->nkernels);
        fails += !ok;
    }
    for (int b = 0; b < nb; b++) {
        free(ref[b]);
    }
    free(ref);
    prog_free(&g);
}

/* Loads plan p (a case of one input) into g: the input's buffer index,
 * or -1 after printing a failure under name. */
static int
load_one_input(prog *g, tc_plan *p, const char *name)
{
    if (p == NULL || prog_load(g, p) < 0) {
        printf("FAIL %s: %s\n", name, err);
        fails++;
        return -1;
    }
    for (int b = 0; b < p->nbuffers; b++) {
        if (p->buffers[b].kind == TC_BUF_INPUT) {
            return b;
        }
    }
    printf("FAIL %s: no input buffer\n", name);
    fails++;
    return -1;
}

/* The float32 transcendentals bit for bit against their CPU mirror
 * (f32math_ref.c): every op is IEEE-rounded (fma.rn, rcp.rn, cvt.rn), so
 * the GPU must reproduce the mirror exactly; the mirror's ulp errors (vs
 * double libm) then hold for the device.  16M inputs: random bit patterns
 * (every exponent, inf, nan, denormals) and log-uniform magnitudes. */
static void
f32_math_bits(void)
{
    int64_t n = 16 << 20;
    tc_plan *p = tc_gpu_case_f32_unary5(n, err, sizeof(err));
    prog g;
    int xb = load_one_input(&g, p, "f32_math_bits");
    if (xb < 0) {
        return;
    }
    float *x = g.host[xb];
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next();
        if (i % 2 == 0) {
            uint32_t u = (uint32_t)r;
            memcpy(&x[i], &u, 4);
        }
        else {
            double m = (double)(r >> 11) / 9007199254740992.0;
            double e = (double)((r >> 3) % 90) / 10.0 - 3.0;
            x[i] = (float)((r & 1 ? -1 : 1) * m * pow(10.0, e));
        }
    }
    CK(cu->cuMemcpyHtoD(g.dptr[xb], x, (size_t)n * 4));
    static const char *names[5] = {"sin", "cos", "exp", "log", "tanh"};
    for (int vec = 0; vec <= 1; vec++) {
        if (prog_launch(&g, vec) < 0) {
            printf("FAIL f32_math_bits: %s\n", err);
            fails++;
            break;
        }
        CK(cu->cuCtxSynchronize());
        for (int j = 0; j < 5; j++) {
            int ob = p->output_buffer[j];
            float *y = g.host[ob];
            CK(cu->cuMemcpyDtoH(y, g.dptr[ob], (size_t)n * 4));
            int64_t bad = 0;
            for (int64_t i = 0; i < n; i++) {
                float w = j < 2 ? tc_ref_sincosf(x[i], j)
                          : j == 2 ? tc_ref_expf(x[i])
                          : j == 3 ? tc_ref_logf(x[i]) : tc_ref_tanhf(x[i]);
                int ok = memcmp(&w, &y[i], 4) == 0 || (w != w && y[i] != y[i]);
                if (!ok && bad++ < 3) {
                    printf("  %s(%.9g): gpu %.9g, mirror %.9g\n", names[j],
                           x[i], y[i], w);
                }
            }
            printf("%s f32_math_bits %s (%s): %lld/%lld differ from the CPU"
                   " mirror\n", bad ? "FAIL" : "PASS", names[j],
                   vec ? "vec" : "scalar", (long long)bad, (long long)n);
            fails += bad != 0;
        }
    }
    prog_free(&g);
}

/* ---- sin / cos of kernels with float16 / bfloat16 results ---------------
 * The TC_PTX_MATH_HALF_RESULTS form (ptx_math.c, f32_sincos_half) is
 * sin.approx / cos.approx after a reduction by 2 pi: no CPU mirror can
 * reproduce the hardware approximation, so this measures its absolute
 * error against double libm on float32 inputs (what the kernel sees after
 * widening a half), in a module of its own: load x, both forms, store.
 * Inputs up to the fast path's bound must be within TRIG_HALF_TOL (far
 * inside float16 / bfloat16 tolerances, see ptx_math.c); beyond it (and
 * inf / nan) the exact slow path must match the CPU mirror bit for bit. */
#define TRIG_HALF_TOL 2e-6

typedef struct {
    char *s;
    size_t n, cap;
} text;

static void
text_add(void *ctx, const char *fmt, ...)
{
    text *t = ctx;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof(line) - 1) {
        printf("FAIL text_add: line too long\n");
        exit(1);
    }
    if (t->n + (size_t)len + 2 > t->cap) {
        t->cap = 2 * t->cap + (size_t)len + 4096;
        t->s = realloc(t->s, t->cap);
        if (t->s == NULL) {
            exit(1);
        }
    }
    memcpy(t->s + t->n, line, (size_t)len);
    t->n += (size_t)len;
    t->s[t->n++] = '\n';
    t->s[t->n] = '\0';
}

static char *
trig_half_module(void)
{
    text t = {0};
    text_add(&t, ".version %s", tc_ptx_isa_version(sm));
    text_add(&t, ".target sm_%d", sm);
    text_add(&t, ".address_size 64");
    text_add(&t, ".visible .entry trig_half(.param .u64 px, .param .u64 ps,"
             " .param .u64 pc, .param .u32 pn)");
    text_add(&t, "{");
    text_add(&t, ".reg .pred %%p<1>;");
    text_add(&t, ".reg .b32 %%r<5>;");
    text_add(&t, ".reg .b64 %%rd<8>;");
    text_add(&t, ".reg .f32 %%f<3>;");
    text_add(&t, "ld.param.u64 %%rd0, [px];");
    text_add(&t, "ld.param.u64 %%rd1, [ps];");
    text_add(&t, "ld.param.u64 %%rd2, [pc];");
    text_add(&t, "ld.param.u32 %%r4, [pn];");
    text_add(&t, "mov.u32 %%r0, %%tid.x;");
    text_add(&t, "mov.u32 %%r1, %%ntid.x;");
    text_add(&t, "mov.u32 %%r2, %%ctaid.x;");
    text_add(&t, "mad.lo.u32 %%r3, %%r2, %%r1, %%r0;");
    text_add(&t, "setp.ge.u32 %%p0, %%r3, %%r4;");
    text_add(&t, "@%%p0 bra $end;");
    text_add(&t, "mul.wide.u32 %%rd3, %%r3, 4;");
    text_add(&t, "add.u64 %%rd4, %%rd0, %%rd3;");
    text_add(&t, "ld.global.f32 %%f0, [%%rd4];");
    tc_ptx_f32_unary(KOP_SIN, sm, TC_PTX_MATH_HALF_RESULTS, "%f1", "%f0", 0,
                     text_add, &t);
    tc_ptx_f32_unary(KOP_COS, sm, TC_PTX_MATH_HALF_RESULTS, "%f2", "%f0", 1,
                     text_add, &t);
    text_add(&t, "add.u64 %%rd5, %%rd1, %%rd3;");
    text_add(&t, "st.global.f32 [%%rd5], %%f1;");
    text_add(&t, "add.u64 %%rd6, %%rd2, %%rd3;");
    text_add(&t, "st.global.f32 [%%rd6], %%f2;");
    text_add(&t, "$end:");
    text_add(&t, "ret;");
    text_add(&t, "}");
    return t.s;
}

/* input i of n: a quarter dense on [-pi, pi], half log-uniform
 * magnitudes from 1e-3 to 1e6 (the fast path's bound is 105615), a
 * quarter random bit patterns (every exponent, inf, nan, denormals) */
static float
trig_half_input(int64_t i)
{
    uint64_t r = next();
    double m = (double)(r >> 11) / 9007199254740992.0;
    float x;
    switch (i % 4) {
    case 0:
        return (float)((2 * m - 1) * M_PI);
    case 3:
        memcpy(&x, &(uint32_t){(uint32_t)r}, 4);
        return x;
    default:
        return (float)((r & 1 ? -1 : 1) * pow(10.0, 9 * m - 3));
    }
}

static void
f32_trig_half(void)
{
    int64_t n = 16 << 20;
    size_t bytes = (size_t)n * 4;
    char *ptx = trig_half_module();
    CUmodule m;
    CUfunction f;
    if (tc_cu_module(ptx, 0, &m, err, sizeof(err)) < 0
        || tc_cu_function(m, "trig_half", &f, err, sizeof(err)) < 0) {
        printf("FAIL f32_trig_half: %s\n", err);
        fails++;
        free(ptx);
        return;
    }
    free(ptx);
    float *x = malloc(bytes), *y[2] = {malloc(bytes), malloc(bytes)};
    CUdeviceptr dx, dy[2];
    for (int64_t i = 0; i < n; i++) {
        x[i] = trig_half_input(i);
    }
    CK(cu->cuMemAlloc(&dx, bytes));
    CK(cu->cuMemAlloc(&dy[0], bytes));
    CK(cu->cuMemAlloc(&dy[1], bytes));
    CK(cu->cuMemcpyHtoD(dx, x, bytes));
    uint32_t un = (uint32_t)n;
    void *params[4] = {&dx, &dy[0], &dy[1], &un};
    if (tc_cu_launch(f, "trig_half", (unsigned)(n / 256), 256, NULL, params,
                     err, sizeof(err)) < 0) {
        printf("FAIL f32_trig_half: %s\n", err);
        fails++;
        return;
    }
    CK(cu->cuCtxSynchronize());
    for (int j = 0; j < 2; j++) {
        CK(cu->cuMemcpyDtoH(y[j], dy[j], bytes));
        double worst = 0, at = 0;
        int64_t bad = 0, fast = 0;
        for (int64_t i = 0; i < n; i++) {
            float g = y[j][i];
            int ok;
            if (fabsf(x[i]) <= TC_F32M_TRIG_MAX) {
                double w = j ? cos((double)x[i]) : sin((double)x[i]);
                double d = fabs((double)g - w);
                ok = d <= TRIG_HALF_TOL;
                fast++;
                if (d > worst) {
                    worst = d;
                    at = x[i];
                }
            }
            else {
                float w = tc_ref_sincosf(x[i], j);
                ok = memcmp(&w, &g, 4) == 0 || (w != w && g != g);
            }
            if (!ok && bad++ < 3) {
                printf("  %s_half(%.9g) = %.9g\n", j ? "cos" : "sin", x[i], g);
            }
        }
        printf("%s f32_trig_half %s: max abs error %.3g (at %.9g) over %lld"
               " fast-path inputs; %lld/%lld fail\n", bad ? "FAIL" : "PASS",
               j ? "cos" : "sin", worst, at, (long long)fast, (long long)bad,
               (long long)n);
        fails += bad != 0;
    }
    cu->cuMemFree(dx);
    cu->cuMemFree(dy[0]);
    cu->cuMemFree(dy[1]);
    free(x);
    free(y[0]);
    free(y[1]);
}

static double
time_ms(prog *g, int vec, int iters)
{
    CUevent e0, e1;
    CK(cu->cuEventCreate(&e0, 0));
    CK(cu->cuEventCreate(&e1, 0));
    for (int i = 0; i < 3; i++) {
        prog_launch(g, vec);
    }
    CK(cu->cuEventRecord(e0, NULL));
    for (int i = 0; i < iters; i++) {
        prog_launch(g, vec);
    }
    CK(cu->cuEventRecord(e1, NULL));
    CK(cu->cuEventSynchronize(e1));
    float ms = 0;
    CK(cu->cuEventElapsedTime(&ms, e0, e1));
    cu->cuEventDestroy(e0);
    cu->cuEventDestroy(e1);
    return ms / iters;
}

/* ---- float64 sin / cos over every exponent --------------------------------
 * The decomposition (transcendental.c, sincos64: Cody-Waite below 1.6e6,
 * the banded exact reduction above) on the device against long double
 * libm: 4M inputs, half random bit patterns (every exponent, inf, nan,
 * denormals), half log-uniform magnitudes over every exponent, within
 * TC_TRIG64_TOL (2.3e-15 on the CPU, tests/gpu/test_ptx.c); then the time
 * of the sin + cos kernel (each element pays both paths). */

static void
f64_trig(void)
{
    int64_t n = 4 << 20;
    tc_plan *p = tc_gpu_case_f64_trig(n, err, sizeof(err));
    prog g;
    int xb = load_one_input(&g, p, "f64_trig");
    if (xb < 0) {
        return;
    }
    double *x = g.host[xb];
    for (int64_t i = 0; i < n; i++) {
        uint64_t r = next();
        if (i % 2 == 0) {
            memcpy(&x[i], &r, 8);
        }
        else {
            double m = 1 + (double)(r >> 11) / 9007199254740992.0;
            x[i] = (r & 1 ? -1 : 1) * ldexp(m, (int)(next() % 2098) - 1074);
        }
    }
    CK(cu->cuMemcpyHtoD(g.dptr[xb], x, (size_t)n * 8));
    if (prog_launch(&g, 1) < 0) {
        printf("FAIL f64_trig: %s\n", err);
        fails++;
        prog_free(&g);
        return;
    }
    CK(cu->cuCtxSynchronize());
    for (int j = 0; j < 2; j++) {
        int ob = p->output_buffer[j];
        CK(cu->cuMemcpyDtoH(g.host[ob], g.dptr[ob], (size_t)n * 8));
        fails += tc_trig64_check("f64_trig", x, g.host[ob], n, j) != 0;
    }
    double ms = time_ms(&g, 1, 20);
    printf("BENCH f64 sin + cos 4M (both outputs): %.1f us, %.0f GB/s\n",
           ms * 1e3, 3.0 * 8 * (double)n / ms / 1e6);
    prog_free(&g);
}

static void
bench(void)
{
    int64_t n = 16 << 20;
    tc_plan *p = tc_gpu_case_chain(n, err, sizeof(err));
    prog g;
    if (p == NULL || prog_load(&g, p) < 0) {
        printf("FAIL bench: %s\n", err);
        fails++;
        return;
    }
    double bytes = 3.0 * 4 * (double)n;
    double ms_s = time_ms(&g, 0, 20), ms_v = time_ms(&g, 1, 20);
    printf("BENCH chain f32 16M (sin+cos, relu, *2+1): scalar %.1f us %.0f GB/s,"
           " vec4 %.1f us %.0f GB/s\n", ms_s * 1e3, bytes / ms_s / 1e6,
           ms_v * 1e3, bytes / ms_v / 1e6);
    /* copy bandwidth: 64 MB DtoD, read + write */
    CUdeviceptr a = g.dptr[0], b = g.dptr[2];
    CUevent e0, e1;
    CK(cu->cuEventCreate(&e0, 0));
    CK(cu->cuEventCreate(&e1, 0));
    for (int i = 0; i < 3; i++) {
        CK(cu->cuMemcpyDtoD(b, a, (size_t)n * 4));
    }
    CK(cu->cuEventRecord(e0, NULL));
    for (int i = 0; i < 20; i++) {
        CK(cu->cuMemcpyDtoD(b, a, (size_t)n * 4));
    }
    CK(cu->cuEventRecord(e1, NULL));
    CK(cu->cuEventSynchronize(e1));
    float ms = 0;
    CK(cu->cuEventElapsedTime(&ms, e0, e1));
    ms /= 20;
    printf("BENCH cuMemcpyDtoD 64 MB: %.1f us %.0f GB/s (read + write)\n",
           ms * 1e3, 2.0 * 4 * (double)n / ms / 1e6);
    prog_free(&g);
}

int
main(int argc, char **argv)
{
    cu = tc_cu_load(err, sizeof(err));
    if (cu == NULL || cu->cuMemAlloc == NULL || cu->cuEventCreate == NULL) {
        printf("FAIL driver: %s\n", err);
        return 1;
    }
    if (tc_cu_device_info(0, &sm, &nsm, err, sizeof(err)) < 0
        || tc_cu_make_current(0, err, sizeof(err)) < 0) {
        printf("FAIL device: %s\n", err);
        return 1;
    }
    printf("device 0: sm_%d, %d SMs, PTX .version %s\n", sm, nsm,
           tc_ptx_isa_version(sm));
    const char *only = argc > 1 ? argv[1] : NULL;
    for (int i = 0; i < tc_gpu_ncases; i++) {
        if (!tc_gpu_cases[i].run_on_device && getenv("TC_GPU_BIG") == NULL) {
            continue;
        }
        if (only && strcmp(only, tc_gpu_cases[i].name) != 0) {
            continue;
        }
        tc_plan *p = tc_gpu_cases[i].build(err, sizeof(err));
        if (p == NULL) {
            printf("FAIL %s: plan: %s\n", tc_gpu_cases[i].name, err);
            fails++;
            continue;
        }
        run_case(tc_gpu_cases[i].name, p);
    }
    if (only == NULL || strcmp(only, "f32_math_bits") == 0) {
        f32_math_bits();
    }
    if (only == NULL || strcmp(only, "f32_trig_half") == 0) {
        f32_trig_half();
    }
    if (only == NULL || strcmp(only, "f64_trig") == 0) {
        f64_trig();
    }
    if (only == NULL || strcmp(only, "bench") == 0) {
        bench();
    }
    printf("%s: %d failure(s)\n", fails ? "FAIL" : "PASS", fails);
    return fails != 0;
}
