/* The CPU row of the capability table (DESIGN.md, Quantization): what a load does with each
 * storage type, as celer_tensor_desc.type names it. It follows the code that decides: the CPU
 * matmul's types (backends/cpu/matmul.h), its packed layout (repack.h) and load_dir.c's
 * conversions of MLX formats. */
#include "celer.h"

#include "backends/cpu/matmul.h"
#include "backends/cpu/repack.h"
#include "quant/dequant.h"

#include <stdio.h>
#include <string.h>

static const char *const RUNS = "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K";

celer_capability celer_cpu_capability(const char *type, char *detail, size_t n)
{
    unsigned bits = 0, group = 0;
    char     tail;
    if (sscanf(type, "affine%u-g%u%c", &bits, &group, &tail) == 2) {
        if (bits == 4)
            snprintf(detail, n, "converted at load to Q4_1 blocks (the same affine map) when every scale and bias "
                     "is a binary16, else as the other widths");
        else
            snprintf(detail, n, "dequantized at load to F32 (mlx's scale * q + bias): runs, with the memory of an "
                     "unquantized model; no %u-bit kernel yet", bits);
        return CELER_CAP_CONVERT;
    }
    if (!strcmp(type, "mxfp4") || !strcmp(type, "mxfp8") || !strcmp(type, "nvfp4")) {
        snprintf(detail, n, "dequantized at load to BF16 (exact): runs, with the memory of an unquantized model; no %s "
                 "kernel yet", type);
        return CELER_CAP_CONVERT;
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
