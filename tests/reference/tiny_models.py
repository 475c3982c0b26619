"""Tiny random-weight qwen2, qwen3, llama, gemma3, qwen3moe and qwen2moe models for the mlx-lm parity
check (test_mlx_parity.py, test_moe_router.py, make_mlx_fixtures.py), so that the qwen3 path
(per-head q/k RMSNorm, NEOX RoPE, head size independent of the width), the qwen2 path (q/k/v
biases), YaRN RoPE scaling (tiny-qwen2-yarn), the llama path (the GGUF converter's Q/K row
permutation), the gemma3 path (sliding-window and global layers, Gemma's +1 norms, GeGLU), the
mixture-of-experts paths (a softmax router's top-k experts, renormalized for qwen3moe; qwen2moe's
shared expert behind its sigmoid gate) and model directories (DIRS) are checked against mlx-lm like
the real models are.

One set of float32 weights per model, a pure function of (name, SEED), goes three ways:
  * write_gguf: a GGUF file as llama.cpp's converter writes these architectures (its tensor
    names and hyper-parameter keys, YaRN's rope.scaling keys; qwen2/qwen3 keep Hugging Face's
    Q/K row order, llama's rows are permuted for interleaved RoPE; a MoE layer's experts are
    stacked into one (n_expert, rows, cols) tensor per projection), F32 tensors, with the
    placeholder vocabulary of `celer synth` (src/models/synth_vocab.c). The test writes it into
    a temporary folder and checks its sha256 against the fixture's, so a change of this
    generator (or of gguf-py's writer) shows up as a stale fixture.
  * write_dir: a Hugging Face model directory (config.json, safetensors under Hugging Face's
    names, one tensor per expert, a byte-level BPE tokenizer) in float32 or bfloat16, pinned by
    dir_sha256 the same way; mlx_lm.convert makes the quantized directories from the bfloat16 one
    (see DIRS).
  * reference: mlx-lm's own Model of the architecture (qwen2, qwen3, llama, gemma3_text,
    qwen3_moe, qwen2_moe), built from ModelArgs and filled with the same arrays under their
    Hugging Face names (its sanitize stacks the experts; needs mlx; only make_mlx_fixtures.py
    calls it).

The random numbers are SplitMix64 on a counter, computed with numpy's wrapping uint64
arithmetic, and turned into uniform floats with exact operations only: the bytes do not
depend on the numpy version or the machine (numpy's own generators promise no stable stream).
Prompts are random token ids after BOS, from the same generator.

Needs numpy and gguf (tests/requirements.txt); `python tiny_models.py DIR` writes the GGUF files
and the unquantized directories.
"""

from __future__ import annotations

import hashlib
import math
import sys
from pathlib import Path

import numpy as np

SEED = 20261130

