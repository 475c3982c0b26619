/* config.json, generation_config.json and tokenizer_config.json readers: real-looking files
 * from SmolLM2, Qwen2.5, Gemma 3 and MLX 4-bit checkpoints, template precedence, and bad files. */
#include "core/error.h"
#include "formats/hf_config.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "check_err.h"
#include "scratch.h"

static char root[64];

static const char *path_in(const char *sub, const char *name)
{
    static char buf[4][512];
    static int  k;
    char       *p = buf[k++ % 4];
    snprintf(p, 512, "%s/%s%s%s", root, sub, name ? "/" : "", name ? name : "");
    return p;
}

static int write_text(const char *sub, const char *name, const char *text)
{
    FILE *f = fopen(path_in(sub, name), "wb");
    if (!f) return 1;
    size_t n = strlen(text), w = fwrite(text, 1, n, f);
    return fclose(f) != 0 || w != n;
}

static celer_status cfg(celer_hf_config *c, const char *text, celer_error *err)
{
    return celer_hf_config_parse(c, text, strlen(text), "config.json", err);
}

/* ---- configs as published (trimmed of fields celer does not read) ---------------------------- */

static const char smollm2[] =
    "{\"architectures\": [\"LlamaForCausalLM\"], \"attention_bias\": false, \"attention_dropout\": 0.0,"
    " \"bos_token_id\": 1, \"eos_token_id\": 2, \"hidden_act\": \"silu\", \"hidden_size\": 576,"
    " \"initializer_range\": 0.041666666666666664, \"intermediate_size\": 1536, \"is_llama_config\": true,"
    " \"max_position_embeddings\": 8192, \"mlp_bias\": false, \"model_type\": \"llama\","
    " \"num_attention_heads\": 9, \"num_hidden_layers\": 30, \"num_key_value_heads\": 3, \"pad_token_id\": 2,"
    " \"pretraining_tp\": 1, \"rms_norm_eps\": 1e-05, \"rope_interleaved\": false, \"rope_scaling\": null,"
    " \"rope_theta\": 100000, \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"transformers_version\": \"4.42.3\", \"transformers.js_config\": {\"kv_cache_dtype\": {\"q4f16\": "
    "\"float16\", \"fp16\": \"float16\"}}, \"use_cache\": true, \"vocab_size\": 49152}";

static const char qwen25[] =
    "{\"architectures\": [\"Qwen2ForCausalLM\"], \"attention_dropout\": 0.0, \"bos_token_id\": 151643,"
    " \"eos_token_id\": 151645, \"hidden_act\": \"silu\", \"hidden_size\": 896, \"initializer_range\": 0.02,"
    " \"intermediate_size\": 4864, \"max_position_embeddings\": 32768, \"max_window_layers\": 21,"
    " \"model_type\": \"qwen2\", \"num_attention_heads\": 14, \"num_hidden_layers\": 24,"
    " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06, \"rope_theta\": 1000000.0, \"sliding_window\": 32768,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.43.1\","
    " \"use_cache\": true, \"use_sliding_window\": false, \"vocab_size\": 151936}";

static const char gemma3_4b[] =
    "{\"architectures\": [\"Gemma3ForConditionalGeneration\"], \"boi_token_index\": 255999,"
    " \"eoi_token_index\": 256000, \"eos_token_id\": [1, 106], \"image_token_index\": 262144,"
    " \"initializer_range\": 0.02, \"mm_tokens_per_image\": 256, \"model_type\": \"gemma3\","
    " \"text_config\": {\"hidden_size\": 2560, \"intermediate_size\": 10240, \"model_type\": \"gemma3_text\","
    " \"num_hidden_layers\": 34, \"rope_scaling\": {\"factor\": 8.0, \"rope_type\": \"linear\"},"
    " \"sliding_window\": 1024}, \"torch_dtype\": \"bfloat16\", \"transformers_version\": \"4.50.0.dev0\","
    " \"vision_config\": {\"hidden_size\": 1152, \"image_size\": 896, \"intermediate_size\": 4304,"
    " \"model_type\": \"siglip_vision_model\", \"num_attention_heads\": 16, \"num_hidden_layers\": 27,"
    " \"patch_size\": 14, \"vision_use_head\": false}}";

