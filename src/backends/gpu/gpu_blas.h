/* Products of many tokens on the vendor BLAS (gpu_blas.cu): cuBLAS in CUDA builds, rocBLAS in HIP
 * builds where a ROCm 6 install has it (gpu_rocblas.h), multiply f16 halves of the weights and
 * activations with f32 accumulation. Without one (a HIP build on Debian 12's packages) the
 * backend keeps its kernels for every step. */
#ifndef CELER_BACKENDS_GPU_GPU_BLAS_H
#define CELER_BACKENDS_GPU_GPU_BLAS_H

#include "backends/gpu/gpu_decode.cuh"

/* Products of the formats the device runs on the integer matrix units (gpu_mmq_has: Q4_0, Q8_0
 * and MLX affine 4 and 8 bits, from sm_80) take the BLAS from GPU_BLAS_FROM tokens, every other format's past a batch of
 * decodes (32 tokens: the f32 tiled kernel otherwise); F32 weights' past 32 tokens in f32. 97:
 * on the H100 the 8B Q4_0's 64 sequences decoding together ran at 5,045 tok/s on two chunks of
 * the batch kernel (gpu_mmq.h's GPU_MMQ_CHUNKED) against 3,716 on the BLAS, 96 at 5,339 on three
 * against 5,278, 128 at 5,357 on four against 6,534 (docs/benchmarks/gpu-h200.md, fiftieth pass).
 * CELER_GPU_BLAS_FROM=N moves the first line; 0 keeps every product off the BLAS. A weight's f16
 * copy is made GPU_BLAS_CHUNK_MB MiB of rows at a time (CELER_GPU_BLAS_CHUNK_MB; a 128256-row
 * output head is 1 GiB in f16).
 *
 * Its precision: each operand is split in two f16 halves, hi = f16(v) and lo = f16(v - hi)
 * (stored times 2^11, gpu_blas.cu), and the product is hi·hi (1 pass: ~3e-4 relative, both
 * operands rounded to f16's 11 bits; mlx's own products round activations to the model's f16 or
 * bf16), + hi·lo of the activations (2: the activations to ~22 bits, the weights rounded to f16's
 * 11), + lo·hi of the weights (3: both operands to ~22 bits, as exact as the integer kernels);
 * passes cost a product each. A dense model takes one pass, a model that routes tokens among
 * experts (celer_backend_config.routed) two: on the H200 one pass turned a greedy token of the MoE
 * model tiny-qwen2moe at a decided position in `celer verify --against cpu` (a routing choice
 * flipped) and none of the other 21 (the other two MoE models among them; tiny-llama-mlx-q4g64's
 * logits' relative L2 1.1e-3 by median, 1.1e-4 with three passes); two and three passes gave 0
 * mismatches on all 22. pp512 by passes 1 / 2 / 3 (H200, forty-first pass): 8B Q4_0 19,771 /
 * 13,546 / 9,564 tok/s, 30B-A3B 16,540 / 15,411 / 13,922 (its experts take the integer
 * kernels). CELER_GPU_BLAS_PASSES=N overrides. */
enum { GPU_BLAS_FROM = 97, GPU_BLAS_CHUNK_MB = 128, GPU_BLAS_PASSES = 1, GPU_BLAS_PASSES_ROUTED = 2 };

/* y (T, w.rows) = x (T, w.cols) · wᵀ on the vendor BLAS; fmt: w's enum gpu_fmt. */
celer_status gpu_blas_matmul(gpu_backend *g, const gpu_wdesc *w, int fmt, const float *x, int64_t T, float *y,
                             celer_error *err);
/* The handle, its workspace and the scratch released; nothing when no product took the BLAS. */
void         gpu_blas_free(gpu_backend *g);
/* f->blas: which BLAS this build's long steps take and where it was found, or why none. */
void         gpu_blas_facts(const gpuDeviceProp *p, celer_device_facts *f);
/* The device memory the BLAS path may take beyond the planner's estimate, for steps of up to
 * `tokens` tokens through weights of up to `cols` columns (0 without a vendor BLAS). */
uint64_t     gpu_blas_scratch(const gpu_backend *g, int64_t tokens, int64_t cols);

#endif
