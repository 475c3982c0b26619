/* How fast the GPU reads a decode product's weights in each access pattern, with no arithmetic:
 * the question behind k_mmvq's streaming rate (gpu_matvec.cu). A Q4_0 matrix of R rows by 4096
 * columns in the SPLIT layout (a row: 2,048 code bytes, then 256 bytes of scales) is read
 *   contig   by warps taking consecutive 4 KB runs of the whole matrix (a copy's read half);
 *   rows4    as k_mmvq's one-token pass does: a warp takes 4 rows, each lane 16 code bytes of
 *            units u and u + 32 of each row a round, and each unit's 2 scale bytes;
 *   rows4-ns the same without the scale loads;
 *   tiled4   the same bytes as rows4, a row group's round laid out as one 4,608-byte run;
 * each at two sizes (R = 14,336 and 4 × that, rotating over copies worth 8 times the L2), so that
 * the slope gives the streaming rate and the intercept a launch's fixed cost.
 *
 * Standalone (no engine code): nvcc -O3 -arch=sm_90 dev/kernels/gpu_readpat.cu -o readpat && ./readpat */
#include "standalone.cuh"

enum { COLS = 4096, CODE_B = COLS / 2, ROW_B = CODE_B + COLS / 32 * 2, THREADS = 128, REPS = 40 };

/* Folds what was read into one word that is written only when it matches an impossible value,
 * so the loads stay. */
static __device__ __forceinline__ void keep(uint32_t acc, uint32_t *sink)
{
    if (acc == 0x9e3779b9u) *sink = acc;
}

__global__ void __launch_bounds__(THREADS) k_contig(const uint8_t *m, int64_t bytes, uint32_t *sink)
{
    const int     lane = threadIdx.x % 32;
    const int64_t warp = ((int64_t)blockIdx.x * THREADS + threadIdx.x) / 32, warps = (int64_t)gridDim.x * THREADS / 32;
    uint32_t      acc  = 0;
    for (int64_t run = warp; run * 4096 < bytes; run += warps) {
        uint4 v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = *(const uint4 *)(m + run * 4096 + i * 512 + lane * 16);
#pragma unroll
        for (int i = 0; i < 8; i++) acc ^= v[i].x + v[i].y + v[i].z + v[i].w;
    }
    keep(acc, sink);
}

/* rows4 (scales: with the scale loads; tiled: the round's bytes as one run). */
template <bool SCALES, bool TILED>
__global__ void __launch_bounds__(THREADS) k_rows4(const uint8_t *m, int64_t rows, uint32_t *sink)
{
    const int     lane = threadIdx.x % 32;
    const int64_t r0   = ((int64_t)blockIdx.x * (THREADS / 32) + threadIdx.x / 32) * 4;
    if (r0 >= rows) return;
    uint32_t acc = 0;
    for (int u = lane; u < COLS / 32; u += 64) { /* a round: units u and u + 32 of 4 rows */
        uint4    v[2][4];
        uint32_t s[2][4];
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int64_t uu = u + 32 * j;
                int64_t       code, scale;
                if (TILED) { /* the group's rows, round by round: 4 rows x 1 KB of codes, then 4 x 128 B of scales */
                    const int64_t base = r0 * ROW_B + (uu / 64) * 4 * (1024 + 128);
                    code  = base + i * 1024 + (uu % 64) * 16;
                    scale = base + 4 * 1024 + i * 128 + (uu % 64) * 2;
                } else {
                    code  = (r0 + i) * ROW_B + uu * 16;
                    scale = (r0 + i) * ROW_B + CODE_B + uu * 2;
                }
                v[j][i] = *(const uint4 *)(m + code);
                s[j][i] = SCALES ? *(const uint16_t *)(m + scale) : 0u;
            }
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc ^= v[j][i].x + v[j][i].y + v[j][i].z + v[j][i].w + s[j][i];
    }
    keep(acc, sink);
}

/* Microseconds a launch over copies of rows x ROW_B bytes, the launches back to back. */
static double time_us(int pattern, const uint8_t *buf, int64_t rows, int copies, uint32_t *sink, cudaStream_t st)
{
    const int64_t bytes = rows * ROW_B;
    cudaEvent_t   a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int pass = 0; pass < 2; pass++) { /* the first warms up */
        CHECK(cudaEventRecord(a, st));
        for (int r = 0; r < REPS; r++) {
            const uint8_t *m    = buf + (int64_t)(r % copies) * bytes;
            const unsigned grid = (unsigned)((rows / 4 + THREADS / 32 - 1) / (THREADS / 32));
            if (pattern == 0) k_contig<<<132 * 16, THREADS, 0, st>>>(m, bytes, sink);
            else if (pattern == 1) k_rows4<true, false><<<grid, THREADS, 0, st>>>(m, rows, sink);
            else if (pattern == 2) k_rows4<false, false><<<grid, THREADS, 0, st>>>(m, rows, sink);
            else k_rows4<true, true><<<grid, THREADS, 0, st>>>(m, rows, sink);
        }
        CHECK(cudaEventRecord(b, st));
        CHECK(cudaEventSynchronize(b));
        CHECK(cudaGetLastError());
    }
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, a, b));
    CHECK(cudaEventDestroy(a));
    CHECK(cudaEventDestroy(b));
    return ms * 1e3 / REPS;
}

int main(void)
{
    static const char *names[] = {"contig", "rows4", "rows4-ns", "tiled4"};
    const int64_t      r1 = 14336, r2 = 4 * r1;
    const int64_t      total = 512ll << 20;
    uint8_t           *buf;
    uint32_t          *sink;
    cudaStream_t       st;
    CHECK(cudaMalloc(&buf, (size_t)total));
    CHECK(cudaMalloc(&sink, 4));
    CHECK(cudaMemset(buf, 0x5a, (size_t)total));
    CHECK(cudaStreamCreate(&st));
    printf("%-9s %12s %12s %14s %12s\n", "pattern", "33 MB us", "132 MB us", "stream GB/s", "fixed us");
    for (int p = 0; p < 4; p++) {
        const double t1 = time_us(p, buf, r1, (int)(total / (r1 * ROW_B)), sink, st);
        const double t2 = time_us(p, buf, r2, (int)(total / (r2 * ROW_B)), sink, st);
        const double bw = (double)(r2 - r1) * ROW_B / ((t2 - t1) * 1e-6) / 1e9;
        printf("%-9s %12.2f %12.2f %14.0f %12.2f\n", names[p], t1, t2, bw, t1 - (double)r1 * ROW_B / (bw * 1e3));
    }
    return 0;
}
