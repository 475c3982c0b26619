/* The engine's generate (runtime/engine.c) on small random-weight models (engine_test.h: a
 * dense llama and a qwen3moe; on the GPU where the build has one):
 *   - the cache reused across calls: a prompt that extends the last call's tokens, its reply
 *     cut at max_tokens included, gives the reply it gives from an empty cache, with every token
 *     that was run reused and the last one drawn (never run) run now. */
#include "runtime/engine_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "engine_test.h"
#include "rng.h"

/* The engine's cache reused across generate calls: a prompt that extends the last call's tokens
 * (its reply included, whose last token was drawn but, at max_tokens, never run) gives what it
 * gives from an empty cache, every token that was run reused and the last one run again. The
 * reply's tokens come from a run of one token more (greedy: the same first four). */
static int test_reuse(celer_engine *e, const int32_t *prompt, size_t n_prompt, int vocab)
{
    celer_error      err = {0};
    celer_gen_params gp  = {.sampling = celer_sampling_default(), .ignore_eos = true, .max_tokens = 5};
    static result    first, again, fresh;
    int32_t          ids[128];
    memset(&first, 0, sizeof first), memset(&again, 0, sizeof again), memset(&fresh, 0, sizeof fresh);
    celer_engine_reset(e);
    CHECK(celer_engine_generate(e, prompt, n_prompt, &gp, on_text, &first, &first.stats, &err) == CELER_OK);
    const int32_t n = (int32_t)n_prompt + 4; /* the prompt and the first four drawn, all run */
    CHECK(e->n_tokens >= n && n + 1 <= 128);
    memcpy(ids, e->tokens, (size_t)n * sizeof *ids);
    ids[n]        = (prompt[0] + 1) % vocab;
    gp.max_tokens = 4;
    celer_engine_reset(e);
    CHECK(celer_engine_generate(e, prompt, n_prompt, &gp, on_text, &first, &first.stats, &err) == CELER_OK);
    const int32_t held = e->n_tokens; /* the fourth drawn is not among them: never run */
    gp.max_tokens      = 6;
    CHECK(celer_engine_generate(e, ids, (size_t)n + 1, &gp, on_text, &again, &again.stats, &err) == CELER_OK);
    celer_engine_reset(e);
    CHECK(celer_engine_generate(e, ids, (size_t)n + 1, &gp, on_text, &fresh, &fresh.stats, &err) == CELER_OK);
    if (!same(&again, &fresh) || again.stats.n_reused != n - 1)
        fprintf(stderr, "reuse: %lld of %d tokens reused; %zu bytes against %zu from an empty cache%s\n",
                (long long)again.stats.n_reused, n, again.n, fresh.n, same(&again, &fresh) ? "" : ", different");
    CHECK(same(&again, &fresh));
    CHECK(again.stats.n_reused == n - 1 && held == n - 1);
    return 0;
}

static int test_model(celer_engine *e, const char *arch, int vocab)
{
    (void)arch;
    int32_t prompt[24];
    for (size_t k = 0; k < sizeof prompt / sizeof prompt[0]; k++) prompt[k] = (int32_t)(rnd() % (uint32_t)vocab);
    return test_reuse(e, prompt, 10, vocab);
}

int main(void) { return on_synth_models("engine", test_model) != 0; }
