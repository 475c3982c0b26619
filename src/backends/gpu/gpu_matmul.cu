/* Matrix products of f32 activations by stored weights, and embedding rows, on the GPU. Weights
 * are decoded in registers (gpu_decode.cuh); only the vendor BLAS's path writes them out.
 *
 * Long steps go to the vendor BLAS where the build has one (gpu_blas.h: the formats of the
 * integer matrix units from GPU_BLAS_FROM tokens, the other formats past MV_SLICED;
 * CELER_GPU_BLAS_FROM=0 turns it off). Steps of more than gpu_mmq_from tokens of the formats with
 * an integer matrix-unit kernel go to gpu_mmq.cu where the device has those units; decode steps
 * (up to MV_SLICED tokens) of the formats with an integer kernel to gpu_matvec.cu, those of F32,
 * F16 and BF16 rows to gpu_matvec_plain.cu. The float kernels here take the rest:
 * decode (T <= MV_TOKENS a pass): 32 lanes per weight row, each decoding one 32-value chunk of a
 * segment of 32 chunks (neighbouring lanes read neighbouring blocks), against the step's
 * activations of that segment, staged once per block in shared memory (rows padded: no bank
 * conflicts); longer steps (prefill): tiles of 64 rows × 64 tokens, each 32-column step decoding
 * the tile's weight chunks into shared memory once for the 64 tokens (f32 FMAs). */
#include "backends/gpu/gpu_blas.h"
#include "backends/gpu/gpu_mmq.h"

extern "C" {
#include "backends/gpu/gpu_ports.h"
#include "quant/mlx_quant.h"
}

#include <string.h>

/* Steps of up to MV_SLICED tokens run the decode kernel, MV_TOKENS tokens a pass (each pass reads
 * the weights once): on the H200 a pass of 8 tokens costs about what the tiled kernel spends on
 * 8 tokens of a long prefill, and small grids of the tiled kernel wait on its barriers. */
enum {
    MV_TOKENS = 8, MV_SLICED = 32, MV_THREADS = 256, MV_FEW_ROWS = 4096, MV_FEW_THREADS = 64,
    SEG = 32, TILE_R = 64, TILE_T = 64, GEMM_THREADS = 256
};

template <int F>
__global__ void k_matvec(gpu_wdesc w, const float *__restrict__ x, int64_t T, float *__restrict__ y)
{
    gpu_dep_enter();
    GPU_DYN_SHARED(float, xs); /* (T, SEG, 33): a segment of the activations, rows padded */
    const int     lane = threadIdx.x % CELER_WARP, nw = blockDim.x / CELER_WARP;
    const int     ch = lane % SEG, per_warp = CELER_WARP / SEG; /* wave64: a warp takes two rows */
    const int64_t r      = ((int64_t)blockIdx.x * nw + threadIdx.x / CELER_WARP) * per_warp + lane / SEG;
    const bool    active = r < w.rows; /* every thread reaches the barriers */
    const uint8_t *row   = w.data + (active ? r : 0) * w.row_bytes;
    const int64_t  nc    = w.cols / 32;
    float          acc[MV_TOKENS];
#pragma unroll
    for (int t = 0; t < MV_TOKENS; t++) acc[t] = 0.0f;
    for (int64_t c0 = 0; c0 < nc; c0 += SEG) {
        __syncthreads();
        for (int k = threadIdx.x; k < T * SEG * 32; k += blockDim.x) {
            const int     t = k / (SEG * 32), i = k % (SEG * 32);
            const int64_t col = 32 * c0 + i;
            xs[(t * SEG + i / 32) * 33 + i % 32] = col < w.cols ? x[t * w.cols + col] : 0.0f;
        }
        __syncthreads();
        const int64_t c = c0 + ch;
        if (!active || c >= nc) continue;
        float v[32];
        dec32<F>(w, row, c, v);
#pragma unroll
        for (int t = 0; t < MV_TOKENS; t++) {
            if (t >= T) break;
            const float *xt = xs + (t * SEG + ch) * 33;
            float        s  = 0.0f;
#pragma unroll
            for (int i = 0; i < 32; i++) s += v[i] * xt[i];
            acc[t] += s;
        }
    }
#pragma unroll
    for (int t = 0; t < MV_TOKENS; t++) {
        if (t >= T) break;
        float s = acc[t];
        for (int m = SEG / 2; m > 0; m >>= 1) s += gpu_shfl_xor(s, m); /* within the row's SEG lanes */
        if (ch == 0 && active) y[t * w.rows + r] = s;
    }
}

