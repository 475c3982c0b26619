/* Harness for celer_cpu_matmul (src/backends/cpu/matmul.c and its kernels, linked in, not
 * copied): for each weight type and each kernel level this CPU runs, checks the level against
 * the scalar reference and times decode (T = 1) on 4096×4096 and 2048×8192 (rows × k) and
 * prefill (T = 64), next to the memory read bandwidth measured here. Build and run: see
 * dev/kernels/README.md.
 *
 * Weights are timed cold: each repeat uses the next of several copies that together exceed the
 * last-level cache, so every byte comes from DRAM, as in a real model. "hot" repeats one copy. */
#include "backends/cpu/matmul.h"
#include "core/threads.h"
#include "quant/half.h"

#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float uni(void) { return (float)rnd() / 4294967296.0f * 2.0f - 1.0f; }

/* ---- read bandwidth: sum bytes with 256-bit loads, split over the pool ---------------------- */

typedef struct {
    const char *p;
    size_t      n;
    double      sink[64];
} read_job;

__attribute__((target("avx2"))) static void read_fn(void *ctx, int ith, int nth)
{
    read_job *j = ctx;
    int64_t   b, e;
    celer_pool_slice((int64_t)(j->n / 256), ith, nth, &b, &e);
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = b; i < e; i++) {
        const __m256i *q = (const __m256i *)(j->p + i * 256);
        a0 = _mm256_add_epi64(a0, _mm256_add_epi64(_mm256_load_si256(q), _mm256_load_si256(q + 1)));
        a1 = _mm256_add_epi64(a1, _mm256_add_epi64(_mm256_load_si256(q + 2), _mm256_load_si256(q + 3)));
        a2 = _mm256_add_epi64(a2, _mm256_add_epi64(_mm256_load_si256(q + 4), _mm256_load_si256(q + 5)));
        a3 = _mm256_add_epi64(a3, _mm256_add_epi64(_mm256_load_si256(q + 6), _mm256_load_si256(q + 7)));
    }
    __m256i a = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    j->sink[ith % 64] += (double)_mm256_extract_epi64(a, 0);
}

/* GB/s reading n bytes at p (best of reps). */
static double read_bw(celer_pool *pool, const char *p, size_t n, int reps)
{
    read_job j    = {.p = p, .n = n};
    double   best = 1e30;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        celer_pool_run(pool, read_fn, &j);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return n / best / 1e9;
}

/* ---- weights ------------------------------------------------------------------------------- */

static void random_weights(celer_ggml_type t, void *w, size_t bytes)
{
    const celer_ggml_type_info *ti = celer_ggml_type_get(t);
    uint8_t                    *p  = w;
    for (size_t i = 0; i < bytes; i++) p[i] = (uint8_t)rnd();
    for (size_t b = 0; b < bytes / ti->block_bytes; b++) {
        uint8_t *blk = p + b * ti->block_bytes;
        uint16_t h   = celer_f32_to_half(uni() * 0.05f), h2 = celer_f32_to_half(uni() * 0.05f);
        float    f   = uni();
        switch (t) {
        case CELER_GGML_F32: memcpy(blk, &f, 4); break;
        case CELER_GGML_F16: memcpy(blk, &h, 2); break;
        case CELER_GGML_BF16: h = celer_f32_to_bf16(f), memcpy(blk, &h, 2); break;
        case CELER_GGML_Q6_K: memcpy(blk + ti->block_bytes - 2, &h, 2); break;
        default: memcpy(blk, &h, 2), memcpy(blk + 2, &h2, 2); break; /* d, and m/dmin where there is one */
        }
    }
}

typedef struct {
    int64_t rows, k;
} shape;

enum { T_PREFILL = 64, COLD_BYTES = 768u << 20 };