# name → shape. qwen3: head_dim 32 with 4 heads on a 64-wide model (q is 128 wide, as in real
# Qwen3 where n_head * head_dim != n_embd), tied embeddings. qwen2: head_dim = width / heads (mlx-lm's
# qwen2 derives it), q/k/v biases, a separate output matrix.
MODELS = {
    "tiny-qwen3": dict(arch="qwen3", n_layer=3, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, head_dim=32,
                       n_vocab=384, tied=True),
    "tiny-qwen2": dict(arch="qwen2", n_layer=3, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, head_dim=16,
                       n_vocab=384, tied=False),
    # YaRN: qwen2 with RoPE base 10⁴ stretched 4 times past an original context of 64 tokens, which
    # every prompt (32–95 tokens) plus its 32-token continuation runs past. head_dim 32 (2 heads
    # on 64): the ramp between beta_fast = 32 and beta_slow = 1 turns (the defaults: the converter
    # writes only the type, the factor and the original context, as for Qwen2.5) spans pairs 0–5
    # of 16: pair 0 keeps its frequency, pairs 1–4 mix, pairs 5–15 are divided by 4; q and k are
    # scaled by 0.1 ln 4 + 1 = 1.139.
    "tiny-qwen2-yarn": dict(arch="qwen2", n_layer=3, n_embd=64, n_ff=128, n_head=2, n_head_kv=1, head_dim=32,
                            n_vocab=384, tied=False, rope_theta=1e4, n_ctx=256, prompt_len=(32, 96),
                            yarn=dict(factor=4.0, original_context_length=64)),
    # llama: rotate-half RoPE in Hugging Face's Q/K row order, which the GGUF converter permutes
    # for interleaved RoPE (and mlx_ref permutes back). An FFN of 192 (not 2× the width), RoPE
    # base 10⁴, tied embeddings (as SmolLM2 and Llama 3.2 1B).
    "tiny-llama": dict(arch="llama", n_layer=3, n_embd=64, n_ff=192, n_head=4, n_head_kv=2, head_dim=16,
                       n_vocab=384, tied=True, rope_theta=1e4),
    # gemma3 (mlx-lm's gemma3_text): GeGLU (gelu tanh), four norms per block with Gemma's +1 (GGUF
    # stores 1 + w, Hugging Face w), q/k norms, the embedding scaled by sqrt(64) rounded to bf16,
    # tied embeddings. Seven layers with Gemma 3's fixed pattern of 6: layers 0-4 and 6 attend
    # through a sliding window of 16 positions with RoPE base 10⁴, layer 5 to everything with
    # base 10⁶; every prompt (24-59 tokens) runs past the window. query_pre_attn_scalar is
    # hidden / heads = 16, not head_dim = 32 (as in Gemma 3 27B), which the GGUF marks with
    # attention.scale.
    "tiny-gemma3": dict(arch="gemma3", n_layer=7, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, head_dim=32,
                        n_vocab=384, tied=True, sliding_window=16, query_pre_attn_scalar=16, prompt_len=(24, 60)),
    # qwen3moe (mlx-lm's qwen3_moe): qwen3's attention (q/k norms; 4 heads of 32 on a 64-wide
    # model, as Qwen3-30B-A3B's 32 × 128 on 2048), every layer a sparse MoE block: a softmax router
    # over 16 experts, the top 4 kept and their weights renormalized to sum 1 (norm_topk_prob),
    # each expert a SwiGLU of 64 (a multiple of the 64-wide quantization group, so that
    # mlx_lm.convert quantizes every expert matrix). A separate output matrix, as in Qwen3-MoE.
    # Every layer is sparse, as in every released Qwen3-MoE (mlp_only_layers [], decoder_sparse_step
    # 1): llama.cpp's converter has no name for a dense layer's FFN in a qwen3moe file.
    "tiny-qwen3moe": dict(arch="qwen3moe", n_layer=4, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, head_dim=32,
                          n_vocab=384, tied=False, n_expert=16, n_expert_used=4, n_ff_exp=64, norm_topk_prob=True,
                          n_prompts=10),
    # qwen2moe (mlx-lm's qwen2_moe): qwen2's attention (q/k/v biases, head_dim = width / heads),
    # every layer a softmax router over 8 experts whose top 2 weights are used as they are (no
    # renormalization, as Qwen1.5-MoE and Qwen2-MoE), plus a shared SwiGLU expert of 128 scaled by
    # sigmoid(shared_expert_gate · x). mlx-lm's qwen2_moe always has an output matrix.
    "tiny-qwen2moe": dict(arch="qwen2moe", n_layer=3, n_embd=64, n_ff=128, n_head=4, n_head_kv=2, head_dim=16,
                          n_vocab=384, tied=False, n_expert=8, n_expert_used=2, n_ff_exp=64, n_ff_shexp=128,
                          norm_topk_prob=False, n_prompts=10),
}
MOE_ARCHS = ("qwen3moe", "qwen2moe")
# Router weights: the router's logits (normed hidden state · weight row) get a standard deviation
# of about 2 (weights of std 2 / sqrt(n_embd) against a normed input of RMS ~1), twice what an
# initialization of 1 / sqrt(n_embd) gives: far enough apart that the k-th and (k+1)-th expert
# rarely tie (most gaps are tenths of a nat), not so far that softmax makes the top 1 take
# everything (the kept weights stay comparable, so every chosen expert's output shows).
ROUTER_STD = 2.0
SWA_PATTERN = 6  # gemma3: every 6th layer global, the others sliding
ROPE_LOCAL_BASE = 1e4  # gemma3's sliding layers
ROPE_THETA = 1e6  # unless the model says otherwise
NORM_EPS = 1e-6
N_CTX = 4096
N_PROMPTS = 8  # unless the model says otherwise (n_prompts)
PROMPT_LEN = (16, 64)  # prompt lengths, BOS included, drawn from [lo, hi) (unless the model says otherwise)
N_SPECIAL = 3  # <unk>, <s>, </s>: prompts draw from the ids after them
BOS = 1

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _stream(key: str, n: int) -> np.ndarray:
    """n uint64s of SplitMix64 seeded from SEED and key."""
    start = np.uint64(int.from_bytes(hashlib.sha256(f"{SEED}:{key}".encode()).digest()[:8], "little"))
    with np.errstate(over="ignore"):
        z = start + np.arange(1, n + 1, dtype=np.uint64) * _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def _uniform(key: str, shape: tuple[int, ...], mean: float, std: float) -> np.ndarray:
    """float32 array, uniform with the given mean and standard deviation."""
    n = math.prod(shape)
    u = (_stream(key, n) >> np.uint64(11)).astype(np.float64) * 2.0**-53  # [0, 1), exact
    half = std * math.sqrt(3.0)
    return (mean + (2.0 * u - 1.0) * half).astype(np.float32).reshape(shape)


