/* Device facts: what the runtime says of a device, and what the vendor header adds (the gfx
 * targets this build has, unified memory on APUs). */
#include "backends/gpu/gpu_backend.h"
#include "backends/gpu/gpu_blas.h"
#include "backends/gpu/gpu_mmq.h"

extern "C" {
#include "backends/gpu/gpu_device.h"
}

#include <string.h>

#ifndef CELER_GPU_ARCHS
#error "CELER_GPU_ARCHS (the targets this build compiles for) is set by cmake/celer_gpu.cmake"
#endif

extern "C" celer_status celer_gpu_device_facts(int index, celer_device_facts *f, celer_error *err)
{
    memset(f, 0, sizeof *f);
    snprintf(f->backend, sizeof f->backend, "%s", CELER_GPU_NAME);
    snprintf(f->vendor, sizeof f->vendor, "%s", CELER_GPU_VENDOR);
    snprintf(f->built_archs, sizeof f->built_archs, "%s", CELER_GPU_ARCHS);
    int        n = 0;
    gpuError_t e = gpuGetDeviceCount(&n);
    if (e != gpuSuccess || n == 0) {
        (void)gpuGetLastError();
        char words[160];
        return celer_fail(err, CELER_ERR_DEVICE, "%s: no %s GPU found (%s); use --backend cpu", CELER_GPU_NAME,
                          CELER_GPU_VENDOR, e != gpuSuccess ? gpu_error_words(e, words, sizeof words)
                                                            : "the runtime sees no device");
    }
    if (index < 0 || index >= n)
        return celer_fail(err, CELER_ERR_INVALID, "%s: device %d does not exist (there are %d)", CELER_GPU_NAME, index,
                          n);
    gpuDeviceProp p;
    size_t        free_b = 0, total_b = 0;
    e = gpuGetDeviceProperties(&p, index);
    if (e == gpuSuccess) e = gpuSetDevice(index);
    if (e == gpuSuccess) e = gpuMemGetInfo(&free_b, &total_b);
    if (e != gpuSuccess) {
        (void)gpuGetLastError();
        char words[160];
        return celer_fail(err, CELER_ERR_DEVICE, "%s: device %d does not answer: %s", CELER_GPU_NAME, index,
                          gpu_error_words(e, words, sizeof words));
    }
    int rt = 0;
    (void)gpuRuntimeGetVersion(&rt);
    snprintf(f->runtime, sizeof f->runtime, "%s %d.%d", CELER_GPU_API, rt / 1000, (rt % 1000) / 10);
    snprintf(f->name, sizeof f->name, "%s", p.name);
    f->index = index, f->count = n;
    f->compute_units   = p.multiProcessorCount;
    f->warp_size       = p.warpSize;
    f->mem_total       = total_b;
    f->mem_free        = free_b;
    f->mem_allocatable = free_b;
    gpu_vendor_facts(&p, f);
    return CELER_OK;
}

extern "C" celer_status celer_gpu_device_report(int index, celer_device_facts *f, celer_error *err)
{
    gpuDeviceProp p;
    if (celer_gpu_device_facts(index, f, err)) return err->code;
    if (!f->supported) return CELER_OK; /* no module to ask */
    if (gpuGetDeviceProperties(&p, index) != gpuSuccess) return (void)gpuGetLastError(), CELER_OK;
    gpu_mmq_facts(&p, f);
    gpu_blas_facts(&p, f);
    return CELER_OK;
}
