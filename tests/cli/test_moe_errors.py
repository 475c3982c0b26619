"""Broken mixture-of-experts models: `celer generate` refuses each with exit 2 and one line
naming the file, the tensor or key at fault and what it should be (test_generate_errors.py's
rule, its assert_error). No crash, no hang, no silent wrong answer.

Every case is one of the tiny MoE models (tests/reference/tiny_models.py: GGUF files and
Hugging Face / mlx-lm directories) changed in the one thing under test: an expert tensor or a
router missing, an expert count past what celer loads, more experts used per token than exist,
none used, an expert width that does not match the tensors, a shared expert without its width,
a stacked MLX tensor with another number of experts than config.json says.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reference"))
import tiny_models  # noqa: E402
from gguf_craft import rewrite  # noqa: E402
from test_generate_errors import assert_error, celer  # noqa: E402


@pytest.fixture(scope="module")
def src(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("moe")
    for base in ("tiny-qwen3moe", "tiny-qwen2moe"):
        tiny_models.write_gguf(base, d / f"{base}.gguf")
        tiny_models.write_dir(f"{base}-hf-bf16", d / f"{base}-hf-bf16")
    return d


def generate(model: Path):
    return celer("generate", "-m", model, "-p", "hi", "-n", "2")


def test_the_sources_run(src: Path) -> None:
    """The unchanged models load and generate, so each refusal below is the change's."""
    for m in ("tiny-qwen3moe.gguf", "tiny-qwen2moe.gguf", "tiny-qwen3moe-hf-bf16", "tiny-qwen2moe-hf-bf16"):
        r = generate(src / m)
        assert r.returncode == 0, r.err


@pytest.mark.parametrize("drop", ["blk.1.ffn_up_exps.weight", "blk.0.ffn_gate_inp.weight", "blk.2.ffn_down_exps.weight"])
def test_gguf_missing_tensor(src: Path, tmp_path: Path, drop: str) -> None:
    bad = rewrite(src / "tiny-qwen3moe.gguf", tmp_path / "bad.gguf", drop={drop})
    assert_error(generate(bad), rf"tensor '{drop}' is missing", (str(bad),))


@pytest.mark.parametrize("key, value, pattern", [
    ("qwen3moe.expert_count", 2000, r"needs its expert count \(1-1024\).*gives 2000"),
    ("qwen3moe.expert_used_count", 20, r"20 experts used per token but only 16 experts"),
    ("qwen3moe.expert_used_count", 0, r"needs its expert count.*experts used per token.*gives 16, 0 and 64"),
    ("qwen3moe.expert_feed_forward_length", 32, r"ffn_gate_exps.weight' is 3-dimensional 16 x 64 x 64; the "
                                                 r"hyper-parameters say 16 experts of 32 x 64"),
])
def test_gguf_bad_expert_keys(src: Path, tmp_path: Path, key: str, value: int, pattern: str) -> None:
    bad = rewrite(src / "tiny-qwen3moe.gguf", tmp_path / "bad.gguf", replace={key: value})
    assert_error(generate(bad), pattern, (str(bad),))


def test_gguf_shared_expert_without_width(src: Path, tmp_path: Path) -> None:
    bad = rewrite(src / "tiny-qwen2moe.gguf", tmp_path / "bad.gguf", drop={"qwen2moe.expert_shared_feed_forward_length"})
    assert_error(generate(bad), r"ffn_gate_inp_shexp.weight' is there but qwen2moe.expert_shared_feed_forward_length "
                                r"is not", (str(bad),))


def copy_dir(src: Path, dst: Path, **config) -> Path:
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.update(config)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def test_dir_more_experts_than_tensors(src: Path, tmp_path: Path) -> None:
    bad = copy_dir(src / "tiny-qwen3moe-hf-bf16", tmp_path / "bad", num_experts=20)
    assert_error(generate(bad), r"tensor 'model\.layers\.0\.mlp\.gate\.weight' is 16 x 64, the config says 20 x 64")


def test_dir_no_experts_per_token(src: Path, tmp_path: Path) -> None:
    bad = copy_dir(src / "tiny-qwen2moe-hf-bf16", tmp_path / "bad", num_experts_per_tok=0)
    assert_error(generate(bad), r"qwen2moe model needs its expert count .*experts used per token")


def test_mlx_stack_of_another_size(tmp_path: Path) -> None:
    """mlx-lm's switch_mlp holds 16 experts; config.json says 8."""
    bad = copy_dir(tiny_models.MLX_DIRS / "tiny-qwen3moe-mlx-q4g64", tmp_path / "bad", num_experts=8,
                   num_experts_per_tok=2)
    assert_error(generate(bad), r"model\.layers\.0\.mlp\.(gate|switch_mlp\.\w+_proj)\.(weight|scales)")
