/* Prefill attention on the matrix units (flash attention): a block takes 64 rows, consecutive
 * tokens of the batch for one query head, and walks the keys their sequence shows them in tiles
 * of 64, scores and the weighted sum of values both as f16 products with f32 sums
 * (gpu_hmma_16x8x16), the softmax online in registers. No score matrix is written.
 *
 * Layout of a block: 4 warps, each 16 of the rows. A thread holds rows g = lane / 4 and g + 8 of
 * its warp's 16 and, of every 8 columns of a product, columns 2 (lane % 4) and 2 (lane % 4) + 1
 * (the accumulator layout of mma.m16n8k16). The scores' accumulators are then exactly the A
 * operand the values' product wants (keys as its k), so the probabilities never leave registers.
 * Keys and values are staged per tile in shared memory as f16, both key by key (16-byte stores:
 * values written transposed cost a 16-way bank conflict a store); the values' B operands (two
 * consecutive keys of one column a register) come transposed out of ldmatrix (the staging:
 * gpu_flash.cuh).
 *
 * Rows of different sequences may share a block (a continuous batch): the block takes each
 * sequence of its rows in turn (a pass), its keys from the lowest first visible position to the
 * highest position of that sequence's rows, and every row masks the keys it does not see
 * (another sequence, a later position, before its window). A batch of many one-token rows
 * (decodes) would make a pass per row; the host sends those to gpu_attention.cu's kernel.
 *
 * Precision: q (times the softmax scale), k, v and the probabilities are rounded to f16 (11
 * significant bits); the relative error of an output row is about 1e-3, as with activations
 * quantized for the integer products.
 *
 * A HIP build runs the same blocks on AMD's units instead (gpu_flash_amx.cuh), where the backend
 * takes them (gpu_backend.amx) and its start's self-check agrees (gpu_selfcheck.cu). */
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_flash.cuh"
#if CELER_GPU_AMX
#include "backends/gpu/gpu_flash_amx.cuh"
#endif

