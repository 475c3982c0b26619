/* The emulator's matrix units (tests/simt/simt.h includes this at its end, after the runtime,
 * the scheduler and a wave's collectives it builds on): cp.async's copies, and NVIDIA's mma.sync
 * and ldmatrix or the AMD kind's MFMA and WMMA, each computed from its ISA's operand layout. */
#ifndef CELER_SIMT_MATRIX_H
#define CELER_SIMT_MATRIX_H

/* ---- matrix units ---------------------------------------------------------------------------- */
/* the copies, done when called (cp.async's waits have nothing to wait for) */
typedef int8_t       *gpu_smem;
static inline gpu_smem gpu_smem_at(void *p) { return (int8_t *)p; }
static inline void     simt_copy(gpu_smem d, const void *s, bool v, size_t n)
{
    static const uint4 z = {0, 0, 0, 0};
    if ((uintptr_t)d % n || (v && (uintptr_t)s % n)) { /* cp.async asks both ends at a multiple of n */
        fprintf(stderr, "simt: block (%u, %u, %u), thread %u: a %zu-byte async copy from %p to %p, not %zu-byte aligned\n",
                simt.block.x, simt.block.y, simt.block.z, threadIdx.x, n, s, (void *)d, n);
        abort();
    }
    memcpy(d, v ? s : &z, n);
}
static inline void gpu_cp_async16_at(gpu_smem d, const void *s, bool v) { simt_copy(d, s, v, 16); }
static inline void gpu_cp_async8_at(gpu_smem d, const void *s, bool v) { simt_copy(d, s, v, 8); }
static inline void gpu_cp_async4_at(gpu_smem d, const void *s, bool v) { simt_copy(d, s, v, 4); }
static inline void                    gpu_cp_commit(void) {}
template <int N> static inline void   gpu_cp_wait(void) {}

/* Half k of a lane's operand words (a 32-bit word a slot, the lower k in the low half). */
static inline float simt_half(const uint64_t *w, int k) { return gpu_f16_val((uint32_t)(w[k / 2] >> (16 * (k % 2)))); }

/* The wave's 16 x NN tile D of the collective whose operands are all (buffer p): computed by
 * the first lane to ask, from A[m][k] and B[k][n] (given as Bᵀ[n][k]) that place gathers from the
 * lanes as the ISA places them (below). */
template <typename V, int NN = 16, typename F>
static inline const double (*simt_tile(const uint64_t (*all)[16], F place))[16]
{
    simt_wave     &w = simt.waves[threadIdx.x / CELER_WARP];
    const int      p = (int)(all == w.word[1]);
    for (int l = 0; l < simt_lanes(); l++) simt_from(all, l); /* the matrix units want the whole wave */
    if (w.tile_gen[p] != w.bar.gen) {
        w.tile_gen[p] = w.bar.gen;
        V a[16][32], bt[16][32]; /* A by rows, B by columns: both dotted along k */
        const int kn = place(all, a, bt); /* the k of one instruction */
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < NN; n++) {
                V d = 0;
                for (int k = 0; k < kn; k++) d += a[m][k] * bt[n][k];
                w.tile[p][m][n] = (double)d;
            }
    }
    return w.tile[p];
}

#if defined(SIMT_NVIDIA)
#define CELER_GPU_IMMA      1
#define CELER_GPU_IMMA_HERE 1
#define CELER_GPU_AMX       0
#define CELER_GPU_AMX_HERE  CELER_AMX_NONE
static inline bool gpu_imma_ok(const gpuDeviceProp *p) { return p->major >= 8; }

/* NVIDIA's matrix instructions, their operands where the PTX ISA places them (written here from
 * the ISA's fragment tables, not from the kernels' comments; lane = 4 g + q):
 *   mma.m16n8k32.row.col.s32.s8.s8.s32: A[m][k] in lane 4 (m % 8) + k % 16 / 4, register m / 8 +
 *     2 (k / 16), byte k % 4; B[k][n] in lane 4 n + k % 16 / 4, register k / 16, byte k % 4;
 *   mma.m16n8k16.row.col.s32.s8.s8.s32: A[m][k] in lane 4 (m % 8) + k / 4, register m / 8, byte
 *     k % 4; B[k][n] in lane 4 n + k / 4, byte k % 4;
 *   mma.m16n8k16.row.col.f32.f16.f16.f32: A[m][k] in lane 4 (m % 8) + k % 8 / 2, register m / 8 +
 *     2 (k / 8), half k % 2; B[k][n] in lane 4 n + k % 8 / 2, register k / 8, half k % 2;
 *   both: C[m][n] in lane 4 (m % 8) + n / 2, register 2 (m / 8) + n % 2.
 * Every lane of the warp takes part (mma.sync.aligned); each computes its own four outputs. */
