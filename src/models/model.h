/* A decoder-only transformer ready to run on a backend: its architecture's switches, its
 * hyper-parameters and its weights. The only code that knows tensor names lives in models/. */
#ifndef CELER_MODELS_MODEL_H
#define CELER_MODELS_MODEL_H

#include "backends/backend.h"
#include "models/model_file.h"
#include "quant/mlx_quant.h"

/* What distinguishes one architecture family's forward pass from another's. */
typedef struct {
    const char     *name;          /* general.architecture */
    celer_rope_mode rope;
    celer_act       act;
    bool            qk_norm;       /* per-head RMSNorm of q and k (qwen3, gemma3) */
    bool            sandwich_norm; /* norms after attention and after the FFN too (gemma3) */
    bool            embd_scale;    /* embeddings times sqrt(n_embd) (gemma) */
    int32_t         swa_period;    /* every swa_period-th layer is global, the others sliding (gemma3: 6) */
    float           swa_rope_base; /* RoPE base of the sliding layers */
    bool            moe;           /* FFNs are mixtures of experts (qwen3moe, qwen2moe) */
    bool            moe_renorm;    /* the kept experts' weights are rescaled to sum 1 (norm_topk_prob) */
} celer_arch;

/* The architecture called name, or NULL. */
const celer_arch *celer_arch_find(const char *name);
/* Names of every supported architecture, comma-separated, for messages. */
const char *celer_arch_names(void);

typedef struct {
    celer_weight attn_norm;            /* (n_embd) */
    celer_weight wq, wk, wv, wo;       /* (n_head·hd, n_embd), (n_kv·hd, n_embd) ×2, (n_embd, n_head·hd) */
    celer_weight bq, bk, bv;           /* optional biases */
    celer_weight q_norm, k_norm;       /* (hd), with qk_norm */
    celer_weight post_attn_norm;       /* (n_embd), with sandwich_norm */
    celer_weight ffn_norm;             /* (n_embd) */
    celer_weight w_gate, w_up, w_down; /* (n_ff, n_embd) ×2, (n_embd, n_ff) */
    celer_weight post_ffn_norm;        /* (n_embd), with sandwich_norm */
    /* A mixture-of-experts layer (moe.n_expert > 0) has a router and experts in place of the
     * dense FFN; w_gate, w_up and w_down, when present, are then its shared expert (qwen2moe),
     * scaled by sigmoid(shexp_gate · x). */
    celer_weight router;               /* (n_expert, n_embd) */
    celer_moe    moe;
    celer_weight shexp_gate;           /* (1, n_embd), or absent */
    celer_rope   rope;
    celer_attn   attn;
} celer_layer;

typedef struct {
    const celer_arch *arch;
    celer_hparams     hp;
    float             norm_eps;
    celer_weight      tok_embd;    /* (n_vocab, n_embd) */
    celer_weight      output_norm; /* (n_embd) */
    celer_weight      output;      /* (n_vocab, n_embd); the embeddings when tied */
    int32_t           n_layers;
    celer_layer      *layers;      /* (n_layers) */
    float            *freq_factors; /* (n_rot / 2) llama 3 or YaRN RoPE scaling, or NULL */
    bool              moe_renorm;   /* the architecture's, or config.json's norm_topk_prob */
    celer_weight     *experts;      /* the MoE layers' expert matrices (layers' moe point here) */
    void            **owned;        /* weights the loader made (f32 norms) */
    size_t            n_owned, cap_owned;
    char              load_note[256]; /* what the load converted, for stderr; "" when nothing */
    /* An MLX-quantized embedding table: its rows are looked up as mlx.core.dequantize gives them
     * (in the scales' dtype), from the arrays as stored; tok_embd is the same table as a
     * CELER_WEIGHT_MLX weight, on the backend (packed for its matmul) when it is the tied output
     * or the backend keeps argmax ids (argmax_keep: a kept id's row is read there, embd_kept). */
    bool                 embd_mlx, embd_kept;
    celer_mlx_quant      embd_q;
    celer_mlx_quant_data embd_d;
} celer_model;

/* Builds the model from a GGUF file or a model directory for a backend: checks every tensor's
 * presence, type and shape (errors name the tensor and the file) and loads the weights onto the
 * backend. The model points into mf's mapping: mf must outlive it. */
celer_status celer_model_load(celer_model *m, const celer_model_file *mf, celer_backend *be, celer_error *err);
/* The directory half of celer_model_load (load_dir.c); m is zeroed. */
celer_status celer_model_load_dir(celer_model *m, const celer_model_file *mf, celer_backend *be, celer_error *err);
void         celer_model_free(celer_model *m);

/* Experts per MoE layer celer loads (Qwen3-MoE has 128, DeepSeek-V3 256). */
#define CELER_MAX_EXPERTS 1024
/* For a MoE architecture: checks the expert hyper-parameters (what names the file) and
 * allocates m->experts; nothing for a dense one. */
celer_status celer_model_init_moe(celer_model *m, const char *what, celer_error *err);
/* Loads the n experts of a stacked host weight (n · rows, cols) onto the backend as experts[0..n)
 * (models/experts.c). Errors are the backend's. */
celer_status celer_load_experts(celer_backend *be, const celer_weight *stacked, int64_t n, celer_weight *experts,
                                celer_error *err);

#endif
