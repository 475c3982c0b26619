/* The batch kernel's device code (3 to 32 tokens a block on the integer matrix units, weights
 * streamed through shared memory), shared by the dense products of a batch (gpu_mmq_small.cu)
 * and a MoE step's experts (gpu_mmq_small_experts.cu): the block shapes, the stages' copies, the
 * sums, the outputs and the gate/up pair's GLU. The activations' format, the mma fragments and
 * the sums are those of the tiled prefill kernel (gpu_mmq.cu), so a token's products do not
 * depend on which of the two computes them. */
#ifndef CELER_BACKENDS_GPU_GPU_MMQ_SMALL_CUH
#define CELER_BACKENDS_GPU_GPU_MMQ_SMALL_CUH

#include "backends/gpu/gpu_glu.cuh"
#include "backends/gpu/gpu_mmq.h"

/* Up to 32 tokens: a block takes a few row tiles of 16 (one mma row tile) and every token of the
 * batch, and walks its columns a few blocks a stage through shared-memory stages filled by
 * asynchronous copies (cp.async) a stage or two ahead, so that each SM keeps tens of kilobytes
 * of weights in flight where the tiled kernel (gpu_mmq.cu) waited on each stage's loads. By default
 * (geometry 2, below) a block is 8 warps, each a 16-row tile with every token. Geometry 0 is 64
 * rows: from 16 tokens 8 warps, each row tile's tokens split in two halves (with 4 warps a block
 * the schedulers waited on each warp's chain of fragment loads and products: ncu, 12% of the
 * warps active, 12% of DRAM throughput, for the 8B's 14336-row products of 32 tokens).
 * Q4_0 codes are staged as stored (16 bytes a block) and split into the fragments' low and high
 * nibbles when read; the sums are the same as the tiled kernel's. X8 (activations quantized to 8
 * bits, gpu_matvec.h: their lo codes zeros): the lo codes neither copied nor multiplied, half the
 * activations' copies and half the mma.
 * MLX affine weights go in as the tiled kernel takes them (gpu_mmq.cu): 4-bit codes unsigned,
 * 8-bit ones as q - 128 (2, 3, 5 and 6 bits staged as stored, 4B bytes a block, and made bytes
 * when read), each block's sum scaled and its bias (plus 128 · scale at 8 bits) times
 * the token block's d · S added; a stage holds each row's scale and bias pairs for its columns
 * (one to four groups, as stored) and each token block's (d, d · S). mxfp4's codes are staged as
 * stored (16 bytes a block, value 2i in byte i's low nibble) and made signed bytes of twice their
 * values when read (e2m1_bytes, exact), each block's sum scaled by half its e8m0 scale (a byte a
 * block, staged beside the row). nvfp4's the same, but its 16-value groups' two e4m3 scales
 * (times the matrix's global scale) a block: each half's products apart, in k16 mma (the same
 * work as mxfp4's k32 ones). These kernels take both levels of the activations
 * always (with X8 the lo codes are zeros: the same sums). */
enum { SQ_ROWS = 64, SQ_BQ = 8, SQ_STAGES = 3 };

/* Whether F is MLX affine (every width: 2, 3, 5 and 6 bits' codes as stored, 4B bytes a block). */
template <int F> static __host__ __device__ constexpr bool sq_mlx() { return F >= GPU_AFFINE2 && F <= GPU_AFFINE8; }
/* The batch kernel's MLX formats, their index in its tables: affine 2 to 8 bits, mxfp4, nvfp4;
 * -1 for the others. */
static __host__ __device__ constexpr int sq_mlx_index(int f)
{
    return f >= GPU_AFFINE2 && f <= GPU_MXFP4 ? f - GPU_AFFINE2 : f == GPU_NVFP4 ? GPU_MXFP4 - GPU_AFFINE2 + 1 : -1;
}

/* The block's geometry G: 0 (CELER_GPU_SQ_WIDE=0), 64 rows, SQ_BQ column blocks a stage, SQ_STAGES
 * stages; 1 and 2 (=1; 2 the default), 128 rows a block, a warp each 16-row tile with every token
 * (a half of the activations' reads through the L2 a row), 8 column blocks in 2 stages or 4 in 3.
 * The 8B's batch of 32 decoded 3,498, 3,964 and 4,159 tok/s in geometries 0, 1 and 2 (none
 * launched early; docs/benchmarks/gpu-h200.md, eighteenth pass). A product's sums are the same
 * bit for bit in all three: each output is one lane's sum over the column blocks in order, and
 * the column parts are the same. */
enum { SQ_GEOM_DEFAULT = 2 }; /* gpu_backend.cu's default g->sq_geom; the experts' kernel's */
template <int G> struct sq_geom {
    static constexpr int ROWS = G ? 128 : SQ_ROWS, BQ = G == 2 ? 4 : SQ_BQ, STAGES = G == 1 ? 2 : SQ_STAGES;
};

