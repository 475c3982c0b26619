/* The regular expressions of pre-tokenizers (GPT-2, Llama 3, Qwen2, DeepSeek, GPT-4o, Tekken
 * split patterns), with the semantics of Oniguruma, which HF tokenizers runs: leftmost-first
 * alternation, greedy quantifiers with backtracking, Unicode classes.
 *
 * Supported: literals and escapes (\r \n \t \f \v \\ \. …, \x{HHHH}), `.`, classes `[...]`
 * with ranges, negation and \p{..}, \P{..}, \s \S \d \D \w \W inside and outside; groups
 * `(...)`, `(?:...)`, `(?i:...)` (ASCII case folding), lookahead `(?=...)` and `(?!...)`;
 * `|`; quantifiers `? * + {n} {n,} {n,m}` and their lazy forms. Anything else is an error
 * naming the pattern position, so a tokenizer with an unknown pattern is refused at load rather
 * than split wrongly. Input text must be valid UTF-8 (the tokenizer checks it first). */
#ifndef CELER_TOKENIZER_REGEX_H
#define CELER_TOKENIZER_REGEX_H

#include "celer.h"

typedef struct celer_regex celer_regex;

/* Backtracking state, reused across calls by one thread; zero-initialize, free when done. */
typedef struct {
    uint32_t *items; /* (cap) pairs of (pc, pos) */
    size_t    cap;
} celer_regex_stack;

celer_status celer_regex_compile(celer_regex **out, const char *pattern, celer_error *err);
void         celer_regex_free(celer_regex *re);
void         celer_regex_stack_free(celer_regex_stack *st);

/* Leftmost match in text[0, n) starting at or after `from`. Returns 1 and sets [*mb, *me) when
 * found, 0 when not, -1 when out of memory. Text longer than 4 GiB is the caller's to split. */
int celer_regex_find(const celer_regex *re, const char *text, size_t n, size_t from, size_t *mb, size_t *me,
                     celer_regex_stack *st);

#endif
