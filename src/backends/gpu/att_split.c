#include "backends/gpu/att_split.h"

celer_att_split celer_att_split_for(int32_t far, int64_t rows, int32_t fixed_chunk, int32_t max_splits)
{
    const celer_att_split one = {0, 1};
    if (far <= 0 || rows <= 0 || rows >= ATT_SPLIT_BELOW || max_splits < 2) return one;
    int64_t splits = 1, chunk;
    if (fixed_chunk > 0) {
        chunk = fixed_chunk;
        while (splits * chunk <= far && splits * 2 <= max_splits) splits *= 2;
        if (splits * chunk <= far) chunk = ((int64_t)far + splits) / splits; /* at the cap: longer splits */
    } else {
        int64_t span = 1; /* the power of two above far: keys 0 .. span - 1 */
        while (span <= far) span *= 2;
        chunk = ATT_CHUNK_MIN; /* the shortest power-of-two chunk that keeps the blocks near the aim */
        while (chunk < ATT_CHUNK_MAX && (span / chunk) * rows > ATT_SPLIT_BLOCKS) chunk *= 2;
        if (chunk > span) chunk = span;
        splits = span / chunk;
        while (splits > max_splits) splits /= 2, chunk *= 2;
    }
    if (splits == 1) return one;
    return (celer_att_split){(int32_t)chunk, (int32_t)splits};
}
