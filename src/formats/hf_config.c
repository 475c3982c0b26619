/* config.json: the model's hyperparameters and MLX quantization (see hf_config.h).
 * generation_config.json and tokenizer_config.json are in hf_config_extra.c. */
#include "formats/hf_config.h"

#include "core/error.h"
#include "core/json.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CONFIG_MAX_SIZE (16u << 20) /* bytes */
#define NO_FLAG         ((size_t)-1)

/* obj[key] copied into *dst (replacing it) when present. */
static celer_status get_str(const cJSON *obj, const char *key, const char *what, char **dst, celer_error *err)
{
    const char  *v     = NULL;
    bool         found = false;
    celer_status s     = celer_json_get_string(obj, key, what, &v, &found, err);
    if (s != CELER_OK || !found) return s;
    char *d = strdup(v);
    if (!d) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", what);
    free(*dst);
    *dst = d;
    return CELER_OK;
}

/* obj[key] as 1 or 0 into *dst when present. */
static celer_status get_tristate(const cJSON *obj, const char *key, const char *what, int *dst, celer_error *err)
{
    bool         v = false, found = false;
    celer_status s = celer_json_get_bool(obj, key, what, &v, &found, err);
    if (s == CELER_OK && found) *dst = v;
    return s;
}

/* ---- token ids ----------------------------------------------------------------------------- */

celer_status celer_hf_ids_read(const cJSON *obj, const char *key, const char *what, celer_hf_ids *ids,
                               celer_error *err)
{
    const cJSON *it = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (!it || cJSON_IsNull(it)) return CELER_OK;
    if (!cJSON_IsArray(it) && !cJSON_IsNumber(it))
        return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s' must be a token id or a list of token ids", what, key);
    int      n = cJSON_IsArray(it) ? cJSON_GetArraySize(it) : 1;
    int64_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", what);
    const cJSON *e = cJSON_IsArray(it) ? it->child : it;
    for (int i = 0; i < n; i++, e = e->next)
        if (!celer_json_is_int(e, 0, INT32_MAX, &v[i])) {
            free(v);
            return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s'%s must hold token ids in [0, %d]", what, key,
                              cJSON_IsArray(it) ? " (a list)" : "", INT32_MAX);
        }
    celer_hf_ids_free(ids);
    ids->n   = (uint32_t)n;
    ids->ids = n ? v : NULL;
    if (!n) free(v);
    return CELER_OK;
}

void celer_hf_ids_free(celer_hf_ids *ids)
{
    if (!ids) return;
    free(ids->ids);
    ids->ids = NULL;
    ids->n   = 0;
}

bool celer_hf_ids_has(const celer_hf_ids *ids, int64_t id)
{
    for (uint32_t i = 0; ids && i < ids->n; i++)
        if (ids->ids[i] == id) return true;
    return false;
}

/* ---- quantization -------------------------------------------------------------------------- */

static const struct {
    const char *name;
    uint32_t    group_size, bits; /* mlx.nn's defaults for the mode */
} modes[CELER_HF_QUANT_MODE_COUNT] = {
    [CELER_HF_QUANT_AFFINE] = {"affine", 64, 4},
    [CELER_HF_QUANT_MXFP4]  = {"mxfp4", 32, 4},
    [CELER_HF_QUANT_MXFP8]  = {"mxfp8", 32, 8},
    [CELER_HF_QUANT_NVFP4]  = {"nvfp4", 16, 4},
};

const char *celer_hf_quant_mode_name(celer_hf_quant_mode m)
{
    return (unsigned)m < CELER_HF_QUANT_MODE_COUNT ? modes[m].name : "?";
}

