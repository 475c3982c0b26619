/* The architectures celer runs, and what sets each apart. GGUF converters store the Q/K rows of
 * llama-family models permuted for interleaved ("normal") RoPE; the others keep the neox
 * (rotate-half) layout. Gemma's norm weights are stored with the +1 already added. Qwen3-MoE renormalizes
 * its kept experts' router weights (llama.cpp's converter has no key for it; config.json's
 * norm_topk_prob overrides), Qwen2-MoE does not. */
#include "models/model.h"

#include "core/error.h"

#include <stdlib.h>
#include <string.h>

static const celer_arch archs[] = {
    {.name = "llama", .rope = CELER_ROPE_NORM, .act = CELER_ACT_SILU},
    {.name = "qwen2", .rope = CELER_ROPE_NEOX, .act = CELER_ACT_SILU},
    {.name = "qwen3", .rope = CELER_ROPE_NEOX, .act = CELER_ACT_SILU, .qk_norm = true},
    {.name = "qwen3moe", .rope = CELER_ROPE_NEOX, .act = CELER_ACT_SILU, .qk_norm = true, .moe = true,
     .moe_renorm = true},
    {.name = "qwen2moe", .rope = CELER_ROPE_NEOX, .act = CELER_ACT_SILU, .moe = true},
    {.name = "gemma3", .rope = CELER_ROPE_NEOX, .act = CELER_ACT_GELU_TANH, .qk_norm = true, .sandwich_norm = true,
     .embd_scale = true, .swa_period = 6, .swa_rope_base = 10000.0f},
};

const celer_arch *celer_arch_find(const char *name)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i].name, name)) return &archs[i];
    return NULL;
}

const char *celer_arch_names(void) { return "llama, qwen2, qwen3, qwen3moe, qwen2moe, gemma3"; }

celer_status celer_model_init_moe(celer_model *m, const char *what, celer_error *err)
{
    const celer_hparams *hp = &m->hp;
    if (!m->arch->moe) return CELER_OK;
    if (hp->n_expert <= 0 || hp->n_expert_used <= 0 || hp->n_ff_expert <= 0 || hp->n_expert > CELER_MAX_EXPERTS)
        return celer_fail(err, CELER_ERR_FORMAT, "model: %s: a %s model needs its expert count (1-%d), experts used "
                          "per token and expert width; the file gives %lld, %lld and %lld", what, m->arch->name,
                          CELER_MAX_EXPERTS, (long long)hp->n_expert, (long long)hp->n_expert_used,
                          (long long)hp->n_ff_expert);
    m->experts = calloc((size_t)hp->n_layer * 3 * (size_t)hp->n_expert, sizeof *m->experts);
    if (!m->experts) return celer_fail(err, CELER_ERR_OOM, "model: out of memory");
    return CELER_OK;
}
