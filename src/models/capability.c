/* The CPU row of the capability table (DESIGN.md, Quantization): what a load does with each
 * storage type, as celer_tensor_desc.type names it. It follows the code that decides: the CPU
 * matmul's types (backends/cpu/matmul.h) and its packed layouts (repack.h for GGUF types,
 * repack_mlx.h for every MLX format). */
#include "celer.h"

#include "backends/backend.h"
#include "backends/cpu/matmul.h"
#include "backends/cpu/repack.h"
#include "quant/dequant.h"

#include <stdio.h>
#include <string.h>

static const char *const RUNS = "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K";

/* An MLX affine type name ("affine4-g64"): NATIVE with native_detail when it is a format mlx
 * writes, REJECT saying so when not; -1 when type is no affine name. */
static int affine_capability(const char *type, const char *native_detail, char *detail, size_t n)
{
    unsigned bits = 0, group = 0;
    char     tail;
    if (sscanf(type, "affine%u-g%u%c", &bits, &group, &tail) != 2) return -1;
    if (bits < 2 || bits > 8 || bits == 7 || (group != 32 && group != 64 && group != 128)) {
        snprintf(detail, n, "not a format mlx writes (affine 2, 3, 4, 5, 6 or 8 bits in groups of 32, 64 or 128)");
        return CELER_CAP_REJECT;
    }
    snprintf(detail, n, "%s", native_detail);
    return CELER_CAP_NATIVE;
}

celer_capability celer_cpu_capability(const char *type, char *detail, size_t n)
{
    /* MLX formats: moved at load into blocks with each row's scales beside its codes, at the
     * quantized size (backends/cpu/repack_mlx.h) */
    int affine = affine_capability(type, "runs natively at its quantized size: scales moved beside the codes at "
                                   "load, 16 rows interleaved where AVX-512 VNNI runs; scale * sum(q x) + bias * "
                                   "sum(x) in integers", detail, n);
    if (affine >= 0) return (celer_capability)affine;
    if (!strcmp(type, "mxfp4") || !strcmp(type, "nvfp4")) {
        snprintf(detail, n, "runs natively at its quantized size: scales moved beside the codes at load, 16 rows "
                 "interleaved where AVX-512 VNNI runs; E2M1 values dotted as integers");
        return CELER_CAP_NATIVE;
    }
    if (!strcmp(type, "mxfp8")) {
        snprintf(detail, n, "runs natively at its quantized size: scales moved beside the codes at load; E4M3 values "
                 "decoded in registers and dotted in f32");
        return CELER_CAP_NATIVE;
    }
    for (uint32_t t = 0; t < CELER_GGML_TYPE_LIMIT; t++) {
        const celer_ggml_type_info *ti = celer_ggml_type_get(t);
        if (!ti || strcmp(ti->name, type)) continue;
        if (celer_cpu_matmul_supported((celer_ggml_type)t)) {
            snprintf(detail, n, "%s", celer_cpu_r16_supported((celer_ggml_type)t)
                                          ? "runs as stored; packed 16 rows interleaved at load where AVX-512 "
                                            "VNNI runs"
                                          : "runs as stored");
            return CELER_CAP_NATIVE;
        }
        snprintf(detail, n, "%s; requantize to one of %s",
                 celer_dequant_supported((celer_ggml_type)t) ? "no CPU matmul for it" : "celer cannot decode it", RUNS);
        return CELER_CAP_REJECT;
    }
    snprintf(detail, n, "not a weight type celer runs; use one of %s, or an MLX-quantized model", RUNS);
    return CELER_CAP_REJECT;
}

const char *celer_capability_name(celer_capability c)
{
    return c == CELER_CAP_NATIVE ? "native" : c == CELER_CAP_CONVERT ? "convert" : "reject";
}

/* The GPU rows (cuda and rocm alike: one kernel source): the types gpu_decode.cuh decodes run
 * natively, decoded in registers; the rest are refused with what to use. */
static celer_capability gpu_capability(const char *type, char *detail, size_t n)
{
    static const char *const GPU_RUNS[] = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K",
                                           "Q5_K", "Q6_K", "mxfp4", "mxfp8", "nvfp4"};
    int affine = affine_capability(type, "runs natively at its quantized size: each row's scales and biases "
                                   "moved beside its codes at load, decoded in registers", detail, n);
    if (affine >= 0) return (celer_capability)affine;
    for (size_t i = 0; i < sizeof GPU_RUNS / sizeof GPU_RUNS[0]; i++)
        if (!strcmp(type, GPU_RUNS[i])) {
            snprintf(detail, n, "runs as stored, decoded in registers by the GPU kernels");
            return CELER_CAP_NATIVE;
        }
    snprintf(detail, n, "no GPU kernel; requantize to one of F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, "
             "Q6_K or an MLX format, or use --backend cpu");
    return CELER_CAP_REJECT;
}

static const struct {
    const char *name;
    celer_capability (*row)(const char *type, char *detail, size_t n);
} ROWS[] = {{"cpu", celer_cpu_capability}, {"cuda", gpu_capability}, {"rocm", gpu_capability}};

celer_capability celer_backend_capability(const char *backend, const char *type, char *detail, size_t n)
{
    for (size_t i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++) {
        if (strcmp(backend, ROWS[i].name)) continue;
        if (!celer_backend_in_build(backend)) {
            snprintf(detail, n, "this celer has no %s backend; rebuild with it (docs/install.md) or run it with the "
                     "cpu backend", backend);
            return CELER_CAP_REJECT;
        }
        return ROWS[i].row(type, detail, n);
    }
    snprintf(detail, n, "'%s' is not a backend: cpu, cuda or rocm", backend);
    return CELER_CAP_REJECT;
}
