/* The architectures celer runs, and what sets each apart. GGUF converters store the Q/K rows of
 * llama-family models permuted for interleaved ("normal") RoPE; the others keep the neox
 * (rotate-half) layout. Gemma's norm weights are stored with the +1 already added. */
#include "models/model.h"

#include <string.h>

static const celer_arch archs[] = {
    {.name = "llama", .rope = CELER_ROPE_NORM, .act = CELER_ACT_SILU},
    {.name = "qwen2", .rope = CELER_ROPE_NEOX, .act = CELER_ACT_SILU},
    {.name = "qwen3", .rope = CELER_ROPE_NEOX, .act = CELER_ACT_SILU, .qk_norm = true},
    {.name = "gemma3", .rope = CELER_ROPE_NEOX, .act = CELER_ACT_GELU_TANH, .qk_norm = true, .sandwich_norm = true,
     .embd_scale = true, .swa_period = 6, .swa_rope_base = 10000.0f},
};

const celer_arch *celer_arch_find(const char *name)
{
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++)
        if (!strcmp(archs[i].name, name)) return &archs[i];
    return NULL;
}

const char *celer_arch_names(void) { return "llama, qwen2, qwen3, gemma3"; }