/* mode, group_size and bits of obj; absent ones take the mode's defaults. */
static celer_status read_quant(const cJSON *obj, const char *what, celer_hf_quant *q, celer_error *err)
{
    const char  *m = "affine";
    celer_status s = celer_json_get_string(obj, "mode", what, &m, NULL, err);
    if (s != CELER_OK) return s;
    int mode = 0;
    while (mode < CELER_HF_QUANT_MODE_COUNT && strcmp(m, modes[mode].name) != 0) mode++;
    if (mode == CELER_HF_QUANT_MODE_COUNT)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "%s: 'mode' is '%.40s'; celer knows affine, mxfp4, mxfp8 and nvfp4", what, m);
    int64_t g = modes[mode].group_size, b = modes[mode].bits;
    if ((s = celer_json_get_int(obj, "group_size", what, 1, 1 << 20, &g, NULL, err)) != CELER_OK) return s;
    if ((s = celer_json_get_int(obj, "bits", what, 1, 64, &b, NULL, err)) != CELER_OK) return s;
    if (mode == CELER_HF_QUANT_AFFINE) {
        if (b < 2 || b > 8 || b == 7)
            return celer_fail(err, CELER_ERR_FORMAT,
                              "%s: 'bits' is %lld; affine quantization has 2, 3, 4, 5, 6 or 8 bits", what,
                              (long long)b);
        if (g != 32 && g != 64 && g != 128) /* as mlx.core.quantize and mlx_quant.c */
            return celer_fail(err, CELER_ERR_FORMAT,
                              "%s: 'group_size' is %lld; affine quantization has groups of 32, 64 or 128",
                              what, (long long)g);
    } else if (g != modes[mode].group_size || b != modes[mode].bits)
        return celer_fail(err, CELER_ERR_FORMAT, "%s: %s has group_size %u and bits %u, not %lld and %lld", what,
                          modes[mode].name, modes[mode].group_size, modes[mode].bits, (long long)g, (long long)b);
    *q = (celer_hf_quant){true, (celer_hf_quant_mode)mode, (uint32_t)b, (uint32_t)g};
    return CELER_OK;
}

static bool is_block_key(const char *k)
{
    return !strcmp(k, "group_size") || !strcmp(k, "bits") || !strcmp(k, "mode") || !strcmp(k, "quant_method");
}

static int cmp_override(const void *a, const void *b)
{
    return strcmp(((const celer_hf_quant_override *)a)->module, ((const celer_hf_quant_override *)b)->module);
}

static celer_status read_overrides(const cJSON *block, const char *what, celer_hf_quantization *q,
                                   celer_error *err)
{
    uint32_t     n = 0;
    const cJSON *e = NULL;
    cJSON_ArrayForEach(e, block) n += !is_block_key(e->string) && (cJSON_IsObject(e) || cJSON_IsBool(e));
    q->overrides = calloc(n ? n : 1, sizeof *q->overrides);
    if (!q->overrides) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", what);
    cJSON_ArrayForEach(e, block)
    {
        if (is_block_key(e->string) || !(cJSON_IsObject(e) || cJSON_IsBool(e))) continue;
        celer_hf_quant_override *o = &q->overrides[q->n_overrides];
        if (!(o->module = strdup(e->string))) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", what);
        q->n_overrides++;
        char sub[512];
        snprintf(sub, sizeof sub, "%.300s['%.200s']", what, e->string);
        if (cJSON_IsObject(e)) {
            celer_status s = read_quant(e, sub, &o->quant, err);
            if (s != CELER_OK) return s;
        } else o->quant = cJSON_IsTrue(e) ? q->def : (celer_hf_quant){0};
    }
    qsort(q->overrides, q->n_overrides, sizeof *q->overrides, cmp_override);
    for (uint32_t i = 1; i < q->n_overrides; i++)
        if (strcmp(q->overrides[i - 1].module, q->overrides[i].module) == 0)
            return celer_fail(err, CELER_ERR_FORMAT, "%s: module '%s' appears twice", what, q->overrides[i].module);
    return CELER_OK;
}