def _shape(name: str) -> dict:
    if name not in MODELS:
        raise ValueError(f"tiny_models: unknown model '{name}'; known: {', '.join(MODELS)}")
    return MODELS[name]


def hf_weights(name: str) -> dict[str, np.ndarray]:
    """{Hugging Face / mlx-lm parameter name: float32 array, outermost dimension first}.

    Scales: attention scores with a spread of a few units (so attention is neither uniform nor
    one-hot), norms around 1 but not 1 (so a norm applied to the wrong tensor shows), biases as
    large as the projections they add to (so a missing bias shows), and logits with a spread of
    about 3 nats, so that most positions are decided."""
    s = _shape(name)
    d, ff, hd, v = s["n_embd"], s["n_ff"], s["head_dim"], s["n_vocab"]
    nq, nkv = s["n_head"] * hd, s["n_head_kv"] * hd

    def u(key, shape, mean=0.0, std=1.0):
        return _uniform(f"{name}:{key}", shape, mean, std)

    moe = s["arch"] in MOE_ARCHS
    w = {"model.embed_tokens.weight": u("model.embed_tokens.weight", (v, d), std=0.4 if s["tied"] else 1.0),
         "model.norm.weight": u("model.norm.weight", (d,), 0.0 if s["arch"] == "gemma3" else 1.0, 0.2)}
    if not s["tied"]:
        w["lm_head.weight"] = u("lm_head.weight", (v, d), std=0.4)
    for i in range(s["n_layer"]):
        p = f"model.layers.{i}."
        layer = {
            "input_layernorm.weight": ((d,), 1.0, 0.2),
            "self_attn.q_proj.weight": ((nq, d), 0.0, 0.2),
            "self_attn.k_proj.weight": ((nkv, d), 0.0, 0.2),
            "self_attn.v_proj.weight": ((nkv, d), 0.0, 1.0 / math.sqrt(d)),
            "self_attn.o_proj.weight": ((d, nq), 0.0, 1.0 / math.sqrt(nq)),
            "post_attention_layernorm.weight": ((d,), 1.0, 0.2),
            "mlp.gate_proj.weight": ((ff, d), 0.0, 1.5 / math.sqrt(d)),
            "mlp.up_proj.weight": ((ff, d), 0.0, 1.5 / math.sqrt(d)),
            "mlp.down_proj.weight": ((d, ff), 0.0, 1.0 / math.sqrt(ff)),
        }
        if s["arch"] == "gemma3":  # Hugging Face's Gemma norms hold w; the model multiplies by 1 + w
            layer.update({"input_layernorm.weight": ((d,), 0.0, 0.2),
                          "post_attention_layernorm.weight": ((d,), 0.0, 0.2),
                          "pre_feedforward_layernorm.weight": ((d,), 0.0, 0.2),
                          "post_feedforward_layernorm.weight": ((d,), 0.0, 0.2),
                          "self_attn.q_norm.weight": ((hd,), 0.0, 0.3),
                          "self_attn.k_norm.weight": ((hd,), 0.0, 0.3)})
        if s["arch"] in ("qwen3", "qwen3moe"):
            layer["self_attn.q_norm.weight"] = ((hd,), 1.0, 0.3)
            layer["self_attn.k_norm.weight"] = ((hd,), 1.0, 0.3)
        if moe:  # the sparse block replaces the dense FFN; experts as Hugging Face names them, one by one
            for k in ("mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"):
                del layer[k]
            ne, fe = s["n_expert"], s["n_ff_exp"]
            layer["mlp.gate.weight"] = ((ne, d), 0.0, ROUTER_STD / math.sqrt(d))
            for e in range(ne):
                layer[f"mlp.experts.{e}.gate_proj.weight"] = ((fe, d), 0.0, 1.5 / math.sqrt(d))
                layer[f"mlp.experts.{e}.up_proj.weight"] = ((fe, d), 0.0, 1.5 / math.sqrt(d))
                # twice a dense FFN's scale: the kept weights sum to 1 (qwen3moe) or less (qwen2moe),
                # and a weighted mean of experts is smaller than one expert
                layer[f"mlp.experts.{e}.down_proj.weight"] = ((d, fe), 0.0, 2.0 / math.sqrt(fe))
            if "n_ff_shexp" in s:
                fs = s["n_ff_shexp"]
                layer["mlp.shared_expert.gate_proj.weight"] = ((fs, d), 0.0, 1.5 / math.sqrt(d))
                layer["mlp.shared_expert.up_proj.weight"] = ((fs, d), 0.0, 1.5 / math.sqrt(d))
                layer["mlp.shared_expert.down_proj.weight"] = ((d, fs), 0.0, 1.0 / math.sqrt(fs))
                # sigmoid's argument with a spread of about 1.6: the shared expert's share varies
                layer["mlp.shared_expert_gate.weight"] = ((1, d), 0.0, 0.2)
        if s["arch"] in ("qwen2", "qwen2moe"):
            layer["self_attn.q_proj.bias"] = ((nq,), 0.0, 1.0)
            layer["self_attn.k_proj.bias"] = ((nkv,), 0.0, 1.0)
            layer["self_attn.v_proj.bias"] = ((nkv,), 0.0, 0.5)
        for k, (shape, mean, std) in layer.items():
            w[p + k] = u(p + k, shape, mean, std)
    return w


