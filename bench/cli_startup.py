"""Whole-process start-up of the `rag` command, hyperfine-style: each command is run N times as a
fresh process (after one unmeasured warm-up for the OS page cache) and the wall times' median,
min and max are reported as a markdown table.

    .venv/bin/python bench/cli_startup.py --lake data/lake [--runs 10] [--question "..."] [--only "rag ask"] [--json]

Targets (issue 19): `rag --help` and `rag status` within 1 s, `rag ask` cold within 4 s, on an
idle machine. The machine is shared, so two baselines are timed in the same run, interleaved with
the `rag` commands (`python -c pass`, `python -c "import torch"`): compare ratios across runs. `rag status` answers from the served manifest and a small cache of its counts;
the first status after a run that `rag` did not make (UI, schedule) reads the tables once.
Two more have no target: loading the Dagster definitions (what a code server, the daemon and every
`dagster` CLI command do first) and `dagster job list -w workspace.yaml` (the CLI plus the code
server it starts), on a scratch DAGSTER_HOME.
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
TARGETS_S = {"rag --help": 1.0, "rag status": 1.0, "rag ask": 4.0, "load definitions": None, "dagster job list": None}
BASELINES = {"python -c pass": ["-c", "pass"], "import torch": ["-c", "import torch"]}


def _rag() -> list[str]:
    exe = Path(sys.executable).with_name("rag")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "rag_pipeline.cli"]


def _once(argv: list[str], env: dict) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, cwd=REPO, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
    return elapsed


def time_commands(commands: dict[str, list[str]], runs: int, env: dict) -> dict:
    """Each command once unmeasured, then `runs` rounds of every command in turn (interleaved,
    so a burst of load from other jobs hits all of them alike)."""
    for argv in commands.values():
        subprocess.run(argv, capture_output=True, env=env, cwd=REPO, check=False)  # warm-up, not measured
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            times[name].append(_once(argv, env))
    return {
        name: {"median_s": statistics.median(t), "min_s": min(t), "max_s": max(t), "runs": runs}
        for name, t in times.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", default=os.environ.get("RAG_LAKE_DIR", str(REPO / "data" / "lake")))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--question", default="How many days of annual leave do employees get?")
    parser.add_argument("--only", action="append", choices=sorted(TARGETS_S), help="time only this command (repeatable)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="cli_startup_home_") as home:  # a scratch instance for `dagster job list`
        return _run(args, home)


def _run(args, home: str) -> int:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "DAGSTER_HOME": home, "DO_NOT_TRACK": "1"}
    rag = _rag()
    commands = {
        "rag --help": [*rag, "--help"],
        "rag status": [*rag, "status", "--lake", args.lake],
        "rag ask": [*rag, "ask", args.question, "--lake", args.lake],
        "load definitions": [sys.executable, "-c", "import rag_pipeline.definitions"],
        "dagster job list": [str(Path(sys.executable).with_name("dagster")), "job", "list", "-w", str(REPO / "workspace.yaml")],
    }
    if args.only:
        commands = {name: argv for name, argv in commands.items() if name in args.only}
    commands.update({name: [sys.executable, *argv] for name, argv in BASELINES.items()})
    results = time_commands(commands, args.runs, env)
    torch_s = results["import torch"]["median_s"]
    for r in results.values():
        r["per_import_torch"] = r["median_s"] / torch_s
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0], "results": results}, indent=2))
        return 0
    print(f"whole-process wall time, {args.runs} interleaved runs each after a warm-up; {os.cpu_count()} CPUs, "
          f"1-min load {os.getloadavg()[0]:.1f}\n")
    print("| command | median s | min s | max s | median / `import torch` | target s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        target = "baseline" if name not in TARGETS_S else "–" if TARGETS_S[name] is None else f"{TARGETS_S[name]:.0f}"
        print(f"| `{name}` | {r['median_s']:.2f} | {r['min_s']:.2f} | {r['max_s']:.2f} | {r['per_import_torch']:.2f} | {target} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
