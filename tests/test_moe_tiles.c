/* A MoE prefill's expert groups cut into tiles for the GPU's batch kernel
 * (backends/gpu/moe_tiles.h) without a GPU: every pair in exactly one tile, tiles of one expert,
 * at most CELER_MOE_TILE_PAIRS pairs, in pair order; empty groups make none; the count within
 * celer_moe_tiles_max for even, skewed and empty routings. */
#include "backends/gpu/moe_tiles.h"

#include "check.h"

#include <stdlib.h>
#include <string.h>

enum { E_MAX = 128, PAIRS_MAX = 8192 };

/* The tiles of counts[0 .. n_expert] checked against the groups they came from. */
static int check_tiles(const int32_t *counts, int64_t n_expert)
{
    int32_t start[E_MAX + 1] = {0};
    for (int64_t e = 0; e < n_expert; e++) start[e + 1] = start[e] + counts[e];
    const int64_t max = celer_moe_tiles_max(start[n_expert], n_expert);
    int32_t      *out = malloc((size_t)(CELER_MOE_TILE * max + 1) * sizeof *out);
    out[CELER_MOE_TILE * max] = -7; /* past the room: must stay */
    const int64_t n           = celer_moe_tile_list(start, n_expert, out);
    CHECK(n >= 0 && n <= max);
    CHECK(out[CELER_MOE_TILE * max] == -7);
    int32_t next = 0; /* the next pair a tile must start at */
    int64_t want = 0;
    for (int64_t e = 0; e < n_expert; e++) want += (counts[e] + CELER_MOE_TILE_PAIRS - 1) / CELER_MOE_TILE_PAIRS;
    CHECK(n == want);
    for (int64_t t = 0; t < n; t++) {
        const int32_t s = out[CELER_MOE_TILE * t], k = out[CELER_MOE_TILE * t + 1], e = out[CELER_MOE_TILE * t + 2];
        CHECK(e >= 0 && e < n_expert);
        CHECK(s == next); /* consecutive, nothing skipped or repeated */
        CHECK(k >= 1 && k <= CELER_MOE_TILE_PAIRS);
        CHECK(s >= start[e] && s + k <= start[e + 1]); /* within its expert's group */
        CHECK(k == CELER_MOE_TILE_PAIRS || s + k == start[e + 1]); /* short only at a group's end */
        next = s + k;
    }
    CHECK(next == start[n_expert]);
    free(out);
    return 0;
}

int main(void)
{
    int32_t counts[E_MAX];
    /* a 30B-A3B pp512: 4,096 pairs over 128 experts, even */
    for (int e = 0; e < E_MAX; e++) counts[e] = 32;
    CHECK(check_tiles(counts, E_MAX) == 0);
    /* skewed as the synthetic files route: one expert 448 of 512 tokens, the rest spread */
    memset(counts, 0, sizeof counts);
    counts[5] = 448;
    for (int i = 0; i < 4096 - 448; i++) counts[(i * 37) % E_MAX]++;
    CHECK(check_tiles(counts, E_MAX) == 0);
    /* group sizes around the tile: 0, 1, 31, 32, 33, 63, 64, 65 */
    static const int32_t edge[] = {0, 1, 31, 32, 33, 63, 64, 65, 0, 0, 97};
    CHECK(check_tiles(edge, sizeof edge / sizeof edge[0]) == 0);
    /* nothing routed; one expert; the largest step */
    memset(counts, 0, sizeof counts);
    CHECK(check_tiles(counts, E_MAX) == 0);
    counts[0] = 1;
    CHECK(check_tiles(counts, 1) == 0);
    for (int e = 0; e < E_MAX; e++) counts[e] = PAIRS_MAX / E_MAX + (e % 3) - 1;
    CHECK(check_tiles(counts, E_MAX) == 0);
    printf("test_moe_tiles: passed\n");
    return 0;
}
