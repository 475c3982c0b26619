/* The scalar activation quantizers of celer_cpu_matmul (formats in dot.h): the definition that
 * the SIMD quantizers reproduce bit for bit. */
#include "backends/cpu/dot.h"

#include <math.h>
#include <string.h>

static int8_t code(float v)
{
    if (!(v > -127.0f)) return v != v ? 0 : -127; /* NaN: 0 */
    if (v > 127.0f) return 127;
    return (int8_t)roundf(v); /* half away from zero */
}

/* n values into hi and lo codes; returns d. Separate statements keep r = x - hi · D two
 * roundings (no fused multiply-add), as the SIMD quantizers compute it. */
static float quantize_block(const float *x, int n, int8_t *hi, int8_t *lo)
{
    float amax = 0.0f;
    for (int j = 0; j < n; j++) amax = fmaxf(amax, fabsf(x[j]));
    const float D = amax / 127.0f, id = D != 0.0f ? 1.0f / D : 0.0f, id256 = id * 256.0f;
    for (int j = 0; j < n; j++) {
        hi[j]   = code(x[j] * id);
        float v = (float)hi[j] * D;
        float r = x[j] - v;
        lo[j]   = code(r * id256);
    }
    return D / 256.0f;
}

static int32_t sum_codes(const int8_t *q, int n)
{
    int32_t s = 0;
    for (int j = 0; j < n; j++) s += q[j];
    return s;
}

void celer_cpu_quantize_x32_ref(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1)
{
    celer_cpu_x32 *y    = row;
    int32_t       *sums = (int32_t *)((char *)row + CELER_CPU_X32_SUMS_AT(nb));
    for (int64_t b = b0; b < b1; b++) {
        y[b].d  = quantize_block(x + 32 * b, 32, y[b].hi, y[b].lo);
        sums[b] = 256 * sum_codes(y[b].hi, 32) + sum_codes(y[b].lo, 32);
    }
}

void celer_cpu_quantize_x256_ref(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1)
{
    (void)nb;
    celer_cpu_x256 *y = row;
    for (int64_t b = b0; b < b1; b++) {
        y[b].d = quantize_block(x + 256 * b, 256, y[b].hi, y[b].lo);
        for (int s = 0; s < 16; s++) {
            y[b].hsums[s] = (int16_t)sum_codes(y[b].hi + 16 * s, 16);
            y[b].lsums[s] = (int16_t)sum_codes(y[b].lo + 16 * s, 16);
        }
    }
}

void celer_cpu_quantize_x32h_ref(const float *x, void *row, int64_t nb, int64_t b0, int64_t b1)
{
    celer_cpu_x32 *y    = row;
    int32_t       *sums = (int32_t *)((char *)row + CELER_CPU_X32_SUMS_AT(nb)); /* (2 nb) */
    for (int64_t b = b0; b < b1; b++) {
        y[b].d = quantize_block(x + 32 * b, 32, y[b].hi, y[b].lo);
        for (int h = 0; h < 2; h++)
            sums[2 * b + h] = 256 * sum_codes(y[b].hi + 16 * h, 16) + sum_codes(y[b].lo + 16 * h, 16);
    }
}
