/* Is the batch kernel (k_mmq_s, src/backends/gpu/gpu_mmq_small.cu) bound by its per-block
 * epilogue? On the H200 its 14336 × 4096 product of 32 tokens takes ~42 µs (ncu, twenty-ninth
 * pass), two warps a scheduler issuing once every 3.4 cycles: ~137 instructions a warp for each
 * 32-column block, 256 of a stage's 683 on converting and scaling the integer sums (each output:
 * 256 · hi + lo, int to float, weight scale × token scale, fma). This harness times the other way
 * to the same product: the weights' codes turned into f16 integers in registers (exact: -8..7
 * or -128..127), the activations in f16 (each token scaled by a power of two so that its largest
 * value is below 2^14: no overflow, 11 bits of every value), f16 mma with f32 sums, and one fma an
 * output for each block's weight scale (the token's scale once, at the end): 406 instructions a
 * stage of 4 blocks (dev/kernels/sass_loops.py). Its error is reported against a double-precision
 * reference.
 *
 * Layout and pipeline as k_mmq_s's default geometry: a block 128 rows × 32 tokens, a warp a
 * 16-row tile with every token, BQ column blocks a stage in 3 stages of cp.async; rows as the
 * engine stores them (a row's codes, then its f16 scales). Each 32-value block of the f16
 * activations is stored permuted (sqh_perm) so that a lane's four code bytes of a row (its
 * mma fragment) are the values its fragment slots ask for: no byte shuffles, and the ldmatrix
 * of the activations reads rows as stored.
 *
 * Shapes: the 8B's products (rows × columns, 32 tokens), Q4_0 and Q8_0, in 1, 2 and 4 column
 * parts (split over blockIdx.z, the parts summed by a second kernel); weights rotate over copies
 * worth ~6 times the L2, so that they come from DRAM as in a decode step. `stream` runs the same
 * copies with no arithmetic: the pipeline's floor. `./sqh N T`: the first N shapes at T tokens
 * (32-token tiles along the grid's y: at 512, a prefill's form). Built with -DSQH_BQ, -DSQH_STAGES
 * (the stage shape) and -DSQH_LEVELS=2 (the activations in two f16 levels, ~22 bits).
 *
 *     nvcc -O3 -std=c++17 -arch=sm_90 -Iinclude -Isrc dev/kernels/gpu_sqh.cu -o sqh && ./sqh */
#include "backends/gpu/gpu_vendor.h"
#include "standalone.cuh"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifndef SQH_BQ
#define SQH_BQ 4 /* column blocks a stage: 4, 8 or 16 */
#endif
#ifndef SQH_STAGES
#define SQH_STAGES 3
#endif
#ifndef SQH_LEVELS
#define SQH_LEVELS 1 /* the activations' f16 levels: 1, or 2 (hi, then the rest · 2^11: ~22 bits) */
#endif
enum { NT = 32, ROWS = 128, BQ = SQH_BQ, STAGES = SQH_STAGES, LV = SQH_LEVELS, THREADS = 256, REPS = 40 };
enum { SQH_Q4_0, SQH_Q8_0 };

/* Shared memory of a stage (bytes): BQ blocks of 128 rows' codes, their f16 scales, 32 tokens'
 * f16 activations; rows and tokens padded by 16 bytes (ldmatrix and the code loads conflict-free). */
template <int F> struct sqh_lay {
    static constexpr int WB     = F == SQH_Q4_0 ? 16 : 32;
    static constexpr int WLD    = BQ * WB + 16;
    static constexpr int XLD    = LV * BQ * 32 * 2 + 16; /* a token's levels, one after the other */
    static constexpr int WS_OFF = ROWS * WLD;
    static constexpr int X_OFF  = WS_OFF + ROWS * 2 * BQ;
    static constexpr int STAGE  = X_OFF + NT * XLD;
};

/* Where value p of a stored 32-value block comes from: stored p = 16 h + s (mma k-half h, slot s)
 * holds value 16 h + 4 q + j, q = (s mod 8) / 2 (the lane in its group of four), j = 0, 2 for
 * s < 8 and 1, 3 for s >= 8 — the pairs (4q, 4q+2) and (4q+1, 4q+3) the low and high halves of
 * a lane's code word give (sqh_q4, sqh_q8). */
static __host__ __device__ int sqh_perm(int p)
{
    const int h = p / 16, s = p % 16, q = s % 8 / 2, j = (s < 8 ? 0 : 1) + 2 * (s % 2);
    return 16 * h + 4 * q + j;
}

