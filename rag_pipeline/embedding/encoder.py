"""Load the configured sentence-transformers model and encode queries and passages.

The model's *identity* (name, weights hash, dimension, prompts, normalization) is what the
index records and what the embedding cache is keyed by: two models never share vectors.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_pipeline.config import BUILTIN_MODEL, apply_offline_environment, hub_offline

apply_offline_environment()  # HF_HUB_OFFLINE etc. before sentence_transformers is imported


@dataclass(frozen=True)
class ModelIdentity:
    name: str
    weights_sha256: str
    dimension: int
    query_prompt: str
    passage_prompt: str
    normalize: bool = True
    precision: str = "fp32"  # vectors of two precisions are two models: they never share a cache or an index

    @property
    def key(self) -> str:
        """Short stable key for cache rows and index manifests (fp32 keys predate `precision`)."""
        fields = {k: v for k, v in self.__dict__.items() if not (k == "precision" and v == "fp32")}
        blob = json.dumps(fields, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def as_dict(self) -> dict:
        return {**self.__dict__, "key": self.key}


class ModelLoadError(RuntimeError):
    """The configured embedding model cannot be loaded (missing folder, not cached, damaged)."""


class ModelMismatchError(RuntimeError):
    """The index was built with a different embedding model than the one configured."""


class Encoder:
    """A loaded model plus its identity. Passages are encoded longest-first in batches."""

    def __init__(self, model, identity: ModelIdentity, batch_size: int = 32, backend=None):
        self.model = model  # the sentence-transformers model: tokenizer, limits, and fp32/bf16/int8 encoding
        self.identity = identity
        self.batch_size = batch_size
        self.backend = backend  # an OnnxPassageEncoder encodes instead when set (int8-onnx)

    def encode_passages(
        self, texts: list[str], show_progress: bool = False, on_batch: Callable[[int], None] | None = None
    ) -> np.ndarray:
        """Vectors in the order of ``texts``; ``on_batch(n)`` is called after each batch of n (progress)."""
        if not texts:
            return np.zeros((0, self.identity.dimension), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # less padding per batch
        prompted = [self.identity.passage_prompt + texts[i] for i in order]
        if on_batch is None:
            vectors = self._encode(prompted, show_progress)
        else:  # one batch per call: the same batches encode() would form from the sorted texts
            parts = []
            for start in range(0, len(prompted), self.batch_size):
                parts.append(self._encode(prompted[start:start + self.batch_size], False))
                on_batch(len(parts[-1]))
            vectors = np.concatenate(parts)
        out = np.empty_like(vectors)
        out[order] = vectors
        return out

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for `text`, without special tokens: the unit chunk sizes are in."""
        return len(self.model.tokenizer(text, add_special_tokens=False)["input_ids"])

    @property
    def passage_token_limit(self) -> int:
        """Tokens of passage text the model reads: max sequence minus the prompt and [CLS]/[SEP]."""
        return int(self.model.max_seq_length) - 2 - self.count_tokens(self.identity.passage_prompt)

    def encode_query(self, text: str) -> np.ndarray:
        return self._encode([self.identity.query_prompt + text], False)[0]

    def _encode(self, texts: list[str], show_progress: bool) -> np.ndarray:
        if self.backend is not None:
            return self.backend.encode(texts)
        return np.asarray(
            self.model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=self.identity.normalize,
                convert_to_numpy=True,
                show_progress_bar=show_progress,
            ),
            dtype=np.float32,
        )


def resolve_model_path(spec: str, cache_dir: Path) -> tuple[str, dict | None]:
    """Return a loadable model path/id and, for the built-in model, its recorded identity."""
    if spec == BUILTIN_MODEL:
        from rag_pipeline.embedding.e5_build import build_e5_small

        dest = cache_dir / "multilingual-e5-small"
        return str(dest), build_e5_small(dest)
    return spec, None


PRECISIONS = ("fp32", "bf16", "int8", "int8-onnx")


