/* A celer_model from GGUF tensors: the names converters use (token_embd, blk.N.attn_q, ...),
 * each checked for presence, type and shape before the backend sees it. */
#include "core/error.h"
#include "models/model.h"
#include "models/rope_scaling.h"
#include "quant/dequant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const celer_gguf *g;
    celer_backend    *be;
    celer_error      *err;
} loader;

/* Fills w from tensor name, which must be (rows, cols) — a vector when rows is 0 — unless it is
 * optional and absent. */
static celer_status take(loader *L, const char *name, int64_t rows, int64_t cols, bool optional, celer_weight *w)
{
    const celer_gguf_tensor *t = celer_gguf_find_tensor(L->g, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (optional) return CELER_OK;
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is missing", L->g->name, name);
    }
    bool vector = rows == 0;
    if ((vector && (t->n_dims != 1 || (int64_t)t->ne[0] != cols)) ||
        (!vector && (t->n_dims != 2 || (int64_t)t->ne[0] != cols || (int64_t)t->ne[1] != rows)))
        return celer_fail(L->err, CELER_ERR_FORMAT,
                          "model: %s: tensor '%s' is %llu x %llu, the hyper-parameters say %lld x %lld", L->g->name,
                          name, (unsigned long long)t->ne[1], (unsigned long long)t->ne[0],
                          (long long)(vector ? 1 : rows), (long long)cols);
    if (!celer_dequant_supported(t->type))
        return celer_fail(L->err, CELER_ERR_UNSUPPORTED,
                          "model: %s: tensor '%s' has type %s, which celer cannot run; requantize the model to one "
                          "of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K",
                          L->g->name, name, celer_ggml_type_get(t->type)->name);
    if (vector && t->type != CELER_GGML_F32)
        return celer_fail(L->err, CELER_ERR_UNSUPPORTED, "model: %s: tensor '%s' is %s; norms and biases must be F32",
                          L->g->name, name, celer_ggml_type_get(t->type)->name);
    *w = (celer_weight){.type = t->type, .rows = vector ? 1 : rows, .cols = cols, .data = t->data};
    celer_status st = L->be->ops->weight_load(L->be, w, L->err);
    if (st == CELER_ERR_UNSUPPORTED) { /* the backend's message names the type; add the file and the tensor */
        char why[sizeof L->err->msg];
        snprintf(why, sizeof why, "%s", L->err->msg);
        celer_fail(L->err, st, "model: %s: tensor '%s': %s; requantize the model to one of F32, F16, BF16, Q4_0, "
                   "Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K", L->g->name, name, why);
    }
    return st;
}

static celer_status take_layer(loader *L, int il, const char *what, int64_t rows, int64_t cols, bool optional,
                               celer_weight *w)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    return take(L, name, rows, cols, optional, w);
}

/* The n experts' matrices (rows, cols) of one stacked tensor (GGUF shape {cols, rows, n}). */
static celer_status take_experts(loader *L, int il, const char *what, int64_t n, int64_t rows, int64_t cols,
                                 celer_weight *w)
{
    char name[96];
    snprintf(name, sizeof name, "blk.%d.%s", il, what);
    const celer_gguf_tensor *t = celer_gguf_find_tensor(L->g, name);
    if (!t) return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is missing", L->g->name, name);
    if (t->n_dims != 3 || (int64_t)t->ne[0] != cols || (int64_t)t->ne[1] != rows || (int64_t)t->ne[2] != n)
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is %u-dimensional %llu x %llu x %llu; the "
                          "hyper-parameters say %lld experts of %lld x %lld", L->g->name, name, t->n_dims,
                          (unsigned long long)(t->n_dims > 2 ? t->ne[2] : 1), (unsigned long long)t->ne[1],
                          (unsigned long long)t->ne[0], (long long)n, (long long)rows, (long long)cols);
    if (!celer_dequant_supported(t->type))
        return celer_fail(L->err, CELER_ERR_UNSUPPORTED,
                          "model: %s: tensor '%s' has type %s, which celer cannot run; requantize the model to one "
                          "of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K",
                          L->g->name, name, celer_ggml_type_get(t->type)->name);
    celer_weight all = {.type = t->type, .rows = n * rows, .cols = cols, .data = t->data};
    celer_status st  = celer_load_experts(L->be, &all, n, w, L->err);
    if (st == CELER_ERR_UNSUPPORTED) {
        char why[sizeof L->err->msg];
        snprintf(why, sizeof why, "%s", L->err->msg);
        celer_fail(L->err, st, "model: %s: tensor '%s': %s", L->g->name, name, why);
    }
    return st;
}

