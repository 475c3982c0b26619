/* The integer decode kernels (gpu_matvec.cu, gpu_matvec_combine.cu; their units in
 * gpu_mvq_units.cuh): activations quantized once, dotted with each weight format's codes four
 * bytes at a time. */
#ifndef CELER_BACKENDS_GPU_GPU_MATVEC_H
#define CELER_BACKENDS_GPU_GPU_MATVEC_H

#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_decode.cuh"

/* Tokens a pass of the decode kernels reads the weights for; weights one launch takes; bytes of
 * codes of a block of quantized activations (32 hi, then 32 lo). */
enum { GPU_MVQ_TOKENS = 8, GPU_MVQ_SET = 3, XQ_BLOCK = 64 };

/* Activations (T, cols) quantized per block of 32 values: for block b of token t, 64 bytes at
 * q + (t · nb + b) · 64 (32 hi codes, then 32 lo codes) and d[t · nb + b] = (d, d · S), with
 * x ≈ d · (256 hi + lo) and S = Σ (256 hi + lo): the CPU backend's X32 format. x8: the high
 * level only, 8 bits (lo codes 0, S = 256 Σ hi), as the dense products of quantized weights take
 * every token under CELER_GPU_MVQ_X8=1 (g->mvq_x8); the kernels read either the same way. */
typedef struct {
    const int8_t *q;
    const float2 *d;
    int64_t       nb; /* blocks per token: cols / 32 */
    bool          x8;
} gpu_xq;

static inline uint64_t gpu_sig_arg(uint64_t h, const gpu_xq &x) { return gpu_sig_args(h, x.q, x.d, x.nb, x.x8); }

/* Where a kernel that writes activations puts them quantized on the way out (xq_put), for the
 * product that reads them next: q NULL when it does not. */
typedef struct {
    int8_t *q;
    float2 *dd;
    bool    x8;
} gpu_xq_out;

static inline uint64_t gpu_sig_arg(uint64_t h, const gpu_xq_out &o) { return gpu_sig_args(h, o.q, o.dd, o.x8); }

/* Quantizes x (T, cols) into the backend's buffer for quantized activations (valid until the
 * next call), both levels or (x8) the high one; cols is a multiple of 32. Nothing runs when the
 * buffer already holds x's values so: a kernel that wrote x (a norm, the GLU, attention)
 * quantized them on the way out and said so (gpu_xq_held), and no launch, copy or upload came
 * between (each forgets xq_src). */
celer_status gpu_quant_x(gpu_backend *g, const float *x, int64_t T, int64_t cols, bool x8, gpu_xq *xq,
                         celer_error *err);
/* The buffer for n quantized values (n / 32 blocks), at the dense products' levels (g->mvq_x8),
 * for a kernel that writes x to quantize it on the way out; after its launch the caller says so
 * with gpu_xq_held. */
celer_status gpu_xq_buffer(gpu_backend *g, int64_t n, gpu_xq_out *out, celer_error *err);
/* The same in the buffer that in's activations are not in, for a kernel that reads them. */
celer_status gpu_xq_buffer_apart(gpu_backend *g, int64_t n, const gpu_xq *in, gpu_xq_out *out, celer_error *err);
static inline void gpu_xq_held(gpu_backend *g, const float *x, int64_t n, const gpu_xq_out &out)
{
    g->xq_src = x, g->xq_n = n, g->xq_x8 = out.x8, g->xq_in2 = out.q == (const int8_t *)g->d_xq2.p;
}

/* The step D = amax / 127 of a block whose largest |x| is amax, and *id = 1 / D (0 for an all-zero
 * block): the quantizer's and xq_value8's, the same roundings. */
static __device__ __forceinline__ float xq_step(float amax, float *id)
{
    const float D = __fdiv_rn(amax, 127.0f);
    *id           = D != 0.0f ? __fdiv_rn(1.0f, D) : 0.0f;
    return D;
}

static __device__ __forceinline__ int xq_code(float v)
{
    if (!(v > -127.0f)) return v != v ? 0 : -127; /* NaN: 0 */
    if (v > 127.0f) return 127;
    return (int)roundf(v); /* half away from zero */
}

/* Block blk of 32 values quantized by an aligned group of 32 / V lanes, V consecutive values v
 * a lane (lane j of the group holds values V j ..): hi = code(x / D), lo = code((x - hi D) 256 /
 * D), D = amax / 127; d = D / 256 and d · S (S = 256 Σ hi + Σ lo), as celer_cpu_quantize_x32_ref,
 * whatever V (the max and the sum of integers are exact in any order); with o.x8 lo = 0. Every
 * lane of the group calls; one with live false only takes part in the shuffles. */
