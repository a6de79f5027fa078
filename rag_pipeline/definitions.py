"""The one Dagster entry point (`dagster dev -w workspace.yaml` loads `defs` from here)."""

from __future__ import annotations

import dagster as dg

from rag_pipeline.defs import assets, checks, evaluation, querylog
from rag_pipeline.defs.automation import (
    daily_query_log_schedule,
    index_job,
    index_shard_job,
    nightly_reindex_schedule,
    query_log_job,
    raw_folder_sensor,
)
from rag_pipeline.defs.generations import promote_generation_job, release_quarantined_file_job, rollback_generation_job
from rag_pipeline.defs.io import LakeStagingIOManager
from rag_pipeline.defs.resources import LakeWriterResource, RagSettingsResource


def build_definitions(rag: RagSettingsResource | None = None) -> dg.Definitions:
    """Definitions bound to one set of settings (the CLI passes --raw/--lake through here).

    Every run path (CLI, UI, schedule, sensor) uses these resources: stage outputs go to Arrow
    files under the run's own lake, and each writing step holds the lake's writer lock.
    """
    rag = rag or RagSettingsResource()
    return dg.Definitions(
        assets=dg.load_assets_from_modules([assets, evaluation, querylog]),
        asset_checks=dg.load_asset_checks_from_modules([checks, evaluation]),
        jobs=[index_job, index_shard_job, query_log_job, promote_generation_job, rollback_generation_job, release_quarantined_file_job],
        schedules=[nightly_reindex_schedule, daily_query_log_schedule],
        sensors=[raw_folder_sensor],
        resources={
            "rag": rag,
            "lake_writer": LakeWriterResource(rag=rag),
            "io_manager": LakeStagingIOManager(rag=rag),
        },
    )


defs = build_definitions()
