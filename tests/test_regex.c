/* The pre-tokenizer regex engine: Oniguruma's leftmost-first, greedy-with-backtracking results
 * on the constructs split patterns use, and a clear refusal of everything else. Expected
 * splits were worked out by hand from the regex semantics (the tokenizer parity test checks
 * the same engine against HF tokenizers on thousands of strings). */
#include "tokenizer/regex.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"

/* All matches of pattern in text, joined as "m1|m2|...". */
static int split(const char *pattern, const char *text, char *out, size_t cap)
{
    celer_regex      *re;
    celer_error       err;
    celer_regex_stack st = {0};
    if (celer_regex_compile(&re, pattern, &err)) {
        fprintf(stderr, "compile %s: %s\n", pattern, err.msg);
        return -1;
    }
    size_t n = strlen(text), at = 0, o = 0, mb, me;
    out[0]   = '\0';
    while (at <= n && celer_regex_find(re, text, n, at, &mb, &me, &st) == 1) {
        o += (size_t)snprintf(out + o, cap - o, "%s%.*s", o ? "|" : "", (int)(me - mb), text + mb);
        at = me > mb ? me : mb + 1;
    }
    celer_regex_free(re);
    celer_regex_stack_free(&st);
    return 0;
}

static int expect(const char *pattern, const char *text, const char *want)
{
    char got[1024];
    if (split(pattern, text, got, sizeof got)) return 1;
    if (strcmp(got, want)) {
        fprintf(stderr, "pattern %s on \"%s\": got \"%s\", want \"%s\"\n", pattern, text, got, want);
        return 1;
    }
    return 0;
}

static const char GPT2[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

int main(void)
{
    int fails = 0;
    /* alternation is leftmost-first, not longest */
    fails += expect("a|ab", "ab", "a");
    fails += expect("ab|a", "ab", "ab");
    /* greedy quantifiers and backtracking */
    fails += expect("a+b", "aaab", "aaab");
    fails += expect("a*ab", "aaab", "aaab");
    fails += expect("\\p{N}{1,3}", "1234567", "123|456|7");
    fails += expect("x{2}", "xxxxx", "xx|xx");
    fails += expect("x{2,}", "xxxxx", "xxxxx");
    fails += expect("a+?", "aaa", "a|a|a");
    /* lookahead: \s+(?!\S) leaves the last space for the next word */
    fails += expect("\\s+(?!\\S)|\\s+", "a   b", "  | ");
    fails += expect("\\s+(?!\\S)", "x  ", "  ");
    fails += expect("a(?=b)", "acab", "a");
    /* the GPT-2 pattern */
    fails += expect(GPT2, "Hello world", "Hello| world");
    fails += expect(GPT2, "it's 2024!!", "it|'s| 2024|!!");
    fails += expect(GPT2, "a   b", "a|  | b");
    fails += expect(GPT2, "na\xc3\xafve caf\xc3\xa9", "na\xc3\xafve| caf\xc3\xa9");
    /* case-insensitive group, ASCII only */
    fails += expect("(?i:'s|'ll)", "'S 'Ll 's", "'S|'Ll|'s");
    /* classes: negation, ranges, escapes, \p inside */
    fails += expect("[^\\r\\n\\p{L}\\p{N}]?\\p{L}+", " hi\nyo", " hi|yo");
    fails += expect("[a-c]+", "abcd cab", "abc|cab");
    fails += expect("[\\-.]+", "a-.b", "-.");
    fails += expect("[\xe4\xb8\x80-\xe9\xbe\xa5]+", "ab\xe4\xb8\xad\xe6\x96\x87" "cd", "\xe4\xb8\xad\xe6\x96\x87");
    fails += expect("\\d+", "a12b\xd9\xa3", "12|\xd9\xa3"); /* \d is Unicode Nd: U+0663 ARABIC-INDIC THREE */
    fails += expect("\\x{41}\\u0042", "xAB", "AB");
    fails += expect("\\p{Lu}\\p{Ll}+", "the Cat", "Cat");
    fails += expect("\\P{L}+", "ab12cd", "12");
    fails += expect(".", "\n", "");
    /* nothing matches: no split */
    fails += expect("z", "abc", "");

    /* refused constructs name the problem */
    const char *bad[] = {"(a", "a)", "[a", "\\p{Nope}", "a**", "(?<name>a)", "^a", "\\k", "(a*)*", "a{3,2}", "\\", "*a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        celer_regex *re = NULL;
        celer_error  err = {0};
        if (celer_regex_compile(&re, bad[i], &err) == CELER_OK || !strstr(err.msg, "regex:")) {
            fprintf(stderr, "pattern %s: expected an error, got '%s'\n", bad[i], err.msg);
            celer_regex_free(re);
            fails++;
        }
    }
    /* a long run backtracks in linear space, not recursion */
    {
        size_t n    = 1 << 20;
        char  *text = malloc(n + 2);
        CHECK(text);
        memset(text, ' ', n);
        text[n] = 'x', text[n + 1] = '\0';
        celer_regex      *re;
        celer_error       err;
        celer_regex_stack st = {0};
        size_t            mb, me;
        CHECK(celer_regex_compile(&re, GPT2, &err) == CELER_OK);
        CHECK(celer_regex_find(re, text, n + 1, 0, &mb, &me, &st) == 1 && mb == 0 && me == n - 1);
        celer_regex_free(re);
        celer_regex_stack_free(&st);
        free(text);
    }
    if (fails) return 1;
    printf("test_regex: ok\n");
    return 0;
}
