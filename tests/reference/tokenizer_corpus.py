"""A deterministic tokenizer test corpus: `make_corpus(seed, vocab_specials)` -> list of strings.

Every category a tokenizer gets wrong in practice: prose, source code and indentation, many scripts,
emoji sequences, combining marks (NFC and NFD), every kind of whitespace, digit runs, contractions,
punctuation runs, special-token texts inside text and near misses of them, very long words, the
empty string, single characters, random valid Unicode, and mixtures of all of these.

All strings are valid Unicode (no surrogates), so they survive a UTF-8 JSON-lines file. Nothing
depends on hash order; the same (seed, vocab_specials) gives the same list.

    python tests/reference/tokenizer_corpus.py [--seed N] [--out FILE.jsonl]   # stats, or write it
"""

from __future__ import annotations

import base64
import random
import re
import unicodedata

PROSE = """\
The lighthouse keeper had not spoken to another person in eleven days, which was, by his own reckoning, a personal record. He kept a ledger for such things: the number of ships that passed, the height of the swell at dawn, the names he gave to the gulls that nested on the gallery rail. It wasn't loneliness, exactly. It was more like a long conversation with the weather, in which the weather did most of the talking.

On the twelfth morning a small boat appeared from the south, rowing hard against the tide. Its single passenger wore a yellow oilskin and carried a parcel wrapped in brown paper, tied with string. "Are you Mr. Abernathy?" she shouted over the wind. He'd forgotten, for a moment, that he had a name at all; it came back to him slowly, the way feeling returns to a cold hand.

Inside the parcel was a clock. Not an ordinary clock, but a marine chronometer, brass-cased, its face yellowed with age and its second hand stuttering forward in quarter-beats. A note was folded beneath it: "This belonged to your grandfather. It runs 3.2 seconds fast per day, and it has done so since 1887. Please don't fix it." He laughed, which startled both of them.

They drank tea in the lamp room while the rain came down in sheets. She was a surveyor, she said, mapping the coastline for a company that built undersea cables -- the kind that carry 400 terabits per second between continents. "Every word you've ever typed," she said, "probably passed within a mile of this rock." He found that he didn't mind the idea. It's strange, how the world arrives: all at once, or not at all.

By evening the storm had cleared. She rowed back toward the mainland, a yellow speck shrinking against the grey, and he wound the chronometer, set it on the shelf beside the ledger, and wrote, in careful capitals: DAY 12. ONE VISITOR. CLOCK RUNS FAST. WE'LL SEE.
"""

