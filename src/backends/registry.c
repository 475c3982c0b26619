/* The one global: the table of backends this build has, best first. A build has the CPU backend
 * and at most one GPU backend (CUDA or ROCm: cmake/celer_gpu.cmake); which one is the GPU
 * library's to say, so this file names no vendor. */
#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"

#include <string.h>

#if CELER_HAVE_GPU
#include "backends/gpu/gpu_device.h"
#endif

typedef struct {
    const char *name;
    celer_status (*create)(celer_backend **out, const celer_backend_config *cfg, celer_error *err);
} backend_entry;

static const backend_entry backends[] = {
#if CELER_HAVE_GPU
    {CELER_GPU_BACKEND_NAME, celer_gpu_backend_create},
#endif
    {"cpu", celer_cpu_backend_create},
};
enum { N_BACKENDS = sizeof backends / sizeof backends[0] };

/* Every backend celer has, built here or not, and the CMake option that builds it. */
static const struct {
    const char *name, *option;
} ALL[] = {{"cpu", NULL}, {"cuda", "CELER_CUDA"}, {"rocm", "CELER_HIP"}};

bool celer_backend_in_build(const char *name)
{
    for (int i = 0; i < N_BACKENDS; i++)
        if (!strcmp(name, backends[i].name)) return true;
    return false;
}

celer_status celer_backend_create(celer_backend **out, const char *name, const celer_backend_config *cfg,
                                  celer_error *err)
{
    *out = NULL;
    if (!name || !strcmp(name, "auto")) {
        /* the first that starts; a GPU that cannot start is passed over only here, where no
         * backend was named (the engine's backend line says which one runs) */
        for (int i = 0; i < N_BACKENDS; i++) {
            celer_error  tried;
            celer_status st = backends[i].create(out, cfg, i + 1 < N_BACKENDS ? &tried : err);
            if (!st || i + 1 == N_BACKENDS) return st;
        }
    }
    for (int i = 0; i < N_BACKENDS; i++)
        if (!strcmp(name, backends[i].name)) return backends[i].create(out, cfg, err);
    for (size_t i = 0; i < sizeof ALL / sizeof ALL[0]; i++)
        if (!strcmp(name, ALL[i].name))
            return celer_fail(err, CELER_ERR_UNSUPPORTED, "backend '%s' is not in this build (it has: %s%s); rebuild with "
                              "-D%s=ON (docs/install.md)", name, backends[0].name, N_BACKENDS > 1 ? ", cpu" : "",
                              ALL[i].option);
    return celer_fail(err, CELER_ERR_INVALID, "backend '%s' does not exist: auto, cpu, cuda or rocm", name);
}

void celer_backend_destroy(celer_backend *be)
{
    if (be) be->ops->free(be);
}

celer_status celer_device_query(int index, celer_device_facts *f, celer_error *err)
{
    memset(f, 0, sizeof *f);
#if CELER_HAVE_GPU
    return celer_gpu_device_report(index, f, err);
#else
    (void)index;
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "this celer has no GPU backend; rebuild with -DCELER_CUDA=ON or "
                      "-DCELER_HIP=ON (docs/install.md)");
#endif
}
