/* What the engine-level C tests (test_batcher.c, test_engine.c) share: a small random-weight
 * model of an architecture (celer synth: 2 layers, 64 wide, a vocabulary of 512, Q8_0; a qwen3moe
 * with 8 experts, 2 a token), and a generation's text and statistics as its callbacks collect
 * them. */
#ifndef CELER_TESTS_ENGINE_TEST_H
#define CELER_TESTS_ENGINE_TEST_H

#include "models/synth.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "check.h"

enum { MAX_TEXT = 4096 };

typedef struct {
    char            text[MAX_TEXT];
    size_t          n;
    celer_gen_stats stats;
    bool            done, failed;
    char            finish[16];
} result;

/* A celer_text_fn: the text appended to the result user points at. */
static inline bool on_text(void *user, const char *text, size_t n)
{
    result *r = user;
    if (r->n + n < MAX_TEXT) memcpy(r->text + r->n, text, n), r->n += n;
    return true;
}

/* The same text, token count and finish. */
static inline bool same(const result *a, const result *b)
{
    return a->n == b->n && !memcmp(a->text, b->text, a->n) && a->stats.n_gen == b->stats.n_gen &&
           !strcmp(a->finish, b->finish);
}

/* Writes the model of arch to path; nonzero on failure. */
static inline int write_synth_model(const char *arch, const char *path)
{
    celer_synth_shape s;
    celer_error       err = {0};
    CHECK(celer_synth_shape_defaults(&s, arch));
    s.n_layer = 2, s.n_embd = 64, s.n_ff = 128, s.n_head = 4, s.n_head_kv = 2, s.head_dim = 16, s.n_vocab = 512;
    if (!strcmp(arch, "qwen3moe")) s.n_expert = 8, s.n_expert_used = 2, s.n_ff_expert = 32;
    CHECK(celer_synth_write(&s, celer_synth_type_find("Q8_0"), 7, path, NULL, NULL, NULL, &err) == CELER_OK);
    return 0;
}

/* test(engine, arch, vocabulary) on the dense llama and the qwen3moe, each written to a file named
 * for the test, opened with a context of 256, then closed and removed; the failures. */
static inline int on_synth_models(const char *name, int (*test)(celer_engine *e, const char *arch, int vocab))
{
    int         fails   = 0;
    const char *archs[] = {"llama", "qwen3moe"};
    for (size_t i = 0; i < 2; i++) {
        char                path[96];
        celer_engine       *e   = NULL;
        celer_error         err = {0};
        celer_engine_config ec  = {.n_ctx = 256};
        snprintf(path, sizeof path, "/tmp/celer-test-%s-%d-%s.gguf", name, (int)getpid(), archs[i]);
        if (write_synth_model(archs[i], path)) return fails + 1;
        if (celer_engine_create(&e, path, &ec, &err)) {
            fprintf(stderr, "%s: %s\n", path, err.msg);
            fails++;
        } else
            fails += test(e, archs[i], 512);
        celer_engine_free(e);
        unlink(path);
    }
    return fails;
}

#endif
