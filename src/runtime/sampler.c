#include "runtime/sampler.h"

#include "backends/backend.h"
#include "core/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

celer_sampling celer_sampling_default(void)
{
    return (celer_sampling){.temperature = 0, .top_k = 0, .top_p = 1, .min_p = 0, .repeat_penalty = 1,
                            .penalty_last_n = 64, .seed = 0};
}

static bool no_penalty(const celer_sampling *p)
{
    return p->repeat_penalty == 1 && p->presence_penalty == 0 && p->frequency_penalty == 0;
}

bool celer_sampling_is_argmax(const celer_sampling *p) { return p->temperature <= 0 && no_penalty(p); }

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z          = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z          = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return r;
}

bool celer_sampling_on_backend(const celer_sampling *p) { return p->temperature > 0 && no_penalty(p); }

double celer_sampler_uniform(uint64_t rng[4]) { return (double)(next_u64(rng) >> 11) * 0x1.0p-53; }

celer_status celer_sampler_init(celer_sampler *s, const celer_sampling *p, int32_t n_vocab, celer_error *err)
{
    memset(s, 0, sizeof *s);
    s->p       = *p;
    s->n_vocab = n_vocab;
    uint64_t x = p->seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix(&x);
    s->cand  = malloc((size_t)n_vocab * sizeof *s->cand);
    s->tmp   = malloc((size_t)n_vocab * sizeof *s->tmp);
    s->count = calloc((size_t)n_vocab, sizeof *s->count);
    if (!s->cand || !s->tmp || !s->count) {
        celer_sampler_free(s);
        return celer_fail(err, CELER_ERR_OOM, "sampler: out of memory for %d tokens", n_vocab);
    }
    return CELER_OK;
}

void celer_sampler_free(celer_sampler *s)
{
    if (!s) return;
    free(s->cand);
    free(s->tmp);
    free(s->count);
    memset(s, 0, sizeof *s);
}

static void apply_penalties(celer_sampler *s, float *logits, const int32_t *hist, size_t n)
{
    const celer_sampling *p = &s->p;
    if (no_penalty(p)) return;
    size_t from = p->penalty_last_n >= 0 && n > (size_t)p->penalty_last_n ? n - (size_t)p->penalty_last_n : 0;
    for (size_t i = from; i < n; i++)
        if (hist[i] >= 0 && hist[i] < s->n_vocab) s->count[hist[i]]++;
    for (size_t i = from; i < n; i++) {
        int32_t t = hist[i];
        if (t < 0 || t >= s->n_vocab || !s->count[t]) continue;
        float l = logits[t];
        if (p->repeat_penalty != 1) l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
        l -= (float)s->count[t] * p->frequency_penalty + p->presence_penalty;
        logits[t]    = l;
        s->count[t]  = 0; /* each token once */
    }
}

