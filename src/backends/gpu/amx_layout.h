/* AMD's integer matrix units for the tiled prefill kernel (gpu_mmq.cu in a HIP build): which
 * instruction a target has, and where a wave's lanes hold its operands and its results. Plain C:
 * the device code takes its offsets from here, and the host-only test (tests/test_amx_layout.c)
 * runs each instruction as the ISA describes it on operands gathered by these functions.
 *
 * Every kind multiplies a 16 × 16 tile of i32 sums over one 32-value block, D[m][n] += Σ_k
 * A[m][k] B[k][n], A a block of 16 weight rows (signed bytes), B the same block of 16 tokens.
 * In all of them lane l gives A's row m = l % 16 and B's column n = l % 16, and lanes of the
 * same l / 16 give the same k of A and of B in the same places: so which k a lane group gives
 * does not change the sum, only that A and B agree, which one function (amx_word_at) ensures.
 *   MFMA16 (CDNA 1-2: gfx908, gfx90a; wave64): v_mfma_i32_16x16x16i8 twice a block; an operand
 *     is one 32-bit register of 4 bytes a lane, lane group l / 16 giving k 4 (l / 16) .. + 3 of
 *     its 16; D: 4 registers, register v = D[4 (l / 16) + v][l % 16].
 *   MFMA32 (CDNA 3-4: gfx940, gfx941, gfx942, gfx950; wave64): v_mfma_i32_16x16x32_i8 once a
 *     block; an operand is 8 bytes a lane, group l / 16 giving k 8 (l / 16) .. + 7; D as MFMA16.
 *   WMMA11 (RDNA 3, 3.5: gfx11xx; wave32): v_wmma_i32_16x16x16_iu8 twice a block; an operand is
 *     16 bytes a lane, all 16 k of the lane's row or column (lanes 16-31 repeat lanes 0-15); D:
 *     8 registers, register v = D[2 v + l / 16][l % 16] (rows interleaved between the halves).
 * These are also the placements of llama.cpp's AMD tiles (ggml-cuda/mma.cuh: MFMA i8, RDNA 3
 * WMMA), which have run on the hardware: read for comparison, not copied.
 * RDNA 4 (gfx12) has WMMA with other layouts and intrinsics that Debian's compiler lacks: no
 * kernel here yet (CELER_AMX_WMMA12 names the units for celer info).
 *
 * The same units multiply f16 (prefill attention, gpu_flash_amx.cuh): D[m][n] += Σ_k A[m][k]
 * B[k][n] over k = 0 .. 15 with f32 sums, D placed as the integer kinds place it (amx_row).
 *   MFMA16, MFMA32: v_mfma_f32_16x16x16f16 (every CDNA); an operand is 4 halves a lane, lane
 *     group l / 16 giving k 4 (l / 16) .. + 3.
 *   WMMA11: v_wmma_f32_16x16x16_f16; an operand is 16 halves a lane, all k of its row or column
 *     (lanes 16-31 repeat lanes 0-15). */
#ifndef CELER_BACKENDS_GPU_AMX_LAYOUT_H
#define CELER_BACKENDS_GPU_AMX_LAYOUT_H

#ifndef CELER_HD /* host and device in the GPU sources (gpu_vendor.h) */
#define CELER_HD
#endif
#ifdef __cplusplus /* the kernels size their arrays with these */
#define AMX_CONST constexpr
#else
#define AMX_CONST
#endif

/* The kinds: macros, for the device passes' #if (gpu_vendor.h). */
#define CELER_AMX_NONE   0
#define CELER_AMX_MFMA16 1
#define CELER_AMX_MFMA32 2
#define CELER_AMX_WMMA11 3
#define CELER_AMX_WMMA12 4 /* the device has them; this build's kernels do not take them */

/* Lanes of the wave that runs the instruction. */
static inline AMX_CONST CELER_HD int amx_lanes(int kind) { return kind == CELER_AMX_WMMA11 ? 32 : 64; }

/* A lane's accumulators of one 16 × 16 tile. */
static inline AMX_CONST CELER_HD int amx_acc(int kind) { return kind == CELER_AMX_WMMA11 ? 8 : 4; }

/* 32-bit words of a 32-byte block row a lane hands the instructions: A's and B's alike. */
static inline AMX_CONST CELER_HD int amx_words(int kind) { return kind == CELER_AMX_WMMA11 ? 8 : 2; }

/* The byte of the block row where the lane's word i starts. MFMA16's instruction j takes word j,
 * MFMA32's takes words 0 and 1 as one 64-bit operand (word 0 the low half), WMMA11's
 * instruction j takes words 4 j .. 4 j + 3 as its four registers. */
static inline AMX_CONST CELER_HD int amx_word_at(int kind, int lane, int i)
{
    return kind == CELER_AMX_WMMA11 ? 4 * i : 8 * (lane / 16 % 4) + 4 * i;
}

/* The tile row (A's row m) of the lane's accumulator v; its column is lane % 16. */
static inline AMX_CONST CELER_HD int amx_row(int kind, int lane, int v)
{
    return kind == CELER_AMX_WMMA11 ? 2 * v + lane / 16 % 2 : 4 * (lane / 16 % 4) + v;
}

/* f16 values a lane hands an f16 product, A's and B's alike (consecutive k, amx_half_k). */
static inline AMX_CONST CELER_HD int amx_halves(int kind) { return kind == CELER_AMX_WMMA11 ? 16 : 4; }

/* The k of the lane's f16 value i in an f16 product's operand (its row or column is lane % 16). */
static inline AMX_CONST CELER_HD int amx_half_k(int kind, int lane, int i)
{
    return kind == CELER_AMX_WMMA11 ? i : 4 * (lane / 16 % 4) + i;
}

/* Where the lane's f16 value i of a B operand lies when that operand is an earlier product's
 * tile D (B[k][n] = D[k][n]: prefill attention's probabilities, its scores' tile, as the values'
 * operand): in lane amx_from_lane's accumulator amx_from_reg. MFMA: the lane's own accumulator
 * i; WMMA11: k's row interleaves between the halves, so odd k come from lane + 16 and even k
 * from lane - 16 where the lane does not hold them. */
static inline AMX_CONST CELER_HD int amx_from_lane(int kind, int lane, int i)
{
    return kind == CELER_AMX_WMMA11 ? lane % 16 + 16 * (i % 2) : lane;
}
static inline AMX_CONST CELER_HD int amx_from_reg(int kind, int i) { return kind == CELER_AMX_WMMA11 ? i / 2 : i; }

#endif
