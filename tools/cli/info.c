/* celer info: the host, or a model file. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void info_usage(FILE *out)
{
    fprintf(out, "usage: celer info [-m MODEL | MODEL] [--backend auto|cpu|cuda|rocm] [--tensors] [--json] [--ctx N]\n\n"
                 "Without a model: this machine's CPU, cores, SIMD features and memory, and the GPUs of\n"
                 "this build's GPU backend (vendor, backend, name, architecture, compute units, total,\n"
                 "free and allocatable memory, unified memory); with --backend cuda|rocm, a missing\n"
                 "device or one this build has no code for is an error (exit 3, or 2 with the rebuild\n"
                 "command).\n"
                 "With a model (a .gguf file or a model directory): architecture, hyper-parameters,\n"
                 "weight types, parameter count and the memory it needs, and for each weight type what\n"
                 "loading it onto the backend does: runs it as stored (native), converts it at load\n"
                 "(convert), or refuses it (reject), and how or what to use instead.\n\n"
                 "options:\n"
                 "  -m, --model MODEL  the model to describe\n"
                 "  -b, --backend B    the backend whose decisions to show: cpu (the default), cuda, rocm, or\n"
                 "                     auto: the one loading picks without --backend, the best this build has\n"
                 "  -t, --tensors      also list every tensor (name, type, shape, bytes)\n"
                 "  -j, --json         print JSON instead of text (always includes the tensors)\n"
                 "  -c, --ctx N        context length for the memory estimate (default: the trained\n"
                 "                     context, at most 4096)\n"
                 "  -h, --help         show this help\n\n" CLI_EXIT_CODES);
}

/* ---- GPU devices ---------------------------------------------------------- */

static void device_json(cJSON *o, const celer_device_facts *f)
{
    cJSON_AddStringToObject(o, "backend", f->backend);
    cJSON_AddStringToObject(o, "vendor", f->vendor);
    cJSON_AddStringToObject(o, "name", f->name);
    cJSON_AddStringToObject(o, "arch", f->arch);
    cJSON_AddStringToObject(o, "runtime", f->runtime);
    cJSON_AddNumberToObject(o, "index", f->index);
    cJSON_AddNumberToObject(o, "compute_units", f->compute_units);
    cJSON_AddNumberToObject(o, "warp_size", f->warp_size);
    cJSON_AddNumberToObject(o, "mem_total", (double)f->mem_total);
    cJSON_AddNumberToObject(o, "mem_free", (double)f->mem_free);
    cJSON_AddNumberToObject(o, "mem_allocatable", (double)f->mem_allocatable);
    cJSON_AddBoolToObject(o, "unified_memory", f->unified);
    cJSON_AddStringToObject(o, "unified_memory_source", f->unified_source);
    cJSON_AddStringToObject(o, "built_archs", f->built_archs);
    cJSON_AddStringToObject(o, "matrix_units", f->matrix);
    cJSON_AddStringToObject(o, "blas", f->blas);
    cJSON_AddBoolToObject(o, "supported", f->supported);
    if (!f->supported) cJSON_AddStringToObject(o, "refused", f->why);
}

static void device_text(const celer_device_facts *f)
{
    char a[32], b[32], c[32];
    printf("gpu %-10d %s\n", f->index, f->name);
    printf("  backend      %s (%s, %s)\n", f->backend, f->vendor, f->runtime);
    printf("  arch         %s (this build has code for: %s)\n", f->arch, f->built_archs);
    printf("  compute      %d units, warp %d\n", f->compute_units, f->warp_size);
    printf("  memory       %s total, %s free, %s allocatable\n", cli_bytes(f->mem_total, a, sizeof a),
           cli_bytes(f->mem_free, b, sizeof b), cli_bytes(f->mem_allocatable, c, sizeof c));
    printf("  unified      %s (%s)\n", f->unified ? "yes" : "no", f->unified_source);
    if (f->matrix[0]) printf("  matrix       %s\n", f->matrix);
    if (f->blas[0]) printf("  blas         %s\n", f->blas);
    if (!f->supported) printf("  refused      %s\n", f->why);
}

/* The GPU devices of this build's GPU backend. With want (a GPU backend named by --backend), a
 * backend this build lacks, a missing device or one the build cannot run is an error (exit 2 or
 * 3); without, it is a line of the report. */
