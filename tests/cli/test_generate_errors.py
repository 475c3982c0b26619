"""Bad input to `celer generate` (and to `celer chat` and `celer bench` where the same input
applies): a missing or garbage model path, an unsupported architecture or tensor type, a prompt
longer than the context, a prompt that is not UTF-8, and out-of-range options.

The rule every case checks (assert_error):
  * exit code 2 and nothing on stdout;
  * stderr's last line is the error: non-empty, starting with "celer", naming the thing at fault
    (the path; the architecture; the type and the tensor; the prompt's token count and the
    context; the byte offset in the user's own text and the byte there; the option and the value);
  * an error found before the model is loaded (the command line, the prompt's encoding, the file,
    its architecture and its tensor types) is the only line on stderr;
  * an error that needs the loaded model (the prompt's token count, --system without a chat
    template, a chat message read from stdin) may come after celer's own status lines, and only
    those: the backend line "celer: MODEL (ARCH, N layers) on BACKEND, context N" (generate),
    "celer: chatting with MODEL; ..." and "celer: the model has no chat template; ..." (chat);
  * nothing else: no second error, no trace, no sanitizer or assertion report.

The models are tiny random-weight ones from `celer synth`; the unsupported ones are synth files
rewritten with gguf-py (the architecture renamed, or one weight stored in another type), so that
each differs from a runnable model in the one thing under test. Nothing here benchmarks: the
`celer bench` cases fail before anything is measured.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gguf_craft import rewrite  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
CRASH_TEXT = re.compile(r"Sanitizer|runtime error|Segmentation|core dumped|Assertion|internal error|Traceback")
STATUS_LINES = [
    re.compile(r"celer: .+ \(\w+, \d+ layers\) on \w+, context \d+"),
    re.compile(r"celer: chatting with .+; /reset starts over, /exit or Ctrl-D quits"),
    re.compile(r"celer: the model has no chat template; .+"),
]
TINY = ["--arch", "llama", "--layers", "2", "--embd", "64", "--ff", "128", "--heads", "4", "--kv-heads", "2",
        "--vocab", "512"]
TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}\n{% endfor %}<|assistant|>\n"


def celer(*args: str | bytes | Path, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    argv = [CELER] + [a if isinstance(a, bytes) else str(a) for a in args]
    r = subprocess.run(argv, input=stdin if stdin is not None else b"", capture_output=True, timeout=120)
    r.out = r.stdout.decode("utf-8", "replace")
    r.err = r.stderr.decode("utf-8", "replace")
    return r


def assert_error(r: subprocess.CompletedProcess, pattern: str, names: tuple[str, ...] = (),
                 loaded: bool = False) -> str:
    """The rule in the module docstring; loaded: the error may follow the status lines."""
    assert r.returncode >= 0, f"killed by signal {-r.returncode}; stderr: {r.err!r}"
    assert not CRASH_TEXT.search(r.err), f"crash report on stderr:\n{r.err}"
    assert r.returncode == 2, f"exit {r.returncode}, want 2; stderr: {r.err!r}"
    assert r.out == "", f"stdout should be empty, got {r.out!r}"
    assert r.err.endswith("\n"), f"stderr does not end with a newline: {r.err!r}"
    lines = r.err[:-1].split("\n")
    if loaded:
        for ln in lines[:-1]:
            assert any(p.fullmatch(ln) for p in STATUS_LINES), f"unexpected line before the error: {ln!r}\n{r.err}"
    else:
        assert len(lines) == 1, f"stderr is not exactly one line: {r.err!r}"
    line = lines[-1]
    assert line.startswith("celer") and len(line) > len("celer: "), f"not an error line: {line!r}"
    assert not any(p.fullmatch(line) for p in STATUS_LINES), f"the last line is a status line: {r.err!r}"
    assert re.search(pattern, line), f"stderr does not match /{pattern}/: {line!r}"
    for n in names:
        assert n in line, f"the error does not name {n!r}: {line!r}"
    return line


# ---- models ------------------------------------------------------------------------------------

def synth(path: Path, *args: str) -> Path:
    r = celer("synth", *args, "-o", path)
    assert r.returncode == 0, r.err
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("models")
    synth(d / "tiny.gguf", *TINY, "--type", "F32")                     # no chat template, context 4096
    synth(d / "ctx32.gguf", *TINY, "--ctx", "32", "--type", "Q8_0")    # trained context 32
    synth(d / "wide.gguf", *TINY, "--embd", "256", "--ff", "512", "--type", "F32")  # rows of whole K-quant blocks
    return d


@pytest.fixture(scope="module")
def chat_model(models: Path) -> Path:
    gguf = pytest.importorskip("gguf")
    return rewrite(models / "tiny.gguf", models / "chat.gguf",
                   extra={"tokenizer.chat_template": (TEMPLATE, gguf.GGUFValueType.STRING)})


def n_tokens(model: Path, text: str) -> int:
    """The prompt's token count as generate counts it without a template (BOS included)."""
    r = celer("tokenize", "-m", model, "--ids", text)
    assert r.returncode == 0, r.err
    return len(r.out.split())


