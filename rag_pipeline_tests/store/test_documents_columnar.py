"""The documents table and the diffs a publish computes, built column-wise from the stage tables
(rows.documents_from_stage, document_versions, chunk_digests, replaced_documents,
document_changes), equal what the row-by-row construction they replaced builds from the same
inputs: the records path (rows.documents_table) and the old per-row diffs, kept here as oracles.
Equal down to each `rows_digest`, so generations built before and after compare equal."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from rag_pipeline.chunking import Chunk
from rag_pipeline.ingest.document import ParsedDocument, TextBlock, UnreadableDocument
from rag_pipeline.ingest.scan import DocumentMetadata, RawFile
from rag_pipeline.ingest.serialize import ParseHeader
from rag_pipeline.store import rows, staging
from rag_pipeline_tests.indexing import run_index
from rag_pipeline_tests.store.test_generation_from_served import _change_folder


# ---------------------------------------------------------------- the row-by-row oracles

def _versions(raws: list[RawFile], previous: pa.Table | None) -> dict[str, int]:
    before = {r["doc_id"]: (r["sha256"], r["version"]) for r in previous.to_pylist()} if previous is not None else {}
    versions = {}
    for raw in raws:
        sha, version = before.get(raw.doc_id, (None, 0))
        versions[raw.doc_id] = version if sha == raw.sha256 else version + 1
    return versions


def _chunk_digests(chunks: pa.Table) -> dict[str, str]:
    import polars as pl

    parts = []
    for start in range(0, chunks.num_rows, rows.ROW_DIGEST_BATCH):
        frame = pl.from_arrow(chunks.slice(start, rows.ROW_DIGEST_BATCH).replace_schema_metadata(None))
        parts.append(frame.select("doc_id", "ordinal").with_columns(frame.hash_rows(seed=0).alias("hash")))
    if not parts:
        return {}
    grouped = pl.concat(parts).sort("doc_id", "ordinal").group_by("doc_id", maintain_order=True).agg("hash")
    return {
        doc_id: hashlib.blake2b(np.asarray(hashes, dtype=np.uint64).tobytes(), digest_size=16).hexdigest()
        for doc_id, hashes in zip(grouped["doc_id"].to_list(), grouped["hash"].to_list())
    }


def _documents(raw_table: pa.Table, parsed_table: pa.Table, chunks: pa.Table, previous: pa.Table | None, indexed_at: str) -> pa.Table:
    raws = staging.raw_files_from_table(raw_table)
    parsed = {d: o for d, o in staging.parsed_from_table(parsed_table).items() if isinstance(o, ParsedDocument)}
    counts = Counter(chunks.column("doc_id").to_pylist())
    return rows.documents_table(raws, parsed, counts, _versions(raws, previous), indexed_at, _chunk_digests(chunks))


def _replaced(previous: pa.Table | None, current: pa.Table):
    if previous is None or "rows_digest" not in previous.column_names:
        return None

    def by_doc(documents):
        columns = (documents.column(c).to_pylist() for c in ("doc_id", "rows_digest", "n_chunks"))
        return {d: (digest, n) for d, digest, n in zip(*columns)}

    before = by_doc(previous)
    if any(digest is None for digest, _ in before.values()):
        return None
    after = by_doc(current)
    changed = {d for d, (digest, _) in after.items() if before.get(d, (None, 0))[0] != digest}
    gone = set(before) - set(after)
    return changed | gone, sum(before.get(d, (None, 0))[1] + after[d][1] for d in changed) + sum(before[d][1] for d in gone)


def _changes(previous: pa.Table | None, current: pa.Table) -> dict[str, int]:
    def keyed(table):
        if table is None or table.num_rows == 0:
            return {}
        return {r["doc_id"]: tuple(str(r[c]) for c in rows._COMPARED) for r in table.select(["doc_id", *rows._COMPARED]).to_pylist()}

    before, after = keyed(previous), keyed(current)
    common = before.keys() & after.keys()
    return {
        "added": len(after.keys() - before.keys()),
        "updated": sum(1 for d in common if before[d] != after[d]),
        "unchanged": sum(1 for d in common if before[d] == after[d]),
        "deleted": len(before.keys() - after.keys()),
    }


def _assert_same(columnar: pa.Table, row_by_row: pa.Table) -> None:
    assert columnar.schema == row_by_row.schema
    assert columnar.to_pylist() == row_by_row.to_pylist()
    assert columnar.equals(row_by_row)


# ---------------------------------------------------------------- records

def _raws() -> list[RawFile]:
    return [
        RawFile("a1", "docs/a.md", Path("/raw/docs/a.md"), 10, "f" * 64, DocumentMetadata(title="Sidecar \"title\"\n", access_groups=("x", "y"))),
        RawFile("b2", "b\\xff.tar.txt", Path(os.fsdecode(b"/raw/b\xff.tar.txt")), 3, "0" * 64),  # untitled: the stem, escaped
        RawFile("c3", "c.txt", Path("/raw/c.txt"), 4, "1" * 64, DocumentMetadata(title="", language="", department="法务", owner="ann")),
        RawFile("d4", "d.pdf", Path("/raw/d.pdf"), 5, "2" * 64, DocumentMetadata(status="draft", access_groups=())),
        RawFile("e5", "e.png", Path("/raw/e.png"), 6, "3" * 64, metadata_error="bad sidecar"),  # unreadable: no row
        RawFile("f6", ".hidden", Path("/raw/.hidden"), 7, "4" * 64),  # no chunks, a dot file's stem
    ]


def _parsed() -> dict:
    return {
        "a1": ParsedDocument([TextBlock("hi \"there\"\nline", "heading", ("H",), 2, None, 91.5)], "md", "markdown", "en", 3, True, 91.5, "T", ["w"]),
        "b2": ParsedDocument([TextBlock("文本 😀")], "txt", "plain", "zh", None, False, None, None, []),
        "c3": ParsedDocument([TextBlock("x")], "txt", "plain", "en", 1, True, 0.1234567891234, "", []),
        "d4": ParsedDocument([TextBlock("y")], "pdf", "pdfium", "", 12, False, None, "Parse title", []),
        "e5": UnreadableDocument("encrypted", "password"),
        "f6": ParsedDocument([], "txt", "plain", "en", None, False, None, None, []),
    }


@pytest.mark.parametrize("slice_rows, slice_bytes", [(1, 64 << 20), (2, 64 << 20), (4_096, 64 << 20), (4_096, 150), (4_096, 1)])
def test_the_column_wise_documents_table_equals_the_records_one(monkeypatch, slice_rows, slice_bytes):
    monkeypatch.setattr(staging, "JSON_SLICE_ROWS", slice_rows)  # JSON decoded over several slices,
    monkeypatch.setattr(staging, "JSON_SLICE_BYTES", slice_bytes)  # cut by rows or by bytes (1: a row each)
    raws, parsed = _raws(), _parsed()
    chunks = staging.chunks_to_table([Chunk(f"c{n}", doc, n, f"text {n}", f"text {n}", ("H",), None, f"fp{n}") for n, doc in
                                      enumerate(["a1", "a1", "b2", "c3", "d4", "a1"])])
    raw_table, parsed_table = staging.raw_files_to_table(raws), staging.parsed_to_table(parsed)
    headers = staging.parse_header_columns(parsed_table)
    assert headers.column("doc_id").to_pylist() == ["a1", "b2", "c3", "d4", "f6"]  # the unreadable one has no header
    for doc_id, header in zip(headers.column("doc_id").to_pylist(), headers.drop_columns(["doc_id"]).to_pylist()):
        assert header == {f: getattr(parsed[doc_id], f) for f in ParseHeader.__dataclass_fields__}  # the parse's own values
    first = rows.documents_from_stage(staging.raw_file_columns(raw_table), headers, rows.chunk_digests(chunks), None, "now")
    _assert_same(first, _documents(raw_table, parsed_table, chunks, None, "now"))

    # a later run: one file changed (its version bumps), one gone (c3), one new (d4), one chunk fewer
    previous = first.filter(pa.compute.not_equal(first.column("doc_id"), "d4"))
    raws[0] = RawFile("a1", "docs/a.md", Path("/raw/docs/a.md"), 11, "9" * 64, raws[0].metadata)
    del raws[2]
    raw_table = staging.raw_files_to_table(raws)
    later = rows.documents_from_stage(staging.raw_file_columns(raw_table), headers, rows.chunk_digests(chunks.slice(1)), previous, "later")
    _assert_same(later, _documents(raw_table, parsed_table, chunks.slice(1), previous, "later"))
    assert later.column("version").to_pylist() == [2, 1, 1, 1]
    assert rows.replaced_documents(previous, later)[0] == {"a1", "c3", "d4"}
    assert rows.document_changes(previous, later) == _changes(previous, later)
    assert rows.replaced_documents(previous, later) == _replaced(previous, later)
    assert rows.document_changes(None, later) == _changes(None, later)
    assert rows.replaced_documents(later, later) == _replaced(later, later) == (set(), 0)


def test_empty_stage_tables_give_an_empty_documents_table():
    empty = rows.documents_from_stage(staging.raw_file_columns(staging.raw_files_to_table([])), staging.parse_header_columns(staging.parsed_to_table({})),
                                      rows.chunk_digests(staging.chunks_to_table([])), None, "now")
    assert empty.num_rows == 0 and empty.schema == rows.documents_table([], {}, {}, {}, "now").schema


# ---------------------------------------------------------------- a real run's stage tables

def _spy(monkeypatch) -> dict[str, list]:
    """Record the arguments and result of each column-wise builder during a real run."""
    seen: dict[str, list] = {}
    for module, name in [(staging, "raw_file_columns"), (staging, "parse_header_columns"), (rows, "chunk_digests"),
                         (rows, "documents_from_stage"), (rows, "document_changes"), (rows, "replaced_documents")]:
        def wrapper(*args, _real=getattr(module, name), _name=name, **kwargs):
            out = _real(*args, **kwargs)
            seen.setdefault(_name, []).append((args, out))
            return out
        monkeypatch.setattr(module, name, wrapper)
    return seen


@pytest.mark.slow
def test_a_real_publish_builds_the_documents_and_diffs_the_row_by_row_code_built(work, monkeypatch):
    """data/sample (sidecars, docx/pdf/html/xlsx, OCR'd scans, quarantine), first on a fresh lake,
    then on the indexed one after an edit, a new file, a deletion and a sidecar-only change."""
    for lake, change in ((work / "fresh_lake", False), (work / "lake", True)):
        if change:
            _change_folder(work / "raw")
        seen = _spy(monkeypatch)
        report = run_index(work / "raw", lake, golden_file="none")
        assert report["success"], report["failures"]
        monkeypatch.undo()
        [((raw_table,), _)] = seen["raw_file_columns"]
        [((parsed_table,), _)] = seen["parse_header_columns"]
        [((chunks,), _)] = seen["chunk_digests"]
        [((_, _, _, previous, indexed_at), documents)] = seen["documents_from_stage"]
        assert (previous is None) == (not change)
        _assert_same(documents, _documents(raw_table, parsed_table, chunks, previous, indexed_at))
        [((before, current), changes)] = seen["document_changes"]
        assert changes == _changes(before, current)
        if change:
            assert changes["added"] == changes["deleted"] == 1 and changes["updated"] == 2
            [((before, current), replaced)] = seen["replaced_documents"]
            assert replaced == _replaced(before, current) and len(replaced[0]) == 4
