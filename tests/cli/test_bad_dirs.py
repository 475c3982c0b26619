"""Broken Hugging Face and MLX model directories (issue 6: "a missing shard, a tensor whose shape
disagrees with the config, scales of the wrong size, an unknown mode → clear error naming the
tensor and the file; nothing crashes").

Each case copies a model directory that runs into tmp_path, breaks one thing in it, and runs
`celer generate -m DIR -p hi -n 1` (and `celer info DIR`). The rule (test_generate_errors.py's,
for errors found before the model is loaded, which all of these are but the last, a prompt token
past the embedding table: the status line comes after the weights and the tokenizer load):
  * exit code 2 and nothing on stdout;
  * stderr is exactly one line, starting with "celer", that names the file or directory and the
    tensor or config key at fault (and, for a tensor of a sharded checkpoint, the shard);
  * no crash, trace or sanitizer report (run this against build-asan/celer too:
    CELER_BIN=build-asan/celer).
`celer info` reads config.json, tokenizer_config.json, the index and every shard's header, but
neither tokenizer.json nor any tensor's values: for a fault in what it reads it fails by the same
rule; for a fault that only loading the model finds (a shape, a dtype, a missing tensor, the
tokenizer) it may describe the directory instead, but must not crash.

The directories: tiny-llama as tiny_models.write_dir writes it in bfloat16 (two shards and
model.safetensors.index.json, as transformers saves it; needs numpy), and the committed MLX
conversions of it under tests/data/mlx_dirs/ (affine 4-bit group 64, mxfp4; a single
model.safetensors with an index, as mlx_lm.convert writes it).

mlx accepts affine scales and biases of different float dtypes (mlx.core.dequantize and
quantized_matmul promote both to their common type), but mlx.core.quantize and mlx_lm.convert
never write them so: celer rejects such a pair, naming both tensors' dtypes (test_scales_wrong_dtype).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).resolve().parents[2]
CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
MLX_DIRS = ROOT / "tests" / "data" / "mlx_dirs"
STATUS_LINE = re.compile(r"celer: .+ \(\w+, \d+ layers\) on \w+, context \d+")
CRASH_TEXT = re.compile(r"Sanitizer|runtime error|Segmentation|core dumped|Assertion|internal error|Traceback")

SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
INDEX = "model.safetensors.index.json"


def celer(*args: str | Path) -> subprocess.CompletedProcess:
    r = subprocess.run([CELER, *map(str, args)], stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    r.out = r.stdout.decode("utf-8", "replace")
    r.err = r.stderr.decode("utf-8", "replace")
    return r


def assert_no_crash(r: subprocess.CompletedProcess) -> None:
    assert r.returncode >= 0, f"killed by signal {-r.returncode}; stderr: {r.err!r}"
    assert not CRASH_TEXT.search(r.err), f"crash report on stderr:\n{r.err}"


def assert_error(r: subprocess.CompletedProcess, pattern: str, names: tuple[str, ...]) -> str:
    assert_no_crash(r)
    assert r.returncode == 2, f"exit {r.returncode}, want 2; stderr: {r.err!r}"
    assert r.out == "", f"stdout should be empty, got {r.out!r}"
    assert r.err.endswith("\n") and r.err.count("\n") == 1, f"stderr is not exactly one line: {r.err!r}"
    line = r.err[:-1]
    assert line.startswith("celer") and len(line) > len("celer: "), f"not an error line: {line!r}"
    assert re.search(pattern, line), f"stderr does not match /{pattern}/: {line!r}"
    for n in names:
        assert n in line, f"the error does not name {n!r}: {line!r}"
    return line


# ---- safetensors, byte by byte -------------------------------------------------------------------

DTYPE_SIZE = {"BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2, "F16": 2, "BF16": 2, "U32": 4, "I32": 4, "F32": 4,
              "U64": 8, "I64": 8, "F64": 8}


def st_read(path: Path) -> tuple[dict | None, dict[str, list]]:
    """(__metadata__, {name: [dtype, shape, bytes]}) of a safetensors file."""
    b = path.read_bytes()
    n = struct.unpack_from("<Q", b)[0]
    header = json.loads(b[8:8 + n])
    meta = header.pop("__metadata__", None)
    data = b[8 + n:]
    return meta, {k: [v["dtype"], list(v["shape"]), data[v["data_offsets"][0]:v["data_offsets"][1]]]
                  for k, v in header.items()}


def st_write(path: Path, meta: dict | None, tensors: dict[str, list]) -> None:
    header, data, off = {}, [], 0
    if meta is not None:
        header["__metadata__"] = meta
    for name in sorted(tensors):
        dtype, shape, b = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(b)]}
        data.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(data))


class ModelDir:
    """A copy of a model directory, to break."""

    def __init__(self, path: Path):
        self.path = path

    def shards(self) -> list[Path]:
        return sorted(self.path.glob("model*.safetensors"))

    def shard_of(self, tensor: str) -> Path:
        for p in self.shards():
            if tensor in st_read(p)[1]:
                return p
        raise KeyError(tensor)

    def edit(self, tensor: str, fn: Callable[[list], list | None]) -> Path:
        """Replaces [dtype, shape, bytes] of tensor by fn's result (None removes it); returns its shard."""
        p = self.shard_of(tensor)
        meta, ts = st_read(p)
        new = fn(ts[tensor])
        if new is None:
            del ts[tensor]
        else:
            ts[tensor] = new
        st_write(p, meta, ts)
        return p

    def reshape(self, tensor: str, shape: list[int], dtype: str | None = None) -> Path:
        """The tensor with another shape (and dtype): its bytes cut or zero-padded to match."""
        def f(t):
            dt = dtype or t[0]
            n = DTYPE_SIZE[dt]
            for s in shape:
                n *= s
            return [dt, shape, t[2][:n] + bytes(max(0, n - len(t[2])))]
        return self.edit(tensor, f)

    def shape(self, tensor: str) -> list[int]:
        return st_read(self.shard_of(tensor))[1][tensor][1]

    def remove(self, tensor: str, from_index: bool = True) -> None:
        self.edit(tensor, lambda t: None)
        if from_index and (self.path / INDEX).exists():
            self.edit_json(INDEX, lambda j: j["weight_map"].pop(tensor))

    def edit_json(self, name: str, fn: Callable[[dict], object]) -> None:
        p = self.path / name
        j = json.loads(p.read_text())
        fn(j)
        p.write_text(json.dumps(j, indent=2))

    def config(self, **changes) -> None:
        """config.json with keys set (a value of None deletes the key)."""
        def f(j):
            for k, v in changes.items():
                if v is None:
                    j.pop(k, None)
                else:
                    j[k] = v
        self.edit_json("config.json", f)


