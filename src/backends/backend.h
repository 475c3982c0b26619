/* The backend contract: one table of operations that every backend (cpu, cuda, rocm) fills.
 * backends/ knows nothing of models: an op sees weights, activations and the KV cache, never a
 * tensor name. Activations are f32 rows in the backend's memory; weights keep their storage
 * format (quantized blocks), which the kernels decode. A backend may rearrange a weight's
 * blocks at weight_load for its kernels (the CPU interleaves 16 rows: backends/cpu/repack.h;
 * it puts an MLX matrix's scales beside its codes: backends/cpu/repack_mlx.h) and records that
 * in celer_weight.layout; the values are never re-encoded.
 *
 * A batch is a set of tokens, each with the sequence it belongs to and its position there, so
 * one call can mix the prefill of one sequence with the decode steps of others (continuous
 * batching); a single generate is the same with one sequence. */
#ifndef CELER_BACKENDS_BACKEND_H
#define CELER_BACKENDS_BACKEND_H

#include "celer.h"
#include "quant/ggml_types.h"
#include "quant/mlx_quant.h"
#include "quant/weight_types.h"

#include <math.h>

typedef enum { CELER_BACKEND_CPU, CELER_BACKEND_CUDA, CELER_BACKEND_ROCM, CELER_BACKEND_KIND_COUNT } celer_backend_kind;

/* A weight on a backend: a matrix (rows, cols) with cols contiguous, or a vector (rows 1).
 * An MLX-quantized matrix has type CELER_WEIGHT_MLX (quant/weight_types.h): mlx says its format
 * and mlx_data holds its three host arrays as mlx stores them (codes, scales, biases); data is
 * the codes until weight_load replaces it with the backend's arrangement of all three. */
typedef struct {
    celer_ggml_type      type;     /* a GGUF type, or CELER_WEIGHT_MLX */
    int64_t              rows, cols;
    const void          *data;     /* backend memory; NULL: absent (an optional weight) */
    int                  layout;   /* the backend's arrangement of data (0: as stored), set by weight_load */
    celer_mlx_quant      mlx;      /* CELER_WEIGHT_MLX: mode, bits, group size, scales' dtype; rows, cols as above */
    celer_mlx_quant_data mlx_data; /* CELER_WEIGHT_MLX: the codes, scales and biases as stored (host memory) */
} celer_weight;

typedef enum { CELER_ROPE_NORM, CELER_ROPE_NEOX } celer_rope_mode;
typedef enum { CELER_ACT_SILU, CELER_ACT_GELU_TANH } celer_act;

/* Rotary position embedding of one layer. */
typedef struct {
    celer_rope_mode mode;
    int64_t         n_rot;        /* rotated dimensions of each head (<= head_dim) */
    float           base;         /* theta */
    float           pos_scale;    /* linear scaling: position multiplier (1 / factor) */
    const float    *freq_factors; /* (n_rot / 2) divisors of each frequency (llama 3, YaRN), or NULL */
    float           mscale;       /* cos and sin are multiplied by it (YaRN's attention factor; else 1) */
} celer_rope;

/* The angular frequency of rotated pair i (0 .. n_rot / 2), in double: every backend's RoPE
 * takes it from here, so that they rotate by the same angles. */
static inline double celer_rope_freq(const celer_rope *r, int64_t i)
{
    double f = pow((double)r->base, -2.0 * (double)i / (double)r->n_rot);
    return r->freq_factors ? f / r->freq_factors[i] : f;
}

typedef struct {
    int64_t        n_tokens;
    const int32_t *pos; /* (n_tokens) position of each token in its sequence */
    const int32_t *seq; /* (n_tokens) the sequence (KV cache slot) of each token */
} celer_batch;

/* Paged KV cache: fixed-size blocks of block_size positions; each sequence has a table of the
 * blocks holding its positions in order. Keys and values are rows of (n_kv_heads × head_dim)
 * in backend memory, one pool per layer: f32 values, or f16 where the backend keeps them so
 * (ops->kv_elem_bytes: 2; a GPU backend with CELER_GPU_KV_F16=1). */
