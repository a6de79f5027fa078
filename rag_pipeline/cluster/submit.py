"""Run index_job with the configured executor (RAG_EXECUTOR, e.g. celery) and print a summary.

    bash scripts/cluster.sh index --raw data/sample --lake data/lake [--json]

The run is orchestrated by this process and recorded in the instance (DAGSTER_HOME: Postgres
under scripts/cluster.sh); each step runs where the executor sends it. --raw/--lake travel as the
run's config, so every worker builds the same settings. Exit 0 when the run succeeded, 1 if not.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def summarize(result) -> dict:
    """Run id, success, which worker ran each step (from the Celery engine events), failures."""
    workers: dict[str, str] = {}
    failures: dict[str, str] = {}
    for event in result.all_events:
        data = event.event_specific_data
        if event.event_type_value == "ENGINE_EVENT" and event.step_key and data is not None:
            worker = (getattr(data, "metadata", None) or {}).get("Celery worker")
            if worker is not None:
                workers[event.step_key] = worker.value
        if event.is_step_failure:
            failures[event.step_key] = data.error.message.strip()[:500]
    return {"run_id": result.run_id, "success": result.success, "workers": workers, "failures": failures}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", required=True)
    parser.add_argument("--lake", required=True)
    parser.add_argument("--allow-mass-deletion", action="store_true")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    import dagster as dg

    from rag_pipeline.cluster.jobs import index_job, run_config_for
    from rag_pipeline.config import ensure_dagster_home

    ensure_dagster_home()
    raw, lake = Path(args.raw).resolve(), Path(args.lake).resolve()
    if not raw.is_dir():
        print(f"raw folder {raw} does not exist", file=sys.stderr)
        return 2
    started = time.perf_counter()
    with dg.DagsterInstance.get() as instance:
        result = dg.execute_job(dg.reconstructable(index_job), instance,
                                run_config=run_config_for(str(raw), str(lake), allow_mass_deletion=args.allow_mass_deletion))
        summary = {**summarize(result), "seconds": round(time.perf_counter() - started, 1)}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"run {summary['run_id']}: {'succeeded' if summary['success'] else 'FAILED'} in {summary['seconds']} s")
        for step, worker in summary["workers"].items():
            print(f"  {step:<40} {worker}")
        for step, message in summary["failures"].items():
            print(f"  FAILED {step}: {message}", file=sys.stderr)
    return 0 if summary["success"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