template <int HD, typename KT>
__global__ void __launch_bounds__(FL_THREADS)
    k_flash(const float *__restrict__ q, const KT *__restrict__ kc, const KT *__restrict__ vc,
            const int32_t *__restrict__ pos, const int32_t *__restrict__ seq, const int32_t *__restrict__ tables,
            int32_t max_blocks, int32_t block_size, int64_t T, int64_t n_heads, int64_t n_kv_heads, float scale_log2,
            int32_t window, float *__restrict__ out)
{
    gpu_dep_enter();
#if CELER_GPU_IMMA_HERE
    __shared__ __align__(16) uint16_t ks[FL_KEYS][HD + FL_PAD], vs[FL_KEYS][HD + FL_PAD]; /* f16 bits, key by key */
    __shared__ int32_t s_seq[FL_ROWS], s_lo[FL_ROWS], s_hi[FL_ROWS];
    const int64_t t0 = (int64_t)blockIdx.x * FL_ROWS, h = blockIdx.y, kvh = h / (n_heads / n_kv_heads);
    const int64_t kw = n_kv_heads * HD;
    const int     lane = threadIdx.x % 32, w = threadIdx.x / 32, g = lane / 4, c2 = 2 * (lane % 4);
    fl_rows(pos, seq, t0, T, window, s_seq, s_lo, s_hi);
    /* q of rows g and g + 8, scaled for exp2, as A fragments: 16 columns a step */
    const int r0 = w * 16 + g, r1 = r0 + 8;
    uint32_t  qa[HD / 16][4];
    fl_q_frags<HD>(q + ((t0 + r0) * n_heads + h) * HD, q + ((t0 + r1) * n_heads + h) * HD, t0 + r0 < T, t0 + r1 < T,
                   c2, scale_log2, qa);
    float o[HD / 8][4];
#pragma unroll
    for (int nd = 0; nd < HD / 8; nd++) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.0f;
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    __syncthreads();
    const int32_t seq0 = s_seq[r0], lo0 = s_lo[r0], hi0 = s_hi[r0];
    const int32_t seq1 = s_seq[r1], lo1 = s_lo[r1], hi1 = s_hi[r1];

    /* a pass per sequence of the rows, in increasing order */
    for (int32_t prev = -1, s, klo, khi; fl_next_pass(s_seq, s_lo, s_hi, prev, &s, &klo, &khi); prev = s) {
        const int32_t *table = tables + (int64_t)s * max_blocks;
        for (int32_t j0 = klo; j0 <= khi; j0 += FL_KEYS) {
            __syncthreads(); /* the previous tile is consumed */
            constexpr int PER = FL_KEYS * HD / 4 / FL_THREADS; /* a thread's pieces of 4 values */
            static_assert(PER % FL_BATCH == 0, "whole batches");
#pragma unroll
            for (int i0 = 0; i0 < PER; i0 += FL_BATCH) {
                uint2 k4[FL_BATCH], v4[FL_BATCH]; /* f16 pairs; zeros past the keys */
                fl_fetch<HD, KT>(k4, v4, kc, vc, table, block_size, kw, kvh, j0, khi, i0);
#pragma unroll
                for (int i = 0; i < FL_BATCH; i++) {
                    const int e = threadIdx.x + (i0 + i) * FL_THREADS, kj = e / (HD / 4), d = e % (HD / 4) * 4;
                    *(uint2 *)&ks[kj][d] = k4[i], *(uint2 *)&vs[kj][d] = v4[i];
                }
            }
            __syncthreads();
            const int32_t j1   = j0 + FL_KEYS - 1;
            const bool    mine = (seq0 == s && lo0 <= j1 && hi0 >= j0) || (seq1 == s && lo1 <= j1 && hi1 >= j0);
            if (!gpu_any(mine)) continue; /* none of this warp's rows sees the tile */
            float sc[FL_KEYS / 8][4];
#pragma unroll
            for (int nb = 0; nb < FL_KEYS / 8; nb++) sc[nb][0] = sc[nb][1] = sc[nb][2] = sc[nb][3] = 0.0f;
#pragma unroll
            for (int kk = 0; kk < HD / 16; kk++)
#pragma unroll
                for (int nb = 0; nb < FL_KEYS / 8; nb++) {
                    const uint16_t *kr = &ks[nb * 8 + g][kk * 16 + c2];
                    gpu_hmma_16x8x16(sc[nb], qa[kk], *(const uint32_t *)kr, *(const uint32_t *)(kr + 8));
                }
            float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
            for (int nb = 0; nb < FL_KEYS / 8; nb++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int32_t j = j0 + nb * 8 + c2 + e;
                    if (!(seq0 == s && j >= lo0 && j <= hi0)) sc[nb][e] = -INFINITY;
                    if (!(seq1 == s && j >= lo1 && j <= hi1)) sc[nb][2 + e] = -INFINITY;
                    mx0 = fmaxf(mx0, sc[nb][e]), mx1 = fmaxf(mx1, sc[nb][2 + e]);
                }
            mx0 = fmaxf(mx0, gpu_shfl_xor(mx0, 1)), mx0 = fmaxf(mx0, gpu_shfl_xor(mx0, 2));
            mx1 = fmaxf(mx1, gpu_shfl_xor(mx1, 1)), mx1 = fmaxf(mx1, gpu_shfl_xor(mx1, 2));
            const float n0 = fmaxf(m0, mx0), n1 = fmaxf(m1, mx1);
            const float b0 = n0 == -INFINITY ? 0.0f : n0, b1 = n1 == -INFINITY ? 0.0f : n1; /* no key yet */
            const float f0 = exp2f(m0 - b0), f1 = exp2f(m1 - b1);
            m0 = n0, m1 = n1, l0 *= f0, l1 *= f1;
#pragma unroll
            for (int nd = 0; nd < HD / 8; nd++) o[nd][0] *= f0, o[nd][1] *= f0, o[nd][2] *= f1, o[nd][3] *= f1;
#pragma unroll
            for (int nb = 0; nb < FL_KEYS / 8; nb++) {
                sc[nb][0] = exp2f(sc[nb][0] - b0), sc[nb][1] = exp2f(sc[nb][1] - b0);
                sc[nb][2] = exp2f(sc[nb][2] - b1), sc[nb][3] = exp2f(sc[nb][3] - b1);
                l0 += sc[nb][0] + sc[nb][1], l1 += sc[nb][2] + sc[nb][3];
            }
#pragma unroll
            for (int kk = 0; kk < FL_KEYS / 16; kk++) { /* the probabilities of 16 keys as A */
                const uint32_t pa[4] = {gpu_half2_bits(sc[2 * kk][0], sc[2 * kk][1]),
                                        gpu_half2_bits(sc[2 * kk][2], sc[2 * kk][3]),
                                        gpu_half2_bits(sc[2 * kk + 1][0], sc[2 * kk + 1][1]),
                                        gpu_half2_bits(sc[2 * kk + 1][2], sc[2 * kk + 1][3])};
#pragma unroll
                for (int nd = 0; nd < HD / 8; nd += 2) { /* lanes 8i ..: keys 8 (i % 2) .., columns of nd + i / 2 */
                    uint32_t b[4];
                    gpu_ldsm_x4_trans(b, &vs[kk * 16 + lane / 8 % 2 * 8 + lane % 8][(nd + lane / 16) * 8]);
                    gpu_hmma_16x8x16(o[nd], pa, b[0], b[1]);
                    gpu_hmma_16x8x16(o[nd + 1], pa, b[2], b[3]);
                }
            }
        }
    }
    /* the row sums are spread over the 4 lanes of a row */
    l0 += gpu_shfl_xor(l0, 1), l0 += gpu_shfl_xor(l0, 2);
    l1 += gpu_shfl_xor(l1, 1), l1 += gpu_shfl_xor(l1, 2);
    const float i0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, i1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
    float      *o0 = out + ((t0 + r0) * n_heads + h) * HD, *o1 = out + ((t0 + r1) * n_heads + h) * HD;
#pragma unroll
    for (int nd = 0; nd < HD / 8; nd++) {
        if (t0 + r0 < T) *(float2 *)(o0 + nd * 8 + c2) = make_float2(o[nd][0] * i0, o[nd][1] * i0);
        if (t0 + r1 < T) *(float2 *)(o1 + nd * 8 + c2) = make_float2(o[nd][2] * i1, o[nd][3] * i1);
    }
#else
    (void)q, (void)kc, (void)vc, (void)pos, (void)seq, (void)tables, (void)max_blocks, (void)block_size, (void)T;
    (void)n_heads, (void)n_kv_heads, (void)scale_log2, (void)window, (void)out;
#endif
}