CODE = {
    "c": """\
#include <stdio.h>
#include <stdlib.h>

/* Sum the squares of argv, skipping anything that isn't a number. */
static long sum_squares(int argc, char **argv) {
    long total = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        long v = strtol(argv[i], &end, 10);
        if (end == argv[i] || *end != '\\0') continue;
        total += v * v;   // may overflow; fine for a test
    }
    return total;
}

int main(int argc, char **argv) {
\tprintf("%ld\\n", sum_squares(argc, argv));
\treturn argc > 1 ? EXIT_SUCCESS : EXIT_FAILURE;
}
""",
    "python": """\
from __future__ import annotations

import dataclasses
from typing import Iterator


@dataclasses.dataclass(frozen=True)
class Span:
    start: int
    end: int

    def __len__(self) -> int:
        return self.end - self.start


def windows(xs: list[int], k: int = 3) -> Iterator[list[int]]:
    \"\"\"Yield every window of k consecutive items.\"\"\"
    for i in range(len(xs) - k + 1):
        yield xs[i : i + k]


if __name__ == "__main__":
    print({f"w{i}": w for i, w in enumerate(windows(list(range(10))))})
    assert len(Span(3, 10)) == 7, 'bad span'
""",
    "rust": """\
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
pub enum Token<'a> {
    Word(&'a str),
    Number(f64),
    Punct(char),
}

pub fn count<'a>(tokens: &[Token<'a>]) -> HashMap<&'a str, usize> {
    let mut m = HashMap::new();
    for t in tokens {
        if let Token::Word(w) = t {
            *m.entry(*w).or_insert(0usize) += 1;
        }
    }
    m
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let toks = vec![Token::Word("hi"), Token::Number(1e-9), Token::Punct('!')];
    println!("{:?} => {:#?}", toks, count(&toks));
    Ok(())
}
""",
    "javascript": """\
'use strict';

const debounce = (fn, ms = 250) => {
  let timer = null;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn.apply(this, args), ms);
  };
};

export async function fetchJson(url, { retries = 3 } = {}) {
  for (let attempt = 0; attempt <= retries; attempt++) {
    try {
      const res = await fetch(url);
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
      return await res.json();
    } catch (err) {
      if (attempt === retries) throw err;
    }
  }
}
console.log(typeof debounce, 0x1f ?? null, 1_000_000n, /^[a-z]+$/i.test('Abc'));
""",
    "go": """\
package main

import (
\t"fmt"
\t"strings"
)

type Stack[T any] struct {
\titems []T
}

func (s *Stack[T]) Push(v T) { s.items = append(s.items, v) }

func (s *Stack[T]) Pop() (T, bool) {
\tvar zero T
\tif len(s.items) == 0 {
\t\treturn zero, false
\t}
\tv := s.items[len(s.items)-1]
\ts.items = s.items[:len(s.items)-1]
\treturn v, true
}

func main() {
\ts := &Stack[string]{}
\tfor _, w := range strings.Fields("a bb ccc") {
\t\ts.Push(w)
\t}
\tfmt.Printf("%v %d\\n", s.items, len(s.items))
}
""",
    "shell": """\
#!/usr/bin/env bash
set -euo pipefail
IFS=$'\\n\\t'

for f in "${@:-.}"/*.log; do
  [[ -f "$f" ]] || continue
  lines=$(wc -l < "$f")
  if (( lines > 1000 )); then
    gzip -9 -- "$f" && echo "compressed: $f ($lines lines)" >&2
  fi
done 2>/dev/null | tee -a /tmp/out.txt
awk -F: '$3 >= 1000 {print $1}' /etc/passwd | sort -u | head -n 5
echo "${HOME:-/root}" ~ $((2**10)) `date +%s`
""",
    "json": """\
{
  "name": "celer",
  "version": "0.1.0",
  "tags": ["llm", "inference", "c"],
  "limits": {"max_tokens": 4096, "temperature": 0.7, "top_p": 1e-3, "stop": null},
  "unicode": "caf\\u00e9 \\ud83d\\ude00 \u65e5\u672c",
  "nested": [[1, 2, [3, [4]]], {"a": {"b": {"c": true}}}],
  "empty": {}, "list": [], "neg": -0.0
}
""",
    "html": """\
<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Table &amp; Test &lt;page&gt;</title>
  <style>td { padding: 4px 8px; } .x > p::before { content: "\\201C"; }</style>
</head>
<body>
\t<table>
\t\t<thead><tr><th>Name</th><th>Qty</th></tr></thead>
\t\t<tbody>
\t\t\t<tr><td><b>Apples</b></td><td>12</td></tr>
\t\t\t<tr><td><i>Pears</i></td><td>7</td></tr>
\t\t</tbody>
\t</table>
\t<p>Line one<br/>line two &nbsp; &#x1F600; <a href="https://example.com/?q=1&amp;r=2">link</a></p>
  <!-- a comment -->
</body>
</html>
""",
}

