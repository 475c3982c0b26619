/* An AMD GPU's memory as the amdgpu kernel driver reports it in sysfs, and what the GPU can
 * really allocate from it. Plain C with no GPU headers, so it builds into the CPU library and
 * is tested on machines without an AMD GPU: the sysfs root is a parameter ("/sys" in real use,
 * a fake tree in tests/test_amd_sysfs.c).
 *
 * Layout read (one directory per DRM card; cardN/device is the PCI device):
 *     <root>/class/drm/cardN/device/vendor                  "0x1002" for AMD
 *     <root>/class/drm/cardN/device/uevent                  "...\nPCI_SLOT_NAME=0000:c3:00.0\n..."
 *     <root>/class/drm/cardN/device/mem_info_vram_total     decimal bytes, and _used
 *     <root>/class/drm/cardN/device/mem_info_vis_vram_total CPU-visible VRAM (optional)
 *     <root>/class/drm/cardN/device/mem_info_gtt_total      decimal bytes, and _used
 * renderDN, controlDN and connector entries (card0-DP-1) are not cards and are skipped. */
#ifndef CELER_BACKENDS_GPU_AMD_SYSFS_H
#define CELER_BACKENDS_GPU_AMD_SYSFS_H

#include "celer.h"

#define CELER_AMD_VENDOR_ID 0x1002

/* Memory facts of one card, in bytes. A file that is absent leaves its value 0 and its has_
 * flag false (older kernels, or a card not driven by amdgpu); see celer_amd_allocatable. */
typedef struct {
    char     device_dir[512];    /* "<root>/class/drm/card1/device" */
    char     pci_bus_id[32];     /* PCI_SLOT_NAME as the kernel spells it: "0000:c3:00.0" */
    int      card;               /* N of cardN */
    uint64_t vram_total;         /* VRAM, or on an APU the BIOS carve-out of system RAM */
    uint64_t vram_used;
    uint64_t vis_vram_total;     /* the CPU-visible part of VRAM (the PCI BAR) */
    uint64_t gtt_total;          /* system RAM the driver may map for the GPU (amdgpu.gttsize) */
    uint64_t gtt_used;
    bool     has_vram_total, has_vram_used, has_vis_vram_total, has_gtt_total, has_gtt_used;
} celer_amd_mem;

/* Finds the card whose uevent says PCI_SLOT_NAME=pci_bus_id (compared case-insensitively; a bus
 * id without the domain, "c3:00.0", means domain 0000) and reads its memory files into *out.
 * sysfs_root NULL means "/sys". pci_bus_id NULL or "": the lowest-numbered card whose vendor is
 * 0x1002. Cards of other vendors are never taken. Errors: no such card, or no <root>/class/drm
 * → CELER_ERR_UNSUPPORTED naming the root, the bus id and the cards seen; a memory file that is
 * not a decimal byte count → CELER_ERR_FORMAT naming the file and its content; a file that
 * exists but cannot be read → CELER_ERR_IO. On failure *out is zeroed. */
celer_status celer_amd_sysfs_find(const char *sysfs_root, const char *pci_bus_id, celer_amd_mem *out,
                                  celer_error *err);

/* Bytes the GPU can allocate now: free VRAM on a discrete card (unified false), free VRAM plus
 * free GTT on a unified-memory APU. A pool whose total or used file was absent counts as 0, and
 * used > total counts as none free. The reasoning is at the definition. */
uint64_t celer_amd_allocatable(const celer_amd_mem *m, bool unified);

/* Whether the GPU shares system RAM (an APU): true when HIP says integrated
 * (hipDeviceProp_t.integrated), else a conservative guess from the sizes; the rule and the
 * real machines it was checked against are at the definition. */
bool celer_amd_is_apu(const celer_amd_mem *m, bool hip_integrated);

#endif
