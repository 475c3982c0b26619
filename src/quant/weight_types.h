/* Weight storage types of celer's own, numbered past GGUF's: quant/ggml_types.h keeps exactly
 * GGUF's numbering (tests/test_ggml_types checks it against gguf-py), so a type that no GGUF file
 * can hold lives here, as a celer_ggml_type value that celer_ggml_type_get does not know. A
 * celer_weight (backends/backend.h) of one of these types carries the rest of its description
 * beside the type. */
#ifndef CELER_QUANT_WEIGHT_TYPES_H
#define CELER_QUANT_WEIGHT_TYPES_H

#include "quant/ggml_types.h"

/* An MLX-quantized matrix (quant/mlx_quant.h: affine 2-8 bits, mxfp4, mxfp8, nvfp4):
 * celer_weight.mlx names the mode, bits, group size and the scales' dtype, and
 * celer_weight.mlx_data the three arrays as mlx stores them. */
#define CELER_WEIGHT_MLX ((celer_ggml_type)0x1000)

#endif
