"""A tiny GGUF v3 writer for tests (standard library only), plus the crafted files the tests and
the fuzz corpus share: one small valid model and its corrupt variants; and rewrite(), a real
file copied through gguf-py with its architecture, tensor types or keys changed (needs gguf).

Layout written (all little-endian):
    "GGUF" | u32 version | u64 n_tensors | u64 n_kv
    n_kv x (string key | u32 value type | value)
    n_tensors x (string name | u32 n_dims | n_dims x u64 ne (innermost first) | u32 type | u64 offset)
    zero padding to the alignment, then the data section (tensor offsets are relative to it)
A string is u64 length + bytes; an array is u32 element type + u64 count + the elements.

Every length and count can be overridden, so the same writer makes corrupt files:
    build([kv("general.name", string("x", length=1 << 40))], [])   # string runs past the end
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

# ---- value types, numbered as in the GGUF spec ------------------------------------------------

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)

_SCALAR = {
    UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
    FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d",
}

# ggml tensor types the crafted files use: id -> (elements per block, bytes per block)
F32, F16, Q4_0, Q8_0, Q4_K, Q6_K, BF16 = 0, 1, 2, 8, 12, 14, 30
BLOCK = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34), Q4_K: (256, 144), Q6_K: (256, 210),
         BF16: (1, 2)}

DEFAULT_ALIGNMENT = 32


def gstr(s: str | bytes, length: int | None = None) -> bytes:
    """A GGUF string; length overrides the declared length (the bytes written stay s)."""
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b) if length is None else length) + b


@dataclass
class Val:
    """An encoded metadata value: its type tag and the bytes after the tag."""
    type: int
    payload: bytes


def scalar(t: int, v) -> Val:
    return Val(t, struct.pack(_SCALAR[t], v))


def u8(v): return scalar(UINT8, v)
def i8(v): return scalar(INT8, v)
def u16(v): return scalar(UINT16, v)
def i16(v): return scalar(INT16, v)
def u32(v): return scalar(UINT32, v)
def i32(v): return scalar(INT32, v)
def f32(v): return scalar(FLOAT32, v)
def boolean(v): return scalar(BOOL, v)
def u64(v): return scalar(UINT64, v)
def i64(v): return scalar(INT64, v)
def f64(v): return scalar(FLOAT64, v)


def string(s: str | bytes, length: int | None = None) -> Val:
    return Val(STRING, gstr(s, length))


def array(elem_type: int, items, count: int | None = None) -> Val:
    """items: Python values of elem_type, or Val objects (nested arrays, strings with overridden
    lengths). count overrides the declared element count."""
    out = [struct.pack("<IQ", elem_type, len(items) if count is None else count)]
    for it in items:
        if isinstance(it, Val):
            out.append(it.payload)
        elif elem_type == STRING:
            out.append(gstr(it))
        else:
            out.append(struct.pack(_SCALAR[elem_type], it))
    return Val(ARRAY, b"".join(out))


def kv(key: str | bytes, val: Val, key_length: int | None = None, type_tag: int | None = None) -> bytes:
    """One encoded metadata entry. type_tag overrides the value type written."""
    return gstr(key, key_length) + struct.pack("<I", val.type if type_tag is None else type_tag) + val.payload


@dataclass
class Tensor:
    name: str | bytes
    type: int
    ne: list[int]                 # elements per dimension, innermost first (as stored)
    data: bytes | None = None     # default: deterministic bytes of the size ne and type give
    offset: int | None = None     # default: next aligned offset after the previous tensor
    n_dims: int | None = None     # override the dimension count written (ne is written as given)
    name_length: int | None = None

    def n_bytes(self) -> int:
        if self.data is not None:
            return len(self.data)
        if self.type not in BLOCK:
            return 0
        n = 1
        for d in self.ne:
            n *= d
        be, bb = BLOCK[self.type]
        return n // be * bb

    def payload(self) -> bytes:
        if self.data is not None:
            return self.data
        n = self.n_bytes()
        return bytes((i * 7 + 3) & 0xFF for i in range(n)) if n < (1 << 24) else b""

    def info(self, offset: int) -> bytes:
        b = gstr(self.name, self.name_length)
        b += struct.pack("<I", len(self.ne) if self.n_dims is None else self.n_dims)
        b += b"".join(struct.pack("<Q", d) for d in self.ne)
        return b + struct.pack("<IQ", self.type, offset)


@dataclass
class Layout:
    """A built file and where its sections start, for cutting and patching."""
    data: bytes
    kv_start: int = 24
    tensor_info_start: int = 0
    tensor_info_end: int = 0
    data_offset: int = 0
    tensor_offsets: list[int] = field(default_factory=list)  # relative to data_offset


def _align(n: int, a: int) -> int:
    return n if n % a == 0 else n + a - n % a


def layout(kvs: list[bytes], tensors: list[Tensor], alignment: int = DEFAULT_ALIGNMENT, *,
           magic: bytes = b"GGUF", version: int = 3, n_tensors: int | None = None, n_kv: int | None = None,
           version_bytes: bytes | None = None, data_size: int | None = None) -> Layout:
    """Builds a GGUF image. kvs are encoded entries (kv(...) or raw bytes); alignment places the
    data (it does not write general.alignment: add that key yourself). n_tensors and n_kv
    override the counts written; version_bytes overrides the 4 version bytes; data_size sets the
    bytes written after the padding (default: to the end of the last tensor), so a tensor can
    point past the end of the file."""
    head = magic + (version_bytes if version_bytes is not None else struct.pack("<I", version))
    head += struct.pack("<QQ", len(tensors) if n_tensors is None else n_tensors, len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs)
    info_start = len(body)
    offsets, pos = [], 0
    for t in tensors:
        off = _align(pos, alignment) if t.offset is None else t.offset
        offsets.append(off)
        pos = max(pos, off + len(t.payload()))
    for t, off in zip(tensors, offsets):
        body += t.info(off)
    info_end = len(body)
    data_offset = _align(len(body), alignment)
    if data_size is None:
        data_size = max([off + len(t.payload()) for t, off in zip(tensors, offsets)], default=0)
    blob = bytearray(data_size)
    for t, off in zip(tensors, offsets):
        p = t.payload()
        blob[off:off + len(p)] = p[:max(0, data_size - off)]
    blob = blob[:data_size]
    out = body + bytes(data_offset - len(body)) + bytes(blob)
    return Layout(out, 24, info_start, info_end, data_offset, offsets)


def build(kvs: list[bytes], tensors: list[Tensor], alignment: int = DEFAULT_ALIGNMENT, **overrides) -> bytes:
    return layout(kvs, tensors, alignment, **overrides).data


# ---- the shared test files --------------------------------------------------------------------

N_EMBD, N_VOCAB = 32, 8
TOKENS = ["<unk>", "<s>", "</s>", "a", "b", "c", "ab", "bc"]


def sample_kvs(**replace: bytes) -> list[bytes]:
    """The valid sample's metadata, in order; replace={short name: entry} swaps one entry (an
    empty bytes drops it). Short names are the keys below with dots as underscores."""
    entries = [
        ("general_architecture", kv("general.architecture", string("llama"))),
        ("general_name", kv("general.name", string("crafted tiny llama"))),
        ("llama_block_count", kv("llama.block_count", u32(1))),
        ("llama_context_length", kv("llama.context_length", u32(128))),
        ("llama_embedding_length", kv("llama.embedding_length", u32(N_EMBD))),
        ("llama_feed_forward_length", kv("llama.feed_forward_length", u32(64))),
        ("llama_attention_head_count", kv("llama.attention.head_count", u32(4))),
        ("llama_attention_head_count_kv", kv("llama.attention.head_count_kv", u32(2))),
        ("llama_rope_freq_base", kv("llama.rope.freq_base", f32(10000.0))),
        ("llama_attention_layer_norm_rms_epsilon", kv("llama.attention.layer_norm_rms_epsilon", f32(1e-5))),
        ("tokenizer_ggml_tokens", kv("tokenizer.ggml.tokens", array(STRING, TOKENS))),
        ("tokenizer_ggml_scores", kv("tokenizer.ggml.scores", array(FLOAT32, [float(-i) for i in range(N_VOCAB)]))),
        ("test_nested", kv("test.nested", array(ARRAY, [array(UINT32, [1, 2]), array(UINT32, [3]),
                                                         array(STRING, ["x", "yz"])]))),
        ("general_alignment", kv("general.alignment", u32(DEFAULT_ALIGNMENT))),
    ]
    unknown = set(replace) - {n for n, _ in entries}
    if unknown:
        raise KeyError(f"sample_kvs: no entry {sorted(unknown)}")
    return [replace.get(n, e) for n, e in entries if replace.get(n, e)]


def sample_tensors() -> list[Tensor]:
    return [
        Tensor("token_embd.weight", Q8_0, [N_EMBD, N_VOCAB]),
        Tensor("blk.0.attn_norm.weight", F32, [N_EMBD]),
        Tensor("output_norm.weight", F32, [N_EMBD]),
    ]


def sample_layout() -> Layout:
    return layout(sample_kvs(), sample_tensors())


def sample() -> bytes:
    """A small valid GGUF: llama metadata, a string array, a nested array, Q8_0 and F32 tensors."""
    return sample_layout().data


def good_files() -> list[tuple[str, bytes]]:
    """Valid files: the sample and variants of it that exercise other legal layouts."""
    return [
        ("sample", sample()),
        ("version-2", build(sample_kvs(), sample_tensors(), version=2)),
        ("alignment-64", build(sample_kvs(general_alignment=kv("general.alignment", u32(64))), sample_tensors(),
                               alignment=64)),
        ("no-tensors", build(sample_kvs(), [])),
        ("empty-tensor", build(sample_kvs(), sample_tensors() + [Tensor("empty", F32, [0])])),
        ("every-value-type", build(sample_kvs() + [
            kv("test.u8", u8(255)), kv("test.i8", i8(-128)), kv("test.u16", u16(65535)), kv("test.i16", i16(-32768)),
            kv("test.i32", i32(-(1 << 31))), kv("test.u64", u64((1 << 64) - 1)), kv("test.i64", i64(-(1 << 63))),
            kv("test.f64", f64(-0.0)), kv("test.bool", boolean(True)), kv("test.empty_string", string("")),
            kv("test.empty_array", array(UINT8, [])), kv("", string("empty key")),
            kv("test.bools", array(BOOL, [True, False])), kv("test.f64s", array(FLOAT64, [1.5, float("nan")]))],
            sample_tensors())),
    ]


def _with_tensor(i: int, **change) -> list[Tensor]:
    ts = sample_tensors()
    for k, v in change.items():
        setattr(ts[i], k, v)
    return ts


def _patch(b: bytes, at: int, new: bytes) -> bytes:
    return b[:at] + new + b[at + len(new):]


def bad_files() -> list[tuple[str, bytes, str]]:
    """Corrupt GGUF images: (name, bytes, regex the one-line error must match). Each breaks one
    rule of the format; every other byte is the valid sample's."""
    L = sample_layout()
    good = L.data
    big = 1 << 60
    cases = [
        ("empty", b"", r"empty|not a GGUF"),
        ("truncated-in-header", good[:20], r"truncated"),
        # cut early, the counts cannot fit what is left; cut late, a read runs off the end
        ("truncated-after-counts", good[:L.kv_start + 40], r"truncated|cannot fit"),
        ("truncated-in-metadata", good[:L.tensor_info_start - 6], r"truncated"),
        ("truncated-in-tensor-infos-early", good[:L.tensor_info_start + 30], r"truncated|cannot fit"),
        ("truncated-in-tensor-infos", good[:L.tensor_info_end - 5], r"truncated"),
        ("truncated-in-tensor-data", good[:L.data_offset + 100], r"truncated|past the end"),
        ("wrong-magic", b"GGUX" + good[4:], r"not a GGUF"),
        ("version-1", build(sample_kvs(), sample_tensors(), version=1), r"version 1"),
        ("version-99", build(sample_kvs(), sample_tensors(), version=99), r"version 99"),
        ("big-endian", build(sample_kvs(), sample_tensors(), version_bytes=struct.pack(">I", 3)), r"big-endian"),
        ("tensor-count-2^60", build(sample_kvs(), sample_tensors(), n_tensors=big), r"tensor count"),
        ("metadata-count-2^60", build(sample_kvs(), sample_tensors(), n_kv=big), r"metadata count"),
        ("key-length-past-eof",
         build(sample_kvs(general_name=kv("general.name", string("x"), key_length=1 << 40)), sample_tensors()),
         r"metadata key"),
        ("string-value-past-eof",
         build(sample_kvs(general_name=kv("general.name", string("crafted", length=1 << 40))), sample_tensors()),
         r"general\.name|metadata string"),
        ("string-array-element-past-eof",
         build(sample_kvs(tokenizer_ggml_tokens=kv("tokenizer.ggml.tokens", array(
             STRING, TOKENS[:3] + [string("a", length=1 << 40)] + TOKENS[4:]))), sample_tensors()),
         r"tokenizer\.ggml\.tokens|metadata string"),
        ("array-count-2^60",
         build(sample_kvs(tokenizer_ggml_scores=kv("tokenizer.ggml.scores", array(FLOAT32, [0.0] * 8, count=big))),
               sample_tensors()),
         r"tokenizer\.ggml\.scores.*array|array.*cannot fit"),
        ("nested-array-count-2^60",
         build(sample_kvs(test_nested=kv("test.nested", array(ARRAY, [array(UINT32, [1, 2], count=big)]))),
               sample_tensors()),
         r"test\.nested.*array|array.*cannot fit"),
        ("string-array-count-2^60",
         build(sample_kvs(tokenizer_ggml_tokens=kv("tokenizer.ggml.tokens", array(STRING, TOKENS, count=big))),
               sample_tensors()),
         r"tokenizer\.ggml\.tokens.*array|array.*cannot fit"),
        ("arrays-nested-too-deep",
         build(sample_kvs(test_nested=kv("test.nested", _nest(12))), sample_tensors()),
         r"test\.nested.*nested|nested.*deep"),
        ("unknown-value-type",
         build(sample_kvs(general_name=kv("general.name", string("x"), type_tag=13)), sample_tensors()),
         r"general\.name.*type 13|unknown value type"),
        ("unknown-array-element-type",
         build(sample_kvs(test_nested=kv("test.nested", Val(ARRAY, struct.pack("<IQ", 77, 1) + b"\0" * 8))),
               sample_tensors()),
         r"test\.nested.*77|type 77"),
        ("tensor-offset-past-eof",
         build(sample_kvs(), _with_tensor(2, offset=1 << 20), data_size=len(good) - L.data_offset),
         r"output_norm\.weight.*(past the end|truncated)"),
        ("tensor-offset-2^63",
         build(sample_kvs(), _with_tensor(2, offset=1 << 63), data_size=len(good) - L.data_offset),
         r"output_norm\.weight"),
        ("misaligned-tensor-offset",
         build(sample_kvs(), _with_tensor(2, offset=L.tensor_offsets[2] + 4)), r"output_norm\.weight.*align"),
        ("unknown-tensor-type-99",
         build(sample_kvs(), _with_tensor(1, type=99, data=b"\0" * 128)), r"blk\.0\.attn_norm\.weight.*type 99"),
        ("tensor-dims-0", build(sample_kvs(), _with_tensor(1, ne=[], data=b"")), r"blk\.0\.attn_norm\.weight.*0 dim"),
        ("tensor-dims-5",
         build(sample_kvs(), _with_tensor(1, ne=[N_EMBD, 1, 1, 1, 1])), r"blk\.0\.attn_norm\.weight.*5 dim"),
        ("tensor-dims-2^32-1",
         build(sample_kvs(), _with_tensor(1, n_dims=0xFFFFFFFF)), r"blk\.0\.attn_norm\.weight.*dim"),
        ("tensor-elements-overflow",
         build(sample_kvs(), _with_tensor(1, ne=[1 << 40, 1 << 40], data=b"")), r"blk\.0\.attn_norm\.weight"),
        ("tensor-row-not-whole-blocks",
         build(sample_kvs(), _with_tensor(0, ne=[N_EMBD + 1, N_VOCAB], data=b"\0" * 272)),
         r"token_embd\.weight.*block"),
        ("overlapping-tensors",
         build(sample_kvs(), _with_tensor(2, offset=L.tensor_offsets[1])),
         r"overlap"),
        ("overlap-hidden-by-empty-tensor",
         # a (128 bytes at 0), an empty tensor at 64, b (128 bytes at 96): a and b overlap
         build(sample_kvs(), [Tensor("a", F32, [N_EMBD], offset=0), Tensor("empty", F32, [0], offset=64),
                              Tensor("b", F32, [N_EMBD], offset=96)]),
         r"overlap"),
        ("duplicate-tensor-name",
         build(sample_kvs(), _with_tensor(2, name="blk.0.attn_norm.weight")),
         r"blk\.0\.attn_norm\.weight.*(twice|duplicate)"),
        ("duplicate-key",
         build(sample_kvs(general_alignment=kv("general.name", string("again"))), sample_tensors()),
         r"general\.name.*(twice|duplicate)"),
        ("duplicate-key-with-newline",
         build(sample_kvs(general_name=kv("bad\nkey", u32(1)), general_alignment=kv("bad\nkey", u32(2))),
               sample_tensors()),
         r"twice|duplicate"),
        ("unknown-type-in-tensor-with-newline-name",
         build(sample_kvs(), _with_tensor(1, name="bad\nname", type=99, data=b"\0" * 128)),
         r"type 99"),
        ("alignment-0", build(sample_kvs(general_alignment=kv("general.alignment", u32(0))), sample_tensors()),
         r"general\.alignment"),
        ("alignment-3", build(sample_kvs(general_alignment=kv("general.alignment", u32(3))), sample_tensors()),
         r"general\.alignment"),
        ("alignment-not-uint32",
         build(sample_kvs(general_alignment=kv("general.alignment", string("32"))), sample_tensors()),
         r"general\.alignment"),
        ("no-architecture", build(sample_kvs(general_architecture=b""), sample_tensors()),
         r"general\.architecture"),
        ("architecture-not-a-string",
         build(sample_kvs(general_architecture=kv("general.architecture", u32(7))), sample_tensors()),
         r"general\.architecture"),
        ("hparam-wrong-type",
         build(sample_kvs(llama_block_count=kv("llama.block_count", string("one"))), sample_tensors()),
         r"llama\.block_count"),
        ("hparam-float-array",
         build(sample_kvs(llama_attention_head_count=kv("llama.attention.head_count", array(FLOAT32, [4.0]))),
               sample_tensors()),
         r"llama\.attention\.head_count"),
    ]
    return cases


