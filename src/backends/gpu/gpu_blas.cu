/* Products of many tokens on cuBLAS. A step of T tokens multiplies every weight by T columns: past
 * a few dozen tokens that is matrix work, which cuBLAS's bf16 tensor-core kernels are built for,
 * where this backend's own took 217 us (Q4_0 on the integer matrix units) and 1.2-1.8 ms (the
 * other formats in the f32 tiled kernel) for 4096 × 4096 by 512 tokens on the H200 (this path is
 * to be timed there: dev/kernels/gpu_matmul.c).
 *
 *   - the activations x (T, cols) are rounded to bf16 once a product;
 *   - the weight's rows are dequantized by the formats' own decoders (dec32, gpu_decode.cuh) and
 *     rounded to bf16, a chunk of rows at a time into a scratch matrix (chunk, cols) of at most
 *     g->blas_chunk bytes, and each chunk multiplied into its rows of y, f32 accumulation;
 *   - BF16 weights are multiplied where they lie (no copy); F32 weights in f32 with the pedantic
 *     compute type (f32 arithmetic as prescribed: no TF32 tensor cores, no bf16x9 emulation): an
 *     MoE router's choice of experts depends on its logits' low bits.
 * So apart from F32, the product is that of the weights and activations rounded to bf16: at
 * most 2^-8 relative per operand (about 1.6e-3 RMS), ~2.3e-3 relative L2 on a product of random
 * rows (tests/gpu/test_gpu_ops.c allows 1e-2).
 *
 * cuBLAS runs on the backend's stream with a workspace of its own, allocated once, so that a step
 * graph can record it (a capture must allocate nothing). Like a kernel launch, its call is
 * skipped when the step replays a graph and signed while the step is recorded or replayed
 * (gpu_backend.h). Every status is checked: a failure fails the device, named. */
#include "backends/gpu/gpu_blas.h"

#include <limits.h>
#include <stdlib.h>

#if CELER_GPU_BLAS

enum { THREADS = 256, CHUNK_STEP = 128 /* rows: a multiple of cuBLAS's tiles */ };

struct gpu_blas {
    cublasHandle_t handle;
    gpu_buf        work; /* cuBLAS's workspace: 32 MiB on Hopper and later, 4 MiB before (its manual's advice) */
    gpu_buf        w16;  /* (chunk, cols) bf16: rows of the weight being multiplied */
    gpu_buf        x16;  /* (T, cols) bf16: the activations */
};

/* Rows r0 .. r0 + n of w dequantized to bf16 into out (n, w.cols): a thread per 32-value chunk,
 * 64 bytes out. */
template <int F>
__global__ void k_dequant_bf16(gpu_wdesc w, int64_t r0, int64_t n, uint4 *__restrict__ out)
{
    const int64_t nc = w.cols / 32, i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n * nc) return;
    float v[32];
    dec32<F>(w, w.data + (r0 + i / nc) * w.row_bytes, i % nc, v);
    uint32_t p[16];
#pragma unroll
    for (int k = 0; k < 16; k++) p[k] = (uint32_t)gpu_bf16_rn(v[2 * k]) | (uint32_t)gpu_bf16_rn(v[2 * k + 1]) << 16;
#pragma unroll
    for (int k = 0; k < 4; k++) out[4 * i + k] = make_uint4(p[4 * k], p[4 * k + 1], p[4 * k + 2], p[4 * k + 3]);
}

/* out[0..n) = x[0..n) rounded to bf16. */
__global__ void k_bf16_of(const float *__restrict__ x, int64_t n, uint16_t *__restrict__ out)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = gpu_bf16_rn(x[i]);
}

typedef void (*dequant_fn)(gpu_wdesc, int64_t, int64_t, uint4 *);
static const dequant_fn DEQUANT[GPU_FMT_COUNT] = GPU_FMT_TABLE(k_dequant_bf16);

/* CELER_OK, or the device failed for a cuBLAS call that did not succeed (ALLOC_FAILED: out of
 * memory, the device stays usable). */
static celer_status blas_check(gpu_backend *g, celer_error *err, cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS) return CELER_OK;
    char words[160];
    snprintf(words, sizeof words, "%s (cuBLAS status %d)", cublasGetStatusString(s), (int)s);
    return gpu_fail_with(g, err, s == CUBLAS_STATUS_ALLOC_FAILED, what, words);
}

void gpu_blas_free(gpu_backend *g)
{
    struct gpu_blas *b = g->blas;
    if (!b) return;
    if (b->handle) (void)cublasDestroy(b->handle);
    (void)gpuFree(b->work.p), (void)gpuFree(b->w16.p), (void)gpuFree(b->x16.p);
    free(b);
    g->blas = NULL;
}

/* The handle, made at the first product: bound to the stream, then given its workspace (binding
 * a stream puts cuBLAS back on its own pool, which allocates). Not part of a step's recording. */