# ---- the directories -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hf_base(tmp_path_factory) -> Path:
    """tiny-llama in bfloat16, two shards and an index (tests/reference/tiny_models.py)."""
    pytest.importorskip("numpy")
    sys.path.insert(0, str(ROOT / "tests" / "reference"))
    import tiny_models

    d = tiny_models.write_dir("tiny-llama-hf-bf16", tmp_path_factory.mktemp("base") / "tiny-llama-hf-bf16")
    assert sorted(p.name for p in d.glob("*.safetensors")) == [SHARD1, SHARD2]
    return d


def copy(src: Path, tmp_path: Path) -> ModelDir:
    dst = tmp_path / src.name
    shutil.copytree(src, dst)
    return ModelDir(dst)


@pytest.fixture
def hf(hf_base: Path, tmp_path: Path) -> ModelDir:
    return copy(hf_base, tmp_path)


@pytest.fixture
def mlx(tmp_path: Path) -> ModelDir:
    return copy(MLX_DIRS / "tiny-llama-mlx-q4g64", tmp_path)


@pytest.fixture
def mxfp4(tmp_path: Path) -> ModelDir:
    return copy(MLX_DIRS / "tiny-llama-mlx-mxfp4", tmp_path)


def check(d: ModelDir, pattern: str, names: tuple[str, ...], info: bool = True) -> str:
    """generate fails by the rule; so does info (info=True), or info at least does not crash."""
    line = assert_error(celer("generate", "-m", d.path, "-p", "hi", "-n", "1"), pattern, names)
    r = celer("info", d.path)
    if info:
        assert_error(r, pattern, names)
    else:
        assert_no_crash(r)
        if r.returncode:
            assert_error(r, r".", (str(d.path),))
    return line


