/* The one place that knows which GPU vendor a build targets: a neutral gpu* spelling of the
 * runtime API and the warp primitives, mapped onto CUDA (nvcc) or HIP (hipcc, clang -x hip).
 * Every other GPU source is written once against these names (DESIGN.md, Backends).
 *
 * Warp size is a property of the target, not the constant 32: CELER_WARP is 32 on NVIDIA and
 * on RDNA (wave32), 64 on CDNA (wave64: gfx90a, gfx942). Device code uses CELER_WARP; host code
 * asks the device (gpuDeviceProp.warpSize) and sizes launches from that. In a HIP build the host
 * pass compiles for no target (clang even defines __AMDGCN_WAVEFRONT_SIZE as 64 there, whatever
 * the targets), so CELER_WARP is only meaningful inside device code: kernels must not be
 * templated on it (the host stub and the device symbol would differ). */
#ifndef CELER_BACKENDS_GPU_VENDOR_H
#define CELER_BACKENDS_GPU_VENDOR_H

#include <stdint.h>
#include <stdio.h>
#include <utility>

/* A third half: the kernels run on the host, thread by thread, as an AMD target would run them
 * (tests/simt/simt.h, for the tests of device code no GPU here runs). */
#if defined(CELER_SIMT)
#include "simt.h"
#endif

extern "C" {
#include "celer.h"
}

/* A function of the headers shared with host-only C (q6k_order.h): host and device here, host
 * there. */
#define CELER_HD __host__ __device__
extern "C" {
#include "backends/gpu/amx_layout.h"
}

#if defined(CELER_SIMT)
/* all in simt.h */
#elif defined(__HIPCC__) || defined(__HIP__)
#include <hip/hip_fp16.h>
#include <hip/hip_runtime.h>
extern "C" {
#include "backends/gpu/amd_sysfs.h"
#include "backends/gpu/gfx_targets.h"
}
#include "backends/gpu/gpu_rocblas.h"

#define CELER_GPU_VENDOR "AMD"
#define CELER_GPU_KIND   CELER_BACKEND_ROCM
#define CELER_GPU_NAME   "rocm"
#define CELER_GPU_API    "HIP"

typedef hipError_t      gpuError_t;
typedef hipStream_t     gpuStream_t;
typedef hipEvent_t      gpuEvent_t;
typedef hipDeviceProp_t gpuDeviceProp;

#define gpuSuccess                hipSuccess
#define gpuErrorMemoryAllocation  hipErrorOutOfMemory
#define gpuGetErrorString         hipGetErrorString
#define gpuGetErrorName           hipGetErrorName
#define gpuGetLastError           hipGetLastError
#define gpuGetDeviceCount         hipGetDeviceCount
#define gpuGetDeviceProperties    hipGetDeviceProperties
#define gpuSetDevice              hipSetDevice
#define gpuMemGetInfo             hipMemGetInfo
#define gpuMalloc                 hipMalloc
#define gpuFree                   hipFree
#define gpuHostAlloc(p, n)        hipHostMalloc((p), (n), hipHostMallocDefault)
#define gpuFreeHost               hipHostFree
#define gpuMemcpyAsync            hipMemcpyAsync
#define gpuMemsetAsync            hipMemsetAsync
#define gpuMemcpyHostToDevice     hipMemcpyHostToDevice
#define gpuMemcpyDeviceToHost     hipMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice   hipMemcpyDeviceToDevice
#define gpuStreamCreateNonBlocking(s) hipStreamCreateWithFlags((s), hipStreamNonBlocking)
#define gpuStreamDestroy          hipStreamDestroy
#define gpuStreamQuery            hipStreamQuery
#define gpuStreamSynchronize      hipStreamSynchronize
#define gpuErrorNotReady          hipErrorNotReady
#define gpuEventCreate            hipEventCreate
#define gpuEventDestroy           hipEventDestroy
#define gpuEventRecord            hipEventRecord
#define gpuEventQuery             hipEventQuery
#define gpuDriverGetVersion       hipDriverGetVersion
#define gpuRuntimeGetVersion      hipRuntimeGetVersion
typedef hipGraph_t     gpuGraph_t;
typedef hipGraphExec_t gpuGraphExec_t;
#define gpuStreamBeginCaptureRelaxed(s) hipStreamBeginCapture((s), hipStreamCaptureModeRelaxed)
#define gpuStreamEndCapture       hipStreamEndCapture
#define gpuGraphInstantiate(e, g) hipGraphInstantiate((e), (g), NULL, NULL, 0)
#define gpuGraphLaunch            hipGraphLaunch
#define gpuGraphExecDestroy       hipGraphExecDestroy
#define gpuGraphDestroy           hipGraphDestroy

#if defined(__HIP_DEVICE_COMPILE__)
#define CELER_WARP __AMDGCN_WAVEFRONT_SIZE
#else
#define CELER_WARP 64 /* host pass: never used for code, see above */
#endif
#define gpu_shfl_xor(v, m) __shfl_xor((v), (m), CELER_WARP)
#define gpu_shfl(v, l)     __shfl((v), (l), CELER_WARP)
/* The f16 whose bits are the low 16 of h, as an f32 (exact). */
static __device__ __forceinline__ float gpu_f16_val(uint32_t h)
{
    __half_raw r;
    r.x = (unsigned short)h;
    return __half2float(__half(r));
}
/* The bits of the f16 nearest v (ties to even). */
static __device__ __forceinline__ uint16_t gpu_f16_bits(float v)
{
    const __half_raw r = __float2half_rn(v);
    return r.x;
}

