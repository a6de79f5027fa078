"""Clear failures: a full disk, an unwritable lake, a missing model, a damaged table.

Each must end in one actionable message (what failed, why, what to do), a failed Dagster step
or check, and the last good generation still serving. The disk fault is real: the indexing
process runs under a file-size limit (RLIMIT_FSIZE), so the kernel refuses LanceDB's write
exactly as it does when a disk fills up; the rest are real files, folders and models.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rag_pipeline import cli
from rag_pipeline.query import RagIndex
from rag_pipeline.store.lake import IndexUnreadableError, Lake
from rag_pipeline_tests.indexing import assert_consistent, run_index

pytestmark = pytest.mark.slow
LIMITED_RUN = """
import json, resource, sys
from rag_pipeline_tests.indexing import run_index
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[3]), resource.RLIM_INFINITY))
report = run_index(sys.argv[1], sys.argv[2], golden_file="none")
print(json.dumps({"success": report["success"], "failures": report["failures"]}))
"""


def _add_memos(raw: Path, n: int) -> None:
    (raw / "extra").mkdir(exist_ok=True)
    for i in range(n):
        (raw / "extra" / f"memo_{i:02d}.md").write_text(
            f"# Memo {i}\n\n" + " ".join(f"Item {i}-{j}: the {j}th rule of memo {i} on topic {i * j}." for j in range(40)),
            encoding="utf-8",
        )


def _largest_data_file(table_dir: Path) -> int:
    return max(f.stat().st_size for f in (table_dir / "data").iterdir())


def _still_serving(lake_dir: Path, generation: int) -> None:
    assert Lake(lake_dir).read_manifest()["generation"] == generation
    assert_consistent(lake_dir)
    assert RagIndex.open(lake_dir).search("E-45", k=1)[0].source == "products/x2000_datasheet.pdf"


def test_a_full_disk_fails_the_write_with_a_clear_message_and_the_index_keeps_serving(work):
    lake_dir = work / "lake"
    served = Lake(lake_dir).read_manifest()["generation"]
    limit = _largest_data_file(lake_dir / "chunks.lance") + 16_000  # room for the small cache writes, not the table
    _add_memos(work / "raw", 12)
    proc = subprocess.run(
        [sys.executable, "-c", LIMITED_RUN, str(work / "raw"), str(lake_dir), str(limit)],
        capture_output=True, text=True, check=False, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    # the first write past the limit fails its step (a stage output or the table), nothing after it runs
    assert not report["success"] and len(report["failures"]) == 1
    message = next(iter(report["failures"].values()))
    assert "File too large" in message and "ulimit -f" in message
    assert f"Nothing was promoted: generation {served} keeps serving" in message
    _still_serving(lake_dir, served)

    rerun = run_index(work / "raw", lake_dir, golden_file="none")  # space back: the next run completes, the memos are in
    assert rerun["success"] and rerun["lancedb_index"]["added"] == 12
    assert Lake(lake_dir).read_manifest()["generation"] == served + 1


def test_a_lake_path_blocked_by_a_file_fails_before_anything_is_written(tmp_path, capsys):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file where the lake should be", encoding="utf-8")
    raw = tmp_path / "raw"
    raw.mkdir()
    (raw / "note.txt").write_text("The canteen opens at noon.", encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(tmp_path / "home")
    try:
        code = cli.main(["index", "--raw", str(raw), "--lake", str(blocker / "lake")])
    finally:
        os.environ.pop("DAGSTER_HOME")
    err = capsys.readouterr().err
    assert code == 1
    assert "LakeWriteError" in err and "a file stands where the lake expects a folder" in err
    assert blocker.read_text(encoding="utf-8") == "a file where the lake should be"


def test_a_missing_model_fails_the_run_with_a_clear_message_and_the_index_keeps_serving(work, capsys):
    served = Lake(work / "lake").read_manifest()["generation"]
    _add_memos(work / "raw", 2)
    report = run_index(work / "raw", work / "lake", embedding_model=str(work / "no-such-model"))
    assert not report["success"] and "lancedb_index" not in report
    message = next(iter(report["failures"].values()))
    assert "cannot load the embedding model" in message and "Nothing downloads at run time" in message
    _still_serving(work / "lake", served)
    os.environ["RAG_EMBEDDING_MODEL"] = str(work / "no-such-model")
    try:
        code = cli.main(["search", "E-45", "--lake", str(work / "lake")])
    finally:
        os.environ.pop("RAG_EMBEDDING_MODEL")
    assert code == 2 and "rag: error: cannot load the embedding model" in capsys.readouterr().err


def test_a_damaged_table_is_named_with_its_fix_and_rollback_or_a_rerun_repairs_it(work, capsys):
    lake_dir = work / "lake"
    lake = Lake(lake_dir)
    old = lake.read_manifest()["generation"]
    files_before = set((lake_dir / "chunks.lance" / "data").iterdir())
    _add_memos(work / "raw", 2)
    assert run_index(work / "raw", lake_dir, golden_file="none")["success"]
    damaged = set((lake_dir / "chunks.lance" / "data").iterdir()) - files_before
    assert damaged  # the new generation's chunk files; the old generation's are untouched
    for f in damaged:
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # a torn write / bad sector

    with pytest.raises(IndexUnreadableError, match=rf"table chunks of generation {old + 1} .*rag generations rollback"):
        RagIndex.open(lake_dir).search("E-45", k=1)
    assert cli.main(["search", "E-45", "--lake", str(lake_dir)]) == 2
    assert "rag: error: table chunks of generation" in capsys.readouterr().err

    assert cli.main(["generations", "rollback", "--lake", str(lake_dir)]) == 0
    _still_serving(lake_dir, old)

    lake.promote(old + 1)  # serve the damaged one again: a new run must not be blocked by it
    report = run_index(work / "raw", lake_dir, golden_file="none")
    assert report["success"] and all(report["checks"].values()), report
    final = assert_consistent(lake_dir)
    assert final["generation"] == old + 2 and final["counts"]["documents"] == 13 + 2
    assert RagIndex.open(lake_dir).search("E-45", k=1)[0].source == "products/x2000_datasheet.pdf"
