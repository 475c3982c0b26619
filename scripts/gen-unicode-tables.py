#!/usr/bin/env python3
"""Writes src/tokenizer/unicode_props_data.c and unicode_norm_data.c from the Unicode Character
Database.

Usage: python3 scripts/gen-unicode-tables.py [--ucd DIR] [--out-dir DIR]

DIR defaults to /usr/share/unicode (Debian: apt-get install unicode-data). It reads
  UnicodeData.txt               general category, canonical combining class, decompositions
  PropList.txt                  White_Space
  CompositionExclusions.txt     script-specific and post-composition-version exclusions
  DerivedNormalizationProps.txt Full_Composition_Exclusion, used only to cross-check ours
and writes (see src/tokenizer/unicode.h for how the tables are read), the properties of every
code point into unicode_props_data.c:
  celer_unicode_stage1/stage2   two-stage lookup cp -> index into celer_unicode_records
  celer_unicode_records         distinct (general category, ccc, flags) triples
and the normalization data into unicode_norm_data.c:
  celer_unicode_decomps/pool    full (recursive) canonical decomposition of every code point
                                that has one, Hangul syllables excepted (done by arithmetic)
  celer_unicode_pairs           canonical composition pairs (first, second) -> composite,
                                composition exclusions, singletons and non-starter
                                decompositions left out; Hangul again by arithmetic
Python 3 standard library only.
"""

import argparse
import os
import re
import sys

SHIFT = 8  # must equal CELER_UNICODE_SHIFT in src/tokenizer/unicode.h
MAX_CP = 0x110000

# The order of celer_ucat in src/tokenizer/unicode.h.
CATEGORIES = ["Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No",
              "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
              "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn"]
CAT_INDEX = {c: i for i, c in enumerate(CATEGORIES)}

# Record flags, as CELER_UNICODE_F_* in unicode.h.
F_WHITE_SPACE = 1
F_DECOMP = 2       # has a canonical decomposition in celer_unicode_decomps
F_COMP_SECOND = 4  # is the second member of some pair in celer_unicode_pairs

S_BASE, S_COUNT = 0xAC00, 11172


def fail(msg):
    sys.exit("gen-unicode-tables: " + msg)


def data_lines(path):
    """Yields the fields of each non-comment line of a UCD file, stripped."""
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield [x.strip() for x in line.split(";")]


def cp_range(field):
    if ".." in field:
        a, b = field.split("..")
        return range(int(a, 16), int(b, 16) + 1)
    return range(int(field, 16), int(field, 16) + 1)


def read_version(ucd):
    with open(os.path.join(ucd, "PropList.txt"), encoding="utf-8") as f:
        m = re.match(r"# PropList-(\d+\.\d+\.\d+)\.txt", f.readline())
    if not m:
        fail(f"{ucd}/PropList.txt: first line does not name the Unicode version")
    return m.group(1)


def read_unicode_data(ucd):
    """Returns (category[cp], ccc[cp], canonical decomposition {cp: [cps]})."""
    cat = [CAT_INDEX["Cn"]] * MAX_CP
    ccc = [0] * MAX_CP
    decomp = {}
    first = None
    for f in data_lines(os.path.join(ucd, "UnicodeData.txt")):
        cp, name, gc, cc, dm = int(f[0], 16), f[1], f[2], int(f[3]), f[5]
        if gc not in CAT_INDEX:
            fail(f"UnicodeData.txt: U+{cp:04X} has unknown category {gc}")
        if name.endswith(", First>"):
            first = cp
            continue
        lo = cp
        if name.endswith(", Last>"):
            if first is None:
                fail(f"UnicodeData.txt: U+{cp:04X} ends a range that never started")
            lo, first = first, None
        for c in range(lo, cp + 1):
            cat[c], ccc[c] = CAT_INDEX[gc], cc
        if dm and not dm.startswith("<"):  # canonical only; <tag> marks compatibility
            decomp[cp] = [int(x, 16) for x in dm.split()]
    return cat, ccc, decomp


