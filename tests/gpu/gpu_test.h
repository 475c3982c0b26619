/* What the GPU tests share (each tests/gpu/test_*.c is its own program): CHECK, which counts a
 * failure with its line and goes on; the CPU and GPU backends they compare; device buffers and
 * the error measures. Bounds are in each test file's header. */
#ifndef CELER_TESTS_GPU_TEST_H
#define CELER_TESTS_GPU_TEST_H

#include "backends/backend.h"
#include "core/error.h"
#include "quant/half.h"
#include "quant/mlx_quantize.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "random_weights.h"

/* Every check runs; each failure is counted and printed with its line. */
static int failures;
#define CHECK(c)                                                                                                    \
    do {                                                                                                            \
        if (!(c)) {                                                                                                 \
            fprintf(stderr, "%s:%d: %s%s%s\n", __FILE__, __LINE__, #c, err.msg[0] ? " -- " : "", err.msg);     \
            failures++;                                                                                             \
        }                                                                                                           \
    } while (0)

static celer_backend *cpu, *gpu;
static celer_error    err;

/* ---- helpers -------------------------------------------------------------------------- */

static inline float *dev_copy(const void *h, size_t bytes)
{
    void *d = NULL;
    CHECK(gpu->ops->alloc(gpu, bytes, &d, &err) == CELER_OK);
    CHECK(gpu->ops->write(gpu, d, h, bytes, &err) == CELER_OK);
    return d;
}

static inline float *dev_zeros(size_t n)
{
    void *d = NULL;
    CHECK(gpu->ops->alloc(gpu, n * sizeof(float), &d, &err) == CELER_OK);
    return d;
}

static inline void to_host(const void *d, void *h, size_t bytes) { CHECK(gpu->ops->read(gpu, d, h, bytes, &err) == CELER_OK); }

/* x rounded to the nearest f16 values (what an f16 KV cache holds of them). */
static inline void round_f16(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = celer_half_to_f32(celer_f32_to_half(x[i]));
}

/* n values of a KV cache pool on the GPU, as f32 (an f16 pool converted). */
static inline void pool_to_host(const celer_kv_cache *kv, const void *pool, float *out, int64_t n)
{
    if (kv->elem_bytes != 2) {
        to_host(pool, out, (size_t)n * sizeof *out);
        return;
    }
    uint16_t *h = malloc((size_t)n * sizeof *h);
    CHECK(h != NULL);
    if (!h) return;
    to_host(pool, h, (size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; i++) out[i] = celer_half_to_f32(h[i]);
    free(h);
}

static inline double rel_l2(const float *a, const double *ref, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(a[i])) return INFINITY;
        num += (a[i] - ref[i]) * (a[i] - ref[i]), den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static inline double rel_l2f(const float *a, const float *b, int64_t n)
{
    double *r = malloc((size_t)n * sizeof *r);
    for (int64_t i = 0; i < n; i++) r[i] = b[i];
    double e = rel_l2(a, r, n);
    free(r);
    return e;
}

static inline void random_fill(float *x, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++) x[i] = uni() * s;
}

/* A host MLX weight (rows, cols) of random values quantized in mode: affine by bits in groups of
 * group with scales of dtype (F32, F16 or BF16), or mxfp4 or nvfp4 (their own bits and groups); its
 * arrays into bufs[0..3) (free them). */
static inline celer_weight mlx_host(int64_t rows, int64_t cols, celer_hf_quant_mode mode, uint32_t bits, uint32_t group,
                             celer_st_dtype dtype, void *bufs[3])
{
    const bool      mx = mode != CELER_HF_QUANT_AFFINE;
    celer_mlx_quant q  = {.name = "weight", .mode = mode, .bits = mx ? 4 : bits,
                          .group_size = mode == CELER_HF_QUANT_NVFP4 ? 16 : mx ? 32 : group, .dtype = dtype,
                          .rows = rows, .cols = cols};
    celer_mlx_quant_shapes sh;
    CHECK(celer_mlx_quant_get_shapes(&q, &sh, &err) == CELER_OK);
    float *src = malloc((size_t)(rows * cols) * 4);
    random_fill(src, rows * cols, 0.1f);
    if (!mx && dtype != CELER_ST_F32) { /* affine quantizes values of its scales' dtype */
        uint16_t *b = (uint16_t *)src;     /* (in place: value i's bytes are read before written) */
        for (int64_t i = 0; i < rows * cols; i++)
            b[i] = dtype == CELER_ST_BF16 ? celer_f32_to_bf16(src[i]) : celer_f32_to_half(src[i]);
    }
    bufs[0] = malloc(sh.weight_bytes), bufs[1] = malloc(sh.scales_bytes);
    bufs[2] = sh.has_biases ? malloc(sh.biases_bytes) : NULL;
    CHECK(celer_mlx_quantize_rows(&q, src, mx ? CELER_ST_F32 : dtype, 0, rows, bufs[0], bufs[1], bufs[2], &err) ==
          CELER_OK);
    free(src);
    return (celer_weight){.type = CELER_WEIGHT_MLX, .rows = rows, .cols = cols, .data = bufs[0], .mlx = q,
                          .mlx_data = {bufs[0], sh.weight_bytes, bufs[1], sh.scales_bytes, bufs[2], sh.biases_bytes}};
}

/* Whether the GPU's product of T tokens by a weight of type t may run on the BLAS path
 * (gpu_blas.h): where the device takes a vendor BLAS (celer_device_query's blas: cuBLAS, a
 * rocBLAS; none in the simt emulator) unless CELER_GPU_BLAS_FROM=0, past 32 tokens (Q4_0 and Q8_0
 * only from N, the variable or gpu_blas.h's GPU_BLAS_FROM, 97, where the device has integer matrix
 * units: either path's bound is taken for them). */
static inline bool blas_may(celer_ggml_type t, int64_t T)
{
    static int  has  = -1;
    const char *from = getenv("CELER_GPU_BLAS_FROM");
    const int   n    = from && *from ? atoi(from) : 97;
    if (has < 0) {
        celer_device_facts f;
        celer_error        e;
        has = celer_device_query(0, &f, &e) == CELER_OK && strncmp(f.blas, "none", 4) != 0;
    }
    if (!has || n <= 0) return false;
    bool mmq = t == CELER_GGML_Q4_0 || t == CELER_GGML_Q8_0;
    return T > 32 || (mmq && T >= n);
}

/* Whether the device runs NVIDIA's batch kernel (gpu_mmq_small.cu): its matrix units are
 * mma.sync ones (celer_device_query's matrix line). */
static inline bool batch_kernel_here(void)
{
    celer_device_facts f;
    celer_error        e;
    return celer_device_query(0, &f, &e) == CELER_OK && strncmp(f.matrix, "mma.sync", 8) == 0;
}

/* Whether CELER_GPU_CHECK=bad makes every self-check fail: the integer matrix units' kernels (the
 * batch kernel's among them) are then left off. */
static inline bool checks_made_bad(void)
{
    const char *v = getenv("CELER_GPU_CHECK");
    return v && !strcmp(v, "bad");
}

/* Whether the dense products of quantized weights take 8-bit activations, the high level only
 * (as the backend does under CELER_GPU_MVQ_X8=1; gpu_matvec.h): then held to the 8-bit bound. */
static inline bool x8_mode(void)
{
    const char *v = getenv("CELER_GPU_MVQ_X8");
    return v && !strcmp(v, "1");
}

/* Seeds the generator (CELER_TEST_SEED repeats a run) and opens both backends; nonzero when no
 * GPU answers (on a GPU machine a missing device is a failure, not a skip). */
static inline int gpu_test_open(const char *name)
{
    const char *s = getenv("CELER_TEST_SEED");
    rng_state     = s && *s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull | 1;
    printf("%s: seed %llu (CELER_TEST_SEED repeats it)\n", name, (unsigned long long)rng_state);
    celer_backend_config cfg = {0};
    CHECK(celer_backend_create(&cpu, "cpu", &cfg, &err) == CELER_OK);
    const char  *kind = getenv("CELER_TEST_BACKEND");
    celer_status st   = celer_backend_create(&gpu, kind ? kind : "cuda", &cfg, &err);
    if (st) fprintf(stderr, "%s: no GPU backend: %s\n", name, err.msg);
    return st != CELER_OK;
}

/* A second GPU backend opened with the variables env[0 .. n) ("NAME=VALUE") set, then the
 * environment put back as it was; NULL (a failed check) where none opens. */
static inline celer_backend *gpu_backend_with(const char *const *env, int n)
{
    enum { MAX_VARS = 4 };
    char                 name[MAX_VARS][64], keep[MAX_VARS][64];
    bool                 had[MAX_VARS];
    celer_backend       *be   = NULL;
    celer_backend_config cfg  = {0};
    const char          *kind = getenv("CELER_TEST_BACKEND");
    n                         = n < MAX_VARS ? n : MAX_VARS;
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(env[i], '=');
        snprintf(name[i], sizeof name[i], "%.*s", (int)(eq - env[i]), env[i]);
        const char *was = getenv(name[i]);
        if ((had[i] = was != NULL)) snprintf(keep[i], sizeof keep[i], "%s", was);
        setenv(name[i], eq + 1, 1);
    }
    CHECK(celer_backend_create(&be, kind ? kind : "cuda", &cfg, &err) == CELER_OK);
    for (int i = 0; i < n; i++) {
        if (had[i]) setenv(name[i], keep[i], 1);
        else unsetenv(name[i]);
    }
    return be;
}

/* Closes both backends and reports; the program's exit code. */
static inline int gpu_test_close(const char *name)
{
    celer_backend_destroy(gpu);
    celer_backend_destroy(cpu);
    printf("%s: %s (%d failed checks)\n", name, failures ? "FAILED" : "passed", failures);
    return failures ? 1 : 0;
}

#endif
