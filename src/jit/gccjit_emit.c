/* gccjit_emit.c - kernel IR -> machine code through libgccjit.
 *
 * All pointwise kernels of a plan go into one gccjit context, so one
 * compile pays for one assembler + linker run; reduction kernels go into a
 * second one (options of their own, see set_options).  Pointwise
 * kernel i becomes
 *
 *     void tc_k<i>(void **args, int64_t begin, int64_t end)
 *
 * looping over the collapsed loop nest (tc_loop) with the outermost index in
 * [begin, end).  Sizes and strides are compile-time constants, so the
 * innermost loop is a plain counted loop that GCC's vectorizer handles.
 *
 * Everything in the element body is branch-free: libgccjit has no ternary
 * operator and a branch would stop vectorization, so selects are bit
 * selects and NaN handling is done with comparisons.
 *
 * Reduction kernels (kir.h "Reduction kernels") become a row program per
 * outer point, or for a long full reduction a set of chunk functions
 * (jit_internal.h tc_split_fns); see "reduction kernels" below.
 */
#include "jit_internal.h"
#include "../graph/reduce_plan.h"
#include "../runtime/threadpool.h"
#include "../runtime/diskcache.h"

#include <errno.h>
#include <float.h>
#include <libgccjit.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef gcc_jit_rvalue R;
typedef gcc_jit_type T;

static pthread_mutex_t compile_mu = PTHREAD_MUTEX_INITIALIZER;
static int opt_info = -1;   /* -1: not set yet, read TCJIT_OPT_INFO */

void
tc_jit_set_opt_info(int on)
{
    opt_info = on;
}

/* Maintainer knob: TCJIT_OPT_INFO=1 vectorizer report, 2 generated asm,
 * 3 vectorizer dump kept in /tmp/libgccjit-*, 4 initial gimple. */
static int
get_opt_info(void)
{
    if (opt_info < 0) {
        const char *v = getenv("TCJIT_OPT_INFO");
        opt_info = v != NULL ? atoi(v) : 0;
    }
    return opt_info;
}

/* ---- loop nest collapsing ---------------------------------------------- */

int64_t
tc_loop_inner_numel(const tc_loop *l)
{
    int64_t n = 1;
    for (int d = 1; d < l->ndim; d++) {
        n *= l->sizes[d];
    }
    return n;
}

void
tc_loop_clear(tc_loop *l)
{
    free(l->strides);
    l->strides = NULL;
}

/* One group of loop dims (the outer ones, or the reduction ones) while it
 * is being collapsed. */
typedef struct {
    int n;
    int64_t sizes[TC_MAX_DIMS];
    int64_t (*strides)[TC_MAX_DIMS];  /* [nargs][n] */
    int nargs;
} dim_group;

/* Can dim d (outer) and d + 1 (inner) be walked as one dimension? */
static int
mergeable(const dim_group *g, int d)
{
    for (int a = 0; a < g->nargs; a++) {
        if (g->strides[a][d] != g->strides[a][d + 1] * g->sizes[d + 1]) {
            return 0;
        }
    }
    return 1;
}

static void
remove_dim(dim_group *g, int d)
{
    for (int k = d; k + 1 < g->n; k++) {
        g->sizes[k] = g->sizes[k + 1];
        for (int a = 0; a < g->nargs; a++) {
            g->strides[a][k] = g->strides[a][k + 1];
        }
    }
    g->n--;
}

/* Drops size-1 dims and merges contiguous neighbours; an empty group
 * becomes one size-1 dim.  Size-1 dims never move a pointer; a size-0 dim
 * empties everything, so the group is kept as is then (the runtime skips
 * an empty outer range; the emitter emits no loop over an empty reduction
 * domain).  Merging keeps the row-major linear index of the group. */
static void
collapse_group(dim_group *g)
{
    int empty = 0;
    for (int d = 0; d < g->n; d++) {
        empty |= g->sizes[d] == 0;
    }
    for (int d = g->n - 1; d >= 0 && !empty; d--) {
        if (g->sizes[d] == 1) {
            remove_dim(g, d);
        }
    }
    for (int d = g->n - 2; d >= 0 && !empty; d--) {
        if (mergeable(g, d)) {
            g->sizes[d] *= g->sizes[d + 1];
            for (int a = 0; a < g->nargs; a++) {
                g->strides[a][d] = g->strides[a][d + 1];
            }
            remove_dim(g, d + 1);
        }
    }
    if (g->n == 0) {
        g->n = 1;
        g->sizes[0] = 1;
        for (int a = 0; a < g->nargs; a++) {
            g->strides[a][0] = 0;
        }
    }
}

/* Loads kernel dims [from, from + n) into g. */
static void
group_load(dim_group *g, const tc_kernel *k, int from, int n)
{
    g->n = n;
    g->nargs = k->nargs;
    for (int d = 0; d < n; d++) {
        g->sizes[d] = k->sizes[from + d];
        for (int a = 0; a < k->nargs; a++) {
            g->strides[a][d] = k->args[a].strides[from + d];
        }
    }
}

/* Stores g at loop dims [at, at + g->n). */
static void
group_store(const dim_group *g, tc_loop *l, int at)
{
    for (int d = 0; d < g->n; d++) {
        l->sizes[at + d] = g->sizes[d];
        for (int a = 0; a < l->nargs; a++) {
            l->strides[a][at + d] = g->strides[a][d];
        }
    }
}

/* The CPU as a reduction target (reduce_plan.h): one thread per row, no
 * cross-thread combine.  Accumulator sets are vector lanes ("reduction
 * kernels" below): for light bodies two vectors of float32 (two
 * independent chains hide the update latency, e.g. max's compare, mask or
 * and select), four over long rows (the chain is still the limit with
 * two: amax 1024x1024 85 -> 70 us on one core; short rows would run more
 * of their points in the scalar tail); one vector for heavy ones
 * (register pressure; the body's own work hides the latency).  Float
 * sums cascade with fan-in 16 like torch's.  Full reductions (one row) of at least 64K
 * points split into chunks of at least 16K points of the outermost
 * collapsed reduction dim, at most 4096 of them, each a task of the
 * thread pool (many per thread: the pool balances them). */
static const tc_red_target cpu_red_target = {
    .name = "cpu",
    .cross_thread = 0,
    .sets = 32,
    .sets_long = 64,
    .long_row = 512,
    .sets_heavy = 16,
    .heavy_body = 24,
    .fsum_fan = 16,
    .split_min_points = 65536,
    .split_max_rows = 1,
    .split_chunk = 16384,
    .split_max_chunks = 4096,
    .split_min_chunks = 2,
    .split_any_kernel = 1,
    .split_outer_dim = 1,
};

/* The target the compile in progress uses (compile_mu held): the one
 * above, or a max-autotune candidate (tc_jit_code_compile's variant). */
static const tc_red_target *cpu_target = &cpu_red_target;
static int cpu_target_variant;     /* cpu_variant()'s number, or 0 */

/* max-autotune candidates (autotune.c): variant 0 is the default above;
 * the others change the accumulator sets per row (latency hiding against
 * register pressure) or the chunk size of split full reductions.  The
 * float SUM cascade (fsum_fan) is never changed: it fixes the order of
 * additions that eager's results are compared with. */
static tc_red_target
cpu_variant(int v)
{
    tc_red_target t = cpu_red_target;
    switch (v) {
    case 1:             /* fewer chains: less register pressure */
        t.sets = 16;
        t.sets_long = 32;
        t.sets_heavy = 8;
        break;
    case 2:             /* more chains: more latency hidden */
        t.sets = 64;
        t.sets_long = 64;
        t.sets_heavy = 32;
        break;
    case 3:             /* larger chunks of split full reductions */
        t.split_chunk = 65536;
        t.split_min_points = 131072;
        break;
    case 4:             /* softmax's max and sum in one pass (an online
                           max-and-sum, kir_online.c): rows longer than
                           the caches read once less */
        t.online = 2;
        break;
    default:
        break;
    }
    return t;
}

int
tc_loop_build(const tc_kernel *k, tc_loop *l)
{
    memset(l, 0, sizeof(*l));
    int red = k->nphases > 0;
    int nred = red ? k->nred : 0;
    if (k->ndim < 0 || nred < 0 || k->ndim + nred > TC_MAX_DIMS) {
        return -1;
    }
    size_t na = (size_t)(k->nargs > 0 ? k->nargs : 1);
    l->nargs = k->nargs;
    l->strides = calloc(na, sizeof(*l->strides));
    int64_t (*tmp)[TC_MAX_DIMS] = calloc(na, sizeof(*tmp));
    if (l->strides == NULL || tmp == NULL) {
        free(tmp);
        return -1;
    }
    dim_group g = {.strides = tmp};
    group_load(&g, k, 0, k->ndim);
    collapse_group(&g);
    group_store(&g, l, 0);
    l->ndim = g.n;
    if (red) {
        group_load(&g, k, k->ndim, nred);
        collapse_group(&g);
        /* both groups padded: at most one extra dim in all */
        if (l->ndim + g.n > TC_MAX_DIMS) {
            free(tmp);
            return -1;
        }
        group_store(&g, l, l->ndim);
        l->nred = g.n;
        l->nphases = k->nphases;
        l->red_numel = 1;
        for (int d = 0; d < l->nred; d++) {
            l->red_numel *= l->sizes[l->ndim + d];
        }
        /* the split (reduce_plan.h); the rest of the plan depends on
         * the instructions and is made for the kernel the emitter
         * compiles (emit_reduction_kernel) */
        tc_red_plan plan;
        if (tc_red_schedule(k, l->sizes[l->ndim], cpu_target,
                            &plan) < 0) {
            free(tmp);
            return -1;
        }
        if (plan.nsplit > 1) {
            l->nchunks = plan.nsplit;
            l->chunk_rows = plan.chunk_rows;
            l->scratch_slots = tc_red_scratch_layout(k, &plan, NULL);
        }
        l->npasses = plan.npasses;
        memcpy(l->passes, plan.passes, sizeof(l->passes));
    }
    free(tmp);
    return 0;
}

int
tc_jit_red_plan(const tc_kernel *k, const tc_loop *l, tc_red_plan *p)
{
    return tc_red_schedule(k, l->sizes[l->ndim], cpu_target, p);
}

/* ---- types and small expression helpers -------------------------------- */

typedef struct {
    gcc_jit_context *ctx;
    T *vt[TC_NDTYPES];      /* value and storage type (bool: uint8 0/1;
                               float16 / bfloat16: their bits as uint16,
                               see tc_kernel_lower_half_casts) */
    T *ut[TC_NDTYPES];      /* unsigned type of the same width */
    T *t_bool, *t_i32, *t_i64, *t_void, *t_voidp, *t_voidpp;
    gcc_jit_function *ipow[TC_NDTYPES];
    /* Size-generic kernel (dynamic shapes, jit_internal.h tc_loop_dims):
     * sizes, strides and offsets are read from the int64 block
     * args[nargs] (dims, bound at each function's entry) instead of being
     * constants.  Which strides are 0 or 1 stays compiled in. */
    int generic;
    int gnd;                 /* loop dims (outer + reduction) */
    int gnargs;
    int64_t gslots;          /* length of the block (tc_loop_dims) */
    gcc_jit_lvalue **dimv;   /* [gslots]: the block's values, copied into
                                locals at each function's entry: a local
                                is a register to GCC, while a load through
                                the block could alias the stores (uint8
                                bool outputs alias anything) and stay in
                                the loop, unvectorized */
} emitter;

static R *iconst(emitter *e, T *t, int64_t v);

static R *
dim_slot(emitter *e, int slot)
{
    return gcc_jit_lvalue_as_rvalue(e->dimv[slot]);
}

/* Size of loop dim d, stride of argument a along it, a's offset. */
static R *
loop_size(emitter *e, const tc_loop *l, int d)
{
    return e->generic ? dim_slot(e, d) : iconst(e, e->t_i64, l->sizes[d]);
}

static R *
loop_stride(emitter *e, const tc_loop *l, int a, int d)
{
    return e->generic ? dim_slot(e, tc_dims_stride_slot(e->gnd, a, d))
                      : iconst(e, e->t_i64, l->strides[a][d]);
}

static R *
arg_offset(emitter *e, const tc_kernel *k, int a)
{
    return e->generic
               ? dim_slot(e, tc_dims_offset_slot(e->gnd, e->gnargs, a))
               : iconst(e, e->t_i64, k->args[a].offset);
}

int64_t
tc_loop_dims(const tc_kernel *k, const tc_loop *l, int64_t *out)
{
    return tc_dims_block(k, l->ndim + l->nred, l->sizes, l->strides, out);
}

static int
is_float(tc_dtype dt)
{
    return dt == TC_F32 || dt == TC_F64;
}

static int
is_signed_int(tc_dtype dt)
{
    return dt == TC_I8 || dt == TC_I16 || dt == TC_I32 || dt == TC_I64;
}

static int
dtype_bits(tc_dtype dt)
{
    switch (dt) {
    case TC_I16:
    case TC_F16:
    case TC_BF16:
        return 16;
    case TC_I32:
    case TC_F32:
        return 32;
    case TC_I64:
    case TC_F64:
        return 64;
    default:
        return 8;
    }
}

static void
init_types(emitter *e)
{
    gcc_jit_context *c = e->ctx;
    e->vt[TC_BOOL] = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UINT8_T);
    e->vt[TC_U8] = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UINT8_T);
    e->vt[TC_I8] = gcc_jit_context_get_type(c, GCC_JIT_TYPE_INT8_T);
    e->vt[TC_I16] = gcc_jit_context_get_type(c, GCC_JIT_TYPE_INT16_T);
    e->vt[TC_I32] = gcc_jit_context_get_type(c, GCC_JIT_TYPE_INT32_T);
    e->vt[TC_I64] = gcc_jit_context_get_type(c, GCC_JIT_TYPE_INT64_T);
    e->vt[TC_F32] = gcc_jit_context_get_type(c, GCC_JIT_TYPE_FLOAT);
    e->vt[TC_F64] = gcc_jit_context_get_type(c, GCC_JIT_TYPE_DOUBLE);
    T *u8 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UINT8_T);
    T *u16 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UINT16_T);
    T *u32 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UINT32_T);
    T *u64 = gcc_jit_context_get_type(c, GCC_JIT_TYPE_UINT64_T);
    e->ut[TC_BOOL] = u8;
    e->ut[TC_U8] = u8;
    e->ut[TC_I8] = u8;
    e->ut[TC_I16] = u16;
    e->ut[TC_I32] = u32;
    e->ut[TC_I64] = u64;
    e->ut[TC_F32] = u32;
    e->ut[TC_F64] = u64;
    e->vt[TC_F16] = e->vt[TC_BF16] = u16;
    e->ut[TC_F16] = e->ut[TC_BF16] = u16;
    e->t_bool = gcc_jit_context_get_type(c, GCC_JIT_TYPE_BOOL);
    e->t_i32 = e->vt[TC_I32];
    e->t_i64 = e->vt[TC_I64];
    e->t_void = gcc_jit_context_get_type(c, GCC_JIT_TYPE_VOID);
    e->t_voidp = gcc_jit_context_get_type(c, GCC_JIT_TYPE_VOID_PTR);
    e->t_voidpp = gcc_jit_type_get_pointer(e->t_voidp);
}

static R *
cast(emitter *e, R *v, T *t)
{
    return gcc_jit_context_new_cast(e->ctx, NULL, v, t);
}

static R *
bin(emitter *e, enum gcc_jit_binary_op op, T *t, R *a, R *b)
{
    return gcc_jit_context_new_binary_op(e->ctx, NULL, op, t, a, b);
}

static R *
un(emitter *e, enum gcc_jit_unary_op op, T *t, R *a)
{
    return gcc_jit_context_new_unary_op(e->ctx, NULL, op, t, a);
}

/* Comparison as a uint8 0/1, the representation of TC_BOOL values. */
static R *
cmp(emitter *e, enum gcc_jit_comparison op, R *a, R *b)
{
    R *c = gcc_jit_context_new_comparison(e->ctx, NULL, op, a, b);
    return cast(e, c, e->vt[TC_BOOL]);
}

static R *
iconst(emitter *e, T *t, int64_t v)
{
    return gcc_jit_context_new_rvalue_from_long(e->ctx, t, (long)v);
}

/* Value of dtype dt viewed as its unsigned integer bits. */
static R *
to_bits(emitter *e, tc_dtype dt, R *v)
{
    if (is_float(dt)) {
        return gcc_jit_context_new_bitcast(e->ctx, NULL, v, e->ut[dt]);
    }
    return cast(e, v, e->ut[dt]);
}

static R *
from_bits(emitter *e, tc_dtype dt, R *v)
{
    if (is_float(dt)) {
        return gcc_jit_context_new_bitcast(e->ctx, NULL, v, e->vt[dt]);
    }
    return cast(e, v, e->vt[dt]);
}

/* cond ? a : b without a branch: cond is a uint8 0/1; mask = -(U)cond,
 * result b ^ ((a ^ b) & mask).  Not (a & m) | (b & ~m): libgccjit folds
 * ~-(U)cond into a conditional that gimplifies into a branch (and the
 * shared cond tree is evaluated twice); this form uses cond once and
 * vectorizes to a compare plus a masked xor. */
static R *
select_bits(emitter *e, tc_dtype dt, R *cond, R *a, R *b)
{
    T *u = e->ut[dt];
    R *m = un(e, GCC_JIT_UNARY_OP_MINUS, u, cast(e, cond, u));
    R *bb = to_bits(e, dt, b);
    R *d = bin(e, GCC_JIT_BINARY_OP_BITWISE_XOR, u, to_bits(e, dt, a), bb);
    R *x = bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, u, d, m);
    return from_bits(e, dt, bin(e, GCC_JIT_BINARY_OP_BITWISE_XOR, u, bb, x));
}

/* Integer arithmetic in the unsigned type: wraps instead of being UB. */
static R *
wrap_bin(emitter *e, enum gcc_jit_binary_op op, tc_dtype dt, R *a, R *b)
{
    T *u = e->ut[dt];
    return cast(e, bin(e, op, u, cast(e, a, u), cast(e, b, u)), e->vt[dt]);
}

static R *
call1(emitter *e, const char *name, R *a)
{
    gcc_jit_function *f = gcc_jit_context_get_builtin_function(e->ctx, name);
    return gcc_jit_context_new_call(e->ctx, NULL, f, 1, &a);
}

static R *
call2(emitter *e, const char *name, R *a, R *b)
{
    gcc_jit_function *f = gcc_jit_context_get_builtin_function(e->ctx, name);
    R *args[2] = {a, b};
    return gcc_jit_context_new_call(e->ctx, NULL, f, 2, args);
}

/* libm / builtin name for a float op: "sqrt" -> "__builtin_sqrtf". */
static R *
fcall1(emitter *e, const char *base, tc_dtype dt, R *a)
{
    char name[48];
    snprintf(name, sizeof(name), "__builtin_%s%s", base,
             dt == TC_F32 ? "f" : "");
    return call1(e, name, a);
}

/* ---- integer power: a small helper function, square-and-multiply ------- */