/* descending by probability, ascending id on ties */
static int cmp_desc(const void *a, const void *b)
{
    const struct celer_candidate *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

enum { N_BUCKETS = 32 };

/* Candidates in their draw order, sorted as far as asked: c holds them bucket after bucket
 * (bucket b: the ratio of the highest probability to theirs in [2^b, 2^(b+1)), the last bucket
 * open-ended), each bucket sorted the first time a position in it is asked for. */
typedef struct {
    struct celer_candidate *c;
    int32_t                 start[N_BUCKETS + 1];
    int                     sorted; /* buckets 0 .. sorted - 1 are in order */
} lazy_order;

static int bucket(float pmax, float p)
{
    const float ratio = pmax / p; /* >= 1; infinite for the tiniest p */
    if (!(ratio < 0x1p31f)) return N_BUCKETS - 1;
    int e;
    (void)frexpf(ratio, &e); /* ratio = f · 2^e, f in [0.5, 1): floor(log2) = e - 1 */
    return e - 1 < N_BUCKETS - 1 ? e - 1 : N_BUCKETS - 1;
}

/* The candidate at position i of the draw order. */
static const struct celer_candidate *at(lazy_order *o, int32_t i)
{
    while (o->sorted < N_BUCKETS && o->start[o->sorted] <= i) {
        int b = o->sorted++;
        qsort(o->c + o->start[b], (size_t)(o->start[b + 1] - o->start[b]), sizeof *o->c, cmp_desc);
    }
    return &o->c[i];
}

celer_draw celer_sampler_next_draw(celer_sampler *s)
{
    const celer_sampling *p = &s->p;
    return (celer_draw){.temperature = p->temperature, .top_p = p->top_p, .min_p = p->min_p, .top_k = p->top_k,
                        .u = celer_sampler_uniform(s->rng)};
}

int32_t celer_sampler_sample(celer_sampler *s, float *logits, const int32_t *history, size_t n_history)
{
    apply_penalties(s, logits, history, n_history);
    if (s->p.temperature <= 0) return (int32_t)celer_argmax_row(logits, s->n_vocab);
    celer_draw d = celer_sampler_next_draw(s);
    return celer_sampler_draw(s, logits, &d);
}

int32_t celer_sampler_draw(celer_sampler *s, float *logits, const celer_draw *p)
{
    int32_t n = s->n_vocab;
    if (p->temperature <= 0) return (int32_t)celer_argmax_row(logits, n);
    /* softmax at temperature */
    float mx = logits[celer_argmax_row(logits, n)];
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        float e    = (float)exp((double)((logits[i] - mx) / p->temperature)); /* exp in double: a GPU's agrees */
        logits[i]  = e;
        sum       += e;
    }
    for (int32_t i = 0; i < n; i++) logits[i] = (float)(logits[i] / sum);
    /* the candidates in id order */
    const float pmax = logits[celer_argmax_row(logits, n)];
    const float floor_p = p->min_p > 0 ? p->min_p * pmax : 0;
    int32_t     m = 0;
    for (int32_t i = 0; i < n; i++)
        if (logits[i] >= floor_p && logits[i] > 0) s->tmp[m++] = (struct celer_candidate){logits[i], i};
    if (!m) return 0; /* no candidate: the logits held NaNs (the argmax's answer for a row of them) */
    /* the kept prefix, where a cut asks for the order: the candidates bucketed (stable) into s->cand */
    int32_t kept = m;
    if ((p->top_k > 0 && m > p->top_k) || p->top_p < 1) {
        int32_t count[N_BUCKETS] = {0};
        for (int32_t j = 0; j < m; j++) count[bucket(pmax, s->tmp[j].p)]++;
        lazy_order o = {.c = s->cand};
        for (int b = 0; b < N_BUCKETS; b++) o.start[b + 1] = o.start[b] + count[b];
        int32_t fill[N_BUCKETS];
        memcpy(fill, o.start, sizeof fill);
        for (int32_t j = 0; j < m; j++) s->cand[fill[bucket(pmax, s->tmp[j].p)]++] = s->tmp[j];
        if (p->top_k > 0 && kept > p->top_k) kept = p->top_k;
        if (p->top_p < 1) {
            double  acc = 0;
            int32_t k   = 0;
            while (k < kept && acc < p->top_p) acc += at(&o, k++)->p;
            kept = k > 0 ? k : 1;
        }
        if (kept < m) {
            double total = 0;
            for (int32_t i = 0; i < kept; i++) total += at(&o, i)->p;
            double r = p->u * total;
            for (int32_t i = 0; i < kept; i++) {
                const struct celer_candidate *c = at(&o, i);
                r -= c->p;
                if (r < 0) return c->id;
            }
            return at(&o, kept - 1)->id;
        }
    }
    /* nothing cut: the walk in id order */
    double total = 0;
    for (int32_t j = 0; j < m; j++) total += s->tmp[j].p;
    double r = p->u * total;
    for (int32_t j = 0; j < m; j++) {
        r -= s->tmp[j].p;
        if (r < 0) return s->tmp[j].id;
    }
    return s->tmp[m - 1].id;
}