def test_the_models_run(models: Path, chat_model: Path) -> None:
    """The baseline: each model the bad cases start from generates."""
    for m in (models / "tiny.gguf", models / "ctx32.gguf", models / "wide.gguf", chat_model):
        r = celer("generate", "-m", m, "-p", "hi", "-n", "2")
        assert r.returncode == 0, r.err


# ---- the model path ----------------------------------------------------------------------------

CMDS = [("generate", ["-p", "hi"]), ("chat", []), ("bench", ["-p", "8", "-n", "8", "-r", "1"])]


@pytest.mark.parametrize("cmd,rest", CMDS, ids=[c for c, _ in CMDS])
def test_missing_model(tmp_path: Path, cmd: str, rest: list[str]) -> None:
    p = tmp_path / "no-such-model.gguf"
    assert_error(celer(cmd, "-m", p, *rest), r"no such file|not found|does not exist", names=(str(p),))


@pytest.mark.parametrize("cmd,rest", CMDS, ids=[c for c, _ in CMDS])
def test_directory_as_model(tmp_path: Path, cmd: str, rest: list[str]) -> None:
    d = tmp_path / "not-a-model"
    d.mkdir()
    assert_error(celer(cmd, "-m", d, *rest), r".", names=(str(d),))


def test_serve_reports_a_bad_model_before_listening(models: Path, tmp_path: Path) -> None:
    """`celer serve` reads the model's header before it opens its port: a missing, non-GGUF or
    truncated file is its one line of stderr, exit 2, and it never says it is listening."""
    text = tmp_path / "notes.gguf"
    text.write_text("these are not the weights you are looking for\n")
    cut = tmp_path / "cut-late.gguf"
    cut.write_bytes((models / "tiny.gguf").read_bytes()[:-100])
    for p, pattern in [(tmp_path / "no-such-model.gguf", r"no such file"), (text, r"not a GGUF"),
                       (cut, r"truncated|past the end")]:
        line = assert_error(celer("serve", "-m", p, "--port", "0"), pattern, names=(str(p),))
        assert "listening" not in line


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.gguf"
    p.write_bytes(b"")
    assert_error(celer("generate", "-m", p, "-p", "hi"), r"empty|not a GGUF", names=(str(p),))


def test_text_file(tmp_path: Path) -> None:
    p = tmp_path / "notes.gguf"
    p.write_text("these are not the weights you are looking for\n")
    assert_error(celer("generate", "-m", p, "-p", "hi"), r"not a GGUF", names=(str(p),))


def test_device_file() -> None:
    assert_error(celer("generate", "-m", "/dev/null", "-p", "hi"), r"not a regular file", names=("/dev/null",))


def test_truncated_in_metadata(models: Path, tmp_path: Path) -> None:
    p = tmp_path / "cut-early.gguf"
    p.write_bytes((models / "tiny.gguf").read_bytes()[:3000])
    assert_error(celer("generate", "-m", p, "-p", "hi"), r"truncated|cannot fit", names=(str(p),))


@pytest.mark.parametrize("cmd,rest", CMDS, ids=[c for c, _ in CMDS])
def test_truncated_in_tensor_data(models: Path, tmp_path: Path, cmd: str, rest: list[str]) -> None:
    """A download cut short: the error names the file and the first tensor that runs past its end."""
    p = tmp_path / "cut-late.gguf"
    p.write_bytes((models / "tiny.gguf").read_bytes()[:-100])
    line = assert_error(celer(cmd, "-m", p, *rest), r"truncated|past the end", names=(str(p),))
    assert re.search(r"tensor '[^']+'", line), line


