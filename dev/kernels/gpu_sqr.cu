/* Can the batch kernel's product (k_mmq_s, src/backends/gpu/gpu_mmq_small.cu: Q4_0, 32 tokens,
 * ~42 µs for the 8B's 14336 × 4096 on the H200, ~5 times its weights' time at the copy
 * bandwidth) run with the weights in registers instead of shared memory? k_mmq_s copies each
 * stage of 128 rows' codes into shared memory (cp.async, a block barrier a stage) and the
 * copies alone took 18–23 µs (dev/kernels/gpu_sqh.cu): a stage reads 64 bytes of each of 128
 * rows. Here each warp streams its own 16 rows straight into its mma fragments, as the one-token
 * kernel streams its 4 (dev/kernels/gpu_readpat.cu: that pattern reads at ~4.6 TB/s), with no
 * barrier after the start; only the activations go through shared memory, staged once a block.
 *
 * The numbers are the engine's: the activations in its X32 format (two 8-bit levels a 32-value
 * block, x ≈ d · (256 hi + lo), as xq_put writes them), the weights as stored (a row's Q4_0 codes,
 * then its f16 scales), each block's sum exact in integers (one m16n8k32 mma a level) and scaled
 * by the weight's and the token's scales, blocks in order: the sums k_mmq_s and k_mmvq make, the
 * same within float rounding. Checked against a double-precision product of the same quantized
 * activations (~1e-7: only float rounding) and of the unquantized ones (the quantization's own).
 *
 * A block: WARPS warps, each MT tiles of 16 rows, all 32 tokens, KPER column blocks (one column
 * part; a product of more columns runs its parts side by side, the part varying fastest along
 * the grid, and a second kernel sums them in part order). A warp's lane (g, c) loads word c of
 * rows g and g + 8 of each block (the quad's four lanes read a block's 16 code bytes) U blocks a
 * round, the next round's loads issued before this round's products. MODE 0: the loads only
 * (the floor); 1: the product; 2: the mma without the per-block scaling (what the scaling costs).
 *
 *     nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude -Isrc dev/kernels/gpu_sqr.cu -o sqr && ./sqr
 * Built with -DSQR_MT=1|2, -DSQR_KPER=16|32|64, -DSQR_U=2|4, -DSQR_WARPS=4|8, -DSQR_MINB=N; with
 * -DSQR_WGMMA=1 and -gencode arch=compute_90a,code=sm_90a the warp-group form (k_sqw) instead. */
#include "standalone.cuh"

#include <cuda_fp16.h>
#include <string.h>

#ifndef SQR_MT
#define SQR_MT 1
#endif
#ifndef SQR_KPER
#define SQR_KPER 32
#endif
#ifndef SQR_U
#define SQR_U 4
#endif
#ifndef SQR_WARPS
#define SQR_WARPS 8
#endif
#ifndef SQR_MINB
#define SQR_MINB 1 /* blocks an SM the registers must allow */
#endif
#ifndef SQR_WGMMA
#define SQR_WGMMA 0 /* 1: the warp-group form (k_sqw, -arch=sm_90a) */
#endif
#if SQR_WGMMA
#undef SQR_WARPS
#define SQR_WARPS 4 /* one warp group: 64 rows */
#endif
enum { NT = 32, MT = SQR_MT, KPER = SQR_KPER, U = SQR_U, WARPS = SQR_WARPS, THREADS = 32 * WARPS };
enum { ROWS = WARPS * 16 * MT, REPS = 40, XBLK = 64 /* a block's hi then lo codes */ };
static_assert(KPER % U == 0, "whole rounds a part");

#if !SQR_WGMMA
/* c = a · b (m16n8k32, s8 × s8 → s32, c's input zero). */
static __device__ __forceinline__ void imma(int c[4], const int a[4], int b0, int b1)
{
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %10, %10, %10};"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}
#endif