static int print_devices(cJSON *json, const char *want)
{
    celer_device_facts f;
    celer_error        err = {0};
    celer_status       st  = celer_device_query(0, &f, &err);
    cJSON             *arr = json ? cJSON_AddArrayToObject(json, "gpus") : NULL;
    if (st) {
        if (want) return cli_report(&err);
        if (json) cJSON_AddStringToObject(json, "gpu_error", err.msg);
        else printf("gpu            none: %s\n", err.msg);
        return EXIT_OK;
    }
    if (want && strcmp(want, f.backend)) {
        err.code = CELER_ERR_UNSUPPORTED;
        snprintf(err.msg, sizeof err.msg, "backend '%s' is not in this build (it has: cpu, %s)", want, f.backend);
        return cli_report(&err);
    }
    for (int i = 0; i < f.count; i++) {
        if (i && celer_device_query(i, &f, &err)) return cli_report(&err);
        if (json) {
            cJSON *d = cJSON_CreateObject();
            device_json(d, &f);
            cJSON_AddItemToArray(arr, d);
        }
        else device_text(&f);
    }
    if (want && !f.supported) {
        err.code = CELER_ERR_UNSUPPORTED;
        snprintf(err.msg, sizeof err.msg, "%s", f.why);
        return cli_report(&err);
    }
    return EXIT_OK;
}

/* ---- host -------------------------------------------------------------- */

static int print_host(bool json, const char *want)
{
    celer_host_info h;
    celer_host_info_read(&h);
    static const struct {
        const char *name;
        size_t      off;
    } feats[] = {
#define F(x) {#x, offsetof(celer_host_info, x)}
        F(sse42), F(avx), F(avx2), F(fma), F(f16c), F(avx512f), F(avx512bw), F(avx512vl), F(avx512_vnni),
        F(avx512_bf16), F(avx_vnni), F(amx_tile), F(amx_int8), F(amx_bf16), F(neon), F(dotprod), F(i8mm), F(sve),
#undef F
    };
    if (json) {
        cJSON *o = cJSON_CreateObject(), *f = cJSON_CreateArray();
        cJSON_AddStringToObject(o, "cpu", h.cpu_model);
        cJSON_AddStringToObject(o, "arch", h.arch);
        cJSON_AddNumberToObject(o, "logical_cpus", h.logical_cpus);
        cJSON_AddNumberToObject(o, "physical_cores", h.physical_cores);
        for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
            if (*(const bool *)((const char *)&h + feats[i].off)) cJSON_AddItemToArray(f, cJSON_CreateString(feats[i].name));
        cJSON_AddItemToObject(o, "simd", f);
        cJSON_AddNumberToObject(o, "mem_total", (double)h.mem_total);
        cJSON_AddNumberToObject(o, "mem_available", (double)h.mem_available);
        int rc = print_devices(o, want);
        char *s = cJSON_Print(o);
        printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
        return rc;
    }
    char a[32], b[32];
    printf("cpu            %s (%s)\n", h.cpu_model[0] ? h.cpu_model : "unknown", h.arch);
    if (h.physical_cores)
        printf("cores          %d logical, %d physical\n", h.logical_cpus, h.physical_cores);
    else
        printf("cores          %d logical\n", h.logical_cpus);
    printf("simd          ");
    int any = 0;
    for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
        if (*(const bool *)((const char *)&h + feats[i].off)) printf(" %s", feats[i].name), any = 1;
    printf("%s\n", any ? "" : " none detected");
    printf("memory         %s total, %s available\n", cli_bytes(h.mem_total, a, sizeof a),
           cli_bytes(h.mem_available, b, sizeof b));
    return print_devices(NULL, want);
}

/* ---- model ------------------------------------------------------------- */

typedef struct {
    const char *type;
    uint64_t    count, bytes, elems;
} type_total;

/* Totals per storage type, in order of first appearance; returns how many. */
static size_t sum_types(const celer_model_file *mf, type_total *out, size_t cap)
{
    size_t n = 0;
    for (uint64_t i = 0; i < celer_model_file_n_tensors(mf); i++) {
        const celer_tensor_desc *t = celer_model_file_tensor(mf, i);
        size_t                   k = 0;
        while (k < n && strcmp(out[k].type, t->type)) k++;
        if (k == n) {
            if (n == cap) continue;
            out[n++] = (type_total){.type = t->type};
        }
        out[k].count++, out[k].bytes += t->n_bytes, out[k].elems += t->n_elems;
    }
    return n;
}

static cJSON *shape_json(const celer_tensor_desc *t)
{
    cJSON *a = cJSON_CreateArray();
    for (int d = 0; d < t->n_dims; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)t->shape[d]));
    return a;
}

