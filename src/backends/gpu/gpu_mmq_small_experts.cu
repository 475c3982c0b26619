/* A MoE step's experts on the batch kernel (gpu_mmq_small.cuh): an expert's tokens a tile of the
 * grid (moe_tiles.h), its products alone or its gate/up pair with the GLU in one launch. */
#include "backends/gpu/gpu_mmq_small.cuh"

/* A MoE prefill's experts on the batch kernel (CELER_GPU_MOE_STREAM=0: on k_mmq_experts instead;
 * a 30B-A3B pp512 ran 24% faster this way), the default geometry: block (x, y) takes row block x
 * of tile y of `tiles` (CELER_MOE_TILE ints a tile: its first pair, its pairs, at most NT, and
 * its expert, whose weights lie `stride` bytes on from w's); with live, only the first *live
 * tiles (written on the device: the grid is the most there can be). Pair s's input is x's row tok[s] (tok NULL: row s); its
 * products go to y's row s. The same sums as k_mmq_experts' (each output one lane's sum over
 * the column blocks in order). */
template <int F, int NT>
__global__ void __launch_bounds__((sq_shape<F, NT, SQ_GEOM_DEFAULT>::THREADS),
                                  (sq_shape<F, NT, SQ_GEOM_DEFAULT>::BLOCKS))
    k_mmq_s_experts(gpu_wdesc w, gpu_xq x, const int32_t *__restrict__ tok, const int32_t *__restrict__ tiles,
                    const int32_t *__restrict__ live, int64_t stride, float *__restrict__ y)
{
    gpu_dep_enter();
    int64_t s0, n, off;
    if (!moe_tile_at(tiles, live, stride, &s0, &n, &off)) return; /* the whole block */
    w.data += off;
    y += s0 * w.rows;
    if (tok) sq_tile<F, NT, false, SQ_GEOM_DEFAULT, true>(w, x, tok + s0, n, blockIdx.x, 0, w.cols / 32, y, 0);
    else {
        x.q += s0 * x.nb * XQ_BLOCK, x.d += s0 * x.nb;
        sq_tile<F, NT, false, SQ_GEOM_DEFAULT>(w, x, NULL, n, blockIdx.x, 0, w.cols / 32, y, 0);
    }
}

/* k_mmq_s_experts' gate and up products and their GLU in one launch (gpu_mmq_expert_tiles_glu),
 * Q4_0, Q8_0 and MLX affine 4 and 8 bits: block (x, y) takes rows 64 x .. of tile y's expert's
 * gate weight and the same rows of its up weight, then sq_glu_put into h's rows of the tile's
 * pairs (pair s's at h + s · rows, quantized as k_glu quantizes h). Each sum is
 * k_mmq_s_experts': the same bits. */
template <int F, int NT>
__global__ void __launch_bounds__((sq_shape<F, NT, SQ_GEOM_DEFAULT>::THREADS),
                                  (sq_shape<F, NT, SQ_GEOM_DEFAULT>::BLOCKS))
    k_mmq_s_experts_glu(gpu_wdesc wg, gpu_wdesc wu, gpu_xq x, const int32_t *__restrict__ tok,
                        const int32_t *__restrict__ tiles, const int32_t *__restrict__ live, int64_t stride, int act,
                        float *__restrict__ h, gpu_xq_out xo)
{
    gpu_dep_enter();
    int64_t s0, n, off;
    if (!moe_tile_at(tiles, live, stride, &s0, &n, &off)) return; /* the whole block */
    const int64_t r0 = (int64_t)blockIdx.x * (sq_shape<F, NT, SQ_GEOM_DEFAULT>::SQ_ROWS / 2);
    float         acc[sq_shape<F, NT, SQ_GEOM_DEFAULT>::NI][4];
    wg.data += off, wu.data += off;
    if (tok) sq_sums<F, NT, false, SQ_GEOM_DEFAULT, true, true>(wg, wu, x, tok + s0, n, r0, 0, wg.cols / 32, acc);
    else {
        x.q += s0 * x.nb * XQ_BLOCK, x.d += s0 * x.nb;
        sq_sums<F, NT, false, SQ_GEOM_DEFAULT, false, true>(wg, wu, x, NULL, n, r0, 0, wg.cols / 32, acc);
    }
    sq_glu_put<F, NT>(acc, r0, n, wg.rows, act, h + s0 * wg.rows, xo, s0 * wg.rows / 32);
}

bool gpu_mmq_expert_tiles_glus(const gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt)
{
    return CELER_GPU_IMMA && g->glu_fuse && sq_glu_index(fmt) >= 0 && gpu_mmq_batch_has(g, fmt) &&
           g->amx == CELER_AMX_NONE && sq_glu_pair(wg, wu);
}