/* NVIDIA's mma.sync fragments below are for 32-lane warps: not on AMD (the flash-attention and
 * batch kernels that use them stay off there). AMD's own integer matrix units run the tiled
 * prefill kernel instead: gpu_amx_block, after these. */
#define CELER_GPU_IMMA 0
#define CELER_GPU_IMMA_HERE 0
static inline bool gpu_imma_ok(const gpuDeviceProp *p) { return (void)p, false; }
static __device__ __forceinline__ void gpu_imma_16x8x32(int c[4], const int a[4], int b0, int b1)
{
    (void)c, (void)a, (void)b0, (void)b1;
}
static __device__ __forceinline__ void gpu_imma_16x8x16(int c[4], int a0, int a1, int b)
{
    (void)c, (void)a0, (void)a1, (void)b;
}
static __device__ __forceinline__ void gpu_ldsm_x4(uint32_t r[4], const void *row)
{
    (void)row, r[0] = r[1] = r[2] = r[3] = 0;
}
static __device__ __forceinline__ void gpu_ldsm_x4_trans(uint32_t r[4], const void *row)
{
    (void)row, r[0] = r[1] = r[2] = r[3] = 0;
}
static __device__ __forceinline__ void gpu_hmma_16x8x16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    (void)c, (void)a, (void)b0, (void)b1;
}
/* Two f16 (ties to even) in a word, lo in the low half: the f16 kernels' packing. */
static __device__ __forceinline__ uint32_t gpu_half2_bits(float lo, float hi)
{
    return (uint32_t)gpu_f16_bits(lo) | (uint32_t)gpu_f16_bits(hi) << 16;
}

/* AMD's integer matrix units (amx_layout.h says which instruction each target has and where its
 * operands lie): CELER_GPU_AMX_HERE is this device pass's kind, CELER_AMX_NONE in the host pass
 * and on targets without them (gfx1030) or without a kernel here (gfx12). The host asks the
 * loaded code which kind it has (gpu_amx_built, gpu_mmq.cu) rather than trusting a name. */
#define CELER_GPU_AMX 1
#if defined(__gfx908__) || defined(__gfx90a__)
#define CELER_GPU_AMX_HERE CELER_AMX_MFMA16
#elif defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
#define CELER_GPU_AMX_HERE CELER_AMX_MFMA32
#elif defined(__GFX11__) && __AMDGCN_WAVEFRONT_SIZE == 32
#define CELER_GPU_AMX_HERE CELER_AMX_WMMA11
#else
#define CELER_GPU_AMX_HERE CELER_AMX_NONE
#endif
/* acc (a lane's amx_acc accumulators of a 16 x 16 tile) += the tile's sums over one 32-value
 * block: a is the lane's weight row (m = lane % 16) at the block's first byte, b its token's
 * codes (n = lane % 16) likewise; 4-byte aligned. Nothing where the pass has no units (the host
 * never launches the kernel there). */
static __device__ __forceinline__ void gpu_amx_block(int *acc, const int8_t *a, const int8_t *b)
{
    constexpr int K = CELER_GPU_AMX_HERE;
    static_assert(K == CELER_AMX_NONE || amx_lanes(K) == CELER_WARP, "the kind's wave size is the pass's");
    const int lane = (int)(threadIdx.x % CELER_WARP);
#define GPU_AMX_WORD(p, i) (*(const int *)((p) + amx_word_at(K, lane, (i))))
#if CELER_GPU_AMX_HERE == CELER_AMX_MFMA16 || CELER_GPU_AMX_HERE == CELER_AMX_MFMA32
    typedef int v4i __attribute__((ext_vector_type(4)));
    v4i c = {acc[0], acc[1], acc[2], acc[3]};
#if CELER_GPU_AMX_HERE == CELER_AMX_MFMA16
    c = __builtin_amdgcn_mfma_i32_16x16x16i8(GPU_AMX_WORD(a, 0), GPU_AMX_WORD(b, 0), c, 0, 0, 0);
    c = __builtin_amdgcn_mfma_i32_16x16x16i8(GPU_AMX_WORD(a, 1), GPU_AMX_WORD(b, 1), c, 0, 0, 0);
#else
    const long a8 = (long)(uint32_t)GPU_AMX_WORD(a, 0) | (long)((uint64_t)(uint32_t)GPU_AMX_WORD(a, 1) << 32);
    const long b8 = (long)(uint32_t)GPU_AMX_WORD(b, 0) | (long)((uint64_t)(uint32_t)GPU_AMX_WORD(b, 1) << 32);
    c             = __builtin_amdgcn_mfma_i32_16x16x32_i8(a8, b8, c, 0, 0, 0);
#endif
    for (int v = 0; v < 4; v++) acc[v] = c[v];
#elif CELER_GPU_AMX_HERE == CELER_AMX_WMMA11
    typedef int v4i __attribute__((ext_vector_type(4)));
    typedef int v8i __attribute__((ext_vector_type(8)));
    v8i c = {acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]};
    for (int j = 0; j < 2; j++) { /* k 0-15, then 16-31; both operands signed, no clamping */
        const v4i av = {GPU_AMX_WORD(a, 4 * j), GPU_AMX_WORD(a, 4 * j + 1), GPU_AMX_WORD(a, 4 * j + 2),
                        GPU_AMX_WORD(a, 4 * j + 3)};
        const v4i bv = {GPU_AMX_WORD(b, 4 * j), GPU_AMX_WORD(b, 4 * j + 1), GPU_AMX_WORD(b, 4 * j + 2),
                        GPU_AMX_WORD(b, 4 * j + 3)};
        c            = __builtin_amdgcn_wmma_i32_16x16x16_iu8_w32(true, av, true, bv, c, false);
    }
    for (int v = 0; v < 8; v++) acc[v] = c[v];
