/* The engine's generate (runtime/engine.c) on small random-weight models (engine_test.h: a
 * dense llama and a qwen3moe; on the GPU where the build has one):
 *   - the cache reused across calls: a prompt that extends the last call's tokens, its reply
 *     cut at max_tokens included, gives the reply it gives from an empty cache, with every token
 *     that was run reused and the last one drawn (never run) run now;
 *   - greedy decode a step ahead (a backend's argmax_keep, argmax_take and get_rows of the kept
 *     id; where the backend has none, stand-ins over its argmax and get_rows) against step by
 *     step: the same replies ending at max_tokens, at a stop string (a step queued for nothing,
 *     its id taken and its keys and values left out: the next call's reuse as from an empty
 *     cache) and after one token; the stand-ins keep at most two and end with none kept; a step
 *     on the kept id never shares its step key (its graph, on the GPU) with one on the host's;
 *   - sampled decode a step ahead (sample_keep) against step by step, one seed: the same replies,
 *     draws left to the host (-1) made there, the step queued on them dropped and run again. */
#include "core/error.h"
#include "runtime/engine_impl.h"
#include "runtime/sampler.h"

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

/* Stand-ins for the decode-ahead ops over a backend's own argmax and get_rows. */
static const celer_backend_ops *real;
static int32_t                  kept_q[2], kept_last;
static int                      kept_head, kept_n, kept_calls;

static celer_status si_keep(celer_backend *be, const float *x, int64_t rows, int64_t n, celer_error *err)
{
    int32_t id;
    if (kept_n >= 2 || rows != 1) return celer_fail(err, CELER_ERR_INVALID, "stand-in: a third id kept, or rows");
    if (real->argmax(be, x, 1, n, &id, err)) return err->code;
    kept_q[(kept_head + kept_n++) % 2] = kept_last = id;
    kept_calls++;
    return CELER_OK;
}

/* The draw d of row x as the host makes it, every third one left to the host (-1), as a device
 * leaves a draw past its candidate list: the engine must make those itself. */
static celer_sampler si_sm;
static int           si_draws;

static celer_status si_sample_keep(celer_backend *be, const float *x, int64_t rows, int64_t n, const celer_draw *d,
                                   celer_error *err)
{
    if (kept_n >= 2 || rows != 1) return celer_fail(err, CELER_ERR_INVALID, "stand-in: a third id kept, or rows");
    float *row = malloc((size_t)n * sizeof *row);
    if (!row || real->read(be, x, row, (size_t)n * sizeof *row, err)) {
        free(row);
        return row ? err->code : celer_fail(err, CELER_ERR_OOM, "stand-in: out of memory");
    }
    int32_t id = celer_sampler_draw(&si_sm, row, d);
    free(row);
    if (++si_draws % 3 == 0) id = -1;
    kept_q[(kept_head + kept_n++) % 2] = kept_last = id;
    kept_calls++;
    return CELER_OK;
}

static celer_status si_take(celer_backend *be, int32_t *id, celer_error *err)
{
    (void)be;
    if (!kept_n) return celer_fail(err, CELER_ERR_INVALID, "stand-in: nothing kept");
    *id = kept_q[kept_head], kept_head = (kept_head + 1) % 2, kept_n--;
    return CELER_OK;
}

/* The step keys seen (the backend's step_begin, or a stand-in where it has none), each with how
 * its steps' embedding rows were read: 1 from the host's ids, 2 the kept one. A key promises the
 * same launches (backend.h), so no key may have both: a step graph recorded one way and replayed
 * the other is refused, and the steps run op by op (a decode step ahead once ran every other
 * generate so, −35% on the 0.6B). */
enum { KEYS_MAX = 64 };
static uint64_t keys[KEYS_MAX], cur_key;
static int      key_how[KEYS_MAX], n_keys;

static celer_status si_step_begin(celer_backend *be, uint64_t key, celer_error *err)
{
    cur_key = key;
    return real->step_begin ? real->step_begin(be, key, err) : CELER_OK;
}

static celer_status si_step_end(celer_backend *be, bool ok, bool *redo, celer_error *err)
{
    *redo = false;
    return real->step_end ? real->step_end(be, ok, redo, err) : CELER_OK;
}

