"""`celer tokenize` against the Hugging Face reference (tokenizer_ref.py) on every real test model:
exact id parity on a corpus of several thousand strings (tokenizer_corpus.py), with special tokens
parsed and with them as plain text, then decoding: celer's decode equals the reference's on every
line, and decode(encode(x)) == x wherever the reference round-trips.

The command line contract these tests hold celer to:

  celer tokenize -m MODEL.gguf --jsonl FILE [--no-special]
      FILE: UTF-8, one JSON string per line, lines separated by "\\n" only (a string may hold raw
      U+2028, U+0085, ... and escaped \\n, \\r, \\u0000). stdout: exactly one JSON array of token ids
      per input line, in order, nothing else; exit 0. Ids are what HF encode(add_special_tokens=True)
      gives: BOS first iff the model adds BOS (tokenizer.ggml.add_bos_token, default true for a
      SentencePiece "llama" vocabulary), EOS last iff add_eos_token.
      Special (control) token texts in the input become their ids; with --no-special they are plain
      text (HF split_special_tokens=True / tokenizers encode_special_tokens=True). User-defined
      tokens (GGUF token_type 4) match whole in both modes; BOS/EOS are added in both modes.
  celer tokenize -m MODEL.gguf --decode-jsonl FILE
      FILE: one JSON array of ids per line. stdout: one JSON string per line, the decoded text with
      special tokens written as their text (HF decode(ids, skip_special_tokens=False)); exit 0.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import tokenizer_corpus  # noqa: E402
import tokenizer_ref  # noqa: E402

CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
FETCH = str(ROOT / "scripts" / "fetch-model")
SEED = int(os.environ.get("CELER_TOKENIZER_SEED", "20250101"))
CELER_TIMEOUT = 240
SHOW = 10  # mismatches shown


def _models() -> list[str]:
    names = ["smollm2-135m", "gemma3-270m"]
    r = subprocess.run([FETCH, "--list"], capture_output=True, text=True, timeout=60)
    listed = {line.split()[0] for line in r.stdout.splitlines() if line.strip() and not line.startswith("cache:")}
    if "qwen2.5-coder-0.5b" in listed:
        names.append("qwen2.5-coder-0.5b")
    return names


MODELS = _models()


def model_path(name: str) -> str:
    r = subprocess.run([FETCH, name], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"scripts/fetch-model {name} failed: {r.stderr}"
    return r.stdout.strip()


class Case:
    def __init__(self, name: str, tmp: Path):
        self.name = name
        self.path = model_path(name)
        self.hf, self.info = tokenizer_ref.load_reference(self.path)
        self.tmp = tmp
        specials = self.info["control_tokens"] + self.info["user_defined_tokens"]
        self.corpus = tokenizer_corpus.make_corpus(SEED, specials)
        self.corpus_file = self.write_jsonl("corpus.jsonl", self.corpus)
        self.ref_ids = tokenizer_ref.encode_batch(self.hf, self.corpus, special=True)
        self.ref_ids_plain = tokenizer_ref.encode_batch(self.hf, self.corpus, special=False)

    def write_jsonl(self, name: str, rows) -> Path:
        p = self.tmp / name
        with open(p, "w", encoding="utf-8", newline="\n") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return p

    def pieces(self, ids) -> list:
        n = self.info["vocab_size"]
        return [self.hf.convert_ids_to_tokens(i) if isinstance(i, int) and 0 <= i < n else f"<bad id {i!r}>" for i in ids]

    def ref_decode(self, ids) -> str:
        return tokenizer_ref.decode(self.hf, ids)


@pytest.fixture(scope="module", params=MODELS)
def case(request, tmp_path_factory) -> Case:
    return Case(request.param, tmp_path_factory.mktemp(request.param))


def run_celer(case: Case, args: list[str], n_lines: int, what: str) -> list:
    """Run celer tokenize; its stdout as a list of parsed JSON lines, exactly n_lines of them."""
    assert os.path.isfile(CELER) and os.access(CELER, os.X_OK), f"celer binary not found at {CELER} (set CELER_BIN)"
    cmd = [CELER, "tokenize", "-m", case.path, *args]
    try:
        r = subprocess.run(cmd, capture_output=True, timeout=CELER_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what}: `{' '.join(cmd)}` ran past {CELER_TIMEOUT}s")
    err = r.stderr.decode("utf-8", "replace")[-3000:]
    if r.returncode != 0:
        pytest.fail(f"{what}: `{' '.join(cmd)}` exited {r.returncode}\nstderr:\n{err}")
    try:
        text = r.stdout.decode("utf-8")
    except UnicodeDecodeError as e:
        pytest.fail(f"{what}: stdout is not valid UTF-8: {e}")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    assert len(lines) == n_lines, f"{what}: {len(lines)} output lines for {n_lines} input lines\nstderr:\n{err}"
    out = []
    for i, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError as e:
            pytest.fail(f"{what}: output line {i + 1} is not JSON ({e}): {line[:300]!r}")
    return out


def _short(xs, at: int | None = None, width: int = 24):
    """A list shown whole if short, else a window around index `at`."""
    if len(xs) <= 2 * width + 8:
        return repr(xs)
    at = at or 0
    lo, hi = max(0, at - width), min(len(xs), at + width)
    return f"(len {len(xs)}) [{'..., ' if lo else ''}{repr(xs[lo:hi])[1:-1]}{', ...' if hi < len(xs) else ''}]  (from index {lo})"


def _text(s: str, limit: int = 300) -> str:
    r = repr(s)
    return r if len(r) <= limit else f"{r[:limit]}... (len {len(s)} chars)"


def _first_diff(a, b) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def check_ids(case: Case, got: list, want: list[list[int]], what: str) -> None:
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if not bad:
        return
    msg = [f"{case.name} {what}: {len(bad)} of {len(want)} strings differ from the reference; first {min(SHOW, len(bad))}:"]
    for i in bad[:SHOW]:
        g, w = got[i], want[i]
        if not isinstance(g, list):
            msg.append(f"\n[{i}] {_text(case.corpus[i])}\n  celer output is not an id list: {g!r}")
            continue
        d = _first_diff(g, w)
        msg.append(
            f"\n[{i}] {_text(case.corpus[i])}  (first difference at token {d})"
            f"\n  celer ids:    {_short(g, d)}\n  ref ids:      {_short(w, d)}"
            f"\n  celer pieces: {_short(case.pieces(g), d)}\n  ref pieces:   {_short(case.pieces(w), d)}"
        )
    pytest.fail("\n".join(msg))


def test_reference_is_not_vacuous(case: Case) -> None:
    """Guard against a broken reference making the parity tests trivially pass."""
    assert len(case.corpus) >= 2000
    assert len(case.ref_ids) == len(case.corpus)
    assert len({i for ids in case.ref_ids for i in ids}) > 1000, "the reference uses too few distinct ids"
    assert sum(a != b for a, b in zip(case.ref_ids, case.ref_ids_plain)) > 50, "--no-special changes nothing"
    bos = case.info["bos_token_id"]
    starts = sum(1 for ids in case.ref_ids if ids[:1] == [bos])
    if case.info["add_bos_token"]:
        assert starts == len(case.ref_ids)
    else:
        assert starts < len(case.ref_ids) // 10


def test_encode_parity(case: Case) -> None:
    got = run_celer(case, ["--jsonl", str(case.corpus_file)], len(case.corpus), "encode")
    check_ids(case, got, case.ref_ids, "encode (special tokens parsed)")


def test_encode_parity_no_special(case: Case) -> None:
    got = run_celer(case, ["--jsonl", str(case.corpus_file), "--no-special"], len(case.corpus), "encode --no-special")
    check_ids(case, got, case.ref_ids_plain, "encode --no-special (special tokens as text)")


def _check_texts(case: Case, ids_rows, got: list, want: list[str], what: str, inputs=None) -> None:
    bad = [i for i, (g, w) in enumerate(zip(got, want)) if g != w]
    if not bad:
        return
    msg = [f"{case.name} {what}: {len(bad)} of {len(want)} lines differ; first {min(SHOW, len(bad))}:"]
    for i in bad[:SHOW]:
        src = f"\n  input text: {_text(inputs[i])}" if inputs is not None else ""
        msg.append(
            f"\n[{i}] ids {_short(ids_rows[i])}\n  pieces {_short(case.pieces(ids_rows[i]))}{src}"
            f"\n  celer: {_text(got[i]) if isinstance(got[i], str) else repr(got[i])}\n  ref:   {_text(want[i])}"
        )
    pytest.fail("\n".join(msg))


def test_decode_parity(case: Case) -> None:
    """celer's decode of the reference's ids (BOS/EOS removed) equals the reference's decode, line by line."""
    rows = [tokenizer_ref.strip_bos_eos(ids, case.info) for ids in case.ref_ids]
    f = case.write_jsonl("ref_ids.jsonl", rows)
    got = run_celer(case, ["--decode-jsonl", str(f)], len(rows), "decode")
    want = [case.ref_decode(ids) for ids in rows]
    _check_texts(case, rows, got, want, "decode of reference ids", inputs=case.corpus)


