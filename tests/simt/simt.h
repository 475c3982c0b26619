/* A GPU kernel's source run on the host, thread by thread: the tests of device code no GPU here
 * can run (AMD's). Each thread of a block is a fiber (ucontext) on one OS thread; a block runs
 * its fibers in turn, each until it waits at a barrier (__syncthreads, or a wave's collective:
 * a shuffle, an any, a matrix instruction), then the next, until all have finished; blocks run
 * one after the other, so a kernel's __shared__ arrays can be function statics. The wave size
 * and the matrix units are the target's (SIMT_KIND: an amx_layout.h kind), the matrix
 * instruction computed from the placements AMD's ISA documents (written here from the ISA, not
 * from amx_layout.h, which the kernels use): a kernel that hands the units their operands in
 * other places gets wrong sums, and one whose lanes l and l + 16 disagree where WMMA requires
 * them to hold the same operands is counted (simt_bad_operands).
 *
 * It stands in for gpu_vendor.h (taking its include guard): include it before the kernel. Threads
 * that wait at different barriers, or a block whose fibers all wait, stop the test with a message
 * (a kernel whose barriers are not uniform would hang or misbehave on a GPU). */
#ifndef CELER_TESTS_SIMT_H
#define CELER_TESTS_SIMT_H

#define CELER_BACKENDS_GPU_VENDOR_H /* the kernels' vendor header: this one */
#define CELER_HD
#include "backends/gpu/amx_layout.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

#ifndef SIMT_KIND
#error "SIMT_KIND: the amx_layout.h kind of the target to run as"
#endif
#define CELER_GPU_AMX_HERE SIMT_KIND
#define CELER_WARP         (SIMT_KIND == CELER_AMX_WMMA11 ? 32 : 64)

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__   static
#define __align__(n) __attribute__((aligned(n)))

struct uint2 {
    uint32_t x, y;
};
struct float4 {
    float x, y, z, w;
};
static inline uint2 make_uint2(uint32_t x, uint32_t y) { return uint2{x, y}; }
struct simt_dim {
    unsigned x, y, z;
};
static inline int32_t min(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t max(int32_t a, int32_t b) { return a > b ? a : b; }

/* ---- the scheduler ------------------------------------------------------------------------ */
struct simt_fiber {
    ucontext_t        ctx;
    simt_dim          tid;
    bool              done;
    std::vector<char> stack;
};
struct simt_barrier {
    int      count;
    unsigned gen;
};
enum { SIMT_MAX_THREADS = 256, SIMT_SLOTS = 2 * 64 };
struct simt_wave { /* a wave's exchange, double-buffered: a collective's buffer is written again
                    * only after the next collective's barrier, which every lane reaches after
                    * reading it */
    simt_barrier bar;
    int          parity[64];
    uint64_t     word[2][64][16]; /* a lane's values of one collective */
};
static struct {
    ucontext_t                  sched;
    std::vector<simt_fiber>     fibers;
    simt_fiber                 *cur;
    simt_barrier                block_bar;
    std::vector<simt_wave>      waves;
    simt_dim                    block, grid;
    bool                        progress;
    const std::function<void()> *fn;
} simt;
static long simt_bad_operands; /* WMMA instructions whose lane halves disagreed */

#define threadIdx (simt.cur->tid)
#define blockIdx  (simt.block)

static void simt_yield(void) { swapcontext(&simt.cur->ctx, &simt.sched); }

static void simt_wait(simt_barrier &b, int n)
{
    const unsigned g = b.gen;
    simt.progress    = true;
    if (++b.count == n) {
        b.count = 0, b.gen++;
        return;
    }
    while (b.gen == g) simt_yield();
}

static inline void __syncthreads(void) { simt_wait(simt.block_bar, (int)simt.fibers.size()); }
static inline void gpu_dep_enter(void) {}

static void simt_fiber_main(void)
{
    (*simt.fn)();
    simt.cur->done = true;
    simt.progress  = true;
}

/* Runs fn as every thread of every block of grid (threads a block: threads, whole waves). */
static void simt_launch(simt_dim grid, int threads, const std::function<void()> &fn)
{
    if (threads % CELER_WARP || threads > SIMT_MAX_THREADS) {
        fprintf(stderr, "simt: a block of %d threads (waves of %d, at most %d)\n", threads, CELER_WARP,
                SIMT_MAX_THREADS);
        exit(2);
    }
    simt.fn = &fn;
    simt.fibers.resize((size_t)threads);
    simt.waves.assign((size_t)(threads / CELER_WARP), simt_wave{});
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                simt.block     = simt_dim{bx, by, bz};
                simt.block_bar = simt_barrier{0, 0};
                for (simt_wave &w : simt.waves) w.bar = simt_barrier{0, 0}, memset(w.parity, 0, sizeof w.parity);
                for (int t = 0; t < threads; t++) {
                    simt_fiber &f = simt.fibers[(size_t)t];
                    f.tid = simt_dim{(unsigned)t, 0, 0}, f.done = false;
                    f.stack.resize(256 * 1024);
                    getcontext(&f.ctx);
                    f.ctx.uc_stack.ss_sp   = f.stack.data();
                    f.ctx.uc_stack.ss_size = f.stack.size();
                    f.ctx.uc_link          = &simt.sched;
                    makecontext(&f.ctx, simt_fiber_main, 0);
                }
                for (int left = threads; left > 0;) {
                    simt.progress = false;
                    left          = 0;
                    for (simt_fiber &f : simt.fibers) {
                        if (f.done) continue;
                        simt.cur = &f;
                        swapcontext(&simt.sched, &f.ctx);
                        left += !f.done;
                    }
                    if (left > 0 && !simt.progress) {
                        fprintf(stderr, "simt: block (%u, %u, %u): every thread left waits at a barrier that "
                                "not all reach\n", bx, by, bz);
                        exit(2);
                    }
                }
            }
}