/* "quantization", else "quantization_config", at the top level, else in text_config. */
static celer_status read_quantization(const cJSON *root, const cJSON *text, const char *path,
                                      celer_hf_quantization *q, celer_error *err)
{
    static const char *const keys[] = {"quantization", "quantization_config"};
    const cJSON             *block  = NULL;
    const char              *key    = NULL;
    for (int i = 0; i < 4 && !block; i++) {
        const cJSON *obj = i < 2 ? root : text;
        key              = keys[i % 2];
        block            = obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
        if (cJSON_IsNull(block)) block = NULL;
    }
    if (!block) return CELER_OK;
    char what[512];
    snprintf(what, sizeof what, "%s: %s", path, key);
    if (!cJSON_IsObject(block)) return celer_fail(err, CELER_ERR_FORMAT, "%s: must be an object", what);
    q->present     = true;
    celer_status s = get_str(block, "quant_method", what, &q->method, err);
    if (s != CELER_OK || q->method) return s;
    if ((s = read_quant(block, what, &q->def, err)) != CELER_OK) return s;
    return read_overrides(block, what, q, err);
}

celer_hf_quant celer_hf_config_quant(const celer_hf_config *c, const char *module)
{
    celer_hf_quant none = {0};
    if (!c || !c->quant.present || c->quant.method) return none;
    if (module) {
        celer_hf_quant_override key = {(char *)module, none};
        const celer_hf_quant_override *o =
            bsearch(&key, c->quant.overrides, c->quant.n_overrides, sizeof key, cmp_override);
        if (o) return o->quant;
    }
    return c->quant.def;
}

/* ---- the language-model fields ----------------------------------------------------------- */

#define CFG(f) offsetof(celer_hf_config, f)

static const struct {
    const char *key;
    size_t      off, given; /* given: offset of a bool set when found, or NO_FLAG */
    int64_t     lo;
} int_fields[] = {
    {"hidden_size", CFG(hidden_size), NO_FLAG, 1},
    {"num_hidden_layers", CFG(num_hidden_layers), NO_FLAG, 1},
    {"num_attention_heads", CFG(num_attention_heads), NO_FLAG, 1},
    {"num_key_value_heads", CFG(num_key_value_heads), CFG(num_key_value_heads_given), 1},
    {"head_dim", CFG(head_dim), CFG(head_dim_given), 1},
    {"intermediate_size", CFG(intermediate_size), NO_FLAG, 0},
    {"vocab_size", CFG(vocab_size), NO_FLAG, 1},
    {"max_position_embeddings", CFG(max_position_embeddings), NO_FLAG, 1},
    {"sliding_window", CFG(sliding_window), NO_FLAG, 0},
    {"_sliding_window_pattern", CFG(sliding_window_pattern), NO_FLAG, 0},
    {"sliding_window_pattern", CFG(sliding_window_pattern), NO_FLAG, 0},
    {"n_routed_experts", CFG(num_experts), NO_FLAG, 0},
    {"num_local_experts", CFG(num_experts), NO_FLAG, 0},
    {"num_experts", CFG(num_experts), NO_FLAG, 0},
    {"num_experts_per_tok", CFG(num_experts_per_tok), NO_FLAG, 0},
    {"moe_intermediate_size", CFG(moe_intermediate_size), NO_FLAG, 0},
    {"shared_expert_intermediate_size", CFG(shared_expert_intermediate_size), NO_FLAG, 0},
};

static const struct {
    const char *key;
    size_t      off;
} dbl_fields[] = {
    {"rms_norm_eps", CFG(rms_norm_eps)},
    {"rope_theta", CFG(rope_theta)},
    {"rope_local_base_freq", CFG(rope_local_base_freq)},
    {"query_pre_attn_scalar", CFG(query_pre_attn_scalar)},
    {"final_logit_softcapping", CFG(final_logit_softcapping)},
    {"attn_logit_softcapping", CFG(attn_logit_softcapping)},
}, str_fields[] = {
    {"model_type", CFG(model_type)},   {"torch_dtype", CFG(torch_dtype)},
    {"dtype", CFG(torch_dtype)},       {"hidden_act", CFG(hidden_act)},
    {"hidden_activation", CFG(hidden_act)},
}, tri_fields[] = {
    {"tie_word_embeddings", CFG(tie_word_embeddings)},
    {"attention_bias", CFG(attention_bias)},
    {"norm_topk_prob", CFG(norm_topk_prob)},
};

#define FIELD(c, off, type) ((type *)((char *)(c) + (off)))
#define COUNT(a)            (sizeof(a) / sizeof((a)[0]))

