/* Attention over the paged KV cache on the GPU, for decode, and for prefill where the matrix
 * units cannot take it (gpu_flash.cu; gpu_flash_takes says when): one block per (token, key
 * head, split), serving the key head's query heads (up to a bound; more take more blocks) from
 * each key and value it loads — one block a query head read each key four times for Llama 3's
 * grouping. The block's warps take the visible keys of its split in turn, each keeping per head
 * an online softmax (running max and sum) and its share of the output row in registers, and the
 * warps' partial results are merged at the end; no score buffer grows with the context, and
 * tokens of different sequences and lengths share one launch (a continuous batch).
 *
 * Steps of few tokens (decode) split the keys over more blocks (att_split.h says how many): one
 * block walking 4,000 keys waits on memory at every few of them. Each split writes
 * its max, sum and unnormalized output, and the last split of each (token, block of heads) to
 * finish merges them in split order (or a second kernel, CELER_GPU_ATT_MERGE_IN=0). At short
 * contexts, whose keys fit a few passes of a 512-thread block, such steps run unsplit instead, a
 * wide block a query head (celer_att_wide): the merge cost more than walking the keys.
 *
 * Head sizes that are a multiple of 32 also leave the output quantized for the o-projection's
 * integer kernels (held quantization, gpu_matvec.h): that product then skips its quantizer. */
#include "backends/gpu/gpu_kv.cuh"
#include "backends/gpu/gpu_matvec.h"
extern "C" {
#include "backends/gpu/att_split.h"
}

#include <math.h>

/* ATT_SPLITS_MAX: a block's heads' merge weights (GMAX of them, each up to this many splits)
 * fit its accumulators' shared memory; longer contexts take longer splits (att_split.h) */
enum { ATT_THREADS = 128, ATT_WIDE_THREADS = 512, HD_MAX = 512, ATT_SPLITS_MAX = 512 };

/* Value i of an output row (its first value is value base of the step's output), and with xo.q
 * its quantization for the o-projection (the X32 format, gpu_matvec.h): a warp's 32 lanes hold
 * 32 consecutive values of one block when the head size is a multiple of 32, the only case
 * that passes one. */
static __device__ __forceinline__ void put_out(float *o, int64_t i, float r, int64_t base, const gpu_xq_out &xo)
{
    o[i] = r;
    if (!xo.q) return;
    const float v[1] = {r};
    xq_put<1>(v, (int)(i % 32), (base + i) / 32, true, xo);
}

/* A warp's N partial sums (N a power of two up to the warp) summed over its lanes, every sum
 * left on every lane: N - 1 shuffles fold them so that lane l holds sum l % N, a few more add
 * the groups of N lanes, N broadcast them (where summing each alone takes 5 N). */
template <int N> static __device__ __forceinline__ void warp_sums(float (&v)[N], int lane)
{
#pragma unroll
    for (int r = N / 2; r >= 1; r /= 2) {
        const bool up = lane & r;
#pragma unroll
        for (int i = 0; i < r; i++) {
            const float send = up ? v[i] : v[i + r], keep = up ? v[i + r] : v[i];
            v[i]             = keep + gpu_shfl_xor(send, r);
        }
    }
    float s = v[0];
#pragma unroll
    for (int r = N; r < CELER_WARP; r *= 2) s += gpu_shfl_xor(s, r);
#pragma unroll
    for (int i = 0; i < N; i++) v[i] = gpu_shfl(s, i);
}

/* The cache slots of keys j0 .. j0 + K - 1 through the sequence's block table, -1 for those past
 * hi (none read: masked by the caller). */
template <int K>
static __device__ __forceinline__ void att_slots(const int32_t *table, int32_t block_size, int32_t j0, int32_t hi,
                                                 int64_t (&slot)[K])
{
#pragma unroll
    for (int j = 0; j < K; j++)
        slot[j] = j0 + j <= hi ? (int64_t)table[(j0 + j) / block_size] * block_size + (j0 + j) % block_size : -1;
}

/* A pass's keys and values of a warp (zeros for a slot of -1) into kr and vr: a lane's NV values
 * of each row, VW consecutive ones at VW lane + VW · warp · c. */
