"""Shards side by side: out of process, one `rag index` is a scan run, one run per shard, then a publish run.

Dagster runs a partitioned step once per run, so a single run can only work its shards in turn.
With RAG_EXECUTOR=multiprocess|celery, `rag index` instead starts on the same instance:

1. the **scan** run (raw_documents and its check);
2. one run of **index_shard_job per shard**, up to RAG_SHARD_RUNS at once, each step on the
   profile's executor (a process of its own, or a Celery worker). A shard run holds the lake
   shared and its shard exclusively (defs.resources), reads the scan the lake's staging area
   holds and stages its own outputs, so its memory is bounded by its shard;
3. the **publish** run (lancedb_index onwards, with its checks), which gathers every shard and
   checks each against the scan (defs.shards.gather_shards) before staging a generation.

Each run is orchestrated by a process of its own: Dagster's run set-up reconfigures Python
logging, which deadlocks against another run logging in the same process (seen with threads).
A failed scan or shard stops there: nothing is published, the served generation keeps serving,
and the next `rag index` finds the finished shards' parses, chunks and vectors in the caches.
Every run carries the request's tags (`rag index` finds and cancels them by theirs).

A shard whose staged outputs are already up to date is not run again: the lake's latest outputs
of every per-document asset of that shard come from a successful shard run with the same inputs
tag (the run's settings, chunk sizes and shard keys) and carry this scan's digest of the shard
(defs.shards.lineage). A nightly run over an unchanged folder is then a scan and a publish.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pyarrow as pa

from rag_pipeline.cluster.jobs import index_job, index_shard_job
from rag_pipeline.config import ChunkingSettings
from rag_pipeline.defs.io import latest_pointer, read_arrow, staged_path
from rag_pipeline.defs.shards import SHARD_KEYS, lineage, scan_digest, split_by_shard
from rag_pipeline.text import first_line

SCAN_ASSETS = ["raw_documents"]
PHASE_TAG = "rag/phase"  # scan | shard | publish, on each run of a fanned-out index
INPUTS_TAG = "rag/shard_inputs"  # what a shard run's outputs depend on besides its files
JOBS = {"index_job": index_job, "index_shard_job": index_shard_job}


@dataclass(frozen=True)
class RunOutcome:
    """A finished run as read back from the instance: what `rag index` reports from."""

    dagster_run: dg.DagsterRun
    all_events: list

    @property
    def run_id(self) -> str:
        return self.dagster_run.run_id

    @property
    def success(self) -> bool:
        return self.dagster_run.is_success

    def get_asset_materialization_events(self) -> list:
        return [e for e in self.all_events if e.event_type_value == "ASSET_MATERIALIZATION"]

    @classmethod
    def read(cls, instance: dg.DagsterInstance, run_id: str) -> RunOutcome:
        events = [record.dagster_event for record in instance.all_logs(run_id) if record.dagster_event]
        return cls(instance.get_run_by_id(run_id), events)


def shard_assets() -> list[str]:
    """What one shard run materializes."""
    return sorted(key.to_user_string() for key in index_shard_job().asset_layer.selected_asset_keys)


def publish_assets() -> list[str]:
    """Everything index_job materializes after the shards."""
    before = {dg.AssetKey(name) for name in [*shard_assets(), *SCAN_ASSETS]}
    return sorted(key.to_user_string() for key in index_job().asset_layer.selected_asset_keys - before)


def execute_run(job_name: str, run_config: Mapping, tags: Mapping[str, str], assets: list[str] | None = None) -> str:
    """One run of the job on this process's instance (DAGSTER_HOME); its id."""
    with dg.DagsterInstance.get() as instance:
        selection = [dg.AssetKey(name) for name in assets] if assets else None
        result = dg.execute_job(dg.reconstructable(JOBS[job_name]), instance, run_config=dict(run_config), tags=dict(tags),
                                asset_selection=selection)
        return result.run_id