template <int F, int NT, int G = 0> struct sq_shape {
    static constexpr int SQ_ROWS = sq_geom<G>::ROWS, SQ_BQ = sq_geom<G>::BQ, SQ_STAGES = sq_geom<G>::STAGES;
    static constexpr bool AFF   = sq_mlx<F>();
    static constexpr bool NV    = F == GPU_NVFP4, MX = F == GPU_MXFP4 || NV; /* e2m1 codes */
    static constexpr int  SPB   = NV ? 2 : 1; /* e2m1: scales a block */
    static_assert(!MX || SQ_BQ == 4, "mxfp4 and nvfp4 in the default geometry: a row's scales one copy a stage");
    static constexpr int WB     = AFF ? 4 * affine_bits<F>() : F == GPU_Q4_0 || MX ? 16 : 32; /* code bytes of a block */
    static constexpr int WLD    = SQ_BQ * WB + 16;     /* a row's stride (16 bytes of padding: no bank conflicts) */
    static constexpr int XLD    = 2 * SQ_BQ * 32 + 16; /* a token's: hi codes, then lo codes */
    /* a row's scales: SQ_BQ f16 d; MLX affine, its groups' scale and bias pairs (at most a
     * 32-value group's f32 pair a block); mxfp4, SQ_BQ e8m0 bytes; nvfp4, 2 · SQ_BQ e4m3 ones */
    static constexpr int WSB    = AFF ? 8 * SQ_BQ : MX ? SPB * SQ_BQ : 2 * SQ_BQ;
    static constexpr int XSB    = AFF ? 8 : 4;         /* a token block's d; MLX (d, d · S) */
    static constexpr int WS_OFF = SQ_ROWS * WLD;
    static constexpr int X_OFF  = WS_OFF + SQ_ROWS * WSB;
    static constexpr int XS_OFF = X_OFF + NT * XLD; /* the tokens' scales, NT a column block */
    static constexpr int STAGE  = XS_OFF + NT * SQ_BQ * XSB;
    static constexpr int HALVES = NT >= 16 && !G ? 2 : 1;   /* token parts: a warp each for a row tile */
    static constexpr int RT     = SQ_ROWS / 16;             /* row tiles */
    static constexpr int THREADS = 32 * RT * HALVES;
    static constexpr int NI     = NT / 8 / HALVES;          /* a warp's 8-token tiles */
    /* blocks an SM as the stages' shared memory allows on sm_90 (227 KB, 1 KB a block reserved): the
     * registers a thread may take, so that they do not allow fewer */
    static constexpr int FIT    = 227 * 1024 / (SQ_STAGES * STAGE + 1024);
    static constexpr int BLOCKS = FIT < 2 ? 1 : G && FIT > 2 ? 2 : FIT; /* wide: 128 registers a thread */
};

/* A thread's share of every stage's copies, the same at each stage but for the stage's first
 * column block k0. Its pieces of a kind are THREADS apart in the kind's order, so they differ
 * by a fixed number of rows or tokens: a piece's source is the kind's base (piece 0 at k0 = 0)
 * plus a stride the whole block shares, its place in a stage a constant, and whether its row or
 * token exists a bit of `ok` (a piece without one copies zeros, reading nothing). Worked out
 * once a block: the copies' index arithmetic at every stage, in loops the compiler could not
 * unroll, was as many instructions as the products (ncu on the 8B's batch of 32: 32
 * instructions an mma). */
template <int F, int NT, int G, bool MAP = false, bool PAIR = false> struct sq_copies {
    typedef sq_shape<F, NT, G> S;
    static constexpr int SQ_ROWS = S::SQ_ROWS, SQ_BQ = S::SQ_BQ;
    /* PAIR: the block's first HALF rows are a gate weight's, the next HALF the same rows of the up
     * weight (k_mmq_s_glu) */
    static constexpr int HALF = PAIR ? SQ_ROWS / 2 : SQ_ROWS;
    static constexpr int CPR = SQ_BQ * S::WB / 16;                            /* 16-byte pieces of a row's codes */
    static constexpr int NW  = (SQ_ROWS * CPR + S::THREADS - 1) / S::THREADS; /* a thread's pieces of each kind */
    /* a thread's weight pieces a whole number of rows apart (not for MLX 3, 5 and 6 bits: 3, 5 or 6
     * pieces a row) */
    static constexpr bool EVEN = S::THREADS % CPR == 0;
    static constexpr int NX  = (NT * SQ_BQ * 4 + S::THREADS - 1) / S::THREADS;
    static constexpr int NS  = (NT * SQ_BQ + S::THREADS - 1) / S::THREADS;
    /* rows, tokens apart */
    static constexpr int RW = EVEN ? S::THREADS / CPR : 0, TX = S::THREADS / (4 * SQ_BQ), TS = S::THREADS / SQ_BQ;
    static constexpr int JH = PAIR && RW ? HALF / RW : NW; /* PAIR: the weight pieces of a half */
    static_assert(S::THREADS % (4 * SQ_BQ) == 0, "token pieces a whole number of tokens apart");
    static_assert(!PAIR || (EVEN && RW && HALF % (RW ? RW : 1) == 0 && NW == 2 * JH),
                  "a pair's pieces: whole rows of each half");
    static_assert(NW <= 8 && NX <= 8 && NS <= 8, "ok's bytes");
    const uint8_t *w, *ws; /* piece 0's codes; the row's scales (threads below SQ_ROWS) */
    const int8_t  *x;
    const float2  *s;
    int            wstep; /* bytes between weight pieces j and j + 1 (RW rows; the weight picked in a set
                           * by the block: its row_bytes read from the parameters once, not each stage) */
    int64_t        wpair; /* PAIR: bytes from a gate row to the same row of the up weight */
    int            gshift, pb; /* MLX: log2 of a group's values, bytes of its scale and bias pair */
    uint32_t       ok; /* bit j: weight piece j's row exists; 8 + j: token piece j's; 16 + j: scale piece j's;
                        * 24: ws's */
    /* with a row map (MAP: a MoE layer's pairs, each token's row read where it lies), each token
     * piece's own source at k0 = 0: its token's row is the map's, not a fixed stride from piece 0's */
    const int8_t *xm[MAP ? NX : 1];
    const float2 *sm[MAP ? NS : 1];
    /* without EVEN, each weight piece's own source at k0 = 0 */
    const uint8_t *wp[EVEN ? 1 : NW];
};

