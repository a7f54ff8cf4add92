/* test_jit.c - numeric tests of the CPU code generator, without Python.
 *
 * Builds small kernels by hand, compiles them through tc_jit_code_compile
 * and calls the kernel functions directly.  Build (from the repo root):
 *
 *   gcc -O2 -std=gnu11 -o /tmp/test_jit tests/c/test_jit.c \
 *       src/jit/gccjit_emit.c src/jit/cpu.c src/jit/threadpool.c \
 *       src/graph/transcendental.c -lgccjit -lpthread -lm
 *
 *   /tmp/test_jit                  unit tests
 *   /tmp/test_jit acc OP IN OUT    OP in exp/log/sin/cos/tanh: float32 file
 *                                  IN -> OUT through the decomposed kernel
 *   /tmp/test_jit accv OP IN OUT   same through the compiler's own path
 *                                  (fast sin/cos with exact redo)
 *   /tmp/test_jit bench [N]        the 4M (sin(x)+cos(y)).relu()*2+1 chain
 *
 * With -DTC_TEST_PYTHON, src/jit/runtime.c and Python embedded
 * ($(python3-config --includes --ldflags --embed)), `test_jit runtime`
 * tests tc_jit_compile/tc_jit_run against torch (TC_BENCH_INDUCTOR=1 also
 * times torch.compile on the 4M chain in the same process).
 */
#ifdef TC_TEST_PYTHON
#include "../../src/jit/jit.h"
#endif
#include "../../src/jit/jit_internal.h"
#include "../../src/jit/threadpool.h"

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
    tc_jit_code *code = tc_jit_code_compile(&plan, err, sizeof(err));
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
    tc_jit_code *code = tc_jit_code_compile(&plan, err, sizeof(err));
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
    tc_jit_code *code = tc_jit_code_compile(&plan, err, sizeof(err));
    CHECK(code == NULL && strstr(err, "unsupported") != NULL,
          "error path: '%s'", err);
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
    if (exact && tc_kernel_decompose_transcendentals(&k) < 0) {
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
    test_rt_chain();
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
    printf("march=%s: %s (%d failures)\n", tc_cpu_march(),
           failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