static inline const uint64_t (*simt_mma_operands(const uint32_t *a, uint32_t b0, uint32_t b1))[16]
{
    simt_lane_there(CELER_WARP - 1); /* a whole warp */
    const uint64_t mine[6] = {a[0], a[1], a[2], a[3], b0, b1}, (*all)[16] = simt_exchange(mine, 6);
    for (int l = 0; l < CELER_WARP; l++) simt_from(all, l);
    return all;
}

static inline void gpu_imma_16x8x32(int c[4], const int a[4], int b0, int b1)
{
    const uint64_t(*all)[16] = simt_mma_operands((const uint32_t *)a, (uint32_t)b0, (uint32_t)b1);
    const int lane = (int)(threadIdx.x % CELER_WARP);
    for (int r = 0; r < 4; r++) {
        const int m = lane / 4 + 8 * (r / 2), n = 2 * (lane % 4) + r % 2;
        for (int k = 0; k < 32; k++) {
            const int8_t av = (int8_t)(all[4 * (m % 8) + k % 16 / 4][m / 8 + 2 * (k / 16)] >> (8 * (k % 4)));
            const int8_t bv = (int8_t)(all[4 * n + k % 16 / 4][4 + k / 16] >> (8 * (k % 4)));
            c[r] += (int)av * (int)bv;
        }
    }
}

static inline void gpu_imma_16x8x16(int c[4], int a0, int a1, int b)
{
    const uint32_t a[4] = {(uint32_t)a0, (uint32_t)a1, 0u, 0u};
    const uint64_t(*all)[16] = simt_mma_operands(a, (uint32_t)b, 0u);
    const int lane = (int)(threadIdx.x % CELER_WARP);
    for (int r = 0; r < 4; r++) {
        const int m = lane / 4 + 8 * (r / 2), n = 2 * (lane % 4) + r % 2;
        for (int k = 0; k < 16; k++) {
            const int8_t av = (int8_t)(all[4 * (m % 8) + k / 4][m / 8] >> (8 * (k % 4)));
            const int8_t bv = (int8_t)(all[4 * n + k / 4][4] >> (8 * (k % 4)));
            c[r] += (int)av * (int)bv;
        }
    }
}

/* The warp's 16 x 8 product computed once (simt_tile), each lane taking its four outputs: f16
 * products exact in f32, summed in f32 in k order. */
static inline void gpu_hmma_16x8x16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    const uint64_t(*all)[16] = simt_mma_operands(a, b0, b1);
    const double(*d)[16] = simt_tile<float, 8>(all, [](const uint64_t(*o)[16], float(*ta)[32], float(*tb)[32]) {
        for (int x = 0; x < 16; x++)
            for (int k = 0; k < 16; k++) {
                ta[x][k] = simt_half(o[4 * (x % 8) + k % 8 / 2] + x / 8 + 2 * (k / 8), k % 2);
                if (x < 8) tb[x][k] = simt_half(o[4 * x + k % 8 / 2] + 4 + k / 8, k % 2);
            }
        return 16;
    });
    const int lane = (int)(threadIdx.x % CELER_WARP);
    for (int r = 0; r < 4; r++) c[r] += (float)d[lane / 4 + 8 * (r / 2)][2 * (lane % 4) + r % 2];
}

/* ldmatrix.sync.aligned.m8n8.x4.shared.b16: lanes 8 i .. 8 i + 7 give the rows of 8 x 8 matrix i
 * (16 bytes each); without .trans lane 4 g + q gets elements (g, 2 q) and (g, 2 q + 1) of matrix
 * i in register i, with .trans elements (2 q, g) and (2 q + 1, g), the first in the low half. */