#else
    (void)K, (void)lane, (void)acc, (void)a, (void)b;
#endif
#undef GPU_AMX_WORD
}
/* acc (a lane's amx_acc f32 accumulators of a 16 x 16 tile) += A B over 16 k in f16 products: a
 * and b are the lane's amx_halves(K) / 2 words of f16 pairs (the lower k in the low half) at
 * amx_half_k's k of its row of A and its column of B. Nothing where the pass has no units. */
static __device__ __forceinline__ void gpu_amx_hmma(float *acc, const uint32_t *a, const uint32_t *b)
{
#if CELER_GPU_AMX_HERE == CELER_AMX_MFMA16 || CELER_GPU_AMX_HERE == CELER_AMX_MFMA32
    typedef _Float16 v4h __attribute__((ext_vector_type(4)));
    typedef float    v4f __attribute__((ext_vector_type(4)));
    typedef uint32_t v2u __attribute__((ext_vector_type(2)));
    const v2u av = {a[0], a[1]}, bv = {b[0], b[1]};
    v4f       c  = {acc[0], acc[1], acc[2], acc[3]};
    c = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(v4h, av), __builtin_bit_cast(v4h, bv), c, 0, 0, 0);
    for (int v = 0; v < 4; v++) acc[v] = c[v];
#elif CELER_GPU_AMX_HERE == CELER_AMX_WMMA11
    typedef _Float16 v16h __attribute__((ext_vector_type(16)));
    typedef float    v8f __attribute__((ext_vector_type(8)));
    typedef uint32_t v8u __attribute__((ext_vector_type(8)));
    const v8u av = {a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]};
    const v8u bv = {b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]};
    v8f       c  = {acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]};
    c = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32(__builtin_bit_cast(v16h, av), __builtin_bit_cast(v16h, bv), c);
    for (int v = 0; v < 8; v++) acc[v] = c[v];
#else
    (void)acc, (void)a, (void)b;
#endif
}
/* Whether p holds in any lane of the wave. */
#define gpu_any(p) __any((int)(p))
/* Programmatic dependent launch: not in HIP; kernels run one after the other (see the CUDA half). */
static __device__ __forceinline__ void gpu_dep_enter(void) {}
static __device__ __forceinline__ void gpu_dep_deferred(void) {}
template <typename... E, typename... A>
static inline gpuError_t gpu_launch_kernel(void (*kernel)(E...), dim3 grid, dim3 block, size_t smem, gpuStream_t s,
                                           bool early, A &&...args)
{
    (void)early;
    kernel<<<grid, block, smem, s>>>(std::forward<A>(args)...);
    return gpuSuccess; /* the launch's error, if any, is gpuGetLastError's */
}
static inline bool gpu_early_launch_ok(const gpuDeviceProp *p) { return (void)p, false; }
/* Asynchronous copies to shared memory (the kernels that use them run where CELER_GPU_IMMA is 1):
 * plain copies here, to where gpu_smem_at says (the CUDA half's: a shared-window address). */
typedef int8_t *gpu_smem;
static __device__ __forceinline__ gpu_smem gpu_smem_at(void *p) { return (int8_t *)p; }
static __device__ __forceinline__ void     gpu_cp_async16_at(gpu_smem d, const void *s, bool v)
{
    *(uint4 *)d = v ? *(const uint4 *)s : make_uint4(0, 0, 0, 0);
}
static __device__ __forceinline__ void gpu_cp_async8_at(gpu_smem d, const void *s, bool v)
{
    *(uint2 *)d = v ? *(const uint2 *)s : make_uint2(0, 0);
}
static __device__ __forceinline__ void gpu_cp_async4_at(gpu_smem d, const void *s, bool v)
{
    *(uint32_t *)d = v ? *(const uint32_t *)s : 0u;
}
static __device__ __forceinline__ void gpu_cp_commit(void) {}
template <int N> static __device__ __forceinline__ void gpu_cp_wait(void) {}
#define gpuFuncSetMaxDynamicShared(fn, bytes) hipFuncSetAttribute((const void *)(fn), hipFuncAttributeMaxDynamicSharedMemorySize, (bytes))

/* The vendor BLAS (gpu_blas.cu): rocBLAS, loaded at run time where a ROCm 6 install has it
 * (gpu_rocblas.h; Debian 12 packages none: there prefill stays on this source's kernels). A step
 * that calls it is never recorded in a graph (rocBLAS's stream capture is not relied on). */
#define CELER_GPU_BLAS_NAME    "rocBLAS"
#define CELER_GPU_BLAS_RECORDS 0
/* Nothing of this half has run on AMD hardware: the long steps' paths check themselves against
 * the decode kernel when a backend opens (gpu_selfcheck.cu). */