template <int V>
static __device__ __forceinline__ void xq_put(const float (&v)[V], int j, int64_t blk, bool live, const gpu_xq_out &o)
{
    constexpr int G    = 32 / V;
    float         amax = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) amax = fmaxf(amax, live ? fabsf(v[k]) : 0.0f);
#pragma unroll
    for (int m = G / 2; m > 0; m >>= 1) amax = fmaxf(amax, gpu_shfl_xor(amax, m));
    float       id;
    const float D = xq_step(amax, &id);
    uint32_t    hw = 0, lw = 0;
    float       S  = 0.0f;
#pragma unroll
    for (int k = 0; k < V; k++) {
        const int hi = xq_code(__fmul_rn(v[k], id));
        const int lo = o.x8 ? 0 : xq_code(__fmul_rn(__fsub_rn(v[k], __fmul_rn((float)hi, D)), __fmul_rn(id, 256.0f)));
        hw |= (uint32_t)(uint8_t)hi << (8 * (k % 4)), lw |= (uint32_t)(uint8_t)lo << (8 * (k % 4));
        S += live ? (float)(256 * hi + lo) : 0.0f; /* exact: |S| < 2^21 */
    }
#pragma unroll
    for (int m = G / 2; m > 0; m >>= 1) S += gpu_shfl_xor(S, m);
    if (!live) return;
    int8_t *q = o.q + blk * XQ_BLOCK;
    if (V == 4) *(uint32_t *)(q + 4 * j) = hw, *(uint32_t *)(q + 32 + 4 * j) = lw;
    else q[j] = (int8_t)hw, q[32 + j] = (int8_t)lw;
    if (j == 0) {
        const float d = D / 256.0f;
        o.dd[blk]     = make_float2(d, d * S);
    }
}

/* The value x's 8-bit code stands for, as xq_put's high level: D · code(x / D), D = amax / 127
 * over its block of 32 values, held by an aligned group of 32 lanes (each calls with its own). */
static __device__ __forceinline__ float xq_value8(float v)
{
    float       id;
    const float D = xq_step(gpu_group32_max(fabsf(v)), &id);
    return __fmul_rn((float)xq_code(__fmul_rn(v, id)), D);
}

/* A product over expert selections (MoE decode): selection n (0 .. n_sel) multiplies the rows of
 * expert ids[n] (a weight is then the stacked tensor's first expert, rows the rows of one) by
 * token n / per_x of the activations, into rows n · rows of the output. ids stay on the device. */
typedef struct {
    const int32_t *ids;
    int32_t        per_x;    /* selections per token of the activations */
    int32_t        n_expert; /* ids past it select nothing */
} gpu_mv_sel;

static inline uint64_t gpu_sig_arg(uint64_t h, const gpu_mv_sel &s)
{
    return gpu_sig_args(h, s.ids, s.per_x, s.n_expert);
}

/* A one-token q/k/v product's outputs made attention inputs as its lanes store them
 * (celer_port_qkv_inputs: no per-head norms): the step's position and cache slot (from the
 * batch's uploads), the rotation's frequencies, the layer's caches, and whether the RoPE pairs
 * are a head's rows i and i + n_rot / 2 (neox: CELER_ROPE_NEOX, as Hugging Face and MLX
 * checkpoints give Llama's q and k) rather than adjacent ones (CELER_ROPE_NORM, as GGUF files
 * give them). kc NULL: a plain product. */
typedef struct {
    void          *kc, *vc; /* f32, or f16 bits where f16 */
    const int32_t *pos, *seq, *tables;
    const double  *freqs;
    int64_t        kw; /* values a cache row: the key heads' */
    int32_t        max_blocks, block_size, hd, n_rot;
    float          pos_scale, mscale;
    bool           f16, neox;
} gpu_mv_in;

static inline uint64_t gpu_sig_arg(uint64_t h, const gpu_mv_in &in)
{
    return gpu_sig_args(h, in.kc, in.vc, in.pos, in.seq, in.tables, in.freqs, in.kw, in.max_blocks, in.block_size,
                        in.hd, in.n_rot, in.pos_scale, in.mscale, in.f16, in.neox);
}

/* w as the kernels see it and its format (enum gpu_fmt); CELER_ERR_UNSUPPORTED for a weight no
 * GPU kernel reads (gpu_matmul.cu). */