typedef struct {
    int32_t   n_layers;
    int64_t   n_kv_heads, head_dim_k, head_dim_v;
    int32_t   block_size;
    int32_t   n_blocks;
    int32_t   elem_bytes;    /* of a stored value: 4 (f32) or 2 (f16) */
    void    **k, **v;        /* (n_layers) pools of (n_blocks, block_size, n_kv_heads, head_dim) */
    int32_t   n_seqs;
    int32_t   max_blocks;    /* per sequence */
    int32_t  *tables;        /* (n_seqs, max_blocks) block ids; -1 unused */
    int32_t  *seq_len;       /* (n_seqs) positions written */
    int32_t  *free_blocks;   /* stack of free block ids */
    int32_t   n_free;
} celer_kv_cache;

/* Attention of one layer. */
typedef struct {
    int64_t n_heads, n_kv_heads, head_dim;
    float   scale;   /* applied to q·k */
    int32_t window;  /* sliding window in positions (a key j is seen by a query p when p - j < window); 0: all */
} celer_attn;

/* The experts of one mixture-of-experts layer: n_expert SwiGLU-style FFNs of width n_ff, each
 * gate[e], up[e] (n_ff, n_embd) and down[e] (n_embd, n_ff); within a projection every expert
 * has the same type, format and layout. */
typedef struct {
    int64_t       n_expert, n_ff;
    celer_weight *gate, *up, *down; /* (n_expert) each */
} celer_moe;

typedef struct celer_backend celer_backend;

/* One row's sampled draw (runtime/sampler.h defines it): the sampler's parameters after any
 * penalty, and u, the generator's number in [0, 1) for this token. A temperature of 0 or less
 * asks for the argmax. */
typedef struct {
    float   temperature, top_p, min_p;
    int32_t top_k;
    double  u;
} celer_draw;

