"""The configurable resources: settings (where raw files and the lake live, which model), the
lake's writer lock, and nothing else.

Every field defaults to None, meaning "the RAG_* environment variable, else the built-in
default", resolved by `config.Settings` when a run starts — never frozen at import time.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from rag_pipeline.config import Settings
from rag_pipeline.embedding.encoder import Encoder, encoder_for
from rag_pipeline.store.lake import Lake
from rag_pipeline.store.lock import lake_writer_lock


class RagSettingsResource(dg.ConfigurableResource):
    """Pipeline settings; each unset field falls back to its RAG_* environment variable (README)."""

    raw_dir: str | None = None
    ignore_file: str | None = None
    lake_dir: str | None = None
    embedding_model: str | None = None
    model_cache_dir: str | None = None
    embedding_precision: str | None = None
    ocr_min_confidence: float | None = None
    max_deletion_fraction: float | None = None
    allow_mass_deletion: bool | None = None
    parse_workers: int | None = None
    parse_timeout_s: float | None = None
    parse_max_s: float | None = None
    golden_file: str | None = None
    eval_tolerance: float | None = None
    keep_generations: int | None = None
    lock_wait_s: float | None = None

    def settings(self) -> Settings:
        overrides = {name: value for name, value in self.__dict__.items() if name in _FIELDS and value is not None}
        if overrides.get("ignore_file") == "":  # the run says "no ignore file" (cluster.jobs.run_config_for)
            overrides["ignore_file"] = None
        for name in ("raw_dir", "ignore_file", "lake_dir", "model_cache_dir"):
            if overrides.get(name) is not None:
                overrides[name] = Path(overrides[name])
        if "golden_file" in overrides:
            value = overrides["golden_file"]
            overrides["golden_file"] = None if value.strip().lower() in ("", "none", "off") else Path(value)
        return Settings(**overrides)

    def encoder(self) -> Encoder:
        return encoder_for(self.settings())


_FIELDS = set(RagSettingsResource.model_fields)


def run_settings(rag: RagSettingsResource, run: dg.DagsterRun | None) -> Settings:
    """The settings a run asked for, for a resource that holds `rag` as a nested resource.

    Dagster gives a nested resource the object it was built with, not the one the run config
    configured (`resources.rag.config`, as `rag index` out of process and the launchpad set
    it): reading the nested one, the lake lock and the staging folder went to the default lake
    while the assets wrote the configured one. So the run's own `rag` config is laid over it here.
    """
    configured = ((run.run_config if run else None) or {}).get("resources", {}).get("rag", {}).get("config", {})
    own = {name: value for name, value in rag.__dict__.items() if name in _FIELDS and value is not None}
    return RagSettingsResource(**{**own, **configured}).settings() if configured else rag.settings()


class LakeWriterResource(dg.ConfigurableResource):
    """Holds the lake's writer lock while a step (in-process: the whole run) executes.

    A step that writes the lake asks for this resource; a second run on the same lake then
    fails at once (or after RAG_LOCK_WAIT_S) naming the run that holds the lake. A one-shard
    run (index_shard_job, or one of `rag index`'s shard runs out of process) holds the lake
    shared and its shard exclusively, so the shards of one index run side by side.
    """

    rag: RagSettingsResource

    @contextmanager
    def yield_for_execution(self, context: dg.InitResourceContext):
        settings = run_settings(self.rag, context.dagster_run)
        with Lake(settings.lake_dir).writing("take the lake's writer lock"):
            settings.lake_dir.mkdir(parents=True, exist_ok=True)  # a file in the way: one clear error
        shard = single_shard(context.dagster_run.tags if context.dagster_run else {})
        with lake_writer_lock(settings.lake_dir, what="Dagster run", run_id=context.run_id, wait_s=settings.lock_wait_s, shard=shard):
            yield self


def single_shard(run_tags) -> str | None:
    """The shard a one-shard run works on (tag dagster/partition); None for a whole run."""
    return run_tags.get("dagster/partition")
