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
 *   /tmp/test_jit bench [N]        the 4M (sin(x)+cos(y)).relu()*2+1 chain
 */
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

static float r_max(float a, float b)
{
    return isnan(a) || isnan(b) ? NAN : (a > b ? a : b);
}
static float r_min(float a, float b)
{
    return isnan(a) || isnan(b) ? NAN : (a < b ? a : b);
}
static float r_pow(float a, float b) { return powf(a, b); }
static float r_div(float a, float b) { return a / b; }

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

static int
accuracy_main(const char *opname, const char *in, const char *out)
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
    if (tc_kernel_decompose_transcendentals(&k) < 0) {
        fprintf(stderr, "decompose failed\n");
        return 2;
    }
    for (int i = 0; i < k.ninsts; i++) {
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
    int s = add_inst(&k, KOP_SIN, TC_F32, load(&k, 0), -1, -1);
    int c = add_inst(&k, KOP_COS, TC_F32, load(&k, 1), -1, -1);
    int v = add_inst(&k, KOP_ADD, TC_F32, s, c, -1);
    v = add_inst(&k, KOP_MAX, TC_F32, v, cf(&k, TC_F32, 0.0), -1);
    v = add_inst(&k, KOP_MUL, TC_F32, v, cf(&k, TC_F32, 2.0), -1);
    v = add_inst(&k, KOP_ADD, TC_F32, v, cf(&k, TC_F32, 1.0), -1);
    store(&k, 2, v);
    tc_kernel_decompose_transcendentals(&k);
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
        int reps = 20;
        double t = now();
        for (int r = 0; r < reps; r++) {
            tc_threadpool_parallel_for(n, 4096, bench_task, &ctx);
        }
        t = (now() - t) / reps;
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

int
main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "acc") == 0) {
        return accuracy_main(argv[2], argv[3], argv[4]);
    }
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
