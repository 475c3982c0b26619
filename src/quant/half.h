/* binary16 and bfloat16 <-> binary32, exact (round to nearest even when narrowing). */
#ifndef CELER_QUANT_HALF_H
#define CELER_QUANT_HALF_H

#include <stdint.h>
#include <string.h>

static inline float celer_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint32_t celer_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Every binary16 value, including subnormals, infinities and NaN, converts exactly. */
static inline float celer_half_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return celer_bits_f32(sign | 0x7f800000u | (man << 13)); /* inf, nan */
    if (exp == 0) {
        if (!man) return celer_bits_f32(sign);
        /* subnormal: man * 2^-24 */
        float f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    return celer_bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

static inline uint16_t celer_f32_to_half(float f)
{
    uint32_t x = celer_f32_bits(f), sign = (x >> 16) & 0x8000, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0)); /* inf, nan */
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);                                   /* overflow */
    if (ax < 0x38800000u) {                                                                    /* subnormal */
        float    a = celer_bits_f32(ax) * 16777216.0f;                                        /* exact: * 2^24 */
        uint32_t m = (uint32_t)a;
        float    r = a - (float)m;
        if (r > 0.5f || (r == 0.5f && (m & 1))) m++;
        return (uint16_t)(sign | m);
    }
    uint32_t e = ((ax >> 23) - 112) << 10, m = (ax >> 13) & 0x3ff, rest = ax & 0x1fff;
    uint32_t h = e | m;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) h++; /* may carry into the exponent: correct */
    return (uint16_t)(sign | h);
}

static inline float celer_bf16_to_f32(uint16_t b) { return celer_bits_f32((uint32_t)b << 16); }

static inline uint16_t celer_f32_to_bf16(float f)
{
    uint32_t x = celer_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

#endif
