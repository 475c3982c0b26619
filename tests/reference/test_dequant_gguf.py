"""celer's reference dequantizers (src/quant/dequant*.c, through tests/tools/dequant_dump) against
gguf-py's `gguf.quants.dequantize`, bit for bit (compared as uint32, NaN payloads included):

- the real models: the first ROWS rows of every tensor of smollm2-135m, gemma3-270m and
  qwen2.5-coder-0.5b (Q4_1, Q5_0, Q8_0, Q4_K, Q6_K, F32);
- a small GGUF written here with gguf-py's GGUFWriter, holding random raw blocks of every type
  celer dequantizes (half-float scale fields set to random finite values, subnormals included),
  plus every binary16 and every bfloat16 bit pattern, so types absent from the models are
  covered too;
- the Q8_0 activation quantizer against gguf-py's Q8_0 quantize (and Q8_K against the same
  arithmetic written in numpy here, as gguf-py has no Q8_K).
No expected value is written here; gguf-py (or numpy) computes them all."""

from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest
from gguf import GGMLQuantizationType as T

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CELER_BUILD_DIR") or ROOT / "build")
DUMP = BUILD / "dequant_dump"
MODELS = {
    "smollm2-135m": {T.F32, T.Q4_1, T.Q8_0},
    "gemma3-270m": {T.F32, T.Q5_0, T.Q8_0, T.Q4_K, T.Q6_K},
    "qwen2.5-coder-0.5b": {T.F32, T.Q5_0, T.Q8_0, T.Q4_K, T.Q6_K},
}
ROWS = 16  # first rows of each model tensor