/* A MoE layer's router, experts and (qwen2moe) shared expert with its gate. */
static celer_status load_moe(celer_model *m, loader *L, int il)
{
    const celer_hparams *hp = &m->hp;
    celer_layer         *l  = &m->layers[il];
    int64_t              d = hp->n_embd, E = hp->n_expert, fe = hp->n_ff_expert, fs = hp->n_ff_shexp;
    celer_weight        *w = m->experts + (size_t)il * 3 * (size_t)E;
    l->moe = (celer_moe){.n_expert = E, .n_ff = fe, .gate = w, .up = w + E, .down = w + 2 * E};
    if (take_layer(L, il, "ffn_gate_inp.weight", E, d, false, &l->router) ||
        take_experts(L, il, "ffn_gate_exps.weight", E, fe, d, l->moe.gate) ||
        take_experts(L, il, "ffn_up_exps.weight", E, fe, d, l->moe.up) ||
        take_experts(L, il, "ffn_down_exps.weight", E, d, fe, l->moe.down))
        return L->err->code;
    char name[96];
    snprintf(name, sizeof name, "blk.%d.ffn_gate_inp_shexp.weight", il);
    const celer_gguf_tensor *sg = celer_gguf_find_tensor(L->g, name);
    if (!sg && !fs) return CELER_OK;
    if (!fs)
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is there but %s.expert_shared_feed_forward_"
                          "length is not", L->g->name, name, hp->arch);
    /* the shared expert's gate: {n_embd} as llama.cpp declares it, or {n_embd, 1} as converters write it */
    if (sg && sg->n_dims == 1 && take_layer(L, il, "ffn_gate_inp_shexp.weight", 0, d, false, &l->shexp_gate))
        return L->err->code;
    if ((!sg || sg->n_dims != 1) && take_layer(L, il, "ffn_gate_inp_shexp.weight", 1, d, false, &l->shexp_gate))
        return L->err->code;
    return take_layer(L, il, "ffn_gate_shexp.weight", fs, d, false, &l->w_gate) ||
                   take_layer(L, il, "ffn_up_shexp.weight", fs, d, false, &l->w_up) ||
                   take_layer(L, il, "ffn_down_shexp.weight", d, fs, false, &l->w_down)
               ? L->err->code
               : CELER_OK;
}

static celer_status get_f(const celer_gguf *g, const char *arch, const char *suffix, double *v, celer_error *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    return celer_gguf_get_f64(g, key, v, NULL, err);
}

