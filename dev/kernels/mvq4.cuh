/* What gpu_mvbulk.cu, gpu_mvnorm.cu and gpu_mvwait.cu share: a Q4_0 matrix in the SPLIT layout (a row: cols / 2
 * code bytes, unit u's 16 at 16u, byte i holding values i and i + 16 in its nibbles; then the
 * units' f16 scales), one token's activations at 8 bits (a block of 32: int8 codes, then
 * (d, d · Σ codes)) staged in shared memory, a unit's dot, k_mmvq's one-token loop (`regs`), and
 * the host's side: the quantization, a double-precision reference, the error. */
#ifndef CELER_DEV_KERNELS_MVQ4_CUH
#define CELER_DEV_KERNELS_MVQ4_CUH

#include "standalone.cuh"

#include <cuda_fp16.h>

enum { RW = 4 /* regs: rows a warp */, RT = 128 /* regs: threads a block */ };

typedef struct {
    int64_t rows, cols, row_b; /* row_b: cols / 2 code bytes, then cols / 32 f16 scales */
} shape;

/* The token's activations as the engine quantizes them (gpu_matvec.h, xq_put): a block of 32
 * values v with D = max |v| / 127 has high codes hi = round(v / D) and, at L = 2 levels, low codes
 * lo = round((v - hi D) 256 / D) (L = 1: none, the engine's X8), and (d, d S) with d = D / 256 and
 * S = Σ (256 hi + lo). In memory a block's 32 · L codes (hi, then lo), and its (d, d S) apart.
 * q, d: quantized (NORM false); x, nw: the residual row and the norm's weight (NORM true: the
 * kernel quantizes u = x ⊙ nw and scales its sums by 1 / rms(x)). */
typedef struct {
    const int8_t *q;
    const float2 *d;
    const float  *x, *nw;
    float         eps;
} xin;

static __host__ __device__ int64_t row_bytes(int64_t cols) { return cols / 2 + cols / 16; }

/* x in shared memory: block b's 32 · L codes as 16-byte chunks, chunk k (hi 0-15, hi 16-31, then
 * lo's) at c[k · nb + b] (a warp's loads of one chunk of consecutive blocks consecutive), then
 * (d, d S) a block. */
static __host__ __device__ size_t x_smem(int64_t cols, int L) { return (size_t)(cols / 32) * (32 * L + 8); }

/* The quantized activations copied into mem, then a barrier. */
template <int L> static __device__ void x_stage(uint4 *mem, const xin &in, int64_t nb)
{
    float2 *dd = (float2 *)(mem + 2 * L * nb);
    for (int64_t i = threadIdx.x; i < 2 * L * nb; i += blockDim.x)
        mem[(i % (2 * L)) * nb + i / (2 * L)] = ((const uint4 *)in.q)[i];
    for (int64_t i = threadIdx.x; i < nb; i += blockDim.x) dd[i] = in.d[i];
    __syncthreads();
}

/* The engine's code of a scaled value (gpu_matvec.h's xq_code): round half away, clamped to ±127. */
static __host__ __device__ __forceinline__ int x_code(float v)
{
    if (!(v > -127.0f)) return v != v ? 0 : -127;
    if (v > 127.0f) return 127;
    return (int)roundf(v);
}

/* u = x ⊙ nw quantized into mem as x_stage leaves it (a float4 a thread a pass: the 8 threads of
 * a block of 32 find its largest magnitude and code sum by shuffles), then a barrier; returns the
 * thread's sum of x's squares. The host's quant_x rounds alike. Every thread takes as many passes
 * (cols / 4 a multiple of blockDim.x, itself a multiple of 8): the shuffles take whole warps. */
static __device__ __forceinline__ float warp_sum(float v)
{
    for (int m = 16; m > 0; m >>= 1) v += __shfl_xor_sync(0xffffffffu, v, m);
    return v;
}

