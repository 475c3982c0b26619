/* RoPE frequency scalings (rope_scaling.h). */
#include "models/rope_scaling.h"

#include <math.h>

static const double PI = 3.14159265358979323846;

void celer_rope_llama3_factors(int64_t n_rot, double base, double factor, double orig_ctx, double low, double high,
                               float *ff)
{
    double lo_wl = orig_ctx / low, hi_wl = orig_ctx / high;
    for (int64_t i = 0; i < n_rot / 2; i++) {
        double freq = pow(base, -2.0 * (double)i / (double)n_rot), wl = 2 * PI / freq;
        if (wl < hi_wl)
            ff[i] = 1.0f;
        else if (wl > lo_wl)
            ff[i] = (float)factor;
        else {
            double smooth = (orig_ctx / wl - low) / (high - low);
            ff[i]         = (float)(1.0 / ((1 - smooth) / factor + smooth));
        }
    }
}

void celer_rope_yarn_factors(int64_t n_rot, double base, double factor, double orig_ctx, double beta_fast,
                             double beta_slow, double ext, float *ff)
{
#define CORR_DIM(turns) ((double)n_rot * log(orig_ctx / ((turns) * 2 * PI)) / (2 * log(base)))
    double low = floor(CORR_DIM(beta_fast)), high = ceil(CORR_DIM(beta_slow));
#undef CORR_DIM
    if (low < 0) low = 0;
    if (high > (double)n_rot - 1) high = (double)n_rot - 1;
    if (high == low) high += 0.001;
    for (int64_t i = 0; i < n_rot / 2; i++) {
        double ramp = ((double)i - low) / (high - low);
        double mix  = (1.0 - (ramp < 0 ? 0 : ramp > 1 ? 1 : ramp)) * ext;
        ff[i]       = (float)(1.0 / ((1.0 - mix) / factor + mix));
    }
}
