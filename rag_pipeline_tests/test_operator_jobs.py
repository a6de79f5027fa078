"""Operator actions from the Dagster UI (issue 19, item 7): release a quarantined file, roll back
and promote a generation, as jobs with typed config, each a run in the instance's history.
Real Dagster runs on a persistent instance, real lake, real model."""

from __future__ import annotations

import json

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
