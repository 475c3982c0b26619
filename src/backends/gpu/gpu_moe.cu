/* Mixture of experts on the GPU. Routing is a kernel (softmax, top-k in the CPU's order: most
 * probable first, ties to the lower index). Decode-sized steps (up to MOE_DEVICE_MAX token-expert
 * pairs) whose experts are stacked run each pair's gate, up and down products in place, the
 * choices read on the device (recordable in a step graph). Otherwise the FFN reads the choices
 * back to the host, groups the (token, slot) pairs by expert, and runs the gate, up and down
 * products over each chosen expert's group (a prefill chunk reads each chosen expert once): one
 * launch a product over all the experts where the integer matrix units take the format (the
 * batch kernel over a list of tiles of up to 32 of an expert's pairs, gpu_mmq_expert_tiles — on
 * AMD the tiled kernel over the same list — or with CELER_GPU_MOE_STREAM=0 the tiled kernel over
 * every expert, gpu_mmq_experts; both read each pair's token row
 * in place), else a product per chosen expert on the group's inputs gathered into one block. A
 * last kernel sums each token's weighted expert outputs (a decode step's down products sum them
 * themselves where they can: gpu_matvec_combine.cu). Unchosen experts are never touched.
 * Decode-sized steps of GPU_MOE_GROUP tokens and more (gpu_mmq.h) group their choices on the
 * device instead (recordable still) and take the grouped path's kernels. */
#include "backends/gpu/gpu_mmq.h"
#include "backends/gpu/gpu_route.cuh"

extern "C" {
#include "backends/gpu/gpu_ports.h"
}

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 256, MOE_DEVICE_MAX = 256 };

/* A group of 32 lanes per token (gpu_route.cuh). */
__global__ void k_moe_route(const float *__restrict__ logits, int64_t T, int64_t E, int64_t K, int renorm,
                            int32_t *__restrict__ ids, float *__restrict__ w)
{
    gpu_dep_enter();
    const int64_t t    = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const bool    live = t < T; /* every lane takes part in its group's shuffles */
    const int64_t tt   = live ? t : 0;
    gpu_route_token(logits + tt * E, E, K, renorm, (int)(threadIdx.x % 32), live, ids + tt * K, w + tt * K);
}

celer_status gpu_moe_route(celer_backend *be, const float *logits, int64_t T, int64_t n_expert, int64_t n_used,
                           bool renorm, int32_t *ids, float *w, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (n_expert <= 0 || n_used <= 0 || n_used > n_expert)
        return celer_fail(err, CELER_ERR_INVALID, "%s: MoE routing of %lld experts to %lld per token", CELER_GPU_NAME,
                          (long long)n_expert, (long long)n_used);
    if (T <= 0) return CELER_OK;
    unsigned blocks;
    if (gpu_grid(g, T * 32, THREADS, &blocks, "moe_route", err)) return err->code;
    /* it writes only the choices: the router input's held quantization (the experts' input) stays */
    return GPU_LAUNCH_KEEPING_XQ(g, err, "moe_route", k_moe_route, blocks, THREADS, 0, logits, T, n_expert, n_used, renorm,
                      ids, w);
}

/* xs[n] = x[tok[n]] (rows of d) */
__global__ void k_gather(const float *__restrict__ x, const int32_t *__restrict__ tok, int64_t N, int64_t d,
                         float *__restrict__ xs)
{
    gpu_dep_enter();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < N * d; i += (int64_t)gridDim.x * blockDim.x)
        xs[i] = x[(int64_t)tok[i / d] * d + i % d];
}

/* out[t] = Σ_j w[t, j] · ys[at[t, j]] (at NULL: ys[t · K + j]), j in order, each step one fused
 * multiply-add (as gpu_matvec_q8_combine) */
