"""Parity of celer's Unicode layer (src/tokenizer/unicode.c, src/core/utf8.c) with Python's
unicodedata and codecs, and with the regex engine of HF tokenizers (Oniguruma), through the
helper program tests/tools/unicode_dump.

The tables' Unicode version (Debian's unicode-data) and Python's unicodedata.unidata_version
may differ: code points assigned in one and not the other are skipped, counted and reported;
everything assigned in both must agree exactly.
"""

import bz2
import os
import random
import re
import subprocess
import unicodedata

import pytest

BUILD = os.environ.get("CELER_BUILD_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
DUMP = os.path.join(BUILD, "unicode_dump")
MAX_SKIPPED = 0x110000 // 100  # assignment differences allowed between versions: 1% of the code space
CATEGORIES = ("Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co Cn").split()
UCD_TEST = "/usr/share/unicode/NormalizationTest.txt.bz2"  # Debian unicode-data, if installed


def run_dump(mode, lines=None):
    if not os.path.exists(DUMP):
        pytest.fail(f"{DUMP} not found: build it with `cmake --build {BUILD} --target unicode_dump`")
    stdin = None if lines is None else "".join(l + "\n" for l in lines)
    r = subprocess.run([DUMP, mode], input=stdin, capture_output=True, text=True, check=True)
    return r.stdout.splitlines()


def report(capsys, msg):
    with capsys.disabled():
        print(f"\n  unicode parity: {msg}")


@pytest.fixture(scope="module")
def celer():
    """Per code point (category, ccc, is_space), and the tables' version."""
    version = run_dump("version")[0]
    props = [tuple(l.split()) for l in run_dump("props")]
    assert len(props) == 0x110000
    return version, [(c, int(k), s == "1") for c, k, s in props]


@pytest.fixture(scope="module")
def both(celer):
    """Code points assigned in both celer's tables and Python's unicodedata, and the skipped ones."""
    _, props = celer
    common, skipped = [], []
    for cp in range(0x110000):
        ours_assigned = props[cp][0] != "Cn"
        py_assigned = unicodedata.category(chr(cp)) != "Cn"
        if ours_assigned and py_assigned:
            common.append(cp)
        elif ours_assigned != py_assigned:
            skipped.append(cp)
    return common, skipped


def test_versions_and_categories(celer, both, capsys):
    version, props = celer
    common, skipped = both
    report(capsys, f"celer tables Unicode {version}, Python unicodedata {unicodedata.unidata_version}; "
           f"{len(common)} code points assigned in both, {len(skipped)} skipped "
           f"(assigned in one version only, e.g. {', '.join(f'U+{c:04X}' for c in skipped[:3])})")
    if version == unicodedata.unidata_version:
        assert not skipped
    assert len(skipped) <= MAX_SKIPPED, "versions too far apart to compare; update Python or the tables"
    skip = set(skipped)
    bad = [cp for cp in range(0x110000) if cp not in skip and props[cp][0] != unicodedata.category(chr(cp))]
    assert not bad, "category differs: " + ", ".join(
        f"U+{cp:04X} celer {props[cp][0]} python {unicodedata.category(chr(cp))}" for cp in bad[:10])
    bad = [cp for cp in common if props[cp][1] != unicodedata.combining(chr(cp))]
    assert not bad, "ccc differs: " + ", ".join(
        f"U+{cp:04X} celer {props[cp][1]} python {unicodedata.combining(chr(cp))}" for cp in bad[:10])


def hexes(strings):
    return [s.encode("utf-8").hex() for s in strings]


def compare_forms(texts, form):
    got = run_dump(form.lower(), hexes(texts))
    assert len(got) == len(texts)
    bad = []
    for t, g in zip(texts, got):
        want = unicodedata.normalize(form, t).encode("utf-8").hex()
        if g != want:
            bad.append(f"{' '.join(f'{ord(c):04X}' for c in t)}: celer {g} python {want}")
    assert not bad, f"{form} differs on {len(bad)} of {len(texts)}: " + "; ".join(bad[:5])


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_every_code_point(both, form):
    common, _ = both
    texts = [chr(cp) for cp in common if not 0xD800 <= cp <= 0xDFFF and unicodedata.category(chr(cp)) != "Co"]
    compare_forms(texts, form)


def pools(both):
    common = set(both[0])

    def pick(*ranges):
        return [chr(c) for lo, hi in ranges for c in range(lo, hi + 1) if c in common]

    latin = pick((0x41, 0x5A), (0x61, 0x7A), (0xC0, 0x17F), (0x1E00, 0x1EFF))
    marks = pick((0x300, 0x36F), (0x1DC0, 0x1DFF), (0x20D0, 0x20F0))
    return {
        "latin": (latin, marks),
        "hangul": (pick((0x1100, 0x11FF), (0xAC00, 0xAC00 + 400), (0xD780, 0xD7A3), (0x3131, 0x318E)),
                   pick((0x1160, 0x11FF), (0x302E, 0x302F))),
        "devanagari": (pick((0x0900, 0x097F), (0x0980, 0x09FF), (0x0B00, 0x0B7F)),
                       pick((0x093C, 0x094D), (0x09BC, 0x09D7), (0x0B3C, 0x0B57))),
        "vietnamese": (pick((0x61, 0x7A), (0xC0, 0xFF), (0x1EA0, 0x1EF9), (0x102, 0x103), (0x1A0, 0x1B0)),
                       [chr(c) for c in (0x300, 0x301, 0x302, 0x303, 0x306, 0x309, 0x31B, 0x323)]),
        "greek": (pick((0x391, 0x3C9), (0x1F00, 0x1FFF)),
                  [chr(c) for c in (0x300, 0x301, 0x308, 0x313, 0x314, 0x342, 0x345, 0x344, 0x340)]),
        "hebrew": (pick((0x5D0, 0x5EA), (0xFB1D, 0xFB4F)), pick((0x591, 0x5C7))),
        "tibetan": (pick((0x0F40, 0x0F6C), (0x0F90, 0x0FBC)), pick((0x0F71, 0x0F87), (0x0F39, 0x0F39))),
    }


@pytest.mark.parametrize("form", ["NFC", "NFD"])
def test_random_combining_strings(both, form):
    rng = random.Random(20240611)
    texts = []
    for name, (bases, marks) in sorted(pools(both).items()):
        assert bases and marks, name
        for _ in range(800):
            s = []
            for _ in range(rng.randint(1, 8)):
                s.append(rng.choice(bases))
                s.extend(rng.choice(marks) for _ in range(rng.choice([0, 0, 1, 1, 2, 3, 5])))
            if rng.random() < 0.1:
                rng.shuffle(s)  # leading marks, marks on marks
            texts.append("".join(s))
    compare_forms(texts, form)


def test_normalization_conformance(celer, capsys):
    """The Unicode Consortium's NormalizationTest.txt, where Debian's unicode-data put it."""
    if not os.path.exists(UCD_TEST):
        pytest.skip(f"{UCD_TEST} not installed (apt-get install unicode-data)")
    with bz2.open(UCD_TEST, "rt", encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"NormalizationTest-(\d+\.\d+\.\d+)\.txt", text)
    if not m or m.group(1) != celer[0]:
        pytest.skip(f"{UCD_TEST} is for Unicode {m and m.group(1)}, the tables for {celer[0]}")
    rows = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("@"):
            rows.append(["".join(chr(int(x, 16)) for x in f.split()) for f in line.split(";")[:5]])
    flat = [c for r in rows for c in r]
    nfc = dict(zip(flat, (bytes.fromhex(h).decode() for h in run_dump("nfc", hexes(flat)))))
    nfd = dict(zip(flat, (bytes.fromhex(h).decode() for h in run_dump("nfd", hexes(flat)))))
    bad = []
    for c1, c2, c3, c4, c5 in rows:
        if not (c2 == nfc[c1] == nfc[c2] == nfc[c3] and c4 == nfc[c4] == nfc[c5]
                and c3 == nfd[c1] == nfd[c2] == nfd[c3] and c5 == nfd[c4] == nfd[c5]):
            bad.append(" ".join(f"{ord(c):04X}" for c in c1))
    report(capsys, f"NormalizationTest-{m.group(1)}.txt: {len(rows)} rows, {len(bad)} failing")
    assert not bad, f"{len(bad)} rows fail: {bad[:10]}"


def test_invalid_utf8_and_lossy_decoding():
    """Ill-formed input: NFC names the offset Python's decoder names, and replacing each maximal
    subpart with U+FFFD gives what bytes.decode(errors="replace") gives."""
    rng = random.Random(7)
    pieces = [b"a", b"\xc3\xa9", b"\xe2\x82\xac", b"\xf0\x9f\x98\x80", b"\x80", b"\xbf", b"\xc0", b"\xc1",
              b"\xc3", b"\xe2\x82", b"\xe0\x80", b"\xe0\xa0", b"\xed\xa0\x80", b"\xed\x9f\xbf", b"\xf0\x8f",
              b"\xf4\x90\x80\x80", b"\xf4\x8f\xbf", b"\xf5", b"\xff", b"\xfe", b"e\xcc\x81"]
    samples = [b"".join(rng.choice(pieces) for _ in range(rng.randint(1, 6))) for _ in range(3000)]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) for _ in range(3000)]
    lossy = run_dump("lossy", [s.hex() for s in samples])
    nfc = run_dump("nfc", [s.hex() for s in samples])
    for s, got_lossy, got_nfc in zip(samples, lossy, nfc):
        assert got_lossy == s.decode("utf-8", errors="replace").encode().hex(), s
        try:
            want = unicodedata.normalize("NFC", s.decode("utf-8")).encode().hex()
        except UnicodeDecodeError as e:
            assert got_nfc.startswith("ERR ") and f"at byte {e.start} " in got_nfc, (s, got_nfc)
        else:
            if all(unicodedata.category(c) != "Cn" for c in s.decode("utf-8")):
                assert got_nfc == want, s