template <int KPW, int NV, int VW, typename KT>
static __device__ __forceinline__ void att_load(const KT *__restrict__ kc, const KT *__restrict__ vc,
                                                const int64_t (&slot)[KPW], int64_t kw, int64_t off, int64_t hd,
                                                int lane, float (&kr)[KPW][NV], float (&vr)[KPW][NV])
{
#pragma unroll
    for (int j = 0; j < KPW; j++) {
        const KT *kp = kc + slot[j] * kw + off, *vp = vc + slot[j] * kw + off;
#pragma unroll
        for (int c = 0; c < NV / VW; c++) {
            const int64_t i = VW * lane + VW * CELER_WARP * c; /* VW 2: wave64, heads up to 128 */
            if (i < hd && slot[j] >= 0) kv_get_n<VW>(kp + i, &kr[j][VW * c]), kv_get_n<VW>(vp + i, &vr[j][VW * c]);
            else
#pragma unroll
                for (int e = 0; e < VW; e++) kr[j][VW * c + e] = 0.0f, vr[j][VW * c + e] = 0.0f;
        }
    }
}

/* The outputs of heads row0 .. row0 + ng - 1 (rows of the step's output, consecutive): the merge
 * of each one's splits' partial results (split z's max, sum and hd unnormalized values at
 * part + (row · splits + z) · (hd + 2)), in split order, into out (and its quantization). All the
 * heads at once: warp w takes the maxima and sums of heads w, w + warps, ... (the loads of many
 * splits in flight) and leaves each split's weight in s_w (ng · splits floats) and each head's
 * sum in s_l; then each thread sums MERGE_OUTS outputs over the splits together, their loads in
 * flight at once — one chain of round trips to the L2 for all the heads, where one head after
 * another made a chain each (~20 µs a layer of the 8B after 512 tokens: 64 splits of 4 heads).
 * Each output's sum runs in split order: the same values as one head at a time. P: how the
 * partials are read (volatile: written by other blocks of the running kernel, past this SM's
 * L1). Every thread of the block calls it. */
enum { MERGE_OUTS = 4 };
template <typename P>
static __device__ __forceinline__ void merge_heads(P *part, int64_t row0, int ng, int32_t splits, int64_t hd,
                                                   float *out, const gpu_xq_out &xo, float *s_w, float *s_l)
{
    const int     lane = threadIdx.x % CELER_WARP, wid = threadIdx.x / CELER_WARP, nw = blockDim.x / CELER_WARP;
    const int64_t st = hd + 2, n = ng * hd;
    for (int g = wid; g < ng; g += nw) {
        P    *pr = part + (row0 + g) * splits * st;
        float M = -INFINITY, L = 0.0f;
        for (int32_t z = lane; z < splits; z += CELER_WARP) M = fmaxf(M, pr[z * st]);
        M = gpu_warp_max(M);
        for (int32_t z = lane; z < splits; z += CELER_WARP) {
            const float mz = pr[z * st], w = mz == -INFINITY ? 0.0f : expf(mz - M); /* -inf: no key there */
            s_w[g * splits + z] = w, L += pr[z * st + 1] * w;
        }
        L = gpu_warp_sum(L);
        if (lane == 0) s_l[g] = L;
    }
    __syncthreads();
    for (int64_t r = threadIdx.x; r < n; r += MERGE_OUTS * (int64_t)blockDim.x) {
        P           *pv[MERGE_OUTS];
        const float *wv[MERGE_OUTS];
        float        v[MERGE_OUTS];
        bool         live[MERGE_OUTS];
#pragma unroll
        for (int k = 0; k < MERGE_OUTS; k++) {
            const int64_t rk = r + k * (int64_t)blockDim.x, g = rk < n ? rk / hd : 0, i = rk % hd;
            live[k] = rk < n, v[k] = 0.0f;
            pv[k] = part + (row0 + g) * splits * st + 2 + i, wv[k] = s_w + g * splits;
        }
#pragma unroll 8
        for (int32_t z = 0; z < splits; z++)
#pragma unroll
            for (int k = 0; k < MERGE_OUTS; k++)
                if (live[k]) v[k] += pv[k][z * st] * wv[k][z];
#pragma unroll
        for (int k = 0; k < MERGE_OUTS; k++) {
            if (!live[k]) continue;
            const int64_t rk = r + k * (int64_t)blockDim.x, g = rk / hd, i = rk % hd, row = row0 + g;
            const float   L  = s_l[g];
            put_out(out + row * hd, i, L > 0.0f ? v[k] / L : 0.0f, row * hd, xo);
        }
    }
}

