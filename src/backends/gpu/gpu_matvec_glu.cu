/* A one-token pass's gate and up products and their GLU in one launch (the port
 * celer_port_matmul_glu, gpu_matmul.cu, and a MoE decode step's experts, gpu_moe.cu; the default,
 * CELER_GPU_GLU_FUSE=0 runs them apart), on the integer decode kernels' units (gpu_mvq_units.cuh). */
#include "backends/gpu/gpu_glu.cuh"
#include "backends/gpu/gpu_mvq_units.cuh"

/* Block (x, n): rows GLU_ROWS x .. of the gate and up weights for token (or selection) n, a set
 * of MVQ_ROWS rows a warp at a time (wave64: two sets each), a unit a lane at a time; every row's
 * sums are those of k_mmvq's unsliced one-token pass (the units in the same order, the same warp
 * sums), then h = act(gate) · up as k_glu computes it, written in f32 and, with xo.q, quantized as
 * k_glu quantizes it (the block's 32 rows are one block of 32 values of h). With sel, selection
 * n's expert's rows, its token's activations and its own output row; without, token n.
 * A warp dots the same rows of both weights (a unit of each in flight), except for the K-quants
 * (glu_apart): there a set is one weight's rows, as k_mmvq's warps take them, and each warp takes
 * two sets in turn. Both weights' units in flight took 198 registers a lane (Q4_K), one block of
 * 8 warps an SM: each warp's few rounds of loads then waited with no other block's in flight
 * (ncu, 8B Q4_K_M: 34.5 us, 40% of the DRAM's peak, against Q4_0's 22.8 and 61%). XS: the
 * block's activations staged in shared memory by every warp's first set (as k_mmvq's XS; Q4_K
 * 14336 x 4096 in the kernel harness 34.9 -> 25.6 us, Q4_0 the same). */
