/* Tokens drawn on the GPU, so that one id a row leaves the device instead of the row: the argmax
 * (greedy draws) and the sampler's draw (runtime/sampler.h defines it).
 *
 * The draw, in five kernels over each row's parts (the argmax's split): the parts' argmax pairs
 * (k_argmax_parts) give the largest logit; each part sums e = exp((l - max) / T) (in double,
 * rounded to float, as the host does) over a fixed tree, and the row's sum is the parts' in
 * order (the same sum every time); each probability is e / sum rounded to float. The parts then
 * count and sum the candidates (p >= min-p times the highest, p > 0) and count them by powers of
 * two; those above the lowest power of two that leaves at most SAMPLE_TOP (2,048) of them go to
 * the row's list, which one block sorts into the draw order (probability down, id up) and sums
 * as it runs. The cuts (top-k, then top-p) and the walk to u times the kept sum are decided on
 * the list when it reaches that far; a row whose draw goes past it (u deep in a long tail) is
 * left to the host: -1. When nothing is cut the walk goes in id order: the part where the parts'
 * sums pass u times the whole sum, then that part's values, a block-wide running sum at a time. Sums are fixed-point integers (a probability times 2^56, truncated):
 * exact, the same in any order, within 1e-11 of the host's sums in double; a float probability
 * differs from the host's only where the two sides' double exp differ in a last bit that
 * survives the rounding to float. */
#include "backends/gpu/gpu_backend.h"

#include <math.h>

enum { THREADS = 256 };

/* ---- argmax of rows, for greedy draws ------------------------------------------------ */

/* (value, index) pairs: the larger value, the lower index on ties; NaNs are never candidates. */
static __device__ __forceinline__ void better(float v, int64_t i, float *bv, int64_t *bi)
{
    if (v > *bv || (v == *bv && i < *bi)) *bv = v, *bi = i;
}

/* Two passes: ARGMAX_PARTS blocks a row each scan a contiguous part of it (a 128k vocabulary
 * is 4,000 values a block, where one block a row was latency-bound at ~200 us), then a block a
 * row takes the best of the parts' (value, index) pairs. A row whose first value is NaN gives
 * 0, as the sequential scan does; so does a row of NaNs. */
enum { ARGMAX_PARTS = 32, ARGMAX_MIN_PART = 1024 };

/* A row of n split into parts of part values for the argmax (the draw's passes take the same). */
static void argmax_split(int64_t n, int64_t *parts, int64_t *part)
{
    *parts = (n + ARGMAX_MIN_PART - 1) / ARGMAX_MIN_PART;
    if (*parts > ARGMAX_PARTS) *parts = ARGMAX_PARTS;
    *part = (n + *parts - 1) / *parts;
}

static __device__ void block_best(float *bv, int64_t *bi, float *sv, int64_t *si)
{
    sv[threadIdx.x] = *bv, si[threadIdx.x] = *bi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) better(sv[threadIdx.x + s], si[threadIdx.x + s], &sv[threadIdx.x], &si[threadIdx.x]);
        __syncthreads();
    }
    *bv = sv[0], *bi = si[0];
}

__global__ void k_argmax_parts(const float *__restrict__ x, int64_t n, int64_t part, float *__restrict__ pv,
                               int64_t *__restrict__ pi)
{
    gpu_dep_enter();
    __shared__ float   sv[THREADS];
    __shared__ int64_t si[THREADS];
    const float       *row = x + (int64_t)blockIdx.y * n;
    const int64_t      lo = (int64_t)blockIdx.x * part, hi = lo + part < n ? lo + part : n;
    float              bv = -INFINITY;
    int64_t            bi = n;
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x)
        if (row[i] == row[i]) better(row[i], i, &bv, &bi);
    block_best(&bv, &bi, sv, si);
    if (threadIdx.x == 0) pv[blockIdx.y * gridDim.x + blockIdx.x] = bv, pi[blockIdx.y * gridDim.x + blockIdx.x] = bi;
}