#define SW "\"sliding_attention\", "
static const char gemma3_270m[] =
    "{\"_sliding_window_pattern\": 6, \"architectures\": [\"Gemma3ForCausalLM\"], \"attention_bias\": false,"
    " \"attn_logit_softcapping\": null, \"bos_token_id\": 2, \"eos_token_id\": 1, \"final_logit_softcapping\": null,"
    " \"head_dim\": 256, \"hidden_activation\": \"gelu_pytorch_tanh\", \"hidden_size\": 640,"
    " \"intermediate_size\": 2048, \"layer_types\": [" SW SW SW SW SW "\"full_attention\", " SW SW SW SW SW
    "\"full_attention\", " SW SW SW SW SW "\"full_attention\"], \"max_position_embeddings\": 32768,"
    " \"model_type\": \"gemma3_text\", \"num_attention_heads\": 4, \"num_hidden_layers\": 18,"
    " \"num_key_value_heads\": 1, \"pad_token_id\": 0, \"query_pre_attn_scalar\": 256, \"rms_norm_eps\": 1e-06,"
    " \"rope_local_base_freq\": 10000.0, \"rope_scaling\": null, \"rope_theta\": 1000000.0,"
    " \"sliding_window\": 512, \"torch_dtype\": \"bfloat16\", \"use_bidirectional_attention\": false,"
    " \"vocab_size\": 262144}";

#define MLXQ                                                                                                 \
    "{\"group_size\": 64, \"bits\": 4, \"model.layers.0.mlp.gate\": {\"group_size\": 64, \"bits\": 8},"       \
    " \"model.layers.1.mlp.gate\": {\"bits\": 8}, \"model.layers.2.mlp.switch_mlp.up_proj\": {\"group_size\": " \
    "32, \"bits\": 4, \"mode\": \"mxfp4\"}, \"lm_head\": false, \"model.embed_tokens\": true}"
static const char mlx_moe[] =
    "{\"architectures\": [\"Qwen3MoeForCausalLM\"], \"attention_bias\": false, \"bos_token_id\": 151643,"
    " \"decoder_sparse_step\": 1, \"eos_token_id\": 151645, \"head_dim\": 128, \"hidden_act\": \"silu\","
    " \"hidden_size\": 2048, \"intermediate_size\": 6144, \"max_position_embeddings\": 40960,"
    " \"model_type\": \"qwen3_moe\", \"moe_intermediate_size\": 768, \"norm_topk_prob\": true,"
    " \"num_attention_heads\": 32, \"num_experts\": 128, \"num_experts_per_tok\": 8, \"num_hidden_layers\": 48,"
    " \"num_key_value_heads\": 4, \"quantization\": " MLXQ ", \"quantization_config\": " MLXQ ","
    " \"rms_norm_eps\": 1e-06, \"rope_scaling\": null, \"rope_theta\": 1000000.0, \"sliding_window\": null,"
    " \"tie_word_embeddings\": false, \"torch_dtype\": \"bfloat16\", \"use_sliding_window\": false,"
    " \"vocab_size\": 151936}";

