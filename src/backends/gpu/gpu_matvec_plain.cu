/* Decode-step products (1 to 8 tokens a pass) of weights stored as plain floats: F32, F16 and
 * BF16 rows read with 128-bit loads by consecutive threads of a block (every load instruction
 * reads one contiguous run of a row), R rows a block sharing each load of the activations, the
 * block's threads splitting the columns and their sums meeting in shared memory.
 *
 * The float decode kernel of gpu_matmul.cu gave each lane a 32-value chunk read one value at a
 * time (neighbouring lanes 128 bytes apart) and staged the activations behind two barriers a
 * segment: an MoE router's product (F32, 128 rows by 2048) took 21 us on the H200, a fifth of a
 * 30B-A3B decode step, and F16 ran at ~20% of the copy bandwidth. */
#include "backends/gpu/gpu_matvec.h"
#include "backends/gpu/gpu_norm.cuh"
#include "backends/gpu/gpu_route.cuh"

extern "C" {
#include "backends/gpu/gpu_ports.h"
}

/* PV_ROUTER_UNROLL: the MoE router's loads a thread, all of them before its wait where a row has
 * at most PV_ROUTER_UNROLL · PV_THREADS 16-byte runs (2,048 F32 or 4,096 F16 values) */
enum { PV_THREADS = 128, PV_UNROLL = 2, PV_ROUTER_UNROLL = 4, PV_TOKENS = 8 };

/* Values a 16-byte load of F holds. */
template <int F> struct plain_of {
    static constexpr int V = F == GPU_F32 ? 4 : 8;
};

/* The V values of a 16-byte load of format F. */
template <int F> static __device__ __forceinline__ void plain_unpack(uint4 q, float *v)
{
    const uint32_t u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (F == GPU_F32) v[k] = __uint_as_float(u[k]);
        else if (F == GPU_F16) v[2 * k] = dec_f16(u[k] & 0xffffu), v[2 * k + 1] = dec_f16(u[k] >> 16);
        else v[2 * k] = dec_bf16(u[k] & 0xffffu), v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u);
    }
}

/* Row r0 + i of w for i < R (row r0 past the matrix), as 16-byte loads. */
template <int R>
static __device__ __forceinline__ void plain_rows(const gpu_wdesc &w, int64_t r0, const uint4 *(&rows)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++) rows[i] = (const uint4 *)(w.data + (r0 + i < w.rows ? r0 + i : r0) * w.row_bytes);
}

/* Columns c, c + PV_THREADS, .. (U of them, those below nc) of the rows into q. */
template <int R, int U>
static __device__ __forceinline__ void plain_load(const uint4 *const (&rows)[R], int64_t c, int64_t nc,
                                                  uint4 (&q)[U][R])
{
#pragma unroll
    for (int j = 0; j < U; j++)
#pragma unroll
        for (int i = 0; i < R; i++)
            if (c + j * PV_THREADS < nc) q[j][i] = rows[i][c + j * PV_THREADS];
}

/* A thread's first loads of rows r0 .. r0 + R, before the kernel waits for the one before it
 * (gpu_dep_deferred: no kernel writes weights), for plain_sums. */
template <int F, int R, int U>
static __device__ __forceinline__ void plain_first(const gpu_wdesc &w, int64_t r0, uint4 (&q)[U][R])
{
    const uint4 *rows[R];
    plain_rows<R>(w, r0, rows);
    plain_load<R, U>(rows, threadIdx.x, w.cols / plain_of<F>::V, q);
}

/* The block's sums of rows r0 .. r0 + R with NT tokens (nt of them live) of x, each (cols)
 * 16-byte aligned: thread i · NT + t (i < R, t < NT) gets row r0 + i's with token t in *out
 * (and true). q: the thread's first loads (plain_first, before the wait); part: the block's
 * shared scratch, a sum per warp (wave32: 4 of them, wave64: 2). With NORM, the sums are of h =
 * rmsnorm(x) · g instead, inv x's 1 / rms: each value of h made as the norm kernels make it
 * (norm_scale4), so the same sums as of h read from memory. */