/* HDC: the head-size class (128, 256 or 512; heads up to it, a multiple of 4). A lane holds NV
 * of a row's values, VW consecutive ones at VW lane + VW · warp · c (each load instruction of a
 * warp reads a contiguous run of the row); a block takes up to GMAX of one key head's query
 * heads, so that each key and value it loads serves all of them, GMAX · NV accumulators a lane. */
static constexpr __host__ __device__ int att_gmax(int hdc) { return 1024 / hdc; }

/* Split blockIdx.z of gridDim.z: keys [z · chunk, (z + 1) · chunk) of those visible (chunk 0: all,
 * one split), for the query heads g0 .. g0 + ng of key head kvh, hpb a block (blockIdx.y = kvh ·
 * hg + g0 / hpb; att_split.h chooses hpb, at most GMAX). Each warp takes KPW keys at a time
 * (loaded before any is used), keeping per head an online softmax (running max and sum) and its
 * share of the output row; the warps' results are merged at the end. With part (splits), out is
 * not written: part holds per (token, head, split) the max, the sum and the hd unnormalized
 * outputs. THREADS: the block's; GM: the most heads a block serves (att_gmax, or 1 for the wide
 * blocks of short contexts: att_split.h's celer_att_wide). */
template <int HDC, typename KT, int THREADS = ATT_THREADS, int GM = att_gmax(HDC)>
__global__ void __launch_bounds__(THREADS) k_attention(
    const float *__restrict__ q, const KT *__restrict__ kc, const KT *__restrict__ vc,
    const int32_t *__restrict__ pos, const int32_t *__restrict__ seq, const int32_t *__restrict__ tables,
    int32_t max_blocks, int32_t block_size, int64_t n_heads, int64_t n_kv_heads, int64_t hd, float scale,
    int32_t window, int32_t hpb, int32_t chunk, float *__restrict__ part, float *__restrict__ out, gpu_xq_out xo,
    int32_t *count)
{
    gpu_dep_deferred(); /* the token's position and sequence, uploaded before the step's kernels, are read first */
    constexpr int GMAX = GM, NV = HDC / CELER_WARP, VW = NV < 4 ? NV : 4, NC = NV / VW;
    constexpr int KPW = 32 / NV, MAX_WARPS = THREADS / 32;
    __shared__ float s_m[MAX_WARPS][GMAX], s_l[MAX_WARPS][GMAX], s_acc[MAX_WARPS][GMAX][HDC];
    const int64_t    G = n_heads / n_kv_heads, hg = (G + hpb - 1) / hpb, kw = n_kv_heads * hd;
    const int64_t    t = blockIdx.x, kvh = blockIdx.y / hg, g0 = blockIdx.y % hg * hpb;
    const int        ng = (int)(G - g0 < hpb ? G - g0 : hpb); /* hpb <= GMAX */
    const int        lane = threadIdx.x % CELER_WARP, wid = threadIdx.x / CELER_WARP, nw = blockDim.x / CELER_WARP;
    const int64_t    h0 = kvh * G + g0; /* the block's first query head */
    const int32_t    p = pos[t], lo0 = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    const int32_t    z = blockIdx.z, lo = chunk && z * chunk > lo0 ? z * chunk : lo0;
    const int32_t    hi = chunk && (z + 1) * chunk - 1 < p ? (z + 1) * chunk - 1 : p; /* this split's last key */
    const int32_t   *table = tables + (int64_t)seq[t] * max_blocks;
    /* the cache slots of the warp's first keys, from the block table (uploaded with the positions)
     * before the wait: after it the keys' loads wait on nothing else */
    int64_t slot[KPW];
    int32_t j0 = lo + wid * KPW;
    att_slots<KPW>(table, block_size, j0, hi, slot);
    gpu_dep_enter(); /* the kernel before wrote q and this step's keys and values */
    float kr[KPW][NV], vr[KPW][NV];
    if (j0 <= hi) att_load<KPW, NV, VW>(kc, vc, slot, kw, kvh * hd, hd, lane, kr, vr); /* in flight from here */
    float qv[GMAX][NV], acc[GMAX][NV], m[GMAX], l[GMAX];
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        const float *qr = q + (t * n_heads + h0 + (g < ng ? g : 0)) * hd;
        m[g] = -INFINITY, l[g] = 0.0f;
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int e = 0; e < VW; e++) {
                const int64_t i = VW * lane + VW * CELER_WARP * c + e;
                qv[g][VW * c + e] = i < hd ? qr[i] : 0.0f, acc[g][VW * c + e] = 0.0f;
            }
    }
    for (; j0 <= hi; j0 += nw * KPW) {
        att_slots<KPW>(table, block_size, j0 + nw * KPW, hi, slot); /* the next keys' (loads in flight) */
#pragma unroll
        for (int g = 0; g < GMAX; g++) {
            if (g >= ng) continue;
            float d[KPW];
#pragma unroll
            for (int j = 0; j < KPW; j++) {
                d[j] = 0.0f;
#pragma unroll
                for (int k = 0; k < NV; k++) d[j] += qv[g][k] * kr[j][k];
            }
            warp_sums<KPW>(d, lane);
            float mx = m[g];
#pragma unroll
            for (int j = 0; j < KPW; j++) d[j] = j0 + j <= hi ? d[j] * scale : -INFINITY, mx = fmaxf(mx, d[j]);
            const float corr = expf(m[g] - mx); /* key j0 is live: mx is finite */
            l[g] *= corr;
#pragma unroll
            for (int k = 0; k < NV; k++) acc[g][k] *= corr;
#pragma unroll
            for (int j = 0; j < KPW; j++) {
                const float e = expf(d[j] - mx);
                l[g] += e;
#pragma unroll
                for (int k = 0; k < NV; k++) acc[g][k] += e * vr[j][k];
            }
            m[g] = mx;
        }
        if (j0 + nw * KPW <= hi) att_load<KPW, NV, VW>(kc, vc, slot, kw, kvh * hd, hd, lane, kr, vr);
    }