static int test_configs(void)
{
    celer_error     err = {0};
    celer_hf_config c   = {0};
    CHECK(cfg(&c, smollm2, &err) == CELER_OK);
    CHECK(STREQ(c.model_type, "llama") && STREQ(c.architecture, "LlamaForCausalLM") && !c.has_text_config);
    CHECK(c.hidden_size == 576 && c.num_hidden_layers == 30 && c.num_attention_heads == 9);
    CHECK(c.num_key_value_heads == 3 && c.head_dim == 64 && !c.head_dim_given && c.intermediate_size == 1536);
    CHECK(c.vocab_size == 49152 && c.max_position_embeddings == 8192 && c.rms_norm_eps == 1e-5);
    CHECK(c.rope_theta == 100000 && !c.rope_scaling.present && c.tie_word_embeddings == 1 && c.attention_bias == 0);
    CHECK(c.norm_topk_prob == -1 && STREQ(c.torch_dtype, "bfloat16") && STREQ(c.hidden_act, "silu"));
    CHECK(c.bos_token_id.n == 1 && c.bos_token_id.ids[0] == 1 && celer_hf_ids_has(&c.eos_token_id, 2));
    CHECK(!c.quant.present && !celer_hf_config_quant(&c, "lm_head").quantized);
    celer_hf_config_free(&c);
    celer_hf_config_free(&c);
    celer_hf_config_free(NULL);

    CHECK(cfg(&c, qwen25, &err) == CELER_OK);
    CHECK(STREQ(c.model_type, "qwen2") && c.num_attention_heads == 14 && c.num_key_value_heads == 2);
    CHECK(c.head_dim == 64 && c.sliding_window == 0 && c.attention_bias == -1 && c.rope_theta == 1e6);
    celer_hf_config_free(&c);

    CHECK(cfg(&c, gemma3_4b, &err) == CELER_OK);
    CHECK(c.has_text_config && STREQ(c.model_type, "gemma3_text"));
    CHECK(STREQ(c.architecture, "Gemma3ForConditionalGeneration") && STREQ(c.torch_dtype, "bfloat16"));
    CHECK(c.hidden_size == 2560 && c.num_hidden_layers == 34 && c.sliding_window == 1024);
    CHECK(c.num_attention_heads == 0 && c.head_dim == 0 && !c.head_dim_given); /* Gemma 3 defaults: models/ */
    CHECK(c.rope_scaling.present && STREQ(c.rope_scaling.type, "linear") && c.rope_scaling.factor == 8.0);
    CHECK(c.eos_token_id.n == 2 && c.eos_token_id.ids[1] == 106);
    celer_hf_config_free(&c);

    CHECK(cfg(&c, gemma3_270m, &err) == CELER_OK);
    CHECK(c.head_dim == 256 && c.head_dim_given && c.num_key_value_heads == 1 && c.sliding_window == 512);
    CHECK(c.sliding_window_pattern == 6 && c.n_layer_types == 18 && c.layer_types[5] == CELER_HF_LAYER_FULL);
    CHECK(c.layer_types[0] == CELER_HF_LAYER_SLIDING && c.rope_local_base_freq == 10000.0);
    CHECK(c.query_pre_attn_scalar == 256 && c.final_logit_softcapping == 0 && STREQ(c.hidden_act, "gelu_pytorch_tanh"));
    celer_hf_config_free(&c);

    CHECK(cfg(&c, mlx_moe, &err) == CELER_OK);
    CHECK(c.num_experts == 128 && c.num_experts_per_tok == 8 && c.moe_intermediate_size == 768);
    CHECK(c.norm_topk_prob == 1 && c.tie_word_embeddings == 0 && c.head_dim == 128 && c.head_dim_given);
    CHECK(c.quant.present && !c.quant.method && c.quant.n_overrides == 5);
    celer_hf_quant q = celer_hf_config_quant(&c, "model.layers.5.self_attn.q_proj");
    CHECK(q.quantized && q.mode == CELER_HF_QUANT_AFFINE && q.bits == 4 && q.group_size == 64);
    q = celer_hf_config_quant(&c, "model.layers.0.mlp.gate");
    CHECK(q.quantized && q.bits == 8 && q.group_size == 64);
    q = celer_hf_config_quant(&c, "model.layers.1.mlp.gate"); /* group from affine's default */
    CHECK(q.quantized && q.bits == 8 && q.group_size == 64);
    q = celer_hf_config_quant(&c, "model.layers.2.mlp.switch_mlp.up_proj");
    CHECK(q.quantized && q.mode == CELER_HF_QUANT_MXFP4 && q.bits == 4 && q.group_size == 32);
    CHECK(!celer_hf_config_quant(&c, "lm_head").quantized);
    CHECK(celer_hf_config_quant(&c, "model.embed_tokens").bits == 4);
    CHECK(STREQ(celer_hf_quant_mode_name(CELER_HF_QUANT_NVFP4), "nvfp4"));
    celer_hf_config_free(&c);

    /* mxfp4 for the whole model; an override with no mode is affine with affine's defaults */
    CHECK(cfg(&c, "{\"quantization_config\": {\"group_size\": 32, \"bits\": 4, \"mode\": \"mxfp4\","
                  " \"model.layers.0.mlp.gate\": {\"bits\": 8}}}", &err) == CELER_OK);
    CHECK(c.quant.def.mode == CELER_HF_QUANT_MXFP4 && c.quant.def.group_size == 32);
    q = celer_hf_config_quant(&c, "model.layers.0.mlp.gate");
    CHECK(q.mode == CELER_HF_QUANT_AFFINE && q.bits == 8 && q.group_size == 64);
    celer_hf_config_free(&c);
    CHECK(cfg(&c, "{\"quantization\": {\"mode\": \"nvfp4\"}}", &err) == CELER_OK);
    CHECK(c.quant.def.bits == 4 && c.quant.def.group_size == 16);
    celer_hf_config_free(&c);
    /* another quantizer's block: only the method */
    CHECK(cfg(&c, "{\"quantization_config\": {\"quant_method\": \"gptq\", \"bits\": 7, \"desc_act\": false}}", &err) ==
          CELER_OK);
    CHECK(c.quant.present && STREQ(c.quant.method, "gptq") && !celer_hf_config_quant(&c, "x").quantized);
    celer_hf_config_free(&c);
    /* transformers 5: rope_parameters, one per layer type for Gemma 3 */
    CHECK(cfg(&c, "{\"rope_parameters\": {\"full_attention\": {\"rope_theta\": 1000000.0, \"rope_type\": \"linear\","
                  " \"factor\": 8.0}, \"sliding_attention\": {\"rope_theta\": 10000.0, \"rope_type\": \"default\"}},"
                  " \"dtype\": \"bfloat16\"}", &err) == CELER_OK);
    CHECK(c.rope_theta == 1e6 && c.rope_local_base_freq == 1e4 && STREQ(c.rope_scaling.type, "linear"));
    CHECK(STREQ(c.torch_dtype, "bfloat16"));
    celer_hf_config_free(&c);
    CHECK(cfg(&c, "{\"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"llama3\", \"factor\": 32.0,"
                  " \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0,"
                  " \"original_max_position_embeddings\": 8192}}", &err) == CELER_OK);
    CHECK(c.rope_theta == 5e5 && STREQ(c.rope_scaling.type, "llama3") && c.rope_scaling.high_freq_factor == 4.0);
    CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
    celer_hf_config_free(&c);
    return 0;
}

