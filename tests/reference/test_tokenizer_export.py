"""The Hugging Face tokenizer files celer writes from a GGUF (src/tokenizer/export_json.c, run as
`tokenizer_export MODEL.gguf OUT_DIR` from the build folder) against transformers' own reading of
the same GGUF (tokenizer_ref.py):

  * `transformers.AutoTokenizer.from_pretrained(OUT_DIR)` and `tokenizers.Tokenizer.from_file(
    OUT_DIR/tokenizer.json)` give the reference's ids on the whole corpus (tokenizer_corpus.py),
    with special-token texts parsed and as plain text, BOS/EOS as the GGUF says;
  * both decode every reference id list to the reference's text (special tokens kept and
    skipped), and decode(encode(x)) == x wherever the reference round-trips;
  * the special tokens (bos/eos/unk/pad, added tokens and their special flags), BOS/EOS adding
    and model_max_length survive, and apply_chat_template with the exported tokenizer renders (and
    tokenizes) every conversation of chat_conversations.py as the GGUF's own template does.

Cases: the real test models (SmolLM2: byte-level, "smollm" digits split; Qwen2.5: "qwen2" regex and
NFC; Gemma 3: SentencePiece with ▁ normalizer and byte fallback), and GGUFs written here from
SmolLM2's vocabulary for what those do not reach: the byte-level pre-tokenizers "llama-bpe",
"gpt-4o", "tekken" and "default" (with BOS and EOS added), and SentencePiece "llama"
(Metaspace) and "phi3" (Prepend normalizer) vocabularies. Then bad input: an unsupported
tokenizer model or pre-tokenizer, a token holding a NUL byte, a missing or unwritable output
directory (exit 2, one line naming the file, nothing left behind)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import gguf  # noqa: E402
import chat_conversations  # noqa: E402
import chat_template_ref  # noqa: E402
import tokenizer_corpus  # noqa: E402
import tokenizer_ref  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402
from transformers.convert_slow_tokenizer import bytes_to_unicode  # noqa: E402

BUILD = Path(os.environ.get("CELER_BUILD_DIR") or ROOT / "build")
TOOL = BUILD / "tokenizer_export"
FETCH = str(ROOT / "scripts" / "fetch-model")
SEED = int(os.environ.get("CELER_TOKENIZER_SEED", "20250101"))
SHOW = 8  # mismatches shown

META = "\u2581"


def _real_models() -> list[str]:
    names = ["smollm2-135m", "gemma3-270m"]
    r = subprocess.run([FETCH, "--list"], capture_output=True, text=True, timeout=60)
    listed = {line.split()[0] for line in r.stdout.splitlines() if line.strip() and not line.startswith("cache:")}
    if "qwen2.5-coder-0.5b" in listed:
        names.append("qwen2.5-coder-0.5b")
    return names


REAL = _real_models()
# name → (architecture, how the tokenizer metadata is made from SmolLM2's, extra keys)
SYNTH = {
    "bpe-llama-bpe": ("llama", "bpe", {"tokenizer.ggml.pre": "llama-bpe"}),
    "bpe-gpt-4o": ("llama", "bpe", {"tokenizer.ggml.pre": "gpt-4o"}),
    "bpe-tekken": ("llama", "bpe", {"tokenizer.ggml.pre": "tekken"}),
    "bpe-default-bos-eos": ("llama", "bpe", {"tokenizer.ggml.pre": "default", "tokenizer.ggml.add_bos_token": True,
                                             "tokenizer.ggml.add_eos_token": True}),
    "spm-llama": ("llama", "spm", {}),
    "spm-phi3-eos": ("phi3", "spm", {"tokenizer.ggml.add_eos_token": True}),
}


def model_path(name: str) -> str:
    r = subprocess.run([FETCH, name], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"scripts/fetch-model {name} failed: {r.stderr}"
    return r.stdout.strip()


def run_tool(*args, expect_ok: bool = True) -> subprocess.CompletedProcess:
    assert TOOL.is_file() and os.access(TOOL, os.X_OK), (
        f"{TOOL} not found: build it (cmake --build BUILD --target tokenizer_export) or set CELER_BUILD_DIR")
    r = subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True, timeout=300)
    if expect_ok:
        assert r.returncode == 0, f"tokenizer_export {' '.join(map(str, args))}: exit {r.returncode}\n{r.stderr}"
    return r


# ---- GGUF metadata --------------------------------------------------------------------------------

_SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_scalars(path: str, keys: set[str]) -> dict:
    """The scalar and string values of `keys` in a GGUF's metadata, read straight from the file
    (gguf-py's reader takes seconds on a large vocabulary; this skips the arrays)."""
    import mmap
    import struct

    out = {}
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        assert m[:4] == b"GGUF", path
        n_kv = struct.unpack_from("<Q", m, 16)[0]
        pos = 24

        def string(at):
            n = struct.unpack_from("<Q", m, at)[0]
            return m[at + 8:at + 8 + n].decode("utf-8"), at + 8 + n

        def skip(ty, at):
            if ty in _SCALAR:
                return at + struct.calcsize(_SCALAR[ty])
            if ty == 8:
                return string(at)[1]
            assert ty == 9, f"{path}: GGUF value type {ty}"
            ety, n = struct.unpack_from("<IQ", m, at)
            at += 12
            if ety in _SCALAR:
                return at + n * struct.calcsize(_SCALAR[ety])
            for _ in range(n):
                at = skip(ety, at)
            return at

        for _ in range(n_kv):
            key, pos = string(pos)
            ty = struct.unpack_from("<I", m, pos)[0]
            pos += 4
            if key in keys and ty in _SCALAR:
                out[key] = struct.unpack_from(_SCALAR[ty], m, pos)[0]
            elif key in keys and ty == 8:
                out[key] = string(pos)[0]
            pos = skip(ty, pos)
    return out


# ---- GGUFs written here -----------------------------------------------------------------------

def smol_fields() -> dict:
    """SmolLM2's tokenizer.* metadata (gguf-py reads the file once a process: tokenizer_ref)."""
    fields = tokenizer_ref.gguf_metadata(model_path("smollm2-135m"))
    return {k: v for k, v in fields.items() if k.startswith("tokenizer.")}


def spm_fields() -> dict:
    """A SentencePiece vocabulary made from SmolLM2's: each token's text with spaces as ▁ (those
    that are whole UTF-8 without NUL), scored by rank, after <unk> <s> </s>, the 256 byte tokens
    and a few control and user-defined tokens. Merges are derived from the scores, as for any such
    file."""
    smol = smol_fields()
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    tokens, types = ["<unk>", "<s>", "</s>"], [2, 3, 3]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [6] * 256
    tokens += ["<|im_start|>", "<|im_end|>", "<think>"]
    types += [3, 3, 4]
    seen = set(tokens)
    for tok, ty in zip(smol["tokenizer.ggml.tokens"], smol["tokenizer.ggml.token_type"]):
        if ty != 1 or any(c not in byte_of for c in tok):
            continue
        try:
            text = bytes(byte_of[c] for c in tok).decode("utf-8")
        except UnicodeDecodeError:
            continue
        text = text.replace(" ", META)
        if text and text not in seen and "\0" not in text:  # a NUL in a token is refused (see test_nul_token)
            seen.add(text)
            tokens.append(text)
            types.append(1)
    return {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.pre": "default",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": [0.0] * 262 + [-float(i) for i in range(len(tokens) - 262)],
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.padding_token_id": 0,
    }


def write_gguf(path: Path, arch: str, fields: dict) -> None:
    """A GGUF with general.architecture and the given tokenizer metadata, no tensors."""
    w = gguf.GGUFWriter(str(path), arch)
    for k, v in fields.items():
        if k == "tokenizer.ggml.tokens":
            w.add_token_list(v)
        elif k == "tokenizer.ggml.merges":
            w.add_token_merges(v)
        elif k == "tokenizer.ggml.scores":
            w.add_token_scores(v)
        elif k == "tokenizer.ggml.token_type":
            w.add_token_types(v)
        elif isinstance(v, bool):
            w.add_bool(k, v)
        elif isinstance(v, int):
            w.add_uint32(k, v)
        elif isinstance(v, str):
            w.add_string(k, v)
        else:
            raise TypeError(f"{k}: {type(v).__name__}")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def synth_gguf(name: str, tmp: Path) -> str:
    arch, kind, extra = SYNTH[name]
    base = dict(smol_fields()) if kind == "bpe" else spm_fields()
    if name != "bpe-default-bos-eos":  # one of them keeps SmolLM2's chat template
        base.pop("tokenizer.chat_template", None)
    path = tmp / f"{name}.gguf"
    write_gguf(path, arch, {**base, **extra})
    return str(path)


# ---- one exported tokenizer against its reference -----------------------------------------------


class Case:
    def __init__(self, name: str, tmp: Path):
        self.name = name
        self.real = name in REAL
        self.path = model_path(name) if self.real else synth_gguf(name, tmp)
        self.out = tmp / "out"
        self.out.mkdir()
        run_tool(self.path, self.out)
        self.ref, self.info = tokenizer_ref.load_reference(self.path)
        self.auto = AutoTokenizer.from_pretrained(str(self.out))
        self.fast = Tokenizer.from_file(str(self.out / "tokenizer.json"))
        self.config = json.loads((self.out / "tokenizer_config.json").read_text(encoding="utf-8"))
        ctx_key = f"{self.info['architecture']}.context_length"
        meta = gguf_scalars(self.path, {"tokenizer.chat_template", ctx_key})
        self.template, self.context_length = meta.get("tokenizer.chat_template"), meta.get(ctx_key)
        specials = self.info["control_tokens"] + self.info["user_defined_tokens"]
        self.corpus = tokenizer_corpus.make_corpus(SEED, specials)
        self.ref_ids = tokenizer_ref.encode_batch(self.ref, self.corpus, special=True)
        self.ref_ids_plain = tokenizer_ref.encode_batch(self.ref, self.corpus, special=False)

    def pieces(self, ids) -> list:
        return [self.ref.convert_ids_to_tokens(i) for i in ids]


@pytest.fixture(scope="module", params=REAL + list(SYNTH))
def case(request, tmp_path_factory) -> Case:
    return Case(request.param, tmp_path_factory.mktemp(request.param))


def _text(s: str, limit: int = 200) -> str:
    r = repr(s)
    return r if len(r) <= limit else f"{r[:limit]}... (len {len(s)})"


def check_ids(case: Case, got: list, want: list, what: str) -> None:
    assert len(got) == len(want)
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if list(g) != list(w)]
    if bad:
        msg = [f"{case.name} {what}: {len(bad)} of {len(want)} strings differ from the reference; first {SHOW}:"]
        for i in bad[:SHOW]:
            g, w = list(got[i]), list(want[i])
            d = next((k for k, (x, y) in enumerate(zip(g, w)) if x != y), min(len(g), len(w)))
            msg.append(f"\n[{i}] {_text(case.corpus[i])} (first difference at token {d})"
                       f"\n  exported: {g[max(0, d - 4):d + 8]} {case.pieces(g[max(0, d - 4):d + 8])}"
                       f"\n  ref:      {w[max(0, d - 4):d + 8]} {case.pieces(w[max(0, d - 4):d + 8])}")
        pytest.fail("\n".join(msg))
    print(f"{case.name} {what}: {len(want)} corpus strings, all ids equal")