def test_the_directories_run(hf: ModelDir, mlx: ModelDir, mxfp4: ModelDir) -> None:
    """The baseline: each copy the cases break generates, and info describes it."""
    for d in (hf, mlx, mxfp4):
        r = celer("generate", "-m", d.path, "-p", "hi", "-n", "1")
        assert_no_crash(r)
        assert r.returncode == 0, r.err
        r = celer("info", d.path)
        assert r.returncode == 0 and r.err == "", r.err


# ---- shards and the index ---------------------------------------------------------------------------

def test_missing_shard(hf: ModelDir) -> None:
    held = st_read(hf.path / SHARD2)[1]
    (hf.path / SHARD2).unlink()
    line = check(hf, r"cannot be read", (f"{hf.path}/{INDEX}", SHARD2))
    # and a tensor it should hold, so that one knows what is missing
    assert any(f"'{t}'" in line for t in held), line


def test_index_names_a_tensor_not_in_its_shard(hf: ModelDir) -> None:
    hf.edit_json(INDEX, lambda j: j["weight_map"].update({"model.layers.0.mlp.extra_proj.weight": SHARD1}))
    check(hf, r"no such tensor", (f"{hf.path}/{INDEX}", "'model.layers.0.mlp.extra_proj.weight'", SHARD1))


def test_index_names_the_wrong_shard(hf: ModelDir) -> None:
    t = "model.layers.2.mlp.down_proj.weight"
    assert hf.shard_of(t).name == SHARD2
    hf.edit_json(INDEX, lambda j: j["weight_map"].update({t: SHARD1}))
    check(hf, r"no such tensor", (INDEX, f"'{t}'", SHARD1))


def test_index_names_a_missing_tensor(hf: ModelDir) -> None:
    """The tensor is gone from its shard, but the index still lists it."""
    t = "model.layers.1.self_attn.v_proj.weight"
    shard = hf.shard_of(t).name
    hf.remove(t, from_index=False)
    check(hf, r"no such tensor", (INDEX, f"'{t}'", shard))


def test_index_not_json(hf: ModelDir) -> None:
    (hf.path / INDEX).write_text('{"weight_map": {"model.norm.weight": ')
    check(hf, r"JSON|json", (f"{hf.path}/{INDEX}",))


def test_index_without_weight_map(hf: ModelDir) -> None:
    (hf.path / INDEX).write_text('{"metadata": {}}')
    check(hf, r"weight_map", (f"{hf.path}/{INDEX}",))


def test_index_names_a_path_outside(hf: ModelDir) -> None:
    hf.edit_json(INDEX, lambda j: j["weight_map"].update({"model.norm.weight": "../" + SHARD2}))
    check(hf, r"not a plain file name", (INDEX, "'model.norm.weight'"))


def test_truncated_data(hf: ModelDir) -> None:
    """A download cut short: the shard and the first tensor that runs past its end."""
    p = hf.path / SHARD2
    p.write_bytes(p.read_bytes()[:-1000])
    line = check(hf, r"truncated|past the end|beyond|end of the file", (str(p),))
    assert re.search(r"tensor '[^']+'|'model\.[^']+'", line), line


def test_truncated_header(hf: ModelDir) -> None:
    p = hf.path / SHARD1
    p.write_bytes(p.read_bytes()[:200])
    check(hf, r"header|truncated", (str(p),))


def test_header_longer_than_file(hf: ModelDir) -> None:
    p = hf.path / SHARD1
    b = p.read_bytes()
    p.write_bytes(struct.pack("<Q", len(b) + 1) + b[8:])
    check(hf, r"header", (str(p),))


def test_header_length_huge(hf: ModelDir) -> None:
    p = hf.path / SHARD2
    b = p.read_bytes()
    p.write_bytes(struct.pack("<Q", 2**64 - 8) + b[8:])
    check(hf, r"header", (str(p),))


def test_header_not_json(hf: ModelDir) -> None:
    p = hf.path / SHARD1
    b = p.read_bytes()
    n = struct.unpack_from("<Q", b)[0]
    p.write_bytes(b[:8] + b"{" * n + b[8 + n:])
    check(hf, r"JSON|json|header", (str(p),))


def test_data_offsets_disagree_with_shape(hf: ModelDir) -> None:
    """The header says a (64,) norm but gives it 126 bytes."""
    t = "model.norm.weight"
    p = hf.edit(t, lambda x: [x[0], x[1], x[2][:-2]])
    check(hf, r".", (str(p), f"'{t}'"))


