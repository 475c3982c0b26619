/* Q6_K's order on the device (gpu_backend.h, SPLIT): a row's super-blocks' 192 code bytes, then
 * its scales (16 bytes a super-block), then its d values (2 bytes each). A super-block's value
 * v = 128 hf + 32 s + l (half hf, quarter s, position l: the order of the file and of
 * quant/dequant_k.c) is stored in 6 bits, its low 4 in ql[64 hf + 32 (s % 2) + l] (the high
 * nibble for s >= 2), its high 2 in qh[32 hf + l] (bits 2 s); its scale is scales[8 hf + 2 s +
 * l / 16]. The decode unit (gpu_mvq_units.cuh) takes 8 positions of a half, k = 4 hf + l / 8,
 * all four quarters: its low nibbles are 16 bytes at 16 k, its high bits 8 bytes at 128 + 8 k,
 * its four scales one word, group 2 hf + l / 16. Shared with the host-only test
 * (tests/test_q6k_order.c), which holds it to the reference dequantizer. */
#ifndef CELER_BACKENDS_GPU_Q6K_ORDER_H
#define CELER_BACKENDS_GPU_Q6K_ORDER_H

#include <stdint.h>
#include <string.h>

#ifndef CELER_HD /* host and device in the GPU sources (gpu_vendor.h) */
#define CELER_HD
#endif

/* For value 128 hf + 32 s + l of a super-block: the code byte (of its 192) holding its low 4
 * bits and their shift, the byte holding its high 2 bits (as stored) and theirs, and its scale's
 * byte of the super-block's 16 (scale 8 hf + 2 s + p at group 2 hf + p, place s). */
static inline CELER_HD int q6k_lo_at(int hf, int s, int l) { return 16 * (4 * hf + l / 8) + 8 * (s % 2) + l % 8; }
static inline CELER_HD int q6k_lo_shift(int s) { return 4 * (s / 2); }
static inline CELER_HD int q6k_hi_at(int hf, int l) { return 128 + 32 * hf + l; }
static inline CELER_HD int q6k_hi_shift(int s) { return 2 * s; }
static inline CELER_HD int q6k_scale_at(int hf, int s, int l) { return 4 * (2 * hf + l / 16) + s; }

/* One block as stored (ql 128, qh 64, scales 16, d 2: 210 bytes) into the device's order: its
 * codes (192 bytes), its scales (16) and its d (2). */
static inline void q6k_order_block(const uint8_t *src, uint8_t *codes, uint8_t *scales, uint8_t *d)
{
    for (int k = 0; k < 8; k++) { /* positions 8 (k % 4) .. of half k / 4: quarters 0 and 2, then 1 and 3 */
        const int hf = k / 4, l0 = 8 * (k % 4);
        memcpy(codes + 16 * k, src + 64 * hf + l0, 8);
        memcpy(codes + 16 * k + 8, src + 64 * hf + 32 + l0, 8);
    }
    memcpy(codes + 128, src + 128, 64);
    for (int g = 0; g < 4; g++) /* group 2 hf + p: scales 8 hf + p, + 2, + 4, + 6 */
        for (int s = 0; s < 4; s++) scales[4 * g + s] = src[192 + 8 * (g / 2) + g % 2 + 2 * s];
    memcpy(d, src + 208, 2);
}

#endif
