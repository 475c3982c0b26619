/* Products of many tokens on the vendor BLAS: cuBLAS, or rocBLAS where a HIP build finds it
 * (gpu_vendor.h; the description below is cuBLAS's, measured on the H200, and rocBLAS takes the
 * same calls). A step of T tokens multiplies every weight by T columns: past
 * a few dozen tokens that is matrix work, which cuBLAS's f16 tensor-core kernels are built for,
 * where this backend's own took 217 us (Q4_0 on the integer matrix units) and 1.2-1.8 ms (the
 * other formats in the f32 tiled kernel) for 4096 × 4096 by 512 tokens on the H200.
 *
 *   - the activations x (T, cols) are scaled by a power of two s that brings their largest
 *     magnitude under 2^15 (none is, for most steps: s = 1) and split in two f16 halves, hi =
 *     f16(x / s) and lo = f16(x / s - hi), once a product; the products' alpha is s, read by
 *     cuBLAS from device memory, so no value overflows f16 and the scaling itself is exact;
 *   - the weight's rows are dequantized by the formats' own decoders (dec32, gpu_decode.cuh) and
 *     split likewise, a chunk of rows at a time into scratch matrices (chunk, cols) of at most
 *     g->blas_chunk bytes together; F16 weights are multiplied where they lie (exact already);
 *   - each chunk's rows of y are w_hi·x_hi, + w_hi·x_lo, + w_lo·x_hi (g->blas_passes of these
 *     products, f32 accumulation): one pass leaves ~3e-4 relative error a product (2^-11 a
 *     operand); two (the default) keep the activations to ~22 bits and round the weights to 11,
 *     and dequantize no lo half; three leave ~2^-22 an operand, below the integer kernels'
 *     (~15-bit activations);
 *   - F32 weights in f32 with the pedantic compute type (f32 arithmetic as prescribed: no TF32
 *     tensor cores): an MoE router's choice of experts depends on its logits' low bits.
 * With one pass `celer verify --against cpu` disagreed at a decided position of a small MoE
 * model (an expert choice flipped); bf16 (2^-8 an operand), tried first, at seven models; with
 * two or three, at none.
 *
 * cuBLAS runs on the backend's stream with a workspace of its own, allocated once, so that a step
 * graph can record it (a capture must allocate nothing). Like a kernel launch, its call is
 * skipped when the step replays a graph and signed while the step is recorded or replayed
 * (gpu_backend.h). Every status is checked: a failure fails the device, named. */
#include "backends/gpu/gpu_blas.h"
#include "backends/gpu/gpu_matvec.h"

#include <limits.h>
#include <stdlib.h>

enum { THREADS = 256, CHUNK_STEP = 128 /* rows: a multiple of cuBLAS's tiles */, PARTS = 512 };
/* A lo half is stored times 2^11, so that it keeps f16's 11 bits where v - hi is below f16's
 * normal range (|v| under ~0.1 for weights); |lo| · 2^11 <= |hi|: no overflow. */
static constexpr float LO_SCALE = 2048.0f;

struct gpu_blas {
    gpuBlasHandle  handle;
    gpu_buf        work; /* cuBLAS's workspace: 32 MiB on Hopper and later, 4 MiB before (its manual's advice) */
    gpu_buf        w16;  /* (chunk, cols) f16 twice: hi and lo of rows of the weight being multiplied */
    gpu_buf        x16;  /* (T, cols) f16 twice: hi and lo of the activations, scaled */
    gpu_buf        amax; /* PARTS partial maxima of |x|, then (alpha, beta) = (the scale, 0), (the scale, 1) */
};

/* Slot of piece k (16 bytes) of a block's chunk c in the staging array: the four pieces of a chunk
 * rotated by c / 2, so that eight threads storing piece k of their chunks, and eight loading
 * consecutive pieces, meet 8 distinct 16-byte bank groups. */
static __device__ __forceinline__ int stage_slot(int c, int k) { return 4 * c + (k + c / 2) % 4; }

