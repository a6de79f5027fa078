"""Build the Arrow tables the lake publishes from pipeline records (pure functions)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rag_pipeline.chunking import HEADING_SEPARATOR, Chunk
from rag_pipeline.ingest.textutil import display_name
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.serialize import ParseHeader
from rag_pipeline.ingest.scan import RawFile
from rag_pipeline.ingest.triage import QuarantineRecord
from rag_pipeline.store import schema as s
from rag_pipeline.store.keyhash import count_in
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


def document_versions(files: pa.Table, previous: pa.Table | None) -> pa.Array:
    """Version per file of `files` (doc_id, sha256): the served document's while its file hash is
    unchanged, bumped when it changes, 1 for a new document."""
    if previous is None or previous.num_rows == 0:
        return pa.array(np.ones(files.num_rows, np.int32))
    at = pc.index_in(files.column("doc_id"), value_set=previous.column("doc_id").combine_chunks())
    before = pc.fill_null(previous.column("version").take(at), 0)
    same = pc.fill_null(pc.equal(previous.column("sha256").take(at), files.column("sha256")), False)
    return pc.if_else(same, before, pc.add(before, 1)).combine_chunks().cast(pa.int32())


def documents_table(
    raws: list[RawFile],
    parsed: Mapping[str, ParsedDocument | ParseHeader],
    chunk_counts: Mapping[str, int],
    versions: Mapping[str, int],
    indexed_at: str,
    chunk_digests: Mapping[str, str] | None = None,
) -> pa.Table:
    """One row per parsed file, from records (eval.build); `chunk_digests` (doc_id -> chunk digest)
    feed each row's `rows_digest`. A publish builds the same rows with documents_from_stage."""
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


def documents_from_stage(files: pa.Table, headers: pa.Table, chunks: pa.Table, previous: pa.Table | None, indexed_at: str) -> pa.Table:
    """documents_table built column-wise from the stage tables, value for value (`rows_digest`
    included, so generations built by either compare equal): every publish builds every
    document's row, and a Python object per document made a 1 % change's publish O(corpus).

    files: staging.raw_file_columns (scan order); headers: staging.parse_header_columns;
    chunks: chunk_digests(); previous: the served documents (versions)."""
    at = pc.index_in(files.column("doc_id"), value_set=headers.column("doc_id").combine_chunks())
    parsed = pc.is_valid(at)
    files = files.filter(parsed).combine_chunks()
    header = headers.take(at.filter(parsed)).combine_chunks()
    per_doc = pc.index_in(files.column("doc_id"), value_set=chunks.column("doc_id").combine_chunks())
    columns = {
        **{name: files.column(name) for name in ("doc_id", "source", "sha256", "size", *_ACL_KEYS)},
        **{name: header.column(name) for name in ("format", "parser", "page_count", "ocr_used", "ocr_confidence")},
        "title": _titles(files, header),
        "language": _either(files.column("language"), header.column("language")),
        "version": document_versions(files, previous),
        "n_chunks": pc.fill_null(chunks.column("n_chunks").take(per_doc), 0),
        "indexed_at": pa.array([indexed_at] * files.num_rows, pa.string()),
    }
    digests = pc.fill_null(chunks.column("chunk_digest").take(per_doc), "")
    columns["rows_digest"] = _rows_digests(columns, digests)
    schema = s.documents_schema()
    return pa.table(columns).select(schema.names).cast(schema)


def _either(first, second):
    """Python's `first or second` for optional strings, element-wise (None and "" are false)."""
    return pc.if_else(pc.fill_null(pc.not_equal(first, ""), False), first, second)


def _titles(files: pa.Table, header: pa.Table) -> pa.Array:
    """documents_table's title: the sidecar's, else the parse's, else the file name's stem
    (built in Python only for the files that fall back to it)."""
    title = _either(files.column("title"), header.column("title")).combine_chunks()
    untitled = pc.invert(pc.fill_null(pc.not_equal(title, ""), False))
    if not pc.any(untitled).as_py():
        return title
    stems = [display_name(Path(os.fsdecode(path)).stem) for path in files.column("path").filter(untitled).to_pylist()]
    return pc.replace_with_mask(title, untitled, pa.array(stems, pa.string()))


