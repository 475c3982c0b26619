/* GPU kernels' sources run on the host, thread by thread: the tests of device code no GPU here
 * can run (AMD's, and NVIDIA's between the sessions that lend an H200). A third half of
 * gpu_vendor.h, taken where CELER_SIMT is defined (the tests under tests/simt, built by
 * tests/simt/simt.cmake): a test includes a GPU source as it is (a .cu,
 * host functions and all; those it does not call are dropped at link) and launches its kernels
 * through simt_launch, or through the source's own host code (gpu_launch_kernel runs here).
 *
 * Each thread of a block is a fiber (its own stack) on one OS thread; a block runs its fibers in
 * turn, each until it waits at a barrier (__syncthreads, or a wave's collective: a shuffle, an
 * any, a matrix instruction), until all have finished; blocks run one after the other, so a
 * kernel's __shared__ arrays are function statics and atomics need no locks. The wave size and
 * the matrix units are the target's (SIMT_KIND, an amx_layout.h kind: MFMA16 and MFMA32 run as
 * wave64 CDNA, WMMA11 as wave32 RDNA 3), the matrix instructions computed from the placements
 * AMD's ISA documents (written here from the ISA, not from amx_layout.h, which the kernels use:
 * a kernel that hands the units their operands in other places gets wrong sums; WMMA operands
 * whose lane halves disagree, which the ISA forbids, are counted in simt_bad_operands); with
 * SIMT_NVIDIA an NVIDIA sm_90 instead, its mma.sync and ldmatrix computed from the PTX ISA's
 * fragment tables, the backend opened as "cuda". Threads
 * that wait at barriers not all of the block reach stop the test with a message (on a GPU: a
 * hang or wrong results); a wave's collective that some of its lanes skip (a branch, or done)
 * runs among those that reach it, as the GPU runs it with the others inactive, and a read of a
 * lane that skipped it stops the test (on a GPU: an undefined value). The runtime is the host's
 * memory and does everything at once (below), so the whole backend runs: a test can open it as
 * "rocm" and run tests/gpu's programs. */
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
#include <memory>
#include <vector>

extern "C" {
#include "backends/gpu/amd_sysfs.h"
#include "backends/gpu/amx_layout.h"
#include "backends/gpu/gfx_targets.h"
#include "celer.h"
#include "quant/half.h"
}

#ifndef SIMT_KIND
#error "SIMT_KIND: the amx_layout.h kind of the target to run as (CELER_AMX_NONE with SIMT_NVIDIA)"
#endif

/* SIMT_NVIDIA: an NVIDIA target instead (sm_90: 32-lane warps, mma.sync and ldmatrix computed
 * from the PTX ISA's fragment layouts, below; no AMD matrix units), run as the "cuda" backend. */
#if defined(SIMT_NVIDIA)
#define CELER_WARP       32
#define CELER_GPU_VENDOR "NVIDIA"
#define CELER_GPU_KIND   CELER_BACKEND_CUDA
#define CELER_GPU_NAME   "cuda"
#define CELER_GPU_API    "CUDA"
#else
#define CELER_WARP (SIMT_KIND == CELER_AMX_WMMA11 ? 32 : 64)
#define CELER_GPU_VENDOR "AMD"
#define CELER_GPU_KIND   CELER_BACKEND_ROCM
#define CELER_GPU_NAME   "rocm"
#define CELER_GPU_API    "HIP"
#endif

/* ---- vector types -------------------------------------------------------------------------- */
/* aligned as the GPUs' own (a load of one off that faults there: the alignment check of
 * tests/simt/simt.cmake stops it here too) */
