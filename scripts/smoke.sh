#!/usr/bin/env bash
# Smoke test of the whole path: the default model answers a question through its own chat
# template. stdout and stderr are kept apart: the answer must be on stdout (and only there),
# the backend line and the summary on stderr. A run that generates nothing fails.
#   scripts/smoke.sh [CELER_BINARY]      (CELER_SMOKE_MODEL=PATH skips the fetch)
# Exit 0 when every check holds, 1 otherwise. tests/cli/test_smoke_script.py checks that each
# kind of bad run fails it.
set -u
bin=${1:-build/celer}
here=$(cd "$(dirname "$0")" && pwd)
model=${CELER_SMOKE_MODEL:-$("$here/fetch-model" smollm2-135m)} ||
    { echo "smoke: cannot fetch the default model" >&2; exit 1; }
out=$(mktemp) err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT

fail() { echo "smoke: FAIL: $*" >&2; echo "--- stdout"; cat "$out"; echo "--- stderr"; cat "$err"; exit 1; } >&2

"$bin" generate -m "$model" -p "What is the capital of France?" -n 48 >"$out" 2>"$err"
rc=$?
[ $rc -eq 0 ] || fail "celer generate exited $rc"
[ -s "$out" ] && grep -q '[[:alnum:]]' "$out" || fail "no content on stdout"
grep -q "Paris" "$out" || fail "the answer does not mention Paris"
grep -q " on cpu" "$err" || fail "no backend line on stderr"
grep -q "generated [1-9][0-9]* tokens" "$err" || fail "no summary line on stderr"
grep -q "celer:" "$out" && fail "diagnostics leaked into stdout"
echo "smoke: ok: $(tr '\n' ' ' <"$out" | cut -c1-80)"