/* The block's chunks, staged as 4 pieces each, to out (4 pieces a chunk, the block's run from
 * piece 4 · c0 on; chunks from `total` on are past the matrix). */
static __device__ __forceinline__ void store_staged(uint4 *__restrict__ out, const uint4 *st, int64_t c0, int64_t total)
{
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const int j = threadIdx.x + THREADS * k, c = j / 4;
        if (c0 + c < total) out[4 * c0 + j] = st[stage_slot(c, j % 4)];
    }
}

/* Rows r0 .. r0 + n of w dequantized to f16 into hi (n, w.cols), and with lo (not NULL) what
 * rounding left, times LO_SCALE: lo = f16((v - hi) · LO_SCALE). A thread decodes a 32-value
 * chunk; its 64 bytes go out through shared memory, so that a warp's stores are 512 contiguous
 * bytes (a thread's own four stores 64 bytes apart left the kernel at ~40% of the memory's
 * rate in ncu, at pp512 on the H200). */
template <int F>
__global__ void __launch_bounds__(THREADS) k_dequant_f16(gpu_wdesc w, int64_t r0, int64_t n, uint4 *__restrict__ hi,
                                                         uint4 *__restrict__ lo)
{
    gpu_dep_enter();
    __shared__ uint4 st[4 * THREADS];
    const int64_t nc = w.cols / 32, c0 = (int64_t)blockIdx.x * THREADS, i = c0 + threadIdx.x, total = n * nc;
    const int     c = threadIdx.x;
    float         v[32];
    if (i < total) dec32<F>(w, w.data + (r0 + i / nc) * w.row_bytes, i % nc, v);
    else
#pragma unroll
        for (int k = 0; k < 32; k++) v[k] = 0.0f;
    uint32_t p[16];
#pragma unroll
    for (int k = 0; k < 16; k++) p[k] = gpu_half2_bits(v[2 * k], v[2 * k + 1]);
#pragma unroll
    for (int k = 0; k < 4; k++) st[stage_slot(c, k)] = make_uint4(p[4 * k], p[4 * k + 1], p[4 * k + 2], p[4 * k + 3]);
    __syncthreads();
    store_staged(hi, st, c0, total);
    if (!lo) return; /* the same for every thread of the grid */
#pragma unroll
    for (int k = 0; k < 16; k++)
        p[k] = gpu_half2_bits((v[2 * k] - gpu_f16_val(p[k] & 0xffff)) * LO_SCALE,
                              (v[2 * k + 1] - gpu_f16_val(p[k] >> 16)) * LO_SCALE);
    __syncthreads(); /* every piece of hi read */
#pragma unroll
    for (int k = 0; k < 4; k++) st[stage_slot(c, k)] = make_uint4(p[4 * k], p[4 * k + 1], p[4 * k + 2], p[4 * k + 3]);
    __syncthreads();
    store_staged(lo, st, c0, total);
}

/* parts[b] = the largest |x[i]| of block b's grid-stride share (PARTS blocks at most). */
__global__ void k_amax_parts(const float *__restrict__ x, int64_t n, float *__restrict__ parts)
{
    gpu_dep_enter();
    __shared__ float red[THREADS / 32];
    float            m = 0.0f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        m = fmaxf(m, fabsf(x[i]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, gpu_shfl_xor(m, o)); /* 32 lanes (a wave64's halves apart) */
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < THREADS / 32; w++) m = fmaxf(m, red[w]);
        parts[blockIdx.x] = m;
    }
}

/* hi = x / s in f16, s the power of two (>= 1) that brings the largest |x| (over the n_parts
 * partial maxima) under 2^15, and with lo (not NULL) what rounding left, f16((x / s - hi) ·
 * LO_SCALE); block 0 writes after the parts (alpha, beta) = (s, 0) for hi·hi, then (s /
 * LO_SCALE, 1) for the products with a lo half. With x8 each x is first the value its 8-bit
 * code stands for (gpu_matvec.h's high level: D · code(x / D) over its block of 32), so that a
 * long product gives the integer kernels' sums; a warp's lanes then hold one block (n and the
 * grid's stride are multiples of 32). */