/* x8: the activations as their 8-bit codes stand for them (xq_value8: a warp's lanes load one
 * block of 32), as the integer kernels take them under CELER_GPU_MVQ_X8=1. */
template <int F>
__global__ void k_gemm(gpu_wdesc w, const float *__restrict__ x, int64_t T, float *__restrict__ y, bool x8)
{
    gpu_dep_enter();
    __shared__ float ws[TILE_R][33], xs[TILE_T][33];
    const int     tid = threadIdx.x, tr = tid % 16, tt = tid / 16;
    const int64_t r0 = (int64_t)blockIdx.x * TILE_R, t0 = (int64_t)blockIdx.y * TILE_T, nc = w.cols / 32;
    float         acc[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
    for (int64_t c = 0; c < nc; c++) {
        if (tid < TILE_R) {
            float v[32];
            if (r0 + tid < w.rows) dec32<F>(w, w.data + (r0 + tid) * w.row_bytes, c, v);
            else
#pragma unroll
                for (int i = 0; i < 32; i++) v[i] = 0.0f;
#pragma unroll
            for (int i = 0; i < 32; i++) ws[tid][i] = v[i];
        }
        for (int k = tid; k < TILE_T * 32; k += GEMM_THREADS) {
            const int     tk = k / 32, i = k % 32;
            const int64_t t  = t0 + tk;
            const float   v  = t < T ? x[t * w.cols + 32 * c + i] : 0.0f;
            xs[tk][i]        = x8 ? xq_value8(v) : v;
        }
        __syncthreads();
#pragma unroll 8
        for (int i = 0; i < 32; i++) {
            float a[4], b[4];
#pragma unroll
            for (int j = 0; j < 4; j++) a[j] = ws[tr * 4 + j][i], b[j] = xs[tt * 4 + j][i];
#pragma unroll
            for (int p = 0; p < 4; p++)
#pragma unroll
                for (int q = 0; q < 4; q++) acc[p][q] += a[p] * b[q];
        }
        __syncthreads();
    }
#pragma unroll
    for (int p = 0; p < 4; p++)
#pragma unroll
        for (int q = 0; q < 4; q++) {
            const int64_t r = r0 + tr * 4 + p, t = t0 + tt * 4 + q;
            if (r < w.rows && t < T) y[t * w.rows + r] = acc[p][q];
        }
}

template <int F, bool MX = false>
__global__ void k_get_rows(gpu_wdesc w, const int32_t *__restrict__ ids, int64_t n, float *__restrict__ y)
{
    gpu_dep_enter();
    const int64_t nc = w.cols / 32, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * nc) return;
    const int64_t t = i / nc, c = i % nc;
    float         v[32];
    const int32_t id = ids[t]; /* a kept draw left to the host (-1): row 0, its step dropped (backend.h) */
    dec32<F, MX>(w, w.data + (int64_t)(id < 0 ? 0 : id) * w.row_bytes, c, v);
#pragma unroll
    for (int k = 0; k < 32; k++) y[t * w.cols + 32 * c + k] = v[k];
}

/* ---- dispatch ------------------------------------------------------------------- */

static int fmt_of(const celer_weight *w)
{
    if (w->type == CELER_WEIGHT_MLX) {
        switch (w->mlx.mode) {
        case CELER_HF_QUANT_MXFP4: return GPU_MXFP4;
        case CELER_HF_QUANT_MXFP8: return GPU_MXFP8;
        case CELER_HF_QUANT_NVFP4: return GPU_NVFP4;
        default: break;
        }
        switch (w->mlx.bits) {
        case 2: return GPU_AFFINE2;
        case 3: return GPU_AFFINE3;
        case 4: return GPU_AFFINE4;
        case 5: return GPU_AFFINE5;
        case 6: return GPU_AFFINE6;
        case 8: return GPU_AFFINE8;
        default: return -1;
        }
    }
    switch (w->type) {
    case CELER_GGML_F32: return GPU_F32;
    case CELER_GGML_F16: return GPU_F16;
    case CELER_GGML_BF16: return GPU_BF16;
    case CELER_GGML_Q4_0: return GPU_Q4_0;
    case CELER_GGML_Q4_1: return GPU_Q4_1;
    case CELER_GGML_Q5_0: return GPU_Q5_0;
    case CELER_GGML_Q5_1: return GPU_Q5_1;
    case CELER_GGML_Q8_0: return GPU_Q8_0;
    case CELER_GGML_Q4_K: return GPU_Q4_K;
    case CELER_GGML_Q5_K: return GPU_Q5_K;
    case CELER_GGML_Q6_K: return GPU_Q6_K;
    default: return -1;
    }
}

