/* Matrix multiply of f32 activations by weights in their GGUF storage type or an MLX format
 * (celer_cpu_matmul_mlx, below), on the CPU:
 *
 *     Y[t][r] = Σ_i W[r][i] · X[t][i]        W (rows, k), X (T, k), Y (T, rows)
 *
 * Quantized weights never become f32: the activations are quantized once per call and each
 * weight block is dotted with the activation blocks in integers. Every activation becomes two
 * 8-bit codes (dot.h): ggml's Q8 code and the code of what it misses, 256 times finer; the
 * kernels dot a weight block with both in one int32 sum. One code alone (as llama.cpp does)
 * costs ~0.17 nat of median logit error on SmolLM2 and flips near ties such as its first
 * answer token to "What is the capital of France?"; two bring the activations to ~15 bits.
 * F32, F16 and BF16 weights are dotted with f32 activations.
 *
 * Accuracy contract (tests/test_cpu_matmul.c checks it for every type, shape and variant):
 *   against the exact product of the dequantized weights and the f32 activations (in double),
 *     |Y - exact| <= 1.05 · Σ_i |w_i| · e(i) + 1e-5 · Σ_i (|a_i| + |b_i|) · |x_i|
 *   where e(i) is one fine step of activation i's block, amax / 127 / 256 (the fine code
 *   is rounded by half a step and may be clamped by up to another half); 0 for F32/F16/BF16.
 *   w_i = a_i + b_i splits a weight into its scale · code part and its min part (b = 0 but for Q4_1, Q5_1, Q4_K and Q5_K, whose two
 *   parts are summed separately and may cancel).
 *   Every SIMD variant equals the scalar reference (_ref) on the same quantized activations x̂
 *   within float summation order: |Y_simd - Y_ref| <= 1e-5 · Σ_i (|a_i| + |b_i|) · |x̂_i|.
 *
 * Kernels are chosen once, when the scratch is made, from the CPU's features; every variant
 * has the same signature (dot.h) and the scalar reference is the fallback for any CPU. */
#ifndef CELER_BACKENDS_CPU_MATMUL_H
#define CELER_BACKENDS_CPU_MATMUL_H

#include "celer.h"
#include "core/threads.h"
#include "quant/ggml_types.h"
#include "quant/mlx_quant.h"

/* Instruction-set levels of the kernel sets, lowest first. A level falls back, per weight
 * type, to the best lower level that has a kernel for the type. */
typedef enum {
    CELER_CPU_ISA_REF,        /* scalar C: the definition, and the fallback on any CPU */
    CELER_CPU_ISA_AVX2,       /* AVX2 + FMA + F16C: maddubs/madd integer dots, 256-bit */
    CELER_CPU_ISA_AVX512VNNI, /* AVX-512 F/BW/VL + VNNI: vpdpbusd, 512-bit where it pays */
    CELER_CPU_ISA_COUNT
} celer_cpu_isa;

const char   *celer_cpu_isa_name(celer_cpu_isa isa); /* "ref", "avx2", "avx512vnni" */
/* Whether the host can run the level's kernels. */
bool          celer_cpu_isa_available(celer_cpu_isa isa, const celer_host_info *h);
/* The highest level the host can run. */
celer_cpu_isa celer_cpu_isa_best(const celer_host_info *h);
/* The level whose kernel celer_cpu_matmul actually runs for wtype at level isa (after the
 * fallback to lower levels); CELER_CPU_ISA_COUNT when no level has one. */
celer_cpu_isa celer_cpu_isa_for_type(celer_cpu_isa isa, celer_ggml_type wtype);

/* Whether celer_cpu_matmul takes weights of this type. */
bool celer_cpu_matmul_supported(celer_ggml_type wtype);

/* How the weight rows are laid out: as stored (GGUF), or interleaved by 16 (backends/cpu/
 * repack.h), which the kernels of some levels run several times faster. MLX-quantized matrices
 * are always moved into the blocked layout of repack_mlx.h, row by row or by sets of 16 rows. */
typedef enum {
    CELER_CPU_LAYOUT_STORED,
    CELER_CPU_LAYOUT_R16,
    CELER_CPU_LAYOUT_MLX_ROWS, /* repack_mlx.h, L = 1 */
    CELER_CPU_LAYOUT_MLX_R16,  /* repack_mlx.h, sets of 16 rows, then the rest as MLX_ROWS */
} celer_cpu_layout;
/* Whether kernels of level isa run wtype in the r16 layout (pack weights only then). */
bool celer_cpu_r16_available(celer_cpu_isa isa, celer_ggml_type wtype);

/* Per-call working memory (the quantized activations), allocated once by the caller for the
 * largest (wtype, k, T) it will run, so the decode loop never allocates. Zero-initialized is
 * "no buffer, reference kernels"; celer_cpu_scratch_free on it is safe. */
