/* kir_half.c - float16 / bfloat16 <-> float32 casts as integer KIR.
 *
 * KIR computes nothing in the reduced floats: the scheduler loads them,
 * casts to float32, and casts back before a store (kb_cast routes every
 * other conversion through float32).  A target without native half
 * conversions (the CPU backend: libgccjit 12 has no _Float16 type) runs
 * this pass, which leaves only LOAD / STORE / BITCAST of those dtypes, i.e.
 * 16-bit moves, and expresses the roundings with int32 and float32 ops that
 * vectorize.  The algorithms and their NaN encodings are those of half.c
 * (the host reference the tests compare against); keep the two in step.
 */
#include "kir.h"

#define F TC_F32
#define I TC_I32
#define B TC_BOOL

#define put tc_kbuf_put

static int
ki(tc_kbuf *t, int64_t v)
{
    int r = put(t, KOP_CONST, I, -1, -1, -1);
    if (!t->failed) {
        t->v[r].imm.i = (int32_t)v;
    }
    return r;
}

static int
kf(tc_kbuf *t, double v)
{
    int r = put(t, KOP_CONST, F, -1, -1, -1);
    if (!t->failed) {
        t->v[r].imm.f = v;
    }
    return r;
}

static int
op2(tc_kbuf *t, tc_kop op, tc_dtype dt, int a, int b)
{
    return put(t, op, dt, a, b, -1);
}

/* The 16 bits of a reduced float, zero-extended into an int32. */
static int
bits16(tc_kbuf *t, int h)
{
    int s16 = put(t, KOP_BITCAST, TC_I16, h, -1, -1);
    return op2(t, KOP_AND, I, put(t, KOP_CAST, I, s16, -1, -1),
               ki(t, 0xffff));
}

/* An int32 holding 16 bits (higher bits ignored) as a reduced float. */
static int
from_bits16(tc_kbuf *t, tc_dtype dt, int w)
{
    return put(t, KOP_BITCAST, dt, put(t, KOP_CAST, TC_I16, w, -1, -1), -1,
               -1);
}

/* float16 bits (an int32, the 16 low bits; higher bits ignored) as a
 * float32. */
static int
f16_bits_to_f32(tc_kbuf *t, int bits)
{
    int x = op2(t, KOP_AND, I, bits, ki(t, 0xffff));
    int sign = op2(t, KOP_SHL, I, op2(t, KOP_AND, I, x, ki(t, 0x8000)),
                   ki(t, 16));
    int em = op2(t, KOP_AND, I, x, ki(t, 0x7fff));
    int sub = op2(t, KOP_SUB, F,
                  put(t, KOP_BITCAST, F,
                      op2(t, KOP_OR, I, em, ki(t, 0x3f000000)), -1, -1),
                  kf(t, 0.5));
    int norm = op2(t, KOP_MUL, F,
                   put(t, KOP_BITCAST, F,
                       op2(t, KOP_ADD, I,
                           op2(t, KOP_SHL, I, em, ki(t, 13)),
                           ki(t, 0x70000000)), -1, -1),
                   kf(t, 0x1.0p-112));
    int is_sub = op2(t, KOP_LT, B, em, ki(t, 0x400));
    int mag = put(t, KOP_WHERE, I, is_sub, put(t, KOP_BITCAST, I, sub, -1, -1),
                  put(t, KOP_BITCAST, I, norm, -1, -1));
    return put(t, KOP_BITCAST, F, op2(t, KOP_OR, I, sign, mag), -1, -1);
}

/* NaN test on float32 bits: |w| > inf's bits. */
static int
is_nan_bits(tc_kbuf *t, int w, int *abs_w)
{
    *abs_w = op2(t, KOP_AND, I, w, ki(t, 0x7fffffff));
    return op2(t, KOP_LT, B, ki(t, 0x7f800000), *abs_w);
}