# ---- unsupported models ------------------------------------------------------------------------

@pytest.mark.parametrize("cmd,rest", CMDS, ids=[c for c, _ in CMDS])
def test_unsupported_architecture(models: Path, cmd: str, rest: list[str]) -> None:
    """A well-formed file (a llama model with its architecture and keys renamed) that celer
    has no forward pass for."""
    p = rewrite(models / "tiny.gguf", models / f"mamba-{cmd}.gguf", arch="mamba")
    line = assert_error(celer(cmd, "-m", p, *rest), r"architecture 'mamba' is not supported", names=(str(p),))
    assert "llama" in line, f"the error should list what celer runs: {line!r}"


# IQ2_XXS: celer cannot even dequantize it. Q2_K and Q3_K: celer dequantizes them (info, the
# token table) but the CPU matmul does not take them (celer_cpu_matmul_supported); when it
# learns them, drop them here.
@pytest.mark.parametrize("type_name,tensor", [
    ("IQ2_XXS", "blk.1.attn_q.weight"),
    ("Q2_K", "blk.0.ffn_up.weight"),
    ("Q3_K", "blk.1.ffn_down.weight"),
])
def test_unsupported_tensor_type(models: Path, type_name: str, tensor: str) -> None:
    gguf = pytest.importorskip("gguf")
    p = rewrite(models / "wide.gguf", models / f"{type_name}.gguf",
                retype={tensor: gguf.GGMLQuantizationType[type_name]})
    for cmd, rest in CMDS:
        line = assert_error(celer(cmd, "-m", p, *rest), rf"\b{type_name}\b", names=(str(p), f"'{tensor}'"))
        assert "Q8_0" in line, f"the error should say which types run: {line!r}"


# ---- the prompt ----------------------------------------------------------------------------------

LONG = "the quick brown fox jumps over the lazy dog " * 8


@pytest.mark.parametrize("ctx_args,ctx", [(["--ctx", "16"], 16), (["--ctx", "64"], 64), ([], 32)],
                         ids=["ctx16", "ctx64", "trained-ctx32"])
def test_prompt_longer_than_context(models: Path, ctx_args: list[str], ctx: int) -> None:
    m = models / "ctx32.gguf"
    n = n_tokens(m, LONG)
    assert n > 64
    line = assert_error(celer("generate", "-m", m, "-p", LONG, *ctx_args, "-n", "4"), r"context", loaded=True)
    assert re.search(rf"\b{n} tokens\b", line), f"the error should give the prompt's {n} tokens: {line!r}"
    assert re.search(rf"\b{ctx}\b", line) and "--ctx" in line, line


def test_prompt_that_fills_the_context(models: Path) -> None:
    """The boundary: a prompt of ctx - 1 tokens leaves room for one token; one of ctx tokens
    leaves none and is an error."""
    m = models / "tiny.gguf"
    words = "abcdefghijklmnopqrstuvwxyz"
    fit = next(words[:k] for k in range(1, 27) if n_tokens(m, words[:k]) == 15)
    full = next(words[:k] for k in range(1, 27) if n_tokens(m, words[:k]) == 16)
    r = celer("generate", "-m", m, "-p", fit, "--ctx", "16", "-n", "8")
    assert r.returncode == 0, r.err
    assert "generated 1 tokens" in r.err, r.err
    line = assert_error(celer("generate", "-m", m, "-p", full, "--ctx", "16"), r"context", loaded=True)
    assert "16 tokens" in line and "holds 16" in line, line


def test_prompt_longer_than_context_in_chat(models: Path, chat_model: Path) -> None:
    """A message on stdin that does not fit: from a pipe, exit 2 (at a terminal it is skipped)."""
    line = assert_error(celer("chat", "-m", chat_model, "--ctx", "16", stdin=LONG.encode() + b"\n"),
                        r"context", loaded=True)
    assert re.search(r"\b\d+ tokens\b", line) and "16" in line, line