# What of a document row is copied into each of its chunk rows (chunks_table): with the digest
# of its staged chunks, it decides whether the document's chunk rows would be written differently.
_DENORMALIZED = ("source", "title", "language", *_ACL_KEYS)


def rows_digest(document_row: Mapping, chunk_digest: str) -> str:
    """Digest of every input of a document's chunk rows (ROWS_VERSION included)."""
    return _digest([ROWS_VERSION, chunk_digest, *(document_row[k] for k in _DENORMALIZED)])


def _rows_digests(columns: Mapping[str, pa.Array], chunk_digests: pa.Array) -> pa.Array:
    """rows_digest of every row of a documents table's columns: the JSON and the hash stay
    per row (a digest must not change with the code that computes it), nothing else does."""
    values = [columns[k].to_pylist() for k in _DENORMALIZED]
    return pa.array([_digest([ROWS_VERSION, digest, *fields]) for digest, *fields in zip(chunk_digests.to_pylist(), *values)], pa.string())


_to_json = json.JSONEncoder(ensure_ascii=False).encode  # what json.dumps(..., ensure_ascii=False) calls


def _digest(fields: list) -> str:
    return hashlib.blake2b(_to_json(fields).encode(), digest_size=16).hexdigest()


ROW_DIGEST_BATCH = 16_384  # chunk rows per polars frame: text is copied into it


def row_digest_scheme() -> str:
    """Which hash chunk_digests used: polars' row hash is stable within one polars version only,
    so a generation digested by another version compares unequal everywhere (a full build)."""
    import polars as pl

    return f"1-polars-{pl.__version__}"


CHUNK_DIGESTS_SCHEMA = pa.schema([pa.field("doc_id", pa.string()), pa.field("n_chunks", pa.int64()), pa.field("chunk_digest", pa.string())])


def chunk_digests(chunks: pa.Table, after_slice: Callable[[], None] | None = None) -> pa.Table:
    """Per document with staged chunks: how many, and the digest of its chunk rows (every column,
    in ordinal order).

    Rows are hashed by polars a batch at a time (memory: one batch of text, not the corpus's);
    per document the row hashes are digested in ordinal order, each document's a slice of one
    sorted uint64 array (no Python int per chunk). `after_slice` runs after each batch.
    """
    import polars as pl

    parts = []
    for start in range(0, chunks.num_rows, ROW_DIGEST_BATCH):
        frame = pl.from_arrow(chunks.slice(start, ROW_DIGEST_BATCH).replace_schema_metadata(None))
        parts.append(frame.select("doc_id", "ordinal").with_columns(frame.hash_rows(seed=0).alias("hash")))
        del frame
        if after_slice is not None:
            after_slice()
    if not parts:
        return CHUNK_DIGESTS_SCHEMA.empty_table()
    ordered = pl.concat(parts).sort("doc_id", "ordinal")
    runs = ordered.group_by("doc_id", maintain_order=True).len()  # sorted: each document's rows are one run
    hashes, lengths = ordered["hash"].to_numpy(), runs["len"].to_numpy().astype(np.int64)
    ends = np.cumsum(lengths)
    digests = [
        hashlib.blake2b(hashes[start:end].tobytes(), digest_size=16).hexdigest()
        for start, end in zip((ends - lengths).tolist(), ends.tolist())
    ]
    return pa.table({"doc_id": runs["doc_id"].to_arrow().cast(pa.string()), "n_chunks": runs["len"].to_arrow().cast(pa.int64()),
                     "chunk_digest": pa.array(digests, pa.string())}, schema=CHUNK_DIGESTS_SCHEMA)


