/* Chat templates: parse a model's Jinja chat template once, render it many times with the
 * variables transformers' apply_chat_template passes (messages, tools, documents,
 * add_generation_prompt, bos_token, eos_token and extra keyword variables), byte for byte as
 * jinja2 3.1 renders it under transformers' environment (trim_blocks, lstrip_blocks,
 * loopcontrols, the generation tag, its tojson, raise_exception and strftime_now).
 *
 * strftime_now() reads the clock in UTC, or SOURCE_DATE_EPOCH (seconds) when that is set, so
 * that renders can be reproduced. */
#ifndef CELER_CHAT_TEMPLATE_H
#define CELER_CHAT_TEMPLATE_H

#include "celer.h"

#include <cjson/cJSON.h>

typedef struct celer_template celer_template;

/* Parses src[0, len) (UTF-8). name is used in messages ("model.gguf", "t.jinja"). A syntax
 * error or a construct outside celer's subset is CELER_ERR_INVALID naming line:column. */
celer_status celer_template_parse(celer_template **out, const char *src, size_t len, const char *name,
                                  celer_error *err);
void         celer_template_free(celer_template *t);

/* Renders with the variables of the JSON object vars (may be NULL). *out is malloc'd and
 * NUL-terminated (the caller frees); *n is its length. A template error, a raise_exception()
 * or a passed limit (output 16 MiB, 1e6 loop iterations, macro depth 100, memory 256 MiB) is
 * CELER_ERR_INVALID with line:column; out of memory is CELER_ERR_OOM. */
celer_status celer_template_render(const celer_template *t, const cJSON *vars, char **out, size_t *n,
                                   celer_error *err);

/* The variables transformers passes, built as transformers does: messages (a non-empty array
 * of objects; keys whose value is null dropped; reasoning under "reasoning_content",
 * "thinking" or "reasoning" copied to both "thinking" and "reasoning_content"), tools and
 * documents (null when NULL), add_generation_prompt, bos_token / eos_token (absent when NULL),
 * then each member of extra (an object, may be NULL), overriding. *ctx is new; the caller
 * deletes it with cJSON_Delete. */
celer_status celer_chat_context(const cJSON *messages, const cJSON *tools, const cJSON *documents,
                                bool add_generation_prompt, const char *bos_token, const char *eos_token,
                                const cJSON *extra, cJSON **ctx, celer_error *err);

/* For a model without a template: the messages' contents concatenated (string contents, and the
 * text parts of list contents), nothing between them. The caller warns that no template was used. */
celer_status celer_chat_concat(const cJSON *messages, char **out, size_t *n, celer_error *err);

/* Renders the chat template of a GGUF model (tokenizer.chat_template), with bos_token and
 * eos_token the texts of tokenizer.ggml.tokens[bos_token_id / eos_token_id]. A model without a
 * template gets celer_chat_concat and *used_template = false (the caller should warn). */
/* The model's own chat template (GGUF tokenizer.chat_template, or tokenizer_config.json's), or
 * NULL; *n its length. Points into the model file. */
const char *celer_chat_template_source(const celer_model_file *mf, size_t *n);

celer_status celer_chat_apply(const celer_model_file *mf, const cJSON *messages, const cJSON *tools,
                              bool add_generation_prompt, const cJSON *extra_vars, char **out, size_t *n,
                              bool *used_template, celer_error *err);

#endif
