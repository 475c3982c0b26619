/* GPU kernels' sources run on the host, thread by thread: the tests of device code no GPU here
 * can run (AMD's). A third half of gpu_vendor.h, taken where CELER_SIMT is defined (the tests
 * under tests/simt, built by tests/tests.cmake): a test includes a GPU source as it is (a .cu,
 * host functions and all; those it does not call are dropped at link) and launches its kernels
 * through simt_launch, or through the source's own host code (gpu_launch_kernel runs here).
 *
 * Each thread of a block is a fiber (ucontext) on one OS thread; a block runs its fibers in
 * turn, each until it waits at a barrier (__syncthreads, or a wave's collective: a shuffle, an
 * any, a matrix instruction), until all have finished; blocks run one after the other, so a
 * kernel's __shared__ arrays are function statics and atomics need no locks. The wave size and
 * the matrix units are the target's (SIMT_KIND, an amx_layout.h kind: MFMA16 and MFMA32 run as
 * wave64 CDNA, WMMA11 as wave32 RDNA 3), the matrix instructions computed from the placements
 * AMD's ISA documents (written here from the ISA, not from amx_layout.h, which the kernels use:
 * a kernel that hands the units their operands in other places gets wrong sums; WMMA operands
 * whose lane halves disagree, which the ISA forbids, are counted in simt_bad_operands). Threads
 * that wait at barriers not all of the block reach stop the test with a message (on a GPU: a
 * hang or wrong results). The runtime API is declared for the host code to compile and does
 * nothing: tests pass host memory as device memory. */
#ifndef CELER_TESTS_SIMT_H
#define CELER_TESTS_SIMT_H

#define __host__
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__   static
#define __align__(n) __attribute__((aligned(n)))
#define CELER_HD     __host__ __device__

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <functional>
#include <vector>

extern "C" {
#include "backends/gpu/amd_sysfs.h"
#include "backends/gpu/amx_layout.h"
#include "backends/gpu/gfx_targets.h"
#include "celer.h"
}

#ifndef SIMT_KIND
#error "SIMT_KIND: the amx_layout.h kind of the target to run as"
#endif

#define CELER_GPU_VENDOR "AMD"
#define CELER_GPU_KIND   CELER_BACKEND_ROCM
#define CELER_GPU_NAME   "rocm"
#define CELER_GPU_API    "HIP"

