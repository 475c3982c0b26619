/* A Hugging Face or MLX model directory described like a GGUF file: hyper-parameters from
 * config.json, tensors from the safetensors shards. An MLX-quantized weight is a U32 tensor of
 * packed codes with .scales (and .biases) beside it; it is shown with its logical shape and a
 * storage name such as "affine4-g64" or "mxfp4", which its .scales and .biases share. */
#include "core/error.h"
#include "models/model_file.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_desc(const void *key, const void *elem)
{
    return strcmp(key, ((const celer_tensor_desc *)elem)->name);
}

static void copy_name(char *dst, size_t cap, const char *s)
{
    snprintf(dst, cap, "%s", s ? s : "");
}

static void hparams_from_config(celer_hparams *hp, const celer_hf_config *c, const char *path)
{
    memset(hp, 0, sizeof *hp);
    copy_name(hp->arch, sizeof hp->arch, c->model_type);
    const char *base = strrchr(path, '/');
    while (base && !base[1] && base > path) { /* a trailing slash */
        const char *p = base - 1;
        while (p > path && *p != '/') p--;
        base = p;
    }
    copy_name(hp->name, sizeof hp->name, base && *base == '/' ? base + 1 : path);
    char *slash = strchr(hp->name, '/');
    if (slash) *slash = '\0';
    hp->n_layer        = c->num_hidden_layers;
    hp->n_embd         = c->hidden_size;
    hp->n_head         = c->num_attention_heads;
    hp->n_head_kv      = c->num_key_value_heads;
    hp->head_dim_k     = c->head_dim;
    hp->head_dim_v     = c->head_dim;
    hp->n_ff           = c->intermediate_size;
    hp->n_vocab        = c->vocab_size;
    hp->n_ctx_train    = c->max_position_embeddings;
    hp->n_expert       = c->num_experts > 0 ? c->num_experts : 0;
    hp->n_expert_used  = c->num_experts_per_tok > 0 ? c->num_experts_per_tok : 0;
    hp->n_ff_expert    = c->moe_intermediate_size > 0 ? c->moe_intermediate_size : 0;
    hp->n_ff_shexp     = c->shared_expert_intermediate_size > 0 ? c->shared_expert_intermediate_size : 0;
    hp->sliding_window = c->sliding_window > 0 ? c->sliding_window : 0;
    hp->rope_theta     = c->rope_theta > 0 ? c->rope_theta : 0;
    hp->norm_eps       = c->rms_norm_eps > 0 ? c->rms_norm_eps : 0;
}

/* The module path of a weight: "model.layers.0.mlp.up_proj" for "….up_proj.weight". */
static bool module_of(const char *name, char *buf, size_t cap)
{
    size_t n = strlen(name);
    if (n < 8 || strcmp(name + n - 7, ".weight") || n - 7 >= cap) return false;
    memcpy(buf, name, n - 7);
    buf[n - 7] = '\0';
    return true;
}

static celer_status describe_tensors(celer_model_file *mf, celer_error *err)
{
    const celer_safetensors_set *set = &mf->st;
    size_t                       pool = 0;
    for (uint64_t i = 0; i < set->n_tensors; i++) pool += strlen(set->tensors[i].tensor->name) + 1;
    mf->n_tensors  = set->n_tensors;
    mf->tensors    = calloc(set->n_tensors ? set->n_tensors : 1, sizeof *mf->tensors);
    mf->type_names = calloc(set->n_tensors ? set->n_tensors : 1, sizeof *mf->type_names);
    mf->name_pool  = malloc(pool ? pool : 1);
    if (!mf->tensors || !mf->type_names || !mf->name_pool)
        return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", set->dir);
    char *p = mf->name_pool;
    for (uint64_t i = 0; i < set->n_tensors; i++) {
        const celer_st_tensor *t = set->tensors[i].tensor;
        celer_tensor_desc     *d = &mf->tensors[i];
        size_t                 len = strlen(t->name);
        memcpy(p, t->name, len + 1);
        d->name    = p;
        p         += len + 1;
        d->n_dims  = (int)t->n_dims;
        d->n_elems = t->n_elems;
        d->n_bytes = t->n_bytes;
        for (uint32_t k = 0; k < t->n_dims && k < 8; k++) d->shape[k] = t->shape[k];
        copy_name(mf->type_names[i], sizeof mf->type_names[i], celer_st_dtype_name(t->dtype));
        char module[256], scales[300];
        if (t->dtype == CELER_ST_U32 && t->n_dims >= 1 && module_of(t->name, module, sizeof module)) {
            snprintf(scales, sizeof scales, "%s.scales", module);
            celer_hf_quant q = celer_hf_config_quant(&mf->cfg, module);
            if (q.quantized && q.bits && celer_safetensors_set_find(set, scales)) {
                d->shape[t->n_dims - 1] = t->shape[t->n_dims - 1] * 32 / q.bits;
                d->n_elems              = t->n_elems * 32 / q.bits;
                if (q.mode == CELER_HF_QUANT_AFFINE)
                    snprintf(mf->type_names[i], sizeof mf->type_names[i], "affine%u-g%u", q.bits, q.group_size);
                else
                    copy_name(mf->type_names[i], sizeof mf->type_names[i], celer_hf_quant_mode_name(q.mode));
            }
        }
        d->type = mf->type_names[i];
    }
    /* a quantized weight's scales and biases belong to its format: their bytes count with it, and
     * they hold no parameters of their own (as mlx-lm counts them) */
    for (uint64_t i = 0; i < set->n_tensors; i++) {
        celer_tensor_desc *d   = &mf->tensors[i];
        const char        *dot = strrchr(d->name, '.');
        if (!dot || (strcmp(dot, ".scales") && strcmp(dot, ".biases"))) continue;
        char weight[300];
        snprintf(weight, sizeof weight, "%.*s.weight", (int)(dot - d->name), d->name);
        /* the descriptions are in the set's order: sorted by name */
        const celer_tensor_desc *w = bsearch(weight, mf->tensors, set->n_tensors, sizeof *mf->tensors, cmp_desc);
        if (w && strcmp(w->type, "U32")) {
            copy_name(mf->type_names[i], sizeof mf->type_names[i], w->type);
            d->n_elems = 0;
        }
    }
    return CELER_OK;
}

