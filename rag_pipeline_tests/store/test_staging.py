"""Stage outputs round-trip through Arrow exactly (no pickles), odd file names included."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa

from rag_pipeline.chunking import Chunk
from rag_pipeline.defs.io import read_arrow, write_arrow
from rag_pipeline.ingest.document import ParsedDocument, TextBlock
from rag_pipeline.ingest.scan import DocumentMetadata, RawFile
from rag_pipeline.ingest.triage import QuarantineRecord
from rag_pipeline.store import staging
from rag_pipeline.store.keyhash import distinct_hashes
from rag_pipeline.store.rows import fingerprint_diff, input_signature


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
    [header] = staging.parse_header_columns(staging.parsed_to_table(parsed)).to_pylist()  # what a documents row reads
    assert header == {"doc_id": "a1", **{f: getattr(parsed["a1"], f) for f in staging.HEADER_FIELDS.names}}
    records = [QuarantineRecord("b2", "b.txt", "0" * 64, 3, "no_text", "empty", None)]
    assert staging.quarantine_from_table(_through_disk(staging.quarantine_to_table(records), tmp_path)) == records
    chunks = [Chunk("c1", "a1", 0, "text", "H\ntext", ("H", "I"), None, "fp1")]
    assert staging.chunks_from_table(_through_disk(staging.chunks_to_table(chunks), tmp_path)) == chunks
    vectors = {"fp1": np.arange(4, dtype=np.float32), "fp2": np.ones(4, dtype=np.float32)}
    back = staging.vectors_from_table(_through_disk(staging.vectors_to_table(vectors, 4), tmp_path))
    assert back.keys() == vectors.keys() and all(np.array_equal(back[k], vectors[k]) for k in vectors)
    assert staging.vectors_from_table(staging.vectors_to_table({}, 4)) == {}


def test_fingerprint_diff_counts_distinct_fingerprints():
    current = distinct_hashes([pa.array(["a", "b"]), pa.array(["b", "c"])])  # a fingerprint shared by two chunks counts once
    assert fingerprint_diff(current, distinct_hashes([["b", "d", "d"]])) == {"new": 2, "same": 1, "gone": 1}
    assert fingerprint_diff(current, distinct_hashes([])) == {"new": 3, "same": 0, "gone": 0}
    assert fingerprint_diff(distinct_hashes([]), current) == {"new": 0, "same": 0, "gone": 3}


def test_input_signature_sees_files_sidecar_metadata_chunks_quarantine_and_model():
    raw = [RawFile("a1", "a.md", Path("/raw/a.md"), 10, "f" * 64, DocumentMetadata(owner="ann"))]
    parsed = {"a1": ParsedDocument([TextBlock("hi")], "md", "markdown")}
    chunks = [Chunk("c1", "a1", 0, "hi", "hi", (), None, "fp1")]
    quarantine = [QuarantineRecord("b2", "b.txt", "0" * 64, 3, "no_text", "empty", None)]

    def signature(raw=raw, chunks=chunks, quarantine=quarantine, model="m1"):
        tables = [staging.raw_files_to_table(raw), staging.parsed_to_table(parsed), staging.chunks_to_table(chunks)]
        return input_signature([*tables, staging.quarantine_to_table(quarantine)], model, 4)

    base = signature()
    assert signature() == base
    assert signature(raw=[replace(raw[0], metadata=DocumentMetadata(owner="bob"))]) != base
    assert signature(raw=[replace(raw[0], metadata=DocumentMetadata(owner="ann", status="withdrawn"))]) != base
    assert signature(raw=[replace(raw[0], sha256="e" * 64)]) != base
    assert signature(chunks=[replace(chunks[0], text="ho")]) != base
    assert signature(quarantine=[]) != base
    assert signature(model="m2") != base


def test_a_cached_parse_is_staged_as_stored_because_its_json_round_trips_exactly():
    """parse_documents stages a cached parse's JSON as is when triage keeps the document; that
    equals serializing it again only because decoding and encoding are exact inverses (real
    files: text, Office, PDF, spreadsheet, OCR'd scan)."""
    from rag_pipeline.config import Settings
    from rag_pipeline.ingest.parsers import parse_file
    from rag_pipeline.ingest.serialize import outcome_from_json, outcome_to_json

    sample = Path(__file__).resolve().parents[2] / "data" / "sample"
    files = ["handbook/员工手册.docx", "products/x2000_datasheet.pdf", "products/price_list.xlsx",
             "it/运维手册.html", "scans/expense_policy_scan.png"]
    parsed = {rel: parse_file(sample / rel, ocr_lang=Settings().ocr_lang) for rel in files}
    stored = {rel: outcome_to_json(doc) for rel, doc in parsed.items()}
    for rel, text in stored.items():
        assert outcome_to_json(outcome_from_json(text)) == text, rel
    decoded = {rel: outcome_from_json(text) for rel, text in stored.items()}
    assert staging.parsed_to_table(decoded, stored).equals(staging.parsed_to_table(decoded))


def _resident_file_kb() -> int | None:
    try:
        status = Path("/proc/self/status").read_text()
    except OSError:
        return None
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("RssFile:")), None)