__global__ void k_combine(const float *__restrict__ ys, const int32_t *__restrict__ at, const float *__restrict__ w,
                          int64_t T, int64_t K, int64_t d, float *__restrict__ out)
{
    gpu_dep_enter();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < T * d; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t t = i / d, c = i % d;
        float         s = 0.0f;
        for (int64_t j = 0; j < K; j++) s = __fmaf_rn(w[t * K + j], ys[(at ? (int64_t)at[t * K + j] : t * K + j) * d + c], s);
        out[i] = s;
    }
}

/* Whether the n experts of a projection lie one after another in one stacked tensor (views of
 * it), with an integer decode kernel: then *d describes the first and *fmt its format. */
static bool stacked(const celer_weight *ws, int64_t n, gpu_wdesc *d, int *fmt)
{
    celer_error none;
    if (gpu_weight_desc(&ws[0], d, fmt, &none) || !gpu_matvec_q8_has(*fmt)) return false;
    const int64_t bytes = d->rows * d->row_bytes;
    for (int64_t e = 1; e < n; e++)
        if (ws[e].type != ws[0].type || ws[e].rows != ws[0].rows ||
            (const uint8_t *)ws[e].data != (const uint8_t *)ws[0].data + e * bytes)
            return false;
    return true;
}

/* Whether a decode step of K choices a token takes the combining down products (which can add
 * to their output). */
static bool moe_combines(const gpu_backend *g, int64_t K) { return g->moe_combine && gpu_matvec_q8_combines(K); }

/* Decode-sized steps: every selection multiplied in place by its expert's rows, the choices
 * never leaving the device (a step graph can record it). Each selection reads its expert's
 * weights, so a step of many tokens takes the grouped path below instead. The experts' products
 * here and below take both levels of the activations, CELER_GPU_MVQ_X8 or not: 8-bit ones (in the
 * variable's first form) moved the tiny MoE models of tests/data off the CPU's tokens at 19 and
 * 41 decided positions (the router turns small differences into other experts). */
static celer_status moe_ffn_device(gpu_backend *g, const celer_moe *moe, const float *x, int64_t T,
                                   const int32_t *ids, const float *w, int64_t K, celer_act act, float *out,
                                   bool add, const gpu_wdesc dw[3], const int fw[3], celer_error *err)
{
    const int64_t ff = moe->n_ff, d = moe->down[0].rows, N = T * K;
    gpu_buf      *b_gate = &g->moe[3], *b_up = &g->moe[4], *b_ys = &g->moe[5];
    gpu_xq        xq;
    if (gpu_buf_reserve(g, b_gate, (size_t)(N * ff) * 4, err) || gpu_buf_reserve(g, b_up, (size_t)(N * ff) * 4, err) ||
        gpu_buf_reserve(g, b_ys, (size_t)(N * d) * 4, err))
        return err->code;
    float     *G = (float *)b_gate->p, *U = (float *)b_up->p, *Y = (float *)b_ys->p;
    float     *gu[2] = {G, U};
    gpu_mv_sel by_token = {ids, (int32_t)K, (int32_t)moe->n_expert}, each = {ids, 1, (int32_t)moe->n_expert};
    if (gpu_quant_x(g, x, T, dw[0].cols, false, &xq, err)) return err->code;
    if (g->glu_fuse && gpu_matvec_q8_glus(&dw[0], &dw[1])) { /* gate, up and GLU: one launch */
        if (gpu_matvec_q8_glu(g, &dw[0], &dw[1], fw[0], &xq, N, &by_token, act, G, err)) return err->code;
    } else if (gpu_matvec_q8_sel(g, dw, 2, fw[0], &xq, T, &by_token, N, gu, err) ||
               g->base.ops->glu(&g->base, G, U, N * ff, act, err))
        return err->code;
    if (gpu_quant_x(g, G, N, ff, false, &xq, err)) return err->code;
    if (moe_combines(g, K)) /* the down products and their sum: one launch */
        return gpu_matvec_q8_combine(g, &dw[2], fw[2], &xq, &each, T, K, w, out, add, err);
    if (add) return celer_fail(err, CELER_ERR_INVALID, "%s: an MoE step added in place off the combining kernel",
                               CELER_GPU_NAME);
    if (gpu_matvec_q8_sel(g, &dw[2], 1, fw[2], &xq, N, &each, N, &Y, err)) return err->code;
    return GPU_LAUNCH(g, err, "moe combine", k_combine, gpu_blocks(T * d, THREADS), THREADS, 0, Y,
                      (const int32_t *)NULL, w, T, K, d, out);
}