# Hugging Face names → GGUF names, as llama.cpp's converter (gguf-py's tensor map) renames them.
_TOP = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight"}
_LAYER = {
    "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm", "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
    # mixture of experts: the router, qwen2moe's shared expert and its gate (the experts themselves
    # are stacked into one tensor per matrix: _EXPERTS)
    "mlp.gate": "ffn_gate_inp", "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp", "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp",
}
# The converter (Qwen2MoeModel.modify_tensors) stacks each layer's per-expert matrices into one
# (n_expert, rows, cols) tensor per projection: GGUF shape {cols, rows, n_expert}.
_EXPERTS = {"gate_proj": "ffn_gate_exps", "up_proj": "ffn_up_exps", "down_proj": "ffn_down_exps"}


# gemma3: post_attention_layernorm is a real norm after attention; the one before the FFN is
# pre_feedforward_layernorm.
_GEMMA3_LAYER = {**_LAYER, "post_attention_layernorm": "post_attention_norm",
                 "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm"}


def gguf_name(hf: str, arch: str = "") -> str:
    if hf in _TOP:
        return _TOP[hf]
    parts = hf.split(".")  # model.layers.N.<module...>.<weight|bias>
    table = _GEMMA3_LAYER if arch == "gemma3" else _LAYER
    return f"blk.{parts[2]}.{table['.'.join(parts[3:-1])]}.{parts[-1]}"


def _letters(k: int) -> str:
    """Bijective base 26, as synth_vocab.c: 0 → a, 25 → z, 26 → aa."""
    out = ""
    k += 1
    while k:
        out = chr(ord("a") + (k - 1) % 26) + out
        k = (k - 1) // 26
    return out


