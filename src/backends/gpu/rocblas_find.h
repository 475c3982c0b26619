/* Where a HIP build looks for rocBLAS, the vendor BLAS its prefill products take (gpu_blas.cu,
 * through gpu_rocblas.h). rocBLAS is loaded at run time, not linked: Debian 12 packages none, so
 * a build made there runs without it, and one made against a ROCm install uses that install's.
 * Plain C, no GPU headers: tested on any host (tests/test_rocblas_find.c).
 *
 * rocBLAS links its own HIP runtime, and a process must hold only one: so only a runtime of ROCm
 * 6 or later (HIP major 6+, whose rocBLAS is librocblas.so.4 or .5 with the 24-argument
 * rocblas_gemm_ex) looks at all, and first in its own folder, where its ROCm put rocBLAS. */
#ifndef CELER_BACKENDS_GPU_ROCBLAS_FIND_H
#define CELER_BACKENDS_GPU_ROCBLAS_FIND_H

#include <stdbool.h>
#include <stddef.h>

enum { CELER_ROCBLAS_PATHS = 6, CELER_ROCBLAS_PATH_MAX = 512 };

/* The paths to try, in order, into out (at most CELER_ROCBLAS_PATHS); returns how many, or 0
 * with why (n bytes) saying why none is to be tried. override: CELER_ROCBLAS (a file, tried
 * alone; "0" or "off": none); runtime_dir: the folder of the HIP runtime this process loaded
 * (NULL or "" when unknown); hip_major: that runtime's major version. */
int celer_rocblas_paths(const char *override, const char *runtime_dir, int hip_major,
                        char out[][CELER_ROCBLAS_PATH_MAX], char *why, size_t n);

/* Whether rocBLAS's kernel folder (tensile_dir: ROCBLAS_TENSILE_LIBPATH, else the folder
 * rocblas/library beside librocblas.so) has a file for processor arch ("gfx1151": its name
 * followed by anything but a letter or digit). rocBLAS aborts the process at its first product on
 * a GPU it has no kernels for, so celer asks first; if not, why (n bytes) says so. */
bool celer_rocblas_has_arch(const char *tensile_dir, const char *arch, char *why, size_t n);

#endif
