"""Writes tests/data/mlx/<model>.json: the mlx-lm reference's greedy continuations and per-position
top-1 / top-2 logits on the real models and the tiny random ones, for test_mlx_parity.py (which
needs no mlx).

For each model and prompt: the prompt text (chat prompts formatted by hand in the model's own
format) is tokenized by celer (`celer tokenize --jsonl`), so the ids are celer's; the reference
(mlx_ref.py: mlx-lm on the GGUF's dequantized weights, float32, CPU) generates N_GEN tokens
greedily with its KV cache, with no end-of-turn stop; then one uncached forward over prompt +
continuation gives, for every position, the top-1 id, its logit and the margin to the top-2.

The tiny models (tiny_models.py: qwen3, qwen2, qwen2 with YaRN, llama, gemma3, qwen3moe, qwen2moe;
random float32 weights) have no text: their prompts are random token ids, and the reference is
mlx-lm's Model of the architecture built from the generator's arrays. The GGUF file that celer runs
is written to a temporary folder and pinned by its sha256; the reference read back from that file
(mlx_ref.Reference) must give bit-identical logits, which checks that the file holds the same model.

Mixture-of-experts models (tiny-qwen3moe, tiny-qwen2moe and their directories) also get the
router's choices: for every position of prompt + continuation and every MoE layer, the expert ids
mlx-lm's sparse block used (sorted), and the margin between the router's k-th and (k+1)-th logits
(the log of the ratio of their probabilities); a choice is decided when its margin is at least
ROUTER_THRESHOLD (docs/correctness.md). test_moe_router.py compares them with celer's.

The round trips (roundtrip.py: SmolLM2 in affine 4-bit g64, 8-bit g32, 3-bit g64, mxfp4, mxfp8,
nvfp4) are mlx-lm on what mlx_lm.convert writes from SmolLM2's bfloat16 Hugging Face form, with
SmolLM2's prompts; before the reference runs, `celer quantize` of the same source must write the
same tensors, and mlx-lm must read celer's directory as its own (chat prompt ids, logits). The
fixture is pinned by the GGUF's sha256 and by the tensors' digest.

Run by `make check-reference` (needs tests/requirements-reference.txt). Options:
    --models NAME,...   only these (default: all in MODELS; `make check-reference REF_MODELS=...`)
    --out DIR           default tests/data/mlx
The celer binary is $CELER_BIN or build/celer; models come from scripts/fetch-model.
"""

import argparse
import datetime
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlx_ref  # noqa: E402
import roundtrip  # noqa: E402
import router_check  # noqa: E402
import tiny_models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N_GEN = 32
# nats between the router's k-th and (k+1)-th logits (log p_k / p_k+1) for a choice to be decided:
# p_k at least 1% above p_k+1, 5 times the largest top-1 logit error celer has shown on any tiny
# model (2.0e-3, affine 4-bit) and 150 times that on float weights (docs/correctness.md)
ROUTER_THRESHOLD = 0.01

CHAT_MESSAGES = [
    "What is the capital of France?",
    "Write a Python function that returns the factorial of n.",
    "Explain in one sentence why the sky is blue.",
    "List three primary colors.",
    "Translate 'good morning' into Spanish.",
    "What is 12 times 7?",
]
PLAIN = [
    "The quick brown fox jumps over the lazy dog. The quick brown fox",
    'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n',
    "Once upon a time, in a small village by the sea, there lived",
    "1, 2, 3, 5, 8, 13, 21,",
]
GEMMA_PLAIN = PLAIN + [
    "The capital of France is",
    "Water boils at a temperature of",
    "import numpy as np\n\n# Compute the mean of a list of numbers\n",
]