static gcc_jit_function *
get_ipow(emitter *e, tc_dtype dt)
{
    if (e->ipow[dt] != NULL) {
        return e->ipow[dt];
    }
    gcc_jit_context *c = e->ctx;
    T *t = e->vt[dt], *u = e->ut[dt];
    gcc_jit_param *pb = gcc_jit_context_new_param(c, NULL, t, "b");
    gcc_jit_param *px = gcc_jit_context_new_param(c, NULL, t, "x");
    gcc_jit_param *ps[2] = {pb, px};
    char name[32];
    snprintf(name, sizeof(name), "tc_ipow%d", (int)dt);
    gcc_jit_function *f = gcc_jit_context_new_function(
        c, NULL, GCC_JIT_FUNCTION_INTERNAL, t, name, 2, ps, 0);
    gcc_jit_lvalue *acc = gcc_jit_function_new_local(f, NULL, u, "acc");
    gcc_jit_lvalue *base = gcc_jit_function_new_local(f, NULL, u, "base");
    gcc_jit_lvalue *x = gcc_jit_function_new_local(f, NULL, t, "xx");
    gcc_jit_block *entry = gcc_jit_function_new_block(f, "entry");
    gcc_jit_block *neg = gcc_jit_function_new_block(f, "neg");
    gcc_jit_block *loop = gcc_jit_function_new_block(f, "loop");
    gcc_jit_block *step = gcc_jit_function_new_block(f, "step");
    gcc_jit_block *done = gcc_jit_function_new_block(f, "done");
    R *b = gcc_jit_param_as_rvalue(pb);
    R *xv = gcc_jit_param_as_rvalue(px);
    gcc_jit_block_add_assignment(entry, NULL, acc, iconst(e, u, 1));
    gcc_jit_block_add_assignment(entry, NULL, base, cast(e, b, u));
    gcc_jit_block_add_assignment(entry, NULL, x, xv);
    R *zero = iconst(e, t, 0);
    gcc_jit_block_end_with_conditional(
        entry, NULL,
        gcc_jit_context_new_comparison(c, NULL, GCC_JIT_COMPARISON_LT, xv,
                                       zero),
        neg, loop);
    /* Negative exponents: 1 for b == 1, +-1 for b == -1, else 0 (the
     * integer part of 1 / b^x), as torch computes them. */
    R *one_u = iconst(e, u, 1);
    R *odd = bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, u, cast(e, xv, u), one_u);
    R *bu = cast(e, b, u);
    R *is1 = cast(e, gcc_jit_context_new_comparison(
                         c, NULL, GCC_JIT_COMPARISON_EQ, bu, one_u), u);
    R *ism1 = cast(e, gcc_jit_context_new_comparison(
                          c, NULL, GCC_JIT_COMPARISON_EQ, bu,
                          un(e, GCC_JIT_UNARY_OP_MINUS, u, one_u)), u);
    /* ism1 ? (odd ? -1 : 1) : is1  ==  is1 | ism1 * (1 - 2 * odd) */
    R *sgn = bin(e, GCC_JIT_BINARY_OP_MINUS, u, one_u,
                 bin(e, GCC_JIT_BINARY_OP_MULT, u, iconst(e, u, 2), odd));
    R *negres = bin(e, GCC_JIT_BINARY_OP_BITWISE_OR, u, is1,
                    bin(e, GCC_JIT_BINARY_OP_MULT, u, ism1, sgn));
    gcc_jit_block_end_with_return(neg, NULL, cast(e, negres, t));
    gcc_jit_block_end_with_conditional(
        loop, NULL,
        gcc_jit_context_new_comparison(c, NULL, GCC_JIT_COMPARISON_NE,
                                       gcc_jit_lvalue_as_rvalue(x), zero),
        step, done);
    R *accv = gcc_jit_lvalue_as_rvalue(acc);
    R *basev = gcc_jit_lvalue_as_rvalue(base);
    R *bit = cast(e, bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, t,
                         gcc_jit_lvalue_as_rvalue(x), iconst(e, t, 1)), u);
    /* acc *= bit ? base : 1, written as acc * (1 + bit * (base - 1)). */
    R *factor = bin(e, GCC_JIT_BINARY_OP_PLUS, u, one_u,
                    bin(e, GCC_JIT_BINARY_OP_MULT, u, bit,
                        bin(e, GCC_JIT_BINARY_OP_MINUS, u, basev, one_u)));
    gcc_jit_block_add_assignment(step, NULL, acc,
                                 bin(e, GCC_JIT_BINARY_OP_MULT, u, accv,
                                     factor));
    gcc_jit_block_add_assignment(step, NULL, base,
                                 bin(e, GCC_JIT_BINARY_OP_MULT, u, basev,
                                     basev));
    gcc_jit_block_add_assignment(step, NULL, x,
                                 bin(e, GCC_JIT_BINARY_OP_RSHIFT, t,
                                     gcc_jit_lvalue_as_rvalue(x),
                                     iconst(e, t, 1)));
    gcc_jit_block_end_with_jump(step, NULL, loop);
    gcc_jit_block_end_with_return(done, NULL, cast(e, accv, t));
    e->ipow[dt] = f;
    return f;
}

/* ---- one instruction --------------------------------------------------- */

typedef struct {
    emitter *e;
    const tc_kernel *k;
    R **val;                 /* per instruction */
    gcc_jit_lvalue **elem;   /* per argument: the element at this point */
    char prefix;             /* local names: v12 (exact) or f12 (fast) */
    R **index;               /* per index argument: its offset here */
} body_state;

static R *
emit_const(emitter *e, const tc_kinst *in)
{
    T *t = e->vt[in->dtype];
    if (e->generic && in->arg >= TC_KCONST_PARAM) {
        /* a parameter: the double's bits in the block (tc_loop_dims) */
        int slot = tc_dims_param_slot(e->gnd, e->gnargs,
                                      in->arg - TC_KCONST_PARAM);
        return cast(e, from_bits(e, TC_F64, dim_slot(e, slot)), t);
    }
    if (!is_float(in->dtype)) {
        int64_t v = in->dtype == TC_BOOL ? (in->imm.i != 0) : in->imm.i;
        return iconst(e, t, v);
    }
    double v = in->imm.f;
    if (isfinite(v)) {
        return gcc_jit_context_new_rvalue_from_double(e->ctx, t, v);
    }
    /* Infinities and NaNs go through their bit patterns: exact, and it
     * keeps the NaN payload eager would produce. */
    if (in->dtype == TC_F32) {
        float f = (float)v;
        uint32_t bits;
        memcpy(&bits, &f, 4);
        return from_bits(e, TC_F32, iconst(e, e->ut[TC_F32], bits));
    }
    uint64_t bits;
    memcpy(&bits, &v, 8);
    R *hi = iconst(e, e->ut[TC_F64], (int64_t)(bits >> 32));
    R *lo = iconst(e, e->ut[TC_F64], (int64_t)(bits & 0xffffffffu));
    R *w = bin(e, GCC_JIT_BINARY_OP_BITWISE_OR, e->ut[TC_F64],
               bin(e, GCC_JIT_BINARY_OP_LSHIFT, e->ut[TC_F64], hi,
                   iconst(e, e->ut[TC_F64], 32)), lo);
    return from_bits(e, TC_F64, w);
}

static R *
fconst(emitter *e, tc_dtype dt, double v)
{
    tc_kinst in = {.op = KOP_CONST, .dtype = dt, .a = -1, .b = -1, .c = -1};
    in.imm.f = v;
    return emit_const(e, &in);
}

/* float -> integer as eager computes it on x86 (cvttss2si and its
 * vector forms): truncation toward zero, and INT_MIN (INT64_MIN for
 * int64) for NaN, infinities and magnitudes out of range.  int8 / int16
 * go through int32 and wrap, so those inputs give 0 there; uint8 goes
 * through int64 (c10's static_cast_with_inter_type), which differs only
 * for doubles: a float beyond int32 is a multiple of 256.
 * A plain C cast leaves out-of-range inputs undefined (GCC folds constant
 * ones to saturated values), and under -fno-trapping-math GCC folds
 * (float)(int)x into trunc(x), which keeps -0 and out-of-range
 * magnitudes.  So: convert x, or 0 where it is out of range, and OR in
 * the sign bit there.  The OR hides the conversion from that fold (a
 * select would not: GCC sinks the float conversion into its arms), and
 * it all vectorizes: abs, compare, blend, convert, shift and or.
 * The sign bit comes from an integer compare of x's bits, not from the
 * float compare that picks x or 0: with one condition for both, jump
 * threading splits the in-range path off, where the OR is with a known
 * 0, and the fold comes back (a clamp after the cast was enough: fuzz
 * seed 256825 gave -0.9 -> -0.0, then 1/x = -inf where eager has inf).
 * GCC cannot tie the two compares together, so the OR stays. */
static R *
emit_float_to_int(emitter *e, R *a, tc_dtype from, tc_dtype to)
{
    tc_dtype it = to == TC_I64 || (to == TC_U8 && from == TC_F64) ? TC_I64
                                                                 : TC_I32;
    int bits = dtype_bits(it);
    T *u = e->ut[it];
    T *fu = e->ut[from];
    double lim = ldexp(1.0, bits - 1);
    R *in = cmp(e, GCC_JIT_COMPARISON_LT, fcall1(e, "fabs", from, a),
                fconst(e, from, lim));
    R *x = select_bits(e, from, in, a, fconst(e, from, 0.0));
    /* |x| >= lim (NaN and inf included) as the bits of |x| >= lim's */
    R *mag = bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, fu, to_bits(e, from, a),
                 to_bits(e, from, fconst(e, from, -0.0)));
    mag = bin(e, GCC_JIT_BINARY_OP_BITWISE_XOR, fu, mag, to_bits(e, from, a));
    R *out = cast(e, cmp(e, GCC_JIT_COMPARISON_GE, mag,
                         to_bits(e, from, fconst(e, from, lim))), u);
    R *sign = bin(e, GCC_JIT_BINARY_OP_LSHIFT, u, out, iconst(e, u, bits - 1));
    R *r = bin(e, GCC_JIT_BINARY_OP_BITWISE_OR, u,
               cast(e, cast(e, x, e->vt[it]), u), sign);
    return cast(e, r, e->vt[to]);
}

static R *
emit_cast(emitter *e, R *a, tc_dtype from, tc_dtype to)
{
    if (from == to) {
        return a;
    }
    if (to == TC_BOOL) {
        return cmp(e, GCC_JIT_COMPARISON_NE, a,
                   cast(e, iconst(e, e->t_i32, 0), e->vt[from]));
    }
    if (is_float(from) && !is_float(to)) {
        return emit_float_to_int(e, a, from, to);
    }
    return cast(e, a, e->vt[to]);
}

static R *
emit_bitcast(emitter *e, R *a, tc_dtype from, tc_dtype to)
{
    if (from == to) {
        return a;
    }
    if (!is_float(from) && !is_float(to)) {
        return cast(e, a, e->vt[to]);
    }
    return gcc_jit_context_new_bitcast(e->ctx, NULL, a, e->vt[to]);
}

static R *
emit_unary(emitter *e, tc_kop op, tc_dtype dt, R *a)
{
    T *t = e->vt[dt];
    int fl = is_float(dt);
    switch (op) {
    case KOP_NEG:
        if (fl) {
            return un(e, GCC_JIT_UNARY_OP_MINUS, t, a);
        }
        return cast(e, un(e, GCC_JIT_UNARY_OP_MINUS, e->ut[dt],
                          cast(e, a, e->ut[dt])), t);
    case KOP_ABS:
        if (fl) {
            return un(e, GCC_JIT_UNARY_OP_ABS, t, a);
        }
        if (!is_signed_int(dt)) {
            return a;
        }
        {
            /* (a ^ s) - s with s = a >> (bits - 1): wraps for INT_MIN */
            R *s = bin(e, GCC_JIT_BINARY_OP_RSHIFT, t, a,
                       iconst(e, t, dtype_bits(dt) - 1));
            R *x = bin(e, GCC_JIT_BINARY_OP_BITWISE_XOR, t, a, s);
            return wrap_bin(e, GCC_JIT_BINARY_OP_MINUS, dt, x, s);
        }
    case KOP_SQRT:
        return fl ? fcall1(e, "sqrt", dt, a) : NULL;
    case KOP_EXP:
        return fl ? fcall1(e, "exp", dt, a) : NULL;
    case KOP_LOG:
        return fl ? fcall1(e, "log", dt, a) : NULL;
    case KOP_SIN:
        return fl ? fcall1(e, "sin", dt, a) : NULL;
    case KOP_COS:
        return fl ? fcall1(e, "cos", dt, a) : NULL;
    case KOP_TANH:
        return fl ? fcall1(e, "tanh", dt, a) : NULL;
    case KOP_ERF:
        return fl ? fcall1(e, "erf", dt, a) : NULL;
    case KOP_FLOOR:
        return fl ? fcall1(e, "floor", dt, a) : a;
    case KOP_RINT:
        return fl ? fcall1(e, "rint", dt, a) : a;
    case KOP_NOT:
        if (fl) {
            return NULL;
        }
        if (dt == TC_BOOL) {
            return bin(e, GCC_JIT_BINARY_OP_BITWISE_XOR, t, a,
                       iconst(e, t, 1));
        }
        return un(e, GCC_JIT_UNARY_OP_BITWISE_NEGATE, t, a);
    default:
        return NULL;
    }
}

/* Truncating integer division that never traps: x / 0 gives x and
 * INT_MIN / -1 wraps (both are undefined in C; eager raises for the
 * first, which the graph layer is expected to rule out). */
static R *
emit_int_div(emitter *e, tc_dtype dt, R *a, R *b)
{
    T *t = e->vt[dt];
    if (!is_signed_int(dt)) {
        R *bz = cmp(e, GCC_JIT_COMPARISON_EQ, b, iconst(e, t, 0));
        R *bs = bin(e, GCC_JIT_BINARY_OP_PLUS, t, b, cast(e, bz, t));
        return bin(e, GCC_JIT_BINARY_OP_DIVIDE, t, a, bs);
    }
    R *bz = cmp(e, GCC_JIT_COMPARISON_EQ, b, iconst(e, t, 0));
    R *bm1 = cmp(e, GCC_JIT_COMPARISON_EQ, b, iconst(e, t, -1));
    R *bad = bin(e, GCC_JIT_BINARY_OP_BITWISE_OR, e->vt[TC_BOOL], bz, bm1);
    R *bs = select_bits(e, dt, bad, iconst(e, t, 1), b);
    R *q = bin(e, GCC_JIT_BINARY_OP_DIVIDE, t, a, bs);
    R *nega = cast(e, un(e, GCC_JIT_UNARY_OP_MINUS, e->ut[dt],
                         cast(e, a, e->ut[dt])), t);
    return select_bits(e, dt, bm1, nega, q);
}

/* torch.maximum / minimum: NaN if either operand is NaN.  Picking a when
 * (a > b) or a is NaN, else b, returns b's NaN when only b is NaN.  When
 * b is a non-NaN constant (relu, clamp) "a > b ? a : b" already propagates
 * a's NaN, and that one comparison is what x86 maxps/minps compute. */
static R *
emit_minmax(emitter *e, tc_kop op, tc_dtype dt, R *a, R *b, int b_not_nan)
{
    enum gcc_jit_comparison c = op == KOP_MAX ? GCC_JIT_COMPARISON_GT
                                              : GCC_JIT_COMPARISON_LT;
    if (is_float(dt) && b_not_nan) {
        /* b > a ? b : a (maxps operand order: NaN a falls through to a) */
        c = op == KOP_MAX ? GCC_JIT_COMPARISON_LT : GCC_JIT_COMPARISON_GT;
        return select_bits(e, dt, cmp(e, c, a, b), b, a);
    }
    R *sel = cmp(e, c, a, b);
    if (is_float(dt)) {
        sel = bin(e, GCC_JIT_BINARY_OP_BITWISE_OR, e->vt[TC_BOOL], sel,
                  cmp(e, GCC_JIT_COMPARISON_NE, a, a));
    }
    return select_bits(e, dt, sel, a, b);
}

static R *
emit_binary(emitter *e, tc_kop op, tc_dtype dt, R *a, R *b, int b_not_nan)
{
    T *t = e->vt[dt];
    int fl = is_float(dt);
    int wrap = !fl && dt != TC_BOOL;
    enum gcc_jit_binary_op gop;
    switch (op) {
    case KOP_ADD:
        gop = dt == TC_BOOL ? GCC_JIT_BINARY_OP_BITWISE_OR
                            : GCC_JIT_BINARY_OP_PLUS;
        break;
    case KOP_SUB:
        gop = dt == TC_BOOL ? GCC_JIT_BINARY_OP_BITWISE_XOR
                            : GCC_JIT_BINARY_OP_MINUS;
        break;
    case KOP_MUL:
        gop = dt == TC_BOOL ? GCC_JIT_BINARY_OP_BITWISE_AND
                            : GCC_JIT_BINARY_OP_MULT;
        break;
    case KOP_DIV:
        if (!fl) {
            return emit_int_div(e, dt, a, b);
        }
        return bin(e, GCC_JIT_BINARY_OP_DIVIDE, t, a, b);
    case KOP_POW:
        if (fl) {
            return call2(e, dt == TC_F32 ? "__builtin_powf" : "__builtin_pow",
                         a, b);
        }
        {
            R *args[2] = {a, b};
            return gcc_jit_context_new_call(e->ctx, NULL, get_ipow(e, dt), 2,
                                            args);
        }
    case KOP_MAX:
    case KOP_MIN:
        return emit_minmax(e, op, dt, a, b, b_not_nan);
    case KOP_AND:
        return bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, t, a, b);
    case KOP_OR:
        return bin(e, GCC_JIT_BINARY_OP_BITWISE_OR, t, a, b);
    case KOP_XOR:
        return bin(e, GCC_JIT_BINARY_OP_BITWISE_XOR, t, a, b);
    case KOP_SHL:
        return wrap_bin(e, GCC_JIT_BINARY_OP_LSHIFT, dt, a, b);
    case KOP_SHR:
        return bin(e, GCC_JIT_BINARY_OP_RSHIFT, t, a, b);
    default:
        return NULL;
    }
    return wrap ? wrap_bin(e, gop, dt, a, b) : bin(e, gop, t, a, b);
}

static R *
emit_compare(emitter *e, tc_kop op, R *a, R *b)
{
    switch (op) {
    case KOP_LT:
        return cmp(e, GCC_JIT_COMPARISON_LT, a, b);
    case KOP_LE:
        return cmp(e, GCC_JIT_COMPARISON_LE, a, b);
    case KOP_EQ:
        return cmp(e, GCC_JIT_COMPARISON_EQ, a, b);
    default:
        return cmp(e, GCC_JIT_COMPARISON_NE, a, b);
    }
}

/* Returns the rvalue of instruction i (NULL for STORE), or NULL with err
 * set for an op the backend does not support. */
static R *
emit_inst(body_state *s, gcc_jit_block *blk, int i, char *err,
          size_t errlen)
{
    emitter *e = s->e;
    const tc_kinst *in = &s->k->insts[i];
    R *a = in->a >= 0 ? s->val[in->a] : NULL;
    R *b = in->b >= 0 ? s->val[in->b] : NULL;
    R *c = in->c >= 0 ? s->val[in->c] : NULL;
    tc_dtype adt = in->a >= 0 ? s->k->insts[in->a].dtype : in->dtype;
    R *r = NULL;
    switch (in->op) {
    case KOP_CONST:
        return emit_const(e, in);
    case KOP_LOAD:
        return gcc_jit_lvalue_as_rvalue(s->elem[in->arg]);
    case KOP_INDEX:
        if (s->index == NULL || s->index[in->arg] == NULL) {
            snprintf(err, errlen, "tcjit cpu: KOP_INDEX outside a "
                     "pointwise kernel");
            return NULL;
        }
        return s->index[in->arg];
    case KOP_STORE:
        gcc_jit_block_add_assignment(
            blk, NULL, s->elem[in->arg],
            cast(e, a, e->vt[s->k->args[in->arg].dtype]));
        return NULL;
    case KOP_CAST:
        return emit_cast(e, a, adt, in->dtype);
    case KOP_BITCAST:
        return emit_bitcast(e, a, adt, in->dtype);
    case KOP_LT:
    case KOP_LE:
    case KOP_EQ:
    case KOP_NE:
        return emit_compare(e, in->op, a, b);
    case KOP_WHERE:
        return select_bits(e, in->dtype, a, b, c);
    default:
        break;
    }
    if (in->op >= KOP_NEG && in->op <= KOP_NOT) {
        r = emit_unary(e, in->op, in->dtype, a);
    }
    else if (in->op >= KOP_ADD && in->op <= KOP_SHR) {
        const tc_kinst *bi = in->b >= 0 ? &s->k->insts[in->b] : NULL;
        int b_not_nan = bi != NULL && bi->op == KOP_CONST && !isnan(bi->imm.f);
        r = emit_binary(e, in->op, in->dtype, a, b, b_not_nan);
    }
    if (r == NULL) {
        snprintf(err, errlen, "tcjit cpu: op %d unsupported for dtype %d",
                 (int)in->op, (int)in->dtype);
    }
    return r;
}