typedef struct {
    celer_cpu_isa isa;   /* kernel level, picked at init */
    void         *buf;   /* 64-byte aligned */
    size_t        size;  /* bytes in buf */
} celer_cpu_scratch;

/* Bytes of scratch that celer_cpu_matmul needs for weights of wtype with rows of k elements
 * and T tokens (0 for F32/F16/BF16, which use X directly); 0 for an unsupported type. */
size_t       celer_cpu_matmul_scratch_size(celer_ggml_type wtype, int64_t k, int64_t T);
/* Allocates bytes of scratch (0 is fine) running kernels of level isa (use celer_cpu_isa_best;
 * a level the host lacks is CELER_ERR_UNSUPPORTED). */
celer_status celer_cpu_scratch_init(celer_cpu_scratch *s, celer_cpu_isa isa, size_t bytes, celer_error *err);
void         celer_cpu_scratch_free(celer_cpu_scratch *s);

/* Y (T, rows) = X (T, k) · W (rows, k)ᵀ.
 * W: rows of k elements in wtype's block layout, row-major, rows · (k / block) blocks; or, with
 *    layout R16, as celer_cpu_r16_pack wrote them (the scratch's level must run them)
 * X: (T, k) f32, rows contiguous; Y: (T, rows) f32
 * k must be a multiple of wtype's block size (32 or 256). pool may be NULL (one thread).
 * Errors: CELER_ERR_UNSUPPORTED naming an unsupported wtype; CELER_ERR_INVALID for a k that
 * is not a multiple of the block or a scratch smaller than celer_cpu_matmul_scratch_size. */
celer_status celer_cpu_matmul(celer_pool *pool, celer_ggml_type wtype, celer_cpu_layout layout, const void *W,
                              int64_t rows, int64_t k, const float *X, int64_t T, float *Y, celer_cpu_scratch *scratch,
                              celer_error *err);

/* ---- MLX-quantized matrices (quant/mlx_quant.h): every mode, bit width, group and dtype ----
 * The same product, Y (T, q->rows) = X (T, q->cols) · Wᵀ, with W in the layout of repack_mlx.h
 * and the values mlx's quantized matmul uses (dot.h). Accuracy contract as above, with w_i =
 * a_i + b_i split into scale · q and bias for affine (b = 0 for the fp modes, whose values are
 * exact) and e(i) = 0 for mxfp8 (f32 activations). */

/* Whether kernels of level isa run q's format in the MLX_R16 layout (else pack MLX_ROWS). */
bool          celer_cpu_mlx_r16_available(celer_cpu_isa isa, const celer_mlx_quant *q);
/* The level whose kernel runs q's format at level isa (ROWS layout). */
celer_cpu_isa celer_cpu_mlx_isa_for(celer_cpu_isa isa, const celer_mlx_quant *q);
size_t        celer_cpu_mlx_matmul_scratch_size(const celer_mlx_quant *q, int64_t T);
/* W: q->rows × q->cols packed with layout (CELER_CPU_LAYOUT_MLX_ROWS, or MLX_R16 where the
 * scratch's level runs it). Errors: celer_mlx_quant_check's for a q it refuses; CELER_ERR_INVALID
 * for a layout the level cannot run or too small a scratch. */
celer_status  celer_cpu_matmul_mlx(celer_pool *pool, const celer_mlx_quant *q, celer_cpu_layout layout, const void *W,
                                   const float *X, int64_t T, float *Y, celer_cpu_scratch *scratch, celer_error *err);

/* ---- grouped: the experts of a mixture-of-experts layer ----------------------------------- */

/* A matrix's storage: a GGUF type (q NULL) or an MLX format (q; wtype ignored), its layout and
 * shape (rows, k). */
typedef struct {
    celer_ggml_type        wtype;
    const celer_mlx_quant *q;
    celer_cpu_layout       layout;
    int64_t                rows, k;
} celer_cpu_matrix;

/* n_seg matrices of one storage m, W[s] the data of matrix s; matrix s multiplies activation
 * rows seg_x[s] .. seg_x[s + 1] - 1 (seg_x[0] = 0; a segment may be empty):
 *     Y[i][r] = Σ_c W_s[r][c] · X[xrow[i]][c]      for i in segment s
 * X rows are read through xrow (NULL: row i); Y is (seg_x[n_seg], rows). One pass over the pool:
 * every matrix is read once, whatever the number of its rows. Same accuracy contract as the
 * matmul of one such matrix; the scratch holds celer_cpu_matmul_grouped_scratch_size bytes
 * (f32 activations are gathered there too). */
size_t       celer_cpu_matmul_grouped_scratch_size(const celer_cpu_matrix *m, int64_t T);
celer_status celer_cpu_matmul_grouped(celer_pool *pool, const celer_cpu_matrix *m, int64_t n_seg,
                                      const void *const *W, const int64_t *seg_x, const float *X, const int32_t *xrow,
                                      float *Y, celer_cpu_scratch *scratch, celer_error *err);

#endif