celer_status gpu_weight_desc(const celer_weight *w, gpu_wdesc *d, int *fmt, celer_error *err)
{
    *fmt = fmt_of(w);
    if (*fmt < 0 || !w->data)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no GPU kernel for this weight's format", CELER_GPU_NAME);
    if (w->cols % 32)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: rows of %lld values (the kernels want multiples of 32)",
                          CELER_GPU_NAME, (long long)w->cols);
    memset(d, 0, sizeof *d);
    d->data = (const uint8_t *)w->data, d->rows = w->rows, d->cols = w->cols, d->gmul = 1.0f;
    if (w->type == CELER_WEIGHT_MLX) {
        const celer_mlx_quant *q = &w->mlx;
        gpu_mlx_row            L = gpu_mlx_row_layout(q);
        const int64_t          gs = q->group_size;
        /* affine groups are 32, 64 or 128 (celer_mlx_quant_get_shapes refuses others, as mlx does);
         * the other modes' scales are per chunk, no group */
        CELER_ASSERT(q->mode != CELER_HF_QUANT_AFFINE || (gs >= 32 && !(gs & (gs - 1))));
        d->row_bytes = (int64_t)L.row;
        while ((int64_t)1 << d->gshift < gs) d->gshift++;
        d->sdtype     = q->dtype == CELER_ST_F32 ? 0 : q->dtype == CELER_ST_F16 ? 1 : 2;
        d->scales_off = (int64_t)L.scales_at;
        d->biases_off = (int64_t)L.scales_at + (d->sdtype == 0 ? 4 : 2); /* beside each scale (MLX_ROWS) */
        if (q->has_global_scale) d->gmul = q->global_scale / 2688.0f;
    } else {
        gpu_split sp;
        d->row_bytes = (int64_t)gpu_row_bytes(w);
        if (gpu_split_of(w->type, &sp)) d->scales_off = w->cols / sp.block_elems * sp.code_len;
    }
    return CELER_OK;
}

typedef void (*matvec_fn)(gpu_wdesc, const float *, int64_t, float *);
typedef void (*gemm_fn)(gpu_wdesc, const float *, int64_t, float *, bool);
typedef void (*rows_fn)(gpu_wdesc, const int32_t *, int64_t, float *);

static const matvec_fn MATVEC[GPU_FMT_COUNT] = GPU_FMT_TABLE(k_matvec);
static const gemm_fn   GEMM[GPU_FMT_COUNT]   = GPU_FMT_TABLE(k_gemm);
static const rows_fn   ROWS[GPU_FMT_COUNT]   = GPU_FMT_TABLE(k_get_rows);
/* MLX affine tables' rows as mx.dequantize gives them (dec1's MX), GPU_AFFINE2 on */
static const rows_fn ROWS_MX[] = {k_get_rows<GPU_AFFINE2, true>, k_get_rows<GPU_AFFINE3, true>,
                                  k_get_rows<GPU_AFFINE4, true>, k_get_rows<GPU_AFFINE5, true>,
                                  k_get_rows<GPU_AFFINE6, true>, k_get_rows<GPU_AFFINE8, true>};

/* Whether a product of T tokens of format f takes the vendor BLAS (gpu_blas.h). */
static bool blas_takes(const gpu_backend *g, int f, int64_t T)
{
    if (f == GPU_F32) return g->blas_f32 && T > MV_SLICED; /* f32 there too: on by default */
    return g->blas_from > 0 && (gpu_mmq_has(g, f) ? T >= g->blas_from : T > MV_SLICED);
}

/* Whether a step of T tokens of format f takes the integer decode kernels (gpu_matvec.cu): not
 * the BLAS path, not the integer matrix units, at most MV_SLICED tokens. */
static bool mvq_takes(const gpu_backend *g, int f, int64_t T)
{
    return !blas_takes(g, f, T) && !gpu_mmq_takes(g, f, T) && T <= MV_SLICED &&
           gpu_matvec_q8_has(f);
}