static __device__ __forceinline__ uint32_t h2_sub(uint32_t a, uint32_t b)
{
    const __half2 r = __hsub2(*(const __half2 *)&a, *(const __half2 *)&b);
    return *(const uint32_t *)&r;
}
/* The low nibbles of bytes 0 and 2 of u, minus 8, as an f16 pair (1024 + n, less 1032: exact). */
static __device__ __forceinline__ uint32_t sqh_q4(uint32_t u)
{
    return h2_sub((u & 0x000f000fu) | 0x64006400u, 0x64086408u);
}
/* Bytes 0 and 2 of u as signed values, an f16 pair (1024 + 128 + b, less 1152: exact). */
static __device__ __forceinline__ uint32_t sqh_q8(uint32_t u)
{
    return h2_sub((u & 0x00ff00ffu) ^ 0x64806480u, 0x64806480u);
}

/* x (T × cols f32) into xh (f16, each block permuted) scaled by 2^-e[t]: e[t] the power of two
 * that puts the token's largest magnitude below 2^14; with two levels a token's row is its hi
 * values, then its lo values (v - hi, times 2^11). One block a token. */
__global__ void k_sqh_x(const float *__restrict__ x, int64_t cols, __half *__restrict__ xh, int *__restrict__ e)
{
    __shared__ float red[32];
    const float     *xt = x + blockIdx.x * cols;
    float            m  = 0.0f;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) m = fmaxf(m, fabsf(xt[i]));
    for (int o = 16; o; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
    __syncthreads();
    m = 0.0f;
    for (int i = 0; i < (int)blockDim.x / 32; i++) m = fmaxf(m, red[i]);
    int ex = 0;
    frexpf(m, &ex); /* m < 2^ex */
    if (threadIdx.x == 0) e[blockIdx.x] = ex - 14;
    for (int64_t i = threadIdx.x; i < cols; i += blockDim.x) {
        const float  v  = ldexpf(xt[i / 32 * 32 + sqh_perm((int)(i % 32))], 14 - ex);
        const __half hi = __float2half_rn(v);
        xh[blockIdx.x * LV * cols + i] = hi;
        if (LV == 2) xh[blockIdx.x * LV * cols + cols + i] = __float2half_rn((v - __half2float(hi)) * 2048.0f);
    }
}

/* Rows blockIdx.x · 128 .. by tokens blockIdx.y · 32 .. (of T), column blocks of part
 * blockIdx.z (kper each), into y + z · T · rows (t-major). MATH false: the copies only. */