/* config.json's shape keys as the config names them: those every architecture needs (mlx-lm's
 * ModelArgs require them too) present, and each within celer_hparams_check's limits
 * (model_file.c), which would otherwise name them as GGUF does. */
celer_status celer_model_dir_check_config(const celer_hf_config *c, const char *path, bool need_shape,
                                          celer_error *err)
{
    static const struct {
        const char *key;
        size_t      off;
        bool        required;
        int64_t     max;
    } keys[] = {
#define K(f, req, m) {#f, offsetof(celer_hf_config, f), req, m}
        K(hidden_size, true, 1 << 20),          K(num_hidden_layers, true, 1 << 16),
        K(num_attention_heads, true, 1 << 16),  K(num_key_value_heads, false, 1 << 16),
        K(head_dim, false, 1 << 16),            K(intermediate_size, true, 1 << 24),
        K(vocab_size, true, 1 << 24),           K(num_experts, false, 1 << 16),
        K(num_experts_per_tok, false, 1 << 16), K(moe_intermediate_size, false, 1 << 24),
        K(shared_expert_intermediate_size, false, 1 << 24),
#undef K
    };
    const char *sep = path[0] && path[strlen(path) - 1] == '/' ? "" : "/";
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        int64_t v = *(const int64_t *)((const char *)c + keys[i].off);
        /* a mixture-of-experts model may give only moe_intermediate_size */
        /* heads are needed to describe a width at all (head_dim defaults to width / heads) */
        bool heads    = keys[i].off == offsetof(celer_hf_config, num_attention_heads) && c->hidden_size > 0;
        bool required = (need_shape || heads) && keys[i].required && !(keys[i].off == offsetof(celer_hf_config, intermediate_size) &&
                                               c->num_experts > 0);
        if (required && v <= 0)
            return celer_fail(err, CELER_ERR_FORMAT, "%s%sconfig.json: no %s; celer cannot tell the model's shape "
                              "without it", path, sep, keys[i].key);
        if (v > keys[i].max)
            return celer_fail(err, CELER_ERR_FORMAT, "%s%sconfig.json: %s is %lld; celer takes at most %lld", path,
                              sep, keys[i].key, (long long)v, (long long)keys[i].max);
    }
    return CELER_OK;
}

celer_status celer_model_dir_open(celer_model_file *mf, const char *path, celer_error *err)
{
    mf->kind = MODEL_FILE_SAFETENSORS;
    if (celer_hf_config_load(&mf->cfg, path, err) || celer_hf_tokenizer_config_load(&mf->tcfg, path, err) ||
        celer_safetensors_set_open(&mf->st, path, err))
        return err->code;
    if (!mf->cfg.model_type)
        return celer_fail(err, CELER_ERR_FORMAT, "%s/config.json: no model_type; celer cannot tell the architecture",
                          path);
    if (celer_model_dir_check_config(&mf->cfg, path, false, err)) return err->code;
    hparams_from_config(&mf->hp, &mf->cfg, path);
    if (celer_hparams_check(&mf->hp, path, err)) return err->code;
    mf->has_chat_template = celer_hf_tokenizer_config_template(&mf->tcfg, NULL) != NULL;
    return describe_tensors(mf, err);
}

void celer_model_dir_close(celer_model_file *mf)
{
    celer_safetensors_set_close(&mf->st);
    celer_hf_config_free(&mf->cfg);
    celer_hf_tokenizer_config_free(&mf->tcfg);
    free(mf->type_names);
    mf->type_names = NULL;
}
