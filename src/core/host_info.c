/* CPU and memory facts of the host: cpuid on x86, hwcaps on arm64, /proc and /sys for the rest. */
#include "celer.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static void read_simd(celer_host_info *h)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return;
    bool osxsave = c & (1u << 27);
    h->sse42     = c & (1u << 20);
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool     ymm  = (xcr0 & 0x6) == 0x6;           /* OS saves SSE and AVX state */
    bool     zmm  = (xcr0 & 0xe6) == 0xe6;         /* and the AVX-512 opmask/upper registers */
    bool     tile = (xcr0 & 0x60000) == 0x60000;   /* and AMX tile config/data */
    h->avx        = ymm && (c & (1u << 28));
    h->fma        = h->avx && (c & (1u << 12));
    h->f16c       = h->avx && (c & (1u << 29));
    if (__get_cpuid_max(0, NULL) < 7) return;
    __cpuid_count(7, 0, a, b, c, d);
    h->avx2        = ymm && (b & (1u << 5));
    h->avx512f     = zmm && (b & (1u << 16));
    h->avx512bw    = zmm && (b & (1u << 30));
    h->avx512vl    = zmm && (b & (1u << 31));
    h->avx512_vnni = zmm && (c & (1u << 11));
    h->amx_bf16    = tile && (d & (1u << 22));
    h->amx_tile    = tile && (d & (1u << 24));
    h->amx_int8    = tile && (d & (1u << 25));
    __cpuid_count(7, 1, a, b, c, d);
    h->avx_vnni    = ymm && (a & (1u << 4));
    h->avx512_bf16 = zmm && (a & (1u << 5));
}
#elif defined(__aarch64__)
#include <sys/auxv.h>

static void read_simd(celer_host_info *h)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    h->neon    = true; /* mandatory on arm64 */
    h->dotprod = hw & (1ul << 20);  /* HWCAP_ASIMDDP */
    h->sve     = hw & (1ul << 22);  /* HWCAP_SVE */
    h->i8mm    = hw2 & (1ul << 13); /* HWCAP2_I8MM */
}
#else
static void read_simd(celer_host_info *h) { (void)h; }
#endif

static void read_cpu_model(celer_host_info *h)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        /* x86 says "model name", some arm kernels "Model" or nothing at all */
        if (strncmp(line, "model name", 10) && strncmp(line, "Model", 5)) continue;
        const char *v = strchr(line, ':');
        if (!v) continue;
        v += 1 + (v[1] == ' ');
        snprintf(h->cpu_model, sizeof h->cpu_model, "%.*s", (int)strcspn(v, "\n"), v);
        break;
    }
    fclose(f);
}

/* Physical cores: distinct (package, core) pairs in sysfs topology. */
static int count_physical_cores(int n_cpus)
{
    enum { MAX_CPUS = 1024 };
    long seen[MAX_CPUS];
    int  n = 0;
    for (int cpu = 0; cpu < n_cpus && cpu < MAX_CPUS; cpu++) {
        long ids[2] = {-1, -1};
        const char *files[2] = {"physical_package_id", "core_id"};
        for (int k = 0; k < 2; k++) {
            char path[128];
            snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, files[k]);
            FILE *f = fopen(path, "r");
            if (!f) return 0;
            if (fscanf(f, "%ld", &ids[k]) != 1) ids[k] = -1;
            fclose(f);
        }
        long key = ids[0] * 65536 + ids[1];
        int  dup = 0;
        for (int i = 0; i < n && !dup; i++) dup = seen[i] == key;
        if (!dup) seen[n++] = key;
    }
    return n;
}

static void read_meminfo(celer_host_info *h)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return;
    char               line[256];
    unsigned long long kb;
    while (fgets(line, sizeof line, f)) {
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) h->mem_total = kb * 1024;
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) h->mem_available = kb * 1024;
    }
    fclose(f);
}

void celer_host_info_read(celer_host_info *h)
{
    memset(h, 0, sizeof *h);
#if defined(__x86_64__)
    snprintf(h->arch, sizeof h->arch, "x86_64");
#elif defined(__aarch64__)
    snprintf(h->arch, sizeof h->arch, "aarch64");
#else
    snprintf(h->arch, sizeof h->arch, "other");
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    h->logical_cpus   = n > 0 ? (int)n : 1;
    h->physical_cores = count_physical_cores(h->logical_cpus);
    read_cpu_model(h);
    read_simd(h);
    read_meminfo(h);
}
