/* Decode attention of a batch on the matrix units: one block a (token, key head), its rows the
 * key head's query heads (up to 16: one mma row tile, the rows past the group zeros), so that
 * each key scores for every head of its group in one product. gpu_attention.cu's k_attention
 * serves the same heads from each key, but a lane holds a few values of every head and sums them
 * over the warp by shuffles: per key and head about twenty instructions in a chain of round
 * trips: a step of 32 sequences of the 8B after 128 to 256 tokens spent ~37 µs a layer there,
 * where its f32 keys and values (~50 MB) take ~17 µs at an H100's copy bandwidth
 * (docs/benchmarks/gpu-h200.md, fifty-second pass).
 *
 * The block's 4 warps take 16 keys each of every 64, each on its own (no barrier until the
 * merge): it copies its keys and values into its own rows of shared memory as the cache holds
 * them (f32 or f16, cp.async; zeros past the token's position), the next pass's keys landing in a
 * second stage while this pass's are scored, the next values once this pass's are read, and the
 * cache slots looked up a pass ahead. It scores them against the query heads (f16 mma with f32
 * sums, as the prefill's gpu_flash.cu: q times the softmax scale, k, v and the probabilities
 * rounded to f16) and keeps an online softmax per head; the warps' results are merged at the end.
 * The output is quantized on the way out for the o-projection (gpu_matvec.h's held
 * quantization), as k_attention leaves it.
 *
 * It takes the steps of a batch (att_split.h's celer_att_mma: 512 query rows or more below 4,096
 * keys), heads of 64 and 128 values, up to 16 query heads a key head, where the matrix units are
 * NVIDIA's (gpu_att_mma_takes; CELER_GPU_ATT_MMA=0: none); the rest stay on k_attention. On an
 * H100 the 8B's batch of 32 after 128 + 128 tokens decoded 4.1% faster than on k_attention, 8.8%
 * after 512, 64 sequences 4.8%; 16 sequences and Qwen3-0.6B's 32 (groups of 2) level
 * (docs/benchmarks/gpu-h200.md, fifty-fourth pass). */
#include "backends/gpu/gpu_att_mma.h"
#include "backends/gpu/gpu_flash.cuh"
extern "C" {
#include "backends/gpu/att_split.h"
}

#include <math.h>

/* AM_KEYS: a warp's keys a pass (two n-tiles of 8, one k16 step of the values' product) */
enum { AM_WARPS = 4, AM_KEYS = 16, AM_ROWS = 16 };

/* A warp's rows of keys (two stages: the next pass's copies land while this pass is scored) and
 * of values in shared memory, values of KT as the cache holds them (f32, or f16 bits), with
 * padding so that neither the keys' pairs (lane 4 g + q: key g, columns 2 q, 2 q + 1) nor the
 * values' columns (keys 2 q, 2 q + 1 at column g) meet in a bank: f32 keys' rows of HD + 8 (word
 * 8 g + 2 q), f32 values' of HD + 4 (word 8 q + g); f16 rows of HD + 8 halves (words 4 g + q, and
 * 8 q + g / 2), every row at a multiple of 16 bytes for cp.async. */
template <int HD, typename KT> struct am_shape {
    static constexpr int KS = HD + 8, VS = HD + (sizeof(KT) == 4 ? 4 : 8);
    static constexpr int EP = 16 / (int)sizeof(KT);          /* values a 16-byte copy */
    static constexpr int PER = AM_KEYS * HD / EP / 32;       /* a lane's copies of the keys (and of the values) */
    static constexpr int WARP_BYTES = (int)sizeof(KT) * AM_KEYS * (2 * KS + VS);
};

#if CELER_GPU_IMMA_HERE /* (unused where the kernel compiles to nothing) */
/* Columns c, c + 1 of a row of keys as an f16 pair (the lower in the low half). */
static __device__ __forceinline__ uint32_t am_pair(const float *r, int c) { return gpu_half2_bits(r[c], r[c + 1]); }
static __device__ __forceinline__ uint32_t am_pair(const uint16_t *r, int c) { return *(const uint32_t *)(r + c); }
/* Column c of rows k and k + 1 of values (row stride vs) as an f16 pair. */
static __device__ __forceinline__ uint32_t am_col(const float *v, int vs, int k, int c)
{
    return gpu_half2_bits(v[k * vs + c], v[(k + 1) * vs + c]);
}
static __device__ __forceinline__ uint32_t am_col(const uint16_t *v, int vs, int k, int c)
{
    return (uint32_t)v[k * vs + c] | (uint32_t)v[(k + 1) * vs + c] << 16;
}
/* The cache slot of key j0 + lane % 16 of a sequence's table, -1 past p (the lanes share them by
 * shuffles). */