/* RoPE of the model's global layers: base, linear scaling, llama 3 frequency factors, YaRN. */
static celer_status read_rope(celer_model *m, const celer_gguf *g, loader *L, celer_rope *r)
{
    const char *a    = m->hp.arch;
    double      base = m->hp.rope_theta > 0 ? m->hp.rope_theta : 10000.0, factor = 0;
    int64_t     n_rot = m->hp.head_dim_k;
    char        key[128];
    snprintf(key, sizeof key, "%s.rope.dimension_count", a);
    if (celer_gguf_get_i64(g, key, &n_rot, NULL, L->err)) return L->err->code;
    if (n_rot <= 0 || n_rot > m->hp.head_dim_k || n_rot % 2)
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: rope.dimension_count %lld does not fit head size %lld",
                          g->name, (long long)n_rot, (long long)m->hp.head_dim_k);
    celer_gguf_str type = {0};
    bool           has_type;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    if (celer_gguf_get_str(g, key, &type, &has_type, L->err)) return L->err->code;
    if (get_f(g, a, "rope.scaling.factor", &factor, L->err)) return L->err->code;
    *r = (celer_rope){.mode = m->arch->rope, .n_rot = n_rot, .base = (float)base, .pos_scale = 1.0f, .mscale = 1.0f};
    bool yarn = has_type && celer_gguf_str_eq(type, "yarn");
    if (yarn && !isfinite(factor))
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: %s.rope.scaling.factor is %g; YaRN needs a finite "
                          "factor", g->name, a, factor);
    if (has_type && !celer_gguf_str_eq(type, "none") && !yarn) {
        if (!celer_gguf_str_eq(type, "linear"))
            return celer_fail(L->err, CELER_ERR_UNSUPPORTED, "model: %s: RoPE scaling '%.*s' is not supported (none, "
                              "linear, yarn and llama3 frequency factors are)", g->name, (int)type.len, type.ptr);
        if (factor > 0) r->pos_scale = (float)(1.0 / factor);
    }
    celer_weight ff;
    if (take(L, "rope_freqs.weight", 0, n_rot / 2, true, &ff)) return L->err->code;
    if (ff.data && yarn)
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: both YaRN scaling and rope_freqs.weight; a converter "
                          "writes one or the other", g->name);
    if (ff.data || (yarn && factor > 1)) {
        m->freq_factors = malloc((size_t)(n_rot / 2) * sizeof *m->freq_factors);
        if (!m->freq_factors) return celer_fail(L->err, CELER_ERR_OOM, "model: out of memory");
        r->freq_factors = m->freq_factors;
    }
    if (ff.data && /* the loaded copy is backend memory: read it back */
        L->be->ops->read(L->be, ff.data, m->freq_factors, (size_t)(n_rot / 2) * sizeof *m->freq_factors, L->err))
        return L->err->code;
    if (yarn && factor > 1) {
        double orig = (double)m->hp.n_ctx_train, fast = 32, slow = 1, attn = 1, ext = 1;
        if (get_f(g, a, "rope.scaling.original_context_length", &orig, L->err) ||
            get_f(g, a, "rope.scaling.yarn_beta_fast", &fast, L->err) ||
            get_f(g, a, "rope.scaling.yarn_beta_slow", &slow, L->err) ||
            get_f(g, a, "rope.scaling.yarn_attn_factor", &attn, L->err) ||
            get_f(g, a, "rope.scaling.yarn_ext_factor", &ext, L->err))
            return L->err->code;
        char above_slow[64];
        snprintf(above_slow, sizeof above_slow, "above yarn_beta_slow (%g)", slow);
        const struct {
            const char *key, *want;
            double      v;
            bool        ok;
        } check[] = {
            {"original_context_length", "a length of at least 1", orig, orig >= 1 && isfinite(orig)},
            {"yarn_beta_slow", "above 0", slow, slow > 0 && isfinite(slow)},
            {"yarn_beta_fast", above_slow, fast, fast > slow && isfinite(fast)},
            {"yarn_attn_factor", "above 0", attn, attn > 0 && isfinite(attn)},
            {"yarn_ext_factor", "in [0, 1]", ext, ext >= 0 && ext <= 1},
        };
        for (size_t i = 0; i < sizeof check / sizeof *check; i++)
            if (!check[i].ok)
                return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: %s.rope.scaling.%s is %g; YaRN needs it %s",
                                  g->name, a, check[i].key, check[i].v, check[i].want);
        celer_rope_yarn_factors(n_rot, base, factor, orig, fast, slow, ext, m->freq_factors);
        r->mscale = (float)(attn * (ext != 0 ? 0.1 * log(factor) + 1.0 : 1.0));
    }
    return CELER_OK;
}

