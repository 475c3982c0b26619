#!/usr/bin/env python3
"""The longest loop of each matching kernel in nvdisasm's listing: its instruction count and
the opcodes it spends them on. The numbers behind the decode kernels' instruction cuts, taken
without a GPU (a cubin built here, disassembled here).

    nvcc <gpu_matvec.cu's flags from `ninja -C build-cuda -t commands celer`> -cubin -o mv.cubin \\
        src/backends/gpu/gpu_matvec.cu
    nvdisasm -c mv.cubin > mv.sass     # nvdisasm: the nvidia-cuda-nvdisasm wheel (pip download)
    dev/kernels/sass_loops.py mv.sass 'k_mmvqILi(3|13)ELi1ELi1ELb0'

The pattern is a regular expression over the mangled names (k_mmvq<F, NT, KS, X8, SD>: F is the
gpu_fmt number, gpu_decode.cuh). The longest loop is the one a kernel's time goes to: the body
between a label and the furthest backward branch to it."""
import collections
import re
import sys

INSTR = re.compile(r"\s*/\*[0-9a-f]{4}\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)(\.[A-Z0-9_.]+)?")
LABEL = re.compile(r"\.(L_x_\d+):")
BRANCH = re.compile(r"BRA\s+`?\(?\.?(L_x_\d+)")


def longest_loop(lines):
    """(start, end) line indices of the longest backward branch's body, or None."""
    labels = {m.group(1): i for i, l in enumerate(lines) if (m := LABEL.match(l.strip()))}
    best = None
    for i, l in enumerate(lines):
        m = BRANCH.search(l)
        if m and labels.get(m.group(1), i) < i:
            a = labels[m.group(1)]
            if best is None or i - a > best[1] - best[0]:
                best = (a, i)
    return best


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    text = open(sys.argv[1]).read()
    pattern = re.compile(sys.argv[2])
    found = False
    for func in re.split(r"\n\s*\.text\.", text):
        name = func.split(":", 1)[0]
        if not pattern.search(name):
            continue
        found = True
        lines = func.split("\n")
        loop = longest_loop(lines)
        if loop is None:
            print(f"{name}: no loop")
            continue
        ops = collections.Counter()
        for l in lines[loop[0] + 1 : loop[1] + 1]:
            m = INSTR.match(l)
            if m:
                ops[m.group(2) + (m.group(3) or "")[:12]] += 1
        print(f"{name}: {sum(ops.values())} instructions")
        print("   " + ", ".join(f"{k} {v}" for k, v in ops.most_common(16)))
    if not found:
        sys.exit(f"sass_loops: no kernel matches {sys.argv[2]!r}")


if __name__ == "__main__":
    main()
