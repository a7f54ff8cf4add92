/* test_jit.c - numeric tests of the CPU code generator, without Python.
 *
 * Builds small kernels by hand (pointwise, argument offsets, reduction
 * kernels: kinds, NaN / ties / empty domains, several reduction dims,
 * multi-phase, split full reductions), compiles them through
 * tc_jit_code_compile and runs them directly or through tc_jit_code_run,
 * checking against C references.  Build (from the repo root):
 *
 *   gcc -O2 -std=gnu11 -o /tmp/test_jit tests/c/test_jit.c \
 *       src/jit/gccjit_emit.c src/jit/cpu.c src/runtime/threadpool.c \
 *       src/graph/[a-z]*.c -lgccjit -lpthread -lm
 *
 *   /tmp/test_jit                  unit tests
 *   /tmp/test_jit acc OP IN OUT    OP in exp/log/sin/cos/tanh: float32 file
 *                                  IN -> OUT through the decomposed kernel
 *   /tmp/test_jit accv OP IN OUT   same through the compiler's own path
 *                                  (fast sin/cos with exact redo)
 *   /tmp/test_jit bench [N]        the 4M (sin(x)+cos(y)).relu()*2+1 chain
 *
 * With -DTC_TEST_PYTHON, src/jit/runtime.c, the src/graph sources and Python
 * embedded, `test_jit runtime` tests tc_jit_compile/tc_jit_run against
 * torch: hand-built plans, and reductions / normalizations / views
 * scheduled by the graph stage, then times them against eager in the same
 * process (TC_SKIP_BENCH=1 skips the timings; TC_BENCH_INDUCTOR=1 also
 * times torch.compile on the 4M chain):
 *
 *   gcc -O2 -std=gnu11 -DTC_TEST_PYTHON -o /tmp/test_jit_rt \
 *       tests/c/test_jit.c src/jit/gccjit_emit.c src/jit/cpu.c \
 *       src/runtime/threadpool.c src/jit/runtime.c \
 *       src/graph/{graph,ops,kir,schedule,transcendental}.c \
 *       $(python3-config --includes --ldflags --embed) -lgccjit -lpthread -lm
 */
#ifdef TC_TEST_PYTHON
#include "../../src/jit/jit.h"
#include "../../src/graph/schedule.h"
#endif
#include "../../src/jit/jit_internal.h"
#include "../../src/runtime/threadpool.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int failures = 0;

#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            failures++;                                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);             \
            fprintf(stderr, __VA_ARGS__);                                    \
            fprintf(stderr, "\n");                                           \
        }                                                                    \
    } while (0)

/* ---- a tiny kernel builder (the graph layer's kb_* may not exist) ------ */

static int
add_inst(tc_kernel *k, tc_kop op, tc_dtype dt, int a, int b, int c)
{
    k->insts = realloc(k->insts, sizeof(tc_kinst) * (size_t)(k->ninsts + 1));
    tc_kinst *in = &k->insts[k->ninsts];
    memset(in, 0, sizeof(*in));
    in->op = op;
    in->dtype = dt;
    in->a = a;
    in->b = b;
    in->c = c;
    in->arg = -1;
    return k->ninsts++;
}

static int
load(tc_kernel *k, int arg)
{
    int v = add_inst(k, KOP_LOAD, k->args[arg].dtype, -1, -1, -1);
    k->insts[v].arg = arg;
    return v;
}

static void
store(tc_kernel *k, int arg, int v)
{
    int s = add_inst(k, KOP_STORE, k->args[arg].dtype, v, -1, -1);
    k->insts[s].arg = arg;
}

static int
cf(tc_kernel *k, tc_dtype dt, double f)
{
    int v = add_inst(k, KOP_CONST, dt, -1, -1, -1);
    k->insts[v].imm.f = f;
    return v;
}

static int
ci(tc_kernel *k, tc_dtype dt, int64_t i)
{
    int v = add_inst(k, KOP_CONST, dt, -1, -1, -1);
    k->insts[v].imm.i = i;
    return v;
}

/* A kernel over a contiguous [n] domain (ndim 1) or a given shape. */
static void
kernel_init(tc_kernel *k, int ndim, const int64_t *sizes, int nargs)
{
    memset(k, 0, sizeof(*k));
    snprintf(k->name, sizeof(k->name), "test");
    k->ndim = ndim;
    k->numel = 1;
    for (int d = 0; d < ndim; d++) {
        k->sizes[d] = sizes[d];
        k->numel *= sizes[d];
    }
    k->nargs = nargs;
    k->args = calloc((size_t)nargs, sizeof(tc_karg));
}

/* Contiguous strides for argument a with dtype dt. */
static void
arg_contig(tc_kernel *k, int a, tc_dtype dt, int is_out)
{
    k->args[a].buffer = a;
    k->args[a].dtype = dt;
    k->args[a].is_output = is_out;
    int64_t st = 1;
    for (int d = k->ndim - 1; d >= 0; d--) {
        k->args[a].strides[d] = st;
        st *= k->sizes[d];
    }
}

static void
kernel_free(tc_kernel *k)
{
    free(k->args);
    free(k->insts);
    free(k->desc);
    memset(k, 0, sizeof(*k));
}

/* Compile a single kernel; returns the code (caller frees). */
static tc_jit_code *
compile1(tc_kernel *k)
{
    tc_plan plan = {0};
    plan.nkernels = 1;
    plan.kernels = k;
    char err[512];
    tc_jit_code *code = tc_jit_code_compile(&plan, 0, err, sizeof(err));
    if (code == NULL) {
        fprintf(stderr, "compile error: %s\n", err);
        failures++;
    }
    return code;
}

/* Run the whole domain in a few uneven chunks to exercise begin/end. */
static void
run_chunked(const tc_jit_code *code, int i, void **args)
{
    int64_t n = code->loops[i].sizes[0];
    int64_t cut1 = n / 3, cut2 = n / 3 + n / 4;
    code->fns[i](args, 0, cut1);
    code->fns[i](args, cut1, cut2);
    code->fns[i](args, cut2, n);
}

/* ---- unit tests ------------------------------------------------------- */

