"""Data flow under concurrency: stage outputs stay in their own lake, one writer per lake,
no-op runs stage nothing, housekeeping keeps what rollback needs. Real `rag index` processes,
real Dagster instance, real LanceDB files and model."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pytest

from rag_pipeline.config import Settings
from rag_pipeline.ingest.serialize import parse_key_of
from rag_pipeline.query import RagIndex
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline.store.lock import LakeBusyError, is_locked, lake_writer_lock
from rag_pipeline_tests.indexing import assert_consistent, run_index

REPO = Path(__file__).resolve().parents[1]


def _folder(root: Path, name: str, canary: str, files: int = 3) -> Path:
    raw = root / name
    raw.mkdir(parents=True)
    for i in range(files):
        (raw / f"{name}_{i}.md").write_text(
            f"# {name} note {i}\n\nThe {canary} procedure, step {i}: every {name} file says {canary} {i} times.\n",
            encoding="utf-8",
        )
    return raw


def _rag_index(raw: Path, lake: Path, home: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "DAGSTER_HOME": str(home), "RAG_GOLDEN_FILE": "none", "RAG_PARSE_WORKERS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.cli", "index", "--raw", str(raw), "--lake", str(lake), "--json", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )


def _texts(lake: Path) -> str:
    return " ".join(Lake(lake).published_arrow(s.CHUNKS).column("text").to_pylist())


def test_processes_opening_a_fresh_dagster_home_at_once_all_get_the_instance(tmp_path):
    """Without the init lock, one of them dies in the SQLite schema migrations (seen in CI)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").symlink_to(REPO / "dagster.yaml")
    code = "from rag_pipeline.cli import _dagster_instance\nwith _dagster_instance() as i:\n    print(len(i.get_runs()))"
    env = {**os.environ, "DAGSTER_HOME": str(home)}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and out.strip() == "0", err[-2000:]


@pytest.mark.slow
def test_two_lakes_indexed_at_once_from_one_dagster_home_each_serve_only_their_own_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").symlink_to(REPO / "dagster.yaml")
    a = _folder(tmp_path, "alpha", "ZEBRACANARY")
    b = _folder(tmp_path, "beta", "OKAPICANARY", files=5)
    runs = [_rag_index(a, tmp_path / "lake_a", home), _rag_index(b, tmp_path / "lake_b", home)]
    for run in runs:
        out, err = run.communicate(timeout=600)
        assert run.returncode == 0, err[-3000:]
    for lake, mine, other, n in (("lake_a", "zebracanary", "okapicanary", 3), ("lake_b", "okapicanary", "zebracanary", 5)):
        assert_consistent(tmp_path / lake)
        sources = Lake(tmp_path / lake).published_arrow(s.DOCUMENTS).column("source").to_pylist()
        assert len(sources) == n and all(src.startswith(lake[-1] == "a" and "alpha" or "beta") for src in sources)
        text = _texts(tmp_path / lake).lower()
        assert mine in text and other not in text
        hits = RagIndex.open(tmp_path / lake).search(other.upper(), mode="keyword", k=5).to_dicts()
        assert not any(other in h["text"].lower() for h in hits)
        # the stage outputs live under the lake itself, not in the shared instance storage
        assert list((tmp_path / lake / "staging" / "runs").glob("*/chunks/*.arrow"))
    assert not (home / "storage").exists() or not any((home / "storage").rglob("chunks"))


