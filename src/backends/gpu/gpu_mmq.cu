/* Prefill products on the integer matrix units: the activations quantized once to the X32
 * format (gpu_matvec.h), as for decode, and each 32-value block of a weight row dotted with each
 * token's block by mma.m16n8k32 on signed bytes — once with the activations' hi codes, once
 * with their lo codes — then scaled in f32 by the row's and the token's block scales (MLX affine
 * weights add their bias times the token block's sum, as in decode). Decode (gpu_matvec.cu) and
 * prefill thus compute the same sums: a token's logits do not depend on the path beyond f32
 * rounding.
 *
 * Prefill (more than GPU_MMQ_SMALL tokens): a block of 128 threads computes 64 rows × NT = 64
 * tokens; each of its 4 warps 32 rows × NT/2 tokens. Per iteration it stages MMQ_BQ blocks
 * of 32 values: the weights' codes unpacked to signed bytes with their scales, the tokens' hi and
 * lo codes with theirs. The next iteration's global loads are issued into registers before the
 * current tiles are multiplied, so their latency hides behind the matrix work (without that, a
 * block waited on memory at every iteration; ncu put the whole kernel at ~60 TOPS at pp512 on the
 * H200). Rows are padded by 4 bytes so that the fragment loads of a warp fall in distinct banks.
 * Batches of decodes take the streaming kernel of gpu_mmq_small.cuh. A grid of fewer blocks than
 * fill the device twice (a batch of decodes: 4096 rows are 64 blocks) is split over the columns
 * (blockIdx.z), each part's sums written apart and added in part order by a second kernel: every
 * block then walks fewer columns, and more of them hide each other's latency.
 *
 * mma.m16n8k32 fragments (PTX ISA), lane = 4 g + q: A (16 × 32) a0 = row g, bytes 4q .. 4q+3;
 * a1 = row g + 8, same bytes; a2, a3 = the same rows, bytes 16 + 4q ..; B (32 × 8) b0 = column
 * g, bytes 4q ..; b1 = bytes 16 + 4q ..; C (16 × 8) c0, c1 = row g, columns 2q, 2q + 1; c2, c3 =
 * row g + 8.
 *
 * On AMD the same tile runs on MFMA or WMMA (a HIP build's mmq_tile below; amx_layout.h), for
 * steps of more than 8 tokens (gpu_mmq.h), in tiles of NT = 32 up to 32 tokens: the batch
 * kernel's fragments are NVIDIA's alone. */
#include "backends/gpu/gpu_mmq.h"
#include "backends/gpu/gpu_mvq_units.cuh"

enum {
    MMQ_ROWS = 64, MMQ_BQ = 4, MMQ_LD = MMQ_BQ * 32 + 4, MMQ_THREADS = 128, MMQ_WUNITS = 2,
    MMQ_MIN_PART = 16, MMQ_MAX_PARTS = 8 /* column parts: at least 16 blocks deep, at most 8 */
};

/* The formats of the tiled kernel: X(format) each. MLX affine codes go to the units unsigned (4
 * bits) or as q - 128 (8 bits), their biases (and 128 · scale) times the token block's Σ x̂ added
 * to each block's sum, as the decode kernels do. */
#define MMQ_FORMATS(X) X(GPU_Q4_0) X(GPU_Q8_0) X(GPU_AFFINE4) X(GPU_AFFINE8)
/* Blocks an SM k_mmq asks of ptxas (sm_90a): three for MLX affine 4-bit, which took 178 registers
 * unasked (two blocks; 166 asked, no spills) where Q4_0 takes 168; none asked for the others
 * (affine 8-bit spilled 20 bytes at three, its experts' kernel too, affine 4-bit's 28). */
template <int F> static __host__ __device__ constexpr int mmq_blocks() { return F == GPU_AFFINE4 ? 3 : 0; }

bool gpu_mmq_has(const gpu_backend *g, int fmt)
{
#define MMQ_IS(F) fmt == F ||
    return (gpu_imma_ok(&g->prop) || g->amx != CELER_AMX_NONE) && !g->mmq_off && (MMQ_FORMATS(MMQ_IS) false);
#undef MMQ_IS
}

