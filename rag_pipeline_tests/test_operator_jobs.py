"""Operator actions from the Dagster UI (issue 19, item 7): release a quarantined file, roll back
and promote a generation, as jobs with typed config, each a run in the instance's history.
Real Dagster runs on a persistent instance, real lake, real model."""

from __future__ import annotations

import json
import time
import warnings

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from rag_pipeline.definitions import build_definitions
from rag_pipeline.defs.generations import ReleaseConfig
from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.indexing import run_index

pytestmark = pytest.mark.slow


def _corpus(root):
    raw = root / "raw"
    raw.mkdir()
    for i in range(2):
        (raw / f"note_{i}.md").write_text(f"# Note {i}\n\nThe IBEX procedure, step {i}.\n", encoding="utf-8")
    (raw / "blank.txt").write_text("   \n", encoding="utf-8")  # no text: quarantined, releasable
    return raw


def _run(defs, instance, job: str, run_config: dict | None = None):
    return defs.resolve_job_def(job).execute_in_process(instance=instance, run_config=run_config or {}, raise_on_error=False)


def _failure(result) -> str:
    return " ".join(
        (e.event_specific_data.error.cause or e.event_specific_data.error).message
        for e in result.all_events if e.event_type_value == "STEP_FAILURE"
    )


def test_release_promote_and_rollback_run_as_dagster_jobs_recorded_in_the_run_history(tmp_path):
    raw, lake_dir = _corpus(tmp_path), tmp_path / "lake"
    first = run_index(raw, lake_dir, golden_file="none")
    assert first["success"], first
    lake = Lake(lake_dir)
    quarantine = {r["source"]: r["reason"] for r in lake.published_arrow(s.QUARANTINE).to_pylist()}
    assert quarantine == {"blank.txt": "no_text"}

    home = tmp_path / "home"
    home.mkdir()
    defs = build_definitions(RagSettingsResource(raw_dir=str(raw), lake_dir=str(lake_dir), golden_file="none"))
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        # typed config: a missing source is refused before anything runs
        with pytest.raises(dg.DagsterInvalidConfigError):
            _run(defs, instance, "release_quarantined_file_job", {"ops": {"release_quarantined_file": {"config": {}}}})
        assert "source" in ReleaseConfig.model_json_schema()["properties"]

        # a file that is not quarantined is refused with the reason, and nothing is written
        refused = _run(defs, instance, "release_quarantined_file_job",
                       {"ops": {"release_quarantined_file": {"config": {"source": "note_0.md"}}}})
        assert not refused.success and "not in the quarantine of the served index" in _failure(refused)
        assert not (raw / "note_0.md.meta.json").exists()

        released = _run(defs, instance, "release_quarantined_file_job",
                        {"ops": {"release_quarantined_file": {"config": {"source": "blank.txt"}}}})
        assert released.success, _failure(released)
        assert json.loads((raw / "blank.txt.meta.json").read_text(encoding="utf-8")) == {"quarantine_release": True}
        observed = instance.fetch_observations(dg.AssetKey("raw_documents"), limit=5).records
        assert observed and observed[0].asset_observation.metadata["released"].value == "blank.txt"
        assert observed[0].asset_observation.metadata["quarantine_reason"].value == "no_text"

        second = run_index(raw, lake_dir, golden_file="none")
        assert second["success"], second
        assert second["parsed_documents"]["released_from_quarantine"] == ["blank.txt"]
        assert Lake(lake_dir).read_manifest()["generation"] == 2
        assert Lake(lake_dir).published_arrow(s.QUARANTINE).num_rows == 0

        back = _run(defs, instance, "rollback_generation_job")
        assert back.success, _failure(back)
        assert Lake(lake_dir).read_manifest()["generation"] == 1
        forward = _run(defs, instance, "promote_generation_job", {"ops": {"promote_generation": {"config": {"generation": 2}}}})
        assert forward.success, _failure(forward)
        assert Lake(lake_dir).read_manifest()["generation"] == 2
        with pytest.raises(dg.DagsterInvalidConfigError):  # typed: a generation is a number
            _run(defs, instance, "promote_generation_job", {"ops": {"promote_generation": {"config": {"generation": "latest"}}}})

        history = [(r.job_name, r.status) for r in reversed(instance.get_runs())]
        assert history == [
            ("release_quarantined_file_job", dg.DagsterRunStatus.FAILURE),
            ("release_quarantined_file_job", dg.DagsterRunStatus.SUCCESS),
            ("rollback_generation_job", dg.DagsterRunStatus.SUCCESS),
            ("promote_generation_job", dg.DagsterRunStatus.SUCCESS),
        ]
        served = instance.fetch_materializations(dg.AssetKey("published_index"), limit=5).records
        assert [r.asset_materialization.metadata["served_generation"].value for r in served[:2]] == [2, 1]