#define CELER_GPU_SELFCHECK 1
typedef void *gpuBlasHandle;
typedef int   gpuBlasStatus;
/* Whether rocBLAS was found, with kernels for device p (without them it aborts the process);
 * if not, why (n bytes) says why. */
static inline bool gpu_blas_there(const gpuDeviceProp *p, char *why, size_t n)
{
    if (!gpu_rocblas().lib) {
        snprintf(why, n, "%s", gpu_rocblas().why);
        return false;
    }
    char arch[32];
    celer_gfx_arch_base(p->gcnArchName, arch, sizeof arch);
    return celer_rocblas_has_arch(gpu_rocblas().kernels, arch, why, n);
}
static inline const char *gpu_blas_file(void) { return gpu_rocblas().path; }
static inline bool gpu_blas_ok(gpuBlasStatus s) { return s == ROCBLAS_SUCCESS; }
static inline bool gpu_blas_oom(gpuBlasStatus s) { return s == ROCBLAS_MEMORY_ERROR; }
static inline const char *gpu_blas_words(gpuBlasStatus s) { return gpu_rocblas().status_to_string(s); }
static inline gpuBlasStatus gpu_blas_create(gpuBlasHandle *h) { return gpu_rocblas().create_handle(h); }
static inline gpuBlasStatus gpu_blas_destroy(gpuBlasHandle h) { return gpu_rocblas().destroy_handle(h); }
static inline gpuBlasStatus gpu_blas_bind(gpuBlasHandle h, gpuStream_t s, void *work, size_t bytes)
{
    gpuBlasStatus st = gpu_rocblas().set_stream(h, s);
    if (st == ROCBLAS_SUCCESS) st = gpu_rocblas().set_workspace(h, work, bytes);
    return st;
}
/* As the CUDA half's: C = alpha Aᵀ B + beta C, column-major; the f32 product in f32 (rocBLAS
 * has no reduced-precision f32 mode to leave). */
static inline gpuBlasStatus gpu_blas_gemm_tn(gpuBlasHandle h, int m, int n, int k, const float *alpha, const void *a,
                                             int lda, const void *b, int ldb, const float *beta, float *c, int ldc,
                                             bool f16, bool dev)
{
    const gpu_rocblas_api &r  = gpu_rocblas();
    gpuBlasStatus          st = r.set_pointer_mode(h, dev ? ROCBLAS_POINTER_DEVICE : ROCBLAS_POINTER_HOST);
    if (st != ROCBLAS_SUCCESS) return st;
    const int ab = f16 ? ROCBLAS_F16 : ROCBLAS_F32;
    return r.gemm_ex(h, ROCBLAS_OP_T, ROCBLAS_OP_N, m, n, k, alpha, a, ab, lda, b, ab, ldb, beta, c, ROCBLAS_F32, ldc, c,
                     ROCBLAS_F32, ldc, ROCBLAS_F32, ROCBLAS_ALGO_STANDARD, 0, 0);
}

/* What the HIP runtime does not say: whether the build has code for this gfx target
 * (gfx_targets.h), and on APUs the memory the GPU can really allocate (amd_sysfs.h: the VRAM
 * carve-out plus GTT, from the amdgpu driver's sysfs files). */
static inline void gpu_vendor_facts(const gpuDeviceProp *p, celer_device_facts *f)
{
    celer_error e;
    celer_gfx_arch_base(p->gcnArchName, f->arch, sizeof f->arch);
    f->supported = celer_gfx_check(p->gcnArchName, p->name, f->built_archs, &e) == CELER_OK;
    if (!f->supported) snprintf(f->why, sizeof f->why, "%s", e.msg);
    char bus[32];
    snprintf(bus, sizeof bus, "%04x:%02x:%02x.0", (unsigned)p->pciDomainID, (unsigned)p->pciBusID,
             (unsigned)p->pciDeviceID);
    celer_amd_mem m;
    bool         sysfs = celer_amd_sysfs_find("/sys", bus, &m, &e) == CELER_OK;
    f->unified         = sysfs ? celer_amd_is_apu(&m, p->integrated != 0) : p->integrated != 0;
    snprintf(f->unified_source, sizeof f->unified_source, "%s",
             sysfs ? "HIP integrated flag and amdgpu sysfs" : "HIP integrated flag (no amdgpu sysfs)");
    if (sysfs) f->mem_allocatable = celer_amd_allocatable(&m, f->unified);
}

#else /* CUDA */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#define CELER_GPU_VENDOR "NVIDIA"
#define CELER_GPU_KIND   CELER_BACKEND_CUDA
#define CELER_GPU_NAME   "cuda"
#define CELER_GPU_API    "CUDA"

typedef cudaError_t    gpuError_t;
typedef cudaStream_t   gpuStream_t;
typedef cudaEvent_t    gpuEvent_t;
typedef cudaDeviceProp gpuDeviceProp;

