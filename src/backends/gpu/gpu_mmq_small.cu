/* Products of a batch of decodes (3 to 32 tokens: the server's continuous batch) on the integer
 * matrix units (the kernel: gpu_mmq_small.cuh): Q4_0 and Q8_0 in every geometry, MLX affine (every
 * width), mxfp4 and nvfp4 in the default one; a set of up to three weights in one launch, and a
 * gate/up pair with its GLU in one launch. */
#include "backends/gpu/gpu_mmq_small.cuh"

static_assert(GPU_MVQ_SET == 3, "k_mmq_s and k_mmq_sum_set pick among three weights");

/* Block b of the set's grid: weight i's from s.start[i], row block lb % nb[i] of its column part
 * lb / nb[i] (lb = b - s.start[i]), into s.y[i] + part · T · rows. */
template <int F, int NT, bool X8, int G>
/* (launch bounds parenthesized: HIP's macro splits at commas) */
__global__ void __launch_bounds__((sq_shape<F, NT, G>::THREADS), (sq_shape<F, NT, G>::BLOCKS))
    k_mmq_s(gpu_mmq_set s, gpu_xq x, int64_t T)
{
    gpu_dep_enter();
    const int b = (int)blockIdx.x, i = b >= s.start[2] ? 2 : b >= s.start[1] ? 1 : 0;
    const gpu_wdesc &w = s.w[i];
    const int64_t    kper = s.kper[i], lb = b - s.start[i], part = lb / s.nb[i];
    const int64_t    kz0 = part * kper, kend = w.cols / 32 < kz0 + kper ? w.cols / 32 : kz0 + kper;
    sq_tile<F, NT, X8, G>(w, x, NULL, T, lb % s.nb[i], kz0, kend, s.y[i] + part * T * w.rows, s.add[i]);
}

/* A batch's gate and up products and their GLU in one launch (gpu_mmq_small_glu), Q4_0, Q8_0 and
 * MLX affine 4 and 8 bits in the default geometry: block b takes rows 64 b .. of the gate weight
 * (its first four warps) and the same rows of the up weight (the other four), every column (no
 * parts), then sq_glu_put. Each sum is k_mmq_s's for a weight that takes no column parts: the
 * same bits. */
template <int F, int NT>
__global__ void __launch_bounds__((sq_shape<F, NT, SQ_GEOM_DEFAULT>::THREADS),
                                  (sq_shape<F, NT, SQ_GEOM_DEFAULT>::BLOCKS))
    k_mmq_s_glu(gpu_wdesc wg, gpu_wdesc wu, gpu_xq x, int64_t T, int act, float *__restrict__ h, gpu_xq_out xo)
{
    gpu_dep_enter();
    const int64_t r0 = (int64_t)blockIdx.x * (sq_shape<F, NT, SQ_GEOM_DEFAULT>::SQ_ROWS / 2);
    float         acc[sq_shape<F, NT, SQ_GEOM_DEFAULT>::NI][4];
    sq_sums<F, NT, false, SQ_GEOM_DEFAULT, false, true>(wg, wu, x, NULL, T, r0, 0, wg.cols / 32, acc);
    sq_glu_put<F, NT>(acc, r0, T, wg.rows, act, h, xo, 0);
}

/* y[j] (n[j] values) = Σ over the parts p of part[j][p · n[j] + ·], in part order: k_mmq_sum's
 * sums for each weight of a set whose product took column parts, in one launch. */
__global__ void k_mmq_sum_set(gpu_mmq_sums s)
{
    gpu_dep_enter();
    const int64_t n = s.n[0] + s.n[1] + s.n[2];
    for (int64_t k = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (int64_t)gridDim.x * blockDim.x) {
        const int     j  = k >= s.n[0] + s.n[1] ? 2 : k >= s.n[0] ? 1 : 0;
        const int64_t i  = k - (j > 0 ? s.n[0] : 0) - (j > 1 ? s.n[1] : 0), nj = s.n[j];
        const float  *pt = s.part[j];
        float         v  = pt[i];
        for (int p = 1; p < s.parts[j]; p++) v += pt[p * nj + i];
        mmq_put(&s.y[j][i], v, s.add);
    }
}

/* Up to GPU_MMQ_SMALL tokens: k_mmq_s in tiles of 8, 16 or 32 tokens, in the geometry g->sq_geom. */
#define SQ_FNS(G, X8, F) {k_mmq_s<F, 8, X8, G>, k_mmq_s<F, 16, X8, G>, k_mmq_s<F, 32, X8, G>}
#define SQ_FNS_G(G)                                                                                                 \
    {{SQ_FNS(G, false, GPU_Q4_0), SQ_FNS(G, false, GPU_Q8_0)}, {SQ_FNS(G, true, GPU_Q4_0), SQ_FNS(G, true, GPU_Q8_0)}}