static void
test_add_contig(void)
{
    enum { N = 1003 };
    int64_t sz[1] = {N};
    tc_kernel k;
    kernel_init(&k, 1, sz, 3);
    arg_contig(&k, 0, TC_F32, 0);
    arg_contig(&k, 1, TC_F32, 0);
    arg_contig(&k, 2, TC_F32, 1);
    int s = add_inst(&k, KOP_ADD, TC_F32, load(&k, 0), load(&k, 1), -1);
    s = add_inst(&k, KOP_MUL, TC_F32, s, cf(&k, TC_F32, 2.0), -1);
    store(&k, 2, s);
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        static float x[N], y[N], o[N];
        for (int i = 0; i < N; i++) {
            x[i] = (float)i * 0.5f;
            y[i] = 1.0f - (float)i;
        }
        void *args[3] = {x, y, o};
        run_chunked(code, 0, args);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            bad += o[i] != (x[i] + y[i]) * 2.0f;
        }
        CHECK(bad == 0, "add_contig: %d mismatches", bad);
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* out[i, j] = x[j, i] (transposed read) - y[j] (broadcast), float64. */
static void
test_broadcast_2d(void)
{
    enum { R = 37, C = 53 };
    int64_t sz[2] = {R, C};
    tc_kernel k;
    kernel_init(&k, 2, sz, 3);
    arg_contig(&k, 0, TC_F64, 0);
    k.args[0].strides[0] = 1;
    k.args[0].strides[1] = R;
    arg_contig(&k, 1, TC_F64, 0);
    k.args[1].strides[0] = 0;
    k.args[1].strides[1] = 1;
    arg_contig(&k, 2, TC_F64, 1);
    int s = add_inst(&k, KOP_SUB, TC_F64, load(&k, 0), load(&k, 1), -1);
    store(&k, 2, s);
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        static double x[R * C], y[C], o[R * C];
        for (int i = 0; i < R * C; i++) {
            x[i] = i * 1.25;
        }
        for (int j = 0; j < C; j++) {
            y[j] = j * 3.0;
        }
        void *args[3] = {x, y, o};
        CHECK(code->loops[0].ndim == 2, "broadcast: ndim %d",
              code->loops[0].ndim);
        run_chunked(code, 0, args);
        int bad = 0;
        for (int i = 0; i < R; i++) {
            for (int j = 0; j < C; j++) {
                bad += o[i * C + j] != x[j * R + i] - y[j];
            }
        }
        CHECK(bad == 0, "broadcast_2d: %d mismatches", bad);
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* Contiguous 3-d domain with a size-1 dim collapses into one loop. */
static void
test_collapse(void)
{
    int64_t sz[3] = {4, 1, 6};
    tc_kernel k;
    kernel_init(&k, 3, sz, 2);
    arg_contig(&k, 0, TC_I32, 0);
    arg_contig(&k, 1, TC_I32, 1);
    store(&k, 1, add_inst(&k, KOP_ADD, TC_I32, load(&k, 0),
                          ci(&k, TC_I32, 7), -1));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        CHECK(code->loops[0].ndim == 1 && code->loops[0].sizes[0] == 24,
              "collapse: ndim %d size %lld", code->loops[0].ndim,
              (long long)code->loops[0].sizes[0]);
        int32_t x[24], o[24];
        for (int i = 0; i < 24; i++) {
            x[i] = i;
        }
        void *args[2] = {x, o};
        run_chunked(code, 0, args);
        int bad = 0;
        for (int i = 0; i < 24; i++) {
            bad += o[i] != i + 7;
        }
        CHECK(bad == 0, "collapse: %d mismatches", bad);
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

static void
test_ndim0(void)
{
    tc_kernel k;
    kernel_init(&k, 0, NULL, 2);
    arg_contig(&k, 0, TC_F32, 0);
    arg_contig(&k, 1, TC_F32, 1);
    store(&k, 1, add_inst(&k, KOP_ADD, TC_F32, load(&k, 0),
                          cf(&k, TC_F32, 1.0), -1));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        float x = 41.0f, o = 0.0f;
        void *args[2] = {&x, &o};
        CHECK(code->loops[0].sizes[0] == 1, "ndim0 outer");
        code->fns[0](args, 0, 1);
        CHECK(o == 42.0f, "ndim0: %g", o);
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* Elementwise unary/binary float32 op vs a C reference. */
typedef struct {
    tc_kop op;
    float (*ref)(float, float);
    const char *name;
} fop_case;

static float
r_max(float a, float b)
{
    return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
}
static float
r_min(float a, float b)
{
    return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
}
static float
r_pow(float a, float b)
{
    return powf(a, b);
}
static float
r_div(float a, float b)
{
    return a / b;
}

static int
same_float(float a, float b)
{
    return (isnan(a) && isnan(b)) || a == b;
}

static void
test_float_binary(void)
{
    static const float vals[] = {0.0f, -0.0f, 1.0f, -1.5f, 2.0f, 3.25f,
                                 INFINITY, -INFINITY, NAN, 1e-40f, -7.0f};
    enum { NV = sizeof(vals) / sizeof(vals[0]), N = NV * NV };
    fop_case cases[] = {
        {KOP_MAX, r_max, "max"},
        {KOP_MIN, r_min, "min"},
        {KOP_POW, r_pow, "pow"},
        {KOP_DIV, r_div, "div"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        int64_t sz[1] = {N};
        tc_kernel k;
        kernel_init(&k, 1, sz, 3);
        arg_contig(&k, 0, TC_F32, 0);
        arg_contig(&k, 1, TC_F32, 0);
        arg_contig(&k, 2, TC_F32, 1);
        store(&k, 2, add_inst(&k, cases[c].op, TC_F32, load(&k, 0),
                              load(&k, 1), -1));
        tc_jit_code *code = compile1(&k);
        if (code != NULL) {
            float x[N], y[N], o[N];
            for (int i = 0; i < N; i++) {
                x[i] = vals[i / NV];
                y[i] = vals[i % NV];
            }
            void *args[3] = {x, y, o};
            run_chunked(code, 0, args);
            for (int i = 0; i < N; i++) {
                float want = cases[c].ref(x[i], y[i]);
                CHECK(same_float(o[i], want), "%s(%g, %g) = %g, want %g",
                      cases[c].name, x[i], y[i], o[i], want);
            }
            tc_jit_code_free(code);
        }
        kernel_free(&k);
    }
}

/* where, comparisons, casts and bool stores in one kernel. */
static void
test_where_cast(void)
{
    enum { N = 9 };
    static const float xv[N] = {-2.7f, -0.5f, 0.0f, 0.5f, 2.7f, 1e10f,
                                NAN, -0.0f, 255.9f};
    int64_t sz[1] = {N};
    tc_kernel k;
    kernel_init(&k, 1, sz, 5);
    arg_contig(&k, 0, TC_F32, 0);
    arg_contig(&k, 1, TC_F32, 1);   /* where(x < 0, -x, x * 2) */
    arg_contig(&k, 2, TC_I32, 1);   /* (int32)x */
    arg_contig(&k, 3, TC_BOOL, 1);  /* (bool)x */
    arg_contig(&k, 4, TC_F64, 1);   /* (double)(bool)(x <= 0.5) */
    int x = load(&k, 0);
    int lt = add_inst(&k, KOP_LT, TC_BOOL, x, cf(&k, TC_F32, 0.0), -1);
    int nx = add_inst(&k, KOP_NEG, TC_F32, x, -1, -1);
    int x2 = add_inst(&k, KOP_MUL, TC_F32, x, cf(&k, TC_F32, 2.0), -1);
    store(&k, 1, add_inst(&k, KOP_WHERE, TC_F32, lt, nx, x2));
    store(&k, 2, add_inst(&k, KOP_CAST, TC_I32, x, -1, -1));
    store(&k, 3, add_inst(&k, KOP_CAST, TC_BOOL, x, -1, -1));
    int le = add_inst(&k, KOP_LE, TC_BOOL, x, cf(&k, TC_F32, 0.5), -1);
    store(&k, 4, add_inst(&k, KOP_CAST, TC_F64, le, -1, -1));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        float o1[N];
        int32_t o2[N];
        uint8_t o3[N];
        double o4[N];
        void *args[5] = {(void *)xv, o1, o2, o3, o4};
        run_chunked(code, 0, args);
        for (int i = 0; i < N; i++) {
            float w1 = xv[i] < 0 ? -xv[i] : xv[i] * 2;
            CHECK(same_float(o1[i], w1), "where(%g) = %g", xv[i], o1[i]);
            if (!isnan(xv[i]) && fabsf(xv[i]) < 2e9f) {
                CHECK(o2[i] == (int32_t)xv[i], "int(%g) = %d", xv[i], o2[i]);
            }
            CHECK(o3[i] == (xv[i] != 0), "bool(%g) = %d", xv[i], o3[i]);
            CHECK(o4[i] == (xv[i] <= 0.5f), "le(%g) = %g", xv[i], o4[i]);
        }
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* Integer ops: wrap-around, safe division, pow, shifts, min/max, abs. */
static void
test_int_ops(void)
{
    enum { N = 8 };
    static const int32_t av[N] = {INT32_MIN, -7, -1, 0, 1, 5, 3, INT32_MAX};
    static const int32_t bv[N] = {-1, 2, 0, 3, -1, 0, 4, 2};
    int64_t sz[1] = {N};
    tc_kernel k;
    kernel_init(&k, 1, sz, 9);
    arg_contig(&k, 0, TC_I32, 0);
    arg_contig(&k, 1, TC_I32, 0);
    for (int a = 2; a < 9; a++) {
        arg_contig(&k, a, TC_I32, 1);
    }
    int a = load(&k, 0), b = load(&k, 1);
    store(&k, 2, add_inst(&k, KOP_NEG, TC_I32, a, -1, -1));
    store(&k, 3, add_inst(&k, KOP_MUL, TC_I32, a, b, -1));
    store(&k, 4, add_inst(&k, KOP_DIV, TC_I32, a, b, -1));
    store(&k, 5, add_inst(&k, KOP_POW, TC_I32, a, b, -1));
    store(&k, 6, add_inst(&k, KOP_SHL, TC_I32, a, ci(&k, TC_I32, 3), -1));
    store(&k, 7, add_inst(&k, KOP_MAX, TC_I32, a, b, -1));
    store(&k, 8, add_inst(&k, KOP_ABS, TC_I32, a, -1, -1));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        int32_t o[7][N];
        void *args[9] = {(void *)av, (void *)bv, o[0], o[1], o[2], o[3],
                         o[4], o[5], o[6]};
        run_chunked(code, 0, args);
        for (int i = 0; i < N; i++) {
            uint32_t ua = (uint32_t)av[i], ub = (uint32_t)bv[i];
            CHECK(o[0][i] == (int32_t)(0u - ua), "neg %d", av[i]);
            CHECK(o[1][i] == (int32_t)(ua * ub), "mul %d", av[i]);
            if (bv[i] != 0 && bv[i] != -1) {
                CHECK(o[2][i] == av[i] / bv[i], "div %d/%d", av[i], bv[i]);
            }
            if (bv[i] == -1) {
                CHECK(o[2][i] == (int32_t)(0u - ua), "div %d/-1", av[i]);
            }
            int64_t p = 1;
            for (int j = 0; j < bv[i]; j++) {
                p = (int32_t)((uint32_t)p * ua);
            }
            if (bv[i] < 0) {
                p = av[i] == 1 ? 1 : av[i] == -1 ? ((bv[i] & 1) ? -1 : 1) : 0;
            }
            CHECK(o[3][i] == p, "pow %d^%d = %d want %lld", av[i], bv[i],
                  o[3][i], (long long)p);
            CHECK(o[4][i] == (int32_t)(ua << 3), "shl %d", av[i]);
            CHECK(o[5][i] == (av[i] > bv[i] ? av[i] : bv[i]), "max");
            CHECK(o[6][i] == (int32_t)(av[i] < 0 ? 0u - ua : ua), "abs");
        }
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* Two kernels in one plan, the second reading what the first wrote. */
static void
test_two_kernels(void)
{
    enum { N = 100 };
    int64_t sz[1] = {N};
    tc_kernel ks[2];
    kernel_init(&ks[0], 1, sz, 2);
    arg_contig(&ks[0], 0, TC_F32, 0);
    arg_contig(&ks[0], 1, TC_F32, 1);
    store(&ks[0], 1, add_inst(&ks[0], KOP_SQRT, TC_F32, load(&ks[0], 0), -1,
                              -1));
    kernel_init(&ks[1], 1, sz, 2);
    arg_contig(&ks[1], 0, TC_F32, 0);
    arg_contig(&ks[1], 1, TC_I64, 1);
    int f = add_inst(&ks[1], KOP_FLOOR, TC_F32, load(&ks[1], 0), -1, -1);
    store(&ks[1], 1, add_inst(&ks[1], KOP_CAST, TC_I64, f, -1, -1));
    tc_plan plan = {0};
    plan.nkernels = 2;
    plan.kernels = ks;
    char err[512];
    tc_jit_code *code = tc_jit_code_compile(&plan, 0, err, sizeof(err));
    CHECK(code != NULL, "two kernels: %s", err);
    if (code != NULL) {
        float x[N], t[N];
        int64_t o[N];
        for (int i = 0; i < N; i++) {
            x[i] = (float)i;
        }
        void *a0[2] = {x, t}, *a1[2] = {t, o};
        code->fns[0](a0, 0, N);
        code->fns[1](a1, 0, N);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            bad += o[i] != (int64_t)floorf(sqrtf((float)i));
        }
        CHECK(bad == 0, "two kernels: %d mismatches", bad);
        tc_jit_code_free(code);
    }
    kernel_free(&ks[0]);
    kernel_free(&ks[1]);
}

/* A bad kernel reports an error instead of crashing. */
static void
test_error(void)
{
    int64_t sz[1] = {4};
    tc_kernel k;
    kernel_init(&k, 1, sz, 1);
    arg_contig(&k, 0, TC_F32, 1);
    store(&k, 0, add_inst(&k, KOP_NOT, TC_F32, cf(&k, TC_F32, 1.0), -1, -1));
    tc_plan plan = {0};
    plan.nkernels = 1;
    plan.kernels = &k;
    char err[512] = "";
    tc_jit_code *code = tc_jit_code_compile(&plan, 0, err, sizeof(err));
    CHECK(code == NULL && strstr(err, "unsupported") != NULL,
          "error path: '%s'", err);
    tc_jit_code_free(code);
    kernel_free(&k);
}

/* ---- argument offsets and reduction kernels (hand-built) -------------- */

/* y[i] = x[i + 5] * 2 stored at y[i + 3]: tc_karg.offset on both sides. */
static void
test_offset(void)
{
    enum { N = 100 };
    int64_t sz[1] = {N};
    tc_kernel k;
    kernel_init(&k, 1, sz, 2);
    arg_contig(&k, 0, TC_F32, 0);
    arg_contig(&k, 1, TC_F32, 1);
    k.args[0].offset = 5;
    k.args[1].offset = 3;
    store(&k, 1, add_inst(&k, KOP_MUL, TC_F32, load(&k, 0),
                          cf(&k, TC_F32, 2.0), -1));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        float x[N + 5], y[N + 3];
        for (int i = 0; i < N + 5; i++) {
            x[i] = (float)i;
        }
        memset(y, 0, sizeof(y));
        void *args[2] = {x, y};
        run_chunked(code, 0, args);
        int bad = y[0] != 0 || y[1] != 0 || y[2] != 0;
        for (int i = 0; i < N; i++) {
            bad += y[i + 3] != x[i + 5] * 2;
        }
        CHECK(bad == 0, "offset: %d mismatches", bad);
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* A kernel with ndim outer dims then nred reduction dims (sizes of both). */
static void
rkernel_init(tc_kernel *k, int ndim, int nred, const int64_t *sizes,
             int nargs)
{
    kernel_init(k, ndim, sizes, nargs);
    k->nred = nred;
    k->red_numel = 1;
    for (int d = 0; d < nred; d++) {
        k->sizes[ndim + d] = sizes[ndim + d];
        k->red_numel *= sizes[ndim + d];
    }
}

static void
arg_strides(tc_kernel *k, int a, int buffer, tc_dtype dt, int is_out,
            const int64_t *strides)
{
    k->args[a].buffer = buffer;
    k->args[a].dtype = dt;
    k->args[a].is_output = is_out;
    for (int d = 0; d < k->ndim + k->nred; d++) {
        k->args[a].strides[d] = strides[d];
    }
}

static int
acc(tc_kernel *k, tc_acc_kind kind, tc_dtype dt)
{
    int v = add_inst(k, KOP_ACC, dt, -1, -1, -1);
    k->insts[v].imm.i = kind;
    return v;
}

static void
acc_upd(tc_kernel *k, int a, int v)
{
    add_inst(k, KOP_ACC_UPDATE, k->insts[a].dtype, a, v, -1);
}

static int
acc_res(tc_kernel *k, int a, int comp)
{
    int v = add_inst(k, KOP_ACC_RESULT, comp ? TC_I64 : k->insts[a].dtype, a,
                     -1, -1);
    k->insts[v].imm.i = comp;
    return v;
}

static void
phase_begin(tc_kernel *k)
{
    k->phases[k->nphases].begin = k->ninsts;
}

static void
phase_end(tc_kernel *k)
{
    k->phases[k->nphases].end = k->ninsts;
    k->nphases++;
}

/* Runs kernel i like the runtime does, over the pool when work >= thr. */
static void
run_red(const tc_jit_code *code, int i, void **args, int64_t thr)
{
    CHECK(tc_jit_code_run(code, i, args, thr) == 0, "run failed");
}

/* Sequential reference of ARGMAX/ARGMIN (torch CPU: first extreme, first
 * NaN wins). */
static int64_t
ref_arg(const float *x, int64_t n, int64_t stride, int is_max)
{
    int64_t best = -1;
    float v = 0;
    for (int64_t r = 0; r < n; r++) {
        float xv = x[r * stride];
        if (best >= 0 && isnan(v)) {
            break;
        }
        if (best < 0 || isnan(xv) || (is_max ? xv > v : xv < v)) {
            v = xv;
            best = r;
        }
    }
    return best;
}

static int
close_to(double got, double want, double rtol, double atol)
{
    if (isnan(want)) {
        return isnan(got);
    }
    if (isinf(want)) {
        return got == want;
    }
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* Row reductions of a [R, C] float32 matrix: sum, max, min, argmax,
 * argmin in one phase, with NaN rows, ties, all -inf and all +inf rows;
 * transposed (column) too. */
static void
test_red_rows(int transposed)
{
    enum { R = 41, C = 1003 };
    static float x[R * C];
    srand(7);
    for (int i = 0; i < R * C; i++) {
        x[i] = (float)rand() / RAND_MAX * 4 - 2;
    }
    /* element (r, c) lives at r * rs + c * cs */
    int64_t rs = transposed ? 1 : C, cs = transposed ? R : 1;
#define X(r, c) x[(r) * rs + (c) * cs]
    X(3, 10) = NAN;
    X(3, 500) = NAN;
    X(4, 7) = X(4, 300) = X(4, 1002) = 5.0f;
    X(4, 20) = X(4, 21) = -5.0f;
    for (int c = 0; c < C; c++) {
        X(5, c) = -INFINITY;
        X(6, c) = INFINITY;
    }
    X(7, 1002) = NAN; /* in the tail */
#undef X
    int64_t sz[2] = {R, C};
    tc_kernel k;
    rkernel_init(&k, 1, 1, sz, 6);
    int64_t xs[2] = {rs, cs}, os[2] = {1, 0};
    arg_strides(&k, 0, 0, TC_F32, 0, xs);
    arg_strides(&k, 1, 1, TC_F32, 1, os);
    arg_strides(&k, 2, 2, TC_F32, 1, os);
    arg_strides(&k, 3, 3, TC_F32, 1, os);
    arg_strides(&k, 4, 4, TC_I64, 1, os);
    arg_strides(&k, 5, 5, TC_I64, 1, os);
    int as = acc(&k, TC_ACC_SUM, TC_F32);
    int am = acc(&k, TC_ACC_MAX, TC_F32);
    int an = acc(&k, TC_ACC_MIN, TC_F32);
    int aa = acc(&k, TC_ACC_ARGMAX, TC_F32);
    int ai = acc(&k, TC_ACC_ARGMIN, TC_F32);
    phase_begin(&k);
    int v = load(&k, 0);
    acc_upd(&k, as, v);
    acc_upd(&k, am, v);
    acc_upd(&k, an, v);
    acc_upd(&k, aa, v);
    acc_upd(&k, ai, v);
    phase_end(&k);
    store(&k, 1, acc_res(&k, as, 0));
    store(&k, 2, acc_res(&k, am, 0));
    store(&k, 3, acc_res(&k, an, 0));
    store(&k, 4, acc_res(&k, aa, 1));
    store(&k, 5, acc_res(&k, ai, 1));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        static float os_[R], om[R], on[R];
        static int64_t oa[R], oi[R];
        void *args[6] = {x, os_, om, on, oa, oi};
        CHECK(code->loops[0].nred == 1 && code->loops[0].nchunks == 0,
              "rows: loop nred %d chunks %lld", code->loops[0].nred,
              (long long)code->loops[0].nchunks);
        run_chunked(code, 0, args);
        for (int r = 0; r < R; r++) {
            double s = 0, m = -INFINITY, n = INFINITY;
            int nan = 0;
            for (int c = 0; c < C; c++) {
                float xv = x[r * rs + c * cs];
                s += xv;
                nan |= isnan(xv);
                m = xv > m ? xv : m;
                n = xv < n ? xv : n;
            }
            if (nan) {
                m = n = NAN;
            }
            CHECK(close_to(os_[r], s, 1.3e-6, 1e-5), "row %d sum %g want %g",
                  r, os_[r], s);
            CHECK(close_to(om[r], m, 0, 0), "row %d max %g want %g", r,
                  om[r], m);
            CHECK(close_to(on[r], n, 0, 0), "row %d min %g want %g", r,
                  on[r], n);
            int64_t wa = ref_arg(x + r * rs, C, cs, 1);
            int64_t wi = ref_arg(x + r * rs, C, cs, 0);
            CHECK(oa[r] == wa, "row %d argmax %lld want %lld", r,
                  (long long)oa[r], (long long)wa);
            CHECK(oi[r] == wi, "row %d argmin %lld want %lld", r,
                  (long long)oi[r], (long long)wi);
        }
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* Integer and bool kinds: int32 sum (wraps) / prod / max / argmax, bool
 * any / all, int64 max of int8 casts, over rows with a short tail. */
static void
test_red_ints(void)
{
    enum { R = 5, C = 37 };
    int32_t x[R * C];
    uint8_t b[R * C];
    for (int i = 0; i < R * C; i++) {
        x[i] = (int32_t)((i * 2654435761u) % 2001) - 1000;
        b[i] = (i % 7) == 0;
    }
    x[0] = INT32_MAX;
    x[1] = INT32_MAX; /* sum wraps */
    for (int c = 0; c < C; c++) {
        x[2 * C + c] = INT32_MIN; /* max / argmax of all-lowest row */
        b[3 * C + c] = 1;         /* all true */
        b[4 * C + c] = 0;         /* none */
        if (c < 3) {
            x[4 * C + c] = c + 1; /* prod row: 1*2*3*1*1... */
        }
        else {
            x[4 * C + c] = 1;
        }
    }
    int64_t sz[2] = {R, C};
    tc_kernel k;
    rkernel_init(&k, 1, 1, sz, 8);
    int64_t xs[2] = {C, 1}, os[2] = {1, 0};
    arg_strides(&k, 0, 0, TC_I32, 0, xs);
    arg_strides(&k, 1, 1, TC_BOOL, 0, xs);
    arg_strides(&k, 2, 2, TC_I32, 1, os);
    arg_strides(&k, 3, 3, TC_I32, 1, os);
    arg_strides(&k, 4, 4, TC_I32, 1, os);
    arg_strides(&k, 5, 5, TC_I64, 1, os);
    arg_strides(&k, 6, 6, TC_BOOL, 1, os);
    arg_strides(&k, 7, 7, TC_BOOL, 1, os);
    int as = acc(&k, TC_ACC_SUM, TC_I32);
    int ap = acc(&k, TC_ACC_PROD, TC_I32);
    int am = acc(&k, TC_ACC_MAX, TC_I32);
    int aa = acc(&k, TC_ACC_ARGMAX, TC_I32);
    int ay = acc(&k, TC_ACC_ANY, TC_BOOL);
    int al = acc(&k, TC_ACC_ALL, TC_BOOL);
    phase_begin(&k);
    int v = load(&k, 0), bv = load(&k, 1);
    acc_upd(&k, as, v);
    acc_upd(&k, ap, v);
    acc_upd(&k, am, v);
    acc_upd(&k, aa, v);
    acc_upd(&k, ay, bv);
    acc_upd(&k, al, bv);
    phase_end(&k);
    store(&k, 2, acc_res(&k, as, 0));
    store(&k, 3, acc_res(&k, ap, 0));
    store(&k, 4, acc_res(&k, am, 0));
    store(&k, 5, acc_res(&k, aa, 1));
    store(&k, 6, acc_res(&k, ay, 0));
    store(&k, 7, acc_res(&k, al, 0));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        int32_t os_[R], op[R], om[R];
        int64_t oa[R];
        uint8_t oy[R], ol[R];
        void *args[8] = {x, b, os_, op, om, oa, oy, ol};
        run_chunked(code, 0, args);
        for (int r = 0; r < R; r++) {
            uint32_t s = 0, p = 1;
            int32_t m = INT32_MIN;
            int64_t a = -1;
            int any = 0, all = 1;
            for (int c = 0; c < C; c++) {
                int32_t xv = x[r * C + c];
                s += (uint32_t)xv;
                p *= (uint32_t)xv;
                if (a < 0 || xv > m) {
                    m = xv;
                    a = c;
                }
                any |= b[r * C + c];
                all &= b[r * C + c];
            }
            CHECK(os_[r] == (int32_t)s, "int sum row %d", r);
            CHECK(op[r] == (int32_t)p, "int prod row %d", r);
            CHECK(om[r] == m, "int max row %d", r);
            CHECK(oa[r] == a, "int argmax row %d: %lld want %lld", r,
                  (long long)oa[r], (long long)a);
            CHECK(oy[r] == any && ol[r] == all, "any/all row %d", r);
        }
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* sum / argmax over dims 0 and 2 of a contiguous [4, 5, 6] tensor (two
 * reduction dims that cannot merge; r in logical order), and over dims 1
 * and 2 of [3, 4, 5] (they merge into one). */
static void
test_red_multidim(void)
{
    float x[120];
    for (int i = 0; i < 120; i++) {
        x[i] = (float)((i * 37) % 53);
    }
    x[2 * 30 + 3 * 6 + 4] = 100.0f; /* max of column j = 3: (2, 4) */
    x[3 * 30 + 3 * 6 + 1] = 100.0f; /* tie later: (3, 1) */
    int64_t sz[3] = {5, 4, 6};
    tc_kernel k;
    rkernel_init(&k, 1, 2, sz, 3);
    int64_t xs[3] = {6, 30, 1}, os[3] = {1, 0, 0};
    arg_strides(&k, 0, 0, TC_F32, 0, xs);
    arg_strides(&k, 1, 1, TC_F32, 1, os);
    arg_strides(&k, 2, 2, TC_I64, 1, os);
    int as = acc(&k, TC_ACC_SUM, TC_F32);
    int aa = acc(&k, TC_ACC_ARGMAX, TC_F32);
    phase_begin(&k);
    int v = load(&k, 0);
    acc_upd(&k, as, v);
    acc_upd(&k, aa, v);
    phase_end(&k);
    store(&k, 1, acc_res(&k, as, 0));
    store(&k, 2, acc_res(&k, aa, 1));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        CHECK(code->loops[0].nred == 2, "multidim nred %d",
              code->loops[0].nred);
        float o[5];
        int64_t a[5];
        void *args[3] = {x, o, a};
        run_chunked(code, 0, args);
        for (int j = 0; j < 5; j++) {
            double s = 0;
            float m = -INFINITY;
            int64_t best = -1;
            for (int i0 = 0; i0 < 4; i0++) {
                for (int i2 = 0; i2 < 6; i2++) {
                    float xv = x[i0 * 30 + j * 6 + i2];
                    s += xv;
                    if (best < 0 || xv > m) {
                        m = xv;
                        best = i0 * 6 + i2;
                    }
                }
            }
            CHECK(close_to(o[j], s, 1e-6, 1e-5), "multidim sum %d", j);
            CHECK(a[j] == best, "multidim argmax %d: %lld want %lld", j,
                  (long long)a[j], (long long)best);
        }
        tc_jit_code_free(code);
    }
    kernel_free(&k);
    /* dims 1, 2 of [3, 4, 5]: merged into one reduction dim of 20 */
    int64_t sz2[3] = {3, 4, 5};
    rkernel_init(&k, 1, 2, sz2, 2);
    int64_t xs2[3] = {20, 5, 1}, os2[3] = {1, 0, 0};
    arg_strides(&k, 0, 0, TC_F32, 0, xs2);
    arg_strides(&k, 1, 1, TC_I64, 1, os2);
    aa = acc(&k, TC_ACC_ARGMIN, TC_F32);
    phase_begin(&k);
    acc_upd(&k, aa, load(&k, 0));
    phase_end(&k);
    store(&k, 1, acc_res(&k, aa, 1));
    code = compile1(&k);
    if (code != NULL) {
        CHECK(code->loops[0].nred == 1 && code->loops[0].sizes[1] == 20,
              "merged reduction dims");
        int64_t a[3];
        void *args[2] = {x, a};
        run_chunked(code, 0, args);
        for (int j = 0; j < 3; j++) {
            CHECK(a[j] == ref_arg(x + 20 * j, 20, 1, 0), "merged argmin %d",
                  j);
        }
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* Empty reduction domain: accumulators keep their identities. */
static void
test_red_empty(void)
{
    int64_t sz[2] = {3, 0};
    tc_kernel k;
    rkernel_init(&k, 1, 1, sz, 4);
    int64_t xs[2] = {0, 1}, os[2] = {1, 0};
    arg_strides(&k, 0, 0, TC_F32, 0, xs);
    arg_strides(&k, 1, 1, TC_F32, 1, os);
    arg_strides(&k, 2, 2, TC_F32, 1, os);
    arg_strides(&k, 3, 3, TC_F32, 1, os);
    int as = acc(&k, TC_ACC_SUM, TC_F32);
    int ap = acc(&k, TC_ACC_PROD, TC_F32);
    int am = acc(&k, TC_ACC_MAX, TC_F32);
    phase_begin(&k);
    int v = load(&k, 0);
    acc_upd(&k, as, v);
    acc_upd(&k, ap, v);
    acc_upd(&k, am, v);
    phase_end(&k);
    store(&k, 1, acc_res(&k, as, 0));
    store(&k, 2, acc_res(&k, ap, 0));
    store(&k, 3, acc_res(&k, am, 0));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        float dummy = 0, s[3], p[3], m[3];
        void *args[4] = {&dummy, s, p, m};
        run_red(code, 0, args, 1 << 30);
        for (int i = 0; i < 3; i++) {
            CHECK(s[i] == 0 && p[i] == 1 && m[i] == -INFINITY,
                  "empty identities %g %g %g", s[i], p[i], m[i]);
        }
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* softmax over rows, built by hand as the scheduler does (max pass, sum
 * of exp pass, write pass); the write pass reuses exp through the output. */
static tc_kernel
softmax_kernel(int ndim, const int64_t *sizes, int64_t n)
{
    tc_kernel k;
    rkernel_init(&k, ndim, 1, sizes, 2);
    int64_t xs[2], os[2];
    if (ndim == 1) {
        xs[0] = os[0] = n;
        xs[1] = os[1] = 1;
    }
    else {
        xs[0] = os[0] = 1;
    }
    arg_strides(&k, 0, 1, TC_F32, 1, os);
    arg_strides(&k, 1, 0, TC_F32, 0, xs);
    int am = acc(&k, TC_ACC_MAX, TC_F32);
    phase_begin(&k);
    acc_upd(&k, am, load(&k, 1));
    phase_end(&k);
    int as = acc(&k, TC_ACC_SUM, TC_F32);
    int m = acc_res(&k, am, 0);
    phase_begin(&k);
    int e = add_inst(&k, KOP_EXP, TC_F32,
                     add_inst(&k, KOP_SUB, TC_F32, load(&k, 1), m, -1), -1,
                     -1);
    acc_upd(&k, as, e);
    phase_end(&k);
    int s = acc_res(&k, as, 0);
    phase_begin(&k);
    e = add_inst(&k, KOP_EXP, TC_F32,
                 add_inst(&k, KOP_SUB, TC_F32, load(&k, 1), m, -1), -1, -1);
    store(&k, 0, add_inst(&k, KOP_DIV, TC_F32, e, s, -1));
    phase_end(&k);
    return k;
}

static int
check_softmax(const float *x, const float *y, int64_t rows, int64_t n)
{
    int bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        double m = -INFINITY, s = 0;
        for (int64_t c = 0; c < n; c++) {
            m = fmax(m, x[r * n + c]);
        }
        for (int64_t c = 0; c < n; c++) {
            s += exp(x[r * n + c] - m);
        }
        for (int64_t c = 0; c < n; c++) {
            double w = exp(x[r * n + c] - m) / s;
            bad += !close_to(y[r * n + c], w, 1.3e-6, 1e-5);
        }
    }
    return bad;
}

static void
test_red_softmax(void)
{
    enum { R = 33, C = 777 };
    int64_t sz[2] = {R, C};
    tc_kernel k = softmax_kernel(1, sz, C);
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        static float x[R * C], y[R * C];
        srand(3);
        for (int i = 0; i < R * C; i++) {
            x[i] = (float)rand() / RAND_MAX * 20 - 10;
        }
        void *args[2] = {y, x};
        run_chunked(code, 0, args);
        int bad = check_softmax(x, y, R, C);
        CHECK(bad == 0, "softmax rows: %d mismatches", bad);
        tc_jit_code_free(code);
    }
    kernel_free(&k);
}

/* Full reductions split into chunks: sum / argmax / min of ~1M float32
 * (ties across chunks), bitwise identical for 1 and 2 threads; a 1-d
 * softmax (three phases, body stores in the chunks); var with a pre-region
 * store (the mean) done once by the finish call. */
static void
test_red_split(void)
{
    enum { N = (1 << 20) + 7 };
    float *x = malloc(sizeof(float) * N);
    srand(11);
    for (int i = 0; i < N; i++) {
        x[i] = (float)rand() / RAND_MAX;
    }
    x[12345] = 7.0f;
    x[N - 3] = 7.0f;  /* tie in a later chunk */
    x[99999] = -3.0f;
    int64_t sz[1] = {N};
    tc_kernel k;
    rkernel_init(&k, 0, 1, sz, 4);
    int64_t xs[1] = {1}, os[1] = {0};
    arg_strides(&k, 0, 0, TC_F32, 0, xs);
    arg_strides(&k, 1, 1, TC_F32, 1, os);
    arg_strides(&k, 2, 2, TC_I64, 1, os);
    arg_strides(&k, 3, 3, TC_F32, 1, os);
    int as = acc(&k, TC_ACC_SUM, TC_F32);
    int aa = acc(&k, TC_ACC_ARGMAX, TC_F32);
    int an = acc(&k, TC_ACC_MIN, TC_F32);
    phase_begin(&k);
    int v = load(&k, 0);
    acc_upd(&k, as, v);
    acc_upd(&k, aa, v);
    acc_upd(&k, an, v);
    phase_end(&k);
    store(&k, 1, acc_res(&k, as, 0));
    store(&k, 2, acc_res(&k, aa, 1));
    store(&k, 3, acc_res(&k, an, 0));
    tc_jit_code *code = compile1(&k);
    if (code != NULL) {
        CHECK(code->loops[0].nchunks > 1, "split: %lld chunks",
              (long long)code->loops[0].nchunks);
        double ref = 0;
        for (int i = 0; i < N; i++) {
            ref += x[i];
        }
        float s1, s2, m1, m2;
        int64_t a1, a2;
        void *args1[4] = {x, &s1, &a1, &m1}, *args2[4] = {x, &s2, &a2, &m2};
        run_red(code, 0, args1, (int64_t)1 << 62);
        int nt = tc_threadpool_get_threads();
        tc_threadpool_set_threads(2);
        run_red(code, 0, args2, 1);
        tc_threadpool_set_threads(nt);
        CHECK(close_to(s1, ref, 1.3e-6, 1e-5), "split sum %.9g want %.9g",
              s1, ref);
        CHECK(memcmp(&s1, &s2, 4) == 0, "split sum differs by threads");
        CHECK(a1 == 12345 && a2 == 12345, "split argmax %lld %lld",
              (long long)a1, (long long)a2);
        CHECK(m1 == -3.0f && m2 == -3.0f, "split min %g", m1);
        tc_jit_code_free(code);
    }
    kernel_free(&k);

    /* 1-d softmax of 300001 values */
    enum { M = 300001 };
    int64_t sm[1] = {M};
    k = softmax_kernel(0, sm, M);
    k.args[0].strides[0] = 1;
    k.args[1].strides[0] = 1;
    code = compile1(&k);
    if (code != NULL) {
        float *y = malloc(sizeof(float) * M);
        for (int i = 0; i < M; i++) {
            x[i] = x[i] * 30 - 15;
        }
        void *args[2] = {y, x};
        run_red(code, 0, args, 1);
        CHECK(code->loops[0].nchunks > 1, "1-d softmax not split");
        int bad = check_softmax(x, y, 1, M);
        CHECK(bad == 0, "1-d softmax: %d mismatches", bad);
        free(y);
        tc_jit_code_free(code);
    }
    kernel_free(&k);

    /* var: mean stored in pre_1 (once), then sum of squares / (n - 1) */
    enum { V = 200003 };
    int64_t sv[1] = {V};
    rkernel_init(&k, 0, 1, sv, 3);
    arg_strides(&k, 0, 0, TC_F64, 0, xs);
    arg_strides(&k, 1, 1, TC_F64, 1, os);
    arg_strides(&k, 2, 2, TC_F64, 1, os);
    as = acc(&k, TC_ACC_SUM, TC_F64);
    phase_begin(&k);
    acc_upd(&k, as, load(&k, 0));
    phase_end(&k);
    int a2 = acc(&k, TC_ACC_SUM, TC_F64);
    int mean = add_inst(&k, KOP_DIV, TC_F64, acc_res(&k, as, 0),
                        cf(&k, TC_F64, V), -1);
    store(&k, 1, mean);
    phase_begin(&k);
    int d = add_inst(&k, KOP_SUB, TC_F64, load(&k, 0), mean, -1);
    acc_upd(&k, a2, add_inst(&k, KOP_MUL, TC_F64, d, d, -1));
    phase_end(&k);
    store(&k, 2, add_inst(&k, KOP_DIV, TC_F64, acc_res(&k, a2, 0),
                          cf(&k, TC_F64, V - 1), -1));
    code = compile1(&k);
    if (code != NULL) {
        double *xd = malloc(sizeof(double) * V), om = 0, ov = 0;
        double rm = 0, rv = 0;
        for (int i = 0; i < V; i++) {
            xd[i] = sin(i * 0.01) * 3 + 1;
            rm += xd[i];
        }
        rm /= V;
        for (int i = 0; i < V; i++) {
            rv += (xd[i] - rm) * (xd[i] - rm);
        }
        rv /= V - 1;
        void *args[3] = {xd, &om, &ov};
        run_red(code, 0, args, 1);
        CHECK(close_to(om, rm, 1e-12, 0) && close_to(ov, rv, 1e-12, 0),
              "split var: mean %.17g want %.17g, var %.17g want %.17g", om,
              rm, ov, rv);
        free(xd);
        tc_jit_code_free(code);
    }
    kernel_free(&k);
    free(x);
}

/* A reduction kernel breaking kir.h's rules is refused with a message. */
static void
test_red_malformed(void)
{
    int64_t sz[2] = {2, 3};
    tc_kernel k;
    rkernel_init(&k, 1, 1, sz, 2);
    int64_t xs[2] = {3, 1}, os[2] = {1, 0};
    arg_strides(&k, 0, 0, TC_F32, 0, xs);
    arg_strides(&k, 1, 1, TC_F32, 1, os);
    int as = acc(&k, TC_ACC_SUM, TC_F32);
    phase_begin(&k);
    int v = load(&k, 0);
    acc_upd(&k, as, v);
    phase_end(&k);
    store(&k, 1, v); /* body value used in the post region */
    tc_plan plan = {0};
    plan.nkernels = 1;
    plan.kernels = &k;
    char err[512] = "";
    tc_jit_code *code = tc_jit_code_compile(&plan, 0, err, sizeof(err));
    CHECK(code == NULL && strstr(err, "malformed") != NULL,
          "malformed kernel: '%s'", err);
    tc_jit_code_free(code);
    kernel_free(&k);
}

/* ---- transcendental accuracy driver (compared against torch in Python) */

static tc_kop
parse_op(const char *s)
{
    static const struct {
        const char *n;
        tc_kop op;
    } t[] = {{"exp", KOP_EXP}, {"log", KOP_LOG}, {"sin", KOP_SIN},
             {"cos", KOP_COS}, {"tanh", KOP_TANH}};
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (strcmp(s, t[i].n) == 0) {
            return t[i].op;
        }
    }
    return KOP_COUNT;
}

/* exact: decompose here (the full-range path only); else let the code
 * generator build its fast/exact versioned loop. */
static int
accuracy_main(const char *opname, const char *in, const char *out, int exact)
{
    tc_kop op = parse_op(opname);
    FILE *f = fopen(in, "rb");
    if (op == KOP_COUNT || f == NULL) {
        fprintf(stderr, "bad op or input\n");
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f) / 4;
    fseek(f, 0, SEEK_SET);
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    if (fread(x, 4, (size_t)n, f) != (size_t)n) {
        return 2;
    }
    fclose(f);
    int64_t sz[1] = {n};
    tc_kernel k;
    kernel_init(&k, 1, sz, 2);
    arg_contig(&k, 0, TC_F32, 0);
    arg_contig(&k, 1, TC_F32, 1);
    store(&k, 1, add_inst(&k, op, TC_F32, load(&k, 0), -1, -1));
    if (exact
        && tc_kernel_decompose_math(&k, &tc_jit_math_target, NULL) < 0) {
        fprintf(stderr, "decompose failed\n");
        return 2;
    }
    for (int i = 0; exact && i < k.ninsts; i++) {
        tc_kop o = k.insts[i].op;
        if (o == KOP_EXP || o == KOP_LOG || o == KOP_SIN || o == KOP_COS
            || o == KOP_TANH) {
            fprintf(stderr, "transcendental left after decomposition\n");
            return 2;
        }
    }
    tc_jit_code *code = compile1(&k);
    if (code == NULL) {
        return 2;
    }
    void *args[2] = {x, y};
    code->fns[0](args, 0, n);
    f = fopen(out, "wb");
    fwrite(y, 4, (size_t)n, f);
    fclose(f);
    tc_jit_code_free(code);
    kernel_free(&k);
    free(x);
    free(y);
    return 0;
}

/* ---- benchmark: (sin(x) + cos(y)).relu() * 2 + 1 over N floats ------- */

typedef struct {
    tc_kernel_fn fn;
    void **args;
} bench_ctx;

static void
bench_task(void *p, int64_t b, int64_t e)
{
    bench_ctx *c = p;
    c->fn(c->args, b, e);
}

static double
now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
bench_main(int64_t n)
{
    int64_t sz[1] = {n};
    tc_kernel k;
    kernel_init(&k, 1, sz, 3);
    arg_contig(&k, 0, TC_F32, 0);
    arg_contig(&k, 1, TC_F32, 0);
    arg_contig(&k, 2, TC_F32, 1);
    /* TCJIT_BENCH_SIMPLE: same chain without sin/cos (memory bound) */
    int simple = getenv("TCJIT_BENCH_SIMPLE") != NULL;
    int s = add_inst(&k, simple ? KOP_NEG : KOP_SIN, TC_F32, load(&k, 0), -1,
                     -1);
    int c = add_inst(&k, simple ? KOP_ABS : KOP_COS, TC_F32, load(&k, 1), -1,
                     -1);
    int v = add_inst(&k, KOP_ADD, TC_F32, s, c, -1);
    v = add_inst(&k, KOP_MAX, TC_F32, v, cf(&k, TC_F32, 0.0), -1);
    v = add_inst(&k, KOP_MUL, TC_F32, v, cf(&k, TC_F32, 2.0), -1);
    v = add_inst(&k, KOP_ADD, TC_F32, v, cf(&k, TC_F32, 1.0), -1);
    store(&k, 2, v);
    tc_jit_set_opt_info(getenv("TCJIT_OPT_INFO") != NULL
                        ? atoi(getenv("TCJIT_OPT_INFO")) : 0);
    double t0 = now();
    tc_jit_code *code = compile1(&k);
    double tc = now() - t0;
    if (code == NULL) {
        return 1;
    }
    float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
    float *o = malloc((size_t)n * 4);
    srand(1);
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)rand() / RAND_MAX * 8 - 4;
        y[i] = (float)rand() / RAND_MAX * 8 - 4;
    }
    void *args[3] = {x, y, o};
    bench_ctx ctx = {code->fns[0], args};
    int ncpu = tc_threadpool_get_threads();
    for (int threads = 1; threads <= ncpu; threads++) {
        tc_threadpool_set_threads(threads);
        tc_threadpool_parallel_for(n, 4096, bench_task, &ctx);
        /* best of 10 runs: the machine is shared and noisy */
        double t = 1e9;
        for (int r = 0; r < 10; r++) {
            double t0 = now();
            tc_threadpool_parallel_for(n, 4096, bench_task, &ctx);
            double dt = now() - t0;
            t = dt < t ? dt : t;
        }
        printf("threads %d: %.1f us, %.2f GB/s\n", threads, t * 1e6,
               3.0 * 4 * n / t / 1e9);
    }
    printf("compile %.1f ms (%d insts)\n", tc * 1e3, k.ninsts);
    tc_threadpool_set_threads(0);
    tc_threadpool_shutdown();
    tc_jit_code_free(code);
    kernel_free(&k);
    free(x);
    free(y);
    free(o);
    return 0;
}

/* ---- runtime tests through embedded Python ---------------------------- */
#ifdef TC_TEST_PYTHON

/* A malloc'd plan (tc_jit_compile takes ownership). */
static tc_plan *
plan_new(int nbuffers, int nkernels, int noutputs)
{
    tc_plan *p = calloc(1, sizeof(*p));
    p->nbuffers = nbuffers;
    p->buffers = calloc((size_t)nbuffers, sizeof(tc_buffer));
    p->nkernels = nkernels;
    p->kernels = calloc((size_t)nkernels, sizeof(tc_kernel));
    p->noutputs = noutputs;
    p->output_buffer = calloc((size_t)noutputs, sizeof(int));
    return p;
}

static void
set_buffer(tc_plan *p, int b, tc_buf_kind kind, int index, tc_dtype dt,
           int ndim, const int64_t *sizes)
{
    tc_buffer *buf = &p->buffers[b];
    buf->kind = kind;
    buf->index = index;
    buf->dtype = dt;
    buf->layout.ndim = ndim;
    int64_t st = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        buf->layout.sizes[d] = sizes[d];
        buf->layout.strides[d] = st;
        st *= sizes[d];
    }
}

static PyObject *globals;

static PyObject *
py(const char *code)
{
    PyObject *r = PyRun_String(code, Py_eval_input, globals, globals);
    if (r == NULL) {
        PyErr_Print();
        failures++;
    }
    return r;
}

static void
py_exec(const char *code)
{
    PyObject *r = PyRun_String(code, Py_file_input, globals, globals);
    if (r == NULL) {
        PyErr_Print();
        failures++;
    }
    Py_XDECREF(r);
}

static int
py_true(const char *code)
{
    PyObject *r = py(code);
    int t = r != NULL && PyObject_IsTrue(r) == 1;
    Py_XDECREF(r);
    return t;
}

/* y = x + 1 over one float32 element; outputs (x, y, y). */
static tc_compiled *
compile_add_one(int64_t n)
{
    tc_plan *p = plan_new(2, 1, 3);
    int64_t sz[1] = {n};
    set_buffer(p, 0, TC_BUF_INPUT, 0, TC_F32, 1, sz);
    set_buffer(p, 1, TC_BUF_OUTPUT, 1, TC_F32, 1, sz);
    tc_kernel *k = &p->kernels[0];
    kernel_init(k, 1, sz, 2);
    arg_contig(k, 0, TC_F32, 0);
    arg_contig(k, 1, TC_F32, 1);
    k->args[1].buffer = 1;
    store(k, 1, add_inst(k, KOP_ADD, TC_F32, load(k, 0), cf(k, TC_F32, 1.0),
                         -1));
    p->output_buffer[0] = 0;
    p->output_buffer[1] = 1;
    p->output_buffer[2] = 1;
    char *text = NULL;
    tc_compiled *c = tc_jit_compile(p, &text);
    CHECK(c != NULL && text != NULL, "compile_add_one");
    free(text);
    return c;
}

static void
run_and_store(tc_compiled *c, const char *in_names, int nout)
{
    PyObject *ins = py(in_names);
    if (ins == NULL) {
        return;
    }
    PyObject *outs[8] = {0};
    int rc = tc_jit_run(c, &PyTuple_GET_ITEM(ins, 0), PyTuple_GET_SIZE(ins),
                        outs);
    CHECK(rc == 0, "tc_jit_run failed");
    if (rc < 0) {
        PyErr_Print();
    }
    PyObject *t = PyTuple_New(nout);
    for (int j = 0; j < nout; j++) {
        PyTuple_SET_ITEM(t, j, outs[j] ? outs[j] : Py_NewRef(Py_None));
    }
    PyDict_SetItemString(globals, "outs", t);
    Py_DECREF(t);
    Py_DECREF(ins);
}

static void
test_rt_add_one(void)
{
    tc_compiled *c = compile_add_one(1);
    if (c == NULL) {
        PyErr_Print();
        return;
    }
    py_exec("x = torch.tensor([41.0])\nrc0 = sys.getrefcount(x)");
    run_and_store(c, "(x,)", 3);
    CHECK(py_true("outs[0] is x and outs[1] is outs[2]"), "output identity");
    CHECK(py_true("outs[1].item() == 42.0 and outs[1].dtype == torch.float32"),
          "x + 1 value");
    py_exec("del outs");
    CHECK(py_true("sys.getrefcount(x) == rc0"), "input reference leak");
    /* per-call overhead vs eager */
    PyObject *ins = py("(x,)");
    PyObject *outs[3];
    int reps = 200000;
    double best = 1e9;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        for (int i = 0; i < reps; i++) {
            tc_jit_run(c, &PyTuple_GET_ITEM(ins, 0), 1, outs);
            Py_DECREF(outs[0]);
            Py_DECREF(outs[1]);
            Py_DECREF(outs[2]);
        }
        double dt = (now() - t0) / reps;
        best = dt < best ? dt : best;
    }
    Py_DECREF(ins);
    py_exec("import timeit\n"
            "eager = min(timeit.repeat(lambda: x + 1, number=200000, "
            "repeat=5)) / 200000\n"
            "emp = min(timeit.repeat(lambda: torch.empty_strided((1,), (1,), "
            "dtype=torch.float32), number=200000, repeat=5)) / 200000\n");
    PyObject *eager = py("eager"), *emp = py("emp");
    if (eager != NULL && emp != NULL) {
        printf("x+1 (1 elem): tcjit run %.2f us, eager %.2f us, "
               "empty_strided %.2f us\n", best * 1e6,
               PyFloat_AsDouble(eager) * 1e6, PyFloat_AsDouble(emp) * 1e6);
    }
    Py_XDECREF(eager);
    Py_XDECREF(emp);
    tc_jit_free(c);
}

/* t = x * y (TEMP, y broadcast over rows), out = t + 1 written through a
 * transposed (column-major) output layout. */
static void
test_rt_temp_broadcast(void)
{
    enum { R = 300, C = 257 };
    tc_plan *p = plan_new(4, 2, 1);
    int64_t sz[2] = {R, C}, szy[1] = {C};
    set_buffer(p, 0, TC_BUF_INPUT, 0, TC_F64, 2, sz);
    set_buffer(p, 1, TC_BUF_INPUT, 1, TC_F64, 1, szy);
    set_buffer(p, 2, TC_BUF_TEMP, 5, TC_F64, 2, sz);
    set_buffer(p, 3, TC_BUF_OUTPUT, 6, TC_F64, 2, sz);
    p->buffers[3].layout.strides[0] = 1;
    p->buffers[3].layout.strides[1] = R;
    tc_kernel *k0 = &p->kernels[0], *k1 = &p->kernels[1];
    kernel_init(k0, 2, sz, 3);
    arg_contig(k0, 0, TC_F64, 0);
    arg_contig(k0, 1, TC_F64, 0);
    k0->args[1].strides[0] = 0;
    k0->args[1].strides[1] = 1;
    arg_contig(k0, 2, TC_F64, 1);
    store(k0, 2, add_inst(k0, KOP_MUL, TC_F64, load(k0, 0), load(k0, 1), -1));
    kernel_init(k1, 2, sz, 2);
    arg_contig(k1, 0, TC_F64, 0);
    k1->args[0].buffer = 2;
    arg_contig(k1, 1, TC_F64, 1);
    k1->args[1].buffer = 3;
    k1->args[1].strides[0] = 1;
    k1->args[1].strides[1] = R;
    store(k1, 1, add_inst(k1, KOP_ADD, TC_F64, load(k1, 0),
                          cf(k1, TC_F64, 1.0), -1));
    p->output_buffer[0] = 3;
    tc_compiled *c = tc_jit_compile(p, NULL);
    CHECK(c != NULL && tc_jit_nkernels(c) == 2, "compile temp/broadcast");
    if (c == NULL) {
        PyErr_Print();
        return;
    }
    py_exec("a = torch.randn(300, 257, dtype=torch.float64)\n"
            "b = torch.randn(257, dtype=torch.float64)\n");
    run_and_store(c, "(a, b)", 1);
    CHECK(py_true("torch.equal(outs[0], a * b + 1)"), "temp/broadcast value");
    CHECK(py_true("outs[0].stride() == (1, 300)"), "output layout");
    tc_jit_free(c);
}

/* The 4M float32 chain through the runtime, vs eager and torch.compile. */
static void
test_rt_chain(void)
{
    int64_t n = 1 << 22;
    tc_plan *p = plan_new(3, 1, 1);
    int64_t sz[1] = {n};
    set_buffer(p, 0, TC_BUF_INPUT, 0, TC_F32, 1, sz);
    set_buffer(p, 1, TC_BUF_INPUT, 1, TC_F32, 1, sz);
    set_buffer(p, 2, TC_BUF_OUTPUT, 9, TC_F32, 1, sz);
    tc_kernel *k = &p->kernels[0];
    kernel_init(k, 1, sz, 3);
    arg_contig(k, 0, TC_F32, 0);
    arg_contig(k, 1, TC_F32, 0);
    k->args[1].buffer = 1;
    arg_contig(k, 2, TC_F32, 1);
    k->args[2].buffer = 2;
    int s = add_inst(k, KOP_SIN, TC_F32, load(k, 0), -1, -1);
    int co = add_inst(k, KOP_COS, TC_F32, load(k, 1), -1, -1);
    int v = add_inst(k, KOP_ADD, TC_F32, s, co, -1);
    v = add_inst(k, KOP_MAX, TC_F32, v, cf(k, TC_F32, 0.0), -1);
    v = add_inst(k, KOP_MUL, TC_F32, v, cf(k, TC_F32, 2.0), -1);
    store(k, 2, add_inst(k, KOP_ADD, TC_F32, v, cf(k, TC_F32, 1.0), -1));
    p->output_buffer[0] = 2;
    double t0 = now();
    tc_compiled *c = tc_jit_compile(p, NULL);
    double tcomp = now() - t0;
    if (c == NULL) {
        PyErr_Print();
        failures++;
        return;
    }
    py_exec("x = torch.randn(1 << 22) * 3\ny = torch.randn(1 << 22) * 3\n"
            "x[:1000] *= 1e6\n"
            "def f(x, y):\n"
            "    return (torch.sin(x) + torch.cos(y)).relu() * 2 + 1\n");
    run_and_store(c, "(x, y)", 1);
    CHECK(py_true("torch.testing.assert_close(outs[0], f(x, y)) is None"),
          "chain value");
    PyObject *ins = py("(x, y)");
    PyObject *out;
    int inductor = getenv("TC_BENCH_INDUCTOR") != NULL;
    if (inductor) {
        py_exec("g = torch.compile(f)\ng(x, y)\n");
    }
    for (int round = 0; round < 3; round++) {
        double best = 1e9;
        for (int r = 0; r < 20; r++) {
            double t1 = now();
            tc_jit_run(c, &PyTuple_GET_ITEM(ins, 0), 2, &out);
            Py_DECREF(out);
            double dt = now() - t1;
            best = dt < best ? dt : best;
        }
        printf("chain 4M: tcjit %.0f us (%.1f GB/s)", best * 1e6,
               12.0 * n / best / 1e9);
        if (inductor) {
            py_exec("import time\nbest = 1e9\n"
                    "for _ in range(20):\n"
                    "    t = time.perf_counter(); g(x, y)\n"
                    "    best = min(best, time.perf_counter() - t)\n");
            PyObject *b = py("best");
            printf(", inductor %.0f us", b ? PyFloat_AsDouble(b) * 1e6 : -1);
            Py_XDECREF(b);
        }
        printf("\n");
    }
    printf("chain compile: %.1f ms\n", tcomp * 1e3);
    Py_DECREF(ins);
    tc_jit_free(c);
}

static void
test_rt_errors(void)
{
    /* unsupported op -> RuntimeError naming the problem */
    tc_plan *p = plan_new(1, 1, 1);
    int64_t sz[1] = {4};
    set_buffer(p, 0, TC_BUF_OUTPUT, 0, TC_F32, 1, sz);
    tc_kernel *k = &p->kernels[0];
    kernel_init(k, 1, sz, 1);
    arg_contig(k, 0, TC_F32, 1);
    store(k, 0, add_inst(k, KOP_NOT, TC_F32, cf(k, TC_F32, 1.0), -1, -1));
    p->output_buffer[0] = 0;
    tc_compiled *c = tc_jit_compile(p, NULL);
    CHECK(c == NULL && PyErr_ExceptionMatches(PyExc_RuntimeError),
          "compile error -> RuntimeError");
    PyErr_Clear();
    /* too few inputs at run time -> exception, no crash */
    c = compile_add_one(3);
    if (c != NULL) {
        PyObject *outs[3];
        CHECK(tc_jit_run(c, NULL, 0, outs) < 0 && PyErr_Occurred(),
              "missing input -> exception");
        PyErr_Clear();
        tc_jit_free(c);
    }
    /* empty tensors: the kernel is skipped */
    c = compile_add_one(0);
    if (c != NULL) {
        py_exec("e = torch.empty(0)");
        run_and_store(c, "(e,)", 3);
        CHECK(py_true("outs[1].shape == (0,)"), "empty output");
        tc_jit_free(c);
    }
}

/* ---- reductions and views through the real scheduler and the runtime,
 * checked against torch (needs the src/graph sources linked) ---------- */

/* Schedules g (outputs set), compiles the plan; frees g. */
static tc_compiled *
compile_graph(tc_graph *g)
{
    char err[512];
    tc_plan *p = tc_schedule(g, err, sizeof(err));
    tc_graph_free(g);
    if (p == NULL) {
        fprintf(stderr, "schedule: %s\n", err);
        failures++;
        return NULL;
    }
    tc_compiled *c = tc_jit_compile(p, NULL);
    if (c == NULL) {
        PyErr_Print();
        failures++;
    }
    return c;
}

static int
graph_input(tc_graph *g, tc_dtype dt, int ndim, const int64_t *sizes)
{
    tc_layout l = {0};
    l.ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        l.sizes[d] = sizes[d];
    }
    tc_layout_contiguous(&l);
    return tc_graph_input(g, dt, &l);
}

/* One graph: out = name(x, dims) over a float32 input of the given shape;
 * checked with `check` (a Python expression over outs, x). */
typedef struct {
    const char *name;       /* tc_graph_reduce name, or softmax & co */
    int ndims;              /* reduction dims (0: all) */
    int64_t dim;
    int keepdim;
    const char *check;
} red_case;

static int
build_case(tc_graph *g, int x, const red_case *rc, int64_t lastdim,
           char *err)
{
    if (strcmp(rc->name, "softmax") == 0 || strcmp(rc->name, "log_softmax")
                                                == 0) {
        return tc_graph_softmax(g, x, rc->dim, 0, TC_F32,
                                rc->name[0] == 'l', err, 256);
    }
    if (strcmp(rc->name, "layer_norm") == 0) {
        /* weight = input 1, bias = input 2 */
        int64_t sz[1] = {lastdim};
        int w = graph_input(g, TC_F32, 1, sz), b = graph_input(g, TC_F32, 1,
                                                               sz);
        return tc_graph_layer_norm(g, x, 1, sz, w, b, 1e-5, err, 256);
    }
    if (strcmp(rc->name, "rms_norm") == 0) {
        int64_t sz[1] = {lastdim};
        int w = graph_input(g, TC_F32, 1, sz);
        return tc_graph_rms_norm(g, x, 1, sz, w, 0, 0, err, 256);
    }
    tc_reduce_args ra = {0};
    ra.ndims = rc->ndims;
    ra.dims[0] = rc->dim;
    ra.keepdim = rc->keepdim;
    ra.correction = 1;
    ra.p = 2;
    return tc_graph_reduce(g, rc->name, x, &ra, err, 256);
}

static void
run_case(const red_case *rc, int ndim, const int64_t *sizes,
         const char *inputs)
{
    char err[256];
    tc_graph *g = tc_graph_new();
    int x = graph_input(g, TC_F32, ndim, sizes);
    int y = build_case(g, x, rc, sizes[ndim - 1], err);
    if (y < 0) {
        CHECK(0, "%s: %s", rc->name, err);
        tc_graph_free(g);
        return;
    }
    tc_graph_set_outputs(g, 1, &y);
    tc_compiled *c = compile_graph(g);
    if (c == NULL) {
        return;
    }
    run_and_store(c, inputs, 1);
    CHECK(py_true(rc->check), "%s(dim %lld) vs torch: %s", rc->name,
          (long long)rc->dim, rc->check);
    tc_jit_free(c);
}

static void
test_rt_reductions(void)
{
    /* rows of 4096, with a NaN row and ties for amax / argmax */
    py_exec("torch.manual_seed(0)\n"
            "x = torch.randn(64, 4096)\n"
            "xn = x.clone(); xn[3, 100] = float('nan'); xn[3, 7] = "
            "float('nan')\n"
            "xn[5, 9] = xn[5, 4000] = 50.0; xn[6, :] = float('-inf')\n"
            "xp = torch.rand(64, 4096) * 0.02 + 0.99\n"
            "AC = torch.testing.assert_close\n");
    int64_t s2[2] = {64, 4096};
    static const red_case rows[] = {
        {"sum", 1, -1, 0, "AC(outs[0], x.sum(-1)) is None"},
        {"mean", 1, -1, 1, "AC(outs[0], x.mean(-1, keepdim=True)) is None"},
        {"var", 1, -1, 0, "AC(outs[0], x.var(-1)) is None"},
        {"std", 1, -1, 0, "AC(outs[0], x.std(-1)) is None"},
        {"logsumexp", 1, -1, 0, "AC(outs[0], x.logsumexp(-1)) is None"},
        {"norm", 1, -1, 0, "AC(outs[0], torch.linalg.vector_norm(x, 2, "
                           "-1)) is None"},
        {"sum", 1, 0, 0, "AC(outs[0], x.sum(0)) is None"},
        {"var", 1, 0, 0, "AC(outs[0], x.var(0)) is None"},
        {"softmax", 1, -1, 0, "AC(outs[0], x.softmax(-1)) is None"},
        {"log_softmax", 1, -1, 0, "AC(outs[0], x.log_softmax(-1)) is None"},
        {"softmax", 1, 0, 0, "AC(outs[0], x.softmax(0)) is None"},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        run_case(&rows[i], 2, s2, "(x,)");
    }
    static const red_case nan_rows[] = {
        {"amax", 1, -1, 0, "torch.equal(outs[0].nan_to_num(1e30), "
                           "xn.amax(-1).nan_to_num(1e30))"},
        {"amin", 1, 0, 0, "torch.equal(outs[0].nan_to_num(1e30), "
                          "xn.amin(0).nan_to_num(1e30))"},
        {"argmax", 1, -1, 0, "torch.equal(outs[0], xn.argmax(-1))"},
        {"argmin", 1, -1, 0, "torch.equal(outs[0], xn.argmin(-1))"},
        {"argmax", 1, 0, 0, "torch.equal(outs[0], xn.argmax(0))"},
        {"argmax", 0, 0, 0, "torch.equal(outs[0], xn[4:].argmax())"},
    };
    for (size_t i = 0; i < sizeof(nan_rows) / sizeof(nan_rows[0]); i++) {
        if (nan_rows[i].ndims == 0) {
            int64_t s3[2] = {60, 4096};
            py_exec("xn4 = xn[4:].contiguous()");
            run_case(&nan_rows[i], 2, s3, "(xn4,)");
            continue;
        }
        run_case(&nan_rows[i], 2, s2, "(xn,)");
    }
    red_case prod = {"prod", 1, -1, 0, "AC(outs[0], xp.prod(-1)) is None"};
    run_case(&prod, 2, s2, "(xp,)");

    /* full reductions over 1M elements (split into chunks) */
    py_exec("z = torch.rand(1 << 20)\nzn = torch.randn(1 << 20)\n"
            "zt = zn.clone(); zt[777] = zt[900000] = 9.0\n");
    int64_t s1[1] = {1 << 20};
    static const red_case full[] = {
        {"sum", 0, 0, 0, "AC(outs[0], z.sum()) is None"},
        {"mean", 0, 0, 0, "AC(outs[0], z.mean()) is None"},
        {"var", 0, 0, 0, "AC(outs[0], z.var()) is None"},
        {"std", 0, 0, 0, "AC(outs[0], z.std()) is None"},
        /* torch's own float32 vector_norm is ~1e-5 off here; the float64
         * result is the reference (torch's sum-based one is as close) */
        {"norm", 0, 0, 0, "AC(outs[0], torch.linalg.vector_norm(z.double())"
                          ".float()) is None"},
        {"softmax", 1, 0, 0, "AC(outs[0], z.softmax(0)) is None"},
    };
    for (size_t i = 0; i < sizeof(full) / sizeof(full[0]); i++) {
        run_case(&full[i], 1, s1, "(z,)");
    }
    red_case fsum = {"sum", 0, 0, 0, "AC(outs[0], zn.sum()) is None"};
    run_case(&fsum, 1, s1, "(zn,)");
    red_case farg = {"argmax", 0, 0, 0, "outs[0].item() == 777"};
    run_case(&farg, 1, s1, "(zt,)");

    /* normalizations */
    py_exec("h = torch.randn(2048, 1024) * 2 + 0.5\n"
            "w = torch.randn(1024)\nb = torch.randn(1024)\n"
            "F = torch.nn.functional\n");
    int64_t sh[2] = {2048, 1024};
    red_case ln = {"layer_norm", 1, -1, 0,
                   "AC(outs[0], F.layer_norm(h, (1024,), w, b)) is None"};
    run_case(&ln, 2, sh, "(h, w, b)");
    red_case rms = {"rms_norm", 1, -1, 0,
                    "AC(outs[0], F.rms_norm(h, (1024,), w)) is None"};
    run_case(&rms, 2, sh, "(h, w)");
}

/* View outputs alias what eager aliases; a view input is read in place. */
static void
test_rt_views(void)
{
    char err[256];
    int64_t sz[2] = {4, 8}, one = 1, three = 3;
    py_exec("v = torch.arange(32.).reshape(4, 8)\n");
    /* x[:, 1:3]: no kernel, an alias of the input */
    tc_graph *g = tc_graph_new();
    int x = graph_input(g, TC_F32, 2, sz);
    int s = tc_graph_slice(g, x, 1, &one, &three, 1, err, sizeof(err));
    /* (x[:, 1:3] + 1): the kernel reads the input through an offset */
    int c1 = tc_graph_scalar_float(g, 1.0);
    int in2[2] = {s, c1};
    int a = tc_graph_op(g, "add", 2, in2, 0, err, sizeof(err));
    /* (x + 1).t(): a view of a computed output buffer */
    int in3[2] = {x, c1};
    int xp1 = tc_graph_op(g, "add", 2, in3, 0, err, sizeof(err));
    int t = tc_graph_transpose(g, xp1, 0, 1, err, sizeof(err));
    int outs3[3] = {s, a, t};
    CHECK(s >= 0 && a >= 0 && t >= 0, "view graph: %s", err);
    tc_graph_set_outputs(g, 3, outs3);
    tc_compiled *c = compile_graph(g);
    if (c == NULL) {
        return;
    }
    run_and_store(c, "(v,)", 3);
    CHECK(py_true("torch.equal(outs[0], v[:, 1:3]) and "
                  "outs[0].stride() == v[:, 1:3].stride() and "
                  "outs[0].storage_offset() == 1 and "
                  "outs[0].untyped_storage().data_ptr() == "
                  "v.untyped_storage().data_ptr()"),
          "slice output aliases the input");
    CHECK(py_true("torch.equal(outs[1], v[:, 1:3] + 1)"), "offset read");
    CHECK(py_true("torch.equal(outs[2], (v + 1).t()) and "
                  "outs[2].stride() == (v + 1).t().stride()"),
          "view of a computed output");
    py_exec("v[0, 1] = 100.0\n");
    CHECK(py_true("outs[0][0, 0].item() == 100.0"), "alias sees writes");
    /* a view input with its own storage offset */
    py_exec("big = torch.arange(100.)\nvo = big[4:36].view(4, 8)\n");
    run_and_store(c, "(vo,)", 3);
    CHECK(py_true("outs[0].storage_offset() == 5 and "
                  "torch.equal(outs[0], vo[:, 1:3]) and "
                  "torch.equal(outs[1], vo[:, 1:3] + 1)"),
          "view of a view input");
    py_exec("del outs\n");
    tc_jit_free(c);
}

/* Best-of-N timings, interleaved with eager in the same process. */
static void
bench_case(const char *label, tc_compiled *c, const char *inputs,
           const char *eager)
{
    PyObject *ins = py(inputs);
    if (ins == NULL) {
        return;
    }
    char code[512];
    snprintf(code, sizeof(code),
             "import timeit\n"
             "_e = min(timeit.repeat(lambda: %s, number=20, repeat=15)) / "
             "20\n", eager);
    double best = 1e9, eb = 1e9;
    for (int round = 0; round < 3; round++) {
        for (int r = 0; r < 15; r++) {
            double t0 = now();
            for (int i = 0; i < 20; i++) {
                PyObject *out;
                tc_jit_run(c, &PyTuple_GET_ITEM(ins, 0),
                           PyTuple_GET_SIZE(ins), &out);
                Py_DECREF(out);
            }
            double dt = (now() - t0) / 20;
            best = dt < best ? dt : best;
        }
        py_exec(code);
        PyObject *e = py("_e");
        double ev = e != NULL ? PyFloat_AsDouble(e) : 1e9;
        eb = ev < eb ? ev : eb;
        Py_XDECREF(e);
    }
    printf("%-24s tcjit %8.1f us   eager %8.1f us   (%d threads)\n", label,
           best * 1e6, eb * 1e6, tc_threadpool_get_threads());
    Py_DECREF(ins);
}

static void
test_rt_bench_reductions(void)
{
    char err[256];
    py_exec("torch.manual_seed(1)\n"
            "bs = torch.randn(1024, 1024)\nbl = torch.randn(2048, 1024)\n"
            "bw = torch.randn(1024)\nbb = torch.randn(1024)\n"
            "bz = torch.randn(1 << 20)\nF = torch.nn.functional\n");
    int64_t s1[2] = {1024, 1024}, s2[2] = {2048, 1024}, s3[1] = {1 << 20};
    red_case sm = {"softmax", 1, -1, 0, NULL};
    red_case ln = {"layer_norm", 1, -1, 0, NULL};
    red_case su = {"sum", 0, 0, 0, NULL};
    struct {
        const red_case *rc;
        int ndim;
        const int64_t *sz;
        const char *label, *inputs, *eager;
    } cases[] = {
        {&sm, 2, s1, "softmax 1024x1024", "(bs,)", "torch.softmax(bs, -1)"},
        {&ln, 2, s2, "layer_norm 2048x1024", "(bl, bw, bb)",
         "F.layer_norm(bl, (1024,), bw, bb)"},
        {&su, 1, s3, "sum 1M", "(bz,)", "bz.sum()"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        tc_graph *g = tc_graph_new();
        int x = graph_input(g, TC_F32, cases[i].ndim, cases[i].sz);
        int y = build_case(g, x, cases[i].rc,
                           cases[i].sz[cases[i].ndim - 1], err);
        tc_graph_set_outputs(g, 1, &y);
        double t0 = now();
        tc_compiled *c = compile_graph(g);
        double tcomp = now() - t0;
        if (c == NULL) {
            continue;
        }
        printf("%-24s compile %.1f ms\n", cases[i].label, tcomp * 1e3);
        bench_case(cases[i].label, c, cases[i].inputs, cases[i].eager);
        tc_jit_free(c);
    }
}

static int
runtime_main(void)
{
    Py_Initialize();
    globals = PyDict_New();
    PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
    py_exec("import torch, sys\n");
    if (tc_jit_init() < 0) {
        PyErr_Print();
        return 1;
    }
    printf("cflags: %s\n", tc_jit_cflags());
    test_rt_add_one();
    test_rt_temp_broadcast();
    test_rt_errors();
    test_rt_reductions();
    test_rt_views();
    if (getenv("TC_SKIP_BENCH") == NULL) {
        test_rt_chain();
        test_rt_bench_reductions();
    }
    tc_threadpool_shutdown();
    Py_DECREF(globals);
    printf("runtime: %s (%d failures)\n", failures ? "FAILED" : "ok",
           failures);
    return failures != 0;
}
#endif

int
main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "acc") == 0) {
        return accuracy_main(argv[2], argv[3], argv[4], 1);
    }
    if (argc == 5 && strcmp(argv[1], "accv") == 0) {
        return accuracy_main(argv[2], argv[3], argv[4], 0);
    }
#ifdef TC_TEST_PYTHON
    if (argc >= 2 && strcmp(argv[1], "runtime") == 0) {
        return runtime_main();
    }
#endif
    if (argc >= 2 && strcmp(argv[1], "bench") == 0) {
        return bench_main(argc >= 3 ? atoll(argv[2]) : (1 << 22));
    }
    test_add_contig();
    test_broadcast_2d();
    test_collapse();
    test_ndim0();
    test_float_binary();
    test_where_cast();
    test_int_ops();
    test_two_kernels();
    test_error();
    test_offset();
    test_red_rows(0);
    test_red_rows(1);
    test_red_ints();
    test_red_multidim();
    test_red_empty();
    test_red_softmax();
    test_red_split();
    test_red_malformed();
    tc_threadpool_shutdown();
    printf("march=%s: %s (%d failures)\n", tc_cpu_march(),
           failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