# (bytes, offset of the first ill-formed sequence)
BAD_UTF8 = {
    "ff-fe": (b"\xff\xfe bad", 0),
    "after-ascii": (b"ok \xff\xfe bad", 3),
    "lone-continuation": (b"caf\x80", 3),
    "overlong-slash": (b"a/\xc0\xafb", 2),
    "surrogate": (b"x\xed\xa0\x80y", 1),
    "past-10ffff": (b"hi \xf4\x90\x80\x80", 3),
    "cut-at-the-end": (b"euro \xe2\x82", 5),
    "latin1": ("na\u00efve caf\u00e9".encode("latin-1"), 2),
}


@pytest.mark.parametrize("name", BAD_UTF8)
@pytest.mark.parametrize("template", [False, True], ids=["plain", "templated"])
def test_prompt_not_utf8(models: Path, chat_model: Path, name: str, template: bool) -> None:
    """The offset counts in the prompt as given, not in the templated text the tokenizer sees
    (it said "byte 115" for byte 0 of -p), and the check comes before the model loads."""
    text, at = BAD_UTF8[name]
    m = chat_model if template else models / "tiny.gguf"
    line = assert_error(celer("generate", "-m", m, "-p", text), rf"not valid UTF-8 at byte {at}\b",
                        names=("-p", f"0x{text[at]:02x}"))
    assert "UTF-8" in line.split(";", 1)[1], f"the error should say what to do: {line!r}"


def test_system_not_utf8(chat_model: Path) -> None:
    assert_error(celer("generate", "-m", chat_model, "-p", "hi", "--system", b"be \xc3("),
                 r"not valid UTF-8 at byte 3\b", names=("--system", "0xc3"))


def test_stop_not_utf8(models: Path) -> None:
    assert_error(celer("generate", "-m", models / "tiny.gguf", "-p", "hi", "--stop", b"\xfe"),
                 r"not valid UTF-8 at byte 0\b", names=("--stop", "0xfe"))


def test_utf8_is_checked_before_loading(tmp_path: Path) -> None:
    """Bad text is reported even when the model path is bad too: it costs no model load."""
    assert_error(celer("generate", "-m", tmp_path / "absent.gguf", "-p", b"\x80"), r"UTF-8 at byte 0", names=("-p",))


def test_valid_utf8_prompt_runs(chat_model: Path) -> None:
    r = celer("generate", "-m", chat_model, "-p", "na\u00efve caf\u00e9 \u20ac \U0001F600", "-n", "2")
    assert r.returncode == 0, r.err


def test_chat_message_not_utf8(chat_model: Path) -> None:
    line = assert_error(celer("chat", "-m", chat_model, stdin=b"caf\xe9\n"), r"not valid UTF-8 at byte 3\b",
                        names=("input line 1", "0xe9"), loaded=True)
    assert line.startswith("celer chat: "), line


def test_chat_stops_at_the_bad_line(chat_model: Path) -> None:
    """From a pipe, the lines after a bad one are not answered: the replies stay in step with
    the input a script sent."""
    r = celer("chat", "-m", chat_model, "-n", "2", "--temp", "0", stdin=b"hi\n\n\xff\nhello\n")
    assert r.returncode == 2, r.err
    assert r.err.rstrip("\n").split("\n")[-1].startswith("celer chat: input line 3 is not valid UTF-8 at byte 0")
    assert r.err.count("celer: prompt ") == 1, f"one reply (to line 1) expected: {r.err!r}"


def test_chat_system_not_utf8(chat_model: Path) -> None:
    assert_error(celer("chat", "-m", chat_model, "--system", b"\xed\xbf\xbf"), r"not valid UTF-8 at byte 0\b",
                 names=("--system", "0xed"))


def test_system_without_template(models: Path) -> None:
    assert_error(celer("generate", "-m", models / "tiny.gguf", "-p", "hi", "--system", "be brief", "--no-chat"),
                 r"--system needs chat mode", loaded=True)


# ---- options -------------------------------------------------------------------------------------