def odd_files() -> list[tuple[str, bytes]]:
    """Well-formed files whose hyper-parameters are absurd (negative, huge). celer may describe or
    reject them, but must not crash or overflow."""
    def with_hp(**entries):
        return build(sample_kvs(**entries), sample_tensors())
    return [
        ("hparams-int64-min-over-minus-1",
         with_hp(llama_embedding_length=kv("llama.embedding_length", i64(-(1 << 63))),
                 llama_attention_head_count=kv("llama.attention.head_count", i64(-1)))),
        ("hparams-negative",
         with_hp(llama_block_count=kv("llama.block_count", i32(-5)),
                 llama_attention_head_count=kv("llama.attention.head_count", i32(-4)),
                 llama_attention_head_count_kv=kv("llama.attention.head_count_kv", i32(-2)))),
        ("hparams-huge-heads",
         with_hp(llama_attention_head_count=kv("llama.attention.head_count", u64(1 << 62)),
                 llama_attention_head_count_kv=kv("llama.attention.head_count_kv", u64(1 << 62)),
                 llama_embedding_length=kv("llama.embedding_length", u64(1 << 62)))),
        ("hparams-huge-everything",
         with_hp(**{n: kv(k, u64((1 << 63) - 1)) for n, k in [
             ("llama_block_count", "llama.block_count"), ("llama_context_length", "llama.context_length"),
             ("llama_embedding_length", "llama.embedding_length"),
             ("llama_feed_forward_length", "llama.feed_forward_length"),
             ("llama_attention_head_count", "llama.attention.head_count"),
             ("llama_attention_head_count_kv", "llama.attention.head_count_kv")]})),
        ("hparams-uint64-top-bit",
         with_hp(llama_block_count=kv("llama.block_count", u64(1 << 63)))),
        ("hparams-per-layer-array",
         with_hp(llama_feed_forward_length=kv("llama.feed_forward_length", array(INT32, [64, -1, 1 << 30])))),
    ]