/* y = x · wᵀ, or with add y += x · wᵀ: the integer kernels add as they write; the others write
 * tmp (T, w.rows), then an add. */
static celer_status product(celer_backend *be, const celer_weight *w, const float *x, int64_t T, float *y, bool add,
                            float *tmp, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    gpu_wdesc    d;
    int          f;
    if (gpu_alive(g, err) || gpu_weight_desc(w, &d, &f, err)) return err->code;
    if (T <= 0) return CELER_OK;
    const bool blas = blas_takes(g, f, T), mmq = !blas && gpu_mmq_takes(g, f, T);
    const bool mvq  = mvq_takes(g, f, T);
    if (add && !mmq && !mvq)
        return product(be, w, x, T, tmp, false, NULL, err) || gpu_add(be, y, tmp, T * w->rows, err) ? err->code
                                                                                                      : CELER_OK;
    if (blas) return gpu_blas_matmul(g, &d, f, x, T, y, err);
    if (mmq) return gpu_mmq(g, &d, f, x, T, y, add, err); /* the integer matrix units */
    if (mvq) { /* small steps: integer dot products, 8 tokens a pass */
        gpu_xq xq;
        if (gpu_quant_x(g, x, T, w->cols, g->mvq_x8, &xq, err)) return err->code;
        return gpu_matvec_q8(g, &d, 1, f, &xq, T, &y, add, err);
    }
    if (T <= MV_SLICED && gpu_matvec_plain_takes(&d, f, x)) return gpu_matvec_plain(g, &d, f, x, T, y, err);
    if (T <= MV_SLICED) { /* small steps (a batch of decodes): the decode kernel, 8 tokens a pass */
        /* a row per 32 lanes, whatever the warp size; few rows (an MoE router's), few a block */
        unsigned  blocks;
        const int threads = w->rows < MV_FEW_ROWS ? MV_FEW_THREADS : MV_THREADS, rows_per = threads / SEG;
        if (gpu_grid(g, w->rows, rows_per, &blocks, "matvec", err)) return err->code;
        for (int64_t t0 = 0; t0 < T; t0 += MV_TOKENS) {
            int64_t n = T - t0 < (int64_t)MV_TOKENS ? T - t0 : (int64_t)MV_TOKENS;
            if (GPU_LAUNCH_KEEPING_XQ(g, err, "matvec", MATVEC[f], blocks, threads, (size_t)n * SEG * 33 * sizeof(float), d,
                           x + t0 * w->cols, n, y + t0 * w->rows))
                return err->code;
        }
        return CELER_OK;
    }
    int64_t bt = (T + TILE_T - 1) / TILE_T;
    if (bt > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: a step of %lld tokens is past the matmul's grid (%lld)",
                          CELER_GPU_NAME, (long long)T, (long long)(GPU_MAX_GRID_YZ * TILE_T));
    unsigned br;
    if (gpu_grid(g, w->rows, TILE_R, &br, "gemm", err)) return err->code;
    return GPU_LAUNCH_KEEPING_XQ(g, err, "gemm", GEMM[f], dim3(br, (unsigned)bt), GEMM_THREADS, 0, d, x, T, y,
                                 gpu_x8_takes(g, f));
}

celer_status gpu_matmul(celer_backend *be, const celer_weight *w, const float *x, int64_t T, float *y,
                        celer_error *err)
{
    return product(be, w, x, T, y, false, NULL, err);
}

/* The port celer_port_matmuls: decode-sized steps quantize x once and run the weights of one
 * format in one launch (past GPU_MMQ_FROM tokens, a matrix-unit product per weight on that one
 * quantization), as do longer steps that the batch kernel takes a chunk at a time (a launch a
 * chunk); anything else, a weight for the vendor BLAS among them, is a matmul per weight. */
