"""Whole-process start-up of the `rag` command, hyperfine-style: each command is run N times as a
fresh process (after one unmeasured warm-up for the OS page cache) and the wall times' median,
min and max are reported as a markdown table.

    .venv/bin/python bench/cli_startup.py --lake data/lake [--runs 10] [--question "..."] [--json]

Targets (issue 19): `rag --help` and `rag status` within 1 s, `rag ask` cold within 4 s, on an
idle machine. `rag status` answers from the served manifest and a small cache of its counts;
the first status after a run that `rag` did not make (UI, schedule) reads the tables once.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGETS_S = {"rag --help": 1.0, "rag status": 1.0, "rag ask": 4.0}


def _rag() -> list[str]:
    exe = Path(sys.executable).with_name("rag")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "rag_pipeline.cli"]


def time_command(argv: list[str], runs: int, env: dict) -> dict:
    subprocess.run(argv, capture_output=True, env=env, check=False)  # warm-up, not measured
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, env=env, check=False)
        times.append(time.perf_counter() - started)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-500:]}")
    return {"median_s": statistics.median(times), "min_s": min(times), "max_s": max(times), "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", default=os.environ.get("RAG_LAKE_DIR", str(REPO / "data" / "lake")))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--question", default="How many days of annual leave do employees get?")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    rag = _rag()
    commands = {
        "rag --help": [*rag, "--help"],
        "rag status": [*rag, "status", "--lake", args.lake],
        "rag ask": [*rag, "ask", args.question, "--lake", args.lake],
    }
    results = {name: time_command(argv, args.runs, env) for name, argv in commands.items()}
    if args.json:
        print(json.dumps({"cpus": os.cpu_count(), "load_1m": os.getloadavg()[0], "results": results}, indent=2))
        return 0
    print(f"whole-process wall time, {args.runs} runs each after a warm-up; {os.cpu_count()} CPUs, "
          f"1-min load {os.getloadavg()[0]:.1f}\n")
    print("| command | median s | min s | max s | target s |")
    print("|---|---:|---:|---:|---:|")
    for name, r in results.items():
        print(f"| `{name}` | {r['median_s']:.2f} | {r['min_s']:.2f} | {r['max_s']:.2f} | {TARGETS_S[name]:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
