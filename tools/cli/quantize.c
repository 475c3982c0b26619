/* celer quantize: a Hugging Face checkpoint or a GGUF file → an MLX-format model directory. */
#include "cli.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void quantize_usage(FILE *out)
{
    fprintf(out,
            "usage: celer quantize IN OUT [--mode affine|mxfp4|mxfp8|nvfp4] [--bits B] [--group-size G]\n"
            "                      [--dtype bfloat16|float16|float32] [--threads N]\n\n"
            "Writes the model IN (an unquantized Hugging Face directory, a Hugging Face id in its cache,\n"
            "or a GGUF file of an architecture celer runs: llama, qwen2, qwen3, gemma3, qwen3moe,\n"
            "qwen2moe) as the MLX model directory OUT, as mlx_lm.convert -q would: every linear and\n"
            "embedding weight quantized (a mixture's experts stacked as mlx-lm stacks them), the\n"
            "same tensor bytes, config.json with its quantization block, and the tokenizer (copied from a\n"
            "directory, rebuilt as tokenizer.json from a GGUF file). mlx-lm and celer both load OUT.\n"
            "OUT must not exist; it appears only once complete.\n\n"
            "options:\n"
            "  --mode M          affine (default), mxfp4, mxfp8 or nvfp4\n"
            "  --bits B          affine: 2, 3, 4 (default), 5, 6 or 8; the fp modes have theirs (4, 8, 4)\n"
            "  --group-size G    affine: 32, 64 (default) or 128; mxfp4, mxfp8: 32; nvfp4: 16\n"
            "  --dtype D         of the scales, biases and unquantized tensors: bfloat16, float16 or\n"
            "                    float32 (default: config.json's torch_dtype; bfloat16 for a GGUF file)\n"
            "  -t, --threads N   threads (default: one per physical core)\n"
            "  -h, --help        show this help\n");
}

static bool parse_int(const char *s, long lo, long hi, int *v)
{
    char *end;
    long  x = strtol(s, &end, 10);
    if (end == s || *end || x < lo || x > hi) return false;
    *v = (int)x;
    return true;
}

int cmd_quantize(int argc, char **argv)
{
    enum { O_MODE = 256, O_BITS, O_GROUP, O_DTYPE };
    static const struct option opts[] = {
        {"mode", required_argument, NULL, O_MODE},        {"bits", required_argument, NULL, O_BITS},
        {"group-size", required_argument, NULL, O_GROUP}, {"dtype", required_argument, NULL, O_DTYPE},
        {"threads", required_argument, NULL, 't'},        {"help", no_argument, NULL, 'h'},
        {0},
    };
    celer_quantize_params p = {0};
    int                   c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":t:h", opts, NULL)) != -1) {
        switch (c) {
        case O_MODE: p.mode = optarg; break;
        case O_DTYPE: p.dtype = optarg; break;
        case O_BITS:
            if (!parse_int(optarg, 1, 64, &p.bits))
                return cli_usage_error("quantize", "--bits wants 2, 3, 4, 5, 6 or 8, got '%s'", optarg);
            break;
        case O_GROUP:
            if (!parse_int(optarg, 1, 1 << 20, &p.group_size))
                return cli_usage_error("quantize", "--group-size wants 32, 64 or 128, got '%s'", optarg);
            break;
        case 't':
            if (!parse_int(optarg, 1, 4096, &p.n_threads))
                return cli_usage_error("quantize", "--threads wants a whole number from 1 to 4096, got '%s'", optarg);
            break;
        case 'h': quantize_usage(stdout); return EXIT_OK;
        case ':': return cli_usage_error("quantize", "option %s needs a value", argv[optind - 1]);
        default: return cli_usage_error("quantize", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (argc - optind != 2)
        return cli_usage_error("quantize", argc - optind < 2 ? "give the input model and the output directory"
                                                              : "unexpected argument '%s'",
                               argv[argc - 1]);
    const char    *in = argv[optind], *out = argv[optind + 1];
    cli_progress ps;
    cli_progress_start(&ps, "quantize", out);
    p.progress      = cli_progress_show;
    p.user          = &ps;
    celer_error err = {0};
    if (celer_quantize_model(in, out, &p, &err)) {
        cli_progress_end(&ps);
        return cli_report(&err);
    }
    fprintf(stderr, "celer quantize: wrote %s (%s, from %s) in %.1f s\n", out, p.mode ? p.mode : "affine", in,
            cli_now_s() - ps.t0);
    return EXIT_OK;
}
