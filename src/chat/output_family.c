/* The family table of chat output markers, picking a family from explicit metadata, call ids. */
#include "chat/output.h"
#include "core/error.h"

#include <string.h>

#define THINK "<think>", "</think>"

static const celer_chat_family_info families[CELER_CHAT_FAMILY_COUNT] = {
    [CELER_CHAT_FAMILY_PLAIN] = {.name = "plain"},
    [CELER_CHAT_FAMILY_QWEN] = {.name = "qwen", .think_open = "<think>", .think_close = "</think>",
                                .call_open = "<tool_call>", .call_close = "</tool_call>",
                                .tools = CELER_CHAT_TOOLS_JSON, .signature = {"<tool_call>", "</think>"}},
    [CELER_CHAT_FAMILY_DEEPSEEK] = {.name = "deepseek", .think_open = "<think>", .think_close = "</think>",
                                    .call_open = "<｜tool▁calls▁begin｜>", .call_close = "<｜tool▁calls▁end｜>",
                                    .tools = CELER_CHAT_TOOLS_DEEPSEEK, .signature = {"<｜tool▁calls▁begin｜>"}},
    [CELER_CHAT_FAMILY_LLAMA3] = {.name = "llama3", .call_open = "<|python_tag|>", .tools = CELER_CHAT_TOOLS_JSON,
                                  .bare_json = true, .signature = {"<|start_header_id|>"}},
    [CELER_CHAT_FAMILY_MISTRAL] = {.name = "mistral", .call_open = "[TOOL_CALLS]", .tools = CELER_CHAT_TOOLS_JSON,
                                   .name_args = true, .short_ids = true, .signature = {"[TOOL_CALLS]"}},
    [CELER_CHAT_FAMILY_GRANITE] = {.name = "granite", .think_open = "<think>", .think_close = "</think>",
                                   .content_open = "<response>", .content_close = "</response>",
                                   .call_open = "<|tool_call|>", .tools = CELER_CHAT_TOOLS_JSON,
                                   .signature = {"<|tool_call|>", "<|start_of_role|>"}},
    [CELER_CHAT_FAMILY_GLM] = {.name = "glm", .think_open = "<think>", .think_close = "</think>",
                               .call_open = "<tool_call>", .call_close = "</tool_call>",
                               .tools = CELER_CHAT_TOOLS_GLM, .signature = {"<arg_key>"}},
    [CELER_CHAT_FAMILY_COMMAND_R] = {.name = "command-r", .think_open = "<|START_THINKING|>",
                                     .think_close = "<|END_THINKING|>", .content_open = "<|START_RESPONSE|>",
                                     .content_close = "<|END_RESPONSE|>", .call_open = "<|START_ACTION|>",
                                     .call_close = "<|END_ACTION|>", .tools = CELER_CHAT_TOOLS_JSON,
                                     .signature = {"<|START_THINKING|>", "<|START_ACTION|>"}},
    [CELER_CHAT_FAMILY_HARMONY] = {.name = "harmony", .tools = CELER_CHAT_TOOLS_HARMONY,
                                   .signature = {"<|channel|>"}},
};

/* Template signatures are tried in this order: specific protocols before the generic ones they
 * contain (GLM and granite templates also mention <think>; Hermes-on-Llama uses <tool_call>). */
static const celer_chat_family pick_order[] = {
    CELER_CHAT_FAMILY_HARMONY, CELER_CHAT_FAMILY_COMMAND_R, CELER_CHAT_FAMILY_GRANITE, CELER_CHAT_FAMILY_GLM,
    CELER_CHAT_FAMILY_DEEPSEEK, CELER_CHAT_FAMILY_MISTRAL,  CELER_CHAT_FAMILY_QWEN,    CELER_CHAT_FAMILY_LLAMA3,
};

/* Architectures whose output protocol is unambiguous ("llama" is not: Mistral and SmolLM use it). */
static const struct {
    const char       *arch;
    celer_chat_family family;
} arch_families[] = {
    {"gpt-oss", CELER_CHAT_FAMILY_HARMONY},   {"gpt_oss", CELER_CHAT_FAMILY_HARMONY},
    {"qwen2", CELER_CHAT_FAMILY_QWEN},        {"qwen2_moe", CELER_CHAT_FAMILY_QWEN},
    {"qwen2moe", CELER_CHAT_FAMILY_QWEN},     {"qwen3", CELER_CHAT_FAMILY_QWEN},
    {"qwen3moe", CELER_CHAT_FAMILY_QWEN},     {"qwen3_moe", CELER_CHAT_FAMILY_QWEN},
    {"smollm3", CELER_CHAT_FAMILY_QWEN},      {"deepseek2", CELER_CHAT_FAMILY_DEEPSEEK},
    {"deepseek_v3", CELER_CHAT_FAMILY_DEEPSEEK}, {"glm4moe", CELER_CHAT_FAMILY_GLM},
    {"glm4_moe", CELER_CHAT_FAMILY_GLM},      {"granite", CELER_CHAT_FAMILY_GRANITE},
    {"granitemoe", CELER_CHAT_FAMILY_GRANITE}, {"cohere2", CELER_CHAT_FAMILY_COMMAND_R},
};

const celer_chat_family_info *celer_chat_family_get(celer_chat_family f)
{
    if ((unsigned)f >= CELER_CHAT_FAMILY_COUNT) f = CELER_CHAT_FAMILY_PLAIN;
    return &families[f];
}

celer_status celer_chat_family_from_name(const char *name, celer_chat_family *out, celer_error *err)
{
    for (int f = 0; name && f < CELER_CHAT_FAMILY_COUNT; f++)
        if (strcmp(name, families[f].name) == 0) return *out = (celer_chat_family)f, CELER_OK;
    return celer_fail(err, CELER_ERR_INVALID,
                      "chat output: unknown family '%s'; use one of plain, qwen, deepseek, llama3, mistral, "
                      "granite, glm, command-r, harmony",
                      name ? name : "(null)");
}

celer_chat_family celer_chat_family_pick(const char *arch, const char *template_src)
{
    if (template_src)
        for (size_t i = 0; i < sizeof pick_order / sizeof pick_order[0]; i++)
            for (int s = 0; s < 2; s++) {
                const char *sig = families[pick_order[i]].signature[s];
                if (sig && strstr(template_src, sig)) return pick_order[i];
            }
    if (arch)
        for (size_t i = 0; i < sizeof arch_families / sizeof arch_families[0]; i++)
            if (strcmp(arch, arch_families[i].arch) == 0) return arch_families[i].family;
    return CELER_CHAT_FAMILY_PLAIN;
}

bool celer_chat_prompt_opens_reasoning(celer_chat_family f, const char *prompt, size_t n)
{
    const char *open = celer_chat_family_get(f)->think_open;
    if (!open || !prompt) return false;
    while (n > 0 && (prompt[n - 1] == ' ' || prompt[n - 1] == '\n' || prompt[n - 1] == '\r' || prompt[n - 1] == '\t'))
        n--;
    size_t k = strlen(open);
    return n >= k && memcmp(prompt + n - k, open, k) == 0;
}

/* splitmix64: a fixed bijection, so ids depend only on (seed, index). */
static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

void celer_chat_call_id(uint64_t seed, int32_t index, bool short_id, char out[24])
{
    static const char digits[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    uint64_t h = mix(mix(seed) ^ (uint64_t)(uint32_t)index);
    size_t   o = 0;
    if (!short_id) memcpy(out, "call_", 5), o = 5;
    for (int i = 0; i < 9; i++, h /= 62) out[o++] = digits[h % 62];
    out[o] = '\0';
}
