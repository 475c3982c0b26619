/* The placeholder vocabulary of synthetic models: a SentencePiece-style ("llama") list that celer
 * and llama.cpp both load.
 *   0 "<unk>" (unknown), 1 "<s>" (BOS, control), 2 "</s>" (EOS, control)
 *   3..258 "<0x00>".."<0xFF>" byte tokens (type 6), so any text encodes through byte fallback
 *   259.. "▁", then "▁a", "a", "▁b", "b", … "▁z", "z", "▁aa", "aa", … up to n_vocab: normal
 *         pieces (type 1) with descending scores -1, -2, …
 * BOS is added to every prompt; nothing else is special. */
#include "core/error.h"
#include "formats/gguf.h"
#include "models/synth_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TOKEN_NORMAL = 1, TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_BYTE = 6 };

#define METASPACE "\xe2\x96\x81" /* U+2581 ▁ */

/* Bijective base 26: 0 → "a", 25 → "z", 26 → "aa", … Writes at most 15 letters and a NUL. */
static void letters(uint64_t k, char *out)
{
    char   rev[16];
    size_t n = 0;
    for (k++; k && n < 15; k = (k - 1) / 26) rev[n++] = (char)('a' + (k - 1) % 26);
    for (size_t i = 0; i < n; i++) out[i] = rev[n - 1 - i];
    out[n] = '\0';
}

celer_status synth_add_vocab(celer_gguf_writer *w, int64_t n_vocab, celer_error *err)
{
    size_t       n      = (size_t)n_vocab;
    char       **tokens = calloc(n, sizeof *tokens);
    float       *scores = calloc(n, sizeof *scores);
    int32_t     *types  = calloc(n, sizeof *types);
    char        *pool   = malloc(n * 24); /* every token is under 24 bytes with its NUL */
    celer_status st     = CELER_OK;
    if (!tokens || !scores || !types || !pool) {
        st = celer_fail(err, CELER_ERR_OOM, "synth: out of memory for a vocabulary of %lld tokens", (long long)n_vocab);
        goto done;
    }
    char *p = pool;
    for (size_t i = 0; i < n; i++, p += 24) {
        tokens[i] = p;
        if (i < 3) {
            static const char *const special[] = {"<unk>", "<s>", "</s>"};
            strcpy(p, special[i]);
            types[i] = i == 0 ? TOKEN_UNKNOWN : TOKEN_CONTROL;
        } else if (i < 259) {
            snprintf(p, 24, "<0x%02X>", (unsigned)(i - 3));
            types[i] = TOKEN_BYTE;
        } else {
            size_t k = i - 259;
            if (k == 0)
                strcpy(p, METASPACE);
            else if (k % 2)
                strcpy(p, METASPACE), letters((k - 1) / 2, p + 3);
            else
                letters((k - 1) / 2, p);
            types[i]  = TOKEN_NORMAL;
            scores[i] = -(float)(k + 1);
        }
    }
    const bool f = false;
    if (celer_gguf_writer_add_str(w, "tokenizer.ggml.model", "llama", err) ||
        celer_gguf_writer_add_str(w, "tokenizer.ggml.pre", "default", err) ||
        celer_gguf_writer_add_array(w, "tokenizer.ggml.tokens", CELER_GGUF_STRING, tokens, n, err) ||
        celer_gguf_writer_add_array(w, "tokenizer.ggml.scores", CELER_GGUF_FLOAT32, scores, n, err) ||
        celer_gguf_writer_add_array(w, "tokenizer.ggml.token_type", CELER_GGUF_INT32, types, n, err) ||
        celer_gguf_writer_add_u32(w, "tokenizer.ggml.unknown_token_id", 0, err) ||
        celer_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1, err) ||
        celer_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2, err) ||
        celer_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true, err) ||
        celer_gguf_writer_add(w, "tokenizer.ggml.add_eos_token", CELER_GGUF_BOOL, &f, err))
        st = err->code;
done:
    free(tokens);
    free(scores);
    free(types);
    free(pool);
    return st;
}
