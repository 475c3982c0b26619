/* The shapes celer synth knows by name (the published config.json values of each model), the
 * --type table, and the checks a custom shape must pass. */
#include "core/error.h"
#include "models/synth.h"

#include <string.h>
#include <strings.h>

#define LLAMA3_ROPE(f) .rope_factor = (f), .rope_low = 1.0, .rope_high = 4.0, .rope_orig_ctx = 8192

static const celer_synth_shape presets[] = {
    {.name = "smollm2-135m", .title = "SmolLM2 135M (synthetic)", .arch = "llama", .n_layer = 30, .n_embd = 576,
     .n_ff = 1536, .n_head = 9, .n_head_kv = 3, .head_dim = 64, .n_vocab = 49152, .n_ctx = 8192, .rope_theta = 1e5,
     .norm_eps = 1e-5, .tied = true},
    {.name = "llama-3.2-1b", .title = "Llama 3.2 1B (synthetic)", .arch = "llama", .n_layer = 16, .n_embd = 2048,
     .n_ff = 8192, .n_head = 32, .n_head_kv = 8, .head_dim = 64, .n_vocab = 128256, .n_ctx = 131072,
     .rope_theta = 5e5, .norm_eps = 1e-5, .tied = true, LLAMA3_ROPE(32.0)},
    {.name = "llama-3.1-8b", .title = "Llama 3.1 8B (synthetic)", .arch = "llama", .n_layer = 32, .n_embd = 4096,
     .n_ff = 14336, .n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_vocab = 128256, .n_ctx = 131072,
     .rope_theta = 5e5, .norm_eps = 1e-5, LLAMA3_ROPE(8.0)},
    {.name = "qwen2.5-0.5b", .title = "Qwen2.5 0.5B (synthetic)", .arch = "qwen2", .n_layer = 24, .n_embd = 896,
     .n_ff = 4864, .n_head = 14, .n_head_kv = 2, .head_dim = 64, .n_vocab = 151936, .n_ctx = 32768, .rope_theta = 1e6,
     .norm_eps = 1e-6, .tied = true, .qkv_bias = true},
    {.name = "qwen3-0.6b", .title = "Qwen3 0.6B (synthetic)", .arch = "qwen3", .n_layer = 28, .n_embd = 1024,
     .n_ff = 3072, .n_head = 16, .n_head_kv = 8, .head_dim = 128, .n_vocab = 151936, .n_ctx = 40960, .rope_theta = 1e6,
     .norm_eps = 1e-6, .tied = true},
    {.name = "qwen3-8b", .title = "Qwen3 8B (synthetic)", .arch = "qwen3", .n_layer = 36, .n_embd = 4096,
     .n_ff = 12288, .n_head = 32, .n_head_kv = 8, .head_dim = 128, .n_vocab = 151936, .n_ctx = 40960,
     .rope_theta = 1e6, .norm_eps = 1e-6},
    {.name = "qwen3-30b-a3b", .title = "Qwen3 30B A3B (synthetic)", .arch = "qwen3moe", .n_layer = 48,
     .n_embd = 2048, .n_ff = 6144, .n_head = 32, .n_head_kv = 4, .head_dim = 128, .n_vocab = 151936, .n_ctx = 40960,
     .n_expert = 128, .n_expert_used = 8, .n_ff_expert = 768, .rope_theta = 1e6, .norm_eps = 1e-6},
    {.name = "gemma3-270m", .title = "Gemma 3 270M (synthetic)", .arch = "gemma3", .n_layer = 18, .n_embd = 640,
     .n_ff = 2048, .n_head = 4, .n_head_kv = 1, .head_dim = 256, .n_vocab = 262144, .n_ctx = 32768,
     .sliding_window = 512, .rope_theta = 1e6, .norm_eps = 1e-6, .tied = true},
    {.name = "gemma3-1b", .title = "Gemma 3 1B (synthetic)", .arch = "gemma3", .n_layer = 26, .n_embd = 1152,
     .n_ff = 6912, .n_head = 4, .n_head_kv = 1, .head_dim = 256, .n_vocab = 262144, .n_ctx = 32768,
     .sliding_window = 512, .rope_theta = 1e6, .norm_eps = 1e-6, .tied = true},
};

