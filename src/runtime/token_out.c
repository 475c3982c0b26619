/* Sampled tokens to text and to the end of a generation (token_out.h). */
#include "runtime/token_out.h"

#include "core/error.h"

celer_status celer_token_out_init(celer_token_out *o, const celer_engine *e, const celer_gen_params *p,
                                  celer_error *err)
{
    o->sf = (celer_stop_filter){.stop = p->stop};
    celer_detok_init(&o->dt, e->tok);
    return celer_sampler_init(&o->sm, &p->sampling, (int32_t)e->model.hp.n_vocab, err);
}

void celer_token_out_free(celer_token_out *o)
{
    celer_sampler_free(&o->sm);
    celer_detok_free(&o->dt);
    celer_stop_free(&o->sf);
}

celer_status celer_token_out_take(celer_token_out *o, const celer_engine *e, int32_t id, bool ignore_eos,
                                  celer_text_fn on_text, void *user, const char **finish, celer_error *err)
{
    *finish = "stop";
    if (!ignore_eos && celer_engine_is_eog(e, id)) return CELER_OK;
    const char *text;
    size_t      n;
    bool        go = true, oom = false;
    if (celer_detok_push(&o->dt, id, &text, &n, err)) return err->code;
    if (n) go = celer_stop_push(&o->sf, text, n, on_text, user, &oom);
    if (oom) return celer_fail(err, CELER_ERR_OOM, "generate: out of memory for the text held for the stop strings");
    *finish = o->sf.stopped ? "stop" : !go ? "callback" : NULL;
    return CELER_OK;
}

celer_status celer_token_out_end(celer_token_out *o, celer_text_fn on_text, void *user, celer_error *err)
{
    if (o->sf.stopped) return CELER_OK;
    const char *text;
    size_t      n;
    if (celer_detok_flush(&o->dt, &text, &n, err)) return err->code;
    if (n) celer_stop_push(&o->sf, text, n, on_text, user, NULL);
    celer_stop_flush(&o->sf, on_text, user);
    return CELER_OK;
}
