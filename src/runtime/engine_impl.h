/* The engine's insides, for the runtime's files (the batcher shares its model and backend). */
#ifndef CELER_RUNTIME_ENGINE_IMPL_H
#define CELER_RUNTIME_ENGINE_IMPL_H

#include "models/forward.h"
#include "models/model_file.h"

/* Tokens a prefill step takes at most: the planner's activations (model_file.c) allow 512, and on a GPU
 * a step's long products dequantize each weight once for all of its tokens (gpu_blas.cu). */
enum { PREFILL_CHUNK = 512 };

struct celer_engine {
    celer_model_file *mf;
    celer_tokenizer  *tok;
    celer_backend    *be;
    celer_model       model;
    celer_kv_cache    kv;
    celer_acts        acts;
    int64_t           n_ctx;
    int32_t          *tokens; /* (n_ctx) the interactive sequence's tokens in the cache */
    int32_t           n_tokens;
    int32_t          *pos, *seq; /* (PREFILL_CHUNK) batch scratch */
    float            *logits;    /* (n_vocab) host copy */
    int32_t           eog[8];    /* end-of-generation token ids */
    int               n_eog;
    int               n_threads;
};

/* Whether id ends a generation (EOS, end of turn, ...). */
bool celer_engine_is_eog(const celer_engine *e, int32_t id);

#endif
