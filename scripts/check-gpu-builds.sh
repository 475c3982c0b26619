#!/usr/bin/env bash
# Compiles and links both GPU builds of celer (DESIGN.md, Testing: CI has no GPU, so it builds
# them): CUDA for sm_80/sm_90 with nvcc (and dev/kernels' standalone CUDA harnesses), and HIP with
# Debian's hipcc for gfx1030 (RDNA 2: wave32, no matrix units), gfx90a (CDNA 2: wave64, MFMA),
# gfx940 (CDNA 3: MFMA of 32 bytes) and gfx1100 (RDNA 3: WMMA; Strix Halo's gfx1151 is the same
# ISA family, which this clang does not know by name). Then, on a machine without an AMD GPU,
# the HIP build must refuse the rocm backend cleanly: exit 3 and one line on stderr saying there
# is no AMD GPU.
#
#   scripts/check-gpu-builds.sh [--only cuda|hip] [--no-device-check] [CUDA_BUILD_DIR [HIP_BUILD_DIR]]
#
# Build folders: the arguments, else $CELER_CUDA_BUILD_DIR / $CELER_HIP_BUILD_DIR, else
# build-cuda and build-hip. Arch lists: $CELER_CUDA_ARCHS ("80;90") and $CELER_HIP_ARCHS
# ("gfx1030;gfx90a;gfx940;gfx1100"). CC (default clang, as in the Makefile), JOBS (default nproc), and CI
# (set: -DCELER_WERROR=ON) as for `make`. Needs nvcc (the CUDA toolkit) and hipcc
# (apt-get install hipcc); a missing one fails at configure with the package to install.
# Exit 0 when every build and check passes, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

only=""
device_check=1
dirs=()
while (($#)); do
    case "$1" in
        --only) only=${2:-}; shift 2 ;;
        --only=*) only=${1#--only=}; shift ;;
        --no-device-check) device_check=0; shift ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "check-gpu-builds: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) dirs+=("$1"); shift ;;
    esac
done
case "$only" in ""|cuda|hip) ;; *) echo "check-gpu-builds: --only takes cuda or hip, not '$only'" >&2; exit 2 ;; esac

cuda_dir=${dirs[0]:-${CELER_CUDA_BUILD_DIR:-build-cuda}}
hip_dir=${dirs[1]:-${CELER_HIP_BUILD_DIR:-build-hip}}
cuda_archs=${CELER_CUDA_ARCHS:-80;90}
hip_archs=${CELER_HIP_ARCHS:-gfx1030;gfx90a;gfx940;gfx1100}
if [ -z "${CC:-}" ]; then
    if command -v clang >/dev/null 2>&1; then CC=clang; else CC=cc; fi
fi
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
werror=OFF
[ -n "${CI:-}" ] && werror=ON

fail() { echo "check-gpu-builds: FAIL: $*" >&2; exit 1; }

# configure and build the celer binary in $1 with the extra CMake arguments that follow
build_variant() {
    local name=$1 dir=$2; shift 2
    local t0=$SECONDS
    echo "check-gpu-builds: $name: configuring $dir ($*)"
    mkdir -p "$dir"
    cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$CC" -DCELER_WERROR="$werror" "$@" \
        >"$dir/configure.log" 2>&1 ||
        { cat "$dir/configure.log" >&2; fail "$name: configure failed (above)"; }
    cmake --build "$dir" -j "$jobs" --target celer || fail "$name: build failed (above)"
    [ -x "$dir/celer" ] || fail "$name: $dir/celer was not built"
    echo "check-gpu-builds: $name: ok, $dir/celer built in $((SECONDS - t0)) s"
}

