/* A MoE prefill's expert groups cut into tiles for the batch kernel (gpu_mmq_small_experts.cu's
 * k_mmq_s_experts, the default). Plain C, no GPU headers: tested on any host
 * (tests/test_moe_tiles.c).
 *
 * The pairs (token, expert) are sorted by expert, expert e's at start[e] .. start[e + 1]. A tile
 * is at most CELER_MOE_TILE_PAIRS consecutive pairs of one expert, CELER_MOE_TILE ints: its
 * first pair, its pairs, its expert. Listing them on the host (which holds start) leaves the
 * kernel's grid one block a tile and row block, where a grid of every expert by the longest
 * group's tiles launched mostly empty blocks (a skewed routing: one expert with 448 of 512
 * tokens made 14 tiles of grid for each of 128 experts). */
#ifndef CELER_BACKENDS_GPU_MOE_TILES_H
#define CELER_BACKENDS_GPU_MOE_TILES_H

#include <stdint.h>

enum { CELER_MOE_TILE = 3, CELER_MOE_TILE_PAIRS = 32 };

/* The most tiles n_pairs pairs over n_expert groups make (each group one short tile at most). */
int64_t celer_moe_tiles_max(int64_t n_pairs, int64_t n_expert);

/* Writes the tiles of the groups start[0 .. n_expert] (non-decreasing, start[0] = 0) into out,
 * room for celer_moe_tiles_max(start[n_expert], n_expert) of them, expert by expert and in pair
 * order within each; returns how many. */
int64_t celer_moe_tile_list(const int32_t *start, int64_t n_expert, int32_t *out);

#endif
