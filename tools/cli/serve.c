/* celer serve: the OpenAI-compatible HTTP server (src/server/). */
#include "cli.h"

#include "server/server.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void serve_usage(FILE *out)
{
    fprintf(out,
            "usage: celer serve [-m MODEL] [options]\n\n"
            "Serves the model over an OpenAI-compatible HTTP API: GET /health, GET /v1/models,\n"
            "POST /v1/chat/completions, POST /v1/completions, GET /metrics (docs/server.md).\n"
            "Requests from every connection share the decode steps (continuous batching). Stops on\n"
            "SIGINT or SIGTERM.\n\n"
            "options:\n"
            "  -m, --model MODEL     a .gguf file or model directory (default: the default model)\n"
            "      --host ADDR       IPv4 address to listen on (default 127.0.0.1: this machine only)\n"
            "      --port N          TCP port (default 8080; 0: any free port, printed)\n"
            "      --parallel N      sequences decoded together (default 4)\n"
            "  -c, --ctx N           context per sequence in tokens (default: the trained context, at most 4096)\n"
            "      --api-key KEY     require 'Authorization: Bearer KEY' on /v1/ routes\n"
            "      --max-queue N     requests that may wait for a slot before 503 (default 64)\n"
            "      --model-id NAME   the model's name in /v1/models and requests (default: the file name)\n"
            "      --timeout S       close a connection that sends nothing for S seconds (default 30)\n"
            "  -b, --backend B       auto, cpu, cuda or rocm (default auto: the best this build has)\n"
            "  -t, --threads N       CPU threads (default: one per physical core)\n"
            "  -h, --help            show this help\n\n" CLI_EXIT_CODES);
}

int cmd_serve(int argc, char **argv)
{
    enum { O_HOST = 256, O_PORT, O_PARALLEL, O_KEY, O_QUEUE, O_ID, O_TIMEOUT };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},      {"host", required_argument, NULL, O_HOST},
        {"port", required_argument, NULL, O_PORT},    {"parallel", required_argument, NULL, O_PARALLEL},
        {"ctx", required_argument, NULL, 'c'},        {"api-key", required_argument, NULL, O_KEY},
        {"max-queue", required_argument, NULL, O_QUEUE}, {"model-id", required_argument, NULL, O_ID},
        {"threads", required_argument, NULL, 't'},    {"help", no_argument, NULL, 'h'},
        {"timeout", required_argument, NULL, O_TIMEOUT}, {"backend", required_argument, NULL, 'b'},
        {NULL, 0, NULL, 0},
    };
    srv_config c = {.host = "127.0.0.1", .port = 8080, .parallel = 4, .max_queue = 64, .max_body = 8u << 20,
                    .timeout_s = 30};
    long       v;
    int        o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, ":m:c:t:b:h", opts, NULL)) != -1) {
        switch (o) {
        case 'm': c.model = optarg; break;
        case O_HOST: c.host = optarg; break;
        case O_PORT:
            if (!cli_parse_long(optarg, 0, 65535, &v)) return cli_usage_error("serve", "--port wants 0 to 65535, not '%s'", optarg);
            c.port = (int)v;
            break;
        case O_PARALLEL:
            if (!cli_parse_long(optarg, 1, 256, &v)) return cli_usage_error("serve", "--parallel wants 1 to 256, not '%s'", optarg);
            c.parallel = (int)v;
            break;
        case 'c':
            if (!cli_parse_long(optarg, 16, 1 << 24, &v)) return cli_usage_error("serve", "--ctx wants 16 to 16777216, not '%s'", optarg);
            c.n_ctx = v;
            break;
        case O_KEY:
            if (!*optarg) return cli_usage_error("serve", "--api-key is empty");
            c.api_key = optarg;
            break;
        case O_QUEUE:
            if (!cli_parse_long(optarg, 0, 1 << 20, &v)) return cli_usage_error("serve", "--max-queue wants 0 to 1048576, not '%s'", optarg);
            c.max_queue = (int)v;
            break;
        case O_ID: c.model_id = optarg; break;
        case O_TIMEOUT:
            if (!cli_parse_long(optarg, 2, 3600, &v)) return cli_usage_error("serve", "--timeout wants 2 to 3600, not '%s'", optarg);
            c.timeout_s = (int)v;
            break;
        case 't':
            if (!cli_parse_long(optarg, 1, 1024, &v)) return cli_usage_error("serve", "--threads wants 1 to 1024, not '%s'", optarg);
            c.n_threads = (int)v;
            break;
        case 'b':
            if (cli_parse_backend("serve", "--backend", optarg, &c.backend)) return EXIT_BAD_INPUT;
            break;
        case 'h': serve_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("serve", "%s needs a value", argv[optind - 1]);
        default: return cli_usage_error("serve", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc) return cli_usage_error("serve", "unexpected argument '%s'", argv[optind]);
    if (!c.model && !(c.model = cli_default_model())) return EXIT_BAD_INPUT;
    char id[256];
    if (!c.model_id) { /* the file or directory name, without .gguf */
        const char *base = strrchr(c.model, '/');
        base             = base && base[1] ? base + 1 : c.model;
        snprintf(id, sizeof id, "%s", base);
        size_t n = strlen(id);
        while (n > 1 && id[n - 1] == '/') id[--n] = '\0';
        if (n > 5 && !strcmp(id + n - 5, ".gguf")) id[n - 5] = '\0';
        c.model_id = id;
    }
    celer_error err = {0};
    if (srv_run(&c, &err)) return cli_report(&err);
    return EXIT_OK;
}