static celer_status read_double(const cJSON *obj, const char *key, const char *what, double *v, celer_error *err)
{
    double       d = 0;
    bool         found;
    celer_status s = celer_json_get_double(obj, key, what, &d, &found, err);
    if (s != CELER_OK || !found) return s;
    if (d < 0) return celer_fail(err, CELER_ERR_FORMAT, "%s: '%s' is %g; it must not be negative", what, key, d);
    *v = d;
    return CELER_OK;
}

/* rope_scaling, or one rope_parameters object (whose rope_theta goes to *theta). */
static celer_status read_rope(const cJSON *r, const char *what, celer_hf_rope_scaling *rs, double *theta,
                              celer_error *err)
{
    static const struct {
        const char *key;
        size_t      off;
    } f[] = {
        {"factor", offsetof(celer_hf_rope_scaling, factor)},
        {"low_freq_factor", offsetof(celer_hf_rope_scaling, low_freq_factor)},
        {"high_freq_factor", offsetof(celer_hf_rope_scaling, high_freq_factor)},
        {"beta_fast", offsetof(celer_hf_rope_scaling, beta_fast)},
        {"beta_slow", offsetof(celer_hf_rope_scaling, beta_slow)},
        {"attention_factor", offsetof(celer_hf_rope_scaling, attention_factor)},
    };
    if (!cJSON_IsObject(r)) return celer_fail(err, CELER_ERR_FORMAT, "%s: must be an object or null", what);
    celer_status s = theta ? read_double(r, "rope_theta", what, theta, err) : CELER_OK;
    char        *type = NULL;
    if (s == CELER_OK) s = get_str(r, "type", what, &type, err);
    if (s == CELER_OK) s = get_str(r, "rope_type", what, &type, err);
    if (s != CELER_OK || (type && strcmp(type, "default") == 0) || (!type && theta)) {
        free(type);
        return s;
    }
    free(rs->type);
    memset(rs, 0, sizeof *rs);
    rs->present = true;
    rs->type    = type;
    for (size_t i = 0; i < COUNT(f) && s == CELER_OK; i++)
        s = read_double(r, f[i].key, what, FIELD(rs, f[i].off, double), err);
    if (s == CELER_OK)
        s = celer_json_get_int(r, "original_max_position_embeddings", what, 1, INT32_MAX,
                               &rs->original_max_position_embeddings, NULL, err);
    return s;
}

/* rope_scaling (transformers 4) and rope_parameters (transformers 5: one object, or one per
 * layer type as Gemma 3 writes it, whose sliding_attention theta is rope_local_base_freq). */
static celer_status read_ropes(celer_hf_config *c, const cJSON *obj, const char *path, celer_error *err)
{
    char what[512];
    snprintf(what, sizeof what, "%s: rope_scaling", path);
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(obj, "rope_scaling");
    celer_status s = r && !cJSON_IsNull(r) ? read_rope(r, what, &c->rope_scaling, NULL, err) : CELER_OK;
    r              = cJSON_GetObjectItemCaseSensitive(obj, "rope_parameters");
    if (s != CELER_OK || !r || cJSON_IsNull(r)) return s;
    snprintf(what, sizeof what, "%s: rope_parameters", path);
    const cJSON *full = cJSON_GetObjectItemCaseSensitive(r, "full_attention");
    const cJSON *slid = cJSON_GetObjectItemCaseSensitive(r, "sliding_attention");
    if (!full && !slid) return read_rope(r, what, &c->rope_scaling, &c->rope_theta, err);
    celer_hf_rope_scaling local = {0};
    if (full) s = read_rope(full, what, &c->rope_scaling, &c->rope_theta, err);
    if (s == CELER_OK && slid) s = read_rope(slid, what, &local, &c->rope_local_base_freq, err);
    free(local.type);
    return s;
}

