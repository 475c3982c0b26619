#!/usr/bin/env python3
"""Fails when code outside the kernel-port tables and the GPU vendor header branches on the
backend kind or the GPU vendor (DESIGN.md, Backends: a new launcher must go through a port
table, so that every backend's slot is visible in one place and the fallback is always taken).

What counts as a branch: a comparison or a case label on a backend kind (`kind ==`,
`== CELER_BACKEND_CUDA`, `case CELER_BACKEND_ROCM:`), a preprocessor conditional on a vendor
or its compiler (`#if defined(__HIP__)`, `#ifdef __CUDACC__`, `CELER_CUDA`, `CELER_HIP`), and a
string comparison with a backend's name (`strcmp(x, "cuda")`). Tables that list every kind
(`[CELER_BACKEND_CUDA] = ...`) are not branches.

Usage: check_backend_branches.py [ROOT] [--self-test]"""
import re
import sys
from pathlib import Path

ALLOWED = {
    "src/backends/ports.c",            # the port tables
    "src/backends/gpu/gpu_vendor.h",   # the vendor header
}

RULES = [
    (re.compile(r"ops\s*->\s*kind\s*[!=]=|[!=]=\s*[\w>.-]*ops\s*->\s*kind\b|switch\s*\(\s*[\w>.-]*ops\s*->\s*kind"),
     "compares a backend kind"),
    (re.compile(r"[!=]=\s*CELER_BACKEND_(CPU|CUDA|ROCM)\b|\bCELER_BACKEND_(CPU|CUDA|ROCM)\s*[!=]="),
     "compares with a backend kind"),
    (re.compile(r"\bcase\s+CELER_BACKEND_(CPU|CUDA|ROCM)\b"), "switches on a backend kind"),
    (re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\b(__HIP__|__HIPCC__|__HIP_PLATFORM_\w+|__HIP_DEVICE_COMPILE__|"
                r"__CUDACC__|__NVCC__|__CUDA_ARCH__|__AMDGCN\w*|CELER_CUDA|CELER_HIP)\b"),
     "a preprocessor branch on the GPU vendor"),
    (re.compile(r"\bstr(n)?(case)?cmp\s*\([^;]*\"(cuda|rocm|hip|nvidia|amd)\""), "compares a backend's name"),
]


def scan(root: Path):
    found = []
    for path in sorted(list((root / "src").rglob("*")) + list((root / "tools").rglob("*"))):
        if path.suffix not in {".c", ".h", ".cu", ".cuh"} or not path.is_file():
            continue
        rel = path.relative_to(root).as_posix()
        if rel in ALLOWED:
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            code = line.split("//")[0]
            if code.lstrip().startswith(("/*", "*")):
                continue
            for rx, why in RULES:
                if rx.search(code):
                    found.append(f"{rel}:{n}: {why}: {line.strip()}")
    return found


def self_test():
    """The rules catch what they must and pass what they must."""
    bad = ["if (be->ops->kind == CELER_BACKEND_CUDA) x();", "if (kind != CELER_BACKEND_CPU)",
           "if (e->be->ops->kind != k)", "switch (be->ops->kind) {",
           "case CELER_BACKEND_ROCM:", "#if defined(__HIP__)", "#ifdef __CUDACC__", "#elif CELER_HIP",
           "if (!strcmp(name, \"cuda\"))", "x = CELER_BACKEND_ROCM == k;"]
    good = ["[CELER_BACKEND_CUDA] = NULL,", "#if CELER_HAVE_GPU", "const char *n = \"cuda\";",
            "celer_port_select(&p, be->ops->kind, &fn, &e);", "if (t->kind == T_EOF)", "typedef enum { CELER_BACKEND_CPU, CELER_BACKEND_CUDA } k;"]
    ok = True
    for line in bad:
        if not any(rx.search(line) for rx, _ in RULES):
            print(f"self-test: not caught: {line}")
            ok = False
    for line in good:
        if any(rx.search(line) for rx, _ in RULES):
            print(f"self-test: caught wrongly: {line}")
            ok = False
    return ok


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    root = Path(args[0] if args else Path(__file__).resolve().parents[2])
    if not self_test():
        return 1
    found = scan(root)
    for f in found:
        print(f)
    if found:
        print(f"{len(found)} branch(es) on the backend kind or GPU vendor outside the port tables "
              f"({', '.join(sorted(ALLOWED))}): add a port (src/backends/ports.h) instead")
        return 1
    print("no branch on the backend kind or GPU vendor outside the port tables and the vendor header")
    return 0


if __name__ == "__main__":
    sys.exit(main())
