/* The draws on the GPU (backends/gpu/gpu_sample.cu) against the host, on fresh random rows (the
 * seed is printed; CELER_TEST_SEED repeats a run):
 *   - argmax of rows: equal to the CPU's scan (ties, -inf, NaNs);
 *   - sampled draws: each token the sample op decides equal to the host sampler's draw with the
 *     same generator number (runtime/sampler.h); every draw with nothing cut (the walk in id
 *     order) and most draws of peaked rows decided on the device; rows of NaNs and of -inf left
 *     to the host (-1).
 * Run on a machine with a GPU (scripts/gpu-check.sh); built only with CELER_CUDA or CELER_HIP. */
#include "runtime/sampler.h"

#include "gpu/gpu_test.h"

/* argmax of rows, for greedy draws: against the CPU's scan, with ties (the lowest index wins),
 * a row of -inf, NaNs inside a row (never chosen) and first (the row gives 0), odd lengths. */
static void test_argmax(void)
{
    static const int64_t ns[] = {1, 7, 300, 128256};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        enum { R = 6 };
        int64_t n = ns[k];
        float  *x = malloc((size_t)(R * n) * sizeof *x);
        random_fill(x, R * n, 3.0f);
        if (n > 2) {
            x[1 * n + n / 2] = x[1 * n + n - 1] = 100.0f;           /* a tie: the first wins */
            x[3 * n + 1] = NAN, x[3 * n + n - 1] = 50.0f;           /* a NaN inside */
        }
        for (int64_t i = 0; i < n; i++) x[2 * n + i] = -INFINITY; /* all -inf: 0 */
        x[4 * n] = NAN;                                            /* NaN first: 0 */
        int32_t ic[R], ig[R];
        float  *dx = dev_copy(x, (size_t)(R * n) * sizeof *x);
        CHECK(cpu->ops->argmax(cpu, x, R, n, ic, &err) == CELER_OK);
        CHECK(gpu->ops->argmax(gpu, dx, R, n, ig, &err) == CELER_OK);
        for (int r = 0; r < R; r++) {
            if (ig[r] != ic[r]) fprintf(stderr, "  argmax n %lld row %d: %d, cpu %d\n", (long long)n, r, ig[r], ic[r]);
            CHECK(ig[r] == ic[r]);
        }
        gpu->ops->release(gpu, dx);
        free(x);
    }
}

/* Sampled draws: each row's token from the sample op, where it decides it, equal to the host
 * sampler's with the same draw (u included); four rows a call with different parameters (greedy
 * rows among them: the argmax); shapes from peaked to flat, ties, top-k / top-p / min-p. Both
 * sides take exp in double and round to float, so their probabilities agree: a mismatch is a
 * bug (printed with its draw). */
static void test_sample(void)
{
    static const int64_t ns[]    = {1, 7, 1000, 50000, 128256};
    static const int32_t ks[]    = {0, 1, 5, 40};
    static const float   ps[]    = {1.0f, 0.9f, 0.5f}, mins[] = {0.0f, 0.05f};
    static const float   temps[] = {0.0f, 0.3f, 1.0f, 4.0f};
    enum { R = 4 };
    int draws = 0, decided = 0, peaked = 0, peaked_decided = 0, uncut = 0, uncut_decided = 0, mismatches = 0;
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        const int64_t n = ns[k];
        float        *x = malloc((size_t)(R * n) * sizeof *x), *work = malloc((size_t)n * sizeof *work);
        celer_sampler sm;
        CHECK(x && work && celer_sampler_init(&sm, &(celer_sampling){.temperature = 1}, (int32_t)n, &err) == CELER_OK);
        for (int shape = 0; shape < 4; shape++) { /* spread, a few high ones, ties, flat */
            for (int64_t i = 0; i < R * n; i++)
                x[i] = shape == 0 ? 3.0f * (uni() + uni() + uni())
                     : shape == 1 ? ((i % n) % 97 == 3 ? 12.0f : 0.0f) + uni()
                     : shape == 2 ? (float)(rnd() % 4)
                                  : 0.01f * uni();
            float *dx = dev_copy(x, (size_t)(R * n) * sizeof *x);
            for (size_t c = 0; c < sizeof temps / sizeof temps[0] * 24; c += R) {
                celer_draw d[R];
                int32_t    got[R];
                for (int r = 0; r < R; r++) {
                    size_t j = c + (size_t)r; /* every combination in turn */
                    d[r] = (celer_draw){.temperature = temps[j / 24 % 4], .top_k = ks[j / 6 % 4], .top_p = ps[j / 2 % 3],
                                        .min_p = mins[j % 2], .u = (double)(rnd() >> 5) * 0x1.0p-27};
                }
                CHECK(gpu->ops->sample(gpu, dx, R, n, d, got, &err) == CELER_OK);
                for (int r = 0; r < R; r++, draws++) {
                    memcpy(work, x + r * n, (size_t)n * sizeof *work);
                    int32_t want = celer_sampler_draw(&sm, work, &d[r]);
                    bool    is_peaked = shape == 1 && n >= 1000 && d[r].temperature > 0 && d[r].temperature <= 1;
                    bool    is_uncut  = d[r].temperature > 0 && d[r].top_k == 0 && d[r].top_p >= 1;
                    peaked += is_peaked, uncut += is_uncut;
                    if (got[r] < 0 && d[r].temperature > 0) continue;
                    decided++, peaked_decided += is_peaked, uncut_decided += is_uncut;
                    if (got[r] != want) {
                        mismatches++;
                        fprintf(stderr, "  sample n %lld shape %d T %g k %d p %g min-p %g u %.9f: %d, host %d\n",
                                (long long)n, shape, d[r].temperature, d[r].top_k, d[r].top_p, d[r].min_p, d[r].u,
                                got[r], want);
                    }
                }
            }
            gpu->ops->release(gpu, dx);
        }
        /* rows the host decides: NaNs inside, all -inf; at T 0, the argmax's answers */
        for (int64_t i = 0; i < n; i++) x[i] = uni(), x[n + i] = -INFINITY;
        x[n / 2] = NAN;
        float     *dx   = dev_copy(x, (size_t)(2 * n) * sizeof *x);
        celer_draw d[2] = {{.temperature = 1, .top_p = 1, .u = 0.5}, {.temperature = 1, .top_p = 1, .u = 0.5}};
        int32_t    got[2], want[2];
        CHECK(gpu->ops->sample(gpu, dx, 2, n, d, got, &err) == CELER_OK);
        CHECK(got[0] == -1); /* a NaN inside (first, when n is 1): left to the host */
        CHECK(got[1] == -1);
        d[0].temperature = d[1].temperature = 0;
        CHECK(gpu->ops->sample(gpu, dx, 2, n, d, got, &err) == CELER_OK);
        CHECK(cpu->ops->argmax(cpu, x, 2, n, want, &err) == CELER_OK);
        CHECK(got[0] == want[0] && got[1] == want[1]);
        gpu->ops->release(gpu, dx);
        celer_sampler_free(&sm);
        free(x), free(work);
    }
    printf("  sample: %d of %d draws decided on the device (%d of %d peaked ones, %d of %d with nothing cut), %d "
           "differ from the host's\n", decided, draws, peaked_decided, peaked, uncut_decided, uncut, mismatches);
    CHECK(mismatches == 0);
    CHECK(uncut_decided == uncut);
    CHECK(peaked_decided * 10 >= peaked * 9);
}

int main(void)
{
    if (gpu_test_open("test_gpu_sample")) return 1;
    test_argmax();
    test_sample();
    return gpu_test_close("test_gpu_sample");
}
