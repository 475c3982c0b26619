"""`celer verify` (a backend's logits against a reference backend's, docs/correctness.md's decided
positions) and the `--backend` option every command that loads a model shares.

  * cpu against cpu: exit 0, the report's columns and totals, zero mismatches and zero error (two
    loads on one backend compute the same numbers), and the note that the comparison is trivial;
  * --json: one object with the settings, each prompt's counts, the totals and the mismatches;
  * --decode (the backend's decode steps against its own prefill of the same tokens): one load,
    every decoded position compared, none at the prompt's positions, zero mismatches (the CPU's
    decode and prefill compute the same sums: zero error), in the report and in --json;
  * bad input exits 2 with one line on stderr: an unknown --backend or --against (listing the
    choices), a GPU backend this build does not have, a missing model, a --prompts file with no
    prompt, a malformed JSON line, a context too small for the prompts, --decode with --against
    or with more than 1024 tokens;
  * every --help shows --backend and the exit codes.

The model is SmolLM2-135M when it is in the model cache (scripts/fetch-model smollm2-135m), else a
tiny random-weight model from `celer synth`, whose logits are too flat for any position to be
decided at the default margin, so it runs with --margin 0 (every position decided). Runs take -n 8
and one or two prompts, so the whole file stays well under 30 s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CELER = os.environ.get("CELER_BIN") or str(ROOT / "build" / "celer")
BUILD = Path(os.environ.get("CELER_BUILD_DIR") or ROOT / "build")
CRASH_TEXT = re.compile(r"Sanitizer|runtime error|Segmentation|core dumped|Assertion|internal error|Traceback")
LOADED = re.compile(r"celer: .+ \(\w+, \d+ layers\) on \w+, context \d+")
TINY = ["--arch", "llama", "--layers", "2", "--embd", "64", "--ff", "128", "--heads", "4", "--kv-heads", "2",
        "--vocab", "512", "--type", "F32"]
PROMPTS = "The capital of France is\n\ndef add(a, b):\n"  # two prompts and a blank line
FIELDS = {"positions", "decided", "mismatches", "undecided_disagreements", "non_finite", "rel_l2_median",
          "rel_l2_max", "max_abs_dlogit"}


def celer(*args: str | Path, stdin: bytes = b"") -> subprocess.CompletedProcess:
    r = subprocess.run([CELER, *map(str, args)], input=stdin, capture_output=True, timeout=120)
    r.out = r.stdout.decode("utf-8", "replace")
    r.err = r.stderr.decode("utf-8", "replace")
    assert r.returncode >= 0, f"killed by signal {-r.returncode}; stderr: {r.err!r}"
    assert not CRASH_TEXT.search(r.err), f"crash report on stderr:\n{r.err}"
    return r


def one_line_error(r: subprocess.CompletedProcess, code: int, pattern: str) -> str:
    """Exit `code`, nothing on stdout, exactly one line on stderr matching pattern."""
    assert r.returncode == code, f"exit {r.returncode}, want {code}; stderr: {r.err!r}"
    assert r.out == "", f"stdout should be empty, got {r.out!r}"
    lines = r.err.rstrip("\n").split("\n")
    assert len(lines) == 1 and r.err.endswith("\n"), f"stderr is not one line: {r.err!r}"
    assert lines[0].startswith("celer"), lines[0]
    assert re.search(pattern, lines[0]), f"stderr does not match /{pattern}/: {lines[0]!r}"
    return lines[0]


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    for d in (os.environ.get("CELER_MODELS_DIR"),
              os.environ.get("XDG_CACHE_HOME") and os.path.join(os.environ["XDG_CACHE_HOME"], "celer", "models"),
              os.path.join(os.path.expanduser("~"), ".cache", "celer", "models")):
        if d and (Path(d) / "SmolLM2-135M-Instruct.Q4_1.gguf").is_file():
            return Path(d) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    path = tmp_path_factory.mktemp("verify") / "tiny.gguf"
    r = celer("synth", *TINY, "-o", path)
    assert r.returncode == 0, r.err
    return path


@pytest.fixture(scope="module")
def prompts(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("verify") / "prompts.txt"
    p.write_text(PROMPTS)
    return p


def margin(model: Path, real: str) -> str:
    """real for SmolLM2, 0 for the synth model."""
    return real if model.name.startswith("SmolLM2") else "0"


def test_cpu_against_cpu(model: Path, prompts: Path) -> None:
    r = celer("verify", "-m", model, "--backend", "cpu", "--against", "cpu", "-n", "8", "--prompts", prompts,
              "--margin", margin(model, "0.05"))
    assert r.returncode == 0, r.err
    err = r.err.rstrip("\n").split("\n")
    assert sum(bool(LOADED.fullmatch(ln)) for ln in err) == 2, r.err  # both loads announce themselves
    assert any("trivial" in ln and "cpu" in ln for ln in err), r.err
    lines = r.out.rstrip("\n").split("\n")
    assert lines[0] == f"verify {model}: cpu against cpu", lines[0]
    head = lines[1].split()
    for col in ("prompt", "positions", "decided", "mismatches", "undecided", "relL2", "max"):
        assert col in head, lines[1]
    rows = [ln.split() for ln in lines[2:4]]
    total = next(ln.split() for ln in lines if ln.startswith("total"))
    assert [r_[0] for r_ in rows] == ["1", "2"], lines
    positions, decided, mismatches = (int(total[i]) for i in (1, 2, 3))
    assert positions == int(rows[0][1]) + int(rows[1][1]) and 0 < decided <= positions, total
    assert mismatches == 0 and int(total[4]) == 0, total
    assert [float(x) for x in total[5:8]] == [0.0, 0.0, 0.0], total  # the same backend twice: no error at all
    assert lines[-1] == f"ok: cpu agrees with cpu at all {decided} decided positions (of {positions})", lines[-1]
    assert "mismatch:" not in r.out


def test_json(model: Path, prompts: Path) -> None:
    m = margin(model, "0.1")
    r = celer("verify", "-m", model, "-b", "cpu", "-n", "8", "-f", prompts, "--margin", m, "--json")
    assert r.returncode == 0, r.err
    o = json.loads(r.out)  # one object, nothing else on stdout
    assert o["model"] == str(model) and o["backend"] == "cpu" and o["against"] == "cpu", o
    assert o["trivial"] is True and o["ok"] is True and o["mismatches"] == [], o
    assert o["margin"] == float(m) and o["max_tokens"] == 8, o
    assert [p["prompt"] for p in o["prompts"]] == ["The capital of France is", "def add(a, b):"], o["prompts"]
    for p in o["prompts"]:
        assert FIELDS <= set(p), p
        assert p["positions"] == p["prompt_tokens"] + p["generated"] and 0 <= p["generated"] <= 8, p
        assert p["positions"] <= o["ctx"], (p, o["ctx"])
    t = o["total"]
    assert FIELDS <= set(t), t
    for k in ("positions", "decided", "undecided_disagreements"):
        assert t[k] == sum(p[k] for p in o["prompts"]), k
    assert 0 < t["decided"] <= t["positions"], t
    assert t["mismatches"] == 0 and t["non_finite"] == 0, t
    assert t["rel_l2_median"] == 0 and t["rel_l2_max"] == 0 and t["max_abs_dlogit"] == 0, t


def test_json_prompt_lines(model: Path, tmp_path: Path) -> None:
    """A line starting with '"' is one JSON string: a prompt with a newline; stdin works as - ."""
    r = celer("verify", "-m", model, "-b", "cpu", "-n", "2", "-f", "-", "--json", stdin=b'"a\\nb"\n')
    assert r.returncode == 0, r.err
    assert [p["prompt"] for p in json.loads(r.out)["prompts"]] == ["a\nb"]


def test_decode_against_prefill(model: Path, prompts: Path) -> None:
    r = celer("verify", "-m", model, "--backend", "cpu", "--decode", "-n", "8", "--prompts", prompts,
              "--margin", margin(model, "0.05"))
    assert r.returncode == 0, r.err
    err = r.err.rstrip("\n").split("\n")
    assert sum(bool(LOADED.fullmatch(ln)) for ln in err) == 1, r.err  # one engine: no reference backend
    assert not any("trivial" in ln for ln in err), r.err
    lines = r.out.rstrip("\n").split("\n")
    assert lines[0] == f"verify {model}: cpu decode steps against its prefill", lines[0]
    total = next(ln.split() for ln in lines if ln.startswith("total"))
    positions, decided, mismatches = (int(total[i]) for i in (1, 2, 3))
    assert 0 < positions <= 2 * 7 and 0 < decided <= positions, total  # at most 7 decoded of 8 generated a prompt
    assert mismatches == 0 and [float(x) for x in total[5:8]] == [0.0, 0.0, 0.0], total
    assert lines[-1] == f"ok: cpu's decode steps agree with its prefill at all {decided} decided positions " \
                        f"(of {positions})", lines[-1]


def test_decode_json(model: Path, prompts: Path) -> None:
    r = celer("verify", "-m", model, "-b", "cpu", "-d", "-n", "8", "-f", prompts, "--margin",
              margin(model, "0.1"), "--json")
    assert r.returncode == 0, r.err
    o = json.loads(r.out)
    assert o["mode"] == "decode" and o["backend"] == "cpu" and o["against"] == "prefill", o
    assert o["trivial"] is False and o["ok"] is True and o["mismatches"] == [], o
    for p in o["prompts"]:
        # the first step runs the prompt (a prefill); a step that ends the text is decoded but not kept
        assert p["positions"] in (p["generated"] - 1, p["generated"]) and 0 <= p["generated"] <= 8, p
    t = o["total"]
    assert t["positions"] == sum(p["positions"] for p in o["prompts"]) and t["mismatches"] == 0, t


# ---- --backend ----------------------------------------------------------------------------------

CMDS = [("generate", ["-p", "hi"]), ("chat", []), ("bench", ["-r", "1"]), ("info", []), ("verify", []), ("serve", [])]


@pytest.mark.parametrize("cmd,rest", CMDS, ids=[c for c, _ in CMDS])
def test_unknown_backend(model: Path, cmd: str, rest: list[str]) -> None:
    line = one_line_error(celer(cmd, "-m", model, "--backend", "metal", *rest), 2, r"--backend wants")
    for name in ("auto", "cpu", "cuda", "rocm", "'metal'"):
        assert name in line, line
    one_line_error(celer(cmd, "-m", model, "-b", "", *rest), 2, r"--backend wants .*got ''")


def test_unknown_against(model: Path) -> None:
    line = one_line_error(celer("verify", "-m", model, "--against", "gpu"), 2, r"--against wants")
    assert "cpu, cuda or rocm" in line and "auto" in line, line


def gpu_in_build(backend: str) -> bool:
    option = {"cuda": "CELER_CUDA", "rocm": "CELER_HIP"}[backend]
    try:
        return f"{option}:BOOL=ON" in (BUILD / "CMakeCache.txt").read_text()
    except OSError:
        return False


@pytest.mark.parametrize("backend", ["cuda", "rocm"])
@pytest.mark.parametrize("cmd,rest", [("verify", ["-n", "2"]), ("generate", ["-p", "hi"])], ids=["verify", "generate"])
def test_gpu_backend_not_in_build(model: Path, prompts: Path, backend: str, cmd: str, rest: list[str]) -> None:
    """A CPU-only build refuses a GPU backend before loading anything, saying how to get one."""
    if gpu_in_build(backend):
        pytest.skip(f"this build has the {backend} backend")
    line = one_line_error(celer(cmd, "-m", model, "--backend", backend, *rest), 2, r"not in this build")
    assert f"'{backend}'" in line and "cpu" in line, line


def test_auto(model: Path) -> None:
    """auto (the default, but for info's rows) loads what the build has best: on a CPU-only build, the
    CPU; info -b auto shows the rows of that backend."""
    if gpu_in_build("cuda") or gpu_in_build("rocm"):
        pytest.skip("a GPU build: auto picks the GPU when one answers")
    for args in (["-b", "auto"], []):
        r = celer("generate", "-m", model, *args, "-p", "hi", "-n", "1", "--no-chat")
        assert r.returncode == 0 and " on cpu, context " in r.err, r.err
    info = celer("info", "-m", model, "-b", "auto", "--json")
    assert info.returncode == 0, info.err
    assert all(set(t) >= {"cpu"} for t in json.loads(info.out)["types"].values()), info.out


# ---- bad input ------------------------------------------------------------------------------------

def test_missing_model(tmp_path: Path) -> None:
    p = tmp_path / "no-such-model.gguf"
    line = one_line_error(celer("verify", "-m", p, "-b", "cpu"), 2, r"no such file|not found|does not exist")
    assert str(p) in line, line


@pytest.mark.parametrize("text", ["", "\n  \n\t\n"], ids=["empty", "blank lines"])
def test_prompts_file_without_prompts(model: Path, tmp_path: Path, text: str) -> None:
    p = tmp_path / "prompts.txt"
    p.write_text(text)
    line = one_line_error(celer("verify", "-m", model, "-b", "cpu", "--prompts", p), 2, r"has no prompts")
    assert str(p) in line, line


def test_prompts_file_errors(model: Path, tmp_path: Path) -> None:
    one_line_error(celer("verify", "-m", model, "--prompts", tmp_path / "nope.txt"), 2, r"nope\.txt: cannot open")
    bad = tmp_path / "bad.txt"
    bad.write_text('fine\n"not closed\n')
    one_line_error(celer("verify", "-m", model, "--prompts", bad), 2, r"bad\.txt:2: .*JSON string")
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes(b"caf\xe9\n")
    one_line_error(celer("verify", "-m", model, "--prompts", latin1), 2, r"latin1\.txt:1 is not valid UTF-8 at byte 3")


@pytest.mark.parametrize("args,pattern", [
    (["-n", "-1"], r"--max-tokens wants"),
    (["--margin", "nan"], r"--margin wants"),
    (["--margin", "-1"], r"--margin wants"),
    (["--ctx", "16", "-n", "64"], r"needs a context of \d+, more than --ctx 16"),
    (["--threads", "0"], r"--threads wants"),
    (["stray"], r"unexpected argument 'stray'"),
    (["--decode", "--against", "cpu"], r"--decode checks a backend against its own prefill: drop --against"),
    (["--decode", "-n", "1025"], r"--decode keeps each step's logits: --max-tokens at most 1024, got 1025"),
], ids=["max-tokens", "margin-nan", "margin-negative", "ctx", "threads", "stray", "decode-against", "decode-long"])
def test_bad_options(model: Path, args: list[str], pattern: str) -> None:
    one_line_error(celer("verify", "-m", model, "-b", "cpu", *args), 2, pattern)


# ---- help ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("cmd", ["generate", "chat", "bench", "info", "verify", "serve"])
def test_help(cmd: str) -> None:
    r = celer(cmd, "--help")
    assert r.returncode == 0 and r.err == "", r.err
    assert re.search(r"-b, --backend B\s", r.out) and "auto" in r.out and "rocm" in r.out, r.out
    assert re.search(r"exit codes: 0 .*2 bad input.*3 runtime failure", r.out.replace("\n", " ")), r.out
    if cmd == "verify":
        assert "--against" in r.out and "1 they do not" in r.out, r.out


def test_top_level_help_lists_exit_codes() -> None:
    r = celer("--help")
    text = r.out.replace("\n", " ")
    assert r.returncode == 0 and "verify" in r.out, r.out
    assert re.search(r"exit codes: 0 success; 1 .*verify.*; 2 bad input.*; 3 runtime failure .*device", text), r.out
