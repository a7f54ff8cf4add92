/* gccjit_emit.c - kernel IR -> machine code through libgccjit.
 *
 * All kernels of a plan go into one gccjit context, so one compile pays for
 * one assembler + linker run.  Kernel i becomes
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
 */
#include "jit_internal.h"

#include <libgccjit.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef gcc_jit_rvalue R;
typedef gcc_jit_type T;

static pthread_mutex_t compile_mu = PTHREAD_MUTEX_INITIALIZER;
static int opt_info = 0;

void
tc_jit_set_opt_info(int on)
{
    opt_info = on;
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

/* Can dim d (outer) and d + 1 (inner) be walked as one dimension? */
static int
mergeable(const tc_loop *l, int d)
{
    for (int a = 0; a < l->nargs; a++) {
        if (l->strides[a][d] != l->strides[a][d + 1] * l->sizes[d + 1]) {
            return 0;
        }
    }
    return 1;
}

static void
remove_dim(tc_loop *l, int d)
{
    for (int k = d; k + 1 < l->ndim; k++) {
        l->sizes[k] = l->sizes[k + 1];
        for (int a = 0; a < l->nargs; a++) {
            l->strides[a][k] = l->strides[a][k + 1];
        }
    }
    l->ndim--;
}

int
tc_loop_build(const tc_kernel *k, tc_loop *l)
{
    memset(l, 0, sizeof(*l));
    l->nargs = k->nargs;
    l->strides = calloc((size_t)(k->nargs > 0 ? k->nargs : 1),
                        sizeof(*l->strides));
    if (l->strides == NULL) {
        return -1;
    }
    l->ndim = k->ndim;
    for (int d = 0; d < k->ndim; d++) {
        l->sizes[d] = k->sizes[d];
        for (int a = 0; a < k->nargs; a++) {
            l->strides[a][d] = k->args[a].strides[d];
        }
    }
    /* Size-1 dims never move a pointer; a size-0 dim empties everything,
     * and the runtime skips empty kernels, so keep the nest as is then. */
    int empty = 0;
    for (int d = 0; d < l->ndim; d++) {
        empty |= l->sizes[d] == 0;
    }
    for (int d = l->ndim - 1; d >= 0 && !empty; d--) {
        if (l->sizes[d] == 1) {
            remove_dim(l, d);
        }
    }
    for (int d = l->ndim - 2; d >= 0 && !empty; d--) {
        if (mergeable(l, d)) {
            l->sizes[d] *= l->sizes[d + 1];
            for (int a = 0; a < l->nargs; a++) {
                l->strides[a][d] = l->strides[a][d + 1];
            }
            remove_dim(l, d + 1);
        }
    }
    if (l->ndim == 0) {
        l->ndim = 1;
        l->sizes[0] = 1;
        for (int a = 0; a < l->nargs; a++) {
            l->strides[a][0] = 0;
        }
    }
    return 0;
}

/* ---- types and small expression helpers -------------------------------- */

typedef struct {
    gcc_jit_context *ctx;
    T *vt[TC_NDTYPES];      /* value and storage type (bool: uint8 0/1) */
    T *ut[TC_NDTYPES];      /* unsigned type of the same width */
    T *t_bool, *t_i32, *t_i64, *t_void, *t_voidp, *t_voidpp;
    gcc_jit_function *ipow[TC_NDTYPES];
} emitter;

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

/* cond ? a : b without a branch: cond is a uint8 0/1; mask = -(U)cond. */
static R *
select_bits(emitter *e, tc_dtype dt, R *cond, R *a, R *b)
{
    T *u = e->ut[dt];
    R *m = un(e, GCC_JIT_UNARY_OP_MINUS, u, cast(e, cond, u));
    R *nm = un(e, GCC_JIT_UNARY_OP_BITWISE_NEGATE, u, m);
    R *x = bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, u, to_bits(e, dt, a), m);
    R *y = bin(e, GCC_JIT_BINARY_OP_BITWISE_AND, u, to_bits(e, dt, b), nm);
    return from_bits(e, dt, bin(e, GCC_JIT_BINARY_OP_BITWISE_OR, u, x, y));
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
} body_state;