#define gpuSuccess                cudaSuccess
#define gpuErrorMemoryAllocation  cudaErrorMemoryAllocation
#define gpuGetErrorString         cudaGetErrorString
#define gpuGetErrorName           cudaGetErrorName
#define gpuGetLastError           cudaGetLastError
#define gpuGetDeviceCount         cudaGetDeviceCount
#define gpuGetDeviceProperties    cudaGetDeviceProperties
#define gpuSetDevice              cudaSetDevice
#define gpuMemGetInfo             cudaMemGetInfo
#define gpuMalloc                 cudaMalloc
#define gpuFree                   cudaFree
#define gpuHostAlloc(p, n)        cudaHostAlloc((p), (n), cudaHostAllocDefault)
#define gpuFreeHost               cudaFreeHost
#define gpuMemcpyAsync            cudaMemcpyAsync
#define gpuMemsetAsync            cudaMemsetAsync
#define gpuMemcpyHostToDevice     cudaMemcpyHostToDevice
#define gpuMemcpyDeviceToHost     cudaMemcpyDeviceToHost
#define gpuMemcpyDeviceToDevice   cudaMemcpyDeviceToDevice
#define gpuStreamCreateNonBlocking(s) cudaStreamCreateWithFlags((s), cudaStreamNonBlocking)
#define gpuStreamDestroy          cudaStreamDestroy
#define gpuStreamQuery            cudaStreamQuery
#define gpuStreamSynchronize      cudaStreamSynchronize
#define gpuErrorNotReady          cudaErrorNotReady
#define gpuEventCreate            cudaEventCreate
#define gpuEventDestroy           cudaEventDestroy
#define gpuEventRecord            cudaEventRecord
#define gpuEventQuery             cudaEventQuery
#define gpuDriverGetVersion       cudaDriverGetVersion
#define gpuRuntimeGetVersion      cudaRuntimeGetVersion
typedef cudaGraph_t     gpuGraph_t;
typedef cudaGraphExec_t gpuGraphExec_t;
#define gpuStreamBeginCaptureRelaxed(s) cudaStreamBeginCapture((s), cudaStreamCaptureModeRelaxed)
#define gpuStreamEndCapture       cudaStreamEndCapture
#define gpuGraphInstantiate(e, g) cudaGraphInstantiate((e), (g), 0)
#define gpuGraphLaunch            cudaGraphLaunch
#define gpuGraphExecDestroy       cudaGraphExecDestroy
#define gpuGraphDestroy           cudaGraphDestroy

#define CELER_WARP 32
#define gpu_shfl_xor(v, m) __shfl_xor_sync(0xffffffffu, (v), (m), CELER_WARP)
#define gpu_shfl(v, l)     __shfl_sync(0xffffffffu, (v), (l), CELER_WARP)
#define gpu_any(p)         __any_sync(0xffffffffu, (p))
/* The f16 whose bits are the low 16 of h, as an f32 (exact). */
static __device__ __forceinline__ float gpu_f16_val(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }
/* The bits of the f16 nearest v (ties to even). */
static __device__ __forceinline__ uint16_t gpu_f16_bits(float v) { return __half_as_ushort(__float2half_rn(v)); }

/* Integer matrix units from this source: mma.sync m16n8k32 on signed bytes, sm_80 and later. The
 * host checks the device's compute capability (gpu_imma_ok); device code for an older target
 * compiles to nothing (CELER_GPU_IMMA_HERE 0 in that pass). */
#define CELER_GPU_IMMA 1
#define CELER_GPU_AMX  0 /* AMD's matrix units: none here (see the HIP half) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define CELER_GPU_IMMA_HERE 1
#else
#define CELER_GPU_IMMA_HERE 0
#endif
static inline bool gpu_imma_ok(const gpuDeviceProp *p) { return p->major >= 8; }

/* Four 8 x 16-byte matrices from shared memory, one warp (ldmatrix .x4): lanes 8i .. 8i + 7 give
 * the rows of matrix i (16-byte aligned), and lane 4g + q gets word q of row g of matrix i in
 * r[i] — the operand layout of mma (below). sm_80 and later here (with the integer products). */
