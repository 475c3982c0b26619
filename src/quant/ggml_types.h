/* GGML tensor types as numbered in GGUF files, with their block geometry. One table; gaps in
 * the numbering (types removed upstream) are unknown types. */
#ifndef CELER_QUANT_GGML_TYPES_H
#define CELER_QUANT_GGML_TYPES_H

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    CELER_GGML_F32     = 0,
    CELER_GGML_F16     = 1,
    CELER_GGML_Q4_0    = 2,
    CELER_GGML_Q4_1    = 3,
    CELER_GGML_Q5_0    = 6,
    CELER_GGML_Q5_1    = 7,
    CELER_GGML_Q8_0    = 8,
    CELER_GGML_Q8_1    = 9,
    CELER_GGML_Q2_K    = 10,
    CELER_GGML_Q3_K    = 11,
    CELER_GGML_Q4_K    = 12,
    CELER_GGML_Q5_K    = 13,
    CELER_GGML_Q6_K    = 14,
    CELER_GGML_Q8_K    = 15,
    CELER_GGML_IQ2_XXS = 16,
    CELER_GGML_IQ2_XS  = 17,
    CELER_GGML_IQ3_XXS = 18,
    CELER_GGML_IQ1_S   = 19,
    CELER_GGML_IQ4_NL  = 20,
    CELER_GGML_IQ3_S   = 21,
    CELER_GGML_IQ2_S   = 22,
    CELER_GGML_IQ4_XS  = 23,
    CELER_GGML_I8      = 24,
    CELER_GGML_I16     = 25,
    CELER_GGML_I32     = 26,
    CELER_GGML_I64     = 27,
    CELER_GGML_F64     = 28,
    CELER_GGML_IQ1_M   = 29,
    CELER_GGML_BF16    = 30,
    CELER_GGML_TQ1_0   = 34,
    CELER_GGML_TQ2_0   = 35,
    CELER_GGML_MXFP4   = 39,
    CELER_GGML_NVFP4   = 40,
    CELER_GGML_Q1_0    = 41,
    CELER_GGML_TYPE_LIMIT /* one past the largest number */
} celer_ggml_type;

typedef struct {
    const char *name;        /* as gguf-py spells it: "Q4_K", "F16" */
    uint32_t    block_elems; /* elements per block */
    uint32_t    block_bytes; /* bytes per block */
} celer_ggml_type_info;

/* NULL for a number that is not a known type. */
const celer_ggml_type_info *celer_ggml_type_get(uint32_t type);

#endif
