/* A GGUF file seen as the Hugging Face checkpoint it was converted from: tensor names back to
 * mlx-lm's, the converter's changes undone (the llama Q/K row permutation, Gemma's norms stored
 * as 1 + w), and a config.json rebuilt from the metadata. Only what mlx-lm can express is
 * written; anything else is refused by name rather than approximated. */
#include "models/mlx_export.h"

#include "core/error.h"
#include "core/json.h"
#include "quant/dequant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GGUF per-layer stems → mlx-lm module paths. ffn_norm is the norm before the FFN: Hugging Face
 * calls it post_attention_layernorm in llama and qwen (it follows the attention), while gemma3
 * has a real post-attention norm and calls this one pre_feedforward_layernorm. */
static const struct {
    const char *stem, *module;
    bool        gemma; /* gemma3's name; the others' otherwise */
} LAYER_NAMES[] = {
    {"attn_norm", "input_layernorm", false},      {"attn_norm", "input_layernorm", true},
    {"attn_q", "self_attn.q_proj", false},        {"attn_q", "self_attn.q_proj", true},
    {"attn_k", "self_attn.k_proj", false},        {"attn_k", "self_attn.k_proj", true},
    {"attn_v", "self_attn.v_proj", false},        {"attn_v", "self_attn.v_proj", true},
    {"attn_output", "self_attn.o_proj", false},   {"attn_output", "self_attn.o_proj", true},
    {"attn_q_norm", "self_attn.q_norm", false},   {"attn_q_norm", "self_attn.q_norm", true},
    {"attn_k_norm", "self_attn.k_norm", false},   {"attn_k_norm", "self_attn.k_norm", true},
    {"ffn_gate", "mlp.gate_proj", false},         {"ffn_gate", "mlp.gate_proj", true},
    {"ffn_up", "mlp.up_proj", false},             {"ffn_up", "mlp.up_proj", true},
    {"ffn_down", "mlp.down_proj", false},         {"ffn_down", "mlp.down_proj", true},
    {"ffn_norm", "post_attention_layernorm", false},
    {"ffn_norm", "pre_feedforward_layernorm", true},
    {"post_attention_norm", "post_attention_layernorm", true},
    {"post_ffw_norm", "post_feedforward_layernorm", true},
    /* mixture of experts (qwen3moe, qwen2moe): the router, the stacked experts as mlx-lm's
     * sanitize stacks them, the shared expert and its gate */
    {"ffn_gate_inp", "mlp.gate", false},
    {"ffn_gate_exps", "mlp.switch_mlp.gate_proj", false},
    {"ffn_up_exps", "mlp.switch_mlp.up_proj", false},
    {"ffn_down_exps", "mlp.switch_mlp.down_proj", false},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate", false},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj", false},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj", false},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj", false},
};

/* Architectures: GGUF name, mlx-lm model_type, transformers class. */
static const struct {
    const char *gguf, *model_type, *hf_class;
} ARCHS[] = {
    {"llama", "llama", "LlamaForCausalLM"},
    {"qwen2", "qwen2", "Qwen2ForCausalLM"},
    {"qwen3", "qwen3", "Qwen3ForCausalLM"},
    {"gemma3", "gemma3_text", "Gemma3ForCausalLM"},
    {"qwen3moe", "qwen3_moe", "Qwen3MoeForCausalLM"},
    {"qwen2moe", "qwen2_moe", "Qwen2MoeForCausalLM"},
};

/* The mlx-lm name of a GGUF tensor into out, or false for a tensor mlx-lm has no place for. */
static bool mlx_name(const char *gguf, bool gemma, char *out, size_t cap)
{
    static const char *const top[][2] = {{"token_embd.weight", "model.embed_tokens.weight"},
                                         {"output_norm.weight", "model.norm.weight"},
                                         {"output.weight", "lm_head.weight"}};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        if (!strcmp(gguf, top[i][0])) return snprintf(out, cap, "%s", top[i][1]) < (int)cap;
    unsigned layer;
    int      at = 0;
    if (sscanf(gguf, "blk.%u.%n", &layer, &at) != 1 || !at) return false;
    const char *stem = gguf + at, *dot = strrchr(stem, '.');
    if (!dot || (strcmp(dot, ".weight") && strcmp(dot, ".bias"))) return false;
    for (size_t i = 0; i < sizeof LAYER_NAMES / sizeof LAYER_NAMES[0]; i++)
        if (LAYER_NAMES[i].gemma == gemma && strlen(LAYER_NAMES[i].stem) == (size_t)(dot - stem) &&
            !strncmp(stem, LAYER_NAMES[i].stem, (size_t)(dot - stem)))
            return snprintf(out, cap, "model.layers.%u.%s%s", layer, LAYER_NAMES[i].module, dot) < (int)cap;
    return false;
}