def test_single_file_truncated(mlx: ModelDir) -> None:
    p = mlx.path / "model.safetensors"
    p.write_bytes(p.read_bytes()[:-4096])
    line = check(mlx, r"truncated|past the end|beyond|end of the file", (str(p),))
    assert re.search(r"tensor '[^']+'|'model\.[^']+'", line), line


# ---- tensors against config.json ---------------------------------------------------------------------

def test_q_proj_rows(hf: ModelDir) -> None:
    t = "model.layers.1.self_attn.q_proj.weight"
    assert hf.shape(t) == [64, 64]
    p = hf.reshape(t, [48, 64])
    check(hf, r"48 x 64.*64 x 64", (f"'{t}'", str(p)), info=False)


def test_q_proj_transposed(hf: ModelDir) -> None:
    t = "model.layers.0.mlp.up_proj.weight"
    assert hf.shape(t) == [192, 64]
    p = hf.reshape(t, [64, 192])
    check(hf, r"64 x 192.*192 x 64", (f"'{t}'", str(p)), info=False)


def test_weight_with_three_dimensions(hf: ModelDir) -> None:
    t = "model.layers.0.self_attn.o_proj.weight"
    p = hf.reshape(t, [1, 64, 64])
    check(hf, r"is 1 x 64 x 64, the config says 64 x 64", (f"'{t}'", str(p)), info=False)


@pytest.mark.parametrize("shape,said", [([], "a scalar"), ([0, 64], "0 x 64"), ([64 * 64], "4096"),
                                        ([2, 32, 64], "2 x 32 x 64")], ids=["scalar", "empty", "flat", "split"])
def test_weight_odd_shape(hf: ModelDir, shape: list[int], said: str) -> None:
    t = "model.layers.0.self_attn.q_proj.weight"
    p = hf.reshape(t, shape)
    check(hf, rf"is {said}, the config says 64 x 64", (f"'{t}'", str(p)), info=False)


def test_quantized_weight_odd_shape(mlx: ModelDir) -> None:
    t = "model.layers.0.self_attn.q_proj.weight"
    p = mlx.reshape(t, [64 * 8])
    check(mlx, r"shape \(512\)", (t, str(p)), info=False)


def test_embedding_vocab(hf: ModelDir) -> None:
    t = "model.embed_tokens.weight"
    assert hf.shape(t) == [384, 64]
    p = hf.reshape(t, [383, 64])
    check(hf, r"383 x 64.*384 x 64", (f"'{t}'", str(p)), info=False)


def test_norm_length(hf: ModelDir) -> None:
    t = "model.layers.2.input_layernorm.weight"
    p = hf.reshape(t, [63])
    check(hf, r"63 elements.*64", (f"'{t}'", str(p)), info=False)


def test_final_norm_as_matrix(hf: ModelDir) -> None:
    t = "model.norm.weight"
    p = hf.reshape(t, [1, 64])
    check(hf, r"2 dimensions", (f"'{t}'", str(p)), info=False)


def test_missing_down_proj(hf: ModelDir) -> None:
    t = "model.layers.2.mlp.down_proj.weight"
    hf.remove(t)
    check(hf, r"missing", (str(hf.path), f"'{t}'"), info=False)


def test_missing_norm(hf: ModelDir) -> None:
    t = "model.layers.0.post_attention_layernorm.weight"
    hf.remove(t)
    check(hf, r"missing", (str(hf.path), f"'{t}'"), info=False)


@pytest.mark.parametrize("dtype", ["I32", "U8", "F64", "I64"])
def test_weight_dtype(hf: ModelDir, dtype: str) -> None:
    t = "model.layers.1.mlp.gate_proj.weight"
    p = hf.reshape(t, [192, 64], dtype)
    check(hf, rf"\b{dtype}\b", (f"'{t}'", str(p)), info=False)


def test_norm_dtype(hf: ModelDir) -> None:
    t = "model.layers.1.input_layernorm.weight"
    p = hf.reshape(t, [64], "I32")
    check(hf, r"\bI32\b", (f"'{t}'", str(p)), info=False)


def test_u32_weight_without_quantization(mlx: ModelDir) -> None:
    """Packed MLX codes, but config.json has no quantization block."""
    mlx.config(quantization=None, quantization_config=None)
    line = check(mlx, r"U32.*quantization", (str(mlx.path), "'model.embed_tokens.weight'"), info=False)
    assert "config.json" in line, line