/* Family defaults for custom shapes. */
static const celer_synth_shape families[] = {
    {.arch = "llama", .title = "Llama (synthetic)", .rope_theta = 5e5, .norm_eps = 1e-5},
    {.arch = "qwen2", .title = "Qwen2 (synthetic)", .rope_theta = 1e6, .norm_eps = 1e-6, .qkv_bias = true},
    {.arch = "qwen3", .title = "Qwen3 (synthetic)", .rope_theta = 1e6, .norm_eps = 1e-6},
    {.arch = "qwen3moe", .title = "Qwen3 MoE (synthetic)", .rope_theta = 1e6, .norm_eps = 1e-6},
    {.arch = "gemma3", .title = "Gemma 3 (synthetic)", .rope_theta = 1e6, .norm_eps = 1e-6, .tied = true,
     .sliding_window = 512},
};

/* llama_ftype numbers: F32 0, F16 1, Q4_0 2, Q4_1 3, Q8_0 7, Q5_0 8, Q5_1 9, Q4_K_S 14, Q4_K_M 15,
 * Q5_K_S 16, Q6_K 18, BF16 32. */
static const celer_synth_type types[] = {
    {"F32", CELER_GGML_F32, false, 0},    {"F16", CELER_GGML_F16, false, 1},   {"BF16", CELER_GGML_BF16, false, 32},
    {"Q4_0", CELER_GGML_Q4_0, false, 2},  {"Q4_1", CELER_GGML_Q4_1, false, 3}, {"Q5_0", CELER_GGML_Q5_0, false, 8},
    {"Q5_1", CELER_GGML_Q5_1, false, 9},  {"Q8_0", CELER_GGML_Q8_0, false, 7}, {"Q4_K", CELER_GGML_Q4_K, false, 14},
    {"Q5_K", CELER_GGML_Q5_K, false, 16}, {"Q6_K", CELER_GGML_Q6_K, false, 18}, {"Q4_K_M", CELER_GGML_Q4_K, true, 15},
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

const celer_synth_shape *celer_synth_preset_at(size_t i) { return i < COUNT(presets) ? &presets[i] : NULL; }

const celer_synth_shape *celer_synth_preset_find(const char *name)
{
    for (size_t i = 0; i < COUNT(presets); i++)
        if (!strcmp(presets[i].name, name)) return &presets[i];
    return NULL;
}

const celer_synth_type *celer_synth_type_find(const char *name)
{
    for (size_t i = 0; i < COUNT(types); i++)
        if (!strcasecmp(types[i].name, name)) return &types[i];
    return NULL;
}

const char *celer_synth_arch_names(void) { return "llama, qwen2, qwen3, qwen3moe, gemma3"; }
const char *celer_synth_type_names(void) { return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, Q4_K_M"; }
const char *celer_synth_preset_names(void)
{
    return "smollm2-135m, llama-3.2-1b, llama-3.1-8b, qwen2.5-0.5b, qwen3-0.6b, qwen3-8b, qwen3-30b-a3b, "
           "gemma3-270m, gemma3-1b";
}

bool celer_synth_shape_defaults(celer_synth_shape *s, const char *arch)
{
    for (size_t i = 0; i < COUNT(families); i++)
        if (!strcmp(families[i].arch, arch)) {
            *s         = families[i];
            s->n_vocab = 32000;
            s->n_ctx   = 4096;
            return true;
        }
    return false;
}

static bool in(int64_t v, int64_t lo, int64_t hi) { return v >= lo && v <= hi; }

celer_status celer_synth_shape_check(const celer_synth_shape *s, celer_error *err)
{
    const char *what = s->name ? s->name : "custom shape";
    bool        moe  = !strcmp(s->arch, "qwen3moe");
    if (!in(s->n_layer, 1, 1024) || !in(s->n_embd, 1, 65536) || !in(s->n_ff, 1, 1 << 20) ||
        !in(s->n_head, 1, 1024) || !in(s->n_head_kv, 1, 1024) || !in(s->head_dim, 2, 1024) ||
        !in(s->n_vocab, 259, 1 << 22) || !in(s->n_ctx, 1, 1 << 24))
        return celer_fail(err, CELER_ERR_INVALID,
                          "synth: %s: layers %lld, embd %lld, ff %lld, heads %lld/%lld, head-dim %lld, vocab %lld, ctx "
                          "%lld out of range (layers 1-1024, embd 1-65536, ff 1-1048576, heads 1-1024, head-dim "
                          "2-1024, vocab 259-4194304 (3 specials and 256 byte tokens at least), ctx 1-16777216)",
                          what, (long long)s->n_layer, (long long)s->n_embd, (long long)s->n_ff, (long long)s->n_head,
                          (long long)s->n_head_kv, (long long)s->head_dim, (long long)s->n_vocab, (long long)s->n_ctx);
    if (s->n_head % s->n_head_kv)
        return celer_fail(err, CELER_ERR_INVALID, "synth: %s: %lld heads are not a multiple of %lld kv heads", what,
                          (long long)s->n_head, (long long)s->n_head_kv);
    if (s->head_dim % 2)
        return celer_fail(err, CELER_ERR_INVALID, "synth: %s: head size %lld is odd; RoPE rotates pairs", what,
                          (long long)s->head_dim);
    if (moe && (!in(s->n_expert, 1, 1024) || !in(s->n_expert_used, 1, s->n_expert) || !in(s->n_ff_expert, 1, 1 << 20)))
        return celer_fail(err, CELER_ERR_INVALID,
                          "synth: %s: qwen3moe needs --experts E (1-1024), --experts-used U (1-E) and --expert-ff FE "
                          "(1-1048576); got %lld, %lld, %lld", what, (long long)s->n_expert,
                          (long long)s->n_expert_used, (long long)s->n_ff_expert);
    if (!moe && (s->n_expert || s->n_expert_used || s->n_ff_expert))
        return celer_fail(err, CELER_ERR_INVALID,
                          "synth: %s: experts are for --arch qwen3moe; %s is a dense architecture", what, s->arch);
    return CELER_OK;
}

/* llama.cpp's choice of layers that get more bits in the Q4_K_M mix. */
static bool more_bits(int64_t i, int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

celer_ggml_type celer_synth_matrix_type(const celer_synth_shape *s, const celer_synth_type *t, const char *name,
                                        int64_t layer, uint64_t row)
{
    celer_ggml_type ty = t->base;
    if (t->k_m) {
        if (!strcmp(name, "output.weight") || (s->tied && !strcmp(name, "token_embd.weight")))
            ty = CELER_GGML_Q6_K;
        else if (layer >= 0 && (ends_with(name, ".attn_v.weight") || ends_with(name, ".ffn_down.weight") ||
                                ends_with(name, ".ffn_down_exps.weight")))
            ty = more_bits(layer, s->n_layer) ? CELER_GGML_Q6_K : CELER_GGML_Q4_K;
    }
    const celer_ggml_type_info *ti = celer_ggml_type_get(ty);
    if (row % ti->block_elems == 0) return ty;
    switch (ty) {
    case CELER_GGML_Q4_K: ty = CELER_GGML_Q5_0; break;
    case CELER_GGML_Q5_K: ty = CELER_GGML_Q5_1; break;
    case CELER_GGML_Q6_K: ty = CELER_GGML_Q8_0; break;
    default: return CELER_GGML_F16;
    }
    return row % celer_ggml_type_get(ty)->block_elems == 0 ? ty : CELER_GGML_F16;
}
