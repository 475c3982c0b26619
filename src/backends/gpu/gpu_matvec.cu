/* Decode-step matrix products (1 to 8 tokens a pass) with integer dot products: the step's
 * activations are quantized once per product (k_quant_x, the CPU backend's X32 format: two
 * 8-bit levels, ~15 bits), and each weight format's codes are dotted with them four bytes at a
 * time (gpu_dp4a), scales applied per block. A warp takes MVQ_ROWS rows, its lanes consecutive
 * blocks ("units") of them, codes read with 128-bit loads (the SPLIT and MLX_ROWS layouts of
 * gpu_backend.h put them on 16-byte boundaries; Q5_K's are there as stored); up to
 * three weights of one input share a launch (celer_port_matmuls).
 *
 * Formats without a kernel here take float ones: F32, F16 and BF16 gpu_matvec_plain.cu's, MLX
 * mxfp8 the decode kernel of gpu_matmul.cu. */
#include "backends/gpu/gpu_kv.cuh"
#include "backends/gpu/gpu_mvq_units.cuh"
#include "backends/gpu/gpu_rope.cuh"

#include <string.h>

/* MVQ_KS: the column slices of a one-token pass whose grid is short of MVQ_KS_BELOW blocks an SM.
 * Measured on the H200 (tg128, side by side): before x was staged, slices below 2 blocks an SM
 * (the 8B's o and down, 256 blocks) ran 0.6% (8B) and 1.3% (30B-A3B) faster than below 4; four
 * slices, or MVQ_UNROLL 4, lost 6% and 9%. Under the short-grid rule (sliced grids of the simple
 * formats read x from global memory) slicing below 3 (the 8B's q/k/v, 384 blocks; the
 * 30B-A3B's, 320) ran 8B Q4_0 +2.0%, 30B-A3B +1.0% against below 2 (twenty-ninth pass). */
enum { MVQ_THREADS = 128, MVQ_KS = 2, MVQ_KS_BELOW = 3 };

/* ---- activations ------------------------------------------------------------------------- */

/* One group of 32 threads per block of 32 values. */
__global__ void k_quant_x(const float *__restrict__ x, int64_t n_blocks, gpu_xq_out o)
{
    gpu_dep_enter();
    const int64_t blk  = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int     i    = threadIdx.x % 32;
    const bool    live = blk < n_blocks; /* every lane takes part in the group's shuffles */
    const float   v[1] = {live ? x[blk * 32 + i] : 0.0f};
    xq_put<1>(v, i, blk, live, o);
}

/* n values' quantized blocks in buffer b: the codes, then the blocks' (d, d · S). */
static celer_status xq_in(gpu_backend *g, gpu_buf *b, int64_t n, gpu_xq_out *out, celer_error *err)
{
    const int64_t nb = n / 32;
    if (gpu_buf_reserve(g, b, (size_t)nb * (XQ_BLOCK + sizeof(float2)), err)) return err->code;
    out->q  = (int8_t *)b->p;
    out->dd = (float2 *)((int8_t *)b->p + nb * XQ_BLOCK);
    out->x8 = g->mvq_x8;
    return CELER_OK;
}

celer_status gpu_xq_buffer(gpu_backend *g, int64_t n, gpu_xq_out *out, celer_error *err)
{
    return xq_in(g, &g->d_xq, n, out, err);
}

celer_status gpu_xq_buffer_apart(gpu_backend *g, int64_t n, const gpu_xq *in, gpu_xq_out *out, celer_error *err)
{
    return xq_in(g, in->q == (const int8_t *)g->d_xq.p ? &g->d_xq2 : &g->d_xq, n, out, err);
}

celer_status gpu_quant_x(gpu_backend *g, const float *x, int64_t T, int64_t cols, bool x8, gpu_xq *xq,
                         celer_error *err)
{
    /* quantized by the kernel that wrote x, at these levels */
    const bool held = g->xq_src == x && g->xq_n == T * cols && g->xq_x8 == x8;
    gpu_xq_out o;
    unsigned   blocks;
    if (xq_in(g, held && g->xq_in2 ? &g->d_xq2 : &g->d_xq, T * cols, &o, err)) return err->code;
    o.x8  = x8;
    xq->q = o.q, xq->d = o.dd, xq->nb = cols / 32, xq->x8 = x8;
    if (held) return CELER_OK;
    if (gpu_grid(g, T * cols, 256, &blocks, "quant_x", err) ||
        GPU_LAUNCH(g, err, "quant_x", k_quant_x, blocks, 256, 0, x, T * cols / 32, o))
        return err->code;
    gpu_xq_held(g, x, T * cols, o);
    return CELER_OK;
}

