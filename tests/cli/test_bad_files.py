"""`celer info` on files that are valid, corrupt or absurd, and on bad command lines.

A bad input must end with exit code 2, nothing on stdout and exactly one line on stderr that
starts with "celer" and names the problem (for a file: the path too). Nothing may crash or
trip a sanitizer: run this against a -DCELER_SANITIZE=ON build (CELER_BIN=...) to check that.
The files come from gguf_craft, which the fuzz corpus shares (tests/cli/make_fuzz_corpus.py).
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_craft as craft  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
CRASH_TEXT = re.compile(r"Sanitizer|runtime error|Segmentation|core dumped|Assertion|internal error")


def celer(*args: str) -> subprocess.CompletedProcess:
    r = subprocess.run([CELER, *map(str, args)], capture_output=True, timeout=60)
    r.out = r.stdout.decode("utf-8", "replace")
    r.err = r.stderr.decode("utf-8", "replace")
    return r


def assert_no_crash(r: subprocess.CompletedProcess) -> None:
    assert r.returncode >= 0, f"killed by signal {-r.returncode}; stderr: {r.err!r}"
    assert not CRASH_TEXT.search(r.err), f"crash or sanitizer report on stderr:\n{r.err}"


def assert_one_line_error(r: subprocess.CompletedProcess, pattern: str, prefix: str = "celer: ",
                          names: str | None = None) -> str:
    """Exit 2, empty stdout, one stderr line starting with prefix, matching pattern."""
    assert_no_crash(r)
    assert r.returncode == 2, f"exit {r.returncode}, want 2; stderr: {r.err!r}"
    assert r.out == "", f"stdout should be empty, got {r.out!r}"
    assert r.err.endswith("\n") and r.err.count("\n") == 1, f"stderr is not exactly one line: {r.err!r}"
    line = r.err.rstrip("\n")
    assert line.startswith(prefix), f"stderr does not start with {prefix!r}: {line!r}"
    assert re.search(pattern, line), f"stderr does not match /{pattern}/: {line!r}"
    if names is not None:
        assert names in line, f"stderr does not name {names!r}: {line!r}"
    return line


# ---- the valid sample -------------------------------------------------------------------------

@pytest.fixture
def sample_path(tmp_path: Path) -> Path:
    p = tmp_path / "sample.gguf"
    p.write_bytes(craft.sample())
    return p


def test_valid_sample_text(sample_path: Path) -> None:
    r = celer("info", sample_path)
    assert_no_crash(r)
    assert r.returncode == 0, r.err
    assert r.err == ""
    assert "llama" in r.out and "crafted tiny llama" in r.out


def test_valid_sample_json(sample_path: Path) -> None:
    r = celer("info", "--json", sample_path)
    assert_no_crash(r)
    assert r.returncode == 0, r.err
    j = json.loads(r.out)
    assert j["format"] == "gguf"
    assert j["architecture"] == "llama"
    assert j["name"] == "crafted tiny llama"
    hp = j["hparams"]
    want = {"n_layer": 1, "n_embd": craft.N_EMBD, "n_ff": 64, "n_ctx_train": 128, "n_head": 4, "n_head_kv": 2,
            "head_dim_k": craft.N_EMBD // 4, "head_dim_v": craft.N_EMBD // 4, "n_vocab": len(craft.TOKENS),
            "n_expert": 0, "n_expert_used": 0, "sliding_window": 0}
    assert {k: hp[k] for k in want} == want
    assert hp["rope_theta"] == 10000.0
    assert hp["norm_eps"] == pytest.approx(struct.unpack("<f", struct.pack("<f", 1e-5))[0], rel=1e-12)
    assert j["chat_template"] is False
    ts = craft.sample_tensors()
    assert [t["name"] for t in j["tensors"]] == [t.name for t in ts]
    assert [t["type"] for t in j["tensors"]] == ["Q8_0", "F32", "F32"]
    assert [t["shape"] for t in j["tensors"]] == [list(reversed(t.ne)) for t in ts]
    assert [t["bytes"] for t in j["tensors"]] == [t.n_bytes() for t in ts]
    assert j["n_params"] == sum(math.prod(t.ne) for t in ts)


@pytest.mark.parametrize("key_length,value_length", [(None, None), (16, None), (None, 16), (16, 24)])
def test_head_dim_defaults(tmp_path: Path, key_length: int | None, value_length: int | None) -> None:
    """A missing attention.key_length or value_length is n_embd / n_head, each on its own (as
    llama.cpp reads them): a key_length alone does not set the value width."""
    extra = []
    if key_length is not None:
        extra.append(craft.kv("llama.attention.key_length", craft.u32(key_length)))
    if value_length is not None:
        extra.append(craft.kv("llama.attention.value_length", craft.u32(value_length)))
    p = tmp_path / "heads.gguf"
    p.write_bytes(craft.build(craft.sample_kvs() + extra, craft.sample_tensors()))
    r = celer("info", "--json", p)
    assert r.returncode == 0, r.err
    hp = json.loads(r.out)["hparams"]
    default = craft.N_EMBD // 4
    assert (hp["head_dim_k"], hp["head_dim_v"]) == (key_length or default, value_length or default)


# parametrized by name only, so that a failure does not print the file's bytes
GOOD = dict(craft.good_files())
BAD = {name: (data, pattern) for name, data, pattern in craft.bad_files()}
ODD = dict(craft.odd_files())


def test_names_are_unique() -> None:
    for files in (craft.good_files(), craft.bad_files(), craft.odd_files()):
        names = [f[0] for f in files]
        assert len(set(names)) == len(names)


@pytest.mark.parametrize("name", GOOD)
def test_valid_variants(tmp_path: Path, name: str) -> None:
    p = tmp_path / f"{name}.gguf"
    p.write_bytes(GOOD[name])
    r = celer("info", "--json", p)
    assert_no_crash(r)
    assert r.returncode == 0, r.err
    json.loads(r.out)


@pytest.mark.parametrize("name", GOOD)
def test_crafted_files_read_by_gguf_py(tmp_path: Path, name: str) -> None:
    """The writer itself: gguf-py reads every valid crafted file."""
    gguf = pytest.importorskip("gguf")
    p = tmp_path / f"{name}.gguf"
    p.write_bytes(GOOD[name])
    r = gguf.GGUFReader(p)
    assert r.get_field("general.architecture").contents() == "llama"
    if name == "sample":
        ts = craft.sample_tensors()
        assert [t.name for t in r.tensors] == [t.name for t in ts]
        assert [t.shape.tolist() for t in r.tensors] == [t.ne for t in ts]
        assert [bytes(t.data.tobytes()) for t in r.tensors] == [t.payload() for t in ts]


# ---- corrupt GGUF files -----------------------------------------------------------------------

@pytest.mark.parametrize("name", BAD)
def test_corrupt_gguf(tmp_path: Path, name: str) -> None:
    data, pattern = BAD[name]
    p = tmp_path / f"{name}.gguf"
    p.write_bytes(data)
    assert_one_line_error(celer("info", p), pattern, names=str(p))
    # --json reads the same way and must fail the same way
    assert_one_line_error(celer("info", "--json", p), pattern, names=str(p))


@pytest.mark.parametrize("name", ODD)
def test_absurd_hparams(tmp_path: Path, name: str) -> None:
    """Well-formed files with negative or huge hyper-parameters: celer may reject them (one line,
    exit 2) or describe them, but a description must not hold negative counts or wrapped-around
    memory figures."""
    p = tmp_path / f"{name}.gguf"
    p.write_bytes(ODD[name])
    r = celer("info", "--json", p)
    assert_no_crash(r)
    if r.returncode != 0:
        assert_one_line_error(r, r".", names=str(p))
        return
    j = json.loads(r.out)
    negative = {k: v for k, v in j["hparams"].items() if v < 0}
    assert not negative, f"accepted negative hyper-parameters {negative}"
    hp, m = j["hparams"], j["memory"]
    # f16 keys and values for every layer; a figure past 2^64 may saturate, never wrap around
    kv = hp["n_layer"] * m["n_ctx"] * hp["n_head_kv"] * (hp["head_dim_k"] + hp["head_dim_v"]) * 2
    assert m["kv_cache"] >= min(kv, 2**64 - 1) * (1 - 1e-9), f"kv cache estimate wrapped around: {m}, want {kv}"
    assert m["total"] >= max(m["weights"], m["kv_cache"], m["scratch"]), f"memory total wrapped around: {m}"


def test_directory(tmp_path: Path) -> None:
    d = tmp_path / "empty-dir"
    d.mkdir()
    assert_one_line_error(celer("info", d), r".", names=str(d))


def test_missing_path(tmp_path: Path) -> None:
    p = tmp_path / "no-such-model.gguf"
    assert_one_line_error(celer("info", p), r"no such file|not found|does not exist", names=str(p))


def test_not_a_regular_file() -> None:
    assert_one_line_error(celer("info", "/dev/null"), r".", names="/dev/null")


# ---- safetensors model directories ------------------------------------------------------------

CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 32, "intermediate_size": 64,
    "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 8,
    "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "torch_dtype": "float32",
}


def safetensors(header: dict | bytes, data: bytes, header_len: int | None = None) -> bytes:
    h = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h) if header_len is None else header_len) + h + data


def st_header(norm_end: int = 32 * 4 + 8 * 32 * 4) -> dict:
    return {
        "__metadata__": {"format": "pt"},
        "model.embed_tokens.weight": {"dtype": "F32", "shape": [8, 32], "data_offsets": [0, 8 * 32 * 4]},
        "model.norm.weight": {"dtype": "F32", "shape": [32], "data_offsets": [8 * 32 * 4, norm_end]},
    }


ST_DATA = bytes(8 * 32 * 4 + 32 * 4)


def model_dir(tmp_path: Path, st: bytes) -> Path:
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    (d / "model.safetensors").write_bytes(st)
    return d


def test_safetensors_valid_dir(tmp_path: Path) -> None:
    d = model_dir(tmp_path, safetensors(st_header(), ST_DATA))
    r = celer("info", "--json", d)
    assert_no_crash(r)
    assert r.returncode == 0, r.err
    j = json.loads(r.out)
    assert j["format"] == "safetensors"
    assert {t["name"] for t in j["tensors"]} == {"model.embed_tokens.weight", "model.norm.weight"}


def test_safetensors_header_longer_than_file(tmp_path: Path) -> None:
    d = model_dir(tmp_path, safetensors(st_header(), ST_DATA, header_len=1 << 20))
    assert_one_line_error(celer("info", d), r"header", names="model.safetensors")


def test_safetensors_header_length_huge(tmp_path: Path) -> None:
    d = model_dir(tmp_path, safetensors(st_header(), ST_DATA, header_len=(1 << 64) - 1))
    assert_one_line_error(celer("info", d), r"header", names="model.safetensors")


def test_safetensors_malformed_json(tmp_path: Path) -> None:
    h = json.dumps(st_header()).encode()[:-7] + b"}"  # cut inside the last tensor's entry
    d = model_dir(tmp_path, safetensors(h, ST_DATA))
    assert_one_line_error(celer("info", d), r"JSON|json|header", names="model.safetensors")


def test_safetensors_data_past_eof(tmp_path: Path) -> None:
    d = model_dir(tmp_path, safetensors(st_header(), ST_DATA[:-64]))
    assert_one_line_error(celer("info", d), r"model\.norm\.weight", names="model.safetensors")


# ---- the command line -------------------------------------------------------------------------

@pytest.mark.parametrize("args,pattern", [
    (["info", "--ctx", "abc"], r"--ctx.*abc"),
    (["info", "--ctx", "-5"], r"--ctx"),
    (["info", "--ctx"], r"--ctx"),
    (["info", "--bogus"], r"--bogus"),
    (["info", "a.gguf", "b.gguf"], r"one model"),
    (["bogus"], r"bogus"),
])
def test_bad_arguments(args: list[str], pattern: str) -> None:
    assert_one_line_error(celer(*args), pattern, prefix="celer")


@pytest.mark.parametrize("args,usage", [
    (["--help"], "usage: celer"),
    (["-h"], "usage: celer"),
    (["info", "--help"], "usage: celer info"),
])
def test_help(args: list[str], usage: str) -> None:
    r = celer(*args)
    assert_no_crash(r)
    assert r.returncode == 0, r.err
    assert usage in r.out
    assert r.err == ""
