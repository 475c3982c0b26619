"""`celer tokenize` on model directories (tokenizer.json + tokenizer_config.json) against the
Hugging Face reference, and the refusals of tokenizer.json components celer cannot reproduce.

Parity: for each real test model, the reference tokenizer is built exactly as tokenizer_ref.py
builds it from the GGUF file, and saved as a model directory: tokenizer.json
(`backend_tokenizer.save`), tokenizer_config.json (tokenizer_class TokenizersBackend, the
add_bos_token/add_eos_token and named special tokens of the reference), a minimal config.json
(model_type and sizes from the GGUF) and a one-tensor model.safetensors (a model directory
needs weights to open; tokenizing reads none). transformers' AutoTokenizer on that directory
must agree with the reference (else the fixture is wrong), and then celer must give identical
ids on the corpus of tokenizer_corpus.py, with special tokens parsed and as plain text, and
identical decodes.

Pipelines: small variations of real pipelines (Metaspace first/never with split, Digits runs,
Split of a literal, Prepend, RobertaProcessing, ...) built with the tokenizers library over a
real vocabulary, compared on a slice of the corpus.

Refusals: hand-written tokenizer.json files with components celer cannot reproduce exactly
(WordPiece, Unigram, Lowercase, NFKC, Whitespace, ByteLevel(add_prefix_space), ...) make celer
exit 2 with one line on stderr naming the component.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import tokenizer_corpus  # noqa: E402
import tokenizer_ref  # noqa: E402
from test_tokenizer_parity import MODELS, SEED, SHOW, model_path  # noqa: E402

CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
CELER_TIMEOUT = 240


# ---- model directories ----------------------------------------------------------------------


def write_weights(d: Path) -> None:
    """A valid model.safetensors holding one F32 scalar-sized tensor."""
    header = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
    header += b" " * (-len(header) % 8)
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0\0\0\0")


def write_config(d: Path, model_type: str = "llama", sizes: dict | None = None) -> None:
    cfg = {"model_type": model_type, "architectures": ["ForTokenizerTest"]}
    cfg.update(sizes or {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 1,
                         "intermediate_size": 128, "vocab_size": 256})
    (d / "config.json").write_text(json.dumps(cfg))


def write_dir(d: Path, tokenizer_json: dict | str, tokenizer_config: dict | None = None, **cfg) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    text = tokenizer_json if isinstance(tokenizer_json, str) else json.dumps(tokenizer_json, ensure_ascii=False)
    (d / "tokenizer.json").write_text(text, encoding="utf-8")
    if tokenizer_config is not None:
        (d / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, ensure_ascii=False), encoding="utf-8")
    write_config(d, **cfg)
    write_weights(d)
    return d


def gguf_sizes(path: str, arch: str) -> dict:
    metadata = tokenizer_ref.gguf_metadata(path)

    def get(key, default=0):
        v = metadata.get(f"{arch}.{key}")
        return int(v) if v is not None else default

    return {
        "hidden_size": get("embedding_length"),
        "num_hidden_layers": get("block_count"),
        "num_attention_heads": get("attention.head_count"),
        "num_key_value_heads": get("attention.head_count_kv"),
        "intermediate_size": get("feed_forward_length"),
        "max_position_embeddings": get("context_length"),
    }


def run_celer(model_dir: Path, args: list[str], n_lines: int | None, what: str, expect_rc: int = 0):
    cmd = [CELER, "tokenize", "-m", str(model_dir), *args]
    assert os.path.isfile(CELER) and os.access(CELER, os.X_OK), f"celer binary not found at {CELER} (set CELER_BIN)"
    r = subprocess.run(cmd, capture_output=True, timeout=CELER_TIMEOUT)
    err = r.stderr.decode("utf-8", "replace")
    if r.returncode != expect_rc:
        pytest.fail(f"{what}: `{' '.join(cmd)}` exited {r.returncode}, expected {expect_rc}\nstderr:\n{err[-3000:]}")
    if expect_rc:
        return err
    lines = r.stdout.decode("utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    assert len(lines) == n_lines, f"{what}: {len(lines)} output lines for {n_lines} input lines\nstderr:\n{err}"
    return [json.loads(line) for line in lines]


def write_jsonl(p: Path, rows) -> Path:
    with open(p, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return p


def check_same(what: str, texts, got, want) -> None:
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if bad:
        lines = [f"{what}: {len(bad)} of {len(want)} differ; first {min(SHOW, len(bad))}:"]
        for i in bad[:SHOW]:
            lines.append(f"[{i}] {texts[i]!r:.200}\n  celer: {str(got[i]):.300}\n  ref:   {str(want[i]):.300}")
        pytest.fail("\n".join(lines))


# ---- parity on the real models ------------------------------------------------------------------


class Case:
    def __init__(self, name: str, tmp: Path):
        self.name = name
        path = model_path(name)
        self.hf, self.info = tokenizer_ref.load_reference(path)
        arch, _, tcfg = tokenizer_ref.read_gguf_tokenizer(path)
        config = {"tokenizer_class": "TokenizersBackend"}
        for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
            if tcfg.get(key) is not None:
                config[key] = tcfg[key]
        config["add_bos_token"] = self.info["add_bos_token"]
        config["add_eos_token"] = self.info["add_eos_token"]
        self.dir = tmp / "model"
        self.dir.mkdir()
        self.hf.backend_tokenizer.save(str(self.dir / "tokenizer.json"))
        (self.dir / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
        write_config(self.dir, arch, gguf_sizes(path, arch))
        write_weights(self.dir)
        specials = self.info["control_tokens"] + self.info["user_defined_tokens"]
        self.corpus = tokenizer_corpus.make_corpus(SEED, specials)
        self.corpus_file = write_jsonl(tmp / "corpus.jsonl", self.corpus)
        self.ref_ids = tokenizer_ref.encode_batch(self.hf, self.corpus, special=True)
        self.ref_ids_plain = tokenizer_ref.encode_batch(self.hf, self.corpus, special=False)
        self.tmp = tmp


@pytest.fixture(scope="module", params=MODELS)
def case(request, tmp_path_factory) -> Case:
    return Case(request.param, tmp_path_factory.mktemp(request.param))


def test_directory_is_faithful(case: Case) -> None:
    """AutoTokenizer on the written directory gives the reference's ids: the fixture is right."""
    from transformers import AutoTokenizer

    auto = AutoTokenizer.from_pretrained(str(case.dir))
    check_same(f"{case.name} AutoTokenizer(dir) vs reference", case.corpus,
               tokenizer_ref.encode_batch(auto, case.corpus, special=True), case.ref_ids)
    check_same(f"{case.name} AutoTokenizer(dir) vs reference, special as text", case.corpus,
               tokenizer_ref.encode_batch(auto, case.corpus, special=False), case.ref_ids_plain)