__global__ void k_half_of(const float *__restrict__ x, int64_t n, float *__restrict__ parts, int n_parts,
                          uint16_t *__restrict__ hi, uint16_t *__restrict__ lo, bool x8)
{
    gpu_dep_enter();
    __shared__ float s_scale;
    if (threadIdx.x < 32) {
        float m = 0.0f;
        for (int i = threadIdx.x; i < n_parts; i += 32) m = fmaxf(m, parts[i]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, gpu_shfl_xor(m, o));
        if (threadIdx.x == 0) {
            int e = 0;
            if (m >= 32768.0f && m <= 3.0e38f) (void)frexpf(m, &e), e -= 15; /* m < 2^e: m / 2^(e - 15) < 2^15 */
            s_scale = e > 0 ? ldexpf(1.0f, e) : 1.0f;
        }
    }
    __syncthreads();
    const float s = s_scale, inv = 1.0f / s; /* exact: powers of two */
    if (blockIdx.x == 0 && threadIdx.x == 0)
        parts[n_parts] = s, parts[n_parts + 1] = 0.0f, parts[n_parts + 2] = s / LO_SCALE, parts[n_parts + 3] = 1.0f;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        const float    v = (x8 ? xq_value8(x[i]) : x[i]) * inv;
        const uint16_t h = gpu_f16_bits(v);
        hi[i]            = h;
        if (lo) lo[i] = gpu_f16_bits((v - gpu_f16_val(h)) * LO_SCALE);
    }
}

typedef void (*dequant_fn)(gpu_wdesc, int64_t, int64_t, uint4 *, uint4 *);
static const dequant_fn DEQUANT[GPU_FMT_COUNT] = GPU_FMT_TABLE(k_dequant_f16);

/* CELER_OK, or the device failed for a BLAS call that did not succeed (out of memory: the device
 * stays usable). */
static celer_status blas_check(gpu_backend *g, celer_error *err, gpuBlasStatus s, const char *what)
{
    if (gpu_blas_ok(s)) return CELER_OK;
    char words[160];
    snprintf(words, sizeof words, "%s (%s status %d)", gpu_blas_words(s), CELER_GPU_BLAS_NAME, (int)s);
    return gpu_fail_with(g, err, gpu_blas_oom(s), what, words);
}

void gpu_blas_free(gpu_backend *g)
{
    struct gpu_blas *b = g->blas;
    if (!b) return;
    if (b->handle) (void)gpu_blas_destroy(b->handle);
    (void)gpuFree(b->work.p), (void)gpuFree(b->w16.p), (void)gpuFree(b->x16.p), (void)gpuFree(b->amax.p);
    free(b);
    g->blas = NULL;
}

void gpu_blas_facts(const gpuDeviceProp *p, celer_device_facts *f)
{
    char why[320];
    if (!gpu_blas_there(p, why, sizeof why))
        snprintf(f->blas, sizeof f->blas, "none: %s; long steps on this build's kernels", why);
    else
        snprintf(f->blas, sizeof f->blas, "%s (%s): Q4_0 and Q8_0 steps of %d tokens and more, other formats' of more "
                 "than 32", CELER_GPU_BLAS_NAME, gpu_blas_file(), (int)GPU_BLAS_FROM);
}

/* Its buffers at their largest (gpu_buf_reserve grows them by a quarter past a request): a
 * weight's f16 rows, at most blas_chunk bytes; the activations' two halves; the workspace; and
 * BLAS_LIBRARY_MB for what cuBLAS takes itself (its handle, the kernels it loads). On the H200
 * the 8B Q4_0's pp512 peaked 0.27 GiB higher with the BLAS path than without it. */
