/* Readers for the JSON files beside the weights in a Hugging Face or MLX model directory:
 * config.json, generation_config.json and tokenizer_config.json. Each fills a plain C struct
 * that owns its strings; a zeroed struct is safe to free, and a failed read leaves it zeroed.
 *
 * The readers report what the files say and apply only the defaults transformers applies for
 * every architecture (num_key_value_heads = num_attention_heads, head_dim = hidden_size /
 * num_attention_heads). Architecture defaults (Gemma 3's head_dim 256, a config that leaves
 * tie_word_embeddings out) belong to src/models/, which sees the *_given flags and the -1
 * "absent" values below.
 *
 * A malformed file is CELER_ERR_FORMAT naming the file and the field; a field of the wrong
 * type is an error, an unknown field is ignored. Each reader has a _parse entry point taking
 * the file's text, for the fuzzer and for tests. */
#ifndef CELER_FORMATS_HF_CONFIG_H
#define CELER_FORMATS_HF_CONFIG_H

#include "celer.h"

#include <cjson/cJSON.h>

/* Token ids given as one integer or a list ("eos_token_id": [1, 106]). */
typedef struct {
    uint32_t n;
    int64_t *ids; /* (n); NULL when n is 0 */
} celer_hf_ids;

/* ---- config.json ------------------------------------------------------------------------ */

/* MLX quantization modes. */
typedef enum {
    CELER_HF_QUANT_AFFINE, /* bits 2,3,4,5,6,8; group 16..128; per-group scale and bias */
    CELER_HF_QUANT_MXFP4,  /* E2M1, group 32, E8M0 scale */
    CELER_HF_QUANT_MXFP8,  /* E4M3, group 32, E8M0 scale */
    CELER_HF_QUANT_NVFP4,  /* E2M1, group 16, E4M3 scale */
    CELER_HF_QUANT_MODE_COUNT
} celer_hf_quant_mode;

/* How one module's weight is stored. */
typedef struct {
    bool                quantized;  /* false: the module keeps its stored dtype */
    celer_hf_quant_mode mode;
    uint32_t            bits;
    uint32_t            group_size;
} celer_hf_quant;

typedef struct {
    char          *module; /* module path, e.g. "model.layers.0.mlp.gate" or "lm_head" */
    celer_hf_quant quant;
} celer_hf_quant_override;

/* The "quantization" block MLX writes (or "quantization_config", which MLX writes as a copy):
 *     {"group_size": 64, "bits": 4, "mode": "affine",
 *      "model.layers.0.mlp.gate": {"group_size": 64, "bits": 8}, "lm_head": false}
 * Any key whose value is an object is an override for that module path; as in mlx.nn.quantize,
 * fields it leaves out take the defaults of its own mode (affine: 64 and 4; mxfp4: 32 and 4;
 * mxfp8: 32 and 8; nvfp4: 16 and 4), not the block's. false: the module is not quantized;
 * true: the block's settings. A block with "quant_method" comes from another quantizer (GPTQ,
 * AWQ, fp8, ...): only method is filled in. */
typedef struct {
    bool                     present;
    char                    *method;      /* "quant_method" of a non-MLX block, else NULL */
    celer_hf_quant           def;         /* the block's own settings */
    uint32_t                 n_overrides;
    celer_hf_quant_override *overrides;   /* (n_overrides), sorted by module */
} celer_hf_quantization;

/* layer_types entries. */
typedef enum {
    CELER_HF_LAYER_FULL,    /* "full_attention" */
    CELER_HF_LAYER_SLIDING, /* "sliding_attention" */
    CELER_HF_LAYER_CHUNKED, /* "chunked_attention" */
    CELER_HF_LAYER_LINEAR,  /* "linear_attention" */
    CELER_HF_LAYER_OTHER,   /* anything else; the model code decides */
} celer_hf_layer_type;

/* rope_scaling (or transformers 5's rope_parameters when its rope_type is not "default").
 * Numbers are 0 when absent. */
typedef struct {
    bool    present;
    char   *type;                             /* "rope_type", else "type": linear, llama3, yarn, ... */
    double  factor;
    int64_t original_max_position_embeddings;
    double  low_freq_factor, high_freq_factor; /* llama3 */
    double  beta_fast, beta_slow;              /* yarn */
    double  attention_factor;                  /* yarn, longrope */
} celer_hf_rope_scaling;

/* config.json. When the file has "text_config" (Gemma 3 multimodal), the language model's
 * fields are read from there, over the top level. Integers are 0 and doubles 0.0 when absent;
 * the tri-state flags are 1, 0 or -1 when absent. */
typedef struct {
    bool    has_text_config;
    char   *model_type;   /* text_config's ("gemma3_text") when present, else the top level's */
    char   *architecture; /* architectures[0] */
    char   *torch_dtype;  /* "bfloat16", ... ("torch_dtype", or transformers 5's "dtype") */
    char   *hidden_act;   /* "silu", "gelu_pytorch_tanh", ... ("hidden_act" or "hidden_activation") */

    int64_t hidden_size;
    int64_t num_hidden_layers;
    int64_t num_attention_heads;
    int64_t num_key_value_heads;  /* default num_attention_heads */
    bool    num_key_value_heads_given;
    int64_t head_dim;             /* default hidden_size / num_attention_heads */
    bool    head_dim_given;
    int64_t intermediate_size;
    int64_t vocab_size;
    int64_t max_position_embeddings;

    double                rms_norm_eps;
    double                rope_theta;
    double                rope_local_base_freq;  /* Gemma 3: theta of the sliding layers */
    double                query_pre_attn_scalar; /* Gemma */
    double                final_logit_softcapping, attn_logit_softcapping; /* Gemma 2 */
    celer_hf_rope_scaling rope_scaling;

    int     tie_word_embeddings; /* 1, 0, -1 */
    int     attention_bias;      /* 1, 0, -1 */
    int64_t sliding_window;      /* tokens; 0 when absent, null, or "use_sliding_window": false */
    int64_t sliding_window_pattern; /* every Nth layer is global (Gemma 3; "_sliding_window_pattern") */
    uint32_t             n_layer_types;
    celer_hf_layer_type *layer_types; /* (n_layer_types), equal to num_hidden_layers when both given */

    int64_t num_experts;         /* "num_experts", "num_local_experts" or "n_routed_experts" */
    int64_t num_experts_per_tok;
    int64_t moe_intermediate_size;
    int64_t shared_expert_intermediate_size;
    int     norm_topk_prob;      /* 1, 0, -1 */

    celer_hf_ids          bos_token_id, eos_token_id;
    celer_hf_quantization quant;
} celer_hf_config;