static celer_status blas_open(gpu_backend *g, celer_error *err)
{
    if (g->blas) return CELER_OK;
    if (g->rec == GPU_REC_CAPTURE) gpu_graph_break(g, false);
    struct gpu_blas *b = (struct gpu_blas *)calloc(1, sizeof *b);
    if (!b) return celer_fail(err, CELER_ERR_OOM, "%s: out of host memory", CELER_GPU_NAME);
    cublasHandle_t h = NULL;
    celer_status   st = blas_check(g, err, cublasCreate(&h), "cublasCreate");
    b->handle         = st ? NULL : h;
    g->blas           = b; /* freeable from here on, whatever fails next */
    if (!st) st = gpu_buf_reserve(g, &b->work, (size_t)(g->prop.major >= 9 ? 32 : 4) << 20, err);
    if (!st) st = blas_check(g, err, cublasSetStream(h, g->stream), "cublasSetStream");
    if (!st) st = blas_check(g, err, cublasSetWorkspace(h, b->work.p, b->work.bytes), "cublasSetWorkspace");
    if (!st) st = blas_check(g, err, cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    if (st) gpu_blas_free(g);
    return st;
}

/* C (m, n; column-major, columns ldc apart) = Aᵀ B, A (k, m) and B (k, n) column-major of type
 * ab, lda and ldb apart: with A a weight's rows, B the activations' tokens and C y's, that is
 * y (n, ldc) = x · wᵀ row-major. Skipped and signed as a launch is. */
static celer_status gemm(gpu_backend *g, int m, int n, int k, const void *a, int lda, const void *b, int ldb,
                         cudaDataType ab, float *c, int ldc, cublasComputeType_t compute, celer_error *err)
{
    static const float one = 1.0f, zero = 0.0f;
    if (gpu_signing(g))
        gpu_sign(g, (const void *)gemm, dim3(1), dim3(1), 0,
                 gpu_sig_args(0, m, n, k, a, lda, b, ldb, ab, c, ldc, compute));
    if (gpu_skip(g)) return CELER_OK;
    cublasStatus_t s = cublasGemmEx(g->blas->handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a, ab, lda, b, ab, ldb,
                                    &zero, c, CUDA_R_32F, ldc, compute, CUBLAS_GEMM_DEFAULT);
    if (blas_check(g, err, s, "cublasGemmEx")) return err->code;
    return gpu_launched(g, err, "cublasGemmEx");
}

celer_status gpu_blas_matmul(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y,
                             celer_error *err)
{
    if (w->rows > INT_MAX || w->cols > INT_MAX || T > INT_MAX)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "%s: a product of %lld × %lld by %lld tokens is past cuBLAS's sizes (int)", CELER_GPU_NAME,
                          (long long)w->rows, (long long)w->cols, (long long)T);
    if (blas_open(g, err)) return err->code;
    struct gpu_blas *b = g->blas;
    const int        rows = (int)w->rows, k = (int)w->cols, n = (int)T;
    if (fmt == GPU_F32) {
        CELER_ASSERT(w->row_bytes % 4 == 0);
        return gemm(g, rows, n, k, w->data, (int)(w->row_bytes / 4), x, k, CUDA_R_32F, y, rows,
                    CUBLAS_COMPUTE_32F_PEDANTIC, err);
    }
    /* rows a chunk: as many as g->blas_chunk bytes hold, in steps of CHUNK_STEP (at least one),
     * at most the weight's */
    int64_t per = (int64_t)(g->blas_chunk / ((size_t)k * 2)) / CHUNK_STEP * CHUNK_STEP;
    per         = per > CHUNK_STEP ? per : (int64_t)CHUNK_STEP;
    per         = per < rows ? per : rows;
    if (gpu_buf_reserve(g, &b->x16, (size_t)T * k * 2, err) ||
        (fmt != GPU_BF16 && gpu_buf_reserve(g, &b->w16, (size_t)per * k * 2, err)) ||
        GPU_LAUNCH(g, err, "bf16_of", k_bf16_of, gpu_blocks(T * k, THREADS), THREADS, 0, x, T * k,
                   (uint16_t *)b->x16.p))
        return err->code;
    if (fmt == GPU_BF16) {
        CELER_ASSERT(w->row_bytes % 2 == 0);
        return gemm(g, rows, n, k, w->data, (int)(w->row_bytes / 2), b->x16.p, k, CUDA_R_16BF, y, rows,
                    CUBLAS_COMPUTE_32F, err);
    }
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t m = rows - r0 < per ? rows - r0 : per;
        unsigned      blocks;
        if (gpu_grid(g, m * (k / 32), THREADS, &blocks, "dequant_bf16", err) ||
            GPU_LAUNCH(g, err, "dequant_bf16", DEQUANT[fmt], blocks, THREADS, 0, *w, r0, m, (uint4 *)b->w16.p) ||
            gemm(g, (int)m, n, k, b->w16.p, k, b->x16.p, k, CUDA_R_16BF, y + r0, rows, CUBLAS_COMPUTE_32F, err))
            return err->code;
    }
    return CELER_OK;
}

#else /* no vendor BLAS: blas_from is 0 and gpu_matmul never comes here */

celer_status gpu_blas_matmul(gpu_backend *, const gpu_wdesc *, int, const float *, int64_t, float *, celer_error *err)
{
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: this build has no vendor BLAS", CELER_GPU_NAME);
}

void gpu_blas_free(gpu_backend *) {}

#endif
