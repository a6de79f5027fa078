"""Stage outputs round-trip through Arrow exactly (no pickles), odd file names included."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rag_pipeline.chunking import Chunk
from rag_pipeline.defs.io import read_arrow, write_arrow
from rag_pipeline.ingest.document import ParsedDocument, TextBlock
from rag_pipeline.ingest.scan import DocumentMetadata, RawFile
from rag_pipeline.ingest.triage import QuarantineRecord
from rag_pipeline.store import staging
from rag_pipeline.store.rows import content_signature


def _through_disk(table, tmp_path: Path):
    write_arrow(tmp_path / "t.arrow", table)
    return read_arrow(tmp_path / "t.arrow")


def test_records_round_trip_through_arrow_files(tmp_path):
    raw = [
        RawFile("a1", "docs/a.md", Path("/raw/docs/a.md"), 10, "f" * 64, DocumentMetadata(title="A", access_groups=("x", "y"))),
        RawFile("b2", "b\\xff.txt", Path(os.fsdecode(b"/raw/b\xff.txt")), 3, "0" * 64, metadata_error="bad sidecar"),
    ]
    assert staging.raw_files_from_table(_through_disk(staging.raw_files_to_table(raw), tmp_path)) == raw
    parsed = {"a1": ParsedDocument([TextBlock("hi", "heading", ("H",), 2, None, 91.5)], "md", "markdown", "en", 3, True, 91.5, "T", ["w"])}
    assert staging.parsed_from_table(_through_disk(staging.parsed_to_table(parsed), tmp_path)) == parsed
    records = [QuarantineRecord("b2", "b.txt", "0" * 64, 3, "no_text", "empty", None)]
    assert staging.quarantine_from_table(_through_disk(staging.quarantine_to_table(records), tmp_path)) == records
    chunks = [Chunk("c1", "a1", 0, "text", "H\ntext", ("H", "I"), None, "fp1")]
    assert staging.chunks_from_table(_through_disk(staging.chunks_to_table(chunks), tmp_path)) == chunks
    vectors = {"fp1": np.arange(4, dtype=np.float32), "fp2": np.ones(4, dtype=np.float32)}
    back = staging.vectors_from_table(_through_disk(staging.vectors_to_table(vectors, 4), tmp_path))
    assert back.keys() == vectors.keys() and all(np.array_equal(back[k], vectors[k]) for k in vectors)
    assert staging.vectors_from_table(staging.vectors_to_table({}, 4)) == {}


def test_content_signature_ignores_timestamps_and_sees_every_served_value():
    import pyarrow as pa

    docs = pa.table({"doc_id": ["a"], "status": ["published"], "indexed_at": ["2026-01-01"]})
    chunks = pa.table({"chunk_id": ["c"], "text": ["x"], "vector": [[0.1, 0.2]]})
    quarantine = pa.table({"doc_id": ["q"], "reason": ["no_text"], "quarantined_at": ["t1"]})
    base = content_signature(docs, chunks, quarantine, "m1")
    later = docs.set_column(2, "indexed_at", pa.array(["2026-02-02"]))
    assert content_signature(later, chunks, quarantine, "m1") == base
    withdrawn = docs.set_column(1, "status", pa.array(["withdrawn"]))
    assert content_signature(withdrawn, chunks, quarantine, "m1") != base
    assert content_signature(docs, chunks, quarantine, "m2") != base
    edited = chunks.set_column(1, "text", pa.array(["y"]))
    assert content_signature(docs, edited, quarantine, "m1") != base
