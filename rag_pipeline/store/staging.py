"""What one pipeline stage hands the next, as Arrow tables (pure codecs, no pickles).

Every stage output is a plain `pa.Table` with a fixed schema, so it can be written under the
lake (defs.io.LakeStagingIOManager), read by any worker process, and inspected with DuckDB or
polars. The pure stage functions keep working on records (RawFile, ParsedDocument, Chunk, ...);
these functions convert at the asset boundary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from itertools import islice
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from rag_pipeline.chunking import Chunk
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.scan import DocumentMetadata, FileHashes, RawFile
from rag_pipeline.ingest.serialize import outcome_from_json, outcome_to_json
from rag_pipeline.ingest.triage import QuarantineRecord
from rag_pipeline.store import schema as s

RAW_FILES_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("path", pa.binary()),  # os.fsencode: a file name need not be valid UTF-8
        pa.field("size", pa.int64()),
        pa.field("sha256", pa.string()),
        pa.field("metadata", pa.string()),  # JSON of DocumentMetadata
        pa.field("metadata_error", pa.string()),
    ]
)
PARSED_SCHEMA = pa.schema([pa.field("doc_id", pa.string(), nullable=False), pa.field("outcome", pa.string())])
QUARANTINE_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("sha256", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("reason", pa.string()),
        pa.field("detail", pa.string()),
        pa.field("ocr_confidence", pa.float64()),
    ]
)
CHUNKS_SCHEMA = pa.schema(
    [
        pa.field("chunk_id", pa.string(), nullable=False),
        pa.field("doc_id", pa.string()),
        pa.field("ordinal", pa.int32()),
        pa.field("text", pa.string()),
        pa.field("embed_text", pa.string()),
        pa.field("heading_path", pa.list_(pa.string())),
        pa.field("page", pa.int32()),
        pa.field("fingerprint", pa.string()),
    ]
)
FINGERPRINTS_SCHEMA = pa.schema([pa.field("chunk_id", pa.string(), nullable=False), pa.field("fingerprint", pa.string())])


RAW_BATCH_ROWS = 4096  # files turned into one Arrow batch at a time: the scan's Python objects stay this many


def raw_files_to_table(files: Iterable[RawFile], batch_rows: int = RAW_BATCH_ROWS) -> pa.Table:
    """The scan as columns, built batch by batch as `files` yields (a generator's files are
    never all alive at once); each distinct sidecar metadata is serialized once (most files
    share the defaults: a JSON dump per file was a third of a 100k-file scan)."""
    metadata_json: dict[DocumentMetadata, str] = {}
    batches = []
    files = iter(files)
    while batch := list(islice(files, batch_rows)):
        batches.append(_raw_batch(batch, metadata_json))
        del batch  # before the next batch is read
    return pa.Table.from_batches(batches, schema=RAW_FILES_SCHEMA)


def _raw_batch(files: list[RawFile], metadata_json: dict[DocumentMetadata, str]) -> pa.RecordBatch:
    for f in files:
        if f.metadata not in metadata_json:
            metadata_json[f.metadata] = json.dumps(asdict(f.metadata), ensure_ascii=False)
    columns = {
        "doc_id": [f.doc_id for f in files],
        "source": [f.source for f in files],
        "path": [os.fsencode(f.path) for f in files],
        "size": [f.size for f in files],
        "sha256": [f.sha256 for f in files],
        "metadata": [metadata_json[f.metadata] for f in files],
        "metadata_error": [f.metadata_error for f in files],
    }
    return pa.RecordBatch.from_arrays([pa.array(columns[f.name], f.type) for f in RAW_FILES_SCHEMA], schema=RAW_FILES_SCHEMA)


def raw_files_from_table(table: pa.Table) -> list[RawFile]:
    files = []
    for row in table.to_pylist():
        meta = json.loads(row["metadata"])
        meta["access_groups"] = tuple(meta["access_groups"])
        files.append(
            RawFile(
                doc_id=row["doc_id"],
                source=row["source"],
                path=Path(os.fsdecode(row["path"])),
                size=row["size"],
                sha256=row["sha256"],
                metadata=DocumentMetadata(**meta),
                metadata_error=row["metadata_error"],
            )
        )
    return files


FILE_HASHES_SCHEMA = pa.schema(
    [
        pa.field("path", pa.binary()),  # os.fsencode of the absolute path: any file name round-trips
        pa.field("size", pa.int64()),
        pa.field("mtime_ns", pa.int64()),
        pa.field("ctime_ns", pa.int64()),
        pa.field("inode", pa.uint64()),
        pa.field("sha256", pa.string()),
    ]
)


def file_hashes_to_table(hashes: FileHashes) -> pa.Table:
    """What this scan saw, for the next one; the scan's start time rides in the schema metadata.
    Built from FileHashes' column buffers, no Python object per file."""
    paths, path_ends, stats, shas = hashes.seen_columns()
    n = len(path_ends)
    width = FileHashes.SHA_WIDTH
    columns = [
        pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(np.concatenate([[0], path_ends]).astype(np.int32)), pa.py_buffer(paths)]),
        *(pa.array(np.frombuffer(column, dtype=np.uint64 if column.typecode == "Q" else np.int64), field.type) for column, field in zip(stats, list(FILE_HASHES_SCHEMA)[1:5])),
        pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(np.arange(0, (n + 1) * width, width, dtype=np.int32)), pa.py_buffer(shas)]),
    ]
    table = pa.Table.from_arrays(columns, schema=FILE_HASHES_SCHEMA)
    return table.replace_schema_metadata({"scan_started_ns": str(hashes.started_ns)})