GENERATE_OPTIONS = [
    (["-n", "0"], "--max-tokens", "0"),
    (["-n", "-1"], "--max-tokens", "-1"),
    (["-n", "1.5"], "--max-tokens", "1.5"),
    (["-n", "99999999999"], "--max-tokens", "99999999999"),
    (["--ctx", "0"], "--ctx", "0"),
    (["--ctx", "15"], "--ctx", "15"),
    (["--ctx", "-5"], "--ctx", "-5"),
    (["--ctx", "99999999999"], "--ctx", "99999999999"),
    (["--ctx", "1e400"], "--ctx", "1e400"),
    (["--ctx", "abc"], "--ctx", "abc"),
    (["--temp", "-1"], "--temp", "-1"),
    (["--temp", "nan"], "--temp", "nan"),
    (["--temp", "inf"], "--temp", "inf"),
    (["--top-p", "2"], "--top-p", "2"),
    (["--top-p", "0"], "--top-p", "0"),
    (["--top-k", "-3"], "--top-k", "-3"),
    (["--min-p", "1.5"], "--min-p", "1.5"),
    (["--repeat-penalty", "0"], "--repeat-penalty", "0"),
    (["--presence-penalty", "9"], "--presence-penalty", "9"),
    (["--threads", "0"], "--threads", "0"),
    (["--threads", "99999"], "--threads", "99999"),
    (["--stop", ""], "--stop", ""),
    (["--bogus"], "--bogus", ""),
    (["extra-word"], "extra-word", ""),
]


@pytest.mark.parametrize("args,option,value", GENERATE_OPTIONS, ids=[" ".join(a) or "empty" for a, _, _ in
                                                                      GENERATE_OPTIONS])
def test_generate_bad_option(models: Path, args: list[str], option: str, value: str) -> None:
    line = assert_error(celer("generate", "-m", models / "tiny.gguf", "-p", "hi", *args), r"celer generate: ")
    assert option in line, line
    if value:
        assert f"'{value}'" in line, f"the error should quote the value {value!r}: {line!r}"


def test_generate_no_prompt(models: Path) -> None:
    assert_error(celer("generate", "-m", models / "tiny.gguf"), r"no prompt", names=("-p",))


def test_generate_option_without_value(models: Path) -> None:
    assert_error(celer("generate", "-p", "hi", "-m"), r"needs a value", names=("-m",))


CHAT_OPTIONS = [
    (["-n", "0"], "--max-tokens", "0"),
    (["--ctx", "0"], "--ctx", "0"),
    (["--ctx", "99999999999"], "--ctx", "99999999999"),
    (["--temp", "-1"], "--temp", "-1"),
    (["--temp", "nan"], "--temp", "nan"),
    (["--threads", "0"], "--threads", "0"),
]


@pytest.mark.parametrize("args,option,value", CHAT_OPTIONS, ids=[" ".join(a) for a, _, _ in CHAT_OPTIONS])
def test_chat_bad_option(chat_model: Path, args: list[str], option: str, value: str) -> None:
    line = assert_error(celer("chat", "-m", chat_model, *args, stdin=b"hi\n"), r"celer chat: ")
    assert option in line and f"'{value}'" in line, line


BENCH_OPTIONS = [
    (["-p", "0", "-n", "0"], r"nothing to measure"),
    (["-r", "0"], r"-r wants .*'0'"),
    (["-p", "99999999999"], r"-p wants .*'99999999999'"),
    (["-n", "-1"], r"-n wants .*'-1'"),
    (["--threads", "0"], r"--threads wants .*'0'"),
    (["--parallel", "0"], r"--parallel wants .*'0'"),
    (["-P", "257"], r"--parallel wants .*'257'"),
    (["-P", "4", "-p", "0"], r"--parallel .* wants -p of 1 or more"),
    (["-P", "4", "-n", "1"], r"--parallel .* -n of 2 or more"),
    (["-d", "-1"], r"-d wants .*'-1'"),
    (["--depth", "x"], r"-d wants .*'x'"),
    (["-d", "8", "-P", "2"], r"--depth is for one sequence"),
    (["--temp", "x"], r"--temp wants .*'x'"),
    (["--temp", "-0.5"], r"--temp wants .*'-0.5'"),
    (["--temp", "nan"], r"--temp wants .*'nan'"),
    (["--top-k", "-1"], r"--top-k wants .*'-1'"),
    (["--top-p", "0"], r"--top-p wants .*'0'"),
    (["--top-p", "1.5"], r"--top-p wants .*'1.5'"),
    (["--temp"], r"option --temp needs a value"),
]