enum { BLAS_LIBRARY_MB = 64 };
uint64_t gpu_blas_scratch(const gpu_backend *g, int64_t tokens, int64_t cols)
{
    if (tokens <= 32 || (g->blas_from == 0 && !g->blas_f32)) return 0; /* no product takes it (gpu_blas.h) */
    const double work = (double)((size_t)(g->prop.major >= 9 ? 32 : 4) << 20);
    const double x16 = (double)tokens * (double)cols * (g->blas_passes >= 2 ? 4.0 : 2.0);
    return (uint64_t)(1.25 * ((double)g->blas_chunk + x16) + work + (double)BLAS_LIBRARY_MB * 1048576.0);
}

/* The handle, made at the first product, bound to the stream with a workspace of its own. Not
 * part of a step's recording. */
static celer_status blas_open(gpu_backend *g, celer_error *err)
{
    if (g->blas) return CELER_OK;
    if (g->rec == GPU_REC_CAPTURE) gpu_graph_break(g, false);
    struct gpu_blas *b = (struct gpu_blas *)calloc(1, sizeof *b);
    if (!b) return celer_fail(err, CELER_ERR_OOM, "%s: out of host memory", CELER_GPU_NAME);
    gpuBlasHandle h  = NULL;
    celer_status  st = blas_check(g, err, gpu_blas_create(&h), "creating the BLAS handle");
    b->handle        = st ? NULL : h;
    g->blas          = b; /* freeable from here on, whatever fails next */
    if (!st) st = gpu_buf_reserve(g, &b->work, (size_t)(g->prop.major >= 9 ? 32 : 4) << 20, err);
    if (!st) st = blas_check(g, err, gpu_blas_bind(h, g->stream, b->work.p, b->work.bytes), "binding the BLAS handle");
    if (st) gpu_blas_free(g);
    return st;
}

/* C (m, n; column-major, columns ldc apart) = alpha Aᵀ B, A (k, m) and B (k, n) column-major, lda
 * and ldb apart, f16 (else f32): with A a weight's rows, B the activations' tokens and C y's,
 * that is y (n, ldc) = alpha x · wᵀ row-major. dev_ab (alpha, then beta) NULL: 1 and 0 from the
 * host; else two floats on the device. Skipped and signed as a launch is; where the BLAS cannot
 * be recorded, a step being recorded is run op by op instead. */
static celer_status gemm(gpu_backend *g, int m, int n, int k, const void *a, int lda, const void *b, int ldb, bool f16,
                         float *c, int ldc, const float *dev_ab, celer_error *err)
{
    static const float one = 1.0f, zero = 0.0f;
    if (!CELER_GPU_BLAS_RECORDS && g->rec == GPU_REC_CAPTURE) gpu_graph_break(g, true);
    if (gpu_signing(g))
        gpu_sign(g, (const void *)gemm, dim3(1), dim3(1), 0, gpu_sig_args(0, m, n, k, a, lda, b, ldb, f16, c, ldc, dev_ab));
    if (gpu_skip(g)) return CELER_OK;
    const gpuBlasStatus s = gpu_blas_gemm_tn(g->blas->handle, m, n, k, dev_ab ? dev_ab : &one, a, lda, b, ldb,
                                             dev_ab ? dev_ab + 1 : &zero, c, ldc, f16, dev_ab != NULL);
    if (blas_check(g, err, s, "the BLAS product")) return err->code;
    return gpu_launch_done(g, err, CELER_GPU_BLAS_NAME " gemm", gpuSuccess);
}