#define SQ_SIZES(G, F, what) {sq_shape<F, 8, G>::what, sq_shape<F, 16, G>::what, sq_shape<F, 32, G>::what}
#define SQ_SIZES_G(G, what) {SQ_SIZES(G, GPU_Q4_0, what), SQ_SIZES(G, GPU_Q8_0, what)}
/* MLX affine, mxfp4 and nvfp4: the default geometry, both levels of the activations (header);
 * their kernels are NVIDIA's alone, none built for AMD (gpu_mmq_batch_has) */
#if CELER_GPU_IMMA
#define SQ_MLX_FNS(F) SQ_FNS(SQ_GEOM_DEFAULT, false, F)
#else
#define SQ_MLX_FNS(F) {NULL, NULL, NULL}
#endif

/* A weight's column parts in the batch kernel's set (kper: the column blocks of each): whole
 * stages of a grid of 64-row blocks (about one 128-row block an SM, where two fit; the parts of
 * 128-row grids were no faster in the batch of 32 over all its products, docs/benchmarks/gpu-h200.md,
 * nineteenth pass), but for rows of SQ_LONG column blocks or more (g->sq_long), in the geometries
 * of 128-row blocks, those of that grid itself: the 8B's down product (4096 x 14336) then runs as
 * 256 blocks of 14 stages where it ran as 128 of 28, one block an SM (the harness had it 11%
 * faster so, where the 4096-square products, 4 stages a block then, lost 7%). */
enum { SQ_LONG = 256 };
static int64_t sq_parts(const gpu_backend *g, int64_t rows, int64_t cols, int64_t *kper)
{
    static_assert(sq_geom<0>::ROWS == SQ_ROWS && sq_geom<1>::ROWS == sq_geom<2>::ROWS, "the geometries' rows");
    const int64_t nq = cols / 32, grid = g->sq_long && nq >= SQ_LONG && g->sq_geom ? sq_geom<2>::ROWS : SQ_ROWS;
    return gpu_mmq_column_parts(g, (rows + grid - 1) / grid, nq, SQ_BQ, kper);
}

bool gpu_mmq_batch_has(const gpu_backend *g, int fmt)
{
    return gpu_imma_ok(&g->prop) && !g->mmq_off && (fmt == GPU_Q4_0 || fmt == GPU_Q8_0 ||
                                     (CELER_GPU_IMMA && g->sq_geom == SQ_GEOM_DEFAULT && sq_mlx_index(fmt) >= 0));
}