def encoder_for(settings) -> Encoder:
    """The encoder a Settings object configures (model, cache folder, batch size, precision)."""
    return load_encoder(settings.embedding_model, str(settings.model_cache_dir), settings.embed_batch_size, settings.embedding_precision)


def apply_precision(model, precision: str):
    """fp32 as loaded; bf16 casts the weights (AVX512-BF16/AMX run it natively); int8 quantizes
    every Linear layer dynamically (VNNI). Both are derived offline from the local fp32 weights."""
    import torch

    if precision not in PRECISIONS:
        raise ValueError(f"embedding precision must be one of {PRECISIONS}, got {precision!r}")
    if precision == "bf16":
        return model.to(torch.bfloat16)
    if precision == "int8":  # int8-onnx keeps the fp32 model for its tokenizer; onnx_backend encodes
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            warnings.simplefilter("ignore", UserWarning)
            return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return model


@lru_cache(maxsize=4)
def load_encoder(spec: str, cache_dir: str, batch_size: int = 32, precision: str = "fp32") -> Encoder:
    """Load once per process; the model weights are the expensive part of a query."""
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    try:
        path, built = resolve_model_path(spec, Path(cache_dir))
        model = SentenceTransformer(path, device="cpu", local_files_only=hub_offline())
    except (OSError, ValueError) as exc:
        raise ModelLoadError(
            f"cannot load the embedding model {spec!r} (RAG_EMBEDDING_MODEL): {str(exc).splitlines()[0].rstrip('.')}. "
            f"Nothing downloads at run time: use {BUILTIN_MODEL!r} (built from an installed package), a local "
            "sentence-transformers folder, or a hub id already in the local Hugging Face cache"
        ) from exc
    model = apply_precision(model, precision)
    if built is not None:
        identity = ModelIdentity(
            name=built["name"],
            weights_sha256=built["weights_sha256"],
            dimension=int(built["dimension"]),
            query_prompt=built["query_prompt"],
            passage_prompt=built["passage_prompt"],
            normalize=bool(built["normalize"]),
        )
    else:
        identity = _identity_of_any(spec, model)
    identity = replace(identity, precision=precision)
    backend = _onnx_backend(path, Path(cache_dir), identity, model, batch_size) if precision == "int8-onnx" else None
    return Encoder(model, identity, batch_size, backend)


def _onnx_backend(path: str, cache_dir: Path, identity: ModelIdentity, model, batch_size: int):
    """ONNX Runtime int8 encoder, exported once from the local weights (a minute) and then reused."""
    from rag_pipeline.embedding.onnx_backend import OnnxPassageEncoder, export_onnx_int8

    if not Path(path, "config.json").is_file():
        raise ModelLoadError(
            f"int8-onnx needs the model as a local folder (the built-in one or a path), not {path!r}: "
            "export reads its weights, and nothing downloads at run time"
        )
    onnx_path = export_onnx_int8(Path(path), cache_dir / "onnx" / f"{identity.key}.onnx")
    return OnnxPassageEncoder(Path(path), onnx_path, int(model.max_seq_length), batch_size)


def _identity_of_any(spec: str, model) -> ModelIdentity:
    """Identity for an arbitrary sentence-transformers model: hash its weight files if local."""
    prompts = getattr(model, "prompts", {}) or {}
    digest = hashlib.sha256()
    local = Path(spec)
    files = sorted(local.rglob("*.safetensors")) + sorted(local.rglob("*.bin")) if local.exists() else []
    for f in files:
        digest.update(f.read_bytes())
    if not files:
        digest.update(spec.encode())
    return ModelIdentity(
        name=spec,
        weights_sha256=digest.hexdigest(),
        dimension=int(model.get_sentence_embedding_dimension()),
        query_prompt=prompts.get("query", ""),
        passage_prompt=prompts.get("passage", prompts.get("document", "")),
        normalize=True,
    )
