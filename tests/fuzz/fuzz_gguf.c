/* libFuzzer target: the GGUF reader, then every way the engine reads what it accepted
 * (getters, array walks including nested arrays, hyper-parameters). */
#include "formats/gguf.h"
#include "models/model_file.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void walk(const celer_gguf_kv *kv, uint64_t *sink)
{
    const uint8_t *cur = kv->data;
    for (uint64_t i = 0; i < kv->array_len; i++) {
        const uint8_t *e = celer_gguf_array_next(kv, &cur);
        if (kv->array_type == CELER_GGUF_STRING)
            *sink += celer_gguf_read_str(e).len;
        else if (kv->array_type == CELER_GGUF_ARRAY) {
            celer_gguf_kv inner = celer_gguf_nested(e);
            walk(&inner, sink);
        } else
            *sink += (uint64_t)celer_gguf_read_int(e, kv->array_type);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    celer_gguf  g;
    celer_error err;
    if (celer_gguf_parse(&g, data, size, "fuzz", &err) == CELER_OK) {
        uint64_t sink = 0;
        for (uint64_t i = 0; i < g.n_kv; i++) {
            const celer_gguf_kv *kv = &g.kv[i];
            if (kv->type == CELER_GGUF_ARRAY) walk(kv, &sink);
            char key[256];
            size_t n = kv->key.len < sizeof key - 1 ? (size_t)kv->key.len : sizeof key - 1;
            memcpy(key, kv->key.ptr, n);
            key[n] = '\0';
            double d;
            int64_t v;
            celer_gguf_str s;
            (void)celer_gguf_get_f64(&g, key, &d, NULL, &err);
            (void)celer_gguf_get_i64(&g, key, &v, NULL, &err);
            (void)celer_gguf_get_str(&g, key, &s, NULL, &err);
        }
        for (uint64_t i = 0; i < g.n_tensors; i++)
            if (g.tensors[i].n_bytes) sink += g.tensors[i].data[g.tensors[i].n_bytes - 1];
        celer_hparams hp;
        (void)celer_hparams_from_gguf(&g, &hp, &err);
        (void)sink;
    }
    celer_gguf_close(&g);
    return 0;
}
