"""scripts/smoke.sh fails every kind of bad run: it is run against small stand-in programs that
each break one rule (nothing generated, no Paris, a failing exit code, no backend line, no
summary, diagnostics on stdout), and passes the one that breaks none."""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "scripts" / "smoke.sh"

BACKEND = "celer: m.gguf (llama, 30 layers) on cpu, context 4096"
SUMMARY = "celer: prompt 37 tokens (0 reused), 300.0 tok/s; generated 8 tokens, 80.0 tok/s; first token 100 ms"
ANSWER = "The capital of France is Paris."

CASES = {
    "good": (ANSWER, f"{BACKEND}\n{SUMMARY}", 0, None),
    "nothing generated": ("", f"{BACKEND}\n{SUMMARY.replace('8 tokens', '0 tokens')}", 0, "no content"),
    "whitespace only": ("\n  \n", f"{BACKEND}\n{SUMMARY}", 0, "no content"),
    "wrong answer": ("The capital of France is Lyon.", f"{BACKEND}\n{SUMMARY}", 0, "Paris"),
    "exit code": (ANSWER, f"{BACKEND}\n{SUMMARY}", 3, "exited 3"),
    "no backend line": (ANSWER, SUMMARY, 0, "backend line"),
    "no summary": (ANSWER, BACKEND, 0, "summary"),
    "diagnostics on stdout": (ANSWER + "\n" + BACKEND, f"{BACKEND}\n{SUMMARY}", 0, "leaked"),
}


def stub(tmp_path: Path, out: str, err: str, rc: int) -> Path:
    (tmp_path / "out.txt").write_text(out)
    (tmp_path / "err.txt").write_text(err + "\n")
    exe = tmp_path / "celer"
    exe.write_text(f"#!/bin/sh\ncat '{tmp_path}/out.txt'\ncat '{tmp_path}/err.txt' >&2\nexit {rc}\n")
    exe.chmod(0o755)
    return exe


@pytest.mark.parametrize("case", list(CASES))
def test_smoke_script(tmp_path, case):
    out, err, rc, why = CASES[case]
    exe = stub(tmp_path, out, err, rc)
    env = dict(os.environ, CELER_SMOKE_MODEL=str(tmp_path / "m.gguf"))
    r = subprocess.run(["bash", str(SMOKE), str(exe)], capture_output=True, text=True, env=env, timeout=60)
    if why is None:
        assert r.returncode == 0, r.stderr
        assert "smoke: ok" in r.stdout
    else:
        assert r.returncode == 1, (r.stdout, r.stderr)
        assert "FAIL" in r.stderr and why in r.stderr, r.stderr
