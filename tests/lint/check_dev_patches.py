#!/usr/bin/env python3
"""Fails when a patch of dev/patches no longer applies to the tree. The patches wait for a device
run (dev/patches/README.md), where scripts/gpu-check.sh's ab applies them to a copy of the tree;
a stale one would cost a failed build inside the device's few minutes.

A patch may be stacked on others: a first line `Stacked on: A.diff B.diff` (before its diff; git
apply skips such text) names the patches applied before it, in order. Each patch is checked in
a scratch copy of the files its stack touches.

Usage: check_dev_patches.py [ROOT] [--self-test]"""
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

STACKED = re.compile(r"^Stacked on:\s*(.*)$")
TOUCHED = re.compile(r"^(?:---|\+\+\+) [ab]/(\S+)")


def stack_of(text):
    """The patch files a patch names on its first line, before its diff."""
    first = text.splitlines()[0] if text else ""
    m = STACKED.match(first)
    return m.group(1).split() if m else []


def touched(text):
    return {m.group(1) for line in text.splitlines() if (m := TOUCHED.match(line))}


def check(root, patch):
    """None if patch (with its stack) applies to root's files, else why not."""
    text = patch.read_text()
    stack = [patch.parent / name for name in stack_of(text)]
    missing = [str(p.name) for p in stack if not p.is_file()]
    if missing:
        return f"stacked on missing {', '.join(missing)}"
    paths = set(touched(text))
    for p in stack:
        paths |= touched(p.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        for rel in paths:
            src = root / rel
            if src.is_file():
                (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(src, Path(tmp) / rel)
        for p in stack + [patch]:
            args = ["git", "apply"] + (["--check"] if p == patch else []) + [str(p.resolve())]
            r = subprocess.run(args, cwd=tmp, capture_output=True, text=True)
            if r.returncode:
                return f"{p.name} does not apply: {r.stderr.strip().splitlines()[0] if r.stderr.strip() else r.returncode}"
    return None


def self_test():
    """A patch that applies, one stacked on it, and one whose context is gone."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "f.c").write_text("a\nb\nc\n")
        d = root / "dev" / "patches"
        d.mkdir(parents=True)
        (d / "one.diff").write_text("--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n")
        (d / "two.diff").write_text("Stacked on: one.diff\n\n--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n a\n-B\n+BB\n c\n")
        (d / "bad.diff").write_text("--- a/f.c\n+++ b/f.c\n@@ -1,3 +1,3 @@\n a\n-x\n+y\n c\n")
        (d / "lost.diff").write_text("Stacked on: none.diff\n\n--- a/f.c\n+++ b/f.c\n@@ -1 +1 @@\n-a\n+A\n")
        got = {p.name: check(root, p) is None for p in sorted(d.glob("*.diff"))}
        want = {"bad.diff": False, "lost.diff": False, "one.diff": True, "two.diff": True}
        if got != want:
            print(f"check_dev_patches self-test: got {got}, want {want}")
            return 1
    return 0


def main():
    args = [a for a in sys.argv[1:] if a != "--self-test"]
    if "--self-test" in sys.argv[1:] and self_test():
        return 1
    root = Path(args[0] if args else ".").resolve()
    bad = 0
    for patch in sorted((root / "dev" / "patches").glob("*.diff")):
        why = check(root, patch)
        if why:
            print(f"dev/patches/{patch.name}: {why}; refresh it against the tree (dev/patches/README.md)")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
