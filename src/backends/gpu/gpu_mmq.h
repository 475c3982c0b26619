/* The integer prefill kernels (gpu_mmq.cu): products of more than a decode step's tokens on the
 * integer matrix units, with the decode kernels' quantized activations. */
#ifndef CELER_BACKENDS_GPU_GPU_MMQ_H
#define CELER_BACKENDS_GPU_GPU_MMQ_H

#include "backends/gpu/gpu_matvec.h"
extern "C" {
#include "backends/gpu/moe_tiles.h"
}

/* Steps of more than GPU_MMQ_FROM tokens take the integer matrix units (fewer: the decode
 * kernels; CELER_GPU_MMQ_FROM=N moves the line, for comparisons); up to GPU_MMQ_SMALL tokens the
 * streaming kernel, past it the tiled one. The decode kernel's cost grows with the step's tokens
 * (it reads a weight byte into two dot products a token), the batch kernel's hardly below 16: on
 * the H200, 14336 x 4096 Q4_0 took 14.1 / 18.3 / 33.0 / 66.2 us at 1 / 2 / 4 / 8 tokens on the
 * first, 27.8 / 27.9 / 28.4 us at 2 / 4 / 8 on the second (docs/benchmarks/gpu-h200.md,
 * twentieth pass), and the 8B's 8 sequences decoding together went from 850 to 1,650 tok/s.
 * AMD has no batch kernel: its line is GPU_MMQ_FROM_AMX, one pass of the decode kernels (which
 * read the weights again for each further 8 tokens), and its steps up to GPU_MMQ_SMALL take the
 * tiled kernel in 32-token tiles (a 64-token tile's matrix work on padding halved). */
/* GPU_MMQ_CHUNKED: steps of more than GPU_MMQ_SMALL and at most this many tokens that the vendor
 * BLAS does not take run the batch kernel in chunks of GPU_MMQ_SMALL tokens (the formats it has:
 * gpu_mmq_batch_has) rather than the tiled kernel (CELER_GPU_MMQ_CHUNKED=N moves the line, 0 takes
 * the tile). On the H100 the 8B's 48 sequences decoding together ran at 4,631 tok/s in chunks,
 * 2,401 on the tile and 2,952 on the BLAS; 33 at 3,958 in chunks (the last one of a token on
 * the decode kernels, gpu_mmq_small_set), 1,771 on the tile (32: 4,736; docs/benchmarks/
 * gpu-h200.md, fiftieth pass). */
enum {
    GPU_MMQ_FROM = 2, GPU_MMQ_SMALL = 32, GPU_MMQ_FROM_AMX = GPU_MVQ_TOKENS, GPU_MMQ_FROM_TILED = 2 * GPU_MVQ_TOKENS,
    GPU_MMQ_FROM_NARROW = 4, GPU_MMQ_CHUNKED = 128
};

/* Whether this device and build run the format (enum gpu_fmt) on the integer matrix units: the
 * tiled kernel on NVIDIA's (sm_80 and later) or AMD's (g->amx); Q4_0, Q8_0 and MLX affine 4 and
 * 8 bits. */
bool         gpu_mmq_has(const gpu_backend *g, int fmt);
/* The step length past which a product of the format takes the matrix units here (with
 * gpu_mmq_has): g->mmq_from, but on NVIDIA at least GPU_MMQ_FROM_TILED for a format without the
 * batch kernel (MLX affine in the batch kernel's other geometries), whose steps of up to 32
 * tokens take one 32-token tile of the tiled kernel: on the H100, 14336 x 4096 affine 4-bit g64
 * took 49.6 / 99.0 / 193.5 us at 8 / 16 / 32 tokens on the decode kernels (a pass each 8), 105.1
 * / 112.8 us at 16 / 32 on the tile (docs/benchmarks/gpu-h200.md, forty-fifth pass). MLX affine 2
 * and 3 bits and nvfp4 take the batch kernel past GPU_MMQ_FROM_NARROW tokens: at 4 tokens the
 * decode kernels' one pass took 30.1 / 34.2 / 40.7 us of that shape, the batch kernel 35.1 / 45.2
 * / 52.8 (codes made bytes from words; nvfp4's two products a block), at 8 98.5 / 97.0 / 63.6
 * against 35.0 / 44.8 / 52.7 (forty-seventh pass). */
