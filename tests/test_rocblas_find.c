/* Where a HIP build looks for rocBLAS (backends/gpu/rocblas_find.h): an override alone, or "0"
 * and "off" for none; nothing at all under a HIP runtime older than ROCm 6's (with the reason);
 * else the runtime's own folder first, newest soname first, then the loader's path. And whether
 * its kernel folder has files for a processor, on a folder made here (rocBLAS aborts on a GPU it
 * has no kernels for). */
#include "backends/gpu/rocblas_find.h"

#include "check.h"
#include "scratch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char p[CELER_ROCBLAS_PATHS][CELER_ROCBLAS_PATH_MAX], why[256];

static int test_override(void)
{
    CHECK(celer_rocblas_paths("/x/librocblas.so.4", "/opt/rocm/lib", 6, p, why, sizeof why) == 1);
    CHECK(strcmp(p[0], "/x/librocblas.so.4") == 0 && why[0] == '\0');
    CHECK(celer_rocblas_paths("/x/librocblas.so.4", NULL, 5, p, why, sizeof why) == 1); /* the user's call */
    CHECK(celer_rocblas_paths("0", "/opt/rocm/lib", 6, p, why, sizeof why) == 0 && strstr(why, "CELER_ROCBLAS=0"));
    CHECK(celer_rocblas_paths("off", "/opt/rocm/lib", 6, p, why, sizeof why) == 0 && strstr(why, "off"));
    return 0;
}

static int test_old_runtime(void)
{
    CHECK(celer_rocblas_paths(NULL, "/usr/lib/x86_64-linux-gnu", 5, p, why, sizeof why) == 0);
    CHECK(strstr(why, "5.x") && strstr(why, "ROCm 6") && strstr(why, "ROCM_PATH"));
    CHECK(celer_rocblas_paths("", NULL, 0, p, why, sizeof why) == 0 && why[0]); /* unknown version: none */
    char tiny[8];
    CHECK(celer_rocblas_paths(NULL, NULL, 5, p, tiny, sizeof tiny) == 0 && strlen(tiny) == sizeof tiny - 1);
    return 0;
}

static int test_order(void)
{
    CHECK(celer_rocblas_paths(NULL, "/opt/rocm-6.4.1/lib", 6, p, why, sizeof why) == 4);
    CHECK(strcmp(p[0], "/opt/rocm-6.4.1/lib/librocblas.so.5") == 0);
    CHECK(strcmp(p[1], "/opt/rocm-6.4.1/lib/librocblas.so.4") == 0);
    CHECK(strcmp(p[2], "librocblas.so.5") == 0 && strcmp(p[3], "librocblas.so.4") == 0);
    CHECK(celer_rocblas_paths(NULL, "", 7, p, why, sizeof why) == 2); /* the runtime's folder unknown */
    CHECK(strcmp(p[0], "librocblas.so.5") == 0 && strcmp(p[1], "librocblas.so.4") == 0);
    char long_dir[CELER_ROCBLAS_PATH_MAX]; /* a folder too long to name a file in: left out */
    memset(long_dir, 'd', sizeof long_dir - 1);
    long_dir[sizeof long_dir - 1] = '\0';
    long_dir[0]                   = '/';
    CHECK(celer_rocblas_paths(NULL, long_dir, 6, p, why, sizeof why) == 2 && strcmp(p[0], "librocblas.so.5") == 0);
    return 0;
}

static int touch(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    return f && fclose(f) == 0;
}

static int test_kernels(void)
{
    char dir[128];
    CHECK(scratch_make(dir, sizeof dir, "rocblas"));
    CHECK(touch(dir, "TensileLibrary_lazy_gfx90a.dat") && touch(dir, "Kernels.so-000-gfx1100.hsaco") &&
          touch(dir, "TensileLibrary_Type_HH_Contraction_l_Ailk_Bljk_Cijk_Dijk_gfx942.co"));
    const int ok = celer_rocblas_has_arch(dir, "gfx90a", why, sizeof why) && why[0] == '\0' &&
                   celer_rocblas_has_arch(dir, "gfx1100", why, sizeof why) &&
                   celer_rocblas_has_arch(dir, "gfx942", why, sizeof why) &&
                   /* a name that only starts another: gfx110 is not gfx1100's, gfx1151 has none */
                   !celer_rocblas_has_arch(dir, "gfx110", why, sizeof why) &&
                   !celer_rocblas_has_arch(dir, "gfx1151", why, sizeof why) && strstr(why, "gfx1151") &&
                   strstr(why, dir) && !celer_rocblas_has_arch(dir, "", why, sizeof why) &&
                   !celer_rocblas_has_arch("/nonexistent/rocblas/library", "gfx90a", why, sizeof why) &&
                   strstr(why, "cannot be read") && !celer_rocblas_has_arch(NULL, "gfx90a", why, sizeof why);
    CHECK(scratch_remove(dir));
    CHECK(ok);
    return 0;
}

int main(void)
{
    const int fails = test_override() + test_old_runtime() + test_order() + test_kernels();
    if (fails) fprintf(stderr, "test_rocblas_find: %d group(s) failed\n", fails);
    else printf("test_rocblas_find: ok\n");
    return fails != 0;
}