bool gpu_flash_has(const gpu_backend *g)
{
    return !g->flash_off && (CELER_GPU_AMX ? g->amx != CELER_AMX_NONE : gpu_imma_ok(&g->prop));
}

bool gpu_flash_takes(const gpu_backend *g, const celer_batch *b, const celer_attn *a)
{
    if (!gpu_flash_has(g) || (a->head_dim != 64 && a->head_dim != 128)) return false;
    int64_t runs = 1; /* runs of one sequence's tokens: few long ones, or a batch of decodes */
    for (int64_t i = 1; i < b->n_tokens; i++) runs += b->seq[i] != b->seq[i - 1];
    return b->n_tokens >= FL_MIN_RUN * runs;
}

/* The launch over the cache's pools of values KT (gpu_kv.cuh). */
template <typename KT>
static celer_status flash_launch(gpu_backend *g, const float *q, const celer_kv_cache *kv, int32_t layer,
                                 const int32_t *pos, const int32_t *seq, const int32_t *tables, const celer_batch *b,
                                 const celer_attn *a, float *out, celer_error *err)
{
    const dim3  grid((unsigned)((b->n_tokens + FL_ROWS - 1) / FL_ROWS), (unsigned)a->n_heads);
    const float sl2 = a->scale * 1.4426950408889634f; /* scores in base 2: exp2f */
    const KT   *kc = (const KT *)kv->k[layer], *vc = (const KT *)kv->v[layer];
#if CELER_GPU_AMX
    const auto fn = a->head_dim == 64 ? k_flash_amx<64, KT> : k_flash_amx<128, KT>;
#else
    const auto fn = a->head_dim == 64 ? k_flash<64, KT> : k_flash<128, KT>;
#endif
    return GPU_LAUNCH(g, err, "flash attention", fn, grid, FL_THREADS, 0, q, kc, vc, pos, seq, tables, kv->max_blocks,
                      kv->block_size, (int64_t)b->n_tokens, a->n_heads, a->n_kv_heads, sl2, a->window, out);
}

celer_status gpu_flash_attention(gpu_backend *g, const float *q, const celer_kv_cache *kv, int32_t layer,
                                 const int32_t *pos, const int32_t *seq, const int32_t *tables, const celer_batch *b,
                                 const celer_attn *a, float *out, celer_error *err)
{
    return kv->elem_bytes == 2 ? flash_launch<uint16_t>(g, q, kv, layer, pos, seq, tables, b, a, out, err)
                               : flash_launch<float>(g, q, kv, layer, pos, seq, tables, b, a, out, err);
}
