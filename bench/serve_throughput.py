#!/usr/bin/env python3
"""Aggregate decode throughput of `celer serve` with 1 and with N concurrent streaming clients.

    bench/serve_throughput.py [--celer build/celer] [--clients 32] [--requests 3] [--tokens 128]
                              [--parallel 32] [--threads T] MODEL

Starts `celer serve` on a free port, warms it up, then runs 1 client, then N clients, each doing
R greedy chat requests of M generated tokens (ignoring nothing: the model may stop early; the
tokens counted are the usage the server reports). Prints generated tokens per second of wall
time for both and their ratio, with the machine, date and commit. Standard library only.
"""
import argparse
import datetime
import http.client
import json
import os
import platform
import re
import subprocess
import sys
import threading
import time


def start(celer, model, parallel, threads, ctx):
    args = [celer, "serve", "-m", model, "--port", "0", "--parallel", str(parallel), "--ctx", str(ctx),
            "--max-queue", "1024"]
    if threads:
        args += ["--threads", str(threads)]
    p = subprocess.Popen(args, stderr=subprocess.PIPE, text=True)
    port = None
    for line in p.stderr:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        port = int(m.group(1)) if m else port
        if "ready:" in line:
            break
    if not port:
        sys.exit(f"serve_throughput: celer serve did not start (exit {p.poll()})")
    threading.Thread(target=p.stderr.read, daemon=True).start()
    return p, port


def one_request(port, i, tokens):
    body = {"messages": [{"role": "user", "content": f"Tell me a long story about the number {i}."}],
            "temperature": 0, "max_tokens": tokens, "stream": True, "stream_options": {"include_usage": True}}
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    r = c.getresponse()
    n = 0
    for line in r:
        if line.startswith(b"data: {") and b'"usage"' in line:
            u = json.loads(line[6:]).get("usage")
            n = u["completion_tokens"] if u else n
    c.close()
    return n


def run(port, clients, requests, tokens):
    counts = [0] * clients

    def client(k):
        for j in range(requests):
            counts[k] += one_request(port, k * requests + j, tokens)

    t0 = time.time()
    ts = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.time() - t0
    return sum(counts), dt


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--celer", default="build/celer")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--parallel", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--ctx", type=int, default=512)
    a = ap.parse_args()
    p, port = start(a.celer, a.model, a.parallel, a.threads, a.ctx)
    try:
        run(port, 1, 1, 8)  # warm-up
        n1, t1 = run(port, 1, a.requests, a.tokens)
        nn, tn = run(port, a.clients, a.requests, a.tokens)
    finally:
        p.terminate()
        p.wait()
    r1, rn = n1 / t1, nn / tn
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"| clients | requests each | tokens generated | wall s | tok/s |\n|---|---|---|---|---|")
    print(f"| 1 | {a.requests} | {n1} | {t1:.1f} | {r1:.1f} |")
    print(f"| {a.clients} | {a.requests} | {nn} | {tn:.1f} | {rn:.1f} |")
    print(f"\nAggregate decode at {a.clients} clients: {rn / r1:.2f}x one client's.")
    print(f"\nModel {os.path.basename(a.model)}, --parallel {a.parallel}, --ctx {a.ctx}, max_tokens {a.tokens}. "
          f"Machine: {platform.processor() or 'cpu'}, {os.cpu_count()} logical cpus, {platform.system()} "
          f"{platform.release()}. Date: {datetime.date.today()}. celer commit {commit}.")


if __name__ == "__main__":
    main()
