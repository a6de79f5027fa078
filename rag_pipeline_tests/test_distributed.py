"""index_job on a real one-machine cluster (scripts/cluster.sh): PostgreSQL instance storage, a
Redis broker and two Celery workers. The steps run in the workers, the shards (2 here) in runs of
their own side by side, the runs are recorded in Postgres, the served index equals the in-process
one built with the default 4 shards, a re-run runs only the shards whose files changed, and
neither a step process killed mid-embedding nor a Postgres or Redis restart mid-run loses
anything; runs launched onto the instance's queue run one at a time."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from rag_pipeline.cluster.env import read_cluster_env
from rag_pipeline.defs.shards import shard_keys, shard_of
from rag_pipeline.ingest.scan import doc_id_for
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.indexing import assert_consistent, run_index

REPO = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.distributed, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    where = tmp_path_factory.mktemp("cluster")
    up = subprocess.run(["bash", "scripts/cluster.sh", "up", "--dir", str(where), "--workers", "2"],  # RAG_SHARDS=2: not the in-process default
                        cwd=REPO, env={**os.environ, "RAG_SHARDS": "2"}, capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-3000:]
        yield where, {**os.environ, **read_cluster_env(where)}
    finally:
        subprocess.run(["bash", "scripts/cluster.sh", "down", "--dir", str(where)], cwd=REPO, timeout=300)


def _raw(tmp_path: Path) -> Path:
    raw = tmp_path / "raw"
    for part in ("handbook", "it"):  # md, txt, docx, html, with sidecar permissions
        shutil.copytree(REPO / "data" / "sample" / part, raw / part)
    return raw


def _start_cluster_index(where: Path, env: dict, raw: Path, lake: Path, **extra: str) -> subprocess.Popen:
    """`cluster.sh index --json` started on the cluster (no golden eval), output piped."""
    return subprocess.Popen(
        ["bash", "scripts/cluster.sh", "index", "--dir", str(where), "--raw", str(raw), "--lake", str(lake), "--json"],
        cwd=REPO, env={**env, "RAG_GOLDEN_FILE": "none", **extra}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def _cluster_index(where: Path, env: dict, raw: Path, lake: Path) -> dict:
    out, err = _start_cluster_index(where, env, raw, lake, RAG_SHARD_RUNS="2").communicate(timeout=900)
    assert out.strip(), err[-3000:]
    return json.loads(out)


def test_index_job_on_two_celery_workers_serves_the_in_process_index(cluster, tmp_path):
    where, env = cluster
    raw = _raw(tmp_path)
    summary = _cluster_index(where, env, raw, tmp_path / "celery_lake")
    assert summary["success"], summary
    # every step ran in a Celery worker of this cluster, not in the submitting process; the
    # workers were started without RAG_GOLDEN_FILE=none, the run carried it (no golden eval)
    workers = {f"rag{i}@{os.uname().nodename}" for i in (1, 2)}
    steps = {step.partition("[")[0] for step in summary["step_workers"]}
    assert {"raw_documents", "parse_documents", "embeddings", "lancedb_index", "published_index"} <= steps
    assert set(summary["step_workers"].values()) <= workers
    # the shards ran as runs of their own (cluster.fanout), side by side, on both workers
    shard_runs = [r for r in summary["runs"] if r["phase"] == "shard"]
    assert [r["phase"] for r in summary["runs"]] == ["scan", *["shard"] * len(shard_runs), "publish"]
    assert len(shard_runs) == int(env["RAG_SHARDS"]) >= 2
    assert {w for step, w in summary["step_workers"].items() if "[" in step} == workers
    assert summary["check_verdicts"]["golden_quality_holds"]["verdict"] == "skipped"

    reference = run_index(raw, tmp_path / "in_process_lake", golden_file="none")
    assert reference["success"], reference["failures"]
    theirs, ours = Lake(tmp_path / "celery_lake"), Lake(tmp_path / "in_process_lake")
    assert theirs.published_arrow(s.DOCUMENTS).column("doc_id").to_pylist() == ours.published_arrow(s.DOCUMENTS).column("doc_id").to_pylist()
    a, b = theirs.published_arrow(s.CHUNKS), ours.published_arrow(s.CHUNKS)
    assert a.num_rows > 10 and a.column("chunk_id").to_pylist() == b.column("chunk_id").to_pylist()
    assert a.column("text").to_pylist() == b.column("text").to_pylist()
    assert np.abs(np.array(a.column("vector").to_pylist()) - np.array(b.column("vector").to_pylist())).max() <= 1e-5

    # the runs are in the cluster's Postgres-backed instance, with every step's events; the
    # shard runs overlapped in time
    check = subprocess.run(
        [str(REPO / ".venv" / "bin" / "python"), "-c",
         "import dagster as dg, json, sys\n"
         "i = dg.DagsterInstance.get()\n"
         f"records = [i.get_run_record_by_id(r) for r in {[r['run_id'] for r in summary['runs']]!r}]\n"
         "print(json.dumps([type(i.run_storage).__name__, [r.dagster_run.status.value for r in records],\n"
         "                  sum(len(i.all_logs(r.dagster_run.run_id)) for r in records),\n"
         "                  [(r.start_time, r.end_time) for r in records if r.dagster_run.tags.get('rag/phase') == 'shard']]))"],
        env=env, capture_output=True, text=True, timeout=120,
    )
    storage, statuses, events, spans = json.loads(check.stdout.strip().splitlines()[-1])
    assert storage == "PostgresRunStorage" and set(statuses) == {"SUCCESS"} and events > 50
    assert max(start for start, _ in spans[:2]) < min(end for _, end in spans[:2]), spans  # the first two ran at once

    # a re-run finds every shard's staged outputs up to date (same files, same settings): it
    # scans and publishes only, and the served generation stays as it was
    generation = json.loads((tmp_path / "celery_lake" / "index_manifest.json").read_text())["generation"]
    again = _cluster_index(where, env, raw, tmp_path / "celery_lake")
    assert again["success"], again
    assert [r["phase"] for r in again["runs"]] == ["scan", "publish"]  # every shard was up to date
    assert len(again["shards_up_to_date"]) == len(shard_runs)
    assert json.loads((tmp_path / "celery_lake" / "index_manifest.json").read_text())["generation"] == generation
    assert theirs.published_arrow(s.CHUNKS).column("chunk_id").to_pylist() == a.column("chunk_id").to_pylist()

    # one file changes: only its shard runs again, the other's staged outputs are up to date
    changed = sorted(raw.rglob("*.md"))[0]
    changed.write_text(changed.read_text(encoding="utf-8") + "\n\nAmber widgets are stored in hall 9.\n", encoding="utf-8")
    edited = _cluster_index(where, env, raw, tmp_path / "celery_lake")
    assert edited["success"], edited
    shard = shard_of(doc_id_for(changed.relative_to(raw).as_posix()), shard_keys(2))
    assert [(r["phase"], r["shard"]) for r in edited["runs"]] == [("scan", None), ("shard", shard), ("publish", None)]
    assert edited["shards_up_to_date"] == [k for k in shard_keys(2) if k != shard]
    assert (edited["updated"], edited["parsed_now"], edited["new_generation"]) == (1, 1, True)
    assert any("Amber widgets are stored in hall 9." in t for t in Lake(tmp_path / "celery_lake").published_arrow(s.CHUNKS).column("text").to_pylist())
    assert_consistent(tmp_path / "celery_lake")



def test_a_worker_process_killed_mid_embedding_hands_its_step_on(cluster, tmp_path):
    """SIGKILL (as the OOM killer would send) to the process running an `embeddings` step: the
    worker's supervisor reports the lost task, the broker delivers it again, the step runs anew
    and the run completes with every file indexed once."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    where, env = cluster
    raw, lake = _raw(tmp_path), tmp_path / "lake"
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(env["DAGSTER_HOME"]))
    known = {r.run_id for r in instance.get_runs()}
    run = _start_cluster_index(where, env, raw, lake)
    killed = None
    while killed is None and run.poll() is None:
        for shard_run in instance.get_runs(dg.RunsFilter(tags={"rag/phase": "shard"})):
            if shard_run.run_id in known:
                continue
            started = instance.all_logs(shard_run.run_id, of_type=dg.DagsterEventType.STEP_START)
            embedding = [e for e in started if e.step_key == "embeddings"]
            if embedding:
                killed = (shard_run.run_id, embedding[0].dagster_event.pid)
                os.kill(killed[1], signal.SIGKILL)
                break
        time.sleep(0.1)
    out, err = run.communicate(timeout=900)
    assert killed, "the run ended before an embedding step was seen: nothing was killed"
    summary = json.loads(out)
    assert summary["success"], err[-3000:]
    restarts = [e for e in instance.all_logs(killed[0], of_type=dg.DagsterEventType.STEP_START) if e.step_key == "embeddings"]
    assert len(restarts) == 2 and restarts[1].dagster_event.pid != killed[1]  # the step ran again, in another process
    instance.dispose()
    manifest = assert_consistent(lake)
    assert manifest["counts"]["documents"] == summary["documents"] == 6
    assert summary["checks"]["every_file_accounted_for"] == "passed"