# A prompt well past gemma3's 512-token sliding window (about 200 positions beyond it), so that
# the sliding layers' mask matters (the BOS token leaves their window): a numbered list the
# model continues by copying.
LONG_ITEMS = [
    "apples grow on trees in orchards", "rivers carry water to the sea", "the moon circles the earth",
    "bread is baked in an oven", "bees make honey from nectar", "snow falls when it is cold",
    "trains run on steel rails", "owls hunt at night", "the sun rises in the east",
    "violins have four strings", "glaciers move very slowly", "copper conducts electricity",
    "penguins cannot fly", "coffee beans are roasted", "volcanoes can erupt lava",
    "maps show roads and towns", "whales breathe air", "clocks measure time",
    "salt dissolves in water", "spiders spin webs", "the heart pumps blood",
    "wheat is ground into flour", "lighthouses guide ships", "tides follow the moon",
    "paper is made from wood", "foxes live in dens", "rainbows need sunlight and rain",
    "bicycles have two wheels", "diamonds are very hard", "frogs lay eggs in ponds",
    "thunder follows lightning", "cotton is spun into thread", "eagles build large nests",
    "mirrors reflect light", "cheese is made from milk", "deserts get little rain",
    "ants live in colonies", "glass is made from sand", "the earth orbits the sun",
    "kites fly in the wind",
]
LONG_TEXT = "Facts, one per line:\n" + "".join(f"{i + 1}. {s}.\n" for i, s in enumerate(LONG_ITEMS)) + \
    "The same facts again:\n" + "".join(f"{i + 1}. {s}.\n" for i, s in enumerate(LONG_ITEMS)) + \
    "And once more:\n" + "".join(f"{i + 1}. {s}.\n" for i, s in enumerate(LONG_ITEMS[:8])) + "9."


def chatml(system, user):
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


def gemma_turn(user):
    return f"<start_of_turn>user\n{user}<end_of_turn>\n<start_of_turn>model\n"


SMOL_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
QWEN_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

# name → list of (prompt name, text, slow); slow prompts run only with CELER_PARITY_SLOW=1.
MODELS = {
    "smollm2-135m": [(f"chat{i}", chatml(SMOL_SYSTEM, m), False) for i, m in enumerate(CHAT_MESSAGES)]
    + [(f"plain{i}", t, False) for i, t in enumerate(PLAIN)],
    "qwen2.5-coder-0.5b": [(f"chat{i}", chatml(QWEN_SYSTEM, m), False) for i, m in enumerate(CHAT_MESSAGES)]
    + [(f"plain{i}", t, False) for i, t in enumerate(PLAIN)],
    "gemma3-270m": [(f"chat{i}", gemma_turn(m), False) for i, m in enumerate(CHAT_MESSAGES[:3])]
    + [(f"plain{i}", t, False) for i, t in enumerate(GEMMA_PLAIN)]
    + [("long", LONG_TEXT, True)],
}
TINY = list(tiny_models.MODELS)  # prompts: tiny_models.prompts(name)
DIRS = list(tiny_models.DIRS)  # the tiny models as model directories; prompts: their base model's
RT = list(roundtrip.ROUNDTRIPS)  # SmolLM2 through mlx_lm.convert and celer quantize; prompts: SmolLM2's


def fetch_model(name):
    out = subprocess.run([os.path.join(ROOT, "scripts", "fetch-model"), name], check=True, capture_output=True,
                         text=True)
    return out.stdout.strip().splitlines()[-1]


