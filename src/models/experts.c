/* A MoE layer's stacked experts onto the backend: the stacked tensor is loaded once, as one
 * weight, and each expert is a view of its rows (one allocation per projection, so one packed
 * buffer with huge pages on the CPU and one upload on a GPU). Where the backend cannot cut its
 * arrangement at an expert's rows, each expert is loaded on its own from its slice of the file. */
#include "models/model.h"

#include "core/error.h"

#include <string.h>

/* Rows row0 .. row0 + rows of a host weight as stored (a GGUF type, or an MLX format's three
 * arrays, each sliced alike). */
static celer_weight host_slice(const celer_weight *w, int64_t row0, int64_t rows)
{
    celer_weight s = *w;
    s.rows         = rows;
    if (w->type == CELER_WEIGHT_MLX) {
        s.mlx_data = celer_mlx_quant_data_rows(&w->mlx_data, w->rows, row0, rows);
        s.mlx.rows = rows;
        s.data     = s.mlx_data.weight;
        return s;
    }
    const celer_ggml_type_info *ti = celer_ggml_type_get(w->type);
    s.data = (const char *)w->data + (size_t)row0 * (size_t)(w->cols / ti->block_elems) * ti->block_bytes;
    return s;
}

celer_status celer_load_experts(celer_backend *be, const celer_weight *stacked, int64_t n, celer_weight *experts,
                                celer_error *err)
{
    int64_t      rows = stacked->rows / n;
    celer_weight all  = *stacked;
    if (be->ops->weight_load(be, &all, err)) return err->code;
    for (int64_t e = 0; e < n; e++) {
        celer_status st = be->ops->weight_view(be, &all, e * rows, rows, &experts[e], err);
        if (st == CELER_ERR_UNSUPPORTED) { /* on their own; what the whole load took stays with the backend */
            experts[e] = host_slice(stacked, e * rows, rows);
            st         = be->ops->weight_load(be, &experts[e], err);
        }
        if (st) return st;
    }
    return CELER_OK;
}