static int test_config_bad(void)
{
    celer_error     err = {0};
    celer_hf_config c   = {0};
    CHECK_ERR(cfg(&c, "{\"quantization\": {\"group_size\": 64, \"bits\": 7}}", &err), CELER_ERR_FORMAT,
              "config.json: quantization: 'bits' is 7");
    CHECK(c.quant.present == false && c.model_type == NULL); /* zeroed after failure */
    CHECK_ERR(cfg(&c, "{\"quantization\": {\"group_size\": \"64\", \"bits\": 4}}", &err), CELER_ERR_FORMAT,
              "config.json: quantization: 'group_size' must be an integer");
    CHECK_ERR(cfg(&c, "{\"quantization\": {\"group_size\": 48, \"bits\": 4}}", &err), CELER_ERR_FORMAT,
              "'group_size' is 48");
    CHECK_ERR(cfg(&c, "{\"quantization\": {\"mode\": \"fp3\"}}", &err), CELER_ERR_FORMAT, "'mode' is 'fp3'");
    CHECK_ERR(cfg(&c, "{\"quantization\": {\"mode\": \"mxfp4\", \"group_size\": 64}}", &err), CELER_ERR_FORMAT,
              "mxfp4 has group_size 32 and bits 4, not 64 and 4");
    CHECK_ERR(cfg(&c, "{\"quantization\": {\"bits\": 4, \"model.layers.0.mlp.gate\": {\"bits\": 9}}}", &err),
              CELER_ERR_FORMAT, "quantization['model.layers.0.mlp.gate']: 'bits' is 9");
    CHECK_ERR(cfg(&c, "{\"quantization\": 4}", &err), CELER_ERR_FORMAT, "quantization: must be an object");
    CHECK_ERR(cfg(&c, "{\"hidden_size\": 576,, }", &err), CELER_ERR_FORMAT, "config.json: malformed JSON near byte 2");
    CHECK_ERR(cfg(&c, "[]", &err), CELER_ERR_FORMAT, "must be a JSON object");
    CHECK_ERR(cfg(&c, "{\"hidden_size\": \"576\"}", &err), CELER_ERR_FORMAT, "'hidden_size' must be an integer");
    CHECK_ERR(cfg(&c, "{\"hidden_size\": 576.5}", &err), CELER_ERR_FORMAT, "'hidden_size'");
    CHECK_ERR(cfg(&c, "{\"rms_norm_eps\": \"1e-5\"}", &err), CELER_ERR_FORMAT, "'rms_norm_eps'");
    CHECK_ERR(cfg(&c, "{\"rms_norm_eps\": -1}", &err), CELER_ERR_FORMAT, "'rms_norm_eps' is -1");
    CHECK_ERR(cfg(&c, "{\"model_type\": 3}", &err), CELER_ERR_FORMAT, "'model_type' must be a string");
    CHECK_ERR(cfg(&c, "{\"tie_word_embeddings\": 1}", &err), CELER_ERR_FORMAT, "'tie_word_embeddings'");
    CHECK_ERR(cfg(&c, "{\"eos_token_id\": \"</s>\"}", &err), CELER_ERR_FORMAT, "'eos_token_id'");
    CHECK_ERR(cfg(&c, "{\"eos_token_id\": [1, -2]}", &err), CELER_ERR_FORMAT, "'eos_token_id'");
    CHECK_ERR(cfg(&c, "{\"architectures\": \"LlamaForCausalLM\"}", &err), CELER_ERR_FORMAT, "'architectures'");
    CHECK_ERR(cfg(&c, "{\"architectures\": [7]}", &err), CELER_ERR_FORMAT, "'architectures'");
    CHECK_ERR(cfg(&c, "{\"num_hidden_layers\": 2, \"layer_types\": [\"full_attention\"]}", &err), CELER_ERR_FORMAT,
              "layer_types has 1 entries but num_hidden_layers is 2");
    CHECK_ERR(cfg(&c, "{\"layer_types\": [1]}", &err), CELER_ERR_FORMAT, "layer_types[0]");
    CHECK_ERR(cfg(&c, "{\"num_attention_heads\": 14, \"num_key_value_heads\": 3}", &err), CELER_ERR_FORMAT,
              "not a multiple of num_key_value_heads 3");
    CHECK_ERR(cfg(&c, "{\"num_attention_heads\": 7, \"hidden_size\": 576}", &err), CELER_ERR_FORMAT,
              "no head_dim, and hidden_size 576");
    CHECK_ERR(cfg(&c, "{\"text_config\": 5}", &err), CELER_ERR_FORMAT, "config.json: text_config: must be an object");
    CHECK_ERR(cfg(&c, "{\"text_config\": {\"hidden_size\": -1}}", &err), CELER_ERR_FORMAT,
              "config.json: text_config: 'hidden_size'");
    CHECK_ERR(cfg(&c, "{\"rope_scaling\": [1]}", &err), CELER_ERR_FORMAT, "rope_scaling: must be an object");
    CHECK_ERR(cfg(&c, "{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": \"4\"}}", &err), CELER_ERR_FORMAT,
              "rope_scaling: 'factor'");
    CHECK_ERR(celer_hf_config_load(&c, path_in("nowhere", NULL), &err), CELER_ERR_IO, "config.json");
    return 0;
}