static int
check_inst(const tc_kernel *k, int i, char *err, size_t errlen)
{
    const tc_kinst *in = &k->insts[i];
    int ops[3] = {in->a, in->b, in->c};
    for (int j = 0; j < 3; j++) {
        if (ops[j] >= i || ops[j] < -1) {
            snprintf(err, errlen, "tcjit cpu: %s: bad operand at %d",
                     k->name, i);
            return -1;
        }
    }
    int mem = in->op == KOP_LOAD || in->op == KOP_STORE;
    if ((mem || in->op == KOP_INDEX)
        && (in->arg < 0 || in->arg >= k->nargs
            || mem != (k->args[in->arg].buffer != TC_KARG_INDEX))) {
        snprintf(err, errlen, "tcjit cpu: %s: bad argument slot at %d",
                 k->name, i);
        return -1;
    }
    if ((unsigned)in->dtype >= TC_NDTYPES || (unsigned)in->op >= KOP_COUNT) {
        snprintf(err, errlen, "tcjit cpu: %s: bad instruction %d", k->name,
                 i);
        return -1;
    }
    /* reduced floats are only moved here: their casts were rewritten */
    tc_dtype adt = in->a >= 0 ? k->insts[in->a].dtype : in->dtype;
    int half = tc_dtype_is_reduced_float(in->dtype)
               || tc_dtype_is_reduced_float(adt);
    if (half && in->op != KOP_LOAD && in->op != KOP_STORE
        && in->op != KOP_BITCAST) {
        snprintf(err, errlen, "tcjit cpu: %s: op %d on %s at %d", k->name,
                 (int)in->op, tc_dtype_name(in->dtype), i);
        return -1;
    }
    return 0;
}

/* Emit the element body into blk: every value gets a local so that a DAG
 * with shared subexpressions stays linear in size. */
static int
emit_body(body_state *s, gcc_jit_function *fn, gcc_jit_block *blk,
          char *err, size_t errlen)
{
    const tc_kernel *k = s->k;
    for (int i = 0; i < k->ninsts; i++) {
        if (check_inst(k, i, err, errlen) < 0) {
            return -1;
        }
        R *r = emit_inst(s, blk, i, err, errlen);
        if (k->insts[i].op == KOP_STORE) {
            continue;
        }
        if (r == NULL) {
            return -1;
        }
        if (k->insts[i].op == KOP_CONST) {
            s->val[i] = r;
            continue;
        }
        char name[24];
        snprintf(name, sizeof(name), "%c%d", s->prefix, i);
        gcc_jit_lvalue *lv = gcc_jit_function_new_local(
            fn, NULL, s->e->vt[k->insts[i].dtype], name);
        gcc_jit_block_add_assignment(blk, NULL, lv, r);
        s->val[i] = gcc_jit_lvalue_as_rvalue(lv);
    }
    return 0;
}

/* ---- the loop nest ------------------------------------------------------ */

/* A kernel as emitted: the exact body, and optionally a fast body whose
 * instruction `flag` is true where its result must not be used. */
typedef struct {
    const tc_kernel *exact;
    const tc_kernel *fast;   /* NULL: no fast variant */
    int flag;
} kernel_variants;

/* Elements per block of a versioned inner loop: long enough for the
 * vectorized loop to dominate, short enough that a rare slow input only
 * costs a small redo. */
#define TC_BLOCK 512

typedef struct {
    emitter *e;
    gcc_jit_function *fn;
    const kernel_variants *kv;
    gcc_jit_lvalue **elem;   /* per argument, at the innermost index */
    R **val;                 /* scratch, ninsts of the larger body */
    const tc_loop *loop;
    R **base;                /* per argument, pointer at the inner loop
                                (index arguments: int64 offset) */
    char *err;
    size_t errlen;
    R **index;               /* per index argument, at the innermost index */
} loop_state;

static R *
ptr_offset(emitter *e, R *p, R *index)
{
    return gcc_jit_lvalue_get_address(
        gcc_jit_context_new_array_access(e->ctx, NULL, p, index), NULL);
}

static R *
lv(gcc_jit_lvalue *l)
{
    return gcc_jit_lvalue_as_rvalue(l);
}

static gcc_jit_block *
new_block(loop_state *ls)
{
    return gcc_jit_function_new_block(ls->fn, NULL);
}

static gcc_jit_block *
new_block_fn(gcc_jit_function *fn)
{
    return gcc_jit_function_new_block(fn, NULL);
}

/* for (i = lo; i < hi; i++) body; then jump to after.  Returns the block
 * where the body goes; *latch is where the body must end with a jump. */
static gcc_jit_block *
counted_loop(loop_state *ls, gcc_jit_block *cur, gcc_jit_lvalue *i, R *lo,
             R *hi, gcc_jit_block *after, gcc_jit_block **latch)
{
    emitter *e = ls->e;
    gcc_jit_block *cond = new_block(ls), *body = new_block(ls);
    *latch = new_block(ls);
    gcc_jit_block_add_assignment(cur, NULL, i, lo);
    gcc_jit_block_end_with_jump(cur, NULL, cond);
    gcc_jit_block_end_with_conditional(
        cond, NULL,
        gcc_jit_context_new_comparison(e->ctx, NULL, GCC_JIT_COMPARISON_LT,
                                       lv(i), hi),
        body, after);
    gcc_jit_block_add_assignment_op(*latch, NULL, i, GCC_JIT_BINARY_OP_PLUS,
                                    iconst(e, e->t_i64, 1));
    gcc_jit_block_end_with_jump(*latch, NULL, cond);
    return body;
}

static int
emit_one_body(loop_state *ls, const tc_kernel *k, char prefix,
              gcc_jit_block *blk)
{
    memset(ls->val, 0, sizeof(R *) * (size_t)(k->ninsts + 1));
    body_state s = {ls->e, k, ls->val, ls->elem, prefix, ls->index};
    return emit_body(&s, ls->fn, blk, ls->err, ls->errlen);
}

/* Innermost loop without a fast variant. */
static int
emit_plain_inner(loop_state *ls, gcc_jit_block *cur, gcc_jit_lvalue *i,
                 R *lo, R *hi, gcc_jit_block *after)
{
    gcc_jit_block *latch;
    gcc_jit_block *body = counted_loop(ls, cur, i, lo, hi, after, &latch);
    int rc = emit_one_body(ls, ls->kv->exact, 'v', body);
    gcc_jit_block_end_with_jump(body, NULL, latch);
    return rc;
}

static void inner_elements(loop_state *ls, const tc_loop *l, R *i,
                           R **base);

/* Innermost loop in blocks of TC_BLOCK: run the fast body over a block
 * while OR-ing its flag, and rerun the block with the exact body if any
 * element was flagged.  Both inner loops stay branch-free and vectorize. */
static int
emit_versioned_inner(loop_state *ls, gcc_jit_block *cur, gcc_jit_lvalue *i,
                     R *lo, R *hi, gcc_jit_block *after)
{
    emitter *e = ls->e;
    T *u32 = e->ut[TC_I32];
    gcc_jit_lvalue *ib = gcc_jit_function_new_local(ls->fn, NULL, e->t_i64,
                                                    "ib");
    gcc_jit_lvalue *ie = gcc_jit_function_new_local(ls->fn, NULL, e->t_i64,
                                                    "ie");
    gcc_jit_lvalue *acc = gcc_jit_function_new_local(ls->fn, NULL, u32,
                                                     "acc");
    gcc_jit_block *cond = new_block(ls), *head = new_block(ls);
    gcc_jit_block *clip = new_block(ls), *fast = new_block(ls);
    gcc_jit_block *check = new_block(ls), *slow = new_block(ls);
    gcc_jit_block *next = new_block(ls);
    gcc_jit_block_add_assignment(cur, NULL, ib, lo);
    gcc_jit_block_end_with_jump(cur, NULL, cond);
    gcc_jit_block_end_with_conditional(
        cond, NULL,
        gcc_jit_context_new_comparison(e->ctx, NULL, GCC_JIT_COMPARISON_LT,
                                       lv(ib), hi),
        head, after);
    /* ie = min(ib + TC_BLOCK, hi) */
    R *ibb = bin(e, GCC_JIT_BINARY_OP_PLUS, e->t_i64, lv(ib),
                 iconst(e, e->t_i64, TC_BLOCK));
    gcc_jit_block_add_assignment(head, NULL, ie, hi);
    gcc_jit_block_end_with_conditional(
        head, NULL,
        gcc_jit_context_new_comparison(e->ctx, NULL, GCC_JIT_COMPARISON_LT,
                                       ibb, hi),
        clip, fast);
    gcc_jit_block_add_assignment(clip, NULL, ie, ibb);
    gcc_jit_block_end_with_jump(clip, NULL, fast);

    gcc_jit_block_add_assignment(fast, NULL, acc, iconst(e, u32, 0));
    gcc_jit_block *latch;
    gcc_jit_block *fb = counted_loop(ls, fast, i, lv(ib), lv(ie), check,
                                     &latch);
    int rc = emit_one_body(ls, ls->kv->fast, 'f', fb);
    if (rc == 0) {
        gcc_jit_block_add_assignment_op(fb, NULL, acc,
                                        GCC_JIT_BINARY_OP_BITWISE_OR,
                                        cast(e, ls->val[ls->kv->flag], u32));
    }
    gcc_jit_block_end_with_jump(fb, NULL, latch);
    gcc_jit_block_end_with_conditional(
        check, NULL,
        gcc_jit_context_new_comparison(e->ctx, NULL, GCC_JIT_COMPARISON_NE,
                                       lv(acc), iconst(e, u32, 0)),
        slow, next);
    if (rc == 0) {
        /* The redo is rare: a volatile index keeps GCC from vectorizing
         * and unrolling it, which would double the compile time for
         * nothing.  Element lvalues are rebuilt on that index. */
        gcc_jit_lvalue *is = gcc_jit_function_new_local(
            ls->fn, NULL, gcc_jit_type_get_volatile(e->t_i64), "is");
        gcc_jit_lvalue **fast_elem = ls->elem;
        R **fast_index = ls->index;
        gcc_jit_lvalue *slow_elem[ls->kv->exact->nargs + 1];
        R *slow_index[ls->kv->exact->nargs + 1];
        ls->elem = slow_elem;
        ls->index = slow_index;
        inner_elements(ls, ls->loop, lv(is), ls->base);
        rc = emit_plain_inner(ls, slow, is, lv(ib), lv(ie), next);
        ls->elem = fast_elem;
        ls->index = fast_index;
    }
    else {
        gcc_jit_block_end_with_jump(slow, NULL, next);
    }
    gcc_jit_block_add_assignment(next, NULL, ib, lv(ie));
    gcc_jit_block_end_with_jump(next, NULL, cond);
    return rc;
}

/* Per-argument pointers for loop level d (< innermost) in block blk. */
static void
advance_pointers(loop_state *ls, const tc_loop *l, int d, R *i,
                 gcc_jit_block *blk, R **base)
{
    emitter *e = ls->e;
    for (int a = 0; a < l->nargs; a++) {
        int64_t st = l->strides[a][d];
        if (st == 0) {
            continue;
        }
        R *idx = st == 1 ? i : bin(e, GCC_JIT_BINARY_OP_MULT, e->t_i64, i,
                                   loop_stride(e, l, a, d));
        char name[24];
        snprintf(name, sizeof(name), "p%d_%d", a, d);
        gcc_jit_lvalue *q = gcc_jit_function_new_local(
            ls->fn, NULL, gcc_jit_rvalue_get_type(base[a]), name);
        R *next = ls->kv->exact->args[a].buffer == TC_KARG_INDEX
                      ? bin(e, GCC_JIT_BINARY_OP_PLUS, e->t_i64, base[a], idx)
                      : ptr_offset(e, base[a], idx);
        gcc_jit_block_add_assignment(blk, NULL, q, next);
        base[a] = lv(q);
    }
}

/* The element lvalues at innermost index i: p[i] for unit stride (what
 * the vectorizer wants), p[i * s] otherwise, p[0] for broadcasts. */
static void
inner_elements(loop_state *ls, const tc_loop *l, R *i, R **base)
{
    emitter *e = ls->e;
    int d = l->ndim - 1;
    for (int a = 0; a < l->nargs; a++) {
        int64_t st = l->strides[a][d];
        R *idx = st == 1   ? i
                 : st == 0 ? iconst(e, e->t_i64, 0)
                           : bin(e, GCC_JIT_BINARY_OP_MULT, e->t_i64, i,
                                 loop_stride(e, l, a, d));
        if (ls->kv->exact->args[a].buffer == TC_KARG_INDEX) {
            ls->index[a] = bin(e, GCC_JIT_BINARY_OP_PLUS, e->t_i64, base[a],
                               idx);
            ls->elem[a] = NULL;
            continue;
        }
        ls->index[a] = NULL;
        ls->elem[a] = gcc_jit_context_new_array_access(e->ctx, NULL, base[a],
                                                       idx);
    }
}

static void
load_arg_pointers(loop_state *ls, const tc_kernel *k, R *args,
                  gcc_jit_block *entry, R **base)
{
    emitter *e = ls->e;
    if (e->generic) {
        R *dims = cast(e, lv(gcc_jit_context_new_array_access(
                              e->ctx, NULL, args,
                              iconst(e, e->t_i64, k->nargs))),
                       gcc_jit_type_get_pointer(e->t_i64));
        for (int64_t j = 0; j < e->gslots; j++) {
            char name[24];
            snprintf(name, sizeof(name), "dim%d", (int)j);
            e->dimv[j] = gcc_jit_function_new_local(ls->fn, NULL, e->t_i64,
                                                    name);
            gcc_jit_block_add_assignment(
                entry, NULL, e->dimv[j],
                lv(gcc_jit_context_new_array_access(
                    e->ctx, NULL, dims, iconst(e, e->t_i64, j))));
        }
    }
    for (int a = 0; a < k->nargs; a++) {
        if (k->args[a].buffer == TC_KARG_INDEX) {
            /* no memory: the offset itself is the value */
            base[a] = arg_offset(e, k, a);
            continue;
        }
        T *pt = gcc_jit_type_get_pointer(e->vt[k->args[a].dtype]);
        char name[16];
        snprintf(name, sizeof(name), "p%d", a);
        gcc_jit_lvalue *p = gcc_jit_function_new_local(ls->fn, NULL, pt,
                                                       name);
        R *slot = lv(gcc_jit_context_new_array_access(
            e->ctx, NULL, args, iconst(e, e->t_i64, a)));
        R *ptr = cast(e, slot, pt);
        if (k->args[a].offset != 0) {
            /* a view's storage offset, in elements */
            ptr = ptr_offset(e, ptr, arg_offset(e, k, a));
        }
        gcc_jit_block_add_assignment(entry, NULL, p, ptr);
        base[a] = lv(p);
    }
}

static int
emit_nest(loop_state *ls, const tc_loop *l, gcc_jit_param **params,
          gcc_jit_block *entry, R **base)
{
    emitter *e = ls->e;
    int nd = l->ndim;
    gcc_jit_block *exitb = gcc_jit_function_new_block(ls->fn, "exit");
    gcc_jit_block_end_with_void_return(exitb, NULL);
    gcc_jit_block *cur = entry, *after = exitb;
    for (int d = 0; d < nd; d++) {
        char name[16];
        snprintf(name, sizeof(name), "i%d", d);
        gcc_jit_lvalue *i = gcc_jit_function_new_local(ls->fn, NULL,
                                                       e->t_i64, name);
        R *lo = d == 0 ? gcc_jit_param_as_rvalue(params[1])
                       : iconst(e, e->t_i64, 0);
        R *hi = d == 0 ? gcc_jit_param_as_rvalue(params[2])
                       : loop_size(e, l, d);
        if (d == nd - 1) {
            inner_elements(ls, l, lv(i), base);
            if (ls->kv->fast != NULL) {
                return emit_versioned_inner(ls, cur, i, lo, hi, after);
            }
            return emit_plain_inner(ls, cur, i, lo, hi, after);
        }
        gcc_jit_block *latch;
        gcc_jit_block *body = counted_loop(ls, cur, i, lo, hi, after, &latch);
        advance_pointers(ls, l, d, lv(i), body, base);
        cur = body;
        after = latch;
    }
    return -1;  /* not reached: nd >= 1 */
}

/* A kernel function (args, begin, end); *out (when not NULL) gets it,
 * kind says whether it is exported (a plan's kernel) or internal (a part
 * its exported wrapper calls, emit_parts). */
static int
emit_kernel(emitter *e, const kernel_variants *kv, const tc_loop *l,
            const char *fname, enum gcc_jit_function_kind kind,
            gcc_jit_function **out, char *err, size_t errlen)
{
    gcc_jit_context *c = e->ctx;
    const tc_kernel *k = kv->exact;
    gcc_jit_param *params[3] = {
        gcc_jit_context_new_param(c, NULL, e->t_voidpp, "args"),
        gcc_jit_context_new_param(c, NULL, e->t_i64, "begin"),
        gcc_jit_context_new_param(c, NULL, e->t_i64, "end"),
    };
    gcc_jit_function *fn = gcc_jit_context_new_function(
        c, NULL, kind, e->t_void, fname, 3, params, 0);
    if (out != NULL) {
        *out = fn;
    }
    int nval = k->ninsts;
    if (kv->fast != NULL && kv->fast->ninsts > nval) {
        nval = kv->fast->ninsts;
    }
    R **base = calloc((size_t)(k->nargs + 1), sizeof(R *));
    gcc_jit_lvalue **elem = calloc((size_t)(k->nargs + 1), sizeof(*elem));
    R **val = calloc((size_t)(nval + 1), sizeof(R *));
    R **index = calloc((size_t)(k->nargs + 1), sizeof(R *));
    int rc = -1;
    if (base == NULL || elem == NULL || val == NULL || index == NULL) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
    }
    else {
        loop_state ls = {e, fn, kv, elem, val, l, base, err, errlen, index};
        gcc_jit_block *entry = gcc_jit_function_new_block(fn, "entry");
        load_arg_pointers(&ls, k, gcc_jit_param_as_rvalue(params[0]), entry,
                          base);
        rc = emit_nest(&ls, l, params, entry, base);
    }
    free(base);
    free(elem);
    free(val);
    free(index);
    return rc;
}

/* ---- reduction kernels -------------------------------------------------- *
 *
 * A row program (kir.h "Reduction kernels") per outer point.  Each phase
 * with accumulators runs its innermost reduction dim as
 *
 *     for (i = lo; i + L <= hi; i += L)
 *         for (j = 0; j < L; j++) { body(i + j); lane[j] = upd(lane[j], v) }
 *     tail: body(i); lane[t++ % L] = upd(...)
 *
 * with L partial accumulators per ACC in a local array: the j loop is a
 * plain fixed-count loop GCC vectorizes without reassociating anything
 * (no -ffast-math needed), and every lane still sees its points in
 * increasing r, so first-index ties stay exact.  Lanes are folded pairwise
 * at the end with the combine rule of their kind.  Float SUM lanes are
 * cascaded like torch's sums: after TC_FAN adds per lane they are added
 * into a second lane array (and cleared), which after TC_FAN such adds
 * goes into a third, and so on; every level add is a vectorized lane
 * loop.  Phases without accumulators are plain loops. */

#define TC_LANES 64          /* lane array size: cpu_red_target's most
                                sets; a phase uses plan.sets[p] of them */
#define TC_FAN (cpu_red_target.fsum_fan)

typedef struct {
    int inst, phase;
    tc_acc_kind kind;
    tc_dtype dt;
    int fsum;                        /* float SUM: cascaded */
    int nl;                          /* lanes used (its phase's) */
    gcc_jit_lvalue *lane_v, *lane_i; /* lane arrays (index: ARG kinds) */
    gcc_jit_lvalue *tot[TC_RED_MAX_LEVELS]; /* cascade levels (fsum) */
    gcc_jit_lvalue *res_v, *res_i;   /* results after the phase */
} acc_info;