/* Up to three weights of one format and one input: the blocks of a launch cover their rows in
 * turn (weight i has blocks b0[i] .. b0[i + 1]); with add, the products are added to y. */
typedef struct {
    gpu_wdesc w[GPU_MVQ_SET];
    float    *y[GPU_MVQ_SET];
    unsigned  b0[GPU_MVQ_SET + 1];
    int       add;
    gpu_mv_in in; /* q, k and v made attention inputs (in.kc: gpu_matvec_q8_inputs) */
} mv_set;

static inline uint64_t gpu_sig_arg(uint64_t h, const mv_set &s)
{
    for (int i = 0; i < GPU_MVQ_SET; i++) h = gpu_sig_args(h, s.w[i], s.y[i], s.b0[i]);
    return gpu_sig_args(h, s.b0[GPU_MVQ_SET], s.add, s.in);
}

/* The row weight k (0 q, 1 k, 2 v) of a q/k/v product of attention inputs stores as a warp's
 * row r0 + i (i < MVQ_ROWS, r0 a multiple of MVQ_ROWS). A warp takes its rows a RoPE pair at a
 * time: adjacent rows where the pairs are (CELER_ROPE_NORM), and in NEOX heads rows j and
 * j + n_rot / 2 of the head for its rows 2j and 2j + 1 (rows past n_rot, and v's, as they are).
 * Heads and n_rot are multiples of MVQ_ROWS (gpu_matvec_q8_inputs): a warp's rows are in one head,
 * all rotated or none. */
static __device__ __forceinline__ int64_t mv_in_row(const gpu_mv_in &in, int k, int64_t r0, int i)
{
    const int32_t j0 = (int32_t)r0 % in.hd;
    if (!in.neox || k == 2 || j0 >= in.n_rot) return r0 + i;
    return r0 - j0 / 2 + i / 2 + (i % 2) * (in.n_rot / 2);
}

/* A warp's one-token sums of weight k of a q/k/v product, its rows r0 .. (mv_in_row), stored
 * as the attention inputs' kernel would leave them (gpu_fused.cu, pairs rotated as gpu_head.cuh's
 * head_pair): q rotated in place; k and v as they are, and into the step's cache slot, k
 * rotated. Each warp holds whole pairs: no other block's sums are wanted. */
static_assert(MVQ_ROWS % 2 == 0, "a warp's rows hold whole RoPE pairs");
template <int NT>
static __device__ __forceinline__ void mv_put_inputs(const gpu_mv_in &in, int k, int64_t r0, int64_t rows,
                                                     const float (&acc)[MVQ_ROWS][NT], float *y)
{
    const int32_t p    = in.pos[0];
    const int64_t slot = (int64_t)in.tables[(int64_t)in.seq[0] * in.max_blocks + p / in.block_size] * in.block_size +
                         p % in.block_size;
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i += 2) {
        const int64_t r = r0 + i, j = r % in.hd; /* rows and heads are even */
        if (r >= rows) break;
        const int64_t a = mv_in_row(in, k, r0, i), b = mv_in_row(in, k, r0, i + 1); /* the pair's rows as stored */
        const float   x0 = acc[i][0], x1 = acc[i + 1][0];
        float         y0 = x0, y1 = x1;
        if (k < 2 && j < in.n_rot) {
            float c, s;
            gpu_rope_cos_sin(p, j / 2, in.freqs, in.pos_scale, in.mscale, &c, &s);
            y0 = __fmaf_rn(x0, c, -__fmul_rn(x1, s));
            y1 = __fmaf_rn(x0, s, __fmul_rn(x1, c));
        }
        if (k == 0) {
            y[a] = y0, y[b] = y1;
            continue;
        }
        y[a] = x0, y[b] = x1;
        if (in.f16) {
            uint16_t *c = (uint16_t *)(k == 1 ? in.kc : in.vc) + slot * in.kw;
            kv_put(c + a, y0), kv_put(c + b, y1);
        } else {
            float *c = (float *)(k == 1 ? in.kc : in.vc) + slot * in.kw;
            kv_put(c + a, y0), kv_put(c + b, y1);
        }
    }
}

