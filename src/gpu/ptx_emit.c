/* ptx_emit.c - kernel IR -> PTX text (see ptx.h for the kernel shapes).
 *
 * Values live in virtual registers (ptxas allocates): every KIR value gets
 * its own register of its dtype's class:
 *   float32 %f, float64 %fd, int64 %rd, every other dtype %r (32 bits).
 * float16 / bfloat16 values are only loaded, converted to or from float32
 * and stored (KIR computes in float32, see schedule.c); their 16 bits sit
 * in the low half of a %r register, the high half is ignored, and the
 * conversions go through a .b16 register %h.
 * bool / uint8 / int8 / int16 values are kept normalized in their 32-bit
 * register (bool 0/1, uint8 zero-extended, int8/int16 sign-extended), so
 * 32-bit compares and converts are exact; arithmetic that can leave the
 * range (add, sub, mul, neg, abs, shl, not, div) re-normalizes, which
 * gives the same wrap-around as the CPU backend and eager.
 *
 * Floating point: add/sub/mul/div/sqrt use the .rn forms (IEEE, no FMA
 * contraction, denormals kept: no .ftz), so results agree with eager bit
 * for bit where eager does one rounding per op.  Float64 transcendentals
 * are rewritten into such ops first; float32 ones are fma-based PTX blocks
 * (ptx_math.c explains both, and why not *.approx).
 */
#include "ptx.h"
#include "../graph/reduce_plan.h"
#include "../graph/textbuf.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- text buffer: the shared one (graph/textbuf.h) ---------------------- */

typedef tc_textbuf sbuf;
#define sb_printf tc_textbuf_printf
#define sb_vprintf tc_textbuf_vprintf

/* ---- registers ----------------------------------------------------------- */

enum { C_P, C_R, C_RD, C_F, C_FD, C_H, C_N };
static const char *const cls_prefix[C_N] = {"%p", "%r", "%rd", "%f", "%fd",
                                            "%h"};
static const char *const cls_decl[C_N] = {".pred", ".b32", ".b64", ".f32",
                                          ".f64", ".b16"};

typedef struct {
    int c, n;       /* class, number; n < 0: none */
} reg;

static const reg NOREG = {C_R, -1};

typedef struct {
    sbuf b;
    int cnt[C_N];
    int sm;
    int math_flags;     /* TC_PTX_MATH_* of the kernel (half_results) */
    int label;
    int failed;
    char err[256];
    int rn_sites;       /* div.rn / sqrt.rn emitted into this entry */
    int rn_call;        /* emit them as calls (emit_entry's second try) */
    int rn_hot;         /* in a reduction's per-point body: inline */
    unsigned *funcs;    /* the module's .funcs in use (bits rn_fn) */
    /* Size-generic kernel (dynamic shapes, ptx.h): every size, stride,
     * offset and parameter constant is slot j of the block parameter
     * (kir.h tc_dims_block), loaded at the entry into g64[j] (u64) and
     * g32[j] (its low 32 bits, for 32-bit index math). */
    int generic;
    int gnd, gnargs, gslots;
    reg *g64, *g32;
    reg gnumel[2], gred[2];    /* outer / reduction points, [wide] */
} em;

static reg
newreg(em *e, int c)
{
    reg r = {c, e->cnt[c]++};
    return r;
}

static int
cls_of(tc_dtype dt)
{
    switch (dt) {
    case TC_F32:
        return C_F;
    case TC_F64:
        return C_FD;
    case TC_I64:
        return C_RD;
    default:
        return C_R;
    }
}

static reg
newv(em *e, tc_dtype dt)
{
    return newreg(e, cls_of(dt));
}

/* Register names for printf: a small ring of buffers per thread. */
static const char *
R(reg r)
{
    static _Thread_local char ring[32][16];
    static _Thread_local int next;
    char *s = ring[next++ & 31];
    snprintf(s, 16, "%s%d", cls_prefix[r.c], r.n);
    return s;
}

/* Operand text of a value the sizes give: the immediate v, or in a
 * size-generic kernel the register of block slot `slot` (wide: u64). */
static const char *
dimop(em *e, int slot, int64_t v, int wide)
{
    static _Thread_local char ring[8][24];
    static _Thread_local int next;
    if (e->generic) {
        return R(wide ? e->g64[slot] : e->g32[slot]);
    }
    char *s = ring[next++ & 7];
    snprintf(s, 24, "%lld", (long long)v);
    return s;
}

/* The kernel's outer points (red = 0, v = numel) or reduction points
 * (red = 1, v = red_numel) as an operand. */
static const char *
numop(em *e, int red, int64_t v, int wide)
{
    if (e->generic) {
        return R(red ? e->gred[wide != 0] : e->gnumel[wide != 0]);
    }
    return dimop(e, 0, v, wide);
}

static void
out(em *e, const char *fmt, ...)
{
    va_list ap;
    sb_printf(&e->b, "\t");
    va_start(ap, fmt);
    sb_vprintf(&e->b, fmt, ap);
    va_end(ap);
    sb_printf(&e->b, "\n");
}

/* "{%r1, %r2, ...}" for a vector access. */
static void
reg_list(char *buf, size_t n, const reg *r, int count)
{
    size_t len = (size_t)snprintf(buf, n, "{");
    for (int i = 0; i < count; i++) {
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "",
                                R(r[i]));
    }
    snprintf(buf + len, n - len, "}");
}

static void
fail(em *e, const char *fmt, ...)
{
    if (e->failed) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof(e->err), fmt, ap);
    va_end(ap);
    e->failed = 1;
}

/* ---- dtype helpers ------------------------------------------------------- */

static const char *
dtname(tc_dtype dt)
{
    return tc_dtype_name(dt);
}

static int
is_float(tc_dtype dt)
{
    return dt == TC_F32 || dt == TC_F64;
}

static int
is_unsigned(tc_dtype dt)
{
    return dt == TC_BOOL || dt == TC_U8;
}

static int
esize(tc_dtype dt)
{
    return (int)tc_dtype_size(dt);
}

/* Type suffix for arithmetic / compares. */
static const char *
ty(tc_dtype dt)
{
    switch (dt) {
    case TC_F32:
        return "f32";
    case TC_F64:
        return "f64";
    case TC_I64:
        return "s64";
    case TC_BOOL:
    case TC_U8:
        return "u32";
    default:
        return "s32";
    }
}

/* Untyped suffix of the same size (mov, selp, logic). */
static const char *
bty(tc_dtype dt)
{
    switch (dt) {
    case TC_F32:
        return "f32";
    case TC_F64:
        return "f64";
    case TC_I64:
        return "b64";
    default:
        return "b32";
    }
}

static const char *
memty(tc_dtype dt)
{
    static const char *const t[TC_NDTYPES] = {"u8", "u8", "s8", "s16",
                                              "s32", "s64", "f32", "f64",
                                              "u16", "u16"};
    return t[dt];
}

/* Re-normalize a small integer after an op that may leave its range. */
static void
normalize(em *e, tc_dtype dt, reg r)
{
    switch (dt) {
    case TC_I8:
        out(e, "cvt.s32.s8 %s, %s;", R(r), R(r));
        break;
    case TC_I16:
        out(e, "cvt.s32.s16 %s, %s;", R(r), R(r));
        break;
    case TC_U8:
        out(e, "and.b32 %s, %s, 255;", R(r), R(r));
        break;
    case TC_BOOL:
        out(e, "and.b32 %s, %s, 1;", R(r), R(r));
        break;
    default:
        break;
    }
}

/* Immediate operand text of a constant of dtype dt. */
static void
imm_text(char *buf, size_t n, tc_dtype dt, double f, int64_t i)
{
    if (dt == TC_F32) {
        float x = (float)f;
        uint32_t u;
        memcpy(&u, &x, 4);
        snprintf(buf, n, "0f%08X", u);
    }
    else if (dt == TC_F64) {
        uint64_t u;
        memcpy(&u, &f, 8);
        snprintf(buf, n, "0d%016llX", (unsigned long long)u);
    }
    else {
        switch (dt) {
        case TC_BOOL:
            i = i != 0;
            break;
        case TC_U8:
            i = (uint8_t)i;
            break;
        case TC_I8:
            i = (int8_t)i;
            break;
        case TC_I16:
            i = (int16_t)i;
            break;
        case TC_I32:
            i = (int32_t)i;
            break;
        default:
            break;
        }
        snprintf(buf, n, "%lld", (long long)i);
    }
}

static reg
const_reg(em *e, tc_dtype dt, double f, int64_t i)
{
    char t[32];
    imm_text(t, sizeof(t), dt, f, i);
    reg r = newv(e, dt);
    out(e, "mov.%s %s, %s;", bty(dt), R(r), t);
    return r;
}

/* ---- operations ---------------------------------------------------------- */

/* pred = a <op> b over operands of dtype dt (ordered except NE). */
static reg
emit_setp(em *e, tc_kop op, tc_dtype dt, reg a, reg b)
{
    const char *c = op == KOP_LT ? "lt" : op == KOP_LE ? "le"
                    : op == KOP_EQ ? "eq" : is_float(dt) ? "neu" : "ne";
    reg p = newreg(e, C_P);
    out(e, "setp.%s.%s %s, %s, %s;", c, ty(dt), R(p), R(a), R(b));
    return p;
}

/* float32 -> bfloat16 bits, round to nearest even, NaN -> 0x7fff (what
 * cvt.rn.bf16.f32 gives on sm_80+), for older targets. */
static void
emit_bf16_round_bits(em *e, reg d, reg a)
{
    reg w = newreg(e, C_R), t = newreg(e, C_R);
    reg p = newreg(e, C_P);
    out(e, "mov.b32 %s, %s;", R(w), R(a));
    out(e, "bfe.u32 %s, %s, 16, 1;", R(t), R(w));
    out(e, "add.u32 %s, %s, 32767;", R(t), R(t));
    out(e, "add.u32 %s, %s, %s;", R(t), R(t), R(w));
    out(e, "shr.u32 %s, %s, 16;", R(t), R(t));
    out(e, "setp.nan.f32 %s, %s, %s;", R(p), R(a), R(a));
    out(e, "selp.b32 %s, 32767, %s, %s;", R(d), R(t), R(p));
}

/* Reduced floats convert only to and from float32 (kb_cast routes the
 * rest through float32): exact widening, and round-to-nearest-even
 * narrowing with IEEE subnormals and overflow to inf, as CUDA's eager
 * kernels do (__float2half_rn / __float2bfloat16_rn). */
static void
emit_half_cast(em *e, reg d, tc_dtype to, reg a, tc_dtype from)
{
    reg h = newreg(e, C_H);
    if (from == TC_F16 && to == TC_F32) {
        out(e, "cvt.u16.u32 %s, %s;", R(h), R(a));
        out(e, "cvt.f32.f16 %s, %s;", R(d), R(h));
    }
    else if (from == TC_BF16 && to == TC_F32) {
        reg w = newreg(e, C_R);
        out(e, "shl.b32 %s, %s, 16;", R(w), R(a));
        out(e, "mov.b32 %s, %s;", R(d), R(w));
    }
    else if (from == TC_F32 && to == TC_F16) {
        out(e, "cvt.rn.f16.f32 %s, %s;", R(h), R(a));
        out(e, "cvt.u32.u16 %s, %s;", R(d), R(h));
    }
    else if (from == TC_F32 && to == TC_BF16 && e->sm >= 80) {
        out(e, "cvt.rn.bf16.f32 %s, %s;", R(h), R(a));
        out(e, "cvt.u32.u16 %s, %s;", R(d), R(h));
    }
    else if (from == TC_F32 && to == TC_BF16) {
        emit_bf16_round_bits(e, d, a);
    }
    else {
        fail(e, "cast from %s to %s (reduced floats convert through "
             "float32)", dtname(from), dtname(to));
    }
}

static void
emit_cast(em *e, reg d, tc_dtype to, reg a, tc_dtype from)
{
    if (to != from && (tc_dtype_is_reduced_float(to)
                       || tc_dtype_is_reduced_float(from))) {
        emit_half_cast(e, d, to, a, from);
        return;
    }
    if (to == from) {
        out(e, "mov.%s %s, %s;", bty(to), R(d), R(a));
        return;
    }
    if (to == TC_BOOL) {
        reg z = const_reg(e, from, 0, 0);
        reg p = emit_setp(e, KOP_NE, from, a, z);
        out(e, "selp.u32 %s, 1, 0, %s;", R(d), R(p));
        return;
    }
    if (is_float(to) && is_float(from)) {
        out(e, to == TC_F32 ? "cvt.rn.f32.f64 %s, %s;" : "cvt.f64.f32 %s, %s;",
            R(d), R(a));
        return;
    }
    if (is_float(to)) {
        out(e, "cvt.rn.%s.%s %s, %s;", ty(to), from == TC_I64 ? "s64" : "s32",
            R(d), R(a));
        return;
    }
    if (is_float(from)) {
        /* PTX saturates out-of-range values and maps NaN to 0 (C leaves
         * them undefined; x86 gives INT_MIN).  int8 / int16 go through
         * int32 and wrap, as the CPU backend does; uint8 through int64,
         * as c10 casts it (static_cast_with_inter_type). */
        if (to == TC_I64) {
            out(e, "cvt.rzi.s64.%s %s, %s;", ty(from), R(d), R(a));
        }
        else if (to == TC_U8) {
            reg w = newreg(e, C_RD);
            out(e, "cvt.rzi.s64.%s %s, %s;", ty(from), R(w), R(a));
            out(e, "cvt.u32.u64 %s, %s;", R(d), R(w));
            normalize(e, to, d);
        }
        else {
            out(e, "cvt.rzi.s32.%s %s, %s;", ty(from), R(d), R(a));
            normalize(e, to, d);
        }
        return;
    }
    /* int -> int */
    if (to == TC_I64) {
        out(e, "cvt.s64.s32 %s, %s;", R(d), R(a));
    }
    else if (from == TC_I64) {
        out(e, "cvt.u32.u64 %s, %s;", R(d), R(a));
        normalize(e, to, d);
    }
    else {
        out(e, "mov.b32 %s, %s;", R(d), R(a));
        normalize(e, to, d);
    }
}

static void
emit_bitcast(em *e, reg d, tc_dtype to, reg a, tc_dtype from)
{
    if (esize(to) != esize(from)) {
        fail(e, "bitcast between sizes %d and %d", esize(from), esize(to));
        return;
    }
    out(e, "mov.b%d %s, %s;", esize(to) == 8 ? 64 : 32, R(d), R(a));
    if (!is_float(to)) {
        normalize(e, to, d);
    }
}

/* d = a <op> b (d may be a or b): NaN-propagating max/min. */
static void
emit_minmax(em *e, tc_kop op, tc_dtype dt, reg d, reg a, reg b)
{
    const char *m = op == KOP_MAX ? "max" : "min";
    if (dt == TC_BOOL) {
        out(e, "%s.b32 %s, %s, %s;", op == KOP_MAX ? "or" : "and", R(d), R(a),
            R(b));
        return;
    }
    if (!is_float(dt)) {
        out(e, "%s.%s %s, %s, %s;", m, ty(dt), R(d), R(a), R(b));
        return;
    }
    if (dt == TC_F32 && e->sm >= 80) {
        out(e, "%s.NaN.f32 %s, %s, %s;", m, R(d), R(a), R(b));
        return;
    }
    /* (a > b) or a is NaN ? a : b -- b's NaN falls through to b */
    reg p = newreg(e, C_P), q = newreg(e, C_P);
    out(e, "setp.%s.%s %s, %s, %s;", op == KOP_MAX ? "gt" : "lt", ty(dt),
        R(p), R(a), R(b));
    out(e, "setp.nan.%s %s, %s, %s;", ty(dt), R(q), R(a), R(a));
    out(e, "or.pred %s, %s, %s;", R(p), R(p), R(q));
    out(e, "selp.%s %s, %s, %s, %s;", bty(dt), R(d), R(a), R(b), R(p));
}

/* Truncating integer division that never traps: x / 0 = x and
 * MIN / -1 wraps, as the CPU backend defines them. */
static void
emit_int_div(em *e, tc_dtype dt, reg d, reg a, reg b)
{
    const char *t = ty(dt);
    const char *bt = bty(dt);
    reg pz = newreg(e, C_P);
    reg bs = newv(e, dt);
    out(e, "setp.eq.%s %s, %s, 0;", t, R(pz), R(b));
    if (is_unsigned(dt)) {
        out(e, "selp.%s %s, 1, %s, %s;", bt, R(bs), R(b), R(pz));
        out(e, "div.%s %s, %s, %s;", t, R(d), R(a), R(bs));
        return;
    }
    reg pm = newreg(e, C_P), na = newv(e, dt), q = newv(e, dt);
    out(e, "setp.eq.%s %s, %s, -1;", t, R(pm), R(b));
    out(e, "or.pred %s, %s, %s;", R(pz), R(pz), R(pm));
    out(e, "selp.%s %s, 1, %s, %s;", bt, R(bs), R(b), R(pz));
    out(e, "div.%s %s, %s, %s;", t, R(q), R(a), R(bs));
    out(e, "neg.%s %s, %s;", t, R(na), R(a));
    out(e, "selp.%s %s, %s, %s, %s;", bt, R(d), R(na), R(q), R(pm));
    normalize(e, dt, d);
}

/* d = div.rn(a, b) or sqrt.rn(a) (b.n < 0), float32 / float64: inline, or
 * a call of a .func doing exactly that instruction (the same IEEE result
 * bit for bit) when the entry has more than RN_INLINE_MAX of them.  ptxas
 * (and the driver's JIT, which is ptxas) expands each div.rn / sqrt.rn
 * into a fast path and a slow-path subroutine, and the time it takes grows
 * faster than the code: the 4-lane entry of an AdamW step's grouped kernel
 * (48 members, 384 div.rn.f32 and 192 sqrt.rn.f32) took 1.3 s to assemble
 * inline, 0.5 s with calls (docs/dev.md).  ptxas does not inline a .func.
 * Few sites stay inline: a call costs a branch and an ABI register
 * shuffle that a short kernel would notice; so do the sites of a
 * reduction's per-point bodies (rn_hot: softmax's division of each of a
 * row's points held in registers), only its per-row code calls.
 * emit_entry counts the sites on a first try and emits the entry again
 * with calls when there are too many. */
#define RN_INLINE_MAX 16

/* Bit of em.funcs for the .func of op (div / sqrt) at dtype dt, scalar or
 * 4 lanes (emit_rn4). */
static unsigned
rn_fn(int sqrt, tc_dtype dt, int x4)
{
    return 1u << (sqrt * 4 + (dt == TC_F64) * 2 + x4);
}

/* Float POW: PTX has none, and its float64 exp(y log|x|) decomposition
 * (transcendental.c) is ~150 instructions.  An optimizer step computes
 * beta ** step for each parameter (AdamW: two per parameter, 296 for
 * GPT-2): inline, the driver's JIT took 2.1 s over that one scalar kernel
 * on an H200.  A kernel with more than POW_INLINE_MAX of them keeps POW
 * in its KIR and calls one .func per dtype (emit_pow_funcs), the same
 * decomposition emitted once: the same result bit for bit. */
#define POW_INLINE_MAX 4

static unsigned
pow_fn(tc_dtype dt)
{
    return 1u << (8 + (dt == TC_F64));
}

static void
emit_rn(em *e, tc_dtype dt, reg d, reg a, reg b)
{
    const char *t = ty(dt);
    int sq = b.n < 0;
    const char *op = sq ? "sqrt" : "div";
    e->rn_sites += !e->rn_hot;
    if (!e->rn_call || e->funcs == NULL || e->rn_hot) {
        if (sq) {
            out(e, "sqrt.rn.%s %s, %s;", t, R(d), R(a));
        }
        else {
            out(e, "div.rn.%s %s, %s, %s;", t, R(d), R(a), R(b));
        }
        return;
    }
    *e->funcs |= rn_fn(sq, dt, 0);
    if (sq) {
        out(e, "call (%s), tc_%s_rn_%s, (%s);", R(d), op, t, R(a));
    }
    else {
        out(e, "call (%s), tc_%s_rn_%s, (%s, %s);", R(d), op, t, R(a), R(b));
    }
}

