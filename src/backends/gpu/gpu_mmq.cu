/* Prefill products on the integer matrix units: the activations quantized once to the X32
 * format (gpu_matvec.h), as for decode, and each 32-value block of a weight row dotted with each
 * token's block by mma.m16n8k32 on signed bytes — once with the activations' hi codes, once
 * with their lo codes — then scaled in f32 by the row's and the token's block scales. Decode
 * (gpu_matvec.cu) and prefill thus compute the same sums: a token's logits do not depend on
 * the path beyond f32 rounding.
 *
 * Prefill (more than GPU_MMQ_SMALL tokens): a block of 128 threads computes 64 rows × NT = 64
 * tokens; each of its 4 warps 32 rows × NT/2 tokens. Per iteration it stages MMQ_BQ blocks
 * of 32 values: the weights' codes unpacked to signed bytes with their scales, the tokens' hi and
 * lo codes with theirs. The next iteration's global loads are issued into registers before the
 * current tiles are multiplied, so their latency hides behind the matrix work (without that, a
 * block waited on memory at every iteration; ncu put the whole kernel at ~60 TOPS at pp512 on the
 * H200). Rows are padded by 4 bytes so that the fragment loads of a warp fall in distinct banks.
 * Batches of decodes take the streaming kernel further down. A grid of fewer blocks than fill the
 * device twice (a batch of decodes: 4096 rows are 64 blocks) is split over the columns
 * (blockIdx.z), each part's sums written apart and added in part order by a second kernel: every
 * block then walks fewer columns, and more of them hide each other's latency.
 *
 * mma.m16n8k32 fragments (PTX ISA), lane = 4 g + q: A (16 × 32) a0 = row g, bytes 4q .. 4q+3;
 * a1 = row g + 8, same bytes; a2, a3 = the same rows, bytes 16 + 4q ..; B (32 × 8) b0 = column
 * g, bytes 4q ..; b1 = bytes 16 + 4q ..; C (16 × 8) c0, c1 = row g, columns 2q, 2q + 1; c2, c3 =
 * row g + 8. */
#include "backends/gpu/gpu_mmq.h"

enum {
    MMQ_ROWS = 64, MMQ_BQ = 4, MMQ_LD = MMQ_BQ * 32 + 4, MMQ_THREADS = 128, MMQ_WUNITS = 2,
    MMQ_MIN_PART = 16, MMQ_MAX_PARTS = 8 /* column parts: at least 16 blocks deep, at most 8 */
};

bool gpu_mmq_has(const gpu_backend *g, int fmt)
{
    return gpu_imma_ok(&g->prop) && (fmt == GPU_Q4_0 || fmt == GPU_Q8_0);
}

/* Bytes 0..15 of v minus 8, as signed bytes (no borrow between bytes). */
static __device__ __forceinline__ int minus8(uint32_t v) { return (int)((v | 0x80808080u) - 0x08080808u) ^ (int)0x80808080u; }

/* One iteration's global data in a thread's registers: MMQ_WUNITS weight blocks (codes, f16
 * scale) and XU token blocks (hi and lo codes, scale), zeros past the matrix. */
template <int XU>
struct mmq_regs {
    uint4    wc[MMQ_WUNITS][2];
    uint32_t ws[MMQ_WUNITS];
    uint4    xc[XU][4];
    float    xs[XU];
};

template <int F, int XU>
static __device__ __forceinline__ void mmq_fetch(mmq_regs<XU> &st, const gpu_wdesc &w, const gpu_xq &x,
                                                  const int64_t (&xr)[XU], int64_t r0, int64_t k0, int64_t nq, int tid)
{
#pragma unroll
    for (int j = 0; j < MMQ_WUNITS; j++) {
        const int     u = tid + MMQ_THREADS * j, qb = u % MMQ_BQ;
        const int64_t r = r0 + u / MMQ_BQ, b = k0 + qb;
        st.wc[j][0] = st.wc[j][1] = make_uint4(0, 0, 0, 0);
        st.ws[j]                  = 0;
        if (r < w.rows && b < nq) {
            const uint8_t *row = w.data + r * w.row_bytes;
            if (F == GPU_Q4_0) st.wc[j][0] = *(const uint4 *)(row + 16 * b);
            else st.wc[j][0] = *(const uint4 *)(row + 32 * b), st.wc[j][1] = *(const uint4 *)(row + 32 * b + 16);
            st.ws[j] = ld16(row + w.scales_off + 2 * b);
        }
    }
#pragma unroll
    for (int j = 0; j < XU; j++) {
        const int64_t t = xr[j], b = k0 + (tid + MMQ_THREADS * j) % MMQ_BQ;
        st.xs[j]        = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; k++) st.xc[j][k] = make_uint4(0, 0, 0, 0);
        if (t >= 0 && b < nq) {
            const uint4 *p = (const uint4 *)(x.q + (t * x.nb + b) * XQ_BLOCK);
#pragma unroll
            for (int k = 0; k < 4; k++) st.xc[j][k] = p[k];
            st.xs[j] = x.d[t * x.nb + b].x;
        }
    }
}

/* 16 bytes into a shared row at a 4-byte boundary (the rows' padding breaks 16-byte alignment). */
static __device__ __forceinline__ void put16(int8_t *dst, uint4 v)
{
    int *d = (int *)dst;
    d[0] = (int)v.x, d[1] = (int)v.y, d[2] = (int)v.z, d[3] = (int)v.w;
}

