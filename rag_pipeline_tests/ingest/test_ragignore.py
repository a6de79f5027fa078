"""`.ragignore`: files of the raw folder that are not documents are neither indexed nor quarantined,
and are accounted for as ignored."""

from __future__ import annotations

import pytest

from rag_pipeline.ingest.ignore import IgnoreRules
from rag_pipeline.ingest.scan import raw_folder_files
from rag_pipeline_tests.indexing import run_index


def test_patterns_follow_gitignore():
    rules = IgnoreRules.parse(
        "# files about the documents, not documents\n"
        "\n"
        "manifest.tsv\n"
        "/SOURCES.md\n"
        "drafts/\n"
        "exports/**/*.csv\n"
        "*.bak\n"
        "!keep.bak\n"
    )
    assert rules.ignores("manifest.tsv") and rules.ignores("a/b/manifest.tsv")  # no slash: a name at any depth
    assert rules.ignores("SOURCES.md") and not rules.ignores("docs/SOURCES.md")  # leading slash: the root only
    assert rules.ignores("drafts", is_folder=True) and rules.ignores("x/drafts", is_folder=True)
    assert not rules.ignores("drafts")  # a trailing slash matches folders only, not a file so named
    assert rules.ignores("exports/q.csv") and rules.ignores("exports/2026/11/q.csv")  # ** spans segments
    assert not rules.ignores("exports/q.xlsx") and not rules.ignores("other/exports/q.csv")
    assert rules.ignores("old/report.bak") and not rules.ignores("keep.bak")  # the last matching rule decides
    assert not rules.ignores("Manifest.tsv")  # case-sensitive, as git on Linux
    assert not IgnoreRules.parse("").ignores("anything.pdf")
    inside = IgnoreRules.parse("drafts/**\n!drafts/final.md\n")  # what is inside, not the folder: one file back
    assert not inside.ignores("drafts", is_folder=True) and inside.ignores("drafts/wip.md")
    assert not inside.ignores("drafts/final.md") and inside.ignores("drafts/old/final.md")


def test_the_listing_skips_what_the_folder_ignores_and_says_what(tmp_path):
    raw = tmp_path / "raw"
    for relative in ("handbook.md", "manifest.tsv", "pdf/manual.txt", "drafts/plan.txt", "drafts/deep/more.txt"):
        (raw / relative).parent.mkdir(parents=True, exist_ok=True)
        (raw / relative).write_text("text", encoding="utf-8")
    (raw / ".ragignore").write_text("manifest.tsv\ndrafts/\n", encoding="utf-8")
    ignored: list[str] = []
    assert [relative for _, relative in raw_folder_files(raw, ignored)] == ["handbook.md", "pdf/manual.txt"]
    assert ignored == ["drafts/", "manifest.tsv"]  # the folder once, never entered


def test_office_lock_files_are_counted_as_ignored_not_quarantined(tmp_path):
    """Word writes ~$<name> (162 bytes: who has it open) beside a document while it is open; as a
    .docx it would be quarantined corrupt on every night someone works late."""
    raw = tmp_path / "raw"
    (raw / "finance").mkdir(parents=True)
    (raw / "finance" / "budget.docx").write_bytes(b"PK\x03\x04 stands in for the document")
    (raw / "finance" / "~$budget.docx").write_bytes(b"\x05alice" + b"\x00" * 156)
    ignored: list[str] = []
    assert [relative for _, relative in raw_folder_files(raw, ignored)] == ["finance/budget.docx"]
    assert ignored == ["finance/~$budget.docx"]


