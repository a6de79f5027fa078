"""Stage outputs as Arrow files under the lake, keyed by run: never pickles, never shared.

Dagster's default IO manager pickles every output to ``$DAGSTER_HOME/storage/<asset>``, one
path per asset for every run of the instance: two runs on different lakes read each other's
documents. Here every output lives under *its own lake*:

    <lake>/staging/runs/<run_id>/<asset>.arrow    a pa.Table (Arrow IPC, memory-mapped on read)
    <lake>/staging/runs/<run_id>/<asset>.json     a small dict (a manifest, an eval summary)
    <lake>/staging/latest/<asset>.json            which run last wrote the asset on this lake

An input is read from the run that produced it (Dagster resolves the parent run on a
re-execution from failure); a run that does not materialize an upstream asset reads the
lake's latest copy of it — never another lake's. `Lake.prune` removes old run folders.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import dagster as dg
import pyarrow as pa

from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.store.lake import Lake

STAGING_DIR = "staging"


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


def read_arrow(path: Path) -> pa.Table:
    with pa.memory_map(str(path), "r") as source:
        return pa.ipc.open_file(source).read_all()


def write_json(path: Path, data: dict) -> None:
    def write(tmp):
        Path(tmp).write_text(json.dumps(data, ensure_ascii=False, indent=1, default=str), encoding="utf-8")

    _atomic_write(path, write)


class LakeStagingIOManager(dg.ConfigurableIOManager):
    """Arrow tables and JSON dicts under the run's lake (see module docstring)."""

    rag: RagSettingsResource

    def _root(self) -> Path:
        return self.rag.settings().lake_dir / STAGING_DIR

    def _run_path(self, run_id: str, asset: str, suffix: str) -> Path:
        return self._root() / "runs" / run_id / f"{asset}{suffix}"

    def handle_output(self, context: dg.OutputContext, obj) -> None:
        if obj is None:
            return
        asset = context.asset_key.to_python_identifier()
        with Lake(self.rag.settings().lake_dir).writing(f"stage the output of {asset}"):
            self._write(context, asset, obj)

    def _write(self, context: dg.OutputContext, asset: str, obj) -> None:
        if isinstance(obj, pa.Table):
            write_arrow(self._run_path(context.run_id, asset, ".arrow"), obj)
            context.add_output_metadata({"staged_rows": obj.num_rows, "staged_bytes": obj.nbytes})
        elif isinstance(obj, dict):
            write_json(self._run_path(context.run_id, asset, ".json"), obj)
        else:
            raise TypeError(f"{asset}: stage outputs are pa.Table or dict, not {type(obj).__name__}")
        write_json(self._root() / "latest" / f"{asset}.json", {"run_id": context.run_id})

    def load_input(self, context: dg.InputContext):
        asset = context.asset_key.to_python_identifier()
        run_ids = [context.upstream_output.run_id] if context.upstream_output else []
        latest = self._root() / "latest" / f"{asset}.json"
        if latest.exists():
            run_ids.append(json.loads(latest.read_text(encoding="utf-8"))["run_id"])
        for run_id in run_ids:
            for suffix, read in ((".arrow", read_arrow), (".json", lambda p: json.loads(p.read_text(encoding="utf-8")))):
                path = self._run_path(run_id, asset, suffix)
                if path.exists():
                    return read(path)
        raise FileNotFoundError(
            f"no staged {asset} in {self._root()}: materialize it first (run index_job on this lake)"
        )