#pragma unroll
    for (int g = 0; g < GMAX; g++) {
        if (lane == 0) s_m[wid][g] = m[g], s_l[wid][g] = l[g];
#pragma unroll
        for (int c = 0; c < NC; c++)
#pragma unroll
            for (int e = 0; e < VW; e++) {
                const int64_t i = VW * lane + VW * CELER_WARP * c + e;
                if (i < hd) s_acc[wid][g][i] = acc[g][VW * c + e];
            }
    }
    __syncthreads();
    for (int64_t r = threadIdx.x; r < ng * hd; r += blockDim.x) { /* consecutive threads, consecutive values */
        const int     g = (int)(r / hd);
        const int64_t i = r % hd, h = h0 + g;
        float         M = -INFINITY, L = 0.0f, v = 0.0f;
        for (int w = 0; w < nw; w++) M = fmaxf(M, s_m[w][g]);
        for (int w = 0; w < nw; w++) {
            const float f = M == -INFINITY ? 0.0f : expf(s_m[w][g] - M); /* max -inf: no key here */
            L += s_l[w][g] * f, v += s_acc[w][g][i] * f;
        }
        if (part) { /* this split's max, sum and unnormalized output */
            float *pr = part + ((t * n_heads + h) * gridDim.z + z) * (hd + 2);
            if (i == 0) pr[0] = M, pr[1] = L;
            pr[2 + i] = v;
        } else
            put_out(out + (t * n_heads + h) * hd, i, L > 0.0f ? v / L : 0.0f, (t * n_heads + h) * hd, xo);
    }
    if constexpr (GM == 1) return; /* wide blocks take every key in one split: no merge */
    if (!part || !count) return;   /* one split, or k_attention_merge merges them */
    /* the last of the token's splits for these heads to finish merges them (count: one ticket a
     * (token, blockIdx.y), back at 0 after its last) */
    __shared__ int s_last;
    __threadfence(); /* this block's partial results visible to the block that merges */
    __syncthreads();
    if (threadIdx.x == 0) {
        int32_t *c = count + t * gridDim.y + blockIdx.y;
        s_last     = atomicAdd(c, 1) == (int32_t)gridDim.z - 1;
        if (s_last) *c = 0; /* every other split has taken its ticket: ready for the next step */
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    static_assert(MAX_WARPS * HDC >= ATT_SPLITS_MAX, "the heads' merge weights fit s_acc, free now");
    merge_heads((const volatile float *)part, t * n_heads + h0, ng, (int32_t)gridDim.z, hd, out, xo, &s_acc[0][0][0],
                &s_m[0][0]);
}

/* out (token, head) = the merge of its splits (at most ATT_SPLITS_MAX): one block a (token,
 * head). */