/* MVQ_ROWS rows per warp, NT tokens (nt of them live) a pass. The lanes of a warp take
 * consecutive units of its rows (each load instruction reads a contiguous run of a row); a
 * lane loads its unit of every row, then dots them against the same activations, so that the
 * activations are read once per MVQ_ROWS rows (one read per row made the L1 the limit). With KS
 * = 2 a block has twice the warps, each row group's units split between two of them (units
 * alternate between the slices a warp's width at a time), their sums added in shared memory:
 * the grids of the 4096-row products of a decode step (256 blocks) left an SM 8 warps, too few
 * loads in flight for the memory's latency (ncu: 12% of the warps active, ~2 TB/s). X8 (one-token
 * passes of activations quantized to 8 bits, gpu_matvec.h): the high level only; half the dot
 * instructions and activation loads of both levels, which bound this loop
 * (dev/kernels/gpu_readpat.cu): 8B tg128 +9%, Q4_K_M +28% on the H200.
 * Q4_K's sliced pass is held to two blocks an SM (152 registers a lane left one: 8 warps an SM,
 * each few rounds of loads waiting with no other block's in flight; 128, no spills).
 * XS (one-token passes where xs_staged; sliced ones only for the K-quants): the block stages x
 * in shared memory once, after its first loads, and its lanes read their blocks from there
 * (gpu_mvq_units.cuh). Each block copies all of x after the wait, on the path of the product: a
 * sliced grid (fewer than MVQ_KS_BELOW blocks an SM) has few other blocks' loads to hide it
 * behind.
 * Harness, one-token Q4_0 products in a replayed step (µs, XS / not): unsliced 5120x2048 3.0 /
 * 3.5, 14336x4096 12.9 / 12.9; sliced 4096x4096 4.5 / 4.2, 4096x14336 12.9 / 11.2; Q8_0 alike;
 * Q4_K gains at every shape (its lanes' blocks scattered). tg128 with this rule against XS in
 * every pass: 8B Q4_0 +3.2%, Q8_0 +1.4%, 0.6B +4.1%, 30B-A3B the same.
 * WIDE (a sliced grid of more blocks than two an SM hold: the 8B's q/k/v, 384 blocks, and the
 * 30B-A3B's, 320): a unit a lane a round and three blocks an SM (ptxas, sm_90: Q4_0 118 → 77
 * registers, none spilling), so that every block is resident at the dependency wait with half of
 * its units requested, where two an SM left 120 of the 8B's blocks to load everything after it. */