def shard_inputs(run_config: Mapping) -> str:
    """Digest of what a shard's outputs depend on besides its files: the run's settings, the
    chunk sizes and the shard keys (both read by each process when the code location loads)."""
    chunking = ChunkingSettings()
    described = {"rag": run_config.get("resources", {}).get("rag", {}).get("config", {}), "shards": SHARD_KEYS,
                 "chunking": [chunking.max_tokens, chunking.overlap_tokens]}
    return hashlib.sha256(json.dumps(described, sort_keys=True, default=str).encode()).hexdigest()[:32]


def up_to_date_shards(instance: dg.DagsterInstance, lake_dir: Path, scan_run_id: str, inputs: str) -> set[str]:
    """Shards whose latest staged outputs were built by a successful shard run with these
    inputs from the files this scan found (each output's lineage is this scan's shard digest)."""
    scan = read_arrow(staged_path(lake_dir, scan_run_id, "raw_documents"))
    fresh, names = set(), shard_assets()
    for key, raw_shard in split_by_shard(scan).items():
        digest, producers = scan_digest(raw_shard), set()
        for name in names:
            pointer = latest_pointer(lake_dir, name, key)
            run_id = json.loads(pointer.read_text(encoding="utf-8"))["run_id"] if pointer.exists() else None
            path = staged_path(lake_dir, str(run_id), name, shard=key)
            if run_id is None or not path.exists() or lineage(_schema_only(path)) != digest:
                break
            producers.add(run_id)
        else:
            runs = [instance.get_run_by_id(run_id) for run_id in producers]
            if all(run is not None and run.is_success and run.tags.get(INPUTS_TAG) == inputs for run in runs):
                fresh.add(key)
    return fresh


def _schema_only(path: Path) -> pa.Schema:
    with pa.memory_map(str(path), "r") as source:
        return pa.ipc.open_file(source).schema


class RunProcessError(RuntimeError):
    """A run's process ended in an exception instead of a run (the instance's database or the
    broker went away mid-run): said in one line, not a traceback."""


def _outcome(instance: dg.DagsterInstance, future, phase: str) -> RunOutcome:
    try:
        return RunOutcome.read(instance, future.result())
    except Exception as exc:
        detail = first_line(str(exc))[:300]
        raise RunProcessError(
            f"the {phase} run failed: {type(exc).__name__}: {detail} — the served generation is unchanged "
            "unless the publish run promoted a new one; run `rag index` again"
        ) from exc


def run_fanned_out(
    instance: dg.DagsterInstance, run_config: Mapping, tags: Mapping[str, str], parallel: int, lake_dir: Path
) -> tuple[list[RunOutcome], list[str]]:
    """The scan, the shards that are not up to date (`parallel` at a time) and the publish;
    stops after a failed phase.

    Returns the runs that ran (scan first, shards in key order, publish last) and the shards
    that were up to date and not run.
    """
    workers = max(1, min(parallel, len(SHARD_KEYS)))
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"))

    def run(job_name: str, phase: str, extra: Mapping[str, str] | None = None, assets: list[str] | None = None):
        return pool.submit(execute_run, job_name, dict(run_config), {**tags, PHASE_TAG: phase, **(extra or {})}, assets)

    try:
        scan = _outcome(instance, run("index_job", "scan", assets=SCAN_ASSETS), "scan")
        if not scan.success:
            return [scan], []
        inputs = shard_inputs(run_config)
        skipped = sorted(up_to_date_shards(instance, lake_dir, scan.run_id, inputs))
        futures = [run("index_shard_job", "shard", {"dagster/partition": key, INPUTS_TAG: inputs})
                   for key in SHARD_KEYS if key not in skipped]
        shards = [_outcome(instance, future, "shard") for future in futures]
        if not all(shard.success for shard in shards):
            return [scan, *shards], skipped
        publish = _outcome(instance, run("index_job", "publish", assets=publish_assets()), "publish")
        return [scan, *shards, publish], skipped
    finally:  # an interrupt starts no further run; the running ones end with their steps
        pool.shutdown(wait=True, cancel_futures=True)