/* ---- vector types -------------------------------------------------------------------------- */
struct float2 {
    float x, y;
};
struct float4 {
    float x, y, z, w;
};
struct int2 {
    int x, y;
};
struct int4 {
    int x, y, z, w;
};
struct uint2 {
    uint32_t x, y;
};
struct uint4 {
    uint32_t x, y, z, w;
};
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
static inline float2 make_float2(float x, float y) { return float2{x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
static inline int2   make_int2(int x, int y) { return int2{x, y}; }
static inline int4   make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }
static inline uint2  make_uint2(uint32_t x, uint32_t y) { return uint2{x, y}; }
static inline uint4  make_uint4(uint32_t x, uint32_t y, uint32_t z, uint32_t w) { return uint4{x, y, z, w}; }

/* CUDA's overloaded min and max, for the types the kernels give them */
static inline int32_t  min(int32_t a, int32_t b) { return a < b ? a : b; }
static inline int32_t  max(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int64_t  min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t  max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline uint32_t min(uint32_t a, uint32_t b) { return a < b ? a : b; }
static inline uint32_t max(uint32_t a, uint32_t b) { return a > b ? a : b; }

/* ---- the runtime: declared, inert --------------------------------------------------------- */
typedef int                  gpuError_t;
typedef struct simt_stream  *gpuStream_t;
typedef struct simt_event   *gpuEvent_t;
typedef struct simt_graph   *gpuGraph_t;
typedef struct simt_graphx  *gpuGraphExec_t;
typedef struct {
    char     name[256], gcnArchName[256];
    int      warpSize, multiProcessorCount, major, minor, integrated, pciDomainID, pciBusID, pciDeviceID;
    int      l2CacheSize, maxThreadsPerBlock, sharedMemPerBlockOptin, persistingL2CacheMaxSize;
    size_t   totalGlobalMem, sharedMemPerBlock, sharedMemPerMultiprocessor;
} gpuDeviceProp;
enum { gpuSuccess = 0, gpuErrorMemoryAllocation = 2, gpuErrorNotReady = 600, SIMT_ERROR = 999 };
enum { gpuMemcpyHostToDevice, gpuMemcpyDeviceToHost, gpuMemcpyDeviceToDevice };
static inline const char *gpuGetErrorString(gpuError_t) { return "the simt emulator has no runtime"; }
static inline const char *gpuGetErrorName(gpuError_t) { return "simtNoRuntime"; }
static inline gpuError_t  gpuGetLastError(void) { return gpuSuccess; }
template <typename... A> static inline gpuError_t simt_no_runtime(A...) { return SIMT_ERROR; }
#define gpuGetDeviceCount             simt_no_runtime
#define gpuGetDeviceProperties        simt_no_runtime
#define gpuSetDevice                  simt_no_runtime
#define gpuMemGetInfo                 simt_no_runtime
#define gpuMalloc                     simt_no_runtime
#define gpuFree                       simt_no_runtime
#define gpuHostAlloc                  simt_no_runtime
#define gpuFreeHost                   simt_no_runtime
#define gpuMemcpyAsync                simt_no_runtime
#define gpuMemsetAsync                simt_no_runtime
#define gpuStreamCreateNonBlocking    simt_no_runtime
#define gpuStreamDestroy              simt_no_runtime
#define gpuStreamQuery                simt_no_runtime
#define gpuStreamSynchronize          simt_no_runtime
#define gpuEventCreate                simt_no_runtime
#define gpuEventDestroy               simt_no_runtime
#define gpuEventRecord                simt_no_runtime
#define gpuEventQuery                 simt_no_runtime
#define gpuDriverGetVersion           simt_no_runtime
#define gpuRuntimeGetVersion          simt_no_runtime
#define gpuStreamBeginCaptureRelaxed  simt_no_runtime
#define gpuStreamEndCapture           simt_no_runtime
#define gpuGraphInstantiate           simt_no_runtime
#define gpuGraphLaunch                simt_no_runtime
#define gpuGraphExecDestroy           simt_no_runtime
#define gpuGraphDestroy               simt_no_runtime
#define gpuFuncSetMaxDynamicShared    simt_no_runtime
/* a device symbol is a host variable here */
enum { hipSuccess = 0, hipMemcpyDeviceToHost = 1 };
#define HIP_SYMBOL(x) (&(x))
static inline int hipMemcpyFromSymbol(void *dst, const void *sym, size_t n, size_t off, int)
{
    memcpy(dst, (const char *)sym + off, n);
    return hipSuccess;
}
static inline bool gpu_early_launch_ok(const gpuDeviceProp *) { return false; }
static inline void gpu_vendor_facts(const gpuDeviceProp *, celer_device_facts *f) { f->supported = false; }

/* No vendor BLAS: long steps stay on the source's kernels. */
#define CELER_GPU_BLAS_NAME    "none (simt)"
#define CELER_GPU_BLAS_RECORDS 0
#define CELER_GPU_SELFCHECK    1
typedef void *gpuBlasHandle;
typedef int   gpuBlasStatus;
static inline bool gpu_blas_there(const gpuDeviceProp *, char *why, size_t n)
{
    snprintf(why, n, "the simt emulator has none");
    return false;
}
static inline const char   *gpu_blas_file(void) { return "none"; }
static inline bool          gpu_blas_ok(gpuBlasStatus s) { return s == 0; }
static inline bool          gpu_blas_oom(gpuBlasStatus) { return false; }
static inline const char   *gpu_blas_words(gpuBlasStatus) { return "no BLAS in the simt emulator"; }
static inline gpuBlasStatus gpu_blas_create(gpuBlasHandle *) { return SIMT_ERROR; }
static inline gpuBlasStatus gpu_blas_destroy(gpuBlasHandle) { return SIMT_ERROR; }
static inline gpuBlasStatus gpu_blas_bind(gpuBlasHandle, gpuStream_t, void *, size_t) { return SIMT_ERROR; }
static inline gpuBlasStatus gpu_blas_gemm_tn(gpuBlasHandle, int, int, int, const float *, const void *, int, const void *,
                                             int, const float *, float *, int, bool, bool)
{
    return SIMT_ERROR;
}

/* ---- the scheduler ------------------------------------------------------------------------ */
#define CELER_WARP (SIMT_KIND == CELER_AMX_WMMA11 ? 32 : 64)
struct simt_barrier {
    int      count;
    unsigned gen;
};
struct simt_fiber {
    ucontext_t        ctx;
    dim3              tid;
    bool              done;
    std::vector<char> stack;
};
/* A wave's exchange, double-buffered: a collective's buffer is written again only after the next
 * collective's barrier, which every lane reaches after reading it. */
struct simt_wave {
    simt_barrier bar;
    int          parity[64];
    uint64_t     word[2][64][16];
};
struct simt_state {
    ucontext_t                   sched;
    std::vector<simt_fiber>      fibers;
    simt_fiber                  *cur;
    simt_barrier                 block_bar;
    std::vector<simt_wave>       waves;
    dim3                         block, bdim, gdim;
    std::vector<uint4>           dyn; /* the launch's dynamic shared memory */
    bool                         progress;
    const std::function<void()> *fn;
};
static simt_state simt;
static long       simt_bad_operands; /* WMMA instructions whose lane halves disagreed */

#define threadIdx (simt.cur->tid)
#define blockIdx  (simt.block)
#define blockDim  (simt.bdim)
#define gridDim   (simt.gdim)

static inline void simt_yield(void) { swapcontext(&simt.cur->ctx, &simt.sched); }

static inline void simt_wait(simt_barrier &b, int n)
{
    const unsigned g = b.gen;
    simt.progress    = true;
    if (++b.count == n) {
        b.count = 0, b.gen++;
        return;
    }
    while (b.gen == g) simt_yield();
}

static inline void simt_fiber_main(void)
{
    (*simt.fn)();
    simt.cur->done = true;
    simt.progress  = true;
}

/* The block's dynamic shared memory (gpu_vendor.h's GPU_DYN_SHARED). */
#define GPU_DYN_SHARED(T, name) T *name = (T *)simt.dyn.data()

/* Runs fn as every thread (threads a block, whole waves) of every block of grid, with smem bytes
 * of dynamic shared memory. */
static inline void simt_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()> &fn)
{
    simt.dyn.assign((smem + 15) / 16, uint4{0, 0, 0, 0});
    const int threads = (int)(block.x * block.y * block.z);
    if (block.y != 1 || block.z != 1 || threads % CELER_WARP || threads > 1024) {
        fprintf(stderr, "simt: a block of %u x %u x %u threads (one dimension, waves of %d, at most 1024)\n", block.x,
                block.y, block.z, CELER_WARP);
        exit(2);
    }
    simt.fn = &fn, simt.bdim = block, simt.gdim = grid;
    simt.fibers.resize((size_t)threads);
    simt.waves.assign((size_t)(threads / CELER_WARP), simt_wave{});
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                simt.block     = dim3(bx, by, bz);
                simt.block_bar = simt_barrier{0, 0};
                for (simt_wave &w : simt.waves) w.bar = simt_barrier{0, 0}, memset(w.parity, 0, sizeof w.parity);
                for (int t = 0; t < threads; t++) {
                    simt_fiber &f = simt.fibers[(size_t)t];
                    f.tid = dim3((unsigned)t, 0, 0), f.done = false;
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
                        fprintf(stderr, "simt: block (%u, %u, %u): every thread left waits at a barrier that not all "
                                "reach\n", bx, by, bz);
                        exit(2);
                    }
                }
            }
}

