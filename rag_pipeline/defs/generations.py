"""Operator jobs for index generations: promote one, or roll back to the previous one.

The same actions as `rag generations promote N` / `rag generations rollback`, launchable
from the Dagster UI so that who flipped what, and when, is in the run history.
"""

import dagster as dg

from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.store.lake import Lake


class PromoteConfig(dg.Config):
    generation: int


@dg.op
def promote_generation(context: dg.OpExecutionContext, config: PromoteConfig, rag: RagSettingsResource) -> None:
    manifest = Lake(rag.settings().lake_dir).promote(config.generation)
    context.log.info(f"serving generation {manifest['generation']} ({manifest['model']['name']})")


@dg.op
def rollback_generation(context: dg.OpExecutionContext, rag: RagSettingsResource) -> None:
    manifest = Lake(rag.settings().lake_dir).rollback()
    context.log.info(f"rolled back: serving generation {manifest['generation']}")


@dg.job(description="Serve a given index generation (config: generation).")
def promote_generation_job():
    promote_generation()


@dg.job(description="Serve the generation that was served before the current one.")
def rollback_generation_job():
    rollback_generation()
