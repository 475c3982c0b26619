"""celer's forward pass against the mlx-lm reference on the real models, on seven tiny random-weight
ones (tiny_models.py: qwen3, qwen2, qwen2 with YaRN RoPE scaling, llama, gemma3, qwen3moe, qwen2moe)
and on them as model directories (tiny_models.DIRS: Hugging Face f32 and bf16 checkpoints, and what mlx_lm.convert makes
of them in affine 4-bit g64, affine 8-bit g32 and mxfp4), and on SmolLM2 as `celer quantize` writes
it in six MLX formats (roundtrip.py: byte for byte what mlx_lm.convert writes, on which the
reference ran), through the fixtures in tests/data/mlx/
(written by make_mlx_fixtures.py; this test needs no mlx) and tests/tools/logits_dump.

Decided positions (docs/correctness.md): the greedy token is compared only where the reference's
top-1 logit beats its top-2 by at least THRESHOLD nats; below that, float rounding or a legitimate
approximation may flip the choice and a disagreement says nothing.

- teacher-forced: prompt + the reference's continuation run through celer as a prefill (chunks of
  CHUNK tokens); at every decided position celer's top-1 must be the reference's. At least
  MIN_DECIDED decided positions per model, and no mismatch.
- free-running: celer's own greedy continuation (one forward per token, like decode) must equal
  the reference's until they first differ, and that first difference must be at an undecided
  step (so at least up to the first undecided position; usually all N_GEN tokens).

Mixture-of-experts models (tiny-qwen3moe, tiny-qwen2moe and their directories; the fixture has a
"moe" block) also run with `logits_dump --router`: where celer's router legitimately chose another
expert at a near-tie (router_check.py), the positions from there on are not compared, since the
token got another expert's output. test_moe_router.py checks the router choices themselves.

CELER_PARITY_SLOW=1 adds the slow prompts (gemma3's prompt past its 512-token sliding window).
Each model's numbers are printed and written to $CELER_BUILD_DIR/mlx_parity.txt."""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import roundtrip  # noqa: E402
import router_check  # noqa: E402
import tiny_models  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CELER_BUILD_DIR") or ROOT / "build")
DUMP = BUILD / "logits_dump"
FIXTURES = ROOT / "tests" / "data" / "mlx"
# Real models come from scripts/fetch-model; the tiny ones are written by tiny_models.py, as GGUF
# files and as unquantized model directories (hf-*); the quantized directories (mlx-*) are
# committed in tests/data/mlx_dirs/.
MODELS = ["smollm2-135m", "gemma3-270m", "qwen2.5-coder-0.5b", *tiny_models.MODELS, *tiny_models.DIRS,
          *roundtrip.ROUNDTRIPS]


THRESHOLD = 0.05  # nats: the reference's top-1 must beat its top-2 by this much to be decided
MIN_DECIDED = 200  # decided positions each model must have
TRIPWIRE = 0.01  # nats: largest median |Δ| of the top-1 logit, over positions where the choices agree
CHUNK = 24  # prefill tokens per forward: not a multiple of the 16-position KV block
FREE_PROMPTS = 2  # prompts per model for the free-running check (decode is the slow path)
SLOW = os.environ.get("CELER_PARITY_SLOW") == "1"


def fixture(name: str) -> dict:
    path = FIXTURES / f"{name}.json"
    assert path.exists(), f"{path} is missing: run `make check-reference` (needs mlx) to write it"
    return json.loads(path.read_text())


_made: dict[str, Path] = {}  # directories written once per session: SmolLM2's HF form, celer quantize's


def roundtrip_path(name: str, fx: dict, tmp_path_factory: pytest.TempPathFactory) -> str:
    """What `celer quantize` writes from SmolLM2's bf16 Hugging Face form; its tensors must be
    the ones mlx_lm.convert wrote, which the fixture's reference ran on."""
    if name not in _made:
        if "src" not in _made:
            gguf_path = fetch(roundtrip.SOURCE)
            assert file_sha256(gguf_path) == fx["sha256"], (
                f"{gguf_path} is not the file tests/data/mlx/{name}.json was made from; regenerate the fixture "
                f"with `make check-reference REF_MODELS={name}`")
            _made["src"] = roundtrip.write_hf_dir(gguf_path, tmp_path_factory.mktemp("smollm2-hf") / "src")
        out = tmp_path_factory.mktemp(name) / name
        roundtrip.celer_quantize(BUILD / "celer", _made["src"], out, roundtrip.ROUNDTRIPS[name])
        assert roundtrip.tensors_digest(out) == fx["tensors"], (
            f"celer quantize wrote other tensors than mlx_lm.convert did for tests/data/mlx/{name}.json "
            f"(roundtrip.tensors_digest)")
        _made[name] = out
    return str(_made[name])


