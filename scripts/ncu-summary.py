#!/usr/bin/env python3
"""One line per kernel from `ncu --print-summary per-kernel --csv` output (scripts/gpu-check.sh's
profile step): calls, total and mean time, and the mean of every other metric the run took,
kernels by total time, the longest first.

    ncu-summary.py FILE.csv [N]     (N: the first N kernels; default 25)

Kernels are named with their template arguments and without their parameter lists, then their
grid (a product's shapes differ by grid); ncu's own lines (==PROF==) and the profiled program's
output around the CSV are skipped."""
import csv
import sys


def main():
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(sys.argv) >= 2 else 2
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
    with open(sys.argv[1], newline="", errors="replace") as f:
        lines = [l for l in f if l.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows or "Kernel Name" not in rows[0]:
        print(f"ncu-summary: no per-kernel CSV table in {sys.argv[1]}", file=sys.stderr)
        return 1
    hdr = rows[0]
    col = {name: hdr.index(name)
           for name in ("Kernel Name", "Grid Size", "Invocations", "Metric Name", "Metric Unit", "Average")}
    kernels = {}  # name -> {"calls": n, metric: (unit, mean)}
    for r in rows[1:]:
        if len(r) != len(hdr):
            continue
        grid = r[col["Grid Size"]].replace(" ", "").replace(",1,1)", ")").replace(",1)", ")")
        name = r[col["Kernel Name"]].split("(")[0].strip() + " " + grid
        try:
            calls = int(r[col["Invocations"]].replace(",", ""))
            mean = float(r[col["Average"]].replace(",", ""))
        except ValueError:
            continue
        k = kernels.setdefault(name, {"calls": 0})
        metric = r[col["Metric Name"]]
        # the same kernel and grid in several rows (another block size): fold the calls, weigh
        # the means by them
        if metric == "gpu__time_duration.sum":
            k["calls"] += calls
        unit, n0, mean0 = k.get(metric, (r[col["Metric Unit"]], 0, 0.0))
        n = n0 + calls
        k[metric] = (unit, n, (mean0 * n0 + mean * calls) / n) if n else (unit, 0, 0.0)
    if not kernels or not any("gpu__time_duration.sum" in k for k in kernels.values()):
        print("ncu-summary: the table has no gpu__time_duration.sum", file=sys.stderr)
        return 1
    others = sorted({m for k in kernels.values() for m in k if m not in ("calls", "gpu__time_duration.sum")})

    def total_us(k):
        unit, n, mean = k.get("gpu__time_duration.sum", ("ns", 0, 0.0))
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}.get(unit, 1e-3)
        return n * mean * scale, mean * scale

    order = sorted(kernels.items(), key=lambda kv: -total_us(kv[1])[0])
    all_us = sum(total_us(k)[0] for k in kernels.values())
    short = {m: m.split("__")[-1].split(".")[0][:18] for m in others}
    print(f"{'total us':>10} {'share':>6} {'calls':>6} {'mean us':>9}  " +
          " ".join(f"{short[m]:>18}" for m in others) + "  kernel")
    for name, k in order[:top]:
        tot, mean = total_us(k)
        vals = " ".join(f"{k[m][2]:>18.1f}" if m in k else f"{'-':>18}" for m in others)
        print(f"{tot:>10.1f} {100 * tot / all_us:>5.1f}% {k['calls']:>6} {mean:>9.2f}  {vals}  {name[:70]}")
    print(f"{all_us:>10.1f} 100.0% {sum(k['calls'] for k in kernels.values()):>6}            (all {len(kernels)} kernels)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