/* HIP's launch (the vendor half's gpu_launch_kernel), run here. */
template <typename... E, typename... A>
static inline gpuError_t gpu_launch_kernel(void (*kernel)(E...), dim3 grid, dim3 block, size_t smem, gpuStream_t,
                                           bool, A &&...args)
{
    simt_launch(grid, block, smem, [&] { kernel(args...); });
    return gpuSuccess;
}

static inline void __syncthreads(void) { simt_wait(simt.block_bar, (int)simt.fibers.size()); }
static inline void __threadfence(void) {}
static inline void gpu_dep_enter(void) {}
static inline void gpu_dep_deferred(void) {}
template <typename T> static inline T atomicAdd(T *p, T v)
{
    const T old = *p;
    *p          = old + v;
    return old;
}

/* ---- a wave's collectives ------------------------------------------------------------------ */
/* Every lane's n values of the caller's wave once all have given theirs (the buffer). */
static inline const uint64_t (*simt_exchange(const uint64_t *v, int n))[16]
{
    simt_wave &w    = simt.waves[threadIdx.x / CELER_WARP];
    const int  lane = (int)(threadIdx.x % CELER_WARP), p = w.parity[lane];
    w.parity[lane] ^= 1;
    memcpy(w.word[p][lane], v, (size_t)n * sizeof *v);
    simt_wait(w.bar, CELER_WARP);
    return w.word[p];
}

