"""Optional cross-encoder rerank of the fused candidates: top-N in, top-k out.

A cross-encoder reads the query and a passage together and scores the pair, which is more
accurate than comparing two independently computed vectors but too slow for the whole index,
so it rescores only the first N fused hits (Nogueira & Cho, "Passage Re-ranking with BERT",
2019, arXiv:1901.04085).

No reranker weights ship offline here, so the stage is off unless `RAG_RERANK_MODEL` names
a sentence-transformers `CrossEncoder` (a local folder, a folder name under the model cache, or
a hub id already in the local Hugging Face cache). A configured reranker that fails for any
reason (missing weights, a runtime error, the wrong number of scores) never fails the query:
the fused order stands and the outcome says why (`status="degraded"`, `note="rerank skipped: ..."`).

`rerank` works on any hit dataclass with the fields `fused_rank`, `rerank_score` and
`rerank_rank` (all defaulting to None) and returns new objects via `dataclasses.replace`.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal, Protocol, Sequence, runtime_checkable

from rag_pipeline.chunking import HEADING_SEPARATOR
from rag_pipeline.config import apply_offline_environment, default_model_cache_dir, env_str, hub_offline
from rag_pipeline.text import normalize

apply_offline_environment()  # as in embedding.encoder: nothing downloads at run time

log = logging.getLogger(__name__)

RERANK_FIELDS = ("fused_rank", "rerank_score", "rerank_rank")
RerankStatus = Literal["off", "reranked", "degraded"]
OFF_NOTE = "rerank off (set RAG_RERANK_MODEL to a sentence-transformers CrossEncoder id or path)"


@dataclass(frozen=True)
class RerankSettings:
    """Which cross-encoder reranks, and how many fused hits it reads. `model=None` means off."""

    model: str | None = None
    top_n: int = 50
    batch_size: int = 16

    def __post_init__(self):
        if self.top_n < 1:
            raise ValueError(f"rerank top_n must be at least 1, got {self.top_n}")
        if self.batch_size < 1:
            raise ValueError(f"rerank batch_size must be at least 1, got {self.batch_size}")

    @classmethod
    def from_env(cls) -> "RerankSettings":
        """`RAG_RERANK_MODEL` (unset or empty: off) and `RAG_RERANK_TOP_N` (default 50)."""
        model = env_str("RAG_RERANK_MODEL").strip() or None
        raw_top_n = env_str("RAG_RERANK_TOP_N").strip()
        try:
            top_n = int(raw_top_n) if raw_top_n else cls.top_n
        except ValueError:
            raise ValueError(f"RAG_RERANK_TOP_N must be an integer, got {raw_top_n!r}") from None
        return cls(model=model, top_n=top_n)


@runtime_checkable
class Reranker(Protocol):
    """Anything that scores (query, passage) pairs: higher means more relevant."""

    def score(self, query: str, passages: list[str]) -> list[float]: ...


@dataclass(frozen=True)
class RerankOutcome:
    hits: list
    status: RerankStatus
    note: str


class RerankerLoadError(RuntimeError):
    """The configured cross-encoder could not be loaded (missing, not cached offline, or untrained)."""


def passage_text(heading_path: str, text: str) -> str:
    """What the cross-encoder reads for a hit: heading path + text, as the pipeline embeds it
    (see `chunking._embed_text`; `heading_path` here is the stored, ' > '-joined string)."""
    context = HEADING_SEPARATOR.join(h for h in heading_path.split(HEADING_SEPARATOR) if h.strip())
    return normalize(f"{context}\n{text}") if context and context != text else text


def rerank(query: str, hits: Sequence, reranker: Reranker | None, top_n: int, k: int) -> RerankOutcome:
    """Rescore the first `top_n` fused hits with `reranker` and return the best `k`.

    Reranked hits are sorted by the reranker's score (ties keep the fused order) and gain
    `fused_rank` (1-based fused position), `rerank_score` and `rerank_rank`; their fused score
    and arm ranks are kept. Hits past `top_n` follow in fused order, unscored. Any failure of
    the reranker returns the first `k` fused hits unchanged with status "degraded".
    """
    if top_n < 1:
        raise ValueError(f"top_n must be at least 1, got {top_n}")
    if k < 0:
        raise ValueError(f"k must be non-negative, got {k}")
    hits = list(hits)
    if reranker is None:
        return RerankOutcome(hits[:k], "off", OFF_NOTE)
    _check_rerank_fields(hits)
    head, tail = hits[:top_n], hits[top_n:]
    if not head:
        return RerankOutcome([], "reranked", "no hits to rerank")
    try:
        scores = [float(x) for x in reranker.score(query, [passage_text(h.heading_path, h.text) for h in head])]
        if len(scores) != len(head):
            raise ValueError(f"reranker returned {len(scores)} scores for {len(head)} passages")
        if not all(math.isfinite(x) for x in scores):
            raise ValueError("reranker returned non-finite scores")
    except Exception as exc:  # any reranker failure degrades to the fused order, never fails the query
        note = f"rerank skipped: {type(exc).__name__}: {exc}"
        log.warning("%s", note)
        return RerankOutcome(hits[:k], "degraded", note)
    order = sorted(range(len(head)), key=lambda i: (-scores[i], i))  # stable on ties by fused position
    reranked = [
        dataclasses.replace(head[i], fused_rank=i + 1, rerank_score=scores[i], rerank_rank=r)
        for r, i in enumerate(order, start=1)
    ]
    rest = [dataclasses.replace(h, fused_rank=len(head) + j) for j, h in enumerate(tail, start=1)]
    name = getattr(reranker, "name", type(reranker).__name__)
    return RerankOutcome((reranked + rest)[:k], "reranked", f"reranked the top {len(head)} fused hits with {name}")


def _check_rerank_fields(hits: list) -> None:
    if not hits:
        return
    if not dataclasses.is_dataclass(hits[0]):
        raise TypeError(f"rerank needs dataclass hits, got {type(hits[0]).__name__}")
    missing = set(RERANK_FIELDS) - {f.name for f in dataclasses.fields(hits[0])}
    if missing:
        raise TypeError(
            f"{type(hits[0]).__name__} lacks the rerank fields {sorted(missing)}; add them with default None"
        )


def load_reranker(settings: RerankSettings) -> Reranker | None:
    """The configured reranker (loaded lazily on first use), or None when rerank is off."""
    if settings.model is None:
        return None
    return CrossEncoderReranker(settings.model, batch_size=settings.batch_size)


class CrossEncoderReranker:
    """A sentence-transformers `CrossEncoder`, loaded on first use and shared per model id.

    `model_id_or_path` is a local folder, a folder name under the model cache (data/models),
    or a hub id; with HF_HUB_OFFLINE=1 (the default here) a hub id must already be in the local
    Hugging Face cache, so a missing model fails at once instead of hanging on a download.
    A checkpoint without a trained classification head (a bare encoder such as the embedding
    model) would score at random, so it is refused unless `allow_untrained_head=True`, which
    gives it a fresh one-score head (for plumbing tests only).
    """

    def __init__(
        self,
        model_id_or_path: str,
        batch_size: int = 16,
        max_length: int = 512,
        device: str = "cpu",
        allow_untrained_head: bool = False,
    ):
        if not model_id_or_path or not model_id_or_path.strip():
            raise ValueError("model_id_or_path must name a CrossEncoder folder or hub id")
        if batch_size < 1 or max_length < 1:
            raise ValueError(f"batch_size and max_length must be positive, got {batch_size}, {max_length}")
        self.name = model_id_or_path
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.allow_untrained_head = allow_untrained_head
        self._load_error: str | None = None

    @property
    def model(self):
        """The loaded `CrossEncoder`; raises `RerankerLoadError` (and remembers it) if it cannot load."""
        if self._load_error is not None:
            raise RerankerLoadError(self._load_error)
        try:
            return _load_cross_encoder(
                resolve_model(self.name, default_model_cache_dir()),
                self.max_length,
                self.device,
                hub_offline(),
                self.allow_untrained_head,
            )
        except RerankerLoadError as exc:
            self._load_error = str(exc)
            raise
        except Exception as exc:
            self._load_error = f"cannot load rerank model {self.name!r}: {type(exc).__name__}: {exc}"
            raise RerankerLoadError(self._load_error) from exc

    def score(self, query: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        import numpy as np

        scores = np.asarray(
            self.model.predict(
                [(query, p) for p in passages],
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
            ),
            dtype=np.float64,
        )
        if scores.ndim == 2 and scores.shape[1] == 1:
            scores = scores[:, 0]
        if scores.ndim != 1:
            raise ValueError(f"{self.name} gives {scores.shape[-1]} scores per pair; a reranker must give one")
        return scores.tolist()

    def __repr__(self) -> str:
        return f"CrossEncoderReranker({self.name!r}, batch_size={self.batch_size}, max_length={self.max_length})"


def resolve_model(spec: str, cache_dir: Path) -> str:
    """A local folder (as given, or under the model cache) or, failing that, a hub id.

    Something that looks like a path (absolute, ./ or ~ prefixed, or with more than one '/')
    and does not exist raises `RerankerLoadError` here rather than being tried as a hub id.
    """
    spec = spec.strip()
    path = Path(spec).expanduser()
    if path.exists():
        return str(path.resolve())
    cached = cache_dir / spec
    if not path.is_absolute() and cached.is_dir():
        return str(cached.resolve())
    windows_path = os.sep != "/" and os.sep in spec
    if path.is_absolute() or spec.startswith((".", "~")) or spec.count("/") > 1 or windows_path:
        raise RerankerLoadError(f"rerank model path {spec!r} does not exist (nor under {cache_dir})")
    return spec


@lru_cache(maxsize=2)
def _load_cross_encoder(spec: str, max_length: int, device: str, local_files_only: bool, allow_untrained_head: bool):
    from sentence_transformers import CrossEncoder

    try:
        model = CrossEncoder(
            spec,
            device=device,
            max_length=max_length,
            local_files_only=local_files_only,
            **({"num_labels": 1} if allow_untrained_head else {}),
        )
    except OSError as exc:
        cause = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if local_files_only:
            where = (
                "neither a local folder nor in the local Hugging Face cache "
                "(HF_HUB_OFFLINE=1: nothing is downloaded; copy the model folder under data/models)"
            )
        else:
            where = "not loadable"
        raise RerankerLoadError(f"rerank model {spec!r} is {where}: {cause}") from exc
    architectures = list(getattr(getattr(model, "config", None), "architectures", None) or [])
    if architectures and not any("For" in a for a in architectures) and not allow_untrained_head:
        raise RerankerLoadError(
            f"rerank model {spec!r} is a bare encoder ({', '.join(architectures)}) with no trained "
            "classification head: its scores would be random; configure a trained cross-encoder"
        )
    return model