__global__ void k_argmax_rows(const float *__restrict__ x, int64_t n, int parts, const float *__restrict__ pv,
                              const int64_t *__restrict__ pi, int32_t *__restrict__ ids)
{
    gpu_dep_enter();
    __shared__ float   sv[ARGMAX_PARTS];
    __shared__ int64_t si[ARGMAX_PARTS];
    float              bv = -INFINITY;
    int64_t            bi = n;
    if ((int)threadIdx.x < parts) bv = pv[blockIdx.x * parts + threadIdx.x], bi = pi[blockIdx.x * parts + threadIdx.x];
    block_best(&bv, &bi, sv, si);
    const float first = x[(int64_t)blockIdx.x * n];
    if (threadIdx.x == 0) ids[blockIdx.x] = first != first || bi >= n ? 0 : (int32_t)bi;
}

/* The argmax of rows of x into di (device memory, rows ids), launched: d_ids past its first
 * ib bytes holds the parts' indices and values. */
static celer_status argmax_launch(gpu_backend *g, const float *x, int64_t rows, int64_t n, size_t ib, int32_t *di,
                                  celer_error *err)
{
    if (rows > GPU_MAX_GRID_YZ || n <= 0 || n > INT32_MAX)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: argmax of %lld rows of %lld", CELER_GPU_NAME, (long long)rows,
                          (long long)n);
    int64_t parts, part;
    argmax_split(n, &parts, &part);
    const size_t pb = (size_t)(rows * parts);
    if (gpu_buf_reserve(g, &g->d_ids, ib + pb * (sizeof(int64_t) + sizeof(float)), err)) return err->code;
    if (!di) di = (int32_t *)g->d_ids.p;
    int64_t *pi = (int64_t *)((char *)g->d_ids.p + ib);
    float   *pv = (float *)(pi + pb);
    if (GPU_LAUNCH(g, err, "argmax", k_argmax_parts, dim3((unsigned)parts, (unsigned)rows), THREADS, 0, x, n, part, pv,
                   pi))
        return err->code;
    return GPU_LAUNCH(g, err, "argmax", k_argmax_rows, (unsigned)rows, ARGMAX_PARTS, 0, x, n, (int)parts, pv, pi, di);
}

celer_status gpu_argmax(celer_backend *be, const float *x, int64_t rows, int64_t n, int32_t *ids, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (rows <= 0) return CELER_OK;
    /* d_ids: the ids, then each part's index, then its value */
    const size_t ib = ((size_t)rows * sizeof *ids + 15) / 16 * 16;
    if (argmax_launch(g, x, rows, n, ib, NULL, err)) return err->code;
    return g->base.ops->read(&g->base, g->d_ids.p, ids, (size_t)rows * sizeof *ids, err);
}

/* Decode a step ahead (backend.h): room for a kept set of rows ids (d_keep, where the next
 * step's get_rows reads them; the pinned slots, keep_cap ids each, grown while none is kept, and
 * their events), outside a step and with a slot free. */
static celer_status keep_room(gpu_backend *g, const char *op, int64_t rows, celer_error *err)
{
    if (gpu_alive(g, err)) return err->code;
    if (g->in_step || g->keep_n >= 2 || rows < 1 || (rows > g->keep_cap && g->keep_n))
        return celer_fail(err, CELER_ERR_INVALID, "%s: %s of %lld rows %s", CELER_GPU_NAME, op, (long long)rows,
                          g->in_step ? "inside a step" : g->keep_n >= 2 ? "with two sets kept and not taken"
                          : rows < 1 ? "" : "past the slots' size with a set kept");
    if (!g->keep_ev[0])
        for (int i = 0; i < 2; i++) GPU_TRY(g, err, gpuEventCreate(&g->keep_ev[i]), "an event for kept ids");
    if (rows > g->keep_cap) {
        if (g->h_keep) (void)gpuFreeHost(g->h_keep);
        g->h_keep = NULL, g->keep_cap = 0;
        const int64_t cap = rows < 8 ? 8 : rows;
        GPU_TRY(g, err, gpuHostAlloc((void **)&g->h_keep, 2 * (size_t)cap * sizeof *g->h_keep),
                "pinned host memory for kept ids");
        g->keep_cap = (int32_t)cap;
    }
    return gpu_buf_reserve(g, &g->d_keep, (size_t)rows * sizeof(int32_t), err);
}

/* The rows ids just written to d_keep copied into the next pinned slot, an event after them;
 * argmax_take waits for that event alone, while the steps queued after it run. */