typedef struct {
    const char        *name; /* "cpu", "cuda", "rocm" */
    celer_backend_kind kind;
    void (*free)(celer_backend *be);
    int (*n_threads)(celer_backend *be); /* host threads it computes with */

    /* memory for activations and the KV cache */
    celer_status (*alloc)(celer_backend *be, size_t bytes, void **out, celer_error *err);
    void (*release)(celer_backend *be, void *p);
    /* makes a host weight usable here (the CPU keeps the view; a GPU uploads) */
    celer_status (*weight_load)(celer_backend *be, celer_weight *w, celer_error *err);
    /* *view = rows row0 .. row0 + rows of the loaded weight w, itself a weight (a MoE layer's
     * experts are views of their stacked tensor, loaded once). CELER_ERR_UNSUPPORTED when the
     * backend's arrangement of w cannot be cut there: the caller loads those rows on their own. */
    celer_status (*weight_view)(celer_backend *be, const celer_weight *w, int64_t row0, int64_t rows,
                                celer_weight *view, celer_error *err);
    /* ids (rows, host memory) = for each row of x (rows, n; backend memory) the index of its largest
     * value, the lowest on ties; NaNs never win, but a row whose first value is NaN gives 0 (as a
     * scan from the first value that takes only strictly larger ones). Waits for the work before
     * it. A greedy draw reads back one id a row instead of the row. */
    celer_status (*argmax)(celer_backend *be, const float *x, int64_t rows, int64_t n, int32_t *ids, celer_error *err);
    /* ids (rows, host memory) = for each row of x (rows, n; backend memory) the token that
     * celer_sampler_draw gives from it with d[row] (host memory), taken where the logits are; -1
     * where the backend could not decide the draw there (the caller reads that row and draws on
     * the host with the same d). Waits for the work before it. NULL: sampled rows are read. */
    celer_status (*sample)(celer_backend *be, const float *x, int64_t rows, int64_t n, const celer_draw *d,
                           int32_t *ids, celer_error *err);
    /* Decode a step ahead (NULL where a backend has none). argmax_keep: the argmax of each of the
     * rows rows of x (n values each, backend memory), as argmax gives them, kept where get_rows
     * with ids NULL reads them (the next step's inputs, which the host need not have read), their
     * copy to the host started; it returns without waiting. argmax_take: the oldest kept set not
     * yet taken (as many ids as were kept), waiting for its copy alone. At most two sets are kept
     * and not taken. */
    celer_status (*argmax_keep)(celer_backend *be, const float *x, int64_t rows, int64_t n, celer_error *err);
    celer_status (*argmax_take)(celer_backend *be, int32_t *ids, celer_error *err);
    /* Sampled decode a step ahead (NULL where a backend has none): the draws d (one a row) kept as
     * argmax_keep keeps argmaxes (argmax_take takes either), -1 where sample leaves a row to the
     * host (get_rows of a kept -1 reads row 0: the caller drops that step). */
    celer_status (*sample_keep)(celer_backend *be, const float *x, int64_t rows, int64_t n, const celer_draw *d,
                                celer_error *err);
    /* backend memory to host memory (waits for the work before it), host to backend, backend to backend */
    celer_status (*read)(celer_backend *be, const void *src, void *host_dst, size_t n, celer_error *err);
    celer_status (*write)(celer_backend *be, void *dst, const void *host_src, size_t n, celer_error *err);
    celer_status (*copy)(celer_backend *be, void *dst, const void *src, size_t n, celer_error *err);
    /* the memory this backend can allocate now and its total (the CPU: host MemAvailable and
     * MemTotal; a GPU: what the device can really allocate, on unified-memory APUs the GPU's limit) */
    celer_status (*memory)(celer_backend *be, uint64_t *free_bytes, uint64_t *total_bytes, celer_error *err);

    /* y (n, cols) = rows ids (host memory) of w, as f32. A CELER_WEIGHT_MLX w whose data is NULL
     * is described by its host arrays alone (an embedding table only looked up): its rows are as
     * mx.dequantize gives them. ids NULL (a backend with argmax_keep, w not such an MLX table):
     * the rows of the n ids argmax_keep or sample_keep kept last (row 0 for a kept -1). */
    celer_status (*get_rows)(celer_backend *be, const celer_weight *w, const int32_t *ids, int64_t n, float *y,
                             celer_error *err);
    /* y (rows, d) = x / rms(x) * w; w is a vector of d (f32); y may be x */
    celer_status (*rmsnorm)(celer_backend *be, const float *x, const celer_weight *w, int64_t rows, int64_t d,
                            float eps, float *y, celer_error *err);
    /* y (T, w.rows) = x (T, w.cols) · wᵀ */
    celer_status (*matmul)(celer_backend *be, const celer_weight *w, const float *x, int64_t T, float *y,
                           celer_error *err);
    /* y (T, n) += b (n) */
    celer_status (*add_bias)(celer_backend *be, float *y, const celer_weight *b, int64_t T, celer_error *err);
    /* x (T, n_heads, head_dim) rotated in place at the batch's positions */
    celer_status (*rope)(celer_backend *be, float *x, const celer_batch *b, int64_t n_heads, int64_t head_dim,
                         const celer_rope *r, celer_error *err);
    /* bytes of a value in the KV cache's pools: 4 (f32) or 2 (f16); NULL: 4 */
    int (*kv_elem_bytes)(celer_backend *be);
    /* device memory the backend takes for itself past the planner's shared estimate (weights, KV
     * cache, one chunk's activations) when steps run up to `tokens` tokens through products of up
     * to `cols` columns; NULL: none */
    uint64_t (*own_scratch)(celer_backend *be, int64_t tokens, int64_t cols);
    /* the planner's final estimate of the run's memory (with the two answers above), for a
     * backend to report beside what it used; NULL: not reported */
    void (*note_plan)(celer_backend *be, uint64_t bytes);
    /* writes k (T, n_kv_heads, head_dim_k) and v into the cache at the batch's (seq, pos) */
    celer_status (*kv_write)(celer_backend *be, celer_kv_cache *kv, int32_t layer, const float *k, const float *v,
                             const celer_batch *b, celer_error *err);
    /* out (T, n_heads, head_dim) = causal softmax(q kᵀ · scale) v over each token's sequence */
    celer_status (*attention)(celer_backend *be, const float *q, const celer_kv_cache *kv, int32_t layer,
                              const celer_batch *b, const celer_attn *a, float *out, celer_error *err);
    /* x (n) += y (n) */
    celer_status (*add)(celer_backend *be, float *x, const float *y, int64_t n, celer_error *err);
    /* gate (n) = act(gate) * up */
    celer_status (*glu)(celer_backend *be, float *gate, const float *up, int64_t n, celer_act act, celer_error *err);
    /* x (n) *= s */
    celer_status (*scale)(celer_backend *be, float *x, int64_t n, float s, celer_error *err);
    /* x (T, n): row t *= sigmoid(g[t]) */
    celer_status (*mul_sigmoid)(celer_backend *be, float *x, const float *g, int64_t T, int64_t n, celer_error *err);

    /* Steps (optional: NULL where a backend runs every op as it comes). Between step_begin and
     * step_end the caller issues one forward step; key names its shape (the same key promises
     * the same sequence of ops on the same buffers with the same sizes, only the contents of
     * the host inputs differing: token ids, positions, sequences, KV block tables). A backend
     * may record the step's device work once and replay it for later steps of that key (a GPU:
     * a CUDA/HIP graph, so that a decode step costs one launch instead of hundreds). The ops
     * still validate and upload their inputs on every step. step_end(ok: the ops succeeded)
     * sets *redo when the step's work was not done (an op could not be recorded): the caller
     * runs the step again, and the backend then runs it op by op. */
    celer_status (*step_begin)(celer_backend *be, uint64_t key, celer_error *err);
    celer_status (*step_end)(celer_backend *be, bool ok, bool *redo, celer_error *err);

    /* mixture of experts */
    /* For each of T tokens, from its router logits (T, n_expert): softmax, then the n_used most
     * probable experts, ties to the lower index, most probable first, into ids (T, n_used) and
     * their probabilities into w (T, n_used), rescaled to sum 1 when renorm. */
    celer_status (*moe_route)(celer_backend *be, const float *logits, int64_t T, int64_t n_expert, int64_t n_used,
                              bool renorm, int32_t *ids, float *w, celer_error *err);
    /* out (T, n_embd) = Σ_j w[t][j] · down_e(act(gate_e · x_t) ⊙ up_e · x_t), e = ids[t][j], over
     * the n_used experts of each token; each expert's weights are read once per call. */
    celer_status (*moe_ffn)(celer_backend *be, const celer_moe *moe, const float *x, int64_t T, const int32_t *ids,
                            const float *w, int64_t n_used, celer_act act, float *out, celer_error *err);
} celer_backend_ops;