def tokenize(celer, model, texts):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        for t in texts:
            f.write(json.dumps(t) + "\n")
        path = f.name
    try:
        out = subprocess.run([celer, "tokenize", "-m", model, "--jsonl", path], check=True, capture_output=True,
                             text=True)
    finally:
        os.unlink(path)
    ids = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    if len(ids) != len(texts):
        raise RuntimeError(f"celer tokenize gave {len(ids)} lines for {len(texts)} prompts")
    return ids


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def convert(src, dst, q):
    """mlx_lm.convert(src → dst, quantize=True, q_mode/q_bits/q_group_size from q), as the command
    `mlx_lm.convert --hf-path SRC --mlx-path DST -q --q-mode M --q-bits B --q-group-size G` runs it:
    mlx-lm's load, the cast of the non-quantized parameters to config.json's torch_dtype,
    quantize_model (nn.quantize with convert's predicate: every Linear and Embedding whose input
    width is a multiple of the group size), save_model, save_config, the tokenizer's
    save_pretrained and the copy of generation_config.json. Only the model card (README.md,
    which names the source folder, here a temporary one) is left out."""
    import contextlib

    import mlx_lm.utils
    from mlx_lm.convert import convert as mlx_convert

    card = mlx_lm.utils.create_model_card
    mlx_lm.utils.create_model_card = lambda path, hf_path: None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            mlx_convert(str(src), str(dst), quantize=True, **q)
    finally:
        mlx_lm.utils.create_model_card = card


def make_dir(name, tmp):
    """The directory model `name`: an hf-* one written by tiny_models.py into tmp; an mlx-* one
    converted by mlx-lm from the hf-bf16 directory and (re)written to tests/data/mlx_dirs/<name>/."""
    q = tiny_models.dir_quantization(name)
    if q is None:
        return str(tiny_models.write_dir(name, os.path.join(tmp, name)))
    base, _ = tiny_models.dir_model(name)
    src = tiny_models.write_dir(f"{base}-hf-bf16", os.path.join(tmp, "src"))
    out = os.path.join(tmp, name)
    convert(src, out, q)
    dst = tiny_models.MLX_DIRS / name
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(out, dst)
    return str(dst)


def dir_reference(name, path, all_ids):
    """mlx-lm on the directory (mlx_ref.Reference.from_dir), after checks that it is the model
    meant: an unquantized directory must give bit-identical logits to mlx-lm's Model built from
    tiny_models.py's arrays (rounded to bf16 for hf-bf16); a quantized one must have every Linear
    and the embedding quantized as config.json's block says."""
    import mlx.nn as nn
    from mlx_lm.models.switch_layers import QuantizedSwitchLinear, SwitchLinear

    base, _ = tiny_models.dir_model(name)
    q = tiny_models.dir_quantization(name)
    ref = mlx_ref.Reference.from_dir(path)
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    if q is None:
        if ref.quantized or "quantization" in cfg:
            raise RuntimeError(f"{name}: an unquantized directory has quantized layers")
        module, args = tiny_models.model_args(base)
        built = mlx_ref.Reference.from_weights(module, args, tiny_models.dir_weights(name))
        for ids in all_ids:
            if not np.array_equal(ref.logits(ids), built.logits(ids)):
                raise RuntimeError(f"{name}: mlx-lm's load of the directory gives other logits than the model built "
                                   "from tiny_models.py's arrays: the directory does not hold the same model")
        return ref, (f"mlx-lm (mlx_lm.utils.load_model) on the directory, which tiny_models.py writes: its "
                     f"{base} weights (seed {tiny_models.SEED}) in {cfg['torch_dtype']}, computed in float32, CPU "
                     "(bf16 parameters widened to float32)")
    block = {"group_size": q["q_group_size"], "bits": q["q_bits"], "mode": q["q_mode"]}
    got = cfg.get("quantization") or {}
    if cfg.get("quantization_config") != got or {k: v for k, v in got.items() if k in block} != block:
        raise RuntimeError(f"{name}: config.json's quantization block is {cfg.get('quantization')}, expected {block}")
    # Per-layer entries: only those the model's own quant_predicate asks for (qwen3_moe: its
    # routers, "model.layers.N.mlp.gate", in 8 bits)
    modules = dict(ref.model.named_modules())
    predicate = getattr(ref.model, "quant_predicate", None)
    for path, params in got.items():
        if path in block:
            continue
        if path not in modules or predicate is None or predicate(path, modules[path]) != params:
            raise RuntimeError(f"{name}: config.json's quantization block has '{path}': {params}, which the "
                               "model's quant_predicate does not ask for")
        m = modules[path]
        if (m.group_size, m.bits) != (params["group_size"], params["bits"]):
            raise RuntimeError(f"{name}: {path} is quantized with group {m.group_size}, {m.bits} bits, not {params}")
    plain = (nn.Linear, nn.Embedding, SwitchLinear)
    packed = (nn.QuantizedLinear, nn.QuantizedEmbedding, QuantizedSwitchLinear)
    left = [k for k, m in ref.model.named_modules() if isinstance(m, plain) and not isinstance(m, packed)]
    if left or not ref.quantized:
        raise RuntimeError(f"{name}: layers left unquantized: {left}")
    overrides = {k: v for k, v in got.items() if k not in block}
    what = (f"mlx-lm (mlx_lm.utils.load_model) on what mlx_lm.convert -q --q-mode {q['q_mode']} --q-bits "
            f"{q['q_bits']} --q-group-size {q['q_group_size']} wrote from the {base}-hf-bf16 directory "
            f"(tests/data/mlx_dirs/{name}); quantized layers as mlx-lm runs them (QuantizedLinear: "
            "mx.quantized_matmul, w = scale * q + bias in float32; QuantizedEmbedding rows: mx.dequantize in "
            "the scales' dtype), every other parameter widened to float32, float32 activations, CPU")
    if any(isinstance(m, QuantizedSwitchLinear) for m in modules.values()):
        what += ("; experts stacked by the model's sanitize into QuantizedSwitchLinear (mx.gather_qmm, the same "
                 "w = scale * q + bias in float32)")
    if overrides:
        sample = next(iter(overrides.values()))
        what += (f"; the model's quant_predicate keeps {len(overrides)} layers at {sample['bits']} bits, group "
                 f"{sample['group_size']} ({', '.join(sorted(overrides)[:2])}, ...)")
    return ref, what