/* The expert groups on the device, as one of the two kernels takes them: the tiled kernel's
 * starts and longest group, or the batch kernel's tile list. */
typedef struct {
    bool           tiles; /* d holds tiles (the batch kernel's), not starts */
    const int32_t *d;     /* starts (E + 1 values), or the tiles */
    int64_t        n;     /* the longest group, or the tiles (with live: the most there can be) */
    int64_t        n_e;   /* the experts */
    const int32_t *live;  /* the tiles in use, on the device (k_moe_group), or NULL: all n */
} moe_groups;

/* y = the groups' products with the stacked experts w (pair s's input x̂'s row tok[s]; tok NULL:
 * row s). */
static celer_status group_products(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                                   const moe_groups *gr, float *y, celer_error *err)
{
    if (gr->tiles) return gpu_mmq_expert_tiles(g, w, fmt, xq, tok, gr->d, gr->n, gr->live, y, err);
    return gpu_mmq_experts(g, w, fmt, xq, tok, gr->n_e, gr->d, gr->n, y, err);
}

/* The grouped products of the N pairs (pair s's input x's row tok[s], T rows of d): gate and up,
 * the GLU, down into Y's row s, one launch a product on the integer matrix units (gate, up and
 * the GLU one launch of the batch kernel's tiles where gpu_mmq_expert_tiles_glus). x is quantized
 * once, its rows read in place (a gathered copy of the pairs' inputs and its quantization took 8%
 * of a 30B-A3B pp512). */
static celer_status group_chain(gpu_backend *g, const float *x, int64_t T, const int32_t *tok, int64_t N, int64_t d,
                                int64_t ff, const moe_groups *gr, celer_act act, const gpu_wdesc dw[3],
                                const int fw[3], float *G, float *U, float *Y, celer_error *err)
{
    gpu_xq     xq;
    const bool one = gr->tiles && fw[0] == fw[1] && gpu_mmq_expert_tiles_glus(g, &dw[0], &dw[1], fw[0]);
    if (gpu_quant_x(g, x, T, d, false, &xq, err)) return err->code;
    if (one ? gpu_mmq_expert_tiles_glu(g, &dw[0], &dw[1], fw[0], &xq, tok, gr->d, gr->n, gr->live, N, act, G, err) != CELER_OK
            : group_products(g, &dw[0], fw[0], &xq, tok, gr, G, err) ||
                  group_products(g, &dw[1], fw[1], &xq, tok, gr, U, err) ||
                  g->base.ops->glu(&g->base, G, U, N * ff, act, err))
        return err->code;
    if (gpu_quant_x(g, G, N, ff, false, &xq, err)) return err->code;
    return group_products(g, &dw[2], fw[2], &xq, NULL, gr, Y, err);
}

/* A decode step's N ≤ MOE_DEVICE_MAX choices (K a token, E ≤ GROUP_E_MAX experts) grouped by
 * expert on the device, in one block, as gpu_moe_ffn groups a prefill's on the host: pair n's
 * slot at[n] (expert by expert, in pair order within one), slot s's token tok[s], and the batch
 * kernel's tiles as celer_moe_tile_list lists them, *n_tiles of them. A pair's rank among its
 * expert's: its 32-pair chunk's earlier pairs of that expert (32 shuffles) and the earlier
 * chunks' counts; the experts' pair and tile counts, a thread an expert, scanned in shared
 * memory. */
