/* Can a one-token decode product stream its weights at the copy rate if the bytes in flight do
 * not live in registers? The engine's k_mmvq (gpu_matvec.cu) loads a lane's units into registers,
 * then dots them: while a warp dots, it has nothing in flight, and more units a lane cost the
 * registers that keep warps on an SM (MVQ_UNROLL 4 lost 6-9%). Its loads alone stream at ~4.6 TB/s
 * (gpu_readpat.cu), the kernel at ~3.2 (the 8B's gate/up and down) and ~2.4 (q/k/v, o).
 *
 * Q4_0 in the SPLIT layout (a row: cols / 2 code bytes, unit u's 16 at 16u, byte i holding values
 * i and i + 16 in its nibbles; then the units' f16 scales), activations at 8 bits (a block of 32:
 * int8 codes, a float scale, and the scale times the codes' sum), one token:
 *   regs      as k_mmvq's unsliced one-token X8 pass with x staged (XS): 4 warps a block, 4 rows a
 *             warp, a lane units u and u + 32 of each row a round, loaded then dotted;
 *   bulk R/P  a warp streams groups of R consecutive rows (R · row bytes, contiguous) into shared
 *             memory with cp.async.bulk, P groups in flight (an mbarrier each), and dots a group
 *             from there while the next ones land; a persistent grid (blocks an SM by the shared
 *             memory), x staged once a block.
 * Each at the 8B's shapes (rows × cols: 14336 × 4096 gate or up, 4096 × 14336 down, 6144 × 4096
 * q/k/v, 4096 × 4096 o), rotating over copies worth 8 times the L2, back-to-back plain launches:
 * µs a call and GB/s; each output checked against a double-precision product of the same codes.
 *
 * Standalone (no engine code): nvcc -O3 -arch=sm_90 dev/kernels/gpu_mvbulk.cu -o mvbulk && ./mvbulk */
#include "bulk.cuh"
#include "mvq4.cuh"

#include <string.h>

enum { REPS = 50 };

/* ---- bulk: cp.async.bulk into a ring of P stages a warp (bulk.cuh) ------------------------- */

/* Shared memory of a block of W warps: x, then the warps' rings (W · P · R rows), then the
 * barriers (W · P). */
static size_t bulk_smem(int64_t cols, int R, int P, int W)
{
    return x_smem(cols, 1) + (size_t)W * P * R * row_bytes(cols) + (size_t)W * P * 8;
}

template <int R, int P>
__global__ void __launch_bounds__(256) k_bulk(const uint8_t *w, shape s, xin in, float *y)
{
    extern __shared__ uint4 mem[];
    const int64_t nb = s.cols / 32, nu = nb, gb = R * s.row_b; /* a group's bytes */
    const int     W = blockDim.x / 32, wib = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint8_t      *ring = (uint8_t *)(mem + x_smem(s.cols, 1) / 16) + (size_t)wib * P * gb;
    uint64_t     *bar  = (uint64_t *)((uint8_t *)(mem + x_smem(s.cols, 1) / 16) + (size_t)W * P * gb) + wib * P;
    const int64_t groups = s.rows / R, gw = (int64_t)blockIdx.x * W + wib, GW = (int64_t)gridDim.x * W;
    if (lane == 0) {
        for (int p = 0; p < P; p++) bar_init(bar + p);
        for (int p = 0; p < P; p++) /* the first groups' loads before x is staged */
            if (gw + p * GW < groups) bulk_get(ring + p * gb, w + (gw + p * GW) * gb, (uint32_t)gb, bar + p);
    }
    x_stage<1>(mem, in, nb); /* its barrier also makes the barriers' init visible to the block */
    for (int64_t n = 0, g = gw; g < groups; n++, g += GW) {
        const int st = (int)(n % P);
        bar_wait(bar + st, (uint32_t)((n / P) & 1));
        const uint8_t *grp = ring + st * gb;
        float          acc[R] = {};
        for (int64_t u = lane; u < nu; u += 32) {
#pragma unroll
            for (int i = 0; i < R; i++) {
                const uint8_t *row = grp + i * s.row_b;
                acc[i] += unit_dot<1>(*(const uint4 *)(row + 16 * u), *(const uint16_t *)(row + s.cols / 2 + 2 * u),
                                      mem, nb, u);
            }
        }
        __syncwarp();
        if (lane == 0 && g + P * GW < groups) bulk_get(ring + st * gb, w + (g + P * GW) * gb, (uint32_t)gb, bar + st);
#pragma unroll
        for (int i = 0; i < R; i++) {
            const float t = warp_sum(acc[i]);
            if (lane == 0) y[g * R + i] = t;
        }
    }
}

