/* The GPU backend's matmul (src/backends/gpu/gpu_matmul.cu) through the backend's own ops: for
 * each weight format, the time of one product at the decode and batched-decode step sizes and a
 * prefill chunk, the weight bytes per second that makes, and the device's copy bandwidth
 * measured in the same run (bytes read + written). Weights are cold: each repeat uses the next of
 * enough copies to exceed the L2 several times. Each format's T = 1 product is checked against
 * the CPU backend (relative L2, bound 2e-2; both quantize activations to ~15 bits). "step" times
 * T = 1 inside a replayed step graph (no host launch cost: what a decode step sees).
 *
 * Build against a GPU build (see README.md) and run: kernel_gpu_matmul [REPS [FORMAT [ROWS]]]
 * (FORMAT: only the formats whose name starts with it; ROWS: only that shape's row count).
 * HARNESS_SHAPES picks the products' shapes (rows x cols): 8b (the default: Llama-3.1-8B's
 * 4096x4096, 14336x4096, 4096x14336), 0.6b (Qwen3-0.6B's q, k and v, o, gate, down), 30b
 * (Qwen3-30B-A3B's dense ones: q, k and v, o) or all; HARNESS_STEP_ONLY=1 times only the T = 1
 * product inside a replayed step (the decode kernels' choices, e.g. with and without
 * CELER_GPU_MVQ_XS=0, as `scripts/gpu-check.sh xs` runs it).
 * CELER_GPU_MMQ_FROM=N in the environment moves Q4_0 and Q8_0 steps of more than N tokens to
 * the integer matrix units (0: all of them), to compare the kernels at the same sizes; on CUDA,
 * CELER_GPU_BLAS_FROM=N (N > 0) runs Q4_0 and Q8_0 products of N tokens and more, and every
 * other format's past 32, on cuBLAS (gpu_blas.cu; off by default). */
#define HARNESS_NAME "kernel_gpu_matmul"
#include "gpu_harness.h"
#include "quant/mlx_quantize.h"

#include <string.h>

#include "random_weights.h"

typedef struct {
    const char  *name;
    celer_weight w;      /* host description */
    size_t       bytes;  /* of the weights */
} fmt;

/* The time of one T = 1 product inside a step graph (backend step_begin / step_end): the step
 * multiplies by every copy in turn; it is run op by op, then recorded, then replayed, and the
 * replays are timed. No host launch cost between the kernels, as in a decode step. */
/* A step's key names what it runs, as the engine's do: each format and shape its own graph (one
 * key for all of them replayed the first shape's graph on the next one's buffers). */
static double recorded_step_us(const fmt *f, const celer_weight *ws, int copies, const float *dx, float *dy)
{
    enum { PASSES = 2 + 10 }; /* op by op, recorded, then the timed replays */
    uint64_t key = 0xcbf29ce484222325ull ^ (uint64_t)f->w.rows << 32 ^ (uint64_t)f->w.cols;
    for (const char *c = f->name; *c; c++) key = (key ^ (unsigned char)*c) * 0x100000001b3ull;
    double t0 = 0;
    for (int pass = 0; pass < PASSES; pass++) {
        if (pass == 2) sync_dev(dy), t0 = now();
        bool redo = false;
        if (gpu->ops->step_begin(gpu, key, &err)) die("step_begin");
        for (int c = 0; c < copies; c++)
            if (gpu->ops->matmul(gpu, &ws[c], dx, 1, dy, &err)) die("matmul");
        if (gpu->ops->step_end(gpu, true, &redo, &err) || redo) die("step_end");
    }
    sync_dev(dy);
    return (now() - t0) / ((PASSES - 2) * copies) * 1e6;
}

