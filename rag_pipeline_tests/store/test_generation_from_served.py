"""A generation built from the served one (issue 16): only changed documents' rows are written,
and what it serves is what a whole build of the same folder serves. Real Dagster runs, real lakes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.compute as pc
import pytest

from rag_pipeline.defs import assets
from rag_pipeline.query import RagIndex
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.indexing import assert_consistent, run_index
from rag_pipeline_tests.test_cli_ux import rag

pytestmark = pytest.mark.slow
CANARY = "The quokka clause: every team keeps one spare umbrella by the door."


def _change_folder(raw):
    """One edit, one new file, one deletion, one metadata-only change (access groups)."""
    notes = raw / "handbook" / "notes.txt"
    notes.write_text(notes.read_text(encoding="utf-8") + "\n" + CANARY + "\n", encoding="utf-8")
    (raw / "handbook" / "umbrellas.md").write_text("# Umbrellas\n\nUmbrella loans are free of charge at reception.\n", encoding="utf-8")
    (raw / "it" / "runbook_vpn.html").unlink()
    (raw / "it" / "runbook_vpn.html.meta.json").unlink()
    sidecar = raw / "handbook" / "old_leave_policy_2019.md.meta.json"
    meta = json.loads(sidecar.read_text(encoding="utf-8"))
    sidecar.write_text(json.dumps({**meta, "access_groups": ["it-only"]}), encoding="utf-8")


def _rows(lake_dir, name: str, key: str):
    table = Lake(lake_dir).published_arrow(name)
    return table.take(pc.sort_indices(table, [(key, "ascending")])).to_pylist()


def _resident_stage_kb() -> int | None:
    """Resident kB of this process's mappings of stage files (None off Linux)."""
    try:
        smaps = Path("/proc/self/smaps").read_text()
    except OSError:
        return None
    total, in_stage = 0, False
    for line in smaps.splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and not fields[0].endswith(":"):  # a mapping's header line
            in_stage = len(fields) > 5 and "/staging/" in fields[5]
        elif in_stage and fields[:1] == ["Rss:"]:
            total += int(fields[1])
    return total