static __device__ __forceinline__ void gpu_ldsm_x4(uint32_t r[4], const void *row)
{
#if CELER_GPU_IMMA_HERE
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    (void)row, r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

/* The same four matrices of 16-bit values transposed (ldmatrix .x4 .trans): lane 4g + q gets
 * elements (2q, g) and (2q + 1, g) of matrix i — rows 2q and 2q + 1 at column g, the B operand of
 * mma.m16n8k16 from a matrix stored row by row along its k. */
static __device__ __forceinline__ void gpu_ldsm_x4_trans(uint32_t r[4], const void *row)
{
#if CELER_GPU_IMMA_HERE
    const unsigned a = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    (void)row, r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

/* c (16x8 int32) += a (16x32 signed bytes) · b (32x8 signed bytes), one warp; the registers hold
 * a warp's share as the PTX ISA lays out mma.m16n8k32 (gpu_mmq.cu says which elements). */
static __device__ __forceinline__ void gpu_imma_16x8x32(int c[4], const int a[4], int b0, int b1)
{
#if CELER_GPU_IMMA_HERE
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1;
#endif
}

/* The same over 16 columns (mma.m16n8k16): a0, a1 hold what a[0], a[1] hold for m16n8k32 (rows
 * g and g + 8, bytes 4q .. 4q + 3), b what b0 does; half the work, where half of a k32 product's
 * operand would be zeros (nvfp4's 16-value groups, each with its own scale). */
static __device__ __forceinline__ void gpu_imma_16x8x16(int c[4], int a0, int a1, int b)
{
#if CELER_GPU_IMMA_HERE
    asm volatile("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%0, %1, %2, %3};"
                 : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
                 : "r"(a0), "r"(a1), "r"(b));
#else
    (void)c, (void)a0, (void)a1, (void)b;
#endif
}

/* c (16x8 f32) += a (16x16 f16) · b (16x8 f16), one warp; registers as the PTX ISA lays out
 * mma.m16n8k16 (gpu_flash.cu says which elements), two halves a register, the lower index in
 * the low 16 bits. */
static __device__ __forceinline__ void gpu_hmma_16x8x16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
#if CELER_GPU_IMMA_HERE
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
                 "{%0, %1, %2, %3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1;
#endif
}

/* Programmatic dependent launch (sm_90 and later): GPU_LAUNCH launches a kernel while the kernel
 * before it in the stream still runs (early), so that its launch and its blocks' start overlap
 * the other's last blocks. Every kernel begins with gpu_dep_enter: it waits until the kernel
 * before has finished and its writes are visible (griddepcontrol.wait), then lets the kernel
 * after it be launched (at most two kernels of a stream are thus in flight). A kernel that
 * skipped it could read its inputs before they are written.
 * Or a kernel begins with gpu_dep_deferred (nothing: a promise to tests/lint/check_kernel_entry.py)
 * and calls gpu_dep_enter later, on every path: before that it writes nothing and reads only what
 * the kernel before it cannot have written — weights and norm weights, which no kernel writes;
 * the batch's positions, sequences and block tables, uploaded before the step's kernels (a copy
 * is never launched early); tables the host made once, as RoPE's frequencies — so that those
 * loads overlap the kernel before. (Everything older is finished: that kernel passed its own
 * wait before this one was launched.) */
#if CELER_GPU_TRACE
/* A trace build (cmake -DCELER_GPU_TRACE=ON; gpu_trace.cu): thread 0 of every kernel's block
 * (0, 0, 0) stamps the global timer as it reaches the dependency wait and as the wait returns,
 * into the buffer gpu_trace.cu made (one record a call, in the order the waits return). There is
 * no separable compilation, so each source file has its own copy of the buffer's address, which
 * gpu_trace.cu sets through the function every file registers as it loads. */
extern "C" {
#include "backends/gpu/trace_match.h"
}
typedef struct {
    unsigned        n, cap;
    celer_trace_rec rec[1]; /* cap of them (backends/gpu/trace_match.h) */
} gpu_trace_buf;
static __device__ gpu_trace_buf *gpu_trace_dev;
void gpu_trace_register(void (*attach)(gpu_trace_buf *buf));
static void gpu_trace_attach_here(gpu_trace_buf *buf) { (void)cudaMemcpyToSymbol(gpu_trace_dev, &buf, sizeof buf); }
static const int gpu_trace_registered = (gpu_trace_register(gpu_trace_attach_here), 0);
static __device__ __forceinline__ uint64_t gpu_trace_now(void)
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#endif
static __device__ __forceinline__ void gpu_dep_enter(void)
{
#if CELER_GPU_TRACE
    const bool first = (threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z) == 0;
    const uint64_t arrive = first ? gpu_trace_now() : 0;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#if CELER_GPU_TRACE
    gpu_trace_buf *tb = first ? gpu_trace_dev : NULL; /* one thread of the grid reads it */
    if (tb) {
        const unsigned i = atomicAdd(&tb->n, 1u);
        if (i < tb->cap) tb->rec[i] = {arrive, gpu_trace_now(), {gridDim.x, gridDim.y, gridDim.z}, blockDim.x};
    }
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
static __device__ __forceinline__ void gpu_dep_deferred(void) {}
/* kernel<<<grid, block, smem, s>>>(args), early (above) when asked. */
template <typename... E, typename... A>
static inline gpuError_t gpu_launch_kernel(void (*kernel)(E...), dim3 grid, dim3 block, size_t smem, gpuStream_t s,
                                           bool early, A &&...args)
{
    cudaLaunchAttribute at;
    at.id                                         = cudaLaunchAttributeProgrammaticStreamSerialization;
    at.val.programmaticStreamSerializationAllowed = early ? 1 : 0;
    cudaLaunchConfig_t c                          = {};
    c.gridDim = grid, c.blockDim = block, c.dynamicSmemBytes = smem, c.stream = s, c.attrs = &at, c.numAttrs = 1;
    return cudaLaunchKernelEx(&c, kernel, std::forward<A>(args)...);
}
static inline bool gpu_early_launch_ok(const gpuDeviceProp *p) { return p->major >= 9; }

/* Two floats as the f16 pair of one register (round to nearest; lo in the low half). */
static __device__ __forceinline__ uint32_t gpu_half2_bits(float lo, float hi)
{
    const __half2 h = __floats2half2_rn(lo, hi);
    return *(const uint32_t *)&h;
}

/* Asynchronous copies of 16, 8 or 4 bytes from global to shared memory (cp.async, sm_80 and later;
 * plain copies before): zeros where valid is false, no global read then. gpu_cp_commit closes a
 * group of them; gpu_cp_wait<N> waits until at most N groups are still in flight. The _at forms
 * land at a gpu_smem that gpu_smem_at worked out once: the shared window's base, taken from the
 * block's cluster rank, was worked out again at each copy of a loop (ncu: a tenth of the batch
 * kernel's instructions with the copies' other arithmetic). */
#if CELER_GPU_IMMA_HERE
typedef unsigned gpu_smem;
static __device__ __forceinline__ gpu_smem gpu_smem_at(void *p) { return (unsigned)__cvta_generic_to_shared(p); }
static __device__ __forceinline__ void     gpu_cp_async16_at(gpu_smem d, const void *src, bool valid)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0));
}
static __device__ __forceinline__ void gpu_cp_async8_at(gpu_smem d, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(d), "l"(src), "r"(valid ? 8 : 0));
}
static __device__ __forceinline__ void gpu_cp_async4_at(gpu_smem d, const void *src, bool valid)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(valid ? 4 : 0));
}
#else
typedef int8_t *gpu_smem;
static __device__ __forceinline__ gpu_smem gpu_smem_at(void *p) { return (int8_t *)p; }
static __device__ __forceinline__ void     gpu_cp_async16_at(gpu_smem d, const void *src, bool valid)
{
    *(uint4 *)d = valid ? *(const uint4 *)src : make_uint4(0, 0, 0, 0);
}
static __device__ __forceinline__ void gpu_cp_async8_at(gpu_smem d, const void *src, bool valid)
{
    *(uint2 *)d = valid ? *(const uint2 *)src : make_uint2(0, 0);
}
static __device__ __forceinline__ void gpu_cp_async4_at(gpu_smem d, const void *src, bool valid)
{
    *(uint32_t *)d = valid ? *(const uint32_t *)src : 0u;
}
#endif
static __device__ __forceinline__ void gpu_cp_async16(void *dst, const void *src, bool valid)
{
    gpu_cp_async16_at(gpu_smem_at(dst), src, valid);
}
static __device__ __forceinline__ void gpu_cp_async8(void *dst, const void *src, bool valid)
{
    gpu_cp_async8_at(gpu_smem_at(dst), src, valid);
}
static __device__ __forceinline__ void gpu_cp_commit(void)
{
#if CELER_GPU_IMMA_HERE
    asm volatile("cp.async.commit_group;");
#endif
}
template <int N> static __device__ __forceinline__ void gpu_cp_wait(void)
{
#if CELER_GPU_IMMA_HERE
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
#endif
}
#define gpuFuncSetMaxDynamicShared(fn, bytes) cudaFuncSetAttribute((fn), cudaFuncAttributeMaxDynamicSharedMemorySize, (bytes))