extern "C" celer_status celer_gpu_matmuls(celer_backend *be, const celer_weight *const *w, int n, const float *x,
                                          int64_t T, float *const *y, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    gpu_wdesc    d[GPU_MVQ_SET];
    int          f[GPU_MVQ_SET];
    bool         fused = n >= 1 && n <= GPU_MVQ_SET;
    if (gpu_alive(g, err)) return err->code;
    for (int i = 0; fused && i < n; i++) {
        if (gpu_weight_desc(w[i], &d[i], &f[i], err)) return err->code;
        fused = gpu_matvec_q8_has(f[i]) && w[i]->cols == w[0]->cols && !blas_takes(g, f[i], T) &&
                (T <= MV_SLICED || (gpu_mmq_takes(g, f[i], T) && gpu_mmq_small_takes(g, f[i], T)));
    }
    if (!fused) {
        for (int i = 0; i < n; i++)
            if (gpu_matmul(be, w[i], x, T, y[i], err)) return err->code;
        return CELER_OK;
    }
    if (T <= 0) return CELER_OK;
    gpu_xq xq;
    if (gpu_quant_x(g, x, T, w[0]->cols, g->mvq_x8, &xq, err)) return err->code;
    bool done[GPU_MVQ_SET] = {false, false, false};
    for (int i = 0; i < n; i++) { /* the weights of f[i]'s format (and scales' dtype), together */
        if (done[i]) continue;
        /* a batch of decodes: the matrix units, on NVIDIA's batch kernel a launch for the format */
        const bool units = gpu_mmq_takes(g, f[i], T);
        const bool set   = units && gpu_mmq_small_takes(g, f[i], T);
        if (units && !set) {
            if (gpu_mmq_xq(g, &d[i], f[i], &xq, T, y[i], false, err)) return err->code;
            continue;
        }
        gpu_wdesc ds[GPU_MVQ_SET];
        float    *ys[GPU_MVQ_SET];
        int       m = 0;
        for (int j = i; j < n; j++)
            if (!done[j] && f[j] == f[i] && d[j].sdtype == d[i].sdtype) ds[m] = d[j], ys[m++] = y[j], done[j] = true;
        if (set ? gpu_mmq_small_set(g, ds, m, f[i], &xq, T, ys, false, err)
                : gpu_matvec_q8(g, ds, m, f[i], &xq, T, ys, false, err))
            return err->code;
    }
    return CELER_OK;
}

/* Whether celer_gpu_qkv_inputs takes w in one launch: a one-token step whose three weights share
 * a kernel of gpu_matvec_q8_inputs (d, f: their descriptions and format) and whose heads it can
 * rotate; a weight without a description (no kernel here) takes the fallback, which says why. */
static bool qkv_one(const gpu_backend *g, const celer_weight *const *w, const celer_kv_cache *kv, const celer_batch *b,
                    int64_t n_head, int64_t head_dim, const celer_rope *r, gpu_wdesc *d, int *f)
{
    const int64_t kw  = kv->n_kv_heads * head_dim;
    bool          one = g->qkv_in && b->n_tokens == 1 && (r->mode == CELER_ROPE_NORM || r->mode == CELER_ROPE_NEOX) &&
                        gpu_matvec_q8_inputs_heads(head_dim, r->n_rot) && head_dim == kv->head_dim_k &&
                        kv->head_dim_v == head_dim && w[0]->rows == n_head * head_dim && w[1]->rows == kw &&
                        w[2]->rows == kw;
    celer_error none;
    for (int i = 0; one && i < 3; i++)
        one = !gpu_weight_desc(w[i], &d[i], &f[i], &none) && gpu_matvec_q8_inputs_has(f[i], d[i].sdtype) &&
              f[i] == f[0] && d[i].sdtype == d[0].sdtype && w[i]->cols == w[0]->cols && !blas_takes(g, f[i], 1) &&
              !gpu_mmq_takes(g, f[i], 1);
    return one;
}

extern "C" bool celer_gpu_qkv_inputs_one(celer_backend *be, const celer_weight *const *w, const celer_kv_cache *kv,
                                         const celer_batch *b, int64_t n_head, int64_t head_dim, const celer_rope *r)
{
    gpu_wdesc d[3];
    int       f[3];
    return qkv_one(gpu_of(be), w, kv, b, n_head, head_dim, r, d, f);
}

/* The port celer_port_qkv_inputs: a one-token step whose three weights share an integer decode
 * kernel (qkv_one) in one launch, each warp rotating and appending the rows it summed, a RoPE
 * pair at a time (adjacent rows, CELER_ROPE_NORM, or a head's rows i and i + n_rot / 2,
 * CELER_ROPE_NEOX: gpu_matvec_q8_inputs; the attention inputs' kernel saved); anything else the
 * fallback, matmuls then attn_inputs. */
