/* Random weight matrices of any GGUF type the kernels run, for kernel tests: random codes, and
 * every block's binary16 scale fields set to small positive values (so every decoded value is
 * finite), at the offsets quant/blocks.h gives. Uses rng.h's generator. */
#ifndef CELER_TESTS_RANDOM_WEIGHTS_H
#define CELER_TESTS_RANDOM_WEIGHTS_H

#include "quant/blocks.h"
#include "quant/ggml_types.h"
#include "quant/half.h"
#include "rng.h"

#include <stdlib.h>
#include <string.h>

/* Offsets of a block's binary16 scale fields; returns how many. */
static inline int random_weights_scale_fields(celer_ggml_type t, size_t at[2])
{
    switch (t) {
    case CELER_GGML_Q4_0: case CELER_GGML_Q5_0: case CELER_GGML_Q8_0: at[0] = 0; return 1;
    case CELER_GGML_Q4_1: case CELER_GGML_Q5_1: case CELER_GGML_Q4_K: case CELER_GGML_Q5_K:
        at[0] = 0, at[1] = 2;
        return 2;
    case CELER_GGML_Q6_K: at[0] = offsetof(celer_block_q6_K, d); return 1;
    default: return 0;
    }
}

/* A (rows, cols) matrix of type t (malloc'd; cols whole blocks). Float types hold values in
 * [-scale, scale). */
static inline void *random_weights(celer_ggml_type t, int64_t rows, int64_t cols, float scale)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(t);
    size_t                      n  = (size_t)(rows * cols / ti->block_elems) * ti->block_bytes;
    unsigned char              *p  = malloc(n);
    if (!p) return NULL;
    if (t == CELER_GGML_F32 || t == CELER_GGML_F16 || t == CELER_GGML_BF16) {
        for (int64_t i = 0; i < rows * cols; i++) {
            float v = uni() * scale;
            if (t == CELER_GGML_F32) memcpy(p + 4 * i, &v, 4);
            else {
                uint16_t h = t == CELER_GGML_F16 ? celer_f32_to_half(v) : celer_f32_to_bf16(v);
                memcpy(p + 2 * i, &h, 2);
            }
        }
        return p;
    }
    for (size_t i = 0; i < n; i++) p[i] = (unsigned char)rnd();
    size_t at[2];
    int    nf = random_weights_scale_fields(t, at);
    for (size_t b = 0; b < n / ti->block_bytes; b++)
        for (int s = 0; s < nf; s++) {
            uint16_t h = celer_f32_to_half(0.002f + 0.018f * (float)rnd() / 4294967296.0f);
            memcpy(p + b * ti->block_bytes + at[s], &h, 2);
        }
    return p;
}

#endif