static celer_status keep_copy(gpu_backend *g, int64_t rows, celer_error *err)
{
    const int slot = (g->keep_head + g->keep_n) % 2;
    GPU_TRY(g, err, gpuMemcpyAsync(g->h_keep + (size_t)slot * g->keep_cap, g->d_keep.p, (size_t)rows * sizeof *g->h_keep,
                                   gpuMemcpyDeviceToHost, g->stream),
            "copying kept ids");
    GPU_TRY(g, err, gpuEventRecord(g->keep_ev[slot], g->stream), "an event for kept ids");
    g->keep_rows[slot] = (int32_t)rows, g->keep_last = (int32_t)rows;
    g->keep_n++;
    return CELER_OK;
}

celer_status gpu_argmax_keep(celer_backend *be, const float *x, int64_t rows, int64_t n, celer_error *err)
{
    gpu_backend *g  = gpu_of(be);
    const size_t ib = ((size_t)rows * sizeof(int32_t) + 15) / 16 * 16; /* d_ids' parts past it (argmax_launch) */
    if (keep_room(g, "argmax_keep", rows, err) || argmax_launch(g, x, rows, n, ib, (int32_t *)g->d_keep.p, err))
        return err->code;
    return keep_copy(g, rows, err);
}

celer_status gpu_argmax_take(celer_backend *be, int32_t *ids, celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (!g->keep_n) return celer_fail(err, CELER_ERR_INVALID, "%s: argmax_take with no ids kept", CELER_GPU_NAME);
    const int slot = g->keep_head;
    g->keep_head = (g->keep_head + 1) % 2, g->keep_n--; /* taken, even when the wait fails */
    if (gpu_sync_event(g, g->keep_ev[slot], err)) return err->code;
    memcpy(ids, g->h_keep + (size_t)slot * g->keep_cap, (size_t)g->keep_rows[slot] * sizeof *ids);
    return CELER_OK;
}

/* ---- the sampler's draw -------------------------------------------------------------- */

enum { DRAW_THREADS = 1024, SAMPLE_TOP = 2048, SAMPLE_STEPS = 8 };

typedef unsigned long long u64;

/* A part's share of its row: the sum of its e, then its candidates' count, their fixed-point
 * sum, and how many have p >= 2^-(11 + s) for each step s. */
typedef struct {
    double       sum;
    u64          m, all;
    unsigned int above[SAMPLE_STEPS];
} sample_part;

static __device__ __forceinline__ float e_of(float l, float mx, float T) { return (float)exp((double)((l - mx) / T)); }
static __device__ __forceinline__ u64   fixed_p(float p) { return (u64)((double)p * 0x1p56); }

/* The draw order's key: the probability's bits reversed (higher first), then the id. */
static __device__ __forceinline__ u64 order_key(float p, int64_t id)
{
    return (u64)(0xffffffffu - __float_as_uint(p)) << 32 | (u64)id;
}
static __device__ __forceinline__ float key_p(u64 k) { return __uint_as_float(0xffffffffu - (uint32_t)(k >> 32)); }

/* The row's argmax from its parts' (k_argmax_parts), as the host's scan gives it. */
static __device__ int64_t parts_best(const float *row, int64_t n, const float *pv, const int64_t *pi, int parts)
{
    float   bv = -INFINITY;
    int64_t bi = n;
    for (int p = 0; p < parts; p++) better(pv[p], pi[p], &bv, &bi);
    return row[0] != row[0] || bi >= n ? 0 : bi;
}

/* The row's sum of e from its parts, in their order (the same sum in every kernel). */
static __device__ double parts_sum(const sample_part *sp, int parts)
{
    double s = 0;
    for (int p = 0; p < parts; p++) s += sp[p].sum;
    return s;
}

/* Sums v over the block in a fixed tree (every thread gets it); red holds blockDim.x values. */
template <typename T> static __device__ T block_sum(T v, T *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    v = red[0];
    __syncthreads();
    return v;
}

/* What each kernel of a sampled row starts from: its draw, its largest logit (not finite: the
 * host decides), and after the first kernel its sum of e (not a sum of finite values: likewise). */
struct draw_row {
    celer_draw   d;
    const float *x;
    float        mx;
    double       sum;
};