celer_status gpu_mmq_expert_tiles_glu(gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt,
                                      const gpu_xq *xq, const int32_t *tok, const int32_t *tiles, int64_t n_tiles,
                                      const int32_t *live, int64_t N, celer_act act, float *h, celer_error *err)
{
    typedef void (*experts_fn)(gpu_wdesc, gpu_wdesc, gpu_xq, const int32_t *, const int32_t *, const int32_t *,
                               int64_t, int, float *, gpu_xq_out);
    typedef sq_shape<GPU_Q4_0, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT> S4;
#define SQ_STAGE_OF(F) sq_shape<F, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT>::STAGE
    static const int stages[4] = {SQ_STAGE_OF(GPU_Q4_0), SQ_STAGE_OF(GPU_Q8_0), SQ_STAGE_OF(GPU_AFFINE4),
                                  SQ_STAGE_OF(GPU_AFFINE8)};
#undef SQ_STAGE_OF
#if CELER_GPU_IMMA
#define SQ_FN_OF(F) k_mmq_s_experts_glu<F, CELER_MOE_TILE_PAIRS>
    static const experts_fn fns[4] = {SQ_FN_OF(GPU_Q4_0), SQ_FN_OF(GPU_Q8_0), SQ_FN_OF(GPU_AFFINE4),
                                      SQ_FN_OF(GPU_AFFINE8)};
#undef SQ_FN_OF
#else
    static const experts_fn fns[4] = {NULL, NULL, NULL, NULL};
#endif
    static_assert(sq_shape<GPU_AFFINE8, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT>::THREADS == S4::THREADS,
                  "one block shape");
    if (!gpu_mmq_expert_tiles_glus(g, wg, wu, fmt) || xq->x8)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no one-launch experts' gate/up and GLU of format %d",
                          CELER_GPU_NAME, fmt);
    if (n_tiles <= 0 || N <= 0) return CELER_OK;
    if (n_tiles > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld tiles of experts' tokens: past the prefill grid",
                          CELER_GPU_NAME, (long long)n_tiles);
    const experts_fn fn    = fns[sq_glu_index(fmt)];
    const size_t     smem  = (size_t)S4::SQ_STAGES * (size_t)stages[sq_glu_index(fmt)];
    unsigned         br;
    gpu_xq_out       xo = {NULL, NULL, false};
    if (gpu_allow_smem(g, (const void *)fn, smem, err) ||
        gpu_grid(g, wg->rows, S4::SQ_ROWS / 2, &br, "mmq experts glu", err) ||
        gpu_xq_buffer_apart(g, N * wg->rows, xq, &xo, err))
        return err->code;
    gpu_forget_acts(g);
    /* never launched early, as the batch kernel (gpu_mmq_small) */
    if (GPU_LAUNCH_KEEPING_XQ_AS(g, err, "mmq experts glu", false, fn, dim3(br, (unsigned)n_tiles), S4::THREADS, smem,
                                 *wg, *wu, *xq, tok, tiles, live, wg->rows * wg->row_bytes, (int)act, h, xo))
        return err->code;
    gpu_xq_held(g, h, N * wg->rows, xo);
    return CELER_OK;
}

celer_status gpu_mmq_expert_tiles(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                                  const int32_t *tiles, int64_t n_tiles, const int32_t *live, float *y,
                                  celer_error *err)
{
    typedef void (*experts_fn)(gpu_wdesc, gpu_xq, const int32_t *, const int32_t *, const int32_t *, int64_t,
                               float *);
    typedef sq_shape<GPU_Q4_0, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT> S4;
    typedef sq_shape<GPU_Q8_0, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT> S8;
    typedef sq_shape<GPU_AFFINE4, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT> SA4;
    static_assert(S4::THREADS == S8::THREADS && S4::SQ_STAGES == S8::SQ_STAGES && S4::THREADS == SA4::THREADS &&
                      S4::SQ_STAGES == SA4::SQ_STAGES,
                  "one block shape");
#if CELER_GPU_AMX
    if (g->amx != CELER_AMX_NONE) return gpu_mmq_amx_tiles(g, w, fmt, xq, tok, tiles, n_tiles, live, y, err);
#endif
    if (!gpu_mmq_batch_has(g, fmt))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer prefill kernel for format %d", CELER_GPU_NAME, fmt);
    if (n_tiles <= 0) return CELER_OK;
    if (n_tiles > GPU_MAX_GRID_YZ)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld tiles of experts' tokens: past the prefill grid",
                          CELER_GPU_NAME, (long long)n_tiles);
    experts_fn fn    = NULL;
    int        stage = 0;
    if (fmt == GPU_Q4_0) fn = k_mmq_s_experts<GPU_Q4_0, CELER_MOE_TILE_PAIRS>, stage = S4::STAGE;
    else if (fmt == GPU_Q8_0) fn = k_mmq_s_experts<GPU_Q8_0, CELER_MOE_TILE_PAIRS>, stage = S8::STAGE;
#if CELER_GPU_IMMA
#define SQ_MLX_EXPERTS(F)                                                                                           \
    else if (fmt == F) fn = k_mmq_s_experts<F, CELER_MOE_TILE_PAIRS>,                                               \
                       stage = sq_shape<F, CELER_MOE_TILE_PAIRS, SQ_GEOM_DEFAULT>::STAGE;
    SQ_MLX_EXPERTS(GPU_AFFINE2) SQ_MLX_EXPERTS(GPU_AFFINE3) SQ_MLX_EXPERTS(GPU_AFFINE4)
    SQ_MLX_EXPERTS(GPU_AFFINE5) SQ_MLX_EXPERTS(GPU_AFFINE6) SQ_MLX_EXPERTS(GPU_AFFINE8) SQ_MLX_EXPERTS(GPU_MXFP4)
    SQ_MLX_EXPERTS(GPU_NVFP4)
#undef SQ_MLX_EXPERTS
#endif
    const size_t smem = (size_t)S4::SQ_STAGES * (size_t)stage;
    unsigned     br;
    if (gpu_allow_smem(g, (const void *)fn, smem, err) || gpu_grid(g, w->rows, S4::SQ_ROWS, &br, "mmq experts", err))
        return err->code;
    /* never launched early, as the batch kernel (gpu_mmq_small) */
    return GPU_LAUNCH_KEEPING_XQ_AS(g, err, "mmq experts", false, fn, dim3(br, (unsigned)n_tiles), S4::THREADS, smem,
                                    *w, *xq, tok, tiles, live, w->rows * w->row_bytes, y);
}
