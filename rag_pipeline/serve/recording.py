"""A RagIndex that also hands back the hits its `ask` retrieved (for the query log and the debug
table), without retrieving twice and without changing the query module."""

from __future__ import annotations

import threading

from rag_pipeline.query.answer import Answer
from rag_pipeline.query.api import RagIndex
from rag_pipeline.query.filters import Principal

_last = threading.local()  # each worker thread runs one request at a time


class RecordingIndex(RagIndex):
    def _retrieve(self, *args, **kwargs):
        hits, extra = super()._retrieve(*args, **kwargs)
        _last.hits = hits
        return hits, extra


def ask_with_hits(index: RecordingIndex, question: str, k: int, principal: Principal) -> tuple[Answer, list[dict]]:
    """`index.ask` plus the hits it retrieved (as dicts with every arm's rank)."""
    _last.hits = []
    answer = index.ask(question, k=k, principal=principal)
    hits = getattr(_last, "hits", [])
    _last.hits = []
    return answer, hits.to_dicts() if hasattr(hits, "to_dicts") else list(hits)