# __oclc_ISA_version for a processor's digits ("1100", "90a"): major · 1000 + minor · 100 +
# stepping, the last two one hex digit each (gfx1100: 11000, gfx90a: 9010).
isa_number() {
    local d=$1
    echo $(( 10#${d:0:${#d}-2} * 1000 + 16#${d: -2:1} * 100 + 16#${d: -1} ))
}

# The device libraries for the HIP build, in $1: Debian 12's folder, or where it lacks a target's
# ISA-version library (it predates gfx11), a folder of links to it plus that library made here:
# a module of one constant, __oclc_ISA_version, written as gfx1030's with the number changed
# (llvm-dis/llvm-as of LLVM 15, which hipcc depends on). The build that uses it is compiled and
# linked, never run: a compile check of RDNA 3's code paths, not a ROCm install.
hip_device_libs() {
    local dir=$1 src=/usr/lib/x86_64-linux-gnu/amdgcn/bitcode arch isa missing=()
    for arch in ${hip_archs//;/ }; do
        isa=${arch%%:*} isa=${isa#gfx}
        [[ $isa =~ ^[0-9a-f]+$ ]] && [ ! -e "$src/oclc_isa_version_$isa.bc" ] && missing+=("$isa")
    done
    if ((${#missing[@]} == 0)); then echo "$src"; return; fi
    command -v llvm-dis-15 >/dev/null && command -v llvm-as-15 >/dev/null ||
        fail "hip: $src has no ISA library for ${missing[*]}, and llvm-dis-15/llvm-as-15 (apt-get install llvm-15) are missing to make them"
    mkdir -p "$dir"
    ln -sf "$src"/*.bc "$dir"/
    for isa in "${missing[@]}"; do
        rm -f "$dir/oclc_isa_version_$isa.bc"
        llvm-dis-15 "$src/oclc_isa_version_1030.bc" -o - |
            sed "s/constant i32 10300,/constant i32 $(isa_number "$isa"),/" |
            llvm-as-15 -o "$dir/oclc_isa_version_$isa.bc" || fail "hip: making oclc_isa_version_$isa.bc failed"
        echo "check-gpu-builds: hip: made $dir/oclc_isa_version_$isa.bc (this Debian's device libraries predate gfx$isa)" >&2
    done
    echo "$dir"
}

# The HIP build on a machine with no AMD GPU: `celer info --backend rocm` must exit 3
# (EXIT_RUNTIME) with exactly one line on stderr that says no AMD GPU was found. The HIP runtime
# prints nothing itself then (hipGetDeviceCount: hipErrorNoDevice), so that line is celer's own.
check_hip_no_device() {
    local bin=$1/celer
    [ -e "$bin" ] || fail "hip: $bin does not exist: the HIP build produced no celer binary"
    [ -x "$bin" ] || fail "hip: $bin is not executable"
    if [ -e /dev/kfd ]; then
        echo "check-gpu-builds: hip: /dev/kfd exists (an AMD GPU driver is loaded): no-device check skipped"
        return 0
    fi
    local out err rc=0
    out=$(mktemp) err=$(mktemp)
    "$bin" info --backend rocm >"$out" 2>"$err" </dev/null || rc=$?
    local lines
    lines=$(grep -c '' "$err" || true)
    local why=""
    if [ "$rc" -ne 3 ]; then
        why="exit code $rc, expected 3"
    elif [ "$lines" -ne 1 ]; then
        why="$lines lines on stderr, expected one"
    elif ! grep -Eiq 'AMD|ROCm|HIP' "$err" || ! grep -Eiq '\bno\b|not found|none|missing' "$err"; then
        why="the stderr line does not say that no AMD GPU was found"
    fi
    if [ -n "$why" ]; then
        {
            echo "check-gpu-builds: FAIL: hip: $bin info --backend rocm: $why"
            echo "--- stdout"; cat "$out"
            echo "--- stderr"; cat "$err"
        } >&2
        rm -f "$out" "$err"
        exit 1
    fi
    echo "check-gpu-builds: hip: ok, no AMD GPU refused: $(cat "$err")"
    rm -f "$out" "$err"
}

# dev/kernels' standalone CUDA harnesses (run by hand or by gpu-check.sh's standalone step on a
# lent GPU): compiled for sm_90 with the engine's headers, so that a change to a header they take
# or a slip in one shows here rather than in the device's few minutes.
check_standalone() {
    local src t0=$SECONDS
    for src in dev/kernels/*.cu; do
        nvcc -O1 -std=c++17 -arch=sm_90 -Iinclude -Isrc -c "$src" -o /dev/null ||
            fail "cuda: $src does not compile (above)"
    done
    echo "check-gpu-builds: cuda: ok, dev/kernels/*.cu compiled in $((SECONDS - t0)) s"
}

if [ "$only" != hip ]; then
    build_variant cuda "$cuda_dir" -DCELER_CUDA=ON -DCELER_HIP=OFF "-DCELER_CUDA_ARCHS=$cuda_archs"
    check_standalone
fi
if [ "$only" != cuda ]; then
    libs=$(hip_device_libs "$hip_dir/device-libs")
    build_variant hip "$hip_dir" -DCELER_HIP=ON -DCELER_CUDA=OFF "-DCELER_HIP_ARCHS=$hip_archs" \
        "-DCELER_HIP_DEVICE_LIB_PATH=$libs"
    if [ "$device_check" -eq 1 ]; then
        check_hip_no_device "$hip_dir"
    else
        echo "check-gpu-builds: hip: no-device check skipped (--no-device-check)"
    fi
fi
echo "check-gpu-builds: all ok"
