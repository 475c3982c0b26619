"""A model another tool downloaded is found by its hub id (ORG/NAME) in the Hugging Face cache
(models--ORG--NAME/snapshots/REV, refs/main naming REV), wherever HF_HUB_CACHE, HF_HOME or
XDG_CACHE_HOME put it; a missing one is a one-line error that names the folder looked in."""
import json
import os
import struct
import subprocess
from pathlib import Path

import pytest

CELER = os.environ.get("CELER_BIN", "build/celer")


def tiny_dir(d: Path, layers: int) -> None:
    """A model directory celer info reads: config.json and one small safetensors file; the layer
    count tells snapshots apart."""
    d.mkdir(parents=True)
    (d / "config.json").write_text(json.dumps({
        "model_type": "llama", "hidden_size": 64, "num_hidden_layers": layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 300, "max_position_embeddings": 128,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0}))
    data = struct.pack("<64f", *([1.0] * 64))
    header = json.dumps({"model.norm.weight": {"dtype": "F32", "shape": [64], "data_offsets": [0, len(data)]}})
    header += " " * (-len(header) % 8)
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode() + data)


def cache(root: Path, org: str, name: str, revs: list[str], main: str | None) -> None:
    repo = root / f"models--{org}--{name}"
    for i, r in enumerate(revs):
        tiny_dir(repo / "snapshots" / r, i + 1)
    if main is not None:
        (repo / "refs").mkdir(parents=True)
        (repo / "refs" / "main").write_text(main + "\n")


def info(model: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([CELER, "info", model, "--json"], capture_output=True, text=True, env={**os.environ, **env},
                          timeout=60)


@pytest.mark.parametrize("var,sub", [("HF_HUB_CACHE", ""), ("HF_HOME", "hub"), ("XDG_CACHE_HOME", "huggingface/hub")])
def test_found_by_id(tmp_path: Path, var: str, sub: str) -> None:
    root = tmp_path / sub if sub else tmp_path
    cache(root, "org", "Tiny-4bit", ["0123abc", "fedcba9"], "fedcba9")
    env = {k: "" for k in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")} | {var: str(tmp_path)}
    r = info("org/Tiny-4bit", env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["name"] == "org/Tiny-4bit"
    assert out["hparams"]["n_layer"] == 2  # refs/main's revision (the second snapshot), not the first


def test_single_snapshot_without_ref(tmp_path: Path) -> None:
    cache(tmp_path, "org", "m", ["only1"], None)
    r = info("org/m", {"HF_HUB_CACHE": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["hparams"]["n_layer"] == 1


def test_several_snapshots_without_ref(tmp_path: Path) -> None:
    cache(tmp_path, "org", "m", ["a1", "b2"], None)
    r = info("org/m", {"HF_HUB_CACHE": str(tmp_path)})
    assert r.returncode == 2 and r.stdout == ""
    line = r.stderr.strip()
    assert "\n" not in line and "2 snapshots" in line and "refs/main" in line


def test_not_in_cache(tmp_path: Path) -> None:
    r = info("org/absent", {"HF_HUB_CACHE": str(tmp_path)})
    assert r.returncode == 2 and r.stdout == ""
    line = r.stderr.strip()
    assert "\n" not in line and str(tmp_path / "models--org--absent") in line and "hf download org/absent" in line


def test_ref_to_missing_snapshot(tmp_path: Path) -> None:
    cache(tmp_path, "org", "m", ["a1"], "zz9")
    r = info("org/m", {"HF_HUB_CACHE": str(tmp_path)})
    assert r.returncode == 2 and "zz9" in r.stderr and "\n" not in r.stderr.strip()


def test_paths_are_not_ids(tmp_path: Path) -> None:
    """./x/y and ../x are paths: a missing one is 'no such file', never a cache lookup."""
    for p in ("./org/m", "../org", "/abs/org/m", "a/b/c"):
        r = info(p, {"HF_HUB_CACHE": str(tmp_path)})
        assert r.returncode == 2 and "no such file" in r.stderr and "Hugging Face cache (no" not in r.stderr
