/* celer_model_file: a model on disk described for `celer info` and the loader. */
#include "models/model_file.h"

#include "models/hf_cache.h"

#include "core/error.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static celer_status describe_gguf_tensors(celer_model_file *mf, celer_error *err)
{
    const celer_gguf *g   = &mf->gguf;
    size_t            pool = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) pool += (size_t)g->tensors[i].name.len + 1;
    mf->n_tensors = g->n_tensors;
    mf->tensors   = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *mf->tensors);
    mf->name_pool = malloc(pool ? pool : 1);
    if (!mf->tensors || !mf->name_pool) return celer_fail(err, CELER_ERR_OOM, "gguf: %s: out of memory", g->name);
    char *p = mf->name_pool;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const celer_gguf_tensor *t = &g->tensors[i];
        celer_tensor_desc       *d = &mf->tensors[i];
        memcpy(p, t->name.ptr, (size_t)t->name.len);
        p[t->name.len] = '\0';
        d->name        = p;
        p += t->name.len + 1;
        d->type    = celer_ggml_type_get(t->type)->name;
        d->n_dims  = (int)t->n_dims;
        d->n_elems = 1;
        for (uint32_t k = 0; k < t->n_dims; k++) {
            d->shape[k] = t->ne[t->n_dims - 1 - k];
            d->n_elems *= t->ne[k];
        }
        d->n_bytes = t->n_bytes;
    }
    return CELER_OK;
}

static celer_status open_gguf(celer_model_file *mf, const char *path, celer_error *err)
{
    mf->kind = MODEL_FILE_GGUF;
    if (celer_gguf_open(&mf->gguf, path, err)) return err->code;
    if (celer_hparams_from_gguf(&mf->gguf, &mf->hp, err)) return err->code;
    if (!mf->hp.n_vocab) {
        const celer_gguf_tensor *emb = celer_gguf_find_tensor(&mf->gguf, "token_embd.weight");
        if (emb && emb->n_dims == 2) mf->hp.n_vocab = (int64_t)emb->ne[1];
    }
    mf->has_chat_template = celer_gguf_find(&mf->gguf, "tokenizer.chat_template") != NULL;
    return describe_gguf_tensors(mf, err);
}

celer_status celer_model_file_open(celer_model_file **out, const char *path, celer_error *err)
{
    celer_error local;
    if (!err) err = &local;
    *out                 = NULL;
    celer_model_file *mf = calloc(1, sizeof *mf);
    if (!mf) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", path);
    struct stat  st;
    celer_status s;
    char         snapshot[4096];
    bool         exists = stat(path, &st) == 0;
    if (!exists && celer_hf_cache_is_id(path)) { /* "ORG/NAME" another tool downloaded */
        s = celer_hf_cache_find(path, snapshot, sizeof snapshot, err);
        if (!s) s = celer_model_dir_open(mf, snapshot, err);
        if (!s) snprintf(mf->hp.name, sizeof mf->hp.name, "%s", path);
    } else if (!exists)
        s = celer_fail(err, CELER_ERR_IO, "%s: no such file or directory; give a .gguf file, a model directory or a "
                       "Hugging Face model id (ORG/NAME) in its cache", path);
    else if (S_ISDIR(st.st_mode))
        s = celer_model_dir_open(mf, path, err);
    else
        s = open_gguf(mf, path, err);
    if (s != CELER_OK) {
        celer_model_file_close(mf);
        return s;
    }
    *out = mf;
    return CELER_OK;
}

void celer_model_file_close(celer_model_file *mf)
{
    if (!mf) return;
    celer_gguf_close(&mf->gguf);
    celer_model_dir_close(mf);
    free(mf->tensors);
    free(mf->name_pool);
    free(mf);
}

const char *celer_model_file_format(const celer_model_file *mf)
{
    return mf->kind == MODEL_FILE_GGUF ? "gguf" : "safetensors";
}

const celer_hparams     *celer_model_file_hparams(const celer_model_file *mf) { return &mf->hp; }
uint64_t                 celer_model_file_n_tensors(const celer_model_file *mf) { return mf->n_tensors; }
bool                     celer_model_file_has_chat_template(const celer_model_file *mf) { return mf->has_chat_template; }
const celer_tensor_desc *celer_model_file_tensor(const celer_model_file *mf, uint64_t i)
{
    return i < mf->n_tensors ? &mf->tensors[i] : NULL;
}

