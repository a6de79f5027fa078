"""The index job as a code pointer (module + function) that out-of-process executors reconstruct:
Celery workers import this module and call `index_job()` to find the step they were sent."""

from __future__ import annotations

import dagster as dg


def index_job() -> dg.JobDefinition:
    from rag_pipeline.definitions import defs

    return defs.resolve_job_def("index_job")


def run_config_for(raw_dir: str, lake_dir: str, *, allow_mass_deletion: bool = False, log_level: str = "WARNING") -> dict:
    """--raw/--lake as run config: a worker process builds its resources from the run, not from
    the settings of the process that started it."""
    rag = {"raw_dir": raw_dir, "lake_dir": lake_dir}
    if allow_mass_deletion:
        rag["allow_mass_deletion"] = True
    return {"resources": {"rag": {"config": rag}}, "loggers": {"console": {"config": {"log_level": log_level}}}}