def test_changed_documents_only_are_rewritten_and_the_result_equals_a_whole_build(work, monkeypatch):
    lake = Lake(work / "lake")
    served = lake.read_manifest()
    assert served["build"]["kind"] == "full"
    shutil.copytree(work / "lake", work / "whole_lake")
    fingerprints = lambda manifest: set(lake.open_published(s.CHUNKS, manifest).to_lance().to_table(columns=["fingerprint"]).column("fingerprint").to_pylist())  # noqa: E731
    before = fingerprints(served)
    _change_folder(work / "raw")

    # each batch of replaced rows reaches the writer with the stage pages it was taken from let go:
    # a few hundred scattered rows taken faulted in whole shard files (88 MB at 10k documents)
    resident_at_write: list[int | None] = []
    stage_changes = Lake.stage_changes

    def watched(self, served, documents, batches, *args, **kwargs):
        def each():
            for batch in batches:
                resident_at_write.append(_resident_stage_kb())
                yield batch
        return stage_changes(self, served, documents, each(), *args, **kwargs)

    monkeypatch.setattr(Lake, "stage_changes", watched)
    # the chunks step reads every parse to key its chunk cache look-up: let go shard by shard
    # (at 100k documents all 40 parse shards, 615 MB, were resident through the look-up)
    resident_at_lookup: list[int | None] = []
    cached_chunk_keys = Lake.cached_chunk_keys

    def watched_lookup(self, keys):
        resident_at_lookup.append(_resident_stage_kb())
        return cached_chunk_keys(self, keys)

    monkeypatch.setattr(Lake, "cached_chunk_keys", watched_lookup)
    monkeypatch.setattr(assets, "REBUILD_AFTER_REPLACED", 1.0)  # 4 of 13 files: past the default share
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["success"], report["failures"]
    assert resident_at_write and (resident_at_write[0] is None or max(resident_at_write) == 0), resident_at_write
    assert resident_at_lookup == [None] or resident_at_lookup == [0], resident_at_lookup
    built = lake.read_manifest()
    assert built["generation"] == served["generation"] + 1
    after = fingerprints(built)  # what chunk_fingerprints reported against the served generation
    assert {k: report["chunk_fingerprints"][k] for k in ("fingerprints", "new", "same", "gone")} == {
        "fingerprints": len(after), "new": len(after - before), "same": len(after & before), "gone": len(before - after)}
    assert report["chunk_fingerprints"]["new"] and report["chunk_fingerprints"]["gone"]
    assert built["build"]["kind"] == "changes" and built["build"]["base_generation"] == served["generation"]
    assert built["build"]["documents_replaced"] == 4  # edited, new, deleted, re-permissioned
    assert report["lancedb_index"]["build"] == "changes"  # what the UI shows the operator
    assert report["lancedb_index"]["index_segments"] == built["build"]["index_segments"] == 2  # the night's delta
    listed = rag("generations", "--lake", str(work / "lake"))
    assert listed.returncode == 0 and f"(from gen {served['generation']}: 4 documents' rows replaced)" in listed.stdout.decode()
    assert 0 < built["build"]["rows_added"] < built["counts"]["chunks"]
    assert_consistent(work / "lake")

    monkeypatch.setattr(assets, "REBUILD_AFTER_REPLACED", 0.0)  # the same folder, built whole
    whole = run_index(work / "raw", work / "whole_lake", golden_file="none")
    assert whole["success"], whole["failures"]
    assert Lake(work / "whole_lake").read_manifest()["build"]["kind"] == "full"

    assert _rows(work / "lake", s.CHUNKS, "chunk_id") == _rows(work / "whole_lake", s.CHUNKS, "chunk_id")
    assert _rows(work / "lake", s.TERM_STATS, "term") == _rows(work / "whole_lake", s.TERM_STATS, "term")
    ignore = {"indexed_at"}
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ignore} for r in rows]  # noqa: E731
    assert strip(_rows(work / "lake", s.DOCUMENTS, "doc_id")) == strip(_rows(work / "whole_lake", s.DOCUMENTS, "doc_id"))

    index = RagIndex.open(work / "lake")
    found = index.search("quokka umbrella clause", mode="keyword", k=3)
    assert found and "quokka" in found[0].text
    assert not [h for h in index.search("VPN account locked", k=20) if h.source.endswith("runbook_vpn.html")]
    old_policy = [r for r in _rows(work / "lake", s.CHUNKS, "chunk_id") if r["source"].endswith("old_leave_policy_2019.md")]
    assert old_policy and all(r["access_groups"] == ["it-only"] for r in old_policy)  # a sidecar change reaches the rows

    lake.rollback()  # the base generation is untouched: rollback serves the deleted file again
    old = RagIndex.open(work / "lake")
    assert [h for h in old.search("VPN account locked", k=20) if h.source.endswith("runbook_vpn.html")]
    assert not [h for h in old.search("quokka umbrella clause", mode="keyword", k=3) if "quokka" in h.text]


@pytest.mark.parametrize("reason", ["digest scheme", "share replaced"])
def test_a_generation_is_built_whole_when_the_served_one_cannot_be_built_upon(work, reason):
    """Another row-digest scheme (e.g. another polars version) compares unequal everywhere; a
    change past REBUILD_AFTER_REPLACED of the rows (4 of the sample's 13 files) is built whole
    too, so the full-text index's statistics stop counting deleted rows."""
    lake = Lake(work / "lake")
    served = lake.read_manifest()
    if reason == "digest scheme":
        lake._write_json(lake.lake_dir / "index_manifest.json", {**served, "row_digests": "0-unknown"})
        (work / "raw" / "handbook" / "umbrellas.md").write_text("# Umbrellas\n\nUmbrella loans are free.\n", encoding="utf-8")
    else:
        _change_folder(work / "raw")
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["success"], report["failures"]
    assert lake.read_manifest()["build"]["kind"] == "full"
    assert_consistent(work / "lake")
