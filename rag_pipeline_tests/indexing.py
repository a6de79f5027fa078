"""Test helper: run index_job through Dagster on a folder and collect what it reported."""

from __future__ import annotations

import dagster as dg

from rag_pipeline.definitions import build_definitions
from rag_pipeline.defs.resources import RagSettingsResource


def run_index(raw, lake, **settings) -> dict:
    """Materialize the whole graph (real Dagster run, ephemeral instance); return metadata by asset."""
    defs = build_definitions(RagSettingsResource(raw_dir=str(raw), lake_dir=str(lake), **settings))
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("index_job").execute_in_process(instance=instance, raise_on_error=False)
    report: dict = {"success": result.success}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        report[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    report["checks"] = {
        e.event_specific_data.check_name: e.event_specific_data.passed
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    return report