def definition_spread(name, path, ref, seqs):
    """For a quantized directory: how far two other readings of the same file are from the
    reference, as a warning of what a loader that reads it differently would see (stderr only).
    'bf16': every quantized weight taken as mx.dequantize's result in the scales' dtype (two
    roundings to bf16), for the matmuls too. 'f32': every one as scale * q + bias in float32, for
    the embedding rows too."""
    import mlx.core as mx
    import mlx.nn as nn
    from mlx.utils import tree_flatten, tree_unflatten
    from mlx_lm.utils import dequantize_model

    alt_bf16 = mlx_ref.Reference.from_dir(path)
    dequantize_model(alt_bf16.model)
    params = tree_flatten(alt_bf16.model.parameters())
    alt_bf16.model.update(tree_unflatten([(k, v.astype(mx.float32)) for k, v in params]))
    alt_f32 = mlx_ref.Reference.from_dir(path)
    for _, m in alt_f32.model.named_modules():
        if isinstance(m, nn.QuantizedEmbedding) and mx.issubdtype(m.scales.dtype, mx.floating):
            m.scales = m.scales.astype(mx.float32)
            if m.get("biases") is not None:
                m.biases = m.biases.astype(mx.float32)
    for what, alt in (("bf16", alt_bf16), ("f32", alt_f32)):
        dl, flips, decided = [], 0, 0
        routed = router_check.RouterCheck()
        for seq in seqs:
            a, b = ref.logits(seq), alt.logits(seq)
            i1, l1, l2 = mlx_ref.top2(a)
            j1, _, _ = mlx_ref.top2(b)
            d = (l1 - l2) >= 0.05
            decided += int(d.sum())
            flips += int(((i1 != j1) & d).sum())
            dl.append(np.abs(a.max(axis=-1) - b.max(axis=-1)))
            if ref.moe_layers():  # the other reading's router choices, as test_moe_router.py would judge them
                rec, _ = router_record(name, "spread", ref, seq, a)
                got = {(i, layer): [int(e) for e in ex[i]]
                       for layer, _, ex in alt.trace(seq)[1] for i in range(len(seq))}
                moe = {"layers": [i for i, _ in ref.moe_layers()], "top_k": ref.moe_layers()[0][1].top_k,
                       "threshold": ROUTER_THRESHOLD}
                routed.add(router_check.check({"moe": moe}, {"ids": seq, "gen": [], **rec}, got))
        dl = np.concatenate(dl)
        line = (f"{name}: weights read as '{what}' instead: |d top-1 logit| median {np.median(dl):.4f}, max "
                f"{dl.max():.4f}; top-1 differs at {flips} of {decided} decided positions")
        if routed.choices:
            line += "; " + router_check.summary(routed, ROUTER_THRESHOLD)
        print(line, file=sys.stderr)