/* emit_rn of 4 vector lanes as one call of a .func doing all four (the
 * vector entry, with calls): a call is what ptxas spends its time on once
 * the sites are calls (576 calls 0.31 s, 144 calls of 4 lanes 0.15 s).
 * The lanes travel as 16- or 32-byte .param arrays, the ABI's way of
 * passing a vector (PTX has one return value per call). */
static void
emit_rn4(em *e, tc_dtype dt, const reg *d, const reg *a, const reg *b)
{
    const char *t = ty(dt);
    int sq = b == NULL;
    int sz = esize(dt), per = 16 / sz;      /* lanes per .v access */
    e->rn_sites += 4;
    *e->funcs |= rn_fn(sq, dt, 1);
    out(e, "{");
    out(e, ".param .align 16 .b8 rn_a[%d];", 4 * sz);
    if (!sq) {
        out(e, ".param .align 16 .b8 rn_b[%d];", 4 * sz);
    }
    out(e, ".param .align 16 .b8 rn_d[%d];", 4 * sz);
    char regs[128];
    for (int j = 0; j < 4; j += per) {
        reg_list(regs, sizeof(regs), &a[j], per);
        out(e, "st.param.v%d.%s [rn_a+%d], %s;", per, t, j * sz, regs);
        if (!sq) {
            reg_list(regs, sizeof(regs), &b[j], per);
            out(e, "st.param.v%d.%s [rn_b+%d], %s;", per, t, j * sz, regs);
        }
    }
    out(e, "call (rn_d), tc_%s_rn_%s_x4, (rn_a%s);", sq ? "sqrt" : "div", t,
        sq ? "" : ", rn_b");
    for (int j = 0; j < 4; j += per) {
        reg_list(regs, sizeof(regs), &d[j], per);
        out(e, "ld.param.v%d.%s %s, [rn_d+%d];", per, t, regs, j * sz);
    }
    out(e, "}");
}

/* The .func definitions of the calls in use (bits rn_fn). */
static void
emit_rn_funcs(sbuf *mod, unsigned funcs)
{
    for (int sq = 0; sq < 2; sq++) {
        for (int f64 = 0; f64 < 2; f64++) {
            const char *op = sq ? "sqrt" : "div", *t = f64 ? "f64" : "f32";
            tc_dtype dt = f64 ? TC_F64 : TC_F32;
            if (funcs & rn_fn(sq, dt, 0)) {
                sb_printf(mod, "\n.func (.reg .%s d) tc_%s_rn_%s(.reg .%s a",
                          t, op, t, t);
                if (!sq) {
                    sb_printf(mod, ", .reg .%s b", t);
                }
                sb_printf(mod, ")\n{\n\t%s.rn.%s d, a%s;\n\tret;\n}\n", op,
                          t, sq ? "" : ", b");
            }
            if (!(funcs & rn_fn(sq, dt, 1))) {
                continue;
            }
            /* x4: lanes a[j] (/ b[j]) -> d[j] through .v4.f32 / .v2.f64 */
            int sz = f64 ? 8 : 4, per = 16 / sz;
            sb_printf(mod, "\n.func (.param .align 16 .b8 d[%d]) "
                           "tc_%s_rn_%s_x4(.param .align 16 .b8 a[%d]",
                      4 * sz, op, t, 4 * sz);
            if (!sq) {
                sb_printf(mod, ", .param .align 16 .b8 b[%d]", 4 * sz);
            }
            sb_printf(mod, ")\n{\n\t.reg .%s x<4>, y<4>, z<4>;\n", t);
            for (int j = 0; j < 4; j += per) {
                for (int in = 0; in < 2 - sq; in++) {
                    sb_printf(mod, "\tld.param.v%d.%s {", per, t);
                    for (int l = j; l < j + per; l++) {
                        sb_printf(mod, "%s%c%d", l > j ? ", " : "",
                                  in ? 'y' : 'x', l);
                    }
                    sb_printf(mod, "}, [%c+%d];\n", in ? 'b' : 'a', j * sz);
                }
            }
            for (int j = 0; j < 4; j++) {
                sb_printf(mod, "\t%s.rn.%s z%d, x%d", op, t, j, j);
                if (!sq) {
                    sb_printf(mod, ", y%d", j);
                }
                sb_printf(mod, ";\n");
            }
            for (int j = 0; j < 4; j += per) {
                sb_printf(mod, "\tst.param.v%d.%s [d+%d], {", per, t, j * sz);
                for (int l = j; l < j + per; l++) {
                    sb_printf(mod, "%sz%d", l > j ? ", " : "", l);
                }
                sb_printf(mod, "};\n");
            }
            sb_printf(mod, "\tret;\n}\n");
        }
    }
}

/* d = a <op> b for arithmetic / logic / shift / min / max ops. */
static void
emit_binop(em *e, tc_kop op, tc_dtype dt, reg d, reg a, reg b)
{
    int fl = is_float(dt);
    const char *t = ty(dt);
    if (dt == TC_BOOL) {
        /* torch bool arithmetic: add = or, sub = xor, mul = and */
        if (op == KOP_ADD) {
            op = KOP_OR;
        }
        else if (op == KOP_SUB) {
            op = KOP_XOR;
        }
        else if (op == KOP_MUL) {
            op = KOP_AND;
        }
    }
    switch (op) {
    case KOP_ADD:
    case KOP_SUB:
    case KOP_MUL:
        if (fl) {
            out(e, "%s.rn.%s %s, %s, %s;",
                op == KOP_ADD ? "add" : op == KOP_SUB ? "sub" : "mul", t,
                R(d), R(a), R(b));
        }
        else {
            out(e, "%s.%s %s, %s, %s;",
                op == KOP_ADD ? "add" : op == KOP_SUB ? "sub" : "mul.lo", t,
                R(d), R(a), R(b));
            normalize(e, dt, d);
        }
        return;
    case KOP_DIV:
        if (fl) {
            emit_rn(e, dt, d, a, b);
        }
        else {
            emit_int_div(e, dt, d, a, b);
        }
        return;
    case KOP_POW:
        if (fl && e->funcs != NULL) {   /* kept by emit_kernel: a call */
            *e->funcs |= pow_fn(dt);
            out(e, "call (%s), tc_pow_%s, (%s, %s);", R(d), t, R(a), R(b));
            return;
        }
        break;
    case KOP_MAX:
    case KOP_MIN:
        emit_minmax(e, op, dt, d, a, b);
        return;
    case KOP_AND:
    case KOP_OR:
    case KOP_XOR:
        if (fl) {
            break;
        }
        out(e, "%s.%s %s, %s, %s;",
            op == KOP_AND ? "and" : op == KOP_OR ? "or" : "xor", bty(dt),
            R(d), R(a), R(b));
        return;
    case KOP_SHL:
    case KOP_SHR: {
        if (fl) {
            break;
        }
        reg sh = b;
        if (dt == TC_I64) {
            sh = newreg(e, C_R);
            out(e, "cvt.u32.u64 %s, %s;", R(sh), R(b));
        }
        if (op == KOP_SHL) {
            out(e, "shl.%s %s, %s, %s;", bty(dt), R(d), R(a), R(sh));
            normalize(e, dt, d);
        }
        else {
            out(e, "shr.%s %s, %s, %s;", is_unsigned(dt) ? "u32" : t, R(d),
                R(a), R(sh));
        }
        return;
    }
    default:
        break;
    }
    fail(e, "op %d unsupported for dtype %s", (int)op, dtname(dt));
}

/* out() for tc_ptx_f32_unary */
static void
out_cb(void *ctx, const char *fmt, ...)
{
    em *e = ctx;
    va_list ap;
    va_start(ap, fmt);
    if (fmt[0] == '$') {        /* labels start at column 0 */
        sb_vprintf(&e->b, fmt, ap);
    }
    else {
        sb_printf(&e->b, "\t");
        sb_vprintf(&e->b, fmt, ap);
    }
    va_end(ap);
    sb_printf(&e->b, "\n");
}

/* Float64 transcendentals never reach this point: tc_kernel_decompose_math
 * rewrites them (and erf, pow) into basic ops first, since PTX has nothing for
 * float64 (tc_ptx_math_target).  Float32 EXP/LOG/SIN/COS/TANH are emitted here
 * as PTX blocks (ptx_math.c, tc_ptx_f32_unary: fma-based reduction +
 * polynomials, not the *.approx instructions, which miss assert_close's
 * float32 tolerance on part of the range; kernels with only float16 / bfloat16
 * floats use sin.approx / cos.approx after a reduction, see half_results). */
static void
emit_unary(em *e, tc_kop op, tc_dtype dt, reg d, reg a)
{
    int fl = is_float(dt);
    const char *t = ty(dt);
    switch (op) {
    case KOP_NEG:
        out(e, "neg.%s %s, %s;", t, R(d), R(a));
        if (!fl) {
            normalize(e, dt, d);
        }
        return;
    case KOP_ABS:
        if (is_unsigned(dt)) {
            out(e, "mov.b32 %s, %s;", R(d), R(a));
        }
        else {
            out(e, "abs.%s %s, %s;", t, R(d), R(a));
            if (!fl) {
                normalize(e, dt, d);
            }
        }
        return;
    case KOP_SQRT:
        if (fl) {
            emit_rn(e, dt, d, a, NOREG);
            return;
        }
        break;
    case KOP_FLOOR:
    case KOP_RINT:
        if (fl) {
            out(e, "cvt.%s.%s.%s %s, %s;", op == KOP_FLOOR ? "rmi" : "rni", t,
                t, R(d), R(a));
        }
        else {
            out(e, "mov.%s %s, %s;", bty(dt), R(d), R(a));
        }
        return;
    case KOP_EXP:
    case KOP_LOG:
    case KOP_SIN:
    case KOP_COS:
    case KOP_TANH:
        if (dt == TC_F32) {
            tc_ptx_f32_unary(op, e->sm, e->math_flags, R(d), R(a),
                             e->label++, out_cb, e);
            return;
        }
        break;
    case KOP_NOT:
        if (fl) {
            break;
        }
        if (dt == TC_BOOL) {
            out(e, "xor.b32 %s, %s, 1;", R(d), R(a));
        }
        else {
            out(e, "not.%s %s, %s;", bty(dt), R(d), R(a));
            normalize(e, dt, d);
        }
        return;
    default:
        break;
    }
    fail(e, "op %d unsupported for dtype %s on the GPU", (int)op,
         dtname(dt));
}

/* ---- accumulators (kir.h tc_acc_kind) ------------------------------------ */

static void
acc_identity(em *e, tc_acc_kind kind, tc_dtype dt, reg v, reg idx)
{
    double f;
    int64_t i;
    tc_acc_identity(kind, dt, &f, &i);
    char t[32];
    imm_text(t, sizeof(t), dt, f, i);
    out(e, "mov.%s %s, %s;", bty(dt), R(v), t);
    if (idx.n >= 0 && tc_acc_sems[kind].online) {
        out(e, "mov.%s %s, 0f00000000;", bty(dt), R(idx));
    }
    else if (idx.n >= 0) {
        out(e, "mov.b64 %s, -1;", R(idx));
    }
}

/* The register of an accumulator's second component (ARG index, SOFTMAX
 * sum), or NOREG. */
static reg
acc_second(em *e, tc_acc_kind kind, tc_dtype dt)
{
    if (tc_acc_components(kind) == 1) {
        return NOREG;
    }
    return tc_acc_sems[kind].online ? newv(e, dt) : newreg(e, C_RD);
}

/* Bits of a component register in shared memory (8-byte slots). */
static int
comp_bits(reg v)
{
    return v.c == C_RD || v.c == C_FD ? 64 : 32;
}

/* SOFTMAX (kir.h, float32): (m, s) = comb((m, s), (bm, bs)); bs NOREG is
 * a point's partial (bm, 1).  The factor's exp (argument <= 0) takes the
 * hardware's ex2 after the usual reduction (TC_PTX_MATH_EXP_NONPOS): it
 * is most of the work a point costs here, and the kernel should be as
 * fast as its one read of the row. */
static void
acc_softmax(em *e, reg m, reg s, reg bm, reg bs)
{
    reg c2 = newv(e, TC_F32), t = newv(e, TC_F32);
    reg lo = newv(e, TC_F32), up = newv(e, TC_F32), keep = newv(e, TC_F32);
    reg gt = newreg(e, C_P);
    out(e, "mov.f32 %s, 0fFF7FFFFF;", R(lo));      /* -FLT_MAX */
    emit_binop(e, KOP_MAX, TC_F32, c2, bm, lo);
    out(e, "sub.rn.f32 %s, %s, %s;", R(c2), R(c2), R(m));
    out(e, "abs.f32 %s, %s;", R(c2), R(c2));
    out(e, "neg.f32 %s, %s;", R(c2), R(c2));
    tc_ptx_f32_unary(KOP_EXP, e->sm, e->math_flags | TC_PTX_MATH_EXP_NONPOS,
                     R(t), R(c2), e->label++, out_cb, e);
    out(e, "setp.gt.f32 %s, %s, %s;", R(gt), R(bm), R(m));
    if (bs.n < 0) {
        out(e, "fma.rn.f32 %s, %s, %s, 0f3F800000;", R(up), R(s), R(t));
        out(e, "add.rn.f32 %s, %s, %s;", R(keep), R(s), R(t));
    }
    else {
        out(e, "fma.rn.f32 %s, %s, %s, %s;", R(up), R(s), R(t), R(bs));
        out(e, "fma.rn.f32 %s, %s, %s, %s;", R(keep), R(bs), R(t), R(s));
    }
    out(e, "selp.f32 %s, %s, %s, %s;", R(s), R(up), R(keep), R(gt));
    emit_binop(e, KOP_MAX, TC_F32, m, m, bm);
}

/* (av, ai) = combine((av, ai), (bv, bi)), the rule of reduce_plan.h; also
 * the update of ARGMAX / ARGMIN with a point (bi = its index r).  An empty
 * partial (index -1, the identity) always loses, so a row of all -inf (or
 * all INT_MIN) still reports index 0 like torch. */
static void
acc_combine(em *e, tc_acc_kind kind, tc_dtype dt, reg av, reg ai, reg bv,
            reg bi)
{
    const tc_acc_sem *sem = &tc_acc_sems[kind];
    if (sem->online) {
        acc_softmax(e, av, ai, bv, bi);
        return;
    }
    if (!sem->has_index) {
        tc_kop op = tc_acc_value_op(kind, dt);
        if (op == KOP_OR || op == KOP_AND) {   /* bool accumulators */
            out(e, "%s.b32 %s, %s, %s;", op == KOP_OR ? "or" : "and", R(av),
                R(av), R(bv));
        }
        else {
            emit_binop(e, op, dt, av, av, bv);
        }
        return;
    }
    /* take b = b better || (bn && !an) || (tie && bi < ai unsigned) */
    const char *t = ty(dt);
    reg take = newreg(e, C_P), p = newreg(e, C_P), q = newreg(e, C_P);
    out(e, "setp.%s.%s %s, %s, %s;", sem->greater ? "gt" : "lt", t,
        R(take), R(bv), R(av));
    out(e, "setp.eq.%s %s, %s, %s;", t, R(p), R(bv), R(av));
    if (is_float(dt)) {
        reg an = newreg(e, C_P), bn = newreg(e, C_P);
        out(e, "setp.nan.%s %s, %s, %s;", t, R(an), R(av), R(av));
        out(e, "setp.nan.%s %s, %s, %s;", t, R(bn), R(bv), R(bv));
        /* both NaN counts as a tie */
        out(e, "and.pred %s, %s, %s;", R(q), R(an), R(bn));
        out(e, "or.pred %s, %s, %s;", R(p), R(p), R(q));
        /* b NaN, a not */
        out(e, "not.pred %s, %s;", R(an), R(an));
        out(e, "and.pred %s, %s, %s;", R(q), R(bn), R(an));
        out(e, "or.pred %s, %s, %s;", R(take), R(take), R(q));
    }
    /* the identity's index -1 is the largest unsigned one: an empty a
     * loses every tie, an empty b wins none */
    out(e, "setp.lt.u64 %s, %s, %s;", R(q), R(bi), R(ai));
    out(e, "and.pred %s, %s, %s;", R(p), R(p), R(q));
    out(e, "or.pred %s, %s, %s;", R(take), R(take), R(p));
    out(e, "selp.%s %s, %s, %s, %s;", bty(dt), R(av), R(bv), R(av), R(take));
    out(e, "selp.b64 %s, %s, %s, %s;", R(ai), R(bi), R(ai), R(take));
}

/* ARG index or SOFTMAX sum */
static int
acc_has_second(tc_acc_kind kind)
{
    return tc_acc_components(kind) == 2;
}

/* ---- loop nests ------------------------------------------------------------ */

typedef struct {
    int nd;
    int64_t sizes[TC_MAX_DIMS];
    int nargs;
    int64_t (*st)[TC_MAX_DIMS];    /* [nargs][nd] */
    int slot0;      /* size-generic: block dim of sizes[0] (the outer
                       nest's dims come first, then the reduction's) */
} nest;

/* Dims [d0, d0 + n) of k, size-1 dims dropped, dims contiguous for every
 * argument merged. */
static int
nest_build(const tc_kernel *k, int d0, int n, nest *l)
{
    memset(l, 0, sizeof(*l));
    l->nargs = k->nargs;
    l->st = calloc((size_t)(k->nargs > 0 ? k->nargs : 1), sizeof(*l->st));
    if (l->st == NULL) {
        return -1;
    }
    for (int d = d0; d < d0 + n; d++) {
        if (k->sizes[d] == 1) {
            continue;
        }
        int m = l->nd;
        if (m > 0) {
            int ok = 1;
            for (int a = 0; a < k->nargs; a++) {
                ok &= l->st[a][m - 1] == k->args[a].strides[d] * k->sizes[d];
            }
            if (ok) {
                l->sizes[m - 1] *= k->sizes[d];
                for (int a = 0; a < k->nargs; a++) {
                    l->st[a][m - 1] = k->args[a].strides[d];
                }
                continue;
            }
        }
        l->sizes[m] = k->sizes[d];
        for (int a = 0; a < k->nargs; a++) {
            l->st[a][m] = k->args[a].strides[d];
        }
        l->nd++;
    }
    return 0;
}

static void
nest_clear(nest *l)
{
    free(l->st);
    l->st = NULL;
}

/* Largest |element offset| argument a reaches over the nest. */
static int64_t
nest_span(const nest *l, int a)
{
    int64_t s = 0;
    for (int d = 0; d < l->nd; d++) {
        int64_t st = l->st[a][d] < 0 ? -l->st[a][d] : l->st[a][d];
        s += (l->sizes[d] > 0 ? l->sizes[d] - 1 : 0) * st;
    }
    return s;
}

/* coord[d] = the nest coordinates of idx, a linear row-major index over
 * the nest (u32 or u64 register as wide says). */
static void
emit_coords(em *e, reg idx, const nest *l, int wide, reg *coord)
{
    const char *it = wide ? "u64" : "u32";
    int c = wide ? C_RD : C_R;
    reg q = idx;
    for (int d = l->nd - 1; d >= 0; d--) {
        coord[d] = q;
        if (d > 0) {
            coord[d] = newreg(e, c);
            reg q2 = newreg(e, c);
            out(e, "rem.%s %s, %s, %s;", it, R(coord[d]), R(q),
                dimop(e, l->slot0 + d, l->sizes[d], wide));
            out(e, "div.%s %s, %s, %s;", it, R(q2), R(q),
                dimop(e, l->slot0 + d, l->sizes[d], wide));
            q = q2;
        }
    }
}

/* base + sum over dims of coord[d] * stride of argument a (s32 or s64
 * register as wide says); base is a's offset or 0. */
static reg
emit_offset(em *e, const nest *l, int wide, int64_t base, int a,
            const reg *coord)
{
    const char *st = wide ? "s64" : "s32";
    reg off = newreg(e, wide ? C_RD : C_R);
    out(e, "mov.%s %s, %s;", st, R(off),
        base != 0 ? dimop(e, tc_dims_offset_slot(e->gnd, e->gnargs, a), base,
                          wide)
                  : "0");
    for (int d = l->nd - 1; d >= 0; d--) {
        int64_t sd = l->st[a][d];
        if (sd == 0) {
            continue;
        }
        /* which strides are 0 or 1 stays compiled in */
        out(e, "mad.lo.%s %s, %s, %s, %s;", st, R(off), R(coord[d]),
            sd == 1 ? "1"
                    : dimop(e, tc_dims_stride_slot(e->gnd, a, l->slot0 + d),
                            sd, wide),
            R(off));
    }
    return off;
}

