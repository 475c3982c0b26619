/* Q2_K and Q3_K block layouts (the 2- and 3-bit K-quants), beside the others in quant/blocks.h.
 *
 * Dequantization, per 256-element block in 16 sub-blocks of 16 (x = element value, q = code):
 *   Q2_K  x = (d * sc) * q - (dmin * m)      sc, m: low and high nibble of scales[sub-block];
 *         q: 2 bits; each 32 bytes of qs hold 128 elements, bits 2s..2s+1 of byte l holding
 *         element 32s + l of that half
 *   Q3_K  x = (d * (sc - 32)) * q             sc: 6 bits, low 4 in scales[0..8) (nibbles),
 *         high 2 in scales[8..12); q = low 2 bits (as Q2_K) - 4 when the hmask bit is clear
 *         (bit b of hmask[l]: element 32b + l) */
#ifndef CELER_QUANT_BLOCKS_K23_H
#define CELER_QUANT_BLOCKS_K23_H

#include "quant/blocks.h"

typedef struct {
    uint8_t    scales[CELER_QK_K / 16]; /* per sub-block: scale (low nibble), min (high nibble) */
    uint8_t    qs[CELER_QK_K / 4];      /* 2-bit codes */
    celer_half d, dmin;
} celer_block_q2_K;
CELER_STATIC_ASSERT(sizeof(celer_block_q2_K) == 84, "q2_K block size");

typedef struct {
    uint8_t    hmask[CELER_QK_K / 8];     /* bit 2 of each code, inverted: clear means -4 */
    uint8_t    qs[CELER_QK_K / 4];        /* low 2 bits of each code */
    uint8_t    scales[CELER_K_SCALE_SIZE]; /* 16 scales, 6 bits each, biased by 32 */
    celer_half d;
} celer_block_q3_K;
CELER_STATIC_ASSERT(sizeof(celer_block_q3_K) == 110, "q3_K block size");

#endif