enum { GROUP_THREADS = MOE_DEVICE_MAX, GROUP_CHUNKS = GROUP_THREADS / 32, GROUP_E_MAX = GROUP_THREADS };
__global__ void __launch_bounds__(GROUP_THREADS)
    k_moe_group(const int32_t *__restrict__ ids, int32_t N, int32_t K, int32_t E, int32_t *__restrict__ tok,
                int32_t *__restrict__ at, int32_t *__restrict__ tiles, int32_t *__restrict__ n_tiles)
{
    gpu_dep_enter(); /* the router wrote the choices */
    __shared__ int32_t ccnt[GROUP_CHUNKS][GROUP_E_MAX], first[GROUP_E_MAX];
    __shared__ int2    scan[GROUP_THREADS];
    const int          n = (int)threadIdx.x, c = n / 32, l = n % 32, base = (int)threadIdx.x % CELER_WARP / 32 * 32;
    const int32_t      e = n < N ? ids[n] : -1;
    const bool         ok = e >= 0 && e < E; /* the router never gives another */
    for (int k = 0; k < GROUP_CHUNKS; k++) ccnt[k][n] = 0;
    int before = 0; /* this chunk's earlier pairs of the same expert */
    for (int j = 0; j < 32; j++) {
        const int32_t o = gpu_shfl(e, base + j);
        before += j < l && o == e;
    }
    __syncthreads();
    if (ok) atomicAdd(&ccnt[c][e], 1);
    __syncthreads();
    int2 own = make_int2(0, 0); /* expert n's pairs and tiles */
    if (n < E)
        for (int k = 0; k < GROUP_CHUNKS; k++) own.x += ccnt[k][n];
    own.y     = (own.x + CELER_MOE_TILE_PAIRS - 1) / CELER_MOE_TILE_PAIRS;
    scan[n]   = own;
    __syncthreads();
    for (int o = 1; o < GROUP_THREADS; o *= 2) { /* inclusive scan */
        const int2 a = n >= o ? scan[n - o] : make_int2(0, 0);
        __syncthreads();
        scan[n].x += a.x, scan[n].y += a.y;
        __syncthreads();
    }
    const int2 from = make_int2(scan[n].x - own.x, scan[n].y - own.y);
    if (n < E) first[n] = from.x;
    for (int j = 0; j < own.y; j++) {
        int32_t *tl = tiles + CELER_MOE_TILE * (from.y + j);
        const int left = own.x - CELER_MOE_TILE_PAIRS * j;
        tl[0] = from.x + CELER_MOE_TILE_PAIRS * j, tl[1] = left < CELER_MOE_TILE_PAIRS ? left : CELER_MOE_TILE_PAIRS;
        tl[2] = n;
    }
    if (n == GROUP_THREADS - 1) *n_tiles = scan[n].y;
    __syncthreads();
    if (n >= N) return;
    if (!ok) {
        at[n] = 0;
        return;
    }
    for (int k = 0; k < c; k++) before += ccnt[k][e];
    const int32_t s = first[e] + before;
    at[n] = s, tok[s] = n / K;
}

/* A decode step of at least g->moe_group tokens (gpu_mmq.h's GPU_MOE_GROUP), its choices grouped on the
 * device (k_moe_group) and each chosen expert read once for all its tokens on the batch kernel,
 * where the path above reads an expert's weights for each of its choices: recordable like it,
 * the grouped path's products and sums. */