static __device__ __forceinline__ float sq4(float4 v)
{
    return __fadd_rn(__fadd_rn(__fmul_rn(v.x, v.x), __fmul_rn(v.y, v.y)),
                     __fadd_rn(__fmul_rn(v.z, v.z), __fmul_rn(v.w, v.w)));
}

/* EXACT (the norm kernel's order): the block's sum of squares first (two barriers), then h =
 * (x · inv) · nw quantized, as a norm kernel quantizes its output; returns 0 (nothing to scale). */
template <int L, bool EXACT = false> static __device__ float x_norm_stage(uint4 *mem, const xin &in, int64_t cols)
{
    const int64_t nb = cols / 32;
    float2       *dd = (float2 *)(mem + 2 * L * nb);
    float         ss = 0.0f, inv = 1.0f;
    if (EXACT) {
        __shared__ float red[32];
        for (int64_t i = threadIdx.x; i < cols / 4; i += blockDim.x) ss = __fadd_rn(ss, sq4(((const float4 *)in.x)[i]));
        ss = warp_sum(ss);
        if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
        __syncthreads();
        float t = 0.0f;
        for (int k = 0; k < (int)(blockDim.x / 32); k++) t += red[k];
        inv = 1.0f / sqrtf(t / (float)cols + in.eps), ss = 0.0f;
    }
    for (int64_t i = threadIdx.x; i < cols / 4; i += blockDim.x) {
        const float4 xv = ((const float4 *)in.x)[i], wv = ((const float4 *)in.nw)[i];
        const float  u[4] = {EXACT ? xv.x * inv * wv.x : __fmul_rn(xv.x, wv.x),
                             EXACT ? xv.y * inv * wv.y : __fmul_rn(xv.y, wv.y),
                             EXACT ? xv.z * inv * wv.z : __fmul_rn(xv.z, wv.z),
                             EXACT ? xv.w * inv * wv.w : __fmul_rn(xv.w, wv.w)};
        if (!EXACT) ss = __fadd_rn(ss, sq4(xv));
        float m = fmaxf(fmaxf(fabsf(u[0]), fabsf(u[1])), fmaxf(fabsf(u[2]), fabsf(u[3])));
        for (int o = 4; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const float D = __fdiv_rn(m, 127.0f), id = D != 0.0f ? __fdiv_rn(1.0f, D) : 0.0f;
        uint32_t    hw = 0, lw = 0;
        int         S  = 0;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int hi = x_code(__fmul_rn(u[k], id));
            const int lo =
                L == 2 ? x_code(__fmul_rn(__fsub_rn(u[k], __fmul_rn((float)hi, D)), __fmul_rn(id, 256.0f))) : 0;
            hw |= (uint32_t)(uint8_t)hi << (8 * k), lw |= (uint32_t)(uint8_t)lo << (8 * k), S += 256 * hi + lo;
        }
        for (int o = 4; o > 0; o >>= 1) S += __shfl_xor_sync(0xffffffffu, S, o);
        const int64_t b = i / 8;
        const int     k = (int)(i % 8); /* word k of the block's hi codes (chunk k / 4), and of its lo */
        ((uint32_t *)(mem + (k / 4) * nb + b))[k % 4] = hw;
        if (L == 2) ((uint32_t *)(mem + (2 + k / 4) * nb + b))[k % 4] = lw;
        if (k == 0) {
            const float d = D / 256.0f;
            dd[b]         = make_float2(d, __fmul_rn(d, (float)S));
        }
    }
    __syncthreads();
    return ss;
}

static __device__ __forceinline__ float f16(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }

/* Σ over one unit of one row, as k_mmvq: A d (256 w·hi + w·lo) − 8 A d S (codes w of 0..15); the
 * unit's activation chunk k (hi 0-15, hi 16-31, then lo's) at x[k · stride], (d, d S) dd. */