/* The registers into the shared tiles: weight codes unpacked to signed bytes. */
template <int F, int XU>
static __device__ __forceinline__ void mmq_put(const mmq_regs<XU> &st, int8_t (*wq)[MMQ_LD], int8_t (*xh)[MMQ_LD],
                                               int8_t (*xl)[MMQ_LD], float (*wd)[MMQ_BQ], float (*xd)[MMQ_BQ], int tid)
{
#pragma unroll
    for (int j = 0; j < MMQ_WUNITS; j++) {
        const int u = tid + MMQ_THREADS * j, rr = u / MMQ_BQ, qb = u % MMQ_BQ;
        int      *dst = (int *)&wq[rr][32 * qb];
        if (F == GPU_Q4_0) {
            const uint32_t cw[4] = {st.wc[j][0].x, st.wc[j][0].y, st.wc[j][0].z, st.wc[j][0].w};
#pragma unroll
            for (int k = 0; k < 4; k++)
                dst[k] = minus8(cw[k] & 0x0f0f0f0fu), dst[4 + k] = minus8((cw[k] >> 4) & 0x0f0f0f0fu);
        } else { /* Q8_0 */
            put16(&wq[rr][32 * qb], st.wc[j][0]), put16(&wq[rr][32 * qb + 16], st.wc[j][1]);
        }
        wd[rr][qb] = dec_f16(st.ws[j]);
    }
#pragma unroll
    for (int j = 0; j < XU; j++) {
        const int u = tid + MMQ_THREADS * j, tt = u / MMQ_BQ, qb = u % MMQ_BQ;
        put16(&xh[tt][32 * qb], st.xc[j][0]), put16(&xh[tt][32 * qb + 16], st.xc[j][1]);
        put16(&xl[tt][32 * qb], st.xc[j][2]), put16(&xl[tt][32 * qb + 16], st.xc[j][3]);
        xd[tt][qb] = st.xs[j];
    }
}

/* An output: v, or with add y's value plus v (the add the product's output would meet next). */
static __device__ __forceinline__ void mmq_put(float *y, float v, int add) { *y = add ? __fadd_rn(*y, v) : v; }

/* Rows blockIdx.x · 64 .. of w × tokens t0 .. t0 + NT (T of them), column blocks kz0 .. nq, into y
 * (T, w.rows; with add, added to it). Token t is x's row t, or with `rows` its row rows[t] (an
 * expert's tokens read where they lie: no gathered copy of their activations). */
template <int F, int NT>
static __device__ __forceinline__ void mmq_tile(const gpu_wdesc &w, const gpu_xq &x, const int32_t *__restrict__ rows,
                                                int64_t T, int64_t t0, int64_t kz0, int64_t nq, float *__restrict__ y,
                                                int add)
{
    constexpr int NI = NT / 16;                     /* a warp's 8-token tiles */
    constexpr int XU = NT * MMQ_BQ / MMQ_THREADS; /* token blocks a thread stages */
    __shared__ __align__(16) int8_t wq[MMQ_ROWS][MMQ_LD];
    __shared__ __align__(16) int8_t xh[NT][MMQ_LD], xl[NT][MMQ_LD];
    __shared__ float                wd[MMQ_ROWS][MMQ_BQ], xd[NT][MMQ_BQ];
    const int     tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, q = lane % 4;
    const int     wm = 32 * (warp % 2), wn = NT / 2 * (warp / 2);
    const int64_t r0 = (int64_t)blockIdx.x * MMQ_ROWS;
    float         acc[2][NI][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) acc[mi][ni][e] = 0.0f;
    int64_t xr[XU]; /* the x rows of this thread's token blocks, -1 past the tokens */
#pragma unroll
    for (int j = 0; j < XU; j++) {
        const int64_t t = t0 + (tid + MMQ_THREADS * j) / MMQ_BQ;
        xr[j]           = t >= T ? -1 : rows ? rows[t] : t;
    }
    mmq_regs<XU> st;
    mmq_fetch<F, XU>(st, w, x, xr, r0, kz0, nq, tid);
    for (int64_t k0 = kz0; k0 < nq; k0 += MMQ_BQ) {
        mmq_put<F, XU>(st, wq, xh, xl, wd, xd, tid);
        __syncthreads();
        if (k0 + MMQ_BQ < nq) mmq_fetch<F, XU>(st, w, x, xr, r0, k0 + MMQ_BQ, nq, tid);
        /* not unrolled: unrolled, ptxas held every block's fragments at once, 255 registers and 2
         * blocks an SM (ncu: 12% of the warps active, stalled on shared loads); so 168, 3 blocks */
#pragma unroll 1
        for (int qb = 0; qb < MMQ_BQ; qb++) {
            int   a[2][4];
            float sw[2][2]; /* the row scales of this thread's accumulator rows g, g + 8 */
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                const int r = wm + 16 * mi + g;
                a[mi][0]    = *(const int *)&wq[r][32 * qb + 4 * q];
                a[mi][1]    = *(const int *)&wq[r + 8][32 * qb + 4 * q];
                a[mi][2]    = *(const int *)&wq[r][32 * qb + 16 + 4 * q];
                a[mi][3]    = *(const int *)&wq[r + 8][32 * qb + 16 + 4 * q];
                sw[mi][0] = wd[r][qb], sw[mi][1] = wd[r + 8][qb];
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni++) { /* one 8-token tile: its products, then its scaling */
                const int n  = wn + 8 * ni + g, c = wn + 8 * ni + 2 * q; /* c, c + 1: this thread's tokens */
                const int h0 = *(const int *)&xh[n][32 * qb + 4 * q], h1 = *(const int *)&xh[n][32 * qb + 16 + 4 * q];
                const int l0 = *(const int *)&xl[n][32 * qb + 4 * q], l1 = *(const int *)&xl[n][32 * qb + 16 + 4 * q];
                const float sx[2] = {xd[c][qb], xd[c + 1][qb]};
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    int sh[4] = {0, 0, 0, 0}, sl[4] = {0, 0, 0, 0};
                    gpu_imma_16x8x32(sh, a[mi], h0, h1);
                    gpu_imma_16x8x32(sl, a[mi], l0, l1);
#pragma unroll
                    for (int e = 0; e < 4; e++) /* element e: row g (+ 8 from e = 2), token c + e % 2 */
                        acc[mi][ni][e] += sw[mi][e / 2] * sx[e % 2] * (float)(256 * sh[e] + sl[e]);
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int64_t r = r0 + wm + 16 * mi + g + 8 * (e / 2), t = t0 + wn + 8 * ni + 2 * q + e % 2;
                if (r < w.rows && t < T) mmq_put(&y[t * w.rows + r], acc[mi][ni][e], add);
            }
}

/* Columns blocks kz0 .. kz1 of part blockIdx.z (kper blocks a part), into y + blockIdx.z · T · rows
 * (with add: added to y). */
template <int F, int NT>
__global__ void __launch_bounds__(MMQ_THREADS)
    k_mmq(gpu_wdesc w, gpu_xq x, int64_t T, int64_t kper, float *__restrict__ y, int add)
{
    gpu_dep_enter();
    const int64_t kz0 = (int64_t)blockIdx.z * kper, nq = w.cols / 32 < kz0 + kper ? w.cols / 32 : kz0 + kper;
    mmq_tile<F, NT>(w, x, NULL, T, (int64_t)blockIdx.y * NT, kz0, nq, y + (int64_t)blockIdx.z * T * w.rows, add);
}

/* Expert blockIdx.z of a stacked tensor (w its first, `stride` bytes apart) times its tokens,
 * pairs starts[e] .. starts[e + 1] (sorted by expert): x's rows tok[s] of those pairs s, or with
 * tok NULL its rows s, into the same rows s of y. */
template <int F, int NT>
__global__ void __launch_bounds__(MMQ_THREADS)
    k_mmq_experts(gpu_wdesc w, gpu_xq x, const int32_t *__restrict__ tok, const int32_t *__restrict__ starts,
                  int64_t stride, float *__restrict__ y)
{
    gpu_dep_enter();
    const int64_t s0 = starts[blockIdx.z], n = starts[blockIdx.z + 1] - s0, t0 = (int64_t)blockIdx.y * NT;
    if (t0 >= n) return; /* the whole block: a group shorter than the longest */
    w.data += (int64_t)blockIdx.z * stride;
    if (!tok) x.q += s0 * x.nb * XQ_BLOCK, x.d += s0 * x.nb;
    mmq_tile<F, NT>(w, x, tok ? tok + s0 : NULL, n, t0, 0, w.cols / 32, y + s0 * w.rows, 0);
}

/* y[i] = Σ over the parts p of part[p · n + i], in part order (with add: y[i] += the sum). */
__global__ void k_mmq_sum(const float *__restrict__ part, int parts, int64_t n, float *__restrict__ y, int add)
{
    gpu_dep_enter();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float s = part[i];
        for (int p = 1; p < parts; p++) s += part[p * n + i];
        mmq_put(&y[i], s, add);
    }
}

