#!/usr/bin/env python3
"""Writes the seed files of the GGUF fuzzer (tests/fuzz/fuzz_gguf.c) into tests/fuzz/corpus/gguf/.

    .venv/bin/python tests/cli/make_fuzz_corpus.py [--out DIR]

Seeds, each under 200 KiB:
  real-<model>.gguf        the real header of each test model (scripts/fetch-model), read with
                           gguf-py: every metadata key and value kept byte for byte, except
                           arrays longer than 64 entries (tokens, scores, token types, merges),
                           cut to their first 64, and the chat template, cut to 512 characters;
                           every tensor info kept with its real name, type and number of
                           dimensions, its shape shrunk to one block per row and at most 2 rows
                           per dimension, so the file is valid and its data is small
  real-<model>-shapes.gguf the same header with the real shapes and no tensor data (every
                           tensor points past the end of the file)
  crafted-*.gguf           the files of tests/cli/gguf_craft.py: the valid ones, every corrupt
                           variant test_bad_files.py checks, and the absurd-hyper-parameter ones
The script replaces the real-* and crafted-* files it wrote before and leaves others alone.
"""

from __future__ import annotations

import argparse
import re
import struct
import subprocess
import sys
from pathlib import Path

import gguf
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import gguf_craft as craft  # noqa: E402

MODELS = ["smollm2-135m", "gemma3-270m"]
MAX_ARRAY = 64
MAX_TEMPLATE_CHARS = 512
MAX_SEED_BYTES = 200 * 1024
PREFIXES = ("real-", "crafted-")


def model_path(name: str) -> str:
    r = subprocess.run([str(ROOT / "scripts" / "fetch-model"), name], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"make_fuzz_corpus: scripts/fetch-model {name} failed: {r.stderr.strip()}")
    return r.stdout.strip()


def raw_field(reader: gguf.GGUFReader, f) -> bytes:
    """The entry exactly as stored: key, type and value."""
    size = sum(int(p.nbytes) for p in f.parts)
    return bytes(reader.data[f.offset:f.offset + size])


def cut_field(f) -> bytes:
    """A shortened copy of an array (first MAX_ARRAY elements) or of the chat template."""
    if f.types[0] == GGUFValueType.STRING:
        text = bytes(f.parts[-1]).decode("utf-8", "replace")[:MAX_TEMPLATE_CHARS]
        return craft.kv(f.name, craft.string(text))
    elem = f.types[1]
    items = []
    for i in f.data[:MAX_ARRAY]:
        b = bytes(f.parts[i])
        items.append(craft.Val(elem, craft.gstr(b) if elem == GGUFValueType.STRING else b))
    return craft.kv(f.name, craft.array(int(elem), items))


def needs_cut(f) -> bool:
    if f.name == "tokenizer.chat_template":
        return len(bytes(f.parts[-1]).decode("utf-8", "replace")) > MAX_TEMPLATE_CHARS
    # arrays of scalars or strings only; nested arrays are kept whole
    return (f.types and f.types[0] == GGUFValueType.ARRAY and len(f.types) == 2 and len(f.data) > MAX_ARRAY)


def real_seeds(name: str) -> list[tuple[str, bytes]]:
    path = model_path(name)
    r = gguf.GGUFReader(path)
    kvs = [cut_field(f) if needs_cut(f) else raw_field(r, f)
           for key, f in r.fields.items() if not key.startswith("GGUF.")]
    alignment = int(r.alignment)
    small, real = [], []
    for t in r.tensors:
        qtype = GGMLQuantizationType(t.tensor_type)
        block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
        ne = [int(d) for d in t.shape.tolist()]
        shrunk = [block_elems] + [min(d, 2) for d in ne[1:]]
        n_bytes = block_bytes
        for d in shrunk[1:]:
            n_bytes *= d
        data = bytes((i * 13 + len(small)) & 0xFF for i in range(n_bytes))
        small.append(craft.Tensor(t.name, int(qtype), shrunk, data=data))
        real.append(craft.Tensor(t.name, int(qtype), ne, data=b"", offset=int(t.data_offset - r.data_offset)))
    return [
        (f"real-{name}.gguf", craft.build(kvs, small, alignment)),
        (f"real-{name}-shapes.gguf", craft.build(kvs, real, alignment, data_size=0)),
    ]


def crafted_seeds() -> list[tuple[str, bytes]]:
    seeds = [(f"crafted-valid-{n}", b) for n, b in craft.good_files()]
    seeds += [(f"crafted-bad-{n}", b) for n, b, _ in craft.bad_files()]
    seeds += [(f"crafted-odd-{n}", b) for n, b in craft.odd_files()]
    return [(re.sub(r"[^A-Za-z0-9._-]", "_", n) + ".gguf", b) for n, b in seeds]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "fuzz" / "corpus" / "gguf")
    args = ap.parse_args()
    seeds = crafted_seeds()
    for m in MODELS:
        seeds += real_seeds(m)
    names = [n for n, _ in seeds]
    assert len(set(names)) == len(names), "two seeds with one name"
    for n, b in seeds:
        if len(b) >= MAX_SEED_BYTES:
            sys.exit(f"make_fuzz_corpus: {n} is {len(b)} bytes, over the {MAX_SEED_BYTES} limit")
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.gguf"):
        if old.name.startswith(PREFIXES):
            old.unlink()
    for n, b in seeds:
        (args.out / n).write_bytes(b)
    total = sum(len(b) for _, b in seeds)
    print(f"make_fuzz_corpus: wrote {len(seeds)} seeds ({total} bytes) to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