template <int L>
static __device__ __forceinline__ float unit_dot_at(uint4 q, uint32_t sc, const uint4 *x, int64_t stride, float2 dd)
{
    const uint32_t v[4] = {q.x, q.y, q.z, q.w};
    int            sh = 0, sl = 0;
#pragma unroll
    for (int c = 0; c < 2; c++) { /* values 0-15 (low nibbles), 16-31 (high) */
        const uint4    h = x[c * stride];
        const uint32_t hx[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
        for (int k = 0; k < 4; k++) sh = __dp4a((int)((v[k] >> (4 * c)) & 0x0f0f0f0fu), (int)hx[k], sh);
        if (L == 2) {
            const uint4    l = x[(2 + c) * stride];
            const uint32_t lx[4] = {l.x, l.y, l.z, l.w};
#pragma unroll
            for (int k = 0; k < 4; k++) sl = __dp4a((int)((v[k] >> (4 * c)) & 0x0f0f0f0fu), (int)lx[k], sl);
        }
    }
    const float A = f16(sc);
    return A * dd.x * (float)(256 * sh + sl) - 8.0f * A * dd.y;
}

/* The same with x staged in shared memory (x_stage's layout). */
template <int L>
static __device__ __forceinline__ float unit_dot(uint4 q, uint32_t sc, const uint4 *xs, int64_t nb, int64_t u)
{
    return unit_dot_at<L>(q, sc, xs + u, nb, ((const float2 *)(xs + 2 * L * nb))[u]);
}

/* Units u, u + SW, .. (U of them) of the warp's RW rows (uu past nu: u again, not used). */
template <int U, int SW = 32>
static __device__ __forceinline__ void regs_load(const uint8_t *w, const shape &s, int64_t r0, int64_t u, int64_t nu,
                                                 uint4 (&q)[U][RW], uint32_t (&sc)[U][RW])
{
#pragma unroll
    for (int j = 0; j < U; j++)
#pragma unroll
        for (int i = 0; i < RW; i++) {
            const uint8_t *row = w + (r0 + i) * s.row_b;
            const int64_t  uu  = u + SW * j < nu ? u + SW * j : u;
            q[j][i]            = *(const uint4 *)(row + 16 * uu);
            sc[j][i]           = *(const uint16_t *)(row + s.cols / 2 + 2 * uu);
        }
}

/* The wait for the kernel before to finish (launched with programmatic stream serialization, a
 * kernel starts while the one before runs; griddepcontrol.wait returns when that one is done). */
static __device__ __forceinline__ void dep_wait(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }

/* k_mmvq's unsliced one-token pass with x staged (XS), L levels: RT / 32 warps a block, RW rows a
 * warp, a lane units u and u + 32 of each row a round, its first round loaded before x is staged.
 * NORM 1: x staged from the residual row (x_norm_stage), the sums scaled by 1 / rms(x) at the end;
 * 2: the norm's sum first, then h quantized (EXACT: the norm kernel's values). WAIT (gpu_mvwait.cu):
 * 0 none, 1 dep_wait after the first round's loads (the engine's early loads), 2 before them. Rows
 * a multiple of RT / 32 · RW. */
template <int L, int NORM, int WAIT = 0>
__global__ void __launch_bounds__(RT) k_regs(const uint8_t *w, shape s, xin in, float *y)
{
    if (WAIT == 2) dep_wait();
    extern __shared__ uint4 xs[];
    __shared__ float part[RT / 32];
    const int64_t nb = s.cols / 32, nu = nb;
    const int     lane = threadIdx.x % 32;
    const int64_t r0   = ((int64_t)blockIdx.x * (RT / 32) + threadIdx.x / 32) * RW;
    uint4         q[2][RW];
    uint32_t      sc[2][RW];
    regs_load(w, s, r0, lane, nu, q, sc);
    if (WAIT == 1) dep_wait();
    float ss = 0.0f;
    if (NORM == 1) ss = x_norm_stage<L>(xs, in, s.cols);
    else if (NORM == 2) x_norm_stage<L, true>(xs, in, s.cols);
    else x_stage<L>(xs, in, nb);
    float acc[RW] = {};
    for (int64_t u = lane; u < nu; u += 64) {
        if (u != lane) regs_load(w, s, r0, u, nu, q, sc);
#pragma unroll
        for (int j = 0; j < 2; j++)
            if (u + 32 * j < nu)
#pragma unroll
                for (int i = 0; i < RW; i++) acc[i] += unit_dot<L>(q[j][i], sc[j][i], xs, nb, u + 32 * j);
    }
    float inv = 1.0f;
    if (NORM == 1) { /* the block's sum of squares, after the dots: off their path */
        ss = warp_sum(ss);
        if (lane == 0) part[threadIdx.x / 32] = ss;
        __syncthreads();
        float t = 0.0f;
        for (int k = 0; k < RT / 32; k++) t = __fadd_rn(t, part[k]);
        inv = 1.0f / sqrtf(t / (float)s.cols + in.eps);
    }
#pragma unroll
    for (int i = 0; i < RW; i++) {
        const float t = warp_sum(acc[i]);
        if (lane == 0) y[r0 + i] = t * inv;
    }
}

/* ---- host ----------------------------------------------------------------------------------- */

static uint16_t to_f16(float f) { return __half_as_ushort(__float2half(f)); }
static float    from_f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }

