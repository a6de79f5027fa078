"""Load the configured sentence-transformers model and encode queries and passages.

The model's *identity* (name, weights hash, dimension, prompts, normalization) is what the
index records and what the embedding cache is keyed by: two models never share vectors.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from rag_pipeline.config import BUILTIN_MODEL, apply_offline_environment, compute_threads, hub_offline
from rag_pipeline.embedding.query_encoder import TokenCounter, load_query_encoder, supported_layout

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
    """A loaded model plus its identity. Passages are encoded longest-first in batches.

    With ``load_query_encoder`` set (fp32, a folder the numpy encoder reproduces), queries are
    encoded without torch, and each part loads on first use only: the sentence-transformers model
    by ``load_model`` (passages; token counts once it is loaded), the numpy one by
    ``load_query_encoder`` (queries), the tokenizer alone by ``load_token_counter`` (token counts
    while the model is not loaded; dropped when it loads). A cold `rag ask` never imports torch
    (issue 19); an indexing run never holds the query encoder, and the light tokenizer (~290 MB for
    the built-in model's 250k-word vocabulary) never beside the model's own."""

    def __init__(self, model, identity: ModelIdentity, batch_size: int = 32, backend=None, *, load_model=None,
                 load_query_encoder=None, load_token_counter=None, load_token_states=None):
        self._model = model  # the sentence-transformers model: tokenizer, limits, and fp32/bf16/int8 encoding
        self._load_model = load_model
        self._load_query_encoder = load_query_encoder
        self._query_encoder = None
        self._load_token_states = load_token_states
        self._token_states = None
        self._load_token_counter = load_token_counter
        self._token_counter = None
        self._model_lock = threading.Lock()
        self.identity = identity
        self.batch_size = batch_size
        self.backend = backend  # an OnnxPassageEncoder encodes instead when set (int8-onnx)

    @property
    def model(self):
        if self._model is None:
            with self._model_lock:
                if self._model is None:
                    self._model = self._load_model()
                    self._token_counter = None  # the model's own tokenizer counts from now on
        return self._model

    @model.setter
    def model(self, value) -> None:
        self._model = value

    def unload(self) -> None:
        """Let go of the passage model, the token counter and the token states (their ONNX session,
        ~100 MB) when they can load again on next use.

        A step that may have loaded them (chunks, embeddings, golden_eval's answers) calls
        this before it ends: in the in-process executor every later step of the run (the index
        build, housekeeping) otherwise carries the weights and tokenizer, and the step hook's
        `gc.freeze` keeps them for the process's life (torch modules hold reference cycles only a
        collection frees): bench/README.md, "The model let go after its steps". The query encoder
        stays: queries use it."""
        if self._load_model is None:  # handed a model: nothing could load it again
            return
        with self._model_lock:
            self._model = None
            self._token_counter = None
            if self._load_token_states is not None:
                self._token_states = None

    @property
    def token_states(self):
        """The token_states.TokenStates of this model (query-time token recall), or None when the
        folder's layout is not one it runs (a hub id, another architecture). It reads with the
        query encoder's tokenizer when there is one (one 250k-word vocabulary in memory)."""
        if self._token_states is None and self._load_token_states is not None:
            tokenizer = self.query_encoder.tokenizer if self._load_query_encoder is not None else None
            with self._model_lock:
                if self._token_states is None:
                    self._token_states = self._load_token_states(tokenizer)
        return self._token_states

    @property
    def query_encoder(self):
        """The query_encoder.QueryEncoder, or None: the model encodes queries."""
        if self._query_encoder is None and self._load_query_encoder is not None:
            with self._model_lock:
                if self._query_encoder is None:
                    self._query_encoder = self._load_query_encoder()
        return self._query_encoder

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

    @property
    def token_counter(self) -> TokenCounter | None:
        """The tokenizer alone (query_encoder.TokenCounter) while the model is not loaded and the
        folder allows it: a step that chunks but embeds nothing never loads torch or the weights."""
        if self._model is not None or self._load_token_counter is None:
            return None
        if self._token_counter is None:
            with self._model_lock:
                if self._token_counter is None:
                    self._token_counter = self._load_token_counter()
        return self._token_counter

    def count_tokens(self, text: str) -> int:
        """Tokens the model sees for `text`, without special tokens: the unit chunk sizes are in."""
        counter = self.token_counter
        if counter is not None:
            return counter.count(text)
        return len(self.model.tokenizer(text, add_special_tokens=False)["input_ids"])

    @property
    def passage_token_limit(self) -> int:
        """Tokens of passage text the model reads: max sequence minus the prompt and [CLS]/[SEP]."""
        counter = self.token_counter
        max_seq_length = counter.max_seq_length if counter is not None else self.model.max_seq_length
        return int(max_seq_length) - 2 - self.count_tokens(self.identity.passage_prompt)

    def encode_query(self, text: str) -> np.ndarray:
        if self.query_encoder is not None:
            return self.query_encoder.encode(self.identity.query_prompt + text)
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
    """The encoder a Settings object configures (model, cache folder, batch size, precision, device)."""
    return load_encoder(settings.embedding_model, str(settings.model_cache_dir), settings.embed_batch_size,
                        settings.embedding_precision, settings.embedding_device)


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
def load_encoder(spec: str, cache_dir: str, batch_size: int = 32, precision: str = "fp32", device: str = "cpu") -> Encoder:
    """Load once per process; the model weights are the expensive part of a query.

    At fp32, the built-in model and any local folder of the same layout (BERT, mean pooling,
    normalize: `query_encoder.supported_layout`) load nothing here: the identity is read off the
    files, the query encoder loads on the first query (no torch), the sentence-transformers
    model on the first passages or token counts. So a query, or a run that embeds and chunks
    nothing, never imports torch. Anything else loads now."""
    path, built = _resolve_or_fail(spec, cache_dir)
    layout = supported_layout(Path(path))  # None for a hub id or a missing path
    if precision == "fp32" and layout:
        identity = _identity_of_built(built) if built is not None else _identity_of_folder(spec, Path(path))
        identity = replace(identity, precision=precision)
        return Encoder(None, identity, batch_size, load_model=lambda: _sentence_transformer(spec, path, precision, device),
                       load_query_encoder=lambda: _query_encoder(spec, path, identity.dimension, query_layers_export_path(cache_dir, identity)),
                       load_token_counter=lambda: _token_counter(spec, path),
                       load_token_states=lambda tokenizer: _token_states(path, layout, Path(cache_dir), identity, tokenizer))
    model = _sentence_transformer(spec, path, precision, device)
    identity = _identity_of_built(built) if built is not None else _identity_of_any(spec, model)
    identity = replace(identity, precision=precision)
    backend = _onnx_backend(path, Path(cache_dir), identity, model, batch_size) if precision == "int8-onnx" else None
    load_token_states = (lambda tokenizer: _token_states(path, layout, Path(cache_dir), identity, tokenizer)) if layout else None
    return Encoder(model, identity, batch_size, backend, load_token_states=load_token_states)


def token_states_export_path(cache_dir: Path, identity: ModelIdentity) -> Path:
    """Where the int8 ONNX export of `identity`'s weights lives: the int8-onnx backend's file."""
    return Path(cache_dir) / "onnx" / f"{replace(identity, precision='int8-onnx').key}.onnx"


def query_layers_export_path(cache_dir: Path, identity: ModelIdentity) -> Path:
    """Where the fp32 ONNX export of `identity`'s encoder layers lives (the query vector's)."""
    return Path(cache_dir) / "onnx" / f"{identity.key}-layers.onnx"


def _token_states(path: str, max_length: int, cache_dir: Path, identity: ModelIdentity, tokenizer=None):
    from rag_pipeline.embedding.token_states import TokenStates

    onnx_path = token_states_export_path(cache_dir, identity)
    return TokenStates(Path(path), max_length, onnx_path if onnx_path.is_file() else None, tokenizer=tokenizer)


def export_query_graphs(settings=None) -> tuple[Path, Path] | None:
    """Export the configured model's two query-time ONNX graphs (a minute or two, once per model;
    scripts/install.sh runs it): int8 for the token states, the fp32 encoder layers for the
    question's vector. None when the model is not a folder of the BERT + mean pooling layout: its
    token recall is then not computed and its queries go through sentence-transformers. Without
    them a query still works, slower: numpy token states and numpy layers."""
    from rag_pipeline.config import Settings
    from rag_pipeline.embedding.onnx_backend import export_onnx_fp32_layers, export_onnx_int8

    settings = settings or Settings()
    encoder = encoder_for(settings)
    path, _ = _resolve_or_fail(settings.embedding_model, str(settings.model_cache_dir))
    if not supported_layout(Path(path)):
        return None
    return (
        export_onnx_int8(Path(path), token_states_export_path(settings.model_cache_dir, encoder.identity)),
        export_onnx_fp32_layers(Path(path), query_layers_export_path(settings.model_cache_dir, encoder.identity)),
    )


def _load_error(spec: str, exc: BaseException) -> ModelLoadError:
    return ModelLoadError(
        f"cannot load the embedding model {spec!r} (RAG_EMBEDDING_MODEL): {str(exc).splitlines()[0].rstrip('.')}. "
        f"Nothing downloads at run time: use {BUILTIN_MODEL!r} (built from an installed package), a local "
        "sentence-transformers folder, or a hub id already in the local Hugging Face cache"
    )


def _resolve_or_fail(spec: str, cache_dir: str) -> tuple[str, dict | None]:
    try:
        return resolve_model_path(spec, Path(cache_dir))
    except (OSError, ValueError) as exc:
        raise _load_error(spec, exc) from exc


def _query_encoder(spec: str, path: str, dimension: int, layers: Path):
    try:
        query_encoder = load_query_encoder(path, layers)
    except Exception as exc:  # a damaged tokenizer.json or weights file: the same error as the model's
        raise _load_error(spec, exc) from exc
    if query_encoder is None or query_encoder.dimension != dimension:
        raise ModelLoadError(f"the embedding model {spec!r} changed on disk: its files no longer match its identity ({dimension} dimensions)")
    return query_encoder


def _token_counter(spec: str, path: str) -> TokenCounter:
    try:
        return TokenCounter(Path(path))
    except Exception as exc:  # a damaged tokenizer.json: the same error as the model's
        raise _load_error(spec, exc) from exc


def torch_device(device: str) -> str:
    """The torch device RAG_EMBEDDING_DEVICE names: cpu, cuda, cuda:N, or auto (cuda when torch sees one)."""
    import torch

    wanted = (device or "cpu").strip().lower()
    if wanted == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if wanted == "cpu":
        return "cpu"
    if wanted == "cuda" or re.fullmatch(r"cuda:\d+", wanted):
        if not torch.cuda.is_available():
            raise ModelLoadError(f"RAG_EMBEDDING_DEVICE={device} but torch sees no CUDA device (the CPU build of torch, "
                                 "or no GPU on this machine): use cpu or auto")
        return wanted
    raise ModelLoadError(f"RAG_EMBEDDING_DEVICE must be cpu, cuda, cuda:N or auto, got {device!r}")


def _sentence_transformer(spec: str, path: str, precision: str, device: str = "cpu"):
    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(compute_threads())
    where = torch_device(device)
    if where != "cpu" and precision not in ("fp32", "bf16"):
        raise ModelLoadError(f"embedding precision {precision!r} runs on the CPU only; on {where} use fp32 or bf16")
    try:
        model = SentenceTransformer(path, device=where, local_files_only=hub_offline())
    except (OSError, ValueError) as exc:
        raise _load_error(spec, exc) from exc
    return apply_precision(model, precision)


def _identity_of_built(built: dict) -> ModelIdentity:
    return ModelIdentity(
        name=built["name"],
        weights_sha256=built["weights_sha256"],
        dimension=int(built["dimension"]),
        query_prompt=built["query_prompt"],
        passage_prompt=built["passage_prompt"],
        normalize=bool(built["normalize"]),
    )


def _onnx_backend(path: str, cache_dir: Path, identity: ModelIdentity, model, batch_size: int):
    """ONNX Runtime int8 encoder, exported once from the local weights (a minute) and then reused."""
    from rag_pipeline.embedding.onnx_backend import OnnxPassageEncoder, export_onnx_int8

    if not Path(path, "config.json").is_file():
        raise ModelLoadError(
            f"int8-onnx needs the model as a local folder (the built-in one or a path), not {path!r}: "
            "export reads its weights, and nothing downloads at run time"
        )
    onnx_path = export_onnx_int8(Path(path), token_states_export_path(cache_dir, identity))
    return OnnxPassageEncoder(Path(path), onnx_path, int(model.max_seq_length), batch_size)


def _identity_of_any(spec: str, model) -> ModelIdentity:
    """Identity for an arbitrary sentence-transformers model: hash its weight files if local."""
    return _identity(spec, int(model.get_sentence_embedding_dimension()), getattr(model, "prompts", {}) or {})


def _identity_of_folder(spec: str, folder: Path) -> ModelIdentity:
    """The identity `_identity_of_any` gives the loaded model, read off its folder's files: the
    hidden size (mean pooling keeps it) and the prompts sentence-transformers would load from
    config_sentence_transformers.json."""
    try:
        dimension = int(json.loads((folder / "config.json").read_text(encoding="utf-8"))["hidden_size"])
        st_config = folder / "config_sentence_transformers.json"
        config = json.loads(st_config.read_text(encoding="utf-8")) if st_config.is_file() else {}
    except (OSError, ValueError, KeyError) as exc:
        raise _load_error(spec, exc) from exc
    return _identity(spec, dimension, config.get("prompts") or {})


def _identity(spec: str, dimension: int, prompts: dict) -> ModelIdentity:
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
        dimension=dimension,
        query_prompt=prompts.get("query", ""),
        passage_prompt=prompts.get("passage", prompts.get("document", "")),
        normalize=True,
    )