enum { RM_ROW, RM_PART, RM_FIN };

typedef struct {
    emitter *e;
    gcc_jit_function *fn;
    const tc_kernel *k;
    const tc_loop *l;
    tc_red_plan plan;         /* k's schedule (reduce_plan.h) */
    const int64_t *slot;      /* split: inst -> first scratch slot */
    int mode, part_phase;
    R *state;                 /* int64_t *: PART, FIN */
    R *chunk;                 /* PART: chunk index */
    R **val;
    gcc_jit_lvalue **elem;    /* per argument: the element here (staged) */
    gcc_jit_lvalue **relem;   /* per argument: the element in memory */
    R **row;                  /* per argument: pointer at the outer point */
    R **cur;                  /* per argument: at the current reduction row */
    const int *acc_of;        /* inst -> acc index, or -1 */
    const int *region;        /* inst -> 2p (pre_p), 2p + 1 (body_p), 2P */
    const int *sstore;        /* inst -> also store it into this arg, -1 */
    const int *reload;        /* inst -> load it from this arg, -1 */
    acc_info *acc;
    int nacc;
    int cascade;              /* levels above the lanes (this phase) */
    gcc_jit_lvalue *cnt[TC_RED_MAX_LEVELS]; /* cascade counters */
    gcc_jit_lvalue *tcnt;     /* tail lane */
    gcc_jit_lvalue *take;     /* uint8 scratch for ARG updates */
    R *lane;                  /* current lane (int64) */
    int nl;                   /* lanes of the phase being emitted */
    gcc_jit_lvalue **stage;   /* per argument: staging array, or NULL */
    R *ridx;                  /* current reduction index r (int64) */
    int nlocal;               /* for unique local names */
    char *err;
    size_t errlen;
} red_state;

/* Cascade levels of phase p in the function being emitted: a whole row,
 * or one chunk of a split one (reduce_plan.h). */
static int
red_levels(const red_state *s, int p)
{
    return s->mode == RM_PART ? s->plan.levels_chunk[p] : s->plan.levels[p];
}

static int
is_arg_kind(tc_acc_kind kind)
{
    return tc_acc_sems[kind].has_index;
}

/* ARG kinds' index or SOFTMAX's sum: lane_i, res_i hold it */
static int
has_second(tc_acc_kind kind)
{
    return tc_acc_components(kind) == 2;
}

static T *
second_type(emitter *e, const acc_info *a)
{
    return e->vt[tc_acc_component_dtype(a->kind, a->dt, 1)];
}

/* the second component's identity: index -1, sum 0 */
static R *
second_identity(emitter *e, const acc_info *a)
{
    return tc_acc_sems[a->kind].online ? fconst(e, a->dt, 0.0)
                                       : iconst(e, e->t_i64, -1);
}

static gcc_jit_lvalue *
new_local(red_state *s, T *t, const char *what)
{
    char name[32];
    snprintf(name, sizeof(name), "%s_%d", what, s->nlocal++);
    return gcc_jit_function_new_local(s->fn, NULL, t, name);
}

static R *
acc_identity(emitter *e, const acc_info *a)
{
    double f;
    int64_t i;
    tc_acc_identity(a->kind, a->dt, &f, &i);
    return is_float(a->dt) ? fconst(e, a->dt, f) : iconst(e, e->vt[a->dt], i);
}

static R *
lane_at(emitter *e, gcc_jit_lvalue *arr, R *j)
{
    return lv(gcc_jit_context_new_array_access(e->ctx, NULL, lv(arr), j));
}

static gcc_jit_lvalue *
lane_lv(emitter *e, gcc_jit_lvalue *arr, R *j)
{
    return gcc_jit_context_new_array_access(e->ctx, NULL, lv(arr), j);
}

static R *
bool_and(emitter *e, R *a, R *b)
{
    return bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, e->vt[TC_BOOL], a, b);
}

static R *
bool_or(emitter *e, R *a, R *b)
{
    return bin(e, GCC_JIT_BINARY_OP_BITWISE_OR, e->vt[TC_BOOL], a, b);
}

/* NaN-propagating max/min of accumulator v and value x, shaped for the
 * loop-carried chain through v: "x > v ? x : v" is one maxps (a NaN x
 * falls through to v), and the NaN test of x, which does not depend on v,
 * only selects x afterwards.  A NaN v stays: x > NaN is false.  So the
 * chain is maxps + blend instead of compare + mask or + blend. */
static R *
acc_minmax(emitter *e, tc_kop op, tc_dtype dt, R *v, R *x)
{
    if (!is_float(dt)) {
        return emit_minmax(e, op, dt, x, v, 0);
    }
    enum gcc_jit_comparison c = op == KOP_MAX ? GCC_JIT_COMPARISON_GT
                                              : GCC_JIT_COMPARISON_LT;
    R *m = select_bits(e, dt, cmp(e, c, x, v), x, v);
    return select_bits(e, dt, cmp(e, GCC_JIT_COMPARISON_NE, x, x), x, m);
}

/* The value rule shared by updates and combines of the non-ARG kinds. */
static R *
acc_value_step(emitter *e, const acc_info *a, R *v, R *x)
{
    tc_kop op = tc_acc_value_op(a->kind, a->dt);
    switch (op) {
    case KOP_MAX:
    case KOP_MIN:
        return acc_minmax(e, op, a->dt, v, x);
    case KOP_OR:
        return bool_or(e, v, x);
    case KOP_AND:
        return bool_and(e, v, x);
    default: /* ADD, MUL */
        return emit_binary(e, op, a->dt, v, x, 0);
    }
}

/* SOFTMAX (kir.h): (m, s) = comb((m, s), (bm, bs)); an update is the
 * combine with (x, 1).  The exp is libm's expf: this kind is made only
 * for max-autotune's online variant on the CPU, where a call per point
 * is acceptable for what it is (a candidate timed against the default). */
static void
acc_softmax(emitter *e, gcc_jit_block *blk, const acc_info *a,
            gcc_jit_lvalue *m, gcc_jit_lvalue *s, R *bm, R *bs)
{
    tc_dtype dt = a->dt;
    R *m2 = acc_minmax(e, KOP_MAX, dt, fconst(e, dt, -FLT_MAX), bm);
    R *d = emit_binary(e, KOP_SUB, dt, m2, lv(m), 0);
    R *ad = fcall1(e, "fabs", dt, d);
    R *t = fcall1(e, "exp", dt, gcc_jit_context_new_unary_op(
                                    e->ctx, NULL, GCC_JIT_UNARY_OP_MINUS,
                                    e->vt[dt], ad));
    R *gt = cmp(e, GCC_JIT_COMPARISON_GT, bm, lv(m));
    R *up = emit_binary(e, KOP_ADD, dt,
                        emit_binary(e, KOP_MUL, dt, lv(s), t, 0), bs, 0);
    R *keep = emit_binary(e, KOP_ADD, dt, lv(s),
                          emit_binary(e, KOP_MUL, dt, bs, t, 0), 0);
    /* s first: both assignments read the old m */
    gcc_jit_block_add_assignment(blk, NULL, s,
                                 select_bits(e, dt, gt, up, keep));
    gcc_jit_block_add_assignment(blk, NULL, m,
                                 acc_minmax(e, KOP_MAX, dt, lv(m), bm));
}

/* Element update: (v, iv) = upd((v, iv), x at index r). */
static void
acc_update(emitter *e, gcc_jit_block *blk, const acc_info *a,
           gcc_jit_lvalue *take, gcc_jit_lvalue *v, gcc_jit_lvalue *iv,
           R *x, R *r)
{
    R *cv = lv(v);
    if (tc_acc_sems[a->kind].online) {
        acc_softmax(e, blk, a, v, iv, x, fconst(e, a->dt, 1.0));
        return;
    }
    if (!is_arg_kind(a->kind)) {
        gcc_jit_block_add_assignment(blk, NULL, v, acc_value_step(e, a, cv,
                                                                  x));
        return;
    }
    /* (x beats v, or nothing seen yet): reduce_plan.h */
    enum gcc_jit_comparison c = tc_acc_sems[a->kind].greater
                                    ? GCC_JIT_COMPARISON_GT
                                    : GCC_JIT_COMPARISON_LT;
    R *t = cmp(e, c, x, cv);
    if (is_float(a->dt)) {
        t = bool_or(e, t, bool_and(e, cmp(e, GCC_JIT_COMPARISON_NE, x, x),
                                   cmp(e, GCC_JIT_COMPARISON_EQ, cv, cv)));
    }
    t = bool_or(e, t, cmp(e, GCC_JIT_COMPARISON_LT, lv(iv),
                          iconst(e, e->t_i64, 0)));
    gcc_jit_block_add_assignment(blk, NULL, take, t);
    gcc_jit_block_add_assignment(blk, NULL, v,
                                 select_bits(e, a->dt, lv(take), x, cv));
    gcc_jit_block_add_assignment(blk, NULL, iv,
                                 select_bits(e, TC_I64, lv(take), r,
                                             lv(iv)));
}

/* Combine of partials: (v, iv) = comb((v, iv), (bv, bi)), the rule of
 * reduce_plan.h (indices compare as unsigned). */
static void
acc_combine(emitter *e, gcc_jit_block *blk, const acc_info *a,
            gcc_jit_lvalue *take, gcc_jit_lvalue *v, gcc_jit_lvalue *iv,
            R *bv, R *bi)
{
    R *cv = lv(v);
    if (tc_acc_sems[a->kind].online) {
        acc_softmax(e, blk, a, v, iv, bv, bi);
        return;
    }
    if (!is_arg_kind(a->kind)) {
        gcc_jit_block_add_assignment(blk, NULL, v, acc_value_step(e, a, cv,
                                                                  bv));
        return;
    }
    enum gcc_jit_comparison c = tc_acc_sems[a->kind].greater
                                    ? GCC_JIT_COMPARISON_GT
                                    : GCC_JIT_COMPARISON_LT;
    R *better = cmp(e, c, bv, cv);
    R *eq = cmp(e, GCC_JIT_COMPARISON_EQ, bv, cv);
    if (is_float(a->dt)) {
        R *n1 = cmp(e, GCC_JIT_COMPARISON_NE, cv, cv);
        R *n2 = cmp(e, GCC_JIT_COMPARISON_NE, bv, bv);
        R *not_n1 = bin(e, GCC_JIT_BINARY_OP_BITWISE_XOR, e->vt[TC_BOOL], n1,
                        iconst(e, e->vt[TC_BOOL], 1));
        better = bool_or(e, better, bool_and(e, n2, not_n1));
        eq = bool_or(e, eq, bool_and(e, n1, n2));
    }
    T *u64 = e->ut[TC_I64];
    R *lower = cmp(e, GCC_JIT_COMPARISON_LT, cast(e, bi, u64),
                   cast(e, lv(iv), u64));
    gcc_jit_block_add_assignment(blk, NULL, take,
                                 bool_or(e, better, bool_and(e, eq, lower)));
    gcc_jit_block_add_assignment(blk, NULL, v,
                                 select_bits(e, a->dt, lv(take), bv, cv));
    gcc_jit_block_add_assignment(blk, NULL, iv,
                                 select_bits(e, TC_I64, lv(take), bi,
                                             lv(iv)));
}

static void
lanes_reset(red_state *s, gcc_jit_block *blk, const acc_info *a,
            gcc_jit_lvalue *arr)
{
    emitter *e = s->e;
    R *id = acc_identity(e, a);
    for (int j = 0; j < a->nl; j++) {
        R *jj = iconst(e, e->t_i64, j);
        gcc_jit_block_add_assignment(blk, NULL, lane_lv(e, arr, jj), id);
        if (has_second(a->kind) && arr == a->lane_v) {
            gcc_jit_block_add_assignment(blk, NULL,
                                         lane_lv(e, a->lane_i, jj),
                                         second_identity(e, a));
        }
    }
}

/* Pairwise fold of lane array arr (a's lanes or a cascade level) into
 * its element 0 (the array is consumed).  Steps of at least
 * TC_FOLD_LOOP lanes are lane loops, which GCC vectorizes (one vector
 * operation per step); the last few are scalar.  Returns the block to
 * continue in. */
#define TC_FOLD_LOOP 8

static gcc_jit_block *red_loop(red_state *s, gcc_jit_block *cur,
                               gcc_jit_lvalue *i, R *lo, R *hi,
                               gcc_jit_block *after, gcc_jit_block **latch);

static gcc_jit_block *
lanes_fold(red_state *s, gcc_jit_block *blk, const acc_info *a,
           gcc_jit_lvalue *arr)
{
    emitter *e = s->e;
    int arg = has_second(a->kind);
    for (int step = a->nl / 2; step >= 1; step /= 2) {
        if (step >= TC_FOLD_LOOP) {
            gcc_jit_lvalue *j = new_local(s, e->t_i64, "jfold");
            gcc_jit_block *after = new_block_fn(s->fn), *latch;
            gcc_jit_block *body = red_loop(s, blk, j, iconst(e, e->t_i64, 0),
                                           iconst(e, e->t_i64, step), after,
                                           &latch);
            R *k = bin(e, GCC_JIT_BINARY_OP_PLUS, e->t_i64, lv(j),
                       iconst(e, e->t_i64, step));
            acc_combine(e, body, a, s->take, lane_lv(e, arr, lv(j)),
                        arg ? lane_lv(e, a->lane_i, lv(j)) : NULL,
                        lane_at(e, arr, k),
                        arg ? lane_at(e, a->lane_i, k) : NULL);
            gcc_jit_block_end_with_jump(body, NULL, latch);
            blk = after;
            continue;
        }
        for (int j = 0; j < step; j++) {
            R *jj = iconst(e, e->t_i64, j);
            R *kk = iconst(e, e->t_i64, j + step);
            acc_combine(e, blk, a, s->take, lane_lv(e, arr, jj),
                        arg ? lane_lv(e, a->lane_i, jj) : NULL,
                        lane_at(e, arr, kk),
                        arg ? lane_at(e, a->lane_i, kk) : NULL);
        }
    }
    return blk;
}

/* Value and index (NULL for value kinds) lvalues of accumulator ai's
 * partial of chunk c in the state (reduce_plan.h's scratch layout, one
 * row; chunk 0 also receives the combined result). */
static void
state_slot(red_state *s, R *state, R *c, int ai, gcc_jit_lvalue **v,
           gcc_jit_lvalue **iv)
{
    emitter *e = s->e;
    const acc_info *a = &s->acc[ai];
    R *p = ptr_offset(e, state, bin(e, GCC_JIT_BINARY_OP_PLUS, e->t_i64, c,
                                    iconst(e, e->t_i64, s->slot[a->inst])));
    T *pt = gcc_jit_type_get_pointer(e->vt[a->dt]);
    *v = gcc_jit_rvalue_dereference(cast(e, p, pt), NULL);
    /* the second component's slot (8 bytes, as the value's) */
    R *p2 = ptr_offset(e, p, iconst(e, e->t_i64, s->plan.nsplit));
    *iv = has_second(a->kind)
              ? gcc_jit_rvalue_dereference(
                    cast(e, p2, gcc_jit_type_get_pointer(second_type(e, a))),
                    NULL)
              : NULL;
}

/* KOP_ACC at its declaration point. */
static void
acc_declare(red_state *s, gcc_jit_block *blk, acc_info *a, int ai)
{
    emitter *e = s->e;
    if (s->mode == RM_ROW
        || (s->mode == RM_PART && a->phase == s->part_phase)) {
        lanes_reset(s, blk, a, a->lane_v);
        int levels = a->fsum ? red_levels(s, a->phase) : 0;
        for (int lvl = 0; lvl < levels; lvl++) {
            lanes_reset(s, blk, a, a->tot[lvl]);
        }
        return;
    }
    /* FIN, or PART of a later phase: the combined result */
    gcc_jit_lvalue *v, *iv;
    state_slot(s, s->state, iconst(e, e->t_i64, 0), ai, &v, &iv);
    gcc_jit_block_add_assignment(blk, NULL, a->res_v, lv(v));
    if (iv != NULL) {
        gcc_jit_block_add_assignment(blk, NULL, a->res_i, lv(iv));
    }
}

/* Emits insts [from, to) into blk (straight-line). */
static int
red_emit_region(red_state *s, gcc_jit_block *blk, int from, int to,
                char prefix)
{
    emitter *e = s->e;
    const tc_kernel *k = s->k;
    body_state bs = {e, k, s->val, s->elem, prefix};
    for (int i = from; i < to; i++) {
        const tc_kinst *in = &k->insts[i];
        if (in->op == KOP_ACC) {
            acc_declare(s, blk, &s->acc[s->acc_of[i]], s->acc_of[i]);
            continue;
        }
        if (in->op == KOP_ACC_UPDATE) {
            acc_info *a = &s->acc[s->acc_of[in->a]];
            acc_update(e, blk, a, s->take, lane_lv(e, a->lane_v, s->lane),
                       has_second(a->kind) ? lane_lv(e, a->lane_i, s->lane)
                                           : NULL,
                       s->val[in->b], s->ridx);
            continue;
        }
        if (in->op == KOP_ACC_RESULT) {
            acc_info *a = &s->acc[s->acc_of[in->a]];
            s->val[i] = lv(in->imm.i ? a->res_i : a->res_v);
            continue;
        }
        if (in->op == KOP_STORE && s->mode == RM_PART
            && !(s->region[i] & 1)) {
            continue;  /* pre-region stores: once, in the finish call */
        }
        R *r = s->reload[i] >= 0 ? lv(s->relem[s->reload[i]])
                                 : emit_inst(&bs, blk, i, s->err, s->errlen);
        if (in->op == KOP_STORE) {
            continue;
        }
        if (r == NULL) {
            return -1;
        }
        if (in->op == KOP_CONST) {
            s->val[i] = r;
            continue;
        }
        char name[24];
        snprintf(name, sizeof(name), "%c%d", prefix, i);
        gcc_jit_lvalue *l = gcc_jit_function_new_local(
            s->fn, NULL, e->vt[in->dtype], name);
        gcc_jit_block_add_assignment(blk, NULL, l, r);
        s->val[i] = lv(l);
        if (s->sstore[i] >= 0) {
            gcc_jit_block_add_assignment(blk, NULL, s->elem[s->sstore[i]],
                                         s->val[i]);
        }
    }
    return 0;
}

static void
set_row_elems(red_state *s)
{
    for (int a = 0; a < s->k->nargs; a++) {
        s->elem[a] = gcc_jit_context_new_array_access(
            s->e->ctx, NULL, s->row[a], iconst(s->e, s->e->t_i64, 0));
        s->relem[a] = s->elem[a];
    }
}

/* Element lvalues at index i of the innermost reduction dim. */
static void
set_red_elems(red_state *s, R *i)
{
    emitter *e = s->e;
    int d = s->l->ndim + s->l->nred - 1;
    for (int a = 0; a < s->k->nargs; a++) {
        int64_t st = s->l->strides[a][d];
        R *idx = st == 1   ? i
                 : st == 0 ? iconst(e, e->t_i64, 0)
                           : bin(e, GCC_JIT_BINARY_OP_MULT, e->t_i64, i,
                                 loop_stride(e, s->l, a, d));
        s->elem[a] = gcc_jit_context_new_array_access(e->ctx, NULL,
                                                      s->cur[a], idx);
        s->relem[a] = s->elem[a];
    }
}

/* ptrs[a] += i * strides[a][d], into fresh locals assigned in blk. */
static void
advance(red_state *s, int d, R *i, gcc_jit_block *blk, R **ptrs)
{
    emitter *e = s->e;
    for (int a = 0; a < s->k->nargs; a++) {
        int64_t st = s->l->strides[a][d];
        if (st == 0) {
            continue;
        }
        R *idx = st == 1 ? i : bin(e, GCC_JIT_BINARY_OP_MULT, e->t_i64, i,
                                   loop_stride(e, s->l, a, d));
        gcc_jit_lvalue *q = new_local(s, gcc_jit_rvalue_get_type(ptrs[a]),
                                      "p");
        gcc_jit_block_add_assignment(blk, NULL, q, ptr_offset(e, ptrs[a],
                                                             idx));
        ptrs[a] = lv(q);
    }
}