def read_white_space(ucd):
    ws = set()
    for f in data_lines(os.path.join(ucd, "PropList.txt")):
        if f[1] == "White_Space":
            ws.update(cp_range(f[0]))
    return ws


def read_property(path, prop):
    out = set()
    for f in data_lines(path):
        if len(f) >= 2 and f[1] == prop:
            out.update(cp_range(f[0]))
    return out


def full_decomposition(cp, decomp):
    if cp not in decomp:
        return [cp]
    out = []
    for c in decomp[cp]:
        out.extend(full_decomposition(c, decomp))
    return out


def build(ucd):
    version = read_version(ucd)
    cat, ccc, decomp = read_unicode_data(ucd)
    ws = read_white_space(ucd)
    for cp in decomp:
        if S_BASE <= cp < S_BASE + S_COUNT or any(S_BASE <= c < S_BASE + S_COUNT for c in decomp[cp]):
            fail(f"U+{cp:04X}: Hangul syllables must not appear in UnicodeData decompositions")

    # Full_Composition_Exclusion = listed exclusions + singletons + non-starter decompositions.
    listed = {c for f in data_lines(os.path.join(ucd, "CompositionExclusions.txt")) for c in cp_range(f[0])}
    excluded = set()
    for cp, d in decomp.items():
        if cp in listed or len(d) == 1 or ccc[cp] != 0 or ccc[d[0]] != 0:
            excluded.add(cp)
    derived = os.path.join(ucd, "DerivedNormalizationProps.txt")
    if os.path.exists(derived):
        want = read_property(derived, "Full_Composition_Exclusion")
        if want != excluded:
            fail("Full_Composition_Exclusion differs from DerivedNormalizationProps.txt: "
                 f"extra {sorted(excluded - want)[:8]}, missing {sorted(want - excluded)[:8]}")

    pairs = []
    for cp, d in sorted(decomp.items()):
        if cp in excluded:
            continue
        if len(d) != 2:
            fail(f"U+{cp:04X}: a primary composite must decompose to two code points")
        pairs.append((d[0], d[1], cp))
    pairs.sort()
    seconds = {p[1] for p in pairs}

    full = {cp: full_decomposition(cp, decomp) for cp in sorted(decomp)}

    # Records and the two-stage table.
    records, rec_index, per_cp = [], {}, [0] * MAX_CP
    for cp in range(MAX_CP):
        flags = ((F_WHITE_SPACE if cp in ws else 0) | (F_DECOMP if cp in decomp else 0)
                 | (F_COMP_SECOND if cp in seconds else 0))
        key = (cat[cp], ccc[cp], flags)
        if key not in rec_index:
            rec_index[key] = len(records)
            records.append(key)
        per_cp[cp] = rec_index[key]
    if len(records) > 256:
        fail(f"{len(records)} distinct records do not fit stage2's uint8_t")

    block_size = 1 << SHIFT
    blocks, block_index, stage1 = [], {}, []
    for start in range(0, MAX_CP, block_size):
        blk = tuple(per_cp[start:start + block_size])
        if blk not in block_index:
            block_index[blk] = len(blocks)
            blocks.append(blk)
        stage1.append(block_index[blk])
    return dict(version=version, stage1=stage1, blocks=blocks, records=records, full=full,
                pairs=pairs)


def c_array(values, per_line=24):
    vals = [str(v) for v in values]
    lines = []
    for i in range(0, len(vals), per_line):
        lines.append("    " + ",".join(vals[i:i + per_line]) + ",")
    return "\n".join(lines)


