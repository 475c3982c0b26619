"""The reference tokenizer for a GGUF file: a Hugging Face fast tokenizer built from the file's
tokenizer metadata, the way transformers builds one for `from_pretrained(..., gguf_file=...)`.

transformers' `integrations/gguf/gguf_tokenizer_mapping.py` has two halves:
  * `get_gguf_tokenizer(path)` reads the file into `(architecture, tokenizer_dict, tokenizer_config)`;
    it goes through transformers' own GGUF reader, which imports torch, so it is mirrored here with
    gguf-py's `GGUFReader` (same keys, same renames, same defaults -- the key tables are imported
    from that module, not copied);
  * `convert_gguf_tokenizer(architecture, tokenizer_dict)` builds the `tokenizers` backend; it needs
    no torch and is used as is.
The backend is then wrapped in a `TokenizersBackend` (transformers' fast tokenizer class) with the
tokenizer_config as keyword arguments, exactly as `TokenizersBackend.__init__` does for a gguf_file.

Deliberate departures, where transformers' GGUF mapping loses the model's own pipeline (the same
choices celer's src/tokenizer/vocab_gguf.c makes): pre-tokenizer "smollm" splits digits one by one
(`SMOLLM_PRE`), and "qwen2" normalizes to NFC (`NFC_PRES`), as those models' published
tokenizer.json files do.

Library use:
    hf, info = load_reference("model.gguf")
    hf.encode(text, add_special_tokens=True)            # BOS/EOS as the file's config says
    encode_batch(hf, texts, special=False)               # special-token texts as plain text

Command line (debugging):
    python tests/reference/tokenizer_ref.py MODEL.gguf --jsonl FILE [--no-special]
        FILE: one JSON string per line; prints one JSON array of ids per line.
    python tests/reference/tokenizer_ref.py MODEL.gguf --decode-jsonl FILE
        FILE: one JSON array of ids per line; prints one JSON string per line.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
import warnings

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
warnings.filterwarnings("ignore", message=".*PyTorch.*")
logging.getLogger("transformers").setLevel(logging.ERROR)

import gguf  # noqa: E402
from tokenizers import normalizers, pre_tokenizers  # noqa: E402
from tokenizers import processors  # noqa: E402
from transformers.integrations.gguf import gguf_tokenizer_mapping as _gtm  # noqa: E402
from transformers.tokenization_utils_tokenizers import TokenizersBackend  # noqa: E402


@functools.lru_cache(maxsize=None)
def _metadata_of(gguf_path: str) -> dict:
    reader = gguf.GGUFReader(gguf_path)
    return {key: field.contents() for key, field in reader.fields.items() if not key.startswith("GGUF.")}


def gguf_metadata(gguf_path: str) -> dict:
    """Every metadata key of a GGUF file with its value, as transformers' reader gives them: scalars
    as Python values, numeric arrays as lists, string arrays as lists of str (transformers keeps only
    the tokens and merges arrays in full and counts the rest; no other string array is used).
    gguf-py parses a file once per process (a Gemma vocabulary of 262k tokens takes 10-20 s); each
    call gets its own dict and lists, so a caller may change them."""
    return {key: list(v) if isinstance(v, list) else v for key, v in _metadata_of(os.fspath(gguf_path)).items()}


def read_gguf_tokenizer(gguf_path: str) -> tuple[str, dict, dict]:
    """`get_gguf_tokenizer` of transformers, reading the file with gguf-py instead of torch's reader:
    `(architecture, tokenizer_dict, tokenizer_config)`."""
    metadata = gguf_metadata(gguf_path)
    architecture = metadata["general.architecture"]
    grouped = {
        group: {name: metadata[f"tokenizer.{key}"] for key, name in renames.items() if f"tokenizer.{key}" in metadata}
        for group, renames in _gtm.GGUF_TOKENIZER_MAPPING.items()
    }
    tokenizer, tokenizer_config = grouped["tokenizer"], grouped["tokenizer_config"]

    tokenizer_type = tokenizer.get("tokenizer_type")
    if tokenizer_type == "llama":
        # as get_gguf_tokenizer: llama.cpp adds BOS to a sentencepiece vocabulary that does not say otherwise
        tokenizer_config.setdefault("add_bos_token", True)
    elif tokenizer_type == "gemma4":
        tokenizer_config["add_bos_token"] = False

    for name, key in _gtm._SPECIAL_TOKENS.items():
        token_id = metadata.get(f"tokenizer.ggml.{key}")
        tokenizer_config[name] = tokenizer["tokens"][token_id] if token_id is not None else None
    return architecture, tokenizer, tokenizer_config


# SmolLM2 ("smollm" in llama.cpp): transformers' GGUF mapping has no entry for this pre-tokenizer, so
# it would fall back to GPT-2's ByteLevel regex, which keeps digit runs together. SmolLM2's own
# published tokenizer.json, and llama.cpp's "smollm" pre-tokenizer (a `\p{N}` split ahead of the GPT-2
# regex), split every digit on its own first. We follow the model's tokenizer.json, not the mapping.
SMOLLM_PRE = "smollm"


def _smollm_pre_tokenizer():
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )


# Qwen2 ("qwen2", and its distills "deepseek-r1-qwen"): the mapping builds a plain GPT2Tokenizer and swaps
# in the Qwen2 split regex, but Qwen2's published tokenizer.json -- and transformers' own Qwen2Tokenizer
# class -- put an NFC normalizer in front (llama.cpp does not normalize). We follow the tokenizer.json.
NFC_PRES = ("qwen2", "deepseek-r1-qwen")


def _template(add_bos: bool, add_eos: bool, bos: str | None, bos_id, eos: str | None, eos_id):
    single, special = "$A:0", []
    if add_bos:
        single = f"{bos}:0 {single}"
        special.append((bos, bos_id))
    if add_eos:
        single = f"{single} {eos}:0"
        special.append((eos, eos_id))
    return processors.TemplateProcessing(single=single, pair=f"{single} $B:1", special_tokens=special)


@functools.lru_cache(maxsize=None)
def load_reference(gguf_path: str):
    """`(hf_tokenizer, info)` for a GGUF file. Cached per path: building the Gemma one takes seconds.

    info: architecture, tokenizer_type, pre_tokenizer_type, vocab_size, bos/eos/unk/pad ids and
    texts, add_bos_token, add_eos_token, add_prefix_space, control_tokens (GGUF token_type 3, texts),
    user_defined_tokens (token_type 4), special_ids (transformers' all_special_ids: the named ones)."""
    gguf_path = os.fspath(gguf_path)
    architecture, tokenizer_dict, tokenizer_config = read_gguf_tokenizer(gguf_path)
    backend, additional = _gtm.convert_gguf_tokenizer(architecture, tokenizer_dict)
    pre_type = tokenizer_dict.get("pre_tokenizer_type")
    if pre_type == SMOLLM_PRE:
        backend.pre_tokenizer = _smollm_pre_tokenizer()
    if pre_type in NFC_PRES:
        backend.normalizer = normalizers.NFC()

    kwargs = dict(tokenizer_config)
    kwargs.update(additional)
    kwargs.pop("chat_template", None)  # not needed, and keeps the object simple
    hf = TokenizersBackend(tokenizer_object=backend, clean_up_tokenization_spaces=False, **kwargs)

    tokens = tokenizer_dict["tokens"]
    types = tokenizer_dict.get("token_type") or []

    def tid(key):
        v = tokenizer_dict.get(key)
        return int(v) if v is not None else None

    info = {
        "path": gguf_path,
        "architecture": architecture,
        "tokenizer_type": tokenizer_dict.get("tokenizer_type"),
        "pre_tokenizer_type": pre_type,
        "vocab_size": len(tokens),
        "bos_token_id": tid("bos_token_id"),
        "eos_token_id": tid("eos_token_id"),
        "unk_token_id": tid("unk_token_id"),
        "pad_token_id": tid("pad_token_id"),
        "bos_token": tokenizer_config.get("bos_token"),
        "eos_token": tokenizer_config.get("eos_token"),
        "add_bos_token": bool(tokenizer_config.get("add_bos_token", False)),
        "add_eos_token": bool(tokenizer_config.get("add_eos_token", False)),
        "add_prefix_space": tokenizer_dict.get("add_prefix_space"),
        "control_tokens": [t for t, ty in zip(tokens, types) if ty == 3],
        "user_defined_tokens": [t for t, ty in zip(tokens, types) if ty == 4],
    }

    # BOS/EOS: TokenizersBackend builds a TemplateProcessing from add_bos_token/add_eos_token when they
    # are passed explicitly (it does for all three test models: builtin_post_processor_ok). Should a file
    # leave it otherwise -- no flag, or a bos_token text that names another id -- set the template
    # explicitly from the file's ids, so encode(add_special_tokens=True) adds BOS iff add_bos_token and
    # EOS iff add_eos_token.
    bos_id, eos_id = info["bos_token_id"], info["eos_token_id"]
    add_bos = info["add_bos_token"] and bos_id is not None
    add_eos = info["add_eos_token"] and eos_id is not None
    backend_now = hf.backend_tokenizer
    probe = backend_now.encode("a", add_special_tokens=True).ids
    plain = backend_now.encode("a", add_special_tokens=False).ids
    expected = ([bos_id] if add_bos else []) + plain + ([eos_id] if add_eos else [])
    info["builtin_post_processor_ok"] = probe == expected
    if probe != expected:
        backend_now.post_processor = _template(
            add_bos, add_eos, tokens[bos_id] if add_bos else None, bos_id, tokens[eos_id] if add_eos else None, eos_id
        )
    info["add_bos_token"], info["add_eos_token"] = add_bos, add_eos
    info["special_ids"] = sorted(hf.all_special_ids)
    return hf, info


def encode_batch(hf, texts: list[str], special: bool = True) -> list[list[int]]:
    """encode(add_special_tokens=True) for every text. special=False: special-token texts in the input
    are plain text (transformers' split_special_tokens=True, i.e. tokenizers'
    `encode_special_tokens = True`); non-special added tokens (GGUF user-defined) still match whole,
    and BOS/EOS are still added as the config says."""
    if not texts:
        return []
    return hf(list(texts), add_special_tokens=True, split_special_tokens=not special)["input_ids"]


def decode(hf, ids: list[int]) -> str:
    """The text of ids, special tokens written out as their text."""
    return hf.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def strip_bos_eos(ids: list[int], info: dict) -> list[int]:
    """ids without the BOS/EOS that encode(add_special_tokens=True) added."""
    ids = list(ids)
    if info["add_bos_token"] and ids and ids[0] == info["bos_token_id"]:
        ids = ids[1:]
    if info["add_eos_token"] and ids and ids[-1] == info["eos_token_id"]:
        ids = ids[:-1]
    return ids


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="GGUF file")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--jsonl", help="one JSON string per line; prints one JSON array of ids per line")
    g.add_argument("--decode-jsonl", help="one JSON array of ids per line; prints one JSON string per line")
    ap.add_argument("--no-special", action="store_true", help="treat special-token texts as plain text")
    ap.add_argument("--info", action="store_true", help="print the info dict to stderr")
    a = ap.parse_args(argv)
    hf, info = load_reference(a.model)
    if a.info:
        shown = {k: (v if not isinstance(v, list) or len(v) < 20 else f"[{len(v)} items]") for k, v in info.items()}
        print(json.dumps(shown, ensure_ascii=False, indent=1), file=sys.stderr)
    with open(a.jsonl or a.decode_jsonl, encoding="utf-8", newline="\n") as f:
        lines = [json.loads(line) for line in f.read().split("\n") if line]
    out = sys.stdout
    if a.jsonl:
        for ids in encode_batch(hf, lines, special=not a.no_special):
            out.write(json.dumps(ids) + "\n")
    else:
        for ids in lines:
            out.write(json.dumps(decode(hf, ids), ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
