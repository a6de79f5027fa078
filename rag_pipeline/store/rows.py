"""Build the Arrow tables the lake publishes from pipeline records (pure functions)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import hashlib
import json

import numpy as np
import pyarrow as pa

from rag_pipeline.chunking import HEADING_SEPARATOR, Chunk
from rag_pipeline.ingest.textutil import display_name
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.serialize import ParseHeader
from rag_pipeline.ingest.scan import RawFile
from rag_pipeline.ingest.triage import QuarantineRecord
from rag_pipeline.store import schema as s
from rag_pipeline.text import search_tokens


_ACL_KEYS = ("status", "security_level", "department", "access_groups", "owner")


def _acl(raw: RawFile) -> dict:
    m = raw.metadata
    return {
        "status": m.status,
        "security_level": m.security_level,
        "department": m.department,
        "access_groups": list(m.access_groups),
        "owner": m.owner,
    }


def document_versions(raws: Iterable[RawFile], previous: pa.Table | None) -> dict[str, int]:
    """Version per document: carried over while the file hash is unchanged, bumped when it changes."""
    before: dict[str, tuple[str, int]] = {}
    if previous is not None and previous.num_rows:
        for row in previous.select(["doc_id", "sha256", "version"]).to_pylist():
            before[row["doc_id"]] = (row["sha256"], row["version"])
    versions = {}
    for raw in raws:
        sha, version = before.get(raw.doc_id, (None, 0))
        versions[raw.doc_id] = version if sha == raw.sha256 else version + 1
    return versions


def documents_table(
    raws: list[RawFile],
    parsed: Mapping[str, ParsedDocument | ParseHeader],
    chunk_counts: Mapping[str, int],
    versions: Mapping[str, int],
    indexed_at: str,
    chunk_digests: Mapping[str, str] | None = None,
) -> pa.Table:
    """One row per parsed file; `chunk_digests` (chunk_digests()) feed each row's `rows_digest`."""
    rows = []
    for raw in raws:
        doc = parsed.get(raw.doc_id)
        if doc is None:
            continue
        row = {
            "doc_id": raw.doc_id,
            "source": raw.source,
            "sha256": raw.sha256,
            "size": raw.size,
            "format": doc.format,
            "parser": doc.parser,
            "title": raw.metadata.title or doc.title or display_name(raw.path.stem),
            "language": raw.metadata.language or doc.language,
            "page_count": doc.page_count,
            "ocr_used": doc.ocr_used,
            "ocr_confidence": doc.ocr_confidence,
            **_acl(raw),
            "version": versions.get(raw.doc_id, 1),
            "n_chunks": chunk_counts.get(raw.doc_id, 0),
            "indexed_at": indexed_at,
        }
        rows.append({**row, "rows_digest": rows_digest(row, (chunk_digests or {}).get(raw.doc_id, ""))})
    return pa.Table.from_pylist(rows, schema=s.documents_schema())


# What of a document row is copied into each of its chunk rows (chunks_table): with the digest
# of its staged chunks, it decides whether the document's chunk rows would be written differently.
_DENORMALIZED = ("source", "title", "language", *_ACL_KEYS)


def rows_digest(document_row: Mapping, chunk_digest: str) -> str:
    """Digest of every input of a document's chunk rows (ROWS_VERSION included)."""
    fields = [ROWS_VERSION, chunk_digest, *(document_row[k] for k in _DENORMALIZED)]
    return hashlib.blake2b(json.dumps(fields, ensure_ascii=False).encode(), digest_size=16).hexdigest()


ROW_DIGEST_BATCH = 16_384  # chunk rows per polars frame: text is copied into it


def row_digest_scheme() -> str:
    """Which hash chunk_digests used: polars' row hash is stable within one polars version only,
    so a generation digested by another version compares unequal everywhere (a full build)."""
    import polars as pl

    return f"1-polars-{pl.__version__}"


def chunk_digests(chunks: pa.Table) -> dict[str, str]:
    """doc_id -> digest of its staged chunk rows (every column, in ordinal order).

    Rows are hashed by polars a batch at a time (memory: one batch of text, not the corpus's);
    per document the row hashes are digested in ordinal order.
    """
    import polars as pl

    parts = []
    for start in range(0, chunks.num_rows, ROW_DIGEST_BATCH):
        frame = pl.from_arrow(chunks.slice(start, ROW_DIGEST_BATCH).replace_schema_metadata(None))
        parts.append(frame.select("doc_id", "ordinal").with_columns(frame.hash_rows(seed=0).alias("hash")))
    if not parts:
        return {}
    grouped = pl.concat(parts).sort("doc_id", "ordinal").group_by("doc_id", maintain_order=True).agg("hash")
    return {
        doc_id: hashlib.blake2b(np.asarray(hashes, dtype=np.uint64).tobytes(), digest_size=16).hexdigest()
        for doc_id, hashes in zip(grouped["doc_id"].to_list(), grouped["hash"].to_list())
    }


