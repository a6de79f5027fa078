"""index_job in-process vs on Celery workers (issues 16, 17): what the distributed run costs and what fanning out the shards gives.

    .venv/bin/python bench/distributed.py [--raw data/sample] [--workers 2] [--rounds 1] [--modes in_process,celery_whole,celery]

Starts a one-machine cluster (`scripts/cluster.sh up`: PostgreSQL, Redis, N Celery workers) in a
temp folder, then indexes the same folder into fresh lakes three ways, each a first build and then
a no-op re-run, `--rounds` times:
- in_process: `rag index` with the embedded defaults (one process, SQLite instance);
- celery_whole: `rag index` with the cluster's environment and RAG_SHARD_RUNS=0: one run, its
  steps on the workers, each per-document step working the shards in turn;
- celery: the same with the default fan-out (cluster.fanout): a scan run, one run per shard side
  by side, a publish run.
Per index: wall seconds of the command, the sum of its steps' own durations (Dagster step stats,
over all its runs), and the rest — process start, imports, and for Celery the hand-off of each
step (queue, worker pick-up, job reconstruction, instance reads). Prints medians and the ratio to
the in-process run. Everything is on 127.0.0.1 and stopped at the end.
JSON: bench/results/distributed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.cluster.env import read_cluster_env  # noqa: E402

# mode -> (extra environment, which environment): celery fans the shards out into runs of their
# own (cluster.fanout, the default); celery_whole is one run whose steps work the shards in turn
MODES = {"in_process": ({}, "local"), "celery_whole": ({"RAG_SHARD_RUNS": "0"}, "cluster"), "celery": ({}, "cluster")}


def cluster_env(where: Path) -> dict:
    return {**os.environ, **read_cluster_env(where)}


def step_seconds(home_env: dict, summary: dict) -> dict[str, float]:
    """Seconds per step, added up over the runs of the index (a fanned-out one has several)."""
    run_ids = [r["run_id"] for r in summary.get("runs", [])] or [summary["run_id"]]
    code = ("import dagster as dg, json, collections\n"
            "i, total = dg.DagsterInstance.get(), collections.Counter()\n"
            f"for run_id in {run_ids!r}:\n"
            "    for s in i.get_run_step_stats(run_id): total[s.step_key] += (s.end_time or 0) - (s.start_time or 0)\n"
            "print(json.dumps(total))")
    done = subprocess.run([sys.executable, "-c", code], env=home_env, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def timed(command: list[str], env: dict) -> tuple[float, dict]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=3600)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    text = done.stdout.strip()
    return seconds, json.loads(text[text.index("{"):])  # rag index --json is indented; cluster.sh index prints one line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", default=str(REPO / "data" / "sample"))
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, from {', '.join(MODES)} (in_process is the baseline)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "distributed.json"))
    args = parser.parse_args(argv)
    unknown = set(args.modes.split(",")) - set(MODES)
    if unknown:
        parser.error(f"unknown modes {sorted(unknown)}: choose from {', '.join(MODES)}")
    modes = {name: MODES[name] for name in dict.fromkeys(["in_process", *args.modes.split(",")])}
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="rag-dist-") as tmp:
        tmp = Path(tmp)
        where = tmp / "cluster"
        subprocess.run(["bash", "scripts/cluster.sh", "up", "--dir", str(where), "--workers", str(args.workers)],
                       cwd=REPO, check=True, capture_output=True, timeout=600)
        try:
            celery_env = {**cluster_env(where), "RAG_GOLDEN_FILE": "none"}
            local_env = {**os.environ, "DAGSTER_HOME": str(tmp / "home"), "RAG_GOLDEN_FILE": "none"}
            for n in range(args.rounds):
                for mode, (extra, where_to) in modes.items():
                    lake = tmp / f"lake_{mode}_{n}"
                    env = {**(local_env if where_to == "local" else celery_env), **extra}
                    for run in ("first build", "no-op"):
                        command = [str(REPO / ".venv" / "bin" / "rag"), "index", "--raw", args.raw, "--lake", str(lake), "--json", "-q"]
                        seconds, out = timed(command, env)
                        steps = step_seconds(env, out)
                        row = {"mode": mode, "run": run, "round": n, "wall_s": round(seconds, 2),
                               "steps_s": round(sum(steps.values()), 2), "steps": steps,
                               "workers_used": len(set(out.get("step_workers", {}).values()))}
                        rows.append(row)
                        print(json.dumps({k: v for k, v in row.items() if k != "steps"}), flush=True)
        finally:
            subprocess.run(["bash", "scripts/cluster.sh", "down", "--dir", str(where)], cwd=REPO, capture_output=True, timeout=300)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"raw": args.raw, "workers": args.workers, "rows": rows}, indent=2), encoding="utf-8")
    print(f"\n{'run':<12} {'mode':<13} {'wall s':>8} {'steps s':>8} {'rest s':>8} {'wall ÷ in-process':>18}")
    for run in ("first build", "no-op"):
        base = statistics.median(r["wall_s"] for r in rows if r["run"] == run and r["mode"] == "in_process")
        for mode in modes:
            picked = [r for r in rows if r["run"] == run and r["mode"] == mode]
            wall = statistics.median(r["wall_s"] for r in picked)
            steps = statistics.median(r["steps_s"] for r in picked)
            print(f"{run:<12} {mode:<13} {wall:>8.1f} {steps:>8.1f} {wall - steps:>8.1f} {wall / base:>17.2f}×")
    slowest = {}
    for r in rows:
        for step, s in r["steps"].items():
            slowest.setdefault((r["mode"], r["run"]), {}).setdefault(step, []).append(s)
    print("\nper step, median seconds summed over its shards (first build): " + " / ".join(modes))
    first = {mode: slowest.get((mode, "first build"), {}) for mode in modes}
    for step in sorted(first["in_process"], key=lambda k: -statistics.median(first["in_process"][k]))[:8]:
        cells = " / ".join(f"{statistics.median(first[mode].get(step, [float('nan')])):>7.2f}" for mode in modes)
        print(f"  {step:<40} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
