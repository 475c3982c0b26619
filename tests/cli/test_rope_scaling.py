"""RoPE scaling metadata given to `celer generate`: YaRN files that run, and bad ones that must end
in exit 2 with one line naming the key at fault (assert_error in test_generate_errors.py states the
rule: exit 2, nothing on stdout, one line on stderr that names the file and the thing at fault).

The models are a tiny random-weight qwen2 from `celer synth` (head size 32), rewritten with
gguf-py to carry the keys llama.cpp's converter writes for a Hugging Face rope_scaling of type
"yarn" ({arch}.rope.scaling.type, .factor, .original_context_length, and the optional
.yarn_beta_fast, .yarn_beta_slow, .yarn_attn_factor, .yarn_ext_factor). That the YaRN arithmetic
itself is right is checked against mlx-lm by tests/reference/test_mlx_parity.py (tiny-qwen2-yarn),
with the optional keys at their defaults; here, that each optional key is read at all.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_generate_errors import assert_error, celer, rewrite, synth  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CELER_BUILD_DIR") or ROOT / "build")
ARCH = "qwen2"
TINY = ["--arch", ARCH, "--layers", "2", "--embd", "64", "--ff", "128", "--heads", "2", "--kv-heads", "1",
        "--vocab", "512", "--type", "F32"]
SCALING = f"{ARCH}.rope.scaling."
YARN = {"type": "yarn", "factor": 4.0, "original_context_length": 64}


def with_scaling(src: Path, dst: Path, keys: dict, rope_freqs: bool = False) -> Path:
    """A copy of src with {arch}.rope.scaling.<key> = value for each of keys (a str is written as a
    string, an int as u32, a float as f32, as the converter writes them), and with a
    rope_freqs.weight tensor (llama 3's frequency factors, all 1) when rope_freqs is set."""
    gguf = pytest.importorskip("gguf")
    import numpy as np

    extra = {SCALING + k: (v, gguf.GGUFValueType.STRING if isinstance(v, str) else
                           gguf.GGUFValueType.UINT32 if isinstance(v, int) else gguf.GGUFValueType.FLOAT32)
             for k, v in keys.items()}
    tensors = {}
    if rope_freqs:
        r = gguf.GGUFReader(src)
        head_dim = int(r.fields[f"{ARCH}.embedding_length"].contents()) // int(
            r.fields[f"{ARCH}.attention.head_count"].contents())
        tensors["rope_freqs.weight"] = np.ones(head_dim // 2, np.float32)
    return rewrite(src, dst, extra=extra, tensors=tensors)


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return synth(tmp_path_factory.mktemp("rope") / "tiny.gguf", *TINY)


def top1_logits(model: Path) -> list[float]:
    dump = BUILD / "logits_dump"
    assert dump.exists(), f"{dump} is missing: build celer first (cmake --build build)"
    r = subprocess.run([str(dump), str(model), "--ids", "1,300,301,302,303,304,305,306,307,308,309,310",
                        "--top", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return [json.loads(line)["top"][0][1] for line in r.stdout.splitlines()]


# ---- files that run ------------------------------------------------------------------------------

GOOD = {
    "yarn": YARN,  # what the converter writes for Qwen2.5's documented rope_scaling
    "yarn-every-key": {**YARN, "yarn_beta_fast": 16.0, "yarn_beta_slow": 2.0, "yarn_attn_factor": 1.1,
                       "yarn_ext_factor": 0.5},
    "yarn-factor-1": {**YARN, "factor": 1.0},  # no scaling at all
    "yarn-no-original-context": {"type": "yarn", "factor": 4.0},  # the trained context stands in
    "linear": {"type": "linear", "factor": 2.0},
    "none": {"type": "none"},
}


@pytest.mark.parametrize("name", GOOD)
def test_runs(base: Path, tmp_path: Path, name: str) -> None:
    p = with_scaling(base, tmp_path / f"{name}.gguf", GOOD[name])
    r = celer("generate", "-m", p, "-p", "hi", "-n", "2")
    assert r.returncode == 0, r.err


# beta_fast 4 moves the ramp's start from pair 0 to pair 1 (32, the default, and 16 leave it at 0).
@pytest.mark.parametrize("key,value", [("yarn_beta_fast", 4.0), ("yarn_beta_slow", 2.0),
                                       ("yarn_attn_factor", 1.1), ("yarn_ext_factor", 0.5),
                                       ("original_context_length", 128), ("factor", 2.0)])
def test_each_yarn_key_is_read(base: Path, tmp_path: Path, key: str, value) -> None:
    """Changing any one of the keys changes the logits (the parity test only has the defaults).
    `celer synth`'s weights are small, so attention is nearly uniform and the change is small, but
    the forward pass is deterministic (test_yarn_factor_1_is_no_scaling): any change shows."""
    plain = top1_logits(with_scaling(base, tmp_path / "yarn.gguf", YARN))
    other = top1_logits(with_scaling(base, tmp_path / f"{key}.gguf", {**YARN, key: value}))
    assert plain != other, f"{SCALING}{key} = {value} changed nothing"


def test_yarn_factor_1_is_no_scaling(base: Path, tmp_path: Path) -> None:
    assert top1_logits(with_scaling(base, tmp_path / "f1.gguf", {**YARN, "factor": 1.0})) == top1_logits(base)


# ---- files that must not run ---------------------------------------------------------------------

# name → (keys, the keys the error must name, a value it must quote or None where the number is
# not distinctive)
BAD = {
    "beta-fast-equals-slow": ({**YARN, "yarn_beta_fast": 4.0, "yarn_beta_slow": 4.0},
                              ("yarn_beta_fast", "yarn_beta_slow"), "4"),
    "beta-fast-below-slow": ({**YARN, "yarn_beta_fast": 1.0, "yarn_beta_slow": 2.0},
                             ("yarn_beta_fast", "yarn_beta_slow"), "2"),
    "beta-slow-0": ({**YARN, "yarn_beta_slow": 0.0}, ("yarn_beta_slow",), None),
    "original-context-0": ({**YARN, "original_context_length": 0}, ("original_context_length",), None),
    "original-context-string": ({**YARN, "original_context_length": "64"}, ("original_context_length",), None),
    "ext-factor-2": ({**YARN, "yarn_ext_factor": 2.0}, ("yarn_ext_factor",), "2"),
    "ext-factor-negative": ({**YARN, "yarn_ext_factor": -0.5}, ("yarn_ext_factor",), "-0.5"),
    "attn-factor-0": ({**YARN, "yarn_attn_factor": 0.0}, ("yarn_attn_factor",), None),
    "factor-string": ({**YARN, "factor": "4"}, ("rope.scaling.factor",), None),
}


def quotes(line: str, path: Path, value: str) -> bool:
    """value appears in line as a number of its own (the file's path left out)."""
    return re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w.])", line.replace(str(path), "")) is not None


@pytest.mark.parametrize("name", BAD)
def test_bad_yarn(base: Path, tmp_path: Path, name: str) -> None:
    keys, named, value = BAD[name]
    p = with_scaling(base, tmp_path / f"{name}.gguf", keys)
    line = assert_error(celer("generate", "-m", p, "-p", "hi", "-n", "1"), r".", names=(str(p), *named))
    if value is not None:
        assert quotes(line, p, value), f"the error should quote the value {value}: {line!r}"


def test_unknown_scaling_type(base: Path, tmp_path: Path) -> None:
    p = with_scaling(base, tmp_path / "foo.gguf", {"type": "foo", "factor": 4.0})
    line = assert_error(celer("generate", "-m", p, "-p", "hi", "-n", "1"), r"(?i)rope.scaling", names=(str(p), "'foo'"))
    assert "yarn" in line and "linear" in line, f"the error should list the types celer runs: {line!r}"


def test_yarn_with_rope_freqs(base: Path, tmp_path: Path) -> None:
    """Two frequency scalings at once: llama 3's factors as a tensor, and YaRN's from the keys."""
    p = with_scaling(base, tmp_path / "both.gguf", YARN, rope_freqs=True)
    assert_error(celer("generate", "-m", p, "-p", "hi", "-n", "1"), r"(?i)yarn", names=(str(p), "rope_freqs.weight"))


# Not finite: YaRN's arithmetic would turn these into NaN logits.
@pytest.mark.parametrize("key", ["factor", "original_context_length", "yarn_attn_factor"])
def test_yarn_not_finite(base: Path, tmp_path: Path, key: str) -> None:
    p = with_scaling(base, tmp_path / f"inf-{key}.gguf", {**YARN, key: float("inf")})
    assert_error(celer("generate", "-m", p, "-p", "hi", "-n", "1"), r".", names=(str(p), key))