template <int F, int NT, int G, bool MAP, bool PAIR>
static __device__ __forceinline__ void sq_plan(sq_copies<F, NT, G, MAP, PAIR> &c, const gpu_wdesc &w,
                                               const gpu_wdesc &wu, const gpu_xq &x, int64_t T,
                                               const int32_t *__restrict__ map, int64_t r0, int tid)
{
    typedef sq_copies<F, NT, G, MAP, PAIR> C;
    constexpr int SQ_ROWS = C::SQ_ROWS, SQ_BQ = C::SQ_BQ, HALF = C::HALF;
    const int64_t rw = r0 + tid / C::CPR, tx = tid / (4 * SQ_BQ), ts = tid / SQ_BQ;
    const bool    ws_ok = r0 + tid % HALF < w.rows && tid < SQ_ROWS; /* PAIR: tid % HALF, either weight's row */
    c.ok                = ws_ok ? 1u << 24 : 0u;
#pragma unroll
    for (int j = 0; j < C::NW; j++) {
        if constexpr (C::EVEN) {
            c.ok |= (uint32_t)(rw + C::RW * (j % C::JH) < w.rows) << j;
        } else {
            const int     i = tid + C::S::THREADS * j;
            const int64_t r = r0 + i / C::CPR;
            const bool    ok = i < SQ_ROWS * C::CPR && r < w.rows;
            c.ok |= (uint32_t)ok << j;
            c.wp[j] = w.data + (ok ? r : 0) * w.row_bytes + 16 * (i % C::CPR);
        }
    }
#pragma unroll
    for (int j = 0; j < C::NX; j++) c.ok |= (uint32_t)(tx + C::TX * j < T) << (8 + j);
#pragma unroll
    for (int j = 0; j < C::NS; j++) c.ok |= (uint32_t)(ts + C::TS * j < T) << (16 + j);
    c.w  = w.data + rw * w.row_bytes + 16 * (tid % C::CPR);
    c.wstep = (int)(C::RW * w.row_bytes);
    c.wpair = PAIR ? wu.data - w.data : 0;
    c.ws = (PAIR && tid >= HALF ? wu.data : w.data) + (ws_ok ? r0 + tid % HALF : 0) * w.row_bytes + w.scales_off;
    if constexpr (sq_mlx<F>()) c.gshift = w.gshift, c.pb = w.sdtype == 0 ? 8 : 4;
    c.x  = x.q + (tx * x.nb + tid / 4 % SQ_BQ) * XQ_BLOCK + 16 * (tid % 4);
    c.s  = x.d + ts * x.nb + tid % SQ_BQ;
    if constexpr (MAP) {
#pragma unroll
        for (int j = 0; j < C::NX; j++) {
            const int64_t row = c.ok >> (8 + j) & 1 ? map[tx + C::TX * j] : 0;
            c.xm[j]           = x.q + (row * x.nb + tid / 4 % SQ_BQ) * XQ_BLOCK + 16 * (tid % 4);
        }
#pragma unroll
        for (int j = 0; j < C::NS; j++) {
            const int64_t row = c.ok >> (16 + j) & 1 ? map[ts + C::TS * j] : 0;
            c.sm[j]           = x.d + row * x.nb + tid % SQ_BQ;
        }
    }
}

/* Stage st (stg: the same, generic): columns blocks k0 .. k0 + SQ_BQ (zeros past kend, past the
 * rows, past the tokens); a piece whose row or token does not exist reads nothing. WHOLE:
 * k0 + SQ_BQ <= kend (every stage but perhaps a part's last), its copies without the column checks. */