struct alignas(8) float2 {
    float x, y;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) int2 {
    int x, y;
};
struct alignas(16) int4 {
    int x, y, z, w;
};
struct alignas(8) uint2 {
    uint32_t x, y;
};
struct alignas(16) uint4 {
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

/* ---- the runtime, on host memory -------------------------------------------------------------
 * One device (SIMT_ARCH), its memory the host's, every call done when it returns: copies and
 * launches run at once, streams and events are always finished, and a stream cannot be captured
 * (the backend then runs every step op by op). Fresh allocations hold NaNs (0xff bytes), so that
 * a kernel reading memory nothing wrote shows. */
#if defined(SIMT_NVIDIA)
#define SIMT_ARCH "sm_90"
#elif !defined(SIMT_ARCH)
#define SIMT_ARCH (SIMT_KIND == CELER_AMX_WMMA11 ? "gfx1100" : SIMT_KIND == CELER_AMX_MFMA32 ? "gfx942" : "gfx90a")
#endif
typedef int                 gpuError_t;
typedef struct simt_stream *gpuStream_t;
typedef struct simt_event  *gpuEvent_t;
typedef struct simt_graph  *gpuGraph_t;
typedef struct simt_graphx *gpuGraphExec_t;
typedef struct {
    char   name[256], gcnArchName[256];
    int    warpSize, multiProcessorCount, major, minor, integrated, pciDomainID, pciBusID, pciDeviceID;
    int    l2CacheSize, maxThreadsPerBlock;
    size_t totalGlobalMem, sharedMemPerBlock;
} gpuDeviceProp;
enum { gpuSuccess = 0, gpuErrorMemoryAllocation = 2, gpuErrorNotReady = 600, SIMT_NO_CAPTURE = 900 };
enum { gpuMemcpyHostToDevice, gpuMemcpyDeviceToHost, gpuMemcpyDeviceToDevice };
enum { SIMT_MEMORY = 1 << 30, SIMT_CUS = 4 };
static inline const char *gpuGetErrorString(gpuError_t e)
{
    return e == SIMT_NO_CAPTURE ? "the simt emulator captures no graphs" : e ? "simt error" : "no error";
}
static inline const char *gpuGetErrorName(gpuError_t e) { return e ? "simtError" : "simtSuccess"; }
static inline gpuError_t  gpuGetLastError(void) { return gpuSuccess; }
static inline gpuError_t  gpuGetDeviceCount(int *n) { return *n = 1, gpuSuccess; }
static inline gpuError_t  gpuSetDevice(int) { return gpuSuccess; }
static inline gpuError_t  gpuGetDeviceProperties(gpuDeviceProp *p, int)
{
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "celer simt emulator (%s)", SIMT_ARCH);
#if !defined(SIMT_NVIDIA)
    snprintf(p->gcnArchName, sizeof p->gcnArchName, "%s", SIMT_ARCH);
#endif
    p->warpSize = CELER_WARP, p->multiProcessorCount = SIMT_CUS, p->major = 9, p->minor = 0;
    p->l2CacheSize = 4 << 20, p->maxThreadsPerBlock = 1024;
    p->totalGlobalMem = SIMT_MEMORY, p->sharedMemPerBlock = 64 << 10;
    return gpuSuccess;
}
static inline gpuError_t gpuMemGetInfo(size_t *free_b, size_t *total_b)
{
    *free_b = *total_b = SIMT_MEMORY;
    return gpuSuccess;
}
template <typename T> static inline gpuError_t gpuMalloc(T **p, size_t n)
{
    *p = (T *)aligned_alloc(256, (n + 255) / 256 * 256);
    if (!*p) return gpuErrorMemoryAllocation;
    memset((void *)*p, 0xff, n);
    return gpuSuccess;
}
static inline gpuError_t gpuFree(void *p) { return free(p), gpuSuccess; }
#define gpuHostAlloc(p, n) gpuMalloc((p), (n))
static inline gpuError_t gpuFreeHost(void *p) { return free(p), gpuSuccess; }
static inline gpuError_t gpuMemcpyAsync(void *dst, const void *src, size_t n, int, gpuStream_t)
{
    return memmove(dst, src, n), gpuSuccess;
}
static inline gpuError_t gpuMemsetAsync(void *p, int v, size_t n, gpuStream_t) { return memset(p, v, n), gpuSuccess; }
static inline gpuError_t gpuStreamCreateNonBlocking(gpuStream_t *s)
{
    static char stream;
    *s = (gpuStream_t)(void *)&stream;
    return gpuSuccess;
}
static inline gpuError_t gpuStreamDestroy(gpuStream_t) { return gpuSuccess; }
static inline gpuError_t gpuStreamQuery(gpuStream_t) { return gpuSuccess; }
static inline gpuError_t gpuStreamSynchronize(gpuStream_t) { return gpuSuccess; }
static inline gpuError_t gpuEventCreate(gpuEvent_t *e)
{
    static char event;
    *e = (gpuEvent_t)(void *)&event;
    return gpuSuccess;
}
static inline gpuError_t gpuEventDestroy(gpuEvent_t) { return gpuSuccess; }
static inline gpuError_t gpuEventRecord(gpuEvent_t, gpuStream_t) { return gpuSuccess; }
static inline gpuError_t gpuEventQuery(gpuEvent_t) { return gpuSuccess; }
static inline gpuError_t gpuDriverGetVersion(int *v) { return *v = 0, gpuSuccess; }
static inline gpuError_t gpuRuntimeGetVersion(int *v) { return *v = 0, gpuSuccess; }
static inline gpuError_t gpuStreamBeginCaptureRelaxed(gpuStream_t) { return SIMT_NO_CAPTURE; }
static inline gpuError_t gpuStreamEndCapture(gpuStream_t, gpuGraph_t *g) { return *g = NULL, SIMT_NO_CAPTURE; }
static inline gpuError_t gpuGraphInstantiate(gpuGraphExec_t *, gpuGraph_t) { return SIMT_NO_CAPTURE; }
static inline gpuError_t gpuGraphLaunch(gpuGraphExec_t, gpuStream_t) { return SIMT_NO_CAPTURE; }
static inline gpuError_t gpuGraphExecDestroy(gpuGraphExec_t) { return gpuSuccess; }
static inline gpuError_t gpuGraphDestroy(gpuGraph_t) { return gpuSuccess; }
template <typename F> static inline gpuError_t gpuFuncSetMaxDynamicShared(F, int) { return gpuSuccess; }
/* a device symbol is a host variable here */
enum { hipSuccess = 0, hipMemcpyDeviceToHost = 1 };
#define HIP_SYMBOL(x) (&(x))
static inline int hipMemcpyFromSymbol(void *dst, const void *sym, size_t n, size_t off, int)
{
    memcpy(dst, (const char *)sym + off, n);
    return hipSuccess;
}
static inline bool gpu_early_launch_ok(const gpuDeviceProp *) { return false; }
static inline void gpu_vendor_facts(const gpuDeviceProp *p, celer_device_facts *f) /* as HIP's, without sysfs */
{
#if defined(SIMT_NVIDIA)
    snprintf(f->arch, sizeof f->arch, "sm_%d%d", p->major, p->minor);
    f->supported = true;
#else
    celer_error e;
    celer_gfx_arch_base(p->gcnArchName, f->arch, sizeof f->arch);
    f->supported = celer_gfx_check(p->gcnArchName, p->name, f->built_archs, &e) == CELER_OK;
    if (!f->supported) snprintf(f->why, sizeof f->why, "%s", e.msg);
#endif
    f->unified = false;
    snprintf(f->unified_source, sizeof f->unified_source, "the simt emulator");
}

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
static inline gpuBlasStatus gpu_blas_create(gpuBlasHandle *) { return 1; }
static inline gpuBlasStatus gpu_blas_destroy(gpuBlasHandle) { return 1; }
static inline gpuBlasStatus gpu_blas_bind(gpuBlasHandle, gpuStream_t, void *, size_t) { return 1; }
static inline gpuBlasStatus gpu_blas_gemm_tn(gpuBlasHandle, int, int, int, const float *, const void *, int,
                                             const void *, int, const float *, float *, int, bool, bool)
{
    return 1;
}

