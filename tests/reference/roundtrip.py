"""SmolLM2 through `celer quantize` and through mlx_lm.convert (issue 6's round trips).

The source is a Hugging Face bfloat16 checkpoint made from the default model's GGUF file
(write_hf_dir: gguf-py's float32 dequantization with the converter's changes undone, gguf_hf.py,
rounded to bfloat16; the tokenizer as transformers builds it from the GGUF, with the file's chat
template). From it, for each format in ROUNDTRIPS:
  * mlx_lm.convert writes a directory (make_mlx_fixtures.py, with mlx), and mlx-lm's forward pass
    on it is the reference the parity fixture records, together with tensors_digest of it;
  * `celer quantize` writes one from the same source (test_mlx_parity.py, without mlx): its
    tensors must equal mlx_lm.convert's byte for byte (the digest), and celer's greedy tokens on
    it must equal the reference's at every decided position.
So celer reads what mlx_lm.convert writes as mlx-lm does, and mlx-lm gets from `celer quantize`
exactly the bytes it writes itself (make_mlx_fixtures.py also loads celer's directory with mlx-lm
and compares its greedy tokens, so the config and tokenizer files are checked too).

Needs numpy, gguf and transformers (tests/requirements.txt); no mlx.
"""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
from pathlib import Path

import gguf

import gguf_hf
import tiny_models

SOURCE = "smollm2-135m"  # scripts/fetch-model's name of the source GGUF
ROUNDTRIPS = {
    "smollm2-135m-mlx-q4g64": {"q_mode": "affine", "q_bits": 4, "q_group_size": 64},
    "smollm2-135m-mlx-q8g32": {"q_mode": "affine", "q_bits": 8, "q_group_size": 32},
    "smollm2-135m-mlx-q3g64": {"q_mode": "affine", "q_bits": 3, "q_group_size": 64},
    "smollm2-135m-mlx-mxfp4": {"q_mode": "mxfp4", "q_bits": 4, "q_group_size": 32},
    "smollm2-135m-mlx-mxfp8": {"q_mode": "mxfp8", "q_bits": 8, "q_group_size": 32},
    "smollm2-135m-mlx-nvfp4": {"q_mode": "nvfp4", "q_bits": 4, "q_group_size": 16},
}
_CLASSES = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
            "gemma3_text": "Gemma3ForCausalLM"}


def write_hf_dir(gguf_path, out) -> Path:
    """A Hugging Face bfloat16 checkpoint of the GGUF file's model at out (created)."""
    import tokenizer_ref

    out = Path(out)
    out.mkdir(parents=True)
    reader = gguf.GGUFReader(str(gguf_path))
    arch = gguf_hf.field(reader, "general.architecture")
    module, args = gguf_hf.model_args(reader)
    weights = gguf_hf.load_weights(reader, arch, args)
    cfg = dict(args, architectures=[_CLASSES[module]], torch_dtype="bfloat16", hidden_act="silu")
    for key in ("bos_token_id", "eos_token_id"):
        v = gguf_hf.field(reader, f"tokenizer.ggml.{key}")
        if v is not None:
            cfg[key] = int(v)
    (out / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    tensors = {k: ("BF16", tiny_models.bf16_bits(v)) for k, v in weights.items()}
    (out / "model.safetensors").write_bytes(tiny_models._safetensors(tensors, {"format": "pt"}))
    tok, _ = tokenizer_ref.load_reference(str(gguf_path))
    template = gguf_hf.field(reader, "tokenizer.chat_template")
    if template is not None:
        tok.chat_template = template
    tok.save_pretrained(str(out))
    return out


def quantize_args(q: dict) -> list[str]:
    return ["--mode", q["q_mode"], "--bits", str(q["q_bits"]), "--group-size", str(q["q_group_size"])]


def celer_quantize(celer, src, out, q: dict) -> Path:
    """`celer quantize SRC OUT --mode ... --bits ... --group-size ...`; raises with its stderr."""
    r = subprocess.run([str(celer), "quantize", str(src), str(out), *quantize_args(q)], capture_output=True,
                       text=True, timeout=900)
    if r.returncode != 0:
        raise RuntimeError(f"celer quantize {src} {out}: exit {r.returncode}: {r.stderr}")
    return Path(out)


def read_tensors(path) -> dict[str, tuple[str, tuple, bytes]]:
    """Every tensor of a model directory's safetensors files: name → (dtype, shape, bytes)."""
    out = {}
    for f in sorted(Path(path).glob("*.safetensors")):
        data = f.read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        for name, t in header.items():
            if name == "__metadata__":
                continue
            b, e = t["data_offsets"]
            out[name] = (t["dtype"], tuple(t["shape"]), data[8 + n + b:8 + n + e])
    return out


def tensors_digest(path) -> str:
    """sha256 over the directory's tensors (name, dtype, shape, bytes; in name order) and
    config.json's quantization block: equal for two directories that hold the same model in the
    same quantization, however the files are split, ordered or padded."""
    h = hashlib.sha256()
    for name, (dtype, shape, b) in sorted(read_tensors(path).items()):
        h.update(f"{name}|{dtype}|{list(shape)}|{hashlib.sha256(b).hexdigest()}\n".encode())
    cfg = json.loads((Path(path) / "config.json").read_text())
    h.update(json.dumps(cfg.get("quantization"), sort_keys=True).encode())
    return h.hexdigest()


def first_difference(a, b) -> str:
    """Where two directories' tensors differ, for messages."""
    ta, tb = read_tensors(a), read_tensors(b)
    if set(ta) != set(tb):
        return f"tensor names differ: only in the first {sorted(set(ta) - set(tb))[:5]}, only in the second " \
               f"{sorted(set(tb) - set(ta))[:5]}"
    for name in sorted(ta):
        (da, sa, ba), (db, sb, bb) = ta[name], tb[name]
        if (da, sa) != (db, sb):
            return f"{name}: {da} {list(sa)} vs {db} {list(sb)}"
        if ba != bb:
            i = next(i for i in range(len(ba)) if ba[i] != bb[i])
            return f"{name}: bytes differ from offset {i} of {len(ba)}"
    return "the quantization blocks of config.json differ"