int64_t      gpu_mmq_from(const gpu_backend *g, int fmt);
/* Whether the batch kernel (gpu_mmq_small.cuh: mma.sync fragments, 32-lane warps) runs the
 * format here: NVIDIA's units only (not after a failed self-check, g->mmq_off); Q4_0 and Q8_0,
 * and MLX affine (2 to 8 bits), mxfp4 and nvfp4 in its default geometry (g->sq_geom). Without it
 * a step of a few tokens takes the tiled kernel, or for the formats it lacks the decode kernels. */
bool         gpu_mmq_batch_has(const gpu_backend *g, int fmt);
/* Whether a step of T tokens of the format takes the integer matrix units here: past gpu_mmq_from,
 * on the tiled kernel (gpu_mmq_has) or, up to GPU_MMQ_SMALL tokens, the batch kernel. */
bool         gpu_mmq_takes(const gpu_backend *g, int fmt, int64_t T);
/* The kind of AMD matrix units (CELER_AMX_*, amx_layout.h) the prefill kernel takes on device p
 * (current): the kind the loaded code reports if p's name agrees (celer_gfx_matrix_taken), else
 * CELER_AMX_NONE, as always in a CUDA build. */
int          gpu_amx_take(const gpuDeviceProp *p);
/* f->matrix: the device's integer matrix units and what this build runs on them (celer info). */
void         gpu_mmq_facts(const gpuDeviceProp *p, celer_device_facts *f);
/* y (T, w.rows) = x̂ · wᵀ (with add: y += x̂ · wᵀ), x quantized here (gpu_quant_x). */
celer_status gpu_mmq(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y, bool add,
                     celer_error *err);
/* The same with x already quantized (a product sharing its input with others). */
celer_status gpu_mmq_xq(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, int64_t T, float *y,
                        bool add, celer_error *err);

/* The experts of a stacked tensor (w: its first; the rest follow, w.rows rows each) times their
 * tokens in one launch: (token, expert) pairs sorted by expert, expert e's from starts[e] to
 * starts[e + 1] (n_expert + 1 values on the device; max_n the most of any expert), pair s's
 * activations x̂'s row tok[s] (tok on the device; NULL: row s), its output y's row s. */
celer_status gpu_mmq_experts(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                             int64_t n_expert, const int32_t *starts, int64_t max_n, float *y, celer_error *err);

/* The same on the batch kernel (g->moe_stream, the default; on AMD the tiled kernel in 32-pair
 * tiles): n_tiles tiles of pairs of one expert on the device, as celer_moe_tile_list writes them
 * (moe_tiles.h); no block without work. With live (on the device), only the first *live of
 * them: the tiles of a decode step's choices, grouped on the device (gpu_moe.cu), n_tiles the
 * most there can be. */
celer_status gpu_mmq_expert_tiles(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                                  const int32_t *tiles, int64_t n_tiles, const int32_t *live, float *y,
                                  celer_error *err);
/* Whether gpu_mmq_expert_tiles_glu takes these stacked gate and up experts (format fmt): Q4_0,
 * Q8_0 or MLX affine 4 or 8 bits on NVIDIA's batch kernel, one shape, layout and groups, rows a
 * multiple of 32, g->glu_fuse. */
bool gpu_mmq_expert_tiles_glus(const gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt);
/* gpu_mmq_expert_tiles of the gate and the up experts (both levels of x̂), then the glu op over
 * the N pairs' rows, in one launch: h's row s = act(gate row) · up row, quantized for the down
 * products on the way out (gpu_xq_held), bit for bit the three launches (where
 * gpu_mmq_expert_tiles_glus). */
celer_status gpu_mmq_expert_tiles_glu(gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt,
                                      const gpu_xq *xq, const int32_t *tok, const int32_t *tiles, int64_t n_tiles,
                                      const int32_t *live, int64_t N, celer_act act, float *h, celer_error *err);
