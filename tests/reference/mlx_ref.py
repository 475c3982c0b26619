"""The mlx-lm reference forward pass on a GGUF file's own weights.

An mlx-lm model (mlx_lm.models.<module>.Model, with ModelArgs built from the GGUF metadata) is
filled with the file's tensors dequantized to float32 by gguf-py (gguf.quants.dequantize), so
that celer and the reference see the same numbers: only the forward pass differs, not the
quantization. mlx's own GGUF loader is not used (it keeps the quantized blocks and knows few of
the types these files hold). Everything runs in float32 on the CPU.

What the conversion undoes: see gguf_hf.py.

Mixture-of-experts models (qwen3_moe, qwen2_moe): Reference.trace runs the forward pass and
records, for every MoE layer, the router's logits and the expert ids that mlx-lm's sparse block
handed to its experts (the indices argument of its SwitchGLU), as the forward pass used them.

Needs mlx, mlx-lm and gguf (tests/requirements-reference.txt). Used by make_mlx_fixtures.py;
`python tests/reference/mlx_ref.py MODEL.gguf ID,ID,...` prints the top-2 per position.
"""

import importlib
import sys

import numpy as np

import gguf
import mlx.core as mx

from gguf_hf import field, hf_name, load_weights, model_args, permute_qk, unpermute_qk  # noqa: F401


class Reference:
    """An mlx-lm model on a GGUF file's dequantized weights, in float32 on the CPU."""

    def __init__(self, path):
        reader = gguf.GGUFReader(path)
        self.arch = field(reader, "general.architecture")
        module, args = model_args(reader)
        self._build(module, args, load_weights(reader, self.arch, args))

    @classmethod
    def from_weights(cls, module, args, weights):
        """mlx_lm.models.<module>.Model with ModelArgs args and weights ({mlx-lm name: float32
        numpy array}), not from a file (tiny_models.py's random models)."""
        ref = cls.__new__(cls)
        ref.arch = args["model_type"]
        ref._build(module, args, dict(weights))
        return ref

    @classmethod
    def from_dir(cls, path):
        """A Hugging Face / MLX model directory loaded by mlx-lm itself (mlx_lm.utils.load_model:
        config.json, the safetensors files, the quantization block), in float32 on the CPU.

        Quantized layers stay exactly as mlx-lm builds them: the packed weight with its scales and
        biases in their stored dtype (bfloat16 for what mlx_lm.convert writes from a bf16
        checkpoint, uint8 exponents for mxfp4). Every other floating parameter (norms,
        unquantized weights, the q/k/v biases of a quantized qwen2 projection) is widened to
        float32, which is exact. The activations are then float32 throughout: QuantizedLinear
        with float32 input runs mx.quantized_matmul, which widens the scale and bias to float32
        and uses w = scale * q + bias in float32; QuantizedEmbedding looks rows up with
        mx.dequantize in the scales' dtype (bf16 values, rounded twice: R(R(q * scale) + bias)),
        and the first RMSNorm promotes them to float32 exactly."""
        import mlx.nn as nn
        from pathlib import Path

        from mlx.utils import tree_flatten, tree_unflatten
        from mlx_lm.utils import load_model

        mx.set_default_device(mx.cpu)
        from mlx_lm.models.switch_layers import QuantizedSwitchLinear

        model, config = load_model(Path(path), strict=True)
        quantized = {k for k, m in model.named_modules()
                     if isinstance(m, (nn.QuantizedLinear, nn.QuantizedEmbedding, QuantizedSwitchLinear))}
        packed, widen = set(), []
        for k, v in tree_flatten(model.parameters()):
            module, _, leaf = k.rpartition(".")
            if module in quantized and leaf in ("weight", "scales", "biases"):
                packed.add(k)
            elif v.dtype != mx.float32:
                if not mx.issubdtype(v.dtype, mx.floating):
                    raise AssertionError(f"mlx_ref: {path}: parameter {k} is {v.dtype}, outside a quantized layer")
                widen.append((k, v.astype(mx.float32)))
        if widen:
            model.update(tree_unflatten(widen))
        model.eval()
        mx.eval(model.parameters())
        for k, v in tree_flatten(model.parameters()):
            if k not in packed and v.dtype != mx.float32:
                raise AssertionError(f"mlx_ref: {path}: parameter {k} is {v.dtype}, expected float32")
        ref = cls.__new__(cls)
        ref.arch = config["model_type"]
        ref.module, ref.args, ref.model = type(model).__module__.rsplit(".", 1)[-1], config, model
        ref.n_vocab = config["vocab_size"]
        ref.quantized = sorted(quantized)
        return ref

    def _build(self, module_name, args, weights):
        mx.set_default_device(mx.cpu)
        self.module, self.args = module_name, args
        module = importlib.import_module(f"mlx_lm.models.{self.module}")
        self.model = module.Model(module.ModelArgs.from_dict(self.args))
        # mx arrays: a MoE model's sanitize stacks the per-expert matrices with mx.stack
        weights = self.model.sanitize({k: mx.array(v) for k, v in weights.items()})
        self.model.load_weights(list(weights.items()), strict=True)
        self.model.eval()
        mx.eval(self.model.parameters())
        for _, p in _leaves(self.model.parameters()):
            if p.dtype != mx.float32:
                raise AssertionError(f"mlx_ref: a parameter is {p.dtype}, expected float32")
        self.n_vocab = self.args["vocab_size"]

    def logits(self, ids):
        """Next-token logits (T, n_vocab) float32 after each prefix of ids, in one forward."""
        out = self.model(mx.array([list(ids)], dtype=mx.int32))
        out = out[0].astype(mx.float32)
        mx.eval(out)
        return np.array(out)

    def moe_layers(self):
        """[(layer index, sparse MoE block)]: the layers whose mlp has a router (gate) and experts
        (switch_mlp), in order; [] for a dense model."""
        return [(i, layer.mlp) for i, layer in enumerate(self.model.model.layers)
                if hasattr(layer.mlp, "switch_mlp") and hasattr(layer.mlp, "gate")]

    def trace(self, ids, edit=None):
        """(logits as logits() gives them, [(layer, router logits (T, n_expert) float32, experts
        (T, k) int)] per MoE layer): one uncached forward over ids with each MoE block's gate and
        switch_mlp wrapped, so the experts are the indices the block passed to its experts (in
        argpartition's order, not sorted). edit(layer, indices) -> indices, if given, replaces
        them before the experts run (the weights stay those of the original choice)."""
        blocks = self.moe_layers()
        seen = {i: {} for i, _ in blocks}
        for i, blk in blocks:
            blk.gate = _Recorder(blk.gate, seen[i], "logits")
            blk.switch_mlp = _Recorder(blk.switch_mlp, seen[i], "experts", None if edit is None else
                                       (lambda ind, i=i: edit(i, ind)))
        try:
            out = self.model(mx.array([list(ids)], dtype=mx.int32))[0].astype(mx.float32)
            mx.eval(out, [list(v.values()) for v in seen.values()])
        finally:
            for i, blk in blocks:
                blk.gate = blk.gate.inner
                blk.switch_mlp = blk.switch_mlp.inner
        trace = []
        for i, _ in blocks:
            logits = np.array(seen[i]["logits"].astype(mx.float32))[0]
            trace.append((i, logits, np.array(seen[i]["experts"])[0]))
        return np.array(out), trace

    def greedy(self, prompt, n):
        """n tokens after prompt, greedily, with mlx-lm's KV cache (one forward per token)."""
        from mlx_lm.models.cache import make_prompt_cache

        cache = make_prompt_cache(self.model)
        out = self.model(mx.array([list(prompt)], dtype=mx.int32), cache=cache)
        ids = []
        for _ in range(n):
            nxt = int(mx.argmax(out[0, -1]).item())
            ids.append(nxt)
            out = self.model(mx.array([[nxt]], dtype=mx.int32), cache=cache)
        return ids