# the types celer dequantizes, with the byte offsets of each block's binary16 scale fields
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def run_dump(*args: str) -> subprocess.CompletedProcess:
    assert DUMP.exists(), f"{DUMP} is missing: build celer first (cmake --build build)"
    r = subprocess.run([str(DUMP), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"dequant_dump {' '.join(args)}: exit {r.returncode}: {r.stderr}"
    return r


def read_dump(path: Path) -> dict[str, tuple[int, np.ndarray]]:
    data = path.read_bytes()
    assert data[:4] == b"CDQ1", f"{path}: not a dequant_dump file"
    out, p = {}, 4
    while p < len(data):
        (n_name,) = struct.unpack_from("<I", data, p)
        name = data[p + 4 : p + 4 + n_name].decode()
        p += 4 + n_name
        qtype, n = struct.unpack_from("<IQ", data, p)
        p += 12
        out[name] = (qtype, np.frombuffer(data, dtype="<f4", count=n, offset=p))
        p += 4 * n
    return out


def ordered(bits: np.ndarray) -> np.ndarray:
    """float32 bits -> integers in the order of the floats, so a difference counts ulps."""
    b = bits.astype(np.int64)
    return np.where(b & 0x80000000, 0x80000000 - b, b)


def mismatch(name: str, got: np.ndarray, want: np.ndarray) -> str | None:
    """None when got and want are the same float32 bits; else a line for the report."""
    want = np.ascontiguousarray(want, dtype=np.float32).reshape(-1)
    if got.shape != want.shape:
        return f"{name}: celer gave {got.size} values, gguf-py {want.size}"
    g, w = got.view(np.uint32), want.view(np.uint32)
    bad = np.nonzero(g != w)[0]
    if bad.size == 0:
        return None
    ulp = np.abs(ordered(g[bad]) - ordered(w[bad]))
    i = bad[0]
    return (f"{name}: {bad.size}/{g.size} values differ, max {ulp.max()} ulp; first at {i}: "
            f"celer {got[i]!r} ({g[i]:#010x}), gguf-py {want[i]!r} ({w[i]:#010x})")


def reference_rows(t, rows: int | None) -> np.ndarray:
    """gguf-py's dequantization of the first rows (all if None) of a reader tensor."""
    data = t.data.reshape(-1, t.data.shape[-1])
    if rows is not None:
        data = data[:rows]
    if t.tensor_type == T.Q8_K:  # not in gguf-py: x = q * d in float32
        blocks = np.ascontiguousarray(data).view(np.uint8).reshape(-1, 292)
        d = blocks[:, :4].copy().view("<f4")
        return blocks[:, 4:260].copy().view(np.int8).astype(np.float32) * d
    return gguf.quants.dequantize(data, t.tensor_type)


def compare_file(path: Path, dumped: dict, rows: int | None) -> tuple[list[str], set]:
    reader = gguf.GGUFReader(path)
    problems, types = [], set()
    for t in reader.tensors:
        assert t.name in dumped, f"{path}: celer dumped no tensor '{t.name}'"
        qtype, got = dumped[t.name]
        assert qtype == int(t.tensor_type), f"{t.name}: celer type {qtype}, gguf-py {t.tensor_type.name}"
        types.add(t.tensor_type)
        if got.size == 0:
            problems.append(f"{t.name}: celer does not dequantize {t.tensor_type.name}")
            continue
        m = mismatch(f"{t.name} ({t.tensor_type.name})", got, reference_rows(t, rows))
        if m:
            problems.append(m)
    return problems, types


def model_path(name: str) -> str:
    r = subprocess.run([str(ROOT / "scripts" / "fetch-model"), name], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"scripts/fetch-model {name} failed: {r.stderr}"
    return r.stdout.strip()


@pytest.mark.parametrize("model", list(MODELS))
def test_model_tensors(model: str, tmp_path: Path) -> None:
    path = model_path(model)
    out = tmp_path / "dump.bin"
    run_dump(path, str(out), "--rows", str(ROWS))
    problems, types = compare_file(Path(path), read_dump(out), ROWS)
    assert not problems, f"{model}: celer != gguf-py:\n" + "\n".join(problems)
    missing = MODELS[model] - types
    assert not missing, f"{model}: expected tensors of {sorted(t.name for t in missing)}; got {sorted(t.name for t in types)}"


def random_halves(rng: np.random.Generator, n: int) -> np.ndarray:
    """n random finite binary16 bit patterns (any sign, exponent 0..30: subnormals included)."""
    h = rng.integers(0, 1 << 16, n, dtype=np.uint32).astype(np.uint16)
    exp = (h >> 10) & 0x1F
    return np.where(exp == 0x1F, h & np.uint16(0x83FF), h).astype(np.uint16)


@pytest.fixture(scope="module")
def random_gguf(tmp_path_factory) -> Path:
    rng = np.random.default_rng(20240611)
    path = tmp_path_factory.mktemp("dequant") / "random.gguf"
    w = gguf.GGUFWriter(str(path), "dequant-test")
    for qtype, offsets in HALF_FIELDS.items():
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        n_rows, per_row = 8, 8  # blocks per row
        raw = rng.integers(0, 256, (n_rows * per_row, size), dtype=np.uint8)
        for off in offsets:
            raw[:, off : off + 2] = random_halves(rng, raw.shape[0]).view(np.uint8).reshape(-1, 2)
        w.add_tensor(f"random.{qtype.name}", raw.reshape(n_rows, per_row * size), raw_dtype=qtype)
    q8k = rng.integers(0, 256, (4 * 2, 292), dtype=np.uint8)
    q8k[:, :4] = (rng.standard_normal(q8k.shape[0]).astype(np.float32) * 1e-2).view(np.uint8).reshape(-1, 4)
    w.add_tensor("random.Q8_K", q8k.reshape(4, 2 * 292), raw_dtype=T.Q8_K)
    every16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)  # every bit pattern, NaNs too
    w.add_tensor("every.F16", every16.view(np.float16).reshape(256, 256))
    w.add_tensor("every.BF16", every16.view(np.uint8).reshape(256, 512), raw_dtype=T.BF16)
    f32 = rng.integers(0, 1 << 32, (16, 64), dtype=np.uint64).astype(np.uint32)
    w.add_tensor("random.F32", f32.view(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_random_blocks(random_gguf: Path, tmp_path: Path) -> None:
    out = tmp_path / "dump.bin"
    run_dump(str(random_gguf), str(out))
    problems, types = compare_file(random_gguf, read_dump(out), None)
    assert not problems, "celer != gguf-py on random blocks:\n" + "\n".join(problems)
    assert types == set(HALF_FIELDS) | {T.F32, T.F16, T.BF16, T.Q8_K}


def activations(rng: np.random.Generator, k: int) -> np.ndarray:
    """Rows of blocks of k: Gaussian at several scales, a zero block, blocks of exact ties
    (amax 127, so d = 1 and every x.5 is a tie), and one with a negative extreme."""
    x = (rng.standard_normal((24, k)) * rng.choice([1e-6, 1e-2, 1.0, 30.0, 1e4], (24, 1))).astype(np.float32)
    x[3] = 0.0
    ties = np.arange(k, dtype=np.float32) % 127 - 63.5
    ties[0] = 127.0
    x[4], x[5] = ties, -ties
    x[6, 7] = -5.0 * np.abs(x[6]).max()
    return x.astype(np.float32)


def test_quantize_q8_0(tmp_path: Path) -> None:
    x = activations(np.random.default_rng(7), 32)
    (tmp_path / "x.f32").write_bytes(x.tobytes())
    run_dump("--quantize", "q8_0", str(tmp_path / "x.f32"), str(tmp_path / "q.bin"))
    got = np.frombuffer((tmp_path / "q.bin").read_bytes(), dtype=np.uint8).reshape(-1, 34)
    want = gguf.quants.quantize(x, T.Q8_0).reshape(-1, 34)
    bad = np.nonzero((got != want).any(axis=1))[0]
    assert bad.size == 0, f"Q8_0 blocks {bad.tolist()} differ; first: celer {got[bad[0]].tolist()}, gguf-py {want[bad[0]].tolist()}"


def test_quantize_q8_K(tmp_path: Path) -> None:
    x = activations(np.random.default_rng(8), 256)
    (tmp_path / "x.f32").write_bytes(x.tobytes())
    run_dump("--quantize", "q8_K", str(tmp_path / "x.f32"), str(tmp_path / "q.bin"))
    got = np.frombuffer((tmp_path / "q.bin").read_bytes(), dtype=np.uint8).reshape(-1, 292)
    # the header's definition, with gguf-py's Q8_0 arithmetic: d = amax / 127, q = roundf(x * (1/d))
    d = np.abs(x).max(axis=1, keepdims=True) / np.float32(127)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    q = gguf.quants.np_roundf(x * inv).astype(np.int8)
    bsums = q.reshape(-1, 16, 16).astype(np.int16).sum(axis=2, dtype=np.int16)
    want = np.concatenate([d.astype("<f4").view(np.uint8), q.view(np.uint8), bsums.astype("<i2").view(np.uint8)], axis=1)
    bad = np.nonzero((got != want).any(axis=1))[0]
    assert bad.size == 0, f"Q8_K blocks {bad.tolist()} differ"
    assert (np.abs(q).max(axis=1)[np.abs(x).max(axis=1) > 0] == 127).all()
