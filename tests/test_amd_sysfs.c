/* AMD device logic without an AMD GPU: memory facts from fake sysfs trees (a discrete card, Strix
 * Halo APUs with a small and a large carve-out, two cards picked by bus id, entries that are not
 * cards, other vendors, missing and malformed files), and gfx target matching with the refusal
 * that carries the rebuild command. */
#include "backends/gpu/amd_sysfs.h"
#include "backends/gpu/gfx_targets.h"
#include "core/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "check.h"
#include "scratch.h"

#define MIB (1024ull * 1024)
#define GIB (1024ull * MIB)

static char tmp[64]; /* the mkdtemp directory; each tree is a folder under it */

/* ---- building fake trees ----------------------------------------------------------------- */

/* Writes text to <tmp>/<rel>, making the folders on the way. */
static int put(const char *rel, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp, rel);
    for (char *p = path + strlen(tmp) + 1; (p = strchr(p, '/')); p++) {
        *p = '\0';
        mkdir(path, 0755);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    if (!f) return 1;
    fputs(text, f);
    return fclose(f) != 0;
}

/* <tmp>/<tree>/class/drm/<entry>/device/<file> = text */
static int put_dev(const char *tree, const char *entry, const char *file, const char *text)
{
    char rel[256];
    snprintf(rel, sizeof rel, "%s/class/drm/%s/device/%s", tree, entry, file);
    return put(rel, text);
}

/* A card as amdgpu shows it: vendor, uevent with its slot, and the four memory files (plus the
 * CPU-visible VRAM when vis is not 0). vendor 0 writes no vendor file. */
static int put_card(const char *tree, const char *entry, unsigned vendor, const char *slot, uint64_t vram_total,
                    uint64_t vram_used, uint64_t vis, uint64_t gtt_total, uint64_t gtt_used)
{
    char buf[256];
    int  bad = 0;
    if (vendor) {
        snprintf(buf, sizeof buf, "0x%04x\n", vendor);
        bad |= put_dev(tree, entry, "vendor", buf);
    }
    snprintf(buf, sizeof buf, "DRIVER=amdgpu\nPCI_CLASS=30000\nPCI_ID=1002:1586\nPCI_SLOT_NAME=%s\nMODALIAS=pci:x\n",
             slot);
    bad |= put_dev(tree, entry, "uevent", buf);
    const struct {
        const char *name;
        uint64_t    v;
    } f[] = {{"mem_info_vram_total", vram_total}, {"mem_info_vram_used", vram_used},
             {"mem_info_vis_vram_total", vis},    {"mem_info_gtt_total", gtt_total},
             {"mem_info_gtt_used", gtt_used}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (i == 2 && !vis) continue;
        snprintf(buf, sizeof buf, "%llu\n", (unsigned long long)f[i].v);
        bad |= put_dev(tree, entry, f[i].name, buf);
    }
    return bad;
}

static const char *root_of(const char *tree)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", tmp, tree);
    return path;
}

/* ---- memory facts ------------------------------------------------------------------------ */

/* RX 7900 XTX: 24 GiB VRAM, resizable BAR, GTT about half of 64 GiB RAM. Beside it, entries that
 * are not cards but have AMD files: a render node and a connector. */
