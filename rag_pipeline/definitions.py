"""The one Dagster entry point (`dagster dev -w workspace.yaml` loads `defs` from here)."""

from __future__ import annotations

import dagster as dg

from rag_pipeline.defs import assets, checks, evaluation
from rag_pipeline.defs.automation import index_job, nightly_reindex_schedule, raw_folder_sensor
from rag_pipeline.defs.generations import promote_generation_job, rollback_generation_job
from rag_pipeline.defs.resources import RagSettingsResource


def build_definitions(rag: RagSettingsResource | None = None) -> dg.Definitions:
    """Definitions bound to one set of settings (the CLI passes --raw/--lake through here)."""
    return dg.Definitions(
        assets=dg.load_assets_from_modules([assets, evaluation]),
        asset_checks=dg.load_asset_checks_from_modules([checks, evaluation]),
        jobs=[index_job, promote_generation_job, rollback_generation_job],
        schedules=[nightly_reindex_schedule],
        sensors=[raw_folder_sensor],
        resources={"rag": rag or RagSettingsResource()},
    )


defs = build_definitions()