# ---- MLX quantization ---------------------------------------------------------------------------------

def test_scales_too_few_groups(mlx: ModelDir) -> None:
    t = "model.layers.0.mlp.down_proj.scales"
    assert mlx.shape(t) == [64, 3]
    p = mlx.reshape(t, [64, 2])
    check(mlx, r"\(64, 2\).*\(64, 3\)", (f"{t}", str(p)), info=False)


def test_scales_too_few_rows(mlx: ModelDir) -> None:
    t = "model.layers.1.self_attn.k_proj.scales"
    assert mlx.shape(t) == [32, 1]
    p = mlx.reshape(t, [31, 1])
    check(mlx, r"\(31, 1\).*\(32, 1\)", (f"{t}", str(p)), info=False)


def test_biases_wrong_size(mlx: ModelDir) -> None:
    t = "model.layers.2.mlp.gate_proj.biases"
    p = mlx.reshape(t, [192, 2])
    check(mlx, r"\(192, 2\).*\(192, 1\)", (f"{t}", str(p)), info=False)


def test_scales_wrong_dtype(mlx: ModelDir) -> None:
    """F32 scales beside BF16 biases: see the module docstring."""
    t = "model.layers.0.self_attn.q_proj.scales"
    assert st_read(mlx.shard_of(t))[1][t][0] == "BF16"
    p = mlx.reshape(t, mlx.shape(t), "F32")
    check(mlx, r"BF16 but .* is F32.*one dtype", (f"'{t}'", t.replace("scales", "biases"), str(p)), info=False)


def test_scales_integer_dtype(mlx: ModelDir) -> None:
    t = "model.layers.0.self_attn.q_proj.scales"
    p = mlx.reshape(t, mlx.shape(t), "U8")
    check(mlx, r"\bU8\b", (f"'{t}'", str(p)), info=False)


def test_missing_biases(mlx: ModelDir) -> None:
    t = "model.layers.1.mlp.up_proj.biases"
    mlx.remove(t)
    check(mlx, r"missing", (str(mlx.path), f"'{t}'"), info=False)


def test_missing_scales(mlx: ModelDir) -> None:
    t = "model.layers.1.mlp.up_proj.scales"
    mlx.remove(t)
    check(mlx, r"missing", (str(mlx.path), f"'{t}'"), info=False)


def test_packed_words(mlx: ModelDir) -> None:
    t = "model.layers.0.mlp.gate_proj.weight"
    assert mlx.shape(t) == [192, 8]  # 64 4-bit codes in 8 words
    p = mlx.reshape(t, [192, 7])
    check(mlx, r"\(192, 7\).*\(192, 8\)", (f"{t}", str(p)), info=False)


def test_packed_words_wrong_dtype(mlx: ModelDir) -> None:
    t = "model.layers.0.mlp.gate_proj.weight"
    p = mlx.reshape(t, [192, 16], "U16")
    check(mlx, r"\bU16\b.*\bU32\b", (t, str(p)), info=False)


def test_quantized_embedding_vocab(mlx: ModelDir) -> None:
    for t, cols in (("model.embed_tokens.weight", 8), ("model.embed_tokens.scales", 1),
                    ("model.embed_tokens.biases", 1)):
        p = mlx.reshape(t, [383, cols])
    check(mlx, r"\(383, 8\).*\(384, 64\)", ("model.embed_tokens.weight", str(p)), info=False)


def test_mxfp4_scales_dtype(mxfp4: ModelDir) -> None:
    t = "model.layers.0.mlp.up_proj.scales"
    p = mxfp4.reshape(t, mxfp4.shape(t), "BF16")
    check(mxfp4, r"BF16.*U8", (t, str(p)), info=False)


def test_mxfp4_with_biases(mxfp4: ModelDir) -> None:
    """mxfp4 has no biases: mlx.core.dequantize refuses them, and mlx-lm's strict load would too."""
    t = "model.layers.0.mlp.up_proj"
    sh = mxfp4.shape(t + ".scales")
    p = mxfp4.shard_of(t + ".scales")
    meta, ts = st_read(p)
    ts[t + ".biases"] = ["BF16", sh, bytes(2 * sh[0] * sh[1])]
    st_write(p, meta, ts)
    mxfp4.edit_json(INDEX, lambda j: j["weight_map"].update({t + ".biases": p.name}))
    check(mxfp4, r"no biases", (f"{t}.biases", str(p)), info=False)