static int test_discrete(void)
{
    CHECK(!put_card("dgpu", "card1", 0x1002, "0000:03:00.0", 24 * GIB, 1 * GIB, 24 * GIB, 31 * GIB, 100 * MIB));
    CHECK(!put_card("dgpu", "renderD128", 0x1002, "0000:03:00.0", 7, 1, 7, 7, 1));
    CHECK(!put_card("dgpu", "card0-DP-1", 0x1002, "0000:03:00.0", 5, 1, 5, 5, 1));
    CHECK(!put_card("dgpu", "controlD64", 0x1002, "0000:03:00.0", 3, 1, 3, 3, 1));
    celer_amd_mem m;
    celer_error   err = {0};
    CHECK(celer_amd_sysfs_find(root_of("dgpu"), NULL, &m, &err) == CELER_OK);
    CHECK(m.card == 1 && strcmp(m.pci_bus_id, "0000:03:00.0") == 0);
    CHECK(strstr(m.device_dir, "/class/drm/card1/device") != NULL);
    CHECK(m.vram_total == 24 * GIB && m.vram_used == 1 * GIB && m.vis_vram_total == 24 * GIB);
    CHECK(m.gtt_total == 31 * GIB && m.gtt_used == 100 * MIB);
    CHECK(m.has_vram_total && m.has_vram_used && m.has_vis_vram_total && m.has_gtt_total && m.has_gtt_used);
    CHECK(!celer_amd_is_apu(&m, false));
    CHECK(celer_amd_allocatable(&m, false) == 23 * GIB);
    /* by the bus id HIP reports */
    CHECK(celer_amd_sysfs_find(root_of("dgpu"), "0000:03:00.0", &m, &err) == CELER_OK && m.card == 1);
    /* only the entries that are not cards: nothing found */
    CHECK(!put_card("noncards", "renderD128", 0x1002, "0000:03:00.0", 7, 1, 7, 7, 1));
    CHECK(!put_card("noncards", "card0-DP-1", 0x1002, "0000:03:00.0", 5, 1, 5, 5, 1));
    CHECK(celer_amd_sysfs_find(root_of("noncards"), NULL, &m, &err) == CELER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, root_of("noncards")) && strstr(err.msg, "cards seen: none"));
    return 0;
}

/* Strix Halo with the 512 MiB carve-out: the GPU's memory is GTT (64 GiB of 128 GiB RAM). */
static int test_strix_halo_small(void)
{
    CHECK(!put_card("apu", "card1", 0x1002, "0000:c3:00.0", 512 * MIB, 300 * MIB, 512 * MIB, 64 * GIB, 2 * GIB));
    celer_amd_mem m;
    celer_error   err = {0};
    CHECK(celer_amd_sysfs_find(root_of("apu"), "0000:C3:00.0", &m, &err) == CELER_OK);
    CHECK(strcmp(m.pci_bus_id, "0000:c3:00.0") == 0);
    CHECK(celer_amd_sysfs_find(root_of("apu"), "c3:00.0", &m, &err) == CELER_OK); /* no domain */
    CHECK(celer_amd_is_apu(&m, false) && celer_amd_is_apu(&m, true));
    CHECK(celer_amd_allocatable(&m, true) == 212 * MIB + 62 * GIB);
    CHECK(celer_amd_allocatable(&m, false) == 212 * MIB);
    /* a carve-out that is not all CPU-visible is a discrete card's BAR, not an APU */
    m.vis_vram_total = 256 * MIB;
    CHECK(!celer_amd_is_apu(&m, false));
    return 0;
}

/* Strix Halo with the BIOS set to 96 GiB "VRAM": sysfs alone looks discrete; HIP's integrated
 * flag is what says unified. */
static int test_strix_halo_large(void)
{
    CHECK(!put_card("apu96", "card0", 0x1002, "0000:c3:00.0", 96 * GIB, 1 * GIB, 96 * GIB, 16 * GIB, 512 * MIB));
    celer_amd_mem m;
    celer_error   err = {0};
    CHECK(celer_amd_sysfs_find(root_of("apu96"), "0000:c3:00.0", &m, &err) == CELER_OK);
    CHECK(!celer_amd_is_apu(&m, false));
    CHECK(celer_amd_is_apu(&m, true));
    CHECK(celer_amd_allocatable(&m, celer_amd_is_apu(&m, true)) == 95 * GIB + 15 * GIB + 512 * MIB);
    return 0;
}