class _Recorder:
    """Stands in for a MoE block's gate (records its output) or switch_mlp (records the expert
    indices of its second argument, after edit). A plain callable, not an nn.Module: the block
    calls its children as attributes, and the model's parameter tree is not walked meanwhile."""

    def __init__(self, inner, sink, key, edit=None):
        self.inner, self.sink, self.key, self.edit = inner, sink, key, edit

    def __call__(self, x, *args):
        if self.key == "logits":
            out = self.inner(x, *args)
            self.sink["logits"] = out
            return out
        indices, *rest = args
        if self.edit is not None:
            indices = self.edit(indices)
        self.sink["experts"] = indices
        return self.inner(x, indices, *rest)


def _leaves(tree, prefix=""):
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _leaves(v, f"{prefix}{k}.")
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _leaves(v, f"{prefix}{i}.")
    else:
        yield prefix[:-1], tree


def top2(logits):
    """(top-1 ids, top-1 logits, top-2 logits) per row; ties go to the lower id, as argmax."""
    i1 = np.argmax(logits, axis=-1)
    rows = np.arange(logits.shape[0])
    l1 = logits[rows, i1]
    rest = logits.copy()
    rest[rows, i1] = -np.inf
    l2 = rest.max(axis=-1)
    return i1, l1, l2


def _selfcheck():
    w = np.arange(3 * 8 * 5, dtype=np.float32).reshape(24, 5)
    assert np.array_equal(unpermute_qk(permute_qk(w, 3), 3), w)
    assert np.array_equal(permute_qk(unpermute_qk(w, 3), 3), w)


def main(argv):
    _selfcheck()
    if len(argv) != 3:
        print("usage: mlx_ref.py MODEL.gguf ID,ID,...", file=sys.stderr)
        return 1
    ref = Reference(argv[1])
    ids = [int(x) for x in argv[2].split(",")]
    i1, l1, l2 = top2(ref.logits(ids))
    for p in range(len(ids)):
        print(f'{{"pos": {p}, "top1": {int(i1[p])}, "l1": {l1[p]:.6f}, "l2": {l2[p]:.6f}}}')
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