def emit(t):
    stage1, blocks, records = t["stage1"], t["blocks"], t["records"]
    stage2 = [r for blk in blocks for r in blk]
    if len(blocks) > 256:
        fail(f"{len(blocks)} blocks do not fit stage1's uint8_t; change SHIFT here and in unicode.h")
    s1_type = "uint8_t"
    decomps, pool = [], []
    for cp, seq in t["full"].items():
        decomps.append((cp, len(pool), len(seq)))
        pool.extend(seq)
    if len(pool) > 0xFFFF or max(len(s) for s in t["full"].values()) > 0xFF:
        fail("decomposition pool too large for celer_unicode_decomp's fields")

    def header(w, what):
        w("/* Generated by scripts/gen-unicode-tables.py from the Unicode Character Database "
          f"{t['version']}\n")
        w(" * (UnicodeData.txt, PropList.txt, CompositionExclusions.txt, DerivedNormalizationProps.txt;\n")
        w(" * Debian package unicode-data). Do not edit: change the script and run\n")
        w(" *   python3 scripts/gen-unicode-tables.py --ucd /usr/share/unicode\n")
        w(f" * {what} */\n")
        w('#include "tokenizer/unicode.h"\n\n')

    props = []
    w = props.append
    header(w, f"Code point properties. Sizes: stage1 {len(stage1)} x {s1_type}, stage2 {len(blocks)} blocks x "
              f"{1 << SHIFT} = {len(stage2)} bytes,\n * {len(records)} records.")
    w(f'_Static_assert(CELER_UNICODE_SHIFT == {SHIFT}, "unicode_props_data.c was generated for another '
      'CELER_UNICODE_SHIFT; rerun scripts/gen-unicode-tables.py");\n\n')
    w(f'const char celer_unicode_data_version[] = "{t["version"]}";\n\n')
    w(f"/* [cp >> {SHIFT}] -> block of stage2 */\n")
    w(f"const {s1_type} celer_unicode_stage1[{len(stage1)}] = {{\n{c_array(stage1, 32)}\n}};\n\n")
    w(f"/* [block << {SHIFT} | (cp & {(1 << SHIFT) - 1})] -> celer_unicode_records index */\n")
    w(f"const uint8_t celer_unicode_stage2[{len(stage2)}] = {{\n{c_array(stage2, 32)}\n}};\n\n")
    w("/* {general category (celer_ucat), canonical combining class, CELER_UNICODE_F_* flags} */\n")
    w(f"const celer_unicode_record celer_unicode_records[{len(records)}] = {{\n")
    w(c_array([f"{{{c},{k},{f}}}" for c, k, f in records], 12) + "\n};\n")

    norm = []
    w = norm.append
    header(w, f"Canonical normalization. Sizes: {len(decomps)} decompositions ({len(pool)} code points), "
              f"{len(t['pairs'])} composition\n * pairs.")
    w("/* sorted by cp: {cp, start in celer_unicode_decomp_pool, length}; full canonical decomposition */\n")
    w(f"const size_t celer_unicode_n_decomps = {len(decomps)};\n")
    w(f"const celer_unicode_decomp celer_unicode_decomps[{len(decomps)}] = {{\n")
    w(c_array([f"{{{cp},{s},{n}}}" for cp, s, n in decomps], 8) + "\n};\n")
    w(f"const uint32_t celer_unicode_decomp_pool[{len(pool)}] = {{\n{c_array(pool, 16)}\n}};\n\n")
    w("/* sorted by (first, second): canonical composition first + second -> composite */\n")
    w(f"const size_t celer_unicode_n_pairs = {len(t['pairs'])};\n")
    w(f"const celer_unicode_pair celer_unicode_pairs[{len(t['pairs'])}] = {{\n")
    w(c_array([f"{{{a},{b},{c}}}" for a, b, c in t["pairs"]], 6) + "\n};\n")
    return {"unicode_props_data.c": "".join(props), "unicode_norm_data.c": "".join(norm)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ucd", default="/usr/share/unicode",
                    help="folder with the UCD text files (apt-get install unicode-data)")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--out-dir", default=os.path.join(root, "src", "tokenizer"))
    args = ap.parse_args()
    if not os.path.exists(os.path.join(args.ucd, "UnicodeData.txt")):
        fail(f"{args.ucd}/UnicodeData.txt not found; install Debian's unicode-data "
             "(apt-get install unicode-data) or pass --ucd DIR")
    for name, text in emit(build(args.ucd)).items():
        path = os.path.join(args.out_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"gen-unicode-tables: wrote {path} ({len(text)} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