/* float32 f rounded to float16, as its 16 bits in an int32. */
static int
f32_to_f16_bits(tc_kbuf *t, int f)
{
    int w = put(t, KOP_BITCAST, I, f, -1, -1);
    int aw;
    int nan = is_nan_bits(t, w, &aw);
    int sign = op2(t, KOP_AND, I, op2(t, KOP_SHR, I, w, ki(t, 16)),
                   ki(t, 0x8000));
    int nan_bits = op2(t, KOP_OR, I, ki(t, 0x7e00),
                       op2(t, KOP_AND, I, op2(t, KOP_SHR, I, aw, ki(t, 13)),
                           ki(t, 0x3ff)));
    int absf = put(t, KOP_BITCAST, F, aw, -1, -1);
    int base = op2(t, KOP_MUL, F, op2(t, KOP_MUL, F, absf, kf(t, 0x1.0p+112)),
                   kf(t, 0x1.0p-110));
    int bias = op2(t, KOP_MAX, I, op2(t, KOP_AND, I, aw, ki(t, 0x7f800000)),
                   ki(t, 0x38800000));
    int magic = put(t, KOP_BITCAST, F,
                    op2(t, KOP_ADD, I, bias, ki(t, 0x07800000)), -1, -1);
    int r = put(t, KOP_BITCAST, I, op2(t, KOP_ADD, F, magic, base), -1, -1);
    int nonsign = op2(t, KOP_ADD, I,
                      op2(t, KOP_AND, I, op2(t, KOP_SHR, I, r, ki(t, 13)),
                          ki(t, 0x7c00)),
                      op2(t, KOP_AND, I, r, ki(t, 0x0fff)));
    int mag = put(t, KOP_WHERE, I, nan, nan_bits, nonsign);
    return op2(t, KOP_OR, I, sign, mag);
}

static int
bf16_bits_to_f32(tc_kbuf *t, int bits)
{
    return put(t, KOP_BITCAST, F, op2(t, KOP_SHL, I, bits, ki(t, 16)), -1,
               -1);
}

/* float32 f rounded to bfloat16, as its 16 bits in an int32 (higher bits
 * undefined). */
static int
f32_to_bf16_bits(tc_kbuf *t, int f)
{
    int w = put(t, KOP_BITCAST, I, f, -1, -1);
    int aw;
    int nan = is_nan_bits(t, w, &aw);
    int lsb = op2(t, KOP_AND, I, op2(t, KOP_SHR, I, w, ki(t, 16)), ki(t, 1));
    int rounded = op2(t, KOP_SHR, I,
                      op2(t, KOP_ADD, I, w,
                          op2(t, KOP_ADD, I, lsb, ki(t, 0x7fff))),
                      ki(t, 16));
    return put(t, KOP_WHERE, I, nan, ki(t, 0xffff), rounded);
}

static int
is_cast(const tc_kinst *in, void *ctx)
{
    (void)ctx;
    return in->op == KOP_CAST;
}

static int
expand(tc_kbuf *t, const tc_kinst *in, const int *map, void *ctx)
{
    const tc_kernel *k = ctx;
    const tc_kinst *src = &k->insts[in->a];
    tc_dtype from = src->dtype;
    if (from == TC_F16 || from == TC_BF16) {
        /* float32 rounded to a reduced float and widened back (the
         * scheduler does that after every op of that dtype): the bits
         * stay in an int32, no 16-bit moves that would stop the
         * vectorizer */
        int bits = src->op == KOP_CAST && k->insts[src->a].dtype == F
            ? (from == TC_F16 ? f32_to_f16_bits : f32_to_bf16_bits)(
                  t, map[src->a])
            : bits16(t, map[in->a]);
        return from == TC_F16 ? f16_bits_to_f32(t, bits)
                              : bf16_bits_to_f32(t, bits);
    }
    if (in->dtype == TC_F16) {
        return from_bits16(t, TC_F16, f32_to_f16_bits(t, map[in->a]));
    }
    return in->dtype == TC_BF16
        ? from_bits16(t, TC_BF16, f32_to_bf16_bits(t, map[in->a]))
        : TC_KEEP;
}

int
tc_kernel_lower_half_casts(tc_kernel *k)
{
    return tc_kernel_rewrite(k, is_cast, expand, k);
}