template <int F, int NT, bool X8, int G, bool MAP, bool PAIR, bool WHOLE>
static __device__ __forceinline__ void sq_issue(gpu_smem st, int8_t *stg, const sq_copies<F, NT, G, MAP, PAIR> &c,
                                                const gpu_xq &x, int k0, int kend, int tid)
{
    typedef sq_shape<F, NT, G>              S;
    typedef sq_copies<F, NT, G, MAP, PAIR> C;
    constexpr int  SQ_ROWS = S::SQ_ROWS, SQ_BQ = S::SQ_BQ;
    constexpr bool whole = WHOLE;
    /* whether every thread has its j-th piece of a kind: no check then */
    constexpr bool all_w = SQ_ROWS * C::CPR % S::THREADS == 0, all_x = NT * SQ_BQ * 4 % S::THREADS == 0;
#pragma unroll
    for (int j = 0; j < C::NW; j++) {
        const int  i = tid + S::THREADS * j, k = i % C::CPR;
        const bool ok = (c.ok >> j & 1) && (whole || k0 + k * 16 / S::WB < kend);
        const uint8_t *src = !C::EVEN ? c.wp[C::EVEN ? 0 : j]
                             : PAIR   ? c.w + (j % C::JH) * c.wstep + (j >= C::JH ? c.wpair : 0)
                                      : c.w + j * c.wstep;
        if (all_w || i < SQ_ROWS * C::CPR)
            gpu_cp_async16_at(st + i / C::CPR * S::WLD + 16 * k, ok ? src + k0 * S::WB : c.ws, ok);
    }
    if (S::AFF && tid < SQ_ROWS) {
        /* the row's pairs for the stage's groups (columns and groups start together: a stage is
         * 128 or 256 values, a group 32, 64 or 128), n bytes at a multiple of n: 4 to 32 in
         * geometry 2 */
        const int      n = ((32 * SQ_BQ) >> c.gshift) * c.pb;
        const uint8_t *hs = c.ws + ((32 * k0) >> c.gshift) * c.pb;
        const bool     ok = c.ok >> 24 & 1;
        if (whole && n >= 16)
            for (int o = 0; o < n; o += 16) gpu_cp_async16_at(st + S::WS_OFF + S::WSB * tid + o, hs + o, ok);
        else if (whole && n == 8) gpu_cp_async8_at(st + S::WS_OFF + S::WSB * tid, hs, ok);
        else if (whole) gpu_cp_async4_at(st + S::WS_OFF + S::WSB * tid, hs, ok);
        else { /* the last, short stage: no read past the row's pairs */
            const int m   = ((32 * (kend - k0) + (1 << c.gshift) - 1) >> c.gshift) * c.pb;
            uint32_t *dst = (uint32_t *)(stg + S::WS_OFF + S::WSB * tid);
            for (int i = 0; i < n / 4; i++) dst[i] = ok && 4 * i < m ? ((const uint32_t *)hs)[i] : 0u;
        }
    } else if (S::MX && tid < SQ_ROWS) { /* a row's scales of SQ_BQ = 4 blocks: 4 bytes (nvfp4 8) */
        const uint8_t *hs = c.ws + S::SPB * k0;
        const bool     ok = c.ok >> 24 & 1;
        if (whole && S::NV) gpu_cp_async8_at(st + S::WS_OFF + S::WSB * tid, hs, ok);
        else if (whole) gpu_cp_async4_at(st + S::WS_OFF + S::WSB * tid, hs, ok);
        else { /* the last, short stage: no read past the row's scales */
            uint8_t *dst = (uint8_t *)(stg + S::WS_OFF + S::WSB * tid);
            for (int i = 0; i < S::WSB; i++) dst[i] = ok && k0 + i / S::SPB < kend ? hs[i] : 0;
        }
    } else if (tid < SQ_ROWS) { /* a row's SQ_BQ scales: 16 bytes (8 in geometry 2) */
        const uint8_t *hs = c.ws + 2 * k0;
        const bool     ok = c.ok >> 24 & 1;
        static_assert(SQ_BQ == 8 || SQ_BQ == 4, "a row's scales in one copy");
        if (whole && SQ_BQ == 8) gpu_cp_async16_at(st + S::WS_OFF + 2 * SQ_BQ * tid, hs, ok);
        else if (whole) gpu_cp_async8_at(st + S::WS_OFF + 2 * SQ_BQ * tid, hs, ok);
        else { /* the last, short stage: no read past the row's scales */
            uint16_t *dst = (uint16_t *)(stg + S::WS_OFF + 2 * SQ_BQ * tid);
            for (int i = 0; i < SQ_BQ; i++) dst[i] = ok && k0 + i < kend ? *(const uint16_t *)(hs + 2 * i) : 0;
        }
    }
#pragma unroll
    for (int j = 0; j < C::NX; j++) { /* a token block's 64 bytes: hi, hi, lo, lo */
        const int  i = tid + S::THREADS * j, tt = i / (4 * SQ_BQ), qb = i / 4 % SQ_BQ, piece = i % 4;
        const bool ok = (c.ok >> (8 + j) & 1) && (whole || k0 + qb < kend);
        const int8_t *src;
        if constexpr (MAP) src = c.xm[j] + k0 * XQ_BLOCK;
        else src = c.x + ((int64_t)(C::TX * j) * x.nb + k0) * XQ_BLOCK;
        if ((all_x || i < NT * SQ_BQ * 4) && !(X8 && piece >= 2))
            gpu_cp_async16_at(st + S::X_OFF + tt * S::XLD + (piece / 2) * 32 * SQ_BQ + 32 * qb + 16 * (piece % 2),
                              ok ? src : x.q, ok);
    }
#pragma unroll
    for (int j = 0; j < C::NS; j++) {
        const int  i = tid + S::THREADS * j;
        const bool ok = (c.ok >> (16 + j) & 1) && (whole || k0 + i % SQ_BQ < kend);
        const float2 *src;
        if constexpr (MAP) src = c.sm[j] + k0;
        else src = c.s + (int64_t)(C::TS * j) * x.nb + k0;
        /* d (MLX: d and d · S), by column block, then token: a lane's two tokens in one load */
        if (i < NT * SQ_BQ && S::AFF)
            gpu_cp_async8_at(st + S::XS_OFF + 8 * (i % SQ_BQ * NT + i / SQ_BQ), ok ? (const void *)src : x.d, ok);
        else if (i < NT * SQ_BQ)
            gpu_cp_async4_at(st + S::XS_OFF + 4 * (i % SQ_BQ * NT + i / SQ_BQ), ok ? (const void *)src : x.d, ok);
    }
    gpu_cp_commit();
}