enum { GLU_ROWS = 32, GLU_SETS = GLU_ROWS / MVQ_ROWS, GLU_THREADS = 256 };
template <int F> static __host__ __device__ constexpr bool glu_apart() { return F == GPU_Q4_K; }
template <int F, bool X8, int SD, bool XS>
__global__ void __launch_bounds__(GLU_THREADS, glu_apart<F>() ? 2 : 0)
    k_mmvq_glu(gpu_wdesc wg, gpu_wdesc wu, gpu_xq x, gpu_mv_sel sel, int act, float *__restrict__ h, gpu_xq_out xo)
{
    gpu_dep_deferred(); /* a lane's first units are loaded before the wait: no kernel writes weights */
    if (sel.ids) gpu_dep_enter(); /* the kernel before wrote the selections */
    constexpr bool   APART = glu_apart<F>();
    __shared__ float gv[GLU_ROWS], uv[GLU_ROWS];
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
    for (int s = wib; s < GLU_SETS * (APART ? 2 : 1); s += nwv) {
        /* APART: set s is rows s / 2 of the up weight (s odd) or the gate's; else rows s of both */
        const int      set = APART ? s / 2 : s;
        const bool     up  = APART && s % 2;
        const int64_t  r0  = (int64_t)blockIdx.x * GLU_ROWS + set * MVQ_ROWS;
        const uint8_t *rg[MVQ_ROWS], *ru[MVQ_ROWS];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            const int64_t r = r0 + i < rows ? r0 + i : 0;
            rg[i] = (up ? bu : bg) + r * wg.row_bytes, ru[i] = bu + r * wu.row_bytes;
        }
        const int64_t nu = r0 < rows ? units<F>(wg.cols) : 0;
        float         ag[MVQ_ROWS][1], au[MVQ_ROWS][1];
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) ag[i][0] = 0.0f, au[i][0] = 0.0f;
        /* one unit of each weight a lane (APART: of its one weight; rows of the same shape and
         * format, so wg describes both) */
        raw_unit lg[1][MVQ_ROWS], lu[1][MVQ_ROWS];
        units_load<F, 1>(wg, rg, lane, nu, CELER_WARP, lg);
        if (!APART) units_load<F, 1>(wu, ru, lane, nu, CELER_WARP, lu);
        if (!entered) gpu_dep_enter(), entered = true; /* the loads above overlap the kernel that wrote x */
        auto rounds = [&](const auto &xsrc) {
            for (int64_t u = lane; u < nu; u += CELER_WARP) {
                if (u != lane) {
                    units_load<F, 1>(wg, rg, u, nu, CELER_WARP, lg);
                    if (!APART) units_load<F, 1>(wu, ru, u, nu, CELER_WARP, lu);
                }
                units_dot<F, 1, X8>(wg, lg[0], u, xsrc, 1, ag);
                if (!APART) units_dot<F, 1, X8>(wu, lu[0], u, xsrc, 1, au);
            }
        };
        if constexpr (XS) { /* every warp's first set comes here: the block's barrier */
            GPU_DYN_SHARED(uint4, xs_mem);
            if (s == wib) xs_fill<F, X8>(xs_mem, x);
            rounds(xs_view<F>(xs_mem, x.nb));
        } else {
            rounds(x);
        }
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++) {
            ag[i][0] = gpu_warp_sum(ag[i][0]);
            if (!APART) au[i][0] = gpu_warp_sum(au[i][0]);
        }
        if (lane == 0)
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) {
                if (up) uv[set * MVQ_ROWS + i] = ag[i][0];
                else gv[set * MVQ_ROWS + i] = ag[i][0];
                if (!APART) uv[set * MVQ_ROWS + i] = au[i][0];
            }
    }
    if (!entered) gpu_dep_enter();
    __syncthreads();
    if (threadIdx.x >= CELER_WARP) return;
    /* the first warp writes the block's rows (wave64: its second 32 lanes only join the shuffles) */
    const int     i    = (int)threadIdx.x % 32;
    const int64_t row  = (int64_t)blockIdx.x * GLU_ROWS + i;
    const bool    live = threadIdx.x < 32 && row < rows;
    const float   v[1] = {live ? glu_value(gv[i], uv[i], act) : 0.0f};
    if (live) h[n * rows + row] = v[0];
    if (xo.q) xq_put<1>(v, i, (n * rows + row - i) / 32, live, xo);
}

typedef void (*glu_fn)(gpu_wdesc, gpu_wdesc, gpu_xq, gpu_mv_sel, int, float *, gpu_xq_out);
#define GLU_ROW(F, SD)                                                                                              \
    {F, SD, {{k_mmvq_glu<F, false, SD, false>, k_mmvq_glu<F, true, SD, false>},                                     \
             {k_mmvq_glu<F, false, SD, true>, k_mmvq_glu<F, true, SD, true>}}}
static const struct {
    int    fmt, sd;  /* as MVQ_FORMATS names them */
    glu_fn fn[2][2]; /* [XS][X8] */
} GLU[] = {MVQ_FORMATS(GLU_ROW)};

celer_status gpu_matvec_q8_glu(gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt, const gpu_xq *xq,
                               int64_t T, const gpu_mv_sel *sel, celer_act act, float *h, celer_error *err)
{
    const auto  *row = mvq_row(GLU, fmt, wg->sdtype);
    const bool   xs  = xs_staged(g, fmt, wg->cols, false); /* x in shared memory (gpu_mvq_units.cuh) */
    const glu_fn fn  = row ? row->fn[xs][xq->x8] : NULL;
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
        GPU_LAUNCH(g, err, "matvec_q8 glu", fn, dim3(blocks, (unsigned)T), GLU_THREADS, xs ? xs_bytes(wg->cols) : 0,
                   *wg, *wu, *xq, sel ? *sel : none, (int)act, h, xo))
        return err->code;
    if (qz) gpu_xq_held(g, h, T * wg->rows, xo);
    return CELER_OK;
}
