"""`celer info --json` against gguf-py's GGUFReader on the real models: every value celer reports
is checked against the GGUF key (or the tensor info) it comes from, as gguf-py reads it. No
expected number is written here; gguf-py supplies them all."""

from __future__ import annotations

import json
import os
import subprocess
from collections import OrderedDict
from pathlib import Path

import gguf
import pytest

ROOT = Path(__file__).resolve().parents[2]
CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
MODELS = ["smollm2-135m", "gemma3-270m"]


def model_path(name: str) -> str:
    r = subprocess.run([str(ROOT / "scripts" / "fetch-model"), name], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"scripts/fetch-model {name} failed: {r.stderr}"
    return r.stdout.strip()


class Model:
    def __init__(self, name: str):
        self.path = model_path(name)
        r = subprocess.run([CELER, "info", "--json", self.path], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, f"celer info --json {self.path}: exit {r.returncode}: {r.stderr}"
        self.info = json.loads(r.stdout)
        self.reader = gguf.GGUFReader(self.path)
        self.arch = self.value("general.architecture")

    def field(self, key: str):
        return self.reader.get_field(key)

    def value(self, key: str):
        f = self.field(key)
        return None if f is None else f.contents()

    def arch_value(self, suffix: str):
        """{arch}.suffix; a per-layer array gives its largest element, as celer reports it."""
        v = self.value(f"{self.arch}.{suffix}")
        return max(v, default=0) if isinstance(v, list) else v


@pytest.fixture(scope="module", params=MODELS)
def m(request) -> Model:
    return Model(request.param)


def test_identity(m: Model) -> None:
    assert m.info["path"] == m.path
    assert m.info["format"] == "gguf"
    assert m.info["architecture"] == m.arch
    assert m.info["name"] == (m.value("general.name") or "")


# hparam -> key suffix under {arch}. for the integers read without a default
INT_KEYS = {
    "n_layer": "block_count",
    "n_embd": "embedding_length",
    "n_ff": "feed_forward_length",
    "n_ctx_train": "context_length",
    "n_head": "attention.head_count",
    "sliding_window": "attention.sliding_window",
    "n_expert": "expert_count",
    "n_expert_used": "expert_used_count",
    "n_ff_expert": "expert_feed_forward_length",
}


@pytest.mark.parametrize("hparam", list(INT_KEYS))
def test_int_hparam(m: Model, hparam: str) -> None:
    want = m.arch_value(INT_KEYS[hparam])
    assert m.info["hparams"][hparam] == (0 if want is None else want), f"{m.arch}.{INT_KEYS[hparam]}"


def test_heads_and_head_dims(m: Model) -> None:
    hp = m.info["hparams"]
    n_head = m.arch_value("attention.head_count")
    n_head_kv = m.arch_value("attention.head_count_kv")
    assert hp["n_head_kv"] == (n_head if n_head_kv is None else n_head_kv)
    k = m.arch_value("attention.key_length")
    v = m.arch_value("attention.value_length")
    default = m.arch_value("embedding_length") // n_head  # for each of the two, as llama.cpp
    assert hp["head_dim_k"] == (default if k is None else k)
    assert hp["head_dim_v"] == (default if v is None else v)


def test_vocab(m: Model) -> None:
    want = m.arch_value("vocab_size")
    if want is None:
        want = len(m.field("tokenizer.ggml.tokens").data)
    assert m.info["hparams"]["n_vocab"] == want


def float32_close(got: float, want: float) -> bool:
    return abs(got - want) <= 1e-6 * abs(want)


def test_rope_theta(m: Model) -> None:
    want = m.arch_value("rope.freq_base")
    got = m.info["hparams"]["rope_theta"]
    assert (got == 0) if want is None else float32_close(got, want), f"rope_theta {got}, {m.arch}.rope.freq_base {want}"


def test_norm_eps(m: Model) -> None:
    want = m.arch_value("attention.layer_norm_rms_epsilon")
    if want is None:
        want = m.arch_value("attention.layer_norm_epsilon")
    got = m.info["hparams"]["norm_eps"]
    assert (got == 0) if want is None else float32_close(got, want), f"norm_eps {got}, want {want}"


def test_chat_template(m: Model) -> None:
    assert m.info["chat_template"] is (m.field("tokenizer.chat_template") is not None)


def test_tensors_in_file_order(m: Model) -> None:
    got = m.info["tensors"]
    want = m.reader.tensors
    assert len(got) == len(want)
    assert [t["name"] for t in got] == [t.name for t in want]
    assert [t["type"] for t in got] == [gguf.GGMLQuantizationType(t.tensor_type).name for t in want]
    # gguf-py's shape is innermost first; celer prints outermost first
    assert [t["shape"] for t in got] == [[int(d) for d in reversed(t.shape.tolist())] for t in want]
    assert [t["bytes"] for t in got] == [int(t.n_bytes) for t in want]


def test_params_and_types(m: Model) -> None:
    want = OrderedDict()
    for t in m.reader.tensors:
        w = want.setdefault(gguf.GGMLQuantizationType(t.tensor_type).name, {"count": 0, "bytes": 0, "params": 0})
        w["count"] += 1
        w["bytes"] += int(t.n_bytes)
        w["params"] += int(t.n_elements)
    assert m.info["n_params"] == sum(int(t.n_elements) for t in m.reader.tensors)
    # the totals; each type's "cpu" decision is checked by tests/cli/test_capability.py
    assert {t: {k: v for k, v in d.items() if k != "cpu"} for t, d in m.info["types"].items()} == want
    assert list(m.info["types"]) == list(want), "types are listed in order of first appearance"
    assert m.info["memory"]["weights"] == sum(int(t.n_bytes) for t in m.reader.tensors)


def test_text_output(m: Model) -> None:
    r = subprocess.run([CELER, "info", "--tensors", m.path], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    lines = r.stdout.splitlines()
    assert f"architecture   {m.arch}" in lines
    assert f"layers         {m.arch_value('block_count')}" in lines
    assert f"tensors        {len(m.reader.tensors)}" in lines
    listed = [ln.split()[0] for ln in lines[lines.index(next(ln for ln in lines if ln.startswith("tensor "))) + 1:]]
    assert listed == [t.name for t in m.reader.tensors]