template <int F, int NT, int KS, bool X8 = false, int SD = -1, bool XS = false, bool WIDE = false, bool IN = false>
__global__ void __launch_bounds__(MVQ_THREADS * KS, KS > 1 && F == GPU_Q4_K ? 2 : WIDE ? 3 : 0)
    k_mmvq(mv_set set, gpu_xq x, int nt, int64_t t0, gpu_mv_sel sel)
{
    gpu_dep_deferred(); /* a lane's first units are loaded before the wait: no kernel writes weights */
    static_assert(!XS || NT == 1, "activations staged for one token");
    static_assert(!IN || NT == 1, "attention inputs of one token");
    if (sel.ids) gpu_dep_enter(); /* the kernel before wrote the selections */
    constexpr int GROUPS = MVQ_THREADS / 32; /* row groups a block (wave64: half of them hold rows) */
    __shared__ float part[KS > 1 ? KS - 1 : 1][GROUPS][MVQ_ROWS][NT];
    int k = 0;
#pragma unroll
    for (int i = 1; i < GPU_MVQ_SET; i++) k += blockIdx.x >= set.b0[i];
    /* MLX rows: the descriptor by value, its fields kept in registers (by reference, each unit
     * reloaded the ones it reads: 34 of the affine4 loop's 524 instructions; Q4_0's loop took 6
     * more by value), its scales' dtype fixed by SD */
    typedef typename std::conditional<F >= GPU_AFFINE2 && F <= GPU_AFFINE8, gpu_wdesc, const gpu_wdesc &>::type wdesc_t;
    wdesc_t w = set.w[k];
    mvq_fix_sdtype<SD>(w);
    float *__restrict__ y = set.y[k] + t0 * w.rows;
    const uint8_t   *base = w.data;
    if (sel.ids) { /* selection blockIdx.y: its expert's rows, its token's activations, its own output rows */
        const int64_t n = blockIdx.y;
        const int32_t e = sel.ids[n];
        if (e < 0 || e >= sel.n_expert) return; /* the whole block: the router never gives one */
        base += (int64_t)e * w.rows * w.row_bytes;
        y = set.y[k] + n * w.rows;
        x.q += n / sel.per_x * x.nb * XQ_BLOCK, x.d += n / sel.per_x * x.nb;
    }
    const int     lane = threadIdx.x % CELER_WARP, wib = threadIdx.x / CELER_WARP, nwg = MVQ_THREADS / CELER_WARP;
    const int     grp = wib % nwg, ks = wib / nwg; /* the warp's row group and column slice */
    const int64_t r0   = ((int64_t)(blockIdx.x - set.b0[k]) * nwg + grp) * MVQ_ROWS;
    const bool    live = r0 < w.rows; /* a warp past the rows still meets the block's barrier */
    const uint8_t *rows[MVQ_ROWS];
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i++) { /* with IN, as mv_in_row says: a row exactly where r0 + i is one */
        const int64_t r = IN ? mv_in_row(set.in, k, r0, i) : r0 + i;
        rows[i]         = base + (r0 + i < w.rows ? r : 0) * w.row_bytes;
    }
    const int64_t nu = live ? units<F>(w.cols) : 0;
    float         acc[MVQ_ROWS][NT];
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = 0.0f;
    /* MVQ_UNROLL units a lane loaded before any is used: bytes in flight (one unit a lane left a
     * decode step's SMs with half of what the memory's latency wants); the K-quants one: their
     * scales and minimums, unpacked for two units, held so many registers that an SM kept few warps
     * (ptxas: Q4_K 210 → 128 registers with one, Q6_K 128 → 96; 8B Q4_K_M tg128 +7% on the H200).
     * Q6_K's sliced pass takes two again: in its unit-order layout (gpu_weights.cu) four loads a
     * unit, 75 → 128 registers, and a grid of two blocks an SM wants the bytes (8B Q4_K_M, its
     * down products: tg128 +1.7%) */
    constexpr int U  = F == GPU_Q5_K || F == GPU_Q4_K || (F == GPU_Q6_K && KS == 1) || WIDE ? 1 : MVQ_UNROLL;
    const int     SW = KS * CELER_WARP; /* units between a lane's consecutive ones */
    const int64_t u0 = ks * CELER_WARP + lane;
    raw_unit      ru[U][MVQ_ROWS];
    units_load<F, U>(w, rows, u0, nu, SW, ru);
    /* early (gpu_vendor.h): those loads overlap the kernel before, which wrote x and, with add, y
     * (with selections it was passed above: once a kernel, as a trace build counts them) */
    if (!sel.ids) gpu_dep_enter();
    /* with add, a one-token pass's outputs are read now, in flight with the dots' first loads,
     * where reading them at the end put an L2 round trip after the block's last sum */
    float yv[MVQ_ROWS] = {};
    if constexpr (NT == 1)
        if (set.add && lane == 0 && ks == 0)
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++) yv[i] = r0 + i < w.rows ? y[r0 + i] : 0.0f;
    auto rounds = [&](const auto &xsrc) {
        for (int64_t u = u0; u < nu; u += U * SW) {
            if (u != u0) units_load<F, U>(w, rows, u, nu, SW, ru);
#pragma unroll
            for (int j = 0; j < U; j++) /* the same units in the same order as one at a time */
                if (u + j * SW < nu) units_dot<F, NT, X8>(w, ru[j], u + j * SW, xsrc, nt, acc);
        }
    };
    if constexpr (XS) {
        GPU_DYN_SHARED(uint4, xs_mem);
        xs_fill<F, X8>(xs_mem, x);
        rounds(xs_view<F>(xs_mem, x.nb));
    } else {
        rounds(x);
    }