static celer_status moe_ffn_grouped_device(gpu_backend *g, const float *x, int64_t T, const int32_t *ids,
                                           const float *w, int64_t K, int64_t E, int64_t d, int64_t ff,
                                           celer_act act, float *out, const gpu_wdesc dw[3], const int fw[3],
                                           celer_error *err)
{
    const int64_t N = T * K, most = celer_moe_tiles_max(N, E);
    gpu_buf *b_tok = &g->moe[0], *b_at = &g->moe[1], *b_gate = &g->moe[3], *b_up = &g->moe[4], *b_ys = &g->moe[5],
            *b_groups = &g->moe[6];
    if (gpu_buf_reserve(g, b_tok, (size_t)N * 4, err) || gpu_buf_reserve(g, b_at, (size_t)N * 4, err) ||
        gpu_buf_reserve(g, b_gate, (size_t)(N * ff) * 4, err) || gpu_buf_reserve(g, b_up, (size_t)(N * ff) * 4, err) ||
        gpu_buf_reserve(g, b_ys, (size_t)(N * d) * 4, err) ||
        gpu_buf_reserve(g, b_groups, (size_t)(CELER_MOE_TILE * most + 1) * 4, err))
        return err->code;
    int32_t         *tok = (int32_t *)b_tok->p, *at = (int32_t *)b_at->p, *tiles = (int32_t *)b_groups->p;
    int32_t         *live = tiles + CELER_MOE_TILE * most;
    float           *G = (float *)b_gate->p, *U = (float *)b_up->p, *Y = (float *)b_ys->p;
    const moe_groups gr = {true, tiles, most, E, live};
    if (GPU_LAUNCH_KEEPING_XQ(g, err, "moe group", k_moe_group, 1, GROUP_THREADS, 0, ids, (int32_t)N, (int32_t)K,
                              (int32_t)E, tok, at, tiles, live) ||
        group_chain(g, x, T, tok, N, d, ff, &gr, act, dw, fw, G, U, Y, err))
        return err->code;
    return GPU_LAUNCH(g, err, "moe combine", k_combine, gpu_blocks(T * d, THREADS), THREADS, 0, Y, (const int32_t *)at,
                      w, T, K, d, out);
}

/* The products of the grouped path, expert groups at start[e] .. start[e + 1] of the N pairs
 * (listed on the host), pair s's input x's row tok[s] (tok on the device): group_chain on the
 * tiled kernel, or with g->moe_stream the batch kernel over a tile list written into h (host room
 * for celer_moe_tiles_max tiles). */
static celer_status grouped_mmq(gpu_backend *g, const float *x, int64_t T, const int32_t *tok, int64_t N, int64_t d,
                                int64_t ff, const int32_t *start, int64_t E, int32_t *h, celer_act act,
                                const gpu_wdesc dw[3], const int fw[3], float *G, float *U, float *Y, celer_error *err)
{
    gpu_buf       *b_groups = &g->moe[6];
    const bool     tiles    = g->moe_stream && gpu_mmq_tiles_has(g, fw[0]) && gpu_mmq_tiles_has(g, fw[2]);
    moe_groups     gr       = {tiles, NULL, 0, E, NULL};
    const int32_t *src      = start; /* what goes up: count values */
    int64_t        count    = E + 1;
    if (gr.tiles)
        gr.n = celer_moe_tile_list(start, E, h), src = h, count = CELER_MOE_TILE * gr.n;
    else
        for (int64_t e = 0; e < E; e++) gr.n = start[e + 1] - start[e] > gr.n ? start[e + 1] - start[e] : gr.n;
    if (gpu_buf_reserve(g, b_groups, (size_t)count * 4, err) || gpu_upload(g, b_groups->p, src, (size_t)count * 4, err))
        return err->code;
    gr.d = (const int32_t *)b_groups->p;
    return group_chain(g, x, T, tok, N, d, ff, &gr, act, dw, fw, G, U, Y, err);
}

/* The same a product per chosen expert, through the matmul op (any format). */
static celer_status per_expert(gpu_backend *g, const celer_moe *moe, const float *xs, int64_t N, int64_t d, int64_t ff,
                               const int32_t *start, int64_t E, celer_act act, float *G, float *U, float *Y,
                               celer_error *err)
{
    const celer_backend_ops *op = g->base.ops;
    for (int64_t e = 0; e < E; e++) {
        int64_t s = start[e], n = start[e + 1] - start[e];
        if (!n) continue;
        if (op->matmul(&g->base, &moe->gate[e], xs + s * d, n, G + s * ff, err) ||
            op->matmul(&g->base, &moe->up[e], xs + s * d, n, U + s * ff, err))
            return err->code;
    }
    if (op->glu(&g->base, G, U, N * ff, act, err)) return err->code;
    for (int64_t e = 0; e < E; e++) {
        int64_t s = start[e], n = start[e + 1] - start[e];
        if (n && op->matmul(&g->base, &moe->down[e], G + s * ff, n, Y + s * d, err)) return err->code;
    }
    return CELER_OK;
}