static __device__ __forceinline__ int32_t am_slot(const int32_t *table, int32_t block_size, int32_t j0, int32_t p,
                                                  int lane)
{
    const int32_t j = j0 + lane % AM_KEYS;
    return j <= p ? table[j / block_size] * block_size + j % block_size : -1;
}
/* A warp's copies of its 16 keys' rows of key head kvh (slots my, zeros for -1) from a cache of
 * rows kw values apart to shared rows stride values apart. */
template <int HD, typename KT>
static __device__ __forceinline__ void am_copy(gpu_smem dst, int stride, const KT *src, int32_t my, int64_t kw,
                                               int64_t kvh, int lane)
{
    typedef am_shape<HD, KT> S;
#pragma unroll
    for (int i = 0; i < S::PER; i++) {
        const int     e = lane + 32 * i, kj = e / (HD / S::EP), d = e % (HD / S::EP) * S::EP;
        const int32_t slot = gpu_shfl(my, kj);
        const int64_t off  = (int64_t)(slot >= 0 ? slot : 0) * kw + kvh * HD + d;
        gpu_cp_async16_at(dst + (int)sizeof(KT) * (kj * stride + d), src + off, slot >= 0);
    }
}
#endif

/* Token blockIdx.x's query heads of key head blockIdx.y over its sequence's keys lo .. pos. */
template <int HD, typename KT>
__global__ void __launch_bounds__(AM_WARPS * 32)
    k_att_mma(const float *__restrict__ q, const KT *__restrict__ kc, const KT *__restrict__ vc,
              const int32_t *__restrict__ pos, const int32_t *__restrict__ seq, const int32_t *__restrict__ tables,
              int32_t max_blocks, int32_t block_size, int64_t n_heads, int64_t n_kv_heads, float scale_log2,
              int32_t window, float *__restrict__ out, gpu_xq_out xo)
{
    gpu_dep_deferred(); /* the token's position, sequence and table, uploaded before the step's kernels, are read first */
#if !CELER_GPU_IMMA_HERE
    gpu_dep_enter();
    (void)q, (void)kc, (void)vc, (void)pos, (void)seq, (void)tables, (void)max_blocks, (void)block_size;
    (void)n_heads, (void)n_kv_heads, (void)scale_log2, (void)window, (void)out, (void)xo;
#else
    typedef am_shape<HD, KT> S;
    constexpr int KS = S::KS, VS = S::VS;
    static_assert((AM_ROWS * HD + 2 * AM_ROWS) * 4 <= S::WARP_BYTES, "the merge's rows fit the stages");
    GPU_DYN_SHARED(float, am_smem);
    const int     lane = threadIdx.x % 32, w = threadIdx.x / 32, g = lane / 4, c2 = 2 * (lane % 4);
    const int64_t t = blockIdx.x, kvh = blockIdx.y, G = n_heads / n_kv_heads, kw = n_kv_heads * HD;
    const int32_t p = pos[t], lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    const int32_t *table = tables + (int64_t)seq[t] * max_blocks;
    KT *const     kb = (KT *)((int8_t *)am_smem + w * S::WARP_BYTES), *vs = kb + 2 * AM_KEYS * KS;
    const gpu_smem sk = gpu_smem_at(kb), sv = gpu_smem_at(vs);
    constexpr int  STEP = AM_WARPS * AM_KEYS, KBYTES = (int)sizeof(KT) * AM_KEYS * KS;
    /* the warp's passes j0 = lo + 16 w, + 64, ..: each pass's slots looked up a pass ahead */
    const int32_t first = lo + w * AM_KEYS;
    const int32_t my0 = am_slot(table, block_size, first, p, lane);
    int32_t       nx  = am_slot(table, block_size, first + STEP, p, lane);
    gpu_dep_enter(); /* the kernel before wrote q and this step's keys and values */
    if (first <= p) {
        am_copy<HD>(sk, KS, kc, my0, kw, kvh, lane);
        gpu_cp_commit();
        am_copy<HD>(sv, VS, vc, my0, kw, kvh, lane);
        gpu_cp_commit();
    }
    /* q of rows g and g + 8 (heads kvh · G + row; zeros past G), scaled for exp2, as A fragments */
    uint32_t     qa[HD / 16][4];
    const float *q0 = q + (t * n_heads + kvh * G + g) * HD;
    fl_q_frags<HD>(q0, q0 + 8 * HD, g < G, g + 8 < G, c2, scale_log2, qa);
    float o[HD / 8][4];
#pragma unroll
    for (int nd = 0; nd < HD / 8; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    /* Copies in flight at a pass's start: its keys and values (stage s), then the next pass's keys
     * (stage s ^ 1) join them; the next values follow once this pass's are read. Empty groups past
     * the end keep the counts. */
    for (int32_t j0 = first, s = 0; j0 <= p; j0 += STEP, s ^= 1) {
        const bool more = j0 + STEP <= p;
        if (more) am_copy<HD>(sk + (s ^ 1) * KBYTES, KS, kc, nx, kw, kvh, lane);
        gpu_cp_commit();
        const int32_t after = am_slot(table, block_size, j0 + 2 * STEP, p, lane);
        gpu_cp_wait<2>();
        __syncwarp(); /* every lane's copies of this pass's keys landed */
        const KT *ks = kb + s * AM_KEYS * KS;
        float     sc[2][4];
#pragma unroll
        for (int nb = 0; nb < 2; nb++) sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
            for (int nb = 0; nb < 2; nb++) { /* key nb · 8 + g, dimensions kk · 16 + c2 .. and + 8 .. */
                const KT *kr = ks + (nb * 8 + g) * KS + kk * 16 + c2;
                gpu_hmma_16x8x16(sc[nb], qa[kk], am_pair(kr, 0), am_pair(kr, 8));
            }
        float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
        for (int nb = 0; nb < 2; nb++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                if (j0 + nb * 8 + c2 + e > p) sc[nb][e] = sc[nb][2 + e] = -INFINITY;
                mx0 = fmaxf(mx0, sc[nb][e]), mx1 = fmaxf(mx1, sc[nb][2 + e]);
            }
        mx0 = fmaxf(mx0, gpu_shfl_xor(mx0, 1)), mx0 = fmaxf(mx0, gpu_shfl_xor(mx0, 2));
        mx1 = fmaxf(mx1, gpu_shfl_xor(mx1, 1)), mx1 = fmaxf(mx1, gpu_shfl_xor(mx1, 2));
        const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1); /* finite: key j0 is seen */
        const float f0 = exp2f(m0 - n0), f1 = exp2f(m1 - n1);
        m0 = n0, m1 = n1, l0 *= f0, l1 *= f1;
#pragma unroll
        for (int nd = 0; nd < HD / 8; nd++) o[nd][0] *= f0, o[nd][1] *= f0, o[nd][2] *= f1, o[nd][3] *= f1;
#pragma unroll
        for (int nb = 0; nb < 2; nb++) {
            sc[nb][0] = exp2f(sc[nb][0] - n0), sc[nb][1] = exp2f(sc[nb][1] - n0);
            sc[nb][2] = exp2f(sc[nb][2] - n1), sc[nb][3] = exp2f(sc[nb][3] - n1);
            l0 += sc[nb][0] + sc[nb][1], l1 += sc[nb][2] + sc[nb][3];
        }
        const uint32_t pa[4] = {gpu_half2_bits(sc[0][0], sc[0][1]), gpu_half2_bits(sc[0][2], sc[0][3]),
                                gpu_half2_bits(sc[1][0], sc[1][1]), gpu_half2_bits(sc[1][2], sc[1][3])};
        gpu_cp_wait<1>();
        __syncwarp(); /* and of its values */
#pragma unroll
        for (int nd = 0; nd < HD / 8; nd++) /* keys c2, c2 + 1 and c2 + 8, c2 + 9 at column nd · 8 + g */
            gpu_hmma_16x8x16(o[nd], pa, am_col(vs, VS, c2, nd * 8 + g), am_col(vs, VS, c2 + 8, nd * 8 + g));
        __syncwarp(); /* the values are read before the next pass's land there */
        if (more) am_copy<HD>(sv, VS, vc, nx, kw, kvh, lane);
        gpu_cp_commit();
        nx = after;
    }
    /* every warp's stages are read before the merge's rows overwrite them */
    __syncthreads();
    /* the row sums are spread over the 4 lanes of a row; then each warp's rows into shared memory
     * (the stages, free now), and the block's outputs merged over the warps */
    l0 += gpu_shfl_xor(l0, 1), l0 += gpu_shfl_xor(l0, 2);
    l1 += gpu_shfl_xor(l1, 1), l1 += gpu_shfl_xor(l1, 2);
    float *s_o = am_smem + w * AM_ROWS * HD, *s_ml = am_smem + AM_WARPS * AM_ROWS * HD + w * 2 * AM_ROWS;
#pragma unroll
    for (int nd = 0; nd < HD / 8; nd++) {
        *(float2 *)(s_o + g * HD + nd * 8 + c2)       = make_float2(o[nd][0], o[nd][1]);
        *(float2 *)(s_o + (g + 8) * HD + nd * 8 + c2) = make_float2(o[nd][2], o[nd][3]);
    }
    if (lane % 4 == 0) s_ml[g] = m0, s_ml[g + 8] = m1, s_ml[AM_ROWS + g] = l0, s_ml[AM_ROWS + g + 8] = l1;
    __syncthreads();
    const float *ml = am_smem + AM_WARPS * AM_ROWS * HD;
    const int    n  = (int)G * HD;
    for (int r0 = 0; r0 < n; r0 += AM_WARPS * 32) { /* whole warps: consecutive lanes, one block of 32 values */
        const int r = r0 + (int)threadIdx.x, row = r / HD, i = r % HD;
        const bool live = r < n;
        float      M = -INFINITY, L = 0.0f, v = 0.0f;
        if (live) {
            for (int k = 0; k < AM_WARPS; k++) M = fmaxf(M, ml[k * 2 * AM_ROWS + row]);
            for (int k = 0; k < AM_WARPS; k++) {
                const float mk = ml[k * 2 * AM_ROWS + row], f = mk == -INFINITY ? 0.0f : exp2f(mk - M);
                L += ml[k * 2 * AM_ROWS + AM_ROWS + row] * f, v += am_smem[k * AM_ROWS * HD + row * HD + i] * f;
            }
        }
        const int64_t h = t * n_heads + kvh * G + row;
        const float   y = L > 0.0f ? v / L : 0.0f;
        if (live) out[h * HD + i] = y;
        if (xo.q) {
            const float yv[1] = {y};
            xq_put<1>(yv, i % 32, (h * HD + i) / 32, live, xo);
        }
    }
#endif
}

