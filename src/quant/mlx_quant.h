/* MLX quantized weights (mlx.core.quantize, mlx-lm checkpoints): the shapes of a checkpoint's
 * tensors, and the scalar reference dequantizer that every kernel is tested against. Its values
 * equal mlx.core.dequantize's (mlx 0.32, CPU) bit for bit; tests/reference/test_mlx_dequant.py
 * checks that on fixtures mlx wrote, and docs/correctness.md says how mlx computes them.
 *
 * A weight of logical shape (rows, cols) is three tensors (rows may be the product of several
 * leading dimensions, as in stacked experts):
 *     NAME.weight  (rows, cols * bits / 32)   U32    the codes
 *     NAME.scales  (rows, cols / group_size)  dtype  (affine) or U8 (mxfp4, mxfp8, nvfp4)
 *     NAME.biases  (rows, cols / group_size)  dtype  (affine only)
 * Codes: element j of a row has bits [j * bits, (j + 1) * bits) of the row's words read as one
 * little-endian bit stream (bit k is bit k % 32 of word k / 32), least significant bit first.
 * For 2, 4 and 8 bits a code stays inside a word; 3, 5 and 6-bit codes cross word boundaries
 * (32 of them fill 3, 5 or 6 words exactly, so groups start on a word).
 *
 * Values. R(v) rounds a float32 v to dtype (round to nearest even; identity for F32). mlx runs
 * each op in dtype, and on the CPU an op on bf16 or f16 is the f32 op followed by R; so:
 *     affine  y = R(R(q * scale) + bias)     q the unsigned code, scale and bias in dtype
 *     mxfp4   y = R(e2m1(q) * R(2^(s - 127))) s the E8M0 scale byte: 0 is 2^-127, 255 is +inf
 *     mxfp8   y = R(e4m3(q) * R(2^(s - 127)))
 *     nvfp4   y = R(e2m1(q) * e4m3(s))        exact (at most 6 significant bits) unless NaN
 * For affine, dtype is that of the scales and biases (mlx's result dtype). The fp modes store
 * no dtype: dtype is the one mlx dequantizes to (mx.dequantize's dtype=, default BF16; an
 * mlx-lm layer uses its input's). Products are never fused with the add. e2m1 codes: 0..7 are
 * 0, 0.5, 1, 1.5, 2, 3, 4, 6 and 8..15 their negatives (-0 included); e4m3 is OCP E4M3FN
 * (0x7f and 0xff NaN, no infinity). A NaN result is some NaN: mlx's payloads depend on dtype
 * and CPU and are not reproduced.
 *
 * nvfp4 global scale: mx.quantize and mx.dequantize take an optional float32 global scale g.
 * mlx.nn.QuantizedLinear never has one; mlx-lm's QuantizedSwitchLinear (stacked MoE experts)
 * may, one per expert: a NAME.global_scale F32 tensor of shape (n_experts), loaded when present
 * (mlx-lm's muse_spark makes it from ModelOpt's weight_scale_2 * 2688). Describe each expert as
 * its own weight with its g. With g, mlx computes in float32 whatever dtype asks (the f32 g
 * promotes every later op) and returns float32:
 *     y = e2m1(q) * (e4m3(s) * (g / 2688))    each op in f32; 2688 = 448 * 6 */
#ifndef CELER_QUANT_MLX_QUANT_H
#define CELER_QUANT_MLX_QUANT_H

#include "celer.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One quantized weight as its config describes it. */
typedef struct {
    const char         *name;       /* for messages: the module, e.g. "model.layers.0.mlp.up_proj"; may be NULL */
    celer_hf_quant_mode mode;
    uint32_t            bits;       /* affine: 2, 3, 4, 5, 6, 8; mxfp4, nvfp4: 4; mxfp8: 8 */
    uint32_t            group_size; /* affine: 32, 64, 128; mxfp4, mxfp8: 32; nvfp4: 16 */
    celer_st_dtype      dtype;      /* CELER_ST_BF16, _F16 or _F32: see above */
    bool                has_global_scale; /* nvfp4 only: see above */
    float               global_scale;     /* g, when has_global_scale */
    int64_t             rows, cols; /* the logical (dequantized) shape; cols a multiple of group_size */
} celer_mlx_quant;