/* off[a] = base[a] + sum over dims of coord(idx) * stride, for the args
 * with used[a] (emit_coords, emit_offset). */
static void
emit_offsets(em *e, reg idx, const nest *l, int wide, const int64_t *base,
             const char *used, reg *off)
{
    reg coord[TC_MAX_DIMS];
    emit_coords(e, idx, l, wide, coord);
    for (int a = 0; a < l->nargs; a++) {
        if (used[a]) {
            off[a] = emit_offset(e, l, wide, base ? base[a] : 0, a, coord);
        }
    }
}

/* addr = base + off * elem_size */
static reg
emit_addr(em *e, reg base, reg off, int wide, tc_dtype dt)
{
    reg ad = newreg(e, C_RD);
    if (wide) {
        out(e, "mad.lo.s64 %s, %s, %d, %s;", R(ad), R(off), esize(dt),
            R(base));
    }
    else {
        out(e, "mad.wide.s32 %s, %s, %d, %s;", R(ad), R(off), esize(dt),
            R(base));
    }
    return ad;
}

/* ---- kernel bodies ----------------------------------------------------------- */

typedef struct {
    em *e;
    const tc_kernel *k;
    reg *val;           /* [ninsts] */
    reg *base;          /* [nargs] global base pointers */
    reg *addr;          /* [nargs] element address (scalar mode) */
    reg *off;           /* [nargs] element offset (scalar pointwise mode:
                           KOP_INDEX of an index argument reads it) */
    const char *nc;     /* [nargs] read-only in this kernel: ld.global.nc */
    /* vector lanes: loads read lane_in[arg], stores write lane_out[arg] */
    int lane_mode;
    reg *lane_in, *lane_out;
    reg store_pred;     /* n >= 0: predicate guarding STOREs (thread 0) */
    /* reductions */
    reg *acc_v, *acc_i; /* [ninsts] per KOP_ACC */
    reg ridx64;         /* current reduction index as s64 */
    /* scalar pointwise loop: off / addr of an argument are emitted at its
     * first access (arg_access) */
    struct entry *en;
    const nest *l;
    const reg *coord;   /* [l->nd] */
} body;

static reg arg_base(struct entry *en, int a);
static void arg_access(body *s, int a);

static void
emit_inst(body *s, int i)
{
    em *e = s->e;
    const tc_kinst *in = &s->k->insts[i];
    const tc_kinst *ins = s->k->insts;
    if (in->a >= i || in->b >= i || in->c >= i || in->a < -1 || in->b < -1
        || in->c < -1 || (unsigned)in->dtype >= TC_NDTYPES) {
        fail(e, "%s: bad instruction %d", s->k->name, i);
        return;
    }
    reg a = in->a >= 0 ? s->val[in->a] : NOREG;
    reg b = in->b >= 0 ? s->val[in->b] : NOREG;
    reg c = in->c >= 0 ? s->val[in->c] : NOREG;
    tc_dtype adt = in->a >= 0 ? ins[in->a].dtype : in->dtype;
    int mem = in->op == KOP_LOAD || in->op == KOP_STORE;
    if ((mem || in->op == KOP_INDEX)
        && (in->arg < 0 || in->arg >= s->k->nargs
            || mem != (s->k->args[in->arg].buffer != TC_KARG_INDEX))) {
        fail(e, "%s: bad argument slot at %d", s->k->name, i);
        return;
    }
    if ((mem || in->op == KOP_INDEX) && s->coord != NULL && !s->lane_mode) {
        arg_access(s, in->arg);
    }
    switch (in->op) {
    case KOP_CONST:
        if (e->generic && in->arg >= TC_KCONST_PARAM) {
            /* a parameter: the double's bits in the block */
            reg d = newreg(e, C_FD);
            out(e, "mov.b64 %s, %s;", R(d),
                R(e->g64[tc_dims_param_slot(e->gnd, e->gnargs,
                                            in->arg - TC_KCONST_PARAM)]));
            if (in->dtype == TC_F32) {
                reg f = newreg(e, C_F);
                out(e, "cvt.rn.f32.f64 %s, %s;", R(f), R(d));
                d = f;
            }
            s->val[i] = d;
            return;
        }
        s->val[i] = const_reg(e, in->dtype, in->imm.f, in->imm.i);
        return;
    case KOP_INDEX:
        if (s->off == NULL || s->lane_mode) {
            fail(e, "%s: KOP_INDEX outside a scalar pointwise loop",
                 s->k->name);
            return;
        }
        s->val[i] = newreg(e, C_RD);
        if (s->off[in->arg].c == C_RD) {
            out(e, "mov.s64 %s, %s;", R(s->val[i]), R(s->off[in->arg]));
        }
        else {
            out(e, "cvt.s64.s32 %s, %s;", R(s->val[i]), R(s->off[in->arg]));
        }
        return;
    case KOP_LOAD: {
        tc_dtype mt = s->k->args[in->arg].dtype;
        reg v;
        if (s->lane_mode) {
            v = s->lane_in[in->arg];
        }
        else {
            v = newv(e, mt);
            out(e, "ld.global%s.%s %s, [%s];", s->nc[in->arg] ? ".nc" : "",
                memty(mt), R(v), R(s->addr[in->arg]));
        }
        if (mt != in->dtype) {
            reg d = newv(e, in->dtype);
            emit_cast(e, d, in->dtype, v, mt);
            v = d;
        }
        s->val[i] = v;
        return;
    }
    case KOP_STORE: {
        tc_dtype mt = s->k->args[in->arg].dtype;
        reg v = a;
        if (adt != mt) {
            v = newv(e, mt);
            emit_cast(e, v, mt, a, adt);
        }
        if (s->lane_mode) {
            s->lane_out[in->arg] = v;
            return;
        }
        if (s->store_pred.n >= 0) {
            out(e, "@%s st.global.%s [%s], %s;", R(s->store_pred), memty(mt),
                R(s->addr[in->arg]), R(v));
        }
        else {
            out(e, "st.global.%s [%s], %s;", memty(mt), R(s->addr[in->arg]),
                R(v));
        }
        return;
    }
    case KOP_CAST:
        s->val[i] = newv(e, in->dtype);
        emit_cast(e, s->val[i], in->dtype, a, adt);
        return;
    case KOP_BITCAST:
        s->val[i] = newv(e, in->dtype);
        emit_bitcast(e, s->val[i], in->dtype, a, adt);
        return;
    case KOP_LT:
    case KOP_LE:
    case KOP_EQ:
    case KOP_NE: {
        reg p = emit_setp(e, in->op, adt, a, b);
        s->val[i] = newreg(e, C_R);
        out(e, "selp.u32 %s, 1, 0, %s;", R(s->val[i]), R(p));
        return;
    }
    case KOP_WHERE: {
        reg p = newreg(e, C_P);
        out(e, "setp.ne.u32 %s, %s, 0;", R(p), R(a));
        s->val[i] = newv(e, in->dtype);
        out(e, "selp.%s %s, %s, %s, %s;", bty(in->dtype), R(s->val[i]), R(b),
            R(c), R(p));
        return;
    }
    case KOP_ACC: {
        tc_acc_kind kind = (tc_acc_kind)in->imm.i;
        s->acc_v[i] = newv(e, in->dtype);
        s->acc_i[i] = acc_second(e, kind, in->dtype);
        acc_identity(e, kind, in->dtype, s->acc_v[i], s->acc_i[i]);
        s->val[i] = s->acc_v[i];
        return;
    }
    case KOP_ACC_UPDATE: {
        const tc_kinst *acc = &ins[in->a];
        if (acc->op != KOP_ACC || in->b < 0) {
            fail(e, "%s: ACC_UPDATE without accumulator", s->k->name);
            return;
        }
        tc_acc_kind kind = (tc_acc_kind)acc->imm.i;
        acc_combine(e, kind, acc->dtype, s->acc_v[in->a], s->acc_i[in->a], b,
                    tc_acc_sems[kind].online ? NOREG : s->ridx64);
        return;
    }
    case KOP_ACC_RESULT: {
        const tc_kinst *acc = &ins[in->a];
        if (acc->op != KOP_ACC) {
            fail(e, "%s: ACC_RESULT without accumulator", s->k->name);
            return;
        }
        if (in->imm.i == 1 && tc_acc_sems[acc->imm.i].online) {
            s->val[i] = newv(e, acc->dtype);
            out(e, "mov.%s %s, %s;", bty(acc->dtype), R(s->val[i]),
                R(s->acc_i[in->a]));
        }
        else if (in->imm.i == 1 && s->acc_i[in->a].n >= 0) {
            reg v = s->acc_i[in->a];
            if (in->dtype != TC_I64) {
                reg d = newv(e, in->dtype);
                emit_cast(e, d, in->dtype, v, TC_I64);
                v = d;
            }
            s->val[i] = v;
        }
        else {
            /* copy: later rows re-initialize the accumulator register */
            s->val[i] = newv(e, acc->dtype);
            out(e, "mov.%s %s, %s;", bty(acc->dtype), R(s->val[i]),
                R(s->acc_v[in->a]));
            if (acc->dtype != in->dtype) {
                reg d = newv(e, in->dtype);
                emit_cast(e, d, in->dtype, s->val[i], acc->dtype);
                s->val[i] = d;
            }
        }
        return;
    }
    default:
        break;
    }
    s->val[i] = newv(e, in->dtype);
    if (in->op >= KOP_NEG && in->op <= KOP_NOT) {
        emit_unary(e, in->op, in->dtype, s->val[i], a);
    }
    else if (in->op >= KOP_ADD && in->op <= KOP_SHR) {
        emit_binop(e, in->op, in->dtype, s->val[i], a, b);
    }
    else {
        fail(e, "%s: op %d unsupported on the GPU", s->k->name, (int)in->op);
    }
}

/* ---- entries ------------------------------------------------------------------- */

typedef struct entry {
    const tc_kernel *k;
    const char *name;
    em *e;
    reg *base;          /* [nargs]; n < 0: arg_base loads it where needed */
    char *nc;
    int wide;
    int scratch;        /* split reductions: one more .u64 parameter */
    reg scratch_base;   /* its global address */
    int lazy_base;      /* pointwise: base pointers where needed */
    const nest *lo, *lr;/* the outer and reduction loop nests */
    int column;         /* reductions: rows per column tile (8, 16, 32;
                           column_tiles), 0: a block per row */
    int nparts;         /* pointwise vector entry: independent parts, each
                           with blocks of its own (vec_parts), when > 1 */
    const int *part;    /* [ninsts] tc_kernel_parts */
    int maxntid;        /* threads per block at most (.maxntid), 0: 1024
                           for size-generic kernels and column tiles */
} entry;

/* Product of nest l's sizes (size-generic kernels) into p[0] (u32) and
 * p[1] (u64). */
static void
dims_product(em *e, const nest *l, reg *p)
{
    p[1] = newreg(e, C_RD);
    out(e, "mov.u64 %s, 1;", R(p[1]));
    for (int d = 0; d < l->nd; d++) {
        out(e, "mul.lo.u64 %s, %s, %s;", R(p[1]), R(p[1]),
            R(e->g64[l->slot0 + d]));
    }
    p[0] = newreg(e, C_R);
    out(e, "cvt.u32.u64 %s, %s;", R(p[0]), R(p[1]));
}

/* Header, parameters, base pointers.  The body follows in e->b; the
 * register declarations are inserted by finish_entry. */
static void
begin_entry(entry *en, sbuf *mod)
{
    const tc_kernel *k = en->k;
    if (en->column) {   /* tests/test_column_reduce.py looks for it */
        sb_printf(mod, "\n// column tiles: %d rows", en->column);
        if (en->scratch) {
            sb_printf(mod, ", split");
        }
    }
    sb_printf(mod, "\n.visible .entry %s(", en->name);
    for (int a = 0; a < k->nargs; a++) {
        sb_printf(mod, "%s\n\t.param .u64 %s_p%d", a ? "," : "", en->name, a);
    }
    if (en->scratch) {
        sb_printf(mod, "%s\n\t.param .u64 %s_p%d", k->nargs ? "," : "",
                  en->name, k->nargs);
    }
    em *e = en->e;
    if (e->generic) {
        /* the block as one parameter: the launch copies it, so it costs
         * no allocation and no copy of its own */
        sb_printf(mod, "%s\n\t.param .align 8 .b8 %s_d[%d]",
                  k->nargs ? "," : "", en->name, 8 * e->gslots);
    }
    /* a size-generic kernel is launched with the block each size picks
     * (up to 1024 threads for one long row): ptxas must keep its
     * registers within what 1024 threads may have, or such a launch fails
     * with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (H100, persistent rows) */
    if (en->maxntid > 0) {
        sb_printf(mod, ")\n.maxntid %d, 1, 1\n{\n", en->maxntid);
    }
    else {
        sb_printf(mod, ")%s\n{\n",
                  e->generic || en->column ? "\n.maxntid 1024, 1, 1" : "");
    }
    for (int a = 0; a < k->nargs + (en->scratch != 0); a++) {
        if (a < k->nargs && en->lazy_base) {
            en->base[a] = NOREG;
            continue;
        }
        reg t = newreg(en->e, C_RD);
        reg b = newreg(en->e, C_RD);
        out(en->e, "ld.param.u64 %s, [%s_p%d];", R(t), en->name, a);
        out(en->e, "cvta.to.global.u64 %s, %s;", R(b), R(t));
        if (a < k->nargs) {
            en->base[a] = b;
        }
        else {
            en->scratch_base = b;
        }
    }
    if (e->generic) {
        for (int j = 0; j < e->gslots; j++) {
            e->g64[j] = newreg(e, C_RD);
            e->g32[j] = newreg(e, C_R);
            out(e, "ld.param.u64 %s, [%s_d+%d];", R(e->g64[j]), en->name,
                8 * j);
            out(e, "cvt.u32.u64 %s, %s;", R(e->g32[j]), R(e->g64[j]));
        }
        dims_product(e, en->lo, e->gnumel);
        dims_product(e, en->lr, e->gred);
    }
}

/* The global address of argument a's buffer.  Pointwise entries load it
 * from its parameter at each use (once per loop body): the parameter is
 * a constant-bank operand to ptxas, where a pointer loaded at the top
 * holds a 64-bit register across the loop, ~190 of them in an optimizer
 * step's grouped kernel. */
static reg
arg_base(entry *en, int a)
{
    if (en->base[a].n >= 0) {
        return en->base[a];
    }
    em *e = en->e;
    reg t = newreg(e, C_RD), b = newreg(e, C_RD);
    out(e, "ld.param.u64 %s, [%s_p%d];", R(t), en->name, a);
    out(e, "cvta.to.global.u64 %s, %s;", R(b), R(t));
    return b;
}

/* Offset (and address, for memory) of argument a in the scalar pointwise
 * loop, emitted at the body's first access of a: with every argument's
 * computed at the top of the loop, a grouped kernel of many members kept
 * them all live across its body. */
static void
arg_access(body *s, int a)
{
    const tc_karg *ka = &s->k->args[a];
    int wide = s->en->wide;
    if (s->off[a].n >= 0) {
        return;
    }
    s->off[a] = emit_offset(s->e, s->l, wide, ka->offset, a, s->coord);
    if (ka->buffer != TC_KARG_INDEX) {
        s->addr[a] = emit_addr(s->e, arg_base(s->en, a), s->off[a], wide,
                               ka->dtype);
    }
}

static void
finish_entry(entry *en, sbuf *mod)
{
    em *e = en->e;
    for (int c = 0; c < C_N; c++) {
        if (e->cnt[c] > 0) {
            sb_printf(mod, "\t.reg %s %s<%d>;\n", cls_decl[c], cls_prefix[c],
                      e->cnt[c]);
        }
    }
    if (e->b.s != NULL) {
        sb_printf(mod, "%s", e->b.s);
    }
    sb_printf(mod, "\tret;\n}\n");
}

static void
reset_em(em *e, int sm)
{
    tc_textbuf_free(&e->b);
    em keep = *e;
    memset(e, 0, sizeof(*e));
    e->sm = sm;
    e->math_flags = keep.math_flags;
    e->funcs = keep.funcs;
    e->failed = keep.failed;
    memcpy(e->err, keep.err, sizeof(e->err));
    e->generic = keep.generic;
    e->gnd = keep.gnd;
    e->gnargs = keep.gnargs;
    e->gslots = keep.gslots;
    e->g64 = keep.g64;
    e->g32 = keep.g32;
}

/* Global thread index and grid stride (u32 or u64).  With nparts > 1
 * the grid is nparts equal ranges of blocks (vec_parts): *part is the
 * block's range, and the index and stride are within it. */
static void
emit_gtid_parts(em *e, int wide, int nparts, reg *part, reg *idx,
                reg *stride)
{
    reg t = newreg(e, C_R), nt = newreg(e, C_R), ct = newreg(e, C_R),
        nc = newreg(e, C_R);
    out(e, "mov.u32 %s, %%tid.x;", R(t));
    out(e, "mov.u32 %s, %%ntid.x;", R(nt));
    out(e, "mov.u32 %s, %%ctaid.x;", R(ct));
    out(e, "mov.u32 %s, %%nctaid.x;", R(nc));
    if (nparts > 1) {
        /* blocks a range, the block's range, its block within it */
        reg per = newreg(e, C_R), lb = newreg(e, C_R);
        *part = newreg(e, C_R);
        out(e, "div.u32 %s, %s, %d;", R(per), R(nc), nparts);
        out(e, "div.u32 %s, %s, %s;", R(*part), R(ct), R(per));
        out(e, "mul.lo.u32 %s, %s, %s;", R(lb), R(*part), R(per));
        out(e, "sub.u32 %s, %s, %s;", R(lb), R(ct), R(lb));
        ct = lb;
        nc = per;
    }
    if (wide) {
        *idx = newreg(e, C_RD);
        *stride = newreg(e, C_RD);
        reg t64 = newreg(e, C_RD);
        out(e, "mul.wide.u32 %s, %s, %s;", R(*idx), R(ct), R(nt));
        out(e, "cvt.u64.u32 %s, %s;", R(t64), R(t));
        out(e, "add.u64 %s, %s, %s;", R(*idx), R(*idx), R(t64));
        out(e, "mul.wide.u32 %s, %s, %s;", R(*stride), R(nc), R(nt));
    }
    else {
        *idx = newreg(e, C_R);
        *stride = newreg(e, C_R);
        out(e, "mad.lo.u32 %s, %s, %s, %s;", R(*idx), R(ct), R(nt), R(t));
        out(e, "mul.lo.u32 %s, %s, %s;", R(*stride), R(nc), R(nt));
    }
}

static void
emit_gtid(em *e, int wide, reg *idx, reg *stride)
{
    emit_gtid_parts(e, wide, 1, NULL, idx, stride);
}

static void
label(em *e, const char *name, int id)
{
    sb_printf(&e->b, "$%s_%d:\n", name, id);
}

/* Per-argument "used by some LOAD/STORE/INDEX in insts[b, e)". */
static void
used_args(const tc_kernel *k, int b, int e, char *used)
{
    memset(used, 0, (size_t)(k->nargs > 0 ? k->nargs : 1));
    for (int i = b; i < e; i++) {
        tc_kop op = k->insts[i].op;
        if (op == KOP_LOAD || op == KOP_STORE || op == KOP_INDEX) {
            if (k->insts[i].arg >= 0 && k->insts[i].arg < k->nargs) {
                used[k->insts[i].arg] = 1;
            }
        }
    }
}

