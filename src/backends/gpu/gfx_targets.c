/* Matching a device's gfx target against the targets a ROCm build has code for. */
#include "backends/gpu/gfx_targets.h"

#include "core/error.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* LLVM's generic targets (AMDGPUUsage, "AMDGPU Generic Processors") and the processors whose
 * code objects they stand in for. A generic code object needs a runtime that loads them (ROCm
 * 6.2 and later); older runtimes report no kernel image, which this table cannot see. gfx908 and
 * gfx90a are in no generic target: LLVM lists them in none. */
static const struct {
    const char *name;
    const char *members[9]; /* NULL-terminated */
} generics[] = {
    {"gfx9-generic", {"gfx900", "gfx902", "gfx904", "gfx906", "gfx909", "gfx90c"}},
    {"gfx9-4-generic", {"gfx940", "gfx941", "gfx942", "gfx950"}},
    {"gfx10-1-generic", {"gfx1010", "gfx1011", "gfx1012", "gfx1013"}},
    {"gfx10-3-generic", {"gfx1030", "gfx1031", "gfx1032", "gfx1033", "gfx1034", "gfx1035", "gfx1036"}},
    {"gfx11-generic",
     {"gfx1100", "gfx1101", "gfx1102", "gfx1103", "gfx1150", "gfx1151", "gfx1152", "gfx1153"}},
    {"gfx12-generic", {"gfx1200", "gfx1201"}},
};

void celer_gfx_arch_base(const char *gcn_arch_name, char *out, size_t n)
{
    if (n == 0) return;
    const char *s = gcn_arch_name ? gcn_arch_name : "";
    while (isspace((unsigned char)*s)) s++;
    size_t len = strcspn(s, ":");
    while (len && isspace((unsigned char)s[len - 1])) len--;
    snprintf(out, n, "%.*s", (int)len, s);
}

/* Whether the processor dev is generic target gen's own or one of its members. */
static bool processor_covers(const char *gen, const char *dev)
{
    if (strcasecmp(gen, dev) == 0) return true;
    for (size_t i = 0; i < sizeof generics / sizeof generics[0]; i++) {
        if (strcasecmp(generics[i].name, gen) != 0) continue;
        for (const char *const *m = generics[i].members; *m; m++)
            if (strcasecmp(*m, dev) == 0) return true;
    }
    return false;
}

/* The sign ('+' or '-') target id `id` gives feature name[0, n), or 0 when it leaves it out. */
static char feature_sign(const char *id, const char *name, size_t n)
{
    for (const char *p = strchr(id, ':'); p; p = strchr(p + 1, ':')) {
        const char *f   = p + 1;
        size_t      len = strcspn(f, ":");
        if (len == n + 1 && strncasecmp(f, name, n) == 0 && (f[n] == '+' || f[n] == '-')) return f[n];
    }
    return 0;
}

/* No feature that `entry` pins is set the other way on the device. A feature left out of the
 * entry is "any": that code object runs in either mode. */
static bool features_compatible(const char *entry, const char *dev)
{
    for (const char *p = strchr(entry, ':'); p; p = strchr(p + 1, ':')) {
        const char *f   = p + 1;
        size_t      len = strcspn(f, ":");
        if (len < 2 || (f[len - 1] != '+' && f[len - 1] != '-')) continue;
        char d = feature_sign(dev, f, len - 1);
        if (d && d != f[len - 1]) return false;
    }
    return true;
}

/* Copies the next entry of a ';'-separated list into buf, trimmed; advances *list. Returns
 * false at the end of the list. Entries may be empty. */
static bool next_entry(const char **list, char *buf, size_t cap)
{
    const char *s = *list;
    if (!s || !*s) return false;
    size_t len = strcspn(s, ";");
    *list      = s[len] ? s + len + 1 : s + len;
    while (len && isspace((unsigned char)*s)) s++, len--;
    while (len && isspace((unsigned char)s[len - 1])) len--;
    snprintf(buf, cap, "%.*s", (int)len, s);
    return true;
}

bool celer_gfx_target_built(const char *device_arch, const char *built_list)
{
    char dev[64], dev_base[32], entry[64], entry_base[32];
    snprintf(dev, sizeof dev, "%s", device_arch ? device_arch : "");
    celer_gfx_arch_base(dev, dev_base, sizeof dev_base);
    if (!dev_base[0]) return false;
    for (const char *l = built_list; next_entry(&l, entry, sizeof entry);) {
        celer_gfx_arch_base(entry, entry_base, sizeof entry_base);
        if (entry_base[0] && processor_covers(entry_base, dev_base) && features_compatible(entry, dev))
            return true;
    }
    return false;
}

/* The CELER_HIP_ARCHS value that adds the device: the built entries, trimmed, without any for
 * the device's own processor (one pinned the other way, "gfx90a:xnack+", would clash with the
 * plain name in clang), then the plain processor name, whose code runs in every feature mode.
 * Entries that would overflow out (some 40 targets) are left out; the device's never is. */
