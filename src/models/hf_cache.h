/* Models another tool downloaded: the Hugging Face hub cache, where "ORG/NAME" lives in
 * models--ORG--NAME/snapshots/REVISION/ (refs/main names the revision). */
#ifndef CELER_MODELS_HF_CACHE_H
#define CELER_MODELS_HF_CACHE_H

#include "celer.h"

#include <stddef.h>

/* The cache folder: $HF_HUB_CACHE, else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub,
 * else ~/.cache/huggingface/hub. */
void celer_hf_cache_dir(char *out, size_t cap);

/* Whether name looks like a hub model id ("ORG/NAME": one slash, no path punctuation). */
bool celer_hf_cache_is_id(const char *name);

/* The snapshot folder of model id name in the cache, into out: the revision refs/main names,
 * else the only snapshot. CELER_ERR_IO naming the cache folder and the fix when it is not
 * there; CELER_ERR_INVALID when several snapshots and no refs/main leave the choice open. */
celer_status celer_hf_cache_find(const char *name, char *out, size_t cap, celer_error *err);

#endif