int main(int argc, char **argv)
{
    int             nthreads = argc > 1 ? atoi(argv[1]) : 2;
    const char     *only     = argc > 2 ? argv[2] : NULL; /* a type name: time only that type */
    celer_host_info host     = {0};
    celer_host_info_read(&host);
    celer_error err = {0};
    celer_pool *pool;
    if (celer_pool_init(&pool, nthreads, &err) != CELER_OK) return fprintf(stderr, "%s\n", err.msg), 1;
    printf("cpu: %s, %d threads\n", host.cpu_model, nthreads);

    /* read bandwidth: from DRAM (768 MiB, past the caches) and from cache (9.4 MB, Q4_0 4096x4096) */
    char *big = aligned_alloc(4096, COLD_BYTES);
    memset(big, 1, COLD_BYTES);
    double bw_dram = read_bw(pool, big, COLD_BYTES, 5);
    double bw_hot  = read_bw(pool, big, 9437184, 50);
    printf("read bandwidth: %.1f GB/s from DRAM (768 MiB), %.1f GB/s hot (9.4 MB, cache)\n\n", bw_dram, bw_hot);

    static const celer_ggml_type types[] = {CELER_GGML_F32,  CELER_GGML_F16,  CELER_GGML_BF16, CELER_GGML_Q4_0,
                                            CELER_GGML_Q4_1, CELER_GGML_Q5_0, CELER_GGML_Q5_1, CELER_GGML_Q8_0,
                                            CELER_GGML_Q4_K, CELER_GGML_Q5_K, CELER_GGML_Q6_K};
    static const shape shapes[] = {{4096, 4096}, {2048, 8192}};
    float *X = malloc(sizeof(float) * T_PREFILL * 8192), *Y = malloc(sizeof(float) * T_PREFILL * 4096);
    float *Yref = malloc(sizeof(float) * T_PREFILL * 4096);
    for (int i = 0; i < T_PREFILL * 8192; i++) X[i] = uni();

    printf("%-5s %-10s %-11s %9s %9s %9s %9s %9s\n", "type", "level", "shape", "dec GB/s", "dec GF/s", "hot GB/s",
           "pre GF/s", "max err");
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        celer_ggml_type             t    = types[ti];
        const celer_ggml_type_info *info = celer_ggml_type_get(t);
        if (only && strcmp(only, info->name)) continue;
        for (size_t si = 0; si < 2; si++) {
            shape  s      = shapes[si];
            size_t wbytes = (size_t)(s.rows * s.k / info->block_elems) * info->block_bytes;
            int    copies = (int)(COLD_BYTES / wbytes) + 1;
            char  *Wall   = aligned_alloc(4096, (wbytes * copies + 4095) / 4096 * 4096);
            random_weights(t, Wall, wbytes);
            for (int c = 1; c < copies; c++) memcpy(Wall + c * wbytes, Wall, wbytes);
            const char *W = Wall;
            for (int isa = 0; isa < CELER_CPU_ISA_COUNT; isa++) {
                if (!celer_cpu_isa_available((celer_cpu_isa)isa, &host) ||
                    (int)celer_cpu_isa_for_type((celer_cpu_isa)isa, t) != isa)
                    continue;
                celer_cpu_scratch sc = {0};
                if (celer_cpu_scratch_init(&sc, (celer_cpu_isa)isa, celer_cpu_matmul_scratch_size(t, s.k, T_PREFILL),
                                           &err) != CELER_OK)
                    return fprintf(stderr, "%s\n", err.msg), 1;
                int reps = isa == CELER_CPU_ISA_REF ? 2 : 40;
                /* correctness against the reference level (prefill shape, first 64 rows) */
                celer_cpu_matmul(pool, t, CELER_CPU_LAYOUT_STORED, W, 64, s.k, X, T_PREFILL, Y, &sc, &err);
                double maxerr = 0, maxref = 0; /* max |Y - Yref| / max |Yref| */
                if (isa == CELER_CPU_ISA_REF) memcpy(Yref, Y, sizeof(float) * 64 * T_PREFILL);
                for (int i = 0; i < 64 * T_PREFILL; i++) {
                    maxerr = fmax(maxerr, fabs(Y[i] - Yref[i]));
                    maxref = fmax(maxref, fabs(Yref[i]));
                }
                maxerr /= maxref;
                /* decode, cold: a different copy each repeat */
                double best = 1e30, besthot = 1e30;
                for (int r = 0; r < reps; r++) {
                    const char *Wc = W + (size_t)(r % copies) * wbytes;
                    double      t0 = now();
                    celer_cpu_matmul(pool, t, CELER_CPU_LAYOUT_STORED, Wc, s.rows, s.k, X, 1, Y, &sc, &err);
                    double dt = now() - t0;
                    if (dt < best) best = dt;
                }
                for (int r = 0; r < reps; r++) {
                    double t0 = now();
                    celer_cpu_matmul(pool, t, CELER_CPU_LAYOUT_STORED, W, s.rows, s.k, X, 1, Y, &sc, &err);
                    double dt = now() - t0;
                    if (dt < besthot) besthot = dt;
                }
                /* prefill */
                double bestp = 1e30;
                for (int r = 0; r < (isa == CELER_CPU_ISA_REF ? 1 : 5); r++) {
                    const char *Wc = W + (size_t)(r % copies) * wbytes;
                    double      t0 = now();
                    celer_cpu_matmul(pool, t, CELER_CPU_LAYOUT_STORED, Wc, s.rows, s.k, X, T_PREFILL, Y, &sc, &err);
                    double dt = now() - t0;
                    if (dt < bestp) bestp = dt;
                }
                double flop = 2.0 * s.rows * s.k;
                char   sh[32];
                snprintf(sh, sizeof sh, "%lldx%lld", (long long)s.rows, (long long)s.k);
                printf("%-5s %-10s %-11s %9.1f %9.1f %9.1f %9.1f %9.1e\n", info->name, celer_cpu_isa_name(isa), sh,
                       wbytes / best / 1e9, flop / best / 1e9, wbytes / besthot / 1e9,
                       flop * T_PREFILL / bestp / 1e9, maxerr);
                fflush(stdout);
                celer_cpu_scratch_free(&sc);
            }
            free(Wall);
        }
    }
    printf("\nread bandwidth for comparison: %.1f GB/s DRAM, %.1f GB/s hot\n", bw_dram, bw_hot);
    celer_pool_free(pool);
    free(big), free(X), free(Y), free(Yref);
    return 0;
}