def vocab(n: int) -> tuple[list[str], list[float], list[int]]:
    """`celer synth`'s placeholder vocabulary (src/models/synth_vocab.c): <unk> <s> </s>, the 256
    byte tokens, then ▁, ▁a, a, ▁b, b, ... with descending scores."""
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0] * 3, [2, 3, 3]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(6)
    for k in range(n - len(tokens)):
        tokens.append("\u2581" if k == 0 else ("\u2581" + _letters((k - 1) // 2) if k % 2 else _letters((k - 1) // 2)))
        scores.append(-float(k + 1))
        types.append(1)
    return tokens, scores, types


def write_gguf(name: str, path) -> Path:
    """Writes the model as GGUF (F32 tensors) to path; returns the path."""
    import gguf

    s = _shape(name)
    path = Path(path)
    w = gguf.GGUFWriter(str(path), s["arch"])
    w.add_name(name)
    w.add_description(f"random weights from tests/reference/tiny_models.py (seed {SEED}): not a trained model")
    w.add_context_length(s.get("n_ctx", N_CTX))
    w.add_embedding_length(s["n_embd"])
    w.add_block_count(s["n_layer"])
    w.add_feed_forward_length(s["n_ff"])
    w.add_head_count(s["n_head"])
    w.add_head_count_kv(s["n_head_kv"])
    if s["arch"] in ("qwen3", "gemma3", "qwen3moe"):  # the converter writes head_dim where the config has it
        w.add_key_length(s["head_dim"])
        w.add_value_length(s["head_dim"])
    w.add_rope_freq_base(s.get("rope_theta", ROPE_THETA))
    if "yarn" in s:  # as convert_hf_to_gguf.py writes a Hugging Face rope_scaling of type "yarn"
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(s["yarn"]["factor"])
        w.add_rope_scaling_orig_ctx_len(s["yarn"]["original_context_length"])
    w.add_layer_norm_rms_eps(NORM_EPS)
    if s["arch"] in MOE_ARCHS:  # TextModel.set_gguf_parameters, then Qwen2MoeModel's two lengths
        w.add_expert_count(s["n_expert"])
        w.add_expert_used_count(s["n_expert_used"])
        w.add_expert_feed_forward_length(s["n_ff_exp"])
        if "n_ff_shexp" in s:
            w.add_expert_shared_feed_forward_length(s["n_ff_shexp"])
    if s["arch"] == "gemma3":
        w.add_sliding_window(s["sliding_window"])
        if s["query_pre_attn_scalar"] != s["head_dim"]:  # as mlx_ref.py reads it back
            w.add_float32(f"{s['arch']}.attention.scale", 1.0 / math.sqrt(s["query_pre_attn_scalar"]))
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    tokens, scores, types = vocab(s["n_vocab"])
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(BOS)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    if s["arch"] == "llama":  # as the converter writes a config.json that has head_dim
        w.add_vocab_size(s["n_vocab"])
        w.add_rope_dimension_count(s["head_dim"])
        w.add_key_length(s["head_dim"])
        w.add_value_length(s["head_dim"])
    experts: dict[tuple[str, str], list[np.ndarray]] = {}
    for hf, a in hf_weights(name).items():
        parts = hf.split(".")
        if parts[3:5] == ["mlp", "experts"]:  # model.layers.N.mlp.experts.E.<proj>.weight
            layer, e, proj = parts[2], int(parts[5]), parts[6]
            experts.setdefault((layer, proj), []).append(a)
            assert len(experts[(layer, proj)]) == e + 1
            if e + 1 == s["n_expert"]:
                w.add_tensor(f"blk.{layer}.{_EXPERTS[proj]}.weight", np.stack(experts.pop((layer, proj))))
            continue
        if s["arch"] == "llama" and hf.endswith(("q_proj.weight", "k_proj.weight")):
            # the converter's LlamaModel.permute: each head's rows as (2, head_dim / 2), swapped,
            # so that interleaved RoPE rotates the pairs Hugging Face's rotate-half rotates
            n = s["n_head"] if "q_proj" in hf else s["n_head_kv"]
            a = a.reshape(n, 2, a.shape[0] // n // 2, *a.shape[1:]).swapaxes(1, 2).reshape(a.shape)
        if s["arch"] == "gemma3" and hf.endswith("norm.weight"):  # the converter adds Gemma's 1
            a = a + np.float32(1.0)
        w.add_tensor(gguf_name(hf, s["arch"]), a)
    assert not experts
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


_MODEL_TYPES = {"gemma3": "gemma3_text", "qwen3moe": "qwen3_moe", "qwen2moe": "qwen2_moe"}  # Hugging Face / mlx-lm


def model_args(name: str) -> tuple[str, dict]:
    """(mlx-lm module name, ModelArgs dict)."""
    s = _shape(name)
    args = {
        "model_type": _MODEL_TYPES.get(s["arch"], s["arch"]),
        "hidden_size": s["n_embd"],
        "num_hidden_layers": s["n_layer"],
        "intermediate_size": s["n_ff"],
        "num_attention_heads": s["n_head"],
        "num_key_value_heads": s["n_head_kv"],
        "head_dim": s["head_dim"],
        "rms_norm_eps": NORM_EPS,
        "vocab_size": s["n_vocab"],
        "rope_theta": s.get("rope_theta", ROPE_THETA),
        "max_position_embeddings": s.get("n_ctx", N_CTX),
        "tie_word_embeddings": s["tied"],
    }
    if "yarn" in s:  # Hugging Face's rope_scaling, which mlx-lm's rope_utils.initialize_rope reads
        args["rope_scaling"] = {"type": "yarn", "factor": s["yarn"]["factor"],
                                "original_max_position_embeddings": s["yarn"]["original_context_length"]}
    if s["arch"] == "gemma3":
        args.update(sliding_window=s["sliding_window"], sliding_window_pattern=SWA_PATTERN,
                    rope_local_base_freq=ROPE_LOCAL_BASE, query_pre_attn_scalar=float(s["query_pre_attn_scalar"]))
        return "gemma3_text", args
    if s["arch"] in MOE_ARCHS:
        args.update(num_experts=s["n_expert"], num_experts_per_tok=s["n_expert_used"],
                    moe_intermediate_size=s["n_ff_exp"], norm_topk_prob=s["norm_topk_prob"],
                    decoder_sparse_step=1, mlp_only_layers=[])
        if "n_ff_shexp" in s:
            args["shared_expert_intermediate_size"] = s["n_ff_shexp"]
    return args["model_type"], args


def reference(name: str):
    """mlx-lm's own Model of the architecture with these weights (mlx_ref.Reference; needs mlx)."""
    import mlx_ref

    module, args = model_args(name)
    return mlx_ref.Reference.from_weights(module, args, hf_weights(name))


def prompts(name: str) -> list[tuple[str, list[int]]]:
    """N_PROMPTS (prompt name, token ids): BOS, then random ids past the special tokens."""
    v = _shape(name)["n_vocab"]
    lo, hi = _shape(name).get("prompt_len", PROMPT_LEN)
    out = []
    for i in range(_shape(name).get("n_prompts", N_PROMPTS)):
        r = [int(x) for x in _stream(f"{name}:prompt{i}", hi)]
        n = lo + r[0] % (hi - lo)
        out.append((f"random{i}", [BOS] + [N_SPECIAL + x % (v - N_SPECIAL) for x in r[1:n]]))
    return out


# ---- model directories: the Hugging Face / mlx-lm layout ----------------------------------------
#
# Each tiny model of DIR_BASES also becomes model directories, one per variant:
#   hf-f32, hf-bf16   Hugging Face checkpoints as transformers saves them (config.json with
#                     torch_dtype, model.safetensors under Hugging Face's tensor names, or two
#                     shards and model.safetensors.index.json for bf16), written here with numpy
#                     (write_dir) and regenerated by the test, pinned by dir_sha256. bf16 holds
#                     the float32 weights rounded to nearest even.
#   mlx-q4g64, mlx-q8g32, mlx-mxfp4
#                     what mlx_lm.convert makes of the hf-bf16 directory (affine 4-bit group 64,
#                     affine 8-bit group 32, mxfp4), made by make_mlx_fixtures.py (needs mlx) and
#                     committed under tests/data/mlx_dirs/<name>/. gemma3 and the MoE models have
#                     mlx-q4g64 only (the MoE ones: 0.3 and 0.6 MB, their experts stacked by
#                     mlx-lm's sanitize into switch_mlp; qwen3_moe's routers kept at 8 bits).
# Every directory has a byte-level BPE tokenizer of the model's vocabulary size (tokenizer.json,
# tokenizer_config.json), so that celer opens it; the parity test feeds token ids directly.

DIR_BASES = ["tiny-qwen3", "tiny-qwen2", "tiny-llama", "tiny-gemma3", "tiny-qwen3moe", "tiny-qwen2moe"]
# variant → mlx_lm.convert's quantization arguments (None: an unquantized Hugging Face checkpoint)
DIR_VARIANTS = {
    "hf-f32": None,
    "hf-bf16": None,
    "mlx-q4g64": dict(q_mode="affine", q_bits=4, q_group_size=64),
    "mlx-q8g32": dict(q_mode="affine", q_bits=8, q_group_size=32),
    "mlx-mxfp4": dict(q_mode="mxfp4", q_bits=4, q_group_size=32),
}
_FEW_VARIANTS = ("tiny-gemma3", "tiny-qwen3moe", "tiny-qwen2moe")  # hf-f32, hf-bf16 and mlx-q4g64 only
DIRS = {f"{b}-{v}": (b, v) for b in DIR_BASES for v in DIR_VARIANTS
        if b not in _FEW_VARIANTS or v in ("hf-f32", "hf-bf16", "mlx-q4g64")}
MLX_DIRS = Path(__file__).resolve().parents[1] / "data" / "mlx_dirs"  # the committed quantized ones
EOS = 2
_ARCHITECTURES = {"qwen3": "Qwen3ForCausalLM", "qwen2": "Qwen2ForCausalLM", "llama": "LlamaForCausalLM",
                  "gemma3": "Gemma3ForCausalLM", "qwen3moe": "Qwen3MoeForCausalLM",
                  "qwen2moe": "Qwen2MoeForCausalLM"}


def is_moe(name: str) -> bool:
    """Whether a tiny model or directory model is a mixture of experts."""
    base = DIRS[name][0] if name in DIRS else name
    return base in MODELS and MODELS[base]["arch"] in MOE_ARCHS




def dir_model(name: str) -> tuple[str, str]:
    """(base tiny model, variant) of a directory model."""
    if name not in DIRS:
        raise ValueError(f"tiny_models: unknown directory model '{name}'; known: {', '.join(DIRS)}")
    return DIRS[name]


def dir_quantization(name: str) -> dict | None:
    return DIR_VARIANTS[dir_model(name)[1]]


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 → bfloat16 bit patterns (uint16), rounded to nearest even (finite values)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)


def bf16_round(a: np.ndarray) -> np.ndarray:
    """The float32 values of bf16_bits(a)."""
    return (bf16_bits(a).astype(np.uint32) << np.uint32(16)).view(np.float32).reshape(np.shape(a))


def dir_weights(name: str) -> dict[str, np.ndarray]:
    """The float32 values of an unquantized directory's weights: tiny_models' own for hf-f32, rounded
    to bf16 for hf-bf16 (and for an mlx-* one: those of the hf-bf16 directory it is converted from)."""
    base, variant = dir_model(name)
    w = hf_weights(base)
    return w if variant == "hf-f32" else {k: bf16_round(v) for k, v in w.items()}


def hf_config(name: str) -> dict:
    """config.json as transformers 4 writes it for the architecture. head_dim where the real
    architecture's config has it (Qwen3, Llama), not for qwen2 (Qwen2/2.5 configs leave it to
    hidden_size / num_attention_heads)."""
    base, variant = dir_model(name)
    s = _shape(base)
    cfg = {
        "architectures": [_ARCHITECTURES[s["arch"]]],
        "model_type": _MODEL_TYPES.get(s["arch"], s["arch"]),
        "hidden_size": s["n_embd"],
        "num_hidden_layers": s["n_layer"],
        "intermediate_size": s["n_ff"],
        "num_attention_heads": s["n_head"],
        "num_key_value_heads": s["n_head_kv"],
        "hidden_act": "silu",
        "rms_norm_eps": NORM_EPS,
        "vocab_size": s["n_vocab"],
        "rope_theta": float(s.get("rope_theta", ROPE_THETA)),
        "max_position_embeddings": s.get("n_ctx", N_CTX),
        "tie_word_embeddings": s["tied"],
        "torch_dtype": "float32" if variant == "hf-f32" else "bfloat16",
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "use_cache": True,
    }
    if s["arch"] in ("qwen3", "llama", "qwen3moe"):
        cfg["head_dim"] = s["head_dim"]
        cfg["attention_bias"] = False
    if s["arch"] in MOE_ARCHS:  # Qwen3MoeConfig's and Qwen2MoeConfig's expert keys
        cfg.update({
            "num_experts": s["n_expert"],
            "num_experts_per_tok": s["n_expert_used"],
            "moe_intermediate_size": s["n_ff_exp"],
            "norm_topk_prob": s["norm_topk_prob"],
            "decoder_sparse_step": 1,
            "mlp_only_layers": [],
            "output_router_logits": False,
            "router_aux_loss_coef": 0.001,
        })
        if "n_ff_shexp" in s:
            cfg["shared_expert_intermediate_size"] = s["n_ff_shexp"]
    if s["arch"] == "llama":
        cfg["mlp_bias"] = False
    if "yarn" in s:
        cfg["rope_scaling"] = model_args(base)[1]["rope_scaling"]
    if s["arch"] == "gemma3":  # Gemma3TextConfig's keys (transformers 4.5x, as the Gemma 3 270M config)
        del cfg["hidden_act"]
        n = s["n_layer"]
        cfg.update({
            "model_type": "gemma3_text",
            "hidden_activation": "gelu_pytorch_tanh",
            "head_dim": s["head_dim"],
            "attention_bias": False,
            "attention_dropout": 0.0,
            "attn_logit_softcapping": None,
            "final_logit_softcapping": None,
            "initializer_range": 0.02,
            "query_pre_attn_scalar": s["query_pre_attn_scalar"],
            "rope_local_base_freq": ROPE_LOCAL_BASE,
            "rope_scaling": None,
            "sliding_window": s["sliding_window"],
            "_sliding_window_pattern": SWA_PATTERN,
            "layer_types": ["full_attention" if (i + 1) % SWA_PATTERN == 0 else "sliding_attention" for i in range(n)],
            "use_bidirectional_attention": False,
            "pad_token_id": 0,
        })
    return cfg


def _byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode: the printable character that stands for each byte."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("\u00a1"), ord("\u00ac") + 1),
          *range(ord("\u00ae"), ord("\u00ff") + 1)]
    cs, n = list(bs), 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


_SPECIALS = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2, as in the GGUF files' vocabulary
_LETTERS = "etaoinshrdlcumwfgypbvkjxqz"
_BIGRAMS = ("th he in er an re on at en nd ti es or te of ed is it al ar st to nt ng se ha as ou io le ve co me de "
            "hi ri ro ic ne ea ra ce li ch ll be ma si om ur").split()


def tokenizer_json(n_vocab: int) -> dict:
    """A byte-level BPE tokenizer (as GPT-2, Qwen2, Llama 3) of exactly n_vocab tokens: the three
    special tokens, the 256 byte characters, then merged tokens (Ġ + a letter, common letter
    pairs, Ġ + a pair). BOS is added by a TemplateProcessing post-processor."""
    space = _byte_alphabet()[ord(" ")]  # Ġ
    merges = [(space, c) for c in _LETTERS] + [(p[0], p[1]) for p in _BIGRAMS] + \
             [(space + p[0], p[1]) for p in _BIGRAMS]
    n_merges = n_vocab - len(_SPECIALS) - 256
    if not 0 <= n_merges <= len(merges):
        raise ValueError(f"tiny_models: no tokenizer of {n_vocab} tokens")
    vocab = {t: i for i, t in enumerate(_SPECIALS + _byte_alphabet() + [a + b for a, b in merges[:n_merges]])}
    assert len(vocab) == n_vocab
    special = {"<s>": {"id": "<s>", "ids": [BOS], "tokens": ["<s>"]}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for i, t in enumerate(_SPECIALS)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": special,
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [list(m) for m in merges[:n_merges]]},
    }


def tokenizer_config() -> dict:
    return {
        "added_tokens_decoder": {str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True} for i, t in enumerate(_SPECIALS)},
        "bos_token": _SPECIALS[BOS],
        "clean_up_tokenization_spaces": False,
        "eos_token": _SPECIALS[EOS],
        "model_max_length": N_CTX,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": _SPECIALS[0],
    }


