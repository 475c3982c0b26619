/* libFuzzer target: the safetensors reader on arbitrary bytes, then every view it hands out
 * (each tensor's first and last byte, lookups by name, metadata). A failure must leave the
 * reader zeroed and say why. Each input is parsed twice: as given, and with its header length
 * folded into the file size, so that mutations reach the JSON checks more often. */
#include "formats/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void run(const uint8_t *data, size_t size)
{
    celer_safetensors st;
    celer_error       err = {0};
    if (celer_safetensors_parse(&st, data, size, "fuzz", &err) != CELER_OK) {
        if (err.code == CELER_OK || !err.msg[0] || st.tensors || st.name) __builtin_trap();
        celer_safetensors_close(&st);
        return;
    }
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < st.n_tensors; i++) {
        const celer_st_tensor *t = &st.tensors[i];
        if (celer_safetensors_find(&st, t->name) != t) __builtin_trap();
        if (t->data < data || (uint64_t)(t->data - data) + t->n_bytes > size) __builtin_trap();
        if (t->n_bytes) sink ^= t->data[0] ^ t->data[t->n_bytes - 1];
        if (t->n_dims > CELER_ST_MAX_DIMS || !celer_st_dtype_bits(t->dtype)) __builtin_trap();
        if (i && strcmp(st.tensors[i - 1].name, t->name) >= 0) __builtin_trap();
    }
    for (uint64_t i = 0; i < st.n_meta; i++)
        if (celer_safetensors_meta(&st, st.meta[i].key) == NULL) __builtin_trap();
    (void)celer_safetensors_find(&st, "model.embed_tokens.weight");
    (void)sink;
    celer_safetensors_close(&st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    run(data, size);
    if (size < 8) return 0;
    uint8_t *copy = malloc(size); /* exactly size bytes, so ASan sees any read past the end */
    if (!copy) return 0;
    memcpy(copy, data, size);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | copy[i];
    n %= (uint64_t)(size - 8) + 1;
    for (int i = 0; i < 8; i++) copy[i] = (uint8_t)(n >> (8 * i));
    run(copy, size);
    free(copy);
    return 0;
}