/* The tensors a checkpoint must hold for q. */
typedef struct {
    int64_t        weight[2];    /* (rows, cols * bits / 32), U32 */
    int64_t        scales[2];    /* (rows, cols / group_size) */
    int64_t        biases[2];    /* (rows, cols / group_size); {0, 0} without biases */
    celer_st_dtype scales_dtype; /* q->dtype for affine, else U8 */
    bool           has_biases;   /* affine only; of q->dtype */
    uint64_t       weight_bytes, scales_bytes, biases_bytes; /* of the whole tensors */
} celer_mlx_quant_shapes;

/* Which of the three tensors. */
typedef enum {
    CELER_MLX_QUANT_WEIGHT,
    CELER_MLX_QUANT_SCALES,
    CELER_MLX_QUANT_BIASES,
} celer_mlx_quant_part;

/* The bytes of one quantized weight: whole tensors, as the shapes above (e.g. views into a
 * mapped safetensors file). biases is NULL (and biases_bytes 0) except for affine. */
typedef struct {
    const void *weight;
    size_t      weight_bytes;
    const void *scales;
    size_t      scales_bytes;
    const void *biases;
    size_t      biases_bytes;
} celer_mlx_quant_data;

/* CELER_OK when q describes something mlx writes: a known mode with its bits and group size,
 * a float dtype, a global scale only for nvfp4, rows >= 1 and cols a positive multiple of
 * group_size (both small enough that every size fits in 63 bits). Otherwise CELER_ERR_FORMAT
 * with a message naming q->name, the field and what mlx allows. */
celer_status celer_mlx_quant_check(const celer_mlx_quant *q, celer_error *err);

/* Fills *s with the shapes and sizes of q's tensors (after celer_mlx_quant_check). */
celer_status celer_mlx_quant_get_shapes(const celer_mlx_quant *q, celer_mlx_quant_shapes *s, celer_error *err);

/* Checks one tensor of a checkpoint against q: its dtype, and a shape of n_dims >= 2 whose
 * leading dimensions multiply to rows and whose last is as celer_mlx_quant_get_shapes says.
 * CELER_ERR_FORMAT naming tensor (e.g. "model.layers.0.mlp.up_proj.scales"), what it has and
 * what q needs. */
celer_status celer_mlx_quant_check_tensor(const celer_mlx_quant *q, celer_mlx_quant_part part, const char *tensor,
                                          celer_st_dtype dtype, uint32_t n_dims, const uint64_t *shape,
                                          celer_error *err);

/* y[0, cols) = the values of row `row` of the weight in d. Checks q, the byte size of each
 * tensor in d against q's shapes (CELER_ERR_FORMAT naming the tensor, its bytes, and the rows
 * and words or scales per row it should hold), a biases pointer present exactly for affine,
 * and 0 <= row < rows (CELER_ERR_INVALID). Nothing is written to y on failure. */
celer_status celer_mlx_dequant_row(const celer_mlx_quant *q, const celer_mlx_quant_data *d, int64_t row, float *y,
                                   celer_error *err);

/* Rows row0 .. row0 + rows of the arrays d holds for a weight of n_rows rows: each array
 * sliced alike (every row has the same bytes in each), biases staying NULL when absent. */
celer_mlx_quant_data celer_mlx_quant_data_rows(const celer_mlx_quant_data *d, int64_t n_rows, int64_t row0,
                                               int64_t rows);

/* "affine 4-bit group 64" etc., for messages: writes at most n bytes to buf, returns buf. */
const char *celer_mlx_quant_describe(const celer_mlx_quant *q, char *buf, size_t n);

/* The element decoders, exact in float32: E2M1 code (low 4 bits of c), OCP E4M3FN byte
 * (NaN for 0x7f and 0xff), E8M0 byte as mlx reads it (2^(s - 127); 255 is +inf). */
float celer_mlx_e2m1_to_f32(uint32_t c);
float celer_mlx_e4m3_to_f32(uint8_t c);
float celer_mlx_e8m0_to_f32(uint8_t s);

#endif