/* The size rule on machines it must call discrete. */
static int test_apu_rule_edges(void)
{
    celer_amd_mem m = {.has_vram_total = true, .has_gtt_total = true, .has_vis_vram_total = true};
    /* RX 6400: 4 GiB VRAM with resizable BAR, on a 32 GiB host (GTT 16 GiB) */
    m.vram_total = m.vis_vram_total = 4 * GIB;
    m.gtt_total                     = 16 * GIB;
    CHECK(!celer_amd_is_apu(&m, false));
    /* a 2 GiB card without resizable BAR: only 256 MiB is CPU-visible */
    m.vram_total     = 2 * GIB;
    m.vis_vram_total = 256 * MIB;
    CHECK(!celer_amd_is_apu(&m, false));
    /* GTT not more than twice VRAM */
    m.vram_total = m.vis_vram_total = 2 * GIB;
    m.gtt_total                     = 4 * GIB;
    CHECK(!celer_amd_is_apu(&m, false));
    m.gtt_total = 4 * GIB + 1;
    CHECK(celer_amd_is_apu(&m, false));
    /* no GTT file: no guess */
    m.has_gtt_total = false;
    CHECK(!celer_amd_is_apu(&m, false) && celer_amd_is_apu(&m, true));
    return 0;
}

/* Two AMD cards: the bus id picks the second; without one, the lowest card number. A bus id that
 * is not there is refused naming the root and the id. */
static int test_two_cards(void)
{
    CHECK(!put_card("two", "card1", 0x1002, "0000:c3:00.0", 512 * MIB, 0, 512 * MIB, 64 * GIB, 0));
    CHECK(!put_card("two", "card0", 0x1002, "0000:03:00.0", 24 * GIB, 0, 24 * GIB, 31 * GIB, 0));
    celer_amd_mem m;
    celer_error   err = {0};
    CHECK(celer_amd_sysfs_find(root_of("two"), "0000:c3:00.0", &m, &err) == CELER_OK);
    CHECK(m.card == 1 && m.vram_total == 512 * MIB && strstr(m.device_dir, "card1/device"));
    CHECK(celer_amd_sysfs_find(root_of("two"), "", &m, &err) == CELER_OK && m.card == 0);
    CHECK(celer_amd_sysfs_find(root_of("two"), "0000:44:00.0", &m, &err) == CELER_ERR_UNSUPPORTED);
    CHECK(err.code == CELER_ERR_UNSUPPORTED && strstr(err.msg, "0000:44:00.0") && strstr(err.msg, root_of("two")));
    CHECK(strstr(err.msg, "card0=0000:03:00.0/0x1002") && strstr(err.msg, "card1=0000:c3:00.0/0x1002"));
    CHECK(m.device_dir[0] == '\0' && m.vram_total == 0); /* zeroed on failure */
    /* no sysfs at all */
    CHECK(celer_amd_sysfs_find(root_of("nothing-here"), NULL, &m, &err) == CELER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "nothing-here/class/drm"));
    return 0;
}

/* Another vendor's card comes first and is skipped, even when its bus id is asked for; so is a
 * card with no vendor file (simpledrm and other platform devices). */
static int test_other_vendor(void)
{
    CHECK(!put_card("mixed", "card0", 0x10de, "0000:01:00.0", 24 * GIB, 0, 24 * GIB, 0, 0));
    CHECK(!put_card("mixed", "card1", 0, "simple-framebuffer.0", 8 * MIB, 0, 0, 0, 0));
    CHECK(!put_card("mixed", "card2", 0x1002, "0000:c3:00.0", 512 * MIB, 0, 512 * MIB, 64 * GIB, 0));
    celer_amd_mem m;
    celer_error   err = {0};
    CHECK(celer_amd_sysfs_find(root_of("mixed"), NULL, &m, &err) == CELER_OK && m.card == 2);
    CHECK(celer_amd_sysfs_find(root_of("mixed"), "0000:01:00.0", &m, &err) == CELER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "card0=0000:01:00.0/0x10de"));
    return 0;
}