/* The four nibbles of each byte's low (hi: high) half as signed bytes q - 8: byte 0x80 + q, less
 * 8 (no borrow leaves a byte), its top bit flipped. */
static __device__ __forceinline__ int q4_lo(uint32_t w)
{
    return (int)((((w & 0x0f0f0f0fu) | 0x80808080u) - 0x08080808u) ^ 0x80808080u);
}
static __device__ __forceinline__ int q4_hi(uint32_t w) { return q4_lo(w >> 4); }

/* wgmma's B operand for a column block, 64 rows n (32 tokens' hi codes, then their lo codes) by its
 * 32 values k, K-major without swizzle: core matrices of 8 rows by 16 bytes, 128 bytes each, the
 * one of rows 8 i .. and values 16 h .. at (2 i + h) · 128 (the next along k 128 bytes on: LBO;
 * along n 256: SBO). Byte (n, k) of a block's 2 KB image: */
static __host__ __device__ int sqw_at(int n, int k) { return (n / 8 * 2 + k / 16) * 128 + n % 8 * 16 + k % 16; }

/* The activations in fragment order, as the quantizer of a batch step would write them: xf[b][ni][lane]
 * (16 bytes: token 8 ni + g's hi words c, c + 4 and lo words c, c + 4 of column block b, for lane
 * g · 4 + c: its B fragments, one load a tile and block), and xd2[b][c][ni][e] (the d of token
 * 8 ni + 2 c + e: a lane's outputs' tokens, two 16-byte loads). */
static void fragment_order(const int8_t *q, const float *dd, int T, int64_t nb, uint32_t *xf, float *xd2)
{
    for (int64_t b = 0; b < nb; b++) {
        if (SQR_WGMMA) /* wgmma's B image instead: n 0..31 the tokens' hi codes, 32..63 their lo codes */
            for (int n = 0; n < 64; n++)
                for (int k = 0; k < 32; k++) {
                    const int t = n % 32, lv = n / 32;
                    ((int8_t *)xf)[b * 2048 + sqw_at(n, k)] = t < T ? q[((int64_t)t * nb + b) * XBLK + 32 * lv + k] : 0;
                }
        for (int i = 0; i < 128 && !SQR_WGMMA; i++) {
            const int       ni = i / 32, L = i % 32, t = 8 * ni + L / 4, c = L % 4;
            const uint32_t *src = (const uint32_t *)(q + ((int64_t)t * nb + b) * XBLK);
            const int       wi[4] = {c, c + 4, 8 + c, 12 + c};
            for (int k = 0; k < 4; k++) xf[(b * 128 + i) * 4 + k] = t < T ? src[wi[k]] : 0u;
        }
        for (int i = 0; i < 32; i++) {
            const int c = i / 8, j = i % 8, t = 8 * (j / 2) + 2 * c + j % 2;
            xd2[b * 32 + i] = t < T ? dd[2 * (t * nb + b)] : 0.0f;
        }
    }
}