bool gpu_att_mma_takes(const gpu_backend *g, const celer_kv_cache *kv, const celer_attn *a, int32_t far, int64_t rows)
{
    return g->att_mma && !g->flash_off && !CELER_GPU_AMX && gpu_imma_ok(&g->prop) &&
           (kv->elem_bytes == 4 || kv->elem_bytes == 2) &&
           celer_att_mma(far, rows, a->head_dim, a->n_heads / a->n_kv_heads);
}

/* The launch over the cache's pools of values KT. */
template <typename KT>
static celer_status am_launch(gpu_backend *g, const float *q, const celer_kv_cache *kv, int32_t layer,
                              const int32_t *pos, const int32_t *seq, const int32_t *tables, const celer_batch *b,
                              const celer_attn *a, float *out, gpu_xq_out xo, celer_error *err)
{
    const auto   fn   = a->head_dim == 64 ? k_att_mma<64, KT> : k_att_mma<128, KT>;
    const size_t smem = (size_t)AM_WARPS * (size_t)(a->head_dim == 64 ? am_shape<64, KT>::WARP_BYTES
                                                                        : am_shape<128, KT>::WARP_BYTES);
    if (gpu_allow_smem(g, (const void *)fn, smem, err)) return err->code;
    const float sl2 = a->scale * 1.4426950408889634f; /* scores in base 2: exp2f */
    return GPU_LAUNCH(g, err, "attention", fn, dim3((unsigned)b->n_tokens, (unsigned)a->n_kv_heads), AM_WARPS * 32, smem,
                      q, (const KT *)kv->k[layer], (const KT *)kv->v[layer], pos, seq, tables, kv->max_blocks,
                      kv->block_size, a->n_heads, a->n_kv_heads, sl2, a->window, out, xo);
}

celer_status gpu_att_mma(gpu_backend *g, const float *q, const celer_kv_cache *kv, int32_t layer, const int32_t *pos,
                         const int32_t *seq, const int32_t *tables, const celer_batch *b, const celer_attn *a,
                         float *out, gpu_xq_out xo, celer_error *err)
{
    return kv->elem_bytes == 2 ? am_launch<uint16_t>(g, q, kv, layer, pos, seq, tables, b, a, out, xo, err)
                               : am_launch<float>(g, q, kv, layer, pos, seq, tables, b, a, out, xo, err);
}
