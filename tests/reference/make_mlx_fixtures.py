"""Writes tests/data/mlx/<model>.json: the mlx-lm reference's greedy continuations and per-position
top-1 / top-2 logits on the real models and the tiny random ones, for test_mlx_parity.py (which
needs no mlx).

For each model and prompt: the prompt text (chat prompts formatted by hand in the model's own
format) is tokenized by celer (`celer tokenize --jsonl`), so the ids are celer's; the reference
(mlx_ref.py: mlx-lm on the GGUF's dequantized weights, float32, CPU) generates N_GEN tokens
greedily with its KV cache, with no end-of-turn stop; then one uncached forward over prompt +
continuation gives, for every position, the top-1 id, its logit and the margin to the top-2.

The tiny models (tiny_models.py: a qwen3, a qwen2 and a qwen2 with YaRN; random float32 weights)
have no text: their prompts are random token ids, and the reference is mlx-lm's qwen3 / qwen2
Model built from the generator's arrays. The GGUF file that celer runs is written to a temporary folder and
pinned by its sha256; the reference read back from that file (mlx_ref.Reference) must give
bit-identical logits, which checks that the file holds the same model.

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
import subprocess
import sys
import tempfile
from importlib import metadata

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mlx_ref  # noqa: E402
import tiny_models  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
N_GEN = 32

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


def make_fixture(name, celer, tmp):
    if name in TINY:
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
    records = []
    for (pname, text, slow), ids in zip(prompts, all_ids):
        gen = ref.greedy(ids, N_GEN)
        seq = ids + gen
        top1, l1, l2 = mlx_ref.top2(ref.logits(seq))
        # The cached greedy run and the uncached forward must agree wherever the choice is not
        # a near-tie; otherwise the reference itself is inconsistent.
        n = len(ids)
        for s, g in enumerate(gen):
            p = n - 1 + s
            if int(top1[p]) != g and l1[p] - l2[p] > 1e-3:
                raise RuntimeError(f"{name}/{pname}: step {s}: cached greedy chose {g}, uncached forward "
                                   f"{int(top1[p])} with margin {l1[p] - l2[p]:.4f}")
        margin = l1 - l2
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
        print(f"{name}/{pname}: {n} prompt + {len(gen)} generated; min margin {margin.min():.4f}", file=sys.stderr)
    return {
        "model": name,
        "file": os.path.basename(path),
        "sha256": sha256(path),
        "reference": {
            "what": what,
            "module": f"mlx_lm.models.{ref.module}",
            "mlx": metadata.version("mlx"),
            "mlx_lm": metadata.version("mlx-lm"),
            "gguf": metadata.version("gguf"),
            "numpy": np.__version__,
            "date": datetime.date.today().isoformat(),
            "script": "tests/reference/make_mlx_fixtures.py",
        },
        "n_gen": N_GEN,
        "positions": "position i holds the next-token logits after ids[0..i] of prompt + gen",
        "prompts": records,
    }


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
    ap.add_argument("--models", default=",".join([*MODELS, *TINY]))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "data", "mlx"))
    a = ap.parse_args()
    celer = os.environ.get("CELER_BIN", os.path.join(ROOT, "build", "celer"))
    os.makedirs(a.out, exist_ok=True)
    mlx_ref._selfcheck()
    names = a.models.split(",")
    for name in names:
        if name not in MODELS and name not in TINY:
            ap.error(f"unknown model '{name}'; known: {', '.join([*MODELS, *TINY])}")
    for name in names:
        with tempfile.TemporaryDirectory() as tmp:
            fx = make_fixture(name, celer, tmp)
        path = os.path.join(a.out, f"{name}.json")
        write_compact(fx, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
