#!/usr/bin/env python3
"""Writes the seed files of tests/fuzz/corpus/safetensors/ (stdlib only; the output is committed).

Each file is laid out as the reference writer (huggingface/safetensors) lays it out: tensors
sorted by dtype alignment then name, packed back to back, the JSON header padded with spaces
to a multiple of 8. Run from anywhere: python3 tests/fuzz/make_safetensors_corpus.py
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors")

BITS = {"F64": 64, "I64": 64, "U64": 64, "F32": 32, "I32": 32, "U32": 32, "F16": 16, "BF16": 16,
        "I16": 16, "U16": 16, "I8": 8, "U8": 8, "BOOL": 8, "F8_E4M3": 8, "F8_E5M2": 8,
        "F8_E8M0": 8, "F4": 4}


def nbytes(dtype, shape):
    n = 1
    for d in shape:
        n *= d
    return n * BITS[dtype] // 8


def pattern(n, seed):
    """Deterministic filler bytes."""
    x = seed & 0xFFFFFFFF
    out = bytearray(n)
    for i in range(n):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        out[i] = x >> 16 & 0xFF
    return bytes(out)


def bf16(values):
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def write(name, tensors, metadata=None):
    """tensors: list of (name, dtype, shape, data or None)."""
    order = sorted(tensors, key=lambda t: (-BITS[t[1]], t[0]))
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for i, (tname, dtype, shape, data) in enumerate(order):
        size = nbytes(dtype, shape)
        data = data if data is not None else pattern(size, i + 1)
        assert len(data) == size, tname
        header[tname] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        blobs.append(data)
        offset += size
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    os.makedirs(OUT, exist_ok=True)
    # One MLX affine 4-bit layer (group 64): weight (out, in * 4 / 32) U32, scales and biases
    # (out, in / 64) BF16, as mlx-lm writes a quantized Linear; plus an unquantized norm.
    out_dim, in_dim, group = 16, 128, 64
    p = "model.layers.0.self_attn.q_proj"
    write("mlx_4bit_layer.safetensors", [
        (p + ".weight", "U32", [out_dim, in_dim * 4 // 32], None),
        (p + ".scales", "BF16", [out_dim, in_dim // group], bf16([0.01 * (i + 1) for i in range(out_dim * 2)])),
        (p + ".biases", "BF16", [out_dim, in_dim // group], bf16([-0.08 * (i + 1) for i in range(out_dim * 2)])),
        ("model.layers.0.input_layernorm.weight", "BF16", [in_dim], bf16([1.0] * in_dim)),
    ], {"format": "mlx"})
    # Plain F32 tensors with metadata, as torch's save_file writes them.
    write("f32_metadata.safetensors", [
        ("model.embed_tokens.weight", "F32", [8, 4], b"".join(struct.pack("<f", i / 8) for i in range(32))),
        ("model.norm.weight", "F32", [4], struct.pack("<4f", 1, 1, 1, 1)),
        ("lm_head.bias", "F32", [], struct.pack("<f", 0.5)),
    ], {"format": "pt", "source": "celer fuzz corpus"})
    # No tensors, with and without metadata.
    write("empty.safetensors", [])
    write("empty_metadata.safetensors", [], {"format": "mlx"})
    # One of each other dtype, including a zero-sized tensor and packed sub-byte types.
    write("dtypes.safetensors", [
        ("f64", "F64", [2], None), ("i64", "I64", [1, 2], None), ("f16", "F16", [3], None),
        ("i16", "I16", [2, 2], None), ("u16", "U16", [1], None), ("i32", "I32", [2], None),
        ("i8", "I8", [5], None), ("bool", "BOOL", [3], None), ("e4m3", "F8_E4M3", [4], None),
        ("e5m2", "F8_E5M2", [2], None), ("e8m0", "F8_E8M0", [2], None), ("f4", "F4", [2, 4], None),
        ("empty", "F32", [0, 7], None),
    ])


if __name__ == "__main__":
    main()