def replaced_documents(previous: pa.Table | None, current: pa.Table) -> tuple[set[str], int] | None:
    """(documents whose chunk rows must be replaced: new, digest changed or gone; how many chunk rows
    that deletes and writes), or None when the previous generation carries no digests to compare
    with (build it whole)."""
    if previous is None or "rows_digest" not in previous.column_names or previous.column("rows_digest").null_count:
        return None
    before_ids, after_ids = previous.column("doc_id").combine_chunks(), current.column("doc_id").combine_chunks()
    at = pc.index_in(after_ids, value_set=before_ids)
    changed = pc.invert(pc.fill_null(pc.equal(current.column("rows_digest"), previous.column("rows_digest").take(at)), False))
    gone = pc.invert(pc.is_in(before_ids, value_set=after_ids))
    written = pc.add(pc.fill_null(previous.column("n_chunks").take(at), 0), current.column("n_chunks")).filter(changed)
    rows = (pc.sum(written).as_py() or 0) + (pc.sum(previous.column("n_chunks").filter(gone)).as_py() or 0)
    return set(after_ids.filter(changed).to_pylist()) | set(before_ids.filter(gone).to_pylist()), rows


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


def fingerprint_diff(current: np.ndarray, previous: np.ndarray) -> dict[str, int]:
    """Counts of distinct chunk fingerprints that are new, unchanged or gone since the last index,
    from their distinct hashes (store.keyhash.distinct_hashes): a Python string per fingerprint of
    the served index was most of what a no-op's fingerprint step held at 100k documents."""
    same = count_in(current, previous)
    return {"new": len(current) - same, "same": same, "gone": len(previous) - same}


_COMPARED = ("sha256", "title", "status", "security_level", "department", "access_groups", "owner")


def document_changes(previous: pa.Table | None, current: pa.Table) -> dict[str, int]:
    """Documents added, updated (content or metadata), unchanged and deleted since the served
    index: a join on doc_id by polars (it compares list columns; Arrow's `equal` does not)."""
    import polars as pl

    after = pl.from_arrow(current.select(["doc_id", *_COMPARED]))
    before = pl.from_arrow(previous.select(["doc_id", *_COMPARED])) if previous is not None else after.clear()
    common = after.join(before, on="doc_id", how="inner", suffix="_before")
    unchanged = int(common.select(pl.all_horizontal([pl.col(c).eq_missing(pl.col(f"{c}_before")) for c in _COMPARED])).to_series().sum())
    return {
        "added": after.height - common.height,
        "updated": common.height - unchanged,
        "unchanged": unchanged,
        "deleted": before.height - common.height,
    }


# Bump when the rows built from the same inputs change (this module, text.search_tokens).
ROWS_VERSION = 1


SIGNATURE_SLICE_ROWS = 4_096


def input_signature(inputs: Iterable[pa.Table], model_key: str, dimension: int, after_slice: Callable[[], None] | None = None) -> str:
    """sha256 of everything a generation is built from: the staged raw files (content hash,
    sidecar metadata), parses, chunks and quarantine, the model, the published schemas. Equal
    signatures mean a new generation would serve exactly what the served one serves — decided
    without building its rows (vectors follow from chunk fingerprints and the model key).

    Hashed in fixed slices of combined columns, so equal values hash equal whatever their
    Arrow chunking, with memory bounded by a slice (SIGNATURE_SLICE_ROWS: combining and
    serializing copies the slice, so 65,536 parse rows held ~350 MB at once at 100k documents).
    `after_slice` runs after each slice (the publish step lets go of the stage pages read).
    """
    digest = hashlib.sha256(f"v{ROWS_VERSION}\0{model_key}\0{dimension}".encode())
    for schema in (s.documents_schema(), s.chunks_schema(dimension), s.quarantine_schema()):
        digest.update(schema.serialize())
    for table in inputs:
        digest.update(table.schema.remove_metadata().serialize())  # where a stage was staged is not content
        for start in range(0, table.num_rows, SIGNATURE_SLICE_ROWS):
            for batch in table.slice(start, SIGNATURE_SLICE_ROWS).combine_chunks().to_batches():
                digest.update(batch.serialize())
            if after_slice is not None:
                after_slice()
    return digest.hexdigest()