void celer_xtensor_read_row(const celer_xtensor *x, int64_t r, float *y)
{
    int64_t src = r;
    if (x->perm_heads > 0) {
        /* the converter stores each head's rows (2, hd/2) transposed to (hd/2, 2): row a·hd/2 + i
         * of a head is its stored row 2i + a */
        int64_t hd = x->rows / x->perm_heads, h = r / hd, j = r % hd, a = j / (hd / 2), i = j % (hd / 2);
        src = h * hd + 2 * i + a;
    }
    const uint8_t *base = x->data;
    if (x->experts) base = x->experts[src / x->expert_rows], src %= x->expert_rows;
    if (x->gguf_type >= 0) {
        const celer_ggml_type_info *ti = celer_ggml_type_get((uint32_t)x->gguf_type);
        size_t rb = (size_t)x->cols / ti->block_elems * ti->block_bytes;
        celer_dequant_row((celer_ggml_type)x->gguf_type, base + (size_t)src * rb, y, x->cols);
    } else {
        size_t eb = celer_st_dtype_bits(x->st_dtype) / 8;
        const uint8_t *p = base + (size_t)src * (size_t)x->cols * eb;
        if (x->st_dtype == CELER_ST_F32) celer_dequant_row_f32(p, y, x->cols);
        else if (x->st_dtype == CELER_ST_F16) celer_dequant_row_f16(p, y, x->cols);
        else celer_dequant_row_bf16(p, y, x->cols);
    }
    if (x->minus_one)
        for (int64_t i = 0; i < x->cols; i++) y[i] -= 1.0f;
}

/* ---- config.json ------------------------------------------------------------------------- */

static celer_status get_f(const celer_gguf *g, const char *arch, const char *key, double *v, bool *found,
                          celer_error *err)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return celer_gguf_get_f64(g, k, v, found, err);
}

static celer_status get_i(const celer_gguf *g, const char *arch, const char *key, int64_t *v, bool *found,
                          celer_error *err)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return celer_gguf_get_i64(g, k, v, found, err);
}

/* rope_scaling as Hugging Face writes it, from the GGUF's rope.scaling.* keys; NULL when none. */
static celer_status rope_scaling(const celer_model_file *mf, const char *arch, cJSON *cfg, celer_error *err)
{
    const celer_gguf *g = &mf->gguf;
    char              k[128];
    snprintf(k, sizeof k, "%s.rope.scaling.type", arch);
    celer_gguf_str type  = {0};
    bool           found = false;
    if (celer_gguf_get_str(g, k, &type, &found, err)) return err->code;
    if (celer_gguf_find_tensor(g, "rope_freqs.weight"))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: llama 3 RoPE scaling (rope_freqs.weight) cannot "
                          "be written back as config.json's rope_scaling: the GGUF keeps the frequencies, not the "
                          "factors; convert the original Hugging Face checkpoint instead", mf->gguf.name);
    if (!found || celer_gguf_str_eq(type, "none")) return CELER_OK;
    double factor = 0;
    if (get_f(g, arch, "rope.scaling.factor", &factor, NULL, err)) return err->code;
    cJSON *rs = cJSON_AddObjectToObject(cfg, "rope_scaling");
    if (celer_gguf_str_eq(type, "linear")) {
        cJSON_AddStringToObject(rs, "type", "linear");
        celer_json_add_float(rs, "factor", factor);
        return CELER_OK;
    }
    if (celer_gguf_str_eq(type, "yarn")) {
        double ext = 1, attn = 1, fast = 0, slow = 0;
        int64_t orig = 0;
        bool    has_fast = false, has_slow = false, has_orig = false;
        if (get_f(g, arch, "rope.scaling.yarn_ext_factor", &ext, NULL, err) ||
            get_f(g, arch, "rope.scaling.yarn_attn_factor", &attn, NULL, err) ||
            get_f(g, arch, "rope.scaling.yarn_beta_fast", &fast, &has_fast, err) ||
            get_f(g, arch, "rope.scaling.yarn_beta_slow", &slow, &has_slow, err) ||
            get_i(g, arch, "rope.scaling.original_context_length", &orig, &has_orig, err))
            return err->code;
        if (ext != 1 || attn != 1)
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: YaRN with an extrapolation factor %g or an "
                              "attention factor %g other than 1 has no config.json form mlx-lm reads",
                              mf->gguf.name, ext, attn);
        cJSON_AddStringToObject(rs, "type", "yarn");
        celer_json_add_float(rs, "factor", factor);
        cJSON_AddNumberToObject(rs, "original_max_position_embeddings",
                                (double)(has_orig ? orig : mf->hp.n_ctx_train));
        if (has_fast) celer_json_add_float(rs, "beta_fast", fast);
        if (has_slow) celer_json_add_float(rs, "beta_slow", slow);
        return CELER_OK;
    }
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: RoPE scaling '%.*s' has no config.json form here "
                      "(linear and yarn do)", mf->gguf.name, (int)type.len, type.ptr);
}

