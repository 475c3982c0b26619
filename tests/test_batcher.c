/* Continuous batching (runtime/batcher.c) on small random-weight models (celer synth: a dense
 * llama and a qwen3moe, Q8_0):
 *   - 12 greedy requests of different prompt and output lengths, all queued at once and run 4
 *     at a time in steps of at most 16 tokens (so prompts are prefilled in chunks beside other
 *     sequences' decoding), give each exactly the text and token count it gives alone, and alone
 *     the batcher agrees with the engine's own generate;
 *   - a KV pool that holds one request at a time: all still complete, identical, one by one;
 *   - a request cancelled while running ends "cancelled" and the others are unaffected; a
 *     cancelled waiting request never runs;
 *   - stop strings and max_tokens end requests as in the engine;
 *   - seeded sampled draws (a low and an ordinary temperature, top-k, top-p) give batched what
 *     they give alone, alone what the engine's generate gives, greedy and sampled requests mixed
 *     in one batch (on a GPU: its sample op, rows it leaves undecided drawn on the host);
 *   - the engine's and the batcher's use of a backend's sample op: a stand-in op that draws on
 *     the host and leaves every third row undecided gives the tokens that drawing every row on
 *     the host gives (the generator's numbers consumed alike, undecided rows read and drawn);
 *   - refusals: an empty prompt, one past the context, an id outside the vocabulary, more
 *     positions than the whole pool;
 *   - all of it again on the CPU through stand-ins for decode ahead (a GPU has its own): steady
 *     greedy batches queue each step on the picks kept from the one before; every reply as step
 *     by step, every kept set taken. */
#include "core/error.h"
#include "runtime/engine_impl.h"
#include "runtime/sampler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "rng.h"
#include "engine_test.h"

enum { N_REQ = 12 };

static void on_done(void *user, const celer_gen_stats *s, const celer_error *err)
{
    result *r = user;
    r->stats  = *s;
    r->done   = true;
    r->failed = err != NULL;
    snprintf(r->finish, sizeof r->finish, "%s", s->finish);
}

typedef struct {
    int32_t ids[64];
    size_t  n;
    int32_t max_tokens;
} request;

static int run_all(celer_batcher *b, const request *q, int n, const celer_gen_params *base, result *out)
{
    celer_error err = {0};
    for (int i = 0; i < n; i++) {
        memset(&out[i], 0, sizeof out[i]);
        celer_gen_params p = *base;
        p.max_tokens       = q[i].max_tokens;
        CHECK(celer_batcher_submit(b, q[i].ids, q[i].n, &p, on_text, on_done, &out[i], NULL, &err) == CELER_OK);
    }
    for (int guard = 0; guard < 100000; guard++) {
        bool busy;
        CHECK(celer_batcher_step(b, &busy, &err) == CELER_OK);
        if (!busy) break;
    }
    for (int i = 0; i < n; i++) CHECK(out[i].done && !out[i].failed);
    return 0;
}

/* A stand-in for a backend's sample op: every third row left undecided (-1), the others drawn on
 * the host from the row as read, as celer_sampler_draw defines the op. */
static const celer_backend_ops *stand_in_real;
static celer_sampler            stand_in_sm;  /* the draw's scratch */
static float                   *stand_in_row; /* (n_vocab) a row as read */
static int                      stand_in_calls, stand_in_undecided;

static celer_status stand_in_sample(celer_backend *be, const float *x, int64_t rows, int64_t n, const celer_draw *d,
                                    int32_t *ids, celer_error *err)
{
    for (int64_t r = 0; r < rows; r++) {
        if (stand_in_calls++ % 3 == 0) {
            ids[r] = -1, stand_in_undecided++;
            continue;
        }
        if (stand_in_real->read(be, x + r * n, stand_in_row, (size_t)n * sizeof(float), err)) return err->code;
        ids[r] = celer_sampler_draw(&stand_in_sm, stand_in_row, &d[r]);
    }
    return CELER_OK;
}

/* Request 0 through the engine's generate, then all of q mixed (every third greedy) in a batch
 * of 4, with the sampling sp. */