int64_t gpu_mmq_from(const gpu_backend *g, int fmt)
{
    if (gpu_mmq_batch_has(g, fmt) || g->amx != CELER_AMX_NONE) {
        const int64_t least = fmt == GPU_AFFINE2 || fmt == GPU_AFFINE3 || fmt == GPU_NVFP4 ? GPU_MMQ_FROM_NARROW : 0;
        return g->mmq_from > least ? g->mmq_from : least;
    }
    return g->mmq_from > GPU_MMQ_FROM_TILED ? g->mmq_from : GPU_MMQ_FROM_TILED;
}

bool gpu_mmq_takes(const gpu_backend *g, int fmt, int64_t T)
{
    return T > gpu_mmq_from(g, fmt) && (gpu_mmq_has(g, fmt) || (T <= GPU_MMQ_SMALL && gpu_mmq_batch_has(g, fmt)));
}

bool gpu_mmq_tiles_has(const gpu_backend *g, int fmt)
{
    return gpu_mmq_batch_has(g, fmt) || (g->amx != CELER_AMX_NONE && gpu_mmq_has(g, fmt));
}

#if CELER_GPU_AMX
/* Each device pass's kind of matrix units, for the host to read from the code it loaded. */
__device__ int gpu_amx_kind = CELER_GPU_AMX_HERE;

static int amx_built(void)
{
    int kind = CELER_AMX_NONE;
    if (hipMemcpyFromSymbol(&kind, HIP_SYMBOL(gpu_amx_kind), sizeof kind, 0, hipMemcpyDeviceToHost) != hipSuccess) {
        (void)gpuGetLastError();
        return CELER_AMX_NONE;
    }
    return kind;
}

int gpu_amx_take(const gpuDeviceProp *p) { return celer_gfx_matrix_taken(p->gcnArchName, amx_built()); }

void gpu_mmq_facts(const gpuDeviceProp *p, celer_device_facts *f)
{
    celer_gfx_matrix_line(p->gcnArchName, amx_built(), f->matrix, sizeof f->matrix);
}
#else
int gpu_amx_take(const gpuDeviceProp *p) { return (void)p, CELER_AMX_NONE; }

void gpu_mmq_facts(const gpuDeviceProp *p, celer_device_facts *f)
{
    if (gpu_imma_ok(p))
        snprintf(f->matrix, sizeof f->matrix,
                 "mma.sync (i8, f16): Q4_0, Q8_0, MLX affine, mxfp4, nvfp4 from %d tokens (Q4_0, Q8_0, affine "
                 "4/8 past %d), prefill attention", GPU_MMQ_FROM + 1, GPU_MMQ_SMALL);
    else
        snprintf(f->matrix, sizeof f->matrix, "none taken before sm_80: prefill on the f32 tiled kernel");
}
#endif

/* One iteration's global data in a thread's registers: MMQ_WUNITS weight blocks (codes, f16
 * scale; MLX affine: scale a and bias b in f32) and XU token blocks (hi and lo codes, scale d;
 * MLX: d · S too), zeros past the matrix. */
template <int XU>
struct mmq_regs {
    uint4    wc[MMQ_WUNITS][2];
    uint32_t ws[MMQ_WUNITS];
    float    wa[MMQ_WUNITS], wb[MMQ_WUNITS];
    uint4    xc[XU][4];
    float    xs[XU], xy[XU];
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
        st.wa[j] = st.wb[j] = 0.0f;
        if (r < w.rows && b < nq) {
            const uint8_t *row = w.data + r * w.row_bytes;
            if (mmq_affine<F>()) { /* MLX_ROWS, as the decode kernels load it */
                const raw_unit ru = unit_load<F>(w, row, b);
                st.wc[j][0] = ru.v[0], st.wc[j][1] = ru.v[1];
                mlx_pair(ru, w.sdtype, &st.wa[j], &st.wb[j]);
                if (F == GPU_AFFINE8) st.wb[j] += 128.0f * st.wa[j]; /* the codes go in as q - 128 */
                continue;
            }
            if (F == GPU_Q4_0) st.wc[j][0] = *(const uint4 *)(row + 16 * b);
            else st.wc[j][0] = *(const uint4 *)(row + 32 * b), st.wc[j][1] = *(const uint4 *)(row + 32 * b + 16);
            st.ws[j] = ld16(row + w.scales_off + 2 * b);
        }
    }
