"""Writes tests/data/mlx_quant/quantize_{affine,mxfp4,mxfp8,nvfp4}.safetensors: source matrices and
what mlx.core.quantize (CPU) makes of them, for tests/test_mlx_quantize.c, which checks celer's
reference quantizer (src/quant/mlx_quantize.c) against them byte for byte without mlx.

Sources, per dtype (F32, BF16, F16; each quantized in its own dtype, as mlx does):
  * "mixed": seeded random rows of mixed magnitudes (1e-3 to 30) with constant, zero and
    one-signed rows and outliers (make_mlx_quant_fixtures.weights), of shapes (3, 384) (affine) or
    (3, 128), (65, 128) or (65, 64), and single rows of 3 groups.
  * "hard": rows built to sit on each decision mlx makes, group by group: values exactly on the
    codes' rounding ties (affine k + 1/2 steps, E2M1 midpoints, E4M3 midpoints); group maxima a
    hair either side of M * 2^n, where the E8M0 exponent (rounded up) steps, and M * 2^(n + 1/2),
    where mlx's rint(log2) before it changes; for nvfp4, E4M3 scale midpoints and the (448, 480)
    band, which the encoder saturates; symmetric groups (|min| = |max|); constant and
    near-constant groups (the eps scale); subnormals of the dtype; values near the dtype's
    largest; and groups of 16 whose nvfp4 scale rounds to zero.
  * "special": NaN (both signs), +inf and -inf, alone and mixed with finite values.
Affine covers bits 2, 3, 4, 5, 6, 8 x group sizes 32, 64, 128; mxfp4, mxfp8 and nvfp4 their one
setting; nvfp4 also with mlx's optional float32 global scale (the source's largest magnitude,
as mlx-lm uses it, and a few fixed ones), and a (2, 48) shape (3 groups of 16 per row).

Each file is a safetensors file (deterministic: sorted names, no padding but the header's) whose
"__metadata__" holds the generator, mlx's version, the seed and "entries": a JSON list of
{"name", "mode", "bits", "group_size", "src", "src_dtype", "rows", "cols", "weight", "scales",
["biases"], ["global_scale"]} naming the tensors: the source (F32, F16, or BF16), mlx's packed
weight (U32), scales (the source dtype for affine, else U8), biases (affine) and the global scale
(a one-element F32). The random numbers are SplitMix64 with exact arithmetic
(make_mlx_quant_fixtures.stream), so with the same mlx, rerunning reproduces the files byte for
byte (`make check-reference` runs it with --check).

Usage: make_mlx_quantize_fixtures.py [--out DIR] [--check] [--big ROWS]
  --check     write to a temporary folder and compare with DIR byte for byte (exit 1 on a difference)
  --big ROWS  also a (ROWS, 384) random source per dtype and every positive finite BF16 and F16
              value as a group maximum: many megabytes, for a one-off check with
              `test_mlx_quantize DIR/quantize_*.safetensors`, never for committing
Needs mlx (tests/requirements-reference.txt).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import math
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_mlx_quant_fixtures as mq  # noqa: E402  (SplitMix64 streams, weights(), safetensors)

OUT = mq.OUT
SEED = mq.SEED  # the streams are keyed by SEED and a name: names here all start "quantize:"

AFFINE_BITS = mq.AFFINE_BITS
AFFINE_GROUPS = mq.AFFINE_GROUPS
DTYPES = mq.DTYPES
FP_MODES = mq.FP_MODES
NP_DTYPES = {"F32": np.float32, "F16": np.float16}


def key(*parts) -> str:
    return "quantize:" + ":".join(str(p) for p in parts)


def u01(k: str, n: int) -> np.ndarray:
    return mq.uniform(k, n)


# ---- hard rows: float32 values, exactly representable where it matters; the cast to the source
# dtype (mlx's, round to nearest even) happens once for the whole matrix -------------------------


def chunk(values, n: int = 32, fill: float = 0.0) -> list[float]:
    """values padded to n (with fill), or cut to n."""
    v = list(values)[:n]
    return v + [fill] * (n - len(v))


def affine_hard(dt: str) -> np.ndarray:
    """(rows, 128): each 32 wide chunk a self-contained group for group size 32; for 64 and 128
    neighbouring chunks make up larger groups."""
    rows: list[list[float]] = []
    # ties: min 0 and max n make the scale exactly -1 (bias n), so w = k + 1/2 rounds half to
    # even; one chunk per bit width, and the same mirrored (bias -n, scale +1) and scaled by 2^-10
    for nb in (3, 7, 15, 31, 63, 255):
        half = [k + 0.5 for k in range(nb)][:30]
        if nb > 60:  # spread over the range: the top of it too
            half = [(k * nb // 29) + 0.5 for k in range(29)] + [nb - 0.5]
        c = chunk([0.0, float(nb)] + half)
        rows.append(c + [-x for x in c] + [x * 2.0**-10 for x in c] + [x * 2.0**6 for x in c])
    # symmetric groups (|min| == |max|: the maximum is the edge, the scale negative), near-constant,
    # constant, tiny (below eps / 2: q0 = 0), and a range just under and over n * eps
    sym = chunk([1.5, -1.5] + [(k - 15) * 0.1 for k in range(30)])
    one = np.float32(1.0)
    nxt = float(np.nextafter(one, np.float32(2)))
    near = chunk([1.0, nxt] * 16)
    rows.append(sym + [-x for x in sym] + chunk([], fill=0.37) + near)
    rows.append(chunk([], fill=3e-8) + chunk([], fill=-3e-8) + chunk([0.0, 1e-7] * 16) + chunk([0.0, 2e-6] * 16))
    # subnormals of the dtype (of F32 for BF16 too: same exponent range), and values near the top
    tiny = {"F32": 1e-40, "BF16": 1e-39, "F16": 1e-6}[dt]
    big = {"F32": 1e37, "BF16": 1e37, "F16": 6e4}[dt]
    u = u01(key("affine-hard", dt), 128)
    rows.append([float((x - 0.3) * tiny) for x in u])
    rows.append([float((x - 0.5) * big) for x in u[::-1]])
    # one outlier per group and an all-negative group
    w = (u01(key("affine-hard-o", dt), 128) - 0.5).tolist()
    for j in range(0, 128, 32):
        w[j + 7] = 40.0
    w[96:128] = [-abs(x) - 1.0 for x in w[96:128]]
    rows.append(w)
    return np.array(rows, dtype=np.float32)


E2M1_MIDS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def fp4_tie_groups(p: float, n: int) -> list[list[float]]:
    """Groups whose maximum is 6p (so the scale is exactly p when p is a power of 2 that the
    dtype and E4M3 hold) and whose other values are p times each E2M1 midpoint (ties), both
    signs, and values just off them, and small negatives that round to zero: 32 values, as one
    group of 32 or two of 16."""
    v = [m * p for m in E2M1_MIDS] + [-m * p for m in E2M1_MIDS]
    v += [0.1 * p, -0.1 * p, -0.24 * p, 5.5 * p, -6.0 * p, 0.26 * p, -2.6 * p, 4.9 * p]
    v += [(m + 2.0**-6) * p for m in E2M1_MIDS] + [(-m - 2.0**-6) * p for m in E2M1_MIDS]
    if n == 32:
        return [chunk([6.0 * p] + v, 32)]
    return [chunk([6.0 * p] + v[:15], 16), chunk([-6.0 * p] + v[15:], 16)]


def threshold_maxima(dt: str, M: float, ns) -> list[float]:
    """Group maxima around M * 2^n, where the E8M0 exponent (rounded up) steps, and around
    M * 2^(n + 1/2), where mlx's rint(log2) changes its mind before the step up: the dtype's
    values nearest each and a few steps either side (float32 steps, for F32)."""
    out = []
    with np.errstate(over="ignore"):
        for n in ns:
            for c in (np.float32(M * 2.0**n), np.float32(M * math.sqrt(2.0) * 2.0**n)):
                if dt == "F32":
                    if not np.isfinite(c):
                        continue
                    b = int(c.view(np.uint32))
                    out += [float(np.array(b + d, dtype=np.uint32).view(np.float32)) for d in (-2, -1, 0, 1, 2, 50)]
                elif dt == "BF16":
                    b = (int(c.view(np.uint32)) + 0x8000) >> 16
                    out += [float(np.array((b + d) << 16, dtype=np.uint32).view(np.float32)) for d in (-1, 0, 1)]
                else:
                    h = np.float16(c)
                    if not np.isfinite(h) or h == 0:
                        continue
                    b = int(h.view(np.uint16))
                    out += [float(np.array(b + d, dtype=np.uint16).view(np.float16)) for d in (-1, 0, 1)]
    return [x for x in out if x > 0 and math.isfinite(x)]


def groups_to_rows(groups: list[list[float]], cols: int) -> np.ndarray:
    per = cols // len(groups[0])
    while len(groups) % per:
        groups.append([0.0] * len(groups[0]))
    flat = [x for g in groups for x in g]
    return np.array(flat, dtype=np.float32).reshape(-1, cols)


def fp_hard(mode: str, dt: str) -> np.ndarray:
    """(rows, 128) for mxfp4 and mxfp8, (rows, 64) for nvfp4; one decision per group."""
    bits, gs = FP_MODES[mode]
    M = 448.0 if mode == "mxfp8" else 6.0
    lo_n = {"F32": -140, "BF16": -130, "F16": -24}[dt]
    hi_n = {"F32": 120, "BF16": 120, "F16": 13}[dt]
    groups: list[list[float]] = []
    # exact scales 2^s (powers of two the dtype holds), E2M1 ties, or for mxfp8 E4M3 ties
    for s in (-8, -3, 0, 1, 5):
        p = 2.0**s
        if mode == "mxfp8":
            # a maximum of exactly 448 keeps the scale at p, so the values are E4M3's ties and
            # neighbours as they are; a maximum of 500 doubles it, halving 464 into a tie
            v = [448.0, 440.0, 432.0, 424.0, -436.0, 1.0625, 1.1875, 2.0**-7, 3 * 2.0**-10, 5 * 2.0**-10,
                 2.0**-6 + 2.0**-10, 2.0**-6 - 2.0**-11, 0.0, -0.0, 2.0**-12, -(2.0**-10), 17.0, 19.0, 300.0,
                 312.0, -328.0, 0.3, -0.7, 6.6, 1e-5, 232.0, 248.0, -200.0, 216.0, 52.0, 44.0, -0.001953125]
            groups.append(chunk([x * p for x in v], gs))
            v = [500.0, 464.0, 470.0, 479.0, 480.0, -466.0, 456.0, 496.0, 488.0, -504.0, 2.0**-8, 2.0**-9]
            groups.append(chunk([x * p for x in v], gs))
        else:
            groups += fp4_tie_groups(p, gs)
    # group maxima at the exponent thresholds (mx) or the E4M3 scale midpoints (nv)
    if mode == "nvfp4":
        mids = [6.0 * (a + b) / 2 for a, b in [(1.0, 1.125), (1.125, 1.25), (1.875, 2.0), (2.0**-9, 2.0**-8),
                                               (2.0**-7, 2.0**-7 + 2.0**-9), (416.0, 448.0), (448.0, 480.0)]]
        maxima = mids + [x * 1.0001 for x in mids] + [x * 0.9999 for x in mids]
        maxima += [2784.0, 2800.0, 2879.0, 2880.0, 3000.0, 6000.0, 6 * 2.0**-10, 6 * 2.0**-11, 6 * 2.0**-8]
    else:
        ns = list(range(lo_n, lo_n + 6)) + list(range(-12, 12)) + list(range(hi_n - 4, hi_n + 1))
        maxima = threshold_maxima(dt, M, ns)
    u = u01(key(mode, "hard", dt), len(maxima) * gs)
    for i, m in enumerate(maxima):
        g = [float(m * (2 * u[i * gs + j] - 1) * 0.9) for j in range(gs)]
        g[(i * 7) % gs] = m if i % 2 == 0 else -m
        groups.append(g)
    # subnormals of the dtype (the F32 and BF16 ones give E8M0 bytes that wrap below zero)
    tiny = {"F32": [1e-40, 3e-43, 1e-45 * 7], "BF16": [1e-39, 1e-40], "F16": [1e-6, 1e-7, 6e-8]}[dt]
    for t in tiny:
        uu = u01(key(mode, "tiny", dt, t), gs)
        groups.append([float((x - 0.4) * t) for x in uu])
    # the dtype's largest magnitudes
    big = {"F32": 3e38, "BF16": 3e38, "F16": 65504.0}[dt]
    uu = u01(key(mode, "big", dt), gs)
    groups.append([float((x - 0.5) * 2 * big) for x in uu])
    groups.append(chunk([], gs, fill=0.0))
    groups.append(chunk([], gs, fill=-0.0))
    groups.append(chunk([], gs, fill=0.37))
    return groups_to_rows(groups, 128 if gs == 32 else 64)


def special(cols: int, gs: int) -> np.ndarray:
    """NaN and inf: one case per group of gs (cols a multiple of gs)."""
    nan, neg_nan = np.float32(np.nan), np.array(0xFFC00000, dtype=np.uint32).view(np.float32)
    cases = [
        {0: nan}, {3: neg_nan}, "all-nan", {1: np.inf}, {2: -np.inf}, "all-inf",
        {0: np.inf, 5: -np.inf}, {0: nan, 4: np.inf}, {6: nan, 7: -np.inf, 9: neg_nan},
    ]
    groups = []
    for i, c in enumerate(cases):
        g = ((u01(key("special", cols, gs, i), gs) - 0.5) * 4).astype(np.float32)
        if c == "all-nan":
            g[:] = nan
        elif c == "all-inf":
            g[:] = np.inf
        else:
            for j, v in c.items():
                g[j % gs] = v
        groups.append(g)
    flat = np.concatenate(groups)
    flat = np.concatenate([flat, np.zeros((-flat.size) % cols, dtype=np.float32)])
    return flat.reshape(-1, cols)


def every_max(dt: str, M: float, gs: int) -> np.ndarray:
    """--big: every positive finite value of dtype as a group maximum (next to random values)."""
    if dt == "BF16":
        m = (np.arange(1, 0x7F80, dtype=np.uint32) << 16).view(np.float32)
    elif dt == "F16":
        m = np.arange(1, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float32)
    else:
        return np.zeros((0, 128), dtype=np.float32)
    u = u01(key("every", dt, gs), m.size * gs).reshape(m.size, gs)
    g = (m[:, None] * (2 * u - 1) * 0.95).astype(np.float32)
    g[:, 0] = m
    g = g.reshape(-1)
    return np.concatenate([g, np.zeros((-g.size) % 128, dtype=np.float32)]).reshape(-1, 128)


# ---- mlx ----------------------------------------------------------------------------------


class Fixture:
    def __init__(self, mx):
        self.mx = mx
        self.tensors: dict[str, np.ndarray] = {}
        self.entries: list[dict] = []

    def source(self, name: str, w32: np.ndarray, dt: str):
        """The float32 matrix rounded to dt by mlx; stored once under name, returned as mlx."""
        mx = self.mx
        w = mx.array(w32).astype(mq.mx_dtype(mx, dt))
        if name not in self.tensors:
            self.tensors[name] = mq.fixture_array(mx, w)
        return w

    def add(self, name: str, mode: str, bits: int, gs: int, dt: str, src: str, w, global_scale=None) -> None:
        mx = self.mx
        gsa = None if global_scale is None else mx.array(global_scale, dtype=mx.float32)
        out = mx.quantize(w, group_size=gs, bits=bits, mode=mode, global_scale=gsa)
        e = {"name": name, "mode": mode, "bits": bits, "group_size": gs, "src": src, "src_dtype": dt,
             "rows": int(w.shape[0]), "cols": int(w.shape[1]), "weight": name + ".weight", "scales": name + ".scales"}
        assert out[0].dtype == mx.uint32
        self.tensors[name + ".weight"] = mq.fixture_array(mx, out[0])
        self.tensors[name + ".scales"] = mq.fixture_array(mx, out[1])
        if mode == "affine":
            assert out[1].dtype == w.dtype and out[2].dtype == w.dtype
            e["biases"] = name + ".biases"
            self.tensors[name + ".biases"] = mq.fixture_array(mx, out[2])
        else:
            assert len(out) == 2 and out[1].dtype == mx.uint8
        if global_scale is not None:
            e["global_scale"] = name + ".global_scale"
            self.tensors[name + ".global_scale"] = np.array([global_scale], dtype=np.float32)
        self.entries.append(e)

    def write(self, path: str) -> None:
        meta = {
            "generator": "tests/reference/make_mlx_quantize_fixtures.py",
            "mlx": self.mx.__version__,
            "seed": str(SEED),
            "entries": json.dumps(self.entries, separators=(",", ":")),
        }
        mq.write_safetensors(path, self.tensors, meta)


def affine(mx, big: int) -> Fixture:
    fx = Fixture(mx)
    for dt in DTYPES:
        srcs = {
            "mixed-3x384": mq.weights(key("affine", dt, "3x384"), 3, 384),
            "mixed-65x128": mq.weights(key("affine", dt, "65x128"), 65, 128),
            "hard": affine_hard(dt),
            "special": special(128, 32),
        }
        for gs in AFFINE_GROUPS:
            srcs[f"row-1x{3 * gs}"] = mq.weights(key("affine", dt, f"1x{3 * gs}"), 1, 3 * gs)
        if big:
            srcs[f"big-{big}x384"] = mq.weights(key("affine", dt, "big"), big, 384)
        for sname, w32 in srcs.items():
            src = f"src-{dt}-{sname}"
            w = fx.source(src, w32, dt)
            for bits in AFFINE_BITS:
                for gs in AFFINE_GROUPS:
                    if sname.startswith("row-") and sname != f"row-1x{3 * gs}":
                        continue
                    if sname == "mixed-65x128" and not (bits in (4, 3) or gs == 64):
                        continue  # the size: 65 rows for 3 and 4 bits, and for group 64
                    fx.add(f"b{bits}-g{gs}-{dt}-{sname}", "affine", bits, gs, dt, src, w)
    return fx


def fp_mode(mx, mode: str, big: int) -> Fixture:
    bits, gs = FP_MODES[mode]
    M = 448.0 if mode == "mxfp8" else 6.0
    fx = Fixture(mx)
    for dt in DTYPES:
        srcs = {
            "mixed-3x128": mq.weights(key(mode, dt, "3x128"), 3, 128),
            "mixed-65x64": mq.weights(key(mode, dt, "65x64"), 65, 64),
            "row-1x96": mq.weights(key(mode, dt, "1x96"), 1, 96),
            "hard": fp_hard(mode, dt),
            "special": special(64, gs),
        }
        if mode == "nvfp4":
            srcs["mixed-2x48"] = mq.weights(key(mode, dt, "2x48"), 2, 48)
        if big:
            srcs[f"big-{big}x384"] = mq.weights(key(mode, dt, "big"), big, 384)
            srcs["every-max"] = every_max(dt, M, gs)
        for sname, w32 in srcs.items():
            if w32.size == 0:
                continue
            src = f"src-{dt}-{sname}"
            w = fx.source(src, w32, dt)
            fx.add(f"{dt}-{sname}", mode, bits, gs, dt, src, w)
            if mode == "nvfp4" and sname in ("mixed-3x128", "hard", "mixed-2x48"):
                # the global scale as mlx-lm makes it (the largest magnitude), and fixed ones
                # (2688 makes the factor exactly 1; 1e6 pushes scales into E4M3's subnormals)
                amax = float(np.float32(np.abs(np.array(w.astype(mx.float32))).max()))
                for i, g in enumerate((amax, 1.0, 3.5, 1e-3, 2688.0, 1e6)):
                    if sname != "hard" and i > 1:
                        continue
                    fx.add(f"{dt}-{sname}-global{i}", mode, bits, gs, dt, src, w, float(np.float32(g)))
    return fx


def generate(out_dir: str, big: int = 0) -> None:
    import mlx.core as mx

    mx.set_default_device(mx.cpu)
    os.makedirs(out_dir, exist_ok=True)
    affine(mx, big).write(os.path.join(out_dir, "quantize_affine.safetensors"))
    for mode in FP_MODES:
        fp_mode(mx, mode, big).write(os.path.join(out_dir, f"quantize_{mode}.safetensors"))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--big", type=int, default=0, metavar="ROWS")
    a = ap.parse_args(argv)
    if a.big and (a.check or os.path.abspath(a.out) == os.path.abspath(OUT)):
        ap.error("--big files are not for committing: pass --out DIR outside tests/data, without --check")
    if not a.check:
        generate(a.out, a.big)
        for f in sorted(os.listdir(a.out)):
            if f.startswith("quantize_"):
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
            print(f"{a.out}: {len(names)} quantize files reproduced byte for byte")
        return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
