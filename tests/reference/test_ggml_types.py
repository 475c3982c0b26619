"""celer's GGML type table (src/quant/ggml_types.c, printed by tests/tools/dump_ggml_types)
against gguf-py's GGMLQuantizationType and GGML_QUANT_SIZES: the same ids, names and block
geometry, in both directions."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("CELER_BUILD_DIR") or ROOT / "build")

# Where gguf-py is wrong, with the evidence; each entry is checked to still be wrong in gguf-py,
# so that it is removed once gguf-py is fixed.
#   Q8_1: ggml's block_q8_1 is {ggml_half d, s; int8_t qs[32]} = 36 bytes (ggml/src/ggml-common.h,
#   static_assert "wrong q8_1 block size/padding"); gguf-py still has (32, 4 + 4 + 32), the layout
#   from when d and s were floats.
GGUF_PY_WRONG = {"Q8_1": {"gguf_py": (32, 40), "ggml": (32, 36)}}


def celer_types() -> dict[int, tuple[str, int, int]]:
    exe = BUILD / "dump_ggml_types"
    assert exe.exists(), f"{exe} is missing: build the tree first (cmake --build build)"
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True, timeout=30).stdout
    table = {}
    for line in out.splitlines():
        i, name, elems, size = line.split()
        assert int(i) not in table, f"type {i} printed twice"
        table[int(i)] = (name, int(elems), int(size))
    return table


CELER = celer_types()
GGUF_PY = {int(t): (t.name, *GGML_QUANT_SIZES[t]) for t in GGMLQuantizationType}


@pytest.mark.parametrize("type_id", sorted(GGUF_PY), ids=[GGUF_PY[i][0] for i in sorted(GGUF_PY)])
def test_gguf_py_type_in_celer(type_id: int) -> None:
    name, elems, size = GGUF_PY[type_id]
    assert type_id in CELER, f"gguf-py type {type_id} {name} {(elems, size)} is missing from celer's table"
    if name in GGUF_PY_WRONG:
        w = GGUF_PY_WRONG[name]
        assert (elems, size) == w["gguf_py"], f"gguf-py now says {name} is {(elems, size)}: drop it from GGUF_PY_WRONG"
        elems, size = w["ggml"]
    assert CELER[type_id] == (name, elems, size)


@pytest.mark.parametrize("type_id", sorted(CELER), ids=[CELER[i][0] for i in sorted(CELER)])
def test_celer_type_in_gguf_py(type_id: int) -> None:
    assert type_id in GGUF_PY, f"celer's type {type_id} {CELER[type_id]} is unknown to gguf-py"
    assert CELER[type_id][0] == GGUF_PY[type_id][0]


def test_unknown_ids_are_gaps() -> None:
    """Ids between the known ones (types removed upstream) are unknown to both."""
    for i in range(max(CELER) + 1):
        assert (i in CELER) == (i in GGUF_PY), f"type id {i}: celer {CELER.get(i)}, gguf-py {GGUF_PY.get(i)}"
