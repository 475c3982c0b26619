/* A MoE decode step's combining down products (gpu_moe.cu; CELER_GPU_MOE_COMBINE=0: not), on
 * the integer decode kernels' units (gpu_mvq_units.cuh), and its launch. */
#include "backends/gpu/gpu_mvq_units.cuh"

/* A MoE decode step's last products and the weighted sum of each token's K (at most MVQ_CMB)
 * selections in one launch (gpu_moe.cu): block (x, t) takes rows
 * MVQ_ROWS x .. of token t's selections, a warp a selection at a time (wave64: two), each summed
 * as k_mmvq's unsliced one-token pass sums a row, the selections' sums met in shared memory;
 * then out[t] = Σ_j wts[t K + j] · y_j, j in order, as k_combine (gpu_moe.cu) sums them, where
 * y_j is selection t K + j's product: the outputs of the two launches it replaces, bit for bit
 * where that product ran unsliced (KS 1). Selection n reads activation row n. The selections and
 * their weights come from the routing, which finished before the kernel before this one (the
 * experts' gate/up) passed its own wait: they are read before this kernel's wait, with a warp's
 * first units, which are then in flight while that kernel runs. ONE (rows of at most a warp's
 * units, as the 30B-A3B's experts' 768 columns: a lane's first unit is all it has) loads a unit a
 * lane a round and asks for cmb_blocks blocks an SM: MVQ_UNROLL's registers for a second unit
 * that never comes left two (95 registers a lane for Q4_0), 264 of the 30B-A3B's 512 blocks
 * resident at the wait and the rest loading after it; Q4_0 and Q4_1 fit four (64 registers, no
 * spills: all 512), mxfp4, nvfp4 and MLX affine 6-bit two (at three their codes' unpacking
 * spilled 4 to 98 bytes), the others three. With add, the sums are added to out (the residual
 * stream: out[t] + Σ, one rounding, as the next norm's x + o would add them), its values read
 * before the wait with the selections: the o-product that last wrote them ran kernels before. */
enum { MVQ_CMB = 8, CMB_THREADS = 32 * MVQ_CMB };
template <int F> static __host__ __device__ constexpr bool cmb_kquant()
{
    return F == GPU_Q5_K || F == GPU_Q4_K || F == GPU_Q6_K;
}
template <int F> static __host__ __device__ constexpr int cmb_blocks()
{
    return F == GPU_Q4_0 || F == GPU_Q4_1 ? 4 : F == GPU_MXFP4 || F == GPU_NVFP4 || F == GPU_AFFINE6 ? 2 : 3;
}
template <int F, int SD, bool ONE>
__global__ void __launch_bounds__(CMB_THREADS, ONE ? cmb_blocks<F>() : 0)
    k_mmvq_combine(gpu_wdesc w, gpu_xq x, gpu_mv_sel sel, int K, const float *__restrict__ wts, float *__restrict__ out,
                   int add)
{
    gpu_dep_deferred(); /* the selections, their weights and a warp's first units are read before the wait */
    __shared__ float part[MVQ_CMB][MVQ_ROWS], wj[MVQ_CMB];
    mvq_fix_sdtype<SD>(w);
    constexpr int U    = ONE || cmb_kquant<F>() ? 1 : MVQ_UNROLL;
    const int64_t t    = blockIdx.y, r0 = (int64_t)blockIdx.x * MVQ_ROWS, nu = units<F>(w.cols);
    const int     lane = threadIdx.x % CELER_WARP, wib = threadIdx.x / CELER_WARP, nwv = CMB_THREADS / CELER_WARP;
    const bool    mine = (int)threadIdx.x < MVQ_ROWS && r0 + (int)threadIdx.x < w.rows; /* writes an output */
    const float   was  = add && mine ? out[t * w.rows + r0 + threadIdx.x] : 0.0f;
    if ((int)threadIdx.x < K) wj[threadIdx.x] = wts[t * K + threadIdx.x];
    bool entered = false;
    for (int j = wib; j < K; j += nwv) {
        const int64_t n = t * K + j;
        const int32_t e = sel.ids[n];
        float         acc[MVQ_ROWS][1];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) acc[i][0] = 0.0f;
        const bool     live = e >= 0 && e < sel.n_expert; /* the router never gives another */
        const uint8_t *base = w.data + (int64_t)(live ? e : 0) * w.rows * w.row_bytes, *rows[MVQ_ROWS];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) rows[i] = base + (r0 + i < w.rows ? r0 + i : 0) * w.row_bytes;
        const int64_t nl = live ? nu : 0;
        raw_unit      ru[U][MVQ_ROWS];
        units_load<F, U>(w, rows, lane, nl, CELER_WARP, ru);
        if (!entered) gpu_dep_enter(), entered = true; /* the kernel before wrote the activations */
        gpu_xq xn = x;
        xn.q += n * x.nb * XQ_BLOCK, xn.d += n * x.nb;
        for (int64_t u = lane; u < nl; u += U * CELER_WARP) {
            if (u != lane) units_load<F, U>(w, rows, u, nl, CELER_WARP, ru);
#pragma unroll
            for (int k = 0; k < U; k++)
                if (u + k * CELER_WARP < nl) units_dot<F, 1, false>(w, ru[k], u + k * CELER_WARP, xn, 1, acc);
        }
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) acc[i][0] = gpu_warp_sum(acc[i][0]);
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) part[j][i] = acc[i][0];
    }
    if (!entered) gpu_dep_enter();
    __syncthreads();
    const int i = (int)threadIdx.x;
    if (!mine) return;
    float s = 0.0f;
    for (int j = 0; j < K; j++) s = __fmaf_rn(wj[j], part[j][i], s);
    out[t * w.rows + r0 + i] = add ? __fadd_rn(was, s) : s;
}