/* ---- batches of decodes: the weights streamed through shared memory ------------------------ */

/* Up to 32 tokens: a block takes a few row tiles of 16 (one mma row tile) and every token of the
 * batch, and walks its columns a few blocks a stage through shared-memory stages filled by
 * asynchronous copies (cp.async) a stage or two ahead, so that each SM keeps tens of kilobytes
 * of weights in flight where the tiled kernel above waited on each stage's loads. By default
 * (geometry 2, below) a block is 8 warps, each a 16-row tile with every token. Geometry 0 is 64
 * rows: from 16 tokens 8 warps, each row tile's tokens split in two halves (with 4 warps a block
 * the schedulers waited on each warp's chain of fragment loads and products: ncu, 12% of the
 * warps active, 12% of DRAM throughput, for the 8B's 14336-row products of 32 tokens).
 * Q4_0 codes are staged as stored (16 bytes a block) and split into the fragments' low and high
 * nibbles when read; the sums are the same as the tiled kernel's. X8 (activations quantized to 8
 * bits, gpu_matvec.h: their lo codes zeros): the lo codes neither copied nor multiplied, half the
 * activations' copies and half the mma. */
enum { SQ_ROWS = 64, SQ_BQ = 8, SQ_STAGES = 3 };

/* The block's geometry G: 0 (CELER_GPU_SQ_WIDE=0), 64 rows, SQ_BQ column blocks a stage, SQ_STAGES
 * stages; 1 and 2 (=1; 2 the default), 128 rows a block, a warp each 16-row tile with every token
 * (a half of the activations' reads through the L2 a row), 8 column blocks in 2 stages or 4 in 3.
 * The 8B's batch of 32 decoded 3,498, 3,964 and 4,159 tok/s in geometries 0, 1 and 2 (none
 * launched early; docs/benchmarks/gpu-h200.md, eighteenth pass). A product's sums are the same
 * bit for bit in all three: each output is one lane's sum over the column blocks in order, and
 * the column parts are the same. */
enum { SQ_GEOM_DEFAULT = 2 }; /* gpu_backend.cu's default g->sq_geom; the experts' kernel's */
template <int G> struct sq_geom {
    static constexpr int ROWS = G ? 128 : SQ_ROWS, BQ = G == 2 ? 4 : SQ_BQ, STAGES = G == 1 ? 2 : SQ_STAGES;
};

