/* The tests' random numbers: xorshift64, seeded per test file (define RNG_SEED before including
 * this to get another sequence), so that every run sees the same inputs. */
#ifndef CELER_TESTS_RNG_H
#define CELER_TESTS_RNG_H

#include <stdint.h>
#include <string.h>

#ifndef RNG_SEED
#define RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = RNG_SEED;

static inline uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static inline float uni(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; } /* [-1, 1) */

/* Matmul activations x (T, k): mostly in [-1, 1), some zeros, some large, one all-zero token. */
static inline void random_acts(float *x, int64_t T, int64_t k)
{
    for (int64_t i = 0; i < T * k; i++) {
        uint32_t r = rnd() % 100;
        x[i]       = r < 10 ? 0.0f : r < 12 ? uni() * 1000.0f : uni();
    }
    if (T > 2) memset(x + k, 0, (size_t)k * sizeof *x);
}

#endif