static int sample_runs(celer_engine *e, const request *q, const celer_gen_params *greedy, const celer_gen_params *sp,
                       result *engine, result *batch)
{
    celer_error      err = {0};
    celer_gen_params gp  = *sp;
    gp.max_tokens        = q[0].max_tokens;
    memset(engine, 0, sizeof *engine);
    celer_engine_reset(e);
    CHECK(celer_engine_generate(e, q[0].ids, q[0].n, &gp, on_text, engine, &engine->stats, &err) == CELER_OK);
    celer_batcher       *b;
    celer_batcher_config four = {.n_parallel = 4, .step_tokens = 16};
    CHECK(celer_batcher_create(&b, e, &four, &err) == CELER_OK);
    for (int i = 0; i < N_REQ; i++) {
        memset(&batch[i], 0, sizeof batch[i]);
        gp            = i % 3 ? *sp : *greedy;
        gp.max_tokens = q[i].max_tokens;
        CHECK(celer_batcher_submit(b, q[i].ids, q[i].n, &gp, on_text, on_done, &batch[i], NULL, &err) == CELER_OK);
    }
    for (bool busy = true; busy;) CHECK(celer_batcher_step(b, &busy, &err) == CELER_OK);
    celer_batcher_free(b);
    return 0;
}

/* Every check above on requests q; alone: each request's reply alone (one slot). */
static int checks(celer_engine *e, const char *arch, int vocab, const request *q, result *alone)
{
    celer_error      err = {0};
    celer_gen_params p   = {.sampling = celer_sampling_default(), .ignore_eos = true};

    /* alone: one slot, one request at a time; and the engine's own generate for the first three */
    static result batched[N_REQ], engine[3];
    celer_batcher *b1;
    celer_batcher_config one = {.n_parallel = 1};
    CHECK(celer_batcher_create(&b1, e, &one, &err) == CELER_OK);
    for (int i = 0; i < N_REQ; i++)
        if (run_all(b1, &q[i], 1, &p, &alone[i])) return 1;
    celer_batcher_free(b1);
    for (int i = 0; i < 3; i++) {
        celer_gen_params gp = p;
        gp.max_tokens       = q[i].max_tokens;
        memset(&engine[i], 0, sizeof engine[i]);
        celer_engine_reset(e);
        CHECK(celer_engine_generate(e, q[i].ids, q[i].n, &gp, on_text, &engine[i], &engine[i].stats, &err) == CELER_OK);
        snprintf(engine[i].finish, sizeof engine[i].finish, "%s", engine[i].stats.finish);
        CHECK(same(&engine[i], &alone[i]));
    }

    /* together: 4 slots, steps of 16 tokens */
    celer_batcher       *b4;
    celer_batcher_config four = {.n_parallel = 4, .step_tokens = 16};
    CHECK(celer_batcher_create(&b4, e, &four, &err) == CELER_OK);
    if (run_all(b4, q, N_REQ, &p, batched)) return 1;
    for (int i = 0; i < N_REQ; i++) {
        if (!same(&batched[i], &alone[i]))
            fprintf(stderr, "%s: request %d: batched %zu bytes, %lld tokens (%s); alone %zu, %lld (%s)\n", arch, i,
                    batched[i].n, (long long)batched[i].stats.n_gen, batched[i].finish, alone[i].n,
                    (long long)alone[i].stats.n_gen, alone[i].finish);
        CHECK(same(&batched[i], &alone[i]));
        CHECK(batched[i].stats.n_gen == q[i].max_tokens && !strcmp(batched[i].finish, "length"));
    }
    celer_batcher_counts c;
    celer_batcher_get_counts(b4, &c);
    CHECK(c.waiting == 0 && c.running == 0 && c.kv_blocks_used == 0);
    celer_batcher_free(b4);

    /* a pool of 96 positions: the longest requests (up to 50 + 32) run one at a time */
    celer_batcher       *bs;
    celer_batcher_config small = {.n_parallel = 4, .kv_tokens = 96, .step_tokens = 16};
    CHECK(celer_batcher_create(&bs, e, &small, &err) == CELER_OK);
    if (run_all(bs, q, N_REQ, &p, batched)) return 1;
    for (int i = 0; i < N_REQ; i++) CHECK(same(&batched[i], &alone[i]));
    /* refusals */
    celer_gen_params big = p;
    big.max_tokens       = 200;
    CHECK(celer_batcher_submit(bs, q[0].ids, q[0].n, &big, NULL, NULL, NULL, NULL, &err) == CELER_ERR_INVALID);
    CHECK(strstr(err.msg, "more than the whole pool"));
    CHECK(celer_batcher_submit(bs, q[0].ids, 0, &p, NULL, NULL, NULL, NULL, &err) == CELER_ERR_INVALID);
    static int32_t longp[300];
    CHECK(celer_batcher_submit(bs, longp, 300, &p, NULL, NULL, NULL, NULL, &err) == CELER_ERR_INVALID);
    CHECK(strstr(err.msg, "context holds 256"));
    int32_t bad = vocab;
    CHECK(celer_batcher_submit(bs, &bad, 1, &p, NULL, NULL, NULL, NULL, &err) == CELER_ERR_INVALID);
    celer_batcher_free(bs);

    /* cancellation: request 1 while it runs, request 3 while it waits (one slot) */
    celer_batcher *bc;
    CHECK(celer_batcher_create(&bc, e, &one, &err) == CELER_OK);
    static result r[4];
    uint64_t      id[4];
    for (int i = 0; i < 4; i++) {
        memset(&r[i], 0, sizeof r[i]);
        celer_gen_params gp = p;
        gp.max_tokens       = q[i].max_tokens;
        CHECK(celer_batcher_submit(bc, q[i].ids, q[i].n, &gp, on_text, on_done, &r[i], &id[i], &err) == CELER_OK);
    }
    bool busy = true;
    while (busy && !r[0].done) CHECK(celer_batcher_step(bc, &busy, &err) == CELER_OK);
    CHECK(celer_batcher_step(bc, &busy, &err) == CELER_OK); /* request 1 is now running */
    celer_batcher_cancel(bc, id[1]);
    celer_batcher_cancel(bc, id[3]);
    celer_batcher_cancel(bc, 9999); /* no such request: ignored */
    while (busy) CHECK(celer_batcher_step(bc, &busy, &err) == CELER_OK);
    CHECK(r[1].done && !strcmp(r[1].finish, "cancelled") && r[1].stats.n_gen < q[1].max_tokens);
    CHECK(r[3].done && !strcmp(r[3].finish, "cancelled") && r[3].stats.n_gen == 0 && r[3].n == 0);
    for (int i = 0; i < 3; i += 2)
        if (!same(&r[i], &alone[i]))
            fprintf(stderr, "cancel test: request %d: %zu bytes, %lld tokens (%s); alone %zu, %lld (%s)\n", i, r[i].n,
                    (long long)r[i].stats.n_gen, r[i].finish, alone[i].n, (long long)alone[i].stats.n_gen, alone[i].finish);
    CHECK(same(&r[0], &alone[0]) && same(&r[2], &alone[2]));
    celer_batcher_free(bc);

    /* sampled: alone as the engine; mixed with greedy requests in batches of 4, as alone */
    for (int v = 0; v < 2; v++) {
        celer_gen_params sp     = p;
        sp.sampling.temperature = v ? 0.8f : 0.1f;
        sp.sampling.top_k       = v ? 40 : 0;
        sp.sampling.top_p       = 0.9f;
        sp.sampling.seed        = 1234 + (uint64_t)v;
        static result sa[N_REQ], sb[N_REQ], se;
        CHECK(celer_batcher_create(&b1, e, &one, &err) == CELER_OK);
        for (int i = 0; i < N_REQ; i++)
            if (run_all(b1, &q[i], 1, &sp, &sa[i])) return 1;
        celer_batcher_free(b1);
        celer_gen_params gp = sp;
        gp.max_tokens       = q[0].max_tokens;
        memset(&se, 0, sizeof se);
        celer_engine_reset(e);
        CHECK(celer_engine_generate(e, q[0].ids, q[0].n, &gp, on_text, &se, &se.stats, &err) == CELER_OK);
        snprintf(se.finish, sizeof se.finish, "%s", se.stats.finish);
        CHECK(same(&se, &sa[0]));
        CHECK(celer_batcher_create(&b4, e, &four, &err) == CELER_OK);
        for (int i = 0; i < N_REQ; i++) {
            memset(&sb[i], 0, sizeof sb[i]);
            gp            = i % 3 ? sp : p;
            gp.max_tokens = q[i].max_tokens;
            CHECK(celer_batcher_submit(b4, q[i].ids, q[i].n, &gp, on_text, on_done, &sb[i], NULL, &err) == CELER_OK);
        }
        for (busy = true; busy;) CHECK(celer_batcher_step(b4, &busy, &err) == CELER_OK);
        celer_batcher_free(b4);
        int differ = 0; /* from the greedy text: the draws are sampled */
        for (int i = 0; i < N_REQ; i++) differ += !same(&sa[i], &alone[i]);
        CHECK(!v || differ > 0);
        /* with 8-bit activations on a GPU (CELER_GPU_MVQ_X8=1) a row's logits depend on its batch
         * in their last bits: greedy tokens hold, sampled ones need the same probabilities */
        const char *x8     = getenv("CELER_GPU_MVQ_X8");
        bool        exact  = !(x8 && !strcmp(x8, "1"));
        for (int i = 0; i < N_REQ; i++) {
            if (i % 3 && !exact) continue;
            const result *want = i % 3 ? &sa[i] : &alone[i];
            if (!same(&sb[i], want))
                fprintf(stderr, "%s: sampled %d, request %d: batched %zu bytes (%s); alone %zu (%s)\n", arch, v, i,
                        sb[i].n, sb[i].finish, want->n, want->finish);
            CHECK(sb[i].done && !sb[i].failed && same(&sb[i], want));
        }
    }

    /* the sample op's use: the stand-in against no op at all (every row drawn on the host) */
    {
        celer_gen_params sp     = p;
        sp.sampling.temperature = 0.7f;
        sp.sampling.top_p       = 0.95f;
        sp.sampling.seed        = 99;
        static result     he, hb[N_REQ], oe, ob[N_REQ];
        celer_backend_ops none = *e->be->ops, stand_in = *e->be->ops;
        none.sample            = NULL;
        stand_in.sample        = stand_in_sample;
        stand_in_real          = e->be->ops;
        CHECK(celer_sampler_init(&stand_in_sm, &sp.sampling, vocab, &err) == CELER_OK);
        CHECK((stand_in_row = malloc((size_t)vocab * sizeof *stand_in_row)) != NULL);
        e->be->ops = &none;
        int rc     = sample_runs(e, q, &p, &sp, &he, hb);
        e->be->ops = &stand_in;
        rc |= sample_runs(e, q, &p, &sp, &oe, ob);
        e->be->ops = stand_in_real;
        celer_sampler_free(&stand_in_sm);
        free(stand_in_row);
        if (rc) return 1;
        CHECK(same(&oe, &he) && stand_in_undecided > 0 && stand_in_calls > 3 * stand_in_undecided - 3);
        for (int i = 0; i < N_REQ; i++) CHECK(ob[i].done && !ob[i].failed && same(&ob[i], &hb[i]));
    }

    /* a stop string: the text before it, finish "stop"; as the engine does */
    if (alone[4].n > 4) {
        char        stop[3] = {alone[4].text[alone[4].n / 2], alone[4].text[alone[4].n / 2 + 1], 0};
        const char *stops[] = {stop, NULL};
        celer_gen_params gp = p;
        gp.stop             = stops;
        gp.max_tokens       = q[4].max_tokens;
        result viab, viae = {0};
        CHECK(celer_batcher_create(&b1, e, &one, &err) == CELER_OK);
        memset(&viab, 0, sizeof viab);
        CHECK(celer_batcher_submit(b1, q[4].ids, q[4].n, &gp, on_text, on_done, &viab, NULL, &err) == CELER_OK);
        for (busy = true; busy;) CHECK(celer_batcher_step(b1, &busy, &err) == CELER_OK);
        celer_batcher_free(b1);
        celer_engine_reset(e);
        CHECK(celer_engine_generate(e, q[4].ids, q[4].n, &gp, on_text, &viae, &viae.stats, &err) == CELER_OK);
        snprintf(viae.finish, sizeof viae.finish, "%s", viae.stats.finish);
        CHECK(!strcmp(viab.finish, "stop") && same(&viab, &viae));
        CHECK(viab.n < alone[4].n && !memcmp(viab.text, alone[4].text, viab.n));
    }
    return 0;
}