def router_margin(logits, k):
    """(T,): the router's k-th largest logit minus its (k+1)-th, per row: log(p_k / p_k+1)."""
    top = -np.sort(-logits, axis=1)
    return top[:, k - 1] - top[:, k]


def router_record(name, pname, ref, seq, logits):
    """The router's choices over seq: ({"router": [[sorted ids] per position] per MoE layer,
    "router_margin": [[margin] per position] per layer}, min margin). Also checks that the ids
    mlx-lm used are the router's k largest logits wherever that is not a near-tie, and that the
    traced forward gave the logits of the plain one."""
    lg, trace = ref.trace(seq)
    if not np.array_equal(lg, logits):
        raise RuntimeError(f"{name}/{pname}: the traced forward gives other logits than the plain one")
    experts, margins = [], []
    for layer, rl, ex in trace:
        k = ex.shape[1]
        got = np.sort(ex, axis=1)
        want = np.sort(np.argsort(-rl, axis=1, kind="stable")[:, :k], axis=1)
        m = router_margin(rl, k)
        bad = np.nonzero((got != want).any(axis=1) & (m > 1e-4))[0]
        if bad.size:
            raise RuntimeError(f"{name}/{pname}: layer {layer} position {bad[0]}: mlx-lm used experts {got[bad[0]]}, "
                               f"the router's top {k} are {want[bad[0]]}")
        experts.append([[int(e) for e in row] for row in got])
        margins.append([round(float(x), 4) for x in m])
    return {"router": experts, "router_margin": margins}, min(min(m) for m in margins)


def roundtrip_reference(name, celer, tmp):
    """(mlx_lm.convert's directory, SmolLM2's GGUF, the tensors digest): the directory made from the
    bf16 Hugging Face form of SmolLM2, after checks that `celer quantize` of the same source writes
    the same tensors, and that mlx-lm reads celer's directory (config.json, tokenizer files) as its
    own: the same chat prompt ids and the same logits."""
    from mlx_lm import load

    q = roundtrip.ROUNDTRIPS[name]
    gguf_path = fetch_model(roundtrip.SOURCE)
    src = roundtrip.write_hf_dir(gguf_path, os.path.join(tmp, "src"))
    mine, theirs = os.path.join(tmp, "celer"), os.path.join(tmp, name)
    convert(src, theirs, q)
    roundtrip.celer_quantize(celer, src, mine, q)
    digest = roundtrip.tensors_digest(theirs)
    if roundtrip.tensors_digest(mine) != digest:
        raise RuntimeError(f"{name}: celer quantize differs from mlx_lm.convert: "
                           f"{roundtrip.first_difference(mine, theirs)}")
    msgs = [{"role": "user", "content": CHAT_MESSAGES[0]}]
    (m1, t1), (m2, t2) = load(theirs), load(mine)
    ids = t1.apply_chat_template(msgs, add_generation_prompt=True)
    if t2.apply_chat_template(msgs, add_generation_prompt=True) != ids:
        raise RuntimeError(f"{name}: mlx-lm's tokenizer of celer's directory renders the chat prompt differently")
    import mlx.core as mx

    if not np.array_equal(np.array(m1(mx.array([ids])).astype(mx.float32)),
                          np.array(m2(mx.array([ids])).astype(mx.float32))):
        raise RuntimeError(f"{name}: mlx-lm gives other logits on celer's directory than on its own")
    return theirs, gguf_path, digest