#if !SQR_WGMMA
template <int MODE>
__global__ void __launch_bounds__(THREADS, SQR_MINB) k_sqr(const uint8_t *__restrict__ w, int64_t rows, int64_t nb,
                                                  const uint32_t *__restrict__ xf, const float *__restrict__ xd2,
                                                  float *__restrict__ y, int T)
{
    /* the activations in fragment order (xf: the part's blocks, 2 KB each; xd2: their d's), read
     * through the L1 by every warp of the part: no staging, no barrier */
    const int     lane = threadIdx.x % 32, wid = threadIdx.x / 32, g = lane / 4, c = lane % 4;
    /* the part varies fastest along the grid: the blocks an SM is dealt first (every 132nd on
     * the H200, a multiple of the parts) share their part's activations in its L1 */
    const int     parts = (int)(nb / KPER), part = (int)(blockIdx.x % parts), rg = (int)(blockIdx.x / parts);
    const int64_t b0 = (int64_t)part * KPER, row_bytes = nb * 18;
    const uint4  *xs = (const uint4 *)xf + b0 * 128;
    const float4 *dq = (const float4 *)xd2 + b0 * 8;
    /* the warp's rows: tile m's g and g + 8 (a row past the matrix reads row 0: not stored) */
    const uint8_t *ra[MT], *rb[MT];
    int64_t        r0[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        r0[m]           = ((int64_t)rg * WARPS * MT + wid * MT + m) * 16;
        const int64_t a = r0[m] + g, bb = a + 8;
        ra[m] = w + (a < rows ? a : 0) * row_bytes, rb[m] = w + (bb < rows ? bb : 0) * row_bytes;
    }
    uint32_t ca[2][MT][U], cb[2][MT][U]; /* codes: this round's and the next's */
    uint2    sa[2][MT], sb[2][MT];       /* the U blocks' f16 scales, U = 4 (U = 2: .x only; 8: two words) */
    static_assert(U == 2 || U == 4, "a round's scales in one 4- or 8-byte load");
    auto load = [&](int s, int64_t b) {
#pragma unroll
        for (int m = 0; m < MT; m++) {
#pragma unroll
            for (int u = 0; u < U; u++)
                ca[s][m][u] = *(const uint32_t *)(ra[m] + 16 * (b + u) + 4 * c),
                cb[s][m][u] = *(const uint32_t *)(rb[m] + 16 * (b + u) + 4 * c);
            if (U == 4)
                sa[s][m] = *(const uint2 *)(ra[m] + nb * 16 + 2 * b),
                sb[s][m] = *(const uint2 *)(rb[m] + nb * 16 + 2 * b);
            else
                sa[s][m].x = *(const uint32_t *)(ra[m] + nb * 16 + 2 * b),
                sb[s][m].x = *(const uint32_t *)(rb[m] + nb * 16 + 2 * b);
        }
    };
    float    acc[MT][4][4] = {};
    uint32_t keep          = 0;
    load(0, b0);
#pragma unroll 1
    for (int k = 0; k < KPER; k += 2 * U) {
#pragma unroll
        for (int s = 0; s < 2; s++) { /* s: the register set of round k / U + s */
            const int kk = k + s * U;
            if (kk >= KPER) break;
            if (kk + U < KPER) load(s ^ 1, b0 + kk + U);
            if constexpr (MODE == 0) {
#pragma unroll
                for (int m = 0; m < MT; m++) {
#pragma unroll
                    for (int u = 0; u < U; u++) keep ^= ca[s][m][u] + cb[s][m][u];
                    keep ^= sa[s][m].x + sb[s][m].x + (U == 4 ? sa[s][m].y + sb[s][m].y : 0);
                }
            } else {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int   b  = kk + u;
                    const float4 *dp = dq + (b * 4 + c) * 2, d0 = dp[0], d1 = dp[1];
                    const float dx[4][2] = {{d0.x, d0.y}, {d0.z, d0.w}, {d1.x, d1.y}, {d1.z, d1.w}};
                    uint4       bx[4];
#pragma unroll
                    for (int ni = 0; ni < 4; ni++) bx[ni] = xs[(b * 4 + ni) * 32 + lane];
#pragma unroll
                    for (int m = 0; m < MT; m++) {
                        const uint32_t qa = ca[s][m][u], qb = cb[s][m][u];
                        const int      a[4] = {q4_lo(qa), q4_lo(qb), q4_hi(qa), q4_hi(qb)};
                        const uint32_t wa = u < 2 ? sa[s][m].x : sa[s][m].y, wb = u < 2 ? sb[s][m].x : sb[s][m].y;
                        const float    swa = __half2float(__ushort_as_half((unsigned short)(wa >> (16 * (u % 2)))));
                        const float    swb = __half2float(__ushort_as_half((unsigned short)(wb >> (16 * (u % 2)))));
#pragma unroll
                        for (int ni = 0; ni < 4; ni++) {
                            int ch[4], cl[4];
                            imma(ch, a, (int)bx[ni].x, (int)bx[ni].y);
                            imma(cl, a, (int)bx[ni].z, (int)bx[ni].w);
#pragma unroll
                            for (int e = 0; e < 4; e++) {
                                const int sum = 256 * ch[e] + cl[e];
                                const float sc  = (e < 2 ? swa : swb) * dx[ni][e % 2];
                                float      &r   = acc[m][ni][e];
                                r               = MODE == 2 ? r + (float)sum : fmaf(sc, (float)sum, r);
                            }
                        }
                    }
                }
            }
        }
    }
    if (MODE == 0) {
        if (keep == 0x9e3779b9u) y[0] = 1.0f; /* the loads stay */
        return;
    }
    y += (int64_t)part * T * rows;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int ni = 0; ni < 4; ni++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int     t = 8 * ni + 2 * c + e % 2;
                const int64_t r = r0[m] + g + 8 * (e / 2);
                if (t < T && r < rows) y[(int64_t)t * rows + r] = acc[m][ni][e];
            }
}