static __device__ bool draw_row_open(draw_row *r, const float *x, int64_t n, const celer_draw *draws, const float *pv,
                                     const int64_t *pi, const sample_part *sp, int parts, bool with_sum)
{
    const int row = blockIdx.y;
    r->d          = draws[row];
    r->x          = x + (int64_t)row * n;
    if (r->d.temperature <= 0) return false;
    r->mx = r->x[parts_best(r->x, n, pv + row * parts, pi + row * parts, parts)];
    if (!isfinite(r->mx)) return false;
    if (!with_sum) return true;
    r->sum = parts_sum(sp + row * parts, parts);
    return r->sum >= 1 && isfinite(r->sum); /* the largest value's e is 1; NaNs make it NaN */
}

/* Each part's sum of e = exp((l - max) / T), rounded to float as the host does. */
__global__ void k_draw_sum(const float *__restrict__ x, int64_t n, int64_t part, int parts,
                           const celer_draw *__restrict__ draws, const float *__restrict__ pv,
                           const int64_t *__restrict__ pi, sample_part *__restrict__ sp, unsigned int *__restrict__ n_top)
{
    gpu_dep_enter();
    __shared__ double red[THREADS];
    draw_row          r;
    if (!draw_row_open(&r, x, n, draws, pv, pi, sp, parts, false)) return;
    const int64_t lo = (int64_t)blockIdx.x * part, hi = lo + part < n ? lo + part : n;
    double        s  = 0;
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) s += (double)e_of(r.x[i], r.mx, r.d.temperature);
    s = block_sum(s, red);
    if (threadIdx.x == 0) sp[blockIdx.y * parts + blockIdx.x].sum = s;
    if (threadIdx.x == 0 && blockIdx.x == 0) n_top[blockIdx.y] = 0;
}

/* Each part's candidates (p >= min-p times the highest, p > 0): count, sum, and count by step. */
__global__ void k_draw_count(const float *__restrict__ x, int64_t n, int64_t part, int parts,
                             const celer_draw *__restrict__ draws, const float *__restrict__ pv,
                             const int64_t *__restrict__ pi, sample_part *__restrict__ sp)
{
    gpu_dep_enter();
    __shared__ u64          red[THREADS];
    __shared__ unsigned int above[SAMPLE_STEPS];
    if (threadIdx.x < SAMPLE_STEPS) above[threadIdx.x] = 0;
    draw_row r;
    if (!draw_row_open(&r, x, n, draws, pv, pi, sp, parts, true)) return;
    const float   pmax = (float)(1.0 / r.sum), floor_p = r.d.min_p > 0 ? r.d.min_p * pmax : 0;
    const int64_t lo = (int64_t)blockIdx.x * part, hi = lo + part < n ? lo + part : n;
    u64           m = 0, all = 0;
    unsigned int  c[SAMPLE_STEPS] = {0};
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) {
        const float p = (float)((double)e_of(r.x[i], r.mx, r.d.temperature) / r.sum);
        if (!(p >= floor_p && p > 0)) continue;
        m++, all += fixed_p(p);
#pragma unroll
        for (int s = 0; s < SAMPLE_STEPS; s++) c[s] += p >= 0x1p-11f / (float)(1 << s);
    }
    __syncthreads(); /* above is zeroed */
    for (int s = 0; s < SAMPLE_STEPS; s++)
        if (c[s]) atomicAdd(&above[s], c[s]);
    m   = block_sum(m, red);
    all = block_sum(all, red);
    if (threadIdx.x == 0) {
        sample_part *o = &sp[blockIdx.y * parts + blockIdx.x];
        o->m = m, o->all = all;
        for (int s = 0; s < SAMPLE_STEPS; s++) o->above[s] = above[s];
    }
}

/* Each part's candidates at or above the row's list threshold (the lowest step that leaves at
 * most SAMPLE_TOP above it, or min-p's floor when higher) appended to the row's list. */
