/* The KV cache's values on the device (celer_kv_cache.elem_bytes): f32, or f16 bits (uint16_t)
 * where the backend keeps them so (CELER_GPU_KV_F16=1: half the memory, and half the bytes a
 * decode step's attention reads; 11 significant bits a value, as the matrix-unit prefill
 * attention already rounds them). The kernels that write or read the cache are templated on the
 * stored type KT and call these overloads; the arithmetic is f32 either way. */
#ifndef CELER_BACKENDS_GPU_KV_CUH
#define CELER_BACKENDS_GPU_KV_CUH

#include "backends/gpu/gpu_vendor.h"

static __device__ __forceinline__ void  kv_put(float *p, float v) { *p = v; }
static __device__ __forceinline__ void  kv_put(uint16_t *p, float v) { *p = gpu_f16_bits(v); }
static __device__ __forceinline__ float kv_get(const float *p) { return *p; }
static __device__ __forceinline__ float kv_get(const uint16_t *p) { return gpu_f16_val(*p); }

/* N = 2 or 4 consecutive values at p (aligned to N values) into d. */
template <int N> static __device__ __forceinline__ void kv_get_n(const float *p, float *d)
{
    if (N == 4) {
        const float4 a = *(const float4 *)p;
        d[0] = a.x, d[1] = a.y, d[2] = a.z, d[3] = a.w;
    } else {
        const float2 a = *(const float2 *)p;
        d[0] = a.x, d[1] = a.y;
    }
}
template <int N> static __device__ __forceinline__ void kv_get_n(const uint16_t *p, float *d)
{
    if (N == 4) {
        const uint2 a = *(const uint2 *)p;
        d[0] = gpu_f16_val(a.x & 0xffff), d[1] = gpu_f16_val(a.x >> 16);
        d[2] = gpu_f16_val(a.y & 0xffff), d[3] = gpu_f16_val(a.y >> 16);
    } else {
        const uint32_t a = *(const uint32_t *)p;
        d[0] = gpu_f16_val(a & 0xffff), d[1] = gpu_f16_val(a >> 16);
    }
}

#endif
