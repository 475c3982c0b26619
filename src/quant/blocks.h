/* Quantized block layouts of GGUF weights, declared once for C, CUDA and HIP. A block holds
 * block_elems consecutive elements of one row; rows are whole numbers of blocks. Half floats
 * are stored as their IEEE binary16 bits (celer_half) and converted by quant/half.h.
 *
 * Dequantization, per block (x = element value, q = stored code):
 *   Q4_0  x = (q - 8) * d                     q: 4 bits; elements j and j+16 share qs[j] (low, high nibble)
 *   Q4_1  x = q * d + m
 *   Q5_0  x = (q - 16) * d                    q: 4 bits from qs as Q4_0 plus bit 4 from qh (bit j: element j)
 *   Q5_1  x = q * d + m
 *   Q8_0  x = q * d                           q: int8
 *   Q4_K  256 elements in 8 sub-blocks of 32; 6-bit scale and min per sub-block packed in scales[12];
 *         x = d * sc * q - dmin * m           q: 4 bits; 64 elements per 32 bytes of qs (low nibbles, then high)
 *   Q5_K  as Q4_K with bit 4 of q from qh
 *   Q6_K  256 elements in 16 sub-blocks of 16; int8 scale per sub-block; x = d * sc * (q - 32), q: 6 bits
 *         (low 4 bits in ql, high 2 bits in qh)
 * Activations for integer dot products are quantized to Q8_0 (32-blocks) or Q8_K (256-blocks). */
#ifndef CELER_QUANT_BLOCKS_H
#define CELER_QUANT_BLOCKS_H

#include <stdint.h>

#if defined(__cplusplus)
#define CELER_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#define CELER_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif

typedef uint16_t celer_half; /* IEEE binary16 bits */

#define CELER_QK4_0 32
#define CELER_QK4_1 32
#define CELER_QK5_0 32
#define CELER_QK5_1 32
#define CELER_QK8_0 32
#define CELER_QK_K  256
#define CELER_K_SCALE_SIZE 12

typedef struct {
    celer_half d;
    uint8_t    qs[CELER_QK4_0 / 2];
} celer_block_q4_0;
CELER_STATIC_ASSERT(sizeof(celer_block_q4_0) == 18, "q4_0 block size");

typedef struct {
    celer_half d, m;
    uint8_t    qs[CELER_QK4_1 / 2];
} celer_block_q4_1;
CELER_STATIC_ASSERT(sizeof(celer_block_q4_1) == 20, "q4_1 block size");

typedef struct {
    celer_half d;
    uint8_t    qh[4];
    uint8_t    qs[CELER_QK5_0 / 2];
} celer_block_q5_0;
CELER_STATIC_ASSERT(sizeof(celer_block_q5_0) == 22, "q5_0 block size");

typedef struct {
    celer_half d, m;
    uint8_t    qh[4];
    uint8_t    qs[CELER_QK5_1 / 2];
} celer_block_q5_1;
CELER_STATIC_ASSERT(sizeof(celer_block_q5_1) == 24, "q5_1 block size");

typedef struct {
    celer_half d;
    int8_t     qs[CELER_QK8_0];
} celer_block_q8_0;
CELER_STATIC_ASSERT(sizeof(celer_block_q8_0) == 34, "q8_0 block size");

typedef struct {
    celer_half d, dmin;
    uint8_t    scales[CELER_K_SCALE_SIZE]; /* 8 scales and 8 mins, 6 bits each */
    uint8_t    qs[CELER_QK_K / 2];
} celer_block_q4_K;
CELER_STATIC_ASSERT(sizeof(celer_block_q4_K) == 144, "q4_K block size");

typedef struct {
    celer_half d, dmin;
    uint8_t    scales[CELER_K_SCALE_SIZE];
    uint8_t    qh[CELER_QK_K / 8];
    uint8_t    qs[CELER_QK_K / 2];
} celer_block_q5_K;
CELER_STATIC_ASSERT(sizeof(celer_block_q5_K) == 176, "q5_K block size");

typedef struct {
    uint8_t    ql[CELER_QK_K / 2];
    uint8_t    qh[CELER_QK_K / 4];
    int8_t     scales[CELER_QK_K / 16];
    celer_half d;
} celer_block_q6_K;
CELER_STATIC_ASSERT(sizeof(celer_block_q6_K) == 210, "q6_K block size");

/* Activation block for K-quant dot products: f32 scale, int8 codes, and the sums of each
 * 16 codes (for the min terms). */
typedef struct {
    float   d;
    int8_t  qs[CELER_QK_K];
    int16_t bsums[CELER_QK_K / 16];
} celer_block_q8_K;
CELER_STATIC_ASSERT(sizeof(celer_block_q8_K) == 292, "q8_K block size");

#endif
