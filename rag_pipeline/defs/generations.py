"""Operator jobs: promote an index generation, roll back to the previous one, release a
quarantined file.

The same actions as `rag generations promote N`, `rag generations rollback` and `rag quarantine
release SOURCE`, launchable from the Dagster UI with typed config, so that who did what, and
when, is in the run history. Promote and rollback record a materialization of
`published_index` (the UI always shows the generation actually served); a release records an
observation of `raw_documents` naming the file, its reason and its sidecar.
"""

import dagster as dg
import pydantic

from rag_pipeline.defs.assets import served_metadata
from rag_pipeline.defs.resources import LakeWriterResource, RagSettingsResource
from rag_pipeline.ingest.release import release_quarantined
from rag_pipeline.store.lake import Lake

PUBLISHED_INDEX = dg.AssetKey("published_index")
RAW_DOCUMENTS = dg.AssetKey("raw_documents")


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


class ReleaseConfig(dg.Config):
    source: str = pydantic.Field(
        description="the quarantined file, relative to the raw folder, exactly as the quarantine lists it"
    )


@dg.op
def release_quarantined_file(context: dg.OpExecutionContext, config: ReleaseConfig, rag: RagSettingsResource) -> None:
    """Accept a file quarantined for low OCR confidence or no text: the next index run indexes it."""
    settings = rag.settings()
    try:
        done = release_quarantined(settings.lake_dir, settings.raw_dir, config.source)
    except (ValueError, FileNotFoundError) as exc:
        raise dg.Failure(description=str(exc)) from None
    context.log_event(
        dg.AssetObservation(
            RAW_DOCUMENTS,
            metadata={
                "released": done["released"],
                "quarantine_reason": done["reason"],
                "quarantine_detail": done["detail"],
                "sidecar": done["sidecar"],
                "next": "indexed on the next run of index_job",
            },
        )
    )
    context.log.info(f"released {done['released']} (was {done['reason']}); it is indexed on the next run of index_job")


@dg.job(description="Release a quarantined file (low OCR confidence, no text) for the next index run (config: source).")
def release_quarantined_file_job():
    release_quarantined_file()