def replaced_documents(previous: pa.Table | None, current: pa.Table) -> tuple[set[str], int] | None:
    """(documents whose chunk rows must be replaced: new, digest changed or gone; how many chunk rows
    that deletes and writes), or None when the previous generation carries no digests to compare
    with (build it whole)."""
    if previous is None or "rows_digest" not in previous.column_names:
        return None
    before = _by_doc(previous)
    if any(digest is None for digest, _ in before.values()):
        return None
    after = _by_doc(current)
    changed = {d for d, (digest, _) in after.items() if before.get(d, (None, 0))[0] != digest}
    gone = set(before) - set(after)
    rows = sum(before.get(d, (None, 0))[1] + after[d][1] for d in changed) + sum(before[d][1] for d in gone)
    return changed | gone, rows


def _by_doc(documents: pa.Table) -> dict[str, tuple[str | None, int]]:
    columns = (documents.column(c).to_pylist() for c in ("doc_id", "rows_digest", "n_chunks"))
    return {d: (digest, n) for d, digest, n in zip(*columns)}


def chunks_table(
    chunks: list[Chunk],
    raws: Mapping[str, RawFile],
    documents: Mapping[str, dict],
    vectors: Mapping[str, np.ndarray],
    dimension: int,
) -> pa.Table:
    """One row per chunk; ACL and lifecycle are denormalized so filters run inside the search."""
    rows = []
    for c in chunks:
        raw = raws[c.doc_id]
        doc = documents[c.doc_id]
        rows.append(
            {
                "chunk_id": c.chunk_id,
                "doc_id": c.doc_id,
                "source": raw.source,
                "title": doc["title"],
                "ordinal": c.ordinal,
                "page": c.page,
                "heading_path": HEADING_SEPARATOR.join(c.heading_path),
                "text": c.text,
                s.SEARCH_TEXT_COLUMN: " ".join(search_tokens(c.embed_text)),
                "language": doc["language"],
                "fingerprint": c.fingerprint,
                **_acl(raw),
                "vector": np.asarray(vectors[c.fingerprint], dtype=np.float32),
            }
        )
    return pa.Table.from_pylist(rows, schema=s.chunks_schema(dimension))


def quarantine_table(records: list[QuarantineRecord], quarantined_at: str) -> pa.Table:
    rows = [
        {
            "doc_id": r.doc_id,
            "source": r.source,
            "sha256": r.sha256,
            "size": r.size,
            "reason": r.reason,
            "detail": r.detail,
            "ocr_confidence": r.ocr_confidence,
            "quarantined_at": quarantined_at,
        }
        for r in records
    ]
    return pa.Table.from_pylist(rows, schema=s.quarantine_schema())


def fingerprint_diff(current: Iterable[str], previous: Iterable[str]) -> dict[str, int]:
    """Counts of chunk fingerprints that are new, unchanged or gone since the last index."""
    cur, prev = set(current), set(previous)
    return {"new": len(cur - prev), "same": len(cur & prev), "gone": len(prev - cur)}


_COMPARED = ("sha256", "title", "status", "security_level", "department", "access_groups", "owner")


def document_changes(previous: pa.Table | None, current: pa.Table) -> dict[str, int]:
    """Documents added, updated (content or metadata), unchanged and deleted since the served index."""
    def keyed(table):
        if table is None or table.num_rows == 0:
            return {}
        return {r["doc_id"]: tuple(str(r[c]) for c in _COMPARED) for r in table.select(["doc_id", *_COMPARED]).to_pylist()}

    before, after = keyed(previous), keyed(current)
    common = before.keys() & after.keys()
    return {
        "added": len(after.keys() - before.keys()),
        "updated": sum(1 for d in common if before[d] != after[d]),
        "unchanged": sum(1 for d in common if before[d] == after[d]),
        "deleted": len(before.keys() - after.keys()),
    }


# Bump when the rows built from the same inputs change (this module, text.search_tokens).
ROWS_VERSION = 1


SIGNATURE_SLICE_ROWS = 4_096


def input_signature(inputs: Iterable[pa.Table], model_key: str, dimension: int) -> str:
    """sha256 of everything a generation is built from: the staged raw files (content hash,
    sidecar metadata), parses, chunks and quarantine, the model, the published schemas. Equal
    signatures mean a new generation would serve exactly what the served one serves — decided
    without building its rows (vectors follow from chunk fingerprints and the model key).

    Hashed in fixed slices of combined columns, so equal values hash equal whatever their
    Arrow chunking, with memory bounded by a slice (SIGNATURE_SLICE_ROWS: combining and
    serializing copies the slice, so 65,536 parse rows held ~350 MB at once at 100k documents).
    """
    digest = hashlib.sha256(f"v{ROWS_VERSION}\0{model_key}\0{dimension}".encode())
    for schema in (s.documents_schema(), s.chunks_schema(dimension), s.quarantine_schema()):
        digest.update(schema.serialize())
    for table in inputs:
        digest.update(table.schema.serialize())
        for start in range(0, table.num_rows, SIGNATURE_SLICE_ROWS):
            for batch in table.slice(start, SIGNATURE_SLICE_ROWS).combine_chunks().to_batches():
                digest.update(batch.serialize())
    return digest.hexdigest()