celer_status gpu_mmq_small_set(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                               float *const *y, bool add, celer_error *err)
{
    typedef void (*set_fn)(gpu_mmq_set, gpu_xq, int64_t);
    static const set_fn fns[3][2][2][3]    = {SQ_FNS_G(0), SQ_FNS_G(1), SQ_FNS_G(2)};
    static const int    stage[3][2][3]   = {SQ_SIZES_G(0, STAGE), SQ_SIZES_G(1, STAGE), SQ_SIZES_G(2, STAGE)};
    static const int    threads[3][2][3] = {SQ_SIZES_G(0, THREADS), SQ_SIZES_G(1, THREADS), SQ_SIZES_G(2, THREADS)};
    static const int    stages[3] = {sq_geom<0>::STAGES, sq_geom<1>::STAGES, sq_geom<2>::STAGES};
    static const int    rows[3]   = {sq_geom<0>::ROWS, sq_geom<1>::ROWS, sq_geom<2>::ROWS};
#define SQ_MLX_ALL(X)                                                                                               \
    {X(GPU_AFFINE2), X(GPU_AFFINE3), X(GPU_AFFINE4), X(GPU_AFFINE5), X(GPU_AFFINE6), X(GPU_AFFINE8), X(GPU_MXFP4),  \
     X(GPU_NVFP4)}
#define SQ_MLX_STAGE(F) SQ_SIZES(SQ_GEOM_DEFAULT, F, STAGE)
    static const set_fn mlx_fns[8][3]   = SQ_MLX_ALL(SQ_MLX_FNS);
    static const int    mlx_stage[8][3] = SQ_MLX_ALL(SQ_MLX_STAGE);
    static_assert(sq_mlx_index(GPU_AFFINE8) == 5 && sq_mlx_index(GPU_MXFP4) == 6 && sq_mlx_index(GPU_NVFP4) == 7,
                  "SQ_MLX_ALL's order");
    static_assert(sq_shape<GPU_AFFINE3, 8, SQ_GEOM_DEFAULT>::THREADS == sq_shape<GPU_Q4_0, 8, SQ_GEOM_DEFAULT>::THREADS &&
                      sq_shape<GPU_AFFINE6, 32, SQ_GEOM_DEFAULT>::THREADS ==
                          sq_shape<GPU_Q4_0, 32, SQ_GEOM_DEFAULT>::THREADS,
                  "MLX blocks shaped as Q4_0's");
    const bool   mlx = sq_mlx_index(fmt) >= 0;
    const int    G = g->sq_geom, f = mlx ? sq_mlx_index(fmt) : fmt == GPU_Q8_0, s = T <= 8 ? 0 : T <= 16 ? 1 : 2;
    if (!gpu_mmq_batch_has(g, fmt))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no batch kernel for format %d here", CELER_GPU_NAME, fmt);
    const set_fn fn = mlx ? mlx_fns[f][s] : fns[G][xq->x8][f][s];
    const int    nthreads = threads[mlx ? SQ_GEOM_DEFAULT : G][mlx ? 0 : f][s]; /* MLX blocks as Q4_0's */
    const size_t smem = (size_t)stages[G] * (size_t)(mlx ? mlx_stage[f][s] : stage[G][f][s]);
    if (n < 1 || n > GPU_MVQ_SET)
        return celer_fail(err, CELER_ERR_INVALID, "%s: a set of %d products for the batch kernel (1 to 3)", CELER_GPU_NAME, n);
    if (T > GPU_MMQ_SMALL) { /* a chunk of GPU_MMQ_SMALL tokens at a time (gpu_mmq.h's GPU_MMQ_CHUNKED) */
        for (int64_t t0 = 0; t0 < T; t0 += GPU_MMQ_SMALL) {
            gpu_xq xc = *xq;
            xc.q += t0 * xc.nb * XQ_BLOCK, xc.d += t0 * xc.nb;
            float *yc[GPU_MVQ_SET];
            for (int i = 0; i < n; i++) yc[i] = y[i] + t0 * w[i].rows;
            const int64_t nt = T - t0 < (int64_t)GPU_MMQ_SMALL ? T - t0 : (int64_t)GPU_MMQ_SMALL;
            /* a last chunk as short as a step the decode kernels take runs there too (gpu_mmq.h's
             * GPU_MMQ_FROM: one token's pass of 14336 x 4096 Q4_0 took 14.1 us on them, 27.8 us on
             * this kernel's 8-token shape) */
            const bool rest = !gpu_mmq_takes(g, fmt, nt) && gpu_matvec_q8_has(fmt);
            if (rest ? gpu_matvec_q8(g, w, n, fmt, &xc, nt, yc, add, err)
                     : gpu_mmq_small_set(g, w, n, fmt, &xc, nt, yc, add, err))
                return err->code;
        }
        return CELER_OK;
    }
    if (gpu_allow_smem(g, (const void *)fn, smem, err)) return err->code;
    gpu_mmq_set  st   = {};
    gpu_mmq_sums sums = {};
    int64_t      blocks = 0, total = 0;
    int          sum_of[GPU_MVQ_SET] = {-1, -1, -1}; /* weight i's entry in sums */
    for (int i = 0; i < n; i++) {
        unsigned br;
        if (gpu_grid(g, w[i].rows, rows[G], &br, "mmq", err)) return err->code;
        /* each weight's own column parts, as in a launch of its own (the same sums), in all three
         * geometries */
        const int64_t parts = sq_parts(g, w[i].rows, w[i].cols, &st.kper[i]);
        st.w[i] = w[i], st.nb[i] = (int32_t)br, st.start[i] = (int32_t)blocks, st.y[i] = y[i], st.add[i] = add;
        blocks += (int64_t)br * parts;
        if (parts > 1) { /* its parts into the part buffer at total, then summed into y[i] */
            const int j = sum_of[i] = sums.n_w++;
            sums.n[j] = T * w[i].rows, sums.parts[j] = (int32_t)parts, sums.y[j] = y[i], st.add[i] = 0;
            sums.part[j] = (const float *)(uintptr_t)total; /* an offset until the buffer is there */
            total += parts * sums.n[j];
        }
    }
    for (int i = n; i <= GPU_MVQ_SET; i++) st.start[i] = (int32_t)blocks; /* none past the set */
    if (blocks > INT32_MAX)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld blocks for a batch product: past the grid",
                          CELER_GPU_NAME, (long long)blocks);
    if (total) {
        if (gpu_buf_reserve(g, &g->d_part, (size_t)total * sizeof(float), err)) return err->code;
        for (int i = 0; i < n; i++)
            if (sum_of[i] >= 0) {
                float *p = (float *)g->d_part.p + (uintptr_t)sums.part[sum_of[i]];
                sums.part[sum_of[i]] = p, st.y[i] = p;
            }
    }
    sums.add = add;
    /* never launched early: blocks placed while the kernel before still held SMs doubled up on
     * the free ones (the grid is about one block an SM), and the 8B's batch of 32 decoded at
     * 2,916 tok/s instead of 3,951 (docs/benchmarks/gpu-h200.md, eighteenth pass) */
    if (GPU_LAUNCH_KEEPING_XQ_AS(g, err, "mmq", false, fn, dim3((unsigned)blocks), nthreads, smem, st, *xq,
                                 T))
        return err->code;
    if (!total) return CELER_OK;
    return GPU_LAUNCH_KEEPING_XQ(g, err, "mmq_sum", k_mmq_sum_set, gpu_blocks(sums.n[0] + sums.n[1] + sums.n[2], 256),
                                 256, 0, sums);
}

