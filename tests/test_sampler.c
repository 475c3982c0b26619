/* The sampler's draw against its definition (runtime/sampler.h) computed the plain way: every
 * candidate sorted, the kept prefix cut, the sum, the walk (in id order when nothing was cut). The sampler sorts only as far as the
 * draw reaches; the token must be the same for every draw: peaked and flat distributions, ties,
 * vocabularies of 1 to 50,000, and top-k / top-p / min-p in combination.
 * The probabilities are the ones the sampler computed (it leaves them in the logits array), and
 * the uniform numbers come from a copy of the sampler's own generator (celer_sampler_uniform)
 * taken as it was seeded: this tests the order, the cuts and the walk, not the generator. */
#include "runtime/sampler.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rng.h"

typedef struct {
    float   p;
    int32_t id;
} cand;

static int by_draw_order(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The definition: probabilities p (n), the parameters, the next generator output. */
static int32_t reference(const float *p, int32_t n, const celer_sampling *sp, uint64_t rng[4], cand *c)
{
    float pmax = 0;
    for (int32_t i = 0; i < n; i++) pmax = p[i] > pmax ? p[i] : pmax;
    const float floor_p = sp->min_p > 0 ? sp->min_p * pmax : 0;
    int32_t     m = 0;
    double      all = 0;
    for (int32_t i = 0; i < n; i++)
        if (p[i] >= floor_p && p[i] > 0) c[m++] = (cand){p[i], i}, all += p[i];
    qsort(c, (size_t)m, sizeof *c, by_draw_order);
    int32_t kept = m;
    if (sp->top_k > 0 && kept > sp->top_k) kept = sp->top_k;
    if (sp->top_p < 1) {
        double  acc = 0;
        int32_t k   = 0;
        while (k < kept && acc < sp->top_p) acc += c[k++].p;
        kept = k > 0 ? k : 1;
    }
    double r = celer_sampler_uniform(rng);
    if (kept == m) { /* nothing cut: the walk in id order */
        r *= all;
        int32_t last = 0;
        for (int32_t i = 0; i < n; i++)
            if (p[i] >= floor_p && p[i] > 0) {
                r -= p[i], last = i;
                if (r < 0) return i;
            }
        return last;
    }
    double total = 0;
    for (int32_t i = 0; i < kept; i++) total += c[i].p;
    r *= total;
    for (int32_t i = 0; i < kept; i++) {
        r -= c[i].p;
        if (r < 0) return c[i].id;
    }
    return c[kept - 1].id;
}

int main(void)
{
    static const int32_t sizes[] = {1, 7, 1000, 50000};
    static const int32_t ks[]    = {0, 1, 5, 40};
    static const float   ps[]    = {1.0f, 0.9f, 0.5f}, mins[] = {0.0f, 0.05f};
    static const float   temps[] = {0.3f, 1.0f, 4.0f};
    int                  draws = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int32_t n      = sizes[si];
        float  *logits = malloc((size_t)n * sizeof *logits), *work = malloc((size_t)n * sizeof *work);
        cand   *c      = malloc((size_t)n * sizeof *c);
        for (int shape = 0; shape < 3; shape++) {
            for (int32_t i = 0; i < n; i++) /* 0: spread out, 1: a few high ones, 2: many ties */
                logits[i] = shape == 0 ? 3.0f * (uni() + uni() + uni())
                          : shape == 1 ? (i % 97 == 3 ? 12.0f : 0.0f) + uni()
                                       : (float)(rnd() % 4);
            for (size_t ti = 0; ti < sizeof temps / sizeof temps[0]; ti++)
                for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
                    for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++)
                        for (size_t mi = 0; mi < sizeof mins / sizeof mins[0]; mi++) {
                            celer_sampling sp = {.temperature = temps[ti], .top_k = ks[ki], .top_p = ps[pi],
                                                 .min_p = mins[mi], .repeat_penalty = 1, .seed = rnd()};
                            celer_sampler  sm;
                            celer_error    err;
                            CHECK(celer_sampler_init(&sm, &sp, n, &err) == CELER_OK);
                            uint64_t rng[4]; /* the sampler's generator, run beside it */
                            memcpy(rng, sm.rng, sizeof rng);
                            for (int d = 0; d < 5; d++, draws++) {
                                memcpy(work, logits, (size_t)n * sizeof *work);
                                int32_t got  = celer_sampler_sample(&sm, work, NULL, 0);
                                int32_t want = reference(work, n, &sp, rng, c); /* work: the probabilities */
                                if (got != want)
                                    fprintf(stderr, "  n %d shape %d T %g k %d p %g min %g draw %d: %d, want %d\n", n,
                                            shape, temps[ti], ks[ki], ps[pi], mins[mi], d, got, want);
                                CHECK(got == want);
                            }
                            celer_sampler_free(&sm);
                        }
        }
        free(logits), free(work), free(c);
    }
    printf("test_sampler: %d draws equal to the definition's\n", draws);
    return 0;
}