def test_encode_parity(case: Case) -> None:
    got = run_celer(case.dir, ["--jsonl", str(case.corpus_file)], len(case.corpus), "encode")
    check_same(f"{case.name} encode", case.corpus, got, case.ref_ids)


def test_encode_parity_no_special(case: Case) -> None:
    got = run_celer(case.dir, ["--jsonl", str(case.corpus_file), "--no-special"], len(case.corpus), "encode")
    check_same(f"{case.name} encode --no-special", case.corpus, got, case.ref_ids_plain)


def test_decode_parity(case: Case) -> None:
    rows = [tokenizer_ref.strip_bos_eos(ids, case.info) for ids in case.ref_ids]
    f = write_jsonl(case.tmp / "ref_ids.jsonl", rows)
    got = run_celer(case.dir, ["--decode-jsonl", str(f)], len(rows), "decode")
    check_same(f"{case.name} decode", case.corpus, got, [tokenizer_ref.decode(case.hf, ids) for ids in rows])


# ---- pipeline variants over real vocabularies ---------------------------------------------------

META = "\u2581"
SPM_DECODE = [{"type": "Replace", "pattern": {"String": META}, "content": " "}, {"type": "ByteFallback"},
              {"type": "Fuse"}]
STRIP = {"type": "Strip", "content": " ", "start": 1, "stop": 0}
LLAMA3_SPLIT = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
                "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")


def metaspace(scheme: str, split: bool) -> dict:
    return {"type": "Metaspace", "replacement": META, "prepend_scheme": scheme, "split": split}