# ---------------------------------------------------------------- the same, from the UI


def _ui_env(root, raw, lake) -> dict:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env.update(DAGSTER_HOME=str(root / "home"), RAG_RAW_DIR=str(raw), RAG_LAKE_DIR=str(lake), RAG_GOLDEN_FILE="none",
               DO_NOT_TRACK="1", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    return env


@pytest.fixture
def ui(tmp_path):
    """`bash scripts/dagster_ui.sh` (webserver + daemon, as operators start it) over a lake built by
    a real `rag index`: generation 1 served, blank.txt quarantined."""
    import os
    import signal
    import subprocess
    import sys

    from rag_pipeline_tests.conftest import REPO
    from rag_pipeline_tests.test_dagster_ui import _free_port, _graphql

    raw, lake = _corpus(tmp_path), tmp_path / "lake"
    (tmp_path / "home").mkdir()
    env = _ui_env(tmp_path, raw, lake)
    built = subprocess.run([sys.executable, "-m", "rag_pipeline.cli", "index", "-q"], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    port = _free_port()
    log = tmp_path / "ui.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", "scripts/dagster_ui.sh"], cwd=REPO, env={**env, "PORT": str(port)},
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, f"the UI did not come up:\n{log.read_text()[-4000:]}"
            time.sleep(2)
            try:
                entries = _graphql(port, "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }")
            except OSError:
                continue
            entries = entries["data"]["workspaceOrError"]["locationEntries"]
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                break
        yield {"port": port, "raw": raw, "lake": lake, "home": tmp_path / "home", "env": env, "log": log,
               "location": entries[0]["name"]}
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _launch_and_wait(client, ui, job: str, run_config: dict | None = None, until=("SUCCESS", "FAILURE", "CANCELED")):
    run_id = client.submit_job_execution(job, repository_location_name=ui["location"], repository_name="__repository__",
                                         run_config=run_config or {})
    deadline = time.monotonic() + 600
    while (status := client.get_run_status(run_id).value) not in until:
        assert time.monotonic() < deadline, f"{job} run {run_id} still {status}:\n{ui['log'].read_text()[-4000:]}"
        time.sleep(1)
    return run_id, status


def _terminate_an_index_run(client, ui, attempt: int) -> tuple[str, str]:
    """Add 200 memos (new text each attempt), launch index_job, terminate it once it holds the lake."""
    from rag_pipeline.store.lock import LOCK_NAME

    raw, lake = ui["raw"], ui["lake"]
    for i in range(200):  # enough work that the run is still embedding when the terminate lands
        (raw / f"memo_{i:02d}.md").write_text(
            f"# Memo {i}.{attempt}\n\n" + f"Memo {i}.{attempt} describes the ORYX maintenance window of week {i}. " * 40 + "\n",
            encoding="utf-8")
    run_id = client.submit_job_execution("index_job", repository_location_name=ui["location"],
                                         repository_name="__repository__", run_config={})
    deadline = time.monotonic() + 600
    while True:
        assert time.monotonic() < deadline, ui["log"].read_text()[-4000:]
        status = client.get_run_status(run_id).value
        assert status not in ("SUCCESS", "FAILURE"), f"the run ended ({status}) before it could be canceled"
        try:
            holder = json.loads((lake / LOCK_NAME).read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            holder = {}
        if holder.get("run_id") == run_id:
            break
        time.sleep(0.2)
    client.terminate_run(run_id)
    while (status := client.get_run_status(run_id).value) not in ("CANCELED", "SUCCESS", "FAILURE"):
        assert time.monotonic() < deadline, f"still {status}:\n{ui['log'].read_text()[-4000:]}"
        time.sleep(1)
    return run_id, status


def _run_timeline(ui, run_id: str) -> str:
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(ui["home"]))) as instance:
        events = instance.all_logs(run_id)
    start = events[0].timestamp if events else 0.0
    return "\n".join(f"{e.timestamp - start:7.2f} {e.dagster_event_type.value if e.dagster_event_type else 'log'} "
                     f"{e.step_key or ''} {(e.user_message or '')[:120]}" for e in events
                     if e.dagster_event_type is None or "PLANNED" not in e.dagster_event_type.value)