def quant(d: ModelDir, block: dict) -> None:
    d.config(quantization=block, quantization_config=block)


@pytest.mark.parametrize("block,pattern,key", [
    ({"group_size": 64, "bits": 4, "mode": "foo"}, r"'foo'", "mode"),
    ({"group_size": 64, "bits": 7, "mode": "affine"}, r"\b7\b", "bits"),
    ({"group_size": 48, "bits": 4, "mode": "affine"}, r"\b48\b", "group_size"),
    ({"group_size": 16, "bits": 4, "mode": "affine"}, r"\b16\b", "group_size"),
    ({"group_size": 64, "bits": 0, "mode": "affine"}, r"'bits'", "bits"),
    ({"group_size": 64, "bits": "4", "mode": "affine"}, r".", "bits"),
    ({"group_size": 32, "bits": 8, "mode": "mxfp4"}, r"mxfp4", "bits"),
    ({"group_size": 64, "bits": 4, "mode": 4}, r".", "mode"),
], ids=["mode-foo", "bits-7", "group-48", "group-16", "bits-0", "bits-string", "mxfp4-8bit", "mode-number"])
def test_quantization_block(mlx: ModelDir, block: dict, pattern: str, key: str) -> None:
    quant(mlx, block)
    check(mlx, pattern, (f"{mlx.path}/config.json", "quantization", key))


def test_override_bits_9(mlx: ModelDir) -> None:
    m = "model.layers.1.mlp.up_proj"
    quant(mlx, {"group_size": 64, "bits": 4, "mode": "affine", m: {"group_size": 64, "bits": 9}})
    check(mlx, r"\b9\b", (f"{mlx.path}/config.json", m, "bits"))


def test_override_disagrees_with_tensors(mlx: ModelDir) -> None:
    """A per-layer override that says 8 bits where the tensors hold 4-bit codes."""
    m = "model.layers.1.self_attn.o_proj"
    quant(mlx, {"group_size": 64, "bits": 4, "mode": "affine", m: {"group_size": 64, "bits": 8}})
    check(mlx, r"\(64, 8\).*\(64, 16\)", (f"{m}.weight", f"{mlx.path}/model.safetensors"), info=False)


def test_config_group_size_disagrees(mlx: ModelDir) -> None:
    """group_size 32 in the config, groups of 64 in the tensors."""
    quant(mlx, {"group_size": 32, "bits": 4, "mode": "affine"})
    check(mlx, r"\(384, 1\).*\(384, 2\)", ("model.embed_tokens.scales", f"{mlx.path}/model.safetensors"),
          info=False)


def test_config_mode_disagrees(mlx: ModelDir) -> None:
    """mxfp4 in the config, affine tensors (BF16 scales, biases) in the files."""
    quant(mlx, {"group_size": 32, "bits": 4, "mode": "mxfp4"})
    check(mlx, r"BF16.*U8", ("model.embed_tokens.scales", f"{mlx.path}/model.safetensors"), info=False)


# ---- config.json ----------------------------------------------------------------------------------------

def test_config_missing(hf: ModelDir) -> None:
    (hf.path / "config.json").unlink()
    check(hf, r"no such file|cannot|missing|not found", (f"{hf.path}/config.json",))


@pytest.mark.parametrize("text", ["", "{", "not json\n", '{"model_type": "llama",}', "[1, 2]", "null"],
                         ids=["empty", "open-brace", "text", "trailing-comma", "array", "null"])
def test_config_not_json(hf: ModelDir, text: str) -> None:
    (hf.path / "config.json").write_text(text)
    check(hf, r".", (f"{hf.path}/config.json",))


def test_model_type_unknown(hf: ModelDir) -> None:
    hf.config(model_type="mamba")
    line = check(hf, r"architecture 'mamba'", (str(hf.path), "model_type"), info=False)
    assert "llama" in line, f"the error should list what celer runs: {line!r}"


def test_model_type_missing(hf: ModelDir) -> None:
    hf.config(model_type=None)
    check(hf, r"model_type", (f"{hf.path}/config.json",))


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                                 "vocab_size"])
def test_config_key_missing(hf: ModelDir, key: str) -> None:
    """Running needs every key of the shape; info (and tokenize, template) describe what is there."""
    hf.config(**{key: None})
    check(hf, rf"\b{key}\b", (f"{hf.path}/config.json",), info=False)