@pytest.mark.parametrize("args,pattern", BENCH_OPTIONS, ids=[" ".join(a) for a, _ in BENCH_OPTIONS])
def test_bench_bad_option(models: Path, args: list[str], pattern: str) -> None:
    assert_error(celer("bench", "-m", models / "tiny.gguf", *args), r"celer bench: " + pattern)


def test_bench_parallel_runs(models: Path) -> None:
    """--parallel S runs S sequences through the batcher: one JSON object with both rates."""
    import json
    r = celer("bench", "-m", models / "tiny.gguf", "-p", "8", "-n", "4", "-P", "3", "-r", "2", "--json")
    assert r.returncode == 0, r.err
    o = json.loads(r.out)
    assert o["parallel"] == 3 and o["reps"] == 2 and o["pp"]["tokens"] == 8 and o["tg"]["tokens"] == 4, o
    assert o["pp"]["median"] > 0 and o["tg"]["median"] > 0, o
    assert o["load_s"] > 0, o


def test_bench_sampled_runs(models: Path) -> None:
    """--temp T (with --top-k, --top-p) samples each decoded token, seeded: named in the JSON
    object and under the table."""
    import json
    r = celer("bench", "-m", models / "tiny.gguf", "-p", "0", "-n", "4", "-r", "1", "--temp", "0.8", "--top-k", "5",
              "--top-p", "0.9", "--json")
    assert r.returncode == 0, r.err
    o = json.loads(r.out)
    assert o["temperature"] == 0.8 and o["top_k"] == 5 and abs(o["top_p"] - 0.9) < 1e-6, o
    assert o["tg"]["median"] > 0, o
    r = celer("bench", "-m", models / "tiny.gguf", "-p", "0", "-n", "4", "-r", "1", "--temp", "0.8")
    assert r.returncode == 0, r.err
    assert "sampled at temperature 0.8, top-k 0, top-p 1 (seed 1)" in r.out, r.out


def test_bench_depth_runs(models: Path) -> None:
    """--depth D measures pp and tg after D tokens of context: named in the table (pp8 @d40) and in
    the JSON object; the context's prefill is reused by pp (else bench fails, exit 3)."""
    import json
    r = celer("bench", "-m", models / "tiny.gguf", "-p", "8", "-n", "4", "-d", "40", "-r", "2", "--json")
    assert r.returncode == 0, r.err
    o = json.loads(r.out)
    assert o["depth"] == 40 and o["pp"]["tokens"] == 8 and o["tg"]["tokens"] == 4, o
    assert o["pp"]["median"] > 0 and o["tg"]["median"] > 0, o
    r = celer("bench", "-m", models / "tiny.gguf", "-p", "8", "-n", "4", "-d", "40", "-r", "1")
    assert r.returncode == 0, r.err
    assert "pp8 @d40" in r.out and "tg4 @d40" in r.out, r.out


def test_bench_counts_kv_bytes(models: Path) -> None:
    """The bandwidth line counts the keys and values a decode step reads at the timed steps' mean
    context (the D tokens of --depth, then half of the N generated): layers × positions × key
    heads × (key + value head sizes) × 4 bytes (an f32 cache), each number from the file as
    gguf-py reads it."""
    import json
    import gguf
    reader = gguf.GGUFReader(models / "tiny.gguf")

    def value(key: str) -> int:
        f = reader.get_field(key)
        assert f is not None, key
        return int(f.contents())

    layers, heads, kv_heads = (value(f"llama.{k}") for k in ("block_count", "attention.head_count",
                                                              "attention.head_count_kv"))
    head_dim = value("llama.embedding_length") // heads
    if reader.get_field("llama.attention.key_length") is not None:
        head_dim = value("llama.attention.key_length")
    r = celer("bench", "-m", models / "tiny.gguf", "-p", "0", "-n", "6", "-d", "20", "-r", "1", "--json")
    assert r.returncode == 0, r.err
    o = json.loads(r.out)
    assert o["kv_bytes_per_token"] == layers * (20 + (6 + 1) // 2) * kv_heads * 2 * head_dim * 4, o
    r = celer("bench", "-m", models / "tiny.gguf", "-p", "0", "-n", "6", "-d", "20", "-r", "1")
    assert r.returncode == 0, r.err
    assert f"+ {o['kv_bytes_per_token'] / 1e6:.1f} MB of keys and values per token" in r.out, r.out
