"""When the index job runs (nightly, and whenever the raw folder changes), and the daily query-log summary."""


import hashlib
import os

import dagster as dg

from rag_pipeline.cluster.executors import index_executor
from rag_pipeline.defs.memory import release_memory_after_step
from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.defs.shards import SHARDS, all_shards_tags
from rag_pipeline.ingest.ignore import churn_only

# The query-log summary reads what `rag serve` logged; it is no part of indexing (defs.querylog).
QUERY_LOG_ASSETS = dg.AssetSelection.groups("serving")

# In-process by default: one process per run loads the model once and holds the lake's writer
# lock from the first step to the last (LakeWriterResource); RAG_EXECUTOR=multiprocess|celery
# runs each step in its own process or on Celery workers (cluster.executors). The CLI, the UI,
# the schedule and the sensor all run the same job, with stage outputs as Arrow files under the
# lake (defs.io). A run covers every shard (its tags): each per-document step works through its
# shards one at a time.
index_job = dg.define_asset_job(
    "index_job",
    selection=dg.AssetSelection.all() - QUERY_LOG_ASSETS,
    executor_def=index_executor(),
    tags=all_shards_tags(),
    hooks={release_memory_after_step},
    description="Re-index the raw folder end to end and publish a new index generation.",
)

# One shard alone (pick the partition in the launchpad): after a failed or interrupted shard, or
# to rebuild a shard; the next index_job run (or a publish) uses its output. Out of process,
# `rag index` runs the shards side by side as runs of this job (cluster.fanout).
PER_DOCUMENT_ASSETS = dg.AssetSelection.assets("parsed_documents", "quarantine", "chunks", "chunk_fingerprints", "embeddings")
index_shard_job = dg.define_asset_job(
    "index_shard_job",
    selection=PER_DOCUMENT_ASSETS,
    partitions_def=SHARDS,
    executor_def=index_executor(),
    hooks={release_memory_after_step},
    description="Parse, chunk and embed the documents of one shard of the raw folder (no publish).",
)

nightly_reindex_schedule = dg.ScheduleDefinition(
    name="nightly_reindex_schedule",
    job=index_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    description="Nightly full re-index at 02:00 UTC (unchanged chunks reuse cached embeddings).",
)

query_log_job = dg.define_asset_job(
    "query_log_job",
    selection=QUERY_LOG_ASSETS,
    executor_def=dg.in_process_executor,
    description="Summarise the served query log (requests, refusal rate, latency, refused questions) in the UI.",
)

daily_query_log_schedule = dg.ScheduleDefinition(
    name="daily_query_log_schedule",
    job=query_log_job,
    cron_schedule="30 6 * * *",
    execution_timezone="UTC",
    description="Daily query-log summary at 06:30 UTC (last 7 days by default; read-only, no writer lock).",
)


def folder_signature(raw_dir: str, ignore_file: str | None = None) -> str:
    """Cheap change detector: paths, sizes and mtimes of every entry under the folder (its
    .ragignore included), and of the ignore rules kept outside it (RAG_IGNORE_FILE). What the scan
    never reads does not count: hidden folders and files, Office's lock files (ingest.ignore's
    churn_only) — opening a document in a shared folder is no reason for a run.

    lstat, not stat: a dangling or looping link is an entry too (the scan quarantines it), and
    must not fail every sensor tick; names that are not valid UTF-8 are hashed byte for byte.
    """
    digest = hashlib.sha256()
    if ignore_file is not None and os.path.lexists(ignore_file):
        st = os.lstat(ignore_file)
        digest.update(f"{ignore_file}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    for root, dirs, files in os.walk(raw_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # the scan never enters them (.git)
        for name in sorted(files):
            if churn_only(name):
                continue
            path = os.path.join(root, name)
            st = os.lstat(path)
            digest.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()


@dg.sensor(job=index_job, minimum_interval_seconds=60)
def raw_folder_sensor(context: dg.SensorEvaluationContext, rag: RagSettingsResource):
    """Start index_job when files under the raw folder are added, changed or removed."""
    settings = rag.settings()
    raw_dir = settings.raw_dir
    if not raw_dir.is_dir():
        return dg.SkipReason(f"raw folder {raw_dir} does not exist")
    signature = folder_signature(str(raw_dir), str(settings.ignore_file) if settings.ignore_file else None)
    if signature == context.cursor:
        return dg.SkipReason("raw folder unchanged")
    context.update_cursor(signature)
    return dg.RunRequest(run_key=signature)
