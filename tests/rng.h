/* The tests' random numbers: xorshift64, seeded per test file (define RNG_SEED before including
 * this to get another sequence), so that every run sees the same inputs. */
#ifndef CELER_TESTS_RNG_H
#define CELER_TESTS_RNG_H

#include <stdint.h>

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

#endif