/* ---- the scheduler ------------------------------------------------------------------------ */
/* Switching fibers: on x86-64 (outside the sanitizers, which must be told of stack switches)
 * a few instructions that keep the registers a call keeps; elsewhere ucontext, whose swapcontext
 * also saves the signal mask, a system call a switch (about half of a run's time). */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SIMT_FAST_SWITCH 1
/* Saves the callee-saved registers on the stack, *from = the stack pointer, then resumes the
 * fiber whose stack pointer is to. MXCSR and the x87 control word, which the ABI also has a
 * callee keep, are left as they are: nothing here changes them, and saving and loading them took
 * most of a switch. */
extern "C" void simt_switch(void **from, void *to);
__asm__(".text\n"
        ".weak simt_switch\n" /* every translation unit has it; the link keeps one */
        ".type simt_switch,@function\n"
        "simt_switch:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n    pushq %r14\n    pushq %r15\n"
        "    movq %rsp, (%rdi)\n    movq %rsi, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size simt_switch, .-simt_switch\n");
#else
#define SIMT_FAST_SWITCH 0
#endif

struct simt_barrier {
    int      count;
    unsigned gen;
};
enum { SIMT_STACK = 256 << 10 };
struct simt_fiber {
    ucontext_t              ctx; /* the slow switch's */
    void                   *sp;  /* the fast one's: the saved stack pointer */
    dim3                    tid;
    bool                    done;
    const simt_barrier     *wait_on;   /* the barrier it waits at, or NULL */
    unsigned                wait_gen;  /* that barrier's generation when it arrived */
    std::unique_ptr<char[]> stack; /* SIMT_STACK bytes, untouched until used */
};
/* A wave's exchange, double-buffered: a collective's buffer is written again only after the next
 * collective's barrier, which every lane reaches after reading it. A lane that skips a collective
 * (a branch the others took, or done) is absent from its buffer (simt_partial). */