/* Whether gpu_mmq_expert_tiles runs the format here: on NVIDIA's batch kernel or AMD's units. */
bool gpu_mmq_tiles_has(const gpu_backend *g, int fmt);
#if CELER_GPU_AMX
/* gpu_mmq_expert_tiles on AMD's matrix units (gpu_mmq.cu's tiled kernel, one block a tile and
 * 64 rows). */
celer_status gpu_mmq_amx_tiles(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, const int32_t *tok,
                               const int32_t *tiles, int64_t n_tiles, const int32_t *live, float *y, celer_error *err);
#endif
/* MoE decode steps of at least GPU_MOE_GROUP tokens (a server's batch) group their choices by
 * expert on the device and take the kernel above, each chosen expert read once a step
 * (CELER_GPU_MOE_GROUP=N moves the line, 0: never). On the H200 the 30B-A3B's 32 sequences
 * decoding together went from 1,699 to 3,121 tok/s, its 8 from 1,009 to 1,057-1,069
 * (docs/benchmarks/gpu-h200.md, twentieth pass); fewer were not measured. */
enum { GPU_MOE_GROUP = 8 };

/* ---- shared by the tiled prefill kernel (gpu_mmq.cu) and the batch kernel (gpu_mmq_small.cuh) */

/* A product kernel over grid (row blocks, token tiles, column parts): (w, x̂, T, column blocks a
 * part, y, add). */
typedef void (*gpu_mmq_fn)(gpu_wdesc, gpu_xq, int64_t, int64_t, float *, int);
/* Column parts for a grid of `blocks` over nq column blocks taken `step` at a time: the grid
 * nearest to two blocks an SM; *kper: the column blocks of a part, whole steps. */
int64_t gpu_mmq_column_parts(const gpu_backend *g, int64_t blocks, int64_t nq, int64_t step, int64_t *kper);
/* fn over grid (br, bt, parts) into y, or into the backend's part buffer and then summed in part
 * order (with add: added to y); launched early only where early (and g->early). */
celer_status gpu_mmq_launch_parts(gpu_backend *g, gpu_mmq_fn fn, bool early, unsigned br, unsigned bt, int64_t parts,
                                  int threads, size_t smem, const gpu_wdesc *w, const gpu_xq *xq, int64_t T,
                                  int64_t kper, float *y, bool add, celer_error *err);
/* Whether a step of T tokens of the format takes the batch kernel here: up to GPU_MMQ_SMALL
 * tokens in one launch, up to g->mmq_chunked (GPU_MMQ_CHUNKED) a chunk of GPU_MMQ_SMALL at a time. */
static inline bool gpu_mmq_small_takes(const gpu_backend *g, int fmt, int64_t T)
{
    return (T <= GPU_MMQ_SMALL || T <= g->mmq_chunked) && gpu_mmq_batch_has(g, fmt);
}
/* gpu_mmq_xq's steps of more than GPU_MMQ_FROM tokens that gpu_mmq_small_takes (the batch
 * kernel). */
celer_status gpu_mmq_small(gpu_backend *g, const gpu_wdesc *w, int fmt, const gpu_xq *xq, int64_t T, float *y,
                           bool add, celer_error *err);
/* The same for n (1 .. GPU_MVQ_SET) weights of format fmt and one width on the same activations
 * (y[i] = x̂ · w[i]ᵀ, with add: +=) in one launch, and one more for the sums of those that take
 * column parts: each weight's parts and sums as in a launch of its own (the same outputs bit for
 * bit); past GPU_MMQ_SMALL tokens, so a chunk of that many at a time. The 8B's q/k/v took three
 * launches and three sums; its gate and up two grids of 112 blocks on 132 SMs. */
celer_status gpu_mmq_small_set(gpu_backend *g, const gpu_wdesc *w, int n, int fmt, const gpu_xq *xq, int64_t T,
                               float *const *y, bool add, celer_error *err);

/* Whether gpu_mmq_small_glu takes a step of T tokens of these gate and up weights (format fmt):
 * Q4_0, Q8_0 or MLX affine 4 or 8 bits on NVIDIA's batch kernel in its default geometry, both
 * levels of the activations, weights of one shape, layout and groups, rows a multiple of 32, and
 * no column parts where gpu_mmq_small_set would run the pair (so the same sums). */
