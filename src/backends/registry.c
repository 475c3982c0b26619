/* The one global: the table of backends this build has, best first. */
#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "core/error.h"

#include <string.h>

static const struct {
    const char *name;
    celer_status (*create)(celer_backend **out, const celer_backend_config *cfg, celer_error *err);
} backends[] = {
    {"cpu", celer_cpu_backend_create},
};

celer_status celer_backend_create(celer_backend **out, const char *name, const celer_backend_config *cfg,
                                  celer_error *err)
{
    *out = NULL;
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++)
        if (!name || !strcmp(name, backends[i].name)) return backends[i].create(out, cfg, err);
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "backend '%s' is not in this build (it has: cpu)", name);
}

void celer_backend_destroy(celer_backend *be)
{
    if (be) be->ops->free(be);
}