def byte_level(use_regex: bool = True) -> dict:
    return {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": use_regex}


def seq(*steps) -> dict:
    return {"type": "Sequence", "pretokenizers": list(steps)}


# name: (base model, changes to tokenizer.json, tokenizer_config.json without add_* flags)
VARIANTS = {
    "spm-metaspace-first": ("gemma3-270m", {"normalizer": None, "pre_tokenizer": metaspace("first", False),
                                            "decoder": {"type": "Sequence", "decoders": SPM_DECODE + [STRIP]}}, False),
    "spm-metaspace-first-split": ("gemma3-270m", {"normalizer": None, "pre_tokenizer": metaspace("first", True),
                                                  "decoder": {"type": "Sequence", "decoders": SPM_DECODE + [STRIP]}},
                                  False),
    "spm-metaspace-never-split": ("gemma3-270m", {"normalizer": None, "pre_tokenizer": metaspace("never", True)}, False),
    "spm-prepend-replace": ("gemma3-270m", {
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": META},
                                                            {"type": "Replace", "pattern": {"String": " "},
                                                             "content": META}]},
        "pre_tokenizer": None, "decoder": {"type": "Sequence", "decoders": SPM_DECODE + [STRIP]}}, False),
    "spm-nfc-replace": ("gemma3-270m", {"normalizer": {"type": "Sequence", "normalizers": [
        {"type": "NFC"}, {"type": "Replace", "pattern": {"String": " "}, "content": META}]}}, False),
    "bl-digit-runs": ("smollm2-135m", {"pre_tokenizer": seq({"type": "Digits", "individual_digits": False},
                                                            byte_level())}, False),
    "bl-llama3-split-nfc": ("smollm2-135m", {"normalizer": {"type": "NFC"}, "pre_tokenizer": seq(
        {"type": "Split", "pattern": {"Regex": LLAMA3_SPLIT}, "behavior": "Isolated", "invert": False},
        byte_level(False))}, False),
    "bl-literal-split": ("smollm2-135m", {"pre_tokenizer": seq(
        {"type": "Split", "pattern": {"String": "e."}, "behavior": "Isolated", "invert": False}, byte_level())}, False),
    "bl-ignore-merges": ("smollm2-135m", {"model.ignore_merges": True}, False),
    "bl-roberta": ("smollm2-135m", {"post_processor": {"type": "RobertaProcessing", "sep": ["<|im_end|>", 2],
                                                       "cls": ["<|im_start|>", 1], "trim_offsets": True,
                                                       "add_prefix_space": False}}, True),
    "bl-template": ("smollm2-135m", {"post_processor": {
        "type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
            {"type": "TemplateProcessing",
             "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                        {"SpecialToken": {"id": "<|im_end|>", "type_id": 0}}],
             "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [0], "tokens": ["<|endoftext|>"]},
                                "<|im_end|>": {"id": "<|im_end|>", "ids": [2], "tokens": ["<|im_end|>"]}}}]}}, True),
    "bl-normalized-added": ("smollm2-135m", {"added_tokens.normalized": True}, False),
}


@pytest.fixture(scope="module")
def base_json(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            hf, info = tokenizer_ref.load_reference(model_path(name))
            p = tmp_path_factory.mktemp("base") / "tokenizer.json"
            hf.backend_tokenizer.save(str(p))
            cache[name] = (json.loads(p.read_text(encoding="utf-8")), info)
        return cache[name]

    return get


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_pipeline_variant(variant, base_json, tmp_path) -> None:
    """celer on a modified tokenizer.json equals AutoTokenizer on the same directory."""
    from transformers import AutoTokenizer

    base, changes, keep_pp = VARIANTS[variant]
    if base not in MODELS:
        pytest.skip(f"{base} not available")
    doc, info = base_json(base)
    doc = json.loads(json.dumps(doc))
    for key, value in changes.items():
        if key == "added_tokens.normalized":
            for tok in doc["added_tokens"]:
                tok["normalized"] = value
        elif key.startswith("model."):
            doc["model"][key[6:]] = value
        else:
            doc[key] = value
    config = {"tokenizer_class": "TokenizersBackend", "bos_token": info["bos_token"], "eos_token": info["eos_token"]}
    if not keep_pp:  # else the post_processor decides BOS/EOS
        config.update(add_bos_token=info["add_bos_token"], add_eos_token=info["add_eos_token"])
    d = write_dir(tmp_path / "model", doc, config)
    auto = AutoTokenizer.from_pretrained(str(d))
    specials = info["control_tokens"] + info["user_defined_tokens"]
    corpus = tokenizer_corpus.make_corpus(SEED, specials)[::3]
    f = write_jsonl(tmp_path / "corpus.jsonl", corpus)
    for special in (True, False):
        want = tokenizer_ref.encode_batch(auto, corpus, special=special)
        got = run_celer(d, ["--jsonl", str(f)] + ([] if special else ["--no-special"]), len(corpus), variant)
        check_same(f"{variant} encode special={special}", corpus, got, want)
    rows = [auto(t, add_special_tokens=False)["input_ids"] for t in corpus]
    f = write_jsonl(tmp_path / "ids.jsonl", rows)
    got = run_celer(d, ["--decode-jsonl", str(f)], len(rows), variant)
    check_same(f"{variant} decode", corpus, got, [tokenizer_ref.decode(auto, ids) for ids in rows])


# ---- refusals -------------------------------------------------------------------------------------


def tiny(**over) -> dict:
    doc = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": byte_level(), "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3}, "merges": ["a b"]},
    }
    for key, value in over.items():
        if key.startswith("model_"):
            doc["model"][key[6:]] = value
        else:
            doc[key] = value
    return doc


ADDED_S = {"id": 3, "content": "<s>", "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
           "special": True}