static R *
emit_const(emitter *e, const tc_kinst *in)
{
    T *t = e->vt[in->dtype];
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
emit_cast(emitter *e, R *a, tc_dtype from, tc_dtype to)
{
    if (from == to) {
        return a;
    }
    if (to == TC_BOOL) {
        return cmp(e, GCC_JIT_COMPARISON_NE, a,
                   cast(e, iconst(e, e->t_i32, 0), e->vt[from]));
    }
    if (is_float(from) && !is_float(to) && dtype_bits(to) < 32) {
        /* float -> small int: truncate to int32 first, then wrap, which
         * is what x86 and eager do for out-of-range values. */
        a = cast(e, a, e->t_i32);
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
    if ((in->op == KOP_LOAD || in->op == KOP_STORE)
        && (in->arg < 0 || in->arg >= k->nargs)) {
        snprintf(err, errlen, "tcjit cpu: %s: bad argument slot at %d",
                 k->name, i);
        return -1;
    }
    if ((unsigned)in->dtype >= TC_NDTYPES || (unsigned)in->op >= KOP_COUNT) {
        snprintf(err, errlen, "tcjit cpu: %s: bad instruction %d", k->name,
                 i);
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
    R **base;                /* per argument, pointer at the inner loop */
    char *err;
    size_t errlen;
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
    body_state s = {ls->e, k, ls->val, ls->elem, prefix};
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
        gcc_jit_lvalue *slow_elem[ls->kv->exact->nargs + 1];
        ls->elem = slow_elem;
        inner_elements(ls, ls->loop, lv(is), ls->base);
        rc = emit_plain_inner(ls, slow, is, lv(ib), lv(ie), next);
        ls->elem = fast_elem;
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
                                   iconst(e, e->t_i64, st));
        char name[24];
        snprintf(name, sizeof(name), "p%d_%d", a, d);
        gcc_jit_lvalue *q = gcc_jit_function_new_local(
            ls->fn, NULL, gcc_jit_rvalue_get_type(base[a]), name);
        gcc_jit_block_add_assignment(blk, NULL, q, ptr_offset(e, base[a],
                                                             idx));
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
                                 iconst(e, e->t_i64, st));
        ls->elem[a] = gcc_jit_context_new_array_access(e->ctx, NULL, base[a],
                                                       idx);
    }
}

