/* Device facts from the GPU runtime (gpu_device.cu), for celer info, the planner and the
 * backend's start. */
#ifndef CELER_BACKENDS_GPU_GPU_DEVICE_H
#define CELER_BACKENDS_GPU_GPU_DEVICE_H

#include "backends/backend.h"

/* A device's facts, all but matrix and blas (what the backend itself asks at its start and for
 * the planner's memory). */
celer_status celer_gpu_device_facts(int index, celer_device_facts *f, celer_error *err);
/* celer_device_query for the GPU backend this build has (include/celer.h): the facts, and for a
 * device this build has code for, which matrix units and which BLAS its long steps take. */
celer_status celer_gpu_device_report(int index, celer_device_facts *f, celer_error *err);
celer_status celer_gpu_backend_create(celer_backend **out, const celer_backend_config *cfg, celer_error *err);

#endif