template <int F, int NT, int G = 0> struct sq_shape {
    static constexpr int SQ_ROWS = sq_geom<G>::ROWS, SQ_BQ = sq_geom<G>::BQ, SQ_STAGES = sq_geom<G>::STAGES;
    static constexpr int WB     = F == GPU_Q4_0 ? 16 : 32;  /* code bytes of a block */
    static constexpr int WLD    = SQ_BQ * WB + 16;          /* a row's stride (16 bytes of padding: no bank conflicts) */
    static constexpr int XLD    = 2 * SQ_BQ * 32 + 16;      /* a token's: hi codes, then lo codes */
    static constexpr int WS_OFF = SQ_ROWS * WLD;            /* the rows' f16 scales, SQ_BQ a row */
    static constexpr int X_OFF  = WS_OFF + SQ_ROWS * 2 * SQ_BQ;
    static constexpr int XS_OFF = X_OFF + NT * XLD;         /* the tokens' (d, d · S), NT a column block */
    static constexpr int STAGE  = XS_OFF + NT * SQ_BQ * 8;
    static constexpr int HALVES = NT >= 16 && !G ? 2 : 1;   /* token parts: a warp each for a row tile */
    static constexpr int RT     = SQ_ROWS / 16;             /* row tiles */
    static constexpr int THREADS = 32 * RT * HALVES;
    static constexpr int NI     = NT / 8 / HALVES;          /* a warp's 8-token tiles */
    /* blocks an SM as the stages' shared memory allows on sm_90 (227 KB, 1 KB a block reserved): the
     * registers a thread may take, so that they do not allow fewer */
    static constexpr int FIT    = 227 * 1024 / (SQ_STAGES * STAGE + 1024);
    static constexpr int BLOCKS = FIT < 2 ? 1 : G && FIT > 2 ? 2 : FIT; /* wide: 128 registers a thread */
};

/* A thread's share of every stage's copies, the same at each stage but for the stage's first
 * column block k0. Its pieces of a kind are THREADS apart in the kind's order, so they differ
 * by a fixed number of rows or tokens: a piece's source is the kind's base (piece 0 at k0 = 0)
 * plus a stride the whole block shares, its place in a stage a constant, and whether its row or
 * token exists a bit of `ok` (a piece without one copies zeros, reading nothing). Worked out
 * once a block: the copies' index arithmetic at every stage, in loops the compiler could not
 * unroll, was as many instructions as the products (ncu on the 8B's batch of 32: 32
 * instructions an mma). */
template <int F, int NT, int G, bool MAP = false> struct sq_copies {
    typedef sq_shape<F, NT, G> S;
    static constexpr int SQ_ROWS = S::SQ_ROWS, SQ_BQ = S::SQ_BQ;
    static constexpr int CPR = SQ_BQ * S::WB / 16;                            /* 16-byte pieces of a row's codes */
    static constexpr int NW  = (SQ_ROWS * CPR + S::THREADS - 1) / S::THREADS; /* a thread's pieces of each kind */
    static constexpr int NX  = (NT * SQ_BQ * 4 + S::THREADS - 1) / S::THREADS;
    static constexpr int NS  = (NT * SQ_BQ + S::THREADS - 1) / S::THREADS;
    /* rows, tokens apart */
    static constexpr int RW = S::THREADS / CPR, TX = S::THREADS / (4 * SQ_BQ), TS = S::THREADS / SQ_BQ;
    static_assert(S::THREADS % (4 * SQ_BQ) == 0 && S::THREADS % CPR == 0, "pieces a whole number of rows apart");
    static_assert(NW <= 8 && NX <= 8 && NS <= 8, "ok's bytes");
    const uint8_t *w, *ws; /* piece 0's codes; the row's scales (threads below SQ_ROWS) */
    const int8_t  *x;
    const float2  *s;
    uint32_t       ok; /* bit j: weight piece j's row exists; 8 + j: token piece j's; 16 + j: scale piece j's;
                        * 24: ws's */
    /* with a row map (MAP: a MoE layer's pairs, each token's row read where it lies), each token
     * piece's own source at k0 = 0: its token's row is the map's, not a fixed stride from piece 0's */
    const int8_t *xm[MAP ? NX : 1];
    const float2 *sm[MAP ? NS : 1];
};

template <int F, int NT, int G, bool MAP>
static __device__ __forceinline__ void sq_plan(sq_copies<F, NT, G, MAP> &c, const gpu_wdesc &w, const gpu_xq &x,
                                               int64_t T, const int32_t *__restrict__ map, int64_t r0, int tid)
{
    typedef sq_copies<F, NT, G, MAP> C;
    constexpr int SQ_ROWS = C::SQ_ROWS, SQ_BQ = C::SQ_BQ;
    const int64_t rw = r0 + tid / C::CPR, tx = tid / (4 * SQ_BQ), ts = tid / SQ_BQ;
    c.ok             = r0 + tid < w.rows && tid < SQ_ROWS ? 1u << 24 : 0u;
#pragma unroll
    for (int j = 0; j < C::NW; j++) c.ok |= (uint32_t)(rw + C::RW * j < w.rows) << j;
#pragma unroll
    for (int j = 0; j < C::NX; j++) c.ok |= (uint32_t)(tx + C::TX * j < T) << (8 + j);
#pragma unroll
    for (int j = 0; j < C::NS; j++) c.ok |= (uint32_t)(ts + C::TS * j < T) << (16 + j);
    c.w  = w.data + rw * w.row_bytes + 16 * (tid % C::CPR);
    c.ws = w.data + (c.ok >> 24 ? r0 + tid : 0) * w.row_bytes + w.scales_off;
    c.x  = x.q + (tx * x.nb + tid / 4 % SQ_BQ) * XQ_BLOCK + 16 * (tid % 4);
    c.s  = x.d + ts * x.nb + tid % SQ_BQ;
    if constexpr (MAP) {
#pragma unroll
        for (int j = 0; j < C::NX; j++) {
            const int64_t row = c.ok >> (8 + j) & 1 ? map[tx + C::TX * j] : 0;
            c.xm[j]           = x.q + (row * x.nb + tid / 4 % SQ_BQ) * XQ_BLOCK + 16 * (tid % 4);
        }
#pragma unroll
        for (int j = 0; j < C::NS; j++) {
            const int64_t row = c.ok >> (16 + j) & 1 ? map[ts + C::TS * j] : 0;
            c.sm[j]           = x.d + row * x.nb + tid % SQ_BQ;
        }
    }
}