static celer_status token_id(const celer_gguf *g, const char *key, cJSON *cfg, const char *name, celer_error *err)
{
    int64_t v     = 0;
    bool    found = false;
    if (celer_gguf_get_i64(g, key, &v, &found, err)) return err->code;
    if (found) cJSON_AddNumberToObject(cfg, name, (double)v);
    return CELER_OK;
}

static celer_status build_config(const celer_model_file *mf, int a, const char *dtype, bool tied, bool has_bias,
                                 cJSON **out, celer_error *err)
{
    const celer_hparams *hp   = &mf->hp;
    const char          *arch = ARCHS[a].gguf;
    bool                 gemma = !strcmp(arch, "gemma3");
    int64_t              rope_dims = 0;
    bool                 has_rope_dims = false;
    if (get_i(&mf->gguf, arch, "rope.dimension_count", &rope_dims, &has_rope_dims, err)) return err->code;
    if (has_rope_dims && rope_dims != hp->head_dim_k)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: RoPE over %lld of %lld head dimensions (partial "
                          "rotary) is not written to config.json yet", mf->gguf.name, (long long)rope_dims,
                          (long long)hp->head_dim_k);
    if (hp->head_dim_k != hp->head_dim_v)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: key width %lld and value width %lld differ; "
                          "mlx-lm's %s has one head_dim", mf->gguf.name, (long long)hp->head_dim_k,
                          (long long)hp->head_dim_v, ARCHS[a].model_type);
    if ((!strcmp(arch, "qwen2") || !strcmp(arch, "qwen2moe")) && !has_bias)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: a %s model without q/k/v biases; mlx-lm's "
                          "%s always has them", mf->gguf.name, arch, ARCHS[a].model_type);

    cJSON *c = cJSON_CreateObject();
    if (!c) return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory");
    cJSON *archs = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(archs, cJSON_CreateString(ARCHS[a].hf_class));
    cJSON_AddStringToObject(c, "model_type", ARCHS[a].model_type);
    cJSON_AddNumberToObject(c, "hidden_size", (double)hp->n_embd);
    cJSON_AddNumberToObject(c, "intermediate_size", (double)hp->n_ff);
    cJSON_AddNumberToObject(c, "num_hidden_layers", (double)hp->n_layer);
    cJSON_AddNumberToObject(c, "num_attention_heads", (double)hp->n_head);
    cJSON_AddNumberToObject(c, "num_key_value_heads", (double)hp->n_head_kv);
    cJSON_AddNumberToObject(c, "head_dim", (double)hp->head_dim_k);
    celer_json_add_float(c, "rms_norm_eps", hp->norm_eps);
    celer_json_add_float(c, "rope_theta", hp->rope_theta);
    cJSON_AddNumberToObject(c, "max_position_embeddings", (double)hp->n_ctx_train);
    cJSON_AddNumberToObject(c, "vocab_size", (double)hp->n_vocab);
    cJSON_AddBoolToObject(c, "tie_word_embeddings", tied);
    cJSON_AddStringToObject(c, "torch_dtype", dtype);
    if (!strcmp(arch, "llama")) {
        cJSON_AddBoolToObject(c, "attention_bias", has_bias);
        cJSON_AddBoolToObject(c, "mlp_bias", false);
    }
    if (gemma) {
        /* Gemma 3's fixed layout, which the GGUF does not record: five sliding layers then a
         * global one, sliding layers at RoPE base 10000. query_pre_attn_scalar is head_dim but
         * where the converter wrote attention.scale (27B). */
        double scale = 0;
        bool   has_scale = false;
        if (get_f(&mf->gguf, arch, "attention.scale", &scale, &has_scale, err)) {
            cJSON_Delete(c);
            return err->code;
        }
        cJSON_AddStringToObject(c, "hidden_activation", "gelu_pytorch_tanh");
        cJSON_AddNumberToObject(c, "sliding_window", (double)hp->sliding_window);
        cJSON_AddNumberToObject(c, "sliding_window_pattern", 6);
        celer_json_add_float(c, "rope_local_base_freq", 10000.0);
        celer_json_add_float(c, "query_pre_attn_scalar",
                             has_scale && scale > 0 ? 1.0 / (scale * scale) : (double)hp->head_dim_k);
    } else {
        cJSON_AddStringToObject(c, "hidden_act", "silu");
    }
    if (hp->n_expert > 0) { /* the routing llama.cpp fixes per architecture (registry.c) */
        bool qwen2moe = !strcmp(arch, "qwen2moe");
        cJSON_AddNumberToObject(c, "num_experts", (double)hp->n_expert);
        cJSON_AddNumberToObject(c, "num_experts_per_tok", (double)hp->n_expert_used);
        cJSON_AddNumberToObject(c, "moe_intermediate_size", (double)hp->n_ff_expert);
        cJSON_AddBoolToObject(c, "norm_topk_prob", !qwen2moe);
        cJSON_AddNumberToObject(c, "decoder_sparse_step", 1);
        cJSON_AddArrayToObject(c, "mlp_only_layers");
        if (qwen2moe) cJSON_AddNumberToObject(c, "shared_expert_intermediate_size", (double)hp->n_ff_shexp);
    }
    if (rope_scaling(mf, arch, c, err) || token_id(&mf->gguf, "tokenizer.ggml.bos_token_id", c, "bos_token_id", err) ||
        token_id(&mf->gguf, "tokenizer.ggml.eos_token_id", c, "eos_token_id", err)) {
        cJSON_Delete(c);
        return err->code;
    }
    *out = c;
    return CELER_OK;
}