/* One pass of the scalar pointwise loop: idx from start, step stride. */
static void
emit_pointwise_loop(entry *en, const nest *l, reg idx, reg stride)
{
    em *e = en->e;
    const tc_kernel *k = en->k;
    int id = e->label++;
    const char *it = en->wide ? "u64" : "u32";
    reg p = newreg(e, C_P);
    out(e, "setp.ge.%s %s, %s, %s;", it, R(p), R(idx),
        numop(e, 0, k->numel, en->wide));
    out(e, "@%s bra $done_%d;", R(p), id);
    label(e, "loop", id);
    int na = k->nargs > 0 ? k->nargs : 1;
    reg *off = malloc(sizeof(reg) * (size_t)na);
    reg *addr = malloc(sizeof(reg) * (size_t)na);
    reg *val = calloc((size_t)(k->ninsts + 1), sizeof(reg));
    if (!off || !addr || !val) {
        fail(e, "out of memory");
        goto done;
    }
    for (int a = 0; a < na; a++) {
        off[a] = addr[a] = NOREG;
    }
    reg coord[TC_MAX_DIMS];
    emit_coords(e, idx, l, en->wide, coord);
    body s = {0};
    s.e = e;
    s.k = k;
    s.val = val;
    s.base = en->base;
    s.addr = addr;
    s.off = off;
    s.nc = en->nc;
    s.store_pred = NOREG;
    s.en = en;
    s.l = l;
    s.coord = coord;
    for (int i = 0; i < k->ninsts && !e->failed; i++) {
        emit_inst(&s, i);
    }
    out(e, "add.%s %s, %s, %s;", it, R(idx), R(idx), R(stride));
    out(e, "setp.lt.%s %s, %s, %s;", it, R(p), R(idx),
        numop(e, 0, k->numel, en->wide));
    out(e, "@%s bra $loop_%d;", R(p), id);
    label(e, "done", id);
done:
    free(off);
    free(addr);
    free(val);
}

static void
emit_pointwise(entry *en, const nest *l)
{
    reg idx, stride;
    emit_gtid(en->e, en->wide, &idx, &stride);
    emit_pointwise_loop(en, l, idx, stride);
}

/* Kernel parameter space every target has (ptxas: "uses too much
 * parameter space" past it). */
#define TC_PTX_PARAM_BYTES 4096

/* Threads per block at most (every reduction target variant stays within
 * it: block_one_row, 2 * block_rows). */
#define TC_PTX_MAX_BLOCK 1024

/* Lanes per thread of the vector entry: 16 bytes of the narrowest
 * operand (8 lanes when a 1- or 2-byte dtype takes part, so float16 /
 * bfloat16 streams move 128 bits per access like float32 ones). */
#define MAX_LANES 8

static int
vec_lanes(const tc_kernel *k)
{
    for (int a = 0; a < k->nargs; a++) {
        if (k->args[a].buffer != TC_KARG_INDEX && esize(k->args[a].dtype) <= 2) {
            return 8;
        }
    }
    return 4;
}

/* Can the kernel use the vector entry (vec_lanes wide)?  (ptx.h)
 * A 1-d nest: every argument contiguous or broadcast (stride 0), the tail
 * past the last whole vector done by the scalar loop.  A nest of more
 * dims (a bias or a per-row operand broadcast over a contiguous output:
 * the GELU of a linear, cross-entropy's backward) when its innermost size
 * is a whole number of vectors, so a vector never crosses a row: each
 * argument's innermost stride is 1, or 0 for an input (one load per
 * vector), and a contiguous argument's outer strides and offset keep its
 * vectors 16-byte aligned.  Not size-generic ones of more dims: their
 * innermost size is not known to be a whole number of vectors. */
static int
vectorizable(const tc_kernel *k, const nest *l, int generic)
{
    int vl = vec_lanes(k), in = l->nd - 1;
    if (k->nphases != 0 || l->nd < 1 || k->numel < vl
        || (l->nd > 1 && (generic || l->sizes[in] % vl != 0))) {
        return 0;
    }
    for (int a = 0; a < k->nargs; a++) {
        int64_t st = l->st[a][in];
        if (k->args[a].buffer == TC_KARG_INDEX) {
            /* positions (arange == target in cross-entropy's backward):
             * lane j's is lane 0's + j * st, st compiled in */
            if (generic && st != 0 && st != 1) {
                return 0;
            }
            continue;
        }
        if (st == 0 && !k->args[a].is_output) {
            continue;
        }
        int aligned = st == 1 && k->args[a].offset % vl == 0;
        for (int d = 0; d < in; d++) {
            aligned &= l->st[a][d] % vl == 0;
        }
        if (!aligned) {
            return 0;
        }
    }
    return 1;
}

/* Vector access of vl consecutive elements of dtype dt at addr: 16-byte
 * accesses of 4- and 8-byte elements, or packed 32-bit words of smaller
 * ones split with bfe. */
static void
vec_load(em *e, tc_dtype dt, int nc, reg addr, int vl, reg *lane)
{
    const char *n = nc ? ".nc" : "";
    int sz = esize(dt);
    char regs[256];
    for (int j = 0; j < vl; j++) {
        lane[j] = newv(e, dt);
    }
    if (sz >= 4) {
        int per = 16 / sz;
        for (int j = 0; j < vl; j += per) {
            reg_list(regs, sizeof(regs), &lane[j], per);
            out(e, "ld.global%s.v%d.%s %s, [%s+%d];", n, per,
                dt == TC_F32 ? "f32" : bty(dt), regs, R(addr), j * sz);
        }
        return;
    }
    int per_word = 4 / sz, nwords = vl / per_word;
    reg w[4] = {NOREG, NOREG, NOREG, NOREG};
    for (int i = 0; i < nwords; i++) {
        w[i] = newreg(e, C_R);
    }
    reg_list(regs, sizeof(regs), w, nwords);
    if (nwords == 1) {
        out(e, "ld.global%s.b32 %s, [%s];", n, R(w[0]), R(addr));
    }
    else {
        out(e, "ld.global%s.v%d.b32 %s, [%s];", n, nwords, regs, R(addr));
    }
    for (int j = 0; j < vl; j++) {
        reg wj = w[j / per_word];
        if (tc_dtype_is_reduced_float(dt)) {
            /* only the low 16 bits of a half lane count (emit_half_cast):
             * and / shr, which ptxas folds into the widening shift, where
             * a sign-extending bfe costs two more instructions per lane */
            if (j % 2 == 0) {
                out(e, "and.b32 %s, %s, 65535;", R(lane[j]), R(wj));
            }
            else {
                out(e, "shr.u32 %s, %s, 16;", R(lane[j]), R(wj));
            }
            continue;
        }
        out(e, "bfe.%s %s, %s, %d, %d;",
            sz == 2 || dt == TC_I8 ? "s32" : "u32", R(lane[j]), R(wj),
            8 * sz * (j % per_word), 8 * sz);
    }
}

static void
vec_store(em *e, tc_dtype dt, reg addr, int vl, const reg *lane)
{
    int sz = esize(dt);
    char regs[256];
    if (sz >= 4) {
        int per = 16 / sz;
        for (int j = 0; j < vl; j += per) {
            reg_list(regs, sizeof(regs), &lane[j], per);
            out(e, "st.global.v%d.%s [%s+%d], %s;", per,
                dt == TC_F32 ? "f32" : bty(dt), R(addr), j * sz, regs);
        }
        return;
    }
    int per_word = 4 / sz, nwords = vl / per_word, bitsz = 8 * sz;
    reg w[4] = {NOREG, NOREG, NOREG, NOREG};
    for (int i = 0; i < nwords; i++) {
        const reg *l = &lane[i * per_word];
        w[i] = newreg(e, C_R);
        out(e, "bfi.b32 %s, %s, %s, %d, %d;", R(w[i]), R(l[1]), R(l[0]),
            bitsz, bitsz);
        for (int j = 2; j < per_word; j++) {
            out(e, "bfi.b32 %s, %s, %s, %d, %d;", R(w[i]), R(l[j]), R(w[i]),
                bitsz * j, bitsz);
        }
    }
    reg_list(regs, sizeof(regs), w, nwords);
    if (nwords == 1) {
        out(e, "st.global.b32 [%s], %s;", R(addr), R(w[0]));
    }
    else {
        out(e, "st.global.v%d.b32 [%s], %s;", nwords, R(addr), regs);
    }
}

/* The vector loop's arguments (emit_pointwise_vec): an argument's address
 * and its 16-byte loads are emitted where the body first reads it, its
 * stores after the body's last STORE to it.  A grouped kernel of many
 * members (an optimizer step: 48 parameters, ~190 pointers) then keeps one
 * member's values live at a time; with every address and load at the top
 * and every store at the bottom, hundreds of registers stayed live across
 * the body and ptxas took seconds to allocate them.  The loads still all
 * read memory as it was before the kernel: a store is emitted only after
 * every load of its buffer (vec_arg_store), as when every load came
 * first. */
typedef struct {
    entry *en;
    const nest *l;
    int vl;
    reg e4;             /* element offset of lane 0 (without offsets) */
    reg coord[TC_MAX_DIMS]; /* nests of more dims: e4's coordinates */
    reg *addr;          /* [nargs] n < 0 until emitted */
    reg *off;           /* [nargs] element offset of lane 0, n < 0 until
                           emitted */
    char *loads;        /* [nargs] some LOAD reads the argument */
    char *loaded;       /* [nargs] its lanes are in lanes_in */
    char *stores;       /* [nargs] some STORE writes it */
    char *early;        /* [nargs] stored after its last STORE (no other
                           stored argument shares its buffer); else after
                           the body, in argument order */
    int *last_store;    /* [nargs] that STORE */
    int *order, nload;  /* the loaded arguments by their first LOAD */
    int *pos;           /* [nargs] position in order */
    reg *lanes_in, *lanes_out;  /* [nargs * MAX_LANES] */
    const char *arg_in; /* [nargs] the arguments of the part being emitted
                           (vec_parts), NULL: all */
    char *uniform;      /* [ninsts] the same value in every lane
                           (uniform_leaf) */
} vec_args;

/* Element offset of argument a's lane 0, emitted once per iteration. */
static reg
vec_arg_off(vec_args *v, int a)
{
    entry *en = v->en;
    em *e = en->e;
    const tc_karg *ka = &en->k->args[a];
    const char *st = en->wide ? "s64" : "s32";
    if (v->off[a].n >= 0) {
        return v->off[a];
    }
    if (v->l->nd > 1) {
        v->off[a] = emit_offset(e, v->l, en->wide, ka->offset, a, v->coord);
        return v->off[a];
    }
    reg off = newreg(e, v->e4.c);
    const char *oop = ka->offset != 0
                          ? dimop(e, tc_dims_offset_slot(e->gnd, e->gnargs,
                                                         a),
                                  ka->offset, en->wide)
                          : "0";
    int64_t sd = v->l->st[a][0];
    if (sd == 1) {
        out(e, "add.%s %s, %s, %s;", st, R(off), R(v->e4), oop);
    }
    else if (sd == 0) {
        out(e, "mov.%s %s, %s;", st, R(off), oop);
    }
    else {      /* an index argument's stride (never size-generic) */
        out(e, "mad.lo.%s %s, %s, %lld, %s;", st, R(off), R(v->e4),
            (long long)sd, oop);
    }
    v->off[a] = off;
    return off;
}

static reg
vec_arg_addr(vec_args *v, int a)
{
    entry *en = v->en;
    const tc_karg *ka = &en->k->args[a];
    if (v->addr[a].n < 0) {
        v->addr[a] = emit_addr(en->e, arg_base(en, a), vec_arg_off(v, a),
                               en->wide, ka->dtype);
    }
    return v->addr[a];
}

/* KOP_INDEX i of index argument a for every lane: lane 0's offset plus
 * j times the innermost stride, as s64. */
static void
vec_index(vec_args *v, reg *val, int i, int a)
{
    em *e = v->en->e;
    size_t n = (size_t)(v->en->k->ninsts + 1);
    reg off = vec_arg_off(v, a), o64 = off;
    if (off.c != C_RD) {
        o64 = newreg(e, C_RD);
        out(e, "cvt.s64.s32 %s, %s;", R(o64), R(off));
    }
    int64_t sd = v->l->st[a][v->l->nd - 1];
    for (int j = 0; j < v->vl; j++) {
        reg d = newreg(e, C_RD);
        out(e, "add.s64 %s, %s, %lld;", R(d), R(o64), (long long)(j * sd));
        val[(size_t)j * n + (size_t)i] = d;
    }
}

static void
vec_arg_load1(vec_args *v, int a)
{
    entry *en = v->en;
    em *e = en->e;
    const tc_karg *ka = &en->k->args[a];
    if (v->loaded[a]) {
        return;
    }
    v->loaded[a] = 1;
    reg addr = vec_arg_addr(v, a);
    if (v->l->st[a][v->l->nd - 1] == 1) {
        vec_load(e, ka->dtype, en->nc[a], addr, v->vl,
                 &v->lanes_in[MAX_LANES * a]);
        return;
    }
    reg x = newv(e, ka->dtype);
    out(e, "ld.global%s.%s %s, [%s];", en->nc[a] ? ".nc" : "",
        memty(ka->dtype), R(x), R(addr));
    for (int j = 0; j < v->vl; j++) {
        v->lanes_in[MAX_LANES * a + j] = x;
    }
}

/* Argument a's loads where the body first reads it, and the loads of the
 * next arguments the body reads up to VEC_LOAD_AHEAD registers: a load
 * from a buffer the kernel also writes (an in-place update's) cannot move
 * above an earlier store to another buffer (ptxas does not know that they
 * do not alias), so without loads ahead the members of a group would wait
 * for their loads one after the other. */
#define VEC_LOAD_AHEAD 64

static void
vec_arg_load(vec_args *v, int a)
{
    vec_arg_load1(v, a);
    int regs = 0;
    for (int q = v->pos[a] + 1; q < v->nload && regs < VEC_LOAD_AHEAD; q++) {
        int b = v->order[q];
        if (v->arg_in != NULL && !v->arg_in[b]) {
            continue;
        }
        regs += v->l->st[b][v->l->nd - 1] == 1 ? v->vl : 1;
        vec_arg_load1(v, b);
    }
}

static void
vec_arg_store(vec_args *v, int a)
{
    const tc_kernel *k = v->en->k;
    for (int b = 0; b < k->nargs; b++) {
        if (v->loads[b] && k->args[b].buffer == k->args[a].buffer) {
            vec_arg_load1(v, b);
        }
    }
    vec_store(v->en->e, k->args[a].dtype, vec_arg_addr(v, a), v->vl,
              &v->lanes_out[MAX_LANES * a]);
}

/* Instruction i (a float DIV or SQRT) for every lane, 4 lanes a call. */
static void
vec_rn(body *s, reg *val, int vl, int i)
{
    const tc_kinst *in = &s->k->insts[i];
    size_t n = (size_t)(s->k->ninsts + 1);
    for (int j0 = 0; j0 < vl; j0 += 4) {
        reg d[4], a[4], b[4];
        for (int j = 0; j < 4; j++) {
            reg *lane = val + (size_t)(j0 + j) * n;
            lane[i] = d[j] = newv(s->e, in->dtype);
            a[j] = lane[in->a];
            b[j] = in->b >= 0 ? lane[in->b] : NOREG;
        }
        emit_rn4(s->e, in->dtype, d, a, in->op == KOP_DIV ? b : NULL);
    }
}

/* Which values are the same in every lane (tc_kernel_leaf_values with
 * these leaves): constants and loads of an argument broadcast along the
 * vector (stride 0: a per-row value like cross-entropy's loss scale or a
 * layer norm's mean), not positions.  The body computes them once, not
 * once a lane: ptxas does not merge the lanes' copies (a div.rn is a
 * branch to a slow path), and cross-entropy's backward over GPT-2's
 * logits did 8 div.rn a vector where 2 give the same values. */
static int
uniform_leaf(const tc_kernel *k, int i, void *ctx)
{
    const nest *l = ctx;
    const tc_kinst *in = &k->insts[i];
    return in->op == KOP_CONST
           || (in->op == KOP_LOAD && l->st[in->arg][l->nd - 1] == 0);
}

/* One iteration of the vector loop: instruction by instruction, each for
 * every lane (a uniform value once: uniform_leaf); want[i] says which
 * (NULL: all). */
static void
vec_body(vec_args *v, body *s, reg *val, const char *want)
{
    em *e = v->en->e;
    const tc_kernel *k = v->en->k;
    size_t n = (size_t)(k->ninsts + 1);     /* values a lane */
    for (int i = 0; i < k->ninsts && !e->failed; i++) {
        const tc_kinst *in = &k->insts[i];
        if (want != NULL && !want[i]) {
            continue;
        }
        if (in->op == KOP_LOAD) {
            vec_arg_load(v, in->arg);
        }
        if (in->op == KOP_INDEX) {
            vec_index(v, val, i, in->arg);
            continue;
        }
        if (v->uniform[i] && in->op != KOP_LOAD) {
            s->val = val;
            emit_inst(s, i);
            for (int j = 1; j < v->vl; j++) {
                val[(size_t)j * n + (size_t)i] = val[i];
            }
            continue;
        }
        if ((in->op == KOP_DIV || in->op == KOP_SQRT) && is_float(in->dtype)
            && e->rn_call && in->a >= 0 && in->a < i && in->b < i) {
            vec_rn(s, val, v->vl, i);
            continue;
        }
        for (int j = 0; j < v->vl && !e->failed; j++) {
            s->val = val + (size_t)j * n;
            if (in->op == KOP_LOAD) {
                s->lane_in[in->arg] = v->lanes_in[MAX_LANES * in->arg + j];
            }
            emit_inst(s, i);
            if (in->op == KOP_STORE) {
                v->lanes_out[MAX_LANES * in->arg + j] = s->lane_out[in->arg];
            }
        }
        if (in->op == KOP_STORE && v->early[in->arg]
            && v->last_store[in->arg] == i && !e->failed) {
            vec_arg_store(v, in->arg);
        }
    }
    for (int a = 0; a < k->nargs && !e->failed; a++) {
        if (v->stores[a] && !v->early[a]
            && (want == NULL || want[v->last_store[a]])) {
            vec_arg_store(v, a);
        }
    }
}

/* The vector loop from vector idx, stride vectors a step, while below
 * nvec_op (an immediate or a register). */
static void
vec_loop(vec_args *v, body *s, reg *val, reg idx, reg stride,
         const char *nvec_op, const char *want)
{
    entry *en = v->en;
    em *e = en->e;
    const char *it = en->wide ? "u64" : "u32";
    int id = e->label++;
    reg p = newreg(e, C_P);
    out(e, "setp.ge.%s %s, %s, %s;", it, R(p), R(idx), nvec_op);
    out(e, "@%s bra $vdone_%d;", R(p), id);
    label(e, "vloop", id);
    /* element offset of lane 0: vl * idx + offset (stride 1) or offset */
    v->e4 = newreg(e, idx.c);
    out(e, "shl.b%d %s, %s, %d;", en->wide ? 64 : 32, R(v->e4), R(idx),
        v->vl == 8 ? 3 : 2);
    if (v->l->nd > 1) {
        emit_coords(e, v->e4, v->l, en->wide, v->coord);
    }
    vec_body(v, s, val, want);
    out(e, "add.%s %s, %s, %s;", it, R(idx), R(idx), R(stride));
    out(e, "setp.lt.%s %s, %s, %s;", it, R(p), R(idx), nvec_op);
    out(e, "@%s bra $vloop_%d;", R(p), id);
    label(e, "vdone", id);
}

/* want[i]: instruction i is in part q or a shared value one of them
 * reads; arg_in[a]: the part accesses argument a. */
static void
part_want(const tc_kernel *k, const int *part, int q, char *want,
          char *arg_in)
{
    memset(arg_in, 0, (size_t)k->nargs + 1);
    for (int i = 0; i < k->ninsts; i++) {
        want[i] = part[i] == q;
    }
    for (int i = k->ninsts - 1; i >= 0; i--) {
        const tc_kinst *in = &k->insts[i];
        int ops[3] = {in->a, in->b, in->c};
        for (int j = 0; j < 3 && want[i]; j++) {
            if (ops[j] >= 0 && part[ops[j]] < 0) {
                want[ops[j]] = 1;
            }
        }
        if (want[i] && (in->op == KOP_LOAD || in->op == KOP_STORE)) {
            arg_in[in->arg] = 1;
        }
    }
}

/* The vector loop of a kernel of independent parts (tc_kernel_parts: a
 * horizontally fused one, like an optimizer step's): the grid is nparts
 * equal ranges of blocks, and a block runs its range's part only.  With
 * every member in every thread, the 12-member kernels of GPT-2's AdamW
 * step kept 106 registers a thread (2 blocks an SM) and moved 2.8 TB/s
 * on an H200, where Inductor's kernels, a block per tensor, moved ~3.9. */
