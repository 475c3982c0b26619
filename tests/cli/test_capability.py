"""celer info says, per storage type in the model, what the CPU backend does with it (the CPU row
of the capability table): native types run as stored, MLX formats run natively at their quantized
size, types without a kernel are refused with the types to use instead; and what it says agrees
with what loading does (a native model loads without a conversion note, a refused one exits 2).
`--backend cuda|rocm` shows the GPU rows, which refuse everything in a build without that backend."""
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
def test_mlx_native_agrees_with_load(tmp_path: Path, name: str, storage: str) -> None:
    d = tmp_path / name
    shutil.copytree(DIRS / name, d)
    cap = types_of(d)[storage]["cpu"]
    assert cap["decision"] == "native" and "quantized size" in cap["detail"], cap
    g = run("generate", "-m", d, "-p", "hi", "-n", "1", "--no-chat")
    assert g.returncode == 0, g.stderr
    assert "dequantized" not in g.stderr and "converted" not in g.stderr, g.stderr


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_gpu_rows_refuse_without_a_gpu_backend(backend: str) -> None:
    """A build without the GPU backend (CI's): `info --backend cuda|rocm` says so for every type,
    with the backend to use instead (a GPU build's rows are checked on the GPU machine)."""
    r = run("info", DIRS / "tiny-qwen3-mlx-q4g64", "--backend", backend, "--json")
    assert r.returncode == 0, r.stderr
    types = json.loads(r.stdout)["types"]
    assert set(types) == {"affine4-g64", "BF16"}, types  # scales and biases count with their weights
    for t, v in types.items():
        assert v[backend]["decision"] == "reject", (t, v)
        assert f"has no {backend} backend" in v[backend]["detail"], v
        assert "cpu" in v[backend]["detail"], v
    text = run("info", DIRS / "tiny-qwen3-mlx-q4g64", "--backend", backend)
    assert text.returncode == 0 and f"{backend}: reject" in text.stdout, text.stdout


def test_backend_option_errors() -> None:
    r = run("info", DIRS / "tiny-qwen3-mlx-q4g64", "--backend", "metal")
    assert r.returncode == 2 and "--backend wants cpu, cuda or rocm, got 'metal'" in r.stderr and not r.stdout
    r = run("info", "--backend", "rocm")  # the devices of a backend this build lacks
    assert r.returncode == 2 and "no GPU backend" in r.stderr, r.stderr
