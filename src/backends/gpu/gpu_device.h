/* Device facts from the GPU runtime (gpu_device.cu), for celer info, the planner and the
 * backend's start. */
#ifndef CELER_BACKENDS_GPU_GPU_DEVICE_H
#define CELER_BACKENDS_GPU_GPU_DEVICE_H

#include "backends/backend.h"

/* celer_device_query for the GPU backend this build has (include/celer.h). */
celer_status celer_gpu_device_facts(int index, celer_device_facts *f, celer_error *err);
celer_status celer_gpu_backend_create(celer_backend **out, const celer_backend_config *cfg, celer_error *err);

#endif
