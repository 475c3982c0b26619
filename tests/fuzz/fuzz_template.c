/* libFuzzer target: parse arbitrary bytes as a chat template and render it with a fixed small
 * conversation (system/user/assistant turns, a tool call, tools, bos/eos, enable_thinking).
 * Any outcome but a crash, a leak, a hang or a sanitizer report is fine: errors are expected. */
#include "chat/template.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char context_json[] =
    "{\"messages\":[{\"role\":\"system\",\"content\":\"sys\"},{\"role\":\"user\",\"content\":\"Hi {{ x }} \\u00e9\"},"
    "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"hmm\",\"tool_calls\":[{\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1,\"b\":[true,null,2.5]}}}]},"
    "{\"role\":\"tool\",\"content\":\"42\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"part\"}]}],"
    "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"description\":\"d\",\"parameters\":{\"type\":\"object\","
    "\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]}}}],\"documents\":null,"
    "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"enable_thinking\":false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 256 * 1024) return 0;
    cJSON          *ctx = cJSON_Parse(context_json);
    celer_error     err = {0};
    celer_template *t   = NULL;
    if (celer_template_parse(&t, (const char *)data, size, "fuzz", &err) == CELER_OK) {
        char  *out = NULL;
        size_t n   = 0;
        if (celer_template_render(t, ctx, &out, &n, &err) == CELER_OK) free(out);
    }
    celer_template_free(t);
    cJSON_Delete(ctx);
    return 0;
}