#pragma unroll
    for (int j = 0; j < XU; j++) {
        const int64_t t = xr[j], b = k0 + (tid + MMQ_THREADS * j) % MMQ_BQ;
        st.xs[j] = st.xy[j] = 0.0f;
#pragma unroll
        for (int k = 0; k < 4; k++) st.xc[j][k] = make_uint4(0, 0, 0, 0);
        if (t >= 0 && b < nq) {
            const uint4 *p = (const uint4 *)(x.q + (t * x.nb + b) * XQ_BLOCK);
#pragma unroll
            for (int k = 0; k < 4; k++) st.xc[j][k] = p[k];
            if (mmq_affine<F>()) {
                const float2 dd = x.d[t * x.nb + b];
                st.xs[j] = dd.x, st.xy[j] = dd.y;
            } else {
                st.xs[j] = x.d[t * x.nb + b].x;
            }
        }
    }
}

/* The x rows of a thread's XU token blocks (tokens t0 + u / MMQ_BQ of its units u; with rows,
 * rows[t]), -1 past the T tokens. */
template <int XU>
static __device__ __forceinline__ void mmq_xrows(int64_t (&xr)[XU], const int32_t *__restrict__ rows, int64_t T,
                                                 int64_t t0, int tid)
{
#pragma unroll
    for (int j = 0; j < XU; j++) {
        const int64_t t = t0 + (tid + MMQ_THREADS * j) / MMQ_BQ;
        xr[j]           = t >= T ? -1 : rows ? rows[t] : t;
    }
}

/* 16 bytes into a shared row at a 4-byte boundary (the rows' padding breaks 16-byte alignment). */
static __device__ __forceinline__ void put16(int8_t *dst, uint4 v)
{
    int *d = (int *)dst;
    d[0] = (int)v.x, d[1] = (int)v.y, d[2] = (int)v.z, d[3] = (int)v.w;
}

/* The registers into the shared tiles: weight codes unpacked to signed bytes; MLX affine: the
 * blocks' biases into wb, the token blocks' d · S into xb. */
template <int F, int XU>
static __device__ __forceinline__ void mmq_put(const mmq_regs<XU> &st, int8_t (*wq)[MMQ_LD], int8_t (*xh)[MMQ_LD],
                                               int8_t (*xl)[MMQ_LD], float (*wd)[MMQ_BQ], float (*xd)[MMQ_BQ],
                                               float (*wb)[MMQ_BQ], float (*xb)[MMQ_BQ], int tid)
{
#pragma unroll
    for (int j = 0; j < MMQ_WUNITS; j++) {
        const int u = tid + MMQ_THREADS * j, rr = u / MMQ_BQ, qb = u % MMQ_BQ;
        int      *dst = (int *)&wq[rr][32 * qb];
        if (F == GPU_Q4_0 || F == GPU_AFFINE4) { /* byte i: values i and i + 16 (SPLIT, MLX_ROWS) */
            const uint32_t cw[4] = {st.wc[j][0].x, st.wc[j][0].y, st.wc[j][0].z, st.wc[j][0].w};
#pragma unroll
            for (int k = 0; k < 4; k++) {
                const uint32_t lo = cw[k] & 0x0f0f0f0fu, hi = (cw[k] >> 4) & 0x0f0f0f0fu;
                dst[k] = F == GPU_Q4_0 ? minus8(lo) : (int)lo, dst[4 + k] = F == GPU_Q4_0 ? minus8(hi) : (int)hi;
            }
        } else if (F == GPU_AFFINE8) {
            const uint4 m = make_uint4(0x80808080u, 0x80808080u, 0x80808080u, 0x80808080u), a = st.wc[j][0],
                        b = st.wc[j][1];
            put16(&wq[rr][32 * qb], make_uint4(a.x ^ m.x, a.y ^ m.y, a.z ^ m.z, a.w ^ m.w));
            put16(&wq[rr][32 * qb + 16], make_uint4(b.x ^ m.x, b.y ^ m.y, b.z ^ m.z, b.w ^ m.w));
        } else { /* Q8_0 */
            put16(&wq[rr][32 * qb], st.wc[j][0]), put16(&wq[rr][32 * qb + 16], st.wc[j][1]);
        }
        if (mmq_affine<F>()) wd[rr][qb] = st.wa[j], wb[rr][qb] = st.wb[j];
        else wd[rr][qb] = dec_f16(st.ws[j]);
    }
#pragma unroll
    for (int j = 0; j < XU; j++) {
        const int u = tid + MMQ_THREADS * j, tt = u / MMQ_BQ, qb = u % MMQ_BQ;
        put16(&xh[tt][32 * qb], st.xc[j][0]), put16(&xh[tt][32 * qb + 16], st.xc[j][1]);
        put16(&xl[tt][32 * qb], st.xc[j][2]), put16(&xl[tt][32 * qb + 16], st.xc[j][3]);
        xd[tt][qb] = st.xs[j];
        if (mmq_affine<F>()) xb[tt][qb] = st.xy[j];
    }
}

