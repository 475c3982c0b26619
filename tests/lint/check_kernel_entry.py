#!/usr/bin/env python3
"""Fails when a GPU kernel does not begin with gpu_dep_enter(). On NVIDIA sm_90 and later
GPU_LAUNCH launches each kernel while the one before it still runs (gpu_vendor.h); a kernel is
safe only if its first statement waits for its predecessor, so a new kernel that forgets the
call could read its inputs before they are written, on one GPU generation and not another.

Every `__global__` function of src/backends/gpu/*.cu and *.cuh is checked: the first statement of its
body must be `gpu_dep_enter();`, or `gpu_dep_deferred();` (the kernel loads weights before it
waits) with `gpu_dep_enter();` later in the body.

Usage: check_kernel_entry.py [ROOT] [--self-test]"""
import re
import sys
from pathlib import Path

GLOBAL = re.compile(r"__global__\b")


def kernels(text):
    """(name, first statement) of each __global__ function in text."""
    out = []
    for m in GLOBAL.finditer(text):
        name = re.search(r"\b(k_\w+)\s*\(", text[m.end():])
        if not name:
            continue
        i = m.end() + name.end() - 1  # the parameter list's '('
        depth = 0
        while True:
            c = text[i]
            depth += c == "("
            depth -= c == ")"
            i += 1
            if depth == 0:
                break
        body = text.index("{", i) + 1
        first = text[body:].lstrip().split(";", 1)[0] + ";"
        if first == "gpu_dep_deferred();" and "gpu_dep_enter();" in text[body:body_end(text, body)]:
            first = "gpu_dep_enter();"  # deferred, and entered later in the body
        out.append((name.group(1), first.strip()))
    return out


def body_end(text, body):
    """The index of the '}' closing the body that starts at body (just past its '{')."""
    depth = 1
    i = body
    while depth:
        depth += (text[i] == "{") - (text[i] == "}")
        i += 1
    return i - 1


def sources(root):
    """The GPU sources and the headers that hold kernels."""
    gpu = Path(root) / "src/backends/gpu"
    return sorted(list(gpu.glob("*.cu")) + list(gpu.glob("*.cuh")))


def check(root):
    bad = []
    for path in sources(root):
        for name, first in kernels(path.read_text()):
            if first != "gpu_dep_enter();":
                bad.append(f"{path.relative_to(root)}: kernel {name} begins with `{first[:60]}`, "
                           "not gpu_dep_enter(); (gpu_vendor.h: kernels are launched early)")
    return bad


def self_test():
    good = "__global__ void k_a(int x)\n{\n    gpu_dep_enter();\n    y = x;\n}\n"
    tmpl = "template <int F>\n__global__ void __launch_bounds__(64)\n    k_b(const float *x, float (*f)(int))\n{\n    gpu_dep_enter();\n}\n"
    late = "__global__ void k_c(float *x)\n{\n    x[0] = 1;\n    gpu_dep_enter();\n}\n"
    assert [f for _, f in kernels(good)] == ["gpu_dep_enter();"]
    assert [n for n, f in kernels(tmpl) if f == "gpu_dep_enter();"] == ["k_b"]
    assert [f for _, f in kernels(late)] == ["x[0] = 1;"]
    deferred = "__global__ void k_d(float *x)\n{\n    gpu_dep_deferred();\n    if (x) { w = 1; }\n    gpu_dep_enter();\n}\n"
    never = "__global__ void k_e(float *x)\n{\n    gpu_dep_deferred();\n    x[0] = 1;\n}\n__global__ void k_f(float *x)\n{\n    gpu_dep_enter();\n}\n"
    assert [f for _, f in kernels(deferred)] == ["gpu_dep_enter();"]
    assert [f for _, f in kernels(never)] == ["gpu_dep_deferred();", "gpu_dep_enter();"]
    print("check_kernel_entry: self-test passed")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--self-test"]
    if "--self-test" in sys.argv:
        self_test()
    root = args[0] if args else str(Path(__file__).resolve().parents[2])
    problems = check(root)
    for p in problems:
        print(p, file=sys.stderr)
    n = sum(len(kernels(p.read_text())) for p in sources(root))
    if problems:
        print(f"check_kernel_entry: {len(problems)} of {n} kernels", file=sys.stderr)
        sys.exit(1)
    print(f"check_kernel_entry: {n} kernels begin with gpu_dep_enter() or defer it")
