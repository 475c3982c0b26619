/* Weights of the 32-element block types rearranged for 16-row kernels ("r16").
 *
 * GGUF stores a matrix row by row. A decode kernel that walks one row at a time spends most of
 * its instructions unpacking, scaling and summing per row; interleaving 16 rows lets one
 * 512-bit integer dot serve 16 rows at once, with each 4 activation codes broadcast. For every
 * group of 16 rows and every block column b, one group block holds:
 *     d[16]              the rows' scales (binary16)
 *     m[16]              Q4_1 only: the rows' mins (binary16)
 *     q[n][64]           n = 4 (Q4_0, Q4_1) or 8 (Q8_0) vectors of 16 lanes × 4 bytes:
 *                        lane r of vector j holds bytes 4j .. 4j+3 of row r's block codes:
 *                        Q4: the stored nibble bytes (low nibbles are elements 4j .. 4j+3,
 *                        high nibbles elements 16+4j ..); Q8_0: the codes + 128, as unsigned
 * Group g's blocks follow each other (g · nb · group-block bytes); rows past the last whole
 * group stay in the storage layout after all the groups. */
#ifndef CELER_BACKENDS_CPU_REPACK_H
#define CELER_BACKENDS_CPU_REPACK_H

#include "quant/ggml_types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CELER_R16_ROWS = 16 };

/* Whether wtype has an r16 layout. */
bool   celer_cpu_r16_supported(celer_ggml_type wtype);
/* Bytes of one group block (16 rows × 32 columns). */
size_t celer_cpu_r16_block_bytes(celer_ggml_type wtype);
/* Bytes of a rows × k matrix in the r16 layout (the groups and the tail rows). */
size_t celer_cpu_r16_size(celer_ggml_type wtype, int64_t rows, int64_t k);
/* Writes the r16 layout of the stored matrix src (rows × k) into dst. */
void   celer_cpu_r16_pack(celer_ggml_type wtype, const void *src, int64_t rows, int64_t k, void *dst);
/* Row r of an r16 matrix back in the storage layout, into dst (k / 32 blocks). */
void   celer_cpu_r16_row(celer_ggml_type wtype, const void *packed, int64_t rows, int64_t k, int64_t r, void *dst);

#endif
