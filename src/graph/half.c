/* half.c - float16 / bfloat16 <-> float32 conversions on the host.
 *
 * The graph stage needs them to round constants the way eager does; the C
 * tests use them as the reference for the kernel code (kir_half.c builds
 * the same computations in KIR, so both must stay in step).
 *
 * float32 -> float16 is the branch-free FP16-library algorithm (Maratyszcza,
 * also c10::detail::fp16_ieee_from_fp32_value): scaling by 2^112 * 2^-110
 * moves overflow to infinity, and adding a power of two chosen from the
 * input's exponent makes the float32 adder round the mantissa to the
 * float16 position, subnormals included, with round-to-nearest-even.
 */
#include "graph.h"

#include <string.h>

static uint32_t
f32_bits(float f)
{
    uint32_t w;
    memcpy(&w, &f, 4);
    return w;
}

static float
f32_from_bits(uint32_t w)
{
    float f;
    memcpy(&f, &w, 4);
    return f;
}

uint16_t
tc_f32_to_f16_bits(float f)
{
    uint32_t w = f32_bits(f);
    uint32_t sign = (w >> 16) & 0x8000u;
    uint32_t aw = w & 0x7fffffffu;
    if (aw > 0x7f800000u) {
        /* NaN: quiet, top 10 payload bits kept (what vcvtps2ph does) */
        return (uint16_t)(sign | 0x7e00u | ((aw >> 13) & 0x3ffu));
    }
    float base = (f32_from_bits(aw) * 0x1.0p+112f) * 0x1.0p-110f;
    uint32_t bias = aw & 0x7f800000u;
    if (bias < 0x38800000u) { /* exponents below float16's normal range */
        bias = 0x38800000u;
    }
    base = f32_from_bits(bias + 0x07800000u) + base;
    uint32_t bits = f32_bits(base);
    return (uint16_t)(sign | (((bits >> 13) & 0x7c00u) + (bits & 0x0fffu)));
}

float
tc_f16_bits_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu;
    uint32_t mag;
    if (em < 0x400u) {
        /* subnormal: 0.5 + m * 2^-24 - 0.5, exact */
        mag = f32_bits(f32_from_bits(em | 0x3f000000u) - 0.5f);
    } else {
        /* rebias by 2^112 so that exponent 31 lands on 255 (inf / NaN) */
        mag = f32_bits(f32_from_bits((em << 13) + 0x70000000u) * 0x1.0p-112f);
    }
    return f32_from_bits(sign | mag);
}

uint16_t
tc_f32_to_bf16_bits(float f)
{
    uint32_t w = f32_bits(f);
    if ((w & 0x7fffffffu) > 0x7f800000u) {
        return 0xffffu;
    }
    return (uint16_t)((w + 0x7fffu + ((w >> 16) & 1u)) >> 16);
}

float
tc_bf16_bits_to_f32(uint16_t h)
{
    return f32_from_bits((uint32_t)h << 16);
}

double
tc_round_to_dtype(double v, tc_dtype dt)
{
    switch (dt) {
    case TC_F32:
        return (float)v;
    case TC_F16:
        return tc_f16_bits_to_f32(tc_f32_to_f16_bits((float)v));
    case TC_BF16:
        return tc_bf16_bits_to_f32(tc_f32_to_bf16_bits((float)v));
    default:
        return v;
    }
}