celer_status gpu_blas_matmul(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y,
                             celer_error *err)
{
    if (w->rows > INT_MAX || w->cols > INT_MAX || T > INT_MAX)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "%s: a product of %lld × %lld by %lld tokens is past %s's sizes (int)", CELER_GPU_NAME,
                          (long long)w->rows, (long long)w->cols, (long long)T, CELER_GPU_BLAS_NAME);
    if (blas_open(g, err)) return err->code;
    struct gpu_blas *b = g->blas;
    const int        rows = (int)w->rows, k = (int)w->cols, n = (int)T;
    if (fmt == GPU_F32) {
        CELER_ASSERT(w->row_bytes % 4 == 0);
        return gemm(g, rows, n, k, w->data, (int)(w->row_bytes / 4), x, k, false, y, rows, NULL, err);
    }
    /* rows a chunk: as many as g->blas_chunk bytes hold (both halves), in steps of CHUNK_STEP
     * (at least one), at most the weight's */
    const int     passes = g->blas_passes;
    const bool    x_lo = passes >= 2, w_lo = passes >= 3 && fmt != GPU_F16; /* F16 weights: exact as they are */
    int64_t       per = (int64_t)(g->blas_chunk / ((size_t)k * (w_lo ? 4 : 2))) / CHUNK_STEP * CHUNK_STEP;
    per               = per > CHUNK_STEP ? per : (int64_t)CHUNK_STEP;
    per               = per < rows ? per : rows;
    const int64_t nx    = T * k;
    const unsigned parts = gpu_blocks(nx, THREADS) < (unsigned)PARTS ? gpu_blocks(nx, THREADS) : (unsigned)PARTS;
    if (gpu_buf_reserve(g, &b->x16, (size_t)nx * (x_lo ? 4 : 2), err) ||
        gpu_buf_reserve(g, &b->amax, (PARTS + 4) * 4, err) ||
        (fmt != GPU_F16 && gpu_buf_reserve(g, &b->w16, (size_t)per * k * (w_lo ? 4 : 2), err)))
        return err->code;
    float    *amax = (float *)b->amax.p;
    uint16_t *xh = (uint16_t *)b->x16.p, *xl = x_lo ? xh + nx : NULL;
    /* the halves and their scale as the product before made them: q, k and v (or gate and up)
     * multiply the same activations, and nothing launched since wrote any */
    const bool x8   = gpu_x8_takes(g, fmt);
    const bool held = g->x16_src == x && g->x16_n == nx && g->x16_lo == x_lo && g->x16_x8 == x8;
    if (!held && (GPU_LAUNCH(g, err, "amax", k_amax_parts, parts, THREADS, 0, x, nx, amax) ||
                  GPU_LAUNCH(g, err, "half_of", k_half_of, gpu_blocks(nx, THREADS), THREADS, 0, x, nx, amax, (int)parts,
                             xh, xl, x8)))
        return err->code;
    g->x16_src = x, g->x16_n = nx, g->x16_lo = x_lo, g->x16_x8 = x8;
    const float *set = amax + parts, *add = set + 2; /* (alpha, beta): (s, 0), (s / LO_SCALE, 1) */
    for (int64_t r0 = 0; r0 < rows; r0 += per) {
        const int64_t m = rows - r0 < per ? rows - r0 : per;
        const void   *wh = w->data;
        const void   *wl = NULL;
        int           ld = (int)(w->row_bytes / 2);
        if (fmt == GPU_F16) { /* in place */
            CELER_ASSERT(w->row_bytes % 2 == 0);
            wh = w->data + r0 * w->row_bytes;
        } else {
            uint4   *hi = (uint4 *)b->w16.p, *lo = w_lo ? hi + m * k / 8 : NULL;
            unsigned blocks;
            if (gpu_grid(g, m * (k / 32), THREADS, &blocks, "dequant_f16", err) ||
                GPU_LAUNCH_KEEPING_XQ(g, err, "dequant_f16", DEQUANT[fmt], blocks, THREADS, 0, *w, r0, m, hi, lo))
                return err->code;
            wh = hi, wl = lo, ld = k;
        }
        if (gemm(g, (int)m, n, k, wh, ld, xh, k, true, y + r0, rows, set, err) ||
            (xl && gemm(g, (int)m, n, k, wh, ld, xl, k, true, y + r0, rows, add, err)) ||
            (wl && gemm(g, (int)m, n, k, wl, ld, xh, k, true, y + r0, rows, add, err)))
            return err->code;
    }
    if (y < x + nx && x < y + T * rows) g->x16_src = NULL; /* y written over x: the halves are stale */
    return CELER_OK;
}