#if CELER_GPU_AMX
/* The same tile on AMD's matrix units (amx_layout.h): the 128 threads are 2 waves of 64 (CDNA:
 * each 32 rows × NT tokens) or 4 of 32 (RDNA 3: each 32 rows × NT / 2 tokens, as the NVIDIA
 * warps below), in 16 × 16 tiles. The staging is the NVIDIA kernel's, and so are each block's
 * sums, scales and order: the same outputs. */
template <int F, int NT>
static __device__ __forceinline__ void mmq_tile(const gpu_wdesc &w, const gpu_xq &x, const int32_t *__restrict__ rows,
                                                int64_t T, int64_t t0, int64_t kz0, int64_t nq, float *__restrict__ y,
                                                int add)
{
    constexpr int K = CELER_GPU_AMX_HERE, ACC = amx_acc(K);
    constexpr int WN = MMQ_THREADS / CELER_WARP / 2; /* waves along the tokens: 1 or 2 */
    constexpr int NJ = NT / 16 / WN;                 /* a wave's 16-token tiles */
    constexpr int XU = NT * MMQ_BQ / MMQ_THREADS;    /* token blocks a thread stages */
    __shared__ __align__(16) int8_t wq[MMQ_ROWS][MMQ_LD];
    __shared__ __align__(16) int8_t xh[NT][MMQ_LD], xl[NT][MMQ_LD];
    __shared__ float                wd[MMQ_ROWS][MMQ_BQ], xd[NT][MMQ_BQ];
    constexpr bool                  AFF = mmq_affine<F>(); /* the biases' tiles, one entry where there are none */
    __shared__ float                wb[AFF ? MMQ_ROWS : 1][MMQ_BQ], xb[AFF ? NT : 1][MMQ_BQ];
    const int     tid = threadIdx.x, lane = tid % CELER_WARP, wave = tid / CELER_WARP;
    const int     wm = 32 * (wave % 2), wn = NT / WN * (wave / 2);
    const int64_t r0 = (int64_t)blockIdx.x * MMQ_ROWS;
    float         acc[2][NJ][ACC] = {};
    int64_t xr[XU]; /* the x rows of this thread's token blocks, -1 past the tokens */
    mmq_xrows<XU>(xr, rows, T, t0, tid);
    /* the NVIDIA tile's staging loop, written out again: folded into one function with it, that
     * kernel's code changed (a few instructions) where no GPU could measure it */
    mmq_regs<XU> st;
    mmq_fetch<F, XU>(st, w, x, xr, r0, kz0, nq, tid);
    for (int64_t k0 = kz0; k0 < nq; k0 += MMQ_BQ) {
        mmq_put<F, XU>(st, wq, xh, xl, wd, xd, wb, xb, tid);
        __syncthreads();
        if (k0 + MMQ_BQ < nq) mmq_fetch<F, XU>(st, w, x, xr, r0, k0 + MMQ_BQ, nq, tid);
#pragma unroll 1
        for (int qb = 0; qb < MMQ_BQ; qb++) {
#pragma unroll
            for (int mi = 0; mi < 2; mi++) { /* 16 rows: their scales, then each 16-token tile */
                const int8_t *a = &wq[wm + 16 * mi + lane % 16][32 * qb];
                float         sw[ACC], bw[ACC]; /* the row scales (and biases) of this lane's accumulators */
#pragma unroll
                for (int v = 0; v < ACC; v++) {
                    sw[v] = wd[wm + 16 * mi + amx_row(K, lane, v)][qb];
                    bw[v] = AFF ? wb[wm + 16 * mi + amx_row(K, lane, v)][qb] : 0.0f;
                }
#pragma unroll
                for (int nj = 0; nj < NJ; nj++) {
                    const int n = wn + 16 * nj + lane % 16; /* this lane's token */
                    int       c[ACC];                       /* 256 · (hi codes' sums) + lo codes' sums */
#pragma unroll
                    for (int v = 0; v < ACC; v++) c[v] = 0;
                    gpu_amx_block(c, a, &xh[n][32 * qb]);
#pragma unroll
                    for (int v = 0; v < ACC; v++) c[v] *= 256; /* |c| < 2^28 after the lo sums: exact */
                    gpu_amx_block(c, a, &xl[n][32 * qb]);
                    const float sx = xd[n][qb], sy = AFF ? xb[n][qb] : 0.0f;
#pragma unroll
                    for (int v = 0; v < ACC; v++) {
                        if (AFF) acc[mi][nj][v] += sw[v] * sx * (float)c[v] + bw[v] * sy;
                        else acc[mi][nj][v] += sw[v] * sx * (float)c[v];
                    }
                }
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int nj = 0; nj < NJ; nj++)
#pragma unroll
            for (int v = 0; v < ACC; v++) {
                const int64_t r = r0 + wm + 16 * mi + amx_row(K, lane, v), t = t0 + wn + 16 * nj + lane % 16;
                if (r < w.rows && t < T) mmq_put(&y[t * w.rows + r], acc[mi][nj][v], add);
            }
}
#else
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
    constexpr bool                  AFF = mmq_affine<F>(); /* the biases' tiles, one entry where there are none */
    __shared__ float                wb[AFF ? MMQ_ROWS : 1][MMQ_BQ], xb[AFF ? NT : 1][MMQ_BQ];
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
    mmq_xrows<XU>(xr, rows, T, t0, tid);
    mmq_regs<XU> st;
    mmq_fetch<F, XU>(st, w, x, xr, r0, kz0, nq, tid);
    for (int64_t k0 = kz0; k0 < nq; k0 += MMQ_BQ) {
        mmq_put<F, XU>(st, wq, xh, xl, wd, xd, wb, xb, tid);
        __syncthreads();
        if (k0 + MMQ_BQ < nq) mmq_fetch<F, XU>(st, w, x, xr, r0, k0 + MMQ_BQ, nq, tid);
        /* not unrolled: unrolled, ptxas held every block's fragments at once, 255 registers and 2
         * blocks an SM (ncu: 12% of the warps active, stalled on shared loads); so 168, 3 blocks */
#pragma unroll 1
        for (int qb = 0; qb < MMQ_BQ; qb++) {
            int   a[2][4];
            float sw[2][2], bw[2][2]; /* the row scales (and biases) of this thread's accumulator rows g, g + 8 */
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                const int r = wm + 16 * mi + g;
                a[mi][0]    = *(const int *)&wq[r][32 * qb + 4 * q];
                a[mi][1]    = *(const int *)&wq[r + 8][32 * qb + 4 * q];
                a[mi][2]    = *(const int *)&wq[r][32 * qb + 16 + 4 * q];
                a[mi][3]    = *(const int *)&wq[r + 8][32 * qb + 16 + 4 * q];
                sw[mi][0] = wd[r][qb], sw[mi][1] = wd[r + 8][qb];
                bw[mi][0] = AFF ? wb[r][qb] : 0.0f, bw[mi][1] = AFF ? wb[r + 8][qb] : 0.0f;
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni++) { /* one 8-token tile: its products, then its scaling */
                const int n  = wn + 8 * ni + g, c = wn + 8 * ni + 2 * q; /* c, c + 1: this thread's tokens */
                const int h0 = *(const int *)&xh[n][32 * qb + 4 * q], h1 = *(const int *)&xh[n][32 * qb + 16 + 4 * q];
                const int l0 = *(const int *)&xl[n][32 * qb + 4 * q], l1 = *(const int *)&xl[n][32 * qb + 16 + 4 * q];
                const float sx[2] = {xd[c][qb], xd[c + 1][qb]};
                const float sy[2] = {AFF ? xb[c][qb] : 0.0f, AFF ? xb[c + 1][qb] : 0.0f};
#pragma unroll
                for (int mi = 0; mi < 2; mi++) {
                    int sh[4] = {0, 0, 0, 0}, sl[4] = {0, 0, 0, 0};
                    gpu_imma_16x8x32(sh, a[mi], h0, h1);
                    gpu_imma_16x8x32(sl, a[mi], l0, l1);
#pragma unroll
                    for (int e = 0; e < 4; e++) { /* element e: row g (+ 8 from e = 2), token c + e % 2 */
                        if (AFF)
                            acc[mi][ni][e] += sw[mi][e / 2] * sx[e % 2] * (float)(256 * sh[e] + sl[e]) +
                                              bw[mi][e / 2] * sy[e % 2];
                        else acc[mi][ni][e] += sw[mi][e / 2] * sx[e % 2] * (float)(256 * sh[e] + sl[e]);
                    }
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
#endif

/* Columns blocks kz0 .. kz1 of part blockIdx.z (kper blocks a part), into y + blockIdx.z · T · rows
 * (with add: added to y). */
template <int F, int NT>
__global__ void __launch_bounds__(MMQ_THREADS, mmq_blocks<F>())
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

#if CELER_GPU_AMX
/* Tile blockIdx.y of a list (moe_tiles.h: first pair s0, pairs, expert) of a stacked tensor's
 * experts (w its first, `stride` bytes apart) on AMD's units, as k_mmq_s_experts on NVIDIA's:
 * x's rows tok[s] of the tile's pairs (tok NULL: rows s) into y's rows s; with live, the first
 * *live tiles. */
template <int F>
__global__ void __launch_bounds__(MMQ_THREADS)
    k_mmq_tiles(gpu_wdesc w, gpu_xq x, const int32_t *__restrict__ tok, const int32_t *__restrict__ tiles,
                const int32_t *__restrict__ live, int64_t stride, float *__restrict__ y)
{
    gpu_dep_enter();
    int64_t s0, n, off;
    if (!moe_tile_at(tiles, live, stride, &s0, &n, &off)) return; /* the whole block */
    w.data += off;
    if (!tok) x.q += s0 * x.nb * XQ_BLOCK, x.d += s0 * x.nb;
    mmq_tile<F, CELER_MOE_TILE_PAIRS>(w, x, tok ? tok + s0 : NULL, n, 0, 0, w.cols / 32, y + s0 * w.rows, 0);
}
#endif

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

/* At least MMQ_MIN_PART blocks deep, at most MMQ_MAX_PARTS parts. */
int64_t gpu_mmq_column_parts(const gpu_backend *g, int64_t blocks, int64_t nq, int64_t step, int64_t *kper)
{
    const int64_t fill  = 2 * (int64_t)g->prop.multiProcessorCount;
    int64_t       parts = (fill + blocks / 2) / blocks;
    if (parts > nq / MMQ_MIN_PART) parts = nq / MMQ_MIN_PART;
    if (parts > MMQ_MAX_PARTS) parts = MMQ_MAX_PARTS;
    if (parts < 1) parts = 1;
    *kper = ((nq + parts - 1) / parts + step - 1) / step * step;
    return (nq + *kper - 1) / *kper;
}

celer_status gpu_mmq_launch_parts(gpu_backend *g, gpu_mmq_fn fn, bool early, unsigned br, unsigned bt, int64_t parts,
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

/* The 32-token tile of format F: on AMD every format's, on NVIDIA those without the batch kernel
 * (Q4_0 and Q8_0 steps of up to 32 tokens take that kernel there). */
template <int F> static gpu_mmq_fn mmq_small_fn()
{
    if constexpr (CELER_GPU_AMX || mmq_affine<F>()) return k_mmq<F, GPU_MMQ_SMALL>;
    else return NULL;
}

/* The tiled kernel for fmt in tiles of 64 tokens, *bt of them for T tokens; steps of up to 32 (on
 * NVIDIA those of the formats without the batch kernel) in one tile of 32. */
static gpu_mmq_fn mmq_fn(int fmt, int64_t T, int64_t *bt)
{
    if (T <= GPU_MMQ_SMALL) {
        *bt = 1;
#define MMQ_SMALL_FN(F) if (fmt == F) return mmq_small_fn<F>();
        MMQ_FORMATS(MMQ_SMALL_FN)
#undef MMQ_SMALL_FN
        return NULL;
    }
    *bt = (T + 63) / 64;
#define MMQ_FN(F) if (fmt == F) return k_mmq<F, 64>;
    MMQ_FORMATS(MMQ_FN)
#undef MMQ_FN
    return NULL;
}

celer_status gpu_mmq_xq(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, int64_t T, float *y,
                        bool add, celer_error *err)
{
    if (gpu_mmq_small_takes(g, fmt, T)) return gpu_mmq_small(g, w, fmt, xq, T, y, add, err);
    if (!gpu_mmq_has(g, fmt))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer prefill kernel for format %d", CELER_GPU_NAME, fmt);
    int64_t          bt;
    const gpu_mmq_fn fn = mmq_fn(fmt, T, &bt);
    if (!fn)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no tiled prefill kernel for format %d at %lld tokens",
                          CELER_GPU_NAME, fmt, (long long)T);
    if (bt > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: a step of %lld tokens is past the prefill grid", CELER_GPU_NAME,
                          (long long)T);
    unsigned br;
    if (gpu_grid(g, w->rows, MMQ_ROWS, &br, "mmq", err)) return err->code;
    int64_t       kper;
    const int64_t parts = gpu_mmq_column_parts(g, (int64_t)br * bt, w->cols / 32, MMQ_BQ, &kper);
    return gpu_mmq_launch_parts(g, fn, true, br, (unsigned)bt, parts, MMQ_THREADS, 0, w, xq, T, kper, y, add, err);
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
    experts_fn       fn = NULL;
#define MMQ_EXPERTS_FN(F) if (fmt == F) fn = k_mmq_experts<F, 64>;
    MMQ_FORMATS(MMQ_EXPERTS_FN)
#undef MMQ_EXPERTS_FN
    return GPU_LAUNCH_KEEPING_XQ(g, err, "mmq experts", fn, grid, MMQ_THREADS, 0, *w, *xq, tok, starts,
                                 w->rows * w->row_bytes, y);
}

#if CELER_GPU_AMX
celer_status gpu_mmq_amx_tiles(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                               const int32_t *tiles, int64_t n_tiles, const int32_t *live, float *y, celer_error *err)
{
    static_assert((int)CELER_MOE_TILE_PAIRS == (int)GPU_MMQ_SMALL, "a tile of pairs is the narrow tile's tokens");
    if (!gpu_mmq_has(g, fmt))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer prefill kernel for format %d", CELER_GPU_NAME, fmt);
    if (n_tiles <= 0) return CELER_OK;
    if (n_tiles > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld tiles of experts' tokens: past the prefill grid",
                          CELER_GPU_NAME, (long long)n_tiles);
    unsigned br;
    if (gpu_grid(g, w->rows, MMQ_ROWS, &br, "mmq expert tiles", err)) return err->code;
    typedef void (*tiles_fn)(gpu_wdesc, gpu_xq, const int32_t *, const int32_t *, const int32_t *, int64_t, float *);
    tiles_fn       fn = NULL;
#define MMQ_TILES_FN(F) if (fmt == F) fn = k_mmq_tiles<F>;
    MMQ_FORMATS(MMQ_TILES_FN)
#undef MMQ_TILES_FN
    return GPU_LAUNCH_KEEPING_XQ(g, err, "mmq expert tiles", fn, dim3(br, (unsigned)n_tiles), MMQ_THREADS, 0, *w, *xq,
                                 tok, tiles, live, w->rows * w->row_bytes, y);
}
#endif

celer_status gpu_mmq(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y, bool add,
                     celer_error *err)
{
    gpu_xq xq;
    if (gpu_quant_x(g, x, T, w->cols, g->mvq_x8, &xq, err)) return err->code;
    return gpu_mmq_xq(g, w, fmt, &xq, T, y, add, err);
}
