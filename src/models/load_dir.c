/* A celer_model from a Hugging Face or MLX model directory: config.json's hyper-parameters and
 * the safetensors tensors under their transformers names (model.layers.N.self_attn.q_proj, ...).
 *
 * Matrices stored as F32, F16 or BF16 are used where they lie in the mapping. Norms and biases
 * become f32 copies (Gemma's norms with the 1 its RMSNorm adds folded in, as GGUF stores them).
 * An MLX-quantized matrix (U32 codes with .scales, and .biases for affine, beside it) is handed
 * to the backend as it is stored, as a CELER_WEIGHT_MLX weight that names its format (every
 * mode, bit width, group and dtype mlx writes): the backend runs it natively at its quantized
 * size (the CPU: backends/cpu/repack_mlx.h). An MLX-quantized embedding table's rows are looked
 * up as mlx.core.dequantize gives them (rounded to the scales' dtype, as mlx-lm's embedding
 * does); it goes to the backend for its matmul only when it is the tied output.
 *
 * All four architectures use rotate-half RoPE in transformers' layout (the GGUF converters
 * permute llama's q and k to interleaved pairs instead), so every layer's RoPE is NeoX here. */
#include "core/error.h"
#include "models/model.h"
#include "models/rope_scaling.h"
#include "quant/half.h"
#include "quant/mlx_quant.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const celer_model_file *mf;
    celer_model            *m;
    celer_backend          *be;
    celer_error            *err;
    const char             *dir;
    float                   norm_add; /* Gemma: 1 */
    int64_t                 stack;    /* take_mat of a MoE's stacked experts: their number; else 0 */
} dloader;

