"""The index job as a code pointer (module + function) that out-of-process executors reconstruct,
and the run config that carries the submitting process's settings to every worker."""

from __future__ import annotations

import dagster as dg

from rag_pipeline.config import Settings

# Settings a run carries to its workers: what the run is to do. Machine-local ones (parse worker
# count) stay the worker's own; RAG_SHARDS and the chunk sizes are part of the code location and
# must be the same everywhere (scripts/cluster.sh's cluster.env is read by every process).
RUN_SETTINGS = ("raw_dir", "ignore_file", "lake_dir", "embedding_model", "model_cache_dir", "embedding_precision", "ocr_min_confidence",
                "max_deletion_fraction", "allow_mass_deletion", "parse_timeout_s", "parse_max_s", "golden_file", "eval_tolerance",
                "keep_generations", "lock_wait_s")


def index_job() -> dg.JobDefinition:
    from rag_pipeline.definitions import defs

    return defs.resolve_job_def("index_job")


def index_shard_job() -> dg.JobDefinition:
    from rag_pipeline.definitions import defs

    return defs.resolve_job_def("index_shard_job")


def run_config_for(settings: Settings, *, log_level: str = "WARNING") -> dict:
    """The settings resolved where the run is started, as run config: a Celery worker builds its
    resources from the run, so a worker started with another environment (say, no
    RAG_GOLDEN_FILE=none) still does what the submitter asked."""
    rag = {}
    for name in RUN_SETTINGS:
        value = getattr(settings, name)
        if value is None:  # "none" turns the golden set off, "" says no ignore file: the worker's environment must not add one
            rag[name] = "none" if name == "golden_file" else ""
        else:
            rag[name] = value if isinstance(value, (bool, int, float)) else str(value)
    return {"resources": {"rag": {"config": rag}}, "loggers": {"console": {"config": {"log_level": log_level}}}}