def make_fixture(name, celer, tmp):
    spread = None
    digest = None
    if name in RT:
        path, gguf_path, digest = roundtrip_reference(name, celer, tmp)
        prompts = MODELS[roundtrip.SOURCE]
        all_ids = tokenize(celer, gguf_path, [t for _, t, _ in prompts])
        ref = mlx_ref.Reference.from_dir(path)
        q = roundtrip.ROUNDTRIPS[name]
        what = (f"mlx-lm (mlx_lm.utils.load_model) on what mlx_lm.convert -q --q-mode {q['q_mode']} --q-bits "
                f"{q['q_bits']} --q-group-size {q['q_group_size']} wrote from SmolLM2's bfloat16 Hugging Face form "
                "(tests/reference/roundtrip.py), which `celer quantize` writes byte for byte too; quantized layers "
                "as mlx-lm runs them, every other parameter widened to float32, float32 activations, CPU")
        spread = lambda seqs: definition_spread(name, path, ref, seqs)  # noqa: E731
    elif name in DIRS:
        base, _ = tiny_models.dir_model(name)
        path = make_dir(name, tmp)
        prompts = [(pname, None, False) for pname, _ in tiny_models.prompts(base)]
        all_ids = [ids for _, ids in tiny_models.prompts(base)]
        ref, what = dir_reference(name, path, all_ids)
        if tiny_models.dir_quantization(name) is not None:
            spread = lambda seqs: definition_spread(name, path, ref, seqs)  # noqa: E731
    elif name in TINY:
        path = str(tiny_models.write_gguf(name, os.path.join(tmp, f"{name}.gguf")))
        prompts = [(pname, None, False) for pname, _ in tiny_models.prompts(name)]
        all_ids = [ids for _, ids in tiny_models.prompts(name)]
        ref = tiny_models.reference(name)
        from_file = mlx_ref.Reference(path)
        for ids in all_ids:
            if not np.array_equal(ref.logits(ids), from_file.logits(ids)):
                raise RuntimeError(f"{name}: the GGUF file read back by mlx_ref gives other logits than the model "
                                   "tiny_models.py built: the file does not hold the same model")
        what = (f"mlx-lm's {ref.module} Model with tiny_models.py's random float32 weights (seed "
                f"{tiny_models.SEED}), CPU; celer runs the same weights written as GGUF (F32)")
    else:
        path = fetch_model(name)
        prompts = MODELS[name]
        all_ids = tokenize(celer, path, [t for _, t, _ in prompts])
        ref = mlx_ref.Reference(path)
        what = "mlx-lm on the GGUF's weights dequantized by gguf-py to float32, CPU (tests/reference/mlx_ref.py)"
    records, seqs = [], []
    moe = ref.moe_layers()
    for (pname, text, slow), ids in zip(prompts, all_ids):
        gen = ref.greedy(ids, N_GEN)
        seq = ids + gen
        logits = ref.logits(seq)
        top1, l1, l2 = mlx_ref.top2(logits)
        # The cached greedy run and the uncached forward must agree wherever the choice is not
        # a near-tie; otherwise the reference itself is inconsistent.
        n = len(ids)
        for s, g in enumerate(gen):
            p = n - 1 + s
            if int(top1[p]) != g and l1[p] - l2[p] > 1e-3:
                raise RuntimeError(f"{name}/{pname}: step {s}: cached greedy chose {g}, uncached forward "
                                   f"{int(top1[p])} with margin {l1[p] - l2[p]:.4f}")
        margin = l1 - l2
        seqs.append(seq)
        records.append({
            "name": pname,
            "slow": slow,
            "text": text,
            "ids": ids,
            "gen": gen,
            "top1": [int(x) for x in top1],
            "l1": [round(float(x), 4) for x in l1],
            "margin": [round(float(x), 4) for x in margin],
        })
        note = ""
        if moe:
            router, rmin = router_record(name, pname, ref, seq, logits)
            records[-1].update(router)
            undecided = sum(m < ROUTER_THRESHOLD for layer in router["router_margin"] for m in layer)
            note = (f"; router: {undecided} of {len(seq) * len(moe)} choices undecided (margin < {ROUTER_THRESHOLD}), "
                    f"min margin {rmin:.4f}")
        print(f"{name}/{pname}: {n} prompt + {len(gen)} generated; min margin {margin.min():.4f}{note}",
              file=sys.stderr)
    if spread:
        spread(seqs)
    reference = {
        "what": what,
        "module": f"mlx_lm.models.{ref.module}",
        "mlx": metadata.version("mlx"),
        "mlx_lm": metadata.version("mlx-lm"),
        "gguf": metadata.version("gguf"),
        "numpy": np.__version__,
        "date": datetime.date.today().isoformat(),
        "script": "tests/reference/make_mlx_fixtures.py",
    }
    if name in DIRS:  # a directory: pinned by tiny_models.dir_sha256; transformers saved the mlx-* tokenizers
        reference["transformers"] = metadata.version("transformers")
    if name in RT:  # pinned by the source GGUF and the tensors mlx_lm.convert wrote from it
        reference["transformers"] = metadata.version("transformers")
    fx = {
        "model": name,
        "file": os.path.basename(path),
        "sha256": tiny_models.dir_sha256(path) if name in DIRS else sha256(gguf_path if name in RT else path),
        "reference": reference,
        "n_gen": N_GEN,
        "positions": "position i holds the next-token logits after ids[0..i] of prompt + gen",
    }
    if moe:
        blk = moe[0][1]
        fx["moe"] = {
            "layers": [i for i, _ in moe],
            "n_expert": int(blk.num_experts),
            "top_k": int(blk.top_k),
            "threshold": ROUTER_THRESHOLD,
            "router": "router[j][i]: the experts (ascending ids) that MoE layer layers[j] chose for the token at "
                      "position i of prompt + gen, as mlx-lm's sparse block passed them to its experts",
            "router_margin": "router_margin[j][i]: the router's k-th largest logit minus its (k+1)-th, log(p_k / "
                             "p_k+1); the choice is decided when it is at least threshold",
        }
    fx["prompts"] = records
    if digest:
        fx["tensors"] = digest
    return fx


