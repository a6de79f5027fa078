"""Operator release of a quarantined file, and the per-file time limit, through real Dagster runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rag_pipeline.ingest.document import ParsedDocument, TextBlock, UnreadableDocument
from rag_pipeline.ingest.release import release, sidecar_path, unrelease
from rag_pipeline.ingest.scan import scan_raw_folder
from rag_pipeline.ingest.triage import QuarantineRecord, triage, was_released
from rag_pipeline.query.sql import connect
from rag_pipeline_tests.indexing import run_index

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
SCAN = "scans/expense_policy_scan.png"
needs_sample = pytest.mark.skipif(not (SAMPLE / SCAN).is_file(), reason="data/sample not present")


# --- the sidecar helper -----------------------------------------------------------------


def test_release_writes_the_key_and_keeps_the_rest(tmp_path):
    (tmp_path / "a").mkdir()
    doc = tmp_path / "a" / "scan.png"
    doc.write_bytes(b"x")
    assert release(tmp_path, "a/scan.png") == tmp_path / "a" / "scan.png.meta.json"
    assert json.loads(sidecar_path(tmp_path, "a/scan.png").read_text()) == {"quarantine_release": True}
    assert scan_raw_folder(tmp_path)[0].metadata.quarantine_release is True

    sidecar = sidecar_path(tmp_path, "a/scan.png")
    sidecar.write_text(json.dumps({"department": "财务", "access_groups": ["finance"]}, ensure_ascii=False))
    release(tmp_path, "a/scan.png")
    release(tmp_path, "a/scan.png")  # idempotent
    data = json.loads(sidecar.read_text(encoding="utf-8"))
    assert data == {"department": "财务", "access_groups": ["finance"], "quarantine_release": True}
    assert unrelease(tmp_path, "a/scan.png") == sidecar
    assert "quarantine_release" not in json.loads(sidecar.read_text(encoding="utf-8"))

    sidecar.unlink()
    release(tmp_path, "a/scan.png")
    assert unrelease(tmp_path, "a/scan.png") is None and not sidecar.exists()  # nothing else was in it


def test_release_refuses_what_it_cannot_fix(tmp_path):
    (tmp_path / "doc.txt").write_text("x")
    with pytest.raises(FileNotFoundError):
        release(tmp_path, "missing.txt")
    for bad in ("../doc.txt", str(tmp_path / "doc.txt"), "doc.txt.meta.json"):
        with pytest.raises(ValueError):
            release(tmp_path, bad)
    sidecar = tmp_path / "doc.txt.meta.json"
    sidecar.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        release(tmp_path, "doc.txt")
    sidecar.write_text('{"status": "archived"}')  # invalid metadata: a release cannot help
    with pytest.raises(ValueError, match="status"):
        release(tmp_path, "doc.txt")
    assert sidecar.read_text() == '{"status": "archived"}'  # a hand-written sidecar is left alone


def test_triage_honours_release_only_for_low_confidence_and_no_text(tmp_path):
    for name in ("scan.png", "photo.jpg", "locked.pdf"):
        (tmp_path / name).write_bytes(b"x")
    for name in ("scan.png", "photo.jpg", "locked.pdf"):
        release(tmp_path, name)
    raws = {r.source: r for r in scan_raw_folder(tmp_path)}
    low = ParsedDocument([TextBlock("blurry words", "ocr_text", page=1, ocr_confidence=41.0)], "image", "tesseract",
                         page_count=1, ocr_used=True, ocr_confidence=41.0)

    doc = triage(raws["scan.png"], low, ocr_min_confidence=60)
    assert isinstance(doc, ParsedDocument) and doc.text == "blurry words" and was_released(doc)
    assert "was ocr_low_confidence: mean OCR word confidence 41.0 < threshold 60" in doc.warnings[-1]
    assert not low.warnings  # the (cacheable) parse outcome is not modified

    empty = triage(raws["photo.jpg"], UnreadableDocument("no_text", "OCR found no words in the image"), 60)
    assert isinstance(empty, ParsedDocument) and empty.blocks == [] and empty.format == "image" and was_released(empty)

    locked = triage(raws["locked.pdf"], UnreadableDocument("encrypted", "PDF requires a user password"), 60)
    assert isinstance(locked, QuarantineRecord) and locked.reason == "encrypted"
    assert "does not apply to encrypted" in locked.detail

    # Without the sidecar key the same outcome is quarantined, with the way out in the detail.
    unrelease(tmp_path, "scan.png")
    raw = next(r for r in scan_raw_folder(tmp_path) if r.source == "scan.png")
    record = triage(raw, low, 60)
    assert isinstance(record, QuarantineRecord) and record.reason == "ocr_low_confidence"
    assert "rag quarantine release scan.png" in record.detail


# --- through Dagster --------------------------------------------------------------------


def _small_corpus(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    (raw / "scans").mkdir(parents=True)
    shutil.copy(SAMPLE / SCAN, raw / SCAN)
    shutil.copy(SAMPLE / (SCAN + ".meta.json"), raw / (SCAN + ".meta.json"))
    shutil.copy(SAMPLE / "handbook" / "employee_handbook_en.md", raw / "handbook.md")
    return raw


def _quarantine(lake: Path) -> dict[str, tuple[str, str]]:
    rows = connect(lake, admin=True).sql("SELECT source, reason, detail FROM quarantine").fetchall()
    return {source: (reason, detail) for source, reason, detail in rows}


@needs_sample
@pytest.mark.slow
def test_a_low_confidence_scan_released_by_the_operator_is_indexed_next_run(tmp_path):
    raw, lake = _small_corpus(tmp_path), tmp_path / "lake"
    first = run_index(raw, lake, ocr_min_confidence=99)
    assert first["success"], first
    assert first["quarantine"]["by_reason"] == {"ocr_low_confidence": 1}
    reason, detail = _quarantine(lake)[SCAN]
    assert reason == "ocr_low_confidence" and f"rag quarantine release {SCAN}" in detail

    sidecar = release(raw, SCAN)
    kept = json.loads((SAMPLE / (SCAN + ".meta.json")).read_text(encoding="utf-8"))
    assert json.loads(sidecar.read_text(encoding="utf-8")) == {**kept, "quarantine_release": True}

    second = run_index(raw, lake, ocr_min_confidence=99)
    assert second["success"], second
    assert second["quarantine"]["quarantined"] == 0
    parsed = second["parsed_documents"]
    assert parsed["released_from_quarantine"] == [SCAN]
    assert parsed["parsed_now"] == 0  # re-triaged from the parse cache: no second OCR
    con = connect(lake, admin=True)
    (ocr_used, confidence, n_chunks), = con.sql(
        f"SELECT ocr_used, ocr_confidence, n_chunks FROM documents WHERE source = '{SCAN}'"
    ).fetchall()
    assert ocr_used and confidence < 99 and n_chunks > 0
    assert _quarantine(lake) == {}
    assert all(second["checks"].values()), second["checks"]


@needs_sample
@pytest.mark.slow
def test_a_file_over_the_time_limit_is_quarantined_and_retried_next_run(tmp_path):
    raw, lake = _small_corpus(tmp_path), tmp_path / "lake"
    # OCR of the scan takes seconds; the markdown file milliseconds.
    first = run_index(raw, lake, parse_timeout_s=0.3)  # no page read within it
    assert first["success"], first
    assert first["quarantine"]["by_reason"] == {"timeout": 1}
    reason, detail = _quarantine(lake)[SCAN]
    assert reason == "timeout" and "0.3 s limit" in detail
    assert first["parsed_documents"]["documents"] == 1

    second = run_index(raw, lake)  # default limit: the timeout was not cached, the scan is parsed
    assert second["success"], second
    assert second["quarantine"]["quarantined"] == 0
    assert second["parsed_documents"]["parsed_now"] == 1  # only the scan; the markdown came from the cache
    assert _quarantine(lake) == {}