# The decoders mlx-lm's load_tokenizer recognizes (tokenizer_utils.py: _is_bpe_decoder in its strict
# form, _is_spm_decoder, _is_spm_decoder_no_space) to pick a streaming detokenizer.
MLX_LM_DECODERS = [
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
    {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": META}, "content": " "},
                                      {"type": "ByteFallback"}, {"type": "Fuse"},
                                      {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": META}, "content": " "},
                                      {"type": "ByteFallback"}, {"type": "Fuse"}]},
]


def test_files(case: Case) -> None:
    """Both files are there, nothing temporary is left, and the config says what the GGUF says."""
    assert sorted(p.name for p in case.out.iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    cfg, info = case.config, case.info
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast"
    assert cfg["clean_up_tokenization_spaces"] is False
    assert cfg["add_bos_token"] == info["add_bos_token"]
    assert cfg["add_eos_token"] == info["add_eos_token"]
    tokens = case.ref.convert_ids_to_tokens
    for key in ("bos", "eos", "unk", "pad"):
        tid = info[f"{key}_token_id"]
        assert cfg.get(f"{key}_token") == (tokens(tid) if tid is not None else None), key
    assert cfg.get("chat_template") == case.template
    assert cfg.get("model_max_length") == case.context_length
    tj = json.loads((case.out / "tokenizer.json").read_text(encoding="utf-8"))
    assert tj["model"]["type"] == "BPE"
    assert tj["decoder"] in MLX_LM_DECODERS
    assert len(tj["model"]["vocab"]) == info["vocab_size"]
    decoded = {int(k): v for k, v in cfg["added_tokens_decoder"].items()}
    assert decoded == {t["id"]: {k: v for k, v in t.items() if k != "id"} for t in tj["added_tokens"]}


def test_encode_auto_tokenizer(case: Case) -> None:
    got = case.auto(case.corpus, add_special_tokens=True)["input_ids"]
    check_ids(case, got, case.ref_ids, "AutoTokenizer encode (special tokens parsed)")
    got = case.auto(case.corpus, add_special_tokens=True, split_special_tokens=True)["input_ids"]
    check_ids(case, got, case.ref_ids_plain, "AutoTokenizer encode (special tokens as text)")


def test_encode_tokenizers_file(case: Case) -> None:
    case.fast.encode_special_tokens = False
    got = [e.ids for e in case.fast.encode_batch(case.corpus, add_special_tokens=True)]
    check_ids(case, got, case.ref_ids, "Tokenizer.from_file encode (special tokens parsed)")
    case.fast.encode_special_tokens = True
    try:
        got = [e.ids for e in case.fast.encode_batch(case.corpus, add_special_tokens=True)]
    finally:
        case.fast.encode_special_tokens = False
    check_ids(case, got, case.ref_ids_plain, "Tokenizer.from_file encode (special tokens as text)")


def test_decode(case: Case) -> None:
    """Every reference id list decodes to the reference's text, special tokens kept or skipped;
    and decode(encode(x)) == x wherever the reference round-trips."""
    bad, round_trips = [], 0
    for i, (ids, plain) in enumerate(zip(case.ref_ids, case.ref_ids_plain)):
        for skip in (False, True):
            want = case.ref.decode(ids, skip_special_tokens=skip, clean_up_tokenization_spaces=False)
            got_auto = case.auto.decode(ids, skip_special_tokens=skip)
            got_fast = case.fast.decode(ids, skip_special_tokens=skip)
            if got_auto != want or got_fast != want:
                bad.append((i, skip, got_auto, got_fast, want))
        body = tokenizer_ref.strip_bos_eos(plain, case.info)
        if tokenizer_ref.decode(case.ref, body) == case.corpus[i]:
            round_trips += 1
            if case.auto.decode(body) != case.corpus[i]:
                bad.append((i, "round trip", case.auto.decode(body), None, case.corpus[i]))
    if bad:
        msg = [f"{case.name}: {len(bad)} decodes differ; first {SHOW}:"]
        for i, skip, a, f, w in bad[:SHOW]:
            msg.append(f"\n[{i}] skip_special={skip}\n  auto: {_text(a)}\n  file: {_text(f)}\n  ref:  {_text(w)}")
        pytest.fail("\n".join(msg))
    assert round_trips > len(case.corpus) // 2, f"only {round_trips} strings round-trip in the reference"
    print(f"{case.name} decode: {len(case.corpus)} id lists, {round_trips} round trips, all equal")


def test_special_tokens(case: Case) -> None:
    auto, ref, info = case.auto, case.ref, case.info
    for key in ("bos", "eos", "unk", "pad"):
        assert getattr(auto, f"{key}_token") == getattr(ref, f"{key}_token"), key
        assert getattr(auto, f"{key}_token_id") == getattr(ref, f"{key}_token_id"), key
    # BOS/EOS as tokenizer.json's post-processor adds them (transformers 5 ignores the config's
    # add_bos_token next to a tokenizer.json; transformers 4 reads it)
    plain = auto.encode("a b", add_special_tokens=False)
    want = [info["bos_token_id"]] * info["add_bos_token"] + plain + [info["eos_token_id"]] * info["add_eos_token"]
    assert auto.encode("a b", add_special_tokens=True) == want
    assert sorted(auto.all_special_ids) == info["special_ids"]
    def flags(tok):
        return {i: (t.content, t.special, t.normalized, t.lstrip, t.rstrip)
                for i, t in tok.added_tokens_decoder.items()}

    assert flags(auto) == flags(ref)
    assert len(auto) == len(ref) == info["vocab_size"]
    assert auto.get_vocab() == ref.get_vocab()
    if case.context_length:
        assert auto.model_max_length == case.context_length


CONVS = list(chat_conversations.conversations())


def _render(tok, conv, agp, template=None):
    try:
        return tok.apply_chat_template(conv["messages"], tools=conv.get("tools"), chat_template=template,
                                       add_generation_prompt=agp, tokenize=False, **conv.get("extra", {}))
    except Exception as e:  # noqa: BLE001 - the same failure on both sides is parity too
        return f"<raised {type(e).__name__}>"


def test_chat_template(case: Case) -> None:
    """apply_chat_template of the exported tokenizer renders, and tokenizes, every conversation as
    the reference does with the GGUF's own template."""
    if case.template is None:  # nothing to carry, and nothing made up
        assert "chat_template" not in case.config and case.auto.chat_template is None
        return
    chat_template_ref.set_epoch(0)
    assert case.auto.chat_template == case.template
    bad, rendered = [], 0
    for cid, conv, agp in CONVS:
        got, want = _render(case.auto, conv, agp), _render(case.ref, conv, agp, case.template)
        if got != want:
            bad.append((cid, got, want))
            continue
        if not want.startswith("<raised"):
            rendered += 1
            if case.auto.encode(got, add_special_tokens=False) != case.ref.encode(want, add_special_tokens=False):
                bad.append((cid, "ids differ", ""))
    if bad:
        pytest.fail(f"{case.name}: {len(bad)} of {len(CONVS)} conversations differ; first: " +
                    "".join(f"\n[{c}]\n  exported: {_text(g)}\n  ref:      {_text(w)}" for c, g, w in bad[:SHOW]))
    assert rendered > len(CONVS) // 2
    print(f"{case.name} chat template: {rendered} of {len(CONVS)} conversations rendered, all equal")


# ---- bad input ---------------------------------------------------------------------------------------


def _fails(r: subprocess.CompletedProcess, *needles: str) -> None:
    assert r.returncode == 2, f"exit {r.returncode}, stderr: {r.stderr}"
    msg = r.stderr.strip()
    assert msg.count("\n") == 0, f"one line expected: {msg!r}"
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"


def test_unsupported_tokenizer_model(tmp_path: Path) -> None:
    path = tmp_path / "bert.gguf"
    write_gguf(path, "bert", {"tokenizer.ggml.model": "bert", "tokenizer.ggml.tokens": ["[PAD]", "[UNK]", "a"],
                              "tokenizer.ggml.token_type": [3, 2, 1]})
    out = tmp_path / "out"
    out.mkdir()
    _fails(run_tool(path, out, expect_ok=False), "'bert'", "'gpt2'", "'llama'")
    assert list(out.iterdir()) == []


def test_unsupported_pre_tokenizer(tmp_path: Path) -> None:
    path = tmp_path / "pre.gguf"
    fields = dict(smol_fields())
    fields.pop("tokenizer.chat_template", None)
    write_gguf(path, "llama", {**fields, "tokenizer.ggml.pre": "no-such-pre"})
    out = tmp_path / "out"
    out.mkdir()
    _fails(run_tool(path, out, expect_ok=False), "'no-such-pre'")
    assert list(out.iterdir()) == []


def test_nul_token(tmp_path: Path) -> None:
    """tokenizer.json can spell a NUL (\\u0000) but celer's JSON writer cannot: refused, naming the token."""
    fields = spm_fields()
    fields["tokenizer.ggml.tokens"] = fields["tokenizer.ggml.tokens"][:-1] + ["a\0b"]
    path = tmp_path / "nul.gguf"
    write_gguf(path, "llama", fields)
    out = tmp_path / "out"
    out.mkdir()
    _fails(run_tool(path, out, expect_ok=False), f"token {len(fields['tokenizer.ggml.tokens']) - 1} holds a NUL byte")
    assert list(out.iterdir()) == []


def test_bad_output_dir(tmp_path: Path) -> None:
    model = model_path("smollm2-135m")
    missing = tmp_path / "missing"
    _fails(run_tool(model, missing, expect_ok=False), str(missing), "create the directory")
    afile = tmp_path / "afile"
    afile.write_text("x")
    _fails(run_tool(model, afile, expect_ok=False), str(afile), "not a directory")
    # the temporary file cannot be made (a directory is in its way, for root too)
    blocked = tmp_path / "blocked"
    (blocked / "tokenizer.json.partial").mkdir(parents=True)
    _fails(run_tool(model, blocked, expect_ok=False), str(blocked / "tokenizer.json.partial"))
    # the rename into place fails: the temporary file is removed again
    taken = tmp_path / "taken"
    (taken / "tokenizer.json").mkdir(parents=True)
    _fails(run_tool(model, taken, expect_ok=False), str(taken / "tokenizer.json"))
    assert sorted(p.name for p in taken.iterdir()) == ["tokenizer.json"]
    assert list((taken / "tokenizer.json").iterdir()) == []
    if os.geteuid() != 0:  # root writes through permission bits
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(stat.S_IRUSR | stat.S_IXUSR)
        try:
            _fails(run_tool(model, ro, expect_ok=False), str(ro / "tokenizer.json.partial"), "Permission denied")
        finally:
            ro.chmod(stat.S_IRWXU)


def test_usage() -> None:
    r = run_tool(expect_ok=False)
    assert r.returncode == 2 and "usage" in r.stderr