static int test_generation(void)
{
    celer_error                err = {0};
    celer_hf_generation_config g   = {0};
    const char                *qwen =
        "{\"bos_token_id\": 151643, \"pad_token_id\": 151643, \"do_sample\": true, \"eos_token_id\": [151645,"
        " 151643], \"repetition_penalty\": 1.1, \"temperature\": 0.7, \"top_p\": 0.8, \"top_k\": 20,"
        " \"transformers_version\": \"4.37.0\"}";
    CHECK(celer_hf_generation_config_parse(&g, qwen, strlen(qwen), "generation_config.json", &err) == CELER_OK);
    CHECK(g.present && g.eos_token_id.n == 2 && g.eos_token_id.ids[1] == 151643 && g.bos_token_id.ids[0] == 151643);
    CHECK(g.pad_token_id == 151643 && g.do_sample == 1 && g.repetition_penalty == 1.1 && g.temperature == 0.7);
    CHECK(g.top_p == 0.8 && g.top_k == 20 && g.min_p == -1 && g.max_new_tokens == -1 && g.max_length == -1);
    celer_hf_generation_config_free(&g);
    const char *smol = "{\"_from_model_config\": true, \"bos_token_id\": 1, \"eos_token_id\": 2, \"pad_token_id\": 2,"
                       " \"max_length\": 8192, \"min_p\": 0.05, \"transformers_version\": \"4.42.3\"}";
    CHECK(celer_hf_generation_config_parse(&g, smol, strlen(smol), "g", &err) == CELER_OK);
    CHECK(g.eos_token_id.n == 1 && g.eos_token_id.ids[0] == 2 && g.do_sample == -1 && g.temperature == -1);
    CHECK(g.max_length == 8192 && g.min_p == 0.05);
    celer_hf_generation_config_free(&g);
#define GEN_BAD(text, needle) CHECK_ERR(celer_hf_generation_config_parse(&g, text, strlen(text), "gen.json", &err), \
                                        CELER_ERR_FORMAT, needle)
    GEN_BAD("{\"temperature\": -0.5}", "gen.json: 'temperature' is -0.5");
    GEN_BAD("{\"top_p\": 1.5}", "'top_p' is 1.5");
    GEN_BAD("{\"repetition_penalty\": 0}", "'repetition_penalty' is 0");
    GEN_BAD("{\"top_k\": \"20\"}", "'top_k'");
    GEN_BAD("{\"do_sample\": \"yes\"}", "'do_sample'");
    GEN_BAD("{\"eos_token_id\": [1, \"x\"]}", "'eos_token_id'");
    GEN_BAD("{\"temperature\": 0.7", "gen.json: malformed JSON");
    CHECK(g.present == false && g.eos_token_id.ids == NULL);
    return 0;
}

