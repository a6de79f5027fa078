"""Incremental re-indexing, lifecycle, safe deletion and generations, on real Dagster runs."""

from __future__ import annotations

import os
import shutil

import pytest

from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.embedding.encoder import ModelMismatchError, load_encoder
from rag_pipeline.ingest import scan
from rag_pipeline.ingest.scan import file_sha256
from rag_pipeline.query import RagIndex
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.indexing import run_index

pytestmark = pytest.mark.slow
HANDBOOK = "handbook/employee_handbook_en.md"
# Runs whose test is not about quality pass golden_file="none": the golden eval (232 questions,
# ~12 s a run) is tested by the first two tests here and by test_eval.py.


def _documents(lake):
    return {d["source"]: d for d in Lake(lake).published_arrow(s.DOCUMENTS).to_pylist()}


def test_unchanged_corpus_parses_nothing_and_embeds_nothing(work):
    load_encoder.cache_clear()  # as in a fresh process: the built-in model's weights load on first use
    report = run_index(work / "raw", work / "lake")
    assert RagSettingsResource(raw_dir=str(work / "raw"), lake_dir=str(work / "lake")).encoder()._model is None  # nor its tokenizer
    assert report["success"]
    assert report["parsed_documents"]["parsed_now"] == 0
    assert report["embeddings"]["embedded"] == 0
    assert (report["chunks"]["rechunked"], report["chunks"]["reused_from_chunk_cache"]) == (0, 13)
    stats = report["lancedb_index"]
    assert (stats["added"], stats["updated"], stats["deleted"]) == (0, 0, 0)
    assert stats["unchanged"] == 13
    assert report["golden_eval"]["status"] == "unchanged"  # no generation staged: nothing to re-judge
    assert report["lancedb_index"]["new_generation"] is False


def test_a_quality_regression_blocks_promotion_and_the_last_good_generation_keeps_serving(work):
    """Fault injected in the baseline (a perfect score for the served generation); real run, real eval."""
    lake = Lake(work / "lake")
    served = lake.read_manifest()["generation"]
    baseline = lake.read_generation_eval(served)
    assert baseline["status"] == "evaluated" and baseline["hit@5"] < 1.0
    perfect = [
        {**d, "hit@5": d["answerable"], "first_expected_rank": 1 if d["answerable"] else None,
         "refused": not d["answerable"], "cited_expected": True if d["answerable"] else None}
        for d in baseline["details"]
    ]
    lake.write_generation_eval(served, {**baseline, "details": perfect})
    (work / "raw" / "handbook" / "canteen.txt").write_text("The canteen opens at 11:30 on weekdays.\n", encoding="utf-8")
    report = run_index(work / "raw", work / "lake")
    assert not report["success"] and report["checks"]["golden_quality_holds"] is False
    assert report["chunks"]["rechunked"] == report["embeddings"]["embedded"] == 1
    encoder = RagSettingsResource(raw_dir=str(work / "raw"), lake_dir=str(work / "lake")).encoder()
    # the steps after embeddings (index build, eval, housekeeping) do not carry the weights or the tokenizer
    assert encoder._model is None and encoder._token_counter is None
    assert report["golden_eval"]["status"] == "evaluated"
    assert "published_index" not in report
    assert lake.read_manifest()["generation"] == served  # the staged generation waits for an operator
    staged = max(g["generation"] for g in lake.list_generations())
    assert staged == served + 1 and lake.read_generation_eval(staged)["hit@5"] == baseline["hit@5"]


def test_paragraph_inserted_at_the_top_embeds_only_new_chunks(work):
    path = work / "raw" / HANDBOOK
    chunks_before = _documents(work / "lake")[HANDBOOK]["n_chunks"]
    text = path.read_text(encoding="utf-8")
    first_heading_end = text.index("\n") + 1
    path.write_text(
        text[:first_heading_end] + "\nThis handbook was reviewed by the works council in 2026.\n" + text[first_heading_end:],
        encoding="utf-8",
    )
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["parsed_documents"]["parsed_now"] == 1
    assert chunks_before >= 4
    assert 1 <= report["embeddings"]["embedded"] <= 2  # the chunk holding the new paragraph, not the shifted rest
    doc = _documents(work / "lake")[HANDBOOK]
    assert doc["version"] == 2  # a content change bumps the document version