__global__ void k_attention_merge(const float *__restrict__ part, int32_t splits, int64_t hd, float *__restrict__ out,
                                  gpu_xq_out xo)
{
    gpu_dep_enter();
    __shared__ float s_w[ATT_SPLITS_MAX], s_l[1];
    merge_heads(part, (int64_t)blockIdx.x, 1, splits, hd, out, xo, s_w, s_l);
}

/* One launch of k_attention for the head-size class hdc over the cache's pools of values KT: with
 * part (chunk > 0) its splits' partial results, else out and its quantization; wide: the blocks
 * of one query head (hpb 1). */
template <typename KT>
static celer_status att_launch(gpu_backend *g, int hdc, dim3 grid, const float *q, const celer_kv_cache *kv,
                               int32_t layer, const int32_t *pos, const int32_t *seq, const int32_t *tables,
                               const celer_attn *a, bool wide, int32_t hpb, int32_t chunk, float *part, float *out,
                               gpu_xq_out xo, int32_t *count, celer_error *err)
{
    typedef void (*fn_t)(const float *, const KT *, const KT *, const int32_t *, const int32_t *, const int32_t *,
                         int32_t, int32_t, int64_t, int64_t, int64_t, float, int32_t, int32_t, int32_t, float *,
                         float *, gpu_xq_out, int32_t *);
    constexpr int W = ATT_WIDE_THREADS;
    const fn_t    narrow = hdc == 128 ? k_attention<128, KT> : hdc == 256 ? k_attention<256, KT> : k_attention<512, KT>;
    const fn_t    broad  = hdc == 128   ? k_attention<128, KT, W, 1>
                           : hdc == 256 ? k_attention<256, KT, W, 1>
                                        : k_attention<512, KT, W, 1>;
    const fn_t    fn = wide ? broad : narrow;
    const int     threads = wide ? W : ATT_THREADS;
    return GPU_LAUNCH(g, err, "attention", fn, grid, threads, 0, q, (const KT *)kv->k[layer],
                      (const KT *)kv->v[layer], pos, seq, tables, kv->max_blocks, kv->block_size, a->n_heads,
                      a->n_kv_heads, a->head_dim, a->scale, a->window, hpb, chunk, part, out, xo, count);
}

/* The furthest position of b's tokens. */
static int32_t att_far(const celer_batch *b)
{
    int32_t far = 0;
    for (int64_t i = 0; i < b->n_tokens; i++) far = b->pos[i] > far ? b->pos[i] : far;
    return far;
}

/* Whether a step of b whose furthest position is far takes the wide blocks (celer_att_wide) for
 * heads of the class hdc. */
static bool att_wide(const gpu_backend *g, const celer_batch *b, const celer_attn *a, int hdc, int32_t far)
{
    /* a lane holds hdc / warp values of a row, a warp 32 / that keys at once */
    return !g->att_chunk && celer_att_wide(far, b->n_tokens * a->n_heads, a->n_heads / a->n_kv_heads,
                                           ATT_WIDE_THREADS * 32 / hdc, g->att_wide);
}

static int att_class(const celer_attn *a) { return a->head_dim <= 128 ? 128 : a->head_dim <= 256 ? 256 : 512; }