static inline void simt_ldsm(uint32_t r[4], const void *row, bool trans)
{
    simt_lane_there(CELER_WARP - 1);
    if ((uintptr_t)row % 16) { /* the ISA asks each row at a 16-byte boundary */
        fprintf(stderr, "simt: block (%u, %u, %u), thread %u: ldmatrix row at %p, not 16-byte aligned\n", simt.block.x,
                simt.block.y, simt.block.z, threadIdx.x, row);
        abort();
    }
    const uint64_t mine = (uint64_t)(uintptr_t)row, (*all)[16] = simt_exchange(&mine, 1);
    for (int l = 0; l < CELER_WARP; l++) simt_from(all, l);
    const int g = (int)(threadIdx.x % CELER_WARP) / 4, q = (int)(threadIdx.x % 4);
    for (int i = 0; i < 4; i++) {
        uint16_t h[2];
        for (int j = 0; j < 2; j++) {
            const int rr = trans ? 2 * q + j : g, cc = trans ? g : 2 * q + j;
            memcpy(&h[j], (const char *)(uintptr_t)all[8 * i + rr][0] + 2 * cc, 2);
        }
        r[i] = (uint32_t)h[0] | (uint32_t)h[1] << 16;
    }
}
static inline void gpu_ldsm_x4(uint32_t r[4], const void *row) { simt_ldsm(r, row, false); }
static inline void gpu_ldsm_x4_trans(uint32_t r[4], const void *row) { simt_ldsm(r, row, true); }
#else
/* NVIDIA's (HIP's half stubs them too: nothing launches the kernels that take them) */
#define CELER_GPU_IMMA      0
#define CELER_GPU_IMMA_HERE 0
static inline bool gpu_imma_ok(const gpuDeviceProp *) { return false; }
static inline void gpu_imma_16x8x32(int *, const int *, int, int) {}
static inline void gpu_imma_16x8x16(int *, int, int, int) {}
static inline void gpu_ldsm_x4(uint32_t r[4], const void *) { r[0] = r[1] = r[2] = r[3] = 0; }
static inline void gpu_ldsm_x4_trans(uint32_t r[4], const void *) { r[0] = r[1] = r[2] = r[3] = 0; }
static inline void gpu_hmma_16x8x16(float *, const uint32_t *, uint32_t, uint32_t) {}

#define CELER_GPU_AMX      1
#define CELER_GPU_AMX_HERE SIMT_KIND

/* WMMA's operands: lanes l and l + 16 must hold the same ones. */
static inline void simt_wmma_same(const uint64_t (*all)[16], int words)
{
    const int lane = (int)(threadIdx.x % CELER_WARP);
    if (lane < 16)
        for (int i = 0; i < words; i++) simt_bad_operands += all[lane][i] != all[lane + 16][i];
}

/* acc += the 16 x 16 tile of one 32-value block's integer sums (gpu_vendor.h's gpu_amx_block: a
 * is the lane's weight row at the block, b its token's codes), the operands gathered as the HIP
 * half gathers them (amx_word_at) and summed where the ISA puts them:
 *   v_mfma_i32_16x16x16i8 (twice, words 0 then 1): A[m][k] in lane m + 16 (k / 4), byte k % 4;
 *     B[k][n] in lane n + 16 (k / 4), byte k % 4; D[m][n] in lane n + 16 (m / 4), register m % 4.
 *   v_mfma_i32_16x16x32_i8 (words 0, 1 as one 64-bit operand): A[m][k] in lane m + 16 (k / 8),
 *     byte k % 8; B likewise; D as above.
 *   v_wmma_i32_16x16x16_iu8 (twice, words 4j .. 4j + 3): A[m][k] in lanes m and m + 16, byte k;
 *     B[k][n] in lanes n and n + 16; D[m][n] in lane n + 16 (m % 2), register m / 2.
 * Both instructions of a pair are taken as one product over 32 k (an integer sum: the same). */
