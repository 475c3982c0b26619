/* A MoE prefill's expert groups cut into tiles (moe_tiles.h). */
#include "backends/gpu/moe_tiles.h"

int64_t celer_moe_tiles_max(int64_t n_pairs, int64_t n_expert)
{
    return n_pairs / CELER_MOE_TILE_PAIRS + n_expert;
}

int64_t celer_moe_tile_list(const int32_t *start, int64_t n_expert, int32_t *out)
{
    int64_t n = 0;
    for (int64_t e = 0; e < n_expert; e++)
        for (int32_t s = start[e]; s < start[e + 1]; s += CELER_MOE_TILE_PAIRS, n++) {
            const int32_t left = start[e + 1] - s;
            out[CELER_MOE_TILE * n]     = s;
            out[CELER_MOE_TILE * n + 1] = left < CELER_MOE_TILE_PAIRS ? left : CELER_MOE_TILE_PAIRS;
            out[CELER_MOE_TILE * n + 2] = (int32_t)e;
        }
    return n;
}