def file_hashes_from_table(table: pa.Table | None) -> FileHashes:
    """A previous scan's hashes (none when the table is missing or of another layout)."""
    if table is None or not table.schema.remove_metadata().equals(FILE_HASHES_SCHEMA):
        return FileHashes()
    started = int((table.schema.metadata or {}).get(b"scan_started_ns", b"0"))
    shas = table.column("sha256")
    if len(shas) and pc.any(pc.not_equal(pc.utf8_length(shas), FileHashes.SHA_WIDTH)).as_py():
        return FileHashes()  # not hashes this code wrote: hash everything again
    # copies, not views: nothing then holds the memory-mapped table, whose pages left resident would count twice
    stats = tuple(np.array(table.column(name).to_numpy()) for name in ("size", "mtime_ns", "ctime_ns", "inode"))
    paths, path_ends = _concatenated(table.column("path"))
    return FileHashes((paths, path_ends), stats, _concatenated(shas)[0], started)


def _concatenated(column: pa.ChunkedArray) -> tuple[bytes, np.ndarray]:
    """A string/binary column's values as one bytes and where each ends: its own buffers, no
    Python object per value (a list of 100k paths and digests was ~35 MB of the scan step)."""
    values = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not len(values):
        return b"", np.zeros(0, dtype=np.int64)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=len(values) + 1, offset=values.offset * 4)
    data = values.buffers()[2].slice(offsets[0], offsets[-1] - offsets[0]).to_pybytes()
    return data, offsets[1:].astype(np.int64) - offsets[0]


def parsed_to_table(parsed: dict[str, ParsedDocument], serialized: Mapping[str, str] | None = None) -> pa.Table:
    """`serialized`: a document's JSON already at hand (its parse cache entry, unchanged by
    triage) is taken as is — serializing every cached parse again was a no-op run's largest cost."""
    known = serialized or {}
    return pa.table(
        {"doc_id": list(parsed), "outcome": [known.get(doc_id) or outcome_to_json(d) for doc_id, d in parsed.items()]},
        schema=PARSED_SCHEMA,
    )