/* Stage st: columns blocks k0 .. k0 + SQ_BQ (zeros past kend, past the rows, past the tokens);
 * a piece whose row or token does not exist reads nothing. */
template <int F, int NT, bool X8, int G, bool MAP>
static __device__ __forceinline__ void sq_issue(int8_t *st, const sq_copies<F, NT, G, MAP> &c, const gpu_wdesc &w,
                                                const gpu_xq &x, int64_t k0, int64_t kend, int tid)
{
    typedef sq_shape<F, NT, G>        S;
    typedef sq_copies<F, NT, G, MAP> C;
    constexpr int SQ_ROWS = S::SQ_ROWS, SQ_BQ = S::SQ_BQ;
    const bool whole = k0 + SQ_BQ <= kend; /* every stage but perhaps a part's last */
#pragma unroll
    for (int j = 0; j < C::NW; j++) {
        const int  i = tid + S::THREADS * j, k = i % C::CPR;
        const bool ok = (c.ok >> j & 1) && (whole || k0 + k * 16 / S::WB < kend);
        if (i < SQ_ROWS * C::CPR)
            gpu_cp_async16(st + i / C::CPR * S::WLD + 16 * k,
                           ok ? c.w + (int64_t)(C::RW * j) * w.row_bytes + k0 * S::WB : w.data, ok);
    }
    if (tid < SQ_ROWS) { /* a row's SQ_BQ scales: 16 bytes (8 in geometry 2) */
        uint16_t      *dst = (uint16_t *)(st + S::WS_OFF + 2 * SQ_BQ * tid);
        const uint8_t *hs  = c.ws + 2 * k0;
        const bool     ok  = c.ok >> 24 & 1;
        static_assert(SQ_BQ == 8 || SQ_BQ == 4, "a row's scales in one copy");
        if (whole && SQ_BQ == 8) gpu_cp_async16(dst, hs, ok);
        else if (whole) gpu_cp_async8(dst, hs, ok);
        else /* the last, short stage: no read past the row's scales */
            for (int i = 0; i < SQ_BQ; i++) dst[i] = ok && k0 + i < kend ? *(const uint16_t *)(hs + 2 * i) : 0;
    }
#pragma unroll
    for (int j = 0; j < C::NX; j++) { /* a token block's 64 bytes: hi, hi, lo, lo */
        const int  i = tid + S::THREADS * j, tt = i / (4 * SQ_BQ), qb = i / 4 % SQ_BQ, piece = i % 4;
        const bool ok = (c.ok >> (8 + j) & 1) && (whole || k0 + qb < kend);
        const int8_t *src;
        if constexpr (MAP) src = c.xm[j] + k0 * XQ_BLOCK;
        else src = c.x + ((int64_t)(C::TX * j) * x.nb + k0) * XQ_BLOCK;
        if (i < NT * SQ_BQ * 4 && !(X8 && piece >= 2))
            gpu_cp_async16(st + S::X_OFF + tt * S::XLD + (piece / 2) * 32 * SQ_BQ + 32 * qb + 16 * (piece % 2),
                           ok ? src : x.q, ok);
    }
#pragma unroll
    for (int j = 0; j < C::NS; j++) {
        const int  i = tid + S::THREADS * j;
        const bool ok = (c.ok >> (16 + j) & 1) && (whole || k0 + i % SQ_BQ < kend);
        const float2 *src;
        if constexpr (MAP) src = c.sm[j] + k0;
        else src = c.s + (int64_t)(C::TS * j) * x.nb + k0;
        if (i < NT * SQ_BQ) /* by column block, then token: a lane's two tokens in one load */
            gpu_cp_async8(st + S::XS_OFF + 8 * (i % SQ_BQ * NT + i / SQ_BQ), ok ? (const void *)src : x.d, ok);
    }
    gpu_cp_commit();
}

/* acc (this lane's elements of the warp's 16 rows, row tile rt, × its tokens, half th of NT) +=
 * stage st's products. */
template <int F, int NT, bool X8, int G>
static __device__ __forceinline__ void sq_compute(const int8_t *st, int rt, int th, int g, int q,
                                                  float (&acc)[sq_shape<F, NT, G>::NI][4])
{
    typedef sq_shape<F, NT, G> S;
    constexpr int SQ_BQ = S::SQ_BQ;
    const int       r  = 16 * rt + g;
    const int8_t   *w0 = st + r * S::WLD, *w8 = w0 + 8 * S::WLD;
    const uint16_t *ws = (const uint16_t *)(st + S::WS_OFF);
    const float2   *xs = (const float2 *)(st + S::XS_OFF);
    const int       lane = 4 * g + q;
    /* the row this lane gives ldmatrix for its 8-token tile: token lane % 8 of the tile, the hi
     * codes' first or second 16 bytes (lanes 0 .. 15), then the lo codes' (16 .. 31; X8: the hi
     * codes again, the lo ones never staged) */
    const int8_t *xr =
        st + S::X_OFF + (lane % 8) * S::XLD + (X8 ? 0 : lane / 16) * 32 * SQ_BQ + 16 * (lane / 8 % 2);
#pragma unroll
    for (int qb = 0; qb < SQ_BQ; qb++) {
        int a[4];
        if (F == GPU_Q4_0) { /* byte i: value i (low nibble) and i + 16 (high) */
            const uint32_t u0 = *(const uint32_t *)(w0 + 16 * qb + 4 * q), u8 = *(const uint32_t *)(w8 + 16 * qb + 4 * q);
            a[0] = minus8(u0 & 0x0f0f0f0fu), a[1] = minus8(u8 & 0x0f0f0f0fu);
            a[2] = minus8((u0 >> 4) & 0x0f0f0f0fu), a[3] = minus8((u8 >> 4) & 0x0f0f0f0fu);
        } else {
            a[0] = *(const int *)(w0 + 32 * qb + 4 * q), a[1] = *(const int *)(w8 + 32 * qb + 4 * q);
            a[2] = *(const int *)(w0 + 32 * qb + 16 + 4 * q), a[3] = *(const int *)(w8 + 32 * qb + 16 + 4 * q);
        }
        const float sw[2] = {dec_f16(ws[SQ_BQ * r + qb]), dec_f16(ws[SQ_BQ * (r + 8) + qb])};
#pragma unroll
        for (int ni = 0; ni < S::NI; ni++) {
            const int tile = th * S::NI + ni, c = 8 * tile + 2 * q; /* c, c + 1: this lane's tokens */
            uint32_t  b[4]; /* hi bytes 4q .., 16 + 4q .. of token 8 tile + g; lo the same */
            gpu_ldsm_x4(b, xr + 8 * tile * S::XLD + 32 * qb);
            const float4 s4    = *(const float4 *)(xs + NT * qb + c); /* (d, d · S) of tokens c, c + 1 */
            const float  sx[2] = {s4.x, s4.z};
            int          sh[4] = {0, 0, 0, 0}, sl[4] = {0, 0, 0, 0};
            gpu_imma_16x8x32(sh, a, (int)b[0], (int)b[1]);
            if (!X8) gpu_imma_16x8x32(sl, a, (int)b[2], (int)b[3]);
#pragma unroll
            for (int e = 0; e < 4; e++) /* element e: row r (+ 8 from e = 2), token c + e % 2 */
                acc[ni][e] += sw[e / 2] * sx[e % 2] * (float)(256 * sh[e] + sl[e]);
        }
    }
}