bool gpu_mmq_small_glus(const gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt, int64_t T);
/* h (T, wg.rows) = act(x̂ · wgᵀ) · (x̂ · wuᵀ) in one launch of the batch kernel, h also quantized
 * for the product that reads it next (gpu_xq_held): gpu_mmq_small_set of the pair, then the glu
 * op, bit for bit (where gpu_mmq_small_glus). */
celer_status gpu_mmq_small_glu(gpu_backend *g, const gpu_wdesc *wg, const gpu_wdesc *wu, int fmt, const gpu_xq *xq,
                               int64_t T, celer_act act, float *h, celer_error *err);

/* The batch kernel's set (gpu_mmq_small_set): weight i's blocks from start[i] (start[GPU_MVQ_SET]:
 * the grid), nb[i] row blocks a column part of kper[i] column blocks, into y[i] (its part
 * buffer's region where it takes parts), add[i] as the product's. */
typedef struct {
    gpu_wdesc w[GPU_MVQ_SET];
    float    *y[GPU_MVQ_SET];
    int64_t   kper[GPU_MVQ_SET];
    int32_t   start[GPU_MVQ_SET + 1], nb[GPU_MVQ_SET], add[GPU_MVQ_SET];
} gpu_mmq_set;

static inline uint64_t gpu_sig_arg(uint64_t h, const gpu_mmq_set &s)
{
    for (int i = 0; i < GPU_MVQ_SET; i++)
        h = gpu_sig_args(h, s.w[i], s.y[i], s.kper[i], s.start[i], s.nb[i], s.add[i]);
    return gpu_sig_args(h, s.start[GPU_MVQ_SET]);
}

/* Their sums: the first n_w entries, part[j] holding parts[j] parts of n[j] values (n[j] 0 past
 * n_w), summed into y[j] (with add: added to it). */
typedef struct {
    const float *part[GPU_MVQ_SET];
    float       *y[GPU_MVQ_SET];
    int64_t      n[GPU_MVQ_SET];
    int32_t      parts[GPU_MVQ_SET], n_w, add;
} gpu_mmq_sums;

static inline uint64_t gpu_sig_arg(uint64_t h, const gpu_mmq_sums &s)
{
    for (int i = 0; i < GPU_MVQ_SET; i++) h = gpu_sig_args(h, s.part[i], s.y[i], s.n[i], s.parts[i]);
    return gpu_sig_args(h, s.n_w, s.add);
}

/* Whether format F is MLX affine (4 or 8 bits on the matrix units): each block's bias times the
 * token block's Σ x̂ is added to its scaled sum. */
template <int F> static __host__ __device__ constexpr bool mmq_affine() { return F == GPU_AFFINE4 || F == GPU_AFFINE8; }

/* Bytes 0..15 of v minus 8, as signed bytes (no borrow between bytes). */
static __device__ __forceinline__ int minus8(uint32_t v)
{
    return (int)((v | 0x80808080u) - 0x08080808u) ^ (int)0x80808080u;
}

/* Tile blockIdx.y of a MoE step's list (moe_tiles.h: CELER_MOE_TILE ints a tile, its first pair,
 * its pairs and its expert): *s0 and *n, and the expert's offset in bytes from the first one's
 * (experts `stride` bytes apart); false past the first *live tiles (live written on the device,
 * the grid the most there can be). */
static __device__ __forceinline__ bool moe_tile_at(const int32_t *__restrict__ tiles, const int32_t *__restrict__ live,
                                                   int64_t stride, int64_t *s0, int64_t *n, int64_t *off)
{
    if (live && (int64_t)blockIdx.y >= *live) return false;
    const int32_t *tl = tiles + CELER_MOE_TILE * (int64_t)blockIdx.y;
    *s0 = tl[0], *n = tl[1], *off = tl[2] * stride;
    return true;
}

/* An output: v, or with add y's value plus v (the add the product's output would meet next). */
static __device__ __forceinline__ void mmq_put(float *y, float v, int add) { *y = add ? __fadd_rn(*y, v) : v; }

#endif