#pragma unroll
    for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[i][t] = gpu_warp_sum(acc[i][t]);
    if (KS > 1) {
        if (ks > 0 && lane == 0)
#pragma unroll
            for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
                for (int t = 0; t < NT; t++) part[ks - 1][grp][i][t] = acc[i][t];
        __syncthreads();
        if (ks > 0) return;
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
            for (int t = 0; t < NT; t++)
                for (int o = 0; o < KS - 1; o++) acc[i][t] += part[o][grp][i][t];
    }
    if constexpr (IN) { /* the attention inputs' rows (gpu_matvec_q8_inputs) */
        if (lane == 0 && live) mv_put_inputs<NT>(set.in, k, r0, w.rows, acc, y);
    } else {
#pragma unroll
        for (int i = 0; i < MVQ_ROWS; i++)
#pragma unroll
            for (int t = 0; t < NT; t++)
                if (t < nt && lane == 0 && r0 + i < w.rows) {
                    float *o = &y[t * w.rows + r0 + i];
                    *o       = set.add ? __fadd_rn(NT == 1 ? yv[i] : *o, acc[i][t]) : acc[i][t];
                }
    }
}

/* ---- dispatch ------------------------------------------------------------------------------- */

typedef void (*mmvq_fn)(mv_set, gpu_xq, int, int64_t, gpu_mv_sel);

/* A format's kernels: 1, 2, 4, 8 tokens a pass, one token in MVQ_KS column slices, the
 * two one-token ones with X8; then the four one-token ones again with the activations staged in
 * shared memory (XS, at MVQ_XS + mvq_xs_of(the one-token index)); then the sliced ones WIDE,
 * without X8 and with it (NULL for Q4_K and Q5_K: at three blocks an SM Q5_K spilled 260-356
 * bytes, and Q4_K's sliced pass already loads a unit a round at two; and for MLX affine 5 and 8
 * bits with f32 scales without X8, which spilled 36 and 32 (affine8 once the residual was read
 * early)). */
enum { MVQ_SLICED = 4, MVQ_X8 = 5, MVQ_X8_SLICED = 6, MVQ_XS = 7, MVQ_WIDE = 11, MVQ_FNS = 13 };
static int mvq_xs_of(int t1) { return MVQ_XS + (t1 ? t1 - MVQ_SLICED + 1 : 0); }
/* (none where three blocks an SM spill: the e2m1 formats' tables 52 and 76 bytes on sm_90a) */
template <int F, int SD, bool X8, bool IN = false> static constexpr mmvq_fn mvq_wide()
{
    if constexpr (F == GPU_Q4_K || F == GPU_Q5_K || ((F == GPU_AFFINE5 || F == GPU_AFFINE8) && SD == 0 && !X8) ||
                  ((F == GPU_MXFP4 || F == GPU_NVFP4) && !X8))
        return NULL;
    else return k_mmvq<F, 1, MVQ_KS, X8, SD, false, true, IN>;
}
#define MVQ_ROW(F, SD)                                                                                              \
    {                                                                                                               \
        F, SD, {                                                                                                    \
            k_mmvq<F, 1, 1, false, SD>, k_mmvq<F, 2, 1, false, SD>, k_mmvq<F, 4, 1, false, SD>,                     \
                k_mmvq<F, 8, 1, false, SD>, k_mmvq<F, 1, MVQ_KS, false, SD>, k_mmvq<F, 1, 1, true, SD>,             \
                k_mmvq<F, 1, MVQ_KS, true, SD>, k_mmvq<F, 1, 1, false, SD, true>,                                   \
                k_mmvq<F, 1, MVQ_KS, false, SD, true>, k_mmvq<F, 1, 1, true, SD, true>,                             \
                k_mmvq<F, 1, MVQ_KS, true, SD, true>, mvq_wide<F, SD, false>(), mvq_wide<F, SD, true>()             \
        }                                                                                                           \
    }
static const struct {
    int     fmt, sd; /* as MVQ_FORMATS names them */
    mmvq_fn fn[MVQ_FNS];
} MVQ[] = {MVQ_FORMATS(MVQ_ROW)};

/* The one-token kernels again, for q/k/v products that make their attention inputs (IN,
 * gpu_matvec_q8_inputs), in the formats whose files give a model's q, k and v one type (the
 * default model's Q4_1 among them; the K-quant mixes give v another) and MLX affine 4 and 8 bits
 * with 16-bit scales (mlx-community's checkpoints; f32 scales take the fallback); NULL where the
 * table above has several tokens. Apart, so that the epilogue's registers and stack (a
 * rotation's double sincos) stay out of every other product's kernels. */