MULTILINGUAL = [
    # Chinese (simplified, traditional)
    "\u4eca\u5929\u5929\u6c14\u5f88\u597d\uff0c\u6211\u4eec\u53bb\u516c\u56ed\u6563\u6b65\u5427\u3002",
    "\u4eba\u5de5\u667a\u80fd\u6b63\u5728\u6539\u53d8\u4e16\u754c\uff0c\u4f46\u6211\u4eec\u4ecd\u9700\u8981\u5c0f\u5fc3\u5bf9\u5f85\u3002",
    "\u6211\u5011\u5728\u81fa\u5317\u5e02\u7684\u5716\u66f8\u9928\u88e1\u8b80\u66f8\u3002",
    "\u300a\u7ea2\u697c\u68a6\u300b\u662f\u4e2d\u56fd\u53e4\u5178\u5c0f\u8bf4\u4e4b\u4e00\uff1b\u5171\u4e00\u767e\u4e8c\u5341\u56de\u3002",
    # Japanese: kanji, hiragana, katakana, half-width katakana, long vowel mark
    "\u79c1\u306f\u6771\u4eac\u306b\u4f4f\u3093\u3067\u3044\u307e\u3059\u3002\u30b3\u30fc\u30d2\u30fc\u304c\u5927\u597d\u304d\u3067\u3059\uff01",
    "\u30ab\u30bf\u30ab\u30ca\u3068\u3072\u3089\u304c\u306a\u3001\u305d\u3057\u3066\u6f22\u5b57\u3002\uff8a\uff9d\uff76\uff78\uff76\uff80\uff76\uff85\u3082\u3042\u308b\u3088\u3002",
    "\u30b9\u30fc\u30d1\u30fc\u30de\u30fc\u30b1\u30c3\u30c8\u3067\u30d1\u30f3\u3092\u8cb7\u3063\u305f\u3002\u3086\u3063\u304f\u308a\u3001\u3086\u3063\u304f\u308a\u2026\u2026",
    # Korean (precomposed syllables and conjoining jamo)
    "\uc548\ub155\ud558\uc138\uc694. \uc800\ub294 \ud55c\uad6d\uc5b4\ub97c \uacf5\ubd80\ud558\uace0 \uc788\uc2b5\ub2c8\ub2e4.",
    "\uc11c\uc6b8\uc758 \uaca8\uc6b8\uc740 \ucd94\uc6cc\uc694! \uadf8\ub798\ub3c4 \ub208\uc774 \uc608\ubed0\uc694.",
    "\u1112\u1161\u11ab\u1100\u1173\u11af",  # 한글 as conjoining jamo (NFD)
    # Arabic, Persian, Hebrew (RTL; with harakat / niqqud)
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0643\u0645 \u0641\u064a \u0627\u0644\u0639\u0627\u0644\u0645 \u0627\u0644\u0639\u0631\u0628\u064a! \u0643\u064a\u0641 \u062d\u0627\u0644\u0643\u061f",
    "\u0628\u0650\u0633\u0652\u0645\u0650 \u0627\u0644\u0644\u0651\u064e\u0647\u0650 \u0627\u0644\u0631\u0651\u064e\u062d\u0652\u0645\u064e\u0646\u0650",
    "\u0627\u0644\u0639\u062f\u062f \u0661\u0662\u0663\u0664\u0665 \u0648\u0627\u0644\u0646\u0633\u0628\u0629 \u0665\u066a",
    "\u0633\u0644\u0627\u0645 \u062f\u0646\u06cc\u0627\u060c \u0627\u06cc\u0646 \u06cc\u06a9 \u0622\u0632\u0645\u0627\u06cc\u0634 \u0627\u0633\u062a. \u06f1\u06f2\u06f3",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd! \u05d6\u05d4\u05d5 \u05de\u05d1\u05d7\u05df \u05e7\u05d8\u05df.",
    "\u05d1\u05b0\u05bc\u05e8\u05b5\u05d0\u05e9\u05b4\u05c1\u05d9\u05ea \u05d1\u05b8\u05bc\u05e8\u05b8\u05d0 \u05d0\u05b1\u05dc\u05b9\u05d4\u05b4\u05d9\u05dd",
    # Hindi / Devanagari, Bengali, Tamil
    "\u0928\u092e\u0938\u094d\u0924\u0947, \u0906\u092a \u0915\u0948\u0938\u0947 \u0939\u0948\u0902? \u092e\u0948\u0902 \u0920\u0940\u0915 \u0939\u0942\u0901\u0964",
    "\u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f \u0936\u094d\u0930\u0940 \u0926\u094d\u0935\u093e\u0930 \u0968\u0966\u0968\u096a",
    "\u0986\u09ae\u09bf \u09ac\u09be\u0982\u09b2\u09be\u09af\u09bc \u0995\u09a5\u09be \u09ac\u09b2\u09bf\u0964",
    "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd, \u0ba4\u0bae\u0bbf\u0bb4\u0bcd \u0b87\u0ba9\u0bbf\u0ba4\u0bc1.",
    # Thai, Lao, Khmer (no spaces between words)
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e04\u0e23\u0e31\u0e1a \u0e27\u0e31\u0e19\u0e19\u0e35\u0e49\u0e2d\u0e32\u0e01\u0e32\u0e28\u0e14\u0e35\u0e21\u0e32\u0e01",
    "\u0e01\u0e23\u0e38\u0e07\u0e40\u0e17\u0e1e\u0e21\u0e2b\u0e32\u0e19\u0e04\u0e23\u0e40\u0e1b\u0e47\u0e19\u0e40\u0e21\u0e37\u0e2d\u0e07\u0e2b\u0e25\u0e27\u0e07\u0e02\u0e2d\u0e07\u0e1b\u0e23\u0e30\u0e40\u0e17\u0e28\u0e44\u0e17\u0e22 \u0e51\u0e52\u0e53",
    "\u0eaa\u0eb0\u0e9a\u0eb2\u0e8d\u0e94\u0eb5 \u179f\u17bd\u179f\u17d2\u178f\u17b8",
    # Vietnamese (precomposed; an NFD copy is made below)
    "Ti\u1ebfng Vi\u1ec7t c\u00f3 nhi\u1ec1u d\u1ea5u thanh: s\u1eafc, huy\u1ec1n, h\u1ecfi, ng\u00e3, n\u1eb7ng.",
    "Ng\u01b0\u1eddi Vi\u1ec7t Nam y\u00eau h\u00f2a b\u00ecnh. \u0110\u01b0\u1eddng ph\u1ed1 H\u00e0 N\u1ed9i r\u1ea5t \u0111\u00f4ng.",
    # Cyrillic, Greek, Armenian, Georgian, Ethiopic
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u042d\u0442\u043e \u0442\u0435\u0441\u0442 \u0442\u043e\u043a\u0435\u043d\u0438\u0437\u0430\u0442\u043e\u0440\u0430. \u0401\u043b\u043a\u0430 \u0438 \u0451\u0436\u0438\u043a.",
    "\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1 \u03ba\u03cc\u03c3\u03bc\u03b5! \u1f08\u03c1\u03c7\u1f74 \u03c3\u03bf\u03c6\u03af\u03b1\u03c2 \u03c6\u03cc\u03b2\u03bf\u03c2.",
    "\u0532\u0561\u0580\u0587 \u0561\u0577\u056d\u0561\u0580\u0570 \u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0 \u1230\u120b\u121d",
    # Latin with diacritics, ligatures, German sharp s, Turkish dotless i
    "Stra\u00dfe, \u00c4rger, \u0153uvre, \ufb01nance, \u0130stanbul, \u0131s\u0131k, \u00c5ngstr\u00f6m, \u00f1and\u00fa, \u0142\u00f3d\u017a",
]