@pytest.mark.slow
def test_a_run_configured_by_run_config_stages_and_locks_only_its_own_lake(tmp_path, monkeypatch):
    """The lake named in run config (how `rag index` hands its settings to workers out of process,
    and how an operator points a launchpad run elsewhere) is where the run stages its outputs and
    takes the writer lock, not the default lake the definitions were built with."""
    from rag_pipeline.definitions import build_definitions

    monkeypatch.setenv("RAG_LAKE_DIR", str(tmp_path / "default_lake"))
    raw, lake = _folder(tmp_path, "configured", "amber"), tmp_path / "configured_lake"
    job = build_definitions().resolve_job_def("index_job")
    config = {"resources": {"rag": {"config": {"raw_dir": str(raw), "lake_dir": str(lake), "golden_file": "none"}}}}
    with dg.DagsterInstance.ephemeral() as instance:
        result = job.execute_in_process(run_config=config, instance=instance, asset_selection=[dg.AssetKey("raw_documents")])
    assert result.success
    staged = list((lake / "staging" / "runs" / result.run_id).glob("*.arrow"))
    assert [p.name for p in staged] == ["raw_documents.arrow"]
    assert (lake / ".writer.lock").exists()
    assert not (tmp_path / "default_lake").exists()


def test_two_simultaneous_runs_on_one_lake_one_writes_the_other_exits_naming_it(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    raw = _folder(tmp_path, "gamma", "IBEXCANARY", files=6)
    lake = tmp_path / "lake"
    first = _rag_index(raw, lake, home)
    deadline = time.monotonic() + 300
    while not is_locked(lake) and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    second = _rag_index(raw, lake, home)
    out2, err2 = second.communicate(timeout=600)
    out1, err1 = first.communicate(timeout=600)
    assert first.returncode == 0, err1[-3000:]
    assert second.returncode == 3, (second.returncode, err2[-3000:])
    assert "is being written by" in err2 and "Traceback" not in err2
    manifest = assert_consistent(lake)
    assert manifest["generation"] == 1 and len(Lake(lake).list_generations()) == 1
    documents = Lake(lake).published_arrow(s.DOCUMENTS).column("source").to_pylist()
    assert sorted(documents) == sorted(p.name for p in raw.iterdir())
    # after the first one finishes, a re-run finds nothing to do and stages nothing
    rerun = _rag_index(raw, lake, home)
    out3, err3 = rerun.communicate(timeout=600)
    assert rerun.returncode == 0, err3[-3000:]
    assert '"new_generation": false' in out3 and len(Lake(lake).list_generations()) == 1


def _lock_holder(lake: Path, **lock_kwargs) -> subprocess.Popen:
    """Another process holding `lake_writer_lock(lake, **lock_kwargs)` until it is killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c", (
            "import time; from rag_pipeline.store.lock import lake_writer_lock\n"
            f"with lake_writer_lock({str(lake)!r}, **{lock_kwargs!r}):\n"
            "    print('held', flush=True); time.sleep(600)\n"
        )],
        stdout=subprocess.PIPE, text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_the_writer_lock_is_exclusive_and_freed_when_its_holder_is_killed(tmp_path):
    holder = _lock_holder(tmp_path, what="test holder", run_id="run-123")
    try:
        assert is_locked(tmp_path)
        with pytest.raises(LakeBusyError, match=r"test holder run-123 \(pid \d+"):
            with lake_writer_lock(tmp_path, what="second"):
                pass
        started = time.monotonic()
        with pytest.raises(LakeBusyError):
            with lake_writer_lock(tmp_path, what="patient", wait_s=1.0):
                pass
        assert time.monotonic() - started >= 1.0
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert not is_locked(tmp_path)  # a crashed holder leaves no stale lock
    with lake_writer_lock(tmp_path, what="after the crash"):
        assert is_locked(tmp_path)


def test_shards_write_side_by_side_but_never_beside_a_whole_run(tmp_path):
    """Shard holders share the lake and exclude only their own shard; a whole-lake holder
    (a whole run, a publish, a promotion) excludes every shard, and a shard holder excludes it."""
    holder = _lock_holder(tmp_path, what="shard run", run_id="run-7", shard="00of02")
    try:
        assert is_locked(tmp_path)  # `rag index` and promotions see the lake as busy
        with lake_writer_lock(tmp_path, what="other shard", shard="01of02"):
            pass  # another shard proceeds at once
        with pytest.raises(LakeBusyError, match=r"^shard 00of02 of the lake .* shard run \(shard 00of02\) run-7"):
            with lake_writer_lock(tmp_path, what="same shard", shard="00of02"):
                pass
        with pytest.raises(LakeBusyError, match=r"^the lake .* shard runs: shard run \(shard 00of02\) run-7"):
            with lake_writer_lock(tmp_path, what="whole run"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with lake_writer_lock(tmp_path, what="whole run"):
        with pytest.raises(LakeBusyError):
            with lake_writer_lock(tmp_path, what="a shard", shard="01of02"):
                pass


@pytest.mark.slow
def test_no_op_run_stages_nothing_and_housekeeping_keeps_what_rollback_needs(work):
    lake = Lake(work / "lake")
    before = lake.read_manifest()["generation"]
    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["success"] and report["lancedb_index"]["new_generation"] is False
    assert report["published_index"]["promoted"] is False
    # nothing was written to a cache and the newest generation is the one the last run pruned for
    assert report["lake_housekeeping"]["caches"] == "unchanged since the last housekeeping"
    assert report["lake_housekeeping"]["cache_rows_removed"] == {}
    assert lake.read_manifest()["generation"] == before == max(g["generation"] for g in lake.list_generations())
    # three real changes (two files added, then one of them edited) → three new generations;
    # housekeeping (keep 1) in each run prunes the rest
    for name, text in (("notice_0.txt", "the lab closes at 17:00"), ("notice_1.txt", "the lab closes at 18:00"),
                       ("notice_0.txt", "the lab now closes at 16:00")):
        (work / "raw" / "handbook" / name).write_text(f"Notice: {text}.\n", encoding="utf-8")
        report = run_index(work / "raw", work / "lake", keep_generations=1, golden_file="none")
        assert report["success"], report["failures"]
        assert report["published_index"]["promoted"] is True
    # the caches hold what the newest generation was built from, and nothing of the edited file's old text
    assert report["lake_housekeeping"]["caches"] == "pruned and compacted"
    assert report["lake_housekeeping"]["cache_rows_removed"][s.PARSE_CACHE] == 1
    assert report["lake_housekeeping"]["cache_rows_removed"][s.CHUNK_CACHE] == 1
    newest = lake.read_generation(max(g["generation"] for g in lake.list_generations()))
    files = [lake.open_published(name, newest).to_lance().to_table(columns=["sha256", "source"]).to_pylist() for name in (s.DOCUMENTS, s.QUARANTINE)]
    parse_key = parse_key_of(Settings().ocr_lang)
    assert lake.cached_parse_keys([parse_key(f["sha256"], f["source"]) for rows in files for f in rows]) == set(lake.db.open_table(s.PARSE_CACHE).to_lance().to_table(columns=["cache_key"]).column("cache_key").to_pylist())
    fingerprints = set(lake.open_published(s.CHUNKS, newest).to_lance().to_table(columns=["fingerprint"]).column("fingerprint").to_pylist())
    assert lake.count_uncached_vectors(newest["model"]["key"], [pa.array(sorted(fingerprints))]) == (len(fingerprints), 0)
    assert lake.db.open_table(s.embedding_cache_table(newest["model"]["key"])).count_rows() == len(fingerprints)  # no stale vector
    chunk_ids = set(lake.open_published(s.CHUNKS, newest).to_lance().to_table(columns=["chunk_id"]).column("chunk_id").to_pylist())
    cached_ids = lake.db.open_table(s.CHUNK_CACHE).to_lance().to_table(columns=["chunk_id"]).column("chunk_id").to_pylist()
    assert set().union(*map(set, cached_ids)) == chunk_ids  # every chunking kept is indexed whole, and every indexed one kept
    assert lake.db.open_table(s.embedding_cache_table(newest["model"]["key"])).count_rows() == len(fingerprints)
    chunk_ids = set(lake.open_published(s.CHUNKS, newest).to_lance().to_table(columns=["chunk_id"]).column("chunk_id").to_pylist())
    chunkings = lake.db.open_table(s.CHUNK_CACHE).to_lance().to_table(columns=["chunk_id"]).column("chunk_id").to_pylist()
    assert chunkings and all(set(ids) <= chunk_ids for ids in chunkings)
    assert set().union(*map(set, chunkings)) == chunk_ids  # and nothing the generation indexes was dropped
    served = lake.read_manifest()["generation"]
    kept = [g["generation"] for g in lake.list_generations()]
    assert kept == [served - 1, served]
    assert report["lake_housekeeping"]["generations_removed"] >= 1 or report["lake_housekeeping"]["table_versions_removed"] >= 1
    for name in (s.DOCUMENTS, s.CHUNKS):
        versions = [v["version"] for v in lake.db.open_table(name).to_lance().versions()]
        needed = {lake.read_generation(g)["table_versions"][name] for g in kept}
        assert needed <= set(versions) and len(versions) <= len(needed) + 1
    assert lake.rollback()["generation"] == served - 1
    assert_consistent(work / "lake")
    assert RagIndex.open(work / "lake").search("lab closes", mode="keyword", k=3).to_dicts()


@pytest.mark.slow
def test_cli_rollback_is_recorded_on_published_index(work, tmp_path, monkeypatch):
    from rag_pipeline import cli

    home = tmp_path / "home"
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("RAG_GOLDEN_FILE", "none")  # the gate is tested elsewhere
    (work / "raw" / "handbook" / "extra.txt").write_text("The gym opens at 06:00.\n", encoding="utf-8")
    assert cli.main(["index", "--raw", str(work / "raw"), "--lake", str(work / "lake")]) == 0
    served = Lake(work / "lake").read_manifest()["generation"]
    assert cli.main(["generations", "rollback", "--lake", str(work / "lake")]) == 0
    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("published_index"))
    metadata = event.asset_materialization.metadata
    assert metadata["served_generation"].value == served - 1 == Lake(work / "lake").read_manifest()["generation"]
    assert metadata["action"].value == "rag generations rollback"


def test_the_scan_table_a_run_keeps_for_its_result_is_mapped_from_the_stage_file(tmp_path):
    """`rag index` runs execute_in_process, whose result holds every step's output until the run
    ends: the scan's table built in Arrow memory rode through every later step (36 MB at 100k
    files). raw_documents returns its table mapped from the file it staged, equal to what it built."""
    from rag_pipeline.definitions import build_definitions
    from rag_pipeline.defs.assets import raw_documents
    from rag_pipeline.defs.io import staged_path
    from rag_pipeline.defs.resources import RagSettingsResource
    from rag_pipeline.store import staging

    raw = tmp_path / "raw"
    raw.mkdir()
    for i in range(3_000):
        (raw / f"note-{i:05d}-{'x' * 40}.txt").write_text(f"note {i}\n", encoding="utf-8")
    defs = build_definitions(RagSettingsResource(raw_dir=str(raw), lake_dir=str(tmp_path / "lake")))
    before = pa.total_allocated_bytes()
    result = dg.materialize([raw_documents], resources=defs.resources, instance=dg.DagsterInstance.ephemeral(), raise_on_error=True)
    kept = result.output_for_node("raw_documents")
    assert kept.num_rows == 3_000 and kept.nbytes > 500_000
    assert pa.total_allocated_bytes() - before < kept.nbytes // 10, (pa.total_allocated_bytes() - before, kept.nbytes)
    staged = pa.ipc.open_file(pa.memory_map(str(staged_path(tmp_path / "lake", result.run_id, "raw_documents")))).read_all()
    assert staged.equals(kept) and sorted(staged.column("source").to_pylist()) == sorted(p.name for p in raw.iterdir())
    assert [f.source for f in staging.raw_files_from_table(kept)] == staged.column("source").to_pylist()
