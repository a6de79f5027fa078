"""Arrow schemas of the lake's tables, in one place so writers and readers agree."""

from __future__ import annotations

import pyarrow as pa

DOCUMENTS = "documents"
CHUNKS = "chunks"
QUARANTINE = "quarantine"
PARSE_CACHE = "parse_cache"
CHUNK_CACHE = "chunk_cache"
TERM_STATS = "term_stats"  # search term → chunks holding it, per generation (store.terms)
SEARCH_TEXT_COLUMN = "search_text"

_ACL_FIELDS = [
    pa.field("status", pa.string()),
    pa.field("security_level", pa.string()),
    pa.field("department", pa.string()),
    pa.field("access_groups", pa.list_(pa.string())),
    pa.field("owner", pa.string()),
]


def documents_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string()),
            pa.field("sha256", pa.string()),
            pa.field("size", pa.int64()),
            pa.field("format", pa.string()),
            pa.field("parser", pa.string()),
            pa.field("title", pa.string()),
            pa.field("language", pa.string()),
            pa.field("page_count", pa.int32()),
            pa.field("ocr_used", pa.bool_()),
            pa.field("ocr_confidence", pa.float32()),
            *_ACL_FIELDS,
            pa.field("version", pa.int32()),
            pa.field("n_chunks", pa.int32()),
            pa.field("indexed_at", pa.string()),
            # digest of everything this document's chunk rows are built from (store.rows.rows_digest):
            # equal in two generations = identical chunk rows, so a new generation rewrites only the others
            pa.field("rows_digest", pa.string()),
        ]
    )


def chunks_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_id", pa.string(), nullable=False),
            pa.field("doc_id", pa.string()),
            pa.field("source", pa.string()),
            pa.field("title", pa.string()),
            pa.field("ordinal", pa.int32()),
            pa.field("page", pa.int32()),
            pa.field("heading_path", pa.string()),
            pa.field("text", pa.string()),
            pa.field(SEARCH_TEXT_COLUMN, pa.string()),
            pa.field("language", pa.string()),
            pa.field("fingerprint", pa.string()),
            *_ACL_FIELDS,
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


def quarantine_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("doc_id", pa.string(), nullable=False),
            pa.field("source", pa.string()),
            pa.field("sha256", pa.string()),
            pa.field("size", pa.int64()),
            pa.field("reason", pa.string()),
            pa.field("detail", pa.string()),
            pa.field("ocr_confidence", pa.float32()),
            pa.field("quarantined_at", pa.string()),
        ]
    )


def embedding_cache_table(model_key: str) -> str:
    """One cache table per model identity: vectors of two models never mix, even by accident."""
    return f"embedding_cache_{model_key}"


def embedding_cache_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("cache_key", pa.string(), nullable=False),  # chunk text fingerprint
            pa.field("vector", pa.list_(pa.float32(), dimension)),
        ]
    )


def parse_cache_schema() -> pa.Schema:
    return pa.schema(
        [
            pa.field("cache_key", pa.string(), nullable=False),  # see ingest.serialize.parse_cache_key
            pa.field("outcome", pa.string()),  # JSON: a ParsedDocument or an unreadable reason
        ]
    )


def chunk_cache_schema() -> pa.Schema:
    """One row per document: its chunks as parallel lists (chunk_id[i], text[i], ...)."""
    return pa.schema(
        [
            pa.field("cache_key", pa.string(), nullable=False),  # see chunking.chunk_cache_key
            pa.field("chunk_id", pa.list_(pa.string())),
            pa.field("doc_id", pa.list_(pa.string())),
            pa.field("ordinal", pa.list_(pa.int32())),
            pa.field("text", pa.list_(pa.string())),
            pa.field("embed_text", pa.list_(pa.string())),
            pa.field("heading_path", pa.list_(pa.list_(pa.string()))),
            pa.field("page", pa.list_(pa.int32())),
            pa.field("fingerprint", pa.list_(pa.string())),
            pa.field("tokens", pa.list_(pa.int32())),  # model tokens of embed_text, for the chunks metadata
            pa.field("model_limit", pa.int32()),  # tokens the model reads: a fully cached run loads no tokenizer
        ]
    )