/* The path a step of T tokens, K experts a token, takes: decode-sized ones on the device (each
 * pair in place, or grouped by expert there), others grouped on the host; dw and fw the
 * projections' descriptors and formats, *st whether the experts are stacked (every device path's
 * need, and the host path's batch kernel's). */
typedef enum { MOE_IN_PLACE, MOE_GROUPED_DEVICE, MOE_HOST } moe_path;

static moe_path moe_path_of(const gpu_backend *g, const celer_moe *moe, int64_t T, int64_t K, gpu_wdesc dw[3],
                            int fw[3], bool *st)
{
    const int64_t E = moe->n_expert;
    *st = stacked(moe->gate, E, &dw[0], &fw[0]) && stacked(moe->up, E, &dw[1], &fw[1]) &&
          stacked(moe->down, E, &dw[2], &fw[2]) && fw[0] == fw[1] && dw[0].cols == dw[1].cols && dw[2].cols == moe->n_ff;
    if (T * K > MOE_DEVICE_MAX || !*st) return MOE_HOST;
    return g->moe_group > 0 && T >= g->moe_group && E <= GROUP_E_MAX && gpu_mmq_tiles_has(g, fw[0]) &&
                   gpu_mmq_tiles_has(g, fw[2])
               ? MOE_GROUPED_DEVICE
               : MOE_IN_PLACE;
}

static celer_status moe_check(const celer_moe *moe, int64_t K, celer_error *err)
{
    if (moe->n_expert <= 0 || moe->n_expert > 1024 || K <= 0 || K > moe->n_expert)
        return celer_fail(err, CELER_ERR_INVALID, "%s: MoE of %lld experts (1 to 1024), %lld per token",
                          CELER_GPU_NAME, (long long)moe->n_expert, (long long)K);
    return CELER_OK;
}

