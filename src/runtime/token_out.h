/* What a sampled token becomes, the same for a single generate and for the batcher: the end of
 * the generation it causes (an end-of-generation token, a stop string, the caller's callback
 * asking to stop) or text, through the detokenizer (whole UTF-8 only) and the stop strings
 * (text held while it could start one). */
#ifndef CELER_RUNTIME_TOKEN_OUT_H
#define CELER_RUNTIME_TOKEN_OUT_H

#include "runtime/engine_impl.h"
#include "runtime/sampler.h"
#include "runtime/stop_filter.h"

typedef struct {
    celer_sampler     sm;
    celer_detok       dt;
    celer_stop_filter sf;
} celer_token_out;

/* For the generation parameters p (sampling, stop strings: not copied, they must outlive o); o
 * zeroed first. On failure o is still to be freed. */
celer_status celer_token_out_init(celer_token_out *o, const celer_engine *e, const celer_gen_params *p,
                                  celer_error *err);
void         celer_token_out_free(celer_token_out *o);
/* Token id, sampled, taken: *finish NULL to go on, else the reason it ends the generation:
 * "stop" (end-of-generation token unless ignore_eos; a stop string) or "callback" (on_text
 * returned false). A detokenizer failure or memory running out is an error (and *finish "stop"). */
celer_status celer_token_out_take(celer_token_out *o, const celer_engine *e, int32_t id, bool ignore_eos,
                                  celer_text_fn on_text, void *user, const char **finish, celer_error *err);
/* The end of the stream: what the detokenizer and the stop filter still hold is text (unless a
 * stop string ended it). */
celer_status celer_token_out_end(celer_token_out *o, celer_text_fn on_text, void *user, celer_error *err);

#endif
