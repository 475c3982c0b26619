#include "quant/ggml_types.h"

#include <stddef.h>

/* Block geometry of each type (elements, bytes), from the layouts of the GGUF spec. */
static const celer_ggml_type_info types[CELER_GGML_TYPE_LIMIT] = {
    [CELER_GGML_F32]     = {"F32", 1, 4},
    [CELER_GGML_F16]     = {"F16", 1, 2},
    [CELER_GGML_Q4_0]    = {"Q4_0", 32, 2 + 16},
    [CELER_GGML_Q4_1]    = {"Q4_1", 32, 2 + 2 + 16},
    [CELER_GGML_Q5_0]    = {"Q5_0", 32, 2 + 4 + 16},
    [CELER_GGML_Q5_1]    = {"Q5_1", 32, 2 + 2 + 4 + 16},
    [CELER_GGML_Q8_0]    = {"Q8_0", 32, 2 + 32},
    [CELER_GGML_Q8_1]    = {"Q8_1", 32, 4 + 32},
    [CELER_GGML_Q2_K]    = {"Q2_K", 256, 16 + 64 + 2 + 2},
    [CELER_GGML_Q3_K]    = {"Q3_K", 256, 32 + 64 + 12 + 2},
    [CELER_GGML_Q4_K]    = {"Q4_K", 256, 2 + 2 + 12 + 128},
    [CELER_GGML_Q5_K]    = {"Q5_K", 256, 2 + 2 + 12 + 32 + 128},
    [CELER_GGML_Q6_K]    = {"Q6_K", 256, 128 + 64 + 16 + 2},
    [CELER_GGML_Q8_K]    = {"Q8_K", 256, 4 + 256 + 32},
    [CELER_GGML_IQ2_XXS] = {"IQ2_XXS", 256, 2 + 64},
    [CELER_GGML_IQ2_XS]  = {"IQ2_XS", 256, 2 + 64 + 8},
    [CELER_GGML_IQ3_XXS] = {"IQ3_XXS", 256, 2 + 96},
    [CELER_GGML_IQ1_S]   = {"IQ1_S", 256, 2 + 32 + 16},
    [CELER_GGML_IQ4_NL]  = {"IQ4_NL", 32, 2 + 16},
    [CELER_GGML_IQ3_S]   = {"IQ3_S", 256, 2 + 64 + 8 + 32 + 4},
    [CELER_GGML_IQ2_S]   = {"IQ2_S", 256, 2 + 64 + 8 + 8},
    [CELER_GGML_IQ4_XS]  = {"IQ4_XS", 256, 2 + 2 + 4 + 128},
    [CELER_GGML_I8]      = {"I8", 1, 1},
    [CELER_GGML_I16]     = {"I16", 1, 2},
    [CELER_GGML_I32]     = {"I32", 1, 4},
    [CELER_GGML_I64]     = {"I64", 1, 8},
    [CELER_GGML_F64]     = {"F64", 1, 8},
    [CELER_GGML_IQ1_M]   = {"IQ1_M", 256, 32 + 16 + 8},
    [CELER_GGML_BF16]    = {"BF16", 1, 2},
    [CELER_GGML_TQ1_0]   = {"TQ1_0", 256, 48 + 4 + 2},
    [CELER_GGML_TQ2_0]   = {"TQ2_0", 256, 64 + 2},
    [CELER_GGML_MXFP4]   = {"MXFP4", 32, 1 + 16},
    [CELER_GGML_NVFP4]   = {"NVFP4", 64, 4 + 32},   /* four e4m3 scales per 16, 64 nibbles */
    [CELER_GGML_Q1_0]    = {"Q1_0", 128, 2 + 16},
};

const celer_ggml_type_info *celer_ggml_type_get(uint32_t type)
{
    if (type >= CELER_GGML_TYPE_LIMIT || !types[type].name) return NULL;
    return &types[type];
}