/* Stand-ins for decode ahead (argmax_keep of rows, argmax_take, get_rows of the kept ids) over a
 * backend's own argmax and get_rows: the batcher's steps ahead on the CPU. */
enum { AH_MAX = 64 };
static const celer_backend_ops *ah_real;
static int32_t                  ah_set[2][AH_MAX], ah_rows[2], ah_last[AH_MAX], ah_last_n;
static int                      ah_head, ah_n, ah_keeps;

static celer_status ah_keep(celer_backend *be, const float *x, int64_t rows, int64_t n, celer_error *err)
{
    if (ah_n >= 2 || rows < 1 || rows > AH_MAX)
        return celer_fail(err, CELER_ERR_INVALID, "stand-in: a third set kept, or %lld rows", (long long)rows);
    const int s = (ah_head + ah_n) % 2;
    if (ah_real->argmax(be, x, rows, n, ah_set[s], err)) return err->code;
    memcpy(ah_last, ah_set[s], (size_t)rows * sizeof *ah_last);
    ah_rows[s] = ah_last_n = (int32_t)rows, ah_n++, ah_keeps++;
    return CELER_OK;
}

static celer_status ah_take(celer_backend *be, int32_t *ids, celer_error *err)
{
    (void)be;
    if (!ah_n) return celer_fail(err, CELER_ERR_INVALID, "stand-in: nothing kept");
    memcpy(ids, ah_set[ah_head], (size_t)ah_rows[ah_head] * sizeof *ids);
    ah_head = (ah_head + 1) % 2, ah_n--;
    return CELER_OK;
}