struct simt_wave {
    simt_barrier bar;
    int          parity[64];
    bool         absent[2][64];
    uint64_t     word[2][64][16];
    unsigned     tile_gen[2]; /* the collective (bar.gen after it) whose tile tile[] holds, per buffer */
    double       tile[2][16][16];
};
struct simt_state {
    ucontext_t                   sched;
    void                        *sched_sp;
    std::vector<simt_fiber>      fibers;
    simt_fiber                  *cur;
    simt_barrier                 block_bar;
    std::vector<simt_wave>       waves;
    dim3                         block, bdim, gdim;
    std::vector<uint4>           dyn; /* the launch's dynamic shared memory */
    bool                         progress;
    const std::function<void()> *fn;
};
/* one for the program (inline variables): a kernel may be launched from another translation unit */
inline simt_state simt;
inline long       simt_bad_operands; /* WMMA instructions whose lane halves disagreed */

#define threadIdx (simt.cur->tid)
#define blockIdx  (simt.block)
#define blockDim  (simt.bdim)
#define gridDim   (simt.gdim)

static inline void simt_yield(void)
{
#if SIMT_FAST_SWITCH
    simt_switch(&simt.cur->sp, simt.sched_sp);
#else
    swapcontext(&simt.cur->ctx, &simt.sched);
#endif
}

/* Arrives at b, which n threads must reach, and returns when all have. */
static inline void simt_wait(simt_barrier &b, int n)
{
    simt.progress = true;
    if (++b.count == n) {
        b.count = 0, b.gen++;
        return;
    }
    simt.cur->wait_on = &b, simt.cur->wait_gen = b.gen;
    simt_yield(); /* resumed once b's generation has moved on */
    simt.cur->wait_on = NULL;
}

static inline void simt_fiber_main(void)
{
    (*simt.fn)();
    simt.cur->done = true;
    simt.progress  = true;
#if SIMT_FAST_SWITCH
    simt_yield(); /* never resumed */
    abort();
#endif
}

/* A fiber made to start at simt_fiber_main on its own stack. */
static inline void simt_fiber_start(simt_fiber &f)
{
    if (!f.stack) f.stack.reset(new char[SIMT_STACK]);
#if SIMT_FAST_SWITCH
    /* what simt_switch pops: six registers, then simt_fiber_main as the return address, placed so
     * that it starts with the stack as a call leaves it; the top moved down by 65 cache lines a
     * fiber (mod 512), so that the fibers' frames, which a round of the scheduler touches in
     * turn, do not all fall in the same cache sets as stacks of one size would */
    const size_t t   = (size_t)(&f - simt.fibers.data());
    uintptr_t    top = ((uintptr_t)f.stack.get() + SIMT_STACK - (t * 65 % 512) * 64) & ~(uintptr_t)15;
    uint64_t  *sp  = (uint64_t *)(top - 16);
    sp[0]          = (uint64_t)(uintptr_t)simt_fiber_main;
    sp -= 6;
    memset(sp, 0, 6 * sizeof *sp);
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp   = f.stack.get();
    f.ctx.uc_stack.ss_size = SIMT_STACK;
    f.ctx.uc_link          = &simt.sched;
    makecontext(&f.ctx, simt_fiber_main, 0);
#endif
}