static void note_rows(bool kept)
{
    int i = 0;
    while (i < n_keys && keys[i] != cur_key) i++;
    if (i == n_keys && n_keys < KEYS_MAX) keys[n_keys] = cur_key, key_how[n_keys++] = 0;
    if (i < n_keys) key_how[i] |= kept ? 2 : 1;
}

static celer_status si_get_rows(celer_backend *be, const celer_weight *w, const int32_t *ids, int64_t n, float *y,
                                celer_error *err)
{
    note_rows(!ids);
    if (real->argmax_keep) return real->get_rows(be, w, ids, n, y, err);
    if (!ids && n != 1) return celer_fail(err, CELER_ERR_INVALID, "stand-in: %lld kept rows", (long long)n);
    const int32_t row0 = 0; /* a kept -1 reads row 0, as backend.h asks */
    return real->get_rows(be, w, ids ? ids : kept_last < 0 ? &row0 : &kept_last, n, y, err);
}

/* One generate of prompt on e with the ops ops (e's cache emptied first unless keep). */
static int gen(celer_engine *e, const celer_backend_ops *ops, bool keep, const int32_t *prompt, size_t n,
               const celer_gen_params *gp, result *r)
{
    celer_error                    err = {0};
    const celer_backend_ops *const was = e->be->ops;
    memset(r, 0, sizeof *r);
    if (!keep) celer_engine_reset(e);
    e->be->ops      = ops;
    celer_status st = celer_engine_generate(e, prompt, n, gp, on_text, r, &r->stats, &err);
    e->be->ops      = was;
    if (st) fprintf(stderr, "generate: %s\n", err.msg);
    CHECK(st == CELER_OK);
    snprintf(r->finish, sizeof r->finish, "%s", r->stats.finish);
    return 0;
}

static int test_ahead(celer_engine *e, const int32_t *prompt, size_t n_prompt, int vocab)
{
    static celer_backend_ops ahead, step;
    static result            a, s, a2, s2;
    real = e->be->ops, ahead = *real, step = *real, kept_calls = 0, n_keys = 0;
    if (real->argmax_keep) /* the backend's own, against none */
        step.argmax_keep = NULL, step.argmax_take = NULL;
    else
        ahead.argmax_keep = si_keep, ahead.argmax_take = si_take;
    ahead.get_rows = si_get_rows, ahead.step_begin = si_step_begin, ahead.step_end = si_step_end;
    celer_gen_params gp = {.sampling = celer_sampling_default(), .ignore_eos = true, .max_tokens = 20};
    /* at max_tokens */
    if (gen(e, &ahead, false, prompt, n_prompt, &gp, &a) || gen(e, &step, false, prompt, n_prompt, &gp, &s)) return 1;
    CHECK(same(&a, &s) && !strcmp(a.finish, "length") && a.stats.n_gen == 20 && kept_n == 0);
    CHECK(real->argmax_keep || kept_calls == 20); /* the prompt's, then one a token but the last */
    /* at a stop string, then a prompt that extends what the cache holds */
    CHECK(s.n > 4);
    char        stop[3] = {s.text[s.n / 2], s.text[s.n / 2 + 1], 0};
    const char *stops[] = {stop, NULL};
    gp.stop             = stops;
    if (gen(e, &ahead, false, prompt, n_prompt, &gp, &a) || gen(e, &step, false, prompt, n_prompt, &gp, &s)) return 1;
    CHECK(same(&a, &s) && !strcmp(a.finish, "stop") && kept_n == 0);
    int32_t ids[64];
    if (gen(e, &ahead, false, prompt, n_prompt, &gp, &a)) return 1;
    const int32_t n = e->n_tokens;
    CHECK(n + 1 <= 64);
    memcpy(ids, e->tokens, (size_t)n * sizeof *ids);
    ids[n]        = (prompt[0] + 3) % vocab;
    gp.stop       = NULL;
    gp.max_tokens = 5;
    if (gen(e, &ahead, true, ids, (size_t)n + 1, &gp, &a2) || gen(e, &step, false, ids, (size_t)n + 1, &gp, &s2))
        return 1;
    CHECK(same(&a2, &s2) && a2.stats.n_reused == n && kept_n == 0);
    /* one token: the prompt's id only */
    gp.max_tokens = 1;
    if (gen(e, &ahead, false, prompt, n_prompt, &gp, &a) || gen(e, &step, false, prompt, n_prompt, &gp, &s)) return 1;
    CHECK(same(&a, &s) && a.stats.n_gen == 1 && kept_n == 0);
    int both = 0, kept_keys = 0;
    for (int i = 0; i < n_keys; i++) both += key_how[i] == 3, kept_keys += key_how[i] == 2;
    if (both) fprintf(stderr, "ahead: %d of %d step keys had steps of both kinds of ids\n", both, n_keys);
    CHECK(both == 0 && kept_keys > 0 && n_keys < KEYS_MAX);
    return 0;
}

