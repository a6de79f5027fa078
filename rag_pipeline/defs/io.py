"""Stage outputs as Arrow files under the lake, keyed by run: never pickles, never shared.

Dagster's default IO manager pickles every output to ``$DAGSTER_HOME/storage/<asset>``, one
path per asset for every run of the instance: two runs on different lakes read each other's
documents. Here every output lives under *its own lake*:

    <lake>/staging/runs/<run_id>/<asset>.arrow          a pa.Table (Arrow IPC, memory-mapped on read)
    <lake>/staging/runs/<run_id>/<asset>.json           a small dict (a manifest, an eval summary)
    <lake>/staging/runs/<run_id>/<asset>/<shard>.arrow  one shard of a partitioned asset (defs.shards)
    <lake>/staging/latest/<asset>.json                  which run last wrote the asset on this lake
    <lake>/staging/latest/<asset>/<shard>.json          ... or that shard of it

An input is read from the run that produced it (Dagster resolves the parent run on a
re-execution from failure); a run that does not materialize an upstream asset (or shard) reads
the lake's latest copy of it — never another lake's. `Lake.prune` removes old run folders.

A partitioned asset returns, and its partitioned consumers receive, ``{shard: pa.Table}`` for
the shards of the step; an unpartitioned consumer (the publish side) receives the same mapping
over every shard and decides itself how to check and combine them. A step that works through
many shards writes each shard's table as soon as it is built (`spill`) and keeps only the
memory-mapped file, so its memory is one shard's, not the corpus's; the IO manager then finds
the shard already in place and does not write it again.

A stage file's pages a step has read stay in its resident set while the file is mapped: clean
pages the kernel could drop, yet counted in RSS, in a container's memory use and in the OOM
killer's score. The publish step reads every shard of every stage, so at 100k documents ~2 GB
of its 3.8 GB peak RSS were such pages. `release_stage_pages` lets them go (`madvise
MADV_DONTNEED` on each mapping still alive: the next read faults the page in again from the
page cache); steps call it between the batches of a pass over stage tables.
"""

from __future__ import annotations

import json
import mmap
import os
import tempfile
import weakref
from pathlib import Path

import dagster as dg
import pyarrow as pa

from rag_pipeline.defs.resources import RagSettingsResource, run_settings
from rag_pipeline.store.lake import Lake

STAGING_DIR = "staging"
SPILLED_KEY = b"rag_spilled_to"  # schema metadata: the file a spilled shard's table was read back from


def _atomic_write(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_arrow(path: Path, table: pa.Table) -> None:
    def write(tmp):
        with pa.OSFile(tmp, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)

    _atomic_write(path, write)


_STAGE_MAPS: weakref.WeakSet = weakref.WeakSet()  # every stage file mapped by read_arrow and still referenced


def read_arrow(path: Path) -> pa.Table:
    """The table, zero-copy over a read-only mapping of the file (unmapped once nothing refers to it)."""
    with open(path, "rb") as file:
        mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    _STAGE_MAPS.add(mapped)
    return pa.ipc.open_file(pa.py_buffer(mapped)).read_all()


def release_stage_pages() -> None:
    """Drop the resident pages of every mapped stage file (see the module docstring); the data
    stays readable. Only file mappings made by read_arrow: never memory a table owns."""
    for mapped in list(_STAGE_MAPS):
        try:
            mapped.madvise(mmap.MADV_DONTNEED)
        except (ValueError, OSError):  # closed since it was listed
            pass


def release_pages_of(batch: pa.RecordBatch) -> None:
    """Drop the resident pages of the stage file `batch` is mapped from (release_stage_pages, for
    one file): a pass that takes a few scattered rows from each shard in turn lets each shard's
    pages go before the next. Each page fault maps its neighbours too (the kernel's fault-around,
    64 kB): ~110 rows from each of 40 chunk shards made every whole shard file resident at once
    (720 MB at 100k documents, a 1 % change's publish step: bench/README.md, "Scattered takes")."""
    addresses = [buffer.address for column in batch.columns for buffer in column.buffers() if buffer is not None and buffer.size]
    if not addresses:
        return
    low, high = min(addresses), max(addresses)
    for mapped in list(_STAGE_MAPS):
        try:
            base = pa.py_buffer(mapped).address
        except ValueError:  # closed since it was listed
            continue
        if base <= high and low < base + len(mapped):
            mapped.madvise(mmap.MADV_DONTNEED)


def write_json(path: Path, data: dict) -> None:
    def write(tmp):
        Path(tmp).write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str), encoding="utf-8")

    _atomic_write(path, write)


def staged_path(lake_dir: Path, run_id: str, asset: str, suffix: str = ".arrow", shard: str | None = None) -> Path:
    """Where a run's output of `asset` (one shard of it, for a partitioned step) is staged: the one
    place the layout is spelled out, for the IO manager and for steps that spill shards early."""
    return Path(lake_dir) / STAGING_DIR / "runs" / run_id / f"{_staged_name(asset, shard)}{suffix}"


