/* AMD GPU memory from amdgpu's sysfs files; the layout is in amd_sysfs.h. */
#include "backends/gpu/amd_sysfs.h"

#include "core/error.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define GIB (1024ull * 1024 * 1024)

/* ---- small file reads -------------------------------------------------------------------- */

/* Reads at most cap - 1 bytes of path into buf, NUL-terminated. Returns the length, or -1 with
 * errno set when the file cannot be opened or read. */
static long read_text(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    int    bad = ferror(f);
    fclose(f);
    if (bad) {
        errno = EIO;
        return -1;
    }
    buf[n] = '\0';
    return (long)n;
}

/* s without trailing whitespace, in place. */
static char *trim_end(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
    return s;
}

/* A file's content made safe to quote in a message: printable ASCII kept, the rest '?'. */
static const char *quote_content(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    for (; s[n] && n + 4 < cap; n++) buf[n] = isprint((unsigned char)s[n]) ? s[n] : '?';
    if (s[n]) {
        memcpy(buf + n, "...", 3);
        n += 3;
    }
    buf[n] = '\0';
    return buf;
}

/* One decimal byte count: digits only (after trailing whitespace is cut), no sign, no overflow. */
static bool parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (!*s) return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* Reads <dir>/<name> as a byte count into *v. Absent: *present = false, CELER_OK. */
static celer_status read_count(const char *dir, const char *name, uint64_t *v, bool *present,
                               celer_error *err)
{
    char path[600], buf[64], shown[48];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *present = false;
    if (read_text(path, buf, sizeof buf) < 0) {
        if (errno == ENOENT) return CELER_OK;
        return celer_fail(err, CELER_ERR_IO, "amd sysfs: cannot read %s: %s", path, strerror(errno));
    }
    if (!parse_u64(trim_end(buf), v))
        return celer_fail(err, CELER_ERR_FORMAT,
                          "amd sysfs: %s holds '%s', not a decimal byte count as amdgpu writes "
                          "it; please report this with the output of `uname -r`",
                          path, quote_content(buf, shown, sizeof shown));
    *present = true;
    return CELER_OK;
}

/* ---- finding the card -------------------------------------------------------------------- */

/* "card3" → 3; false for renderD128, controlD64, card0-DP-1 and the like. */
static bool card_index(const char *name, int *idx)
{
    if (strncmp(name, "card", 4) != 0) return false;
    const char *p = name + 4;
    size_t      n = strlen(p);
    if (n == 0 || n > 6 || strspn(p, "0123456789") != n) return false;
    *idx = 0;
    for (; *p; p++) *idx = *idx * 10 + (*p - '0');
    return true;
}

/* The PCI vendor id in <dev>/vendor ("0x1002"), or 0 when unreadable. */
static unsigned read_vendor(const char *dev)
{
    char path[600], buf[32];
    snprintf(path, sizeof path, "%s/vendor", dev);
    if (read_text(path, buf, sizeof buf) < 0) return 0;
    unsigned v = 0;
    return sscanf(buf, "%x", &v) == 1 ? v : 0;
}

/* PCI_SLOT_NAME from <dev>/uevent into slot (empty when absent). */
static void read_slot(const char *dev, char *slot, size_t cap)
{
    char path[600], buf[4096];
    slot[0] = '\0';
    snprintf(path, sizeof path, "%s/uevent", dev);
    if (read_text(path, buf, sizeof buf) < 0) return;
    for (char *line = buf; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (strncmp(line, "PCI_SLOT_NAME=", 14) == 0) {
            snprintf(slot, cap, "%s", trim_end(line + 14));
            return;
        }
        line = next;
    }
}

/* Whether the kernel's slot name is the bus id asked for; "c3:00.0" stands for "0000:c3:00.0". */
static bool slot_matches(const char *slot, const char *want)
{
    if (strcasecmp(slot, want) == 0) return true;
    bool short_form = strchr(want, ':') == strrchr(want, ':');
    return short_form && strncmp(slot, "0000:", 5) == 0 && strcasecmp(slot + 5, want) == 0;
}