static celer_status keep(dloader *L, void *p)
{
    celer_model *m = L->m;
    if (m->n_owned == m->cap_owned) {
        size_t cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **o   = realloc(m->owned, cap * sizeof *o);
        if (!o) {
            free(p);
            return celer_fail(L->err, CELER_ERR_OOM, "model: out of memory");
        }
        m->owned = o, m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return CELER_OK;
}

/* Element i of float data in dtype F32, F16 or BF16. */
static float float_at(celer_st_dtype dtype, const void *data, uint64_t i)
{
    if (dtype == CELER_ST_F32) {
        float f;
        memcpy(&f, (const char *)data + 4 * i, 4);
        return f;
    }
    uint16_t h;
    memcpy(&h, (const char *)data + 2 * i, 2);
    return dtype == CELER_ST_F16 ? celer_half_to_f32(h) : celer_bf16_to_f32(h);
}

static float st_value(const celer_st_tensor *t, uint64_t i) { return float_at(t->dtype, t->data, i); }

static bool float_dtype(celer_st_dtype d) { return d == CELER_ST_F32 || d == CELER_ST_F16 || d == CELER_ST_BF16; }

/* The shard that holds t (its path), for messages. */
static const char *file_of(const dloader *L, const celer_st_tensor *t)
{
    const celer_safetensors_set *s = &L->mf->st;
    for (uint32_t f = 0; f < s->n_files; f++)
        if (t >= s->files[f].tensors && t < s->files[f].tensors + s->files[f].n_tensors) return s->files[f].name;
    return L->dir;
}

/* "2 x 3 x 4": t's shape, for messages. */
static const char *shape_str(const celer_st_tensor *t, char *buf, size_t cap)
{
    int n = snprintf(buf, cap, "%s", t->n_dims ? "" : "a scalar");
    for (uint32_t i = 0; i < t->n_dims && n >= 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%llu", i ? " x " : "", (unsigned long long)t->shape[i]);
    return buf;
}

/* The error mlx_quant.c just set ("mlx quant: TENSOR: ..."), said of the file that holds the tensor. */
static celer_status in_file(dloader *L, const celer_st_tensor *t)
{
    char        why[sizeof L->err->msg];
    const char *m = L->err->msg;
    if (!strncmp(m, "mlx quant: ", 11)) m += 11;
    snprintf(why, sizeof why, "%s", m);
    return celer_fail(L->err, L->err->code, "model: %s: %s", file_of(L, t), why);
}

static celer_status load_weight(dloader *L, const char *name, celer_weight *w)
{
    celer_status st = L->be->ops->weight_load(L->be, w, L->err);
    if (st == CELER_ERR_UNSUPPORTED) {
        char why[sizeof L->err->msg];
        snprintf(why, sizeof why, "%s", L->err->msg);
        celer_fail(L->err, st, "model: %s: tensor '%s': %s", L->dir, name, why);
    }
    return st;
}

/* A vector of n (a norm weight when add is nonzero... or a bias) as f32. */
static celer_status take_vec(dloader *L, const char *name, int64_t n, bool optional, float add, celer_weight *w)
{
    *w                       = (celer_weight){0};
    const celer_st_tensor *t = celer_safetensors_set_find(&L->mf->st, name);
    if (!t) {
        if (optional) return CELER_OK;
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is missing", L->dir, name);
    }
    if (!float_dtype(t->dtype) || t->n_elems != (uint64_t)n || t->n_dims != 1)
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is %s of %llu elements in %u dimensions; "
                          "the config says a vector of %lld floats", file_of(L, t), name, celer_st_dtype_name(t->dtype),
                          (unsigned long long)t->n_elems, t->n_dims, (long long)n);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return celer_fail(L->err, CELER_ERR_OOM, "model: out of memory");
    for (int64_t i = 0; i < n; i++) v[i] = st_value(t, (uint64_t)i) + add;
    if (keep(L, v)) return L->err->code;
    *w = (celer_weight){.type = CELER_GGML_F32, .rows = 1, .cols = n, .data = v};
    return load_weight(L, name, w);
}

/* The matrix of a module (its .weight, rows × cols), as stored. An MLX-quantized one is also
 * described in *mq and *md when they are given, and goes to the backend only if matmul (an
 * embedding table that is not the tied output is only looked up, from the host arrays). */
static celer_status take_mat(dloader *L, const char *module, int64_t rows, int64_t cols, bool optional, celer_weight *w,
                             celer_mlx_quant *mq, celer_mlx_quant_data *md, bool matmul)
{
    *w = (celer_weight){0};
    char name[256], sname[272], bname[272];
    snprintf(name, sizeof name, "%s.weight", module);
    snprintf(sname, sizeof sname, "%s.scales", module);
    snprintf(bname, sizeof bname, "%s.biases", module);
    const celer_safetensors_set *set = &L->mf->st;
    const celer_st_tensor       *t   = celer_safetensors_set_find(set, name);
    if (!t) {
        if (optional) return CELER_OK;
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is missing", L->dir, name);
    }
    const celer_st_tensor *sc = celer_safetensors_set_find(set, sname);
    celer_hf_quant         hq = celer_hf_config_quant(&L->mf->cfg, module);
    if (hq.quantized && !sc && t->dtype == CELER_ST_U32)
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is missing (config.json quantizes %s, "
                          "and '%s' holds its packed codes)", L->dir, sname, module, name);
    if (sc && hq.quantized) {
        const celer_st_tensor *bi     = celer_safetensors_set_find(set, bname);
        bool                   affine = hq.mode == CELER_HF_QUANT_AFFINE;
        if (affine && !float_dtype(sc->dtype))
            return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is %s; affine scales are BF16, F16 "
                              "or F32", file_of(L, sc), sname, celer_st_dtype_name(sc->dtype));
        celer_mlx_quant q = {.name = module, .mode = hq.mode, .bits = hq.bits, .group_size = hq.group_size,
                             .dtype = affine ? sc->dtype : CELER_ST_BF16, .rows = rows, .cols = cols};
        if (celer_mlx_quant_check(&q, L->err) ||
            celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_WEIGHT, name, t->dtype, t->n_dims, t->shape, L->err))
            return in_file(L, t);
        if (celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_SCALES, sname, sc->dtype, sc->n_dims, sc->shape, L->err))
            return in_file(L, sc);
        if (affine && !bi)
            return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is missing (affine weights need "
                              "a bias per group)", L->dir, bname);
        /* mlx would promote a mixed pair to their common type, but never writes one */
        if (affine && bi->dtype != sc->dtype)
            return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is %s but '%s' is %s; mlx writes the "
                              "scales and biases of a weight in one dtype", file_of(L, bi), bname,
                              celer_st_dtype_name(bi->dtype), sname, celer_st_dtype_name(sc->dtype));
        /* not affine: biases are an error, as mlx-lm's strict load says */
        if (bi && celer_mlx_quant_check_tensor(&q, CELER_MLX_QUANT_BIASES, bname, bi->dtype, bi->n_dims, bi->shape,
                                               L->err))
            return in_file(L, bi);
        if (L->stack && (t->n_dims != 3 || t->shape[0] != (uint64_t)L->stack)) {
            char shape[160];
            return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is %s; the config says %lld stacked "
                              "experts", file_of(L, t), name, shape_str(t, shape, sizeof shape), (long long)L->stack);
        }
        celer_mlx_quant_data d = {t->data, t->n_bytes, sc->data, sc->n_bytes, NULL, 0};
        if (affine) d.biases = bi->data, d.biases_bytes = bi->n_bytes;
        q.name = t->name; /* lives as long as the mapping; module does not */
        if (mq) *mq = q, *md = d;
        *w = (celer_weight){.type = CELER_WEIGHT_MLX, .rows = rows, .cols = cols, .data = t->data, .mlx = q,
                            .mlx_data = d};
        return matmul ? load_weight(L, name, w) : CELER_OK;
    }
    if (!float_dtype(t->dtype))
        return celer_fail(L->err, CELER_ERR_UNSUPPORTED, "model: %s: tensor '%s' is %s without MLX quantization in "
                          "config.json; celer runs F32, F16, BF16 and MLX-quantized weights", file_of(L, t), name,
                          celer_st_dtype_name(t->dtype));
    bool shape_ok = L->stack ? t->n_dims == 3 && t->shape[0] == (uint64_t)L->stack &&
                                   t->shape[1] == (uint64_t)(rows / L->stack) && t->shape[2] == (uint64_t)cols
                             : t->n_dims == 2 && t->shape[0] == (uint64_t)rows && t->shape[1] == (uint64_t)cols;
    if (!shape_ok) {
        char shape[160];
        if (L->stack)
            return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is %s, the config says %lld experts of "
                              "%lld x %lld", file_of(L, t), name, shape_str(t, shape, sizeof shape),
                              (long long)L->stack, (long long)(rows / L->stack), (long long)cols);
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s: tensor '%s' is %s, the config says %lld x %lld",
                          file_of(L, t), name, shape_str(t, shape, sizeof shape), (long long)rows, (long long)cols);
    }
    *w = (celer_weight){.type = t->dtype == CELER_ST_F32 ? CELER_GGML_F32 : t->dtype == CELER_ST_F16 ? CELER_GGML_F16
                                                                                                      : CELER_GGML_BF16,
                        .rows = rows, .cols = cols, .data = t->data};
    return load_weight(L, name, w);
}

