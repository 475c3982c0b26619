/* Q6_K's order on the GPU (backends/gpu/q6k_order.h) without a GPU: random blocks reordered as
 * the weight upload reorders them, every value read back through the decoder's byte and shift
 * functions and through the decode unit's loads (16 code bytes at 16 k, 8 high-bit bytes at
 * 128 + 8 k, the scale word of group k / 2), each equal bit for bit to the reference
 * dequantizer's value (quant/dequant_k.c) of the block as stored. */
#include "backends/gpu/q6k_order.h"
#include "quant/dequant.h"
#include "quant/half.h"

#include "check.h"
#include "rng.h"

#include <stdio.h>

enum { BLOCKS = 64 };

/* d · scale · (q - 32), rounded as the device's decoder rounds it */
static float value(const uint8_t *d, int8_t sc, int q)
{
    const float dl = celer_half_to_f32((uint16_t)(d[0] | d[1] << 8)) * (float)sc;
    return dl * (float)(q - 32);
}

static int block(const uint8_t *src)
{
    float   ref[256];
    uint8_t codes[192], sc[16], d[2];
    celer_dequant_row_q6_K(src, ref, 256);
    q6k_order_block(src, codes, sc, d);
    for (int v = 0; v < 256; v++) { /* the decoder's reading (gpu_decode.cuh) */
        const int hf = v / 128, s = v / 32 % 4, l = v % 32;
        const int lo = (codes[q6k_lo_at(hf, s, l)] >> q6k_lo_shift(s)) & 15;
        const int q  = lo | ((codes[q6k_hi_at(hf, l)] >> q6k_hi_shift(s)) & 3) << 4;
        const float y = value(d, (int8_t)sc[q6k_scale_at(hf, s, l)], q);
        CHECK(memcmp(&y, &ref[v], sizeof y) == 0);
    }
    for (int k = 0; k < 8; k++) { /* the unit's (gpu_mvq_units.cuh): positions 8 (k % 4) .. of half k / 4 */
        const int      hf = k / 4, l0 = 8 * (k % 4);
        const uint8_t *ab = codes + q6k_lo_at(hf, 0, l0), *hb = codes + q6k_hi_at(hf, l0);
        const uint8_t *g  = sc + q6k_scale_at(hf, 0, l0);
        CHECK(ab == codes + 16 * k && hb == codes + 128 + 8 * k && g == sc + 4 * (k / 2)); /* aligned runs */
        for (int i = 0; i < 8; i++)
            for (int s = 0; s < 4; s++) { /* quarter s: A's low nibbles, B's, A's high, B's high */
                const int lo = (ab[8 * (s % 2) + i] >> (4 * (s / 2))) & 15, hi = (hb[i] >> (2 * s)) & 3;
                const int v  = 128 * (k / 4) + 32 * s + 8 * (k % 4) + i;
                const float y = value(d, (int8_t)g[s], lo | hi << 4);
                CHECK(memcmp(&y, &ref[v], sizeof y) == 0);
            }
    }
    return 0;
}

int main(void)
{
    static uint8_t blocks[BLOCKS][210];
    for (int b = 0; b < BLOCKS; b++) {
        for (int i = 0; i < 208; i++) blocks[b][i] = (uint8_t)rnd();
        const uint16_t d = celer_f32_to_half(uni() * 0.05f); /* a finite d, either sign */
        blocks[b][208] = (uint8_t)d, blocks[b][209] = (uint8_t)(d >> 8);
    }
    for (int b = 0; b < BLOCKS; b++)
        if (block(blocks[b])) {
            fprintf(stderr, "test_q6k_order: block %d\n", b);
            return 1;
        }
    /* the order is a permutation: every byte of the stored codes and scales lands once */
    uint8_t src[210], codes[192], sc[16], d[2];
    int     seen[208] = {0};
    for (int i = 0; i < 208; i++) src[i] = (uint8_t)i;
    src[208] = src[209] = 0;
    q6k_order_block(src, codes, sc, d);
    for (int i = 0; i < 192; i++) seen[codes[i]]++;
    for (int i = 0; i < 16; i++) seen[sc[i]]++;
    for (int i = 0; i < 208; i++) CHECK(seen[i] == 1);
    printf("test_q6k_order: passed\n");
    return 0;
}
