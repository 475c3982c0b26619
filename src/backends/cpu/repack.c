/* The r16 weight layout (repack.h): packing at load and reading one row back (embeddings). */
#include "backends/cpu/repack.h"

#include "quant/blocks.h"

#include <string.h>

bool celer_cpu_r16_supported(celer_ggml_type wtype)
{
    return wtype == CELER_GGML_Q4_0 || wtype == CELER_GGML_Q4_1 || wtype == CELER_GGML_Q8_0;
}

/* Vectors of codes per group block, and where they start. */
static int    n_vectors(celer_ggml_type t) { return t == CELER_GGML_Q8_0 ? 8 : 4; }
static size_t codes_at(celer_ggml_type t) { return (t == CELER_GGML_Q4_1 ? 2 : 1) * CELER_R16_ROWS * sizeof(uint16_t); }

size_t celer_cpu_r16_block_bytes(celer_ggml_type wtype)
{
    return codes_at(wtype) + (size_t)n_vectors(wtype) * 64;
}

size_t celer_cpu_r16_size(celer_ggml_type wtype, int64_t rows, int64_t k)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(wtype);
    int64_t                     groups = rows / CELER_R16_ROWS, nb = k / 32;
    return (size_t)(groups * nb) * celer_cpu_r16_block_bytes(wtype) +
           (size_t)(rows - groups * CELER_R16_ROWS) * (size_t)nb * ti->block_bytes;
}

/* The stored block's scale, min (or 0) and the address of its 16 or 32 code bytes. */
static void block_parts(celer_ggml_type t, const void *blk, uint16_t *d, uint16_t *m, const uint8_t **qs)
{
    switch (t) {
    case CELER_GGML_Q4_0: *d = ((const celer_block_q4_0 *)blk)->d, *m = 0, *qs = ((const celer_block_q4_0 *)blk)->qs; break;
    case CELER_GGML_Q4_1:
        *d = ((const celer_block_q4_1 *)blk)->d, *m = ((const celer_block_q4_1 *)blk)->m;
        *qs = ((const celer_block_q4_1 *)blk)->qs;
        break;
    default: *d = ((const celer_block_q8_0 *)blk)->d, *m = 0, *qs = (const uint8_t *)((const celer_block_q8_0 *)blk)->qs;
    }
}

void celer_cpu_r16_pack(celer_ggml_type wtype, const void *src, int64_t rows, int64_t k, void *dst)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(wtype);
    int64_t                     groups = rows / CELER_R16_ROWS, nb = k / 32;
    size_t                      bb = ti->block_bytes, gbb = celer_cpu_r16_block_bytes(wtype), ca = codes_at(wtype);
    uint8_t                     flip = wtype == CELER_GGML_Q8_0 ? 0x80 : 0;
    for (int64_t g = 0; g < groups; g++)
        for (int64_t b = 0; b < nb; b++) {
            uint8_t *out = (uint8_t *)dst + (size_t)(g * nb + b) * gbb;
            for (int lane = 0; lane < CELER_R16_ROWS; lane++) {
                const char    *blk = (const char *)src + (size_t)((g * CELER_R16_ROWS + lane) * nb + b) * bb;
                uint16_t       d, m;
                const uint8_t *qs;
                block_parts(wtype, blk, &d, &m, &qs);
                memcpy(out + 2 * lane, &d, 2);
                if (wtype == CELER_GGML_Q4_1) memcpy(out + 2 * (CELER_R16_ROWS + lane), &m, 2);
                for (int j = 0; j < n_vectors(wtype); j++)
                    for (int i = 0; i < 4; i++) out[ca + 64 * j + 4 * lane + i] = qs[4 * j + i] ^ flip;
            }
        }
    size_t tail = (size_t)(rows - groups * CELER_R16_ROWS) * (size_t)nb * bb;
    memcpy((char *)dst + (size_t)(groups * nb) * gbb, (const char *)src + (size_t)(groups * CELER_R16_ROWS * nb) * bb,
           tail);
}

void celer_cpu_r16_row(celer_ggml_type wtype, const void *packed, int64_t rows, int64_t k, int64_t r, void *dst)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(wtype);
    int64_t                     groups = rows / CELER_R16_ROWS, nb = k / 32;
    size_t                      bb = ti->block_bytes, gbb = celer_cpu_r16_block_bytes(wtype), ca = codes_at(wtype);
    if (r >= groups * CELER_R16_ROWS) {
        memcpy(dst, (const char *)packed + (size_t)(groups * nb) * gbb + (size_t)((r - groups * CELER_R16_ROWS) * nb) * bb,
               (size_t)nb * bb);
        return;
    }
    int64_t g = r / CELER_R16_ROWS;
    int     lane = (int)(r % CELER_R16_ROWS);
    uint8_t flip = wtype == CELER_GGML_Q8_0 ? 0x80 : 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *in  = (const uint8_t *)packed + (size_t)(g * nb + b) * gbb;
        char          *blk = (char *)dst + (size_t)b * bb;
        /* every stored block starts with d; Q4_1's m follows it; the codes end the block */
        memcpy(blk, in + 2 * lane, 2);
        if (wtype == CELER_GGML_Q4_1) memcpy(blk + 2, in + 2 * (CELER_R16_ROWS + lane), 2);
        uint8_t *qs = (uint8_t *)blk + bb - (size_t)n_vectors(wtype) * 4;
        for (int j = 0; j < n_vectors(wtype); j++)
            for (int i = 0; i < 4; i++) qs[4 * j + i] = in[ca + 64 * j + 4 * lane + i] ^ flip;
    }
}