static void rebuild_list(const char *built_list, const char *dev_base, char *out, size_t cap)
{
    char   entry[64], base[32];
    size_t n = 0;
    out[0]   = '\0';
    for (const char *l = built_list; next_entry(&l, entry, sizeof entry);) {
        celer_gfx_arch_base(entry, base, sizeof base);
        if (!entry[0] || strcasecmp(base, dev_base) == 0) continue;
        int w = snprintf(out + n, cap - n, "%s;", entry);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
    snprintf(out + n, cap - n, "%s", dev_base);
}

/* Copy-pasteable into a shell from the source tree: the quotes keep the ';' from the shell. */
#define REBUILD_CMD "cmake -B build -DCELER_HIP=ON -DCELER_HIP_ARCHS=\"%s\" && cmake --build build -j"

celer_status celer_gfx_check(const char *device_arch, const char *device_name, const char *built_list,
                             celer_error *err)
{
    const char *name = device_name && *device_name ? device_name : "the GPU";
    char        base[32];
    celer_gfx_arch_base(device_arch, base, sizeof base);
    if (!base[0])
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "rocm: %s reports no gfx architecture (empty gcnArchName), so celer cannot "
                          "tell whether this build has code for it; check the driver with rocminfo",
                          name);
    if (celer_gfx_target_built(device_arch, built_list)) return CELER_OK;
    char built[256], archs[320];
    snprintf(built, sizeof built, "%s", built_list && *built_list ? built_list : "no AMD target");
    rebuild_list(built_list, base, archs, sizeof archs);
    /* the command goes last and whole: if the targets make the line too long, the list of what
     * was built (also inside the command) is the part left out */
    char line[sizeof REBUILD_CMD + sizeof archs];
    snprintf(line, sizeof line, REBUILD_CMD, archs);
    char head[sizeof err->msg];
    int  w = snprintf(head, sizeof head, "rocm: %s (%s) has no code in this build (built for: %s); rebuild "
                      "with its target added: ", name, device_arch, built);
    if (w < 0 || (size_t)w + strlen(line) >= sizeof head)
        snprintf(head, sizeof head, "rocm: %.64s (%s) has no code in this build; rebuild with its target added: ",
                 name, base);
    return celer_fail(err, CELER_ERR_UNSUPPORTED, "%s%s", head, line);
}

int celer_gfx_matrix(const char *gcn_arch_name)
{
    char b[32];
    celer_gfx_arch_base(gcn_arch_name, b, sizeof b);
    static const char *const mfma16[] = {"gfx908", "gfx90a"};
    static const char *const mfma32[] = {"gfx940", "gfx941", "gfx942", "gfx950"};
    for (size_t i = 0; i < sizeof mfma16 / sizeof *mfma16; i++)
        if (strcasecmp(b, mfma16[i]) == 0) return CELER_AMX_MFMA16;
    for (size_t i = 0; i < sizeof mfma32 / sizeof *mfma32; i++)
        if (strcasecmp(b, mfma32[i]) == 0) return CELER_AMX_MFMA32;
    /* gfx11xx, gfx12xx: gfx1100 .. gfx1153, gfx1200, gfx1201 (generic targets are no device's) */
    const bool gfx1xxx = strlen(b) == 7 && isdigit((unsigned char)b[5]) && isdigit((unsigned char)b[6]);
    if (gfx1xxx && strncasecmp(b, "gfx11", 5) == 0) return CELER_AMX_WMMA11;
    if (gfx1xxx && strncasecmp(b, "gfx12", 5) == 0) return CELER_AMX_WMMA12;
    return CELER_AMX_NONE;
}

static const char *matrix_name(int kind)
{
    switch (kind) {
    case CELER_AMX_MFMA16: return "MFMA i8 16x16x16";
    case CELER_AMX_MFMA32: return "MFMA i8 16x16x32";
    case CELER_AMX_WMMA11: return "WMMA i8 (RDNA 3)";
    case CELER_AMX_WMMA12: return "WMMA (RDNA 4)";
    default: return "none";
    }
}

int celer_gfx_matrix_taken(const char *gcn_arch_name, int built)
{
    const bool kernel = built == CELER_AMX_MFMA16 || built == CELER_AMX_MFMA32 || built == CELER_AMX_WMMA11;
    return kernel && built == celer_gfx_matrix(gcn_arch_name) ? built : CELER_AMX_NONE;
}

void celer_gfx_matrix_line(const char *gcn_arch_name, int built, char *out, size_t n)
{
    const int dev = celer_gfx_matrix(gcn_arch_name);
    if (n == 0) return;
    if (dev == CELER_AMX_NONE)
        snprintf(out, n, "none (integer dot products only): prefill on the f32 tiled kernel");
    else if (celer_gfx_matrix_taken(gcn_arch_name, built))
        snprintf(out, n, "%s: Q4_0, Q8_0 and MLX affine 4/8-bit steps of more than 8 tokens, prefill attention (f16)",
                 matrix_name(dev));
    else if (dev == CELER_AMX_WMMA12)
        snprintf(out, n, "%s: no kernel for them yet; prefill on the f32 tiled kernel", matrix_name(dev));
    else if (built == CELER_AMX_NONE)
        snprintf(out, n, "%s: not in this build's code for it (a generic target?): rebuild for the processor itself",
                 matrix_name(dev));
    else
        snprintf(out, n, "%s, but this build's code says %s: left off", matrix_name(dev), matrix_name(built));
}