/* One projection of a MoE layer's n experts, each (rows, cols): mlx-lm's stacked
 * <prefix>.switch_mlp.<proj> (n, rows, cols), or transformers' <prefix>.experts.E.<proj>, one
 * tensor per expert. A stacked tensor is loaded once and each expert is a view of it. */
static celer_status take_experts(dloader *L, const char *prefix, const char *proj, int64_t n, int64_t rows,
                                 int64_t cols, celer_weight *w)
{
    char module[256], name[272];
    snprintf(module, sizeof module, "%s.switch_mlp.%s", prefix, proj);
    snprintf(name, sizeof name, "%s.weight", module);
    if (!celer_safetensors_set_find(&L->mf->st, name)) {
        for (int64_t e = 0; e < n; e++) {
            snprintf(module, sizeof module, "%s.experts.%lld.%s", prefix, (long long)e, proj);
            if (take_mat(L, module, rows, cols, false, &w[e], NULL, NULL, true)) return L->err->code;
        }
        return CELER_OK;
    }
    celer_weight all;
    L->stack        = n;
    celer_status st = take_mat(L, module, n * rows, cols, false, &all, NULL, NULL, false);
    L->stack        = 0;
    if (st) return st;
    st = celer_load_experts(L->be, &all, n, w, L->err);
    if (st == CELER_ERR_UNSUPPORTED) {
        char why[sizeof L->err->msg];
        snprintf(why, sizeof why, "%s", L->err->msg);
        celer_fail(L->err, st, "model: %s: tensor '%s': %s", L->dir, name, why);
    }
    return st;
}