def test_the_sensor_wakes_for_documents_and_rules_not_for_lock_files_or_hidden_churn(tmp_path):
    from rag_pipeline.defs.automation import folder_signature

    raw = tmp_path / "raw"
    (raw / "finance").mkdir(parents=True)
    (raw / "finance" / "budget.md").write_text("# Budget\n", encoding="utf-8")
    before = folder_signature(str(raw))
    (raw / "finance" / "~$budget.docx").write_bytes(b"\x05alice" + b"\x00" * 156)  # someone opened it
    (raw / "finance" / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1")
    (raw / ".git" / "objects").mkdir(parents=True)
    (raw / ".git" / "objects" / "ab").write_bytes(b"x")
    assert folder_signature(str(raw)) == before
    (raw / ".ragignore").write_text("drafts/\n", encoding="utf-8")  # the folder's rules: a change
    with_rules = folder_signature(str(raw))
    assert with_rules != before
    (raw / "finance" / "budget.md.meta.json").write_text('{"status": "draft"}', encoding="utf-8")  # a sidecar: a change
    assert folder_signature(str(raw)) != with_rules


def test_rules_kept_outside_the_folder_are_read_last_and_must_exist(tmp_path):
    from rag_pipeline.defs.automation import folder_signature

    raw = tmp_path / "raw"
    raw.mkdir()
    for name in ("a.txt", "b.txt", "notes.md"):
        (raw / name).write_text("text", encoding="utf-8")
    (raw / ".ragignore").write_text("*.txt\n", encoding="utf-8")
    outside = tmp_path / "ops.ragignore"
    outside.write_text("!b.txt\nnotes.md\n", encoding="utf-8")
    assert [relative for _, relative in raw_folder_files(raw, ignore_file=outside)] == ["b.txt"]
    before = folder_signature(str(raw), str(outside))
    outside.write_text("!b.txt\n", encoding="utf-8")  # the sensor sees a change of the outside rules
    assert folder_signature(str(raw), str(outside)) != before
    with pytest.raises(ValueError, match="missing.ragignore"):
        list(raw_folder_files(raw, ignore_file=tmp_path / "missing.ragignore"))


def test_an_unreadable_ignore_file_stops_the_scan_with_its_path(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "a.txt").write_text("text", encoding="utf-8")
    (raw / ".ragignore").write_bytes(b"\xff\xfe manifest")
    with pytest.raises(ValueError, match=r"\.ragignore"):
        list(raw_folder_files(raw))


@pytest.mark.slow
def test_an_ignored_catalogue_leaves_the_index_and_every_file_stays_accounted_for(tmp_path):
    """Real run: the catalogue is indexed, then ignored by the folder's .ragignore (it leaves the
    served index like a deleted file, the accounting check still passes), then re-included by a
    rules file kept outside the folder (RAG_IGNORE_FILE), whose lines come last."""
    from rag_pipeline.query import RagIndex

    raw, lake = tmp_path / "raw", tmp_path / "lake"
    raw.mkdir()
    (raw / "handbook.md").write_text("# Leave\n\nEmployees get 25 days of annual leave per year.\n", encoding="utf-8")
    (raw / "SOURCES.md").write_text("# Sources\n\n- handbook.md: the staff handbook on annual leave\n", encoding="utf-8")

    def sources() -> set[str]:
        index = RagIndex.open(lake)
        return {h.source for h in index.search("annual leave handbook", k=10)}

    first = run_index(raw, lake, golden_file="none")
    assert first["success"] and first["raw_documents"]["ignored"] == 0
    assert sources() == {"handbook.md", "SOURCES.md"}

    (raw / ".ragignore").write_text("# the catalogue describes the documents; it is not one\n/SOURCES.md\n", encoding="utf-8")
    second = run_index(raw, lake, golden_file="none")
    assert second["success"], second["failures"]
    assert second["raw_documents"]["ignored"] == 1 and second["raw_documents"]["ignored_paths"] == "SOURCES.md"
    assert second["raw_documents"]["files"] == 1
    assert second["checks"]["every_file_accounted_for"]
    assert sources() == {"handbook.md"}

    outside = tmp_path / "ops.ragignore"  # RAG_IGNORE_FILE: rules kept outside the folder, read last
    outside.write_text("!/SOURCES.md\n", encoding="utf-8")
    third = run_index(raw, lake, golden_file="none", ignore_file=str(outside))
    assert third["success"] and third["raw_documents"]["ignored"] == 0
    assert third["checks"]["every_file_accounted_for"]
    assert sources() == {"handbook.md", "SOURCES.md"}


def test_the_index_summary_says_how_many_files_were_ignored():
    from rag_pipeline.cli import format_index_summary

    counts = {"success": True, "run_id": "r", "raw_dir": "raw", "lake_dir": "lake",
              "scanned_files": 3, "added": 3, "updated": 0, "unchanged": 0, "deleted": 0}
    assert "ignored" not in format_index_summary(counts, [])
    assert "3 files: 3 added, 0 updated, 0 unchanged, 0 deleted; 2 ignored (.ragignore rules)" in format_index_summary(
        {**counts, "ignored": 2}, []
    )


def test_a_run_carries_its_ignore_file_or_its_absence_to_every_worker(tmp_path, monkeypatch):
    """Out of process each step rebuilds the settings from the run config: a worker whose own
    environment names an ignore file must still follow the submitter, who named none."""
    from pathlib import Path

    from rag_pipeline.cluster.jobs import run_config_for
    from rag_pipeline.config import Settings
    from rag_pipeline.defs.resources import RagSettingsResource

    monkeypatch.setenv("RAG_IGNORE_FILE", str(tmp_path / "worker.ragignore"))
    for submitted in (None, tmp_path / "ops.ragignore"):
        config = run_config_for(Settings(raw_dir=tmp_path, lake_dir=tmp_path, golden_file=None, ignore_file=submitted))
        assert RagSettingsResource(**config["resources"]["rag"]["config"]).settings().ignore_file == submitted
    assert Settings().ignore_file == Path(tmp_path / "worker.ragignore")


@pytest.mark.slow
def test_rag_index_takes_the_rules_from_outside_the_folder_and_says_what_it_ignored(tmp_path):
    """`rag index --ignore-file` (a read-only share cannot hold a .ragignore): a real process; a
    missing rules file is a usage error naming it, before any run starts."""
    import os
    import subprocess
    import sys

    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "handbook.md").write_text("# Leave\n\nEmployees get 25 days of annual leave per year.\n", encoding="utf-8")
    (raw / "SOURCES.md").write_text("# Sources\n\n- handbook.md: the staff handbook\n", encoding="utf-8")
    rules = tmp_path / "share.ragignore"
    rules.write_text("/SOURCES.md\n", encoding="utf-8")
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "RAG_GOLDEN_FILE": "none"}
    env.pop("RAG_IGNORE_FILE", None)

    def rag(*args):
        return subprocess.run([sys.executable, "-m", "rag_pipeline.cli", "index", "-q", "--raw", str(raw),
                               "--lake", str(tmp_path / "lake"), *args], capture_output=True, text=True, env=env, timeout=900)

    missing = rag("--ignore-file", str(tmp_path / "nowhere.ragignore"))
    assert missing.returncode == 2 and "nowhere.ragignore does not exist" in missing.stderr, missing.stderr
    assert not (tmp_path / "lake" / "index_manifest.json").exists()
    done = rag("--ignore-file", str(rules))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "2 files" not in done.stdout and "; 1 ignored (.ragignore rules)" in done.stdout, done.stdout