static int
phase_has_updates(const tc_kernel *k, int p)
{
    for (int i = k->phases[p].begin; i < k->phases[p].end; i++) {
        if (k->insts[i].op == KOP_ACC_UPDATE) {
            return 1;
        }
    }
    return 0;
}

static gcc_jit_block *red_loop(red_state *s, gcc_jit_block *cur,
                               gcc_jit_lvalue *i, R *lo, R *hi,
                               gcc_jit_block *after, gcc_jit_block **latch);

/* Cascade level `lvl` of array-level k of a float SUM accumulator: 0 is
 * the lanes, k > 0 the arrays above. */
static gcc_jit_lvalue *
level_arr(const acc_info *a, int k)
{
    return k == 0 ? a->lane_v : a->tot[k - 1];
}

/* For the float SUM accumulators of phase p: level k + 1 += level k,
 * level k = 0, in one lane loop (vectorized).  Returns the block after. */
static gcc_jit_block *
flush_level(red_state *s, gcc_jit_block *blk, int p, int k)
{
    emitter *e = s->e;
    gcc_jit_block *after = new_block_fn(s->fn), *latch;
    gcc_jit_lvalue *j = new_local(s, e->t_i64, "jf");
    gcc_jit_block *body = red_loop(s, blk, j, iconst(e, e->t_i64, 0),
                                   iconst(e, e->t_i64, s->nl), after,
                                   &latch);
    for (int ai = 0; ai < s->nacc; ai++) {
        acc_info *a = &s->acc[ai];
        if (a->phase != p || !a->fsum) {
            continue;
        }
        gcc_jit_lvalue *src = lane_lv(e, level_arr(a, k), lv(j));
        gcc_jit_block_add_assignment_op(body, NULL,
                                        lane_lv(e, level_arr(a, k + 1),
                                                lv(j)),
                                        GCC_JIT_BINARY_OP_PLUS, lv(src));
        gcc_jit_block_add_assignment(body, NULL, src,
                                     gcc_jit_context_zero(e->ctx,
                                                          e->vt[a->dt]));
    }
    gcc_jit_block_end_with_jump(body, NULL, latch);
    return after;
}

/* After a block of points: count them, and flush the cascade levels that
 * are full (level 0 after TC_FAN * nl points, level k after TC_FAN
 * flushes of level k - 1).  Ends blk with a jump to next. */
static void
emit_cascade_step(red_state *s, gcc_jit_block *blk, int p, R *npoints,
                  gcc_jit_block *next)
{
    emitter *e = s->e;
    T *i64 = e->t_i64;
    for (int k = 0; k < s->cascade; k++) {
        int64_t full = k == 0 ? (int64_t)TC_FAN * s->nl : TC_FAN;
        gcc_jit_block_add_assignment_op(blk, NULL, s->cnt[k],
                                        GCC_JIT_BINARY_OP_PLUS,
                                        k == 0 ? npoints : iconst(e, i64, 1));
        gcc_jit_block *fl = new_block_fn(s->fn);
        gcc_jit_block_end_with_conditional(
            blk, NULL,
            gcc_jit_context_new_comparison(e->ctx, NULL,
                                           GCC_JIT_COMPARISON_GE,
                                           lv(s->cnt[k]),
                                           iconst(e, i64, full)),
            fl, next);
        gcc_jit_block_add_assignment(fl, NULL, s->cnt[k], iconst(e, i64, 0));
        blk = flush_level(s, fl, p, k);
    }
    gcc_jit_block_end_with_jump(blk, NULL, next);
}

/* for (i = lo; i < hi; i++) as in counted_loop, for red_state. */
static gcc_jit_block *
red_loop(red_state *s, gcc_jit_block *cur, gcc_jit_lvalue *i, R *lo, R *hi,
         gcc_jit_block *after, gcc_jit_block **latch)
{
    loop_state ls = {.e = s->e, .fn = s->fn};
    return counted_loop(&ls, cur, i, lo, hi, after, latch);
}

/* The innermost reduction dim [lo, hi) of phase p, ending with a jump to
 * `after`.  rrow: r of the row's first point. */
static int
emit_red_inner(red_state *s, gcc_jit_block *blk, int p, R *lo, R *hi,
               R *rrow, int64_t size, gcc_jit_block *after)
{
    emitter *e = s->e;
    T *i64 = e->t_i64;
    const tc_kphase *ph = &s->k->phases[p];
    gcc_jit_lvalue *i = new_local(s, i64, "ri");
    if (!phase_has_updates(s->k, p)) {
        gcc_jit_block *latch;
        gcc_jit_block *body = red_loop(s, blk, i, lo, hi, after, &latch);
        set_red_elems(s, lv(i));
        s->ridx = bin(e, GCC_JIT_BINARY_OP_PLUS, i64, rrow, lv(i));
        if (red_emit_region(s, body, ph->begin, ph->end, 'v') < 0) {
            return -1;
        }
        gcc_jit_block_end_with_jump(body, NULL, latch);
        return 0;
    }
    int blocked = s->cascade > 0;
    int nl = s->nl;
    gcc_jit_lvalue *ib = new_local(s, i64, "ib");
    gcc_jit_lvalue *ie = new_local(s, i64, "ie");
    gcc_jit_lvalue *j = new_local(s, i64, "j");
    gcc_jit_block *cond_b = new_block_fn(s->fn), *head = new_block_fn(s->fn);
    gcc_jit_block *cond_t = new_block_fn(s->fn), *tbody = new_block_fn(s->fn);
    gcc_jit_block *bend = new_block_fn(s->fn), *bnext = new_block_fn(s->fn);
    gcc_jit_block_add_assignment(blk, NULL, ib, lo);
    gcc_jit_block_end_with_jump(blk, NULL, cond_b);
    gcc_jit_block_end_with_conditional(
        cond_b, NULL,
        gcc_jit_context_new_comparison(e->ctx, NULL, GCC_JIT_COMPARISON_LT,
                                       lv(ib), hi),
        head, after);
    if (blocked) {
        R *ibb = bin(e, GCC_JIT_BINARY_OP_PLUS, i64, lv(ib),
                     iconst(e, i64, (int64_t)TC_FAN * nl));
        R *c = cmp(e, GCC_JIT_COMPARISON_LT, ibb, hi);
        gcc_jit_block_add_assignment(head, NULL, ie,
                                     select_bits(e, TC_I64, c, ibb, hi));
    }
    else {
        gcc_jit_block_add_assignment(head, NULL, ie, hi);
    }
    gcc_jit_block_add_assignment(head, NULL, i, lv(ib));
    if (size < 0 || size >= nl) {
        /* vector part: for (; i + nl <= ie; i += nl) for j < nl.  Body
         * stores go to a local staging array, copied out after the lane
         * loop: a store through an argument pointer inside it would make
         * GCC version the loop on an alias check, and the scalar fallback
         * keeps the lanes in memory. */
        gcc_jit_block *cond_v = new_block_fn(s->fn);
        gcc_jit_block *jinit = new_block_fn(s->fn);
        gcc_jit_block *vlatch = new_block_fn(s->fn);
        gcc_jit_block_end_with_jump(head, NULL, cond_v);
        R *iL = bin(e, GCC_JIT_BINARY_OP_PLUS, i64, lv(i),
                    iconst(e, i64, nl));
        gcc_jit_block_end_with_conditional(
            cond_v, NULL,
            gcc_jit_context_new_comparison(e->ctx, NULL,
                                           GCC_JIT_COMPARISON_LE, iL,
                                           lv(ie)),
            jinit, cond_t);
        int nstage = 0;
        for (int a = 0; a < s->k->nargs; a++) {
            s->stage[a] = NULL;
        }
        for (int q = ph->begin; q < ph->end; q++) {
            const tc_kinst *in = &s->k->insts[q];
            int a = in->op == KOP_STORE ? in->arg : s->sstore[q];
            if (a >= 0 && s->stage[a] == NULL) {
                s->stage[a] = new_local(
                    s, gcc_jit_context_new_array_type(
                           e->ctx, NULL, e->vt[s->k->args[a].dtype], nl),
                    "stage");
                nstage++;
            }
        }
        gcc_jit_block *copy = nstage ? new_block_fn(s->fn) : vlatch;
        gcc_jit_block *jlatch;
        gcc_jit_block *jbody = red_loop(s, jinit, j, iconst(e, i64, 0),
                                        iconst(e, i64, nl), copy, &jlatch);
        R *idx = bin(e, GCC_JIT_BINARY_OP_PLUS, i64, lv(i), lv(j));
        set_red_elems(s, idx);
        gcc_jit_lvalue **real = s->elem;
        gcc_jit_lvalue *staged[s->k->nargs + 1];
        for (int a = 0; a < s->k->nargs; a++) {
            staged[a] = s->stage[a] != NULL ? lane_lv(e, s->stage[a], lv(j))
                                            : real[a];
        }
        s->elem = staged;
        s->lane = lv(j);
        s->ridx = bin(e, GCC_JIT_BINARY_OP_PLUS, i64, rrow, idx);
        int rc = red_emit_region(s, jbody, ph->begin, ph->end, 'v');
        s->elem = real;
        if (rc < 0) {
            return -1;
        }
        gcc_jit_block_end_with_jump(jbody, NULL, jlatch);
        if (nstage) {
            gcc_jit_lvalue *jc = new_local(s, i64, "jc");
            gcc_jit_block *clatch;
            gcc_jit_block *cbody = red_loop(s, copy, jc, iconst(e, i64, 0),
                                            iconst(e, i64, nl), vlatch,
                                            &clatch);
            set_red_elems(s, bin(e, GCC_JIT_BINARY_OP_PLUS, i64, lv(i),
                                 lv(jc)));
            for (int a = 0; a < s->k->nargs; a++) {
                if (s->stage[a] != NULL) {
                    gcc_jit_block_add_assignment(
                        cbody, NULL, s->elem[a],
                        lane_at(e, s->stage[a], lv(jc)));
                }
            }
            gcc_jit_block_end_with_jump(cbody, NULL, clatch);
        }
        gcc_jit_block_add_assignment_op(vlatch, NULL, i,
                                        GCC_JIT_BINARY_OP_PLUS,
                                        iconst(e, i64, nl));
        gcc_jit_block_end_with_jump(vlatch, NULL, cond_v);
    }
    else {
        gcc_jit_block_end_with_jump(head, NULL, cond_t);
    }
    /* tail: one point at a time, lanes round-robin */
    gcc_jit_block_end_with_conditional(
        cond_t, NULL,
        gcc_jit_context_new_comparison(e->ctx, NULL, GCC_JIT_COMPARISON_LT,
                                       lv(i), lv(ie)),
        tbody, bend);
    set_red_elems(s, lv(i));
    s->lane = bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, i64, lv(s->tcnt),
                  iconst(e, i64, nl - 1));
    s->ridx = bin(e, GCC_JIT_BINARY_OP_PLUS, i64, rrow, lv(i));
    if (red_emit_region(s, tbody, ph->begin, ph->end, 't') < 0) {
        return -1;
    }
    gcc_jit_block_add_assignment_op(tbody, NULL, s->tcnt,
                                    GCC_JIT_BINARY_OP_PLUS, iconst(e, i64, 1));
    gcc_jit_block_add_assignment_op(tbody, NULL, i, GCC_JIT_BINARY_OP_PLUS,
                                    iconst(e, i64, 1));
    gcc_jit_block_end_with_jump(tbody, NULL, cond_t);
    if (blocked) {
        emit_cascade_step(s, bend, p,
                          bin(e, GCC_JIT_BINARY_OP_MINUS, i64, lv(ie),
                              lv(ib)),
                          bnext);
    }
    else {
        gcc_jit_block_end_with_jump(bend, NULL, bnext);
    }
    gcc_jit_block_add_assignment(bnext, NULL, ib, lv(ie));
    gcc_jit_block_end_with_jump(bnext, NULL, cond_b);
    return 0;
}

/* Phase p's loop nest over the reduction dims, then its results (or, in
 * PART mode, its partials).  lo0/hi0: range of the outermost reduction
 * dim (PART), NULL for all of it.  Returns the block to continue in. */
static gcc_jit_block *
red_emit_phase(red_state *s, gcc_jit_block *blk, int p, R *lo0, R *hi0)
{
    emitter *e = s->e;
    T *i64 = e->t_i64;
    const tc_loop *l = s->l;
    s->nl = s->plan.sets[p];
    s->cascade = red_levels(s, p);
    for (int k = 0; k < s->cascade; k++) {
        gcc_jit_block_add_assignment(blk, NULL, s->cnt[k],
                                     iconst(e, i64, 0));
    }
    gcc_jit_block_add_assignment(blk, NULL, s->tcnt, iconst(e, i64, 0));
    gcc_jit_block *done = new_block_fn(s->fn);
    if (l->red_numel > 0) {
        for (int a = 0; a < s->k->nargs; a++) {
            s->cur[a] = s->row[a];
        }
        int nr = l->nred, off = l->ndim;
        R *rrow = iconst(e, i64, 0);
        gcc_jit_block *after = done;
        for (int d = 0; d < nr - 1; d++) {
            int64_t rowstride = 1;
            R *growstride = iconst(e, i64, 1);
            for (int q = d + 1; q < nr; q++) {
                rowstride *= l->sizes[off + q];
                growstride = bin(e, GCC_JIT_BINARY_OP_MULT, i64, growstride,
                                 loop_size(e, l, off + q));
            }
            R *lo = d == 0 && lo0 != NULL ? lo0 : iconst(e, i64, 0);
            R *hi = d == 0 && hi0 != NULL ? hi0 : loop_size(e, l, off + d);
            gcc_jit_lvalue *i = new_local(s, i64, "rd");
            gcc_jit_block *latch;
            gcc_jit_block *body = red_loop(s, blk, i, lo, hi, after, &latch);
            advance(s, off + d, lv(i), body, s->cur);
            gcc_jit_lvalue *rr = new_local(s, i64, "rrow");
            gcc_jit_block_add_assignment(
                body, NULL, rr,
                bin(e, GCC_JIT_BINARY_OP_PLUS, i64, rrow,
                    bin(e, GCC_JIT_BINARY_OP_MULT, i64, lv(i),
                        e->generic ? growstride
                                   : iconst(e, i64, rowstride))));
            rrow = lv(rr);
            blk = body;
            after = latch;
        }
        int64_t n = l->sizes[off + nr - 1];
        int ranged = (nr == 1 && lo0 != NULL) || e->generic;
        R *lo = nr == 1 && lo0 != NULL ? lo0 : iconst(e, i64, 0);
        R *hi = nr == 1 && lo0 != NULL ? hi0 : loop_size(e, l, off + nr - 1);
        if (emit_red_inner(s, blk, p, lo, hi, rrow, ranged ? -1 : n,
                           after) < 0) {
            return NULL;
        }
    }
    else {
        gcc_jit_block_end_with_jump(blk, NULL, done);
    }
    /* results: the cascade levels added up, then the lanes folded */
    blk = done;
    for (int k = 0; k < s->cascade; k++) {
        blk = flush_level(s, blk, p, k);
    }
    gcc_jit_lvalue *pv = NULL, *pi = NULL;
    for (int ai = 0; ai < s->nacc; ai++) {
        acc_info *a = &s->acc[ai];
        if (a->phase != p) {
            continue;
        }
        R *res_v, *res_i = second_identity(e, a);
        if (a->fsum && s->cascade > 0) {
            blk = lanes_fold(s, blk, a, a->tot[s->cascade - 1]);
            res_v = lane_at(e, a->tot[s->cascade - 1], iconst(e, i64, 0));
        }
        else {
            blk = lanes_fold(s, blk, a, a->lane_v);
            res_v = lane_at(e, a->lane_v, iconst(e, i64, 0));
            if (has_second(a->kind)) {
                res_i = lane_at(e, a->lane_i, iconst(e, i64, 0));
            }
        }
        if (s->mode == RM_PART) {
            state_slot(s, s->state, s->chunk, ai, &pv, &pi);
            gcc_jit_block_add_assignment(blk, NULL, pv, res_v);
            if (pi != NULL) {
                gcc_jit_block_add_assignment(blk, NULL, pi, res_i);
            }
        }
        else {
            gcc_jit_block_add_assignment(blk, NULL, a->res_v, res_v);
            gcc_jit_block_add_assignment(blk, NULL, a->res_i, res_i);
        }
    }
    return blk;
}

/* Region bounds: pre_p = [pre_begin(p), phases[p].begin). */
static int
pre_begin(const tc_kernel *k, int p)
{
    return p == 0 ? 0 : k->phases[p - 1].end;
}

/* The row program of one outer point (ROW), one chunk of phase
 * part_phase (PART) or the finishing regions (FIN), starting in blk with
 * s->row set.  Returns the block to continue in. */
static gcc_jit_block *
red_emit_program(red_state *s, gcc_jit_block *blk, R *lo0, R *hi0)
{
    const tc_kernel *k = s->k;
    int last = s->mode == RM_PART ? s->part_phase : k->nphases - 1;
    for (int p = 0; p <= last; p++) {
        set_row_elems(s);
        if (red_emit_region(s, blk, pre_begin(k, p), k->phases[p].begin,
                            'v') < 0) {
            return NULL;
        }
        if (s->mode == RM_FIN) {
            continue;
        }
        if (s->mode == RM_PART && p < s->part_phase) {
            continue;
        }
        blk = red_emit_phase(s, blk, p, lo0, hi0);
        if (blk == NULL) {
            return NULL;
        }
    }
    if (s->mode != RM_PART) {
        set_row_elems(s);
        if (red_emit_region(s, blk, k->phases[k->nphases - 1].end,
                            k->ninsts, 'v') < 0) {
            return NULL;
        }
    }
    return blk;
}

/* Locals every function of a reduction kernel needs. */
static void
red_locals(red_state *s)
{
    emitter *e = s->e;
    for (int ai = 0; ai < s->nacc; ai++) {
        acc_info *a = &s->acc[ai];
        T *t = e->vt[a->dt];
        a->lane_v = new_local(s, gcc_jit_context_new_array_type(
                                     e->ctx, NULL, t, TC_LANES), "lane");
        a->lane_i = has_second(a->kind)
                        ? new_local(s, gcc_jit_context_new_array_type(
                                           e->ctx, NULL, second_type(e, a),
                                           TC_LANES),
                                    "lanei")
                        : NULL;
        for (int k = 0; k < TC_RED_MAX_LEVELS; k++) {
            a->tot[k] = a->fsum ? new_local(
                                      s, gcc_jit_context_new_array_type(
                                             e->ctx, NULL, t, TC_LANES),
                                      "lvl")
                                : NULL;
        }
        a->res_v = new_local(s, t, "acc");
        a->res_i = new_local(s, second_type(e, a), "acci");
    }
    for (int k = 0; k < TC_RED_MAX_LEVELS; k++) {
        s->cnt[k] = new_local(s, e->t_i64, "cnt");
    }
    s->tcnt = new_local(s, e->t_i64, "tcnt");
    s->take = new_local(s, e->vt[TC_BOOL], "take");
}

static int
load_row_pointers(red_state *s, R *args, gcc_jit_block *entry)
{
    loop_state ls = {.e = s->e, .fn = s->fn};
    load_arg_pointers(&ls, s->k, args, entry, s->row);
    return 0;
}