def latest_pointer(lake_dir: Path, asset: str, shard: str | None = None) -> Path:
    """The JSON naming the run whose output of `asset` (or of its shard) is the lake's latest."""
    return Path(lake_dir) / STAGING_DIR / "latest" / f"{_staged_name(asset, shard)}.json"


def _staged_name(asset: str, shard: str | None) -> str:
    return f"{asset}/{shard}" if shard is not None else asset


def spill(lake_dir: Path, run_id: str, asset: str, table: pa.Table, shard: str | None = None) -> pa.Table:
    """Write an output (or one shard of it) where the IO manager would, and return it memory-mapped.

    What the step then holds of it is file-backed pages the kernel can drop, so a step over every
    shard no longer keeps the corpus's outputs in memory until it returns. And what it returns
    stays alive after the step: `rag index` runs `execute_in_process`, whose result keeps every
    step's output for `output_for_node` until the run ends — the scan's table built in Arrow
    memory (36 MB at 100k files) rode through every later step (bench/README.md).
    """
    path = staged_path(lake_dir, run_id, asset, shard=shard)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), SPILLED_KEY: str(path).encode()})
    with Lake(lake_dir).writing(f"stage {asset}" if shard is None else f"stage shard {shard} of {asset}"):
        write_arrow(path, table)
    release_stage_pages()  # the step is done with what it read for this shard
    return read_arrow(path)


def _spilled_to(table: pa.Table, path: Path) -> bool:
    return (table.schema.metadata or {}).get(SPILLED_KEY) == str(path).encode() and path.exists()


class LakeStagingIOManager(dg.ConfigurableIOManagerFactory):
    """Arrow tables and JSON dicts under the run's lake (see module docstring)."""

    rag: RagSettingsResource

    def create_io_manager(self, context: dg.InitResourceContext) -> LakeStaging:
        return LakeStaging(run_settings(self.rag, context.dagster_run).lake_dir)


class LakeStaging(dg.IOManager):
    def __init__(self, lake_dir: Path):
        self.lake_dir = Path(lake_dir)

    def _root(self) -> Path:
        return self.lake_dir / STAGING_DIR

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        if obj is None:
            return
        asset = context.asset_key.to_python_identifier()
        with Lake(self.lake_dir).writing(f"stage the output of {asset}"):
            self._write(context, asset, obj)

    def _write(self, context: dg.OutputContext, asset: str, obj) -> None:
        if context.has_asset_partitions:
            return self._write_shards(context, asset, obj)
        if isinstance(obj, pa.Table):
            path = staged_path(self.lake_dir, context.run_id, asset)
            if not _spilled_to(obj, path):
                write_arrow(path, obj)
            context.add_output_metadata({"staged_rows": obj.num_rows, "staged_bytes": obj.nbytes})
        elif isinstance(obj, dict):
            write_json(staged_path(self.lake_dir, context.run_id, asset, ".json"), obj)
        else:
            raise TypeError(f"{asset}: stage outputs are pa.Table or dict, not {type(obj).__name__}")
        write_json(latest_pointer(self.lake_dir, asset), {"run_id": context.run_id})

    def _write_shards(self, context: dg.OutputContext, asset: str, shards: dict) -> None:
        expected = set(context.asset_partition_keys)
        if not isinstance(shards, dict) or set(shards) != expected:
            got = sorted(shards) if isinstance(shards, dict) else type(shards).__name__
            raise TypeError(f"{asset}: a partitioned step returns {{shard: pa.Table}} for {sorted(expected)}, got {got}")
        for key, table in sorted(shards.items()):
            path = staged_path(self.lake_dir, context.run_id, asset, shard=key)
            if not _spilled_to(table, path):
                write_arrow(path, table)
                release_stage_pages()  # a shard selected from mapped stage files faulted its pages in
            write_json(latest_pointer(self.lake_dir, asset, key), {"run_id": context.run_id})
        context.add_output_metadata(
            {"staged_rows": sum(t.num_rows for t in shards.values()), "staged_bytes": sum(t.nbytes for t in shards.values())}
        )

    def load_input(self, context: dg.InputContext):
        asset = context.asset_key.to_python_identifier()
        upstream_run = [context.upstream_output.run_id] if context.upstream_output else []
        if context.has_asset_partitions:
            return {key: self._load(asset, upstream_run, key) for key in sorted(context.asset_partition_keys)}
        return self._load(asset, upstream_run)

    def _load(self, asset: str, run_ids: list[str], shard: str | None = None):
        """The output from the run that produced it, else the lake's latest (of the asset or its shard)."""
        run_ids = list(run_ids)
        latest = latest_pointer(self.lake_dir, asset, shard)
        if latest.exists():
            run_ids.append(json.loads(latest.read_text(encoding="utf-8"))["run_id"])
        for run_id in run_ids:
            for suffix, read in ((".arrow", read_arrow), (".json", lambda p: json.loads(p.read_text(encoding="utf-8")))):
                path = staged_path(self.lake_dir, run_id, asset, suffix, shard)
                if path.exists():
                    return read(path)
        raise FileNotFoundError(
            f"no staged {asset}{'' if shard is None else ' shard ' + shard} in {self._root()}: materialize it first (run index_job on this lake)"
        )
