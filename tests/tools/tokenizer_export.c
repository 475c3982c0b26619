/* tokenizer_export: writes a GGUF model's tokenizer as Hugging Face files, for
 * tests/reference/test_tokenizer_export.py.
 *   tokenizer_export MODEL.gguf OUT_DIR
 * writes OUT_DIR/tokenizer.json and OUT_DIR/tokenizer_config.json (OUT_DIR must exist).
 * Exit 0 when written; otherwise celer's one-line message on stderr and the exit code of the
 * status (2: bad input, including an unsupported tokenizer or an unwritable
 * directory; 3: out of memory). */
#include <stdio.h>

#include "celer.h"
#include "tokenizer/export_json.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: tokenizer_export MODEL.gguf OUT_DIR\n");
        return 2;
    }
    celer_error       err = {0};
    celer_model_file *mf  = NULL;
    celer_status      st  = celer_model_file_open(&mf, argv[1], &err);
    if (!st) st = celer_tokenizer_write_hf_gguf(mf, argv[2], &err);
    celer_model_file_close(mf);
    if (st) {
        fprintf(stderr, "%s\n", err.msg);
        return celer_status_exit_code(st);
    }
    return 0;
}