/* Absent files are flags, not errors; a pool missing either file counts as nothing. */
static int test_missing_files(void)
{
    CHECK(!put_dev("partial", "card0", "vendor", "0x1002\n"));
    CHECK(!put_dev("partial", "card0", "mem_info_vram_total", "8589934592\n"));
    CHECK(!put_dev("partial", "card0", "mem_info_vram_used", "1073741824\n"));
    CHECK(!put_dev("partial", "card0", "mem_info_gtt_total", "17179869184\n"));
    celer_amd_mem m;
    celer_error   err = {0};
    CHECK(celer_amd_sysfs_find(root_of("partial"), NULL, &m, &err) == CELER_OK);
    CHECK(m.has_vram_total && m.has_vram_used && m.has_gtt_total);
    CHECK(!m.has_vis_vram_total && !m.has_gtt_used && m.gtt_used == 0);
    CHECK(m.pci_bus_id[0] == '\0'); /* no uevent */
    CHECK(celer_amd_allocatable(&m, false) == 7 * GIB && celer_amd_allocatable(&m, true) == 7 * GIB);
    /* a bus id cannot match a card without uevent */
    CHECK(celer_amd_sysfs_find(root_of("partial"), "0000:03:00.0", &m, &err) == CELER_ERR_UNSUPPORTED);
    /* no memory files at all (not driven by amdgpu): found, nothing promised */
    CHECK(!put_dev("bare", "card0", "vendor", "0x1002\n"));
    CHECK(celer_amd_sysfs_find(root_of("bare"), NULL, &m, &err) == CELER_OK);
    CHECK(!m.has_vram_total && !m.has_gtt_total && celer_amd_allocatable(&m, true) == 0);
    return 0;
}