/* Q4_0 codes n (nibbles at bits 4..7 of each byte of v) as signed bytes 16 · (n - 8): one LOP3
 * where n - 8 in the low bits took three; the products come out 16 times theirs, exactly (sq_tile
 * takes the 16 out at the end, a power of two: the same sums bit for bit above f32's subnormals). */
static __device__ __forceinline__ int nib16(uint32_t v) { return (int)((v & 0xf0f0f0f0u) ^ 0x80808080u); }

/* Values 4k .. 4k + 3 of a block of B-bit codes as stored (value j at bit B j of its words c), as
 * bytes: the words holding them (the second may be the next block's, or the row's padding in
 * the stage), shifted together. */
template <int B> static __device__ __forceinline__ int bits_word(const int8_t *c, int k)
{
    const int       bit = 4 * B * k;
    const uint32_t *w   = (const uint32_t *)c + bit / 32;
    return (int)bits_spread<B>((uint32_t)((((uint64_t)w[1] << 32) | w[0]) >> (bit % 32)));
}

/* acc (this lane's elements of the warp's 16 rows, row tile rt, × its tokens, half th of NT) +=
 * stage st's products (Q4_0's 16 times theirs, nib16); MLX affine: groups of 2^gshift values,
 * pairs of sdtype; nvfp4: scales times gmul. */