/* Runs fiber f until it waits or ends. */
static inline void simt_resume(simt_fiber &f)
{
    simt.cur = &f;
#if SIMT_FAST_SWITCH
    simt_switch(&simt.sched_sp, f.sp);
#else
    swapcontext(&simt.sched, &f.ctx);
#endif
}

/* The block's dynamic shared memory (gpu_vendor.h's GPU_DYN_SHARED). */
#define GPU_DYN_SHARED(T, name) T *name = (T *)simt.dyn.data()

/* A collective some lanes of a wave wait at while each other lane of the wave is done or waits at
 * the block's barrier: on the GPU those lanes are inactive (a branch the others did not take), so
 * it completes among the lanes that came, the others absent from its buffer (a read of one is an
 * undefined value: simt_from stops the test). Whether one completed. */
static inline bool simt_partial(void)
{
    for (size_t wi = 0; wi < simt.waves.size(); wi++) {
        simt_wave &w = simt.waves[wi];
        const int  l0 = (int)wi * CELER_WARP, rest = (int)simt.fibers.size() - l0;
        const int  n  = rest < CELER_WARP ? rest : CELER_WARP;
        int        came = 0, p = -1;
        bool       others_past = true;
        for (int l = 0; l < n; l++) {
            const simt_fiber &f = simt.fibers[(size_t)(l0 + l)];
            if (f.wait_on == &w.bar) came++, p = w.parity[l] ^ 1; /* the buffer it wrote */
            else others_past = others_past && (f.done || f.wait_on == &simt.block_bar);
        }
        if (!came || !others_past) continue;
        for (int l = 0; l < n; l++)
            if (simt.fibers[(size_t)(l0 + l)].wait_on != &w.bar) w.absent[p][l] = true, w.parity[l] ^= 1;
        w.bar.count = 0, w.bar.gen++;
        return true;
    }
    return false;
}

/* Runs fn as every thread (threads a block, whole waves) of every block of grid, with smem bytes
 * of dynamic shared memory. */