template <typename T> static inline T simt_shfl(T v, int src)
{
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    const uint64_t(*all)[16] = simt_exchange(&u, 1);
    T r;
    memcpy(&r, &all[src & (CELER_WARP - 1)][0], sizeof r);
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

/* ---- arithmetic ----------------------------------------------------------------------------- */
static inline float    __fmul_rn(float a, float b) { return a * b; }
static inline float    __fadd_rn(float a, float b) { return a + b; }
static inline float    __fsub_rn(float a, float b) { return a - b; }
static inline float    __fdiv_rn(float a, float b) { return a / b; }
static inline float    __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float    __uint_as_float(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t __float_as_uint(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline int __dp4a(int a, int b, int c) /* sdot4's sum: four signed byte products, no clamping */
{
    for (int i = 0; i < 32; i += 8) c += (int)(int8_t)(a >> i) * (int)(int8_t)(b >> i);
    return c;
}
static inline _Float16 __float2half_rn(float v) { return (_Float16)v; }
static inline float    __half2float(_Float16 h) { return (float)h; }
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

/* ---- matrix units ---------------------------------------------------------------------------- */
/* NVIDIA's (HIP's half stubs them too: nothing launches the kernels that take them) */
#define CELER_GPU_IMMA      0
#define CELER_GPU_IMMA_HERE 0
static inline bool gpu_imma_ok(const gpuDeviceProp *) { return false; }
static inline void gpu_imma_16x8x32(int *, const int *, int, int) {}
static inline void gpu_ldsm_x4(uint32_t r[4], const void *) { r[0] = r[1] = r[2] = r[3] = 0; }
static inline void gpu_ldsm_x4_trans(uint32_t r[4], const void *) { r[0] = r[1] = r[2] = r[3] = 0; }
static inline void gpu_hmma_16x8x16(float *, const uint32_t *, uint32_t, uint32_t) {}
static inline void gpu_cp_async16(void *dst, const void *src, bool valid)
{
    const uint4 z = {0, 0, 0, 0};
    memcpy(dst, valid ? src : &z, 16);
}
static inline void gpu_cp_async8(void *dst, const void *src, bool valid)
{
    const uint2 z = {0, 0};
    memcpy(dst, valid ? src : &z, 8);
}
static inline void                    gpu_cp_commit(void) {}
template <int N> static inline void   gpu_cp_wait(void) {}

#define CELER_GPU_AMX      1
#define CELER_GPU_AMX_HERE SIMT_KIND

/* Byte k of a lane's operand words (a 32-bit word a slot); half k likewise. */
static inline int   simt_byte(const uint64_t *w, int k) { return (int)(int8_t)(w[k / 4] >> (8 * (k % 4))); }
static inline float simt_half(const uint64_t *w, int k) { return gpu_f16_val((uint32_t)(w[k / 2] >> (16 * (k % 2)))); }

/* WMMA's operands: lanes l and l + 16 must hold the same ones. */
static inline void simt_wmma_same(const uint64_t (*all)[16], int words)
{
    const int lane = (int)(threadIdx.x % CELER_WARP);
    if (lane < 16)
        for (int i = 0; i < words; i++) simt_bad_operands += all[lane][i] != all[lane + 16][i];
}

/* acc += the 16 x 16 tile of one 32-value block's integer sums (gpu_vendor.h's gpu_amx_block: a
 * is the lane's weight row at the block, b its token's codes), the operands gathered as the HIP
 * half gathers them (amx_word_at) and summed where the ISA puts them:
 *   v_mfma_i32_16x16x16i8 (twice, words 0 then 1): A[m][k] in lane m + 16 (k / 4), byte k % 4;
 *     B[k][n] in lane n + 16 (k / 4), byte k % 4; D[m][n] in lane n + 16 (m / 4), register m % 4.
 *   v_mfma_i32_16x16x32_i8 (words 0, 1 as one 64-bit operand): A[m][k] in lane m + 16 (k / 8),
 *     byte k % 8; B likewise; D as above.
 *   v_wmma_i32_16x16x16_iu8 (twice, words 4j .. 4j + 3): A[m][k] in lanes m and m + 16, byte k;
 *     B[k][n] in lanes n and n + 16; D[m][n] in lane n + 16 (m % 2), register m / 2. */
static inline void gpu_amx_block(int *acc, const int8_t *a, const int8_t *b)
{
    constexpr int K = SIMT_KIND, W = amx_words(K);
    const int     lane = (int)(threadIdx.x % CELER_WARP);
    uint64_t      mine[16] = {0};
    for (int i = 0; i < W; i++) {
        uint32_t wa, wb;
        memcpy(&wa, a + amx_word_at(K, lane, i), 4), memcpy(&wb, b + amx_word_at(K, lane, i), 4);
        mine[i] = wa, mine[W + i] = wb;
    }
    const uint64_t(*all)[16] = simt_exchange(mine, 2 * W);
    const int n              = lane % 16;
    if (K == CELER_AMX_WMMA11) {
        simt_wmma_same(all, 2 * W);
        for (int v = 0; v < 8; v++) {
            const int m = 2 * v + lane / 16;
            for (int j = 0; j < 2; j++)
                for (int k = 0; k < 16; k++) acc[v] += simt_byte(all[m] + 4 * j, k) * simt_byte(all[n] + W + 4 * j, k);
        }
    } else {
        for (int v = 0; v < 4; v++) {
            const int m = 4 * (lane / 16) + v;
            if (K == CELER_AMX_MFMA16)
                for (int j = 0; j < 2; j++)
                    for (int k = 0; k < 16; k++)
                        acc[v] += simt_byte(all[m + 16 * (k / 4)] + j, k % 4) *
                                  simt_byte(all[n + 16 * (k / 4)] + W + j, k % 4);
            else
                for (int k = 0; k < 32; k++)
                    acc[v] += simt_byte(all[m + 16 * (k / 8)], k % 8) * simt_byte(all[n + 16 * (k / 8)] + W, k % 8);
        }
    }
}

/* acc += A B over 16 k in f16 products with f32 sums (gpu_vendor.h's gpu_amx_hmma: a, b the
 * lane's words of f16 pairs), where the ISA puts them:
 *   v_mfma_f32_16x16x16f16 (wave64): A[m][k] in lane m + 16 (k / 4), half k % 4 of its two words;
 *     B[k][n] in lane n + 16 (k / 4), half k % 4; D[m][n] in lane n + 16 (m / 4), register m % 4.
 *   v_wmma_f32_16x16x16_f16 (wave32): A[m][k] in lanes m and m + 16, half k of its eight words;
 *     B[k][n] in lanes n and n + 16, half k; D[m][n] in lane n + 16 (m % 2), register m / 2. */
static inline void gpu_amx_hmma(float *acc, const uint32_t *a, const uint32_t *b)
{
    constexpr int K = SIMT_KIND, W = K == CELER_AMX_WMMA11 ? 8 : 2;
    uint64_t      mine[16] = {0};
    for (int i = 0; i < W; i++) mine[i] = a[i], mine[W + i] = b[i];
    const uint64_t(*all)[16] = simt_exchange(mine, 2 * W);
    const int lane = (int)(threadIdx.x % CELER_WARP), n = lane % 16;
    if (K == CELER_AMX_WMMA11) {
        simt_wmma_same(all, 2 * W);
        for (int v = 0; v < 8; v++) {
            const int m = 2 * v + lane / 16;
            float     s = 0.0f;
            for (int k = 0; k < 16; k++) s += simt_half(all[m], k) * simt_half(all[n] + W, k);
            acc[v] += s;
        }
    } else {
        for (int v = 0; v < 4; v++) {
            const int m = 4 * (lane / 16) + v;
            float     s = 0.0f;
            for (int k = 0; k < 16; k++)
                s += simt_half(all[m + 16 * (k / 4)], k % 4) * simt_half(all[n + 16 * (k / 4)] + W, k % 4);
            acc[v] += s;
        }
    }
}

#endif