#define MVQ_IN_ROW(F, SD)                                                                                           \
    {                                                                                                               \
        F, SD, {                                                                                                    \
            k_mmvq<F, 1, 1, false, SD, false, false, true>, NULL, NULL, NULL,                                       \
                k_mmvq<F, 1, MVQ_KS, false, SD, false, false, true>, k_mmvq<F, 1, 1, true, SD, false, false, true>, \
                k_mmvq<F, 1, MVQ_KS, true, SD, false, false, true>, k_mmvq<F, 1, 1, false, SD, true, false, true>,  \
                k_mmvq<F, 1, MVQ_KS, false, SD, true, false, true>, k_mmvq<F, 1, 1, true, SD, true, false, true>,   \
                k_mmvq<F, 1, MVQ_KS, true, SD, true, false, true>, mvq_wide<F, SD, false, true>(),                  \
                mvq_wide<F, SD, true, true>()                                                                       \
        }                                                                                                           \
    }
static const struct {
    int     fmt, sd;
    mmvq_fn fn[MVQ_FNS];
} MVQ_IN[] = {MVQ_IN_ROW(GPU_Q4_0, -1),   MVQ_IN_ROW(GPU_Q4_1, -1),   MVQ_IN_ROW(GPU_Q8_0, -1),
              MVQ_IN_ROW(GPU_AFFINE4, 1), MVQ_IN_ROW(GPU_AFFINE4, 2), MVQ_IN_ROW(GPU_AFFINE8, 1),
              MVQ_IN_ROW(GPU_AFFINE8, 2)};

static const mmvq_fn *mvq_of(int fmt, int sdtype, bool in)
{
    if (in) {
        const auto *r = mvq_row(MVQ_IN, fmt, sdtype);
        return r ? r->fn : NULL;
    }
    const auto *r = mvq_row(MVQ, fmt, sdtype);
    return r ? r->fn : NULL;
}

bool gpu_matvec_q8_has(int fmt) { return mvq_of(fmt, 0, false) != NULL; }

bool gpu_matvec_q8_inputs_has(int fmt, int sdtype) { return mvq_of(fmt, sdtype, true) != NULL; }

bool gpu_matvec_q8_inputs_heads(int64_t hd, int64_t n_rot)
{
    return hd >= MVQ_ROWS && hd <= INT32_MAX && hd % MVQ_ROWS == 0 && n_rot >= 0 && n_rot <= hd && n_rot % MVQ_ROWS == 0;
}