static celer_status ah_get_rows(celer_backend *be, const celer_weight *w, const int32_t *ids, int64_t n, float *y,
                                celer_error *err)
{
    if (!ids && (n < 1 || n > ah_last_n)) return celer_fail(err, CELER_ERR_INVALID, "stand-in: %lld kept rows", (long long)n);
    return ah_real->get_rows(be, w, ids ? ids : ah_last, n, y, err);
}

/* The checks, then on a backend without decode ahead (the CPU) again through the stand-ins: the
 * batcher queues each steady step on the picks of the one before (and the engine's generate runs
 * ahead too): every reply as without, every kept set taken. On a GPU its own ops ran ahead. */
static int test_model(celer_engine *e, const char *arch, int vocab)
{
    static request q[N_REQ];
    static result  first[N_REQ], again[N_REQ];
    for (int i = 0; i < N_REQ; i++) {
        q[i].n          = 1 + rnd() % 50;
        q[i].max_tokens = 3 + (int32_t)(rnd() % 30);
        for (size_t k = 0; k < q[i].n; k++) q[i].ids[k] = (int32_t)(rnd() % (uint32_t)vocab);
    }
    if (checks(e, arch, vocab, q, first)) return 1;
    if (e->be->ops->argmax_keep) return 0;
    static celer_backend_ops ahead;
    ah_real = e->be->ops, ahead = *ah_real, ah_keeps = 0;
    ahead.argmax_keep = ah_keep, ahead.argmax_take = ah_take, ahead.get_rows = ah_get_rows;
    e->be->ops = &ahead;
    int rc     = checks(e, arch, vocab, q, again);
    e->be->ops = ah_real;
    if (rc) return 1;
    for (int i = 0; i < N_REQ; i++) {
        if (!same(&again[i], &first[i]))
            fprintf(stderr, "%s: request %d ahead: %zu bytes (%s); step by step %zu (%s)\n", arch, i, again[i].n,
                    again[i].finish, first[i].n, first[i].finish);
        CHECK(same(&again[i], &first[i]));
    }
    CHECK(ah_keeps > N_REQ && ah_n == 0);
    return 0;
}

int main(void) { return on_synth_models("batcher", test_model) != 0; }