/* Reads dir/config.json; a missing file is CELER_ERR_IO (a model directory has one). */
celer_status celer_hf_config_load(celer_hf_config *c, const char *dir, celer_error *err);
/* Parses len bytes of config.json text; what names it in messages. */
celer_status celer_hf_config_parse(celer_hf_config *c, const char *text, size_t len, const char *what,
                                   celer_error *err);
/* Reads an already parsed config.json. */
celer_status celer_hf_config_from_json(celer_hf_config *c, const cJSON *root, const char *what,
                                       celer_error *err);
void         celer_hf_config_free(celer_hf_config *c);

/* How the module at path (e.g. "model.layers.3.self_attn.q_proj", no ".weight") is stored:
 * its override, else the block's settings, else not quantized. As in mlx-lm, a module without
 * an override is quantized only if "<path>.scales" exists in the weights; the caller checks. */
celer_hf_quant celer_hf_config_quant(const celer_hf_config *c, const char *module);
/* "affine", "mxfp4", "mxfp8", "nvfp4"; "?" outside the enum. */
const char    *celer_hf_quant_mode_name(celer_hf_quant_mode m);

/* ---- generation_config.json ------------------------------------------------------------- */

/* Numbers are -1 when absent (every valid value is >= 0). */
typedef struct {
    bool         present; /* the file exists */
    celer_hf_ids bos_token_id, eos_token_id;
    int64_t      pad_token_id;
    double       temperature;        /* >= 0 */
    double       top_p;              /* [0, 1] */
    int64_t      top_k;              /* >= 0; 0 disables */
    double       min_p;              /* [0, 1] */
    double       repetition_penalty; /* > 0 */
    int          do_sample;          /* 1, 0, -1 */
    int64_t      max_new_tokens;
    int64_t      max_length;
} celer_hf_generation_config;

/* Reads dir/generation_config.json; a missing file leaves present false and is not an error. */
celer_status celer_hf_generation_config_load(celer_hf_generation_config *g, const char *dir, celer_error *err);
celer_status celer_hf_generation_config_parse(celer_hf_generation_config *g, const char *text, size_t len,
                                              const char *what, celer_error *err);
void         celer_hf_generation_config_free(celer_hf_generation_config *g);

/* ---- tokenizer_config.json -------------------------------------------------------------- */

typedef struct {
    char *name; /* "default", "tool_use", ... */
    char *text; /* the Jinja source */
} celer_hf_chat_template;

/* Chat templates, in transformers' order of precedence (PreTrainedTokenizerBase.from_pretrained):
 * if chat_template.jinja or additional_chat_templates/<name>.jinja exist beside the config,
 * those files are the templates ("default" for chat_template.jinja, <name> for the others)
 * and whatever tokenizer_config.json says about chat_template is dropped, even when only
 * named files exist. Otherwise "chat_template" in tokenizer_config.json is either one string
 * (named "default") or a list of {"name", "template"} objects. */
typedef struct {
    bool                    present;        /* tokenizer_config.json exists */
    uint32_t                n_templates;
    celer_hf_chat_template *templates;      /* (n_templates) in file order ("default" first from files) */
    bool                    templates_from_files;
    char                   *bos_token;      /* the token's text (a string or AddedToken's "content"); */
    char                   *eos_token;      /*   NULL when absent or null */
    char                   *pad_token;
    char                   *unk_token;
    int                     add_bos_token;  /* 1, 0, -1 */
    int                     add_eos_token;  /* 1, 0, -1 */
    int64_t                 model_max_length; /* 0 when absent or transformers' "unset" (1e30) */
} celer_hf_tokenizer_config;

/* Reads dir/tokenizer_config.json (missing: present false, not an error), then the template
 * files beside it. */
celer_status celer_hf_tokenizer_config_load(celer_hf_tokenizer_config *t, const char *dir, celer_error *err);
/* Parses tokenizer_config.json text only (no template files). */
celer_status celer_hf_tokenizer_config_parse(celer_hf_tokenizer_config *t, const char *text, size_t len,
                                             const char *what, celer_error *err);
void         celer_hf_tokenizer_config_free(celer_hf_tokenizer_config *t);
/* The template called name (NULL means "default"), or NULL. */
const char  *celer_hf_tokenizer_config_template(const celer_hf_tokenizer_config *t, const char *name);

/* ---- shared ----------------------------------------------------------------------------- */

/* Reads obj[key] as one id or a list of ids in [0, 2^31) into *ids, replacing what was there.
 * Absent or null leaves *ids unchanged. */
celer_status celer_hf_ids_read(const cJSON *obj, const char *key, const char *what, celer_hf_ids *ids,
                               celer_error *err);
void         celer_hf_ids_free(celer_hf_ids *ids);
/* True when ids holds id. */
bool         celer_hf_ids_has(const celer_hf_ids *ids, int64_t id);

#endif
