"""Writes tests/data/mlx_quant/{affine,mxfp4,mxfp8,nvfp4}.safetensors: weights quantized by mlx
(mlx.core.quantize) and mlx's own dequantization of them (mlx.core.dequantize, CPU), for
test_mlx_dequant.py, which checks celer's reference dequantizer (src/quant/mlx_quant.c) against
them without mlx.

Two kinds of entries per file:
  * "q-..." entries: seeded random float32 matrices, cast to the entry's dtype, quantized with
    mx.quantize and dequantized with mx.dequantize. Rows mix scales (1e-3 to 30, as LLM weights
    and their outliers), and some are constant, zero, one-signed, or carry one outlier. Shapes
    include row counts that are not multiples of 64 (3, 65) and single rows of 3 groups.
  * "raw-..." entries: packed words, scales and biases drawn directly (uniform random codes;
    affine scales and biases as random finite bit patterns of their dtype, over its whole
    exponent range; every E8M0 and every E4M3 scale byte for the fp modes, NaN codes included),
    dequantized with mx.dequantize. They reach what quantize never writes: every code next to
    every scale, overflow to inf, subnormal results, the rounding of each op.
Affine covers bits 2, 3, 4, 5, 6, 8 x group sizes 32, 64, 128 x scale dtypes F32, BF16, F16
(the dtype mlx dequantizes in). The fp modes are dequantized to each of F32, BF16 (mlx's
default) and F16, from weights quantized in each of the three dtypes; nvfp4 also with mlx's
optional global scale.

Each file is a safetensors file (written here, deterministically: sorted names, no padding
but the header's) whose "__metadata__" holds the generator, mlx's version, the seed,
and "entries": a JSON list of {"name", "mode", "bits", "group_size", "dtype", "rows", "cols",
"weight", "scales", ["biases"], ["global_scale"], "expected"} naming the tensors. "expected" is
mlx's output in the dtype mlx returned it in. The random numbers are SplitMix64 with exact
arithmetic, so the files do not depend on numpy's version: with the same mlx, rerunning
reproduces them byte for byte (`make check-reference` runs it with --check).

Usage: make_mlx_quant_fixtures.py [--out DIR] [--check]
  --check   write to a temporary folder and compare with DIR byte for byte (exit 1 on a difference)
Needs mlx (tests/requirements-reference.txt).
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import math
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests", "data", "mlx_quant")
SEED = 20261129

AFFINE_BITS = (2, 3, 4, 5, 6, 8)
AFFINE_GROUPS = (32, 64, 128)
DTYPES = ("F32", "BF16", "F16")
FP_MODES = {"mxfp4": (4, 32), "mxfp8": (8, 32), "nvfp4": (4, 16)}

# ---- random numbers: SplitMix64 on a counter, exact conversions ----------------------------

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def stream(key: str, n: int) -> np.ndarray:
    """n uint64s of SplitMix64 seeded from SEED and key."""
    start = np.uint64(int.from_bytes(hashlib.sha256(f"{SEED}:{key}".encode()).digest()[:8], "little"))
    with np.errstate(over="ignore"):
        z = start + np.arange(1, n + 1, dtype=np.uint64) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def uniform(key: str, n: int) -> np.ndarray:
    """n float64 in [0, 1), exact multiples of 2^-53."""
    return (stream(key, n) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def bell(key: str, shape: tuple[int, ...]) -> np.ndarray:
    """float32, roughly normal with unit variance: the centred sum of 4 uniforms (exact in float64)."""
    n = math.prod(shape)
    u = uniform(key, 4 * n).reshape(4, n).sum(axis=0)
    return ((u - 2.0) * math.sqrt(3.0)).astype(np.float32).reshape(shape)


def weights(key: str, rows: int, cols: int) -> np.ndarray:
    """A float32 (rows, cols) matrix with rows of mixed kinds (see the module docstring)."""
    w = bell(key, (rows, cols))
    scales = np.array([1e-3, 0.02, 0.02, 0.1, 1.0, 30.0], dtype=np.float32)
    pick = (stream(key + ":scale", rows) % np.uint64(len(scales))).astype(np.int64)
    w = w * scales[pick][:, None]
    kinds = stream(key + ":kind", rows) % np.uint64(8)
    for r in range(rows):
        if rows > 1 and r == rows - 1:
            w[r] = np.float32(0.37)  # constant: max == min, mlx's eps scale
        elif rows > 2 and r == rows - 2:
            w[r] = 0.0
        elif kinds[r] == 5:
            w[r] = np.abs(w[r])  # one-signed
        elif kinds[r] == 6:
            w[r] = -np.abs(w[r])
        elif kinds[r] == 7:
            w[r, int(stream(key + f":o{r}", 1)[0] % np.uint64(cols))] *= np.float32(40.0)  # an outlier
    return w.astype(np.float32)


def random_floats(key: str, n: int, dtype: str) -> np.ndarray:
    """n random finite values of dtype as float32: random sign, exponent and mantissa bits over
    the dtype's whole range (subnormals and zeros included)."""
    r = stream(key, n)
    if dtype == "F32":
        b = (r & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        b = np.where((b & 0x7F800000) == 0x7F800000, b & np.uint32(0xBFFFFFFF), b)  # no inf/nan
        return b.view(np.float32)
    b = (r & np.uint64(0xFFFF)).astype(np.uint16)
    if dtype == "BF16":
        b = np.where((b & 0x7F80) == 0x7F80, b & np.uint16(0xBFFF), b).astype(np.uint16)
        return (b.astype(np.uint32) << 16).view(np.float32)
    b = np.where((b & 0x7C00) == 0x7C00, b & np.uint16(0xBFFF), b).astype(np.uint16)
    return b.view(np.float16).astype(np.float32)


# ---- safetensors --------------------------------------------------------------------------

ST_DTYPES = {np.dtype(np.uint32): "U32", np.dtype(np.uint8): "U8", np.dtype(np.float32): "F32",
             np.dtype(np.float16): "F16", np.dtype(np.uint16): "BF16"}  # bf16 kept as its bits


def write_safetensors(path: str, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    header: dict = {"__metadata__": metadata}
    offset, blobs = 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        data = a.astype(a.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": ST_DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":"), sort_keys=False).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for b in blobs:
            f.write(b)


# ---- mlx ----------------------------------------------------------------------------------


def fixture_array(mx, a) -> np.ndarray:
    """An mlx array as numpy for the file: bf16 as its uint16 bits."""
    if a.dtype == mx.bfloat16:
        return np.array(a.view(mx.uint16))
    return np.array(a)


def mx_dtype(mx, name: str):
    return {"F32": mx.float32, "BF16": mx.bfloat16, "F16": mx.float16}[name]


def st_name(mx, dt) -> str:
    return {mx.float32: "F32", mx.bfloat16: "BF16", mx.float16: "F16"}[dt]


def to_mx(mx, x: np.ndarray, dtype: str):
    """float32 values, exactly representable in dtype, as an mlx array of dtype."""
    return mx.array(x).astype(mx_dtype(mx, dtype))


class Fixture:
    def __init__(self):
        self.tensors: dict[str, np.ndarray] = {}
        self.entries: list[dict] = []

    def add(self, mx, name: str, mode: str, bits: int, gs: int, dtype: str, shape, wq, scales, biases,
            expected, global_scale=None, tensor_prefix: str | None = None) -> None:
        p = tensor_prefix or name
        e = {"name": name, "mode": mode, "bits": bits, "group_size": gs, "dtype": dtype,
             "rows": int(shape[0]), "cols": int(shape[1]), "weight": p + ".weight", "scales": p + ".scales"}
        self.tensors[p + ".weight"] = fixture_array(mx, wq)
        self.tensors[p + ".scales"] = fixture_array(mx, scales)
        if biases is not None:
            e["biases"] = p + ".biases"
            self.tensors[p + ".biases"] = fixture_array(mx, biases)
        if global_scale is not None:
            e["global_scale"] = p + ".global_scale"
            self.tensors[p + ".global_scale"] = np.array([global_scale], dtype=np.float32)
        e["expected"] = name + ".expected"
        e["expected_dtype"] = st_name(mx, expected.dtype)
        self.tensors[name + ".expected"] = fixture_array(mx, expected)
        self.entries.append(e)

    def write(self, path: str, mx) -> None:
        meta = {
            "generator": "tests/reference/make_mlx_quant_fixtures.py",
            "mlx": mx.__version__,
            "seed": str(SEED),
            "entries": json.dumps(self.entries, separators=(",", ":")),
        }
        write_safetensors(path, self.tensors, meta)


def affine(mx) -> Fixture:
    fx = Fixture()
    for bits in AFFINE_BITS:
        for gs in AFFINE_GROUPS:
            for dt in DTYPES:
                shapes = [(3, 128), (1, 3 * gs)]
                if (dt == "BF16" and gs == 64) or (bits == 4 and gs == 128):
                    shapes.append((65, 128))
                for rows, cols in shapes:
                    name = f"q-b{bits}-g{gs}-{dt}-{rows}x{cols}"
                    w = to_mx(mx, weights(name, rows, cols), "F32").astype(mx_dtype(mx, dt))
                    wq, s, b = mx.quantize(w, group_size=gs, bits=bits)
                    assert s.dtype == w.dtype and b.dtype == w.dtype
                    y = mx.dequantize(wq, s, b, group_size=gs, bits=bits)
                    fx.add(mx, name, "affine", bits, gs, dt, (rows, cols), wq, s, b, y)
        # raw words and full-range scales and biases (the group size does not change the
        # arithmetic: 32, for the most groups)
        for dt in DTYPES:
            rows, cols, gs = 8, 128, 32
            name = f"raw-b{bits}-g{gs}-{dt}-{rows}x{cols}"
            wq = mx.array(stream(name, rows * cols * bits // 32).astype(np.uint32).reshape(rows, -1))
            s = to_mx(mx, random_floats(name + ":s", rows * cols // gs, dt).reshape(rows, -1), dt)
            b = to_mx(mx, random_floats(name + ":b", rows * cols // gs, dt).reshape(rows, -1), dt)
            y = mx.dequantize(wq, s, b, group_size=gs, bits=bits)
            fx.add(mx, name, "affine", bits, gs, dt, (rows, cols), wq, s, b, y)
    return fx


def fp_mode(mx, mode: str) -> Fixture:
    bits, gs = FP_MODES[mode]
    fx = Fixture()

    def dequant_all(name, shape, wq, s, g=None):
        gsa = None if g is None else mx.array(g, dtype=mx.float32)
        for out in DTYPES:
            y = mx.dequantize(wq, s, mode=mode, global_scale=gsa, dtype=mx_dtype(mx, out))
            fx.add(mx, f"{name}-to-{out}", mode, bits, gs, out, shape, wq, s, None, y, global_scale=g,
                   tensor_prefix=name)

    for dt in DTYPES:
        # (1, 96): 3 groups of 32, 6 of 16. mlx's CPU fp4 quantize and dequantize reshape the
        # whole tensor into 32-element pieces, so a (1, 48) nvfp4 weight fails in mlx itself
        shapes = [(3, 128), (1, 96)] + ([(65, 64)] if dt == "BF16" else [])
        for rows, cols in shapes:
            name = f"q-{dt}-{rows}x{cols}"
            w = to_mx(mx, weights(f"{mode}:{name}", rows, cols), "F32").astype(mx_dtype(mx, dt))
            wq, s = mx.quantize(w, mode=mode)
            dequant_all(name, (rows, cols), wq, s)
            if mode == "nvfp4" and rows == 3:
                # mlx's optional global scale, as used: the tensor's largest magnitude
                g = float(np.float32(np.abs(np.array(w.astype(mx.float32))).max()))
                gname = f"{name}-global"
                wq, s = mx.quantize(w, mode=mode, global_scale=mx.array(g, dtype=mx.float32))
                dequant_all(gname, (rows, cols), wq, s, g)

    # every scale byte, one per row, next to codes that cycle through every code
    rows = 256
    cols = gs if bits == 4 else 32
    name = f"raw-every-scale-{rows}x{cols}"
    codes = (np.arange(rows * cols, dtype=np.uint64) % np.uint64(1 << bits)).astype(np.uint32).reshape(rows, cols)
    if bits == 8:
        codes = ((np.arange(rows, dtype=np.uint32)[:, None] * cols + np.arange(cols, dtype=np.uint32)) % 256)
    per_word = 32 // bits
    words = np.zeros((rows, cols // per_word), dtype=np.uint32)
    for k in range(per_word):
        words |= codes[:, k::per_word].astype(np.uint32) << np.uint32(k * bits)
    wq = mx.array(words)
    s = mx.array(np.arange(rows, dtype=np.uint8).reshape(rows, 1).repeat(cols // gs, axis=1))
    dequant_all(name, (rows, cols), wq, s)
    if mode == "nvfp4":
        for i, g in enumerate((3.5, 1e-3)):
            dequant_all(f"{name}-global{i}", (rows, cols), wq, s, float(np.float32(g)))
    return fx


def generate(out_dir: str) -> None:
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    os.makedirs(out_dir, exist_ok=True)
    affine(mx).write(os.path.join(out_dir, "affine.safetensors"), mx)
    for mode in FP_MODES:
        fp_mode(mx, mode).write(os.path.join(out_dir, f"{mode}.safetensors"), mx)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    if not a.check:
        generate(a.out)
        for f in sorted(os.listdir(a.out)):
            print(f"{os.path.join(a.out, f)}: {os.path.getsize(os.path.join(a.out, f))} bytes")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        generate(tmp)
        names = sorted(os.listdir(tmp))
        bad = [n for n in names if not os.path.exists(os.path.join(a.out, n))
               or not filecmp.cmp(os.path.join(tmp, n), os.path.join(a.out, n), shallow=False)]
        for n in bad:
            print(f"{os.path.join(a.out, n)}: differs from what the generator writes now", file=sys.stderr)
        if not bad:
            print(f"{a.out}: {len(names)} files reproduced byte for byte")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
