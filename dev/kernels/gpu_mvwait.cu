/* What does a one-token decode product gain from loading its weights before its dependency wait,
 * and how much of them can it load there? In a replayed decode step every kernel is launched
 * while the one before it runs (programmatic stream serialization) and waits for it at
 * griddepcontrol.wait; the engine's k_mmvq loads a lane's first units into registers before
 * that wait. Registers hold little (the 8B's q/k/v product: 118 registers a lane, 2 blocks of 256
 * threads an SM, 264 of its 384 blocks resident at the wait; the rest load after it), where
 * shared memory (227 KB an SM, ~30 MB on the H200) could hold all of a q/k/v or o product's
 * weights. Here a kernel before (`busy`, one block spinning for S µs, letting the next launch at
 * once) precedes the product, launched early as the engine launches it:
 *   regs late    k_regs (mvq4.cuh: k_mmvq's unsliced one-token pass, x staged) waiting before
 *                any load;
 *   regs early   the same, its first round of units loaded before the wait (the engine's form);
 *   smem R       each warp copies its R consecutive rows (R · row bytes, contiguous) into shared
 *                memory with one cp.async.bulk before the wait, then waits, stages x and dots its
 *                rows from there: every byte requested before the wait where the blocks fit.
 *   sliced U     k_mmvq's sliced pass (the engine's form for these grids, short of three blocks an
 *                SM): two warps a row group, x read from global memory, U units a lane a round
 *                (U1 with three blocks an SM, as its WIDE instances); the comparison BULK lacked.
 * For each, the µs a (busy, product) pair takes past busy alone, at S = 0 and S = 4 (about a
 * norm kernel's time in the 8B's step): what the product adds to the step after the kernel
 * before it. Shapes: the 8B's q/k/v (6144 × 4096), o (4096 × 4096) and gate (14336 × 4096: more
 * than the shared memory holds), Q4_0 as gpu_mvbulk.cu lays it out, one level of 8-bit
 * activations, weights rotating over copies worth 8 times the L2; each output checked against a
 * double-precision product of the same codes.
 *
 * Standalone (no engine code): nvcc -O3 -arch=sm_90 dev/kernels/gpu_mvwait.cu -o mvwait && ./mvwait */
#include "bulk.cuh"
#include "mvq4.cuh"

enum { REPS = 200, SW = 4 /* smem: warps a block */ };

