"""celer info says, per storage type in the model, what the CPU backend does with it (the CPU row
of the capability table): native types run as stored, MLX formats are converted at load, types
without a kernel are refused with the types to use instead; and what it says agrees with what
loading does (a converted model loads and says so on stderr, a refused one exits 2)."""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

CELER = os.environ.get("CELER_BIN", "build/celer")
ROOT = Path(__file__).resolve().parents[2]
DIRS = ROOT / "tests" / "data" / "mlx_dirs"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CELER, *map(str, args)], capture_output=True, text=True, timeout=120)


def types_of(model) -> dict:
    r = run("info", model, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["types"]


@pytest.mark.parametrize("t", ["Q4_0", "Q8_0", "Q4_K", "Q6_K", "Q5_K", "F16"])
def test_native_gguf(tmp_path: Path, t: str) -> None:
    path = tmp_path / f"m-{t}.gguf"
    r = run("synth", "--arch", "llama", "--layers", "1", "--embd", "256", "--ff", "512", "--heads", "4",
            "--kv-heads", "2", "--vocab", "512", "--type", t, "-o", path)
    assert r.returncode == 0, r.stderr
    cap = types_of(path)[t]["cpu"]
    assert cap["decision"] == "native", cap
    assert ("packed" in cap["detail"]) == (t not in ("Q5_K", "F16")), cap


@pytest.mark.parametrize("t", ["Q2_K", "Q3_K", "IQ2_XXS"])
def test_rejected_gguf_agrees_with_load(tmp_path: Path, t: str) -> None:
    gguf = pytest.importorskip("gguf")
    from test_generate_errors import rewrite  # one GGUF rewriter for the CLI tests

    base = tmp_path / "base.gguf"
    r = run("synth", "--arch", "llama", "--layers", "1", "--embd", "256", "--ff", "512", "--heads", "4",
            "--kv-heads", "2", "--vocab", "512", "--type", "F32", "-o", base)
    assert r.returncode == 0, r.stderr
    retyped = rewrite(base, tmp_path / f"r-{t}.gguf", retype={"blk.0.ffn_up.weight": gguf.GGMLQuantizationType[t]})
    cap = types_of(retyped)[t]["cpu"]
    assert cap["decision"] == "reject" and "requantize" in cap["detail"], cap
    g = run("generate", "-m", retyped, "-p", "hi", "-n", "1")
    assert g.returncode == 2 and t in g.stderr and "blk.0.ffn_up.weight" in g.stderr, g.stderr


@pytest.mark.parametrize("name,storage", [("tiny-qwen3-mlx-q4g64", "affine4-g64"),
                                          ("tiny-qwen3-mlx-q8g32", "affine8-g32"),
                                          ("tiny-qwen3-mlx-mxfp4", "mxfp4")])
def test_mlx_converted_agrees_with_load(tmp_path: Path, name: str, storage: str) -> None:
    d = tmp_path / name
    shutil.copytree(DIRS / name, d)
    cap = types_of(d)[storage]["cpu"]
    assert cap["decision"] == "convert", cap
    g = run("generate", "-m", d, "-p", "hi", "-n", "1", "--no-chat")
    assert g.returncode == 0, g.stderr
    says_dequantized = "dequantized at load" in g.stderr
    assert says_dequantized == (storage != "affine4-g64"), g.stderr  # 4-bit becomes Q4_1, silently exact
