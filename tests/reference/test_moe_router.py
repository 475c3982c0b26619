"""celer's mixture-of-experts router against mlx-lm's, on the tiny random-weight MoE models
(tiny_models.py: tiny-qwen3moe, tiny-qwen2moe, as GGUF files and as model directories: hf-f32,
hf-bf16, mlx-q4g64), through the fixtures in tests/data/mlx/ (make_mlx_fixtures.py; no mlx here)
and `logits_dump --router`.

For every prompt, the prompt and the reference's continuation go through celer as one prefill (as
test_mlx_parity.py's teacher-forced check), and for every position and every MoE layer celer's
chosen experts (as a set) must be the reference's wherever the choice is decided: the reference's
k-th router logit beats its (k+1)-th by at least the fixture's moe.threshold (docs/correctness.md).
Where it does not, a different choice is a legitimate divergence, and what lies downstream of it
(later layers at that position and after it) is only counted (router_check.py). At least
MIN_COMPARED of all choices must be compared, so that a router that diverges at every near-tie
cannot pass by making everything downstream.

Until the engine runs MoE models, these fail: celer refuses the architectures, and logits_dump
--router has no router trace to print (exit 2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import router_check  # noqa: E402
import test_mlx_parity as parity  # noqa: E402
import tiny_models  # noqa: E402

MODELS = [m for m in [*tiny_models.MODELS, *tiny_models.DIRS] if tiny_models.is_moe(m)]
MIN_COMPARED = 0.9  # share of all (position, MoE layer) choices that must be compared


@pytest.mark.parametrize("name", MODELS)
def test_router_teacher_forced(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    fx = parity.fixture(name)
    assert "moe" in fx, f"tests/data/mlx/{name}.json has no router choices: regenerate it with make_mlx_fixtures.py"
    path = parity.model_path(name, fx, tmp_path_factory)
    total = router_check.RouterCheck()
    for p in parity.prompts(fx):
        seq = p["ids"] + p["gen"]
        rows = parity.dump(path, "--ids", parity.ids_arg(seq), "--top", "1", "--chunk", str(parity.CHUNK), "--router")
        got = router_check.celer_router(rows)
        total.add(router_check.check(fx, p, got, label=f"{p['name']} "))
    parity.report(name, f"moe router {name}: " + router_check.summary(total, fx["moe"]["threshold"]))
    mismatches, divergences, compared, choices = total.mismatches, total.divergences, total.compared, total.choices
    assert not mismatches, (f"{name}: celer's router chose other experts at {len(mismatches)} of {compared} decided "
                            "choices:\n" + "\n".join(mismatches[:20]))
    assert compared >= MIN_COMPARED * choices, (
        f"{name}: only {compared} of {choices} router choices compared; celer diverged at {len(divergences)} "
        "undecided ones, and what follows them is not comparable:\n" + "\n".join(divergences[:20]))


def test_router_refused_without_moe(tmp_path: Path) -> None:
    """--router on a dense model is an error that says why (exit 2), not an empty trace."""
    path = tiny_models.write_gguf("tiny-qwen3", tmp_path / "tiny-qwen3.gguf")
    assert parity.DUMP.exists(), f"{parity.DUMP} is missing: build celer first (cmake --build build)"
    r = subprocess.run([str(parity.DUMP), str(path), "--ids", "1,2,3", "--router"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 2, f"logits_dump --router on a dense model: exit {r.returncode}: {r.stderr}"
    assert "--router" in r.stderr and not r.stdout.strip(), r.stderr