@pytest.mark.parametrize("drill", ["restart-postgres", "restart-redis"])
def test_the_database_or_the_broker_restarted_during_a_cluster_run_loses_nothing(cluster, tmp_path, drill):
    """The instance's database, or the Celery broker, goes away for a moment while the steps
    run: the run either completes (dagster-postgres retries its connections; the workers
    reconnect to Redis, whose queues and results are on disk) or fails with a message, and what
    the lake serves afterwards is whole; a re-run then serves every file."""
    where, env = cluster
    raw, lake = _raw(tmp_path), tmp_path / "lake"
    run = _start_cluster_index(where, env, raw, lake)
    time.sleep(8)
    assert run.poll() is None, f"the run ended before {drill}: nothing was tested"
    restarted = subprocess.run(["bash", "scripts/cluster.sh", drill, "--dir", str(where)],
                               cwd=REPO, capture_output=True, text=True, timeout=120)
    assert restarted.returncode == 0, restarted.stdout + restarted.stderr
    out, err = run.communicate(timeout=900)
    summary = json.loads(out) if out.strip() else {"success": False}
    if not summary["success"]:  # a clear failure, then a re-run that completes
        assert "rag:" in err or "failed" in err, err[-3000:]
        summary = _cluster_index(where, env, raw, lake)
        assert summary["success"], summary
    manifest = assert_consistent(lake)
    assert manifest["counts"]["documents"] == summary["documents"] == 6
    assert summary["checks"]["every_file_accounted_for"] == "passed"