__global__ void k_draw_list(const float *__restrict__ x, int64_t n, int64_t part, int parts,
                            const celer_draw *__restrict__ draws, const float *__restrict__ pv,
                            const int64_t *__restrict__ pi, const sample_part *__restrict__ sp,
                            unsigned int *__restrict__ n_top, u64 *__restrict__ list)
{
    gpu_dep_enter();
    draw_row r;
    if (!draw_row_open(&r, x, n, draws, pv, pi, sp, parts, true)) return;
    const sample_part *rp   = sp + blockIdx.y * parts;
    const float        pmax = (float)(1.0 / r.sum), floor_p = r.d.min_p > 0 ? r.d.min_p * pmax : 0;
    float              top  = 0x1p-11f;
    for (int s = 1; s < SAMPLE_STEPS; s++) {
        unsigned int a = 0;
        for (int p = 0; p < parts; p++) a += rp[p].above[s];
        if (a > SAMPLE_TOP) break;
        top *= 0.5f;
    }
    if (top < floor_p) top = floor_p;
    const int64_t lo = (int64_t)blockIdx.x * part, hi = lo + part < n ? lo + part : n;
    for (int64_t i = lo + threadIdx.x; i < hi; i += THREADS) {
        const float p = (float)((double)e_of(r.x[i], r.mx, r.d.temperature) / r.sum);
        if (!(p >= floor_p && p > 0) || p < top) continue;
        const unsigned int at = atomicAdd(&n_top[blockIdx.y], 1u);
        if (at < SAMPLE_TOP) list[(int64_t)blockIdx.y * SAMPLE_TOP + at] = order_key(p, i);
    }
}