celer_status gpu_mmq_small(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, int64_t T, float *y,
                           bool add, celer_error *err)
{
    return gpu_mmq_small_set(g, w, 1, fmt, xq, T, &y, add, err);
}

bool gpu_mmq_small_glus(const gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt, int64_t T)
{
    const bool mlx = fmt == GPU_AFFINE4 || fmt == GPU_AFFINE8;
    if (!CELER_GPU_IMMA || sq_glu_index(fmt) < 0 || T < 1 || T > GPU_MMQ_SMALL ||
        (g->mvq_x8 && !mlx) || g->sq_geom != SQ_GEOM_DEFAULT || !gpu_mmq_batch_has(g, fmt) || !sq_glu_pair(wg, wu))
        return false;
    int64_t kper; /* no column parts where gpu_mmq_small_set gives each weight its own: the same sums */
    return sq_parts(g, wg->rows, wg->cols, &kper) == 1;
}

celer_status gpu_mmq_small_glu(gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt, const gpu_xq *xq,
                               int64_t T, celer_act act, float *h, celer_error *err)
{
    typedef void (*glu_fn)(gpu_wdesc, gpu_wdesc, gpu_xq, int64_t, int, float *, gpu_xq_out);
    typedef sq_shape<GPU_Q4_0, 32, SQ_GEOM_DEFAULT> S;
#if CELER_GPU_IMMA
#define SQ_GLU_FNS(F) {k_mmq_s_glu<F, 8>, k_mmq_s_glu<F, 16>, k_mmq_s_glu<F, 32>}
    static const glu_fn fns[4][3] = {SQ_GLU_FNS(GPU_Q4_0), SQ_GLU_FNS(GPU_Q8_0), SQ_GLU_FNS(GPU_AFFINE4),
                                     SQ_GLU_FNS(GPU_AFFINE8)};
#undef SQ_GLU_FNS
#else
    static const glu_fn fns[4][3] = {{NULL, NULL, NULL}, {NULL, NULL, NULL}, {NULL, NULL, NULL}, {NULL, NULL, NULL}};
#endif
    static const int stage[4][3] = {SQ_SIZES(SQ_GEOM_DEFAULT, GPU_Q4_0, STAGE), SQ_SIZES(SQ_GEOM_DEFAULT, GPU_Q8_0, STAGE),
                                    SQ_SIZES(SQ_GEOM_DEFAULT, GPU_AFFINE4, STAGE),
                                    SQ_SIZES(SQ_GEOM_DEFAULT, GPU_AFFINE8, STAGE)};
    static_assert(sq_shape<GPU_Q8_0, 8, SQ_GEOM_DEFAULT>::THREADS == S::THREADS, "one block shape");
    if (!gpu_mmq_small_glus(g, wg, wu, fmt, T))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no one-launch gate/up and GLU of format %d for %lld tokens",
                          CELER_GPU_NAME, fmt, (long long)T);
    const int    f = sq_glu_index(fmt);
    const int    s = T <= 8 ? 0 : T <= 16 ? 1 : 2;
    const glu_fn fn = fns[f][s];
    const size_t smem = (size_t)S::SQ_STAGES * (size_t)stage[f][s];
    unsigned     blocks;
    gpu_xq_out   xo = {NULL, NULL, false};
    if (gpu_allow_smem(g, (const void *)fn, smem, err) || gpu_grid(g, wg->rows, S::SQ_ROWS / 2, &blocks, "mmq glu", err) ||
        gpu_xq_buffer_apart(g, T * wg->rows, xq, &xo, err))
        return err->code;
    gpu_forget_acts(g);
    /* never launched early, as the batch kernel (gpu_mmq_small_set) */
    if (GPU_LAUNCH_KEEPING_XQ_AS(g, err, "mmq glu", false, fn, blocks, S::THREADS, smem, *wg, *wu, *xq, T, (int)act,
                                 h, xo))
        return err->code;
    gpu_xq_held(g, h, T * wg->rows, xo);
    return CELER_OK;
}