template <int F, bool MATH>
__global__ void __launch_bounds__(THREADS) k_sqh(const uint8_t *__restrict__ w, int64_t rows, int64_t nb,
                                                  const __half *__restrict__ xh, const int *__restrict__ e, int T,
                                                  int64_t kper, float *__restrict__ y)
{
    typedef sqh_lay<F> L;
    extern __shared__ __align__(16) int8_t smem[];
    constexpr int CPR = BQ * L::WB / 16, NW = ROWS * CPR / THREADS, XPT = LV * BQ * 4, NX = NT * XPT / THREADS;
    static_assert(ROWS * CPR % THREADS == 0 && NT * XPT % THREADS == 0, "whole pieces a thread");
    static_assert(BQ == 4 || BQ == 8 || BQ == 16, "a row's scales in 8-byte or whole 16-byte copies");
    const int     tid = threadIdx.x, lane = tid % 32, rt = tid / 32, g = lane / 4, q = lane % 4;
    const int64_t r0 = (int64_t)blockIdx.x * ROWS, kz0 = (int64_t)blockIdx.z * kper;
    const int64_t row_bytes = nb * (L::WB + 2), scales_off = nb * L::WB, nst = kper / BQ;
    const int     t0 = blockIdx.y * NT, nt = T - t0; /* this block's tokens: t0 .. t0 + min(nt, NT) */
    xh += (int64_t)t0 * LV * nb * 32;
    auto issue = [&](int8_t *st, int64_t k0) {
#pragma unroll
        for (int j = 0; j < NW; j++) {
            const int i = tid + THREADS * j, r = i / CPR, k = i % CPR;
            gpu_cp_async16(st + r * L::WLD + 16 * k, w + (r0 + r) * row_bytes + k0 * L::WB + 16 * k, true);
        }
        if (BQ == 4 && tid < ROWS) /* a row's BQ scales */
            gpu_cp_async8(st + L::WS_OFF + 8 * tid, w + (r0 + tid) * row_bytes + scales_off + 2 * k0, true);
        constexpr int SP = BQ > 4 ? BQ / 8 : 1; /* else: 16-byte pieces of a row's scales */
        for (int i = tid; BQ > 4 && i < ROWS * SP; i += THREADS) {
            const uint8_t *src = w + (r0 + i / SP) * row_bytes + scales_off + 2 * k0 + 16 * (i % SP);
            gpu_cp_async16(st + L::WS_OFF + 2 * BQ * (i / SP) + 16 * (i % SP), src, true);
        }
#pragma unroll
        for (int j = 0; j < NX; j++) {
            const int i = tid + THREADS * j, t = i / XPT, lv = i % XPT / (BQ * 4), k = i % (BQ * 4);
            const __half *src = t < nt ? xh + (t * LV + lv) * nb * 32 + k0 * 32 + 8 * k : xh;
            gpu_cp_async16(st + L::X_OFF + t * L::XLD + lv * BQ * 64 + 16 * k, src, t < nt);
        }
        gpu_cp_commit();
    };
    float acc[NT / 8][4] = {};
    for (int s = 0; s < STAGES - 1; s++) {
        if (s < nst) issue(smem + s * L::STAGE, kz0 + s * BQ);
        else gpu_cp_commit();
    }
    for (int64_t it = 0; it < nst; it++) {
        gpu_cp_wait<STAGES - 2>();
        __syncthreads();
        const int64_t nx = it + STAGES - 1;
        if (nx < nst) issue(smem + nx % STAGES * L::STAGE, kz0 + nx * BQ);
        else gpu_cp_commit();
        if (!MATH) continue;
        const int8_t   *st = smem + it % STAGES * L::STAGE;
        const int8_t   *w0 = st + (16 * rt + g) * L::WLD, *w8 = w0 + 8 * L::WLD;
        const __half   *ws = (const __half *)(st + L::WS_OFF);
        const int8_t   *xr = st + L::X_OFF + lane % 8 * L::XLD + lane / 8 * 16;
#pragma unroll
        for (int qb = 0; qb < BQ; qb++) {
            uint32_t a[2][4]; /* k-half h: rows g, g + 8 (slots 2q, 2q + 1), then (8 + 2q, 9 + 2q) */
            if (F == SQH_Q4_0) {
                const uint32_t u0 = *(const uint32_t *)(w0 + 16 * qb + 4 * q);
                const uint32_t u8 = *(const uint32_t *)(w8 + 16 * qb + 4 * q);
                a[0][0] = sqh_q4(u0), a[0][1] = sqh_q4(u8), a[0][2] = sqh_q4(u0 >> 8), a[0][3] = sqh_q4(u8 >> 8);
                a[1][0] = sqh_q4(u0 >> 4), a[1][1] = sqh_q4(u8 >> 4);
                a[1][2] = sqh_q4(u0 >> 12), a[1][3] = sqh_q4(u8 >> 12);
            } else {
                const uint32_t u0 = *(const uint32_t *)(w0 + 32 * qb + 4 * q);
                const uint32_t u8 = *(const uint32_t *)(w8 + 32 * qb + 4 * q);
                const uint32_t v0 = *(const uint32_t *)(w0 + 32 * qb + 16 + 4 * q);
                const uint32_t v8 = *(const uint32_t *)(w8 + 32 * qb + 16 + 4 * q);
                a[0][0] = sqh_q8(u0), a[0][1] = sqh_q8(u8), a[0][2] = sqh_q8(u0 >> 8), a[0][3] = sqh_q8(u8 >> 8);
                a[1][0] = sqh_q8(v0), a[1][1] = sqh_q8(v8), a[1][2] = sqh_q8(v0 >> 8), a[1][3] = sqh_q8(v8 >> 8);
            }
            const float sw0 = __half2float(ws[BQ * (16 * rt + g) + qb]);
            const float sw8 = __half2float(ws[BQ * (16 * rt + g + 8) + qb]);
#pragma unroll
            for (int ni = 0; ni < NT / 8; ni++) {
                uint32_t b[4];
                float    p[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                gpu_ldsm_x4(b, xr + 8 * ni * L::XLD + 64 * qb);
                gpu_hmma_16x8x16(p, a[0], b[0], b[1]);
                gpu_hmma_16x8x16(p, a[1], b[2], b[3]);
                if (LV == 2) { /* the rest: its own sums, 2^-11 of the hi level's */
                    float pl[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                    gpu_ldsm_x4(b, xr + 8 * ni * L::XLD + BQ * 64 + 64 * qb);
                    gpu_hmma_16x8x16(pl, a[0], b[0], b[1]);
                    gpu_hmma_16x8x16(pl, a[1], b[2], b[3]);
#pragma unroll
                    for (int c = 0; c < 4; c++) p[c] = fmaf(pl[c], 1.0f / 2048.0f, p[c]);
                }
                acc[ni][0] += sw0 * p[0], acc[ni][1] += sw0 * p[1], acc[ni][2] += sw8 * p[2], acc[ni][3] += sw8 * p[3];
            }
        }
    }
    y += blockIdx.z * (int64_t)T * rows;
#pragma unroll
    for (int ni = 0; ni < NT / 8; ni++)
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int     t = 8 * ni + 2 * q + c % 2;
            const int64_t r = r0 + 16 * rt + g + 8 * (c / 2);
            if (t < nt) y[(t0 + t) * rows + r] = ldexpf(acc[ni][c], e[t0 + t]);
        }
}

/* ---- host ---------------------------------------------------------------------------------- */

/* One format's weights as stored (a row: codes, then f16 scales) and as values. */
static void make_weights(int f, int64_t rows, int64_t nb, uint8_t *w, float *val)
{
    const int     wb = f == SQH_Q4_0 ? 16 : 32;
    const int64_t row_bytes = nb * (wb + 2);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + r * row_bytes;
        for (int64_t b = 0; b < nb; b++) {
            const __half d  = __float2half(f == SQH_Q4_0 ? 0.002f + 0.02f * uniform() : 0.0002f + 0.002f * uniform());
            const float  df = __half2float(d);
            memcpy(row + nb * wb + 2 * b, &d, 2);
            for (int i = 0; i < wb; i++) row[b * wb + i] = (uint8_t)next_u32();
            if (f == SQH_Q8_0)
                for (int i = 0; i < 32; i++) {
                    if (row[b * wb + i] == 0x80) row[b * wb + i] = 0x81; /* -127 .. 127, as quantizers write */
                    val[r * nb * 32 + b * 32 + i] = df * (float)(int8_t)row[b * wb + i];
                }
            else
                for (int i = 0; i < 16; i++) {
                    val[r * nb * 32 + b * 32 + i]      = df * (float)((row[b * wb + i] & 15) - 8);
                    val[r * nb * 32 + b * 32 + i + 16] = df * (float)((row[b * wb + i] >> 4) - 8);
                }
        }
    }
}

