"""One run path (issue 16, item 3): a no-op `index_job` started by `rag index` vs as the UI runs it.

    .venv/bin/python bench/run_paths.py [--repeats 3] [--golden]

`rag index` executes `index_job` in its own process on the project's Dagster instance. A run
launched from the UI, the schedule or the sensor is executed by Dagster's run launcher in a
fresh process that loads the code location (`dagster api execute_run`); `dagster job execute
-m rag_pipeline.definitions -j index_job` is that same path without the webserver: a new process
loads the definitions, the instance and the job and executes it. Both use the same job, IO manager
(Arrow under the lake) and in-process executor. The issue's bar: within 2x of each other on a
no-op run (the review saw 4 s vs 90 s when the UI path pickled every stage output).

The sample corpus is copied to a temp folder and indexed once (first build, real model); then the
two paths alternate, each run a no-op on the same lake and instance (`RAG_GOLDEN_FILE=none`
unless --golden: the golden evaluation is the same work on both paths). Reported: wall seconds per
run (process start to exit, imports included), median per path, the ratio, and whether every run
left the served generation unchanged. Temp files are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = REPO / ".venv" / "bin"


def _timed(cmd: list[str], env: dict) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:3])} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, done


def _served(lake: Path) -> int:
    return json.loads((lake / "index_manifest.json").read_text(encoding="utf-8"))["generation"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--golden", action="store_true", help="keep the golden evaluation in the job")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rag_run_paths_"))
    try:
        raw, lake, home = tmp / "raw", tmp / "lake", tmp / "dagster_home"
        shutil.copytree(REPO / "data" / "sample", raw)
        home.mkdir()
        shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
        env = {**os.environ, "DAGSTER_HOME": str(home), "RAG_RAW_DIR": str(raw), "RAG_LAKE_DIR": str(lake),
               "DO_NOT_TRACK": "1"}
        if not args.golden:
            env["RAG_GOLDEN_FILE"] = "none"
        cli = [str(BIN / "rag"), "index", "--raw", str(raw), "--lake", str(lake), "-q", "--json"]
        ui = [str(BIN / "dagster"), "job", "execute", "-m", "rag_pipeline.definitions", "-j", "index_job"]
        first, _ = _timed(cli, env)
        generation = _served(lake)
        print(f"first build (rag index): {first:.1f} s, generation {generation}")
        times: dict[str, list[float]] = {"rag index (CLI)": [], "dagster job execute (UI/daemon path)": []}
        for _ in range(args.repeats):
            for label, cmd in zip(times, (cli, ui)):
                seconds, _ = _timed(cmd, env)
                times[label].append(seconds)
                if _served(lake) != generation:
                    raise SystemExit(f"{label}: the no-op run changed the served generation")
        print("\n| path | no-op runs, wall s | median s |\n|---|---|---|")
        for label, values in times.items():
            print(f"| {label} | {', '.join(f'{v:.1f}' for v in values)} | {statistics.median(values):.1f} |")
        cli_median, ui_median = (statistics.median(v) for v in times.values())
        print(f"\nratio UI path / CLI: {ui_median / cli_median:.2f} (issue bar: <= 2); served generation unchanged: {generation}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