#endif

#if SQR_WGMMA
/* The warp-group form (sm_90a): a block is one warp group of 64 rows; each column block's B image
 * (the part's, staged once in shared memory) is read by the tensor cores for all four warps, where
 * k_sqr's warps each read their fragments through the L1. Per block one
 * wgmma.m64n64k32.s32.s8.s8 with A (the weights, signed bytes) from registers makes both levels'
 * sums at once (columns 0..31 hi, 32..63 lo); then the same per-block scaling as k_sqr. The
 * wgmma is waited on before its sums are read (one in flight: the simple form). */
static __device__ __forceinline__ uint64_t sqw_desc(const void *tile)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(tile);
    return (uint64_t)((a & 0x3ffff) >> 4) | (uint64_t)(128 >> 4) << 16 | (uint64_t)(256 >> 4) << 32;
}

/* d (32 sums a thread) = a (this warp's 16 rows of the block, m16n8k32's A fragment) · the B tile. */
static __device__ __forceinline__ void sqw_mma(int (&d)[32], const int (&a)[4], uint64_t desc)
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p;\n}\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]), "=r"(d[4]), "=r"(d[5]), "=r"(d[6]), "=r"(d[7]),
                   "=r"(d[8]), "=r"(d[9]), "=r"(d[10]), "=r"(d[11]), "=r"(d[12]), "=r"(d[13]), "=r"(d[14]),
                   "=r"(d[15]), "=r"(d[16]), "=r"(d[17]), "=r"(d[18]), "=r"(d[19]), "=r"(d[20]), "=r"(d[21]),
                   "=r"(d[22]), "=r"(d[23]), "=r"(d[24]), "=r"(d[25]), "=r"(d[26]), "=r"(d[27]), "=r"(d[28]),
                   "=r"(d[29]), "=r"(d[30]), "=r"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(0)
                 : "memory");
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
    for (int i = 0; i < 32; i++) asm volatile("" : "+r"(d[i])::"memory"); /* read only after the wait */
}