template <int F, int R, int NT, int U, bool NORM = false>
static __device__ __forceinline__ bool plain_sums(const gpu_wdesc &w, const float *__restrict__ x, int nt, int64_t r0,
                                                  uint4 (&q)[U][R], float (&part)[PV_THREADS / 32][R][NT],
                                                  float *out, const float *__restrict__ g = NULL, float inv = 0.0f)
{
    constexpr int V  = plain_of<F>::V;
    const int64_t nc = w.cols / V;
    const uint4  *rows[R];
    plain_rows<R>(w, r0, rows);
    float acc[R][NT];
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = 0.0f;
    for (int64_t c = threadIdx.x; c < nc; c += U * PV_THREADS) { /* a thread's columns in order, whatever U */
        if (c != threadIdx.x) plain_load<R, U>(rows, c, nc, q); /* every load issued before any is used */
#pragma unroll
        for (int j = 0; j < U; j++) {
            const int64_t cj = c + j * PV_THREADS;
            if (cj >= nc) break;
            float v[R][V];
#pragma unroll
            for (int i = 0; i < R; i++) plain_unpack<F>(q[j][i], v[i]);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                if (t >= nt) break;
                const float4 *xp = (const float4 *)(x + t * w.cols + cj * V);
                float         xv[V];
#pragma unroll
                for (int h = 0; h < V / 4; h++) {
                    float4 a = xp[h];
                    if (NORM) a = norm_scale4(a, inv, ((const float4 *)(g + cj * V))[h]);
                    xv[4 * h] = a.x, xv[4 * h + 1] = a.y, xv[4 * h + 2] = a.z, xv[4 * h + 3] = a.w;
                }
#pragma unroll
                for (int i = 0; i < R; i++)
#pragma unroll
                    for (int k = 0; k < V; k++) acc[i][t] += v[i][k] * xv[k];
            }
        }
    }
    const int lane = threadIdx.x % CELER_WARP, wid = threadIdx.x / CELER_WARP, nw = PV_THREADS / CELER_WARP;
#pragma unroll
    for (int i = 0; i < R; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            const float s = gpu_warp_sum(acc[i][t]);
            if (lane == 0) part[wid][i][t] = s;
        }
    __syncthreads();
    if (threadIdx.x >= R * NT) return false;
    float s = 0.0f;
    for (int k = 0; k < nw; k++) s += part[k][threadIdx.x / NT][threadIdx.x % NT];
    *out = s;
    return true;
}

/* Rows R · blockIdx.x .. of w by NT tokens (nt of them live) of x (plain_sums). */
template <int F, int R, int NT>
__global__ void __launch_bounds__(PV_THREADS) k_matvec_plain(gpu_wdesc w, const float *__restrict__ x, int nt,
                                                             float *__restrict__ y)
{
    gpu_dep_deferred(); /* the first weights are loaded before the wait: no kernel writes them */
    __shared__ float part[PV_THREADS / 32][R][NT];
    const int64_t    r0 = (int64_t)blockIdx.x * R;
    uint4            q[PV_UNROLL][R];
    plain_first<F, R, PV_UNROLL>(w, r0, q);
    gpu_dep_enter(); /* the kernel before wrote x */
    float s;
    if (!plain_sums<F, R, NT, PV_UNROLL>(w, x, nt, r0, q, part, &s)) return;
    const int i = threadIdx.x / NT, t = threadIdx.x % NT;
    if (t < nt && r0 + i < w.rows) y[(int64_t)t * w.rows + r0 + i] = s;
}

/* The MoE input's norm inside the router's kernel (k_router_route with NORM): the norm's weight
 * and eps, h (its quantization for the experts in xo), and the blocks that write a slice of h. */
typedef struct {
    const float *w;
    float        eps;
    float       *h;
    gpu_xq_out   xo;
    int          slices;
} router_norm;

static inline uint64_t gpu_sig_arg(uint64_t h, const router_norm &n)
{
    return gpu_sig_args(h, n.w, n.eps, n.h, n.xo, n.slices);
}

/* One token's MoE router (E = w.rows experts, a row a block) and its routing in one launch: each
 * block writes its logit, and the last block to finish (a counter it resets) routes the token as
 * k_moe_route does. The product and the routing were two launches, ~3.4 and ~7 us a layer of the
 * 30B-A3B's decode on the H200. A thread loads its whole share of the row before the wait
 * (PV_ROUTER_UNROLL): with PV_UNROLL, half of it came after, an HBM round trip on the step's path
 * (with the combine's early selections, gpu_matvec_combine.cu: 30B-A3B tg128 +1.0/+4.5/+4.0%).
 *
 * With NORM, x is the residual stream and the kernel is also the norm before it: every block sums
 * x's squares as the norm kernels do (norm_row_inv) and multiplies the router's row by h made in
 * registers, and blocks 0 .. nm.slices - 1 each write a slice of h, quantized, for the experts.
 * The norm kernel was ~2.5 us of the 30B-A3B's ~37 us decode layer on the H200 (trace, forty-third
 * pass), and the router waited for all of it; the same h, logits and choices bit for bit. */