static celer_status read_layer_types(celer_hf_config *c, const cJSON *obj, const char *what, celer_error *err)
{
    static const char *const names[] = {"full_attention", "sliding_attention", "chunked_attention",
                                        "linear_attention"};
    const cJSON             *lt      = cJSON_GetObjectItemCaseSensitive(obj, "layer_types");
    if (!lt || cJSON_IsNull(lt)) return CELER_OK;
    if (!cJSON_IsArray(lt)) return celer_fail(err, CELER_ERR_FORMAT, "%s: 'layer_types' must be a list of strings", what);
    int                  n = cJSON_GetArraySize(lt);
    celer_hf_layer_type *t = calloc((size_t)(n ? n : 1), sizeof *t);
    if (!t) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", what);
    free(c->layer_types);
    c->layer_types   = t;
    c->n_layer_types = (uint32_t)n;
    const cJSON *e   = NULL;
    int          i   = 0;
    cJSON_ArrayForEach(e, lt)
    {
        if (!cJSON_IsString(e))
            return celer_fail(err, CELER_ERR_FORMAT, "%s: layer_types[%d] must be a string", what, i);
        int k = 0;
        while (k < (int)COUNT(names) && strcmp(e->valuestring, names[k]) != 0) k++;
        t[i++] = (celer_hf_layer_type)k; /* k == COUNT(names) is CELER_HF_LAYER_OTHER */
    }
    return CELER_OK;
}

/* Every field present in obj, over what earlier calls read. */
static celer_status read_fields(celer_hf_config *c, const cJSON *obj, const char *what, celer_error *err)
{
    celer_status s = CELER_OK;
    for (size_t i = 0; i < COUNT(int_fields) && s == CELER_OK; i++) {
        bool found = false;
        s = celer_json_get_int(obj, int_fields[i].key, what, int_fields[i].lo, INT32_MAX,
                               FIELD(c, int_fields[i].off, int64_t), &found, err);
        if (found && int_fields[i].given != NO_FLAG) *FIELD(c, int_fields[i].given, bool) = true;
    }
    for (size_t i = 0; i < COUNT(dbl_fields) && s == CELER_OK; i++)
        s = read_double(obj, dbl_fields[i].key, what, FIELD(c, dbl_fields[i].off, double), err);
    for (size_t i = 0; i < COUNT(str_fields) && s == CELER_OK; i++)
        s = get_str(obj, str_fields[i].key, what, FIELD(c, str_fields[i].off, char *), err);
    for (size_t i = 0; i < COUNT(tri_fields) && s == CELER_OK; i++)
        s = get_tristate(obj, tri_fields[i].key, what, FIELD(c, tri_fields[i].off, int), err);
    if (s == CELER_OK) s = celer_hf_ids_read(obj, "bos_token_id", what, &c->bos_token_id, err);
    if (s == CELER_OK) s = celer_hf_ids_read(obj, "eos_token_id", what, &c->eos_token_id, err);
    if (s == CELER_OK) s = read_layer_types(c, obj, what, err);
    if (s == CELER_OK) s = read_ropes(c, obj, what, err);
    if (s != CELER_OK) return s;

    const cJSON *arch = cJSON_GetObjectItemCaseSensitive(obj, "architectures");
    if (arch && !cJSON_IsNull(arch)) {
        if (!cJSON_IsArray(arch) || (arch->child && !cJSON_IsString(arch->child)))
            return celer_fail(err, CELER_ERR_FORMAT, "%s: 'architectures' must be a list of strings", what);
        if (arch->child) {
            char *a = strdup(arch->child->valuestring);
            if (!a) return celer_fail(err, CELER_ERR_OOM, "%s: out of memory", what);
            free(c->architecture);
            c->architecture = a;
        }
    }
    int use_sw = -1; /* Qwen2/3: sliding_window is ignored unless use_sliding_window */
    s          = get_tristate(obj, "use_sliding_window", what, &use_sw, err);
    if (use_sw == 0) c->sliding_window = 0;
    return s;
}