static int test_tokenizer_config(void)
{
    celer_error               err = {0};
    celer_hf_tokenizer_config t   = {0};
    const char               *smol =
        "{\"add_prefix_space\": false, \"added_tokens_decoder\": {\"0\": {\"content\": \"<|endoftext|>\","
        " \"lstrip\": false, \"normalized\": false, \"rstrip\": false, \"single_word\": false, \"special\": true}},"
        " \"additional_special_tokens\": [\"<|im_start|>\", \"<|im_end|>\"], \"bos_token\": \"<|im_start|>\","
        " \"chat_template\": \"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' +"
        " message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}\", \"clean_up_tokenization_spaces\": false,"
        " \"eos_token\": \"<|im_end|>\", \"model_max_length\": 8192, \"pad_token\": \"<|im_end|>\","
        " \"tokenizer_class\": \"GPT2Tokenizer\", \"unk_token\": \"<|endoftext|>\", \"vocab_size\": 49152}";
    CHECK(celer_hf_tokenizer_config_parse(&t, smol, strlen(smol), "tokenizer_config.json", &err) == CELER_OK);
    CHECK(t.present && t.n_templates == 1 && strstr(celer_hf_tokenizer_config_template(&t, NULL), "<|im_start|>"));
    CHECK(STREQ(t.bos_token, "<|im_start|>") && STREQ(t.eos_token, "<|im_end|>") && STREQ(t.unk_token, "<|endoftext|>"));
    CHECK(t.model_max_length == 8192 && t.add_bos_token == -1 && !t.templates_from_files);
    celer_hf_tokenizer_config_free(&t);

    const char *gemma =
        "{\"add_bos_token\": true, \"add_eos_token\": false, \"bos_token\": \"<bos>\", \"eos_token\": \"<eos>\","
        " \"model_max_length\": 1000000000000000019884624838656, \"pad_token\": \"<pad>\", \"unk_token\": {"
        "\"__type\": \"AddedToken\", \"content\": \"<unk>\", \"lstrip\": false}, \"chat_template\": ["
        "{\"name\": \"default\", \"template\": \"D\"}, {\"name\": \"tool_use\", \"template\": \"T\"}]}";
    CHECK(celer_hf_tokenizer_config_parse(&t, gemma, strlen(gemma), "tc", &err) == CELER_OK);
    CHECK(t.add_bos_token == 1 && t.add_eos_token == 0 && t.model_max_length == 0 && STREQ(t.unk_token, "<unk>"));
    CHECK(t.n_templates == 2 && STREQ(celer_hf_tokenizer_config_template(&t, "tool_use"), "T"));
    CHECK(STREQ(celer_hf_tokenizer_config_template(&t, "default"), "D") && !celer_hf_tokenizer_config_template(&t, "x"));
    celer_hf_tokenizer_config_free(&t);

#define TOK_BAD(text, needle) CHECK_ERR(celer_hf_tokenizer_config_parse(&t, text, strlen(text), "tc.json", &err), \
                                        CELER_ERR_FORMAT, needle)
    TOK_BAD("{\"chat_template\": 5}", "tc.json: 'chat_template' must be a string or a list");
    TOK_BAD("{\"chat_template\": [{\"name\": \"a\"}]}", "chat_template[0] must be an object");
    TOK_BAD("{\"chat_template\": [{\"name\": \"a\", \"template\": \"x\"}, {\"name\": \"a\", \"template\": \"y\"}]}",
            "chat template 'a' is given twice");
    TOK_BAD("{\"bos_token\": 5}", "'bos_token' must be a string or an object");
    TOK_BAD("{\"eos_token\": {\"content\": 1}}", "'eos_token'");
    TOK_BAD("{\"add_bos_token\": \"true\"}", "'add_bos_token'");
    TOK_BAD("{\"model_max_length\": -4}", "'model_max_length'");
    TOK_BAD("{\"model_max_length\": \"8192\"}", "'model_max_length'");
    TOK_BAD("{\"bos_token\": }", "malformed JSON near byte");
    return 0;
}

