/* Token sampling from logits: penalties over recent tokens, temperature, top-k, top-p, min-p,
 * then a draw from a seeded generator (xoshiro256**), or the argmax when greedy.
 *
 * The draw, exactly: each probability is e / Σ e (in double, rounded to float), e = exp((l -
 * max) / T) taken in double and rounded to float (where a host's and a GPU's exp differ in the
 * last bit of a double, the float almost never does: backends/gpu/gpu_sample.cu draws the same);
 * the candidates (probability at least min-p times the highest, and above 0)
 * in order of probability, highest first, lower id first on ties; kept, the first top-k of them,
 * then the shortest prefix whose probabilities (summed in that order, in double) reach top-p;
 * u uniform in [0, 1) from 53 bits of the generator, r = u times the kept probabilities' sum
 * (summed in that order); the token is the first of the kept at which the running sum passes r.
 * When nothing was cut (no top-k or top-p took fewer than all the candidates) the sum and the
 * walk go in id order instead, and nothing is sorted. Otherwise only as much of the order is
 * sorted as the draw reaches (the candidates are bucketed by the power of two of their ratio to
 * the highest probability, a bucket sorted when first reached): a full sort of a 128k
 * vocabulary took milliseconds a token. */
#ifndef CELER_RUNTIME_SAMPLER_H
#define CELER_RUNTIME_SAMPLER_H

#include "backends/backend.h"
#include "celer.h"

typedef struct {
    celer_sampling p;
    uint64_t       rng[4];
    int32_t        n_vocab;
    struct celer_candidate {
        float   p;
        int32_t id;
    } *cand, *tmp;        /* (n_vocab) scratch: candidates and their probabilities */
    int32_t       *count; /* (n_vocab) occurrences in the penalty window */
} celer_sampler;

/* Whether the draw is the argmax of the raw logits (greedy, no penalty): then the backend's
 * argmax gives the token without the logits leaving its memory. */
bool         celer_sampling_is_argmax(const celer_sampling *p);
/* Whether the draw depends on the logits and one uniform number alone (a temperature above 0,
 * no penalty): then a backend's sample op can take it where the logits are. */
bool         celer_sampling_on_backend(const celer_sampling *p);
/* The next number of a sampler's generator (rng, as celer_sampler_init seeds it), uniform in
 * [0, 1) from its top 53 bits; rng advances. The draw takes one per sampled token. */
double       celer_sampler_uniform(uint64_t rng[4]);
celer_status celer_sampler_init(celer_sampler *s, const celer_sampling *p, int32_t n_vocab, celer_error *err);
void         celer_sampler_free(celer_sampler *s);
/* Picks the next token; logits (n_vocab) are modified. history: the sequence so far. A sampled
 * (not greedy) token takes the generator's next number: celer_sampler_next_draw, then
 * celer_sampler_draw. */
int32_t      celer_sampler_sample(celer_sampler *s, float *logits, const int32_t *history, size_t n_history);
/* The next sampled token's draw: the sampler's parameters and the generator's next number
 * (rng advances). */
celer_draw   celer_sampler_next_draw(celer_sampler *s);
/* The token the draw d gives from logits (n_vocab; they become the probabilities), penalties
 * already applied: the definition above. */
int32_t      celer_sampler_draw(celer_sampler *s, float *logits, const celer_draw *d);

#endif