template <int F, bool NORM>
__global__ void __launch_bounds__(PV_THREADS) k_router_route(gpu_wdesc w, const float *__restrict__ x, float *logits,
                                                             int64_t K, int renorm, int32_t *ids, float *wts,
                                                             unsigned *count, router_norm nm)
{
    gpu_dep_deferred(); /* the router's weights are loaded before the wait: no kernel writes them */
    __shared__ float part[PV_THREADS / 32][1][1];
    __shared__ float npart[NORM_MAX_THREADS / 32];
    __shared__ bool  last;
    uint4            q[PV_ROUTER_UNROLL][1];
    plain_first<F, 1, PV_ROUTER_UNROLL>(w, blockIdx.x, q);
    const int64_t i     = (int64_t)blockIdx.x * PV_THREADS + threadIdx.x; /* the float4 of h a slice's thread writes */
    const bool    slice = NORM && (int)blockIdx.x < nm.slices, live = slice && i < w.cols / 4;
    const float4  zero  = make_float4(0.0f, 0.0f, 0.0f, 0.0f), wv = live ? ((const float4 *)nm.w)[i] : zero;
    gpu_dep_enter(); /* the kernel before wrote x (and the last router, the count) */
    const float inv = NORM ? norm_row_inv<false>(x, NULL, w.cols, nm.eps, npart) : 0.0f;
    float       s;
    if (plain_sums<F, 1, 1, PV_ROUTER_UNROLL, NORM>(w, x, 1, blockIdx.x, q, part, &s, nm.w, inv)) { /* thread 0 */
        logits[blockIdx.x] = s;
        __threadfence();
        last = atomicAdd(count, 1u) == gridDim.x - 1;
    }
    if (slice) { /* the whole block: its 8-lane groups quantize together */
        float4 r = zero;
        if (live) ((float4 *)nm.h)[i] = r = norm_scale4(((const float4 *)x)[i], inv, wv);
        if (nm.xo.q) {
            const float a[4] = {r.x, r.y, r.z, r.w};
            xq_put<4>(a, (int)(threadIdx.x % 8), i / 8, live, nm.xo);
        }
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    if (threadIdx.x < CELER_WARP) /* a group of 32 lanes (wave64: the second group routes nothing) */
        gpu_route_token((const volatile float *)logits, w.rows, K, renorm, (int)(threadIdx.x % 32), threadIdx.x < 32,
                        ids, wts);
    if (threadIdx.x == 0) *count = 0;
}

typedef void (*plain_fn)(gpu_wdesc, const float *, int, float *);

/* [format: F32, F16, BF16][rows a block: 1, 4][tokens a pass: 1, 8] */
#define PV_ROWS(F) {{k_matvec_plain<F, 1, 1>, k_matvec_plain<F, 1, PV_TOKENS>}, \
                    {k_matvec_plain<F, 4, 1>, k_matvec_plain<F, 4, PV_TOKENS>}}
static const plain_fn PLAIN[3][2][2] = {PV_ROWS(GPU_F32), PV_ROWS(GPU_F16), PV_ROWS(GPU_BF16)};

bool gpu_matvec_plain_takes(const gpu_wdesc *w, int fmt, const float *x)
{
    const int V = fmt == GPU_F32 ? 4 : 8;
    if (fmt != GPU_F32 && fmt != GPU_F16 && fmt != GPU_BF16) return false;
    return w->cols % V == 0 && w->row_bytes % 16 == 0 && (uintptr_t)w->data % 16 == 0 && (uintptr_t)x % 16 == 0;
}

celer_status gpu_matvec_plain(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y,
                              celer_error *err)
{
    /* four rows a block while that leaves at least two blocks an SM, else one (a router's few rows) */
    const int  four = w->rows >= 8 * (int64_t)g->prop.multiProcessorCount;
    const int  R    = four ? 4 : 1;
    unsigned   blocks;
    if (gpu_grid(g, w->rows, R, &blocks, "matvec_plain", err)) return err->code;
    for (int64_t t0 = 0; t0 < T; t0 += PV_TOKENS) {
        const int      nt = (int)(T - t0 < (int64_t)PV_TOKENS ? T - t0 : (int64_t)PV_TOKENS);
        const plain_fn fn = PLAIN[fmt == GPU_F32 ? 0 : fmt == GPU_F16 ? 1 : 2][four][nt > 1];
        if (GPU_LAUNCH_KEEPING_XQ(g, err, "matvec_plain", fn, blocks, PV_THREADS, 0, *w, x + t0 * w->cols, nt,
                                  y + t0 * w->rows))
            return err->code;
    }
    return CELER_OK;
}

/* Whether one token's router of this shape takes k_router_route (*d and *f its descriptor and
 * format), where its input is x. */