template <int MODE>
__global__ void __launch_bounds__(THREADS, SQR_MINB) k_sqw(const uint8_t *__restrict__ w, int64_t rows, int64_t nb,
                                                             const uint32_t *__restrict__ xf,
                                                             const float *__restrict__ xd2, float *__restrict__ y,
                                                             int T)
{
    extern __shared__ __align__(128) uint4 tiles[]; /* the part's B images, 2 KB a column block */
    const int     lane = threadIdx.x % 32, wid = threadIdx.x / 32, g = lane / 4, c = lane % 4;
    const int     parts = (int)(nb / KPER), part = (int)(blockIdx.x % parts), rg = (int)(blockIdx.x / parts);
    const int64_t b0 = (int64_t)part * KPER, row_bytes = nb * 18;
    for (int i = threadIdx.x; i < KPER * 128; i += THREADS) tiles[i] = ((const uint4 *)xf)[b0 * 128 + i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); /* the stores, seen by the tensor cores */
    __syncthreads();
    const float4  *dq = (const float4 *)xd2 + b0 * 8;
    const int64_t  r0 = ((int64_t)rg * WARPS + wid) * 16, ra = r0 + g, rb = ra + 8;
    const uint8_t *pa = w + (ra < rows ? ra : 0) * row_bytes, *pb = w + (rb < rows ? rb : 0) * row_bytes;
    float          acc[4][4] = {};
    uint32_t       keep      = 0;
#pragma unroll 1
    for (int k = 0; k < KPER; k += U) {
        uint32_t ca[U], cb[U];
        uint2    sa, sb;
#pragma unroll
        for (int u = 0; u < U; u++)
            ca[u] = *(const uint32_t *)(pa + 16 * (b0 + k + u) + 4 * c),
            cb[u] = *(const uint32_t *)(pb + 16 * (b0 + k + u) + 4 * c);
        static_assert(U == 4, "a round's scales in one 8-byte load");
        sa = *(const uint2 *)(pa + nb * 16 + 2 * (b0 + k)), sb = *(const uint2 *)(pb + nb * 16 + 2 * (b0 + k));
        if constexpr (MODE == 0) {
#pragma unroll
            for (int u = 0; u < U; u++) keep ^= ca[u] + cb[u];
            keep ^= sa.x + sa.y + sb.x + sb.y;
        } else
#pragma unroll
        for (int u = 0; u < U; u++) {
            const int      b    = k + u;
            const int      a[4] = {q4_lo(ca[u]), q4_lo(cb[u]), q4_hi(ca[u]), q4_hi(cb[u])};
            int            d[32];
            sqw_mma(d, a, sqw_desc(tiles + b * 128));
            const float4  *dp = dq + (b * 4 + c) * 2, d0 = dp[0], d1 = dp[1];
            const float    dx[4][2] = {{d0.x, d0.y}, {d0.z, d0.w}, {d1.x, d1.y}, {d1.z, d1.w}};
            const uint32_t wa = u < 2 ? sa.x : sa.y, wb = u < 2 ? sb.x : sb.y;
            const float    swa = __half2float(__ushort_as_half((unsigned short)(wa >> (16 * (u % 2)))));
            const float    swb = __half2float(__ushort_as_half((unsigned short)(wb >> (16 * (u % 2)))));
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) { /* column 8 j + 2 c + e % 2: hi in chunk j, lo in chunk j + 4 */
                    const int sum = 256 * d[4 * j + e] + d[16 + 4 * j + e];
                    float    &r   = acc[j][e];
                    r = MODE == 2 ? r + (float)sum : fmaf((e < 2 ? swa : swb) * dx[j][e % 2], (float)sum, r);
                }
        }
    }
    if (MODE == 0) {
        if (keep == 0x9e3779b9u) y[0] = 1.0f; /* the loads stay */
        return;
    }
    y += (int64_t)part * T * rows;
#pragma unroll
    for (int j = 0; j < 4; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int     t = 8 * j + 2 * c + e % 2;
            const int64_t r = r0 + g + 8 * (e / 2);
            if (t < T && r < rows) y[(int64_t)t * rows + r] = acc[j][e];
        }
}
#endif

/* ---- host ---------------------------------------------------------------------------------- */

static int code(float v) { return v != v ? 0 : v > 127.0f ? 127 : v < -127.0f ? -127 : (int)lrintf(v); }

/* x's token rows in the X32 format, as xq_put quantizes them (the same roundings in f32): codes
 * (hi[32], lo[32] a block) and each block's (d, d · S); xv: the values they stand for. */
