"""A GGUF file seen as the Hugging Face checkpoint it was converted from, with numpy and gguf-py
only (no mlx): mlx-lm's ModelArgs from the metadata, mlx-lm's parameter names, and the weights
dequantized to float32 by gguf-py with the converter's changes undone (docs/correctness.md):

  * llama: the converter permutes the rows of attn_q / attn_k within each head so that
    interleaved ("normal") RoPE rotates the pairs that Hugging Face's rotate-half rotates;
    mlx-lm rotates halves (traditional=False), so the rows are put back in Hugging Face order.
  * gemma3: the converter stores every RMSNorm weight with Gemma's +1 already added; mlx-lm's
    gemma3_text RMSNorm adds 1 itself, so 1 is subtracted here.
  * qwen2moe, qwen3moe: the converter stacks each layer's per-expert matrices into one tensor per
    projection (ffn_gate_exps, ffn_up_exps, ffn_down_exps: (n_expert, rows, cols)); they are split
    back into Hugging Face's model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight, which mlx-lm's
    sanitize stacks again into its switch_mlp.

Used by mlx_ref.py (the reference forward pass) and roundtrip.py (a Hugging Face directory made
from a GGUF file, for `celer quantize` and mlx_lm.convert).
"""

import gguf
import numpy as np

# GGUF per-layer tensor stems → Hugging Face / mlx-lm module paths, per architecture.
_LAYER_NAMES = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
    "ffn_gate_inp": "mlp.gate",  # the MoE router
    "ffn_gate_inp_shexp": "mlp.shared_expert_gate",  # qwen2moe's shared expert and its sigmoid gate
    "ffn_gate_shexp": "mlp.shared_expert.gate_proj",
    "ffn_up_shexp": "mlp.shared_expert.up_proj",
    "ffn_down_shexp": "mlp.shared_expert.down_proj",
}
# Stacked experts (n_expert, rows, cols) → the projection of each model.layers.N.mlp.experts.E.
_EXPERT_NAMES = {"ffn_gate_exps": "gate_proj", "ffn_up_exps": "up_proj", "ffn_down_exps": "down_proj"}
# The norm before the FFN: Hugging Face calls it post_attention_layernorm in llama and qwen2/3
# (it follows the attention); gemma3 has a real post-attention norm and calls this one
# pre_feedforward_layernorm.
_ARCH_LAYER_NAMES = {
    "llama": {"ffn_norm": "post_attention_layernorm"},
    "qwen2": {"ffn_norm": "post_attention_layernorm"},
    "qwen3": {"ffn_norm": "post_attention_layernorm"},
    "qwen2moe": {"ffn_norm": "post_attention_layernorm"},
    "qwen3moe": {"ffn_norm": "post_attention_layernorm"},
    "gemma3": {
        "ffn_norm": "pre_feedforward_layernorm",
        "post_attention_norm": "post_attention_layernorm",
        "post_ffw_norm": "post_feedforward_layernorm",
    },
}
# mlx-lm module per GGUF architecture (gemma3 is the text-only model; mlx_lm.models.gemma3 is
# the vision-language wrapper around it).
_MODULES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3": "gemma3_text", "qwen2moe": "qwen2_moe",
            "qwen3moe": "qwen3_moe"}


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def model_args(reader):
    """(mlx-lm module name, ModelArgs dict) from the GGUF metadata."""
    arch = field(reader, "general.architecture")
    if arch not in _MODULES:
        raise ValueError(f"mlx_ref: architecture '{arch}' has no mapping; known: {', '.join(_MODULES)}")
    names = {t.name for t in reader.tensors}
    if "rope_freqs.weight" in names:
        raise ValueError("mlx_ref: rope_freqs.weight (llama 3 RoPE scaling) is not mapped yet")

    def g(key, default=None):
        return field(reader, f"{arch}.{key}", default)

    n_embd, n_head = int(g("embedding_length")), int(g("attention.head_count"))
    head_dim = int(g("attention.key_length", n_embd // n_head))
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    args = {
        "model_type": _MODULES[arch],
        "hidden_size": n_embd,
        "num_hidden_layers": int(g("block_count")),
        "intermediate_size": int(g("feed_forward_length")),
        "num_attention_heads": n_head,
        "num_key_value_heads": int(g("attention.head_count_kv", n_head)),
        "head_dim": head_dim,
        "rms_norm_eps": float(g("attention.layer_norm_rms_epsilon")),
        "vocab_size": int(embd.shape[1]),  # gguf-py shapes are innermost first
        "rope_theta": float(g("rope.freq_base", 10000.0)),
        "max_position_embeddings": int(g("context_length", 4096)),
        "tie_word_embeddings": "output.weight" not in names,
    }
    rope_dims = int(g("rope.dimension_count", head_dim))
    if rope_dims != head_dim:
        raise ValueError(f"mlx_ref: partial RoPE ({rope_dims} of {head_dim}) is not mapped yet")
    scaling = g("rope.scaling.type")
    if scaling == "linear":
        args["rope_scaling"] = {"type": "linear", "factor": float(g("rope.scaling.factor"))}
    elif scaling == "yarn":
        # Back to Hugging Face's rope_scaling, which mlx-lm's YarnRoPE reads. It has no
        # extrapolation or attention factor (its mscale is DeepSeek's, a multiplier of the log).
        for key, default in (("yarn_ext_factor", 1.0), ("yarn_attn_factor", 1.0)):
            if float(g(f"rope.scaling.{key}", default)) != default:
                raise ValueError(f"mlx_ref: YaRN with rope.scaling.{key} != {default} is not mapped")
        args["rope_scaling"] = {
            "type": "yarn",
            "factor": float(g("rope.scaling.factor")),
            "original_max_position_embeddings": int(g("rope.scaling.original_context_length",
                                                      args["max_position_embeddings"])),
        }
        for key, hf in (("yarn_beta_fast", "beta_fast"), ("yarn_beta_slow", "beta_slow")):
            if g(f"rope.scaling.{key}") is not None:
                args["rope_scaling"][hf] = float(g(f"rope.scaling.{key}"))
    elif scaling not in (None, "none"):
        raise ValueError(f"mlx_ref: RoPE scaling '{scaling}' is not mapped yet")
    if arch in ("qwen2", "qwen2moe") and "blk.0.attn_q.bias" not in names:
        raise ValueError(f"mlx_ref: {arch} without q/k/v biases: mlx-lm's {_MODULES[arch]} always has them")
    if arch in ("qwen2moe", "qwen3moe"):
        args.update(_moe_args(reader, arch, names, args))
    if arch == "llama":
        args["attention_bias"] = "blk.0.attn_q.bias" in names
    if arch == "gemma3":
        # Not in the GGUF: Gemma 3's fixed layout (5 sliding layers then 1 global, local RoPE
        # base 10000). query_pre_attn_scalar is head_dim for every Gemma 3 but 27B, which the
        # converter marks with attention.scale.
        scale = g("attention.scale")
        args.update(
            sliding_window=int(g("attention.sliding_window")),
            sliding_window_pattern=6,
            rope_local_base_freq=10000.0,
            query_pre_attn_scalar=float(head_dim if scale is None else 1.0 / float(scale) ** 2),
        )
    return _MODULES[arch], args


def _moe_args(reader, arch, names, args):
    """The MoE part of ModelArgs, from the keys convert_hf_to_gguf.py writes (expert_count,
    expert_used_count, expert_feed_forward_length, qwen2moe's expert_shared_feed_forward_length).

    Not in the file, fixed by the architecture as llama.cpp fixes it (build_moe_ffn's arguments in
    src/models/qwen{2,3}moe.cpp): a softmax router; the kept weights renormalized to sum 1 in
    qwen3moe (norm_topk_prob), used as they are in qwen2moe (mlx-lm's qwen2_moe has no such
    option); every layer sparse (llama.cpp requires ffn_gate_inp in each, and the converter has
    no name for a dense layer's FFN in these architectures)."""

    def g(key, default=None):
        return field(reader, f"{arch}.{key}", default)

    gating = g("expert_gating_func")
    if gating not in (None, 1):  # LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX
        raise ValueError(f"mlx_ref: {arch} with expert_gating_func {gating}: mlx-lm's router is a softmax")
    norm = g("expert_weights_norm")
    if norm is not None and bool(norm) != (arch == "qwen3moe"):
        raise ValueError(f"mlx_ref: {arch} with expert_weights_norm {bool(norm)} is not what mlx-lm computes")
    if g("expert_weights_scale") not in (None, 1.0):
        raise ValueError(f"mlx_ref: {arch} with expert_weights_scale {g('expert_weights_scale')} is not mapped")
    dense = [i for i in range(args["num_hidden_layers"]) if f"blk.{i}.ffn_gate_inp.weight" not in names]
    if dense:
        raise ValueError(f"mlx_ref: {arch} layers {dense} have no router (ffn_gate_inp); every layer must be sparse")
    out = {
        "num_experts": int(g("expert_count")),
        "num_experts_per_tok": int(g("expert_used_count")),
        "moe_intermediate_size": int(g("expert_feed_forward_length")),
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "norm_topk_prob": arch == "qwen3moe",
    }
    if arch == "qwen2moe":
        out["shared_expert_intermediate_size"] = int(g("expert_shared_feed_forward_length"))
        if args["head_dim"] * args["num_attention_heads"] != args["hidden_size"]:
            raise ValueError("mlx_ref: qwen2moe with head_dim · heads != width: mlx-lm's qwen2_moe derives head_dim")
    return out


def unpermute_qk(w, n_head):
    """Undoes the GGUF llama converter's Q/K row permutation.

    The converter views the rows of each head as (2, head_dim / 2) — the two rotate-half halves —
    and transposes them to (head_dim / 2, 2), so that rows 2i and 2i + 1 are the pair that
    interleaved RoPE rotates. Reading them as (head_dim / 2, 2) and transposing back restores
    the original order. w: (n_head * head_dim, ...)."""
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def permute_qk(w, n_head):
    """The converter's permutation (the inverse of unpermute_qk), for the self-check."""
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(arch, gguf_name):
    """The mlx-lm parameter name of a GGUF tensor, or None for one the model does not use."""
    top = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
    if gguf_name in top:
        return top[gguf_name]
    parts = gguf_name.split(".")
    if len(parts) != 4 or parts[0] != "blk":
        return None
    _, layer, stem, kind = parts
    name = _ARCH_LAYER_NAMES[arch].get(stem) or _LAYER_NAMES.get(stem)
    return None if name is None else f"model.layers.{layer}.{name}.{kind}"


def load_weights(reader, arch, args):
    """{mlx-lm name: float32 numpy array} from every tensor of the file."""
    out = {}
    for t in reader.tensors:
        parts = t.name.split(".")
        w = np.asarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        w = w.reshape([int(d) for d in reversed(t.shape)])  # outermost first
        if len(parts) == 4 and parts[0] == "blk" and parts[2] in _EXPERT_NAMES and parts[3] == "weight":
            if w.ndim != 3 or w.shape[0] != args.get("num_experts"):
                raise ValueError(f"mlx_ref: GGUF tensor '{t.name}' has shape {w.shape}, expected "
                                 f"({args.get('num_experts')} experts, rows, cols)")
            for e in range(w.shape[0]):
                out[f"model.layers.{parts[1]}.mlp.experts.{e}.{_EXPERT_NAMES[parts[2]]}.weight"] = w[e]
            continue
        name = hf_name(arch, t.name)
        if name is None:
            raise ValueError(f"mlx_ref: no mlx-lm name for GGUF tensor '{t.name}' ({arch})")
        if arch == "llama" and t.name.endswith(("attn_q.weight", "attn_q.bias")):
            w = unpermute_qk(w, args["num_attention_heads"])
        elif arch == "llama" and t.name.endswith(("attn_k.weight", "attn_k.bias")):
            w = unpermute_qk(w, args["num_key_value_heads"])
        if arch == "gemma3" and t.name.endswith("norm.weight"):
            w = w - np.float32(1.0)
        out[name] = w
    return out
