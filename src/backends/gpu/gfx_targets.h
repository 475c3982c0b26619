/* Which AMD GPUs a ROCm build has code for. hipcc compiles one code object per target listed in
 * CELER_HIP_ARCHS ("gfx1030;gfx90a"); at run time a device whose ISA has no code object fails
 * at the first kernel launch with "no kernel image". celer checks at init instead and refuses
 * with the rebuild command (DESIGN.md, Backends). Plain C, no GPU headers: tested on any host.
 *
 * Names are LLVM's target ids: a processor ("gfx1151") optionally followed by feature settings
 * (":sramecc+:xnack-"), as HIP's gcnArchName reports them. Code objects are per exact ISA: gfx1150
 * code does not run on gfx1151, and there are no family wildcards, except LLVM's generic targets,
 * whose members are listed in gfx_targets.c. */
#ifndef CELER_BACKENDS_GPU_GFX_TARGETS_H
#define CELER_BACKENDS_GPU_GFX_TARGETS_H

#include "backends/gpu/amx_layout.h"
#include "celer.h"

/* The processor part of a target id, without features or surrounding spaces:
 * "gfx90a:sramecc+:xnack-" → "gfx90a". Always NUL-terminates out when n > 0 (truncating). */
void celer_gfx_arch_base(const char *gcn_arch_name, char *out, size_t n);

/* Whether built_list (the semicolon-separated targets this binary was compiled for; entries may
 * carry features or spaces, empty entries are ignored) has code that runs on device_arch (HIP's
 * gcnArchName): the same processor, or a generic target that has it as a member, and no feature
 * the entry pins ("xnack+") set the other way on the device ("xnack-"). */
bool celer_gfx_target_built(const char *device_arch, const char *built_list);

/* CELER_OK when celer_gfx_target_built; else CELER_ERR_UNSUPPORTED with one message naming the
 * device (device_name may be NULL) and its arch, the targets built, and the command that
 * rebuilds with the device's target added, last on the line so it can be copied as is. */
celer_status celer_gfx_check(const char *device_arch, const char *device_name, const char *built_list,
                             celer_error *err);

/* The integer matrix units of a device (its gcnArchName; features ignored) as a CELER_AMX_* kind
 * (amx_layout.h): MFMA16 on gfx908 and gfx90a, MFMA32 on gfx940, gfx941, gfx942 and gfx950,
 * WMMA11 on gfx11xx, WMMA12 on gfx12xx, NONE elsewhere (gfx10 and older gfx9: dot products only). */
int  celer_gfx_matrix(const char *gcn_arch_name);
/* What the prefill kernel takes: the kind the loaded code reports (built, set by each device pass;
 * gpu_mmq.cu) when the device's name agrees with it and a kernel takes that kind, else NONE (a
 * mismatch runs nothing unknown). */
int  celer_gfx_matrix_taken(const char *gcn_arch_name, int built);
/* One line for celer info: the device's units and whether this build takes them (the tiled
 * prefill kernel and prefill attention take the same kinds). */
void celer_gfx_matrix_line(const char *gcn_arch_name, int built, char *out, size_t n);

#endif