static inline void simt_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()> &fn)
{
    simt.dyn.assign((smem + 15) / 16, uint4{0, 0, 0, 0});
    const int threads = (int)(block.x * block.y * block.z);
    if (block.y != 1 || block.z != 1 || threads < 1 || threads > 1024) {
        fprintf(stderr, "simt: a block of %u x %u x %u threads (one dimension, at most 1024)\n", block.x, block.y,
                block.z);
        abort();
    }
    simt.fn = &fn, simt.bdim = block, simt.gdim = grid;
    simt.fibers.resize((size_t)threads);
    simt.waves.assign((size_t)((threads + CELER_WARP - 1) / CELER_WARP), simt_wave{}); /* the last one may be short */
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                simt.block     = dim3(bx, by, bz);
                simt.block_bar = simt_barrier{0, 0};
                for (simt_wave &w : simt.waves) {
                    w.bar = simt_barrier{0, 0};
                    memset(w.parity, 0, sizeof w.parity), memset(w.absent, 0, sizeof w.absent);
                }
                for (int t = 0; t < threads; t++) {
                    simt_fiber &f = simt.fibers[(size_t)t];
                    f.tid = dim3((unsigned)t, 0, 0), f.done = false, f.wait_on = NULL;
                    simt_fiber_start(f);
                }
                for (int left = threads; left > 0;) {
                    simt.progress = false;
                    left          = 0;
                    for (simt_fiber &f : simt.fibers) {
                        if (f.done) continue;
                        if (!f.wait_on || f.wait_on->gen != f.wait_gen) simt_resume(f);
                        left += !f.done;
                    }
                    if (left > 0 && !simt.progress && !simt_partial()) {
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
/* The lanes of the caller's wave: CELER_WARP, or fewer in a block's last wave. */
static inline int simt_lanes(void)
{
    const int rest = (int)simt.fibers.size() - (int)(threadIdx.x / CELER_WARP) * CELER_WARP;
    return rest < CELER_WARP ? rest : CELER_WARP;
}

/* A wave's barrier (NVIDIA's __syncwarp, every lane of the wave named). */
static inline void __syncwarp(unsigned = 0xffffffffu) { simt_wait(simt.waves[threadIdx.x / CELER_WARP].bar, simt_lanes()); }

static inline const uint64_t (*simt_exchange(const uint64_t *v, int n))[16]
{
    simt_wave &w    = simt.waves[threadIdx.x / CELER_WARP];
    const int  lane = (int)(threadIdx.x % CELER_WARP), p = w.parity[lane];
    w.parity[lane] ^= 1;
    w.absent[p][lane] = false;
    memcpy(w.word[p][lane], v, (size_t)n * sizeof *v);
    simt_wait(w.bar, simt_lanes());
    return w.word[p];
}

/* A collective that reads lane src where the wave has none (a block short of a whole wave): on
 * the GPU an undefined value. Stops the test. */
static inline void simt_lane_there(int src)
{
    if (src < simt_lanes()) return;
    fprintf(stderr, "simt: block (%u, %u, %u), thread %u read lane %d of a wave of %d lanes (the block has %zu "
            "threads)\n", simt.block.x, simt.block.y, simt.block.z, threadIdx.x, src, simt_lanes(), simt.fibers.size());
    abort();
}

/* Whether lane l took part in the collective whose buffer is all. */
static inline bool simt_came(const uint64_t (*all)[16], int l)
{
    const simt_wave &w = simt.waves[threadIdx.x / CELER_WARP];
    return !w.absent[all == w.word[1]][l];
}

/* A read of lane src of the collective whose buffer is all, where src skipped it (inactive on the
 * GPU: an undefined value). Stops the test. */
static inline void simt_from(const uint64_t (*all)[16], int src)
{
    if (simt_came(all, src)) return;
    fprintf(stderr, "simt: block (%u, %u, %u), thread %u read lane %d, which did not take part in the collective\n",
            simt.block.x, simt.block.y, simt.block.z, threadIdx.x, src);
    abort();
}

template <typename T> static inline T simt_shfl(T v, int src)
{
    uint64_t u = 0;
    memcpy(&u, &v, sizeof v);
    const uint64_t(*all)[16] = simt_exchange(&u, 1);
    src &= CELER_WARP - 1;
    simt_lane_there(src);
    simt_from(all, src);
    T r;
    memcpy(&r, &all[src][0], sizeof r);
    return r;
}
#define gpu_shfl(v, l)     simt_shfl((v), (int)(l))
#define gpu_shfl_xor(v, m) simt_shfl((v), (int)(threadIdx.x % CELER_WARP) ^ (int)(m))

static inline bool gpu_any(bool p)
{
    const uint64_t u = p, (*all)[16] = simt_exchange(&u, 1);
    bool any = false;
    for (int l = 0; l < simt_lanes(); l++) any = any || (simt_came(all, l) && all[l][0]); /* active lanes' */
    return any;
}

/* ---- arithmetic ----------------------------------------------------------------------------- */
static inline float    __fmul_rn(float a, float b) { return a * b; }
static inline float    __fadd_rn(float a, float b) { return a + b; }
static inline float    __fsub_rn(float a, float b) { return a - b; }
static inline float    __fdiv_rn(float a, float b) { return a / b; }
static inline float    __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float    __uint_as_float(uint32_t u) { return celer_bits_f32(u); }
static inline uint32_t __float_as_uint(float f) { return celer_f32_bits(f); }
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
/* An f16's value from its bits (the low 16 of bits): exact, as the (float)_Float16 cast it replaces,
 * which without F16C is a libgcc call a value — 59% of test_gpu_ops_sm90's time, in the emulated
 * f16 matrix instructions' 128 conversions a lane (test_simt_waves holds the two equal). */
static inline float gpu_f16_val(uint32_t bits) { return celer_half_to_f32((uint16_t)bits); }
static inline uint32_t gpu_half2_bits(float lo, float hi)
{
    return (uint32_t)gpu_f16_bits(lo) | (uint32_t)gpu_f16_bits(hi) << 16;
}

#include "simt_matrix.h"

#endif
