/* MLX-quantized matrices (quant/mlx_quant.h) in the CPU's blocked layout.
 *
 * mlx stores a matrix as three arrays: the codes, a bit stream per row in uint32 words, and the
 * scales and biases, (rows, cols / group) each. The kernels want a row's scales next to its
 * codes, and codes in lanes of 4 consecutive elements (one integer dot step), so weight_load
 * moves the three arrays into this layout once. Codes and scales are moved, never re-encoded,
 * and the size stays mlx's: bits per weight plus the scales and biases.
 *
 * A matrix is cut into column blocks of B = max(group, 32) elements. For a set of L rows (L = 16
 * for the interleaved kernels, 1 for the others) a block is a header, then the code planes of
 * each 32 elements. In every part lane r (row r of the set) is a run of bytes of its own,
 * side by side: a header value is one value per lane; a plane is a list of vectors of 4L bytes,
 * 4 bytes a lane.
 *     header  affine: scales[L] then biases[L], in their dtype (BF16, F16 or F32)
 *             mxfp4, mxfp8: E8M0 scale bytes[L];  nvfp4: E4M3 scale bytes[2][L] (groups of 16)
 *     P8  8 vectors: byte b of vector v holds code 4v + b
 *     P4  4 vectors: byte b of vector v holds code 4v + b in its low nibble, 16 + 4v + b in its high
 *     P2  2 vectors: byte b of vector v, j = 4v + b, holds code 8c + j in bits 2c, 2c + 1 (c < 4)
 *     P1  1 vector:  byte b holds code 4q + b in bit q (q < 8)
 * So that code quad n (codes 4n .. 4n + 3) is, in every lane: P8 vector n; P4 vector n & 3, low
 * nibbles for n < 4, high ones after; P2 vector n & 1 shifted right by 2 (n >> 1); P1 shifted
 * right by n. Wider codes are split over planes, low bits first, in this order:
 *     affine 2: P2       3: P2 (bits 0-1) P1 (bit 2)     4: P4
 *     affine 5: P4 P1 (bit 4)    6: P4 P2 (bits 4-5)     8: P8
 *     mxfp4, nvfp4: P4 (the E2M1 codes)                  mxfp8: P8 (the E4M3 codes)
 * A block of L rows is header + (B / 32) · 4 · bits · L bytes.
 *
 * Layout ROWS (celer_cpu_layout, matmul.h): every row on its own (L = 1), row after row.
 * Layout R16: whole sets of 16 rows (L = 16), each set's blocks in column order, then the rows
 * after the last whole set as in ROWS. */
#ifndef CELER_BACKENDS_CPU_REPACK_MLX_H
#define CELER_BACKENDS_CPU_REPACK_MLX_H

#include "quant/mlx_quant.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Elements of one column block: max(group, 32). */
int64_t celer_cpu_mlx_block_elems(const celer_mlx_quant *q);
/* Bytes of the header of one block of L rows. */
size_t  celer_cpu_mlx_head_bytes(const celer_mlx_quant *q, int L);
/* Bytes of one block of L rows (header and codes). */
size_t  celer_cpu_mlx_block_bytes(const celer_mlx_quant *q, int L);
/* Bytes of one row in the ROWS layout; a set of 16 rows in R16 is 16 times as many. */
size_t  celer_cpu_mlx_row_bytes(const celer_mlx_quant *q);
/* Bytes of the whole q->rows × q->cols matrix in either layout. */
size_t  celer_cpu_mlx_size(const celer_mlx_quant *q);

/* Writes rows [r0, r0 + n) of the matrix d (as mlx stores it; sizes checked by the caller with
 * celer_mlx_quant_get_shapes) to dst in sets of L rows (L 1 or 16, n a multiple of L). */
void celer_cpu_mlx_pack(const celer_mlx_quant *q, const celer_mlx_quant_data *d, int L, int64_t r0, int64_t n,
                        void *dst);
/* Row r of a matrix packed with the layout r16 (or ROWS) back as mlx stores it: its codes
 * (cols · bits / 32 words), scales (cols / group, in the scales' dtype, or bytes) and, for
 * affine, biases (NULL otherwise). */
void celer_cpu_mlx_unpack_row(const celer_mlx_quant *q, bool r16, const void *packed, int64_t r, void *words,
                              void *scales, void *biases);

#endif
