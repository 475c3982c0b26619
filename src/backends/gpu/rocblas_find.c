/* Where a HIP build looks for rocBLAS (rocblas_find.h). */
#include "backends/gpu/rocblas_find.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* The sonames of ROCm 6 and 7's rocBLAS, newest first. */
static const char *const sonames[] = {"librocblas.so.5", "librocblas.so.4"};

int celer_rocblas_paths(const char *override, const char *runtime_dir, int hip_major,
                        char out[][CELER_ROCBLAS_PATH_MAX], char *why, size_t n)
{
    if (n) why[0] = '\0';
    if (override && *override) {
        if (strcmp(override, "0") == 0 || strcmp(override, "off") == 0) {
            snprintf(why, n, "CELER_ROCBLAS=%s turns it off", override);
            return 0;
        }
        snprintf(out[0], CELER_ROCBLAS_PATH_MAX, "%s", override);
        return 1;
    }
    if (hip_major < 6) {
        snprintf(why, n,
                 "this build's HIP runtime is %d.x, older than ROCm 6's, whose rocBLAS it could not share a "
                 "process with: build celer against ROCm 6 or later (ROCM_PATH) to use rocBLAS",
                 hip_major);
        return 0;
    }
    int k = 0;
    const size_t nn = sizeof sonames / sizeof sonames[0];
    if (runtime_dir && *runtime_dir)
        for (size_t i = 0; i < nn; i++) {
            const int w = snprintf(out[k], CELER_ROCBLAS_PATH_MAX, "%s/%s", runtime_dir, sonames[i]);
            if (w > 0 && w < CELER_ROCBLAS_PATH_MAX) k++;
        }
    for (size_t i = 0; i < nn; i++) snprintf(out[k++], CELER_ROCBLAS_PATH_MAX, "%s", sonames[i]);
    return k;
}

/* Whether name holds arch as a word's end: arch, then not a letter or digit. */
static bool names_arch(const char *name, const char *arch)
{
    const size_t n = strlen(arch);
    for (const char *p = strstr(name, arch); p; p = strstr(p + 1, arch))
        if (!isalnum((unsigned char)p[n])) return true;
    return false;
}

bool celer_rocblas_has_arch(const char *tensile_dir, const char *arch, char *why, size_t n)
{
    if (n) why[0] = '\0';
    DIR *d = tensile_dir && *tensile_dir && arch && *arch ? opendir(tensile_dir) : NULL;
    if (!d) {
        snprintf(why, n, "rocBLAS's kernel folder %s cannot be read", tensile_dir && *tensile_dir ? tensile_dir : "(none)");
        return false;
    }
    bool found = false;
    for (struct dirent *e; !found && (e = readdir(d));) found = names_arch(e->d_name, arch);
    closedir(d);
    if (!found)
        snprintf(why, n, "rocBLAS's kernel folder %s has none for %s (a newer ROCm has): long steps stay on celer's kernels",
                 tensile_dir, arch);
    return found;
}