typedef void (*cmb_fn)(gpu_wdesc, gpu_xq, gpu_mv_sel, int, const float *, float *, int);
/* ONE where it fits its blocks an SM without spilling (ptxas, sm_90: 64 registers for Q4_0 and
 * Q4_1, 78-80 for the others at three; at three Q4_K spilled 244 bytes, Q5_K 448, MLX 8-bit with
 * f32 scales 32), else none. */
template <int F, int SD> static constexpr cmb_fn cmb_one()
{
    if constexpr (F == GPU_Q4_K || F == GPU_Q5_K || (F == GPU_AFFINE8 && SD == 0)) return NULL;
    else return k_mmvq_combine<F, SD, true>;
}
#define CMB_ROW(F, SD) {F, SD, {k_mmvq_combine<F, SD, false>, cmb_one<F, SD>()}}
static const struct {
    int    fmt, sd; /* as MVQ_FORMATS names them */
    cmb_fn fn[2];
} CMB[] = {MVQ_FORMATS(CMB_ROW)};

bool gpu_matvec_q8_combines(int64_t K) { return K >= 1 && K <= MVQ_CMB; }

celer_status gpu_matvec_q8_combine(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq,
                                   const gpu_mv_sel *sel, int64_t T, int64_t K, const float *wts, float *out,
                                   bool add, celer_error *err)
{
    const auto  *row = mvq_row(CMB, fmt, w->sdtype);
    const bool   one = w->cols / 32 <= g->prop.warpSize;
    const cmb_fn fn  = !row ? NULL : one && row->fn[1] ? row->fn[1] : row->fn[0];
    if (!fn || !gpu_matvec_q8_combines(K) || sel->per_x != 1)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no combining decode kernel for format %d, %lld selections",
                          CELER_GPU_NAME, fmt, (long long)K);
    unsigned blocks;
    if (T < 1 || T > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld tokens in one combining product", CELER_GPU_NAME,
                          (long long)T);
    if (gpu_grid(g, w->rows, MVQ_ROWS, &blocks, "matvec_q8 combine", err)) return err->code;
    return GPU_LAUNCH_KEEPING_XQ(g, err, "matvec_q8 combine", fn, dim3(blocks, (unsigned)T), CMB_THREADS, 0, *w, *xq,
                                 *sel, (int)K, wts, out, (int)add);
}
