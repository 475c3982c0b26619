"""Tiny GGUF models whose greedy output is a fixed script, for end-to-end tests of what a model's
output turns into (tool calls, reasoning) through `celer serve`.

The model is a one-layer llama whose attention and FFN write nothing (their output matrices are
zero), so the residual stream is the token's embedding: a one-hot row. The output matrix maps
token i to the logits of next[i]: every token outside the script leads to its first token, each
script token to the following one, the last to <|im_end|> (EOS). Whatever the prompt, greedy
decoding prints the script and stops. The vocabulary is byte-level BPE (GPT-2's byte alphabet,
and one merge, "ab": prompts encode nearly byte by byte) plus <|im_start|>, <|im_end|> and the script's tokens,
which only generation produces. The chat template is a small ChatML one that lists the tools and
mentions <tool_call> and <think>, so the Qwen output family applies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tiny_models import _byte_alphabet  # GPT-2's byte alphabet

TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nTools:{% for t in tools %} {{ t | tojson }}{% endfor %}\n"
    "Answer with <tool_call>{\"name\": ..., \"arguments\": ...}</tool_call>; think in <think></think>.<|im_end|>\n"
    "{%- endif %}"
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
    "{%- if m.content %}{{ m.content }}{% endif %}"
    "{%- if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}"
    "{%- endif %}<|im_end|>\n{%- endfor %}<|im_start|>assistant\n"
)

SCRIPTS = {
    "tool-call": ["<tool_call>", '\n{"name": "get_weather", "arguments": ', '{"city": "Paris"}}', "\n</tool_call>"],
    "reasoning": ["<think>", "\nThe user wants a greeting.", "\n</think>", "\n\nHello!"],
}


def write(script: str, path: Path) -> Path:
    import gguf

    alpha = _byte_alphabet()
    steps = SCRIPTS[script]
    tokens = alpha + ["<|im_start|>", "<|im_end|>"] + ["".join(alpha[b] for b in s.encode()) for s in steps] + ["ab"]
    types = [1] * 256 + [3, 3] + [1] * len(steps) + [1]
    eos, first = 257, 258
    V = len(tokens)
    D = (V + 31) // 32 * 32
    nxt = np.full(V, first)
    for k in range(len(steps)):
        nxt[first + k] = first + k + 1 if k + 1 < len(steps) else eos
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"scripted-{script}")
    w.add_context_length(512)
    w.add_embedding_length(D)
    w.add_block_count(1)
    w.add_feed_forward_length(32)
    w.add_head_count(1)
    w.add_head_count_kv(1)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["a b"])  # one merge: a BPE vocabulary has some
    w.add_bos_token_id(256)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE)
    embd = np.zeros((V, D), np.float32)
    embd[np.arange(V), np.arange(V)] = 1.0
    out = np.zeros((V, D), np.float32)
    out[nxt, np.arange(V)] = 10.0
    ones = np.ones(D, np.float32)
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", ones)
    w.add_tensor("output.weight", out)
    w.add_tensor("blk.0.attn_norm.weight", ones)
    for t in ("attn_q", "attn_k", "attn_v"):
        w.add_tensor(f"blk.0.{t}.weight", np.zeros((D, D), np.float32))
    w.add_tensor("blk.0.attn_output.weight", np.zeros((D, D), np.float32))
    w.add_tensor("blk.0.ffn_norm.weight", ones)
    w.add_tensor("blk.0.ffn_gate.weight", np.zeros((32, D), np.float32))
    w.add_tensor("blk.0.ffn_up.weight", np.zeros((32, D), np.float32))
    w.add_tensor("blk.0.ffn_down.weight", np.zeros((D, 32), np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path