static void quantize_x(const float *x, int T, int64_t cols, int8_t *q, float *dd, double *xv)
{
    for (int64_t blk = 0; blk < T * cols / 32; blk++) {
        const float *v    = x + blk * 32;
        float        amax = 0.0f;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(v[i]));
        const float D = amax / 127.0f, id = D != 0.0f ? 1.0f / D : 0.0f, d = D / 256.0f;
        for (int i = 0; i < 32; i++) {
            const int hi = code(v[i] * id), lo = code((v[i] - (float)hi * D) * (id * 256.0f));
            q[blk * XBLK + i] = (int8_t)hi, q[blk * XBLK + 32 + i] = (int8_t)lo;
            xv[blk * 32 + i] = (double)d * (256.0 * hi + lo);
        }
        dd[2 * blk] = d, dd[2 * blk + 1] = 0.0f; /* d · S: unused here (signed codes) */
    }
}

template <int MODE>
static double run(const uint8_t *dw, size_t wbytes, int copies, int64_t rows, int64_t nb, const uint32_t *dxf,
                  const float *dxd, int T, float *dpart, float *dy, bool timed)
{
    const int     parts = (int)(nb / KPER);
    const unsigned grid = (unsigned)((rows + ROWS - 1) / ROWS * parts);
    const int64_t n = (int64_t)T * rows;
#if SQR_WGMMA
    CHECK(cudaFuncSetAttribute(k_sqw<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, KPER * 2048));
#endif
    return sa_timed(timed ? REPS : 1, [&](int r) {
        const uint8_t *w = dw + (size_t)(timed ? r % copies : 0) * wbytes;
#if SQR_WGMMA
        k_sqw<MODE><<<grid, THREADS, (size_t)KPER * 2048>>>(w, rows, nb, dxf, dxd, parts > 1 ? dpart : dy, T);
#else
        k_sqr<MODE><<<grid, THREADS>>>(w, rows, nb, dxf, dxd, parts > 1 ? dpart : dy, T);
#endif
        if (parts > 1 && MODE) k_parts_sum<<<(unsigned)((n + 255) / 256), 256>>>(dpart, parts, n, dy);
    });
}

