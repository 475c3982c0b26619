"""`celer template` against transformers' chat-template rendering (jinja2 3.1.6), byte for byte.

For every template in tests/data/chat-templates/ and the chat templates inside the real test
models' GGUF files (tokenizer.chat_template; SmolLM2 and Qwen2.5-Coder have one, Gemma 3 270M
has none and must fall back to plain concatenation with a warning), and every conversation of
chat_conversations.py (with the generation prompt on and off, enable_thinking on and off):
render with transformers (chat_template_ref.py) and with

  celer template --file T.jinja --messages M.json [--tools T.json] [--no-generation-prompt]
                 [--var NAME=JSON]... --bos TEXT --eos TEXT
  celer template -m MODEL.gguf --messages M.json ...     (bos/eos from the model)

and require identical bytes on stdout and exit 0; where the reference raises (a TemplateError
such as raise_exception, or any other error jinja2 raises for that conversation), celer must
exit 2 with one line on stderr. SOURCE_DATE_EPOCH is fixed so strftime_now() agrees.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import chat_conversations  # noqa: E402
import chat_template_ref  # noqa: E402

CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
FETCH = str(ROOT / "scripts" / "fetch-model")
TEMPLATES = sorted((ROOT / "tests" / "data" / "chat-templates").glob("*.jinja"))
EPOCH = 1717243200  # 2024-06-01 12:00:00 UTC
BOS, EOS = "<s>", "</s>"
CONVS = list(chat_conversations.conversations())


def _model(name: str) -> str | None:
    r = subprocess.run([FETCH, "--offline", name], capture_output=True, text=True, timeout=60)
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def _gguf_template(path: str):
    """(template or None, bos text, eos text) as transformers' GGUF loader sees them."""
    from gguf import GGUFReader

    r = GGUFReader(path)

    def field(key):
        f = r.fields.get(key)
        return None if f is None else f

    def string(f):
        return bytes(f.parts[f.data[0]]).decode("utf-8")

    tpl = field("tokenizer.chat_template")
    toks = field("tokenizer.ggml.tokens")

    def tok(key):
        f = field(key)
        if f is None or toks is None:
            return None
        i = int(f.parts[f.data[0]][0])
        return bytes(toks.parts[toks.data[i]]).decode("utf-8")

    return (string(tpl) if tpl else None), tok("tokenizer.ggml.bos_token_id"), tok("tokenizer.ggml.eos_token_id")


def _run_celer(source_args, conv, agp, bos=None, eos=None):
    with tempfile.TemporaryDirectory() as d:
        m = Path(d) / "m.json"
        m.write_text(json.dumps(conv["messages"], ensure_ascii=False), encoding="utf-8")
        args = [CELER, "template", *source_args, "--messages", str(m)]
        if conv.get("tools") is not None:
            t = Path(d) / "t.json"
            t.write_text(json.dumps(conv["tools"], ensure_ascii=False), encoding="utf-8")
            args += ["--tools", str(t)]
        if not agp:
            args.append("--no-generation-prompt")
        for k, v in (conv.get("extra") or {}).items():
            args += ["--var", f"{k}={json.dumps(v)}"]
        if bos is not None:
            args += ["--bos", bos]
        if eos is not None:
            args += ["--eos", eos]
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(EPOCH))
        return subprocess.run(args, capture_output=True, timeout=60, env=env)


def _compare(label, template, source_args, bos, eos, cli_bos, cli_eos):
    """Returns (pairs compared, failures)."""
    chat_template_ref.set_epoch(EPOCH)
    failures = []
    for cid, conv, agp in CONVS:
        try:
            want = chat_template_ref.render(template, conv["messages"], conv.get("tools"), agp, bos, eos, conv.get("extra"))
            want_err = None
        except Exception as e:  # noqa: BLE001 - any error jinja2 raises must be an error in celer too
            want, want_err = None, f"{type(e).__name__}: {e}"
        r = _run_celer(source_args, conv, agp, cli_bos, cli_eos)
        if want_err is not None:
            if r.returncode != 2 or r.stdout:
                failures.append(f"{label} × {cid}: reference raised ({want_err[:120]}) but celer exited "
                                f"{r.returncode} with {r.stdout[:80]!r}")
            continue
        got = r.stdout.decode("utf-8", "replace")
        if r.returncode != 0 or got != want:
            at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            failures.append(f"{label} × {cid}: exit {r.returncode}, stderr {r.stderr.decode()[:200]!r}; first difference "
                            f"at char {at}: celer {got[max(0, at - 40):at + 40]!r} vs jinja2 {want[max(0, at - 40):at + 40]!r}")
    return len(CONVS), failures


@pytest.mark.parametrize("path", TEMPLATES, ids=[p.stem for p in TEMPLATES])
def test_template_file_parity(path):
    template = path.read_text(encoding="utf-8")
    n, failures = _compare(path.name, template, ["--file", str(path)], BOS, EOS, BOS, EOS)
    assert not failures, f"{len(failures)} of {n} conversations differ:\n" + "\n".join(failures[:8])


@pytest.mark.parametrize("name", ["smollm2-135m", "qwen2.5-coder-0.5b", "gemma3-270m"])
def test_model_template_parity(name):
    path = _model(name)
    if path is None:
        pytest.skip(f"{name} is not in the model cache (scripts/fetch-model {name})")
    template, bos, eos = _gguf_template(path)
    if template is None:
        conv = CONVS[2][1]
        r = _run_celer(["-m", path], conv, True)
        assert r.returncode == 0, r.stderr
        assert r.stdout.decode() == "".join(m["content"] for m in conv["messages"])
        assert b"no chat template" in r.stderr
        return
    n, failures = _compare(name, template, ["-m", path], bos, eos, None, None)
    assert not failures, f"{len(failures)} of {n} conversations differ:\n" + "\n".join(failures[:8])


def test_pair_count():
    """(template, conversation) pairs compared in this file: printed for the record."""
    n = len(TEMPLATES) * len(CONVS)
    print(f"\nchat-template parity: {len(TEMPLATES)} template files × {len(CONVS)} conversations = {n} pairs, "
          f"plus {len(CONVS)} per model template")
    assert len(CONVS) >= 20