/* The first index i in [0, n) with cum[i] >= want (strict: > want); n when none. */
static __device__ int32_t first_reaching(const u64 *cum, int32_t n, u64 want, bool strict)
{
    int32_t lo = 0, hi = n;
    while (lo < hi) {
        int32_t mid = (lo + hi) / 2;
        if (strict ? cum[mid] > want : cum[mid] >= want) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

enum { WALK_IDS = -2 };

/* The draw from the sorted list (its first L keys and their running sums; m candidates in all):
 * the token; -1 where the list does not reach far enough; WALK_IDS when nothing is cut (the walk
 * then goes in id order, over the whole row). */
static __device__ int32_t decide(const celer_draw *d, const u64 *key, const u64 *cum, int32_t L, u64 m)
{
    u64 kept = m;
    if (d->top_k > 0 && kept > (u64)d->top_k) kept = (u64)d->top_k;
    const int32_t in_list = kept < (u64)L ? (int32_t)kept : L; /* the kept that the list holds */
    if (d->top_p < 1) {
        u64 k = 0;
        if (d->top_p > 0) {
            k = (u64)first_reaching(cum, in_list, fixed_p(d->top_p), false) + 1;
            if (k > (u64)in_list) {
                if (kept > (u64)L) return -1; /* top-p is reached past the list, if at all */
                k = kept;
            }
        }
        kept = k > 0 ? k : 1;
    }
    if (kept == m) return WALK_IDS;
    if (kept > (u64)L) return -1;
    const u64     total = cum[kept - 1];
    const u64     r     = (u64)(d->u * (double)total);
    const int32_t n     = kept < (u64)L ? (int32_t)kept : L;
    const int32_t i     = first_reaching(cum, n, r, true);
    return (int32_t)(uint32_t)key[i < n ? i : kept - 1];
}

/* Sorts key[0, S) ascending, S a power of two (bitonic). */
static __device__ void block_sort(u64 *key, int32_t S)
{
    for (int32_t k = 2; k <= S; k <<= 1)
        for (int32_t j = k >> 1; j > 0; j >>= 1) {
            for (int32_t i = threadIdx.x; i < S; i += DRAW_THREADS) {
                const int32_t o = i ^ j;
                if (o <= i) continue;
                const u64 a = key[i], b = key[o];
                if ((a > b) == ((i & k) == 0)) key[i] = b, key[o] = a;
            }
            __syncthreads();
        }
}

/* The running sum of v over the block's threads in their order, through thread threadIdx.x;
 * red (DRAW_THREADS) then holds them all, the block's sum last. */
static __device__ u64 block_scan(u64 v, u64 *red)
{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int off = 1; off < DRAW_THREADS; off <<= 1) {
        const u64 w = (int)threadIdx.x >= off ? red[threadIdx.x - off] : 0;
        __syncthreads();
        red[threadIdx.x] += w;
        __syncthreads();
    }
    return red[threadIdx.x];
}

/* cum[j] = the fixed-point probabilities of key[0 .. j] summed, j < L (two keys a thread). */
static __device__ void block_running_sum(const u64 *key, int32_t L, u64 *cum, u64 *red)
{
    const int32_t j = 2 * (int32_t)threadIdx.x;
    const u64     a = j < L ? fixed_p(key_p(key[j])) : 0, b = j + 1 < L ? fixed_p(key_p(key[j + 1])) : 0;
    const u64     before = block_scan(a + b, red) - a - b;
    cum[j] = before + a, cum[j + 1] = before + a + b;
    __syncthreads();
}

/* The walk in id order, r = u times all: the part where the parts' sums pass r, then its
 * candidates a block-wide running sum at a time, until one passes it. */
static __device__ void walk_ids(const draw_row *r, int64_t n, int64_t part, int parts, const sample_part *sp, u64 all,
                                u64 *red, int32_t *id)
{
    const u64 want = (u64)(r->d.u * (double)all);
    u64       base = 0;
    int       p    = 0;
    while (p < parts && base + sp[p].all <= want) base += sp[p].all, p++;
    if (p == parts) { /* rounding past the end: the host decides */
        if (threadIdx.x == 0) *id = -1;
        return;
    }
    const float   pmax = (float)(1.0 / r->sum), floor_p = r->d.min_p > 0 ? r->d.min_p * pmax : 0;
    const int64_t lo = (int64_t)p * part, hi = lo + part < n ? lo + part : n;
    for (int64_t at = lo; at < hi; at += DRAW_THREADS) {
        const int64_t i = at + threadIdx.x;
        float         q = i < hi ? (float)((double)e_of(r->x[i], r->mx, r->d.temperature) / r->sum) : 0;
        const u64     v = q >= floor_p && q > 0 ? fixed_p(q) : 0;
        const u64 upto = base + block_scan(v, red), chunk = red[DRAW_THREADS - 1];
        if (v && upto > want && upto - v <= want) *id = (int32_t)i; /* one thread: the first to pass */
        if (base + chunk > want) return;
        base += chunk;
        __syncthreads();
    }
    if (threadIdx.x == 0) *id = -1; /* the part's sum said it passes here: not reached */
}

/* One block a row: the argmax for a greedy row; else the row's list sorted into the draw order,
 * summed as it runs, and the draw decided on it (-1: left to the host). */
__global__ void __launch_bounds__(DRAW_THREADS)
    k_draw(const float *__restrict__ x, int64_t n, int64_t part, int parts, const celer_draw *__restrict__ draws,
           const float *__restrict__ pv, const int64_t *__restrict__ pi, const sample_part *__restrict__ sp,
           const unsigned int *__restrict__ n_top, const u64 *__restrict__ list, int32_t *__restrict__ ids)
{
    gpu_dep_enter();
    __shared__ u64     key[SAMPLE_TOP], cum[SAMPLE_TOP], red[DRAW_THREADS];
    __shared__ int32_t verdict;
    const int      row = blockIdx.y;
    draw_row       r;
    if (!draw_row_open(&r, x, n, draws, pv, pi, sp, parts, true)) {
        if (threadIdx.x == 0)
            ids[row] = draws[row].temperature <= 0 ? (int32_t)parts_best(r.x, n, pv + row * parts, pi + row * parts, parts)
                                                   : -1;
        return;
    }
    u64 m = 0, all = 0;
    for (int p = 0; p < parts; p++) m += sp[row * parts + p].m, all += sp[row * parts + p].all;
    const unsigned int L = n_top[row];
    if (L > SAMPLE_TOP || !m) { /* neither happens with probabilities that sum to 1 */
        if (threadIdx.x == 0) ids[row] = -1;
        return;
    }
    int32_t S = 2;
    while (S < (int32_t)L) S <<= 1;
    for (int32_t j = threadIdx.x; j < S; j += DRAW_THREADS) key[j] = j < (int32_t)L ? list[(int64_t)row * SAMPLE_TOP + j] : ~0ull;
    __syncthreads();
    block_sort(key, S);
    block_running_sum(key, (int32_t)L, cum, red);
    if (threadIdx.x == 0) verdict = decide(&r.d, key, cum, (int32_t)L, m);
    __syncthreads();
    if (verdict != WALK_IDS) {
        if (threadIdx.x == 0) ids[row] = verdict;
        return;
    }
    walk_ids(&r, n, part, parts, sp + row * parts, all, red, &ids[row]);
}

/* The draws d of rows of x launched, their ids (-1: left to the host) into di where di is not
 * NULL, else into d_draw's first bytes (*out: where they are). */
static celer_status sample_launch(gpu_backend *g, const float *x, int64_t rows, int64_t n, const celer_draw *d,
                                  int32_t *di, int32_t **out, celer_error *err)
{
    if (rows > GPU_MAX_GRID_YZ || n <= 0 || n > INT32_MAX)
        return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s: sampling %lld rows of %lld", CELER_GPU_NAME, (long long)rows,
                          (long long)n);
    int64_t parts, part;
    argmax_split(n, &parts, &part);
    /* d_draw: the ids, the draws, the parts' argmax pairs and shares, the lists' lengths, the lists */
    const int64_t pr  = rows * parts;
    size_t        off[8] = {0}, len[7] = {(size_t)rows * sizeof *di, (size_t)rows * sizeof *d, (size_t)pr * sizeof(float),
                                          (size_t)pr * sizeof(int64_t), (size_t)pr * sizeof(sample_part),
                                          (size_t)rows * sizeof(unsigned int), (size_t)rows * SAMPLE_TOP * sizeof(u64)};
    for (int k = 0; k < 7; k++) off[k + 1] = off[k] + (len[k] + 15) / 16 * 16;
    if (gpu_buf_reserve(g, &g->d_draw, off[7], err)) return err->code;
    char         *base = (char *)g->d_draw.p;
    celer_draw   *dd   = (celer_draw *)(base + off[1]);
    float        *pv   = (float *)(base + off[2]);
    int64_t      *pi   = (int64_t *)(base + off[3]);
    sample_part  *sp   = (sample_part *)(base + off[4]);
    unsigned int *nt   = (unsigned int *)(base + off[5]);
    u64          *list = (u64 *)(base + off[6]);
    const dim3    grid((unsigned)parts, (unsigned)rows);
    if (!di) di = (int32_t *)(base + off[0]);
    *out = di;
    if (gpu_upload(g, dd, d, (size_t)rows * sizeof *d, err) ||
        GPU_LAUNCH(g, err, "sample", k_argmax_parts, grid, THREADS, 0, x, n, part, pv, pi) ||
        GPU_LAUNCH(g, err, "sample", k_draw_sum, grid, THREADS, 0, x, n, part, (int)parts, dd, pv, pi, sp, nt) ||
        GPU_LAUNCH(g, err, "sample", k_draw_count, grid, THREADS, 0, x, n, part, (int)parts, dd, pv, pi, sp) ||
        GPU_LAUNCH(g, err, "sample", k_draw_list, grid, THREADS, 0, x, n, part, (int)parts, dd, pv, pi, sp, nt, list))
        return err->code;
    return GPU_LAUNCH(g, err, "sample", k_draw, dim3(1, (unsigned)rows), DRAW_THREADS, 0, x, n, part, (int)parts, dd,
                      pv, pi, sp, nt, list, di);
}