template <int F, bool MATH>
static double run(const uint8_t *dw, size_t wbytes, int copies, int64_t rows, int64_t nb, const __half *dxh,
                  const int *de, int T, int parts, float *dpart, float *dy, bool timed)
{
    typedef sqh_lay<F> L;
    const size_t smem = (size_t)STAGES * L::STAGE;
    CHECK(cudaFuncSetAttribute(k_sqh<F, MATH>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const dim3    grid((unsigned)(rows / ROWS), (unsigned)((T + NT - 1) / NT), (unsigned)parts);
    const int64_t n = (int64_t)T * rows;
    return sa_timed(timed ? REPS : 1, [&](int r) {
        const uint8_t *w = dw + (size_t)(timed ? r % copies : 0) * wbytes;
        k_sqh<F, MATH><<<grid, THREADS, smem>>>(w, rows, nb, dxh, de, T, nb / parts, parts > 1 ? dpart : dy);
        if (parts > 1) k_parts_sum<<<(unsigned)((n + 255) / 256), 256>>>(dpart, parts, n, dy);
    });
}

template <int F> static void shape(int64_t rows, int64_t cols, int T)
{
    int optin = 0;
    CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    if ((size_t)STAGES * sqh_lay<F>::STAGE > (size_t)optin) {
        printf("%-5s BQ %d, %d stages: %d bytes of shared memory, past the device's %d\n",
               F == SQH_Q4_0 ? "Q4_0" : "Q8_0", BQ, STAGES, STAGES * sqh_lay<F>::STAGE, optin);
        return;
    }
    const int     wb = F == SQH_Q4_0 ? 16 : 32;
    const int64_t nb = cols / 32;
    const size_t  wbytes = (size_t)(rows * nb * (wb + 2));
    const int     copies = (int)(300e6 / wbytes) + 2;
    uint8_t      *w      = (uint8_t *)malloc(wbytes);
    float        *val = (float *)malloc(sizeof(float) * rows * cols), *x = (float *)malloc(sizeof(float) * T * cols);
    float        *y   = (float *)malloc(sizeof(float) * T * rows);
    make_weights(F, rows, nb, w, val);
    for (int64_t i = 0; i < T * cols; i++) x[i] = normal() * (next_u32() % 100 == 0 ? 20.0f : 1.0f);
    uint8_t *dw;
    float   *dx, *dy, *dpart;
    __half  *dxh;
    int     *de;
    CHECK(cudaMalloc(&dw, wbytes * copies));
    for (int c = 0; c < copies; c++) CHECK(cudaMemcpy(dw + c * wbytes, w, wbytes, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&dx, sizeof(float) * T * cols));
    CHECK(cudaMalloc(&dxh, sizeof(__half) * T * LV * cols));
    CHECK(cudaMalloc(&de, sizeof(int) * T));
    CHECK(cudaMalloc(&dy, sizeof(float) * T * rows));
    CHECK(cudaMalloc(&dpart, sizeof(float) * 4 * T * rows));
    CHECK(cudaMemcpy(dx, x, sizeof(float) * T * cols, cudaMemcpyHostToDevice));
    const double xus = sa_timed(REPS, [&](int) { k_sqh_x<<<T, 256>>>(dx, cols, dxh, de); });
    /* the reference on every 7th row (97th past a batch), in double */
    const int RS  = T <= NT ? 7 : 97;
    double   *ref = (double *)malloc(sizeof(double) * T * (rows / RS + 1));
    for (int64_t r = 0; r < rows; r += RS)
        for (int t = 0; t < T; t++) {
            double s = 0;
            for (int64_t k = 0; k < cols; k++) s += (double)val[r * cols + k] * x[t * cols + k];
            ref[r / RS * T + t] = s;
        }
    for (int parts = 1; parts <= 4; parts *= 2) {
        if (nb % (parts * BQ)) continue;
        CHECK(cudaMemset(dy, 0, sizeof(float) * T * rows));
        run<F, true>(dw, wbytes, copies, rows, nb, dxh, de, T, parts, dpart, dy, false);
        CHECK(cudaMemcpy(y, dy, sizeof(float) * T * rows, cudaMemcpyDeviceToHost));
        double num = 0, den = 0, worst = 0, ymax = 0;
        for (int64_t r = 0; r < rows; r += RS)
            for (int t = 0; t < T; t++) {
                const double s = ref[r / RS * T + t], d = y[t * rows + r] - s;
                num += d * d, den += s * s, worst = fmax(worst, fabs(d)), ymax = fmax(ymax, fabs(s));
            }
        const double us = run<F, true>(dw, wbytes, copies, rows, nb, dxh, de, T, parts, dpart, dy, true);
        const double su = run<F, false>(dw, wbytes, copies, rows, nb, dxh, de, T, parts, dpart, dy, true);
        printf("%-5s %6lld x %-6lld T %3d  parts %d  %4lld blocks  %8.2f us  %7.1f GB/s  %6.1f TFLOP/s"
               "  stream %7.2f us  | x to f16 %5.2f us  rel L2 %.2e  max %.2e\n",
               F == SQH_Q4_0 ? "Q4_0" : "Q8_0", (long long)rows, (long long)cols, T, parts,
               (long long)(rows / ROWS * parts * ((T + NT - 1) / NT)), us, wbytes / us * 1e-3,
               2.0 * rows * cols * T / us * 1e-6, su, xus, sqrt(num / den), worst / ymax);
        fflush(stdout);
    }
    CHECK(cudaFree(dw));
    CHECK(cudaFree(dx));
    CHECK(cudaFree(dxh));
    CHECK(cudaFree(de));
    CHECK(cudaFree(dy));
    CHECK(cudaFree(dpart));
    free(w), free(val), free(x), free(y), free(ref);
}

int main(int argc, char **argv)
{
    static const int64_t shapes[][2] = {{14336, 4096}, {4096, 14336}, {4096, 4096}, {6144, 4096}};
    const int            ns = (int)(sizeof shapes / sizeof shapes[0]);
    const int            n  = argc > 1 ? atoi(argv[1]) : ns; /* the first n shapes */
    const int            T  = argc > 2 ? atoi(argv[2]) : NT; /* tokens: 32 tiles of 32 at most here */
    if (n < 1 || n > ns || T < 1 || T > 32 * NT)
        return fprintf(stderr, "usage: sqh [SHAPES 1 .. %d [TOKENS 1 .. %d]]\n", ns, 32 * NT), 2;
    printf("BQ %d, %d stages, %d f16 level%s of the activations\n", BQ, STAGES, LV, LV > 1 ? "s" : "");
    for (int i = 0; i < n; i++) {
        shape<SQH_Q4_0>(shapes[i][0], shapes[i][1], T);
        shape<SQH_Q8_0>(shapes[i][0], shapes[i][1], T);
    }
    if (argc == 1) shape<SQH_Q4_0>(14336, 4096, 17); /* a batch short of its tile: tokens past T read as zeros */
    return 0;
}
