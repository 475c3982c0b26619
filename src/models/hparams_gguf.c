/* Hyper-parameters from GGUF metadata. The keys are the converters' shared vocabulary
 * (<arch>.block_count, <arch>.attention.head_count, …), the same for every architecture. */
#include "models/model_file.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

static void copy_str(char *dst, size_t cap, celer_gguf_str s)
{
    size_t n = s.len < cap - 1 ? (size_t)s.len : cap - 1;
    memcpy(dst, s.ptr, n);
    dst[n] = '\0';
}

/* An integer that may be stored per layer as an array; arrays give their largest element. */
static celer_status get_int_or_max(const celer_gguf *g, const char *arch, const char *suffix, int64_t *v,
                                   celer_error *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    const celer_gguf_kv *kv = celer_gguf_find(g, key);
    if (!kv) return CELER_OK;
    if (kv->type != CELER_GGUF_ARRAY) return celer_gguf_get_i64(g, key, v, NULL, err);
    if (kv->array_type > CELER_GGUF_INT32 && kv->array_type != CELER_GGUF_UINT64 && kv->array_type != CELER_GGUF_INT64)
        return celer_fail(err, CELER_ERR_FORMAT, "gguf: %s: key '%s' is an array of %s, expected integers", g->name,
                          key, celer_gguf_type_name(kv->array_type));
    const uint8_t *cur = kv->data;
    int64_t        best = 0;
    for (uint64_t i = 0; i < kv->array_len; i++) {
        int64_t x = celer_gguf_read_int(celer_gguf_array_next(kv, &cur), kv->array_type);
        if (x > best) best = x;
    }
    *v = best;
    return CELER_OK;
}

static celer_status get_f64(const celer_gguf *g, const char *arch, const char *suffix, double *v, celer_error *err)
{
    char key[160];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return celer_gguf_get_f64(g, key, v, NULL, err);
}

celer_status celer_hparams_from_gguf(const celer_gguf *g, celer_hparams *hp, celer_error *err)
{
    memset(hp, 0, sizeof *hp);
    celer_gguf_str s;
    bool           found = false;
    if (celer_gguf_get_str(g, "general.architecture", &s, &found, err)) return err->code;
    if (!found)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "gguf: %s: no general.architecture key; this is not a model file celer can describe",
                          g->name);
    copy_str(hp->arch, sizeof hp->arch, s);
    if (celer_gguf_get_str(g, "general.name", &s, &found, err)) return err->code;
    if (found) copy_str(hp->name, sizeof hp->name, s);

    const char *a = hp->arch;
    static const struct {
        const char *suffix;
        size_t      field;
    } ints[] = {
        {"block_count", offsetof(celer_hparams, n_layer)},
        {"embedding_length", offsetof(celer_hparams, n_embd)},
        {"feed_forward_length", offsetof(celer_hparams, n_ff)},
        {"context_length", offsetof(celer_hparams, n_ctx_train)},
        {"attention.head_count", offsetof(celer_hparams, n_head)},
        {"attention.head_count_kv", offsetof(celer_hparams, n_head_kv)},
        {"attention.key_length", offsetof(celer_hparams, head_dim_k)},
        {"attention.value_length", offsetof(celer_hparams, head_dim_v)},
        {"attention.sliding_window", offsetof(celer_hparams, sliding_window)},
        {"expert_count", offsetof(celer_hparams, n_expert)},
        {"expert_used_count", offsetof(celer_hparams, n_expert_used)},
        {"expert_feed_forward_length", offsetof(celer_hparams, n_ff_expert)},
        {"expert_shared_feed_forward_length", offsetof(celer_hparams, n_ff_shexp)},
        {"vocab_size", offsetof(celer_hparams, n_vocab)},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (get_int_or_max(g, a, ints[i].suffix, (int64_t *)((char *)hp + ints[i].field), err)) return err->code;
    if (get_f64(g, a, "rope.freq_base", &hp->rope_theta, err)) return err->code;
    if (get_f64(g, a, "attention.layer_norm_rms_epsilon", &hp->norm_eps, err)) return err->code;
    if (hp->norm_eps == 0 && get_f64(g, a, "attention.layer_norm_epsilon", &hp->norm_eps, err)) return err->code;

    if (celer_hparams_check(hp, g->name, err)) return err->code;
    /* defaults the converters leave implicit */
    if (!hp->n_head_kv) hp->n_head_kv = hp->n_head;
    if (!hp->head_dim_k && hp->n_head) hp->head_dim_k = hp->n_embd / hp->n_head;
    if (!hp->head_dim_v && hp->n_head) hp->head_dim_v = hp->n_embd / hp->n_head;
    if (!hp->n_vocab) {
        const celer_gguf_kv *tok = celer_gguf_find(g, "tokenizer.ggml.tokens");
        if (tok && tok->type == CELER_GGUF_ARRAY) hp->n_vocab = (int64_t)tok->array_len;
    }
    return CELER_OK;
}