/* ---- tensors ----------------------------------------------------------------------------- */

celer_status celer_xexport_gguf(const celer_model_file *mf, const char *dtype, celer_xtensor **xs, uint64_t *n,
                                cJSON **config, celer_error *err)
{
    const celer_gguf *g = &mf->gguf;
    int               a = -1;
    for (size_t i = 0; i < sizeof ARCHS / sizeof ARCHS[0]; i++)
        if (!strcmp(mf->hp.arch, ARCHS[i].gguf)) a = (int)i;
    if (a < 0)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: architecture '%s' has no MLX export; celer "
                          "quantize writes llama, qwen2, qwen3, gemma3, qwen3moe and qwen2moe", g->name, mf->hp.arch);
    bool gemma = !strcmp(mf->hp.arch, "gemma3"), llama = !strcmp(mf->hp.arch, "llama");

    celer_xtensor *x = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *x);
    if (!x) return celer_fail(err, CELER_ERR_OOM, "quantize: out of memory");
    uint64_t k = 0;
    bool     tied = true, has_bias = false;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const celer_gguf_tensor *t = &g->tensors[i];
        char gname[192];
        snprintf(gname, sizeof gname, "%.*s", (int)t->name.len, t->name.ptr);
        if (!strcmp(gname, "rope_freqs.weight")) continue; /* refused with the config */
        celer_xtensor *o = &x[k];
        if (!mlx_name(gname, gemma, o->name, sizeof o->name)) {
            free(x);
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: tensor '%s' has no mlx-lm %s parameter to "
                              "become", g->name, gname, ARCHS[a].model_type);
        }
        if (!celer_dequant_supported(t->type)) {
            free(x);
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "quantize: %s: tensor '%s' is %s, which celer cannot "
                              "dequantize", g->name, gname, celer_ggml_type_get(t->type)->name);
        }
        if (!strcmp(gname, "output.weight")) tied = false;
        if (strstr(gname, "attn_q.bias")) has_bias = true;
        o->data      = t->data;
        o->gguf_type = (int)t->type;
        o->n_dims    = t->n_dims;
        for (uint32_t d = 0; d < t->n_dims; d++) o->shape[d] = t->ne[t->n_dims - 1 - d];
        o->cols = (int64_t)t->ne[0];
        o->rows = (int64_t)(t->n_dims > 1 ? t->ne[1] * t->ne[2] * t->ne[3] : 1);
        if (llama && (strstr(gname, ".attn_q.") || strstr(gname, ".attn_k."))) {
            o->perm_heads = strstr(gname, ".attn_q.") ? mf->hp.n_head : mf->hp.n_head_kv;
            if (t->n_dims == 1) o->rows = o->cols, o->cols = 1; /* a bias: permute its elements */
            if (o->perm_heads <= 0 || o->rows % (2 * o->perm_heads)) {
                long long rows = (long long)o->rows, heads = (long long)o->perm_heads; /* o is in x */
                free(x);
                return celer_fail(err, CELER_ERR_FORMAT, "quantize: %s: tensor '%s' has %lld rows, not a whole "
                                  "number of %lld heads of even width", g->name, gname, rows, heads);
            }
        }
        if (t->n_dims == 1 && strstr(gname, ".ffn_gate_inp_shexp.")) /* {n_embd}: Hugging Face's (1, n_embd) */
            o->n_dims = 2, o->shape[0] = 1, o->shape[1] = t->ne[0], o->rows = 1;
        o->minus_one = gemma && strstr(gname, "norm.weight");
        k++;
    }
    celer_status s = build_config(mf, a, dtype, tied, has_bias, config, err);
    if (s) {
        free(x);
        return s;
    }
    *xs = x;
    *n  = k;
    return CELER_OK;
}