celer_status gpu_attention(celer_backend *be, const float *q, const celer_kv_cache *kv, int32_t layer,
                           const celer_batch *b, const celer_attn *a, float *out, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (a->n_kv_heads <= 0 || a->n_heads % a->n_kv_heads || a->head_dim != kv->head_dim_k ||
        kv->head_dim_v != kv->head_dim_k || a->head_dim > HD_MAX || a->head_dim % 4 || a->n_heads > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attention with %lld heads over %lld kv heads of %lld/%lld "
                          "(the kernel takes head sizes of 4s up to %d)", CELER_GPU_NAME, (long long)a->n_heads,
                          (long long)a->n_kv_heads, (long long)kv->head_dim_k, (long long)kv->head_dim_v, HD_MAX);
    if (gpu_kv_check(kv, b, true, err)) return err->code;
    if (b->n_tokens <= 0) return CELER_OK;
    if (b->n_tokens > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: attention over %lld tokens", CELER_GPU_NAME,
                          (long long)b->n_tokens);
    const int32_t *pos, *seq, *tables;
    if (gpu_batch_upload(g, b, kv, &pos, &seq, &tables, err)) return err->code;
    if (gpu_flash_takes(g, b, a)) return gpu_flash_attention(g, q, kv, layer, pos, seq, tables, b, a, out, err);
    /* blocks of up to GMAX query heads of one key head; few of them: split the keys by the
     * furthest position, or at a short context every key in one pass of a wide block a query head */
    const int     hdc  = att_class(a);
    const int64_t G    = a->n_heads / a->n_kv_heads, rows = b->n_tokens * a->n_heads;
    const int32_t far  = att_far(b);
    const bool    wide = att_wide(g, b, a, hdc, far);
    const int32_t         hpb = wide ? 1 : celer_att_heads_for(far, b->n_tokens, a->n_kv_heads, G, att_gmax(hdc));
    const int64_t         hy  = a->n_kv_heads * ((G + hpb - 1) / hpb);
    const celer_att_split one = {0, 1};
    const celer_att_split sp  = wide ? one : celer_att_split_for(far, b->n_tokens * hy, g->att_chunk, ATT_SPLITS_MAX);
    const int32_t         splits = sp.splits;
    const dim3            grid((unsigned)b->n_tokens, (unsigned)hy, (unsigned)splits);
    /* the output quantized on the way out for the o-projection that reads it next */
    gpu_xq_out xo = {NULL, NULL, false};
    const bool qz = a->head_dim % 32 == 0;
    if (qz && gpu_xq_buffer(g, rows * a->head_dim, &xo, err)) return err->code;
    /* the splits' buffer, sized for the furthest position the cache holds: a longer context
     * (more splits) must not move it, and with it every recorded step, in the middle of a decode */
    const int32_t         far_max = kv->max_blocks * kv->block_size - 1;
    const int32_t         hpb_max = celer_att_heads_for(far_max, b->n_tokens, a->n_kv_heads, G, att_gmax(hdc));
    const int64_t         hy_max  = a->n_kv_heads * ((G + hpb_max - 1) / hpb_max);
    const celer_att_split sp_max  = celer_att_split_for(far_max, b->n_tokens * hy_max, g->att_chunk, ATT_SPLITS_MAX);
    const int64_t         most    = sp_max.splits > splits ? sp_max.splits : splits;
    if (most > 1 && gpu_buf_reserve(g, &g->d_attn, (size_t)(rows * most * (a->head_dim + 2)) * sizeof(float), err))
        return err->code;
    /* with splits the kernel leaves partial results and the merge writes the output: the last
     * split of each (token, block of heads), whose tickets (at most ATT_SPLIT_BELOW of them: a step
     * splits only below that many rows) start at 0 (gpu_alloc zeroes fresh memory), or under
     * CELER_GPU_ATT_MERGE_IN=0 a kernel of its own (one launch more a layer: 8B tg128 -2% on the H200) */
    const bool in   = splits > 1 && g->att_merge_in;
    float     *part = splits > 1 ? (float *)g->d_attn.p : NULL;
    /* reserved with the splits' buffer, not at the first split: that step (its context past what
     * one wide block takes) replays a recorded decode step, and would allocate inside it */
    if (most > 1 && g->att_merge_in &&
        gpu_buf_reserve(g, &g->d_att_count, ATT_SPLIT_BELOW * sizeof(int32_t), err))
        return err->code;
    gpu_xq_out    kxo   = xo; /* the attention kernel's: none when a kernel of its own merges */
    if (splits > 1 && !in) kxo.q = NULL, kxo.dd = NULL;
    int32_t      *count = in ? (int32_t *)g->d_att_count.p : NULL;
    const int32_t ch    = splits > 1 ? sp.chunk : 0;
    if (kv->elem_bytes == 2 ? att_launch<uint16_t>(g, hdc, grid, q, kv, layer, pos, seq, tables, a, wide, hpb, ch, part,
                                                   out, kxo, count, err)
                            : att_launch<float>(g, hdc, grid, q, kv, layer, pos, seq, tables, a, wide, hpb, ch, part,
                                                out, kxo, count, err))
        return err->code;
    if (splits > 1 && !in &&
        GPU_LAUNCH(g, err, "attention merge", k_attention_merge, (unsigned)rows, ATT_THREADS, 0, (const float *)part,
                   splits, a->head_dim, out, xo))
        return err->code;
    if (qz) gpu_xq_held(g, out, rows * a->head_dim, xo);
    return CELER_OK;
}
