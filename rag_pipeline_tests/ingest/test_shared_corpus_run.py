"""The whole shared format corpus through one real Dagster run of index_job: nothing lost.

Every corpus file listed in ``manifest.tsv`` ends up either as an indexed document or as a
quarantine row, each file of ``bad/`` with the reason the manifest expects. The two files
that describe the corpus (``manifest.tsv``, ``SOURCES.md``) are not copied: they are not
corpus documents and would only add an ``unsupported_format`` row and an extra document.

Slow: parses and OCRs every file (2 workers on 2 cores) and embeds every chunk, with the real
model at int8-onnx precision: the session's ``shared_corpus_run`` (conftest), whose parse
outcomes test_ingest_corpus.py checks file by file.
"""

from __future__ import annotations

import csv

import pytest

from rag_pipeline.query.sql import connect


def expected_bad_reasons(expectation: str) -> set[str | None]:
    """Allowed outcomes of a bad/ file from the manifest's free text; None = indexed."""
    e = expectation.lower()
    if "(encrypted)" in e:
        return {"encrypted"}
    if "(corrupt)" in e:
        return {"corrupt"}
    if "reject or lenient parse" in e:
        return {"corrupt", None}
    if "lenient parse" in e:  # "lenient parse or reject row": a row may go, the file stays
        return {None}
    if "empty" in e or "no content" in e or "no text" in e:
        return {"no_text"}
    raise AssertionError(f"manifest expectation not understood: {expectation!r}")


@pytest.mark.slow
def test_every_corpus_file_is_indexed_or_quarantined_with_its_reason(shared_corpus, shared_corpus_run):
    manifest = shared_corpus / "manifest.tsv"
    if not manifest.is_file():
        pytest.skip(f"no manifest.tsv in {shared_corpus}")
    with open(manifest, encoding="utf-8", newline="") as fh:
        rows = {r["file"]: r for r in csv.DictReader(fh, delimiter="\t")}
    raw, lake, report = shared_corpus_run["raw"], shared_corpus_run["lake"], shared_corpus_run["report"]
    files = {p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file()}
    assert files == set(rows)

    assert report["success"], report
    assert all(report["checks"].values()), report["checks"]
    con = connect(lake, admin=True)
    indexed = {s for (s,) in con.sql("SELECT source FROM documents").fetchall()}
    quarantined = {s: r for s, r in con.sql("SELECT source, reason FROM quarantine").fetchall()}
    assert not indexed & set(quarantined)
    assert indexed | set(quarantined) == files  # nothing lost
    assert report["parsed_documents"]["documents"] + report["quarantine"]["quarantined"] == len(files)

    for rel in sorted(f for f in files if f.startswith("bad/")):
        allowed = expected_bad_reasons(rows[rel]["expectation"])
        assert quarantined.get(rel) in allowed, (rel, quarantined.get(rel), rows[rel]["expectation"])
    # Outside bad/ nothing is unreadable; only scans may be judged (low confidence, no text).
    for rel, reason in quarantined.items():
        if not rel.startswith("bad/"):
            assert reason in {"ocr_low_confidence", "no_text"}, (rel, reason)
            assert rel.startswith(("image/", "scanned-pdf/")), (rel, reason)

    by_reason = report["quarantine"]["by_reason"]
    assert sum(by_reason.values()) == len(quarantined)
    assert by_reason == {r: list(quarantined.values()).count(r) for r in set(quarantined.values())}
    assert {"encrypted", "corrupt", "no_text"} <= set(by_reason)
    print(f"\nquarantine by reason: {dict(sorted(by_reason.items()))}; indexed {len(indexed)} of {len(files)}")
    print("quarantined: " + ", ".join(f"{s} ({r})" for s, r in sorted(quarantined.items())))