@pytest.mark.parametrize("changes,key", [
    ({"hidden_size": 10**12}, "hidden_size"),
    ({"hidden_size": 2**30}, "hidden_size"),
    ({"hidden_size": -64}, "hidden_size"),
    ({"hidden_size": 64.5}, "hidden_size"),
    ({"hidden_size": "64"}, "hidden_size"),
    ({"num_hidden_layers": 0}, "num_hidden_layers"),
    ({"num_hidden_layers": 10**6}, "num_hidden_layers"),
    ({"num_attention_heads": 0}, "num_attention_heads"),
    ({"num_attention_heads": 10**6}, "num_attention_heads"),
    ({"num_key_value_heads": 0}, "num_key_value_heads"),
    ({"num_key_value_heads": 3}, "num_key_value_heads"),
    ({"head_dim": None, "num_attention_heads": 5, "num_key_value_heads": 5}, "num_attention_heads"),
    ({"head_dim": 0}, "head_dim"),
    ({"head_dim": 10**6}, "head_dim"),
    ({"intermediate_size": 10**9}, "intermediate_size"),
    ({"vocab_size": 10**9}, "vocab_size"),
    ({"max_position_embeddings": 0}, "max_position_embeddings"),
    ({"rms_norm_eps": -1}, "rms_norm_eps"),
    ({"rope_theta": "big"}, "rope_theta"),
], ids=lambda v: "-".join(f"{k}={v[k]}" for k in v) if isinstance(v, dict) else None)
def test_config_absurd(hf: ModelDir, changes: dict, key: str) -> None:
    hf.config(**changes)
    check(hf, rf"\b{key}\b", (f"{hf.path}/config.json",))


def test_head_dim_disagrees_with_tensors(hf: ModelDir) -> None:
    """Five heads of 16 (config) on 64-row q_proj (tensors): the tensor is at fault, by the config."""
    hf.config(num_attention_heads=5, num_key_value_heads=5)
    check(hf, r"64 x 64.*80 x 64", ("'model.layers.0.self_attn.q_proj.weight'", SHARD1), info=False)


def test_untied_without_lm_head(hf: ModelDir) -> None:
    hf.config(tie_word_embeddings=False)
    check(hf, r"missing", (str(hf.path), "'lm_head.weight'"), info=False)


def test_untied_without_lm_head_mlx(mlx: ModelDir) -> None:
    mlx.config(tie_word_embeddings=False)
    check(mlx, r"missing", (str(mlx.path), "'lm_head.weight'"), info=False)


# ---- the tokenizer --------------------------------------------------------------------------------------

def test_tokenizer_missing(hf: ModelDir) -> None:
    (hf.path / "tokenizer.json").unlink()
    check(hf, r"no such file|cannot|missing|not found|no tokenizer", (f"{hf.path}/tokenizer.json",), info=False)


@pytest.mark.parametrize("text", ["", '{"model": ', '{"model": {"type": "BPE", "vocab": 7}}', "[]",
                                  '{"model": {"type": "Unigram", "vocab": []}}'],
                         ids=["empty", "cut", "vocab-number", "array", "unigram"])
def test_tokenizer_malformed(hf: ModelDir, text: str) -> None:
    (hf.path / "tokenizer.json").write_text(text)
    check(hf, r".", (f"{hf.path}/tokenizer.json",), info=False)


def test_tokenizer_config_malformed(hf: ModelDir) -> None:
    (hf.path / "tokenizer_config.json").write_text('{"bos_token": ')
    check(hf, r".", (f"{hf.path}/tokenizer_config.json",))


def test_tokenizer_vocab_larger_than_model(hf: ModelDir) -> None:
    """A tokenizer of 384 tokens for an embedding table of 320 rows does not belong to the weights:
    refused at load, naming both sizes, before any prompt token could read past the table."""
    hf.config(vocab_size=320)
    hf.reshape("model.embed_tokens.weight", [320, 64])
    r = celer("generate", "-m", hf.path, "-p", "hello there", "-n", "1")
    assert_no_crash(r)
    assert r.returncode == 2 and r.out == "", r.err
    line = r.err.strip()
    assert "\n" not in line and line.startswith("celer") and "384 tokens" in line and "320 rows" in line, r.err