def _safetensors(tensors: dict[str, tuple[str, np.ndarray]], metadata: dict) -> bytes:
    """A safetensors file: 8-byte little-endian header length, the JSON header (padded with
    spaces to a multiple of 8), then the tensors' bytes in the header's order. tensors: name →
    (dtype name, array holding the bytes)."""
    import json

    header, data, off = {"__metadata__": metadata}, [], 0
    for name in sorted(tensors):
        dtype, a = tensors[name]
        b = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        data.append(b)
        off += len(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return len(h).to_bytes(8, "little") + h + b"".join(data)


def _write_json(path: Path, obj) -> None:
    import json

    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def write_dir(name: str, path) -> Path:
    """Writes an unquantized (hf-f32 or hf-bf16) directory model to path (created; must not
    exist); returns the path."""
    import json

    base, variant = dir_model(name)
    if dir_quantization(name) is not None:
        raise ValueError(f"tiny_models: {name} is made by mlx_lm.convert (make_mlx_fixtures.py), not by numpy")
    path = Path(path)
    path.mkdir(parents=True)
    _write_json(path / "config.json", hf_config(name))
    _write_json(path / "generation_config.json", {"bos_token_id": BOS, "eos_token_id": EOS})
    (path / "tokenizer.json").write_text(json.dumps(tokenizer_json(_shape(base)["n_vocab"]), indent=2,
                                                    ensure_ascii=False) + "\n", encoding="utf-8")
    _write_json(path / "tokenizer_config.json", tokenizer_config())
    w = hf_weights(base)
    meta = {"format": "pt"}
    if variant == "hf-f32":
        (path / "model.safetensors").write_bytes(_safetensors({k: ("F32", v) for k, v in w.items()}, meta))
        return path
    # bf16: two shards and the index, as transformers saves a checkpoint over its shard size
    t = {k: ("BF16", bf16_bits(v)) for k, v in w.items()}
    total = sum(a.nbytes for _, a in t.values())
    shards, size = [{}, {}], 0
    for k in sorted(t):
        shards[size >= total // 2][k] = t[k]
        size += t[k][1].nbytes
    weight_map = {}
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        (path / fname).write_bytes(_safetensors(shard, meta))
        weight_map.update({k: fname for k in shard})
    _write_json(path / "model.safetensors.index.json", {"metadata": {"total_size": total}, "weight_map": weight_map})
    return path


def model_dir(name: str, tmp) -> Path:
    """The directory of a directory model: written into tmp for hf-*, the committed one for mlx-*."""
    if dir_quantization(name) is None:
        return write_dir(name, Path(tmp) / name)
    return MLX_DIRS / name


def dir_sha256(path) -> str:
    """sha256 of the directory's manifest: `sha256sum` lines ("HEX  NAME\\n") of its files in
    byte order of their relative paths, i.e. `cd DIR && find . -type f | cut -c3- | LC_ALL=C sort |
    xargs sha256sum | sha256sum`."""
    path = Path(path)
    lines = []
    for f in sorted((p for p in path.rglob("*") if p.is_file()), key=lambda p: p.relative_to(path).as_posix()):
        h = hashlib.sha256()
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        lines.append(f"{h.hexdigest()}  {f.relative_to(path).as_posix()}\n")
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: tiny_models.py DIR   (writes DIR/<name>.gguf for each tiny model, and DIR/<name>/ for each "
              "unquantized directory model)", file=sys.stderr)
        return 1
    for name in MODELS:
        print(write_gguf(name, Path(argv[1]) / f"{name}.gguf"))
    for name in DIRS:
        if dir_quantization(name) is None:
            print(write_dir(name, Path(argv[1]) / name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