/* A random matrix of s's shape: codes uniform, scales in [0.01, 0.03). */
static void make_weights(uint8_t *w, shape s)
{
    for (int64_t r = 0; r < s.rows; r++) {
        uint8_t *row = w + r * s.row_b;
        for (int64_t i = 0; i < s.cols / 2; i++) row[i] = (uint8_t)next_u32();
        for (int64_t b = 0; b < s.cols / 32; b++)
            ((uint16_t *)(row + s.cols / 2))[b] = to_f16(0.01f + 0.02f * uniform());
    }
}

/* n values (a multiple of 32) quantized as x_norm_stage and the engine do, L levels: q holds a
 * block's hi codes then (L = 2) its lo codes, 32 · L bytes a block. */
static void quant_x(const float *v, int64_t n, int L, int8_t *q, float2 *d)
{
    for (int64_t b = 0; b < n / 32; b++) {
        float m = 0.0f;
        for (int i = 0; i < 32; i++) m = fmaxf(m, fabsf(v[32 * b + i]));
        const float D = m / 127.0f, id = D != 0.0f ? 1.0f / D : 0.0f;
        int         S = 0;
        for (int i = 0; i < 32; i++) {
            const int hi = x_code(v[32 * b + i] * id);
            const int lo = L == 2 ? x_code((v[32 * b + i] - (float)hi * D) * (id * 256.0f)) : 0;
            q[32 * L * b + i] = (int8_t)hi, S += 256 * hi + lo;
            if (L == 2) q[32 * L * b + 32 + i] = (int8_t)lo;
        }
        const float dd = D / 256.0f;
        d[b]           = make_float2(dd, dd * (float)S);
    }
}

/* y in double from the codes as stored, L levels of activations as quant_x leaves them. */
static void reference(const uint8_t *w, shape s, int L, const int8_t *xq, const float2 *xd, double *y)
{
    const int64_t nb = s.cols / 32;
    for (int64_t r = 0; r < s.rows; r++) {
        const uint8_t  *row = w + r * s.row_b;
        const uint16_t *sc  = (const uint16_t *)(row + s.cols / 2);
        double          t   = 0;
        for (int64_t b = 0; b < nb; b++) {
            const int8_t *x = xq + 32 * L * b;
            double        d = 0;
            for (int i = 0; i < 16; i++) {
                const uint8_t c = row[16 * b + i];
                const double  a = 256.0 * x[i] + (L == 2 ? x[32 + i] : 0);
                const double  e = 256.0 * x[16 + i] + (L == 2 ? x[48 + i] : 0);
                d += (double)((c & 15) - 8) * a + (double)((c >> 4) - 8) * e;
            }
            t += d * from_f16(sc[b]) * xd[b].x;
        }
        y[r] = t;
    }
}