def test_a_no_op_scan_reuses_every_hash_and_an_edit_keeping_size_and_mtime_is_still_indexed(work, monkeypatch):
    """raw_documents hashes only files whose stat changed since this lake's last scan; an edit
    that puts size and mtime back (`cp -p`, `rsync -t`) still changes ctime, so it is indexed."""
    monkeypatch.setattr(scan, "RACY_WINDOW_NS", 0)  # the copy made just now would otherwise be re-hashed once more
    first = run_index(work / "raw", work / "lake", golden_file="none")
    files = first["raw_documents"]["files"]
    assert first["raw_documents"]["hashed_now"] == files  # the base lake's hashes are of another folder
    second = run_index(work / "raw", work / "lake", golden_file="none")
    assert (second["raw_documents"]["hashed_now"], second["raw_documents"]["hashes_reused"]) == (0, files)
    assert second["lancedb_index"]["new_generation"] is False
    path = work / "raw" / HANDBOOK
    before, text = path.stat(), path.read_text(encoding="utf-8")
    assert "days" in text
    path.write_text(text.replace("days", "DAYS", 1), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    third = run_index(work / "raw", work / "lake", golden_file="none")
    assert (third["raw_documents"]["hashed_now"], third["parsed_documents"]["parsed_now"]) == (1, 1)
    doc = _documents(work / "lake")[HANDBOOK]
    assert doc["version"] == 2 and doc["sha256"] == file_sha256(path)


def test_renamed_file_embeds_nothing(work):
    (work / "raw" / "handbook" / "faq.txt").write_bytes((work / "raw" / "handbook" / "notes.txt").read_bytes())
    (work / "raw" / "handbook" / "notes.txt").unlink()
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["embeddings"]["embedded"] == 0
    assert report["parsed_documents"]["parsed_now"] == 0  # same bytes: the parse cache answers
    assert (report["lancedb_index"]["added"], report["lancedb_index"]["deleted"]) == (1, 1)
    assert "handbook/faq.txt" in _documents(work / "lake") and "handbook/notes.txt" not in _documents(work / "lake")


def test_withdrawal_is_metadata_only_and_hides_the_document_in_every_mode(work):
    question = "How many days of paid annual leave does a full-time employee get?"
    before = RagIndex.open(work / "lake").search(question, k=50)
    assert HANDBOOK in {h.source for h in before}
    sidecar = work / "raw" / (HANDBOOK + ".meta.json")
    sidecar.write_text(sidecar.read_text(encoding="utf-8").replace('"published"', '"withdrawn"'), encoding="utf-8")
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["embeddings"]["embedded"] == 0 and report["parsed_documents"]["parsed_now"] == 0
    assert report["lancedb_index"]["updated"] == 1
    index = RagIndex.open(work / "lake")
    for mode in ("hybrid", "vector", "keyword"):
        assert HANDBOOK not in {h.source for h in index.search(question, mode=mode, k=50)}
    assert _documents(work / "lake")[HANDBOOK]["version"] == 1  # metadata changes keep the version


def test_a_sidecar_only_change_stages_a_new_generation_from_cached_chunks(work):
    """The unchanged-run shortcut must still see ACL/owner edits: nothing re-parsed, re-chunked or
    re-embedded, yet a new generation serves the new owner and access groups on every row."""
    lake = Lake(work / "lake")
    served = lake.read_manifest()["generation"]
    sidecar = work / "raw" / (HANDBOOK + ".meta.json")
    sidecar.write_text(
        sidecar.read_text(encoding="utf-8").replace("hr@northwind-robotics.example", "people@northwind-robotics.example").replace('"all-staff"', '"hr-team"'),
        encoding="utf-8",
    )
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["success"] and report["lancedb_index"]["new_generation"] is True
    assert (report["parsed_documents"]["parsed_now"], report["chunks"]["rechunked"], report["embeddings"]["embedded"]) == (0, 0, 0)
    assert report["lancedb_index"]["updated"] == 1 and lake.read_manifest()["generation"] == served + 1
    rows = [r for r in lake.published_arrow(s.CHUNKS, columns=["source", "owner", "access_groups"]).to_pylist() if r["source"] == HANDBOOK]
    assert rows and all(r["owner"] == "people@northwind-robotics.example" and r["access_groups"] == ["hr-team"] for r in rows)
    again = run_index(work / "raw", work / "lake", golden_file="none")
    assert again["lancedb_index"]["new_generation"] is False and lake.read_manifest()["generation"] == served + 1


def test_other_chunk_settings_rechunk_every_document(work, monkeypatch):
    before = Lake(work / "lake").published_arrow(s.CHUNKS, columns=["chunk_id"]).column("chunk_id").to_pylist()
    monkeypatch.setenv("RAG_CHUNK_MAX_TOKENS", "120")
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["success"] and report["chunks"]["rechunked"] == 13 and report["chunks"]["reused_from_chunk_cache"] == 0
    assert report["lancedb_index"]["new_generation"] is True
    assert report["chunks"]["chunks"] > len(before)  # smaller chunks, more of them


def test_deleted_file_leaves_the_index(work):
    (work / "raw" / "handbook" / "notes.txt").unlink()
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["success"] and report["lancedb_index"]["deleted"] == 1
    chunks = Lake(work / "lake").published_arrow(s.CHUNKS).column("source").to_pylist()
    assert "handbook/notes.txt" not in chunks


def test_a_scan_that_sees_too_few_files_deletes_nothing(work):
    served = Lake(work / "lake").read_manifest()
    shutil.rmtree(work / "raw" / "products")
    shutil.rmtree(work / "raw" / "handbook")
    shutil.rmtree(work / "raw" / "it")
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert not report["success"] and report["checks"]["scan_is_not_truncated"] is False
    assert "lancedb_index" not in report  # the blocking check stopped everything downstream
    assert Lake(work / "lake").read_manifest()["generation"] == served["generation"]
    assert RagIndex.open(work / "lake").search("E-45", k=3)[0].source == "products/x2000_datasheet.pdf"
    allowed = run_index(work / "raw", work / "lake", golden_file="none", allow_mass_deletion=True)
    assert allowed["success"] and allowed["lancedb_index"]["deleted"] == 10  # 4 products + 4 handbook + 2 it


def test_promote_and_rollback_switch_what_queries_read(work):
    lake = Lake(work / "lake")
    (work / "raw" / "products" / "x2000_datasheet.pdf").unlink()
    run_index(work / "raw", work / "lake", golden_file="none")
    new, old = lake.read_manifest()["generation"], lake.list_generations()[0]["generation"]
    assert new == old + 1

    def top_source():
        return RagIndex.open(work / "lake").search("E-45 lidar", mode="keyword", k=1)[0].source

    assert top_source() != "products/x2000_datasheet.pdf"
    lake.rollback()
    assert lake.read_manifest()["generation"] == old and top_source() == "products/x2000_datasheet.pdf"
    lake.promote(new)
    assert top_source() != "products/x2000_datasheet.pdf"


def test_opening_an_index_with_another_model_is_refused(work):
    lake = Lake(work / "lake")
    manifest = lake.read_manifest()
    manifest["model"] = {**manifest["model"], "name": "some-other-model", "key": "0123456789abcdef"}
    lake._write_json(work / "lake" / "index_manifest.json", manifest)  # injected fault: a foreign index
    with pytest.raises(ModelMismatchError, match="some-other-model.*multilingual-e5-small"):
        RagIndex.open(work / "lake")