static void shape(int64_t rows, int64_t cols, int T)
{
    const int64_t nb = cols / 32;
    if (nb % KPER) {
        printf("%lld x %lld: %lld column blocks are not whole parts of %d\n", (long long)rows, (long long)cols,
               (long long)nb, KPER);
        return;
    }
    const size_t wbytes = (size_t)(rows * nb * 18);
    const int    copies = (int)(300e6 / wbytes) + 2;
    uint8_t     *w      = (uint8_t *)malloc(wbytes);
    float       *val = (float *)malloc(sizeof(float) * rows * cols), *x = (float *)malloc(sizeof(float) * T * cols);
    float       *y   = (float *)malloc(sizeof(float) * T * rows), *dd = (float *)malloc(sizeof(float) * 2 * T * nb);
    int8_t      *q   = (int8_t *)malloc((size_t)T * nb * XBLK);
    uint32_t    *xf  = (uint32_t *)malloc((size_t)nb * 128 * 16);
    float       *xd2 = (float *)malloc(sizeof(float) * nb * 32);
    double      *xv  = (double *)malloc(sizeof(double) * T * cols);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + r * nb * 18;
        for (int64_t b = 0; b < nb; b++) {
            const __half d  = __float2half(0.002f + 0.02f * uniform());
            const float  df = __half2float(d);
            memcpy(row + nb * 16 + 2 * b, &d, 2);
            for (int i = 0; i < 16; i++) {
                const uint8_t v = (uint8_t)next_u32();
                row[16 * b + i] = v;
                val[r * cols + 32 * b + i] = df * (float)((v & 15) - 8);
                val[r * cols + 32 * b + i + 16] = df * (float)((v >> 4) - 8);
            }
        }
    }
    for (int64_t i = 0; i < T * cols; i++) x[i] = normal() * (next_u32() % 100 == 0 ? 20.0f : 1.0f);
    quantize_x(x, T, cols, q, dd, xv);
    fragment_order(q, dd, T, nb, xf, xd2);
    uint8_t  *dw;
    uint32_t *dxf;
    float    *dy, *dpart, *dxd;
    CHECK(cudaMalloc(&dw, wbytes * copies));
    for (int c = 0; c < copies; c++) CHECK(cudaMemcpy(dw + c * wbytes, w, wbytes, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&dxf, (size_t)nb * 128 * 16));
    CHECK(cudaMalloc(&dxd, sizeof(float) * nb * 32));
    CHECK(cudaMalloc(&dy, sizeof(float) * T * rows));
    CHECK(cudaMalloc(&dpart, sizeof(float) * (nb / KPER) * T * rows));
    CHECK(cudaMemcpy(dxf, xf, (size_t)nb * 128 * 16, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dxd, xd2, sizeof(float) * nb * 32, cudaMemcpyHostToDevice));
    CHECK(cudaMemset(dy, 0, sizeof(float) * T * rows));
    run<1>(dw, wbytes, copies, rows, nb, dxf, dxd, T, dpart, dy, false);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaMemcpy(y, dy, sizeof(float) * T * rows, cudaMemcpyDeviceToHost));
    /* against the quantized activations' exact product (the kernel's arithmetic) and the
     * unquantized one (the format's), every 7th row */
    double nq = 0, nx = 0, den = 0;
    for (int64_t r = 0; r < rows; r += 7)
        for (int t = 0; t < T; t++) {
            double sq = 0, sx = 0;
            for (int64_t k = 0; k < cols; k++) sq += (double)val[r * cols + k] * xv[t * cols + k],
                                               sx += (double)val[r * cols + k] * x[t * cols + k];
            const double d = y[t * rows + r];
            nq += (d - sq) * (d - sq), nx += (d - sx) * (d - sx), den += sx * sx;
        }
    const double us = run<1>(dw, wbytes, copies, rows, nb, dxf, dxd, T, dpart, dy, true);
    const double un = run<2>(dw, wbytes, copies, rows, nb, dxf, dxd, T, dpart, dy, true);
    const double uf = run<0>(dw, wbytes, copies, rows, nb, dxf, dxd, T, dpart, dy, true);
    const double rq = sqrt(nq / den), rx = sqrt(nx / den);
    printf("Q4_0 %6lld x %-6lld T %2d  %4lld blocks  %8.2f us  %7.1f GB/s  | no scaling %7.2f  loads %7.2f us"
           "  | rel L2 %.1e (arithmetic) %.1e (X32)%s\n",
           (long long)rows, (long long)cols, T, (long long)((rows + ROWS - 1) / ROWS * (nb / KPER)), us,
           wbytes / us * 1e-3, un, uf, rq, rx, rq < 1e-5 ? "" : "  FAILED");
    fflush(stdout);
    CHECK(cudaFree(dw));
    CHECK(cudaFree(dxf));
    CHECK(cudaFree(dxd));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dpart));
    free(w), free(val), free(x), free(y), free(dd), free(q), free(xv), free(xf), free(xd2);
}

int main(int argc, char **argv)
{
    static const int64_t shapes[][2] = {{14336, 4096}, {4096, 14336}, {4096, 4096}, {6144, 4096}};
    const int            ns = (int)(sizeof shapes / sizeof shapes[0]);
    const int            n  = argc > 1 ? atoi(argv[1]) : ns;
    const int            T  = argc > 2 ? atoi(argv[2]) : NT;
    if (n < 1 || n > ns || T < 1 || T > NT)
        return fprintf(stderr, "usage: sqr [SHAPES 1 .. %d [TOKENS 1 .. %d]]\n", ns, NT), 2;
    printf("%d warps a block, %d row tile%s a warp, %d column blocks a part, %d a round\n", WARPS, MT,
           MT > 1 ? "s" : "", KPER, U);
    for (int i = 0; i < n; i++) shape(shapes[i][0], shapes[i][1], T);
    return 0;
}
