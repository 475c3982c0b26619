/* celer_quantize_model's pieces (mlx_export.c drives; mlx_export_gguf.c knows GGUF): the
 * tensors of a source model under the names mlx-lm gives them, each read back row by row as
 * float32 in the order mlx-lm expects. */
#ifndef CELER_MODELS_MLX_EXPORT_H
#define CELER_MODELS_MLX_EXPORT_H

#include "models/model_file.h"

#include <cjson/cJSON.h>

/* One source tensor as mlx-lm names and shapes it. */
typedef struct {
    char           name[192];  /* "model.layers.0.mlp.up_proj.weight" */
    const uint8_t *data;       /* the stored bytes */
    int            gguf_type;  /* a GGUF tensor's type, or -1: a safetensors tensor of st_dtype */
    celer_st_dtype st_dtype;
    uint32_t       n_dims;
    uint64_t       shape[CELER_ST_MAX_DIMS]; /* outermost first */
    int64_t        rows, cols; /* read as rows of cols (cols: the last dimension) */
    int64_t        perm_heads; /* > 0: rows in the GGUF llama converter's Q/K order, this many heads */
    bool           minus_one;  /* stored as 1 + w (the GGUF converter's Gemma norms) */
    /* A MoE projection stacked from one tensor per expert (mlx-lm's sanitize): expert e's rows
     * are at experts[e], expert_rows of them; data is then unused. */
    const uint8_t *const *experts;
    int64_t               expert_rows;
} celer_xtensor;

/* Fills *xs (malloc'd, *n of them) with a GGUF file's tensors under mlx-lm's names, and *config
 * with the Hugging Face config.json that describes the model (no quantization block, torch_dtype
 * set to dtype). CELER_ERR_UNSUPPORTED for an architecture or a setting mlx-lm cannot express,
 * naming it. */
celer_status celer_xexport_gguf(const celer_model_file *mf, const char *dtype, celer_xtensor **xs, uint64_t *n,
                                cJSON **config, celer_error *err);

/* Row r of x (in mlx-lm's order) as cols floats. */
void celer_xtensor_read_row(const celer_xtensor *x, int64_t r, float *y);

#endif