def test_roundtrip(case: Case) -> None:
    """decode(encode(x)) == x through celer, for every x the reference itself round-trips."""
    enc = run_celer(case, ["--jsonl", str(case.corpus_file)], len(case.corpus), "encode")
    rows = [tokenizer_ref.strip_bos_eos(ids, case.info) if isinstance(ids, list) else [] for ids in enc]
    f = case.write_jsonl("celer_ids.jsonl", rows)
    got = run_celer(case, ["--decode-jsonl", str(f)], len(rows), "decode")
    ref_rt = [case.ref_decode(tokenizer_ref.strip_bos_eos(ids, case.info)) == x for ids, x in zip(case.ref_ids, case.corpus)]
    assert sum(ref_rt) > 0.9 * len(case.corpus), "the reference round-trips too few strings to mean anything"
    idx = [i for i, ok in enumerate(ref_rt) if ok]
    _check_texts(case, [rows[i] for i in idx], [got[i] for i in idx], [case.corpus[i] for i in idx],
                 "round trip decode(encode(x)) == x")


def test_decode_random_ids(case: Case) -> None:
    """Decoding arbitrary id sequences, including lone byte tokens that make invalid UTF-8, special
    and user-defined tokens: celer equals the reference on every line."""
    rng = random.Random(SEED)
    n = case.info["vocab_size"]
    vocab = case.hf.get_vocab()
    if case.info["tokenizer_type"] == "gpt2":
        from transformers.convert_slow_tokenizer import bytes_to_unicode

        byte_ids = [vocab[c] for c in bytes_to_unicode().values() if c in vocab]
    else:
        byte_ids = [vocab[f"<0x{b:02X}>"] for b in range(256) if f"<0x{b:02X}>" in vocab]
    special = sorted({vocab[t] for t in case.info["control_tokens"] + case.info["user_defined_tokens"] if t in vocab})
    rows = [[i] for i in range(min(n, 400))]
    rows += [[i] for i in byte_ids]
    rows += [[i] for i in special[:200]]
    for _ in range(600):
        rows.append([rng.randrange(n) for _ in range(rng.randint(1, 24))])
    for _ in range(400):
        rows.append([rng.choice(byte_ids) for _ in range(rng.randint(1, 12))])
    for _ in range(300):
        pool = (byte_ids, special or byte_ids, range(n))
        rows.append([rng.choice(rng.choice(pool)) for _ in range(rng.randint(1, 16))])
    rows.append([])
    f = case.write_jsonl("random_ids.jsonl", rows)
    got = run_celer(case, ["--decode-jsonl", str(f)], len(rows), "decode random ids")
    want = [case.ref_decode(ids) for ids in rows]
    _check_texts(case, rows, got, want, "decode of random ids")