/* void name(void **args, int64_t begin, int64_t end): rows [begin, end) */
static int
emit_red_rows(red_state *s, const char *name)
{
    emitter *e = s->e;
    const tc_loop *l = s->l;
    gcc_jit_param *params[3] = {
        gcc_jit_context_new_param(e->ctx, NULL, e->t_voidpp, "args"),
        gcc_jit_context_new_param(e->ctx, NULL, e->t_i64, "begin"),
        gcc_jit_context_new_param(e->ctx, NULL, e->t_i64, "end"),
    };
    s->fn = gcc_jit_context_new_function(e->ctx, NULL,
                                         GCC_JIT_FUNCTION_EXPORTED, e->t_void,
                                         name, 3, params, 0);
    s->mode = RM_ROW;
    red_locals(s);
    gcc_jit_block *entry = gcc_jit_function_new_block(s->fn, "entry");
    gcc_jit_block *exitb = gcc_jit_function_new_block(s->fn, "exit");
    gcc_jit_block_end_with_void_return(exitb, NULL);
    load_row_pointers(s, gcc_jit_param_as_rvalue(params[0]), entry);
    gcc_jit_block *blk = entry, *after = exitb;
    for (int d = 0; d < l->ndim; d++) {
        R *lo = d == 0 ? gcc_jit_param_as_rvalue(params[1])
                       : iconst(e, e->t_i64, 0);
        R *hi = d == 0 ? gcc_jit_param_as_rvalue(params[2])
                       : loop_size(e, l, d);
        gcc_jit_lvalue *i = new_local(s, e->t_i64, "i");
        gcc_jit_block *latch;
        gcc_jit_block *body = red_loop(s, blk, i, lo, hi, after, &latch);
        advance(s, d, lv(i), body, s->row);
        blk = body;
        after = latch;
    }
    blk = red_emit_program(s, blk, NULL, NULL);
    if (blk == NULL) {
        return -1;
    }
    gcc_jit_block_end_with_jump(blk, NULL, after);
    return 0;
}

/* The name of pass ps of the kernel named base: the rows function is
 * base itself, the split ones base_p<phase>, base_c<phase>, base_f. */
static void
pass_name(char *buf, size_t n, const char *base, const tc_red_pass *ps)
{
    switch (ps->kind) {
    case TC_RED_PASS_PARTIAL:
        snprintf(buf, n, "%s_p%d", base, ps->phase);
        break;
    case TC_RED_PASS_COMBINE:
        snprintf(buf, n, "%s_c%d", base, ps->phase);
        break;
    case TC_RED_PASS_FINAL:
        snprintf(buf, n, "%s_f", base);
        break;
    default:
        snprintf(buf, n, "%s", base);
        break;
    }
}

/* void name(void **args, int64_t rb, int64_t re, int64_t *state,
 * int64_t chunk): PARTIAL pass of phase p over outermost reduction
 * indices [rb, re). */
static int
emit_red_part(red_state *s, const char *name, int p)
{
    emitter *e = s->e;
    T *i64p = gcc_jit_type_get_pointer(e->t_i64);
    gcc_jit_param *params[5] = {
        gcc_jit_context_new_param(e->ctx, NULL, e->t_voidpp, "args"),
        gcc_jit_context_new_param(e->ctx, NULL, e->t_i64, "rb"),
        gcc_jit_context_new_param(e->ctx, NULL, e->t_i64, "re"),
        gcc_jit_context_new_param(e->ctx, NULL, i64p, "state"),
        gcc_jit_context_new_param(e->ctx, NULL, e->t_i64, "chunk"),
    };
    s->fn = gcc_jit_context_new_function(e->ctx, NULL,
                                         GCC_JIT_FUNCTION_EXPORTED, e->t_void,
                                         name, 5, params, 0);
    s->mode = RM_PART;
    s->part_phase = p;
    s->state = gcc_jit_param_as_rvalue(params[3]);
    s->chunk = gcc_jit_param_as_rvalue(params[4]);
    red_locals(s);
    gcc_jit_block *entry = gcc_jit_function_new_block(s->fn, "entry");
    load_row_pointers(s, gcc_jit_param_as_rvalue(params[0]), entry);
    gcc_jit_block *blk = red_emit_program(s, entry,
                                          gcc_jit_param_as_rvalue(params[1]),
                                          gcc_jit_param_as_rvalue(params[2]));
    if (blk == NULL) {
        return -1;
    }
    gcc_jit_block_end_with_void_return(blk, NULL);
    return 0;
}

/* void name(int64_t *state, int64_t n): COMBINE pass of phase p, pairwise
 * over the chunks' partials, into chunk 0's slots. */
static int
emit_red_comb(red_state *s, const char *name, int p)
{
    emitter *e = s->e;
    T *i64p = gcc_jit_type_get_pointer(e->t_i64);
    gcc_jit_param *cp[2] = {
        gcc_jit_context_new_param(e->ctx, NULL, i64p, "state"),
        gcc_jit_context_new_param(e->ctx, NULL, e->t_i64, "n"),
    };
    s->fn = gcc_jit_context_new_function(
        e->ctx, NULL, GCC_JIT_FUNCTION_EXPORTED, e->t_void, name, 2, cp,
        0);
    s->take = new_local(s, e->vt[TC_BOOL], "take");
    R *st = gcc_jit_param_as_rvalue(cp[0]);
    R *n = gcc_jit_param_as_rvalue(cp[1]);
    gcc_jit_lvalue *step = new_local(s, e->t_i64, "step");
    gcc_jit_lvalue *c = new_local(s, e->t_i64, "c");
    gcc_jit_block *centry = gcc_jit_function_new_block(s->fn, "entry");
    gcc_jit_block *cond_s = new_block_fn(s->fn);
    gcc_jit_block *sbody = new_block_fn(s->fn);
    gcc_jit_block *cond_c = new_block_fn(s->fn);
    gcc_jit_block *cbody = new_block_fn(s->fn);
    gcc_jit_block *slatch = new_block_fn(s->fn);
    gcc_jit_block *fin = new_block_fn(s->fn);
    gcc_jit_block_add_assignment(centry, NULL, step,
                                 iconst(e, e->t_i64, 1));
    gcc_jit_block_end_with_jump(centry, NULL, cond_s);
    gcc_jit_block_end_with_conditional(
        cond_s, NULL,
        gcc_jit_context_new_comparison(e->ctx, NULL,
                                       GCC_JIT_COMPARISON_LT, lv(step),
                                       n),
        sbody, fin);
    gcc_jit_block_add_assignment(sbody, NULL, c, iconst(e, e->t_i64, 0));
    gcc_jit_block_end_with_jump(sbody, NULL, cond_c);
    gcc_jit_block_end_with_conditional(
        cond_c, NULL,
        gcc_jit_context_new_comparison(
            e->ctx, NULL, GCC_JIT_COMPARISON_LT,
            bin(e, GCC_JIT_BINARY_OP_PLUS, e->t_i64, lv(c), lv(step)), n),
        cbody, slatch);
    for (int ai = 0; ai < s->nacc; ai++) {
        if (s->acc[ai].phase != p) {
            continue;
        }
        gcc_jit_lvalue *av, *aiv, *bv, *biv;
        state_slot(s, st, lv(c), ai, &av, &aiv);
        state_slot(s, st,
                   bin(e, GCC_JIT_BINARY_OP_PLUS, e->t_i64, lv(c),
                       lv(step)),
                   ai, &bv, &biv);
        acc_combine(e, cbody, &s->acc[ai], s->take, av, aiv, lv(bv),
                    biv != NULL ? lv(biv) : NULL);
    }
    gcc_jit_block_add_assignment_op(
        cbody, NULL, c, GCC_JIT_BINARY_OP_PLUS,
        bin(e, GCC_JIT_BINARY_OP_PLUS, e->t_i64, lv(step), lv(step)));
    gcc_jit_block_end_with_jump(cbody, NULL, cond_c);
    gcc_jit_block_add_assignment_op(slatch, NULL, step,
                                    GCC_JIT_BINARY_OP_PLUS, lv(step));
    gcc_jit_block_end_with_jump(slatch, NULL, cond_s);
    gcc_jit_block_end_with_void_return(fin, NULL);
    return 0;
}

/* void name(void **args, int64_t *state): the FINAL pass. */
static int
emit_red_fin(red_state *s, const char *name)
{
    emitter *e = s->e;
    T *i64p = gcc_jit_type_get_pointer(e->t_i64);
    gcc_jit_param *fp[2] = {
        gcc_jit_context_new_param(e->ctx, NULL, e->t_voidpp, "args"),
        gcc_jit_context_new_param(e->ctx, NULL, i64p, "state"),
    };
    s->fn = gcc_jit_context_new_function(e->ctx, NULL,
                                         GCC_JIT_FUNCTION_EXPORTED, e->t_void,
                                         name, 2, fp, 0);
    s->mode = RM_FIN;
    s->state = gcc_jit_param_as_rvalue(fp[1]);
    red_locals(s);
    gcc_jit_block *entry = gcc_jit_function_new_block(s->fn, "entry");
    load_row_pointers(s, gcc_jit_param_as_rvalue(fp[0]), entry);
    gcc_jit_block *blk = red_emit_program(s, entry, NULL, NULL);
    if (blk == NULL) {
        return -1;
    }
    gcc_jit_block_end_with_void_return(blk, NULL);
    return 0;
}

/* Checks the structure kir.h promises (regions, accumulator placement,
 * visibility) and fills acc_of / region / accs.  Returns the number of
 * accumulators, or -1 with err set. */
static int
check_reduction(const tc_kernel *k, const tc_red_plan *plan, int *acc_of,
                int *region, acc_info *acc, char *err, size_t errlen)
{
    int np = k->nphases, nacc = 0;
    if (np > TC_KIR_MAX_PHASES || k->nred < 0) {
        goto bad;
    }
    for (int p = 0; p < np; p++) {
        if (k->phases[p].begin < pre_begin(k, p)
            || k->phases[p].end < k->phases[p].begin
            || k->phases[p].end > k->ninsts) {
            goto bad;
        }
        for (int i = pre_begin(k, p); i < k->phases[p].begin; i++) {
            region[i] = 2 * p;
        }
        for (int i = k->phases[p].begin; i < k->phases[p].end; i++) {
            region[i] = 2 * p + 1;
        }
    }
    for (int i = k->phases[np - 1].end; i < k->ninsts; i++) {
        region[i] = 2 * np;
    }
    for (int i = 0; i < k->ninsts; i++) {
        const tc_kinst *in = &k->insts[i];
        acc_of[i] = -1;
        if (check_inst(k, i, err, errlen) < 0) {
            return -1;
        }
        int ops[3] = {in->a, in->b, in->c};
        int accop = in->op == KOP_ACC_UPDATE || in->op == KOP_ACC_RESULT;
        for (int j = 0; j < 3; j++) {
            int o = ops[j];
            if (o < 0) {
                continue;
            }
            int is_acc = k->insts[o].op == KOP_ACC;
            if (is_acc != (accop && j == 0)) {
                goto bad;
            }
            /* body values are visible only inside their own body */
            if (!is_acc && (region[o] & 1) && region[o] != region[i]) {
                goto bad;
            }
        }
        if ((in->op == KOP_LOAD || in->op == KOP_STORE) && !(region[i] & 1)) {
            for (int d = 0; d < k->nred; d++) {
                if (k->args[in->arg].strides[k->ndim + d] != 0) {
                    goto bad;
                }
            }
        }
        if (in->op == KOP_ACC) {
            if ((region[i] & 1) || region[i] == 2 * np
                || in->imm.i < 0 || in->imm.i >= TC_ACC_NKINDS) {
                goto bad;
            }
            acc_info *a = &acc[nacc];
            memset(a, 0, sizeof(*a));
            a->inst = i;
            a->phase = region[i] / 2;
            a->kind = (tc_acc_kind)in->imm.i;
            a->dt = in->dtype;
            a->fsum = tc_acc_cascaded(a->kind, a->dt);
            a->nl = plan->sets[a->phase];
            acc_of[i] = nacc++;
        }
        if (in->op == KOP_ACC_UPDATE) {
            const acc_info *a = &acc[acc_of[in->a]];
            if (region[i] != 2 * a->phase + 1 || in->b < 0
                || k->insts[in->b].dtype != a->dt) {
                goto bad;
            }
        }
        if (in->op == KOP_ACC_RESULT) {
            const acc_info *a = &acc[acc_of[in->a]];
            int comp = (int)in->imm.i;
            if ((region[i] & 1) || region[i] <= 2 * a->phase + 1
                || comp < 0 || comp >= tc_acc_components(a->kind)
                || in->dtype != tc_acc_component_dtype(a->kind, a->dt,
                                                       comp)) {
                goto bad;
            }
        }
    }
    return nacc;
bad:
    snprintf(err, errlen, "tcjit cpu: %s: malformed reduction kernel",
             k->name);
    return -1;
}

static int plan_reuse(const tc_kernel *k, const int *region, int *sstore,
                      int *reload);

static int
emit_reduction_kernel(emitter *e, const tc_kernel *k, const tc_loop *l,
                      const char *name, char *err, size_t errlen)
{
    int n = k->ninsts + 1;
    int *acc_of = calloc((size_t)n, sizeof(int));
    int *region = calloc((size_t)n, sizeof(int));
    int *sstore = calloc((size_t)n, sizeof(int));
    int *reload = calloc((size_t)n, sizeof(int));
    acc_info *acc = calloc((size_t)n, sizeof(acc_info));
    int64_t *slot = calloc((size_t)n, sizeof(int64_t));
    R **val = calloc((size_t)n, sizeof(R *));
    gcc_jit_lvalue **elem = calloc((size_t)(k->nargs + 1), sizeof(*elem));
    gcc_jit_lvalue **relem = calloc((size_t)(k->nargs + 1),
                                    sizeof(*relem));
    R **row = calloc((size_t)(k->nargs + 1), sizeof(R *));
    R **cur = calloc((size_t)(k->nargs + 1), sizeof(R *));
    gcc_jit_lvalue **stage = calloc((size_t)(k->nargs + 1), sizeof(*stage));
    int rc = -1;
    if (!acc_of || !region || !acc || !slot || !val || !elem || !row || !cur
        || !sstore || !reload || !stage || !relem) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
        goto done;
    }
    tc_red_plan plan;
    if (tc_red_schedule(k, l->sizes[l->ndim], cpu_target, &plan) < 0) {
        snprintf(err, errlen, "tcjit cpu: %s: malformed reduction kernel",
                 k->name);
        goto done;
    }
    int nacc = check_reduction(k, &plan, acc_of, region, acc, err, errlen);
    tc_red_scratch_layout(k, &plan, slot);
    if (nacc < 0) {
        goto done;
    }
    if (plan_reuse(k, region, sstore, reload) < 0) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
        nacc = -1;
        goto done;
    }
    red_state s = {
        .e = e, .k = k, .l = l, .plan = plan, .slot = slot, .val = val, .elem = elem, .relem = relem,
        .row = row,
        .cur = cur, .acc_of = acc_of, .region = region, .sstore = sstore,
        .reload = reload, .stage = stage, .acc = acc, .nacc = nacc,
        .err = err,
        .errlen = errlen,
    };
    rc = 0;
    for (int q = 0; q < plan.npasses && rc == 0; q++) {
        const tc_red_pass *ps = &plan.passes[q];
        char fname[48];
        pass_name(fname, sizeof(fname), name, ps);
        switch (ps->kind) {
        case TC_RED_PASS_PARTIAL:
            rc = emit_red_part(&s, fname, ps->phase);
            break;
        case TC_RED_PASS_COMBINE:
            rc = emit_red_comb(&s, fname, ps->phase);
            break;
        case TC_RED_PASS_FINAL:
            rc = emit_red_fin(&s, fname);
            break;
        default:
            rc = emit_red_rows(&s, fname);
            break;
        }
    }
done:
    free(acc_of);
    free(slot);
    free(region);
    free(sstore);
    free(reload);
    free(stage);
    free(relem);
    free(acc);
    free(val);
    free(elem);
    free(row);
    free(cur);
    return rc;
}

/* ---- decomposition into the variants ----------------------------------- */

static void
variants_clear(tc_kernel *exact, tc_kernel *fast)
{
    free(exact->insts);
    free(fast->insts);
}

static int
copy_insts(const tc_kernel *k, tc_kernel *out)
{
    *out = *k;
    out->insts = malloc(sizeof(tc_kinst) * (size_t)(k->ninsts + 1));
    if (out->insts == NULL) {
        return -1;
    }
    memcpy(out->insts, k->insts, sizeof(tc_kinst) * (size_t)k->ninsts);
    return 0;
}

/* ---- reusing an output as scratch across phases ------------------------ *
 *
 * softmax's write pass recomputes exp(x - max), which the sum pass already
 * computed.  Eager stores it into the output during the sum pass and
 * rescales it in place; so do we: when body_q recomputes an expensive value
 * u that body_p (p < q) computed as u', and body_q stores into an output
 * argument o of u's dtype after computing u, body_p also stores u' into o
 * and body_q reloads u from o.  Only when o is written nowhere else, read
 * by nothing, shares its buffer with no other argument, and its elements
 * are distinct for distinct points (so every scratch element is private to
 * one point and overwritten by the real store). */

/* Instructions of a reduced body subtree at least this big are reused. */
#define TC_REUSE_MIN_COST 8

/* Instructions of body region `reg` that value i depends on (i included). */
static int
subtree_cost(const tc_kernel *k, const int *region, int reg, int i,
             char *seen)
{
    if (i < 0 || region[i] != reg || seen[i]) {
        return 0;
    }
    seen[i] = 1;
    const tc_kinst *in = &k->insts[i];
    return 1 + subtree_cost(k, region, reg, in->a, seen)
           + subtree_cost(k, region, reg, in->b, seen)
           + subtree_cost(k, region, reg, in->c, seen);
}

/* Can argument o serve as scratch for body region reg from inst u on? */
static int
scratch_ok(const tc_kernel *k, const int *region, int o, int reg, int u)
{
    const tc_karg *ao = &k->args[o];
    if (!ao->is_output || ao->dtype != k->insts[u].dtype) {
        return 0;
    }
    for (int a = 0; a < k->nargs; a++) {
        if (a != o && k->args[a].buffer == ao->buffer) {
            return 0;
        }
    }
    for (int d = 0; d < k->ndim + k->nred; d++) {
        if (k->sizes[d] > 1 && ao->strides[d] == 0) {
            return 0;
        }
    }
    int stored = 0;
    for (int i = 0; i < k->ninsts; i++) {
        const tc_kinst *in = &k->insts[i];
        if (in->arg != o || (in->op != KOP_LOAD && in->op != KOP_STORE)) {
            continue;
        }
        if (in->op == KOP_LOAD || region[i] != reg || i < u) {
            return 0;
        }
        stored = 1;
    }
    return stored;
}

/* Fills sstore[i] (store value i into that argument too) and reload[i]
 * (value i is a load of that argument); -1 elsewhere. */
static int
plan_reuse(const tc_kernel *k, const int *region, int *sstore, int *reload)
{
    int n = k->ninsts;
    for (int i = 0; i < n; i++) {
        sstore[i] = reload[i] = -1;
    }
    if (k->nphases < 2 || tc_kernel_writes_its_input(k)) {
        return 0;
    }
    int *vn = malloc(sizeof(int) * (size_t)(n + 1));
    char *seen = malloc((size_t)n + 1);
    if (vn == NULL || seen == NULL) {
        free(vn);
        free(seen);
        return -1;
    }
    tc_kernel_body_value_numbers(k, region, vn);
    for (int q = 1; q < k->nphases; q++) {
        int reg = 2 * q + 1;
        int best = -1, best_cost = TC_REUSE_MIN_COST - 1;
        for (int u = k->phases[q].begin; u < k->phases[q].end; u++) {
            int first = vn[u];
            if (first == u || !(region[first] & 1) || region[first] >= reg
                || k->insts[u].op == KOP_CONST) {
                continue;
            }
            memset(seen, 0, (size_t)n);
            int cost = subtree_cost(k, region, reg, u, seen);
            if (cost > best_cost) {
                best_cost = cost;
                best = u;
            }
        }
        if (best < 0) {
            continue;
        }
        for (int o = 0; o < k->nargs; o++) {
            if (scratch_ok(k, region, o, reg, best)) {
                sstore[vn[best]] = o;
                reload[best] = o;
                break;
            }
        }
    }
    free(vn);
    free(seen);
    return 0;
}

/* libm has them all, but a call per element stops the vectorizer: float32
 * math (except POW) is decomposed into vectorizable KIR; float64 math and
 * POW stay libm calls (accuracy first). */
