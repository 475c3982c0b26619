/* dump_ggml_types: prints celer's GGML type table, one known type a line:
 *     id name block_elems block_bytes
 * for tests/reference/test_ggml_types.py to compare with gguf-py. */
#include "quant/ggml_types.h"

#include <stdio.h>

int main(void)
{
    for (uint32_t i = 0; i < CELER_GGML_TYPE_LIMIT; i++) {
        const celer_ggml_type_info *t = celer_ggml_type_get(i);
        if (t) printf("%u %s %u %u\n", i, t->name, t->block_elems, t->block_bytes);
    }
    return 0;
}
