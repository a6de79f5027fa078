"""When the index job runs: nightly, and whenever the raw folder changes."""


import hashlib
import os

import dagster as dg

from rag_pipeline.defs.resources import RagSettingsResource

index_job = dg.define_asset_job(
    "index_job",
    selection=dg.AssetSelection.all(),
    description="Re-index the raw folder end to end and publish a new index generation.",
)

nightly_reindex_schedule = dg.ScheduleDefinition(
    name="nightly_reindex_schedule",
    job=index_job,
    cron_schedule="0 2 * * *",
    execution_timezone="UTC",
    description="Nightly full re-index at 02:00 UTC (unchanged chunks reuse cached embeddings).",
)


def folder_signature(raw_dir: str) -> str:
    """Cheap change detector: paths, sizes and mtimes of every file under the folder."""
    digest = hashlib.sha256()
    for root, dirs, files in os.walk(raw_dir):
        dirs.sort()
        for name in sorted(files):
            st = os.stat(os.path.join(root, name))
            digest.update(f"{os.path.join(root, name)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


@dg.sensor(job=index_job, minimum_interval_seconds=60)
def raw_folder_sensor(context: dg.SensorEvaluationContext, rag: RagSettingsResource):
    """Start index_job when files under the raw folder are added, changed or removed."""
    raw_dir = rag.settings().raw_dir
    if not raw_dir.is_dir():
        return dg.SkipReason(f"raw folder {raw_dir} does not exist")
    signature = folder_signature(str(raw_dir))
    if signature == context.cursor:
        return dg.SkipReason("raw folder unchanged")
    context.update_cursor(signature)
    return dg.RunRequest(run_key=signature)