EMOJI = [
    "\U0001F600", "\U0001F602", "\u2764\ufe0f", "\u2764", "\U0001F44D", "\U0001F44D\U0001F3FB", "\U0001F44D\U0001F3FF",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466",  # family ZWJ
    "\U0001F469\U0001F3FD\u200d\U0001F4BB",  # woman technologist, skin tone
    "\U0001F3F3\ufe0f\u200d\U0001F308",  # rainbow flag
    "\U0001F3F4\u200d\u2620\ufe0f",  # pirate flag
    "\U0001F1FA\U0001F1F8", "\U0001F1EF\U0001F1F5", "\U0001F1E9\U0001F1EA\U0001F1EB\U0001F1F7",  # flags (regional indicators)
    "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",  # Scotland (tag sequence)
    "1\ufe0f\u20e3", "#\ufe0f\u20e3", "*\u20e3", "\U0001F51F",  # keycaps
    "\U0001F9D1\U0001F3FE\u200d\U0001F91D\u200d\U0001F9D1\U0001F3FB",  # people holding hands, two tones
    "\U0001F926\U0001F3FC\u200d\u2642\ufe0f", "\U0001FAE0", "\U0001F979", "\u263a", "\u263a\ufe0e", "\u00a9\ufe0f",
]

WHITESPACE = [" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u000b", "\u000c",
              "\u2002", "\u2003", "\u2009", "\u200a", "\u200b", "\u202f", "\u205f", "\u1680", "\ufeff", "\u180e"]

CONTRACTIONS = ["'s", "'S", "'t", "'T", "'re", "'RE", "'Re", "'ve", "'VE", "'m", "'M", "'ll", "'LL", "'Ll", "'d", "'D",
                "n't", "N'T", "N't", "\u2019s", "\u2019ll", "n\u2019t"]