/* gpu_matvec_q8 and gpu_matvec_q8_sel, the products written (add false) or added to y. */
static celer_status mvq_launch(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                               const gpu_mv_sel *sel, int64_t n_sel, float *const *y, bool add, const gpu_mv_in *in,
                               celer_error *err)
{
    if (n < 1 || n > GPU_MVQ_SET)
        return celer_fail(err, CELER_ERR_INVALID, "%s: %d weights in one decode product", CELER_GPU_NAME, n);
    const mmvq_fn *fn = mvq_of(fmt, w[0].sdtype, in != NULL);
    mv_set         set;
    if (!fn)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: no integer decode kernel for format %d", CELER_GPU_NAME, fmt);
    for (int i = 1; i < n; i++)
        if (w[i].sdtype != w[0].sdtype)
            return celer_fail(err, CELER_ERR_INVALID, "%s: one decode product of weights whose scales differ in type",
                              CELER_GPU_NAME);
    if (sel && (n_sel < 1 || n_sel > GPU_MAX_GRID_YZ))
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: %lld expert selections in one product", CELER_GPU_NAME,
                          (long long)n_sel);
    memset(&set, 0, sizeof set);
    int64_t total = 0;
    for (int i = 0; i < GPU_MVQ_SET; i++) {
        unsigned blocks = 0;
        if (i < n && gpu_grid(g, w[i].rows, MVQ_ROWS * (MVQ_THREADS / g->prop.warpSize), &blocks, "matvec_q8", err))
            return err->code;
        set.b0[i] = (unsigned)total;
        if (i < n) set.w[i] = w[i], set.y[i] = y[i];
        total += blocks;
    }
    set.b0[GPU_MVQ_SET] = (unsigned)total;
    set.add             = add;
    if (in) set.in = *in;
    if (total > GPU_MAX_GRID_X)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: a decode product past the grid's limit", CELER_GPU_NAME);
    for (int i = n; i < GPU_MVQ_SET; i++) set.b0[i] = (unsigned)total; /* no blocks for the unused slots */
    /* one-token passes over a grid short of MVQ_KS_BELOW blocks an SM: column slices */
    const bool sliced = total * (sel ? n_sel : 1) < (int64_t)MVQ_KS_BELOW * g->prop.multiProcessorCount;
    /* one-token passes of 8-bit activations: the kernels that neither load nor multiply the low
     * codes (the others read them as zeros: the same sums, at twice the work) */
    const int  t0x = xq->x8 ? (sliced ? MVQ_X8_SLICED : MVQ_X8) : (sliced ? MVQ_SLICED : 0);
    const bool xs  = xs_staged(g, fmt, w[0].cols, sliced); /* the set's weights share x: the same cols */
    /* a sliced grid past two blocks an SM, not staged (the staged sliced passes are the K-quants'):
     * WIDE where the format has it */
    const int  tw  = MVQ_WIDE + (xq->x8 ? 1 : 0);
    const bool wd  = sliced && !xs && fn[tw] && total * (sel ? n_sel : 1) > 2 * (int64_t)g->prop.multiProcessorCount;
    const int  t1  = wd ? tw : xs ? mvq_xs_of(t0x) : t0x;
    const int  t1_threads = sliced ? MVQ_THREADS * MVQ_KS : MVQ_THREADS;
    const size_t t1_smem  = xs ? xs_bytes(w[0].cols) : 0;
    if (sel) /* one token each: a selection per grid row */
        return GPU_LAUNCH_KEEPING_XQ(g, err, "matvec_q8", fn[t1], dim3((unsigned)total, (unsigned)n_sel), t1_threads,
                                     t1_smem, set, *xq, 1, (int64_t)0, *sel);
    const gpu_mv_sel none = {NULL, 1, 0};
    for (int64_t t0 = 0; t0 < T; t0 += GPU_MVQ_TOKENS) {
        const int nt = (int)(T - t0 < (int64_t)GPU_MVQ_TOKENS ? T - t0 : (int64_t)GPU_MVQ_TOKENS);
        const int ix = nt == 1 ? t1 : nt == 2 ? 1 : nt <= 4 ? 2 : 3;
        gpu_xq    x  = *xq;
        x.q += t0 * x.nb * XQ_BLOCK;
        x.d += t0 * x.nb;
        if (GPU_LAUNCH_KEEPING_XQ(g, err, "matvec_q8", fn[ix], (unsigned)total, nt == 1 ? t1_threads : MVQ_THREADS,
                                  nt == 1 ? t1_smem : 0, set, x, nt, t0, none))
            return err->code;
    }
    return CELER_OK;
}

celer_status gpu_matvec_q8_sel(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                               const gpu_mv_sel *sel, int64_t n_sel, float *const *y, celer_error *err)
{
    return mvq_launch(g, w, n, fmt, xq, T, sel, n_sel, y, false, NULL, err);
}

celer_status gpu_matvec_q8(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                           float *const *y, bool add, celer_error *err)
{
    return mvq_launch(g, w, n, fmt, xq, T, NULL, 0, y, add, NULL, err);
}

celer_status gpu_matvec_q8_inputs(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const gpu_mv_in *in,
                                  float *const *y, celer_error *err)
{
    if (!in->kc || !in->vc || !gpu_matvec_q8_inputs_heads(in->hd, in->n_rot) || w[0].rows % in->hd ||
        w[0].rows > INT32_MAX ||
        w[1].rows != in->kw || w[2].rows != in->kw)
        return celer_fail(err, CELER_ERR_INVALID, "%s: q/k/v inputs of %lld, %lld and %lld rows (heads of %d, cache rows "
                          "of %lld)", CELER_GPU_NAME, (long long)w[0].rows, (long long)w[1].rows, (long long)w[2].rows,
                          (int)in->hd, (long long)in->kw);
    return mvq_launch(g, w, GPU_MVQ_SET, fmt, xq, 1, NULL, 0, y, false, in, err);
}
