/* RoPE frequency scalings as divisors of each dimension pair's frequency (celer_rope.
 * freq_factors): pair i of n_rot turns at base^(-2i / n_rot) / ff[i]. The GGUF loader, the
 * model-directory loader and celer synth share them. */
#ifndef CELER_MODELS_ROPE_SCALING_H
#define CELER_MODELS_ROPE_SCALING_H

#include <stdint.h>

/* llama 3: pairs whose wavelength is shorter than orig_ctx / high keep their frequency, longer
 * than orig_ctx / low are divided by factor, and blend smoothly between. */
void celer_rope_llama3_factors(int64_t n_rot, double base, double factor, double orig_ctx, double low, double high,
                               float *ff);

/* YaRN (Peng et al. 2023, as llama.cpp, transformers and mlx-lm compute it): pair i keeps its
 * frequency where it turns more than beta_fast times over the original context, is divided by
 * the factor where it turns fewer than beta_slow times, and mixes the two linearly between:
 *     ff_i = 1 / ((1 - mix_i) / factor + mix_i),  mix_i = ext · (1 - clamp((i - low) / (high - low), 0, 1))
 * with low and high the pairs that turn beta_fast and beta_slow times, floored and ceiled, and
 * ext the extrapolation weight (1 by default; 0 is plain linear scaling). The caller also
 * multiplies cos and sin by attn_factor · (0.1 ln factor + 1) (when ext is not 0). */
void celer_rope_yarn_factors(int64_t n_rot, double base, double factor, double orig_ctx, double beta_fast,
                             double beta_slow, double ext, float *ff);

#endif