static int test_dirs(void)
{
    celer_error               err = {0};
    celer_hf_tokenizer_config t   = {0};
    celer_hf_generation_config g  = {0};
    celer_hf_config           c   = {0};

    /* a model directory with everything */
    CHECK(mkdir(path_in("m", NULL), 0700) == 0);
    CHECK(write_text("m", "config.json", gemma3_270m) == 0);
    CHECK(write_text("m", "generation_config.json", "{\"eos_token_id\": [1, 106], \"top_k\": 64, \"top_p\": 0.95}") == 0);
    CHECK(write_text("m", "tokenizer_config.json", "{\"chat_template\": \"from config\", \"eos_token\": \"<eos>\"}") == 0);
    CHECK(write_text("m", "chat_template.jinja", "from file") == 0);
    CHECK(celer_hf_config_load(&c, path_in("m", NULL), &err) == CELER_OK && c.num_hidden_layers == 18);
    celer_hf_config_free(&c);
    CHECK(celer_hf_generation_config_load(&g, path_in("m", NULL), &err) == CELER_OK);
    CHECK(g.present && g.top_k == 64 && celer_hf_ids_has(&g.eos_token_id, 106));
    celer_hf_generation_config_free(&g);
    CHECK(celer_hf_tokenizer_config_load(&t, path_in("m", NULL), &err) == CELER_OK);
    CHECK(t.present && t.templates_from_files && t.n_templates == 1); /* chat_template.jinja wins */
    CHECK(STREQ(celer_hf_tokenizer_config_template(&t, NULL), "from file") && STREQ(t.eos_token, "<eos>"));
    celer_hf_tokenizer_config_free(&t);

    /* named template files: the config's templates are dropped even without chat_template.jinja */
    CHECK(mkdir(path_in("m", "additional_chat_templates"), 0700) == 0);
    CHECK(write_text("m/additional_chat_templates", "tool_use.jinja", "tools!") == 0);
    CHECK(write_text("m/additional_chat_templates", "notes.txt", "ignored") == 0);
    CHECK(celer_hf_tokenizer_config_load(&t, path_in("m", NULL), &err) == CELER_OK);
    CHECK(t.n_templates == 2 && STREQ(t.templates[0].name, "default"));
    CHECK(STREQ(celer_hf_tokenizer_config_template(&t, "tool_use"), "tools!"));
    celer_hf_tokenizer_config_free(&t);
    CHECK(remove(path_in("m", "chat_template.jinja")) == 0);
    CHECK(celer_hf_tokenizer_config_load(&t, path_in("m", NULL), &err) == CELER_OK);
    CHECK(t.n_templates == 1 && !celer_hf_tokenizer_config_template(&t, NULL));
    celer_hf_tokenizer_config_free(&t);

    /* missing optional files are not errors; a missing config.json is */
    CHECK(mkdir(path_in("bare", NULL), 0700) == 0);
    CHECK(celer_hf_generation_config_load(&g, path_in("bare", NULL), &err) == CELER_OK && !g.present);
    CHECK(g.temperature == -1);
    CHECK(celer_hf_tokenizer_config_load(&t, path_in("bare", NULL), &err) == CELER_OK && !t.present);
    CHECK(t.n_templates == 0);
    CHECK_ERR(celer_hf_config_load(&c, path_in("bare", NULL), &err), CELER_ERR_IO, "bare/config.json");

    /* a malformed optional file is an error naming it */
    CHECK(write_text("bare", "generation_config.json", "{\"top_k\": 20,}") == 0);
    CHECK_ERR(celer_hf_generation_config_load(&g, path_in("bare", NULL), &err), CELER_ERR_FORMAT,
              "bare/generation_config.json: malformed JSON near byte");
    CHECK(write_text("bare", "tokenizer_config.json", "{\"bos_token\": []}") == 0);
    CHECK_ERR(celer_hf_tokenizer_config_load(&t, path_in("bare", NULL), &err), CELER_ERR_FORMAT,
              "bare/tokenizer_config.json: 'bos_token'");
    CHECK(write_text("bare", "config.json", "{\"quantization\": {\"bits\": 7}}") == 0);
    CHECK_ERR(celer_hf_config_load(&c, path_in("bare", NULL), &err), CELER_ERR_FORMAT,
              "bare/config.json: quantization: 'bits' is 7");
    return 0;
}