/* A file that is not a decimal byte count is an error naming the file and what it holds. */
static int test_malformed(void)
{
    static const struct {
        const char *text, *shown;
    } bad[] = {
        {"12abc\n", "'12abc'"}, {"-5\n", "'-5'"}, {"\n", "''"}, {"0x100\n", "'0x100'"},
        {"99999999999999999999999\n", "'99999999999999999999999'"}, {"1\x01\n", "'1?'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char tree[32];
        snprintf(tree, sizeof tree, "bad%zu", i);
        CHECK(!put_card(tree, "card0", 0x1002, "0000:03:00.0", 24 * GIB, 0, 24 * GIB, 31 * GIB, 0));
        CHECK(!put_dev(tree, "card0", "mem_info_gtt_used", bad[i].text));
        celer_amd_mem m;
        celer_error   err = {0};
        CHECK(celer_amd_sysfs_find(root_of(tree), NULL, &m, &err) == CELER_ERR_FORMAT);
        CHECK(strstr(err.msg, "/class/drm/card0/device/mem_info_gtt_used") && strstr(err.msg, bad[i].shown));
        CHECK(m.vram_total == 0 && !m.has_vram_total);
        CHECK(celer_amd_sysfs_find(root_of(tree), NULL, &m, NULL) == CELER_ERR_FORMAT); /* err may be NULL */
    }
    /* the largest count there is */
    CHECK(!put_card("max", "card0", 0x1002, "0000:03:00.0", 24 * GIB, 0, 0, 31 * GIB, 0));
    CHECK(!put_dev("max", "card0", "mem_info_gtt_total", "18446744073709551615\n"));
    celer_amd_mem m;
    celer_error   err = {0};
    CHECK(celer_amd_sysfs_find(root_of("max"), NULL, &m, &err) == CELER_OK && m.gtt_total == UINT64_MAX);
    CHECK(celer_amd_allocatable(&m, true) == UINT64_MAX); /* saturates */
    return 0;
}

/* used > total (the counters are read one after the other and can race): nothing free there. */
static int test_used_over_total(void)
{
    CHECK(!put_card("over", "card0", 0x1002, "0000:03:00.0", 512 * MIB, 600 * MIB, 512 * MIB, 64 * GIB, 4 * GIB));
    celer_amd_mem m;
    celer_error   err = {0};
    CHECK(celer_amd_sysfs_find(root_of("over"), NULL, &m, &err) == CELER_OK);
    CHECK(celer_amd_allocatable(&m, false) == 0);
    CHECK(celer_amd_allocatable(&m, true) == 60 * GIB);
    m.gtt_used = 65 * GIB;
    CHECK(celer_amd_allocatable(&m, true) == 0);
    return 0;
}

/* ---- gfx targets ------------------------------------------------------------------------- */

static int base_is(const char *in, size_t n, const char *want)
{
    char out[32] = "unchanged";
    celer_gfx_arch_base(in, out, n);
    if (strcmp(out, want) != 0) {
        fprintf(stderr, "arch base of '%s' (n %zu): got '%s', want '%s'\n", in ? in : "(null)", n, out, want);
        return 0;
    }
    return 1;
}

static int test_gfx_base(void)
{
    CHECK(base_is("gfx90a:sramecc+:xnack-", 32, "gfx90a"));
    CHECK(base_is("gfx1151", 32, "gfx1151"));
    CHECK(base_is("gfx942:xnack-", 32, "gfx942"));
    CHECK(base_is(" gfx1100 ", 32, "gfx1100"));
    CHECK(base_is("", 32, ""));
    CHECK(base_is(NULL, 32, ""));
    CHECK(base_is("gfx1151", 4, "gfx")); /* truncated, still terminated */
    CHECK(base_is("gfx1151", 0, "unchanged"));
    return 0;
}

static int test_gfx_match(void)
{
    /* exact processors only */
    CHECK(!celer_gfx_target_built("gfx1151", "gfx1030;gfx90a"));
    CHECK(!celer_gfx_target_built("gfx1151", "gfx1150"));
    CHECK(!celer_gfx_target_built("gfx1151", "gfx115"));
    CHECK(!celer_gfx_target_built("gfx115", "gfx1151"));
    CHECK(celer_gfx_target_built("gfx1151", "gfx1100;gfx1151"));
    CHECK(celer_gfx_target_built("gfx90a:sramecc+:xnack-", "gfx1030;gfx90a"));
    CHECK(celer_gfx_target_built("gfx90a", " gfx1030 ; gfx90a ;"));
    CHECK(!celer_gfx_target_built("gfx1151", ""));
    CHECK(!celer_gfx_target_built("gfx1151", NULL));
    CHECK(!celer_gfx_target_built("", "gfx1151"));
    CHECK(!celer_gfx_target_built(NULL, "gfx1151"));
    CHECK(!celer_gfx_target_built("gfx1151", ";;"));
    /* features: a pinned one must agree with the device; one left out is "any" */
    CHECK(!celer_gfx_target_built("gfx90a:sramecc+:xnack-", "gfx90a:xnack+"));
    CHECK(celer_gfx_target_built("gfx90a:sramecc+:xnack-", "gfx90a:xnack-"));
    CHECK(celer_gfx_target_built("gfx90a:sramecc+:xnack-", "gfx90a:xnack+;gfx90a:sramecc+:xnack-"));
    CHECK(celer_gfx_target_built("gfx90a", "gfx90a:xnack+")); /* the device names no mode */
    /* generic targets and their members */
    static const char *const in11[] = {"gfx1100", "gfx1101", "gfx1102", "gfx1103",
                                       "gfx1150", "gfx1151", "gfx1152", "gfx1153"};
    for (size_t i = 0; i < sizeof in11 / sizeof in11[0]; i++) CHECK(celer_gfx_target_built(in11[i], "gfx11-generic"));
    CHECK(!celer_gfx_target_built("gfx1200", "gfx11-generic"));
    CHECK(!celer_gfx_target_built("gfx1036", "gfx11-generic"));
    CHECK(celer_gfx_target_built("gfx1034", "gfx10-3-generic") && celer_gfx_target_built("gfx1036", "gfx10-3-generic"));
    CHECK(!celer_gfx_target_built("gfx1010", "gfx10-3-generic"));
    CHECK(celer_gfx_target_built("gfx1012", "gfx10-1-generic") && !celer_gfx_target_built("gfx1030", "gfx10-1-generic"));
    CHECK(celer_gfx_target_built("gfx906", "gfx9-generic") && celer_gfx_target_built("gfx90c", "gfx9-generic"));
    CHECK(!celer_gfx_target_built("gfx90a", "gfx9-generic") && !celer_gfx_target_built("gfx908", "gfx9-generic"));
    CHECK(!celer_gfx_target_built("gfx942", "gfx9-generic"));
    CHECK(celer_gfx_target_built("gfx942:sramecc+:xnack-", "gfx1030;gfx9-4-generic"));
    CHECK(!celer_gfx_target_built("gfx942:sramecc+:xnack-", "gfx9-4-generic:xnack+"));
    CHECK(celer_gfx_target_built("gfx1201", "gfx12-generic"));
    CHECK(!celer_gfx_target_built("gfx1151", "gfx11-generic-x"));
    return 0;
}

static int test_gfx_check(void)
{
    celer_error err = {0};
    CHECK(celer_gfx_check("gfx90a:sramecc+:xnack-", "AMD Instinct MI210", "gfx1030;gfx90a", &err) == CELER_OK);
    CHECK(err.code == CELER_OK && err.msg[0] == '\0');
    CHECK(celer_gfx_check("gfx1151", "Radeon 8060S", "gfx11-generic", &err) == CELER_OK);

    static const char cmd[] =
        "cmake -B build -DCELER_HIP=ON -DCELER_HIP_ARCHS=\"gfx1030;gfx90a;gfx1151\" && cmake --build build -j";
    CHECK(celer_gfx_check("gfx1151", "AMD Radeon 8060S Graphics", "gfx1030;gfx90a", &err) == CELER_ERR_UNSUPPORTED);
    CHECK(err.code == CELER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "AMD Radeon 8060S Graphics (gfx1151)") && strstr(err.msg, "(built for: gfx1030;gfx90a);"));
    size_t n = strlen(err.msg);
    CHECK(n > strlen(cmd) && strcmp(err.msg + n - strlen(cmd), cmd) == 0); /* last, whole */

    /* the device's processor pinned the other way: replaced by the plain name, which clang accepts */
    CHECK(celer_gfx_check("gfx90a:sramecc+:xnack-", NULL, " gfx1100 ;gfx90a:xnack+", &err) == CELER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "the GPU (gfx90a:sramecc+:xnack-)"));
    CHECK(strstr(err.msg, "-DCELER_HIP_ARCHS=\"gfx1100;gfx90a\" && cmake --build build -j"));

    /* nothing built for AMD */
    CHECK(celer_gfx_check("gfx1100", "Radeon RX 7900 XTX", "", &err) == CELER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "(built for: no AMD target)") && strstr(err.msg, "-DCELER_HIP_ARCHS=\"gfx1100\" &&"));

    /* so many targets that the line is long: the command still comes whole, at the end */
    char many[400] = "", want[600];
    for (int i = 0; i < 28; i++) snprintf(many + strlen(many), sizeof many - strlen(many), "%sgfx10%02d", i ? ";" : "", i);
    snprintf(want, sizeof want, "-DCELER_HIP_ARCHS=\"%s;gfx1151\" && cmake --build build -j", many);
    CHECK(celer_gfx_check("gfx1151", "AMD Radeon 8060S Graphics", many, &err) == CELER_ERR_UNSUPPORTED);
    n = strlen(err.msg);
    CHECK(n > strlen(want) && strcmp(err.msg + n - strlen(want), want) == 0);
    CHECK(strstr(err.msg, "AMD Radeon 8060S Graphics (gfx1151)"));

    /* a device that names no architecture */
    CHECK(celer_gfx_check("", "AMD Radeon Graphics", "gfx1030", &err) == CELER_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "AMD Radeon Graphics") && strstr(err.msg, "rocminfo"));
    CHECK(celer_gfx_check("gfx1151", NULL, "gfx1030", NULL) == CELER_ERR_UNSUPPORTED);
    return 0;
}