def _nest(depth: int) -> Val:
    v = array(UINT32, [1])
    for _ in range(depth - 1):
        v = array(ARRAY, [v])
    return v


# ---- rewriting a real file through gguf-py -------------------------------------------------

def rewrite(src: Path, dst: Path, arch: str | None = None, retype: dict | None = None,
            extra: dict | None = None, tensors: dict | None = None, drop: set | None = None,
            replace: dict | None = None) -> Path:
    """A copy of src through gguf-py: general.architecture (and its key prefix) renamed, the
    tensors in retype stored as that type (zero bytes of the right size), extra keys added (name:
    (value, GGUFValueType)), extra tensors appended (name: numpy array), the keys and tensors named
    in drop left out, the keys in replace given new values (name: value, of the key's type)."""
    import gguf
    import numpy as np

    r = gguf.GGUFReader(src)
    old = r.fields["general.architecture"].contents()
    new = arch or old
    w = gguf.GGUFWriter(dst, new)
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture" or k in (drop or ()):
            continue
        nk = new + k[len(old):] if k.startswith(old + ".") else k
        sub = f.types[-1] if f.types[0] == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(nk, (replace or {}).get(k, f.contents()), f.types[0], sub_type=sub)
    for k, (v, t) in (extra or {}).items():
        w.add_key_value(k, v, t)
    for x in r.tensors:
        if x.name in (drop or ()):
            continue
        ty = (retype or {}).get(x.name)
        if ty is None:
            w.add_tensor(x.name, np.asarray(x.data), raw_shape=x.data.shape, raw_dtype=x.tensor_type)
            continue
        cols, rows = int(x.shape[0]), int(x.shape[1])
        be, bb = gguf.GGML_QUANT_SIZES[ty]
        assert cols % be == 0, f"{x.name}: {cols} columns are not whole {ty.name} blocks"
        w.add_tensor(x.name, np.zeros(rows * cols // be * bb, np.uint8), raw_shape=[rows, cols // be * bb],
                     raw_dtype=ty)
    for k, v in (tensors or {}).items():
        w.add_tensor(k, v)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return dst
