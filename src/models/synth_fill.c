/* Random weights for celer synth. Quantized blocks get random codes (every bit pattern of the
 * codes, sub-block scales and mins is valid) and a random fp16 scale from a range that keeps the
 * decoded values small:
 *   Q4_0, Q4_1          d ~ U(0.001, 0.01)          |x| <= 8 d  < 0.08  (Q4_1: m = -8 d)
 *   Q5_0, Q5_1          d ~ U(0.0005, 0.005)        |x| <= 16 d < 0.08  (Q5_1: m = -16 d)
 *   Q8_0                d ~ U(0.0001, 0.001)        |x| <= 128 d < 0.13
 *   Q4_K, Q5_K          d, dmin ~ U(6.2e-5, 1.2e-4) |x| <= 63·31 d < 0.24
 *   Q6_K                d ~ U(6.2e-5, 1.2e-4)       |x| <= 128·32 d < 0.5
 *   F32, F16, BF16      random sign and mantissa, |x| in [2^-10, 2^-6)
 * Norm weights are 1 + U(-0.01, 0.01), biases U(-0.01, 0.01), both F32. */
#include "core/error.h"
#include "models/synth_impl.h"
#include "quant/blocks.h"
#include "quant/half.h"

#include <stddef.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void synth_rng_init(synth_rng *r, uint64_t seed, const char *name)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    uint64_t x = seed ^ h;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t synth_rng_next(synth_rng *r)
{
    uint64_t *s = r->s, out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

float synth_rng_uniform(synth_rng *r, float lo, float hi)
{
    return lo + (hi - lo) * (float)(synth_rng_next(r) >> 40) * (1.0f / 16777216.0f);
}

static void fill_bytes(synth_rng *r, uint8_t *p, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = synth_rng_next(r);
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = synth_rng_next(r);
        memcpy(p + i, &v, n - i);
    }
}

static void put_half(uint8_t *p, float f)
{
    celer_half h = celer_f32_to_half(f);
    memcpy(p, &h, sizeof h);
}

/* Patches the fp16 scale (at d_at) and, when min_at >= 0, the fp16 min / dmin of each block. */
static void patch_scales(synth_rng *r, uint8_t *p, uint64_t n, size_t bytes, size_t d_at, long min_at, float lo,
                         float hi, float min_mul)
{
    for (uint64_t b = 0; b < n; b++, p += bytes) {
        float d = synth_rng_uniform(r, lo, hi);
        put_half(p + d_at, d);
        if (min_at >= 0) put_half(p + min_at, min_mul ? min_mul * d : synth_rng_uniform(r, lo, hi));
    }
}

void synth_fill(synth_rng *r, celer_ggml_type type, synth_kind kind, void *dst, uint64_t n_blocks)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(type);
    CELER_ASSERT(ti && ti->block_bytes);
    CELER_ASSERT(kind == SYNTH_WEIGHT || type == CELER_GGML_F32);
    uint8_t *p = dst;
    if (kind != SYNTH_WEIGHT) {
        float *f = dst;
        for (uint64_t i = 0; i < n_blocks; i++)
            f[i] = kind == SYNTH_NORM ? 1.0f + synth_rng_uniform(r, -0.01f, 0.01f) : synth_rng_uniform(r, -0.01f, 0.01f);
        return;
    }
    fill_bytes(r, p, (size_t)(n_blocks * ti->block_bytes));
    switch (type) {
    case CELER_GGML_F32: /* exponent 117..120: 2^-10 <= |x| < 2^-6 */
        for (uint64_t i = 0; i < n_blocks; i++, p += 4) {
            uint32_t u;
            memcpy(&u, p, 4);
            u = (u & 0x807fffffu) | ((117u + ((u >> 23) & 3u)) << 23);
            memcpy(p, &u, 4);
        }
        break;
    case CELER_GGML_F16: /* exponent 5..8 of bias 15 */
    case CELER_GGML_BF16: /* exponent 117..120 of bias 127 */
        for (uint64_t i = 0; i < n_blocks; i++, p += 2) {
            uint16_t u;
            memcpy(&u, p, 2);
            if (type == CELER_GGML_F16)
                u = (uint16_t)((u & 0x83ffu) | ((5u + ((u >> 10) & 3u)) << 10));
            else
                u = (uint16_t)((u & 0x807fu) | ((117u + ((u >> 7) & 3u)) << 7));
            memcpy(p, &u, 2);
        }
        break;
    case CELER_GGML_Q4_0:
        patch_scales(r, p, n_blocks, ti->block_bytes, offsetof(celer_block_q4_0, d), -1, 0.001f, 0.01f, 0);
        break;
    case CELER_GGML_Q4_1:
        patch_scales(r, p, n_blocks, ti->block_bytes, offsetof(celer_block_q4_1, d), offsetof(celer_block_q4_1, m),
                     0.001f, 0.01f, -8.0f);
        break;
    case CELER_GGML_Q5_0:
        patch_scales(r, p, n_blocks, ti->block_bytes, offsetof(celer_block_q5_0, d), -1, 0.0005f, 0.005f, 0);
        break;
    case CELER_GGML_Q5_1:
        patch_scales(r, p, n_blocks, ti->block_bytes, offsetof(celer_block_q5_1, d), offsetof(celer_block_q5_1, m),
                     0.0005f, 0.005f, -16.0f);
        break;
    case CELER_GGML_Q8_0:
        patch_scales(r, p, n_blocks, ti->block_bytes, offsetof(celer_block_q8_0, d), -1, 0.0001f, 0.001f, 0);
        break;
    case CELER_GGML_Q4_K:
        patch_scales(r, p, n_blocks, ti->block_bytes, offsetof(celer_block_q4_K, d), offsetof(celer_block_q4_K, dmin),
                     6.2e-5f, 1.2e-4f, 0);
        break;
    case CELER_GGML_Q5_K:
        patch_scales(r, p, n_blocks, ti->block_bytes, offsetof(celer_block_q5_K, d), offsetof(celer_block_q5_K, dmin),
                     6.2e-5f, 1.2e-4f, 0);
        break;
    case CELER_GGML_Q6_K:
        patch_scales(r, p, n_blocks, ti->block_bytes, offsetof(celer_block_q6_K, d), -1, 6.2e-5f, 1.2e-4f, 0);
        break;
    default: CELER_ASSERT(!"synth: no random filler for this type");
    }
}