/* A MoE layer's router, experts and (qwen2_moe) shared expert with its gate; p is the layer's
 * module path. */
static celer_status dir_moe(dloader *L, int il, const char *p)
{
    celer_model         *m  = L->m;
    const celer_hparams *hp = &m->hp;
    celer_layer         *l  = &m->layers[il];
    int64_t              d = hp->n_embd, E = hp->n_expert, fe = hp->n_ff_expert, fs = hp->n_ff_shexp;
    celer_weight        *w = m->experts + (size_t)il * 3 * (size_t)E;
    char                 mlp[128], n[192];
    snprintf(mlp, sizeof mlp, "%s.mlp", p);
    l->moe = (celer_moe){.n_expert = E, .n_ff = fe, .gate = w, .up = w + E, .down = w + 2 * E};
#define MOD(s) (snprintf(n, sizeof n, "%s.%s", mlp, s), n)
    if (take_mat(L, MOD("gate"), E, d, false, &l->router, NULL, NULL, true) ||
        take_experts(L, mlp, "gate_proj", E, fe, d, l->moe.gate) ||
        take_experts(L, mlp, "up_proj", E, fe, d, l->moe.up) ||
        take_experts(L, mlp, "down_proj", E, d, fe, l->moe.down))
        return L->err->code;
    if (!fs) return CELER_OK;
    return take_mat(L, MOD("shared_expert_gate"), 1, d, false, &l->shexp_gate, NULL, NULL, true) ||
                   take_mat(L, MOD("shared_expert.gate_proj"), fs, d, false, &l->w_gate, NULL, NULL, true) ||
                   take_mat(L, MOD("shared_expert.up_proj"), fs, d, false, &l->w_up, NULL, NULL, true) ||
                   take_mat(L, MOD("shared_expert.down_proj"), d, fs, false, &l->w_down, NULL, NULL, true)
               ? L->err->code
               : CELER_OK;
#undef MOD
}

/* rope_scaling of config.json, as the GGUF loader reads its keys. */
static celer_status dir_rope(dloader *L, celer_rope *r)
{
    celer_model                 *m  = L->m;
    const celer_hf_config       *c  = &L->mf->cfg;
    const celer_hf_rope_scaling *rs = &c->rope_scaling;
    int64_t                      n_rot = m->hp.head_dim_k;
    double                       base = m->hp.rope_theta > 0 ? m->hp.rope_theta : 10000.0;
    *r = (celer_rope){.mode = CELER_ROPE_NEOX, .n_rot = n_rot, .base = (float)base, .pos_scale = 1.0f, .mscale = 1.0f};
    if (!rs->present || !rs->type || !strcmp(rs->type, "default")) return CELER_OK;
    double factor = rs->factor, orig = rs->original_max_position_embeddings > 0
                                           ? (double)rs->original_max_position_embeddings
                                           : (double)m->hp.n_ctx_train;
    bool   linear = !strcmp(rs->type, "linear"), llama3 = !strcmp(rs->type, "llama3"), yarn = !strcmp(rs->type, "yarn");
    if (!linear && !llama3 && !yarn)
        return celer_fail(L->err, CELER_ERR_UNSUPPORTED, "model: %s/config.json: rope_scaling type '%s' is not "
                          "supported (linear, llama3 and yarn are)", L->dir, rs->type);
    if (!(factor >= 1) || !isfinite(factor))
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s/config.json: rope_scaling factor is %g; it must be a "
                          "number from 1", L->dir, factor);
    if (linear) {
        r->pos_scale = (float)(1.0 / factor);
        return CELER_OK;
    }
    m->freq_factors = malloc((size_t)(n_rot / 2) * sizeof *m->freq_factors);
    if (!m->freq_factors) return celer_fail(L->err, CELER_ERR_OOM, "model: out of memory");
    r->freq_factors = m->freq_factors;
    if (llama3) {
        double lo = rs->low_freq_factor > 0 ? rs->low_freq_factor : 1, hi = rs->high_freq_factor > 0 ? rs->high_freq_factor : 4;
        if (!(hi > lo))
            return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s/config.json: rope_scaling high_freq_factor %g must "
                              "be above low_freq_factor %g", L->dir, hi, lo);
        celer_rope_llama3_factors(n_rot, base, factor, orig, lo, hi, m->freq_factors);
        return CELER_OK;
    }
    double fast = rs->beta_fast > 0 ? rs->beta_fast : 32, slow = rs->beta_slow > 0 ? rs->beta_slow : 1;
    if (!(fast > slow))
        return celer_fail(L->err, CELER_ERR_FORMAT, "model: %s/config.json: rope_scaling beta_fast %g must be above "
                          "beta_slow %g", L->dir, fast, slow);
    celer_rope_yarn_factors(n_rot, base, factor, orig, fast, slow, 1.0, m->freq_factors);
    /* transformers: attention_factor replaces 0.1 ln(factor) + 1 when given */
    r->mscale = (float)(rs->attention_factor > 0 ? rs->attention_factor : 0.1 * log(factor) + 1.0);
    return CELER_OK;
}