/* Rows blockIdx.x · SQ_ROWS .. of w by the T (at most NT) tokens of x, column blocks kz0 ..
 * kend, into y (with add: added to it). Token t is x's row t, or with MAP its row map[t]. */
template <int F, int NT, bool X8, int G, bool MAP = false>
static __device__ __forceinline__ void sq_tile(const gpu_wdesc &w, const gpu_xq &x, const int32_t *__restrict__ map,
                                               int64_t T, int64_t kz0, int64_t kend, float *__restrict__ y, int add)
{
    extern __shared__ __align__(16) int8_t sq_smem[];
    typedef sq_shape<F, NT, G> S;
    constexpr int SQ_ROWS = S::SQ_ROWS, SQ_BQ = S::SQ_BQ, SQ_STAGES = S::SQ_STAGES;
    const int     tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, q = lane % 4;
    const int     rt = warp % S::RT, th = warp / S::RT; /* row tile, token half */
    const int64_t r0 = (int64_t)blockIdx.x * SQ_ROWS, nst = (kend - kz0 + SQ_BQ - 1) / SQ_BQ;
    float         acc[S::NI][4];
#pragma unroll
    for (int ni = 0; ni < S::NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[ni][e] = 0.0f;
    sq_copies<F, NT, G, MAP> cp;
    sq_plan<F, NT, G, MAP>(cp, w, x, T, map, r0, tid);
    for (int s = 0; s < SQ_STAGES - 1; s++) { /* a group per stage, empty past the end: the waits count groups */
        if (s < nst) sq_issue<F, NT, X8, G, MAP>(sq_smem + s * S::STAGE, cp, w, x, kz0 + s * SQ_BQ, kend, tid);
        else gpu_cp_commit();
    }
    for (int64_t it = 0; it < nst; it++) {
        gpu_cp_wait<SQ_STAGES - 2>(); /* stage it has landed (this thread's copies) */
        __syncthreads();              /* everyone's; and stage it - 1 is no longer read */
        const int64_t nx = it + SQ_STAGES - 1;
        if (nx < nst)
            sq_issue<F, NT, X8, G, MAP>(sq_smem + (nx % SQ_STAGES) * S::STAGE, cp, w, x, kz0 + nx * SQ_BQ, kend,
                                        tid);
        else gpu_cp_commit();
        sq_compute<F, NT, X8, G>(sq_smem + (it % SQ_STAGES) * S::STAGE, rt, th, g, q, acc);
    }
#pragma unroll
    for (int ni = 0; ni < S::NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t r = r0 + 16 * rt + g + 8 * (e / 2), t = 8 * (th * S::NI + ni) + 2 * q + e % 2;
            if (r < w.rows && t < T) mmq_put(&y[t * w.rows + r], acc[ni][e], add);
        }
}

/* Columns blocks kz0 .. kz0 + kper of part blockIdx.z, into y + blockIdx.z · T · rows. */
template <int F, int NT, bool X8, int G>
/* (launch bounds parenthesized: HIP's macro splits at commas) */
__global__ void __launch_bounds__((sq_shape<F, NT, G>::THREADS), (sq_shape<F, NT, G>::BLOCKS))
    k_mmq_s(gpu_wdesc w, gpu_xq x, int64_t T, int64_t kper, float *__restrict__ y, int add)
{
    gpu_dep_enter();
    const int64_t kz0 = (int64_t)blockIdx.z * kper, kend = w.cols / 32 < kz0 + kper ? w.cols / 32 : kz0 + kper;
    sq_tile<F, NT, X8, G>(w, x, NULL, T, kz0, kend, y + (int64_t)blockIdx.z * T * w.rows, add);
}

/* A MoE layer's experts on the batch kernel (CELER_GPU_MOE_STREAM=1; being measured against
 * k_mmq_experts), the default geometry: block (x, y) takes row block x of tile y of `tiles`
 * (CELER_MOE_TILE ints a tile: its first pair, its pairs, at most NT, and its expert, whose weights
 * lie `stride` bytes on from w's). Pair s's input is x's row tok[s] (tok NULL: row s); its
 * products go to y's row s. The same sums as k_mmq_experts' (each output one lane's sum over
 * the column blocks in order). */
template <int F, int NT>
__global__ void __launch_bounds__((sq_shape<F, NT, SQ_GEOM_DEFAULT>::THREADS),
                                  (sq_shape<F, NT, SQ_GEOM_DEFAULT>::BLOCKS))
    k_mmq_s_experts(gpu_wdesc w, gpu_xq x, const int32_t *__restrict__ tok, const int32_t *__restrict__ tiles,
                    int64_t stride, float *__restrict__ y)
{
    gpu_dep_enter();
    const int32_t *tl = tiles + CELER_MOE_TILE * (int64_t)blockIdx.y;
    const int64_t  s0 = tl[0], n = tl[1];
    w.data += tl[2] * stride;
    y += s0 * w.rows;
    if (tok) sq_tile<F, NT, false, SQ_GEOM_DEFAULT, true>(w, x, tok + s0, n, 0, w.cols / 32, y, 0);
    else {
        x.q += s0 * x.nb * XQ_BLOCK, x.d += s0 * x.nb;
        sq_tile<F, NT, false, SQ_GEOM_DEFAULT>(w, x, NULL, n, 0, w.cols / 32, y, 0);
    }
}

typedef void (*mmq_fn)(gpu_wdesc, gpu_xq, int64_t, int64_t, float *, int);

/* Column parts for a grid of `blocks` over nq column blocks taken `step` at a time: the grid
 * nearest to two blocks an SM (both kernels fit two), each part at least MMQ_MIN_PART blocks
 * deep, at most MMQ_MAX_PARTS; *kper: the column blocks of a part, whole steps. */
static int64_t column_parts(const gpu_backend *g, int64_t blocks, int64_t nq, int64_t step, int64_t *kper)
{
    const int64_t fill  = 2 * (int64_t)g->prop.multiProcessorCount;
    int64_t       parts = (fill + blocks / 2) / blocks;
    if (parts > nq / MMQ_MIN_PART) parts = nq / MMQ_MIN_PART;
    if (parts > MMQ_MAX_PARTS) parts = MMQ_MAX_PARTS;
    if (parts < 1) parts = 1;
    *kper = ((nq + parts - 1) / parts + step - 1) / step * step;
    return (nq + *kper - 1) / *kper;
}

/* fn over grid (br, bt, parts) into y, or into the backend's part buffer and then summed (with
 * add: added to y). */
static celer_status launch_parts(gpu_backend *g, mmq_fn fn, bool early, unsigned br, unsigned bt, int64_t parts,
                                 int threads, size_t smem, const gpu_wdesc *w, const gpu_xq *xq, int64_t T,
                                 int64_t kper, float *y, bool add, celer_error *err)
{
    if (parts == 1)
        return GPU_LAUNCH_KEEPING_XQ_AS(g, err, "mmq", early, fn, dim3(br, bt), threads, smem, *w, *xq, T, kper, y,
                                        (int)add);
    const int64_t n = T * w->rows;
    if (gpu_buf_reserve(g, &g->d_part, (size_t)(parts * n) * sizeof(float), err)) return err->code;
    float *part = (float *)g->d_part.p;
    if (GPU_LAUNCH_KEEPING_XQ_AS(g, err, "mmq", early, fn, dim3(br, bt, (unsigned)parts), threads, smem, *w, *xq, T,
                                 kper, part, 0))
        return err->code;
    return GPU_LAUNCH_KEEPING_XQ(g, err, "mmq_sum", k_mmq_sum, gpu_blocks(n, 256), 256, 0, part, (int)parts, n, y,
                                 (int)add);
}

/* Up to GPU_MMQ_SMALL tokens: k_mmq_s in tiles of 8, 16 or 32 tokens, in the geometry g->sq_geom. */
#define SQ_FNS(G, X8, F) {k_mmq_s<F, 8, X8, G>, k_mmq_s<F, 16, X8, G>, k_mmq_s<F, 32, X8, G>}
#define SQ_FNS_G(G)                                                                                                 \
    {{SQ_FNS(G, false, GPU_Q4_0), SQ_FNS(G, false, GPU_Q8_0)}, {SQ_FNS(G, true, GPU_Q4_0), SQ_FNS(G, true, GPU_Q8_0)}}
#define SQ_SIZES(G, F, what) {sq_shape<F, 8, G>::what, sq_shape<F, 16, G>::what, sq_shape<F, 32, G>::what}
#define SQ_SIZES_G(G, what) {SQ_SIZES(G, GPU_Q4_0, what), SQ_SIZES(G, GPU_Q8_0, what)}
static celer_status mmq_small(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, int64_t T, float *y,
                              bool add, celer_error *err)
{
    static const mmq_fn fns[3][2][2][3]   = {SQ_FNS_G(0), SQ_FNS_G(1), SQ_FNS_G(2)};
    static const int    stage[3][2][3]    = {SQ_SIZES_G(0, STAGE), SQ_SIZES_G(1, STAGE), SQ_SIZES_G(2, STAGE)};
    static const int    threads[3][2][3]  = {SQ_SIZES_G(0, THREADS), SQ_SIZES_G(1, THREADS), SQ_SIZES_G(2, THREADS)};
    static const int    stages[3] = {sq_geom<0>::STAGES, sq_geom<1>::STAGES, sq_geom<2>::STAGES};
    static const int    rows[3]   = {sq_geom<0>::ROWS, sq_geom<1>::ROWS, sq_geom<2>::ROWS};
    const int    G = g->sq_geom, f = fmt == GPU_Q8_0, s = T <= 8 ? 0 : T <= 16 ? 1 : 2;
    const mmq_fn fn   = fns[G][xq->x8][f][s];
    const size_t smem = (size_t)stages[G] * (size_t)stage[G][f][s];
    unsigned     br, bp;
    if (gpu_allow_smem(g, (const void *)fn, smem, err)) return err->code;
    if (gpu_grid(g, w->rows, rows[G], &br, "mmq", err) ||
        gpu_grid(g, w->rows, g->sq_parts ? g->sq_parts : SQ_ROWS, &bp, "mmq", err))
        return err->code;
    /* the same column parts in all three geometries (the same sums), whole stages of each: those
     * of a grid of 64-row blocks (about one 128-row block an SM, where two fit), or with
     * CELER_GPU_SQ_PARTS=128 of 128-row blocks (twice the parts, up to MMQ_MAX_PARTS) */
    int64_t       kper;
    const int64_t parts = column_parts(g, bp, w->cols / 32, SQ_BQ, &kper);
    /* never launched early: blocks placed while the kernel before still held SMs doubled up on
     * the free ones (the grid is about one block an SM), and the 8B's batch of 32 decoded at
     * 2,916 tok/s instead of 3,951 (docs/benchmarks/gpu-h200.md, eighteenth pass) */
    return launch_parts(g, fn, false, br, 1, parts, threads[G][f][s], smem, w, xq, T, kper, y, add, err);
}

celer_status gpu_mmq_xq(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, int64_t T, float *y,
                        bool add, celer_error *err)
{
    if (!gpu_mmq_has(g, fmt))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer prefill kernel for format %d", CELER_GPU_NAME, fmt);
    if (T <= GPU_MMQ_SMALL) return mmq_small(g, w, fmt, xq, T, y, add, err);
    const mmq_fn  fn = fmt == GPU_Q4_0 ? k_mmq<GPU_Q4_0, 64> : k_mmq<GPU_Q8_0, 64>;
    const int64_t bt = (T + 63) / 64;
    if (bt > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: a step of %lld tokens is past the prefill grid", CELER_GPU_NAME,
                          (long long)T);
    unsigned br;
    if (gpu_grid(g, w->rows, MMQ_ROWS, &br, "mmq", err)) return err->code;
    int64_t       kper;
    const int64_t parts = column_parts(g, (int64_t)br * bt, w->cols / 32, MMQ_BQ, &kper);
    return launch_parts(g, fn, true, br, (unsigned)bt, parts, MMQ_THREADS, 0, w, xq, T, kper, y, add, err);
}

celer_status gpu_mmq_experts(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                             int64_t n_expert, const int32_t *starts, int64_t max_n, float *y, celer_error *err)
{
    if (!gpu_mmq_has(g, fmt))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer prefill kernel for format %d", CELER_GPU_NAME, fmt);
    if (max_n <= 0) return CELER_OK;
    const int64_t bt = (max_n + 63) / 64;
    if (bt > GPU_MAX_GRID_YZ || n_expert > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld experts, %lld tokens for one: past the prefill grid",
                          CELER_GPU_NAME, (long long)n_expert, (long long)max_n);
    unsigned br;
    if (gpu_grid(g, w->rows, MMQ_ROWS, &br, "mmq experts", err)) return err->code;
    typedef void (*experts_fn)(gpu_wdesc, gpu_xq, const int32_t *, const int32_t *, int64_t, float *);
    const dim3 grid(br, (unsigned)bt, (unsigned)n_expert);
    const experts_fn fn = fmt == GPU_Q4_0 ? k_mmq_experts<GPU_Q4_0, 64> : k_mmq_experts<GPU_Q8_0, 64>;
    return GPU_LAUNCH_KEEPING_XQ(g, err, "mmq experts", fn, grid, MMQ_THREADS, 0, *w, *xq, tok, starts,
                                 w->rows * w->row_bytes, y);
}

celer_status gpu_mmq_expert_tiles(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                                  const int32_t *tiles, int64_t n_tiles, float *y, celer_error *err)
{
    typedef void (*experts_fn)(gpu_wdesc, gpu_xq, const int32_t *, const int32_t *, int64_t, float *);
    typedef sq_shape<GPU_Q4_0, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT> S4;
    typedef sq_shape<GPU_Q8_0, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT> S8;
    static_assert(S4::THREADS == S8::THREADS && S4::SQ_STAGES == S8::SQ_STAGES, "one block shape");
    if (!gpu_mmq_has(g, fmt))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer prefill kernel for format %d", CELER_GPU_NAME, fmt);
    if (n_tiles <= 0) return CELER_OK;
    if (n_tiles > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld tiles of experts' tokens: past the prefill grid",
                          CELER_GPU_NAME, (long long)n_tiles);
    const experts_fn fn = fmt == GPU_Q4_0 ? k_mmq_s_experts<GPU_Q4_0, CELER_MOE_TILE_PAIRS>
                                          : k_mmq_s_experts<GPU_Q8_0, CELER_MOE_TILE_PAIRS>;
    const size_t smem = (size_t)S4::SQ_STAGES * (size_t)(fmt == GPU_Q4_0 ? S4::STAGE : S8::STAGE);
    unsigned     br;
    if (gpu_allow_smem(g, (const void *)fn, smem, err) || gpu_grid(g, w->rows, S4::SQ_ROWS, &br, "mmq experts", err))
        return err->code;
    /* never launched early, as the batch kernel (mmq_small) */
    return GPU_LAUNCH_KEEPING_XQ_AS(g, err, "mmq experts", false, fn, dim3(br, (unsigned)n_tiles), S4::THREADS, smem,
                                    *w, *xq, tok, tiles, w->rows * w->row_bytes, y);
}

celer_status gpu_mmq(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y, bool add,
                     celer_error *err)
{
    gpu_xq xq;
    if (gpu_quant_x(g, x, T, w->cols, g->mvq_x8, &xq, err)) return err->code;
    return gpu_mmq_xq(g, w, fmt, &xq, T, y, add, err);
}