/* The defaults every architecture shares, and the checks between fields. */
static celer_status finish(celer_hf_config *c, const char *what, celer_error *err)
{
    if (!c->num_key_value_heads_given) c->num_key_value_heads = c->num_attention_heads;
    if (c->num_attention_heads && c->num_key_value_heads && c->num_attention_heads % c->num_key_value_heads)
        return celer_fail(err, CELER_ERR_FORMAT,
                          "%s: num_attention_heads %lld is not a multiple of num_key_value_heads %lld", what,
                          (long long)c->num_attention_heads, (long long)c->num_key_value_heads);
    if (!c->head_dim_given && c->num_attention_heads && c->hidden_size) {
        if (c->hidden_size % c->num_attention_heads)
            return celer_fail(err, CELER_ERR_FORMAT,
                              "%s: no head_dim, and hidden_size %lld is not a multiple of num_attention_heads %lld",
                              what, (long long)c->hidden_size, (long long)c->num_attention_heads);
        c->head_dim = c->hidden_size / c->num_attention_heads;
    }
    if (c->n_layer_types && c->num_hidden_layers && c->n_layer_types != (uint64_t)c->num_hidden_layers)
        return celer_fail(err, CELER_ERR_FORMAT, "%s: layer_types has %u entries but num_hidden_layers is %lld",
                          what, c->n_layer_types, (long long)c->num_hidden_layers);
    return CELER_OK;
}

celer_status celer_hf_config_from_json(celer_hf_config *c, const cJSON *root, const char *what,
                                       celer_error *err)
{
    memset(c, 0, sizeof *c);
    c->tie_word_embeddings = c->attention_bias = c->norm_topk_prob = -1;
    if (!cJSON_IsObject(root)) return celer_fail(err, CELER_ERR_FORMAT, "%s: must be a JSON object", what);
    const cJSON *text = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (cJSON_IsNull(text)) text = NULL;
    celer_status s = CELER_OK;
    char         sub[512];
    snprintf(sub, sizeof sub, "%s: text_config", what);
    if (text && !cJSON_IsObject(text)) s = celer_fail(err, CELER_ERR_FORMAT, "%s: must be an object", sub);
    if (s == CELER_OK) s = read_fields(c, root, what, err);
    if (s == CELER_OK && text) {
        c->has_text_config = true;
        s                  = read_fields(c, text, sub, err);
    }
    if (s == CELER_OK) s = read_quantization(root, text, what, &c->quant, err);
    if (s == CELER_OK) s = finish(c, what, err);
    if (s != CELER_OK) celer_hf_config_free(c);
    return s;
}

celer_status celer_hf_config_parse(celer_hf_config *c, const char *text, size_t len, const char *what,
                                   celer_error *err)
{
    cJSON       *root = NULL;
    celer_status s    = celer_json_parse(text, len, what, &root, err);
    if (s == CELER_OK) s = celer_hf_config_from_json(c, root, what, err);
    else memset(c, 0, sizeof *c);
    cJSON_Delete(root);
    return s;
}

celer_status celer_hf_config_load(celer_hf_config *c, const char *dir, celer_error *err)
{
    memset(c, 0, sizeof *c);
    size_t n    = strlen(dir);
    char  *path = malloc(n + sizeof "/config.json");
    if (!path) return celer_fail(err, CELER_ERR_OOM, "config: out of memory");
    snprintf(path, n + sizeof "/config.json", "%s%sconfig.json", dir, n && dir[n - 1] == '/' ? "" : "/");
    cJSON       *root = NULL;
    celer_status s    = celer_json_read_file(path, CONFIG_MAX_SIZE, &root, err);
    if (s == CELER_OK) s = celer_hf_config_from_json(c, root, path, err);
    cJSON_Delete(root);
    free(path);
    return s;
}

void celer_hf_config_free(celer_hf_config *c)
{
    if (!c) return;
    free(c->model_type);
    free(c->architecture);
    free(c->torch_dtype);
    free(c->hidden_act);
    free(c->rope_scaling.type);
    free(c->layer_types);
    celer_hf_ids_free(&c->bos_token_id);
    celer_hf_ids_free(&c->eos_token_id);
    free(c->quant.method);
    for (uint32_t i = 0; i < c->quant.n_overrides; i++) free(c->quant.overrides[i].module);
    free(c->quant.overrides);
    memset(c, 0, sizeof *c);
}
