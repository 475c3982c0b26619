/* libFuzzer target: the same bytes read as config.json, generation_config.json and
 * tokenizer_config.json, then the lookups the model loader makes. A failure must leave the
 * struct zeroed and say why. */
#include "formats/hf_config.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_failed(celer_status s, const celer_error *err)
{
    if (s != CELER_OK && (err->code != s || !err->msg[0])) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char     *text = (const char *)data;
    celer_error     err  = {0};
    celer_hf_config c;
    celer_status    s = celer_hf_config_parse(&c, text, size, "config.json", &err);
    check_failed(s, &err);
    if (s == CELER_OK) {
        for (uint32_t i = 0; i < c.quant.n_overrides; i++) {
            celer_hf_quant q = celer_hf_config_quant(&c, c.quant.overrides[i].module);
            if (q.quantized != c.quant.overrides[i].quant.quantized) __builtin_trap();
        }
        celer_hf_quant q = celer_hf_config_quant(&c, "model.layers.0.self_attn.q_proj");
        if (q.quantized && (q.bits < 2 || q.bits > 8 || q.group_size < 16 || q.group_size > 128)) __builtin_trap();
        if (c.n_layer_types && !c.layer_types) __builtin_trap();
        (void)celer_hf_ids_has(&c.eos_token_id, 1);
    } else if (c.model_type || c.quant.overrides || c.layer_types)
        __builtin_trap();
    celer_hf_config_free(&c);

    celer_hf_generation_config g;
    s = celer_hf_generation_config_parse(&g, text, size, "generation_config.json", &err);
    check_failed(s, &err);
    if (s == CELER_OK && g.top_p > 1) __builtin_trap();
    celer_hf_generation_config_free(&g);

    celer_hf_tokenizer_config t;
    s = celer_hf_tokenizer_config_parse(&t, text, size, "tokenizer_config.json", &err);
    check_failed(s, &err);
    if (s == CELER_OK) {
        for (uint32_t i = 0; i < t.n_templates; i++)
            if (celer_hf_tokenizer_config_template(&t, t.templates[i].name) != t.templates[i].text) __builtin_trap();
        (void)celer_hf_tokenizer_config_template(&t, NULL);
    }
    celer_hf_tokenizer_config_free(&t);
    return 0;
}