PUNCT_RUNS = ["!!!", "???", "?!?!", "...", "\u2026", "----", "--", "\u2014\u2014", "====", "```", "~~~", "((()))",
              "[[]]", "{{}}", "<<>>", "<>", "</>", "::", "->", "=>", "!=", "===", "**", "//", "/*", "*/", "#!", "@@",
              "$$", "%%", "^^", "&&", "||", "\"\"", "''", "\u00ab\u00bb", "\u201c\u201d", "\u3001\u3002", "\uff01\uff1f",
              "\u00bf\u00a1", ";;;", ",,,", "___", "\\\\", "|>", "<|", "'''", "\"\"\""]

COMMON_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<bos>", "<eos>", "<pad>", "<unk>", "<s>", "</s>",
                   "<start_of_turn>", "<end_of_turn>", "<|fim_prefix|>", "<tool_call>", "</tool_call>", "<mask>",
                   "<think>", "</think>", "[multimodal]", "<start_of_image>"]

# Code point ranges random strings are drawn from (assigned ones only: see _assigned).
_RANGES = [
    (0x0020, 0x007E), (0x00A0, 0x024F), (0x0250, 0x036F), (0x0370, 0x052F), (0x0530, 0x06FF), (0x0700, 0x08FF),
    (0x0900, 0x0DFF), (0x0E00, 0x0FFF), (0x1000, 0x1FFF), (0x2000, 0x2BFF), (0x2C00, 0x2FFF), (0x3000, 0x33FF),
    (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xABFF), (0xAC00, 0xD7A3), (0xF900, 0xFFFD), (0x10000, 0x1FAFF),
    (0x20000, 0x2A6DF), (0xE0001, 0xE007F), (0xE0100, 0xE01EF),
]


def _assigned() -> list[int]:
    # The CJK ideograph and Hangul blocks are fully assigned; sample them rather than scanning.
    out = []
    for lo, hi in _RANGES:
        if hi - lo > 5000:
            out.extend(range(lo, hi + 1, 7))
        else:
            out.extend(cp for cp in range(lo, hi + 1) if unicodedata.category(chr(cp)) not in ("Cn", "Cs"))
    return [cp for cp in out if unicodedata.category(chr(cp)) not in ("Cn", "Cs")]


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?\"])\s+", text.replace("\n\n", " ")) if s.strip()]


def _near_misses(tok: str) -> list[str]:
    out = [tok[:-1], tok[1:], tok[:1] + " " + tok[1:], tok[:-1] + " " + tok[-1:], tok.upper(), tok.lower(),
           tok + tok, tok[0] + tok, tok + tok[-1], " " + tok, tok + " ", "\n" + tok + "\n", "x" + tok + "y"]
    if len(tok) > 3:
        mid = len(tok) // 2
        out += [tok[:mid] + tok[mid + 1 :], tok[:mid] + "\u200b" + tok[mid:], tok[:mid] + tok[mid:].upper()]
    return out