static celer_status load_layer(celer_model *m, loader *L, int il, const celer_rope *rope)
{
    const celer_hparams *hp = &m->hp;
    celer_layer         *l  = &m->layers[il];
    int64_t              d = hp->n_embd, hk = hp->head_dim_k, hv = hp->head_dim_v;
    int64_t              nq = hp->n_head * hk, nk = hp->n_head_kv * hk, nv = hp->n_head_kv * hv, ff = hp->n_ff;
    if (take_layer(L, il, "attn_norm.weight", 0, d, false, &l->attn_norm) ||
        take_layer(L, il, "attn_q.weight", nq, d, false, &l->wq) || take_layer(L, il, "attn_k.weight", nk, d, false, &l->wk) ||
        take_layer(L, il, "attn_v.weight", nv, d, false, &l->wv) ||
        take_layer(L, il, "attn_output.weight", d, hp->n_head * hv, false, &l->wo) ||
        take_layer(L, il, "attn_q.bias", 0, nq, true, &l->bq) || take_layer(L, il, "attn_k.bias", 0, nk, true, &l->bk) ||
        take_layer(L, il, "attn_v.bias", 0, nv, true, &l->bv) ||
        take_layer(L, il, "ffn_norm.weight", 0, d, false, &l->ffn_norm))
        return L->err->code;
    if (m->arch->moe ? load_moe(m, L, il)
                     : take_layer(L, il, "ffn_gate.weight", ff, d, false, &l->w_gate) ||
                           take_layer(L, il, "ffn_up.weight", ff, d, false, &l->w_up) ||
                           take_layer(L, il, "ffn_down.weight", d, ff, false, &l->w_down))
        return L->err->code;
    if (m->arch->qk_norm && (take_layer(L, il, "attn_q_norm.weight", 0, hk, false, &l->q_norm) ||
                             take_layer(L, il, "attn_k_norm.weight", 0, hk, false, &l->k_norm)))
        return L->err->code;
    if (m->arch->sandwich_norm && (take_layer(L, il, "post_attention_norm.weight", 0, d, false, &l->post_attn_norm) ||
                                   take_layer(L, il, "post_ffw_norm.weight", 0, d, false, &l->post_ffn_norm)))
        return L->err->code;
    bool sliding = m->arch->swa_period && hp->sliding_window && (il + 1) % m->arch->swa_period != 0;
    l->rope      = *rope;
    if (sliding) {
        l->rope.base         = m->arch->swa_rope_base;
        l->rope.pos_scale    = 1.0f;
        l->rope.freq_factors = NULL;
        l->rope.mscale       = 1.0f;
    }
    l->attn = (celer_attn){.n_heads = hp->n_head, .n_kv_heads = hp->n_head_kv, .head_dim = hk,
                           .scale = 1.0f / sqrtf((float)hk), .window = sliding ? (int32_t)hp->sliding_window : 0};
    return CELER_OK;
}

celer_status celer_model_load(celer_model *m, const celer_model_file *mf, celer_backend *be, celer_error *err)
{
    memset(m, 0, sizeof *m);
    if (mf->kind != MODEL_FILE_GGUF) return celer_model_load_dir(m, mf, be, err);
    const celer_gguf *g = &mf->gguf;
    m->hp               = mf->hp;
    m->arch             = celer_arch_find(m->hp.arch);
    if (!m->arch)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "model: %s: architecture '%s' is not supported (celer runs: %s)",
                          g->name, m->hp.arch, celer_arch_names());
    const celer_hparams *hp = &m->hp;
    if (celer_model_init_moe(m, g->name, err)) return err->code;
    if (hp->n_layer <= 0 || hp->n_embd <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 || (hp->n_ff <= 0 && !m->arch->moe) ||
        hp->n_vocab <= 0 || hp->head_dim_k <= 0 || hp->head_dim_v <= 0 || hp->n_head % hp->n_head_kv)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "model: %s: incomplete hyper-parameters (layers %lld, embedding %lld, heads %lld/%lld, "
                          "feed-forward %lld, vocabulary %lld)",
                          g->name, (long long)hp->n_layer, (long long)hp->n_embd, (long long)hp->n_head,
                          (long long)hp->n_head_kv, (long long)hp->n_ff, (long long)hp->n_vocab);
    m->norm_eps   = hp->norm_eps > 0 ? (float)hp->norm_eps : 1e-5f;
    m->moe_renorm = m->arch->moe_renorm;
    loader L      = {.g = g, .be = be, .err = err};
    double scale = 0;
    if (get_f(g, hp->arch, "attention.scale", &scale, err)) return err->code;
    celer_rope rope;
    if (read_rope(m, g, &L, &rope)) return err->code;
    if (take(&L, "token_embd.weight", hp->n_vocab, hp->n_embd, false, &m->tok_embd) ||
        take(&L, "output_norm.weight", 0, hp->n_embd, false, &m->output_norm) ||
        take(&L, "output.weight", hp->n_vocab, hp->n_embd, true, &m->output))
        return err->code;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    m->n_layers = (int32_t)hp->n_layer;
    m->layers   = calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) return celer_fail(err, CELER_ERR_OOM, "model: out of memory");
    for (int il = 0; il < m->n_layers; il++) {
        if (load_layer(m, &L, il, &rope)) return err->code;
        if (scale > 0) m->layers[il].attn.scale = (float)scale;
    }
    return CELER_OK;
}

void celer_model_free(celer_model *m)
{
    if (!m) return;
    free(m->layers);
    free(m->experts);
    free(m->freq_factors);
    for (size_t i = 0; i < m->n_owned; i++) free(m->owned[i]);
    free(m->owned);
    memset(m, 0, sizeof *m);
}
