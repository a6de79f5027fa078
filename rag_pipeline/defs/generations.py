"""Operator jobs for index generations: promote one, or roll back to the previous one.

The same actions as `rag generations promote N` / `rag generations rollback`, launchable
from the Dagster UI so that who flipped what, and when, is in the run history; both record a
materialization of `published_index`, so the UI always shows the generation actually served.
"""

import dagster as dg

from rag_pipeline.defs.assets import served_metadata
from rag_pipeline.defs.resources import LakeWriterResource, RagSettingsResource
from rag_pipeline.store.lake import Lake

PUBLISHED_INDEX = dg.AssetKey("published_index")


class PromoteConfig(dg.Config):
    generation: int


@dg.op
def promote_generation(
    context: dg.OpExecutionContext, config: PromoteConfig, rag: RagSettingsResource, lake_writer: LakeWriterResource
) -> None:
    lake = Lake(rag.settings().lake_dir)
    previous = lake.read_manifest(missing_ok=True)
    manifest = lake.promote(config.generation)
    context.log_event(
        dg.AssetMaterialization(PUBLISHED_INDEX, metadata=served_metadata(manifest, previous=previous, action="promoted by an operator"))
    )
    context.log.info(f"serving generation {manifest['generation']} ({manifest['model']['name']})")


@dg.op
def rollback_generation(context: dg.OpExecutionContext, rag: RagSettingsResource, lake_writer: LakeWriterResource) -> None:
    lake = Lake(rag.settings().lake_dir)
    previous = lake.read_manifest(missing_ok=True)
    manifest = lake.rollback()
    context.log_event(
        dg.AssetMaterialization(PUBLISHED_INDEX, metadata=served_metadata(manifest, previous=previous, action="rolled back by an operator"))
    )
    context.log.info(f"rolled back: serving generation {manifest['generation']}")


@dg.job(description="Serve a given index generation (config: generation).")
def promote_generation_job():
    promote_generation()


@dg.job(description="Serve the generation that was served before the current one.")
def rollback_generation_job():
    rollback_generation()