const tc_math_target tc_jit_math_target = {
    "cpu",
    {[KOP_EXP] = TC_MATH_F64, [KOP_LOG] = TC_MATH_F64,
     [KOP_SIN] = TC_MATH_F64, [KOP_COS] = TC_MATH_F64,
     [KOP_TANH] = TC_MATH_F64, [KOP_ERF] = TC_MATH_F64,
     [KOP_POW] = TC_MATH_F32 | TC_MATH_F64}};

/* Does the target of this compile want k's softmax phases in one pass?
 * (Before the math is decomposed: the rewrite looks for KOP_EXP.)  Never
 * in a split kernel: its passes were planned from k (tc_loop_build). */
static int
online_wanted(const tc_kernel *k, const tc_loop *l)
{
    tc_red_plan p;
    return k->nphases > 1 && cpu_target->online && l->nchunks == 0
           && tc_red_schedule(k, l->sizes[l->ndim], cpu_target, &p) == 0
           && tc_red_wants_online(k, cpu_target, &p);
}

/* Fills exact (float32 transcendentals decomposed, full range) and, when
 * the kernel has float32 sin/cos, a fast variant with its flag. */
static int
make_variants(const tc_kernel *k, const tc_loop *l, tc_kernel *exact,
              tc_kernel *fast, kernel_variants *kv, int params)
{
    memset(exact, 0, sizeof(*exact));
    memset(fast, 0, sizeof(*fast));
    kv->exact = exact;
    kv->fast = NULL;
    kv->flag = -1;
    if (copy_insts(k, exact) < 0 || copy_insts(k, fast) < 0) {
        return -1;
    }
    if (params) {
        tc_kernel_number_params(exact);
        tc_kernel_number_params(fast);
    }
    /* after the numbering: the constants it adds are literals */
    if (online_wanted(k, l)
        && (tc_kernel_online_softmax(exact) < 0
            || tc_kernel_online_softmax(fast) < 0)) {
        return -1;
    }
    if (tc_kernel_lower_half_casts(exact) < 0
        || tc_kernel_lower_half_casts(fast) < 0
        || tc_kernel_decompose_math(exact, &tc_jit_math_target, NULL) < 0
        || tc_kernel_decompose_math(fast, &tc_jit_math_target, &kv->flag)
               < 0) {
        return -1;
    }
    /* Reduction kernels: no versioned blocks (a block cannot be redone
     * once accumulators saw it); their sin/cos take the exact path. */
    if (kv->flag >= 0 && !tc_kernel_writes_its_input(k) && k->nphases == 0) {
        kv->fast = fast;
    }
    return 0;
}

/* ---- context setup and compile ----------------------------------------- */

/* Kinds of kernels, compiled in separate contexts: pointwise kernels
 * must match eager bit for bit, reduction kernels cannot (their summation
 * order differs anyway) and get FMA contraction, which the float32 exp /
 * log polynomials of softmax & co. need to keep up with eager's SIMD
 * versions (Sleef uses FMA).  A plan with both pays one more as + ld run. */
enum { KIND_POINTWISE, KIND_REDUCTION, NKINDS };

static void
set_options(gcc_jit_context *c, int kind)
{
    char march[64];
    /* -O2 plus the vectorizer with its full cost model: the kernels are
     * single loops, where -O3's extra passes bought no speed here but cost
     * ~25% of the compile time (first calls must stay well under 100 ms). */
    gcc_jit_context_set_int_option(c, GCC_JIT_INT_OPTION_OPTIMIZATION_LEVEL,
                                   2);
    gcc_jit_context_add_command_line_option(c, "-ftree-vectorize");
    gcc_jit_context_add_command_line_option(c, "-fvect-cost-model=dynamic");
    /* The arguments are separate pointers that may alias (an in-place
     * update writes the buffer it reads), so GCC vectorizes a loop only
     * behind runtime overlap checks, one per pair of a store and another
     * access; past its default of 10 pairs it keeps the scalar loop.  An
     * Adam update (4 arrays read, 3 written) is 15 pairs: 5.9 ms scalar,
     * 2.6 ms vectorized for 4M elements on the 2-core machine (eager
     * 5.5-6.7).  Equal pointers pass the checks (same step, distance 0). */
    gcc_jit_context_add_command_line_option(
        c, "--param=vect-max-version-for-alias-checks=64");
#ifdef LIBGCCJIT_HAVE_gcc_jit_context_set_bool_print_errors_to_stderr
    gcc_jit_context_set_bool_print_errors_to_stderr(c, 0);
#endif
    gcc_jit_context_set_bool_allow_unreachable_blocks(c, 1);
    const char *m = tc_cpu_march();
    if (m != NULL) {
        snprintf(march, sizeof(march), "-march=%s", m);
        gcc_jit_context_add_command_line_option(c, march);
    }
    /* No FMA contraction anywhere: eager rounds every op.  Reduction
     * kernels contracted once (-ffp-contract=fast), and a fused
     * x * s - max(x * s) then kept the product's rounding error: a
     * nonzero residual at the row's maximum, exp of it inf for |x| > 7e8,
     * a log_softmax row of NaN (fuzz seed 76261).  errno and FP traps are
     * not observable here; ignoring them lets GCC vectorize
     * sqrt/floor/rint. */
    gcc_jit_context_add_command_line_option(c, "-ffp-contract=off");
    gcc_jit_context_add_command_line_option(c, "-fno-math-errno");
    gcc_jit_context_add_command_line_option(c, "-fno-trapping-math");
    if (kind == KIND_REDUCTION) {
        gcc_jit_context_add_command_line_option(c, "-fpeel-loops");
        /* GCC 12.2 keeps state between contexts that breaks the basic
         * block (SLP) vectorizer on AVX-512: from the second compile of a
         * process on, straight-line code such as a float32 == float64
         * comparison of a few elements fused with a reduction becomes an
         * unrecognizable V8DI -> V8QI truncation, an internal compiler
         * error, and libgccjit exits the process.  The loop vectorizer
         * does the work in these kernels; without SLP only their setup and
         * lane combining code changes. */
        gcc_jit_context_add_command_line_option(c, "-fno-tree-slp-vectorize");
    }
    /* Vectorized epilogues (a second, narrower copy of every loop) cost
     * ~20% of the compile time and buy little: tails are < 16 elements. */
    gcc_jit_context_add_command_line_option(c,
                                            "--param=vect-epilogues-nomask=0");
    /* Reduction lane loops run 8 to 32 iterations: completely peeling
     * them before the vectorizer (the default limit is 16) would turn the
     * lane arrays into scalars it cannot vectorize. */
    gcc_jit_context_add_command_line_option(
        c, "--param=max-completely-peel-times=4");
    gcc_jit_context_add_driver_option(c, "-lm");
    int oi = get_opt_info();
    if (oi == 1) {
        gcc_jit_context_add_command_line_option(c, "-fopt-info-vec-all");
    }
    if (oi == 2) {
        gcc_jit_context_set_bool_option(
            c, GCC_JIT_BOOL_OPTION_DUMP_GENERATED_CODE, 1);
    }
    if (oi == 4) {
        gcc_jit_context_set_bool_option(
            c, GCC_JIT_BOOL_OPTION_DUMP_INITIAL_GIMPLE, 1);
    }
    if (oi == 3) {
        /* vectorizer details in a kept /tmp/libgccjit-* directory */
        gcc_jit_context_set_bool_option(
            c, GCC_JIT_BOOL_OPTION_KEEP_INTERMEDIATES, 1);
        gcc_jit_context_add_command_line_option(c,
                                                "-fdump-tree-vect-details");
    }
}

static int
kernel_kind(const tc_kernel *k)
{
    return k->nphases > 0 ? KIND_REDUCTION : KIND_POINTWISE;
}

static void name_kernels(const tc_plan *plan, const int *idx, int n,
                         char *out, size_t len);
static int inject_failure(const tc_kernel *k);

/* Kernel k as function `name` (its variants made here). */
static int
emit_one(emitter *e, const tc_kernel *k, const tc_loop *l, const char *name,
         enum gcc_jit_function_kind kind, gcc_jit_function **out, char *err,
         size_t errlen)
{
    tc_kernel exact, fast;
    kernel_variants kv;
    int rc = make_variants(k, l, &exact, &fast, &kv, e->generic);
    if (rc < 0) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
    }
    else {
        rc = k->nphases > 0
                 ? emit_reduction_kernel(e, kv.exact, l, name, err, errlen)
                 : emit_kernel(e, &kv, l, name, kind, out, err, errlen);
    }
    variants_clear(&exact, &fast);
    return rc;
}

/* A pointwise kernel of independent parts (kir.h tc_kernel_parts: a
 * horizontally fused group, an optimizer step's parameters) as one
 * internal function per part and an exported `name` calling them in
 * turn over its range.  One loop over every member at once streams all
 * their arrays together: the same-shape members of a group sit at the
 * same offsets modulo the page, so their elements compete for the same
 * L1 sets (16 Adam updates of [256, 1024] on the 2-core machine: 70 ms
 * in one loop, 5.7 ms one member at a time).  Size-generic kernels keep
 * one loop (their parameter constants are numbered over the whole
 * kernel).  Returns 1 (emitted), 0 (not parted: emit k as it is), -1. */
static int
emit_parts(emitter *e, const tc_kernel *k, const tc_loop *l,
           const char *name, char *err, size_t errlen)
{
    if (k->nphases > 0 || e->generic) {
        return 0;
    }
    int *part = malloc(sizeof(int) * (size_t)(k->ninsts + 1));
    int np = part != NULL ? tc_kernel_parts(k, part) : -1;
    if (np <= 1) {
        free(part);
        if (np < 0) {
            snprintf(err, errlen, "tcjit cpu: out of memory");
        }
        return np < 0 ? -1 : 0;
    }
    gcc_jit_function **fns = calloc((size_t)np, sizeof(*fns));
    int rc = fns != NULL ? 0 : -1;
    for (int p = 0; p < np && rc == 0; p++) {
        tc_kernel kp;
        char pname[48];
        snprintf(pname, sizeof(pname), "%s_part%d", name, p);
        rc = tc_kernel_part(k, part, p, &kp);
        if (rc == 0) {
            rc = emit_one(e, &kp, l, pname, GCC_JIT_FUNCTION_INTERNAL,
                          &fns[p], err, errlen);
            free(kp.insts);
        }
    }
    if (rc == 0) {
        gcc_jit_param *params[3] = {
            gcc_jit_context_new_param(e->ctx, NULL, e->t_voidpp, "args"),
            gcc_jit_context_new_param(e->ctx, NULL, e->t_i64, "begin"),
            gcc_jit_context_new_param(e->ctx, NULL, e->t_i64, "end"),
        };
        gcc_jit_function *fn = gcc_jit_context_new_function(
            e->ctx, NULL, GCC_JIT_FUNCTION_EXPORTED, e->t_void, name, 3,
            params, 0);
        gcc_jit_block *b = gcc_jit_function_new_block(fn, "parts");
        R *args[3];
        for (int a = 0; a < 3; a++) {
            args[a] = gcc_jit_param_as_rvalue(params[a]);
        }
        for (int p = 0; p < np; p++) {
            gcc_jit_block_add_eval(b, NULL, gcc_jit_context_new_call(
                                                e->ctx, NULL, fns[p], 3,
                                                args));
        }
        gcc_jit_block_end_with_void_return(b, NULL);
    }
    else if (err[0] == '\0') {
        snprintf(err, errlen, "tcjit cpu: out of memory");
    }
    free(fns);
    free(part);
    return rc < 0 ? -1 : 1;
}

/* Emits kernels idx[0..n) of plan (their loop nests built, prepare). */
static int
emit_all(emitter *e, const tc_plan *plan, const tc_jit_code *code,
         const int *idx, int n, char *err, size_t errlen)
{
    for (int j = 0; j < n; j++) {
        int i = idx[j];
        const tc_kernel *k = &plan->kernels[i];
        e->generic = code->dims != NULL && code->dims[i] != NULL;
        e->gnd = code->loops[i].ndim + code->loops[i].nred;
        e->gnargs = k->nargs;
        e->gslots = tc_loop_dims(k, &code->loops[i], NULL);
        e->dimv = e->generic ? calloc((size_t)e->gslots, sizeof(*e->dimv))
                             : NULL;
        if (e->generic && e->dimv == NULL) {
            snprintf(err, errlen, "tcjit cpu: out of memory");
            return -1;
        }
        char name[32];
        snprintf(name, sizeof(name), "tc_k%d", i);
        int rc = emit_parts(e, k, &code->loops[i], name, err, errlen);
        if (rc == 0) {
            rc = emit_one(e, k, &code->loops[i], name,
                          GCC_JIT_FUNCTION_EXPORTED, NULL, err, errlen);
        }
        rc = rc < 0 ? -1 : 0;
        free(e->dimv);
        e->dimv = NULL;
        e->generic = 0;
        if (rc < 0) {
            return -1;
        }
        if (inject_failure(k)) {
            /* operands of mismatched types: libgccjit records an error */
            (void)gcc_jit_context_new_binary_op(
                e->ctx, NULL, GCC_JIT_BINARY_OP_PLUS, e->t_i64,
                iconst(e, e->t_i32, 1), iconst(e, e->t_i64, 1));
        }
        const char *gerr = gcc_jit_context_get_first_error(e->ctx);
        if (gerr != NULL) {
            char names[700];
            name_kernels(plan, &i, 1, names, sizeof(names));
            snprintf(err, errlen, "tcjit cpu: %s failed to compile: %s "
                     "(TCJIT_LOGS=output_code shows its source)", names,
                     gerr);
            return -1;
        }
    }
    return 0;
}

static void
gccjit_error(gcc_jit_context *c, const char *what, char *err, size_t errlen)
{
    const char *msg = gcc_jit_context_get_first_error(c);
    snprintf(err, errlen, "tcjit cpu: %s: %s", what,
             msg != NULL ? msg : "unknown libgccjit error");
}

/* A kernel's functions are found by name in what compiled it: a
 * gcc_jit_result, or a shared object from the on-disk cache. */
typedef void *(*sym_fn)(void *lib, const char *name);

static void *
result_sym(void *res, const char *name)
{
    return gcc_jit_result_get_code(res, name);
}

/* Looks up kernel i's functions in lib. */
static int
lookup_kernel(void *lib, sym_fn sym, const tc_plan *plan, tc_jit_code *code,
              int i)
{
    int same = tc_plan_first_same_kernel(plan, i);
    if (same != i) {
        code->fns[i] = code->fns[same];
        code->split[i] = code->split[same];
        return 0;
    }
    if (code->fns[i] != NULL) {
        return 0;   /* from the generic cache */
    }
    char name[48];
    snprintf(name, sizeof(name), "tc_k%d", i);
    const tc_loop *l = &code->loops[i];
    if (l->nchunks == 0) {
        code->fns[i] = (tc_kernel_fn)sym(lib, name);
        return code->fns[i] == NULL ? -1 : 0;
    }
    tc_split_fns *sp = &code->split[i];
    char base[32];
    snprintf(base, sizeof(base), "tc_k%d", i);
    for (int q = 0; q < l->npasses; q++) {
        const tc_red_pass *ps = &l->passes[q];
        pass_name(name, sizeof(name), base, ps);
        void *f = sym(lib, name);
        if (f == NULL) {
            return -1;
        }
        switch (ps->kind) {
        case TC_RED_PASS_PARTIAL:
            sp->part[ps->phase] = (tc_part_fn)f;
            break;
        case TC_RED_PASS_COMBINE:
            sp->comb[ps->phase] = (tc_comb_fn)f;
            break;
        case TC_RED_PASS_FINAL:
            sp->fin = (tc_fin_fn)f;
            break;
        default:
            return -1;
        }
    }
    return 0;
}

/* "tc_k3 (%5 = mul(%1, %2); ...)" for each kernel of idx: what a failed
 * compile names (TCJIT_LOGS=output_code shows the kernels' source). */
static void
name_kernels(const tc_plan *plan, const int *idx, int n, char *out,
             size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (int j = 0; j < n && used + 1 < len; j++) {
        const tc_kernel *k = &plan->kernels[idx[j]];
        int w = snprintf(out + used, len - used, "%skernel tc_k%d (%.300s)",
                         j ? ", " : "", idx[j],
                         k->desc != NULL ? k->desc : "?");
        if (w < 0) {
            break;
        }
        used += (size_t)w < len - used ? (size_t)w : len - used - 1;
    }
}

/* Test hook (tests/test_cache.py): TCJIT_TEST_COMPILE_FAILURE=<text>
 * makes libgccjit reject every kernel whose description (its graph
 * nodes) contains text. */
static int
inject_failure(const tc_kernel *k)
{
    const char *v = getenv("TCJIT_TEST_COMPILE_FAILURE");
    return v != NULL && v[0] != '\0' && k->desc != NULL
           && strstr(k->desc, v) != NULL;
}

/* Dynamic shapes: every kernel not split into chunks is made
 * size-generic (its block of sizes and strides computed now, for this
 * plan's sizes); those the generic cache already has are taken from it. */
static int
dynamic_prepare(const tc_plan *plan, tc_jit_code *code, char *err,
                size_t errlen)
{
    int n = plan->nkernels;
    code->dims = calloc((size_t)(n > 0 ? n : 1), sizeof(int64_t *));
    if (code->dims == NULL) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const tc_kernel *k = &plan->kernels[i];
        tc_loop *l = &code->loops[i];
        if (tc_loop_build(k, l) < 0) {
            snprintf(err, errlen, "tcjit cpu: %s: cannot build the loop "
                     "nest", k->name);
            return -1;
        }
        if (l->nchunks > 0) {
            continue;   /* chunk scratch depends on the sizes: constants */
        }
        int64_t nd = tc_loop_dims(k, l, NULL);
        code->dims[i] = malloc(sizeof(int64_t) * (size_t)(nd + 1));
        if (code->dims[i] == NULL) {
            snprintf(err, errlen, "tcjit cpu: out of memory");
            return -1;
        }
        tc_loop_dims(k, l, code->dims[i]);
        tc_holder *h = NULL;
        code->fns[i] = tc_generic_find(k, l, &h);
        if (h != NULL) {
            code->holders[code->nholders++] = h;
        }
    }
    return 0;
}

/* ---- compiling a plan: groups, the on-disk cache, parallel workers ---- */

/* A group: kernels of one kind compiled in one gccjit context, one
 * shared object, one cache entry (make_groups).  With parallel compile
 * (compile_workers > 1) the groups that miss the cache are compiled
 * concurrently. */
typedef struct {
    int kind;
    int *idx;                    /* kernels compiled here */
    int n;
    int cached;                  /* looked up in / stored into the cache */
    char key[TC_KEY_CHARS + 1];
    void *lib;                   /* the loaded shared object, or */
    gcc_jit_result *res;         /* an in-memory result (serial, no cache) */
    char path[64];               /* the worker's shared object */
    char err[1024];
} group;

static int compile_workers = 0;  /* 0: online CPUs (at most 8) when
                                    there are 4 or more, else 1 */
static double compile_seconds;   /* in compile_locked, under compile_mu */

void
tc_jit_forget_shared(void)
{
    pthread_mutex_lock(&compile_mu);
    tc_shared_forget();
    pthread_mutex_unlock(&compile_mu);
}

double
tc_jit_compile_seconds(void)
{
    pthread_mutex_lock(&compile_mu);
    double s = compile_seconds;
    pthread_mutex_unlock(&compile_mu);
    return s;
}
static int compile_threads;      /* measurement: threads, not processes */

void
tc_jit_set_compile_workers(int n)
{
    compile_workers = n;
}

static int
workers(void)
{
    int n = compile_workers;
    if (n == 0) {
        /* a fork of a process with torch loaded costs ~20-40 ms; with
         * two cores shared by other work it bought nothing (docs/cache.md) */
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c < 4 ? 1 : c > 8 ? 8 : (int)c;
    }
    const char *t = getenv("TCJIT_COMPILE_THREADS");
    compile_threads = t != NULL && t[0] == '1';
    return n;
}