static bool router_fuses(const celer_weight *router, const float *x, int64_t T, int64_t n_used, gpu_wdesc *d, int *f)
{
    celer_error   none;
    const int64_t E = router->rows;
    return T == 1 && !gpu_weight_desc(router, d, f, &none) && gpu_matvec_plain_takes(d, *f, x) &&
           E <= 32 * ROUTE_HELD && E <= GPU_MAX_GRID_X && n_used >= 1 && n_used <= E;
}

typedef void (*route_fn)(gpu_wdesc, const float *, float *, int64_t, int, int32_t *, float *, unsigned *, router_norm);

/* k_router_route for format f, with or without the norm. */
static route_fn route_kernel(int f, bool norm)
{
    if (norm) return f == GPU_F32 ? k_router_route<GPU_F32, true> : f == GPU_F16 ? k_router_route<GPU_F16, true>
                                                                                 : k_router_route<GPU_BF16, true>;
    return f == GPU_F32 ? k_router_route<GPU_F32, false> : f == GPU_F16 ? k_router_route<GPU_F16, false>
                                                                        : k_router_route<GPU_BF16, false>;
}

/* The routing kernels' counter of blocks done (at 0 between launches). */
static celer_status route_count(gpu_backend *g, unsigned **count, celer_error *err)
{
    const void *was = g->d_route.p; /* a buffer just made starts its counter at 0 */
    if (gpu_buf_reserve(g, &g->d_route, 16, err)) return err->code;
    if (g->d_route.p != was) GPU_TRY(g, err, gpuMemsetAsync(g->d_route.p, 0, 16, g->stream), "memset");
    *count = (unsigned *)g->d_route.p;
    return CELER_OK;
}

extern "C" celer_status celer_gpu_moe_router(celer_backend *be, const celer_weight *router, const float *h, int64_t T,
                                             float *logits, int64_t n_used, bool renorm, int32_t *ids, float *w,
                                             celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    gpu_wdesc    d;
    int          f = -1;
    unsigned    *count = NULL;
    if (gpu_alive(g, err)) return err->code;
    if (!router_fuses(router, h, T, n_used, &d, &f)) { /* several tokens, a quantized router, many experts */
        if (gpu_matmul(be, router, h, T, logits, err)) return err->code;
        return gpu_moe_route(be, logits, T, router->rows, n_used, renorm, ids, w, err);
    }
    if (route_count(g, &count, err)) return err->code;
    const router_norm none = {NULL, 0.0f, NULL, {NULL, NULL, false}, 0};
    /* it writes only the logits and the choices: the router input's held quantization (the
     * experts' input) stays */
    return GPU_LAUNCH_KEEPING_XQ(g, err, "moe_router", route_kernel(f, false), (unsigned)router->rows, PV_THREADS, 0,
                                 d, h, logits, n_used, (int)renorm, ids, w, count, none);
}

extern "C" celer_status celer_gpu_norm_router(celer_backend *be, const float *x, const celer_weight *norm, int64_t T,
                                              int64_t dim, float eps, float *h, const celer_weight *router,
                                              float *logits, int64_t n_used, bool renorm, int32_t *ids, float *w,
                                              celer_error *err)
{
    gpu_backend  *g = gpu_of(be);
    gpu_wdesc     d;
    int           f = -1;
    unsigned     *count = NULL;
    const int64_t slices = (dim / 4 + PV_THREADS - 1) / PV_THREADS;
    if (gpu_alive(g, err)) return err->code;
    const uintptr_t at = (uintptr_t)x | (uintptr_t)h | (uintptr_t)norm->data;
    /* the norm's row held as the norm kernels hold it, quantized for the experts (whole blocks of
     * 32), and a slice of h for each of the first blocks */
    const bool fused = router_fuses(router, x, T, n_used, &d, &f) && router->cols == dim &&
                       norm->type == CELER_GGML_F32 && norm->cols == dim && dim % 32 == 0 && norm_lanes(dim) > 0 &&
                       at % 16 == 0 && h != x && slices <= router->rows;
    if (!fused) {
        if (gpu_rmsnorm(be, x, norm, T, dim, eps, h, err)) return err->code;
        return celer_gpu_moe_router(be, router, h, T, logits, n_used, renorm, ids, w, err);
    }
    router_norm nm = {(const float *)norm->data, eps, h, {NULL, NULL, false}, (int)slices};
    if (route_count(g, &count, err) || gpu_xq_buffer(g, dim, &nm.xo, err)) return err->code;
    if (GPU_LAUNCH(g, err, "norm_router", route_kernel(f, true), (unsigned)router->rows, PV_THREADS, 0, d, x, logits,
                   n_used, (int)renorm, ids, w, count, nm))
        return err->code;
    gpu_xq_held(g, h, dim, nm.xo);
    return CELER_OK;
}
