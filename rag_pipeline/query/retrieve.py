"""The two retrieval arms over the published chunks table, both pre-filtered in the engine."""

from __future__ import annotations

import numpy as np

from rag_pipeline.store.schema import SEARCH_TEXT_COLUMN
from rag_pipeline.text import search_tokens

RESULT_COLUMNS = ["chunk_id", "doc_id", "source", "title", "page", "heading_path", "text", "language", SEARCH_TEXT_COLUMN]


def dense_arm(table, query_vector: np.ndarray, where: str, limit: int) -> list[dict]:
    """Cosine nearest neighbours; `score` is the cosine similarity (1 - distance)."""
    rows = (
        table.search(query_vector.astype(np.float32), vector_column_name="vector")
        .metric("cosine")
        .where(where, prefilter=True)
        .select(RESULT_COLUMNS)
        .limit(limit)
        .to_list()
    )
    for row in rows:
        row["score"] = 1.0 - float(row.pop("_distance"))
    return rows


def keyword_arm(table, query: str, where: str, limit: int) -> list[dict]:
    """BM25 over the pre-tokenized column, with the query tokenized the same way."""
    tokens = search_tokens(query)
    if not tokens:
        return []
    rows = (
        table.search(" ".join(tokens), query_type="fts", fts_columns=SEARCH_TEXT_COLUMN)
        .where(where, prefilter=True)
        .select(RESULT_COLUMNS)
        .limit(limit)
        .to_list()
    )
    for row in rows:
        row["score"] = float(row.pop("_score"))
    return rows


def lexical_coverage(query: str, search_text: str) -> float:
    """Share of the query's content terms that occur in a chunk: "did the keyword arm match at all"."""
    terms = set(search_tokens(query))
    if not terms:
        return 0.0
    return len(terms & set(search_text.split())) / len(terms)