/* The vendor BLAS (gpu_blas.cu): cuBLAS, linked. Its f16 operands are made by gpu_f16_bits (the
 * nearest f16, ties to even). A step that calls it may be recorded in a graph. */
#include <cublas_v2.h>
#define CELER_GPU_BLAS_NAME    "cuBLAS"
#define CELER_GPU_BLAS_RECORDS 1
#define CELER_GPU_SELFCHECK    0 /* the tests run these paths on the H200 (CELER_GPU_CHECK=1 checks anyway) */
typedef cublasHandle_t gpuBlasHandle;
typedef cublasStatus_t gpuBlasStatus;
/* Linked: always there (why: unused). */
static inline bool gpu_blas_there(const gpuDeviceProp *p, char *why, size_t n)
{
    return (void)p, (void)why, (void)n, true;
}
static inline const char *gpu_blas_file(void) { return "linked"; }
static inline bool gpu_blas_ok(gpuBlasStatus s) { return s == CUBLAS_STATUS_SUCCESS; }
static inline bool gpu_blas_oom(gpuBlasStatus s) { return s == CUBLAS_STATUS_ALLOC_FAILED; }
static inline const char *gpu_blas_words(gpuBlasStatus s) { return cublasGetStatusString(s); }
static inline gpuBlasStatus gpu_blas_create(gpuBlasHandle *h) { return cublasCreate(h); }
static inline gpuBlasStatus gpu_blas_destroy(gpuBlasHandle h) { return cublasDestroy(h); }
/* Bound to the stream, then given its workspace (binding a stream puts cuBLAS back on its own
 * pool, which allocates), in its default math. */
static inline gpuBlasStatus gpu_blas_bind(gpuBlasHandle h, gpuStream_t s, void *work, size_t bytes)
{
    gpuBlasStatus st = cublasSetStream(h, s);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetWorkspace(h, work, bytes);
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    return st;
}
/* C (m, n; column-major, columns ldc apart) = alpha Aᵀ B + beta C, A (k, m) and B (k, n)
 * column-major, lda and ldb apart: f16 operands with f32 sums (f16), else f32 operands in f32
 * arithmetic as prescribed (no TF32); alpha and beta on the device (dev) or the host. */
static inline gpuBlasStatus gpu_blas_gemm_tn(gpuBlasHandle h, int m, int n, int k, const float *alpha, const void *a,
                                             int lda, const void *b, int ldb, const float *beta, float *c, int ldc,
                                             bool f16, bool dev)
{
    gpuBlasStatus st = cublasSetPointerMode(h, dev ? CUBLAS_POINTER_MODE_DEVICE : CUBLAS_POINTER_MODE_HOST);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    const cudaDataType ab = f16 ? CUDA_R_16F : CUDA_R_32F;
    return cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, alpha, a, ab, lda, b, ab, ldb, beta, c, CUDA_R_32F, ldc,
                        f16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC, CUBLAS_GEMM_DEFAULT);
}