/* Every seed of the config fuzzer reads cleanly as the kind of file its name says. */
static int test_corpus(void)
{
    const char *dir = "tests/fuzz/corpus/config";
    DIR        *d   = opendir(dir);
    CHECK(d != NULL);
    int            n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        FILE *f = fopen(path, "rb");
        if (!f || de->d_name[0] == '.') {
            if (f) fclose(f);
            continue;
        }
        static char text[1 << 16];
        size_t      len = fread(text, 1, sizeof text, f);
        fclose(f);
        celer_error  err = {0};
        celer_status s   = CELER_OK;
        if (strstr(de->d_name, ".generation_config.json")) {
            celer_hf_generation_config g;
            s = celer_hf_generation_config_parse(&g, text, len, path, &err);
            celer_hf_generation_config_free(&g);
        } else if (strstr(de->d_name, ".tokenizer_config.json")) {
            celer_hf_tokenizer_config t;
            s = celer_hf_tokenizer_config_parse(&t, text, len, path, &err);
            celer_hf_tokenizer_config_free(&t);
        } else if (strstr(de->d_name, ".config.json")) {
            celer_hf_config c;
            s = celer_hf_config_parse(&c, text, len, path, &err);
            celer_hf_config_free(&c);
        } else continue;
        if (s != CELER_OK) fprintf(stderr, "%s\n", err.msg);
        CHECK(s == CELER_OK);
        n++;
    }
    closedir(d);
    CHECK(n >= 12);
    return 0;
}

int main(void)
{
    if (!scratch_make(root, sizeof root, "test-hf")) return 1;
    int fails = test_configs() + test_config_bad() + test_generation() + test_tokenizer_config() + test_dirs() +
                test_corpus();
    if (!scratch_remove(root)) fails++;
    if (fails) fprintf(stderr, "test_hf_config: %d group(s) failed\n", fails);
    return fails != 0;
}