celer_status celer_hparams_check(const celer_hparams *hp, const char *what, celer_error *err)
{
    static const struct {
        const char *name;
        size_t      off;
        int64_t     max;
    } limits[] = {
#define L(f, m) {#f, offsetof(celer_hparams, f), m}
        L(n_layer, 1 << 16),      L(n_embd, 1 << 20),        L(n_head, 1 << 16),      L(n_head_kv, 1 << 16),
        L(head_dim_k, 1 << 16),   L(head_dim_v, 1 << 16),    L(n_ff, 1 << 24),        L(n_vocab, 1 << 24),
        L(n_ctx_train, 1ll << 32), L(n_expert, 1 << 16),     L(n_expert_used, 1 << 16), L(n_ff_expert, 1 << 24),
        L(n_ff_shexp, 1 << 24),   L(sliding_window, 1ll << 32),
#undef L
    };
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        int64_t v = *(const int64_t *)((const char *)hp + limits[i].off);
        if (v < 0 || v > limits[i].max)
            return celer_fail(err, CELER_ERR_FORMAT, "%s: hyper-parameter %s is %lld, outside 0..%lld; the file is corrupt",
                              what, limits[i].name, (long long)v, (long long)limits[i].max);
    }
    if (hp->n_embd && !hp->n_head)
        return celer_fail(err, CELER_ERR_FORMAT, "%s: the model has an embedding width but no attention heads", what);
    if (hp->n_expert_used > hp->n_expert)
        return celer_fail(err, CELER_ERR_FORMAT, "%s: %lld experts used per token but only %lld experts", what,
                          (long long)hp->n_expert_used, (long long)hp->n_expert);
    return CELER_OK;
}

int64_t celer_model_file_default_ctx(const celer_model_file *mf)
{
    int64_t n = mf->hp.n_ctx_train;
    return n > 0 && n < 4096 ? n : 4096;
}

/* Estimates are computed in double: the checked limits still allow products past 2^64. */
static uint64_t to_bytes(double v) { return v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v; }

void celer_model_file_estimate_memory(const celer_model_file *mf, int64_t n_ctx, celer_memory_estimate *e)
{
    const celer_hparams *hp = &mf->hp;
    memset(e, 0, sizeof *e);
    e->n_ctx       = n_ctx;
    double weights = 0;
    for (uint64_t i = 0; i < mf->n_tensors; i++) weights += (double)mf->tensors[i].n_bytes;
    /* f32 keys and values, every layer, every kv head */
    double kv = (double)hp->n_layer * (double)n_ctx * (double)hp->n_head_kv * (double)(hp->head_dim_k + hp->head_dim_v) * 4;
    /* one prefill chunk of up to 512 tokens in f32 (residual, norm, q/k/v, out, ffn; attention runs in
     * tiles and adds no n_ctx-sized term) plus one row of logits */
    double chunk = (double)(n_ctx < 512 ? n_ctx : 512);
    double ff    = (double)(hp->n_ff > hp->n_ff_expert ? hp->n_ff : hp->n_ff_expert);
    double qkv   = (double)hp->n_head * (double)hp->head_dim_k + 2.0 * (double)hp->n_head_kv * (double)hp->head_dim_k;
    double scratch = chunk * (4.0 * (double)hp->n_embd + qkv + 3.0 * ff) * 4.0 + (double)hp->n_vocab * 4.0;
    /* MoE: each token's chosen experts' gate, up and output rows, sorted by expert */
    scratch += chunk * (double)hp->n_expert_used * (2.0 * (double)hp->n_ff_expert + (double)hp->n_embd) * 4.0;
    /* Not counted here: a backend's own scratch, such as the CUDA build's BLAS path (gpu_blas.cu:
     * f16 weight rows and activations, cuBLAS's workspace and library, ~0.3 GiB). The estimate is
     * made before a backend exists and is the same for all of them; the engine adds what the
     * chosen backend says it takes (ops->own_scratch) before it checks the total against that
     * backend's memory. */
    e->weights  = to_bytes(weights);
    e->kv_cache = to_bytes(kv);
    e->scratch  = to_bytes(scratch);
    e->total    = to_bytes(weights + kv + scratch);
}