/* NVIDIA: the runtime says it all; the driver runs PTX of an older target on newer devices. */
static inline void gpu_vendor_facts(const gpuDeviceProp *p, celer_device_facts *f)
{
    snprintf(f->arch, sizeof f->arch, "sm_%d%d", p->major, p->minor);
    f->unified   = p->integrated != 0;
    snprintf(f->unified_source, sizeof f->unified_source, "CUDA integrated flag");
    f->supported = true;
}
#endif

/* A kernel's dynamic shared memory (the launch's smem bytes), 16-byte aligned, as an array of T. */
#ifndef GPU_DYN_SHARED
#define GPU_DYN_SHARED(T, name) extern __shared__ __align__(16) T name[]
#endif

/* The dot product of four signed bytes of a with four of b, plus c: one instruction on NVIDIA
 * (sm_61+) and on the AMD targets with dot4 (gfx906, gfx908, gfx90a, gfx94x, gfx103x: sdot4;
 * gfx11, gfx12: sudot4), four multiplies elsewhere. */
static __device__ __forceinline__ int gpu_dp4a(int a, int b, int c)
{
#if !defined(__HIP_DEVICE_COMPILE__) && !defined(__HIPCC__) && !defined(__HIP__)
    return __dp4a(a, b, c);
#elif defined(__gfx906__) || defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) ||                  \
    defined(__gfx941__) || defined(__gfx942__) || defined(__gfx1030__) || defined(__gfx1031__) ||                   \
    defined(__gfx1032__) || defined(__gfx1034__) || defined(__gfx1035__) || defined(__gfx1036__)
    return __builtin_amdgcn_sdot4(a, b, c, false);
#elif defined(__gfx1100__) || defined(__gfx1101__) || defined(__gfx1102__) || defined(__gfx1103__) ||              \
    defined(__gfx1150__) || defined(__gfx1151__) || defined(__gfx1152__) || defined(__gfx1200__) || defined(__gfx1201__)
    return __builtin_amdgcn_sudot4(true, a, true, b, c, false);
#else
    for (int i = 0; i < 32; i += 8) c += (int)(int8_t)(a >> i) * (int)(int8_t)(b >> i);
    return c;
#endif
}

/* Byte i of the result: byte (s >> 4 i) & 7 of b:a (a's bytes 0 .. 3, b's 4 .. 7), for i < 4; the
 * selectors' fourth bits must be clear (NVIDIA's PRMT reads a set one as "replicate the sign"). One
 * instruction on NVIDIA; shifts and masks elsewhere. */
static __device__ __forceinline__ uint32_t gpu_prmt(uint32_t a, uint32_t b, uint32_t s)
{
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
    return __byte_perm(a, b, s);
#else
    const uint64_t v = (uint64_t)b << 32 | a;
    uint32_t       r = 0;
    for (int i = 0; i < 4; i++) r |= (uint32_t)(v >> (8 * ((s >> (4 * i)) & 7)) & 0xffu) << (8 * i);
    return r;
#endif
}

/* Sum and max over aligned groups of 32 lanes (a whole warp on wave32, half of one on wave64). */
static __device__ __forceinline__ float gpu_group32_sum(float v)
{
    for (int m = 16; m > 0; m >>= 1) v += gpu_shfl_xor(v, m);
    return v;
}

static __device__ __forceinline__ float gpu_group32_max(float v)
{
    for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, gpu_shfl_xor(v, m));
    return v;
}

/* The max (MAX) or min of unsigned values over aligned groups of 32 lanes: one instruction on
 * CUDA sm_80 and later (redux.sync: a CUDA warp is one group), else a butterfly. */
template <bool MAX> static __device__ __forceinline__ unsigned gpu_group32_extreme_u32(unsigned v)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    return MAX ? __reduce_max_sync(0xffffffffu, v) : __reduce_min_sync(0xffffffffu, v);
#else
    for (int m = 16; m > 0; m >>= 1) {
        const unsigned o = gpu_shfl_xor(v, m);
        v                = (MAX ? o > v : o < v) ? o : v;
    }
    return v;
#endif
}
static __device__ __forceinline__ unsigned gpu_group32_max_u32(unsigned v) { return gpu_group32_extreme_u32<true>(v); }
static __device__ __forceinline__ unsigned gpu_group32_min_u32(unsigned v) { return gpu_group32_extreme_u32<false>(v); }

/* Sum and max over the lanes of a warp; every lane gets the result. */
static __device__ __forceinline__ float gpu_warp_sum(float v)
{
    for (int m = CELER_WARP / 2; m > 0; m >>= 1) v += gpu_shfl_xor(v, m);
    return v;
}

static __device__ __forceinline__ float gpu_warp_max(float v)
{
    for (int m = CELER_WARP / 2; m > 0; m >>= 1) v = fmaxf(v, gpu_shfl_xor(v, m));
    return v;
}

/* The sum of v over the block's threads, for every thread; part is __shared__ float[32] (one
 * slot per warp). Every thread of the block must call it. */
static __device__ __forceinline__ float gpu_block_sum(float v, float *part)
{
    const int lane = threadIdx.x % CELER_WARP, wid = threadIdx.x / CELER_WARP, nw = blockDim.x / CELER_WARP;
    v              = gpu_warp_sum(v);
    if (lane == 0) part[wid] = v;
    __syncthreads();
    if (wid == 0) {
        float s = lane < nw ? part[lane] : 0.0f;
        s       = gpu_warp_sum(s);
        if (lane == 0) part[0] = s;
    }
    __syncthreads();
    return part[0];
}

#endif