REFUSALS = {
    "wordpiece": (tiny(model={"type": "WordPiece", "unk_token": "[UNK]", "vocab": {"[UNK]": 0}}), "model type 'WordPiece'"),
    "unigram": (tiny(model={"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0]]}), "model type 'Unigram'"),
    "wordlevel": (tiny(model={"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}), "model type 'WordLevel'"),
    "dropout": (tiny(model_dropout=0.1), "dropout"),
    "subword-prefix": (tiny(model_continuing_subword_prefix="##"), "continuing_subword_prefix"),
    "lowercase": (tiny(normalizer={"type": "Lowercase"}), "normalizer 'Lowercase'"),
    "nfkc": (tiny(normalizer={"type": "NFKC"}), "normalizer 'NFKC'"),
    "sequence-lowercase": (tiny(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"}, {"type": "Lowercase"}]}),
                           "normalizer 'Lowercase'"),
    "replace-other": (tiny(normalizer={"type": "Replace", "pattern": {"String": "a"}, "content": "b"}),
                      "normalizer Replace"),
    "whitespace": (tiny(pre_tokenizer={"type": "Whitespace"}), "pre_tokenizer 'Whitespace'"),
    "bytelevel-prefix": (tiny(pre_tokenizer={"type": "ByteLevel", "add_prefix_space": True, "use_regex": True}),
                         "ByteLevel with add_prefix_space"),
    "split-removed": (tiny(pre_tokenizer={"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Removed",
                                          "invert": False}), "Split with behavior 'Removed'"),
    "split-regex": (tiny(pre_tokenizer={"type": "Split", "pattern": {"Regex": "(?<=a)b"}, "behavior": "Isolated",
                                        "invert": False}), "pre_tokenizer Split: regex"),
    "metaspace-always": (tiny(pre_tokenizer=metaspace("always", False)), "prepend_scheme 'always'"),
    "bytelevel-not-last": (tiny(pre_tokenizer=seq(byte_level(), {"type": "Digits", "individual_digits": True})),
                           "Digits after ByteLevel"),
    "decoder-wordpiece": (tiny(decoder={"type": "WordPiece", "prefix": "##", "cleanup": True}), "decoder 'WordPiece'"),
    "decoder-null": (tiny(decoder=None), "no decoder"),
    "decoder-sequence": (tiny(decoder={"type": "Sequence", "decoders": [{"type": "ByteFallback"}]}), "decoder Sequence"),
    "added-lstrip": (tiny(added_tokens=[dict(ADDED_S, lstrip=True)]), "lstrip true"),
    "added-normalized": (tiny(normalizer={"type": "NFC"}, added_tokens=[dict(ADDED_S, normalized=True)]),
                         "normalized true"),
    "post-processor-bert-pair": (tiny(post_processor={"type": "TemplateProcessing", "single": [
        {"SpecialToken": {"id": "<s>", "type_id": 0}}, {"SpecialToken": {"id": "<s>", "type_id": 0}},
        {"Sequence": {"id": "A", "type_id": 0}}], "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [3],
                                                                                          "tokens": ["<s>"]}}}),
                                 "post_processor TemplateProcessing"),
    "post-processor-unknown": (tiny(post_processor={"type": "BlipProcessing"}), "post_processor 'BlipProcessing'"),
}


@pytest.mark.parametrize("name", sorted(REFUSALS))
def test_refusal(name, tmp_path) -> None:
    doc, needle = REFUSALS[name]
    d = write_dir(tmp_path / name, doc, {"tokenizer_class": "TokenizersBackend"})
    err = run_celer(d, ["ab"], None, name, expect_rc=2)
    lines = err.strip("\n").split("\n")
    assert len(lines) == 1, f"{name}: expected one line on stderr, got:\n{err}"
    assert needle in lines[0], f"{name}: stderr does not name the component ({needle!r}):\n{err}"


def test_tiny_accepted(tmp_path) -> None:
    """The base of the refusal cases is itself accepted and agrees with tokenizers."""
    from tokenizers import Tokenizer

    doc = tiny(added_tokens=[ADDED_S])
    d = write_dir(tmp_path / "ok", doc, {"tokenizer_class": "TokenizersBackend"})
    ref = Tokenizer.from_str(json.dumps(doc))
    texts = ["ab", "aab<s>b", "ba ab", ""]
    f = write_jsonl(tmp_path / "t.jsonl", texts)
    assert run_celer(d, ["--jsonl", str(f)], len(texts), "tiny") == [ref.encode(t).ids for t in texts]


def test_missing_tokenizer_json(tmp_path) -> None:
    d = write_dir(tmp_path / "none", tiny())
    (d / "tokenizer.json").unlink()
    err = run_celer(d, ["ab"], None, "no tokenizer.json", expect_rc=2)
    assert "tokenizer.json" in err and len(err.strip().split("\n")) == 1, err
