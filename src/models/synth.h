/* Synthetic models: GGUF files with the real tensor names, shapes, types and metadata of a model
 * family but random weights, for benchmarking without downloads (decode speed does not depend
 * on the weight values). The same seed gives the same bytes.
 *
 * Weight types (--type): one of F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K
 * for every weight matrix (like llama-quantize --pure), or the Q4_K_M mix:
 *   output.weight (token_embd.weight when tied)            Q6_K
 *   blk.N.attn_v.weight, blk.N.ffn_down(_exps).weight      Q6_K in the layers llama.cpp gives more
 *                                                          bits (the first and last eighth, and
 *                                                          every third between), else Q4_K
 *   every other matrix (token_embd when untied too)        Q4_K
 * Norms, biases, the MoE router (ffn_gate_inp) and rope_freqs are always F32.
 *
 * Fallback, as llama.cpp's quantizer does it: a matrix whose row width (ne[0]) is not a multiple
 * of its type's block gets Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0; if that (or a 32-block type
 * asked for directly) still does not divide the row, F16. */
#ifndef CELER_MODELS_SYNTH_H
#define CELER_MODELS_SYNTH_H

#include "celer.h"
#include "formats/gguf_write.h"

/* A model shape: the published hyper-parameters of one model, or a custom one. */
typedef struct {
    const char *name;           /* preset name ("llama-3.2-1b"), NULL for a custom shape */
    const char *title;          /* general.name */
    const char *arch;           /* general.architecture: llama, qwen2, qwen3, qwen3moe, gemma3 */
    int64_t     n_layer;
    int64_t     n_embd;
    int64_t     n_ff;           /* dense FFN width (qwen3moe: the converter's feed_forward_length) */
    int64_t     n_head;
    int64_t     n_head_kv;
    int64_t     head_dim;       /* per-head width of q, k and v */
    int64_t     n_vocab;
    int64_t     n_ctx;          /* context_length */
    int64_t     n_expert;       /* qwen3moe: experts per layer */
    int64_t     n_expert_used;
    int64_t     n_ff_expert;    /* one expert's FFN width */
    int64_t     sliding_window; /* gemma3 */
    double      rope_theta;
    double      norm_eps;
    bool        tied;           /* no output.weight: the embeddings are reused */
    bool        qkv_bias;       /* attn_q/k/v biases (qwen2) */
    /* llama 3 RoPE scaling, written as rope_freqs.weight; 0 = none */
    double      rope_factor, rope_low, rope_high;
    int64_t     rope_orig_ctx;
} celer_synth_shape;

/* A --type: a single weight type, or a mix. */
typedef struct {
    const char     *name;      /* "Q4_0", "Q4_K_M" */
    celer_ggml_type base;      /* the type of most matrices */
    bool            k_m;       /* the Q4_K_M mix */
    uint32_t        file_type; /* general.file_type (llama_ftype numbering) */
} celer_synth_type;

/* What celer_synth_write produced. */
typedef struct {
    uint64_t n_tensors;
    uint64_t n_params;
    uint64_t file_bytes;
} celer_synth_result;

/* Presets, in table order; NULL past the end. */
const celer_synth_shape *celer_synth_preset_at(size_t i);
const celer_synth_shape *celer_synth_preset_find(const char *name);
/* The --type called name (case-insensitive), or NULL. */
const celer_synth_type *celer_synth_type_find(const char *name);
/* For messages: "llama, qwen2, …" and "F32, F16, …". */
const char *celer_synth_arch_names(void);
const char *celer_synth_type_names(void);
const char *celer_synth_preset_names(void);

/* Starts a custom shape for arch: its family's defaults (RoPE base, norm epsilon, biases, tied
 * embeddings, sliding window, vocabulary 32000, context 4096); dimensions are left 0. False for
 * an architecture synth does not write. */
bool celer_synth_shape_defaults(celer_synth_shape *s, const char *arch);
/* Refuses a shape no loader would accept (zero or absurd sizes, heads not a multiple of the kv
 * heads, odd head size, MoE keys on a dense architecture or missing on qwen3moe). */
celer_status celer_synth_shape_check(const celer_synth_shape *s, celer_error *err);
/* The type a matrix gets under t: name is the tensor name, layer its block (-1 outside blocks),
 * row its width ne[0]; the mix and the fallback rule above. */
celer_ggml_type celer_synth_matrix_type(const celer_synth_shape *s, const celer_synth_type *t, const char *name,
                                        int64_t layer, uint64_t row);

/* Writes the model to path (atomically: a temporary file renamed into place). progress may be
 * NULL; res may be NULL. */
celer_status celer_synth_write(const celer_synth_shape *s, const celer_synth_type *t, uint64_t seed, const char *path,
                               celer_gguf_progress_fn progress, void *user, celer_synth_result *res, celer_error *err);

#endif
