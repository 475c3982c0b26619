/* RMSNorm on the GPU: the backend op (rmsnorm) and the port's fused residual add
 * (add_rmsnorm: x += o, then h = rmsnorm(x) · w). One block per row, or a few rows (a decode
 * step's) each sliced over blocks (k_norm_slice). A row of a multiple of 4
 * values (at most NORM_V · 4 · 1024 of them, 16-byte aligned) is read once with 128-bit loads
 * and held in registers between the sum of squares and the scaling, by as many threads as its
 * length wants (a decode step's row of 4096 values is one load a thread for 256 threads,
 * instead of a 256-thread block walking it three times); other rows take the strided loop.
 * Rows held in registers are also quantized on the way out for the product that reads them
 * next (gpu_quant_x then has nothing to do). */
#include "backends/gpu/gpu_matvec.h"
#include "backends/gpu/gpu_norm.cuh"

extern "C" {
#include "backends/gpu/gpu_ports.h"
}

#include <stdint.h>

/* SLICE_THREADS: a sliced row's threads a block, one float4 each (k_norm_slice) */
enum { LOOP_THREADS = 256, SLICE_THREADS = 256 };

/* The row in registers: NORM_V float4 a thread at most, a thread a lane of the sum above.
 * With xo.q, h is also quantized for the next product (gpu_matvec.h: 8 lanes a block of 32 values;
 * d is then a multiple of 32). */
template <bool ADD>
__global__ void k_norm_vec(float *x, const float *__restrict__ o, const float *__restrict__ w, int64_t d, float eps,
                           float *h, gpu_xq_out xo)
{
    gpu_dep_deferred(); /* the weights are loaded before the wait (no kernel writes them) */
    __shared__ float part[NORM_MAX_THREADS / 32];
    const int64_t    d4 = d / 4, base = (int64_t)blockIdx.x * d4;
    float4          *xr = (float4 *)x + base, *hr = (float4 *)h + base;
    float4           v[NORM_V], wv[NORM_V];
    float            ss = 0.0f;
#pragma unroll
    for (int k = 0; k < NORM_V; k++) {
        const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
        if (i < d4) wv[k] = ((const float4 *)w)[i];
    }
    gpu_dep_enter(); /* the kernel before wrote x (and o) */
#pragma unroll
    for (int k = 0; k < NORM_V; k++) {
        const int64_t i = threadIdx.x + (int64_t)k * blockDim.x;
        if (i >= d4) break;
        v[k]  = xr[i];
        if (ADD) {
            v[k]  = add4(v[k], ((const float4 *)o)[base + i]);
            xr[i] = v[k];
        }
        ss = __fadd_rn(ss, norm_sq4(v[k]));
    }
    const float inv = norm_inv(gpu_block_sum(ss, part), d, eps);
#pragma unroll
    for (int k = 0; k < NORM_V; k++) {
        const int64_t i    = threadIdx.x + (int64_t)k * blockDim.x;
        const bool    live = i < d4; /* the same for the 8 lanes of a block */
        float4        r    = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (live) hr[i] = r = norm_scale4(v[k], inv, wv[k]);
        if (xo.q) {
            const float a[4] = {r.x, r.y, r.z, r.w};
            xq_put<4>(a, (int)(threadIdx.x % 8), (base + i) / 8, live, xo);
        }
    }
}

/* A few rows (a decode step's), each over blockDim.x (SLICE_THREADS) float4s a block along y:
 * every block sums its row's squares whole (norm_row_inv: k_norm_vec's sum, so the same h), then
 * scales and quantizes its own slice, one float4 a thread. A one-block row left the step's one
 * SM a chain of NORM_V quantizations a thread; here four SMs take one each. h is neither x nor
 * o: another block's write could not land in a sum. With ADD (x += o in place) every block sums
 * x + o and only the row's last block to finish writes x (count: a counter a row, at 0 between
 * launches; that block puts it back), when no other can still be reading it. */