celer_status celer_amd_sysfs_find(const char *sysfs_root, const char *pci_bus_id, celer_amd_mem *out,
                                  celer_error *err)
{
    memset(out, 0, sizeof *out);
    if (!sysfs_root) sysfs_root = "/sys";
    const char *want = pci_bus_id && *pci_bus_id ? pci_bus_id : NULL;
    char        drm[512];
    if (snprintf(drm, sizeof drm, "%s/class/drm", sysfs_root) >= (int)sizeof drm)
        return celer_fail(err, CELER_ERR_INVALID, "amd sysfs: root '%.64s...' is too long", sysfs_root);
    DIR *d = opendir(drm);
    if (!d)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "amd sysfs: cannot list %s (%s), so the GPU%s%s has no memory facts; is "
                          "sysfs mounted and the amdgpu driver loaded? (lsmod | grep amdgpu)",
                          drm, strerror(errno), want ? " at PCI bus id " : "", want ? want : "");

    /* the lowest-numbered match, since readdir's order is arbitrary */
    char   seen[200] = "";
    size_t n_seen    = 0;
    int    best      = -1;
    struct dirent *e;
    while ((e = readdir(d))) {
        int  idx;
        char dev[512], slot[32];
        if (!card_index(e->d_name, &idx)) continue;
        if (snprintf(dev, sizeof dev, "%s/%s/device", drm, e->d_name) >= (int)sizeof dev) continue;
        unsigned vendor = read_vendor(dev);
        read_slot(dev, slot, sizeof slot);
        if (n_seen < sizeof seen) { /* "card0=0000:01:00.0/0x10de", for the message */
            int w = snprintf(seen + n_seen, sizeof seen - n_seen, "%s%s=%s/0x%04x", n_seen ? " " : "",
                             e->d_name, slot[0] ? slot : "?", vendor);
            n_seen += w > 0 ? (size_t)w : 0;
        }
        if (vendor != CELER_AMD_VENDOR_ID || (want && !slot_matches(slot, want))) continue;
        if (best >= 0 && idx > best) continue;
        best = idx;
        snprintf(out->device_dir, sizeof out->device_dir, "%s", dev);
        snprintf(out->pci_bus_id, sizeof out->pci_bus_id, "%s", slot);
    }
    closedir(d);
    if (best < 0)
        return celer_fail(err, CELER_ERR_UNSUPPORTED,
                          "amd sysfs: no AMD card (vendor 0x1002)%s%s under %s; cards seen: %s; is "
                          "the amdgpu driver loaded? (lsmod | grep amdgpu)",
                          want ? " with PCI bus id " : "", want ? want : "", drm, n_seen ? seen : "none");
    out->card = best;

    /* the memory files: an absent one is a flag, a malformed one an error */
    const char  *dir = out->device_dir;
    celer_status s   = read_count(dir, "mem_info_vram_total", &out->vram_total, &out->has_vram_total, err);
    if (!s) s = read_count(dir, "mem_info_vram_used", &out->vram_used, &out->has_vram_used, err);
    if (!s) s = read_count(dir, "mem_info_vis_vram_total", &out->vis_vram_total, &out->has_vis_vram_total, err);
    if (!s) s = read_count(dir, "mem_info_gtt_total", &out->gtt_total, &out->has_gtt_total, err);
    if (!s) s = read_count(dir, "mem_info_gtt_used", &out->gtt_used, &out->has_gtt_used, err);
    if (s) memset(out, 0, sizeof *out);
    return s;
}

/* ---- what the GPU can allocate ----------------------------------------------------------- */

/* Free bytes of one pool; nothing when either file was absent or used has passed total. */
static uint64_t pool_free(uint64_t total, bool has_total, uint64_t used, bool has_used)
{
    if (!has_total || !has_used || used >= total) return 0;
    return total - used;
}

/* A discrete card allocates from its own VRAM; GTT there is host RAM reached over PCIe, which
 * the engine does not count as device memory.
 *
 * On an APU (Strix Halo gfx1151, Strix Point gfx1150, Phoenix gfx1103, ...) "VRAM" is only the
 * carve-out the BIOS reserved from system RAM: often 512 MiB, up to 96 GiB when set so. The GPU
 * also allocates from GTT, ordinary system RAM the driver maps for it, and newer kernels send
 * the KFD's VRAM allocations on small-carve-out APUs to GTT outright. So neither number that
 * looks like the answer is: hipMemGetInfo reports one pool (the carve-out, or GTT on those
 * kernels), and host MemAvailable is all of RAM, more than the driver lets the GPU map. The real
 * ceiling is the carve-out plus the driver's GTT size: by default about half of RAM, set with
 * amdgpu.gttsize (MiB) or, on newer kernels, ttm.pages_limit (4 KiB pages). GTT pages are host
 * RAM, so host processes compete for them; a caller that also reads MemAvailable may take the
 * smaller of the two for the GTT part. */
uint64_t celer_amd_allocatable(const celer_amd_mem *m, bool unified)
{
    uint64_t vram = pool_free(m->vram_total, m->has_vram_total, m->vram_used, m->has_vram_used);
    if (!unified) return vram;
    uint64_t gtt = pool_free(m->gtt_total, m->has_gtt_total, m->gtt_used, m->has_gtt_used);
    return gtt > UINT64_MAX - vram ? UINT64_MAX : vram + gtt;
}

/* HIP's integrated flag is the signal: it is the only one that holds when the BIOS carve-out is
 * large (a Strix Halo set to 96 GiB "VRAM" looks like a big discrete card in sysfs). Without it
 * (HIP says 0, or the caller has no HIP), the sizes decide, and the rule leans to "discrete",
 * whose cost is a refusal that names the numbers rather than an overcommitted GPU:
 *   - the carve-out is under 4 GiB: APUs ship 512 MiB..2 GiB by default, while 4 GiB is also a
 *     discrete size (RX 6400, RX 6500 XT), so 4 GiB and up is left to HIP;
 *   - GTT is more than twice VRAM: a 512 MiB carve-out on 128 GiB has ~64 GiB GTT; an RX 7900
 *     XTX has 24 GiB VRAM and GTT of about half of RAM, and fails the first test anyway;
 *   - all of VRAM is CPU-visible when the file says: an APU's carve-out is system RAM, so the
 *     driver makes it all visible, while a discrete card without resizable BAR shows 256 MiB. */
bool celer_amd_is_apu(const celer_amd_mem *m, bool hip_integrated)
{
    if (hip_integrated) return true;
    if (!m->has_vram_total || !m->has_gtt_total || m->vram_total == 0) return false;
    if (m->has_vis_vram_total && m->vis_vram_total < m->vram_total) return false;
    return m->vram_total < 4 * GIB && m->gtt_total > 2 * m->vram_total;
}