static double rel_l2(const float *y, const double *ref, int64_t n)
{
    double e = 0, m = 0;
    for (int64_t i = 0; i < n; i++) e += (y[i] - ref[i]) * (y[i] - ref[i]), m += ref[i] * ref[i];
    return sqrt(e / (m > 0 ? m : 1));
}

/* A product of shape s with one level of 8-bit activations, on the device: random weights in
 * copies worth 8 times the L2 of l2 bytes (dw; a launch r takes copy r % copies), the token's
 * codes and scales (in), the output (dy), and on the host the double-precision reference and
 * room for the output read back (hy). */
typedef struct {
    shape    s;
    int64_t  bytes; /* one copy of the weights */
    int      copies;
    uint8_t *dw;
    float   *dy, *hy;
    double  *ref;
    xin      in;
} mv_problem;

static mv_problem mv_problem_make(shape s, int l2)
{
    mv_problem    p  = {s, s.rows * s.row_b, 0, NULL, NULL, NULL, NULL, {NULL, NULL, NULL, NULL, 0.0f}};
    const int64_t nb = s.cols / 32;
    p.copies         = (int)((8LL * l2 + p.bytes - 1) / p.bytes) + 1;
    uint8_t *hw      = (uint8_t *)malloc(p.bytes);
    int8_t  *hx      = (int8_t *)malloc(s.cols);
    float2  *hd      = (float2 *)malloc(nb * sizeof(float2));
    make_weights(hw, s);
    for (int64_t b = 0; b < nb; b++) {
        int sum = 0;
        for (int i = 0; i < 32; i++) sum += hx[32 * b + i] = (int8_t)((int)(next_u32() % 255) - 127);
        hd[b]   = make_float2(0.001f + 0.01f * uniform(), 0.0f);
        hd[b].y = hd[b].x * 256.0f * (float)sum; /* d S, S = 256 Σ hi (one level) */
    }
    p.ref = (double *)malloc(s.rows * sizeof(double));
    p.hy  = (float *)malloc(s.rows * sizeof(float));
    reference(hw, s, 1, hx, hd, p.ref);
    int8_t *dx;
    float2 *dd;
    CHECK(cudaMalloc(&p.dw, (size_t)p.bytes * p.copies));
    for (int c = 0; c < p.copies; c++)
        CHECK(cudaMemcpy(p.dw + (size_t)c * p.bytes, hw, p.bytes, cudaMemcpyHostToDevice));
    CHECK(cudaMalloc(&dx, s.cols));
    CHECK(cudaMalloc(&dd, nb * sizeof(float2)));
    CHECK(cudaMalloc(&p.dy, s.rows * sizeof(float)));
    CHECK(cudaMemcpy(dx, hx, s.cols, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(dd, hd, nb * sizeof(float2), cudaMemcpyHostToDevice));
    p.in = {dx, dd, NULL, NULL, 0.0f};
    free(hw), free(hx), free(hd);
    return p;
}

/* The output read back against the reference (relative L2). */
static double mv_problem_error(mv_problem &p)
{
    CHECK(cudaMemcpy(p.hy, p.dy, p.s.rows * sizeof(float), cudaMemcpyDeviceToHost));
    return rel_l2(p.hy, p.ref, p.s.rows);
}

static void mv_problem_free(mv_problem &p)
{
    CHECK(cudaFree(p.dw));
    CHECK(cudaFree((void *)p.in.q));
    CHECK(cudaFree((void *)p.in.d));
    CHECK(cudaFree(p.dy));
    free(p.hy), free(p.ref);
}

#endif