/* Checks every kernel and builds its loop nest (cache hits need them). */
static int
prepare(const tc_plan *plan, tc_jit_code *code, char *err, size_t errlen)
{
    for (int i = 0; i < plan->nkernels; i++) {
        const tc_kernel *k = &plan->kernels[i];
        if (k->nphases < 0 || k->nphases > TC_KIR_MAX_PHASES
            || (k->nphases == 0 && k->nred > 0)) {
            snprintf(err, errlen, "tcjit cpu: %s: bad reduction structure",
                     k->name);
            return -1;
        }
        if (code->loops[i].strides == NULL
            && tc_loop_build(k, &code->loops[i]) < 0) {
            snprintf(err, errlen, "tcjit cpu: %s: cannot build the loop "
                     "nest", k->name);
            return -1;
        }
    }
    return 0;
}

/* A context with the group's kernels; NULL with g->err on failure. */
static gcc_jit_context *
build_context(const tc_plan *plan, const tc_jit_code *code, group *g)
{
    gcc_jit_context *c = gcc_jit_context_acquire();
    if (c == NULL) {
        snprintf(g->err, sizeof(g->err),
                 "tcjit cpu: gcc_jit_context_acquire failed");
        return NULL;
    }
    set_options(c, g->kind);
    emitter e = {.ctx = c};
    init_types(&e);
    int rc = emit_all(&e, plan, code, g->idx, g->n, g->err, sizeof(g->err));
    if (rc == 0 && gcc_jit_context_get_first_error(c) != NULL) {
        gccjit_error(c, "building kernels", g->err, sizeof(g->err));
        rc = -1;
    }
    if (rc < 0) {
        gcc_jit_context_release(c);
        return NULL;
    }
    return c;
}

static void
compile_failed(const tc_plan *plan, group *g, const char *msg)
{
    char names[700], m[512];
    snprintf(m, sizeof(m), "%s", msg != NULL ? msg : "unknown libgccjit error");
    name_kernels(plan, g->idx, g->n, names, sizeof(names));
    snprintf(g->err, sizeof(g->err), "tcjit cpu: compile failed for %s: %s "
             "(TCJIT_LOGS=output_code shows the source)", names, m);
}

/* Compiles the group to the shared object g->path: 0, or -1 with g->err.
 * No Python, no tcjit state written: runs in workers. */
static int
compile_to_path(const tc_plan *plan, const tc_jit_code *code, group *g)
{
    gcc_jit_context *c = build_context(plan, code, g);
    if (c == NULL) {
        return -1;
    }
    gcc_jit_context_compile_to_file(c, GCC_JIT_OUTPUT_KIND_DYNAMIC_LIBRARY,
                                    g->path);
    int rc = 0;
    if (gcc_jit_context_get_first_error(c) != NULL) {
        compile_failed(plan, g, gcc_jit_context_get_first_error(c));
        rc = -1;
    }
    gcc_jit_context_release(c);
    return rc;
}

/* In this process: to a shared object stored in the cache and loaded,
 * or without the cache straight to memory. */
static int
compile_here(const tc_plan *plan, const tc_jit_code *code, group *g)
{
    if (g->cached) {
        return compile_to_path(plan, code, g);
    }
    gcc_jit_context *c = build_context(plan, code, g);
    if (c == NULL) {
        return -1;
    }
    g->res = gcc_jit_context_compile(c);
    if (g->res == NULL) {
        compile_failed(plan, g, gcc_jit_context_get_first_error(c));
    }
    gcc_jit_context_release(c);
    return g->res != NULL ? 0 : -1;
}

typedef struct {
    const tc_plan *plan;
    const tc_jit_code *code;
    group *g;
    int rc;
} thread_job;

static void *
thread_main(void *p)
{
    thread_job *j = p;
    j->rc = compile_to_path(j->plan, j->code, j->g);
    return NULL;
}

/* Compiles groups gs[0..n) concurrently to their paths.  libgccjit holds
 * a global mutex for the whole of gcc_jit_context_compile*, so threads
 * only overlap the building of contexts; forked workers overlap
 * everything (bench/cache.py measures both; docs/cache.md).  A worker
 * only builds a context and runs gcc, then _exits: it touches no Python
 * and no lock another thread may hold (the compile lock is ours). */
static void
compile_parallel(const tc_plan *plan, const tc_jit_code *code, group **gs,
                 int n)
{
    if (compile_threads) {
        pthread_t th[n];
        thread_job jobs[n];
        for (int j = 0; j < n; j++) {
            jobs[j] = (thread_job){plan, code, gs[j], -1};
            if (pthread_create(&th[j], NULL, thread_main, &jobs[j]) != 0) {
                thread_main(&jobs[j]);
                th[j] = 0;
            }
        }
        for (int j = 0; j < n; j++) {
            if (th[j] != 0) {
                pthread_join(th[j], NULL);
            }
        }
        return;
    }
    /* the first group is compiled here, meanwhile: one fork less */
    pid_t pids[n];
    pids[0] = 0;
    for (int j = 1; j < n; j++) {
        pids[j] = fork();
        if (pids[j] == 0) {
            group *g = gs[j];
            int rc = compile_to_path(plan, code, g);
            if (rc < 0) {
                char ep[sizeof(g->path) + 8];
                snprintf(ep, sizeof(ep), "%s.err", g->path);
                FILE *f = fopen(ep, "w");
                if (f != NULL) {
                    fputs(g->err, f);
                    fclose(f);
                }
            }
            _exit(rc < 0 ? 1 : 0);
        }
        if (pids[j] < 0) {
            (void)compile_to_path(plan, code, gs[j]);  /* no fork: here */
        }
    }
    (void)compile_to_path(plan, code, gs[0]);
    for (int j = 1; j < n; j++) {
        if (pids[j] <= 0) {
            continue;
        }
        int status = 0;
        while (waitpid(pids[j], &status, 0) < 0 && errno == EINTR) {
        }
        group *g = gs[j];
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            continue;
        }
        char ep[sizeof(g->path) + 8];
        snprintf(ep, sizeof(ep), "%s.err", g->path);
        size_t len = 0;
        char *msg = tc_read_file(ep, &len);
        if (msg != NULL && len > 0) {
            snprintf(g->err, sizeof(g->err), "%.*s", (int)len, msg);
        }
        else {
            compile_failed(plan, g, WIFSIGNALED(status)
                                        ? "compile worker killed by a signal"
                                        : "compile worker failed");
        }
        free(msg);
        (void)unlink(ep);
    }
}

/* Deals the kernels to compile into groups: per kind, one group per
 * GROUP_KERNELS kernels.  The grouping depends on the plan only, never on
 * the worker count, so cache entries (one per group) are the same on
 * every machine; workers only decide how many groups compile at once. */
#define GROUP_KERNELS 8

static int
make_groups(const tc_plan *plan, const tc_jit_code *code, group *gs,
            int *idxbuf)
{
    int fresh[NKINDS] = {0}, ng = 0, used = 0;
    for (int i = 0; i < plan->nkernels; i++) {
        if (tc_plan_first_same_kernel(plan, i) == i && code->fns[i] == NULL) {
            fresh[kernel_kind(&plan->kernels[i])]++;
        }
    }
    for (int kind = 0; kind < NKINDS; kind++) {
        if (fresh[kind] == 0) {
            continue;
        }
        int parts = (fresh[kind] + GROUP_KERNELS - 1) / GROUP_KERNELS;
        for (int q = 0; q < parts; q++) {
            group *g = &gs[ng++];
            g->kind = kind;
            g->idx = idxbuf + used;
            int r = 0;
            for (int i = 0; i < plan->nkernels; i++) {
                if (tc_plan_first_same_kernel(plan, i) == i
                    && code->fns[i] == NULL
                    && kernel_kind(&plan->kernels[i]) == kind
                    && r++ % parts == q) {
                    g->idx[g->n++] = i;
                }
            }
            used += g->n;
        }
    }
    return ng;
}

/* Whether kernel i of plan is shared with other plans (generic.c): one
 * function of its own (not split into chunk passes), not made to fail. */
static int
shareable(const tc_plan *plan, const tc_jit_code *code, int i)
{
    return code->loops[i].nchunks == 0
           && !inject_failure(&plan->kernels[i]);
}

/* Kernels an earlier plan compiled with the same code: taken from there
 * (size-generic ones: dynamic_prepare). */
static void
find_shared(const tc_plan *plan, tc_jit_code *code)
{
    for (int i = 0; i < plan->nkernels; i++) {
        if (code->fns[i] == NULL && tc_plan_first_same_kernel(plan, i) == i
            && (code->dims == NULL || code->dims[i] == NULL)
            && shareable(plan, code, i)) {
            tc_holder *h = NULL;
            code->fns[i] = tc_shared_find(&plan->kernels[i],
                                          cpu_target_variant, &h);
            if (h != NULL) {
                code->holders[code->nholders++] = h;
            }
        }
    }
}

/* Looks up the group's kernels in what compiled or loaded them (held by
 * h, which the code has a reference to). */
static int
lookup_group(const tc_plan *plan, tc_jit_code *code, group *g, tc_holder *h,
             char *err, size_t errlen)
{
    void *holder = g->lib != NULL ? g->lib : (void *)g->res;
    sym_fn sym = g->lib != NULL ? tc_kcache_sym : result_sym;
    int njoin = 0;
    char join[g->n + 1];
    for (int j = 0; j < g->n; j++) {
        int i = g->idx[j];
        join[j] = shareable(plan, code, i);
        njoin += join[j];
        if (lookup_kernel(holder, sym, plan, code, i) < 0) {
            snprintf(err, errlen, "tcjit cpu: kernel %d missing after "
                     "compile", i);
            return -1;
        }
    }
    /* kernels compiled now join the shared records (generic.c), each
     * with a reference to h; out of memory: simply not shared */
    for (int j = 0; njoin > 0 && j < g->n; j++) {
        int i = g->idx[j];
        if (!join[j]) {
            continue;
        }
        if (code->dims != NULL && code->dims[i] != NULL) {
            (void)tc_generic_add(&plan->kernels[i], &code->loops[i],
                                 code->fns[i], h);
        }
        else {
            (void)tc_shared_add(&plan->kernels[i], &code->loops[i],
                                cpu_target_variant, code->fns[i], h);
        }
    }
    return 0;
}

static int
compile_locked(const tc_plan *plan, tc_jit_code *code, char *err,
               size_t errlen)
{
    if (plan->dynamic && dynamic_prepare(plan, code, err, errlen) < 0) {
        return -1;
    }
    if (prepare(plan, code, err, errlen) < 0) {
        return -1;
    }
    find_shared(plan, code);
    int n = plan->nkernels, nw = workers();
    int idxbuf[n + 1];
    group *gs = calloc((size_t)(n + NKINDS), sizeof(group));
    if (gs == NULL) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
        return -1;
    }
    int ng = make_groups(plan, code, gs, idxbuf);
    char dir[] = "/tmp/tcjit-so-XXXXXX";
    int have_dir = 0, rc = 0, nmiss = 0;
    group *miss[ng + 1];
    int on = tc_diskcache_on() && get_opt_info() == 0;
    for (int q = 0; q < ng; q++) {
        group *g = &gs[q];
        int inject = 0;
        for (int j = 0; j < g->n; j++) {
            inject |= inject_failure(&plan->kernels[g->idx[j]]);
        }
        g->cached = on && !inject;
        if (g->cached) {
            tc_kcache_key(plan, code, g->idx, g->n, g->kind, cpu_target_variant,
                          g->key);
            g->lib = tc_kcache_load(g->key, g->err, sizeof(g->err));
            g->err[0] = '\0';   /* a failed load was logged: compile */
            tc_diskcache_count(g->lib != NULL, g->n);
            tc_diskcache_log("%s cpu-%s: %d kernel(s)",
                             g->lib ? "hit" : "miss", g->key, g->n);
        }
        code->ncompiled += g->n;
        if (g->lib != NULL) {
            continue;
        }
        /* several misses go to workers, through shared objects on disk */
        if (g->cached || (nw > 1 && ng > 1)) {
            if (!have_dir && mkdtemp(dir) == NULL) {
                snprintf(err, errlen, "tcjit cpu: no temporary directory");
                rc = -1;
                break;
            }
            have_dir = 1;
            g->cached = 1 + (g->cached != 0);   /* 1: file only, 2: store */
            snprintf(g->path, sizeof(g->path), "%s/g%d.so", dir, q);
        }
        miss[nmiss++] = g;
    }
    int par = rc == 0 && nw > 1 && nmiss > 1;
    for (int q = 0; par && q < nmiss; q += nw) {
        compile_parallel(plan, code, miss + q,
                         nmiss - q < nw ? nmiss - q : nw);
    }
    for (int q = 0; rc == 0 && q < nmiss; q++) {
        group *g = miss[q];
        if (g->err[0] != '\0' || (!par && compile_here(plan, code, g) < 0)) {
            snprintf(err, errlen, "%s", g->err);
            rc = -1;
            break;
        }
        if (g->path[0] != '\0') {
            g->lib = tc_kcache_install(g->cached == 2 ? g->key : NULL,
                                       g->path, g->err, sizeof(g->err));
            if (g->lib == NULL) {
                snprintf(err, errlen, "tcjit cpu: %s", g->err);
                rc = -1;
            }
        }
    }
    for (int q = 0; q < ng; q++) {
        group *g = &gs[q];
        tc_holder *h = NULL;
        if (g->lib != NULL || g->res != NULL) {
            h = tc_holder_new(g->lib ? g->lib : (void *)g->res,
                              g->lib != NULL);
            if (h == NULL) {
                if (g->lib != NULL) {
                    tc_kcache_close(g->lib);
                }
                else {
                    gcc_jit_result_release(g->res);
                }
                snprintf(err, errlen, "tcjit cpu: out of memory");
                rc = -1;
            }
            else {
                code->holders[code->nholders++] = h;
            }
        }
        if (rc == 0 && lookup_group(plan, code, g, h, err, errlen) < 0) {
            rc = -1;
        }
        if (g->path[0] != '\0') {
            (void)unlink(gs[q].path);
        }
    }
    if (have_dir) {
        (void)rmdir(dir);
    }
    for (int i = 0; rc == 0 && i < n; i++) {
        if (tc_plan_first_same_kernel(plan, i) != i) {
            (void)lookup_kernel(NULL, NULL, plan, code, i);   /* a copy */
        }
    }
    free(gs);
    return rc;
}

void
tc_jit_code_free(tc_jit_code *code)
{
    if (code == NULL) {
        return;
    }
    for (int j = 0; j < code->nholders; j++) {
        tc_holder_unref(code->holders[j]);
    }
    free(code->holders);
    for (int i = 0; code->loops != NULL && i < code->nkernels; i++) {
        tc_loop_clear(&code->loops[i]);
    }
    for (int i = 0; code->dims != NULL && i < code->nkernels; i++) {
        free(code->dims[i]);
    }
    free(code->dims);
    free(code->grain);
    free(code->loops);
    free(code->fns);
    free(code->split);
    free(code);
}

tc_jit_code *
tc_jit_code_compile(const tc_plan *plan, int variant, char *err,
                    size_t errlen)
{
    tc_jit_code *code = calloc(1, sizeof(*code));
    if (code == NULL) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
        return NULL;
    }
    int n = plan->nkernels;
    code->nkernels = n;
    code->fns = calloc((size_t)(n > 0 ? n : 1), sizeof(tc_kernel_fn));
    code->loops = calloc((size_t)(n > 0 ? n : 1), sizeof(tc_loop));
    code->split = calloc((size_t)(n > 0 ? n : 1), sizeof(tc_split_fns));
    /* one per group (make_groups: at most n + NKINDS), one per kernel
     * shared with an earlier plan */
    code->holders = calloc((size_t)(2 * n + NKINDS), sizeof(tc_holder *));
    if (code->fns == NULL || code->loops == NULL || code->split == NULL
        || code->holders == NULL) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
        tc_jit_code_free(code);
        return NULL;
    }
    if (n == 0) {
        return code;  /* nothing to compute: skip gcc entirely */
    }
    /* libgccjit keeps global state: one compile at a time. */
    pthread_mutex_lock(&compile_mu);
    tc_red_target target = cpu_variant(variant);
    cpu_target = &target;
    cpu_target_variant = variant;    /* part of the cache key */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = compile_locked(plan, code, err, errlen);
    for (int i = 0; rc == 0 && i < n; i++) {
        /* here, not where the kernel is rewritten: that may be a forked
         * compile worker */
        const tc_kernel *k = &plan->kernels[i];
        if (online_wanted(k, &code->loops[i])
            && tc_kernel_online_applies(k)) {
            tc_kernel_online_note();
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    compile_seconds += (double)(t1.tv_sec - t0.tv_sec)
                       + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    cpu_target = &cpu_red_target;
    cpu_target_variant = 0;
    pthread_mutex_unlock(&compile_mu);
    if (rc < 0) {
        tc_jit_code_free(code);
        return NULL;
    }
    return code;
}

/* ---- running a compiled kernel ------------------------------------------ */

int64_t
tc_jit_code_work(const tc_jit_code *code, int i)
{
    const tc_loop *l = &code->loops[i];
    int64_t w = l->sizes[0] * tc_loop_inner_numel(l);
    if (l->nphases > 0) {
        w *= (l->red_numel > 0 ? l->red_numel : 1) * l->nphases;
    }
    return w;
}

typedef struct {
    tc_kernel_fn fn;
    void **args;
} rows_task;

static void
run_rows(void *p, int64_t b, int64_t e)
{
    rows_task *t = p;
    t->fn(t->args, b, e);
}

typedef struct {
    tc_part_fn fn;
    void **args;
    int64_t *state;
    int64_t rows, n0;
} chunk_task;

static void
run_chunks_task(void *p, int64_t b, int64_t e)
{
    chunk_task *t = p;
    for (int64_t c = b; c < e; c++) {
        int64_t rb = c * t->rows;
        int64_t re = rb + t->rows < t->n0 ? rb + t->rows : t->n0;
        t->fn(t->args, rb, re, t->state, c);
    }
}

int
tc_jit_code_run(const tc_jit_code *code, int i, void **args,
                int64_t threshold)
{
    const tc_loop *l = &code->loops[i];
    int64_t outer = l->sizes[0], inner = tc_loop_inner_numel(l);
    if (outer == 0 || inner == 0) {
        return 0;
    }
    int64_t work = tc_jit_code_work(code, i);
    int par = work >= threshold && tc_threadpool_get_threads() >= 2
              && (code->grain == NULL || code->grain[i] >= 0);
    if (l->nchunks > 0) {
        /* chunk boundaries are fixed by the shape: the same partials and
         * the same combine order however many threads run them */
        const tc_split_fns *sp = &code->split[i];
        size_t n = (size_t)l->scratch_slots;
        int64_t *state = calloc(n > 0 ? n : 1, sizeof(int64_t));
        if (state == NULL) {
            return -1;
        }
        for (int q = 0; q < l->npasses; q++) {
            const tc_red_pass *ps = &l->passes[q];
            if (ps->kind == TC_RED_PASS_PARTIAL) {
                chunk_task t = {sp->part[ps->phase], args, state,
                                l->chunk_rows, l->sizes[l->ndim]};
                if (par) {
                    tc_threadpool_parallel_for(l->nchunks, 1,
                                               run_chunks_task, &t);
                }
                else {
                    run_chunks_task(&t, 0, l->nchunks);
                }
            }
            else if (ps->kind == TC_RED_PASS_COMBINE) {
                sp->comb[ps->phase](state, l->nchunks);
            }
            else {
                sp->fin(args, state);
            }
        }
        free(state);
        return 0;
    }
    if (outer < 2 || !par) {
        code->fns[i](args, 0, outer);
        return 0;
    }
    /* Chunks of at least ~16K element-steps keep the pool overhead small
     * (max-autotune may have timed another size: code->grain). */
    int64_t steps = code->grain != NULL && code->grain[i] > 0
                    ? code->grain[i] : 16384;
    int64_t per = work / outer;
    int64_t grain = (steps + per - 1) / per;
    rows_task t = {code->fns[i], args};
    tc_threadpool_parallel_for(outer, grain, run_rows, &t);
    return 0;
}