/* Sampled decode a step ahead against step by step, one seed: the same replies at max_tokens, at
 * a stop string and after one token. The CPU's stand-in leaves every third draw to the host (a
 * device does so deep in a long tail only), so the engine's redraw — the step queued on it
 * dropped, the token before it run again — runs several times a reply; on the GPU its own ops
 * against none. */
static int test_ahead_sampled(celer_engine *e, const int32_t *prompt, size_t n_prompt, int vocab)
{
    static celer_backend_ops ahead, step;
    static result            a, s;
    celer_error              err = {0};
    celer_gen_params         gp  = {.sampling = celer_sampling_default(), .ignore_eos = true, .max_tokens = 20};
    gp.sampling.temperature = 0.9f, gp.sampling.top_k = 40, gp.sampling.top_p = 0.95f, gp.sampling.seed = 7;
    real = e->be->ops, ahead = *real, step = *real, kept_calls = 0, si_draws = 0, n_keys = 0;
    if (real->sample_keep) /* the backend's own, against none */
        step.sample_keep = NULL;
    else {
        CHECK(celer_sampler_init(&si_sm, &gp.sampling, vocab, &err) == CELER_OK);
        ahead.sample_keep = si_sample_keep, ahead.argmax_take = si_take;
    }
    ahead.get_rows = si_get_rows, ahead.step_begin = si_step_begin, ahead.step_end = si_step_end;
    int fails = 0;
    if (gen(e, &ahead, false, prompt, n_prompt, &gp, &a) || gen(e, &step, false, prompt, n_prompt, &gp, &s)) fails++;
    else {
        if (!same(&a, &s)) fprintf(stderr, "sampled ahead: %zu bytes against %zu step by step\n", a.n, s.n);
        CHECK(same(&a, &s) && !strcmp(a.finish, "length") && a.stats.n_gen == 20 && kept_n == 0);
        CHECK(real->sample_keep || si_draws >= 20); /* at least one a token, the redrawn ones' reused */
        char        stop[3] = {s.text[s.n / 2], s.text[s.n / 2 + 1], 0};
        const char *stops[] = {stop, NULL};
        gp.stop             = stops;
        CHECK(s.n > 4);
        if (gen(e, &ahead, false, prompt, n_prompt, &gp, &a) || gen(e, &step, false, prompt, n_prompt, &gp, &s))
            fails++;
        else
            CHECK(same(&a, &s) && !strcmp(a.finish, "stop") && kept_n == 0);
        gp.stop       = NULL;
        gp.max_tokens = 1;
        if (gen(e, &ahead, false, prompt, n_prompt, &gp, &a) || gen(e, &step, false, prompt, n_prompt, &gp, &s))
            fails++;
        else
            CHECK(same(&a, &s) && a.stats.n_gen == 1 && kept_n == 0);
    }
    int both = 0; /* the redraw's steps on the host's ids never share a key with those on kept ones */
    for (int i = 0; i < n_keys; i++) both += key_how[i] == 3;
    CHECK(both == 0);
    if (!real->sample_keep) celer_sampler_free(&si_sm);
    return fails;
}

static int test_model(celer_engine *e, const char *arch, int vocab)
{
    (void)arch;
    int32_t prompt[24];
    for (size_t k = 0; k < sizeof prompt / sizeof prompt[0]; k++) prompt[k] = (int32_t)(rnd() % (uint32_t)vocab);
    return test_reuse(e, prompt, 10, vocab) || test_ahead(e, prompt, 12, vocab) ||
           test_ahead_sampled(e, prompt, 12, vocab);
}

int main(void) { return on_synth_models("engine", test_model) != 0; }