# The fields of a parse's header (serialize.ParseHeader) and of a file's sidecar metadata
# (scan.DocumentMetadata, less quarantine_release) that a documents row takes, as Arrow types.
HEADER_FIELDS = pa.struct(
    [
        pa.field("format", pa.string()),
        pa.field("parser", pa.string()),
        pa.field("language", pa.string()),
        pa.field("page_count", pa.int64()),
        pa.field("ocr_used", pa.bool_()),
        pa.field("ocr_confidence", pa.float64()),
        pa.field("title", pa.string()),
    ]
)
METADATA_SCHEMA = pa.schema(
    [
        pa.field("title", pa.string()),
        pa.field("department", pa.string()),
        pa.field("security_level", pa.string()),
        pa.field("status", pa.string()),
        pa.field("access_groups", pa.list_(pa.string())),
        pa.field("owner", pa.string()),
        pa.field("language", pa.string()),
    ]
)
# Stage rows whose JSON is copied into one buffer for Arrow's reader: at most this many rows and,
# past the first row, this many bytes (a large scan's parse outcome holds megabytes of blocks).
JSON_SLICE_ROWS = 4_096
JSON_SLICE_BYTES = 64 << 20


def _json_slices(texts: pa.ChunkedArray) -> list[tuple[int, int]]:
    """(start, length) slices of at most JSON_SLICE_ROWS rows and JSON_SLICE_BYTES bytes (one row
    at least)."""
    ends = np.cumsum(pc.fill_null(pc.binary_length(texts), 2).to_numpy(zero_copy_only=False) + 1)
    slices, start = [], 0
    while start < len(texts):
        before = int(ends[start - 1]) if start else 0
        stop = int(np.searchsorted(ends, before + JSON_SLICE_BYTES, side="right"))
        stop = min(max(stop, start + 1), start + JSON_SLICE_ROWS, len(texts))
        slices.append((start, stop - start))
        start = stop
    return slices


def json_columns(texts: pa.ChunkedArray, schema: pa.Schema, after_slice: Callable[[], None] | None = None) -> pa.Table:
    """One JSON object per element decoded into `schema`'s fields (others skipped, nested ones
    too) by Arrow's JSON reader: no Python object per row, the parse outcome's blocks never
    built. A slice at a time (_json_slices), so the copy the reader parses is a slice's, not the
    corpus's. `after_slice` runs after each slice (the publish step lets go of the pages read)."""
    parts = []
    for start, length in _json_slices(texts):
        part = pc.fill_null(texts.slice(start, length).combine_chunks(), "{}")
        joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(part)], pa.int32()), part), "\n")[0].as_buffer()
        table = pj.read_json(
            pa.BufferReader(joined),
            # one block (any object's size) read as a whole, so a newline inside an object is no boundary
            read_options=pj.ReadOptions(block_size=joined.size + 1, use_threads=False),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore", newlines_in_values=True),
        )
        if table.num_rows != len(part):
            raise ValueError(f"{len(part)} JSON texts decoded into {table.num_rows} rows")
        parts.append(table)
        if after_slice is not None:
            after_slice()
    return pa.concat_tables(parts).combine_chunks() if parts else schema.empty_table()


def raw_file_columns(table: pa.Table) -> pa.Table:
    """The scan's rows with each file's sidecar metadata as columns (METADATA_SCHEMA) instead
    of its JSON: what raw_files_from_table gives a documents row, without a RawFile per file."""
    metadata = json_columns(table.column("metadata"), METADATA_SCHEMA)
    kept = table.drop_columns(["metadata", "metadata_error"])
    return pa.Table.from_arrays([*kept.columns, *metadata.columns], names=[*kept.column_names, *metadata.column_names])


def parse_header_columns(table: pa.Table, after_slice: Callable[[], None] | None = None) -> pa.Table:
    """doc_id and its parse's header (serialize.ParseHeader's fields) as columns, one row per
    parsed document (an unreadable outcome has none), its blocks never decoded."""
    parsed = json_columns(table.column("outcome"), pa.schema([pa.field("parsed", HEADER_FIELDS)]), after_slice).column("parsed")
    kept = pc.is_valid(parsed)
    headers = parsed.filter(kept).combine_chunks()
    return pa.table({"doc_id": table.column("doc_id").filter(kept), **{name: headers.field(name) for name in HEADER_FIELDS.names}})