def test_runs_launched_onto_the_queue_run_one_at_a_time_on_the_workers(cluster, tmp_path):
    """Two index runs submitted to the instance (as the UI, a schedule or `dagster job launch`
    do) on two lakes: the cluster's daemon starts one while the other waits in the queue
    (max_concurrent_runs: 1), both run their steps on the Celery workers, and each lake serves
    its own folder only."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from rag_pipeline.cluster.jobs import run_config_for
    from rag_pipeline.config import Settings

    where, env = cluster
    folders = {"it": tmp_path / "raw_it", "finance": tmp_path / "raw_finance"}
    for part, raw in folders.items():
        shutil.copytree(REPO / "data" / "sample" / part, raw / part)
    tag = f"queued-{tmp_path.name}"
    launches = []
    for part, raw in folders.items():
        config = tmp_path / f"{part}.json"
        settings = Settings(raw_dir=raw, lake_dir=tmp_path / f"lake_{part}", golden_file=None)
        config.write_text(json.dumps(run_config_for(settings)), encoding="utf-8")
        launches.append(subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "dagster"), "job", "launch", "-w", "workspace.yaml", "-j", "index_job",
             "-c", str(config), "--tags", json.dumps({"rag/test": tag})],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        ))
    for launch in launches:
        assert launch.wait(timeout=180) == 0, launch.stdout.read()[-3000:]

    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(env["DAGSTER_HOME"]))
    seen, deadline = set(), time.monotonic() + 600
    while time.monotonic() < deadline:
        records = instance.get_run_records(dg.RunsFilter(tags={"rag/test": tag}))
        statuses = tuple(sorted(r.dagster_run.status.value for r in records))
        seen.add(statuses)
        if len(records) == 2 and all(r.dagster_run.is_finished for r in records):
            break
        time.sleep(0.5)
    assert [r.dagster_run.status.value for r in records] == ["SUCCESS", "SUCCESS"], seen
    assert ("QUEUED", "STARTED") in seen, seen  # one ran while the other waited in the queue
    first, second = sorted(records, key=lambda r: r.start_time)
    assert second.start_time >= first.end_time  # never at once
    engine = [e.message for e in instance.all_logs(first.dagster_run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)]
    assert any("in celery worker" in m for m in engine)  # its steps ran on the workers
    instance.dispose()
    for part, raw in folders.items():
        served = Lake(tmp_path / f"lake_{part}").published_arrow(s.DOCUMENTS).column("source").to_pylist()
        assert served and sorted(served) == sorted(p.relative_to(raw).as_posix() for p in raw.rglob("*")
                                                   if p.is_file() and not p.name.endswith(".meta.json"))


def test_the_executor_and_the_run_settings_come_from_configuration(monkeypatch, tmp_path):
    from rag_pipeline.cluster.executors import executor_kind, index_executor
    from rag_pipeline.cluster.jobs import run_config_for
    from rag_pipeline.config import Settings

    monkeypatch.delenv("RAG_EXECUTOR", raising=False)
    assert executor_kind() == "in_process" and index_executor().name == "in_process"
    monkeypatch.setenv("RAG_EXECUTOR", "Multiprocess")
    assert index_executor().name == "multiprocess"
    monkeypatch.setenv("RAG_EXECUTOR", "in-process")
    assert executor_kind() == "in_process"
    monkeypatch.setenv("RAG_EXECUTOR", "celery")
    assert index_executor().name == "celery"
    monkeypatch.setenv("RAG_EXECUTOR", "K8s")
    assert index_executor().name == "k8s"
    monkeypatch.setenv("RAG_EXECUTOR", "dask")
    with pytest.raises(ValueError, match="RAG_EXECUTOR must be one of in_process, multiprocess, celery, k8s"):
        executor_kind()
    config = run_config_for(Settings(raw_dir=tmp_path / "raw", lake_dir=tmp_path / "lake", golden_file=None, lock_wait_s=600.0))
    rag = config["resources"]["rag"]["config"]
    assert rag["raw_dir"] == str(tmp_path / "raw") and rag["golden_file"] == "none" and rag["lock_wait_s"] == 600.0
    assert "parse_workers" not in rag  # machine-local: each worker keeps its own