celer_status gpu_sample(celer_backend *be, const float *x, int64_t rows, int64_t n, const celer_draw *d, int32_t *ids,
                        celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    if (gpu_alive(g, err)) return err->code;
    if (rows <= 0) return CELER_OK;
    if (g->sample_off) { /* for comparisons: the host draws each sampled row, the argmax the rest */
        for (int64_t r = 0; r < rows; r++)
            if (d[r].temperature > 0) ids[r] = -1;
            else if (gpu_argmax(be, x + r * n, 1, n, &ids[r], err)) return err->code;
        return CELER_OK;
    }
    int32_t *di;
    if (sample_launch(g, x, rows, n, d, NULL, &di, err)) return err->code;
    return g->base.ops->read(&g->base, di, ids, (size_t)rows * sizeof *ids, err);
}

/* Sampled decode a step ahead (backend.h): the draw into d_keep as argmax_keep keeps an argmax.
 * (With CELER_GPU_SAMPLE=0 the backend has none: sampled decode goes step by step.) */
celer_status gpu_sample_keep(celer_backend *be, const float *x, int64_t rows, int64_t n, const celer_draw *d,
                             celer_error *err)
{
    gpu_backend *g = gpu_of(be);
    int32_t     *di;
    if (keep_room(g, "sample_keep", rows, err) || sample_launch(g, x, rows, n, d, (int32_t *)g->d_keep.p, &di, err))
        return err->code;
    return keep_copy(g, rows, err);
}