extern "C" celer_status celer_gpu_qkv_inputs(celer_backend *be, const celer_weight *const *w, const float *x,
                                             celer_kv_cache *kv, int32_t layer, const celer_batch *b, float *q,
                                             int64_t n_head, float *k, float *v, int64_t head_dim,
                                             const celer_rope *r, celer_error *err)
{
    gpu_backend *g    = gpu_of(be);
    float *const y[3] = {q, k, v};
    gpu_wdesc    d[3];
    int          f[3];
    if (gpu_alive(g, err)) return err->code;
    if (!qkv_one(g, w, kv, b, n_head, head_dim, r, d, f))
        return celer_gpu_matmuls(be, w, 3, x, b->n_tokens, y, err)
                   ? err->code
                   : celer_gpu_attn_inputs(be, kv, layer, q, n_head, k, v, NULL, NULL, 0.0f, b, head_dim, r, err);
    const int64_t kw = kv->n_kv_heads * head_dim;
    const int32_t *pos, *seq, *tables;
    const double  *fq;
    gpu_xq         xq;
    if (gpu_kv_check(kv, b, false, err) || gpu_batch_upload(g, b, kv, &pos, &seq, &tables, err) ||
        gpu_rope_freqs(g, r, &fq, err) || gpu_quant_x(g, x, 1, w[0]->cols, g->mvq_x8, &xq, err))
        return err->code;
    const gpu_mv_in in = {kv->k[layer],    kv->v[layer],          pos,          seq,
                          tables,          fq,                    kw,           kv->max_blocks,
                          kv->block_size,  (int32_t)head_dim,     (int32_t)r->n_rot, r->pos_scale,
                          r->mscale,       kv->elem_bytes == 2,   r->mode == CELER_ROPE_NEOX};
    return gpu_matvec_q8_inputs(g, d, f[0], &xq, &in, y, err);
}

/* How celer_gpu_matmul_glu runs gate and up: in one launch of the integer decode kernel (a one-token
 * step whose products take it; CELER_GPU_MMQ_FROM=0 puts them elsewhere), of the batch kernel
 * (a batch's step whose pair celer_gpu_matmuls would run there without column parts), or not
 * (GLU_APART: the fallback; CELER_GPU_GLU_FUSE=0 always); d and f: the weights' descriptions and
 * format. */
enum { GLU_APART, GLU_DECODE, GLU_BATCH };
static int glu_launch(const gpu_backend *g, const celer_weight *gate, const celer_weight *up, int64_t T, gpu_wdesc *dg,
                      gpu_wdesc *du, int *f)
{
    int         fu;
    celer_error none;
    if (!g->glu_fuse || T < 1 || gpu_weight_desc(gate, dg, f, &none) || gpu_weight_desc(up, du, &fu, &none) || *f != fu)
        return GLU_APART;
    if (T == 1) return mvq_takes(g, *f, T) && gpu_matvec_q8_glus(dg, du) ? GLU_DECODE : GLU_APART;
    return !blas_takes(g, *f, T) && gpu_mmq_takes(g, *f, T) && gpu_mmq_small_glus(g, dg, du, *f, T) ? GLU_BATCH
                                                                                                        : GLU_APART;
}

extern "C" bool celer_gpu_matmul_glu_one(celer_backend *be, const celer_weight *gate, const celer_weight *up, int64_t T)
{
    gpu_wdesc dg, du;
    int       f;
    return glu_launch(gpu_of(be), gate, up, T, &dg, &du, &f) != GLU_APART;
}

/* The port celer_port_matmul_glu: one launch where glu_launch says so (gpu_matvec_glu.cu,
 * gpu_mmq_small_glu); anything else as its fallback, the products then the glu op. */
extern "C" celer_status celer_gpu_matmul_glu(celer_backend *be, const celer_weight *gate, const celer_weight *up,
                                             const float *x, int64_t T, celer_act act, float *h, float *u,
                                             celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    gpu_wdesc    dg, du;
    int          f;
    if (gpu_alive(g, err)) return err->code;
    const int how = glu_launch(g, gate, up, T, &dg, &du, &f);
    if (how != GLU_APART) {
        gpu_xq xq;
        if (gpu_quant_x(g, x, T, gate->cols, g->mvq_x8, &xq, err)) return err->code;
        return how == GLU_DECODE ? gpu_matvec_q8_glu(g, &dg, &du, f, &xq, T, NULL, act, h, err)
                                 : gpu_mmq_small_glu(g, &dg, &du, f, &xq, T, act, h, err);
    }
    const celer_weight *w[2] = {gate, up};
    float *const        y[2] = {h, u};
    if (celer_gpu_matmuls(be, w, 2, x, T, y, err)) return err->code;
    return gpu_glu(be, h, u, T * gate->rows, act, err);
}