# ---- the regex engine of HF tokenizers --------------------------------------------------------

def onig_members(tokenizers, cls, text):
    """Code points of text that Oniguruma (inside HF tokenizers) puts in the character class cls."""
    split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(f"[^{cls}]+"), behavior="removed")
    return {ord(c) for piece, _ in split.pre_tokenize_str(text) for c in piece}


def test_space_and_classes_match_tokenizers(celer, capsys):
    """\\s and \\p{..} as the pre-tokenizer regexes see them, code point by code point."""
    tokenizers = pytest.importorskip("tokenizers")
    _, props = celer
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    space = onig_members(tokenizers, r"\s", everything)
    ours = {cp for cp in range(0x110000) if props[cp][2]}
    assert space == ours, f"\\s: only tokenizers {sorted(space - ours)}, only celer {sorted(ours - space)}"

    onig_cn = onig_members(tokenizers, r"\p{Cn}", everything)
    common = [cp for cp in range(0x110000)
              if props[cp][0] != "Cn" and cp not in onig_cn and not 0xD800 <= cp <= 0xDFFF]
    only_onig = sum(1 for cp in range(0x110000) if props[cp][0] == "Cn" and cp not in onig_cn
                    and not 0xD800 <= cp <= 0xDFFF)
    report(capsys, f"tokenizers {tokenizers.__version__}: \\s == White_Space ({len(ours)} code points); "
           f"its Oniguruma knows {only_onig} code points that the Unicode {celer[0]} tables leave Cn")
    # Oniguruma's category of each code point both versions assign (planes 15-16 private use aside)
    text = "".join(chr(c) for c in common if c < 0xF0000)
    onig_cat = {}
    for cat in CATEGORIES:
        for cp in onig_members(tokenizers, rf"\p{{{cat}}}", text):
            assert cp not in onig_cat, f"U+{cp:04X} is both {onig_cat[cp]} and {cat} in Oniguruma"
            onig_cat[cp] = cat
    assert len(onig_cat) == len(text)
    changed = sorted(cp for cp, cat in onig_cat.items() if cat != props[cp][0])
    report(capsys, f"Oniguruma and celer categories differ on {len(changed)} code points: "
           + ", ".join(f"U+{cp:04X} {props[cp][0]}->{onig_cat[cp]}" for cp in changed[:10]))
    # Category changes of assigned characters are rare (15.0 -> 16.0: U+1171E Mn -> Mc only).
    assert len(changed) <= 20, "tokenizers' regex engine is too far from the tables; regenerate them"

    # The groups the pre-tokenizer patterns use are the unions of their categories.
    groups = {"L": "Lu Ll Lt Lm Lo", "M": "Mn Mc Me", "N": "Nd Nl No", "P": "Pc Pd Ps Pe Pi Pf Po",
              "S": "Sm Sc Sk So", "Z": "Zs Zl Zp", "C": "Cc Cf Cs Co Cn"}
    for cls, cats in groups.items():
        got = onig_members(tokenizers, rf"\p{{{cls}}}", text)
        want = {cp for cp, cat in onig_cat.items() if cat in cats.split()}
        assert got == want, f"\\p{{{cls}}} is not the union of {cats} in Oniguruma"