static inline void gpu_amx_block(int *acc, const int8_t *a, const int8_t *b)
{
    constexpr int K = SIMT_KIND, W = amx_words(K);
    simt_lane_there(CELER_WARP - 1); /* a whole wave */
    const int lane = (int)(threadIdx.x % CELER_WARP);
    uint64_t  mine[16] = {0};
    for (int i = 0; i < W; i++) {
        uint32_t wa, wb;
        memcpy(&wa, a + amx_word_at(K, lane, i), 4), memcpy(&wb, b + amx_word_at(K, lane, i), 4);
        mine[i] = wa, mine[W + i] = wb;
    }
    const uint64_t(*all)[16] = simt_exchange(mine, 2 * W);
    if (K == CELER_AMX_WMMA11) simt_wmma_same(all, 2 * W);
    /* sums of 32 products of bytes: exact in 32 bits. Value k of row (column) x: in lane l, word
     * wd, byte k % 4 (the pair's second instruction takes k 16 .. 31) */
    const double(*d)[16] = simt_tile<int32_t>(all, [](const uint64_t(*o)[16], int32_t(*ta)[32], int32_t(*tb)[32]) {
        for (int x = 0; x < 16; x++)
            for (int k = 0; k < 32; k++) {
                const int l  = K == CELER_AMX_WMMA11   ? x
                               : K == CELER_AMX_MFMA16 ? x + 16 * (k % 16 / 4)
                                                       : x + 16 * (k / 8);
                const int wd = K == CELER_AMX_WMMA11 ? k / 4 : K == CELER_AMX_MFMA16 ? k / 16 : k % 8 / 4;
                ta[x][k] = (int8_t)(o[l][wd] >> (8 * (k % 4))), tb[x][k] = (int8_t)(o[l][W + wd] >> (8 * (k % 4)));
            }
        return 32;
    });
    for (int v = 0; v < amx_acc(K); v++) {
        const int m = K == CELER_AMX_WMMA11 ? 2 * v + lane / 16 : 4 * (lane / 16) + v;
        acc[v] += (int)d[m][lane % 16];
    }
}

/* acc += A B over 16 k in f16 products with f32 sums (gpu_vendor.h's gpu_amx_hmma: a, b the
 * lane's words of f16 pairs), where the ISA puts them:
 *   v_mfma_f32_16x16x16f16 (wave64): A[m][k] in lane m + 16 (k / 4), half k % 4 of its two words;
 *     B[k][n] in lane n + 16 (k / 4), half k % 4; D[m][n] in lane n + 16 (m / 4), register m % 4.
 *   v_wmma_f32_16x16x16_f16 (wave32): A[m][k] in lanes m and m + 16, half k of its eight words;
 *     B[k][n] in lanes n and n + 16, half k; D[m][n] in lane n + 16 (m % 2), register m / 2. */
static inline void gpu_amx_hmma(float *acc, const uint32_t *a, const uint32_t *b)
{
    constexpr int K = SIMT_KIND, W = K == CELER_AMX_WMMA11 ? 8 : 2;
    simt_lane_there(CELER_WARP - 1); /* a whole wave */
    const int lane = (int)(threadIdx.x % CELER_WARP);
    uint64_t  mine[16] = {0};
    for (int i = 0; i < W; i++) mine[i] = a[i], mine[W + i] = b[i];
    const uint64_t(*all)[16] = simt_exchange(mine, 2 * W);
    if (K == CELER_AMX_WMMA11) simt_wmma_same(all, 2 * W);
    const double(*d)[16] = simt_tile<float>(all, [](const uint64_t(*o)[16], float(*ta)[32], float(*tb)[32]) {
        for (int x = 0; x < 16; x++)
            for (int k = 0; k < 16; k++) {
                const int l = K == CELER_AMX_WMMA11 ? x : x + 16 * (k / 4), h = K == CELER_AMX_WMMA11 ? k : k % 4;
                ta[x][k] = simt_half(o[l], h), tb[x][k] = simt_half(o[l] + W, h);
            }
        return 16;
    });
    for (int v = 0; v < amx_acc(K); v++) {
        const int m = K == CELER_AMX_WMMA11 ? 2 * v + lane / 16 : 4 * (lane / 16) + v;
        acc[v] += (float)d[m][lane % 16];
    }
}

#endif /* SIMT_NVIDIA */

#endif