celer_status gpu_weight_desc(const celer_weight *w, gpu_wdesc *d, int *fmt, celer_error *err);
/* Whether the format (enum gpu_fmt) has an integer decode kernel. */
bool         gpu_matvec_q8_has(int fmt);
/* Whether products of format fmt take 8-bit activations on every path (CELER_GPU_MVQ_X8=1 and a
 * format with integer kernels: the float paths of long products then round to the same values). */
static inline bool gpu_x8_takes(const gpu_backend *g, int fmt) { return g->mvq_x8 && gpu_matvec_q8_has(fmt); }
/* y[i] (T, w[i].rows) = x̂ · w[i]ᵀ (with add: y[i] += x̂ · w[i]ᵀ) for the quantized activations of
 * gpu_quant_x and n (1 .. GPU_MVQ_SET) weights of format fmt, one launch per GPU_MVQ_TOKENS tokens. */
celer_status gpu_matvec_q8(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                           float *const *y, bool add, celer_error *err);
/* The same over the n_sel selections of sel (T unused), one launch. */
celer_status gpu_matvec_q8_sel(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                               const gpu_mv_sel *sel, int64_t n_sel, float *const *y, celer_error *err);

/* One token's q, k and v (w[0..2]: one format and scales' dtype, k's and v's rows a cache row) in
 * one launch, made attention inputs as in says: y[0] rotated, y[1] and y[2] as the products give
 * them, the rotated keys and the values at in's slot of the caches — the values gpu_matvec_q8
 * then the attention inputs' kernel (gpu_fused.cu) give, bit for bit. */
celer_status gpu_matvec_q8_inputs(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const gpu_mv_in *in,
                                  float *const *y, celer_error *err);
/* Whether gpu_matvec_q8_inputs takes weights of the format (enum gpu_fmt) and scales' dtype
 * (gpu_wdesc.sdtype: MLX formats'). */
bool         gpu_matvec_q8_inputs_has(int fmt, int sdtype);
/* Whether it takes heads of hd values with their first n_rot rotated (a warp's rows: whole
 * pairs of one head, all rotated or none). */
bool         gpu_matvec_q8_inputs_heads(int64_t hd, int64_t n_rot);

/* Whether a MoE decode step of K selections a token can take gpu_matvec_q8_combine. */
bool         gpu_matvec_q8_combines(int64_t K);
/* out (T, w.rows) = Σ_j wts[t K + j] · (selection t K + j's product) (with add: out += that sum, one
 * rounding): a MoE decode step's last products and their weighted sum (gpu_moe.cu's k_combine) in
 * one launch, over the T K selections of sel (per_x 1: selection n reads activation row n), K at
 * most a few (gpu_matvec_q8_combines); the same values as gpu_matvec_q8_sel then k_combine where
 * the former runs unsliced. */
celer_status gpu_matvec_q8_combine(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq,
                                   const gpu_mv_sel *sel, int64_t T, int64_t K, const float *wts, float *out,
                                   bool add, celer_error *err);

/* h (T, wg.rows) = act(x̂ · wgᵀ) · (x̂ · wuᵀ), one-token passes of T tokens (or with sel, its T
 * selections), and h quantized on the way out (gpu_xq_held) where wg.rows is a multiple of 32:
 * the gate and up weights (the same format, shape and scales' dtype) in one launch
 * (gpu_matvec_glu.cu); the same values as gpu_matvec_q8 (or _sel) of both, then the glu op,
 * where those products run unsliced. */
celer_status gpu_matvec_q8_glu(gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt, const gpu_xq *xq,
                               int64_t T, const gpu_mv_sel *sel, celer_act act, float *h, celer_error *err);
/* Whether gpu_matvec_q8_glu takes this pair of gate and up weights (of one format). */
static inline bool gpu_matvec_q8_glus(const gpu_wdesc *wg, const gpu_wdesc *wu)
{
    return wg->sdtype == wu->sdtype && wg->rows == wu->rows && wg->cols == wu->cols;
}

/* Whether the plain-float decode kernel (gpu_matvec_plain.cu) takes w (F32, F16 or BF16 rows on
 * 16-byte boundaries) by x (16-byte aligned). */
bool         gpu_matvec_plain_takes(const gpu_wdesc *w, int fmt, const float *x);
/* y (T, w.rows) = x (T, w.cols) · wᵀ for such a weight, 8 tokens a pass. */
celer_status gpu_matvec_plain(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y,
                              celer_error *err);

#endif