/* ---- host ----------------------------------------------------------------------------------- */

typedef void (*kern)(const uint8_t *, shape, xin, float *);

typedef struct {
    const char *name;
    kern        fn;
    int         R, P, W; /* bulk; R 0: regs */
} variant;

int main(int argc, char **argv)
{
    int dev = 0, sms, smem_max;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CHECK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    int l2 = 0;
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    const variant V[] = {
        {"regs", k_regs<1, 0>, 0, 0, 4},
        {"bulk R1 P4 W8", k_bulk<1, 4>, 1, 4, 8},   {"bulk R2 P2 W8", k_bulk<2, 2>, 2, 2, 8},
        {"bulk R2 P3 W4", k_bulk<2, 3>, 2, 3, 4},   {"bulk R4 P2 W4", k_bulk<4, 2>, 4, 2, 4},
        {"bulk R1 P8 W4", k_bulk<1, 8>, 1, 8, 4},   {"bulk R4 P3 W2", k_bulk<4, 3>, 4, 3, 2},
    };
    const int64_t shapes[][2] = {{14336, 4096}, {4096, 14336}, {6144, 4096}, {4096, 4096}};
    const char   *only        = argc > 1 ? argv[1] : NULL; /* a variant's name prefix */
    printf("%-16s %14s %10s %10s %10s %12s\n", "variant", "rows x cols", "us", "GB/s", "rel L2", "blocks x thr");
    for (const auto &sh : shapes) {
        mv_problem p = mv_problem_make({sh[0], sh[1], row_bytes(sh[1])}, l2);
        const shape s = p.s;
        for (const variant &v : V) {
            if (only && strncmp(v.name, only, strlen(only))) continue;
            size_t   smem;
            unsigned blocks, threads = 32u * v.W;
            if (!v.R) {
                smem = x_smem(s.cols, 1), blocks = (unsigned)((s.rows + RW * v.W - 1) / (RW * v.W));
            } else {
                smem = bulk_smem(s.cols, v.R, v.P, v.W);
                if (smem > (size_t)smem_max || s.rows % v.R) {
                    printf("%-16s %6lld x %-6lld  (%zu bytes of shared memory a block: skipped)\n", v.name,
                           (long long)s.rows, (long long)s.cols, smem);
                    continue;
                }
                int per = 0;
                CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
                CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, v.fn, (int)threads, smem));
                blocks = (unsigned)(sms * (per > 0 ? per : 1));
            }
            if (smem > 48 * 1024)
                CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
            CHECK(cudaMemset(p.dy, 0, s.rows * sizeof(float)));
            v.fn<<<blocks, threads, smem>>>(p.dw, s, p.in, p.dy);
            CHECK(cudaGetLastError());
            const double err = mv_problem_error(p);
            const double us  = sa_timed(REPS, [&](int r) {
                v.fn<<<blocks, threads, smem>>>(p.dw + (size_t)(r % p.copies) * p.bytes, s, p.in, p.dy);
            });
            printf("%-16s %6lld x %-6lld %10.2f %10.0f %10.1e %7u x %u%s\n", v.name, (long long)s.rows,
                   (long long)s.cols, us, p.bytes / us * 1e-3, err, blocks, threads, err > 1e-5 ? "  FAILED" : "");
        }
        mv_problem_free(p);
    }
    return 0;
}
