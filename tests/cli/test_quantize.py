"""`celer quantize` (issue 6): what it writes is what mlx_lm.convert writes, and bad input is refused.

Byte-level agreement with mlx_lm.convert, without mlx: tests/data/mlx_dirs/ holds what
mlx_lm.convert made of the tiny models' bfloat16 Hugging Face directories (tiny_models.write_dir,
regenerated here with numpy); `celer quantize` of the same directory with the same settings must
give the same tensors (names, dtypes, shapes, bytes) and quantization block
(roundtrip.tensors_digest). The same for the tiny models' GGUF files (float32, with the llama
converter's Q/K permutation and Gemma's +1 norms), which `celer quantize` reads back into Hugging
Face form and rounds to bfloat16: the result must again be mlx_lm.convert's bytes.
(The SmolLM2 round trips in all six formats, with generation on both sides, are in
tests/reference/test_mlx_parity.py.)

Errors follow test_generate_errors.py's rule: exit 2, nothing on stdout, one line on stderr naming
the fact and the fix, no crash; and nothing is left at OUT or OUT.partial.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "reference"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import roundtrip  # noqa: E402
import tiny_models  # noqa: E402
from gguf_craft import rewrite  # noqa: E402

CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
CRASH_TEXT = re.compile(r"Sanitizer|runtime error|Segmentation|core dumped|Assertion|internal error|Traceback")
COMMITTED = sorted(p.name for p in tiny_models.MLX_DIRS.iterdir() if p.is_dir())


def celer(*args) -> subprocess.CompletedProcess:
    r = subprocess.run([CELER, *map(str, args)], stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    r.out = r.stdout.decode("utf-8", "replace")
    r.err = r.stderr.decode("utf-8", "replace")
    return r


def assert_refused(r: subprocess.CompletedProcess, pattern: str, out: Path | None = None) -> str:
    assert r.returncode >= 0, f"killed by signal {-r.returncode}: {r.err}"
    assert not CRASH_TEXT.search(r.err), r.err
    assert r.returncode == 2, f"exit {r.returncode}, want 2: {r.err}"
    assert r.out == ""
    lines = r.err.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("celer"), f"want one error line: {r.err!r}"
    assert re.search(pattern, lines[0]), f"/{pattern}/ not in {lines[0]!r}"
    if out is not None:
        assert not out.exists(), f"{out} was left behind"
        assert not Path(str(out) + ".partial").exists(), f"{out}.partial was left behind"
    return lines[0]


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sources")
    for base in tiny_models.DIR_BASES:
        tiny_models.write_dir(f"{base}-hf-bf16", d / f"{base}-hf-bf16")
        tiny_models.write_gguf(base, d / f"{base}.gguf")
    return d


def quantize(src: Path, out: Path, q: dict) -> None:
    r = celer("quantize", src, out, *roundtrip.quantize_args(q))
    assert r.returncode == 0, f"celer quantize {src.name}: exit {r.returncode}: {r.err}"
    assert r.out == ""


@pytest.mark.parametrize("name", COMMITTED)
@pytest.mark.parametrize("source", ["hf-bf16", "gguf"])
def test_same_bytes_as_mlx_convert(sources: Path, tmp_path: Path, name: str, source: str) -> None:
    base, _ = tiny_models.dir_model(name)
    q = tiny_models.dir_quantization(name)
    src = sources / (f"{base}-hf-bf16" if source == "hf-bf16" else f"{base}.gguf")
    out = tmp_path / "out"
    quantize(src, out, q)
    want = tiny_models.MLX_DIRS / name
    assert roundtrip.tensors_digest(out) == roundtrip.tensors_digest(want), (
        f"celer quantize {src.name} differs from mlx_lm.convert's {name}: {roundtrip.first_difference(out, want)}")
    cfg, ref = (json.loads((d / "config.json").read_text()) for d in (out, want))
    assert cfg["quantization"] == cfg["quantization_config"] == ref["quantization"]
    for key in ("model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "vocab_size", "tie_word_embeddings"):
        assert cfg.get(key) == ref.get(key), f"config.json {key}: {cfg.get(key)} vs mlx_lm.convert's {ref.get(key)}"
    # celer runs what it wrote
    r = celer("generate", "-m", out, "-p", "hi", "-n", "4")
    assert r.returncode == 0, r.err


# ---- bad input ------------------------------------------------------------------------------

@pytest.mark.parametrize("args, pattern", [
    (["--mode", "int4"], r"unknown mode 'int4'.*affine, mxfp4, mxfp8, nvfp4"),
    (["--bits", "7"], r"affine 7-bit group 64 is not an MLX quantization.*--bits 2, 3, 4, 5, 6 or 8"),
    (["--group-size", "48"], r"affine 4-bit group 48 is not an MLX quantization.*--group-size 32, 64 or 128"),
    (["--mode", "nvfp4", "--group-size", "32"], r"nvfp4 4-bit group 32 is not an MLX quantization"),
    (["--mode", "mxfp4", "--bits", "8"], r"mxfp4 8-bit group 32 is not an MLX quantization"),
    (["--bits", "x"], r"--bits wants"),
    (["--group-size", "-64"], r"--group-size wants"),
    (["--dtype", "float64"], r"dtype 'float64'.*--dtype bfloat16, float16 or float32"),
    (["--threads", "0"], r"--threads wants"),
    (["--frobnicate"], r"unknown option '--frobnicate'"),
])
def test_bad_options(sources: Path, tmp_path: Path, args: list[str], pattern: str) -> None:
    out = tmp_path / "out"
    assert_refused(celer("quantize", sources / "tiny-qwen3-hf-bf16", out, *args), pattern, out)


def test_arguments(tmp_path: Path) -> None:
    assert_refused(celer("quantize"), r"give the input model and the output directory")
    assert_refused(celer("quantize", tmp_path), r"give the input model and the output directory")
    assert_refused(celer("quantize", tmp_path, tmp_path / "a", tmp_path / "b"), r"unexpected argument")
    r = celer("quantize", "--help")
    assert r.returncode == 0 and "usage: celer quantize IN OUT" in r.out and "--group-size" in r.out


def test_output_exists(sources: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep").write_text("mine")
    assert_refused(celer("quantize", sources / "tiny-qwen3-hf-bf16", out), rf"{re.escape(str(out))} already exists")
    assert (out / "keep").read_text() == "mine" and sorted(os.listdir(out)) == ["keep"]


def test_output_parent_missing(sources: Path, tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "out"
    assert_refused(celer("quantize", sources / "tiny-qwen3-hf-bf16", out), r"cannot create .*no/such/out\.partial", out)


def test_missing_input(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert_refused(celer("quantize", tmp_path / "nothing", out), r"nothing: no such file or directory", out)


def test_already_quantized(tmp_path: Path) -> None:
    out = tmp_path / "out"
    src = tiny_models.MLX_DIRS / "tiny-qwen3-mlx-q4g64"
    assert_refused(celer("quantize", src, out), r"already quantized; give the unquantized checkpoint", out)


def test_unsupported_architecture(sources: Path, tmp_path: Path) -> None:
    src = rewrite(sources / "tiny-qwen3.gguf", tmp_path / "mamba.gguf", arch="mamba")
    out = tmp_path / "out"
    assert_refused(celer("quantize", src, out), r"architecture 'mamba' has no MLX export.*llama, qwen2, qwen3, gemma3, qwen3moe and qwen2moe",
                   out)


def test_missing_expert(sources: Path, tmp_path: Path) -> None:
    """config.json promises more experts than the checkpoint holds: the first missing one is named."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(sources / "tiny-qwen3moe-hf-bf16", src)
    cfg = json.loads((src / "config.json").read_text())
    cfg["num_experts"] = 20
    (src / "config.json").write_text(json.dumps(cfg))
    out = tmp_path / "out"
    assert_refused(celer("quantize", src, out), r"model\.layers\.0\.mlp\.experts\.16\.\w+_proj\.weight' is missing", out)


def test_truncated_shard(sources: Path, tmp_path: Path) -> None:
    import shutil

    src = tmp_path / "src"
    shutil.copytree(sources / "tiny-qwen3-hf-bf16", src)
    shard = next(src.glob("model-00002-*.safetensors"))
    shard.write_bytes(shard.read_bytes()[:-100])
    out = tmp_path / "out"
    assert_refused(celer("quantize", src, out), re.escape(shard.name), out)


def test_unquantizable_tensor_type(sources: Path, tmp_path: Path) -> None:
    """A directory tensor in a dtype celer does not read as float (I32 here) is named."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(sources / "tiny-qwen3-hf-bf16", src)
    name = "model.norm.weight"
    shard = next(f for f in sorted(src.glob("*.safetensors")) if name.encode() in f.read_bytes()[:1 << 16])
    data = bytearray(shard.read_bytes())
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    header[name]["dtype"] = "I16"  # same size as BF16: the file stays well-formed
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (n - len(h)) if len(h) <= n else b""
    assert len(h) == n
    shard.write_bytes(bytes(data[:8]) + h + bytes(data[8 + n:]))
    out = tmp_path / "out"
    assert_refused(celer("quantize", src, out), rf"tensor '{re.escape(name)}' is I16", out)