static celer_status dir_layer(dloader *L, int il, const celer_rope *rope)
{
    celer_model         *m  = L->m;
    const celer_hparams *hp = &m->hp;
    celer_layer         *l  = &m->layers[il];
    int64_t              d = hp->n_embd, hk = hp->head_dim_k, hv = hp->head_dim_v;
    int64_t              nq = hp->n_head * hk, nk = hp->n_head_kv * hk, nv = hp->n_head_kv * hv, ff = hp->n_ff;
    bool                 gemma = m->arch->sandwich_norm;
    float                na    = L->norm_add;
    char                 p[96], n[160];
#define MOD(s) (snprintf(n, sizeof n, "%s.%s", p, s), n)
    snprintf(p, sizeof p, "model.layers.%d", il);
    if (take_vec(L, MOD("input_layernorm.weight"), d, false, na, &l->attn_norm) ||
        take_mat(L, MOD("self_attn.q_proj"), nq, d, false, &l->wq, NULL, NULL, true) ||
        take_mat(L, MOD("self_attn.k_proj"), nk, d, false, &l->wk, NULL, NULL, true) ||
        take_mat(L, MOD("self_attn.v_proj"), nv, d, false, &l->wv, NULL, NULL, true) ||
        take_mat(L, MOD("self_attn.o_proj"), d, hp->n_head * hv, false, &l->wo, NULL, NULL, true) ||
        take_vec(L, MOD("self_attn.q_proj.bias"), nq, true, 0, &l->bq) ||
        take_vec(L, MOD("self_attn.k_proj.bias"), nk, true, 0, &l->bk) ||
        take_vec(L, MOD("self_attn.v_proj.bias"), nv, true, 0, &l->bv))
        return L->err->code;
    if (m->arch->moe ? dir_moe(L, il, p)
                     : take_mat(L, MOD("mlp.gate_proj"), ff, d, false, &l->w_gate, NULL, NULL, true) ||
                           take_mat(L, MOD("mlp.up_proj"), ff, d, false, &l->w_up, NULL, NULL, true) ||
                           take_mat(L, MOD("mlp.down_proj"), d, ff, false, &l->w_down, NULL, NULL, true))
        return L->err->code;
    /* Gemma: post_attention_layernorm is the norm after attention, pre_feedforward_layernorm
     * the FFN's; elsewhere post_attention_layernorm is the FFN's input norm */
    if (gemma ? take_vec(L, MOD("post_attention_layernorm.weight"), d, false, na, &l->post_attn_norm) ||
                    take_vec(L, MOD("pre_feedforward_layernorm.weight"), d, false, na, &l->ffn_norm) ||
                    take_vec(L, MOD("post_feedforward_layernorm.weight"), d, false, na, &l->post_ffn_norm)
              : take_vec(L, MOD("post_attention_layernorm.weight"), d, false, na, &l->ffn_norm))
        return L->err->code;
    if (m->arch->qk_norm && (take_vec(L, MOD("self_attn.q_norm.weight"), hk, false, na, &l->q_norm) ||
                             take_vec(L, MOD("self_attn.k_norm.weight"), hk, false, na, &l->k_norm)))
        return L->err->code;
#undef MOD
    bool sliding = m->arch->swa_period && hp->sliding_window && (il + 1) % m->arch->swa_period != 0;
    l->rope      = *rope;
    if (sliding) l->rope = (celer_rope){.mode = CELER_ROPE_NEOX, .n_rot = rope->n_rot, .base = m->arch->swa_rope_base,
                                        .pos_scale = 1.0f, .mscale = 1.0f};
    double qpas = L->mf->cfg.query_pre_attn_scalar;
    l->attn     = (celer_attn){.n_heads = hp->n_head, .n_kv_heads = hp->n_head_kv, .head_dim = hk,
                               .scale = 1.0f / sqrtf(qpas > 0 ? (float)qpas : (float)hk),
                               .window = sliding ? (int32_t)hp->sliding_window : 0};
    return CELER_OK;
}