/* ---- a wave's collectives ------------------------------------------------------------------ */
/* The n values v of every lane of the caller's wave, once all have given theirs: the buffer. */
static const uint64_t (*simt_exchange(const uint64_t *v, int n))[16]
{
    simt_wave &w    = simt.waves[threadIdx.x / CELER_WARP];
    const int  lane = (int)(threadIdx.x % CELER_WARP), p = w.parity[lane];
    w.parity[lane] ^= 1;
    memcpy(w.word[p][lane], v, (size_t)n * sizeof *v);
    simt_wait(w.bar, CELER_WARP);
    return w.word[p];
}

template <typename T> static T simt_shfl(T v, int src)
{
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    const uint64_t(*all)[16] = simt_exchange(&u, 1);
    T r;
    memcpy(&r, &all[src % CELER_WARP][0], sizeof r);
    return r;
}
#define gpu_shfl(v, l)     simt_shfl((v), (int)(l))
#define gpu_shfl_xor(v, m) simt_shfl((v), (int)(threadIdx.x % CELER_WARP) ^ (int)(m))

static inline bool gpu_any(bool p)
{
    const uint64_t u = p, (*all)[16] = simt_exchange(&u, 1);
    bool any = false;
    for (int l = 0; l < CELER_WARP; l++) any = any || all[l][0];
    return any;
}

/* ---- f16 --------------------------------------------------------------------------------- */
static inline uint16_t gpu_f16_bits(float v)
{
    const _Float16 h = (_Float16)v; /* to the nearest, ties to even */
    uint16_t       b;
    memcpy(&b, &h, 2);
    return b;
}
static inline float gpu_f16_val(uint32_t bits)
{
    const uint16_t b = (uint16_t)bits;
    _Float16       h;
    memcpy(&h, &b, 2);
    return (float)h;
}
static inline uint32_t gpu_half2_bits(float lo, float hi)
{
    return (uint32_t)gpu_f16_bits(lo) | (uint32_t)gpu_f16_bits(hi) << 16;
}

/* ---- the matrix instruction ---------------------------------------------------------------- */
/* Half k of a lane's operand words (a 32-bit word a slot, the lower k in the low half). */
static inline float simt_half(const uint64_t *w, int k) { return gpu_f16_val((uint32_t)(w[k / 2] >> (16 * (k % 2)))); }

/* acc += A B over 16 k, f16 operands, f32 sums, the lanes' operands where the ISA puts them:
 *   v_mfma_f32_16x16x16f16 (wave64): A[m][k] in lane m + 16 (k / 4), half k % 4 of its two words;
 *     B[k][n] in lane n + 16 (k / 4), half k % 4; D[m][n] in lane n + 16 (m / 4), register m % 4.
 *   v_wmma_f32_16x16x16_f16 (wave32): A[m][k] in lanes m and m + 16, half k of its eight words;
 *     B[k][n] in lanes n and n + 16, half k; D[m][n] in lane n + 16 (m % 2), register m / 2. */
static void gpu_amx_hmma(float *acc, const uint32_t *a, const uint32_t *b)
{
    constexpr int K = SIMT_KIND, WORDS = K == CELER_AMX_WMMA11 ? 8 : 2;
    uint64_t      mine[16] = {0};
    for (int i = 0; i < WORDS; i++) mine[i] = a[i], mine[WORDS + i] = b[i];
    const uint64_t(*all)[16] = simt_exchange(mine, 2 * WORDS);
    const int lane           = (int)(threadIdx.x % CELER_WARP);
    if (K == CELER_AMX_WMMA11) {
        if (lane < 16)
            for (int i = 0; i < 2 * WORDS; i++) simt_bad_operands += all[lane][i] != all[lane + 16][i];
        for (int v = 0; v < 8; v++) {
            const int m = 2 * v + lane / 16, n = lane % 16;
            float     s = 0.0f;
            for (int k = 0; k < 16; k++) s += simt_half(all[m], k) * simt_half(all[n] + WORDS, k);
            acc[v] += s;
        }
    } else {
        for (int v = 0; v < 4; v++) {
            const int m = 4 * (lane / 16) + v, n = lane % 16;
            float     s = 0.0f;
            for (int k = 0; k < 16; k++)
                s += simt_half(all[m + 16 * (k / 4)], k % 4) * simt_half(all[n + 16 * (k / 4)] + WORDS, k % 4);
            acc[v] += s;
        }
    }
}

#endif
