"""`celer synth`: random-weight GGUF models of real shapes.

Each written file is read back with gguf-py (every tensor's name, shape and type against an
independent model of the rules below, values dequantized and checked finite and small), with
`celer info --json`, and run with `celer generate`. Bad command lines end with exit 2 and one
line on stderr. Tiny custom shapes keep it fast.

The type rules under test (src/models/synth.h): one --type for every matrix, or the Q4_K_M mix
(output / tied token_embd Q6_K; attn_v and ffn_down Q6_K in llama.cpp's "more bits" layers;
the rest Q4_K); rows that are not whole blocks fall back Q4_K→Q5_0, Q5_K→Q5_1, Q6_K→Q8_0,
else F16; norms, biases, the router and rope_freqs F32.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

ROOT = Path(__file__).resolve().parents[2]
CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")

BLOCK = {"F32": 1, "F16": 1, "BF16": 1, "Q4_0": 32, "Q4_1": 32, "Q5_0": 32, "Q5_1": 32, "Q8_0": 32,
         "Q4_K": 256, "Q5_K": 256, "Q6_K": 256}
FALLBACK = {"Q4_K": "Q5_0", "Q5_K": "Q5_1", "Q6_K": "Q8_0"}
TYPES = list(BLOCK) + ["Q4_K_M"]


def celer(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    r = subprocess.run([CELER, *map(str, args)], capture_output=True, timeout=timeout)
    r.out = r.stdout.decode("utf-8", "replace")
    r.err = r.stderr.decode("utf-8", "replace")
    return r


# ---- an independent model of what synth writes ------------------------------------------------

def more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def matrix_type(t: str, name: str, layer: int | None, n_layer: int, row: int, tied: bool) -> str:
    ty = t
    if t == "Q4_K_M":
        ty = "Q4_K"
        if name == "output.weight" or (tied and name == "token_embd.weight"):
            ty = "Q6_K"
        elif layer is not None and name.endswith((".attn_v.weight", ".ffn_down.weight", ".ffn_down_exps.weight")):
            ty = "Q6_K" if more_bits(layer, n_layer) else "Q4_K"
    if row % BLOCK[ty]:
        ty = FALLBACK.get(ty, "F16")
        if row % BLOCK[ty]:
            ty = "F16"
    return ty


def expected_tensors(arch: str, s: dict, t: str) -> list[tuple[str, list[int], str]]:
    """(name, ne, type) in file order for shape s."""
    d, hd, v, ff = s["embd"], s["head_dim"], s["vocab"], s["ff"]
    nq, nkv, L = s["heads"] * hd, s["kv_heads"] * hd, s["layers"]
    tied = s["tied"]
    out: list[tuple[str, list[int], str]] = []

    def mat(name, ne, layer=None):
        out.append((name, ne, matrix_type(t, name, layer, L, ne[0], tied)))

    def vec(name, n):
        out.append((name, [n], "F32"))

    mat("token_embd.weight", [d, v])
    if s.get("rope_freqs"):
        vec("rope_freqs.weight", hd // 2)
    for i in range(L):
        b = f"blk.{i}."
        vec(b + "attn_norm.weight", d)
        mat(b + "attn_q.weight", [d, nq], i)
        mat(b + "attn_k.weight", [d, nkv], i)
        mat(b + "attn_v.weight", [d, nkv], i)
        if arch == "qwen2":
            vec(b + "attn_q.bias", nq)
            vec(b + "attn_k.bias", nkv)
            vec(b + "attn_v.bias", nkv)
        mat(b + "attn_output.weight", [nq, d], i)
        if arch in ("qwen3", "qwen3moe", "gemma3"):
            vec(b + "attn_q_norm.weight", hd)
            vec(b + "attn_k_norm.weight", hd)
        if arch == "gemma3":
            vec(b + "post_attention_norm.weight", d)
        vec(b + "ffn_norm.weight", d)
        if arch == "qwen3moe":
            e, fe = s["experts"], s["expert_ff"]
            out.append((b + "ffn_gate_inp.weight", [d, e], "F32"))
            mat(b + "ffn_gate_exps.weight", [d, fe, e], i)
            mat(b + "ffn_up_exps.weight", [d, fe, e], i)
            mat(b + "ffn_down_exps.weight", [fe, d, e], i)
        else:
            mat(b + "ffn_gate.weight", [d, ff], i)
            mat(b + "ffn_up.weight", [d, ff], i)
            mat(b + "ffn_down.weight", [ff, d], i)
        if arch == "gemma3":
            vec(b + "post_ffw_norm.weight", d)
    vec("output_norm.weight", d)
    if not tied:
        mat("output.weight", [d, v])
    return out


def custom(arch: str, layers=2, embd=64, ff=128, heads=4, kv_heads=2, head_dim=None, vocab=512, tied=None,
           experts=0, experts_used=0, expert_ff=0) -> dict:
    return {"arch": arch, "layers": layers, "embd": embd, "ff": ff, "heads": heads, "kv_heads": kv_heads,
            "head_dim": head_dim or embd // heads, "vocab": vocab,
            "tied": (arch == "gemma3") if tied is None else tied,
            "experts": experts, "experts_used": experts_used, "expert_ff": expert_ff}


def synth_args(s: dict) -> list[str]:
    a = ["--arch", s["arch"], "--layers", s["layers"], "--embd", s["embd"], "--ff", s["ff"], "--heads", s["heads"],
         "--kv-heads", s["kv_heads"], "--head-dim", s["head_dim"], "--vocab", s["vocab"]]
    if s["tied"]:
        a.append("--tied")
    if s["experts"]:
        a += ["--experts", s["experts"], "--experts-used", s["experts_used"], "--expert-ff", s["expert_ff"]]
    return [str(x) for x in a]


def check_file(path: Path, arch: str, s: dict, t: str, values: bool = True) -> None:
    r = gguf.GGUFReader(str(path))
    want = expected_tensors(arch, s, t)
    got = [(x.name, [int(n) for n in x.shape], x.tensor_type.name) for x in r.tensors]
    assert got == want
    f = {k: v.contents() for k, v in r.fields.items() if not k.startswith("tokenizer.ggml.t")
         and k != "tokenizer.ggml.scores"}
    assert f["general.architecture"] == arch
    assert f["general.quantization_version"] == 2
    assert f[f"{arch}.block_count"] == s["layers"]
    assert f[f"{arch}.embedding_length"] == s["embd"]
    assert f[f"{arch}.feed_forward_length"] == s["ff"]
    assert f[f"{arch}.attention.head_count"] == s["heads"]
    assert f[f"{arch}.attention.head_count_kv"] == s["kv_heads"]
    assert f[f"{arch}.rope.dimension_count"] == s["head_dim"]
    if arch in ("qwen3", "qwen3moe", "gemma3") or s["head_dim"] * s["heads"] != s["embd"]:
        assert f[f"{arch}.attention.key_length"] == s["head_dim"]
        assert f[f"{arch}.attention.value_length"] == s["head_dim"]
    if arch == "gemma3":
        assert f["gemma3.attention.sliding_window"] > 0
    if arch == "qwen3moe":
        assert f["qwen3moe.expert_count"] == s["experts"]
        assert f["qwen3moe.expert_used_count"] == s["experts_used"]
        assert f["qwen3moe.expert_feed_forward_length"] == s["expert_ff"]
    # the placeholder vocabulary
    assert f["tokenizer.ggml.model"] == "llama"
    assert (f["tokenizer.ggml.bos_token_id"], f["tokenizer.ggml.eos_token_id"],
            f["tokenizer.ggml.unknown_token_id"]) == (1, 2, 0)
    assert f["tokenizer.ggml.add_bos_token"] is True
    toks = r.fields["tokenizer.ggml.tokens"].contents()
    types = r.fields["tokenizer.ggml.token_type"].contents()
    scores = r.fields["tokenizer.ggml.scores"].contents()
    assert len(toks) == len(types) == len(scores) == s["vocab"] and len(set(toks)) == len(toks)
    assert toks[:3] == ["<unk>", "<s>", "</s>"] and toks[3] == "<0x00>" and toks[258] == "<0xFF>"
    assert set(types[3:259]) == {6} and set(types[259:]) <= {1}
    assert all(a > b for a, b in zip(scores[259:], scores[260:]))
    # every value decodes finite and small; norms near 1
    for x in r.tensors if values else []:
        vals = gguf.quants.dequantize(x.data, x.tensor_type).astype(np.float32)
        assert np.all(np.isfinite(vals)), x.name
        if x.name.endswith("norm.weight"):
            assert np.all(np.abs(vals - 1) <= 0.011), x.name
        elif x.name != "rope_freqs.weight":
            assert np.max(np.abs(vals)) < 0.6 and np.any(vals != 0), x.name


def check_info(path: Path, arch: str, s: dict, t: str) -> None:
    r = celer("info", "--json", path)
    assert r.returncode == 0, r.err
    j = json.loads(r.out)
    h = j["hparams"]
    assert j["architecture"] == arch
    assert (h["n_layer"], h["n_embd"], h["n_ff"], h["n_head"], h["n_head_kv"], h["head_dim_k"], h["n_vocab"]) == \
        (s["layers"], s["embd"], s["ff"], s["heads"], s["kv_heads"], s["head_dim"], s["vocab"])
    assert (h["n_expert"], h["n_expert_used"], h["n_ff_expert"]) == (s["experts"], s["experts_used"], s["expert_ff"])
    want = [(n, list(reversed(ne)), ty) for n, ne, ty in expected_tensors(arch, s, t)]
    assert [(x["name"], x["shape"], x["type"]) for x in j["tensors"]] == want


def synth(tmp_path: Path, s: dict, t: str, seed: int = 0, name: str | None = None) -> Path:
    path = tmp_path / (name or f"{s['arch']}-{t}.gguf")
    r = celer("synth", *synth_args(s), "--type", t, "--seed", seed, "-o", path)
    assert r.returncode == 0, r.err
    assert r.out == ""
    assert not list(tmp_path.glob("*.tmp-*"))
    return path


# ---- runs ------------------------------------------------------------------------------------

RUN_ARCHS = ["llama", "qwen2", "qwen3", "gemma3"]


@pytest.mark.parametrize("arch", RUN_ARCHS)
@pytest.mark.parametrize("t", ["F16", "Q4_0", "Q4_K_M"])
def test_tiny_model_runs(tmp_path, arch, t):
    s = custom(arch, embd=256, ff=512, heads=4, kv_heads=2, vocab=600)
    path = synth(tmp_path, s, t)
    check_file(path, arch, s, t)
    check_info(path, arch, s, t)
    r = celer("generate", "-m", path, "-p", "hi", "-n", "4")
    assert r.returncode == 0, r.err


@pytest.mark.parametrize("t", TYPES)
def test_every_type(tmp_path, t):
    """Every type, on rows of 256 (K-quants kept), 96 (K-quants fall back) and 72 (F16 fallback)."""
    for embd, heads in ((256, 4), (96, 2), (72, 2)):
        s = custom("llama", embd=embd, ff=embd * 2, heads=heads, kv_heads=1, tied=embd == 96)
        path = synth(tmp_path, s, t, name=f"llama-{embd}-{t}.gguf")
        check_file(path, "llama", s, t)
        check_info(path, "llama", s, t)
        r = celer("generate", "-m", path, "-p", "hi there", "-n", "4")
        assert r.returncode == 0, r.err


def test_moe(tmp_path):
    s = custom("qwen3moe", layers=3, embd=256, ff=512, heads=4, kv_heads=2, head_dim=64, vocab=600,
               experts=8, experts_used=2, expert_ff=256)
    for t in ("Q4_K_M", "Q8_0"):
        path = synth(tmp_path, s, t)
        check_file(path, "qwen3moe", s, t)
        check_info(path, "qwen3moe", s, t)


def test_gemma3_keys(tmp_path):
    s = custom("gemma3", layers=2, embd=128, ff=256, heads=2, kv_heads=1, head_dim=64)
    path = synth(tmp_path, s, "Q8_0")
    r = gguf.GGUFReader(str(path))
    assert r.fields["gemma3.attention.sliding_window"].contents() == 512
    assert "output.weight" not in [x.name for x in r.tensors]


# ---- presets ---------------------------------------------------------------------------------

# The published config.json values: layers, embd, ff, heads, kv heads, head dim, vocab, ctx,
# rope theta, tied.
PRESETS = {
    "smollm2-135m": ("llama", 30, 576, 1536, 9, 3, 64, 49152, 8192, 1e5, True),
    "llama-3.2-1b": ("llama", 16, 2048, 8192, 32, 8, 64, 128256, 131072, 5e5, True),
    "llama-3.1-8b": ("llama", 32, 4096, 14336, 32, 8, 128, 128256, 131072, 5e5, False),
    "qwen2.5-0.5b": ("qwen2", 24, 896, 4864, 14, 2, 64, 151936, 32768, 1e6, True),
    "qwen3-0.6b": ("qwen3", 28, 1024, 3072, 16, 8, 128, 151936, 40960, 1e6, True),
    "qwen3-8b": ("qwen3", 36, 4096, 12288, 32, 8, 128, 151936, 40960, 1e6, False),
    "qwen3-30b-a3b": ("qwen3moe", 48, 2048, 6144, 32, 4, 128, 151936, 40960, 1e6, False),
    "gemma3-270m": ("gemma3", 18, 640, 2048, 4, 1, 256, 262144, 32768, 1e6, True),
    "gemma3-1b": ("gemma3", 26, 1152, 6912, 4, 1, 256, 262144, 32768, 1e6, True),
}


def test_preset_list():
    r = celer("synth", "--list")
    assert r.returncode == 0, r.err
    rows = {line.split()[0]: line.split() for line in r.out.splitlines()[1:]}
    assert set(rows) == set(PRESETS)
    for name, (arch, L, d, ff, h, kv, hd, v, ctx, theta, tied) in PRESETS.items():
        row = rows[name]
        assert row[1] == arch
        assert [int(x) for x in row[2:10]] == [L, d, ff, h, kv, hd, v, ctx], name
        assert float(row[10]) == theta and row[11] == ("yes" if tied else "no"), name
    assert "experts 8/128 × ff 768" in " ".join(rows["qwen3-30b-a3b"])


@pytest.mark.parametrize("name", list(PRESETS))
def test_preset_shapes(tmp_path, name):
    """Each preset, cut to a small vocabulary and 2 layers (1 for the big ones, with 8 of the 30B's
    128 experts): its dimensions, keys and type rules."""
    arch, _, d, ff, h, kv, hd, _, ctx, theta, tied = PRESETS[name]
    path = tmp_path / f"{name}.gguf"
    big = d >= 2048
    layers = 1 if big else 2
    more = ["--experts", "8"] if arch == "qwen3moe" else []
    r = celer("synth", "--shape", name, "--layers", layers, "--vocab", "512", *more, "--type", "Q4_K_M", "-o", path)
    assert r.returncode == 0, r.err
    s = custom(arch, layers=layers, embd=d, ff=ff, heads=h, kv_heads=kv, head_dim=hd, vocab=512, tied=tied)
    s["rope_freqs"] = name.startswith("llama-3")
    if arch == "qwen3moe":
        s.update(experts=8, experts_used=8, expert_ff=768)
    check_file(path, arch, s, "Q4_K_M", values=not big)
    check_info(path, arch, s, "Q4_K_M")
    f = gguf.GGUFReader(str(path)).fields
    assert f[f"{arch}.context_length"].contents() == ctx
    assert f[f"{arch}.rope.freq_base"].contents() == theta
    if name.startswith("llama-3"):
        rf = gguf.GGUFReader(str(path)).get_tensor(1)
        assert rf.name == "rope_freqs.weight"
        assert rf.data[0] == 1.0 and rf.data[-1] == (32.0 if name == "llama-3.2-1b" else 8.0)
    if arch != "qwen3moe" and not big:
        r = celer("generate", "-m", path, "-p", "hi", "-n", "2")
        assert r.returncode == 0, r.err


def test_full_preset_smollm2(tmp_path):
    """A whole preset (the smallest): real vocabulary size and all 30 layers."""
    arch, L, d, ff, h, kv, hd, v, *_ = PRESETS["smollm2-135m"]
    path = tmp_path / "smollm2.gguf"
    r = celer("synth", "--shape", "smollm2-135m", "--type", "Q4_K_M", "-o", path)
    assert r.returncode == 0, r.err
    s = custom(arch, layers=L, embd=d, ff=ff, heads=h, kv_heads=kv, head_dim=hd, vocab=v, tied=True)
    check_info(path, arch, s, "Q4_K_M")
    r = celer("generate", "-m", path, "-p", "hi", "-n", "4")
    assert r.returncode == 0, r.err


# ---- determinism -----------------------------------------------------------------------------

def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_same_seed_same_bytes(tmp_path):
    s = custom("qwen2", embd=256, ff=512, vocab=600)
    for t in ("Q4_K_M", "BF16", "Q5_1"):
        a = synth(tmp_path, s, t, seed=7, name="a.gguf")
        b = synth(tmp_path, s, t, seed=7, name="b.gguf")
        c = synth(tmp_path, s, t, seed=8, name="c.gguf")
        assert digest(a) == digest(b)
        assert digest(a) != digest(c) and a.stat().st_size == c.stat().st_size


# ---- bad command lines -------------------------------------------------------------------------

def one_line_error(r: subprocess.CompletedProcess, pattern: str) -> None:
    assert r.returncode == 2, f"exit {r.returncode}; stderr {r.err!r}"
    assert r.out == ""
    assert r.err.endswith("\n") and r.err.count("\n") == 1, r.err
    assert r.err.startswith("celer"), r.err
    assert re.search(pattern, r.err), r.err


TINY = ["--layers", "2", "--embd", "64", "--ff", "128", "--heads", "4", "--kv-heads", "2", "--vocab", "512"]


@pytest.mark.parametrize("args, pattern", [
    (["--arch", "mamba", *TINY, "--type", "Q4_0", "-o", "{d}/x.gguf"], r"unknown architecture 'mamba'"),
    (["--shape", "llama-9b", "--type", "Q4_0", "-o", "{d}/x.gguf"], r"unknown preset 'llama-9b'"),
    (["--arch", "llama", *TINY, "--type", "Q3_K", "-o", "{d}/x.gguf"], r"unknown type 'Q3_K'"),
    (["--arch", "llama", *TINY, "--type", "Q4_0"], r"no output file"),
    (["--arch", "llama", *TINY, "--type", "Q4_0", "-o", "{d}/no/such/dir/x.gguf"],
     r"cannot create .*no/such/dir/x\.gguf.*No such file or directory"),
    (["--arch", "llama", *TINY, "-o", "{d}/x.gguf"], r"no weight type"),
    (["--arch", "llama", "--layers", "2", "--type", "Q4_0", "-o", "{d}/x.gguf"], r"custom shape needs --embd"),
    (["--arch", "llama", *TINY, "--layers", "zero", "--type", "Q4_0", "-o", "{d}/x.gguf"], r"--layers wants"),
    (["--arch", "llama", *TINY, "--kv-heads", "3", "--type", "Q4_0", "-o", "{d}/x.gguf"], r"not a multiple of 3"),
    (["--arch", "llama", *TINY, "--experts", "4", "--type", "Q4_0", "-o", "{d}/x.gguf"], r"experts are for"),
    (["--arch", "qwen3moe", *TINY, "--type", "Q4_0", "-o", "{d}/x.gguf"], r"qwen3moe needs --experts"),
    (["--shape", "qwen3-8b", "--arch", "llama", "--type", "Q4_0", "-o", "{d}/x.gguf"], r"is --arch qwen3"),
    (["--arch", "llama", *TINY, "--type", "Q4_0", "--bogus", "-o", "{d}/x.gguf"], r"unknown option '--bogus'"),
])
def test_bad_arguments(tmp_path, args, pattern):
    one_line_error(celer("synth", *[a.format(d=tmp_path) for a in args]), pattern)
    assert not list(tmp_path.rglob("*.gguf*"))


def test_unwritable_directory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        if os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write anywhere (root)")
        one_line_error(celer("synth", "--arch", "llama", *TINY, "--type", "Q4_0", "-o", ro / "x.gguf"),
                       r"cannot create .*Permission denied")
    finally:
        ro.chmod(0o700)


def test_output_is_a_directory(tmp_path):
    """The rename fails: the error names both paths and no temporary file is left."""
    (tmp_path / "x.gguf").mkdir()
    one_line_error(celer("synth", "--arch", "llama", *TINY, "--type", "Q4_0", "-o", tmp_path / "x.gguf"),
                   r"cannot rename .*x\.gguf\.tmp-\d+ to .*x\.gguf")
    assert not list(tmp_path.glob("*.tmp-*"))


def test_output_under_a_file(tmp_path):
    """-o below a plain file: an unwritable path even for root."""
    (tmp_path / "f").write_text("x")
    one_line_error(celer("synth", "--arch", "llama", *TINY, "--type", "Q4_0", "-o", tmp_path / "f" / "x.gguf"),
                   r"cannot create .*f/x\.gguf\.tmp-\d+: Not a directory")
