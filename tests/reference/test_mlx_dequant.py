"""celer's reference MLX dequantizer (src/quant/mlx_quant.c, through tests/tools/mlx_dequant_dump)
against mlx.core.dequantize, bit for bit, without mlx: tests/data/mlx_quant/*.safetensors hold
weights that mlx quantized (and raw packed data), and mlx's dequantized values
(make_mlx_quant_fixtures.py wrote them with mlx 0.32.4 on the CPU).

For every entry, celer's float32 values must have the bits of mlx's output widened to float32.
mlx's output is in the entry's dtype (BF16, F16 or F32; for nvfp4 with a global scale mlx
computes and returns F32 whatever dtype was asked), and widening is exact, so this is stricter
than rounding celer's values to that dtype: celer must produce exactly the dtype's value. The one
exception is NaN: where mlx has a NaN, celer must have a NaN, of any sign and payload (mlx's
NaN bits differ by dtype and CPU: BF16 NaN is always 0x7fc0, F16 NaN is sign | 0x7d00, F32 NaN
carries the x86 propagation payload). The tool also checks each fixture tensor's dtype and shape
against celer's shape rules (celer_mlx_quant_check_tensor) before dequantizing."""

from __future__ import annotations

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CELER_BUILD_DIR") or ROOT / "build")
DUMP = BUILD / "mlx_dequant_dump"
DATA = ROOT / "tests" / "data" / "mlx_quant"
MODES = ("affine", "mxfp4", "mxfp8", "nvfp4")
MLX_VERSION = "0.32.4"


def read_safetensors(path: Path) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Tensors (BF16 as float32, exactly) and metadata of a safetensors file."""
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8 : 8 + n])
    meta = header.pop("__metadata__", {})
    np_types = {"U32": "<u4", "U8": "u1", "F32": "<f4", "F16": "<f2", "BF16": "<u2"}
    out = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        arr = np.frombuffer(data, dtype=np_types[t["dtype"]], count=(b - a) // np.dtype(np_types[t["dtype"]]).itemsize,
                            offset=8 + n + a).reshape(t["shape"])
        if t["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr
    return out, meta


def read_dump(path: Path) -> dict[str, np.ndarray]:
    data = path.read_bytes()
    assert data[:4] == b"CMQ1", f"{path}: not an mlx_dequant_dump file"
    out, p = {}, 4
    while p < len(data):
        (n_name,) = struct.unpack_from("<I", data, p)
        name = data[p + 4 : p + 4 + n_name].decode()
        (n,) = struct.unpack_from("<Q", data, p + 4 + n_name)
        p += 12 + n_name
        out[name] = np.frombuffer(data, dtype="<f4", count=n, offset=p)
        p += 4 * n
    return out


def ordered(bits: np.ndarray) -> np.ndarray:
    """float32 bits -> integers in the order of the floats, so a difference counts ulps."""
    b = bits.astype(np.int64)
    return np.where(b & 0x80000000, 0x80000000 - b, b)


def mismatch(name: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """None when got has want's bits (NaN where want is NaN); else a line for the report."""
    want = np.ascontiguousarray(want, dtype=np.float32).reshape(-1)
    if got.shape != want.shape:
        return f"{name}: celer gave {got.size} values, mlx {want.size}"
    g, w = got.view(np.uint32), want.view(np.uint32)
    nan = np.isnan(want)
    bad = np.nonzero(np.where(nan, ~np.isnan(got), g != w))[0]
    if bad.size == 0:
        return None
    ulp = np.abs(ordered(g[bad]) - ordered(w[bad]))
    i = bad[0]
    return (f"{name}: {bad.size}/{g.size} values differ, max {ulp.max()} ulp; first at {i}: "
            f"celer {got[i]!r} ({g[i]:#010x}), mlx {want[i]!r} ({w[i]:#010x})")


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> dict[str, tuple[dict, dict, dict]]:
    """mode -> (fixture tensors, metadata, celer's values per entry)."""
    assert DUMP.exists(), f"{DUMP} is missing: build celer first (cmake --build build)"
    tmp = tmp_path_factory.mktemp("mlx_dequant")
    out = {}
    for mode in MODES:
        path = DATA / f"{mode}.safetensors"
        assert path.exists(), f"{path} is missing: run tests/reference/make_mlx_quant_fixtures.py"
        r = subprocess.run([str(DUMP), str(path), str(tmp / f"{mode}.bin")], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, f"mlx_dequant_dump {path}: exit {r.returncode}: {r.stderr}"
        tensors, meta = read_safetensors(path)
        out[mode] = (tensors, meta, read_dump(tmp / f"{mode}.bin"))
    return out


@pytest.mark.parametrize("mode", MODES)
def test_bit_identical(mode: str, dumps) -> None:
    tensors, meta, got = dumps[mode]
    assert meta["mlx"] == MLX_VERSION, f"{mode}: fixture written by mlx {meta['mlx']}, expected {MLX_VERSION}"
    entries = json.loads(meta["entries"])
    problems, n_values = [], 0
    for e in entries:
        assert e["mode"] == mode
        want = tensors[e["expected"]]
        assert want.shape == (e["rows"], e["cols"]), f"{e['name']}: mlx's output has shape {want.shape}"
        if e["expected_dtype"] != e["dtype"]:
            # only nvfp4 with a global scale: mlx computes in float32 whatever dtype asks
            assert mode == "nvfp4" and "global_scale" in e and e["expected_dtype"] == "F32", e
        m = mismatch(f"{e['name']} ({e['dtype']})", got[e["name"]], want)
        if m:
            problems.append(m)
        n_values += want.size
    assert not problems, f"{mode}: celer != mlx.core.dequantize:\n" + "\n".join(problems)
    print(f"{mode}: {len(entries)} entries, {n_values} values bit-identical")


def test_coverage(dumps) -> None:
    """The fixtures hold every combination the issue names, so a trimmed fixture fails here."""
    seen = set()
    for mode in MODES:
        for e in json.loads(dumps[mode][1]["entries"]):
            seen.add((e["mode"], e["bits"], e["group_size"], e["dtype"], e["name"].split("-")[0]))
            if e["rows"] % 64 and e["rows"] > 64:
                seen.add((e["mode"], "rows not a multiple of 64"))
    want = {("affine", b, g, d, k) for b in (2, 3, 4, 5, 6, 8) for g in (32, 64, 128) for d in ("F32", "BF16", "F16")
            for k in ("q",)}
    want |= {("affine", b, 32, d, "raw") for b in (2, 3, 4, 5, 6, 8) for d in ("F32", "BF16", "F16")}
    want |= {(m, b, g, d, k) for m, b, g in (("mxfp4", 4, 32), ("mxfp8", 8, 32), ("nvfp4", 4, 16))
             for d in ("F32", "BF16", "F16") for k in ("q", "raw")}
    want |= {(m, "rows not a multiple of 64") for m in MODES}
    missing = want - seen
    assert not missing, f"fixtures lack {sorted(missing, key=str)}"