/* The port celer_port_matmul_add (product above). */
extern "C" celer_status celer_gpu_matmul_add(celer_backend *be, const celer_weight *w, const float *x, int64_t T,
                                             float *y, float *tmp, celer_error *err)
{
    return product(be, w, x, T, y, true, tmp, err);
}

/* MLX rows come from the host arrays, as mx.dequantize gives them (quant/mlx_quant.c). */
static celer_status get_rows_mlx(gpu_backend *g, const celer_weight *w, const int32_t *ids, int64_t n, float *y,
                                 celer_error *err)
{
    float *h;
    if (gpu_host_stage(g, (size_t)(n * w->cols) * sizeof *h, (void **)&h, err)) return err->code;
    for (int64_t i = 0; i < n; i++)
        if (celer_mlx_dequant_row(&w->mlx, &w->mlx_data, ids[i], h + i * w->cols, err)) return err->code;
    return gpu_upload(g, y, h, (size_t)(n * w->cols) * sizeof *h, err);
}

/* Rows of w for the n ids at ids (device memory) into y; mx: an MLX affine table's, as
 * mx.dequantize gives them (dec1's MX). */
static celer_status rows_launch(gpu_backend *g, const celer_weight *w, bool mx, const int32_t *ids, int64_t n, float *y,
                                celer_error *err)
{
    gpu_wdesc d;
    int       f;
    unsigned  blocks;
    if (gpu_weight_desc(w, &d, &f, err) || gpu_grid(g, n * (w->cols / 32), 256, &blocks, "get_rows", err))
        return err->code;
    if (mx && (f < GPU_AFFINE2 || f > GPU_AFFINE8))
        return celer_fail(err, CELER_ERR_INVALID, "%s: get_rows of the kept id: MLX format %d", CELER_GPU_NAME, f);
    return GPU_LAUNCH(g, err, "get_rows", mx ? ROWS_MX[f - GPU_AFFINE2] : ROWS[f], blocks, 256, 0, d, ids, n, y);
}

celer_status gpu_get_rows(celer_backend *be, const celer_weight *w, const int32_t *ids, int64_t n, float *y,
                          celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (!ids) { /* the n ids argmax_keep (or sample_keep) left in d_keep (backend.h), read there, never by
                 * the host: the engine and the batcher ask only where every id is a row of w; an MLX
                 * table (loaded here: model.h's embd_kept) gives its rows as the host's lookup does */
        const bool mlx = w->type == CELER_WEIGHT_MLX;
        if (n < 1 || n > g->keep_last || !g->d_keep.p || (mlx && (!w->data || w->mlx.mode != CELER_HF_QUANT_AFFINE)))
            return celer_fail(err, CELER_ERR_INVALID, "%s: get_rows of %lld kept ids: %s", CELER_GPU_NAME, (long long)n,
                              n < 1 || n > g->keep_last ? "more than were kept"
                              : !g->d_keep.p            ? "none kept"
                                                        : "an MLX table not here, or not affine");
        return rows_launch(g, w, mlx, (const int32_t *)g->d_keep.p, n, y, err);
    }
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= w->rows)
            return celer_fail(err, CELER_ERR_INVALID, "%s: token id %d is outside the embedding (%lld rows)",
                              CELER_GPU_NAME, ids[i], (long long)w->rows);
    if (n <= 0) return CELER_OK;
    /* an MLX affine table loaded here gives the host's rows on the device (k_get_rows' MX form):
     * the host's lookup and upload of a 512-token prefill's rows (8 MB of f32 for the 8B) held the
     * device idle, the MLX 8B's pp512 0.70x of Q4_0's on the H100, 0.93x without (docs/benchmarks/
     * gpu-h200.md, forty-sixth pass) */
    const bool mlx = w->type == CELER_WEIGHT_MLX;
    if (mlx && (!w->data || w->mlx.mode != CELER_HF_QUANT_AFFINE)) return get_rows_mlx(g, w, ids, n, y, err);
    if (gpu_buf_reserve(g, &g->d_ids, (size_t)n * sizeof *ids, err) ||
        gpu_upload(g, g->d_ids.p, ids, (size_t)n * sizeof *ids, err))
        return err->code;
    return rows_launch(g, w, mlx, (const int32_t *)g->d_ids.p, n, y, err);
}