static void
vec_parts(vec_args *v, body *s, reg *val)
{
    entry *en = v->en;
    em *e = en->e;
    const tc_kernel *k = en->k;
    char *want = malloc((size_t)k->ninsts + 1);
    char *arg_in = malloc((size_t)k->nargs + 1);
    if (want == NULL || arg_in == NULL) {
        fail(e, "out of memory");
        goto done;
    }
    reg q, idx, stride;
    emit_gtid_parts(e, en->wide, en->nparts, &q, &idx, &stride);
    char nvec_op[24];
    snprintf(nvec_op, sizeof(nvec_op), "%lld",
             (long long)(k->numel / v->vl));
    int end = e->label++;
    for (int p = 0; p < en->nparts && !e->failed; p++) {
        int next = e->label++;
        reg pn = newreg(e, C_P);
        out(e, "setp.ne.u32 %s, %s, %d;", R(pn), R(q), p);
        out(e, "@%s bra $vpart_%d;", R(pn), next);
        part_want(k, en->part, p, want, arg_in);
        /* a part's registers are its own: nothing carries over */
        for (int a = 0; a < k->nargs; a++) {
            v->addr[a] = v->off[a] = NOREG;
            v->loaded[a] = 0;
        }
        v->arg_in = arg_in;
        vec_loop(v, s, val, idx, stride, nvec_op, want);
        out(e, "bra $vpend_%d;", end);
        label(e, "vpart", next);
    }
    label(e, "vpend", end);
done:
    v->arg_in = NULL;
    free(want);
    free(arg_in);
}

static void
emit_pointwise_vec(entry *en, const nest *l)
{
    em *e = en->e;
    const tc_kernel *k = en->k;
    int vl = vec_lanes(k);
    int64_t nvec = k->numel / vl;
    const char *it = en->wide ? "u64" : "u32";
    int na = k->nargs > 0 ? k->nargs : 1;
    vec_args v = {.en = en, .l = l, .vl = vl, .e4 = NOREG};
    v.addr = malloc(sizeof(reg) * (size_t)na);
    v.off = malloc(sizeof(reg) * (size_t)na);
    v.loads = calloc((size_t)na, 1);
    v.loaded = calloc((size_t)na, 1);
    v.stores = calloc((size_t)na, 1);
    v.early = calloc((size_t)na, 1);
    v.last_store = calloc((size_t)na, sizeof(int));
    v.order = calloc((size_t)na, sizeof(int));
    v.pos = calloc((size_t)na, sizeof(int));
    v.lanes_in = calloc((size_t)na * MAX_LANES, sizeof(reg));
    v.lanes_out = calloc((size_t)na * MAX_LANES, sizeof(reg));
    v.uniform = calloc((size_t)k->ninsts + 1, 1);
    reg *val = calloc((size_t)vl * (size_t)(k->ninsts + 1), sizeof(reg));
    reg *lin = calloc((size_t)na, sizeof(reg));
    reg *lout = calloc((size_t)na, sizeof(reg));
    if (!v.addr || !v.off || !v.loads || !v.loaded || !v.stores || !v.early
        || !v.last_store || !v.order || !v.pos || !v.lanes_in
        || !v.lanes_out || !v.uniform || !val || !lin || !lout) {
        fail(e, "out of memory");
        goto done;
    }
    for (int a = 0; a < na; a++) {
        v.addr[a] = v.off[a] = NOREG;
    }
    for (int i = 0; i < k->ninsts; i++) {
        int a = k->insts[i].arg;
        if (k->insts[i].op == KOP_LOAD && !v.loads[a]) {
            v.loads[a] = 1;
            v.pos[a] = v.nload;
            v.order[v.nload++] = a;
        }
        else if (k->insts[i].op == KOP_STORE) {
            v.stores[a] = 1;
            v.last_store[a] = i;
        }
    }
    for (int a = 0; a < k->nargs; a++) {
        v.early[a] = v.stores[a];
        for (int b = 0; b < k->nargs; b++) {
            if (b != a && v.stores[b]
                && k->args[b].buffer == k->args[a].buffer) {
                v.early[a] = 0;
            }
        }
    }
    tc_kernel_leaf_values(k, uniform_leaf, (void *)l, v.uniform);
    body s = {0};
    s.e = e;
    s.k = k;
    s.base = en->base;
    s.nc = en->nc;
    s.lane_mode = 1;
    s.lane_in = lin;
    s.lane_out = lout;
    s.store_pred = NOREG;
    if (en->nparts > 1) {
        vec_parts(&v, &s, val);
    }
    else {
        reg idx, stride;
        emit_gtid(e, en->wide, &idx, &stride);
        reg idx0 = newreg(e, idx.c);
        out(e, "mov.%s %s, %s;", it, R(idx0), R(idx));
        /* vectors (numel / vl) and the elements they cover */
        char nvec_op[24], nvec_el[24];
        snprintf(nvec_op, sizeof(nvec_op), "%lld", (long long)nvec);
        snprintf(nvec_el, sizeof(nvec_el), "%lld", (long long)(nvec * vl));
        if (e->generic) {
            reg nv = newreg(e, idx.c), ne = newreg(e, idx.c);
            out(e, "shr.%s %s, %s, %d;", it, R(nv),
                R(e->gnumel[en->wide != 0]), vl == 8 ? 3 : 2);
            out(e, "shl.b%d %s, %s, %d;", en->wide ? 64 : 32, R(ne), R(nv),
                vl == 8 ? 3 : 2);
            snprintf(nvec_op, sizeof(nvec_op), "%s", R(nv));
            snprintf(nvec_el, sizeof(nvec_el), "%s", R(ne));
        }
        vec_loop(&v, &s, val, idx, stride, nvec_op, NULL);
        if (e->generic || k->numel % vl != 0) {
            out(e, "add.%s %s, %s, %s;", it, R(idx0), R(idx0), nvec_el);
            emit_pointwise_loop(en, l, idx0, stride);
        }
    }
done:
    free(v.addr);
    free(v.off);
    free(v.loads);
    free(v.loaded);
    free(v.stores);
    free(v.early);
    free(v.last_store);
    free(v.order);
    free(v.pos);
    free(v.lanes_in);
    free(v.lanes_out);
    free(v.uniform);
    free(val);
    free(lin);
    free(lout);
}

/* ---- reductions ------------------------------------------------------------------ */

/* Accumulator sets per thread (kir.h: float sums of long rows must not be
 * one sequential chain per thread, and independent chains also keep more
 * loads in flight). */
#define TC_RED_UNROLL 4
/* ... at most (split column tiles: COLUMN_SPLIT_SETS) */
#define TC_RED_MAX_SETS 8

/* The GPU as a reduction target (reduce_plan.h).  A row runs on a block
 * (warp shuffles + shared memory combine the threads' partials): 256
 * threads for many rows, 1024 for a single row (the whole device is that
 * block).  Persistent rows: at most 16 points per thread (8 with 1024
 * threads, where a thread may use only 64 registers), unrolled bodies
 * within 4096 instructions.  Split rows: few rows (at most 2 per SM),
 * long ones (>= 32K points), one phase storing nothing before the
 * combine; enough 256-thread blocks to fill the device (8 per SM), each
 * thread still reducing >= 8 points (2048 per block), at most 4096.
 * Many rows (4 per SM or more) get the warps that give each thread ~12
 * points (row_points): GPT-2's layer norm backward over [4096, 768]
 * rows, 256 threads a row 10.9 us, 64 threads 8.4 us (H200, the entry
 * timed alone); its forward 15.2 -> 14.8 us. */
static tc_red_target
ptx_red_target(int sm_count, int variant)
{
    tc_red_target t = {
        .name = "ptx",
        .cross_thread = 1,
        .warp = 32,
        .block_rows = 256,
        .rows_busy = 4 * (int64_t)sm_count,
        .row_points = 12,
        .block_one_row = 1024,
        .persist_points = 16,
        .persist_points_big = 8,
        .persist_budget = 4096,
        .sets = TC_RED_UNROLL,
        .sets_long = TC_RED_UNROLL,
        .long_row = INT64_MAX,
        .sets_heavy = TC_RED_UNROLL,
        .heavy_body = INT_MAX,
        .sets_min_points = 2,
        .split_min_points = 32768,
        .split_max_rows = 2 * (int64_t)sm_count,
        .split_chunk = 2048,
        .split_fill = 8 * (int64_t)sm_count,
        .split_max_chunks = 4096,
        .split_min_chunks = 4,
        /* online softmax (kir_online.c) for looped rows: cross-entropy's
         * forward over [4096, 50304] on an H200 reads its logits once
         * instead of twice */
        .online = 1,
    };
    /* max-autotune candidates (ptx.h tc_ptx_emit_variant) */
    switch (variant) {
    case 1:             /* smaller blocks: more rows in flight per SM */
        t.block_rows = 128;
        t.block_one_row = 512;
        break;
    case 2:             /* larger blocks, fewer points per thread */
        t.block_rows = 512;
        t.persist_points = 8;
        break;
    case 3:             /* looped rows only, fewer split rows */
        t.persist_points = 0;
        t.persist_points_big = 0;
        t.split_min_points = 4 * t.split_min_points;
        break;
    default:
        break;
    }
    return t;
}

/* Region boundaries: region j (0..nphases) is pre_j / post = insts
 * [rb[j], re[j]). */
static void
regions(const tc_kernel *k, int *rb, int *re)
{
    for (int p = 0; p <= k->nphases; p++) {
        rb[p] = p == 0 ? 0 : k->phases[p - 1].end;
        re[p] = p == k->nphases ? k->ninsts : k->phases[p].begin;
    }
}