template <int F, int NT, bool X8, int G>
static __device__ __forceinline__ void sq_compute(const int8_t *st, int rt, int th, int g, int q, int gshift,
                                                  int sdtype, float gmul, float (&acc)[sq_shape<F, NT, G>::NI][4])
{
    typedef sq_shape<F, NT, G> S;
    constexpr int SQ_BQ = S::SQ_BQ;
    const int       r  = 16 * rt + g;
    const int8_t   *w0 = st + r * S::WLD, *w8 = w0 + 8 * S::WLD;
    const uint16_t *ws = (const uint16_t *)(st + S::WS_OFF);
    const float    *xs = (const float *)(st + S::XS_OFF);
    const int       lane = 4 * g + q;
    /* the row this lane gives ldmatrix for its 8-token tile: token lane % 8 of the tile, the hi
     * codes' first or second 16 bytes (lanes 0 .. 15), then the lo codes' (16 .. 31; X8: the hi
     * codes again, the lo ones never staged) */
    const int8_t *xr =
        st + S::X_OFF + (lane % 8) * S::XLD + (X8 ? 0 : lane / 16) * 32 * SQ_BQ + 16 * (lane / 8 % 2);
#pragma unroll
    for (int qb = 0; qb < SQ_BQ; qb++) {
        int a[4];
        float sw[2], bw[2] = {0.0f, 0.0f}; /* rows r and r + 8: scales (MLX: and biases; nvfp4: bw
                                            * the second half's scales) */
        if (F == GPU_Q4_0 || F == GPU_AFFINE4) { /* byte i: value i (low nibble) and i + 16 (high) */
            const uint32_t u0 = *(const uint32_t *)(w0 + 16 * qb + 4 * q), u8 = *(const uint32_t *)(w8 + 16 * qb + 4 * q);
            if (F == GPU_Q4_0) a[0] = nib16(u0 << 4), a[1] = nib16(u8 << 4), a[2] = nib16(u0), a[3] = nib16(u8);
            else a[0] = u0 & 0x0f0f0f0fu, a[1] = u8 & 0x0f0f0f0fu, a[2] = u0 >> 4 & 0x0f0f0f0fu, a[3] = u8 >> 4 & 0x0f0f0f0fu;
        } else if (S::MX) { /* values 4q .. 4q + 3 are bytes 2q, 2q + 1; 16 + 4q .. bytes 8 + 2q, 9 + 2q */
            const uint16_t *h0 = (const uint16_t *)(w0 + 16 * qb) + q, *h8 = (const uint16_t *)(w8 + 16 * qb) + q;
            e2m1_bytes(h0[0] | (uint32_t)h0[4] << 16, &a[0], &a[2]), e2m1_bytes(h8[0] | (uint32_t)h8[4] << 16, &a[1], &a[3]);
        } else if (S::AFF && F != GPU_AFFINE8) { /* 2, 3, 5, 6 bits: values 4q .., 16 + 4q .. */
            constexpr int B = affine_bits<F>();
            a[0] = bits_word<B>(w0 + S::WB * qb, q), a[1] = bits_word<B>(w8 + S::WB * qb, q);
            a[2] = bits_word<B>(w0 + S::WB * qb, q + 4), a[3] = bits_word<B>(w8 + S::WB * qb, q + 4);
        } else {
            const uint32_t m = F == GPU_AFFINE8 ? 0x80808080u : 0u; /* MLX: q - 128 */
            a[0] = *(const int *)(w0 + 32 * qb + 4 * q) ^ m, a[1] = *(const int *)(w8 + 32 * qb + 4 * q) ^ m;
            a[2] = *(const int *)(w0 + 32 * qb + 16 + 4 * q) ^ m, a[3] = *(const int *)(w8 + 32 * qb + 16 + 4 * q) ^ m;
        }
        if constexpr (S::AFF) { /* block qb's group's pair, as the tiled kernel decodes it */
            const int gi = (32 * qb) >> gshift;
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int8_t *p = st + S::WS_OFF + S::WSB * (r + 8 * h);
                if (sdtype == 0) {
                    const uint2 v = *(const uint2 *)(p + 8 * gi);
                    mlx_scale_bias(v.x, v.y, 0, &sw[h], &bw[h]);
                } else mlx_scale_bias(*(const uint32_t *)(p + 4 * gi), 0u, sdtype, &sw[h], &bw[h]);
                if (F == GPU_AFFINE8) bw[h] += 128.0f * sw[h]; /* the codes went in as q - 128 */
            }
        } else if constexpr (S::NV) { /* each half's, as the decode kernels take it, halved as mxfp4's */
            const uint8_t *p = (const uint8_t *)st + S::WS_OFF + 2 * qb;
            const float    m = 0.5f * gmul;
            sw[0] = dec_e4m3(p[S::WSB * r]) * m, bw[0] = dec_e4m3(p[S::WSB * r + 1]) * m;
            sw[1] = dec_e4m3(p[S::WSB * (r + 8)]) * m, bw[1] = dec_e4m3(p[S::WSB * (r + 8) + 1]) * m;
        } else if constexpr (S::MX) { /* half the block's scale: the codes went in as twice their values */
            const uint8_t *p = (const uint8_t *)st + S::WS_OFF + qb;
            sw[0] = 0.5f * dec_e8m0(p[S::WSB * r]), sw[1] = 0.5f * dec_e8m0(p[S::WSB * (r + 8)]);
        } else sw[0] = dec_f16(ws[SQ_BQ * r + qb]), sw[1] = dec_f16(ws[SQ_BQ * (r + 8) + qb]);
#pragma unroll
        for (int ni = 0; ni < S::NI; ni++) {
            const int tile = th * S::NI + ni, c = 8 * tile + 2 * q; /* c, c + 1: this lane's tokens */
            uint32_t  b[4]; /* hi bytes 4q .., 16 + 4q .. of token 8 tile + g; lo the same */
            gpu_ldsm_x4(b, xr + 8 * tile * S::XLD + 32 * qb);
            float sx[2], sy[2]; /* d of tokens c, c + 1 (MLX: and d · S) */
            if constexpr (S::AFF) {
                const float4 s4 = *(const float4 *)(xs + 2 * (NT * qb + c));
                sx[0] = s4.x, sy[0] = s4.y, sx[1] = s4.z, sy[1] = s4.w;
            } else {
                const float2 s2 = *(const float2 *)(xs + NT * qb + c);
                sx[0] = s2.x, sx[1] = s2.y;
            }
            int sh[4] = {0, 0, 0, 0}, sl[4] = {0, 0, 0, 0};
            if constexpr (S::NV) { /* values 0 .. 15 and 16 .. 31 apart (k16 products): each with its own scale */
                int th2[4] = {0, 0, 0, 0}, tl2[4] = {0, 0, 0, 0};
                gpu_imma_16x8x16(sh, a[0], a[1], (int)b[0]), gpu_imma_16x8x16(sl, a[0], a[1], (int)b[2]);
                gpu_imma_16x8x16(th2, a[2], a[3], (int)b[1]), gpu_imma_16x8x16(tl2, a[2], a[3], (int)b[3]);
#pragma unroll
                for (int e = 0; e < 4; e++)
                    acc[ni][e] += sx[e % 2] * (sw[e / 2] * (float)(256 * sh[e] + sl[e]) +
                                               bw[e / 2] * (float)(256 * th2[e] + tl2[e]));
                continue;
            }
            gpu_imma_16x8x32(sh, a, (int)b[0], (int)b[1]);
            if (!X8) gpu_imma_16x8x32(sl, a, (int)b[2], (int)b[3]);
#pragma unroll
            for (int e = 0; e < 4; e++) { /* element e: row r (+ 8 from e = 2), token c + e % 2 */
                if (S::AFF)
                    acc[ni][e] += sw[e / 2] * sx[e % 2] * (float)(256 * sh[e] + sl[e]) + bw[e / 2] * sy[e % 2];
                else acc[ni][e] += sw[e / 2] * sx[e % 2] * (float)(256 * sh[e] + sl[e]);
            }
        }
    }
}