/* transformers' model_type → celer's architecture name. */
static const char *arch_name(const char *model_type)
{
    return !strcmp(model_type, "gemma3_text") ? "gemma3"
         : !strcmp(model_type, "qwen3_moe")  ? "qwen3moe"
         : !strcmp(model_type, "qwen2_moe")  ? "qwen2moe"
                                              : model_type;
}

celer_status celer_model_load_dir(celer_model *m, const celer_model_file *mf, celer_backend *be, celer_error *err)
{
    const char *dir = mf->st.dir;
    if (celer_model_dir_check_config(&mf->cfg, dir, true, err)) return err->code;
    m->hp = mf->hp;
    m->arch         = celer_arch_find(arch_name(m->hp.arch));
    if (!m->arch)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "model: %s: architecture '%s' (config.json model_type) is not "
                          "supported (celer runs: %s)", dir, m->hp.arch, celer_arch_names());
    if (mf->cfg.quant.present && mf->cfg.quant.method)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "model: %s: quantization method '%s' is not supported (celer runs "
                          "unquantized and MLX-quantized directories, and GGUF files)", dir, mf->cfg.quant.method);
    const celer_hparams *hp = &m->hp;
    m->norm_eps             = hp->norm_eps > 0 ? (float)hp->norm_eps : 1e-6f;
    m->moe_renorm           = mf->cfg.norm_topk_prob >= 0 ? mf->cfg.norm_topk_prob != 0 : m->arch->moe_renorm;
    if (celer_model_init_moe(m, dir, err)) return err->code;
    dloader L = {.mf = mf, .m = m, .be = be, .err = err, .dir = dir, .norm_add = m->arch->sandwich_norm ? 1.0f : 0.0f};
    celer_rope rope;
    bool       tied = !celer_safetensors_set_find(&mf->st, "lm_head.weight"); /* else missing: take_mat says so */
    bool       kept = be->ops->argmax_keep != NULL; /* the table read on the backend too (model.h) */
    if (dir_rope(&L, &rope) ||
        take_mat(&L, "model.embed_tokens", hp->n_vocab, hp->n_embd, false, &m->tok_embd, &m->embd_q, &m->embd_d,
                 tied || kept) ||
        take_vec(&L, "model.norm.weight", hp->n_embd, false, L.norm_add, &m->output_norm) ||
        take_mat(&L, "lm_head", hp->n_vocab, hp->n_embd, mf->cfg.tie_word_embeddings != 0, &m->output, NULL, NULL, true))
        return err->code;
    if (!m->output.data) m->output = m->tok_embd; /* tied embeddings */
    m->embd_mlx  = m->embd_q.rows > 0;
    m->embd_kept = m->embd_mlx && (tied || kept) && m->embd_q.mode == CELER_HF_QUANT_AFFINE;
    m->n_layers = (int32_t)hp->n_layer;
    m->layers   = calloc((size_t)m->n_layers, sizeof *m->layers);
    if (!m->layers) return celer_fail(err, CELER_ERR_OOM, "model: out of memory");
    for (int il = 0; il < m->n_layers; il++)
        if (dir_layer(&L, il, &rope)) return err->code;
    return CELER_OK;
}