static void print_model_json(const char *path, const celer_model_file *mf, const type_total *tt, size_t n_types,
                             uint64_t params, const celer_memory_estimate *mem, const char *backend)
{
    const celer_hparams *hp = celer_model_file_hparams(mf);
    cJSON               *o  = cJSON_CreateObject(), *h = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddStringToObject(o, "format", celer_model_file_format(mf));
    cJSON_AddStringToObject(o, "architecture", hp->arch);
    cJSON_AddStringToObject(o, "name", hp->name);
#define H(x) cJSON_AddNumberToObject(h, #x, (double)hp->x)
    H(n_layer), H(n_embd), H(n_head), H(n_head_kv), H(head_dim_k), H(head_dim_v), H(n_ff), H(n_vocab);
    H(n_ctx_train), H(n_expert), H(n_expert_used), H(n_ff_expert), H(sliding_window), H(rope_theta), H(norm_eps);
#undef H
    cJSON_AddItemToObject(o, "hparams", h);
    cJSON_AddBoolToObject(o, "chat_template", celer_model_file_has_chat_template(mf));
    cJSON_AddNumberToObject(o, "n_params", (double)params);
    cJSON *types = cJSON_CreateObject();
    for (size_t i = 0; i < n_types; i++) {
        cJSON *t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "count", (double)tt[i].count);
        cJSON_AddNumberToObject(t, "bytes", (double)tt[i].bytes);
        cJSON_AddNumberToObject(t, "params", (double)tt[i].elems);
        char             detail[256];
        celer_capability cap = celer_backend_capability(backend, tt[i].type, detail, sizeof detail);
        cJSON           *c   = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "decision", celer_capability_name(cap));
        cJSON_AddStringToObject(c, "detail", detail);
        cJSON_AddItemToObject(t, backend, c);
        cJSON_AddItemToObject(types, tt[i].type, t);
    }
    cJSON_AddItemToObject(o, "types", types);
    cJSON *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "n_ctx", (double)mem->n_ctx);
    cJSON_AddNumberToObject(m, "weights", (double)mem->weights);
    cJSON_AddNumberToObject(m, "kv_cache", (double)mem->kv_cache);
    cJSON_AddNumberToObject(m, "scratch", (double)mem->scratch);
    cJSON_AddNumberToObject(m, "total", (double)mem->total);
    cJSON_AddItemToObject(o, "memory", m);
    cJSON *ts = cJSON_CreateArray();
    for (uint64_t i = 0; i < celer_model_file_n_tensors(mf); i++) {
        const celer_tensor_desc *d = celer_model_file_tensor(mf, i);
        cJSON                   *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "name", d->name);
        cJSON_AddStringToObject(t, "type", d->type);
        cJSON_AddItemToObject(t, "shape", shape_json(d));
        cJSON_AddNumberToObject(t, "bytes", (double)d->n_bytes);
        cJSON_AddItemToArray(ts, t);
    }
    cJSON_AddItemToObject(o, "tensors", ts);
    char *s = cJSON_Print(o);
    printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

