/* Writing a celer tokenizer as Hugging Face files: DIR/tokenizer.json (the `tokenizers` library's
 * serialization) and DIR/tokenizer_config.json (transformers' settings), which
 * `transformers.AutoTokenizer.from_pretrained(DIR)` and `tokenizers.Tokenizer.from_file` load
 * and which tokenize as celer does. What an MLX model directory carries for mlx-lm.
 *
 * Supported: the tokenizers celer builds from GGUF metadata, i.e. tokenizer.ggml.model "gpt2"
 * (byte-level BPE with any pre-tokenizer celer knows: gpt-2, smollm, llama-bpe, qwen2, tekken,
 * gpt-4o and their aliases) and "llama" (SentencePiece BPE with byte fallback: the Llama,
 * Gemma and Phi-3 variants). Anything else is CELER_ERR_UNSUPPORTED naming it. */
#ifndef CELER_TOKENIZER_EXPORT_JSON_H
#define CELER_TOKENIZER_EXPORT_JSON_H

#include "celer.h"

/* Writes DIR/tokenizer.json and DIR/tokenizer_config.json for tok, each through a temporary file
 * renamed into place. chat_template (NUL-terminated, may be NULL) becomes "chat_template";
 * model_max_length > 0 becomes "model_max_length" (else it is left out). dir must exist.
 * CELER_ERR_UNSUPPORTED for a tokenizer that cannot be written exactly (one celer loaded from a
 * tokenizer.json with a split pattern it did not keep, or a token that is not valid UTF-8 or
 * holds a NUL byte); CELER_ERR_IO naming the file. */
celer_status celer_tokenizer_write_hf(const celer_tokenizer *tok, const char *chat_template, int64_t model_max_length,
                                      const char *dir, celer_error *err);

/* The same for a GGUF model file: builds its tokenizer, takes tokenizer.chat_template and
 * <arch>.context_length from its metadata, and writes the two files. A tokenizer.ggml.model
 * other than "gpt2" or "llama", or a model directory, is CELER_ERR_UNSUPPORTED. */
celer_status celer_tokenizer_write_hf_gguf(const celer_model_file *mf, const char *dir, celer_error *err);

#endif