/* The argmax op's answer for one row in host memory, the scan it describes: the CPU backend's
 * op and the sampler's greedy draw are this function. */
static inline int64_t celer_argmax_row(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Every backend instance starts with its ops table. */
struct celer_backend {
    const celer_backend_ops *ops;
};

/* ---- the registry (backends/registry.c) ---- */
typedef struct {
    int      n_threads;    /* cpu: worker threads, 0 = one per physical core */
    int      device;       /* gpu: the device index */
    double   timeout_s;    /* gpu: the watchdog's deadline for one step; 0 = the default (120 s) */
    uint64_t upload_total; /* gpu: the bytes of weights to upload, for the progress line; 0 = unknown */
    bool     routed;       /* the model routes tokens among experts (n_expert > 0): a choice its products' rounding
                            * can flip, so a GPU's long products keep more precision (gpu_blas.h) */
} celer_backend_config;

/* Creates the backend called name ("cpu", "cuda", "rocm"), or the best available when name is
 * NULL ("auto"): the GPU backend this build has when a device answers, else the CPU. A GPU
 * backend asked for by name that cannot start (no device, a device this build has no code for)
 * is CELER_ERR_DEVICE or CELER_ERR_UNSUPPORTED with the reason; it never falls back silently. */
celer_status celer_backend_create(celer_backend **out, const char *name, const celer_backend_config *cfg,
                                  celer_error *err);
void         celer_backend_destroy(celer_backend *be);
/* Whether this build has the backend called name. */
bool         celer_backend_in_build(const char *name);

#endif