def fetch(name: str) -> str:
    r = subprocess.run([str(ROOT / "scripts" / "fetch-model"), name], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"scripts/fetch-model {name} failed: {r.stderr}"
    return r.stdout.strip().splitlines()[-1]


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def model_path(name: str, fx: dict, tmp_path_factory: pytest.TempPathFactory) -> str:
    if name in roundtrip.ROUNDTRIPS:
        return roundtrip_path(name, fx, tmp_path_factory)
    if name in tiny_models.DIRS:
        path = tiny_models.model_dir(name, tmp_path_factory.mktemp(name))
        assert path.is_dir(), f"{path} is missing: run `make check-reference REF_MODELS={name}` (needs mlx)"
        assert tiny_models.dir_sha256(path) == fx["sha256"], (
            f"{path} is not the directory tests/data/mlx/{name}.json was made from "
            f"(tiny_models.dir_sha256); regenerate both with `make check-reference REF_MODELS={name}`")
        return str(path)
    if name in tiny_models.MODELS:
        path = str(tiny_models.write_gguf(name, tmp_path_factory.mktemp(name) / fx["file"]))
    else:
        path = fetch(name)
    what = "tiny_models.py (or gguf-py) wrote a different file than" if name in tiny_models.MODELS else "is not"
    assert file_sha256(path) == fx["sha256"], (
        f"{path} {what} the file tests/data/mlx/{name}.json was made from; "
        f"regenerate the fixture with `make check-reference REF_MODELS={name}`")
    return path


def dump(*args: str) -> list[dict]:
    assert DUMP.exists(), f"{DUMP} is missing: build celer first (cmake --build build)"
    r = subprocess.run([str(DUMP), *args], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"logits_dump {' '.join(args[:1])} ...: exit {r.returncode}: {r.stderr}"
    return [json.loads(line) for line in r.stdout.splitlines()]


def ids_arg(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


def prompts(fx: dict) -> list[dict]:
    return [p for p in fx["prompts"] if SLOW or not p["slow"]]


def report(name: str, line: str) -> None:
    print(line)
    try:
        with open(BUILD / "mlx_parity.txt", "a") as f:
            f.write(line + "\n")
    except OSError:
        pass


@pytest.mark.parametrize("name", MODELS)
def test_teacher_forced(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    fx = fixture(name)
    path = model_path(name, fx, tmp_path_factory)
    positions = decided = undecided_diff = diverged = 0
    dls, worst = [], (0.0, "")
    mismatches = []
    moe = "moe" in fx
    for p in prompts(fx):
        seq = p["ids"] + p["gen"]
        rows = dump(path, "--ids", ids_arg(seq), "--top", "2", "--chunk", str(CHUNK), *(["--router"] if moe else []))
        # MoE: positions from celer's first legitimate router divergence on are not compared
        cut = router_check.check(fx, p, router_check.celer_router(rows)).first_divergence if moe else None
        rows = [r for r in rows if "top" in r]
        assert len(rows) == len(seq) == len(p["top1"]), f"{name}/{p['name']}: {len(rows)} rows for {len(seq)} tokens"
        for i, row in enumerate(rows):
            assert row["pos"] == i
            got, got_l1 = row["top"][0]
            want, want_l1, margin = p["top1"][i], p["l1"][i], p["margin"][i]
            positions += 1
            if cut is not None and i >= cut:
                diverged += 1
                continue
            if got == want:
                dls.append(abs(got_l1 - want_l1))
                if dls[-1] > worst[0]:
                    worst = (dls[-1], f"{p['name']} pos {i}")
            if margin < THRESHOLD:
                undecided_diff += got != want
                continue
            decided += 1
            if got != want:
                mismatches.append(f"{p['name']} pos {i}: celer {got} ({got_l1:.4f}; runner-up {row['top'][1]}), "
                                  f"reference {want} ({want_l1:.4f}, margin {margin:.4f})")
    report(name, f"mlx parity {name}: {positions} positions, {decided} decided (margin >= {THRESHOLD}), "
                 f"{len(mismatches)} mismatches ({len(mismatches) / max(decided, 1):.2%}), "
                 f"{undecided_diff} undecided disagreements"
                 f"{f', {diverged} after a router divergence' if moe else ''}; "
                 f"|dlogit| of top-1: median {statistics.median(dls):.2e}, "
                 f"p99 {sorted(dls)[int(0.99 * (len(dls) - 1))]:.2e}, max {worst[0]:.2e} ({worst[1]})")
    assert not mismatches, f"{name}: {len(mismatches)} of {decided} decided positions differ:\n" + "\n".join(mismatches[:20])
    assert decided >= MIN_DECIDED, f"{name}: only {decided} decided positions; the fixture needs more prompts"
    # A systematic error (a scale, an offset) can leave every argmax alone; the median catches it
    # while tolerating the few positions where activation outliers meet Q8 activations.
    assert statistics.median(dls) <= TRIPWIRE, (
        f"{name}: the top-1 logit is off by a median {statistics.median(dls):.3f} nats (> {TRIPWIRE})")


def decided_prefix(p: dict) -> int:
    """Continuation tokens before the first undecided one: the reference's greedy choice at
    continuation step s is made at position len(ids) - 1 + s."""
    n = len(p["ids"])
    u = 0
    while u < len(p["gen"]) and p["margin"][n - 1 + u] >= THRESHOLD:
        u += 1
    return u


@pytest.mark.parametrize("name", MODELS)
def test_free_running(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    fx = fixture(name)
    path = model_path(name, fx, tmp_path_factory)
    chosen = sorted(prompts(fx), key=decided_prefix, reverse=True)[:FREE_PROMPTS]
    equal = decided_checked = 0
    moe = "moe" in fx
    for p in chosen:
        n, want = len(p["ids"]), p["gen"]
        rows = dump(path, "--greedy", str(len(want)), "--prompt-ids", ids_arg(p["ids"]), "--top", "2",
                    "--chunk", str(CHUNK), *(["--router"] if moe else []))
        got = rows[-1]["greedy"]
        assert len(got) == len(want)
        # Equal up to the first disagreement, and that one must be at an undecided step: past it
        # the two runs condition on different tokens and are no longer comparable.
        k = next((s for s in range(len(want)) if got[s] != want[s]), len(want))
        cut = None
        if moe:  # the router over the tokens both runs share: prompt + the first k generated (decode included)
            rc = router_check.check(fx, p, router_check.celer_router(rows), n_pos=min(n + k, n + len(want) - 1),
                                    label=f"{p['name']} ")
            wrong = rc.mismatches
            assert not wrong, (f"{name}/{p['name']}: free-running, celer's router chose other experts at decided "
                               "choices:\n" + "\n".join(wrong[:20]))
            cut = rc.first_divergence
        # a legitimate router divergence at or before the position that chose step k: not comparable
        diverged = cut is not None and cut <= n - 1 + k
        if k < len(want) and not diverged:
            margin = p["margin"][n - 1 + k]
            assert margin < THRESHOLD, (
                f"{name}/{p['name']}: celer's greedy continuation leaves the reference's at step {k} "
                f"(celer {got[k]}, reference {want[k]}), where the reference's margin is {margin:.4f} "
                f">= {THRESHOLD}\nceler:     {got}\nreference: {want}")
        equal += k
        decided_checked += sum(p["margin"][n - 1 + s] >= THRESHOLD for s in range(k))
    report(name, f"mlx parity {name}: free-running greedy: {equal} of {FREE_PROMPTS * fx['n_gen']} tokens equal "
                 f"({decided_checked} of them decided) over {len(chosen)} prompts")
    assert decided_checked > 0, f"{name}: no decided token was checked"
