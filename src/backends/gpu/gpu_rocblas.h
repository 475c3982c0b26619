/* rocBLAS for a HIP build, loaded at run time (rocblas_find.h says where and why): the few
 * entry points gpu_blas.cu calls, declared here from rocBLAS's C API (rocblas-types.h,
 * rocblas-auxiliary.h, rocblas-functions.h of ROCm 6: librocblas.so.4) as plain ints and
 * pointers, since no header of it is installed where celer is built. Included by gpu_vendor.h's
 * HIP half only. */
#ifndef CELER_BACKENDS_GPU_ROCBLAS_H
#define CELER_BACKENDS_GPU_ROCBLAS_H

#include <dlfcn.h>
#include <hip/hip_runtime.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "backends/gpu/rocblas_find.h"
}

/* rocBLAS's enumerators that celer passes (their values in rocblas-types.h) */
enum {
    ROCBLAS_SUCCESS = 0, ROCBLAS_MEMORY_ERROR = 5, ROCBLAS_OP_N = 111, ROCBLAS_OP_T = 112, ROCBLAS_F16 = 150,
    ROCBLAS_F32 = 151, ROCBLAS_POINTER_HOST = 0, ROCBLAS_POINTER_DEVICE = 1, ROCBLAS_ALGO_STANDARD = 0
};

struct gpu_rocblas_api {
    void       *lib;
    char        path[CELER_ROCBLAS_PATH_MAX];
    char        kernels[CELER_ROCBLAS_PATH_MAX]; /* its kernel folder (rocblas_find.h) */
    char        why[320]; /* why none was loaded */
    int         (*create_handle)(void **handle);
    int         (*destroy_handle)(void *handle);
    int         (*set_stream)(void *handle, hipStream_t stream);
    int         (*set_workspace)(void *handle, void *addr, size_t size);
    int         (*set_pointer_mode)(void *handle, int mode);
    int         (*gemm_ex)(void *handle, int trans_a, int trans_b, int m, int n, int k, const void *alpha, const void *a,
                           int a_type, int lda, const void *b, int b_type, int ldb, const void *beta, const void *c,
                           int c_type, int ldc, void *d, int d_type, int ldd, int compute_type, int algo,
                           int32_t solution_index, uint32_t flags);
    const char *(*status_to_string)(int status);
};

/* The folder of the HIP runtime this process runs (where its ROCm keeps rocBLAS), into dir. */
static inline void gpu_rocblas_runtime_dir(char *dir, size_t n)
{
    Dl_info info;
    dir[0] = '\0';
    if (dladdr((void *)&hipRuntimeGetVersion, &info) && info.dli_fname) {
        char copy[CELER_ROCBLAS_PATH_MAX];
        snprintf(copy, sizeof copy, "%s", info.dli_fname);
        if (strchr(copy, '/')) snprintf(dir, n, "%s", dirname(copy));
    }
}

static inline gpu_rocblas_api gpu_rocblas_load(void)
{
    gpu_rocblas_api a;
    memset(&a, 0, sizeof a);
    char dir[CELER_ROCBLAS_PATH_MAX], paths[CELER_ROCBLAS_PATHS][CELER_ROCBLAS_PATH_MAX];
    int  rt = 0;
    (void)hipRuntimeGetVersion(&rt); /* major · 10^7 + minor · 10^5 + patch */
    gpu_rocblas_runtime_dir(dir, sizeof dir);
    const int np = celer_rocblas_paths(getenv("CELER_ROCBLAS"), dir, rt / 10000000, paths, a.why, sizeof a.why);
    for (int i = 0; i < np && !a.lib; i++)
        if ((a.lib = dlopen(paths[i], RTLD_NOW | RTLD_LOCAL))) snprintf(a.path, sizeof a.path, "%s", paths[i]);
    if (!a.lib) {
        if (np) snprintf(a.why, sizeof a.why, "no rocBLAS found (%s, and %d other places tried)", paths[0], np - 1);
        return a;
    }
#define GPU_ROCBLAS_SYM(field, name) (*(void **)&a.field = dlsym(a.lib, name)) != NULL
    if (!(GPU_ROCBLAS_SYM(create_handle, "rocblas_create_handle") &&
          GPU_ROCBLAS_SYM(destroy_handle, "rocblas_destroy_handle") &&
          GPU_ROCBLAS_SYM(set_stream, "rocblas_set_stream") && GPU_ROCBLAS_SYM(set_workspace, "rocblas_set_workspace") &&
          GPU_ROCBLAS_SYM(set_pointer_mode, "rocblas_set_pointer_mode") &&
          GPU_ROCBLAS_SYM(gemm_ex, "rocblas_gemm_ex") &&
          GPU_ROCBLAS_SYM(status_to_string, "rocblas_status_to_string"))) {
        snprintf(a.why, sizeof a.why, "%s lacks an entry point celer calls (an older rocBLAS than ROCm 6's?)", a.path);
        dlclose(a.lib);
        a.lib = NULL;
    }
#undef GPU_ROCBLAS_SYM
    const char *tl = getenv("ROCBLAS_TENSILE_LIBPATH"); /* rocBLAS's own override of its kernel folder */
    Dl_info     info;
    if (tl && *tl) snprintf(a.kernels, sizeof a.kernels, "%s", tl);
    else if (a.lib && dladdr(*(void **)&a.create_handle, &info) && info.dli_fname) {
        char copy[CELER_ROCBLAS_PATH_MAX];
        snprintf(copy, sizeof copy, "%s", info.dli_fname);
        snprintf(a.kernels, sizeof a.kernels, "%s/rocblas/library", dirname(copy));
    }
    return a;
}

/* The process's rocBLAS, looked for once (lib NULL: none; why says why). */
inline const gpu_rocblas_api &gpu_rocblas(void)
{
    static const gpu_rocblas_api a = gpu_rocblas_load();
    return a;
}

#endif