celer_status gpu_moe_ffn(celer_backend *be, const celer_moe *moe, const float *x, int64_t T, const int32_t *ids,
                         const float *w, int64_t n_used, celer_act act, float *out, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    int64_t      E = moe->n_expert, ff = moe->n_ff, d = moe->down[0].rows, K = n_used, N = T * K;
    if (gpu_alive(g, err) || moe_check(moe, K, err)) return err->code;
    if (T <= 0) return CELER_OK;
    gpu_wdesc      dw[3];
    int            fw[3];
    bool           st;
    const moe_path path = moe_path_of(g, moe, T, K, dw, fw, &st);
    if (path == MOE_GROUPED_DEVICE) /* decode-sized: the choices stay on the device */
        return moe_ffn_grouped_device(g, x, T, ids, w, K, E, d, ff, act, out, dw, fw, err);
    if (path == MOE_IN_PLACE) return moe_ffn_device(g, moe, x, T, ids, w, K, act, out, false, dw, fw, err);
    if (g->rec != GPU_REC_EAGER) { /* it groups the tokens by expert on the host: not recordable */
        gpu_graph_break(g, true);
        return CELER_OK;
    }
    /* the choices, on the host: pairs sorted by expert (stable: by token within an expert); after
     * them the batch kernel's tile list (g->moe_stream) */
    int32_t      *h;
    const int64_t room = N * 3 + E + 1 + (g->moe_stream ? CELER_MOE_TILE * celer_moe_tiles_max(N, E) : 0);
    if (gpu_host_stage(g, (size_t)room * sizeof *h, (void **)&h, err)) return err->code;
    int32_t *hid = h, *tok = h + N, *at = h + 2 * N, *start = h + 3 * N, *tiles = start + E + 1;
    if (g->base.ops->read(&g->base, ids, hid, (size_t)N * sizeof *hid, err)) return err->code;
    memset(start, 0, (size_t)(E + 1) * sizeof *start);
    for (int64_t n = 0; n < N; n++) {
        if (hid[n] < 0 || hid[n] >= E)
            return celer_fail(err, CELER_ERR_INVALID, "%s: expert id %d of %lld", CELER_GPU_NAME, hid[n], (long long)E);
        start[hid[n] + 1]++;
    }
    for (int64_t e = 0; e < E; e++) start[e + 1] += start[e];
    int32_t fill[1024];
    memcpy(fill, start, (size_t)E * sizeof *fill);
    for (int64_t n = 0; n < N; n++) {
        int32_t s = fill[hid[n]]++;
        tok[s]    = (int32_t)(n / K);
        at[n]     = s;
    }
    gpu_buf *b_tok = &g->moe[0], *b_at = &g->moe[1], *b_xs = &g->moe[2], *b_gate = &g->moe[3], *b_up = &g->moe[4],
            *b_ys = &g->moe[5];
    if (gpu_buf_reserve(g, b_tok, (size_t)N * 4, err) || gpu_buf_reserve(g, b_at, (size_t)N * 4, err) ||
        gpu_buf_reserve(g, b_gate, (size_t)(N * ff) * 4, err) || gpu_buf_reserve(g, b_up, (size_t)(N * ff) * 4, err) ||
        gpu_buf_reserve(g, b_ys, (size_t)(N * d) * 4, err) || gpu_upload(g, b_tok->p, tok, (size_t)N * 4, err) ||
        gpu_upload(g, b_at->p, at, (size_t)N * 4, err))
        return err->code;
    const int32_t *dtok = (const int32_t *)b_tok->p;
    float         *G = (float *)b_gate->p, *U = (float *)b_up->p, *Y = (float *)b_ys->p;
    celer_status   ps;
    if (st && gpu_mmq_has(g, fw[0]) && gpu_mmq_has(g, fw[2])) {
        ps = grouped_mmq(g, x, T, dtok, N, d, ff, start, E, tiles, act, dw, fw, G, U, Y, err);
    } else { /* the matmul op takes contiguous rows: the pairs' inputs gathered */
        if (gpu_buf_reserve(g, b_xs, (size_t)(N * d) * 4, err) ||
            GPU_LAUNCH(g, err, "moe gather", k_gather, gpu_blocks(N * d, THREADS), THREADS, 0, x, dtok, N, d,
                       (float *)b_xs->p))
            return err->code;
        ps = per_expert(g, moe, (const float *)b_xs->p, N, d, ff, start, E, act, G, U, Y, err);
    }
    if (ps) return ps;
    return GPU_LAUNCH(g, err, "moe combine", k_combine, gpu_blocks(T * d, THREADS), THREADS, 0, Y,
                      (const int32_t *)b_at->p, w, T, K, d, out);
}

/* The port moe_ffn_add: a step whose down products sum their selections themselves (the in-place
 * path, CELER_GPU_MOE_COMBINE not 0) adds that sum to y in the same kernel, where the next norm
 * added it (add_rmsnorm: 4.0 us a 30B-A3B layer on the H200, against 2.4-3.1 for the norm
 * alone); any other step as the fallback: moe_ffn into tmp, then add. */
extern "C" celer_status celer_gpu_moe_ffn_add(celer_backend *be, const celer_moe *moe, const float *x, int64_t T,
                                              const int32_t *ids, const float *w, int64_t n_used, celer_act act,
                                              float *y, float *tmp, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    gpu_wdesc    dw[3];
    int          fw[3];
    bool         st;
    if (gpu_alive(g, err) || moe_check(moe, n_used, err)) return err->code;
    if (T <= 0) return CELER_OK;
    if (moe_path_of(g, moe, T, n_used, dw, fw, &st) == MOE_IN_PLACE && moe_combines(g, n_used))
        return moe_ffn_device(g, moe, x, T, ids, w, n_used, act, y, true, dw, fw, err);
    if (gpu_moe_ffn(be, moe, x, T, ids, w, n_used, act, tmp, err)) return err->code;
    return gpu_add(be, y, tmp, T * moe->down[0].rows, err);
}