static void
load_arg_pointers(loop_state *ls, const tc_kernel *k, R *args,
                  gcc_jit_block *entry, R **base)
{
    emitter *e = ls->e;
    for (int a = 0; a < k->nargs; a++) {
        T *pt = gcc_jit_type_get_pointer(e->vt[k->args[a].dtype]);
        char name[16];
        snprintf(name, sizeof(name), "p%d", a);
        gcc_jit_lvalue *p = gcc_jit_function_new_local(ls->fn, NULL, pt,
                                                       name);
        R *slot = lv(gcc_jit_context_new_array_access(
            e->ctx, NULL, args, iconst(e, e->t_i64, a)));
        gcc_jit_block_add_assignment(entry, NULL, p, cast(e, slot, pt));
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
                       : iconst(e, e->t_i64, l->sizes[d]);
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

static int
emit_kernel(emitter *e, const kernel_variants *kv, const tc_loop *l,
            const char *fname, char *err, size_t errlen)
{
    gcc_jit_context *c = e->ctx;
    const tc_kernel *k = kv->exact;
    gcc_jit_param *params[3] = {
        gcc_jit_context_new_param(c, NULL, e->t_voidpp, "args"),
        gcc_jit_context_new_param(c, NULL, e->t_i64, "begin"),
        gcc_jit_context_new_param(c, NULL, e->t_i64, "end"),
    };
    gcc_jit_function *fn = gcc_jit_context_new_function(
        c, NULL, GCC_JIT_FUNCTION_EXPORTED, e->t_void, fname, 3, params, 0);
    int nval = k->ninsts;
    if (kv->fast != NULL && kv->fast->ninsts > nval) {
        nval = kv->fast->ninsts;
    }
    R **base = calloc((size_t)(k->nargs + 1), sizeof(R *));
    gcc_jit_lvalue **elem = calloc((size_t)(k->nargs + 1), sizeof(*elem));
    R **val = calloc((size_t)(nval + 1), sizeof(R *));
    int rc = -1;
    if (base == NULL || elem == NULL || val == NULL) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
    }
    else {
        loop_state ls = {e, fn, kv, elem, val, l, base, err, errlen};
        gcc_jit_block *entry = gcc_jit_function_new_block(fn, "entry");
        load_arg_pointers(&ls, k, gcc_jit_param_as_rvalue(params[0]), entry,
                          base);
        rc = emit_nest(&ls, l, params, entry, base);
    }
    free(base);
    free(elem);
    free(val);
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

/* Does the kernel write a buffer it also reads?  Then a block cannot be
 * recomputed after the fast pass overwrote it. */
static int
writes_its_input(const tc_kernel *k)
{
    for (int a = 0; a < k->nargs; a++) {
        for (int b = 0; b < k->nargs; b++) {
            if (k->args[a].is_output && !k->args[b].is_output
                && k->args[a].buffer == k->args[b].buffer) {
                return 1;
            }
        }
    }
    return 0;
}

/* Fills exact (float32 transcendentals decomposed, full range) and, when
 * the kernel has float32 sin/cos, a fast variant with its flag. */
static int
make_variants(const tc_kernel *k, tc_kernel *exact, tc_kernel *fast,
              kernel_variants *kv)
{
    memset(exact, 0, sizeof(*exact));
    memset(fast, 0, sizeof(*fast));
    kv->exact = exact;
    kv->fast = NULL;
    kv->flag = -1;
    if (copy_insts(k, exact) < 0 || copy_insts(k, fast) < 0
        || tc_kernel_decompose_transcendentals(exact) < 0
        || tc_kernel_decompose_transcendentals_cpu(fast, &kv->flag) < 0) {
        return -1;
    }
    if (kv->flag >= 0 && !writes_its_input(k)) {
        kv->fast = fast;
    }
    return 0;
}

/* ---- context setup and compile ----------------------------------------- */

static void
set_options(gcc_jit_context *c)
{
    char march[64];
    gcc_jit_context_set_int_option(c, GCC_JIT_INT_OPTION_OPTIMIZATION_LEVEL,
                                   3);
#ifdef LIBGCCJIT_HAVE_gcc_jit_context_set_bool_print_errors_to_stderr
    gcc_jit_context_set_bool_print_errors_to_stderr(c, 0);
#endif
    gcc_jit_context_set_bool_allow_unreachable_blocks(c, 1);
    const char *m = tc_cpu_march();
    if (m != NULL) {
        snprintf(march, sizeof(march), "-march=%s", m);
        gcc_jit_context_add_command_line_option(c, march);
    }
    /* No FMA contraction: results must match eager bit for bit.  errno
     * and FP traps are not observable here; ignoring them lets GCC
     * vectorize sqrt/floor/rint. */
    gcc_jit_context_add_command_line_option(c, "-ffp-contract=off");
    gcc_jit_context_add_command_line_option(c, "-fno-math-errno");
    gcc_jit_context_add_command_line_option(c, "-fno-trapping-math");
    /* Vectorized epilogues (a second, narrower copy of every loop) cost
     * ~20% of the compile time and buy little: tails are < 16 elements. */
    gcc_jit_context_add_command_line_option(c,
                                            "--param=vect-epilogues-nomask=0");
    gcc_jit_context_add_driver_option(c, "-lm");
    if (opt_info == 1) {
        gcc_jit_context_add_command_line_option(c, "-fopt-info-vec-all");
    }
    if (opt_info == 2) {
        gcc_jit_context_set_bool_option(
            c, GCC_JIT_BOOL_OPTION_DUMP_GENERATED_CODE, 1);
    }
}

static int
emit_all(emitter *e, const tc_plan *plan, tc_jit_code *code, char *err,
         size_t errlen)
{
    for (int i = 0; i < plan->nkernels; i++) {
        if (plan->kernels[i].nphases > 0 || plan->kernels[i].nred > 0) {
            snprintf(err, errlen, "tcjit cpu: %s: reduction kernels are not "
                     "supported by the CPU backend yet",
                     plan->kernels[i].name);
            return -1;
        }
        if (tc_loop_build(&plan->kernels[i], &code->loops[i]) < 0) {
            snprintf(err, errlen, "tcjit cpu: out of memory");
            return -1;
        }
        tc_kernel exact, fast;
        kernel_variants kv;
        int rc = make_variants(&plan->kernels[i], &exact, &fast, &kv);
        if (rc < 0) {
            snprintf(err, errlen, "tcjit cpu: out of memory");
        }
        else {
            char name[32];
            snprintf(name, sizeof(name), "tc_k%d", i);
            rc = emit_kernel(e, &kv, &code->loops[i], name, err, errlen);
        }
        variants_clear(&exact, &fast);
        if (rc < 0) {
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

static int
compile_locked(const tc_plan *plan, tc_jit_code *code, char *err,
               size_t errlen)
{
    gcc_jit_context *c = gcc_jit_context_acquire();
    if (c == NULL) {
        snprintf(err, errlen, "tcjit cpu: gcc_jit_context_acquire failed");
        return -1;
    }
    set_options(c);
    emitter e = {.ctx = c};
    init_types(&e);
    int rc = emit_all(&e, plan, code, err, errlen);
    if (rc == 0 && gcc_jit_context_get_first_error(c) != NULL) {
        gccjit_error(c, "building kernels", err, errlen);
        rc = -1;
    }
    if (rc == 0) {
        gcc_jit_result *res = gcc_jit_context_compile(c);
        if (res == NULL) {
            gccjit_error(c, "compile failed", err, errlen);
            rc = -1;
        }
        code->result = res;
    }
    for (int i = 0; rc == 0 && i < plan->nkernels; i++) {
        char name[32];
        snprintf(name, sizeof(name), "tc_k%d", i);
        code->fns[i] = (tc_kernel_fn)gcc_jit_result_get_code(code->result,
                                                             name);
        if (code->fns[i] == NULL) {
            snprintf(err, errlen, "tcjit cpu: %s missing after compile",
                     name);
            rc = -1;
        }
    }
    gcc_jit_context_release(c);
    return rc;
}

void
tc_jit_code_free(tc_jit_code *code)
{
    if (code == NULL) {
        return;
    }
    if (code->result != NULL) {
        gcc_jit_result_release(code->result);
    }
    for (int i = 0; code->loops != NULL && i < code->nkernels; i++) {
        tc_loop_clear(&code->loops[i]);
    }
    free(code->loops);
    free(code->fns);
    free(code);
}

tc_jit_code *
tc_jit_code_compile(const tc_plan *plan, char *err, size_t errlen)
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
    if (code->fns == NULL || code->loops == NULL) {
        snprintf(err, errlen, "tcjit cpu: out of memory");
        tc_jit_code_free(code);
        return NULL;
    }
    if (n == 0) {
        return code;  /* nothing to compute: skip gcc entirely */
    }
    /* libgccjit keeps global state: one compile at a time. */
    pthread_mutex_lock(&compile_mu);
    int rc = compile_locked(plan, code, err, errlen);
    pthread_mutex_unlock(&compile_mu);
    if (rc < 0) {
        tc_jit_code_free(code);
        return NULL;
    }
    return code;
}