def _served_generation(lake) -> int:
    return Lake(lake).read_manifest()["generation"]


def test_operators_release_index_roll_back_promote_and_cancel_from_the_ui(ui):
    """The actions an operator takes in the UI's Launchpad, through the webserver's GraphQL API (what
    the Launchpad sends) with runs launched by the daemon in their own processes: release the
    quarantined file, index it, roll back, promote, and terminate an index run half-way, which
    `rag status` then reports (issue 19, item 7 and the "no trace in rag status" finding)."""
    import subprocess
    import sys

    from dagster_graphql import DagsterGraphQLClient

    from rag_pipeline_tests.conftest import REPO

    client = DagsterGraphQLClient("127.0.0.1", port_number=ui["port"])
    raw, lake = ui["raw"], ui["lake"]
    assert _served_generation(lake) == 1

    release = {"ops": {"release_quarantined_file": {"config": {"source": "blank.txt"}}}}
    released, status = _launch_and_wait(client, ui, "release_quarantined_file_job", release)
    assert status == "SUCCESS", ui["log"].read_text()[-4000:]
    assert json.loads((raw / "blank.txt.meta.json").read_text(encoding="utf-8")) == {"quarantine_release": True}

    indexed, status = _launch_and_wait(client, ui, "index_job")
    assert status == "SUCCESS", ui["log"].read_text()[-4000:]
    assert _served_generation(lake) == 2 and Lake(lake).published_arrow(s.QUARANTINE).num_rows == 0

    rolled_back, status = _launch_and_wait(client, ui, "rollback_generation_job")
    assert status == "SUCCESS" and _served_generation(lake) == 1
    promoted, status = _launch_and_wait(client, ui, "promote_generation_job",
                                        {"ops": {"promote_generation": {"config": {"generation": 2}}}})
    assert status == "SUCCESS" and _served_generation(lake) == 2

    # an index run with real work to do, terminated from the UI once it holds the lake. Twice in
    # fresh-clone CIs the run ended SUCCESS after the terminate request (with 40 and then 200 memos
    # of work, ~30 s; 25 local tries at random points of the run all ended CANCELED): the attempt is
    # repeated, with its event log reported as a warning, so a lost terminate shows in the log and
    # fails the test only if it happens three times in a row.
    for attempt in range(3):
        served_before = _served_generation(lake)
        run_id, status = _terminate_an_index_run(client, ui, attempt)
        if status == "CANCELED":
            break
        warnings.warn(f"attempt {attempt}: index run {run_id} ended {status} after the terminate request:\n"
                      + _run_timeline(ui, run_id))
    assert status == "CANCELED"
    assert _served_generation(lake) == served_before

    st = subprocess.run([sys.executable, "-m", "rag_pipeline.cli", "status", "--json"], env=ui["env"], cwd=REPO,
                        capture_output=True, text=True, timeout=300)
    assert st.returncode == 0, st.stderr[-2000:]
    latest = json.loads(st.stdout)["latest_run"]
    assert latest["run_id"] == run_id and latest["job"] == "index_job" and latest["status"] == "CANCELED", latest
    human = subprocess.run([sys.executable, "-m", "rag_pipeline.cli", "status"], env=ui["env"], cwd=REPO,
                           capture_output=True, text=True, timeout=300)
    assert f"latest run        index_job {run_id} was canceled" in human.stdout, human.stdout
    assert f"generation {served_before} keeps serving" in human.stdout, human.stdout

    # the run history holds each action with its typed config
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(ui["home"]))) as instance:
        runs = {r.run_id: r for r in instance.get_runs()}
        assert [(runs[r].job_name, runs[r].status.value) for r in (released, indexed, rolled_back, promoted, run_id)] == [
            ("release_quarantined_file_job", "SUCCESS"), ("index_job", "SUCCESS"),
            ("rollback_generation_job", "SUCCESS"), ("promote_generation_job", "SUCCESS"), ("index_job", "CANCELED"),
        ]
        assert runs[released].run_config == release
        assert runs[promoted].run_config["ops"]["promote_generation"]["config"] == {"generation": 2}
        # a UI-launched index run logs the same per-step progress as `rag index` (item 1)
        messages = [e.user_message for e in instance.all_logs(indexed) if not e.is_dagster_event]
        assert any(m.startswith("parse: ") and "done in" in m for m in messages), messages
        assert any(m.startswith("chunk: ") and "documents" in m and "done in" in m for m in messages), messages
        assert any(m.startswith("embed: ") and "done in" in m for m in messages), messages