/* acc (this lane's elements of its warp's row tile rt = warp % RT × its tokens, half th = warp /
 * RT of NT) = the block's rows from r0 (SQ_ROWS of w; PAIR: HALF of w, then the same rows of wu)
 * by the T (at most NT) tokens of x, column blocks kz0 .. kend (Q4_0's 16 times theirs, nib16).
 * Token t is x's row t, or with MAP its row map[t]. */
template <int F, int NT, bool X8, int G, bool MAP = false, bool PAIR = false>
static __device__ __forceinline__ void sq_sums(const gpu_wdesc &w, const gpu_wdesc &wu, const gpu_xq &x,
                                               const int32_t *__restrict__ map, int64_t T, int64_t r0, int64_t kz0,
                                               int64_t kend, float (&acc)[sq_shape<F, NT, G>::NI][4])
{
    GPU_DYN_SHARED(int8_t, sq_smem);
    typedef sq_shape<F, NT, G> S;
    constexpr int SQ_BQ = S::SQ_BQ, SQ_STAGES = S::SQ_STAGES;
    const int     tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, q = lane % 4;
    const int     rt = warp % S::RT, th = warp / S::RT; /* row tile, token half */
    /* column blocks in 32 bits (a row's are w.cols / 32), stages by index, not by a 64-bit
     * modulo: the loop's own arithmetic was a tenth of its instructions */
    const int k0 = (int)kz0, ke = (int)kend, nst = (ke - k0 + SQ_BQ - 1) / SQ_BQ;
#pragma unroll
    for (int ni = 0; ni < S::NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) acc[ni][e] = 0.0f;
    sq_copies<F, NT, G, MAP, PAIR> cp;
    sq_plan<F, NT, G, MAP, PAIR>(cp, w, wu, x, T, map, r0, tid);
    const gpu_smem sb = gpu_smem_at(sq_smem);
    for (int s = 0; s < SQ_STAGES - 1; s++) { /* a group per stage, empty past the end: the waits count groups */
        const int ks = k0 + s * SQ_BQ;
        if (ks + SQ_BQ <= ke)
            sq_issue<F, NT, X8, G, MAP, PAIR, true>(sb + s * S::STAGE, sq_smem + s * S::STAGE, cp, x, ks, ke, tid);
        else if (ks < ke)
            sq_issue<F, NT, X8, G, MAP, PAIR, false>(sb + s * S::STAGE, sq_smem + s * S::STAGE, cp, x, ks, ke, tid);
        else gpu_cp_commit();
    }
    int sc = 0, si = SQ_STAGES - 1; /* the stages computed and filled next */
    for (int it = 0, kn = k0 + (SQ_STAGES - 1) * SQ_BQ; it < nst; it++, kn += SQ_BQ) {
        gpu_cp_wait<SQ_STAGES - 2>(); /* stage it has landed (this thread's copies) */
        __syncthreads();              /* everyone's; and stage it - 1 is no longer read */
        if (kn + SQ_BQ <= ke)
            sq_issue<F, NT, X8, G, MAP, PAIR, true>(sb + si * S::STAGE, sq_smem + si * S::STAGE, cp, x, kn, ke, tid);
        else if (kn < ke)
            sq_issue<F, NT, X8, G, MAP, PAIR, false>(sb + si * S::STAGE, sq_smem + si * S::STAGE, cp, x, kn, ke, tid);
        else gpu_cp_commit();
        sq_compute<F, NT, X8, G>(sq_smem + sc * S::STAGE, rt, th, g, q, w.gshift, w.sdtype, w.gmul, acc);
        sc = sc == SQ_STAGES - 1 ? 0 : sc + 1, si = si == SQ_STAGES - 1 ? 0 : si + 1;
    }
}

/* What an output's sum is multiplied by: 1/16 for Q4_0 (nib16's 16), else 1. */
template <int F> static __host__ __device__ constexpr float sq_unscale() { return F == GPU_Q4_0 ? 0.0625f : 1.0f; }

/* Rows rb · SQ_ROWS .. of w by the T (at most NT) tokens of x, column blocks kz0 .. kend, into y
 * (with add: added to it). Token t is x's row t, or with MAP its row map[t]. */