/* ---- matrix units ------------------------------------------------------------------------ */

static int line_has(const char *arch, int built, const char *want)
{
    char line[128];
    celer_gfx_matrix_line(arch, built, line, sizeof line);
    if (strstr(line, want)) return 1;
    fprintf(stderr, "matrix line for %s (built %d): \"%s\" lacks \"%s\"\n", arch, built, line, want);
    return 0;
}

static int test_gfx_matrix(void)
{
    CHECK(celer_gfx_matrix("gfx90a:sramecc+:xnack-") == CELER_AMX_MFMA16);
    CHECK(celer_gfx_matrix("gfx908") == CELER_AMX_MFMA16);
    static const char *const cdna3[] = {"gfx940", "gfx941", "gfx942:sramecc+:xnack-", "gfx950"};
    for (size_t i = 0; i < sizeof cdna3 / sizeof cdna3[0]; i++) CHECK(celer_gfx_matrix(cdna3[i]) == CELER_AMX_MFMA32);
    static const char *const rdna3[] = {"gfx1100", "gfx1101", "gfx1102", "gfx1103",
                                        "gfx1150", "gfx1151", "gfx1152", "gfx1153"};
    for (size_t i = 0; i < sizeof rdna3 / sizeof rdna3[0]; i++) CHECK(celer_gfx_matrix(rdna3[i]) == CELER_AMX_WMMA11);
    CHECK(celer_gfx_matrix("gfx1200") == CELER_AMX_WMMA12 && celer_gfx_matrix("GFX1201") == CELER_AMX_WMMA12);
    /* no matrix units: RDNA 1-2, Vega, names that only look alike */
    static const char *const none[] = {"gfx1030", "gfx1036", "gfx1010", "gfx906", "gfx900", "gfx90c", "gfx11",
                                       "gfx110",  "gfx11000", "gfx11-generic", "gfx9-4-generic", "", "sm_90"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) CHECK(celer_gfx_matrix(none[i]) == CELER_AMX_NONE);
    CHECK(celer_gfx_matrix(NULL) == CELER_AMX_NONE);
    /* taken only where the loaded code's kind is the device's */
    CHECK(celer_gfx_matrix_taken("gfx1151", CELER_AMX_WMMA11) == CELER_AMX_WMMA11);
    CHECK(celer_gfx_matrix_taken("gfx90a", CELER_AMX_MFMA16) == CELER_AMX_MFMA16);
    CHECK(celer_gfx_matrix_taken("gfx942", CELER_AMX_MFMA32) == CELER_AMX_MFMA32);
    CHECK(celer_gfx_matrix_taken("gfx942", CELER_AMX_MFMA16) == CELER_AMX_NONE); /* a mismatch runs nothing */
    CHECK(celer_gfx_matrix_taken("gfx1151", CELER_AMX_NONE) == CELER_AMX_NONE);  /* generic-target code */
    CHECK(celer_gfx_matrix_taken("gfx1030", CELER_AMX_NONE) == CELER_AMX_NONE);
    CHECK(celer_gfx_matrix_taken("gfx1201", CELER_AMX_WMMA12) == CELER_AMX_NONE); /* no kernel takes them */
    CHECK(line_has("gfx1151", CELER_AMX_WMMA11, "WMMA"));
    CHECK(line_has("gfx1151", CELER_AMX_WMMA11, "more than 8 tokens"));
    CHECK(line_has("gfx90a", CELER_AMX_MFMA16, "prefill attention"));
    CHECK(line_has("gfx90a", CELER_AMX_MFMA16, "MFMA i8 16x16x16"));
    CHECK(line_has("gfx942", CELER_AMX_MFMA32, "MFMA i8 16x16x32"));
    CHECK(line_has("gfx1030", CELER_AMX_NONE, "f32 tiled kernel"));
    CHECK(line_has("gfx1201", CELER_AMX_NONE, "no kernel for them yet"));
    CHECK(line_has("gfx1151", CELER_AMX_NONE, "rebuild for the processor itself"));
    CHECK(line_has("gfx942", CELER_AMX_MFMA16, "left off"));
    char tiny[8];
    celer_gfx_matrix_line("gfx1151", CELER_AMX_WMMA11, tiny, sizeof tiny);
    CHECK(strlen(tiny) == sizeof tiny - 1); /* truncated, terminated */
    return 0;
}

int main(void)
{
    if (!scratch_make(tmp, sizeof tmp, "amd")) return 1;
    int fails = test_discrete() + test_strix_halo_small() + test_strix_halo_large() + test_apu_rule_edges() +
                test_two_cards() + test_other_vendor() + test_missing_files() + test_malformed() +
                test_used_over_total() + test_gfx_base() + test_gfx_match() + test_gfx_check() + test_gfx_matrix();
    if (!scratch_remove(tmp)) fails++;
    if (fails) fprintf(stderr, "test_amd_sysfs: %d group(s) failed\n", fails);
    else printf("test_amd_sysfs: ok\n");
    return fails != 0;
}
