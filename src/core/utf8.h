/* UTF-8: decoding with the well-formedness rules of Unicode (Table 3-7), encoding, validation,
 * and the cut point for streaming text out token by token.
 *
 * Well-formed sequences, and nothing else, decode:
 *   00..7F | C2..DF 80..BF | E0 A0..BF 80..BF | E1..EC 80..BF 80..BF | ED 80..9F 80..BF
 *   | EE..EF 80..BF 80..BF | F0 90..BF 80..BF 80..BF | F1..F3 80..BF 80..BF 80..BF | F4 80..8F 80..BF 80..BF
 * so overlongs (C0, C1, E0 80..9F, F0 80..8F), surrogates (ED A0..BF = U+D800..DFFF), code points
 * past U+10FFFF (F4 90.., F5..FF), lone continuation bytes and truncated sequences are rejected. */
#ifndef CELER_CORE_UTF8_H
#define CELER_CORE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* What celer_utf8_decode stores for an ill-formed sequence (no code point has this value). */
#define CELER_UTF8_BAD         0xFFFFFFFFu
#define CELER_UTF8_REPLACEMENT 0xFFFDu /* U+FFFD, what lossy decoding shows for a bad sequence */
#define CELER_UTF8_MAX         4       /* bytes in the longest sequence */

/* Decodes the sequence at s[0..n). Returns the bytes consumed: 1..4, or 0 only when n == 0.
 * Sets *cp to the code point, or to CELER_UTF8_BAD when s does not start with a well-formed
 * sequence; then the count is the length of the maximal subpart (the lead byte and the
 * continuation bytes that were still valid, at least 1), so replacing each bad subpart by
 * U+FFFD gives what Python's bytes.decode(errors="replace") and Rust's from_utf8_lossy give. */
size_t celer_utf8_decode(const char *s, size_t n, uint32_t *cp);

/* Writes cp as UTF-8 into out[0..4); returns the length 1..4, or 0 (nothing written) for a
 * surrogate U+D800..DFFF or a value past U+10FFFF. */
size_t celer_utf8_encode(uint32_t cp, char out[CELER_UTF8_MAX]);

/* Returns the byte offset of the first ill-formed sequence in s[0..n), or n when all is valid. */
size_t celer_utf8_validate(const char *s, size_t n);

/* Length of the longest prefix of s[0..n) that does not end inside a multi-byte sequence: n,
 * less a trailing lead byte and its continuation bytes when they are a proper prefix of a
 * well-formed sequence (more bytes could complete it). A trailing byte run that can never
 * become valid (a stray continuation, E0 80, F5) is kept: waiting would not help.
 * For streaming detokenization: emit s[0..k), keep s[k..n) for the next token's bytes. */
size_t celer_utf8_complete_prefix(const char *s, size_t n);

#endif
