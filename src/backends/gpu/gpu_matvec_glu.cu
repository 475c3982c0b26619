/* A one-token pass's gate and up products and their GLU in one launch (the port
 * celer_port_matmul_glu, gpu_matmul.cu, and a MoE decode step's experts, gpu_moe.cu; the default,
 * CELER_GPU_GLU_FUSE=0 runs them apart), on the integer decode kernels' units (gpu_mvq_units.cuh). */
#include "backends/gpu/gpu_glu.cuh"
#include "backends/gpu/gpu_mvq_units.cuh"

/* Block (x, n): rows GLU_ROWS x .. of the gate and up weights for token (or selection) n, a set
 * of MVQ_ROWS rows a warp at a time (wave64: two sets each), each warp dotting the same rows of
 * both weights, a unit of each a lane at a time; every row's sums are those of k_mmvq's unsliced
 * one-token pass (the units in the same order, the same warp sums), then h = act(gate) · up as
 * k_glu computes it, written in f32 and, with xo.q, quantized as k_glu quantizes it (the block's
 * 32 rows are one block of 32 values of h). With sel, selection n's expert's rows, its token's
 * activations and its own output row; without, token n. */
enum { GLU_ROWS = 32, GLU_SETS = GLU_ROWS / MVQ_ROWS, GLU_THREADS = 256 };
template <int F, bool X8, int SD>
__global__ void __launch_bounds__(GLU_THREADS)
    k_mmvq_glu(gpu_wdesc wg, gpu_wdesc wu, gpu_xq x, gpu_mv_sel sel, int act, float *__restrict__ h, gpu_xq_out xo)
{
    gpu_dep_deferred(); /* a lane's first units are loaded before the wait: no kernel writes weights */
    if (sel.ids) gpu_dep_enter(); /* the kernel before wrote the selections */
    __shared__ float hv[GLU_ROWS];
    mvq_fix_sdtype<SD>(wg), mvq_fix_sdtype<SD>(wu);
    const int64_t  n = blockIdx.y, rows = wg.rows;
    const uint8_t *bg = wg.data, *bu = wu.data;
    if (sel.ids) {
        const int32_t e = sel.ids[n];
        if (e < 0 || e >= sel.n_expert) return; /* the whole block: the router never gives one */
        bg += (int64_t)e * rows * wg.row_bytes, bu += (int64_t)e * rows * wu.row_bytes;
        x.q += n / sel.per_x * x.nb * XQ_BLOCK, x.d += n / sel.per_x * x.nb;
    } else {
        x.q += n * x.nb * XQ_BLOCK, x.d += n * x.nb;
    }
    const int lane = threadIdx.x % CELER_WARP, wib = threadIdx.x / CELER_WARP, nwv = GLU_THREADS / CELER_WARP;
    bool      entered = sel.ids != NULL;
    for (int set = wib; set < GLU_SETS; set += nwv) {
        const int64_t  r0 = (int64_t)blockIdx.x * GLU_ROWS + set * MVQ_ROWS;
        const uint8_t *rg[MVQ_ROWS], *ru[MVQ_ROWS];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            const int64_t r = r0 + i < rows ? r0 + i : 0;
            rg[i] = bg + r * wg.row_bytes, ru[i] = bu + r * wu.row_bytes;
        }
        const int64_t nu = r0 < rows ? units<F>(wg.cols) : 0;
        float         ag[MVQ_ROWS][1], au[MVQ_ROWS][1];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) ag[i][0] = 0.0f, au[i][0] = 0.0f;
        /* one unit of each weight a lane: as many bytes in flight as k_mmvq's two of one */
        raw_unit lg[1][MVQ_ROWS], lu[1][MVQ_ROWS];
        units_load<F, 1>(wg, rg, lane, nu, CELER_WARP, lg);
        units_load<F, 1>(wu, ru, lane, nu, CELER_WARP, lu);
        if (!entered) gpu_dep_enter(), entered = true; /* the loads above overlap the kernel that wrote x */
        for (int64_t u = lane; u < nu; u += CELER_WARP) {
            if (u != lane) {
                units_load<F, 1>(wg, rg, u, nu, CELER_WARP, lg);
                units_load<F, 1>(wu, ru, u, nu, CELER_WARP, lu);
            }
            units_dot<F, 1, X8>(wg, lg[0], u, x, 1, ag);
            units_dot<F, 1, X8>(wu, lu[0], u, x, 1, au);
        }
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) ag[i][0] = gpu_warp_sum(ag[i][0]), au[i][0] = gpu_warp_sum(au[i][0]);
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) hv[set * MVQ_ROWS + i] = glu_value(ag[i][0], au[i][0], act);
    }
    if (!entered) gpu_dep_enter();
    __syncthreads();
    if (threadIdx.x >= CELER_WARP) return;
    /* the first warp writes the block's rows (wave64: its second 32 lanes only join the shuffles) */
    const int     i    = (int)threadIdx.x % 32;
    const int64_t row  = (int64_t)blockIdx.x * GLU_ROWS + i;
    const bool    live = threadIdx.x < 32 && row < rows;
    const float   v[1] = {live ? hv[i] : 0.0f};
    if (live) h[n * rows + row] = v[0];
    if (xo.q) xq_put<1>(v, i, (n * rows + row - i) / 32, live, xo);
}

typedef void (*glu_fn)(gpu_wdesc, gpu_wdesc, gpu_xq, gpu_mv_sel, int, float *, gpu_xq_out);
#define GLU_ROW(F, SD) {F, SD, {k_mmvq_glu<F, false, SD>, k_mmvq_glu<F, true, SD>}}
static const struct {
    int    fmt, sd; /* as MVQ_FORMATS names them */
    glu_fn fn[2];   /* X8 false, true */
} GLU[] = {MVQ_FORMATS(GLU_ROW)};

celer_status gpu_matvec_q8_glu(gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt, const gpu_xq *xq,
                               int64_t T, const gpu_mv_sel *sel, celer_act act, float *h, celer_error *err)
{
    const auto  *row = mvq_row(GLU, fmt, wg->sdtype);
    const glu_fn fn  = row ? row->fn[xq->x8] : NULL;
    if (!fn || !gpu_matvec_q8_glus(wg, wu))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no fused gate/up decode kernel for format %d (%lld x %lld)",
                          CELER_GPU_NAME, fmt, (long long)wg->rows, (long long)wg->cols);
    if (T < 1 || T > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld tokens in one fused gate/up product", CELER_GPU_NAME,
                          (long long)T);
    unsigned   blocks;
    gpu_xq_out xo   = {NULL, NULL, false};
    const bool qz   = wg->rows % 32 == 0; /* h quantized for the down product, as k_glu does */
    gpu_mv_sel none = {NULL, 1, 0};
    if (gpu_grid(g, wg->rows, GLU_ROWS, &blocks, "matvec_q8 glu", err) ||
        (qz && gpu_xq_buffer_apart(g, T * wg->rows, xq, &xo, err)) ||
        GPU_LAUNCH(g, err, "matvec_q8 glu", fn, dim3(blocks, (unsigned)T), GLU_THREADS, 0, *wg, *wu, *xq,
                   sel ? *sel : none, (int)act, h, xo))
        return err->code;
    if (qz) gpu_xq_held(g, h, T * wg->rows, xo);
    return CELER_OK;
}