static void run(const fmt *f, int reps, double copy_bw)
{
    static const int64_t Ts[] = {1, 2, 4, 8, 16, 32, 512};
    const bool           step_only = getenv("HARNESS_STEP_ONLY") && !strcmp(getenv("HARNESS_STEP_ONLY"), "1");
    int64_t              rows = f->w.rows, k = f->w.cols;
    int                  copies = (int)(256.0 * 1048576.0 / (double)f->bytes) + 1; /* 256 MiB: 4x the L2 */
    if (copies > 64) copies = 64;
    celer_weight *ws = malloc((size_t)copies * sizeof *ws);
    for (int c = 0; c < copies; c++) {
        ws[c] = f->w;
        if (gpu->ops->weight_load(gpu, &ws[c], &err)) die("weight_load");
    }
    float *x = malloc((size_t)(512 * k) * sizeof *x), *yc = malloc((size_t)rows * sizeof *yc),
          *yg = malloc((size_t)rows * sizeof *yg);
    random_acts(x, 512, k);
    void *dx, *dy;
    if (gpu->ops->alloc(gpu, (size_t)(512 * k) * sizeof(float), &dx, &err) ||
        gpu->ops->alloc(gpu, (size_t)(512 * rows) * sizeof(float), &dy, &err) ||
        gpu->ops->write(gpu, dx, x, (size_t)(512 * k) * sizeof(float), &err))
        die("alloc");
    /* the check: T = 1 against the CPU backend */
    celer_weight wc = f->w;
    if (cpu->ops->weight_load(cpu, &wc, &err) || cpu->ops->matmul(cpu, &wc, x, 1, yc, &err) ||
        gpu->ops->matmul(gpu, &ws[0], dx, 1, dy, &err) || gpu->ops->read(gpu, dy, yg, (size_t)rows * 4, &err))
        die("check");
    double e = rel_l2(yg, yc, rows);
    printf("%-16s %6lldx%-6lld %8.2f MB  vs cpu %.1e%s", f->name, (long long)rows, (long long)k,
           (double)f->bytes / 1e6, e, e < 2e-2 ? "" : " (FAILED)");
    for (size_t ti = 0; ti < (step_only ? 0 : sizeof Ts / sizeof Ts[0]); ti++) {
        int64_t T = Ts[ti];
        for (int c = 0; c < copies; c++) /* warm-up: every copy once */
            if (gpu->ops->matmul(gpu, &ws[c], dx, T, dy, &err)) die("matmul");
        sync_dev(dy);
        double t0 = now();
        for (int r = 0; r < reps; r++)
            if (gpu->ops->matmul(gpu, &ws[r % copies], dx, T, dy, &err)) die("matmul");
        sync_dev(dy);
        double us = (now() - t0) / reps * 1e6;
        printf(" | T=%-3lld %8.1f us %7.0f GB/s %3.0f%%", (long long)T, us, (double)f->bytes / us / 1e3,
               100.0 * (double)f->bytes / (us * 1e-6) / copy_bw);
    }
    if (gpu->ops->step_begin) { /* T = 1 as a decode step runs it: every copy's product in one recorded step */
        double us = recorded_step_us(f, ws, copies, dx, dy);
        printf(" | step T=1 %6.1f us %7.0f GB/s %3.0f%%", us, (double)f->bytes / us / 1e3,
               100.0 * (double)f->bytes / (us * 1e-6) / copy_bw);
    }
    printf("\n");
    gpu->ops->release(gpu, dx), gpu->ops->release(gpu, dy);
    free(ws), free(x), free(yc), free(yg);
}

/* An MLX matrix quantized from random values: affine of `bits` bits with groups of 64 and bf16
 * scales (the mlx-community default), or mxfp4 or nvfp4 (their own scales; bits 4). */
static fmt mlx_matrix(celer_hf_quant_mode mode, uint32_t bits, int64_t rows, int64_t k)
{
    static const char *const affine_names[] = {"", "", "mlx affine2 g64", "mlx affine3 g64", "mlx affine4 g64",
                                               "mlx affine5 g64", "mlx affine6 g64", "", "mlx affine8 g64"};
    const bool      affine = mode == CELER_HF_QUANT_AFFINE;
    const uint32_t  group  = affine ? 64 : mode == CELER_HF_QUANT_NVFP4 ? 16 : 32;
    celer_mlx_quant q      = {.name = "bench", .mode = mode, .bits = bits, .group_size = group,
                              .dtype = CELER_ST_BF16, .rows = rows, .cols = k};
    celer_mlx_quant_shapes s;
    if (celer_mlx_quant_get_shapes(&q, &s, &err)) die("mlx shapes");
    float    *src = malloc((size_t)(rows * k) * sizeof *src);
    uint16_t *b16 = malloc((size_t)(rows * k) * 2);
    for (int64_t i = 0; i < rows * k; i++) src[i] = uni() * 0.1f, b16[i] = celer_f32_to_bf16(src[i]);
    void *wq = malloc(s.weight_bytes), *sc = malloc(s.scales_bytes);
    void *bi = s.has_biases ? malloc(s.biases_bytes) : NULL;
    /* affine quantizes in its scales' dtype; the fp modes from f32 */
    if (celer_mlx_quantize_rows(&q, affine ? (const void *)b16 : src, affine ? CELER_ST_BF16 : CELER_ST_F32, 0, rows, wq,
                                sc, bi, &err))
        die("mlx quantize");
    free(src), free(b16);
    fmt f = {affine ? affine_names[bits] : mode == CELER_HF_QUANT_MXFP4 ? "mlx mxfp4" : "mlx nvfp4",
             {.type = CELER_WEIGHT_MLX, .rows = rows, .cols = k, .data = wq, .mlx = q,
              .mlx_data = {wq, s.weight_bytes, sc, s.scales_bytes, bi, s.biases_bytes}},
             s.weight_bytes + s.scales_bytes + s.biases_bytes};
    return f;
}