/* One block of 32 threads that lets the next kernel launch, then spins for `cycles` clocks. */
__global__ void k_busy(long long cycles)
{
    asm volatile("griddepcontrol.launch_dependents;");
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

/* Rows R · (SW · blockIdx.x + warp) .. of w, each warp's R rows copied into shared memory before
 * the wait; then x staged and the rows dotted as k_regs dots them (units u, u + 32, ..). */
template <int R>
__global__ void __launch_bounds__(32 * SW) k_smem(const uint8_t *w, shape s, xin in, float *y)
{
    extern __shared__ uint4 mem[];
    __shared__ uint64_t     bar[SW];
    const int64_t           nb = s.cols / 32, gb = R * s.row_b; /* a warp's bytes */
    const int               wib = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t           r0   = ((int64_t)blockIdx.x * SW + wib) * R;
    uint8_t                *rows = (uint8_t *)(mem + x_smem(s.cols, 1) / 16) + (size_t)wib * gb;
    if (lane == 0) {
        bar_init(bar + wib);
        bulk_get(rows, w + r0 * s.row_b, (uint32_t)gb, bar + wib);
    }
    dep_wait();              /* the kernel before wrote x */
    x_stage<1>(mem, in, nb); /* its barrier also shows every warp its barrier's init */
    bar_wait(bar + wib, 0);
    float acc[R] = {};
    for (int64_t u = lane; u < nb; u += 32)
#pragma unroll
        for (int i = 0; i < R; i++) {
            const uint8_t *row = rows + i * s.row_b;
            acc[i] += unit_dot<1>(*(const uint4 *)(row + 16 * u), *(const uint16_t *)(row + s.cols / 2 + 2 * u), mem,
                                  nb, u);
        }
#pragma unroll
    for (int i = 0; i < R; i++) {
        const float t = warp_sum(acc[i]);
        if (lane == 0) y[r0 + i] = t;
    }
}

/* Σ over one unit of one row as unit_dot, the activations read where they lie (a block's 32 · L
 * codes, then its (d, d S) apart): the engine's sliced passes of the simple formats read x so. */
template <int L> static __device__ __forceinline__ float unit_dot_g(uint4 q, uint32_t sc, const xin &in, int64_t u)
{
    return unit_dot_at<L>(q, sc, (const uint4 *)in.q + 2 * L * u, 1, in.d[u]);
}

/* k_mmvq's sliced one-token pass (the engine's q/k/v and o products at the 8B's shapes): two
 * warps a row group, taking alternate runs of 32 units, U units a lane a round (2 as k_mmvq, 1
 * with three blocks an SM as its WIDE instances), the first round loaded before the wait, x read
 * from global memory, the two warps' sums added through shared memory. */
template <int U, int MINB>
__global__ void __launch_bounds__(2 * RT, MINB) k_sliced(const uint8_t *w, shape s, xin in, float *y)
{
    constexpr int     G = RT / 32; /* row groups a block */
    __shared__ float  part[G][RW];
    const int64_t     nb   = s.cols / 32;
    const int         lane = threadIdx.x % 32, wib = threadIdx.x / 32, grp = wib % G, ks = wib / G;
    const int64_t     r0 = ((int64_t)blockIdx.x * G + grp) * RW, u0 = ks * 32 + lane;
    uint4             q[U][RW];
    uint32_t          sc[U][RW];
    regs_load<U, 64>(w, s, r0, u0, nb, q, sc);
    dep_wait();
    float acc[RW] = {};
    for (int64_t u = u0; u < nb; u += 64 * U) {
        if (u != u0) regs_load<U, 64>(w, s, r0, u, nb, q, sc);
#pragma unroll
        for (int j = 0; j < U; j++)
            if (u + 64 * j < nb)
#pragma unroll
                for (int i = 0; i < RW; i++) acc[i] += unit_dot_g<1>(q[j][i], sc[j][i], in, u + 64 * j);
    }
#pragma unroll
    for (int i = 0; i < RW; i++) acc[i] = warp_sum(acc[i]);
    if (ks == 1 && lane == 0)
#pragma unroll
        for (int i = 0; i < RW; i++) part[grp][i] = acc[i];
    __syncthreads();
    if (ks == 0 && lane == 0)
#pragma unroll
        for (int i = 0; i < RW; i++) y[r0 + i] = acc[i] + part[grp][i];
}

/* ---- host ----------------------------------------------------------------------------------- */

typedef void (*kern)(const uint8_t *, shape, xin, float *);

typedef struct {
    const char *name;
    kern        fn;
    int         R; /* smem: rows a warp; 0: regs; -1: sliced */
} variant;

/* fn<<<blocks, threads, smem>>>(args) launched while the kernel before runs. */
static void launch_early(kern fn, unsigned blocks, unsigned threads, size_t smem, const uint8_t *w, shape s, xin in,
                         float *y)
{
    cudaLaunchAttribute at;
    at.id                                         = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t c                          = {};
    c.gridDim = blocks, c.blockDim = threads, c.dynamicSmemBytes = smem, c.stream = 0, c.attrs = &at, c.numAttrs = 1;
    CHECK(cudaLaunchKernelEx(&c, fn, w, s, in, y));
}

int main(void)
{
    int dev = 0, smem_max = 0, l2 = 0, khz = 0;
    CHECK(cudaGetDevice(&dev));
    CHECK(cudaDeviceGetAttribute(&smem_max, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
    const variant V[] = {{"regs late", k_regs<1, 0, 2>, 0},
                         {"regs early", k_regs<1, 0, 1>, 0},
                         {"sliced U2", k_sliced<2, 0>, -1},
                         {"sliced U1", k_sliced<1, 3>, -1},
                         {"smem R4", k_smem<4>, 4},
                         {"smem R8", k_smem<8>, 8},
                         {"smem R12", k_smem<12>, 12}};
    const int64_t shapes[][2] = {{6144, 4096}, {4096, 4096}, {14336, 4096}};
    const double  spins[]     = {0.0, 4.0}; /* µs of the kernel before */
    printf("%-12s %14s %6s %10s %10s %10s %12s\n", "variant", "rows x cols", "S us", "busy us", "added us", "rel L2",
           "blocks x thr");
    for (const auto &sh : shapes) {
        mv_problem p = mv_problem_make({sh[0], sh[1], row_bytes(sh[1])}, l2);
        const shape s = p.s;
        for (const double S : spins) {
            const long long cycles = (long long)(S * khz * 1e-3);
            const double    busy   = sa_timed(REPS, [&](int) { k_busy<<<1, 32>>>(cycles); });
            for (const variant &v : V) {
                size_t   smem;
                unsigned blocks, threads;
                if (v.R < 0) {
                    smem = 0, threads = 2 * RT, blocks = (unsigned)(s.rows / (RW * RT / 32));
                } else if (!v.R) {
                    smem = x_smem(s.cols, 1), threads = RT, blocks = (unsigned)(s.rows / (RW * RT / 32));
                } else {
                    smem = x_smem(s.cols, 1) + (size_t)SW * v.R * s.row_b, threads = 32 * SW;
                    blocks = (unsigned)(s.rows / (SW * v.R));
                    if (smem > (size_t)smem_max || s.rows % (SW * v.R)) {
                        printf("%-12s %6lld x %-6lld  (%zu bytes of shared memory a block, or rows not a multiple of "
                               "%d: skipped)\n",
                               v.name, (long long)s.rows, (long long)s.cols, smem, SW * v.R);
                        continue;
                    }
                }
                if (smem > 48 * 1024)
                    CHECK(cudaFuncSetAttribute(v.fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
                CHECK(cudaMemset(p.dy, 0, s.rows * sizeof(float)));
                k_busy<<<1, 32>>>(cycles);
                launch_early(v.fn, blocks, threads, smem, p.dw, s, p.in, p.dy);
                CHECK(cudaDeviceSynchronize());
                const double err  = mv_problem_error(p);
                const double pair = sa_timed(REPS, [&](int r) {
                    k_busy<<<1, 32>>>(cycles);
                    launch_early(v.fn, blocks, threads, smem, p.dw + (size_t)(r % p.copies) * p.bytes, s, p.in, p.dy);
                });
                printf("%-12s %6lld x %-6lld %6.1f %10.2f %10.2f %10.1e %7u x %u%s\n", v.name, (long long)s.rows,
                       (long long)s.cols, S, busy, pair - busy, err, blocks, threads, err > 1e-5 ? "  FAILED" : "");
            }
        }
        mv_problem_free(p);
    }
    return 0;
}
