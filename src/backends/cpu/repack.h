/* Quantized weights rearranged for 16-row kernels ("r16").
 *
 * GGUF stores a matrix row by row. A decode kernel that walks one row at a time spends most of
 * its instructions unpacking, scaling and summing per row; interleaving 16 rows lets one
 * 512-bit integer dot serve 16 rows at once, with each 4 activation codes broadcast. For every
 * group of 16 rows and every block column b, one group block holds a header of per-row values
 * side by side, then the code vectors: 64 bytes each, lane r (4 bytes) holding 4 consecutive
 * code bytes of row r's stored block, in their stored order.
 *     Q4_0, Q8_0   d[16]                              then qs vectors (Q8_0: codes + 128)
 *     Q4_1         d[16] m[16]
 *     Q5_0, Q5_1   d[16] (m[16]) plane[16][4]         plane byte i of row r holds in bit q the
 *                                                     fifth bit of element 4q + i
 *     Q4_K         d[16] dmin[16] sc[8][16] mn[8][16] (the 6-bit scales unpacked)
 *     Q6_K         d[16] sc[16][16]                   then ql vectors, then qh vectors
 * (scales and mins binary16). Every group block is as large as the 16 stored blocks, but Q4_K's
 * (+2.7%: unpacked scales). Group g's blocks follow each other (g · nb · group-block bytes);
 * rows past the last whole group stay in the storage layout after all the groups. */
#ifndef CELER_BACKENDS_CPU_REPACK_H
#define CELER_BACKENDS_CPU_REPACK_H

#include "quant/ggml_types.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { CELER_R16_ROWS = 16 };

/* Whether wtype has an r16 layout. */
bool   celer_cpu_r16_supported(celer_ggml_type wtype);
/* Bytes of one group block (16 rows × one block of columns). */
size_t celer_cpu_r16_block_bytes(celer_ggml_type wtype);
/* Bytes of a rows × k matrix in the r16 layout (the groups and the tail rows). */
size_t celer_cpu_r16_size(celer_ggml_type wtype, int64_t rows, int64_t k);
/* Writes the r16 layout of the stored matrix src (rows × k) into dst. */
void   celer_cpu_r16_pack(celer_ggml_type wtype, const void *src, int64_t rows, int64_t k, void *dst);
/* Row r of an r16 matrix back in the storage layout, into dst (k / 32 blocks). */
void   celer_cpu_r16_row(celer_ggml_type wtype, const void *packed, int64_t rows, int64_t k, int64_t r, void *dst);

#endif