int main(int argc, char **argv)
{
    const char *want = getenv("HARNESS_SHAPES") ? getenv("HARNESS_SHAPES") : "8b";
    if (strcmp(want, "8b") && strcmp(want, "0.6b") && strcmp(want, "30b") && strcmp(want, "all")) {
        fprintf(stderr, HARNESS_NAME ": HARNESS_SHAPES is '%s': use 8b, 0.6b, 30b or all\n", want);
        return 2;
    }
    const int            reps = harness_open(argc, argv, 50);
    const char          *only = argc > 2 ? argv[2] : "";
    int64_t              only_rows = argc > 3 ? atoll(argv[3]) : 0;
    double bw = copy_bandwidth();
    printf("device copy bandwidth (read + write): %.0f GB/s; %d repeats, weights cold\n", bw / 1e9, reps);
    static const celer_ggml_type types[] = {CELER_GGML_Q4_0, CELER_GGML_Q4_1, CELER_GGML_Q5_0, CELER_GGML_Q5_1,
                                            CELER_GGML_Q8_0, CELER_GGML_Q4_K, CELER_GGML_Q5_K, CELER_GGML_Q6_K,
                                            CELER_GGML_F16,  CELER_GGML_BF16};
    /* rows x cols, and the set each belongs to (a product of q, k and v: its rows together) */
    static const struct {
        const char *set;
        int64_t     rows, cols;
    } shapes[] = {{"8b", 4096, 4096},   {"8b", 14336, 4096}, {"8b", 4096, 14336}, {"0.6b", 4096, 1024},
                  {"0.6b", 1024, 2048}, {"0.6b", 3072, 1024}, {"0.6b", 1024, 3072}, {"30b", 5120, 2048},
                  {"30b", 2048, 4096}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s].rows, k = shapes[s].cols;
        if (strcmp(want, "all") && strcmp(want, shapes[s].set)) continue;
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            const celer_ggml_type_info *ti = celer_ggml_type_get(types[i]);
            fmt f = {ti->name, {.type = types[i], .rows = rows, .cols = k, .data = random_weights(types[i], rows, k, 0.1f)},
                     (size_t)(rows * k / ti->block_elems) * ti->block_bytes};
            if (!strncmp(f.name, only, strlen(only)) && (!only_rows || rows == only_rows)) run(&f, reps, bw);
            free((void *)f.w.data);
        }
        static const struct {
            celer_hf_quant_mode mode;
            uint32_t            bits;
        } mlx[] = {{CELER_HF_QUANT_AFFINE, 4}, {CELER_HF_QUANT_AFFINE, 2}, {CELER_HF_QUANT_AFFINE, 3},
                   {CELER_HF_QUANT_AFFINE, 5}, {CELER_HF_QUANT_AFFINE, 6}, {CELER_HF_QUANT_AFFINE, 8},
                   {CELER_HF_QUANT_MXFP4, 4},  {CELER_HF_QUANT_NVFP4, 4}};
        for (size_t i = 0; i < sizeof mlx / sizeof mlx[0]; i++) {
            fmt m = mlx_matrix(mlx[i].mode, mlx[i].bits, rows, k);
            if (!strncmp(m.name, only, strlen(only)) && (!only_rows || rows == only_rows)) run(&m, reps, bw);
            free((void *)m.w.mlx_data.weight), free((void *)m.w.mlx_data.scales), free((void *)m.w.mlx_data.biases);
        }
    }
    harness_close();
    return 0;
}
