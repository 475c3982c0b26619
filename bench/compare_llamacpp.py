#!/usr/bin/env python3
"""celer bench and llama.cpp's llama-bench side by side, in one run, on the same files.

    bench/compare_llamacpp.py --llama-bench PATH [--celer build/celer] [-p 512] [-n 128] [-r 5]
                              [--threads 1,2] MODEL.gguf [MODEL.gguf ...]

For every model and thread count it runs both tools (interleaved, celer first), each with the
same prompt/generation lengths and repetitions, and prints a Markdown table of median tok/s
with the celer / llama.cpp ratio and each decode rate as a share of the memory bound (the
weight, key and value bytes a decode step reads x tok/s / the copy bandwidth, read + write, that celer bench
measures right after its runs with the same threads), followed by the machine, date and commit, ready to paste into
docs/benchmarks/. Machines here are noisy: the medians of R repetitions and the ratios are what
to quote. Standard library only; llama-bench is the user's own build of llama.cpp.
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys


def run_json(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compare: {' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()[-400:]}")
    return r.stdout


def celer(binary, model, p, n, reps, threads):
    out = json.loads(run_json([binary, "bench", "-m", model, "-p", str(p), "-n", str(n), "-r", str(reps),
                               "-t", str(threads), "--json"]))
    # the bytes a decode step reads: weights, and keys and values at the timed steps' mean context
    return (out["pp"]["median"], out["tg"]["median"], out["weight_bytes_per_token"] + out["kv_bytes_per_token"],
            out["copy_bytes_per_s"])


def llama(binary, model, p, n, reps, threads):
    rows = json.loads(run_json([binary, "-m", model, "-p", str(p), "-n", str(n), "-r", str(reps),
                                "-t", str(threads), "-o", "json"]))
    pp = tg = 0.0
    for row in rows:
        if row.get("n_prompt", 0) > 0 and row.get("n_gen", 0) == 0:
            pp = row["avg_ts"]
        elif row.get("n_gen", 0) > 0 and row.get("n_prompt", 0) == 0:
            tg = row["avg_ts"]
    return pp, tg


def machine():
    cpu = platform.processor() or "unknown cpu"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} logical cpus, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--llama-bench", required=True)
    ap.add_argument("--celer", default="build/celer")
    ap.add_argument("-p", type=int, default=512)
    ap.add_argument("-n", type=int, default=128)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    for path in [a.llama_bench, a.celer] + a.models:
        if not os.path.exists(path):
            sys.exit(f"compare: {path}: no such file")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"| model | threads | celer pp{a.p} | llama.cpp pp{a.p} | ratio | celer tg{a.n} | llama.cpp tg{a.n} | ratio "
          f"| copy GB/s | celer tg / bound | llama.cpp tg / bound |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model in a.models:
        for t in [int(x) for x in a.threads.split(",")]:
            cpp, ctg, wb, bw = celer(a.celer, model, a.p, a.n, a.r, t)
            lpp, ltg = llama(a.llama_bench, model, a.p, a.n, a.r, t)
            ratio = lambda x, y: f"{x / y:.2f}×" if y else "–"
            share = lambda tg: f"{100 * wb * tg / bw:.0f}%" if bw else "–"
            print(f"| {os.path.basename(model)} | {t} | {cpp:.1f} | {lpp:.1f} | {ratio(cpp, lpp)} | "
                  f"{ctg:.1f} | {ltg:.1f} | {ratio(ctg, ltg)} | {bw / 1e9:.1f} | {share(ctg)} | {share(ltg)} |",
                  flush=True)
    print(f"\nMachine: {machine()}. Date: {datetime.date.today()}. celer commit {commit}; "
          f"medians of {a.r} runs, p={a.p}, n={a.n}.")


if __name__ == "__main__":
    main()
