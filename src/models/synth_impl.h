/* Inside celer synth: the random number generator, random weight blocks and the placeholder
 * vocabulary. Not for use outside src/models/synth*.c. */
#ifndef CELER_MODELS_SYNTH_IMPL_H
#define CELER_MODELS_SYNTH_IMPL_H

#include "formats/gguf_write.h"
#include "quant/ggml_types.h"

/* xoshiro256** seeded through splitmix64. */
typedef struct {
    uint64_t s[4];
} synth_rng;

/* A generator for one tensor: seeded from the run's seed and the tensor's name (FNV-1a), so each
 * tensor's bytes depend only on (seed, name), not on the order or the other tensors. */
void     synth_rng_init(synth_rng *r, uint64_t seed, const char *name);
uint64_t synth_rng_next(synth_rng *r);
/* Uniform in [lo, hi). */
float    synth_rng_uniform(synth_rng *r, float lo, float hi);

typedef enum {
    SYNTH_WEIGHT, /* matrices and the router: small values of either sign */
    SYNTH_NORM,   /* RMSNorm weights: near 1 */
    SYNTH_BIAS,   /* biases: small values of either sign */
} synth_kind;

/* Fills n_blocks random, valid blocks of type at dst (for F32/F16/BF16 a block is one element).
 * Every decoded value is finite and small (|x| < 0.6 for the K-quants, < 0.13 for the others;
 * see synth_fill.c). Norms and biases must be F32. */
void synth_fill(synth_rng *r, celer_ggml_type type, synth_kind kind, void *dst, uint64_t n_blocks);

/* Adds the placeholder SentencePiece vocabulary of n_vocab tokens (tokenizer.ggml.*). */
celer_status synth_add_vocab(celer_gguf_writer *w, int64_t n_vocab, celer_error *err);

#endif