def test_a_stage_file_read_whole_lets_its_pages_go_and_stays_readable(tmp_path):
    """The publish step reads every stage shard; what it has read must not stay in its RSS."""
    import pytest
    import pyarrow as pa

    from rag_pipeline.defs.io import release_stage_pages

    if _resident_file_kb() is None:
        pytest.skip("needs /proc/self/status (Linux)")
    rng = np.random.default_rng(16)
    vectors = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(8_000_000, dtype=np.float32)), 80)
    original = pa.table({"vector": vectors, "text": [f"chunk {i} " * 8 for i in range(100_000)]})
    write_arrow(tmp_path / "stage.arrow", original)
    table = read_arrow(tmp_path / "stage.arrow")
    assert table.equals(original)  # reads every page of the mapping
    touched = _resident_file_kb()
    release_stage_pages()
    released = _resident_file_kb()
    assert touched - released > 25_000, (touched, released)  # the file is ~40 MB; its pages were resident
    assert table.equals(original)  # faulted back in from the page cache
    del table
    release_stage_pages()  # a mapping gone since is skipped, not an error


def test_the_scan_table_is_built_batch_by_batch_as_the_files_come():
    """raw_documents streams the scan into Arrow: never more than one batch of RawFile objects
    alive (a RawFile and its Path per file of a 100k-file folder were the step's largest Python
    objects, bench/scan_memory.py); the table equals the one built from the whole list."""
    import weakref

    alive = {"now": 0, "most": 0}

    def born(f):
        alive["now"] += 1
        alive["most"] = max(alive["most"], alive["now"])
        weakref.finalize(f, lambda: alive.__setitem__("now", alive["now"] - 1))
        return f

    def scan(n):
        for i in range(n):
            yield born(RawFile(f"d{i}", f"f{i}.txt", Path(f"/raw/f{i}.txt"), i, f"{i:064x}", DocumentMetadata(title=f"T{i % 3}")))

    streamed = staging.raw_files_to_table(scan(25), batch_rows=4)
    assert alive["most"] <= 4 + 1, alive  # the batch being converted, and the file the generator holds
    listed = staging.raw_files_to_table(list(scan(25)), batch_rows=4)
    assert streamed.equals(listed) and streamed.num_rows == 25
    assert staging.raw_files_from_table(streamed) == list(scan(25))
    assert staging.raw_files_to_table(iter(())).num_rows == 0


def test_scan_hashes_round_trip_through_their_column_buffers(tmp_path):
    """FileHashes keeps what a scan saw as columns (paths' bytes, stats, digests), not a tuple per
    file; the table the next scan reads back holds exactly what was seen, odd names included."""
    from rag_pipeline.ingest.scan import FileHashes, file_sha256

    names = ["a.txt", os.fsdecode(b"b\xff.txt"), "naïve name.txt"]
    for name in names:
        (tmp_path / name).write_bytes(name.encode("utf-8", "surrogateescape"))
    seen = FileHashes()
    shas = [seen.sha256(tmp_path / name, (tmp_path / name).lstat()) for name in names]
    table = _through_disk(staging.file_hashes_to_table(seen), tmp_path)
    assert table.column("path").to_pylist() == [os.fsencode(tmp_path / name) for name in names]
    assert table.column("sha256").to_pylist() == shas == [file_sha256(tmp_path / name) for name in names]
    assert table.column("inode").to_pylist() == [(tmp_path / name).lstat().st_ino for name in names]
    again = staging.file_hashes_from_table(table)
    again.previous_scan_ns = 1 << 62  # every file "settled" long before: its hash is reused
    assert [again.sha256(tmp_path / name, (tmp_path / name).lstat()) for name in names] == shas and again.reused == 3