template <bool ADD>
__global__ void k_norm_slice(float *x, const float *__restrict__ o, const float *__restrict__ w, int64_t d, float eps,
                             float *h, gpu_xq_out xo, unsigned *count)
{
    gpu_dep_deferred(); /* the slice's weights are loaded before the wait (no kernel writes them) */
    __shared__ float part[NORM_MAX_THREADS / 32];
    __shared__ bool  last;
    const int64_t    base = (int64_t)blockIdx.x * d, d4 = d / 4, i = (int64_t)blockIdx.y * blockDim.x + threadIdx.x;
    const bool       live = i < d4; /* the same for the 8 lanes of a block of 32 */
    const float4     wv   = live ? ((const float4 *)w)[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float4    *xr = (const float4 *)(x + base), *orow = ADD ? (const float4 *)(o + base) : NULL;
    gpu_dep_enter(); /* the kernel before wrote x (and o) */
    const float      inv  = norm_row_inv<ADD>(x + base, (const float *)orow, d, eps, part);
    float4           r    = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (live) ((float4 *)h)[base / 4 + i] = r = norm_scale4(ADD ? add4(xr[i], orow[i]) : xr[i], inv, wv);
    if (xo.q) {
        const float a[4] = {r.x, r.y, r.z, r.w};
        xq_put<4>(a, (int)(threadIdx.x % 8), (base / 4 + i) / 8, live, xo);
    }
    if (!ADD) return;
    __syncthreads(); /* the block's reads of x are done */
    if (threadIdx.x == 0) last = atomicAdd(count + blockIdx.x, 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    for (int64_t j = threadIdx.x; j < d4; j += blockDim.x) ((float4 *)x)[base / 4 + j] = add4(xr[j], orow[j]);
    if (threadIdx.x == 0) count[blockIdx.x] = 0;
}

/* Any row: strided passes over memory. */
template <bool ADD>
__global__ void k_norm_loop(float *x, const float *__restrict__ o, const float *__restrict__ w, int64_t d, float eps,
                            float *h, gpu_xq_out xo)
{
    gpu_dep_enter();
    (void)xo; /* the loop's rows are left to the product's own quantization */
    __shared__ float part[NORM_MAX_THREADS / 32];
    float           *xr = x + (int64_t)blockIdx.x * d, *hr = h + (int64_t)blockIdx.x * d;
    float            ss = 0.0f;
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
        float v = xr[i];
        if (ADD) {
            v += o[(int64_t)blockIdx.x * d + i];
            xr[i] = v;
        }
        ss += v * v;
    }
    const float inv = 1.0f / sqrtf(gpu_block_sum(ss, part) / (float)d + eps);
    for (int64_t i = threadIdx.x; i < d; i += blockDim.x) hr[i] = xr[i] * inv * w[i];
}

typedef void (*norm_fn)(float *, const float *, const float *, int64_t, float, float *, gpu_xq_out);

/* Threads for a row of d values held in registers (its lanes), or 0 where the row takes the loop. */
static unsigned vec_threads(int64_t d, const void *x, const void *o, const void *w, const void *h)
{
    const uintptr_t a = (uintptr_t)x | (uintptr_t)o | (uintptr_t)w | (uintptr_t)h;
    return a % 16 ? 0 : (unsigned)norm_lanes(d);
}

static celer_status norm_rows(gpu_backend *g, const char *name, float *x, const float *o, const celer_weight *w,
                              int64_t rows, int64_t d, float eps, float *h, celer_error *err)
{
    if (gpu_alive(g, err)) return err->code;
    if (w->type != CELER_GGML_F32 || w->cols != d)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %s wants an f32 weight of %lld values", CELER_GPU_NAME, name,
                          (long long)d);
    if (rows <= 0) return CELER_OK;
    if (rows > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %s of %lld rows", CELER_GPU_NAME, name, (long long)rows);
    const float   *wd = (const float *)w->data;
    const unsigned vt = vec_threads(d, x, o, wd, h);
    const norm_fn  fn = o ? (vt ? k_norm_vec<true> : k_norm_loop<true>) : (vt ? k_norm_vec<false> : k_norm_loop<false>);
    gpu_xq_out     xo = {NULL, NULL, false};
    const bool     qz = vt && d % 32 == 0; /* h quantized for the product that reads it next */
    /* rows short of the SMs, each in slices (h neither x nor o: see k_norm_slice), one slice
     * too: a row of 1,024 values took 4.1 us in one k_norm_vec block of 64 threads, 2.1 us as one
     * slice (docs/benchmarks/gpu-h200.md, eighteenth pass) */
    const int64_t  slices = (d / 4 + SLICE_THREADS - 1) / SLICE_THREADS;
    const bool     sliced = vt && h != x && h != o && slices <= GPU_MAX_GRID_YZ && rows < g->prop.multiProcessorCount &&
                        (!o || g->norm_add_slice);
    /* the sliced add's counters, reserved at any add (a prefill's, op by op) so that none is
     * allocated inside a recorded decode step; fresh memory is zeroed (gpu_alloc) */
    if (o && g->norm_add_slice &&
        gpu_buf_reserve(g, &g->d_norm_count, (size_t)g->prop.multiProcessorCount * sizeof(unsigned), err))
        return err->code;
    if (qz && gpu_xq_buffer(g, rows * d, &xo, err)) return err->code;
    unsigned *count = (unsigned *)g->d_norm_count.p;
    if (sliced ? (o ? GPU_LAUNCH(g, err, name, k_norm_slice<true>, dim3((unsigned)rows, (unsigned)slices),
                                 SLICE_THREADS, 0, x, o, wd, d, eps, h, xo, count)
                    : GPU_LAUNCH(g, err, name, k_norm_slice<false>, dim3((unsigned)rows, (unsigned)slices),
                                 SLICE_THREADS, 0, x, o, wd, d, eps, h, xo, count))
               : GPU_LAUNCH(g, err, name, fn, (unsigned)rows, vt ? vt : (unsigned)LOOP_THREADS, 0, x, o, wd, d, eps, h,
                            xo))
        return err->code;
    if (qz) gpu_xq_held(g, h, rows * d, xo);
    return CELER_OK;
}

celer_status gpu_rmsnorm(celer_backend *be, const float *x, const celer_weight *w, int64_t rows, int64_t d, float eps,
                         float *y, celer_error *err)
{
    return norm_rows(gpu_of(be), "rmsnorm", (float *)x, NULL, w, rows, d, eps, y, err); /* x is only read */
}

extern "C" celer_status celer_gpu_add_rmsnorm(celer_backend *be, float *x, const float *o, const celer_weight *w,
                                              int64_t rows, int64_t d, float eps, float *h, celer_error *err)
{
    return norm_rows(gpu_of(be), "add_rmsnorm", x, o, w, rows, d, eps, h, err);
}