def write_compact(obj, path):
    """One prompt per block, each list on one line: small and still diffable."""
    head = {k: v for k, v in obj.items() if k != "prompts"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v)},")
    lines.append('  "prompts": [')
    for i, r in enumerate(obj["prompts"]):
        lines.append("    {")
        items = list(r.items())
        for j, (k, v) in enumerate(items):
            sep = "," if j + 1 < len(items) else ""
            lines.append(f"      {json.dumps(k)}: {json.dumps(v, separators=(',', ':'))}{sep}")
        lines.append("    }" + ("," if i + 1 < len(obj["prompts"]) else ""))
    lines.append("  ]")
    lines.append("}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join([*MODELS, *TINY, *DIRS, *RT]))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "mlx"))
    a = ap.parse_args()
    celer = os.environ.get("CELER_BIN", os.path.join(ROOT, "build", "celer"))
    os.makedirs(a.out, exist_ok=True)
    mlx_ref._selfcheck()
    names = a.models.split(",")
    for name in names:
        if name not in MODELS and name not in TINY and name not in DIRS and name not in RT:
            ap.error(f"unknown model '{name}'; known: {', '.join([*MODELS, *TINY, *DIRS, *RT])}")
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            fx = make_fixture(name, celer, tmp)
        path = os.path.join(a.out, f"{name}.json")
        write_compact(fx, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