/* Shuffle register v (32 or 64 bits) across lanes: d = v of lane ^ off. */
static void
shfl(em *e, reg d, reg v, int off)
{
    if (v.c == C_RD || v.c == C_FD) {
        reg lo = newreg(e, C_R), hi = newreg(e, C_R);
        out(e, "mov.b64 {%s, %s}, %s;", R(lo), R(hi), R(v));
        out(e, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1;", R(lo), R(lo), off);
        out(e, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1;", R(hi), R(hi), off);
        out(e, "mov.b64 %s, {%s, %s};", R(d), R(lo), R(hi));
    }
    else {
        out(e, "shfl.sync.bfly.b32 %s, %s, %d, 31, -1;", R(d), R(v), off);
    }
}

/* The point at reduction index r of phase ph: its index (s->ridx64) and
 * its arguments' addresses (s->addr). */
static void
red_point_addrs(body *s, const entry *en, const nest *lr, int ph, reg r,
                const reg *ooff, char *used, reg *roff)
{
    em *e = s->e;
    const tc_kernel *k = s->k;
    int wide = en->wide;
    s->ridx64 = newreg(e, C_RD);
    if (wide) {
        out(e, "mov.b64 %s, %s;", R(s->ridx64), R(r));
    }
    else {
        out(e, "cvt.u64.u32 %s, %s;", R(s->ridx64), R(r));
    }
    used_args(k, k->phases[ph].begin, k->phases[ph].end, used);
    emit_offsets(e, r, lr, wide, NULL, used, roff);
    for (int a = 0; a < k->nargs; a++) {
        if (used[a]) {
            reg o = newreg(e, r.c);
            out(e, "add.%s %s, %s, %s;", wide ? "s64" : "s32", R(o),
                R(ooff[a]), R(roff[a]));
            s->addr[a] = emit_addr(e, en->base[a], o, wide, k->args[a].dtype);
        }
    }
}

/* Phase ph's body at the point s->addr / s->ridx64 address, accumulating
 * into s->acc_v / acc_i.  reuse (persistent rows, may be NULL):
 * reuse[i] >= 0 takes value i from that instruction of an earlier pass at
 * the same point instead of emitting it; pre (may be NULL): pre[i] set is
 * the value a load before the body gave (emit_red_points). */
static void
red_point_body(body *s, int ph, const int *reuse, const reg *pre)
{
    em *e = s->e;
    const tc_kernel *k = s->k;
    e->rn_hot = 1;
    for (int i = k->phases[ph].begin; i < k->phases[ph].end && !e->failed;
         i++) {
        if (reuse != NULL && reuse[i] >= 0) {
            s->val[i] = s->val[reuse[i]];
            continue;
        }
        if (pre != NULL && pre[i].n >= 0) {
            s->val[i] = pre[i];
            continue;
        }
        emit_inst(s, i);
    }
    e->rn_hot = 0;
}

/* One reduction point r of body ph (reuse: red_point_body). */
static void
emit_red_point(body *s, const entry *en, const nest *lr, int ph, reg r,
               const reg *ooff, char *used, reg *roff, const int *reuse)
{
    red_point_addrs(s, en, lr, ph, r, ooff, used, roff);
    red_point_body(s, ph, reuse, NULL);
}

/* nu points of phase ph at r, r + rstride, ..., each into its own
 * accumulator set, with the loads of read-only arguments of all points
 * first: ptxas does not move a load above the branch of an earlier
 * point's rcp.rn / div.rn slow path, so a body with one (tanh, GELU's
 * backward) kept one point's loads in flight per thread: GELU's
 * backward with its bias sum in split column tiles, [4096, 3072] on an
 * H200, 55.6 -> 50.7 us (column_split). */
static void
emit_red_points(body *s, const entry *en, const nest *lr, int ph, reg r,
                reg rstride, int nu, const reg *ooff, char *used, reg *roff,
                reg **accs, reg **acci)
{
    em *e = s->e;
    const tc_kernel *k = s->k;
    size_t na = (size_t)(k->nargs > 0 ? k->nargs : 1);
    size_t ni = (size_t)k->ninsts + 1;
    reg *addr = calloc((size_t)nu * na, sizeof(reg));
    reg *pre = malloc((size_t)nu * ni * sizeof(reg));
    reg *ridx = calloc((size_t)nu, sizeof(reg));
    reg *own = s->addr;
    if (addr == NULL || pre == NULL || ridx == NULL) {
        fail(e, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < (size_t)nu * ni; i++) {
        pre[i] = NOREG;
    }
    reg ru = r;
    for (int u = 0; u < nu && !e->failed; u++) {
        if (u > 0) {    /* ru = r + u * rstride */
            reg nx = newreg(e, r.c);
            out(e, "add.%s %s, %s, %s;", en->wide ? "u64" : "u32", R(nx),
                R(ru), R(rstride));
            ru = nx;
        }
        s->addr = addr + (size_t)u * na;
        red_point_addrs(s, en, lr, ph, ru, ooff, used, roff);
        ridx[u] = s->ridx64;
        for (int i = k->phases[ph].begin; i < k->phases[ph].end; i++) {
            const tc_kinst *in = &k->insts[i];
            if (in->op == KOP_LOAD && in->arg >= 0 && in->arg < k->nargs
                && s->nc[in->arg]) {
                emit_inst(s, i);
                pre[(size_t)u * ni + (size_t)i] = s->val[i];
            }
        }
    }
    for (int u = 0; u < nu && !e->failed; u++) {
        s->addr = addr + (size_t)u * na;
        s->ridx64 = ridx[u];
        s->acc_v = accs[u];
        s->acc_i = acci[u];
        red_point_body(s, ph, NULL, pre + (size_t)u * ni);
    }
done:
    s->addr = own;
    free(addr);
    free(pre);
    free(ridx);
}

/* Persistent rows (persist_points): the thread's points, their values. */
typedef struct {
    int npts;
    reg *rj;            /* [npts] r of point j: rfirst + j * rstride */
    reg plast;          /* n >= 0: the last point lies past the row */
    reg *past;          /* size-generic: [npts] point j lies past the row
                           (any may: the sizes are not known), or NULL */
    reg **vals;         /* [npts][ninsts + 1] */
    int *reuse;         /* [ninsts]: see emit_red_point */
    int *region;        /* [ninsts]: tc_kernel_regions */
} persist;

static void
persist_clear(persist *ps)
{
    if (ps->vals != NULL) {
        for (int j = 0; j < ps->npts; j++) {
            free(ps->vals[j]);
        }
    }
    free(ps->vals);
    free(ps->rj);
    free(ps->past);
    free(ps->reuse);
    free(ps->region);
    memset(ps, 0, sizeof(*ps));
}

/* Allocates ps for npts points and finds the body values a later pass can
 * take from an earlier one (none if the kernel writes what it reads). */
static int
persist_init(persist *ps, const tc_kernel *k, int npts)
{
    memset(ps, 0, sizeof(*ps));
    ps->plast = NOREG;
    if (npts == 0) {
        return 0;
    }
    size_t n = (size_t)k->ninsts + 1;
    ps->npts = npts;
    ps->rj = calloc((size_t)npts, sizeof(reg));
    ps->vals = calloc((size_t)npts, sizeof(reg *));
    ps->reuse = malloc(n * sizeof(int));
    int *region = ps->region = malloc(n * sizeof(int));
    int *vn = malloc(n * sizeof(int));
    int ok = ps->rj && ps->vals && ps->reuse && region && vn;
    for (int j = 0; ok && j < npts; j++) {
        ok = (ps->vals[j] = calloc(n, sizeof(reg))) != NULL;
    }
    if (ok) {
        tc_kernel_regions(k, region);
        tc_kernel_body_value_numbers(k, region, vn);
        int same_loads = !tc_kernel_writes_its_input(k);
        for (int i = 0; i < k->ninsts; i++) {
            int c = vn[i];
            int earlier = c != i && (region[c] & 1) && (region[i] & 1)
                          && region[c] < region[i];
            ps->reuse[i] = earlier && (same_loads
                                       || k->insts[i].op != KOP_LOAD)
                           ? c : -1;
        }
    }
    free(vn);
    if (!ok) {
        persist_clear(ps);
        return -1;
    }
    return 0;
}

/* Body ph of a persistent row: every point of the thread, unrolled, point
 * j accumulating into set j % nu.  Row scalars (pre/post values) are
 * shared by all points; body values are the point's own. */
static void
emit_persistent_body(body *s, const entry *en, const nest *lr, int ph,
                     const persist *ps, reg *const *accs, reg *const *acci,
                     int nu, const reg *ooff, char *used, reg *roff)
{
    em *e = s->e;
    const tc_kernel *k = s->k;
    reg *row_vals = s->val;
    for (int j = 0; j < ps->npts && !e->failed; j++) {
        reg *v = ps->vals[j];
        for (int i = 0; i < k->phases[ph].begin; i++) {
            if (!(ps->region[i] & 1)) {
                v[i] = row_vals[i];
            }
        }
        reg past = ps->past != NULL ? ps->past[j]
                   : j == ps->npts - 1 ? ps->plast : NOREG;
        int guard = past.n >= 0;
        int id = e->label++;
        if (guard) {
            out(e, "@%s bra $pskip_%d;", R(past), id);
        }
        s->val = v;
        s->acc_v = accs[j % nu];
        s->acc_i = acci[j % nu];
        emit_red_point(s, en, lr, ph, ps->rj[j], ooff, used, roff,
                       ps->reuse);
        if (guard) {
            label(e, "pskip", id);
        }
    }
    s->val = row_vals;
    s->acc_v = accs[0];
    s->acc_i = acci[0];
}

/* Split reductions (ptx.h): pass PARTIAL computes, for block b, the
 * partial accumulators of row b / S over the reduction points
 * r = (b % S) * ntid + tid + j * S * ntid and thread 0 writes them to the
 * scratch buffer; pass FINAL runs the rows as usual but reads and
 * combines the S partials of its row instead of running body_0.  Scratch
 * layout (tc_red_scratch_layout): per ACC, numel * S 8-byte value slots at
 * byte sc_off[i] (+ numel * S index slots after them for ARGMAX /
 * ARGMIN). */

/* Extra accumulator sets 1..nu-1 of phase ph, at their identities. */
static void
acc_sets_init(em *e, const tc_kernel *k, int ph, reg *const *accs,
              reg *const *acci, int nu)
{
    int pre = ph == 0 ? 0 : k->phases[ph - 1].end;
    for (int u = 1; u < nu; u++) {
        for (int i = pre; i < k->phases[ph].begin; i++) {
            const tc_kinst *in = &k->insts[i];
            if (in->op != KOP_ACC) {
                continue;
            }
            tc_acc_kind kind = (tc_acc_kind)in->imm.i;
            accs[u][i] = newv(e, in->dtype);
            acci[u][i] = acc_second(e, kind, in->dtype);
            acc_identity(e, kind, in->dtype, accs[u][i], acci[u][i]);
        }
    }
}

/* Folds the extra sets of phase ph into set 0. */
static void
acc_sets_fold(em *e, const tc_kernel *k, int ph, reg *const *accs,
              reg *const *acci, int nu)
{
    int pre = ph == 0 ? 0 : k->phases[ph - 1].end;
    for (int u = 1; u < nu; u++) {
        for (int i = pre; i < k->phases[ph].begin; i++) {
            const tc_kinst *in = &k->insts[i];
            if (in->op == KOP_ACC) {
                acc_combine(e, (tc_acc_kind)in->imm.i, in->dtype, accs[0][i],
                            acci[0][i], accs[u][i], acci[u][i]);
            }
        }
    }
}

/* Size-generic rows: (av, ai) = the partials of warps 0 .. ntid / 32 - 1
 * in the shared slots at smem + off (index slots 8 * nwarps further),
 * folded in warp order like the unrolled fold of emit_reduction. */
static void
fold_warps(em *e, tc_acc_kind kind, tc_dtype dt, reg av, reg ai, reg tv,
           reg ti, reg ntid, int off, int nwarps)
{
    int w = av.c == C_RD || av.c == C_FD ? 64 : 32;
    int id = e->label++;
    reg wp = newreg(e, C_R), nw = newreg(e, C_R), sa = newreg(e, C_R);
    reg q = newreg(e, C_P);
    out(e, "ld.shared.b%d %s, [smem+%d];", w, R(av), off);
    if (ai.n >= 0) {
        out(e, "ld.shared.b%d %s, [smem+%d];", comp_bits(ai), R(ai),
            off + 8 * nwarps);
    }
    out(e, "shr.u32 %s, %s, 5;", R(nw), R(ntid));
    out(e, "mov.u32 %s, 1;", R(wp));
    out(e, "setp.ge.u32 %s, %s, %s;", R(q), R(wp), R(nw));
    out(e, "@%s bra $wdone_%d;", R(q), id);
    label(e, "warps", id);
    out(e, "mov.u32 %s, smem;", R(sa));
    out(e, "mad.lo.u32 %s, %s, 8, %s;", R(sa), R(wp), R(sa));
    out(e, "ld.shared.b%d %s, [%s+%d];", w, R(tv), R(sa), off);
    if (ai.n >= 0) {
        out(e, "ld.shared.b%d %s, [%s+%d];", comp_bits(ti), R(ti), R(sa),
            off + 8 * nwarps);
    }
    acc_combine(e, kind, dt, av, ai, tv, ti);
    out(e, "add.u32 %s, %s, 1;", R(wp), R(wp));
    out(e, "setp.lt.u32 %s, %s, %s;", R(q), R(wp), R(nw));
    out(e, "@%s bra $warps_%d;", R(q), id);
    label(e, "wdone", id);
}

/* Column tiles: the row of this lane in the tile at `tile`; a lane past
 * the last row computes the last row again (its loads stay in bounds)
 * and stores nothing: *valid guards its stores, *pst the stores of one
 * thread per row (warp 0's). */
static reg
column_row(em *e, reg tile, reg lane, int64_t numel, int wide, reg *valid,
           reg warp0, reg *pst)
{
    const char *it = wide ? "u64" : "u32";
    reg r = newreg(e, tile.c);
    if (wide) {
        reg l64 = newreg(e, C_RD);
        out(e, "cvt.u64.u32 %s, %s;", R(l64), R(lane));
        out(e, "add.u64 %s, %s, %s;", R(r), R(tile), R(l64));
    }
    else {
        out(e, "add.u32 %s, %s, %s;", R(r), R(tile), R(lane));
    }
    *valid = newreg(e, C_P);
    *pst = newreg(e, C_P);
    out(e, "setp.lt.%s %s, %s, %lld;", it, R(*valid), R(r), (long long)numel);
    out(e, "and.pred %s, %s, %s;", R(*pst), R(*valid), R(warp0));
    out(e, "min.%s %s, %s, %lld;", it, R(r), R(r), (long long)(numel - 1));
    return r;
}

/* The partials of insts [b, e) of a block's threads combined, for rows of
 * col lanes each (col 1: a block per row, every lane on its points; else
 * column tiles): folded over a row's lanes of the warp by shuffles (xor 16
 * down to col), then over the warps through shared memory, a slot per
 * warp and row at wslot (stored by the lanes `first` says), read back by
 * every thread from its row's slots at lslot (col 1: smem), in warp
 * order: the same order for every row and run.  ntid (size-generic kernels, col 1): the
 * warps are counted at run time (fold_warps). */
static void
block_combine(em *e, const tc_kernel *k, int b, int end, int off,
              int nwarps, int col, reg wslot, reg lslot, reg first,
              reg ntid, reg *acc_v, reg *acc_i)
{
    int o = off, n = 8 * col * nwarps;
    for (int i = b; i < end; i++) {
        const tc_kinst *in = &k->insts[i];
        if (in->op != KOP_ACC) {
            continue;
        }
        tc_acc_kind kind = (tc_acc_kind)in->imm.i;
        int hasi = acc_has_second(kind);
        reg tv = newv(e, in->dtype);
        reg ti = acc_second(e, kind, in->dtype);
        for (int x = 16; x >= col; x /= 2) {
            shfl(e, tv, acc_v[i], x);
            if (hasi) {
                shfl(e, ti, acc_i[i], x);
            }
            acc_combine(e, kind, in->dtype, acc_v[i], acc_i[i], tv, ti);
        }
        if (nwarps == 1) {
            continue;
        }
        int w = acc_v[i].c == C_RD || acc_v[i].c == C_FD ? 64 : 32;
        out(e, "@%s st.shared.b%d [%s+%d], %s;", R(first), w, R(wslot), o,
            R(acc_v[i]));
        if (hasi) {
            out(e, "@%s st.shared.b%d [%s+%d], %s;", R(first),
                comp_bits(acc_i[i]), R(wslot), o + n, R(acc_i[i]));
        }
        o += n * (hasi ? 2 : 1);
    }
    if (o == off) {
        return;
    }
    out(e, "bar.sync 0;");
    o = off;
    for (int i = b; i < end; i++) {
        const tc_kinst *in = &k->insts[i];
        if (in->op != KOP_ACC) {
            continue;
        }
        tc_acc_kind kind = (tc_acc_kind)in->imm.i;
        int hasi = acc_has_second(kind);
        int w = acc_v[i].c == C_RD || acc_v[i].c == C_FD ? 64 : 32;
        reg tv = newv(e, in->dtype);
        reg ti = acc_second(e, kind, in->dtype);
        if (ntid.n >= 0) {
            fold_warps(e, kind, in->dtype, acc_v[i], acc_i[i], tv, ti, ntid,
                       o, nwarps);
            o += n * (hasi ? 2 : 1);
            continue;
        }
        for (int wp = 0; wp < nwarps; wp++) {
            reg dv = wp == 0 ? acc_v[i] : tv;
            reg di = wp == 0 ? acc_i[i] : ti;
            /* a row block's slots are at fixed addresses */
            const char *at = col == 1 ? "smem" : R(lslot);
            out(e, "ld.shared.b%d %s, [%s+%d];", w, R(dv), at,
                o + 8 * col * wp);
            if (hasi) {
                out(e, "ld.shared.b%d %s, [%s+%d];", comp_bits(di), R(di), at,
                    o + n + 8 * col * wp);
            }
            if (wp > 0) {
                acc_combine(e, kind, in->dtype, acc_v[i], acc_i[i], tv, ti);
            }
        }
        o += n * (hasi ? 2 : 1);
    }
}

/* The kernel of pass `mode` (ROWS, PARTIAL or FINAL) of plan. */
static void
emit_reduction(entry *en, const nest *lo, const nest *lr,
               const tc_red_plan *plan, int *smem_bytes,
               tc_red_pass_kind mode,
               const int64_t *sc_off)
{
    em *e = en->e;
    const tc_kernel *k = en->k;
    int block = mode == TC_RED_PASS_FINAL ? plan->final_threads
                                          : plan->threads;
    int npts = mode == TC_RED_PASS_ROWS ? plan->persist : 0;
    int nsplit = (int)plan->nsplit;
    int wide = en->wide;
    const char *it = wide ? "u64" : "u32";
    /* size-generic rows count the block's warps at run time (ntid / 32):
     * the text does not depend on the threads the sizes picked, and
     * shared memory has room for the most a block can have */
    int gwarps = e->generic;
    int nwarps = gwarps ? TC_PTX_MAX_BLOCK / 32 : block / 32;
    /* column tiles of col rows: lane l takes row l % col, the lanes
     * l / col and the warps split its points; partials fold by shuffles
     * in the warp, then in shared memory across warps (a slot per warp
     * and row) */
    int col = mode == TC_RED_PASS_FINAL ? 0 : en->column;
    int lanes = col ? col : 1;
    int lg = col == 32 ? 5 : col == 16 ? 4 : 3;
    int na = k->nargs > 0 ? k->nargs : 1;
    int rb[TC_KIR_MAX_PHASES + 1], re[TC_KIR_MAX_PHASES + 1];
    regions(k, rb, re);
    reg *accs[TC_RED_MAX_SETS] = {0}, *acci[TC_RED_MAX_SETS] = {0};
    int accs_ready = 0;
    persist ps = {0};
    char *used = malloc((size_t)na);
    reg *ooff = calloc((size_t)na, sizeof(reg));
    reg *roff = calloc((size_t)na, sizeof(reg));
    reg *addr = calloc((size_t)na, sizeof(reg));
    reg *val = calloc((size_t)(k->ninsts + 1), sizeof(reg));
    reg *acc_v = calloc((size_t)(k->ninsts + 1), sizeof(reg));
    reg *acc_i = calloc((size_t)(k->ninsts + 1), sizeof(reg));
    int64_t *base = calloc((size_t)na, sizeof(int64_t));
    if (!used || !ooff || !roff || !addr || !val || !acc_v || !acc_i
        || !base) {
        fail(e, "out of memory");
        goto done;
    }
    /* shared memory: per phase, per accumulator, nwarps 8-byte slots for
     * the value (+ nwarps for the index) */
    int slot[TC_KIR_MAX_PHASES + 1];
    int total = 0;
    for (int p = 0; p < k->nphases; p++) {
        slot[p] = total;
        for (int i = rb[p]; i < re[p]; i++) {
            if (k->insts[i].op == KOP_ACC) {
                total += 8 * nwarps * lanes
                         * (acc_has_second((tc_acc_kind)k->insts[i].imm.i) ? 2
                                                                          : 1);
            }
        }
    }
    *smem_bytes = nwarps > 1 ? total : 0;
    if (*smem_bytes > 0) {
        out(e, ".shared .align 8 .b8 smem[%d];", total);
    }
    reg tid = newreg(e, C_R), ntid = newreg(e, C_R), ct = newreg(e, C_R),
        nct = newreg(e, C_R);
    out(e, "mov.u32 %s, %%tid.x;", R(tid));
    out(e, "mov.u32 %s, %%ntid.x;", R(ntid));
    out(e, "mov.u32 %s, %%ctaid.x;", R(ct));
    out(e, "mov.u32 %s, %%nctaid.x;", R(nct));
    reg t0 = newreg(e, C_P), lane0 = newreg(e, C_P);
    out(e, "setp.eq.u32 %s, %s, 0;", R(t0), R(tid));
    /* (row blocks keep the registers and text they had before column
     * tiles: tests/test_dynamic_cuda.py's digests of static PTX) */
    reg wslot = newreg(e, C_R), lslot = NOREG;
    reg lane = NOREG, warp0 = NOREG, sub0 = NOREG;
    if (col) {
        lslot = newreg(e, C_R);
        lane = newreg(e, C_R);
        warp0 = newreg(e, C_P);
        sub0 = newreg(e, C_P);
        /* lane = the row in the tile; slot of (warp, row):
         * smem + 8 * (warp * col + row), the row's: smem + 8 * row
         * + 8 * col * warp */
        reg w = newreg(e, C_R);
        out(e, "and.b32 %s, %s, %d;", R(lane), R(tid), col - 1);
        out(e, "setp.lt.u32 %s, %s, %d;", R(warp0), R(tid), col);
        out(e, "and.b32 %s, %s, 31;", R(w), R(tid));
        out(e, "setp.lt.u32 %s, %s, %d;", R(sub0), R(w), col);
        if (*smem_bytes > 0) {
            reg sbase = newreg(e, C_R);
            out(e, "shr.u32 %s, %s, 5;", R(w), R(tid));
            out(e, "mad.lo.u32 %s, %s, %d, %s;", R(w), R(w), col, R(lane));
            out(e, "mov.u32 %s, smem;", R(sbase));
            out(e, "mad.lo.u32 %s, %s, 8, %s;", R(wslot), R(w), R(sbase));
            out(e, "mad.lo.u32 %s, %s, 8, %s;", R(lslot), R(lane), R(sbase));
        }
    }
    else if (*smem_bytes > 0) {
        reg lane = newreg(e, C_R), sbase = newreg(e, C_R);
        out(e, "and.b32 %s, %s, 31;", R(lane), R(tid));
        out(e, "setp.eq.u32 %s, %s, 0;", R(lane0), R(lane));
        out(e, "shr.u32 %s, %s, 5;", R(wslot), R(tid));
        out(e, "mov.u32 %s, smem;", R(sbase));
        out(e, "mad.lo.u32 %s, %s, 8, %s;", R(wslot), R(wslot), R(sbase));
    }
    reg row = newreg(e, wide ? C_RD : C_R), rstep = newreg(e, row.c);
    reg tid_w = newreg(e, row.c), ntid_w = newreg(e, row.c);
    /* first reduction point and step of this thread */
    reg rfirst = newreg(e, row.c), rstride = newreg(e, row.c);
    reg split = newreg(e, C_R);
    if (mode == TC_RED_PASS_PARTIAL) {
        /* one row per block: row = ctaid / S, split = ctaid % S */
        reg q = newreg(e, C_R);
        out(e, "div.u32 %s, %s, %d;", R(q), R(ct), nsplit);
        out(e, "rem.u32 %s, %s, %d;", R(split), R(ct), nsplit);
        out(e, "mov.u32 %s, %s;", R(ct), R(q));
        out(e, "mov.u32 %s, %lld;", R(nct), (long long)k->numel);
    }
    if (col) {
        /* the block's first row, its step: col rows a tile; the thread's
         * first point, its step: tid / col, ntid / col */
        out(e, "mul.lo.u32 %s, %s, %d;", R(ct), R(ct), col);
        out(e, "mul.lo.u32 %s, %s, %d;", R(nct), R(nct), col);
        out(e, "shr.u32 %s, %s, %d;", R(tid), R(tid), lg);
        out(e, "shr.u32 %s, %s, %d;", R(ntid), R(ntid), lg);
    }
    if (wide) {
        out(e, "cvt.u64.u32 %s, %s;", R(row), R(ct));
        out(e, "cvt.u64.u32 %s, %s;", R(rstep), R(nct));
        out(e, "cvt.u64.u32 %s, %s;", R(tid_w), R(tid));
        out(e, "cvt.u64.u32 %s, %s;", R(ntid_w), R(ntid));
    }
    else {
        out(e, "mov.u32 %s, %s;", R(row), R(ct));
        out(e, "mov.u32 %s, %s;", R(rstep), R(nct));
        out(e, "mov.u32 %s, %s;", R(tid_w), R(tid));
        out(e, "mov.u32 %s, %s;", R(ntid_w), R(ntid));
    }
    if (mode == TC_RED_PASS_PARTIAL) {
        reg sp = newreg(e, row.c);
        if (wide) {
            out(e, "cvt.u64.u32 %s, %s;", R(sp), R(split));
        }
        else {
            out(e, "mov.u32 %s, %s;", R(sp), R(split));
        }
        out(e, "mad.lo.%s %s, %s, %s, %s;", it, R(rfirst), R(sp), R(ntid_w),
            R(tid_w));
        out(e, "mul.lo.%s %s, %s, %d;", it, R(rstride), R(ntid_w), nsplit);
    }
    else {
        out(e, "mov.%s %s, %s;", it, R(rfirst), R(tid_w));
        out(e, "mov.%s %s, %s;", it, R(rstride), R(ntid_w));
    }
    /* extra accumulator sets (plan->sets) */
    accs[0] = acc_v;
    acci[0] = acc_i;
    for (int u = 1; u < TC_RED_MAX_SETS; u++) {
        accs[u] = calloc((size_t)(k->ninsts + 1), sizeof(reg));
        acci[u] = calloc((size_t)(k->ninsts + 1), sizeof(reg));
        if (accs[u] == NULL || acci[u] == NULL) {
            fail(e, "out of memory");
        }
    }
    accs_ready = 1;
    if (persist_init(&ps, k, mode == TC_RED_PASS_ROWS ? npts : 0) < 0) {
        fail(e, "out of memory");
    }
    if (e->failed) {
        goto done;
    }
    for (int j = 0; j < ps.npts; j++) {
        ps.rj[j] = rfirst;
        if (j > 0) {
            ps.rj[j] = newreg(e, row.c);
            out(e, "add.%s %s, %s, %s;", it, R(ps.rj[j]), R(ps.rj[j - 1]),
                R(rstride));
        }
    }
    if (ps.npts > 0 && e->generic) {
        ps.past = calloc((size_t)ps.npts, sizeof(reg));
        for (int j = 0; ps.past != NULL && j < ps.npts; j++) {
            ps.past[j] = newreg(e, C_P);
            out(e, "setp.ge.%s %s, %s, %s;", it, R(ps.past[j]), R(ps.rj[j]),
                numop(e, 1, k->red_numel, wide));
        }
        if (ps.past == NULL) {
            fail(e, "out of memory");
            goto done;
        }
    }
    else if (ps.npts > 0 && k->red_numel % block != 0) {
        ps.plast = newreg(e, C_P);
        out(e, "setp.ge.%s %s, %s, %lld;", it, R(ps.plast),
            R(ps.rj[ps.npts - 1]), (long long)k->red_numel);
    }
    int id = e->label++;
    reg p = newreg(e, C_P);
    out(e, "setp.ge.%s %s, %s, %s;", it, R(p), R(row),
        numop(e, 0, k->numel, wide));
    out(e, "@%s bra $rdone_%d;", R(p), id);
    label(e, "row", id);
    for (int a = 0; a < k->nargs; a++) {
        base[a] = k->args[a].offset;
    }
    memset(used, 1, (size_t)na);
    reg valid = NOREG, pst = t0;
    reg crow = col ? column_row(e, row, lane, k->numel, wide, &valid, warp0,
                                &pst)
                   : row;
    emit_offsets(e, crow, lo, wide, base, used, ooff);
    body s = {0};
    s.e = e;
    s.k = k;
    s.val = val;
    s.base = en->base;
    s.addr = addr;
    s.nc = en->nc;
    s.acc_v = acc_v;
    s.acc_i = acc_i;
    s.ridx64 = NOREG;
    for (int ph = 0; ph <= k->nphases && !e->failed; ph++) {
        if (mode == TC_RED_PASS_PARTIAL && ph == k->nphases) {
            /* thread 0 writes the block's partials of phase 0 (column
             * tiles: warp 0's lanes, a row each) */
            reg row64 = newreg(e, C_RD), slot = newreg(e, C_RD);
            reg a = newreg(e, C_RD);
            if (wide) {
                out(e, "mov.b64 %s, %s;", R(row64), R(crow));
            }
            else {
                out(e, "cvt.u64.u32 %s, %s;", R(row64), R(crow));
            }
            out(e, "cvt.u64.u32 %s, %s;", R(slot), R(split));
            out(e, "mad.lo.u64 %s, %s, %d, %s;", R(slot), R(row64), nsplit,
                R(slot));
            out(e, "mad.lo.u64 %s, %s, 8, %s;", R(a), R(slot),
                R(en->scratch_base));
            for (int i = rb[0]; i < re[0]; i++) {
                const tc_kinst *in = &k->insts[i];
                if (in->op != KOP_ACC) {
                    continue;
                }
                int w = acc_v[i].c == C_RD || acc_v[i].c == C_FD ? 64 : 32;
                out(e, "@%s st.global.b%d [%s+%lld], %s;", R(pst), w, R(a),
                    (long long)sc_off[i], R(acc_v[i]));
                if (acc_i[i].n >= 0) {
                    out(e, "@%s st.global.b64 [%s+%lld], %s;", R(pst), R(a),
                        (long long)(sc_off[i] + 8 * k->numel * nsplit),
                        R(acc_i[i]));
                }
            }
            break;
        }
        /* pre_ph (or post): outer addresses, thread-0 stores */
        used_args(k, rb[ph], re[ph], used);
        for (int a = 0; a < k->nargs; a++) {
            if (used[a]) {
                addr[a] = emit_addr(e, en->base[a], ooff[a], wide,
                                    k->args[a].dtype);
            }
        }
        s.store_pred = pst;
        for (int i = rb[ph]; i < re[ph] && !e->failed; i++) {
            emit_inst(&s, i);
        }
        if (ph == k->nphases) {
            break;
        }
        /* body_ph over r = rfirst, rfirst + rstride, ... */
        s.store_pred = valid;
        int bid = e->label++;
        if (mode == TC_RED_PASS_FINAL) {
            /* the S partials of this row instead of body_0 */
            reg j = newreg(e, C_R), q = newreg(e, C_P);
            reg row64 = newreg(e, C_RD), slot = newreg(e, C_RD);
            reg a = newreg(e, C_RD);
            if (wide) {
                out(e, "mov.b64 %s, %s;", R(row64), R(row));
            }
            else {
                out(e, "cvt.u64.u32 %s, %s;", R(row64), R(row));
            }
            out(e, "mov.u32 %s, %s;", R(j), R(tid));
            out(e, "setp.ge.u32 %s, %s, %d;", R(q), R(j), nsplit);
            out(e, "@%s bra $bdone_%d;", R(q), bid);
            label(e, "body", bid);
            out(e, "cvt.u64.u32 %s, %s;", R(slot), R(j));
            out(e, "mad.lo.u64 %s, %s, %d, %s;", R(slot), R(row64), nsplit,
                R(slot));
            out(e, "mad.lo.u64 %s, %s, 8, %s;", R(a), R(slot),
                R(en->scratch_base));
            for (int i = rb[ph]; i < re[ph]; i++) {
                const tc_kinst *in = &k->insts[i];
                if (in->op != KOP_ACC) {
                    continue;
                }
                tc_acc_kind kind = (tc_acc_kind)in->imm.i;
                reg tv = newv(e, in->dtype);
                reg ti = acc_has_second(kind) ? newreg(e, C_RD) : NOREG;
                int w = tv.c == C_RD || tv.c == C_FD ? 64 : 32;
                out(e, "ld.global.b%d %s, [%s+%lld];", w, R(tv), R(a),
                    (long long)sc_off[i]);
                if (ti.n >= 0) {
                    out(e, "ld.global.b64 %s, [%s+%lld];", R(ti), R(a),
                        (long long)(sc_off[i] + 8 * k->numel * nsplit));
                }
                acc_combine(e, kind, in->dtype, acc_v[i], acc_i[i], tv, ti);
            }
            out(e, "add.u32 %s, %s, %s;", R(j), R(j), R(ntid));
            out(e, "setp.lt.u32 %s, %s, %d;", R(q), R(j), nsplit);
            out(e, "@%s bra $body_%d;", R(q), bid);
            label(e, "bdone", bid);
        }
        else if (ps.npts > 0) {
            int nu = plan->sets[ph];
            acc_sets_init(e, k, ph, accs, acci, nu);
            emit_persistent_body(&s, en, lr, ph, &ps, accs, acci, nu, ooff,
                                 used, roff);
            acc_sets_fold(e, k, ph, accs, acci, nu);
        }
        else if (k->red_numel > 0) {
            reg r = newreg(e, row.c);
            reg q = newreg(e, C_P);
            out(e, "mov.%s %s, %s;", it, R(r), R(rfirst));
            int nu = plan->sets[ph];
            if (nu > 1) {
                /* nu points per iteration, one accumulator set each */
                acc_sets_init(e, k, ph, accs, acci, nu);
                reg last = newreg(e, row.c), stepn = newreg(e, row.c);
                reg lastoff = newreg(e, row.c);
                out(e, "mul.lo.%s %s, %s, %d;", it, R(lastoff), R(rstride),
                    nu - 1);
                out(e, "mul.lo.%s %s, %s, %d;", it, R(stepn), R(rstride), nu);
                out(e, "add.%s %s, %s, %s;", it, R(last), R(r), R(lastoff));
                out(e, "setp.ge.%s %s, %s, %s;", it, R(q), R(last),
                    numop(e, 1, k->red_numel, wide));
                out(e, "@%s bra $utail_%d;", R(q), bid);
                label(e, "ubody", bid);
                emit_red_points(&s, en, lr, ph, r, rstride, nu, ooff, used,
                                roff, accs, acci);
                s.acc_v = acc_v;
                s.acc_i = acc_i;
                out(e, "add.%s %s, %s, %s;", it, R(r), R(r), R(stepn));
                out(e, "add.%s %s, %s, %s;", it, R(last), R(r), R(lastoff));
                out(e, "setp.lt.%s %s, %s, %s;", it, R(q), R(last),
                    numop(e, 1, k->red_numel, wide));
                out(e, "@%s bra $ubody_%d;", R(q), bid);
                label(e, "utail", bid);
            }
            out(e, "setp.ge.%s %s, %s, %s;", it, R(q), R(r),
                numop(e, 1, k->red_numel, wide));
            out(e, "@%s bra $bdone_%d;", R(q), bid);
            label(e, "body", bid);
            emit_red_point(&s, en, lr, ph, r, ooff, used, roff, NULL);
            out(e, "add.%s %s, %s, %s;", it, R(r), R(r), R(rstride));
            out(e, "setp.lt.%s %s, %s, %s;", it, R(q), R(r),
                numop(e, 1, k->red_numel, wide));
            out(e, "@%s bra $body_%d;", R(q), bid);
            label(e, "bdone", bid);
            acc_sets_fold(e, k, ph, accs, acci, nu);
        }
        /* combine the accumulators of this phase across the block */
        block_combine(e, k, rb[ph], re[ph], slot[ph], nwarps, lanes, wslot,
                      lslot, col ? sub0 : lane0, gwarps ? ntid : NOREG,
                      acc_v, acc_i);
    }
    if (*smem_bytes > 0) {
        out(e, "bar.sync 0;");  /* smem is reused by the next row */
    }
    out(e, "add.%s %s, %s, %s;", it, R(row), R(row), R(rstep));
    out(e, "setp.lt.%s %s, %s, %s;", it, R(p), R(row),
        numop(e, 0, k->numel, wide));
    out(e, "@%s bra $row_%d;", R(p), id);
    label(e, "rdone", id);
done:
    persist_clear(&ps);
    if (accs_ready) {
        for (int u = 1; u < TC_RED_MAX_SETS; u++) {
            free(accs[u]);
            free(acci[u]);
        }
    }
    free(used);
    free(ooff);
    free(roff);
    free(addr);
    free(val);
    free(acc_v);
    free(acc_i);
    free(base);
}

/* ---- entries of a kernel ------------------------------------------------------------ */

/* The body of one entry: the scalar or vector pointwise loop, or pass pk
 * of a reduction. */
typedef struct {
    enum { BODY_POINTWISE, BODY_VEC, BODY_RED } kind;
    const nest *lo, *lr;
    const tc_red_plan *plan;
    int *smem;
    tc_red_pass_kind pk;
    const int64_t *sc_off;
} entry_body;

/* One entry into mod, from a fresh em: header, registers, body.  Emitted
 * a second time with calls for div.rn / sqrt.rn when the first try has
 * more than RN_INLINE_MAX of them (emit_rn). */
static void
emit_entry(entry *en, sbuf *mod, const entry_body *bd)
{
    em *e = en->e;
    for (int call = 0; call < 2; call++) {
        sbuf text = {0};
        reset_em(e, e->sm);
        e->rn_call = call;
        begin_entry(en, &text);
        switch (bd->kind) {
        case BODY_POINTWISE:
            emit_pointwise(en, bd->lo);
            break;
        case BODY_VEC:
            emit_pointwise_vec(en, bd->lo);
            break;
        case BODY_RED:
            emit_reduction(en, bd->lo, bd->lr, bd->plan, bd->smem, bd->pk,
                           bd->sc_off);
            break;
        }
        finish_entry(en, &text);
        if (!call && e->rn_sites > RN_INLINE_MAX && !e->failed) {
            tc_textbuf_free(&text);
            continue;
        }
        if (text.failed) {
            mod->failed = 1;
        }
        else if (text.s != NULL) {
            sb_printf(mod, "%s", text.s);
        }
        tc_textbuf_free(&text);
        return;
    }
}

/* The .func of each float POW in use (pow_fn): the KIR of "load a, load
 * b, pow, store" decomposed as an inline POW is, its body emitted with
 * the parameters as vector lanes (emit_inst's lane mode). */
static int
emit_pow_func(sbuf *mod, tc_dtype dt, int sm)
{
    tc_karg args[3] = {{.buffer = 0, .dtype = dt}, {.buffer = 1, .dtype = dt},
                       {.buffer = 2, .dtype = dt, .is_output = 1}};
    const tc_kinst insts[4] = {{KOP_LOAD, dt, -1, -1, -1, 0, {0}},
                               {KOP_LOAD, dt, -1, -1, -1, 1, {0}},
                               {KOP_POW, dt, 0, 1, -1, 0, {0}},
                               {KOP_STORE, dt, 2, -1, -1, 2, {0}}};
    tc_kernel k = {.name = "pow", .numel = 1, .nargs = 3, .args = args,
                   .ninsts = 4, .insts = malloc(sizeof(insts))};
    em e = {0};
    unsigned inner = 0;
    reg *val = NULL, lin[3] = {NOREG, NOREG, NOREG}, lout[3];
    int rc = -1;
    if (k.insts == NULL) {
        return -1;
    }
    memcpy(k.insts, insts, sizeof(insts));
    if (tc_kernel_decompose_math(&k, &tc_ptx_math_target, NULL) < 0
        || (val = calloc((size_t)k.ninsts, sizeof(reg))) == NULL) {
        goto done;
    }
    e.sm = sm;
    e.funcs = &inner;   /* rn_call is 0: div.rn / sqrt.rn stay inline */
    const char *t = ty(dt);
    for (int j = 0; j < 2; j++) {
        lin[j] = newv(&e, dt);
        out(&e, "mov.%s %s, %c;", t, R(lin[j]), "ab"[j]);
    }
    body b = {.e = &e, .k = &k, .val = val, .lane_mode = 1, .lane_in = lin,
              .lane_out = lout, .store_pred = NOREG};
    for (int i = 0; i < k.ninsts && !e.failed; i++) {
        emit_inst(&b, i);
    }
    out(&e, "mov.%s d, %s;", t, R(lout[2]));
    if (!e.failed) {
        entry en = {.e = &e};
        sb_printf(mod, "\n.func (.reg .%s d) tc_pow_%s(.reg .%s a, "
                       ".reg .%s b)\n{\n", t, t, t, t);
        finish_entry(&en, mod);
        rc = e.b.failed ? -1 : 0;
    }
done:
    tc_textbuf_free(&e.b);
    free(val);
    free(k.insts);
    return rc;
}

/* The module's .funcs in use (em.funcs bits): div.rn / sqrt.rn, POW. */
static void
emit_funcs(sbuf *mod, unsigned funcs, int sm)
{
    emit_rn_funcs(mod, funcs);
    for (int f64 = 0; f64 < 2; f64++) {
        tc_dtype dt = f64 ? TC_F64 : TC_F32;
        if ((funcs & pow_fn(dt)) && emit_pow_func(mod, dt, sm) < 0) {
            mod->failed = 1;
        }
    }
}

/* ---- module ------------------------------------------------------------------------ */

const char *
tc_ptx_isa_version(int sm)
{
    if (sm < 80) {
        return "7.0";
    }
    switch (sm) {
    case 80:
        return "7.0";
    case 86:
        return "7.1";
    case 87:
        return "7.4";
    case 88:
        return "9.0";
    case 89:
    case 90:
        return "7.8";
    case 100:
        return "8.6";
    case 101:
        return "8.6";
    case 103:
        return "8.8";
    case 110:
        return "9.0";
    case 120:
        return "8.7";
    case 121:
        return "8.8";
    default:
        return sm < 90 ? "7.8" : sm < 100 ? "7.8" : "9.0";
    }
}

static int
copy_kernel(const tc_kernel *src, tc_kernel *dst)
{
    *dst = *src;
    dst->desc = NULL;
    dst->args = malloc(sizeof(tc_karg) * (size_t)(src->nargs > 0 ? src->nargs
                                                                   : 1));
    dst->insts = malloc(sizeof(tc_kinst)
                        * (size_t)(src->ninsts > 0 ? src->ninsts : 1));
    if (dst->args == NULL || dst->insts == NULL) {
        free(dst->args);
        free(dst->insts);
        return -1;
    }
    if (src->nargs > 0) {
        memcpy(dst->args, src->args, sizeof(tc_karg) * (size_t)src->nargs);
    }
    if (src->ninsts > 0) {
        memcpy(dst->insts, src->insts, sizeof(tc_kinst) * (size_t)src->ninsts);
    }
    return 0;
}

static void
sanitize(char *dst, size_t n, const char *name)
{
    size_t w = (size_t)snprintf(dst, n, "tc_");
    for (const char *s = name; *s != '\0' && w + 1 < n; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
                 || (c >= '0' && c <= '9') || c == '_';
        dst[w++] = ok ? c : '_';
    }
    dst[w] = '\0';
}

/* Column tiles for a reduction whose rows are contiguous in memory and
 * whose points are not: the bias gradient of a linear layer, sum(g, 0)
 * of a [4096, 3072] g, where every point of a row is 3072 elements from
 * the next.  A block per row (its threads over the row's points) then
 * reads one element per 32-byte sector: the fused GELU backward with
 * that sum took 383 us on an H200, 8x its bytes' time.  Column tiles give
 * each lane a row, 32 consecutive rows a warp, so a warp's loads of one
 * point are one coalesced line, and the block's warps split the points.
 * Chosen when more read arguments are contiguous along the rows than
 * along the points, with at least 8 contiguous rows.  Tiles of 32 rows
 * unless fewer than 3 tiles per SM leave SMs idle or unevenly loaded
 * (3072 rows: 96 tiles of 32 for 132 SMs): 16 or 8 rows, down to a
 * 32-byte sector of the widest argument, the other lanes taking more
 * points.  Returns the rows per tile, or 0. */
static int
column_tiles(const tc_kernel *k, const nest *lo, const nest *lr,
             int sm_count)
{
    if (lo->nd == 0 || lr->nd == 0 || lo->sizes[lo->nd - 1] < 8) {
        return 0;
    }
    int rows = 0, points = 0, size = 1;
    for (int a = 0; a < k->nargs; a++) {
        if (k->args[a].is_output) {
            continue;
        }
        size = esize(k->args[a].dtype) > size ? esize(k->args[a].dtype) : size;
        int64_t so = lo->st[a][lo->nd - 1], sr = lr->st[a][lr->nd - 1];
        points += sr == 1;
        rows += so == 1 && sr != 0 && sr != 1;
    }
    if (rows <= points) {
        return 0;
    }
    int col = 32;
    while (col > 8 && col * size > 32
           && (k->numel + col - 1) / col < 3 * (int64_t)sm_count) {
        col /= 2;
    }
    return col;
}

/* Column tiles' threads: 32 to 512 (4 blocks an SM), each taking at
 * least 32 points of its row (a tile of col rows). */
static int
column_threads(int64_t red_numel, int col)
{
    int64_t w = red_numel * col / 1024;
    return 32 * (int)(w < 1 ? 1 : w > 16 ? 16 : w);
}

/* Column tiles split along the points (reduce_plan.h "Split rows"; here,
 * not in tc_red_schedule, because only column tiles need it): when tiles
 * of 32 rows are too few to fill the device, each tile's points are cut
 * into chunks, a block of COLUMN_SPLIT_THREADS per tile and chunk, and a
 * final pass folds a row's chunks.  Rather than narrower tiles: a warp
 * still reads whole 128-byte lines, and there are enough blocks for one
 * wave of COLUMN_SPLIT_PER_SM an SM (ptxas gives the GELU backward's 40
 * registers with 4 sets: 6 blocks of 256 threads fit), and
 * COLUMN_SPLIT_SETS points in flight per thread.  The GELU backward with
 * its bias sum, [4096, 3072] on an H200 (the entry timed alone): 93 us in
 * tiles of 8 rows (384 blocks of 512 threads), 55.6 split with 4 sets,
 * 50.7 with their loads first (emit_red_points), 44.6 with 8 sets; the
 * plain sum(0) 18.3 -> 12.3 us.  One phase only (the final pass folds
 * phase 0's partials); each thread keeps at least 16 points of its
 * chunk.  Returns the chunks (1: not split). */
#define COLUMN_SPLIT_THREADS 256
#define COLUMN_SPLIT_PER_SM 6
#define COLUMN_SPLIT_SETS 8

static int64_t
column_split(const tc_kernel *k, int sm_count)
{
    int64_t tiles = (k->numel + 31) / 32;
    if (k->nphases != 1 || tiles >= 3 * (int64_t)sm_count) {
        return 1;
    }
    int64_t n = COLUMN_SPLIT_PER_SM * (int64_t)sm_count / tiles;
    int64_t most = k->red_numel / (COLUMN_SPLIT_THREADS / 32 * 16);
    n = n < most ? n : most;
    n = n < TC_PTX_MAX_BLOCK ? n : TC_PTX_MAX_BLOCK;
    return n < 2 ? 1 : n;
}

/* The column tiles of reduction k, if any (column_tiles), with plan
 * turned into theirs: split (column_split) or one pass of
 * column_threads.  A few long rows that tc_red_schedule split as rows
 * stay so.  Returns the rows per tile, or 0. */
static int
column_plan(const tc_kernel *k, const nest *lo, const nest *lr,
            int sm_count, tc_red_plan *plan)
{
    int col = column_tiles(k, lo, lr, sm_count);
    int64_t csplit = col ? column_split(k, sm_count) : 1;
    if (csplit > 1) {
        plan->nsplit = csplit;
        plan->threads = COLUMN_SPLIT_THREADS;
        plan->final_threads = (int)((csplit + 31) / 32 * 32);
        plan->npasses = 2;
        plan->passes[0] = (tc_red_pass){TC_RED_PASS_PARTIAL, 0};
        plan->passes[1] = (tc_red_pass){TC_RED_PASS_FINAL, 0};
        plan->persist = 0;
        if (plan->sets[0] > 1) {
            plan->sets[0] = COLUMN_SPLIT_SETS;
        }
        return k->numel >= 32 ? 32 : k->numel >= 16 ? 16 : 8;
    }
    if (col == 0 || plan->nsplit > 1) {
        return 0;
    }
    plan->threads = column_threads(k->red_numel, col);
    plan->persist = 0;
    return col;
}

static int
grid_for(int64_t work, int block, int sm_count, int per_sm)
{
    int64_t g = (work + block - 1) / block;
    int64_t cap = (int64_t)sm_count * per_sm;
    if (g > cap) {
        g = cap;
    }
    return g < 1 ? 1 : (int)g;
}
/* TC_PTX_MATH_HALF_RESULTS if every float argument of k (loaded or
 * stored) is float16 / bfloat16 and k stores at least one: eager rounds
 * such a computation to 8 or 11 bits after every op, and the result is
 * compared at those dtypes' tolerances, so the transcendentals may trade
 * float32 accuracy for speed where ptx_math.c shows the error stays far
 * inside them.  A float32 or float64 argument anywhere (an input read at
 * full precision, a float32 result) keeps the exact forms. */
static int
half_results(const tc_kernel *k)
{
    int stores = 0;
    for (int a = 0; a < k->nargs; a++) {
        tc_dtype dt = k->args[a].dtype;
        if (k->args[a].buffer == TC_KARG_INDEX) {
            continue;
        }
        if (is_float(dt)) {     /* float32 / float64 */
            return 0;
        }
        stores += k->args[a].is_output && tc_dtype_is_reduced_float(dt);
    }
    return stores > 0 ? TC_PTX_MATH_HALF_RESULTS : 0;
}

/* Threads per block of pointwise kernels, and blocks per SM of their
 * grid-stride scalar entries, by max-autotune variant. */
static const int pw_block[TC_PTX_VARIANTS] = {256, 128, 512, 256};
static const int pw_per_sm[TC_PTX_VARIANTS] = {8, 16, 4, 32};


static void
module_header(sbuf *mod, int sm)
{
    sb_printf(mod, "//\n// Generated by tcjit (src/gpu/ptx_emit.c)\n//\n\n"
                   ".version %s\n.target sm_%d\n.address_size 64\n",
              tc_ptx_isa_version(sm), sm);
}

/* Size-generic kernel k0 (ptx.h): em e reads the block of its nests lo
 * and lr, whose values for this plan go to info->dims. */
static int
generic_setup(const tc_kernel *k0, const nest *lo, const nest *lr, em *e,
              tc_ptx_kernel *info)
{
    int nd = lo->nd + lr->nd;
    int64_t sizes[TC_MAX_DIMS];
    int64_t (*st)[TC_MAX_DIMS] = calloc((size_t)(k0->nargs > 0 ? k0->nargs
                                                                : 1),
                                        sizeof(*st));
    if (st == NULL) {
        return -1;
    }
    for (int d = 0; d < nd; d++) {
        const nest *l = d < lo->nd ? lo : lr;
        int dl = d - l->slot0;
        sizes[d] = l->sizes[dl];
        for (int a = 0; a < k0->nargs; a++) {
            st[a][d] = l->st[a][dl];
        }
    }
    int64_t n = tc_dims_block(k0, nd, sizes, st, NULL);
    info->dims = malloc(sizeof(int64_t) * (size_t)n);
    e->g64 = calloc((size_t)n, sizeof(reg));
    e->g32 = calloc((size_t)n, sizeof(reg));
    if (info->dims == NULL || e->g64 == NULL || e->g32 == NULL) {
        free(st);
        return -1;
    }
    tc_dims_block(k0, nd, sizes, st, info->dims);
    free(st);
    info->ndims = n;
    e->generic = 1;
    e->gnd = nd;
    e->gnargs = k0->nargs;
    e->gslots = (int)n;
    return 0;
}

/* Independent parts of k's vector entry (vec_parts) into part, or 1:
 * static sizes and whole vectors only (no scalar tail), blocks blocks a
 * part. */
static int
vec_nparts(const tc_kernel *k, int generic, int *part, int blocks)
{
    if (generic || part == NULL || k->numel % vec_lanes(k) != 0) {
        return 1;
    }
    int n = tc_kernel_parts(k, part);
    return n < 2 || (int64_t)n * blocks > INT_MAX ? 1 : n;
}

/* Emits one kernel (both variants when vectorizable) into mod, or with
 * generic (and not a split reduction) size-generic into a module of its
 * own, info->text. */
static int
emit_kernel(const tc_kernel *k0, int idx, int sm, int sm_count, int variant,
            int generic, sbuf *mod, unsigned *funcs, tc_ptx_kernel *info,
            char *err, size_t errlen)
{
    tc_kernel k;
    if (copy_kernel(k0, &k) < 0) {
        snprintf(err, errlen, "tcjit gpu: out of memory");
        return -1;
    }
    int rc = -1;
    nest lo = {0}, lr = {0};
    em e = {0};
    sbuf own = {0}, own_ents = {0};
    unsigned own_funcs = 0;
    int64_t *sc_off = NULL;
    int *part = NULL;
    e.sm = sm;
    e.math_flags = half_results(&k);
    if (k.nphases == 0 && sm >= 90 && sm < 100) {   /* checked on sm_90 */
        e.math_flags |= TC_PTX_MATH_RCP_NEWTON;
    }
    e.funcs = funcs;
    int na = k.nargs > 0 ? k.nargs : 1;
    reg *base = calloc((size_t)na, sizeof(reg));
    char *nc = calloc((size_t)na, 1);
    memset(info, 0, sizeof(*info));
    if (base == NULL || nc == NULL) {
        snprintf(err, errlen, "tcjit gpu: out of memory");
        goto done;
    }
    if (generic) {
        tc_kernel_number_params(&k);
    }
    /* many float POWs: calls of one .func each (POW_INLINE_MAX) */
    tc_math_target math = tc_ptx_math_target;
    int npow = 0;
    for (int i = 0; i < k.ninsts; i++) {
        npow += k.insts[i].op == KOP_POW && is_float(k.insts[i].dtype);
    }
    if (npow > POW_INLINE_MAX) {
        math.native[KOP_POW] = TC_MATH_F32 | TC_MATH_F64;
    }
    if (tc_kernel_decompose_math(&k, &math, NULL) < 0) {
        snprintf(err, errlen, "tcjit gpu: out of memory");
        goto done;
    }
    if (k.nphases < 0 || k.nphases > TC_KIR_MAX_PHASES
        || k.ndim + k.nred > TC_MAX_DIMS) {
        snprintf(err, errlen, "tcjit gpu: %s: bad kernel shape", k.name);
        goto done;
    }
    /* an argument may use ld.global.nc if no argument of this kernel
     * writes its buffer */
    for (int a = 0; a < k.nargs; a++) {
        nc[a] = 1;
        for (int b = 0; b < k.nargs; b++) {
            if (k.args[b].is_output && k.args[b].buffer == k.args[a].buffer) {
                nc[a] = 0;
            }
        }
    }
    info->nargs = k.nargs;
    info->is_reduction = k.nphases > 0;
    if (nest_build(&k, 0, k.ndim, &lo) < 0
        || nest_build(&k, k.ndim, k.nphases > 0 ? k.nred : 0, &lr) < 0) {
        snprintf(err, errlen, "tcjit gpu: out of memory");
        goto done;
    }
    lr.slot0 = lo.nd;
    /* a kernel whose block would not fit CUDA's 4 KB of parameters beside
     * its pointers keeps constant sizes */
    generic = generic
              && 8 * (k.nargs + tc_dims_block(k0, lo.nd + lr.nd, NULL, NULL,
                                               NULL))
                     <= TC_PTX_PARAM_BYTES;
    tc_red_target target = ptx_red_target(sm_count, variant);
    tc_red_plan plan;
    target.persist_pow2 = generic;
    if (k.nphases > 0 && tc_red_schedule(&k, 0, &target, &plan) < 0) {
        snprintf(err, errlen, "tcjit gpu: %s: bad kernel shape", k.name);
        goto done;
    }
    /* so do split reductions: their grid and scratch layout come from
     * the sizes */
    if (generic && k.nphases > 0 && plan.nsplit > 1) {
        generic = 0;
        target.persist_pow2 = 0;
        (void)tc_red_schedule(&k, 0, &target, &plan);
    }
    if (generic) {
        if (generic_setup(k0, &lo, &lr, &e, info) < 0) {
            snprintf(err, errlen, "tcjit gpu: out of memory");
            goto done;
        }
        /* one kernel per module: the name need not be unique, and the
         * text is the same for every plan with this code; its .funcs
         * (emit_rn) precede its entries */
        snprintf(info->entry, sizeof(info->entry), "tc_generic");
        mod = &own_ents;
        e.funcs = &own_funcs;
    }
    else {
        sanitize(info->entry, sizeof(info->entry) - 4, k.name);
    }
    /* softmax's max and sum in one pass where the plan reads rows from
     * memory twice (not column tiles: their renderer has no SOFTMAX);
     * after the parameter numbering, so its constants are literals */
    tc_red_plan probe = plan;       /* column_plan changes its plan */
    if (k.nphases > 1 && tc_red_wants_online(&k, &target, &plan)
        && (generic || column_plan(&k, &lo, &lr, sm_count, &probe) == 0)) {
        int r = tc_kernel_online_softmax(&k);
        if (r < 0) {
            snprintf(err, errlen, "tcjit gpu: out of memory");
            goto done;
        }
        if (r > 0) {
            tc_kernel_online_note();
        }
        if (r > 0 && tc_red_schedule(&k, 0, &target, &plan) < 0) {
            snprintf(err, errlen, "tcjit gpu: %s: bad kernel shape", k.name);
            goto done;
        }
    }
    /* 32-bit index math if every index and offset fits in 31 bits */
    int64_t lim = (int64_t)1 << 31;
    int wide = k.numel >= lim || (k.nphases > 0 && k.red_numel >= lim);
    for (int a = 0; a < k.nargs; a++) {
        int64_t off = k.args[a].offset < 0 ? -k.args[a].offset
                                            : k.args[a].offset;
        if (off + nest_span(&lo, a) + nest_span(&lr, a) + 4 >= lim) {
            wide = 1;
        }
    }
    entry en = {&k, info->entry, &e, base, nc, wide};
    en.lazy_base = k.nphases == 0;
    en.lo = &lo;
    en.lr = &lr;
    en.column = k.nphases > 0 && !generic
                ? column_plan(&k, &lo, &lr, sm_count, &plan) : 0;
    if (k.nphases == 0) {
        int bl = pw_block[variant];
        info->block = bl;
        info->skip = k.numel == 0;
        info->grid = grid_for(k.numel, bl, sm_count, pw_per_sm[variant]);
        entry_body bd = {.kind = BODY_POINTWISE, .lo = &lo};
        emit_entry(&en, mod, &bd);
        if (!e.failed && vectorizable(&k, &lo, generic)) {
            snprintf(info->entry_vec, sizeof(info->entry_vec), "%.59s_v4",
                     info->entry);
            /* one vector per thread, no grid-stride iterations: each
             * block loads, computes and stores once, and the block
             * scheduler overlaps blocks in every phase.  H200, the 16M
             * float32 sin/cos chain: 52.9 us at 8 blocks per SM (16
             * iterations), 50.6 at 32, 49.8 uncapped (above the copy's
             * bandwidth of the same run).  The scalar entry is the other
             * way round (78 us capped, 88 uncapped) and keeps the cap. */
            info->grid_vec = grid_for(k.numel / vec_lanes(&k), bl, sm_count,
                                      INT_MAX / bl / sm_count);
            part = malloc(sizeof(int) * ((size_t)k.ninsts + 1));
            en.nparts = vec_nparts(&k, generic, part, info->grid_vec);
            en.part = part;
            info->grid_vec *= en.nparts > 1 ? en.nparts : 1;
            en.name = info->entry_vec;
            bd.kind = BODY_VEC;
            emit_entry(&en, mod, &bd);
        }
    }
    else {
        int smem = 0;
        info->skip = k.numel == 0;
        if (plan.nsplit > 1) {
            sc_off = calloc((size_t)k.ninsts + 1, sizeof(int64_t));
            if (sc_off == NULL) {
                snprintf(err, errlen, "tcjit gpu: out of memory");
                goto done;
            }
            /* bytes from here on */
            info->scratch_bytes = 8 * tc_red_scratch_layout(&k, &plan,
                                                            sc_off);
            for (int i = 0; i < k.ninsts; i++) {
                sc_off[i] *= 8;
            }
            en.scratch = 1;
        }
        for (int q = 0; q < plan.npasses; q++) {
            tc_red_pass_kind pk = plan.passes[q].kind;
            if (pk == TC_RED_PASS_FINAL) {
                int fb = plan.final_threads;
                snprintf(info->entry_final, sizeof(info->entry_final),
                         "%.59s_fin", info->entry);
                info->block_final = fb;
                info->grid_final = grid_for(k.numel, 1, sm_count, 2048 / fb);
                en.name = info->entry_final;
            }
            else {
                info->block = plan.threads;
                int64_t tiles = en.column ? (k.numel + en.column - 1)
                                                / en.column
                                          : k.numel;
                info->grid = pk == TC_RED_PASS_PARTIAL
                                 ? (int)(tiles * plan.nsplit)
                                 : grid_for(tiles, 1, sm_count,
                                            2048 / plan.threads);
            }
            en.maxntid = en.column && pk == TC_RED_PASS_PARTIAL
                             ? COLUMN_SPLIT_THREADS : 0;
            entry_body bd = {.kind = BODY_RED, .lo = &lo, .lr = &lr,
                             .plan = &plan, .smem = &smem, .pk = pk,
                             .sc_off = sc_off};
            emit_entry(&en, mod, &bd);
        }
    }
    if (e.failed) {
        snprintf(err, errlen, "tcjit gpu: %s: %s", k.name, e.err);
        goto done;
    }
    if (e.b.failed || mod->failed) {
        snprintf(err, errlen, "tcjit gpu: out of memory");
        goto done;
    }
    if (mod == &own_ents) {
        module_header(&own, sm);
        emit_funcs(&own, own_funcs, sm);
        if (own_ents.s != NULL) {
            sb_printf(&own, "%s", own_ents.s);
        }
        if (own.failed) {
            snprintf(err, errlen, "tcjit gpu: out of memory");
            goto done;
        }
        info->text = tc_textbuf_finish(&own);
    }
    rc = 0;
done:
    if (rc < 0) {
        free(info->dims);
        info->dims = NULL;
    }
    tc_textbuf_free(&own);
    tc_textbuf_free(&own_ents);
    free(e.g64);
    free(e.g32);
    free(sc_off);
    free(part);
    tc_textbuf_free(&e.b);
    free(base);
    free(nc);
    nest_clear(&lo);
    nest_clear(&lr);
    free(k.args);
    free(k.insts);
    return rc;
}

int
tc_ptx_emit(const tc_plan *plan, int sm, int sm_count, tc_ptx_module *out,
            char *err, size_t errlen)
{
    return tc_ptx_emit_variant(plan, sm, sm_count, 0, out, err, errlen);
}

/* dst = src, its own copies of what src owns */
static int
copy_info(tc_ptx_kernel *dst, const tc_ptx_kernel *src)
{
    *dst = *src;
    dst->text = src->text != NULL ? strdup(src->text) : NULL;
    dst->dims = src->dims != NULL
                    ? malloc(sizeof(int64_t) * (size_t)src->ndims) : NULL;
    if ((src->text != NULL && dst->text == NULL)
        || (src->dims != NULL && dst->dims == NULL)) {
        free(dst->text);
        free(dst->dims);
        dst->text = NULL;
        dst->dims = NULL;
        return -1;
    }
    if (dst->dims != NULL) {
        memcpy(dst->dims, src->dims, sizeof(int64_t) * (size_t)src->ndims);
    }
    return 0;
}

/* Parts of a module (ptx.h tc_ptx_module.parts): consecutive kernels
 * whose entries add up to PART_BYTES or more, each a module of its own,
 * which the runtime has the driver JIT-compile on threads of their own
 * (gpu_runtime.c load_parts).  The driver JIT-compiles a module on one
 * thread: an AdamW step over GPT-2's parameters was one 1.2 MB module of
 * 26 entries, 2.1 s on an H200; the 46 entries of that training step's
 * 13 modules, each JIT-compiled alone, took 4.7 s on one thread and
 * 0.37 s on 16.  Parts are cut by size, not by the machine's thread
 * count, so a part's text (its disk cache key) is the same everywhere;
 * a module under twice PART_BYTES stays whole. */
#define PART_BYTES (32 * 1024)

static int
make_parts(const tc_plan *plan, tc_ptx_module *out, const sbuf *kents,
           const unsigned *kfuncs, int sm)
{
    int n = out->nkernels;
    size_t total = 0, acc = 0;
    for (int i = 0; i < n; i++) {
        total += kents[i].s != NULL ? strlen(kents[i].s) : 0;
    }
    if (total < 2 * PART_BYTES) {
        return 0;
    }
    out->parts = calloc((size_t)n, sizeof(char *));
    if (out->parts == NULL) {
        return -1;
    }
    int first = 0;
    unsigned funcs = 0;
    for (int i = 0; i < n; i++) {
        if (kents[i].s == NULL) {
            continue;
        }
        out->kernels[i].part = out->nparts;
        acc += strlen(kents[i].s);
        funcs |= kfuncs[i];
        int more = 0;
        for (int j = i + 1; j < n && !more; j++) {
            more = kents[j].s != NULL;
        }
        if (acc < PART_BYTES && more) {
            continue;
        }
        sbuf part = {0};
        module_header(&part, sm);
        emit_funcs(&part, funcs, sm);
        for (int j = first; j <= i; j++) {
            if (kents[j].s != NULL) {
                sb_printf(&part, "%s", kents[j].s);
            }
        }
        if (part.failed) {
            tc_textbuf_free(&part);
            return -1;
        }
        out->parts[out->nparts++] = tc_textbuf_finish(&part);
        first = i + 1;
        acc = 0;
        funcs = 0;
    }
    for (int i = 0; i < n; i++) {
        out->kernels[i].part =
            out->kernels[tc_plan_first_same_kernel(plan, i)].part;
    }
    return 0;
}

int
tc_ptx_emit_variant(const tc_plan *plan, int sm, int sm_count, int variant,
                    tc_ptx_module *out, char *err, size_t errlen)
{
    if (variant < 0 || variant >= TC_PTX_VARIANTS) {
        variant = 0;
    }
    memset(out, 0, sizeof(*out));
    if (sm_count < 1) {
        sm_count = 1;
    }
    int n = plan->nkernels, rc = -1;
    size_t cap = (size_t)(n > 0 ? n : 1);
    sbuf mod = {0};                 /* header + .funcs, then the entries */
    sbuf *kents = calloc(cap, sizeof(sbuf));        /* each kernel's */
    unsigned *kfuncs = calloc(cap, sizeof(unsigned));
    out->kernels = calloc(cap, sizeof(tc_ptx_kernel));
    if (kents == NULL || kfuncs == NULL || out->kernels == NULL) {
        snprintf(err, errlen, "tcjit gpu: out of memory");
        goto done;
    }
    out->nkernels = n;
    for (int i = 0; i < n; i++) {
        /* a kernel identical to an earlier one launches that one's
         * entries (a model traced as one graph repeats each layer's) */
        int same = tc_plan_first_same_kernel(plan, i);
        if (same != i) {
            if (copy_info(&out->kernels[i], &out->kernels[same]) < 0) {
                snprintf(err, errlen, "tcjit gpu: out of memory");
                goto done;
            }
            continue;
        }
        if (emit_kernel(&plan->kernels[i], i, sm, sm_count, variant,
                        plan->dynamic, &kents[i], &kfuncs[i],
                        &out->kernels[i], err, errlen) < 0) {
            goto done;
        }
    }
    unsigned funcs = 0;
    for (int i = 0; i < n; i++) {
        funcs |= kfuncs[i];
        mod.failed |= kents[i].failed;
    }
    module_header(&mod, sm);
    emit_funcs(&mod, funcs, sm);
    for (int i = 0; i < n; i++) {
        if (kents[i].s != NULL) {
            sb_printf(&mod, "%s", kents[i].s);
        }
    }
    if (mod.failed || make_parts(plan, out, kents, kfuncs, sm) < 0) {
        snprintf(err, errlen, "tcjit gpu: out of memory");
        goto done;
    }
    out->text = tc_textbuf_finish(&mod);
    rc = 0;
done:
    for (int i = 0; kents != NULL && i < n; i++) {
        tc_textbuf_free(&kents[i]);
    }
    free(kents);
    free(kfuncs);
    if (rc < 0) {
        tc_textbuf_free(&mod);
        tc_ptx_module_clear(out);
    }
    return rc;
}

void
tc_ptx_module_clear(tc_ptx_module *m)
{
    for (int i = 0; m->kernels != NULL && i < m->nkernels; i++) {
        free(m->kernels[i].text);
        free(m->kernels[i].dims);
    }
    for (int p = 0; m->parts != NULL && p < m->nparts; p++) {
        free(m->parts[p]);
    }
    free(m->parts);
    free(m->text);
    free(m->kernels);
    memset(m, 0, sizeof(*m));
}

int
tc_gpu_emit_ptx_for_plan(const tc_plan *plan, int sm, int variant,
                         char **ptx)
{
    char err[512];
    tc_ptx_module m;
    *ptx = NULL;
    if (tc_ptx_emit_variant(plan, sm, TC_PTX_TEST_SMS, variant, &m, err,
                            sizeof(err)) < 0) {
        *ptx = strdup(err);
        return -1;
    }
    *ptx = m.text;
    m.text = NULL;
    tc_ptx_module_clear(&m);
    return 0;
}