template <int F, int NT, bool X8, int G, bool MAP = false>
static __device__ __forceinline__ void sq_tile(const gpu_wdesc &w, const gpu_xq &x, const int32_t *__restrict__ map,
                                               int64_t T, int64_t rb, int64_t kz0, int64_t kend,
                                               float *__restrict__ y, int add)
{
    typedef sq_shape<F, NT, G> S;
    const int     warp = threadIdx.x / 32, g = threadIdx.x % 32 / 4, q = threadIdx.x % 4;
    const int     rt = warp % S::RT, th = warp / S::RT;
    const int64_t r0 = rb * S::SQ_ROWS;
    float         acc[S::NI][4];
    sq_sums<F, NT, X8, G, MAP>(w, w, x, map, T, r0, kz0, kend, acc);
    constexpr float unscale = sq_unscale<F>();
#pragma unroll
    for (int ni = 0; ni < S::NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int64_t r = r0 + 16 * rt + g + 8 * (e / 2), t = 8 * (th * S::NI + ni) + 2 * q + e % 2;
            if (r < w.rows && t < T) mmq_put(&y[t * w.rows + r], acc[ni][e] * unscale, add);
        }
}


/* From acc (sq_sums' with PAIR, the default geometry: the block's gate rows r0 .. r0 + 63, then
 * the same up rows), h = act(gate) · up for its rows and T tokens as k_glu computes it, written in
 * f32 into h (token t's row at h + t · rows) and, with xo.q, quantized as k_glu quantizes it from
 * block blk0 on (a token's 64 rows are two whole blocks of 32 values: rows a multiple of 32). The
 * two halves' sums meet in the stages' shared memory (a token's row padded by 4 floats: the lanes
 * of a warp write distinct banks). */
enum { SQ_GLU_LD = 64 + 4 };
template <int F, int NT>
static __device__ __forceinline__ void sq_glu_put(const float (&acc)[sq_shape<F, NT, SQ_GEOM_DEFAULT>::NI][4],
                                                  int64_t r0, int64_t T, int64_t rows, int act, float *__restrict__ h,
                                                  const gpu_xq_out &xo, int64_t blk0)
{
    typedef sq_shape<F, NT, SQ_GEOM_DEFAULT> S;
    constexpr int HALF = S::SQ_ROWS / 2;
    static_assert(HALF + 4 == SQ_GLU_LD && S::HALVES == 1 && S::RT == 8, "four row tiles of each weight");
    static_assert(2 * NT * SQ_GLU_LD * sizeof(float) <= S::SQ_STAGES * S::STAGE && NT * HALF / 32 % 4 == 0,
                  "the sums in the stages' room; whole groups of four blocks");
    GPU_DYN_SHARED(int8_t, sq_smem);
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, q = lane % 4;
    float    *gu = (float *)sq_smem; /* [gate, up][token][row of the block] */
    __syncthreads();                 /* every warp past its last stage */
#pragma unroll
    for (int ni = 0; ni < S::NI; ni++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int r = 16 * warp + g + 8 * (e / 2), t = 8 * ni + 2 * q + e % 2; /* r: both halves */
            gu[(r / HALF * NT + t) * SQ_GLU_LD + r % HALF] = acc[ni][e] * sq_unscale<F>();
        }
    __syncthreads();
    /* eight lanes a token's block of 32 rows (four blocks a warp at once), lane j of the eight its
     * rows 32 b + 4 j .. + 3: one lane a row, a warp a block at a time, kept each block's GLU and
     * quantization's chains of dependent steps in turn (~6 us more than the products alone) */
    for (int p = 4 * warp + lane / 8; p < NT * HALF / 32; p += 4 * S::THREADS / 32) {
        const int    t = p / (HALF / 32), b = p % (HALF / 32), j = lane % 8, r = 32 * b + 4 * j;
        const bool   live = t < T && r0 + 32 * b < rows; /* a whole group of eight */
        const float4 gv = *(const float4 *)&gu[t * SQ_GLU_LD + r], uv = *(const float4 *)&gu[(NT + t) * SQ_GLU_LD + r];
        const float  v[4] = {glu_value(gv.x, uv.x, act), glu_value(gv.y, uv.y, act), glu_value(gv.z, uv.z, act),
                             glu_value(gv.w, uv.w, act)};
        if (live) *(float4 *)&h[t * rows + r0 + r] = make_float4(v[0], v[1], v[2], v[3]);
        if (xo.q) xq_put<4>(v, j, blk0 + (t * rows + r0 + 32 * b) / 32, live, xo);
    }
}

/* The formats whose gate/up pairs the batch kernel takes with their GLU in one launch (k_mmq_s_glu,
 * k_mmq_s_experts_glu), as their index in those launchers' tables: Q4_0, Q8_0, MLX affine 4 and 8
 * bits; -1 for the others. */
static inline int sq_glu_index(int fmt)
{
    return fmt == GPU_Q4_0 ? 0 : fmt == GPU_Q8_0 ? 1 : fmt == GPU_AFFINE4 ? 2 : fmt == GPU_AFFINE8 ? 3 : -1;
}

/* Whether a gate and an up weight can share one launch's blocks (sq_sums with PAIR reads both at
 * one plan's offsets): one shape, layout and groups, rows whole blocks of 32 GLU values. */
static inline bool sq_glu_pair(const gpu_wdesc *wg, const gpu_wdesc *wu)
{
    return wg->rows == wu->rows && wg->cols == wu->cols && wg->row_bytes == wu->row_bytes &&
           wg->scales_off == wu->scales_off && wg->sdtype == wu->sdtype && wg->gshift == wu->gshift && wg->rows % 32 == 0;
}

#endif