static void print_model_text(const char *path, const celer_model_file *mf, const type_total *tt, size_t n_types,
                             uint64_t params, const celer_memory_estimate *mem, bool tensors, const char *backend)
{
    const celer_hparams *hp = celer_model_file_hparams(mf);
    char                 a[32], b[32], c[32], d[32];
    printf("model          %s\n", path);
    printf("format         %s\n", celer_model_file_format(mf));
    printf("architecture   %s\n", hp->arch);
    if (hp->name[0]) printf("name           %s\n", hp->name);
    printf("layers         %lld\n", (long long)hp->n_layer);
    printf("embedding      %lld\n", (long long)hp->n_embd);
    printf("heads          %lld (kv %lld), head dim %lld", (long long)hp->n_head, (long long)hp->n_head_kv,
           (long long)hp->head_dim_k);
    if (hp->head_dim_v != hp->head_dim_k) printf(" (v %lld)", (long long)hp->head_dim_v);
    printf("\nfeed-forward   %lld\n", (long long)hp->n_ff);
    if (hp->n_expert)
        printf("experts        %lld, %lld used per token, width %lld\n", (long long)hp->n_expert,
               (long long)hp->n_expert_used, (long long)hp->n_ff_expert);
    printf("vocabulary     %lld\n", (long long)hp->n_vocab);
    printf("context        %lld (trained)\n", (long long)hp->n_ctx_train);
    if (hp->sliding_window) printf("sliding window %lld\n", (long long)hp->sliding_window);
    printf("rope theta     %g\n", hp->rope_theta);
    printf("norm epsilon   %g\n", hp->norm_eps);
    printf("chat template  %s\n", celer_model_file_has_chat_template(mf) ? "yes" : "no");
    printf("tensors        %llu\n", (unsigned long long)celer_model_file_n_tensors(mf));
    for (size_t i = 0; i < n_types; i++) {
        char             detail[256];
        celer_capability cap = celer_backend_capability(backend, tt[i].type, detail, sizeof detail);
        printf("  %-12s %5llu tensors  %10s  %6.2f%% of parameters  %s: %s (%s)\n", tt[i].type,
               (unsigned long long)tt[i].count, cli_bytes(tt[i].bytes, a, sizeof a),
               params ? 100.0 * (double)tt[i].elems / (double)params : 0.0, backend, celer_capability_name(cap),
               detail);
    }
    printf("parameters     %.1f M\n", (double)params / 1e6);
    printf("weights        %s (%.2f bits per parameter)\n", cli_bytes(mem->weights, a, sizeof a),
           params ? 8.0 * (double)mem->weights / (double)params : 0.0);
    printf("memory         about %s at %lld tokens of context: weights %s + kv cache %s + scratch %s\n",
           cli_bytes(mem->total, a, sizeof a), (long long)mem->n_ctx, cli_bytes(mem->weights, b, sizeof b),
           cli_bytes(mem->kv_cache, c, sizeof c), cli_bytes(mem->scratch, d, sizeof d));
    if (!tensors) return;
    printf("\n%-48s %-8s %-24s %s\n", "tensor", "type", "shape", "bytes");
    for (uint64_t i = 0; i < celer_model_file_n_tensors(mf); i++) {
        const celer_tensor_desc *t = celer_model_file_tensor(mf, i);
        char                     shape[96];
        int                      o = 0;
        for (int k = 0; k < t->n_dims && o < (int)sizeof shape; k++)
            o += snprintf(shape + o, sizeof shape - (size_t)o, "%s%llu", k ? " x " : "", (unsigned long long)t->shape[k]);
        printf("%-48s %-8s %-24s %llu\n", t->name, t->type, shape, (unsigned long long)t->n_bytes);
    }
}

static int print_model(const char *path, bool json, bool tensors, long long ctx, const char *backend)
{
    celer_error       err = {0};
    celer_model_file *mf  = NULL;
    if (celer_model_file_open(&mf, path, &err) != CELER_OK) return cli_report(&err);
    type_total tt[64];
    size_t     n_types = sum_types(mf, tt, 64);
    uint64_t   params  = 0;
    for (size_t i = 0; i < n_types; i++) params += tt[i].elems;
    celer_memory_estimate mem;
    celer_model_file_estimate_memory(mf, ctx > 0 ? ctx : celer_model_file_default_ctx(mf), &mem);
    if (json)
        print_model_json(path, mf, tt, n_types, params, &mem, backend);
    else
        print_model_text(path, mf, tt, n_types, params, &mem, tensors, backend);
    celer_model_file_close(mf);
    return EXIT_OK;
}

int cmd_info(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'}, {"tensors", no_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},        {"ctx", required_argument, NULL, 'c'},
        {"backend", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
        {0},
    };
    const char *model = NULL, *backend = "cpu"; /* NULL: auto */
    bool        json = false, tensors = false;
    long long   ctx = 0;
    int         c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":m:b:tjc:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'b':
            if (cli_parse_backend("info", "--backend", optarg, &backend)) return EXIT_BAD_INPUT;
            break;
        case 't': tensors = true; break;
        case 'j': json = true; break;
        case 'c': {
            char *end;
            ctx = strtoll(optarg, &end, 10);
            if (*end || ctx <= 0 || ctx > (1ll << 30))
                return cli_usage_error("info", "--ctx wants a positive number of tokens, got '%s'", optarg);
            break;
        }
        case 'h': info_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("info", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("info", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) {
        if (model || optind + 1 < argc) return cli_usage_error("info", "give one model, not '%s'", argv[argc - 1]);
        model = argv[optind];
    }
    if (!model) /* the host, and the devices of the GPU backend named (or, with auto, any) */
        return print_host(json, backend && strcmp(backend, "cpu") ? backend : NULL);
    char picked[32];
    if (!backend) { /* auto: the backend celer_engine_create would pick */
        celer_error err = {0};
        if (celer_backend_probe(NULL, picked, sizeof picked, &err)) return cli_report(&err);
        backend = picked;
    }
    return print_model(model, json, tensors, ctx, backend);
}
