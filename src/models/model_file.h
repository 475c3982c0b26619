/* What celer_model_file holds: the parsed container and the description built from it. */
#ifndef CELER_MODELS_MODEL_FILE_H
#define CELER_MODELS_MODEL_FILE_H

#include "celer.h"
#include "formats/gguf.h"
#include "formats/hf_config.h"
#include "formats/safetensors.h"

typedef enum { MODEL_FILE_GGUF, MODEL_FILE_SAFETENSORS } model_file_kind;

struct celer_model_file {
    model_file_kind    kind;
    celer_gguf         gguf;          /* MODEL_FILE_GGUF */
    celer_safetensors_set     st;     /* MODEL_FILE_SAFETENSORS: the weights */
    celer_hf_config           cfg;    /* config.json */
    celer_hf_tokenizer_config tcfg;   /* tokenizer_config.json */
    char                    (*type_names)[24]; /* (n_tensors) storage names of directory tensors */
    celer_hparams      hp;
    uint64_t           n_tensors;
    celer_tensor_desc *tensors;       /* (n_tensors) */
    char              *name_pool;     /* the tensors' NUL-terminated names */
    bool               has_chat_template;
};

/* Refuses hyper-parameters no model has (negative, or past generous limits), so that no later
 * arithmetic on them can overflow or divide by zero. what names the file in the message. */
celer_status celer_hparams_check(const celer_hparams *hp, const char *what, celer_error *err);

/* config.json's sizes: none past celer's limits and, with need_shape (running the model, not
 * describing it or its tokenizer), every key the shape needs present. Errors name the key. */
celer_status celer_model_dir_check_config(const celer_hf_config *c, const char *path, bool need_shape,
                                          celer_error *err);
/* Opens a Hugging Face / MLX model directory (config.json and safetensors shards). */
celer_status celer_model_dir_open(celer_model_file *mf, const char *path, celer_error *err);
void         celer_model_dir_close(celer_model_file *mf);

/* Fills hp from GGUF metadata (keys under general.* and <arch>.*). */
celer_status celer_hparams_from_gguf(const celer_gguf *g, celer_hparams *hp, celer_error *err);

#endif