def make_corpus(seed: int = 0, vocab_specials=()) -> list[str]:
    """At least 2,000 distinct strings, always the same for the same arguments. vocab_specials: the
    model's control (and user-defined) token texts, to embed in text and misspell."""
    rng = random.Random(seed)
    out: list[str] = []
    add = out.append

    # -- 1. prose: paragraphs, sentences, shuffles, case variants
    paragraphs = [p for p in PROSE.split("\n\n") if p.strip()]
    sentences = _sentences(PROSE)
    words = PROSE.split()
    out += [PROSE, PROSE.strip()] + paragraphs + sentences
    for s in sentences:
        add(s.upper())
        add(s.lower())
        add(" " + s)
        add(s + "\n")
    for _ in range(150):
        add(" ".join(rng.sample(sentences, rng.randint(2, 5))))
    for _ in range(200):
        ws = [rng.choice(words) for _ in range(rng.randint(1, 14))]
        sep = rng.choice([" ", " ", " ", "  ", "\n", "\t", ", "])
        add(sep.join(ws))
    for w in sorted(dict.fromkeys(words))[:150]:
        add(w)
        add(" " + w)

    # -- 2. source code: whole, line by line, re-indented (tabs, spaces, mixed), random slices
    for lang, src in CODE.items():
        add(src)
        lines = src.split("\n")
        out += [ln for ln in lines if ln.strip()]
        add(src.replace("    ", "\t"))
        add(src.replace("\t", "    "))
        add(src.replace("\t", "  "))
        add("\n".join(("\t " if i % 2 else " \t") + ln for i, ln in enumerate(lines)))
        add(src.replace("\n", "\r\n"))
        for _ in range(12):
            a = rng.randrange(len(lines))
            add("\n".join(lines[a : a + rng.randint(2, 8)]))
    for depth in range(1, 9):
        add(" " * (4 * depth) + "return x;")
        add("\t" * depth + "return x;")
        add("\t " * depth + "x")
        add("\n" + " " * depth + "}\n")

    # -- 3. scripts
    nfd_vi = [unicodedata.normalize("NFD", s) for s in MULTILINGUAL]
    out += MULTILINGUAL + [s for s in nfd_vi if s not in MULTILINGUAL]
    for s in MULTILINGUAL:
        add(" " + s + " ")
        add(s[: len(s) // 2])
        add(s.replace(" ", ""))
    for _ in range(60):
        add(" ".join(rng.sample(MULTILINGUAL, rng.randint(2, 4))))
    for _ in range(40):
        a, b = rng.sample(MULTILINGUAL, 2)
        add(a[: rng.randint(1, len(a))] + rng.choice(words) + b[: rng.randint(1, len(b))])

    # -- 4. emoji
    out += EMOJI
    for e in EMOJI:
        add("I " + e + " it")
        add(e * 3)
        add(e + " " + e)
        add("ok" + e + "!")
    for _ in range(60):
        add("".join(rng.choice(EMOJI) for _ in range(rng.randint(2, 8))))
    add("\u200d")
    add("\u200d\u200d\U0001F600")
    add("\U0001F3FB")  # lone skin tone modifier
    add("\U0001F1FA")  # lone regional indicator
    add("\U0001F1FA\U0001F1F8\U0001F1FA")  # odd count
    add("\ufe0f")

    # -- 5. combining marks: NFC vs NFD, stacks, marks at start
    accented = ["caf\u00e9", "na\u00efve", "r\u00e9sum\u00e9", "\u00c5ngstr\u00f6m", "jalape\u00f1o", "\u1ea1\u1ec7\u1ef9",
                "\u01d8", "\u0344", "\u212b", "\u2126", "\u00fc\u00df", "\u1e9b\u0323", "Pok\u00e9mon", "se\u00f1or",
                "\u00e0 la carte", "fa\u00e7ade", "co\u00f6perate", "\u0119\u0105\u015b\u0107"]
    for w in accented:
        for form in ("NFC", "NFD", "NFKC", "NFKD"):
            add(unicodedata.normalize(form, w))
        add("The " + unicodedata.normalize("NFD", w) + " is here.")
    for n in (1, 2, 5, 20, 60):
        add("Z" + "".join(chr(0x0300 + (i * 7) % 0x70) for i in range(n)) + "algo")
    add("\u0301")
    add("\u0301abc")
    add(" \u0301")
    add("a\u0301\u0301\u0301")
    add("\u0915\u094d\u200d\u0937")  # Devanagari with ZWJ
    add("e\u0301 vs \u00e9")

    # -- 6. whitespace: each kind alone, runs, mixed, leading/trailing
    for w in WHITESPACE:
        for n in (1, 2, 3, 7, 16):
            add(w * n)
        add("a" + w + "b")
        add(w + "word")
        add("word" + w)
        add(w + "word" + w)
        add("x" + w * 3 + "y")
    for n in (1, 2, 3, 4, 5, 8, 15, 16, 17, 31, 32, 33, 64, 100):
        add(" " * n)
        add("\n" * n)
        add("a" + " " * n + "b")
        add("a" + "\n" * n + "b")
        add("\t" * n + "a")
    for _ in range(150):
        add("".join(rng.choice(WHITESPACE + ["a", "b", "1", ".", "\u4e2d"]) for _ in range(rng.randint(1, 20))))
    for _ in range(60):
        add("".join(rng.choice([" ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000"]) for _ in range(rng.randint(2, 12))))
    add(" leading")
    add("trailing ")
    add("  both  ")
    add("\n\nparagraph\n\n")
    add(" \n \n ")
    add("\r\n\r\n")
    add("line1\rline2\r\nline3\nline4")

    # -- 7. numbers
    for n in (1, 2, 3, 4, 5, 6, 7, 9, 10, 16, 33, 100):
        add("".join(str(rng.randint(0, 9)) for _ in range(n)))
        add("1" * n)
    out += ["0", "00", "007", "1,234,567.89", "1.234.567,89", "1 234 567", "1\u00a0234\u00a0567", "1\u202f000", "1_000_000",
            "3.14159265358979", "-42", "+7", "1e10", "6.022e23", "1.5E-10", "0x1F", "0xDEADBEEF", "0b1010", "0o777", "1/2",
            "50%", "$1,000.00", "\u20ac12,50", "\u00a5100", "12:34:56", "2024-01-01T00:00:00Z", "192.168.0.1", "v1.2.3-rc.1",
            "+1 (555) 123-4567", "\u0661\u0662\u0663", "\u0967\u0968\u0969", "\uff11\uff12\uff13", "\u2460\u2461\u2462",
            "\u00bd\u00be", "\u00b2\u00b3", "\u2167", "\U0001D7D9\U0001D7DA", "123abc456", "abc123def", "3rd", "1st 2nd",
            "a1b2c3d4", " 2024", "  99", "\n42\n", "1,2,3,4,5", "10.", ".5", "1..2", "100000000000000000000"]
    for _ in range(80):
        add(f"{rng.randint(0, 10 ** rng.randint(1, 15)):,}" if rng.random() < 0.5 else str(rng.random() * 10 ** rng.randint(-5, 9)))

    # -- 8. contractions in every case
    for c in CONTRACTIONS:
        for stem in ("it", "IT", "It", "do", "DO", "we", "WE", "they"):
            add(stem + c)
        add("I" + c + " go")
        add(c)
        add(" " + c)
    out += ["don't", "DON'T", "Don't", "I'm", "I'M", "you're", "YOU'RE", "we've", "WE'VE", "she'd", "SHE'D", "it's",
            "IT'S", "It'S", "we'll", "WE'LL", "We'Ll", "can't", "CAN'T", "won't", "y'all", "rock 'n' roll", "'tis",
            "''s", "'''s", "x's's", "O'Neil's", "the 90's", "'", "' s", "'  ll"]

    # -- 9. punctuation runs
    out += PUNCT_RUNS
    for p in PUNCT_RUNS:
        add("word" + p)
        add(p + "word")
        add(" " + p + " ")
    for _ in range(60):
        add("".join(rng.choice(PUNCT_RUNS) for _ in range(rng.randint(2, 6))))

    # -- 10. special tokens inside text, and near misses
    specials = [s for s in dict.fromkeys(list(vocab_specials)) if s]
    if len(specials) > 48:  # e.g. Gemma's thousands of <unusedN>: the named ones plus a sample
        named = [s for s in specials if not re.fullmatch(r"<unused\d+>|\[PAD\d+\]|<\|reserved_special_token_\d+\|>", s)]
        rest = [s for s in specials if s not in set(named)]
        specials = named[:40] + rng.sample(rest, min(8, len(rest)))
    specials = list(dict.fromkeys(specials + COMMON_SPECIALS))
    for s in specials:
        add(s)
        add("Hello " + s + " world")
        add(s + "text")
        add("text" + s)
        add(s + s)
        add(s + "\n" + s)
        add(" " + s + " ")
        out.extend(_near_misses(s))
    for _ in range(120):
        parts = [rng.choice(specials) if rng.random() < 0.4 else rng.choice(words + MULTILINGUAL[:4] + EMOJI[:4])
                 for _ in range(rng.randint(2, 7))]
        add(rng.choice(["", " ", "\n"]).join(parts))
    add("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n")
    add("<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n4<end_of_turn>\n")

    # -- 11. very long words (1,000 - 20,000 chars)
    brng = random.Random(seed + 1)
    add("a" * 1000)
    add("a" * 20000)
    add("ab" * 5000)
    add("Z" * 4096)
    add("https://example.com/" + "/".join("seg%d-%s" % (i, "x" * (i % 13)) for i in range(400)) + "?q=" + "%20".join(["a"] * 200))
    add(base64.b64encode(brng.randbytes(6000)).decode())
    add(base64.b64encode(brng.randbytes(1000)).decode())
    add("".join(str(brng.randint(0, 9)) for _ in range(10000)))
    add("9" * 1234)
    add("\U0001F600" * 1000)
    add("\U0001F44D\U0001F3FD" * 500)
    add("\u4e2d" * 3000)
    add("".join(brng.choice(MULTILINGUAL[0]) for _ in range(5000)))
    add(" " * 5000)
    add("\n" * 2000)
    add("\t" * 1000)
    add("-" * 3000)
    add("\u00e9" * 2000)
    add(unicodedata.normalize("NFD", "\u00e9" * 2000))
    add("x" + "\u0301" * 1500)
    add("Supercalifragilistic" * 60)
    add("".join(brng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(8000)))
    add(" ".join(["antidisestablishmentarianism"] * 300))

    # -- 12. the empty string and single characters across scripts
    add("")
    out += [chr(c) for c in range(0x20, 0x7F)]
    out += [chr(c) for c in range(0x01, 0x20)] + ["\x7f", "\x00", "a\x00b"]
    singles = "\u00e9\u00df\u00f1\u0416\u03a9\u05d0\u0627\u0905\u0e01\u4e2d\u65e5\u3042\u30a2\ud55c\u1100\u0e3f\u20ac\u00a3\u00a5" \
              "\u2603\u2764\u2713\u221e\u2211\u03c0\u00b5\u2122\u00ae\u00b0\u00b1\u00d7\u00f7\u2190\u2192\u25cf\u25a0\u2581\u2582" \
              "\u0100\u0150\u0180\u01c4\u0250\u02b0\u1e00\u1f00\u2c00\ua000\uac00\uf900\ufb00\ufe70\uff01\uff21\uff41\uff66\uffe0"
    out += list(singles)
    out += ["\U00010000", "\U0001D11E", "\U0001F600", "\U00020000", "\U0002A6D6", "\U000E0041", "\U000E0100", "\U0010FFFD",
            "\U000F0000", "\ue000", "\uf8ff", "\ufffd", "\ufffc", "\u2581hello", "a\u2581b", "\u2581\u2581"]

    # -- 13. random valid Unicode strings
    cps = _assigned()
    for _ in range(300):
        add("".join(chr(rng.choice(cps)) for _ in range(rng.randint(1, 40))))
    pools = [MULTILINGUAL[i] for i in range(0, len(MULTILINGUAL), 2)]
    for _ in range(150):
        pool = rng.choice(pools) + " abc123.,!\n"
        add("".join(rng.choice(pool) for _ in range(rng.randint(1, 60))))
    for _ in range(50):  # bytes that are valid UTF-8 across 1-4 byte widths
        add("".join(chr(rng.choice((rng.randint(0x20, 0x7E), rng.randint(0x80, 0x7FF), rng.randint(0xE000, 0xFFFD),
                                    rng.randint(0x10000, 0x10FFFD)))) for _ in range(rng.randint(1, 30))))

    # -- 14. mixtures of everything above
    pieces = [s for s in out if 0 < len(s) < 200]
    for _ in range(400):
        k = rng.randint(2, 6)
        add(rng.choice(["", " ", "\n", "\t", ""]).join(rng.choice(pieces) for _ in range(k)))

    corpus = [s for s in dict.fromkeys(out)]
    for s in corpus:
        assert isinstance(s, str)
        s.encode("utf-8")  # no surrogates
    return corpus


if __name__ == "__main__":
    import argparse
    import json
    import time

    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    a = ap.parse_args()
    t = time.perf_counter()
    c = make_corpus(a.seed, ["<|im_start|>", "<|im_end|>"])
    dt = time.perf_counter() - t
    if a.out:
        with open(a.out, "w", encoding="utf-8", newline="\n") as f:
            for s in c:
                f.write(json.dumps(s, ensure_ascii=False) + "\n")
    print(f"{len(c)} strings, {sum(map(len, c))} chars, longest {max(map(len, c))}, built in {dt:.2f}s")