def parsed_from_table(table: pa.Table) -> dict[str, ParsedDocument]:
    ids, outcomes = table.column("doc_id").to_pylist(), table.column("outcome").to_pylist()
    return {doc_id: outcome_from_json(text) for doc_id, text in zip(ids, outcomes)}


def quarantine_to_table(records: list[QuarantineRecord]) -> pa.Table:
    return pa.Table.from_pylist([asdict(r) for r in records], schema=QUARANTINE_SCHEMA)


def quarantine_from_table(table: pa.Table) -> list[QuarantineRecord]:
    return [QuarantineRecord(**row) for row in table.to_pylist()]


def chunks_to_table(chunks: list[Chunk]) -> pa.Table:
    return pa.Table.from_pylist([{**asdict(c), "heading_path": list(c.heading_path)} for c in chunks], schema=CHUNKS_SCHEMA)


def chunks_from_table(table: pa.Table) -> list[Chunk]:
    return [Chunk(**{**row, "heading_path": tuple(row["heading_path"])}) for row in table.to_pylist()]


def chunk_cache_rows(per_document: dict[str, tuple[list[Chunk], list[int]]], model_limit: int | None) -> pa.Table:
    """Chunk cache rows: per document key, its chunks and their token counts as parallel lists."""
    rows = []
    for key, (chunks, tokens) in per_document.items():
        columns = {name: [getattr(c, name) for c in chunks] for name in CHUNKS_SCHEMA.names}
        columns["heading_path"] = [list(path) for path in columns["heading_path"]]
        rows.append({"cache_key": key, **columns, "tokens": [int(n) for n in tokens], "model_limit": model_limit})
    return pa.Table.from_pylist(rows, schema=s.chunk_cache_schema())


def chunks_from_cache(rows: pa.Table, keys: list[str]) -> tuple[pa.Table, pa.Array]:
    """The chunks of the documents `keys` names, in that order, as chunks_to_table lays them
    out, with their token counts: a column-wise flatten, no Python object per chunk."""
    order = pc.index_in(pa.array(keys, pa.string()), value_set=rows.column("cache_key").combine_chunks())
    if order.null_count:
        raise KeyError(f"{order.null_count} documents have no chunk cache row")
    picked = rows.take(order).combine_chunks()
    table = pa.table({name: pc.list_flatten(picked.column(name)) for name in CHUNKS_SCHEMA.names}, schema=CHUNKS_SCHEMA)
    return table.combine_chunks(), pc.list_flatten(picked.column("tokens")).combine_chunks()


def fingerprints_to_table(chunks: list[Chunk]) -> pa.Table:
    return pa.table(
        {"chunk_id": [c.chunk_id for c in chunks], "fingerprint": [c.fingerprint for c in chunks]}, schema=FINGERPRINTS_SCHEMA
    )


def vectors_schema(dimension: int) -> pa.Schema:
    return pa.schema([pa.field("fingerprint", pa.string(), nullable=False), pa.field("vector", pa.list_(pa.float32(), dimension))])


def vectors_to_table(vectors: dict[str, np.ndarray], dimension: int) -> pa.Table:
    keys = list(vectors)
    flat = np.asarray([vectors[k] for k in keys], dtype=np.float32).reshape(-1)
    column = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=pa.float32()), dimension)
    return pa.Table.from_arrays([pa.array(keys, type=pa.string()), column], schema=vectors_schema(dimension))


def vectors_from_table(table: pa.Table) -> dict[str, np.ndarray]:
    if table.num_rows == 0:
        return {}
    matrix = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    matrix = matrix.reshape(table.num_rows, -1).astype(np.float32, copy=False)
    return dict(zip(table.column("fingerprint").to_pylist(), matrix))
