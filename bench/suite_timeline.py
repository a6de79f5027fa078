"""Where the test suite's wall time goes: each test's start and end on each pytest-xdist worker,
summed by file in the order the worker ran them (what `--durations` cannot show: which file
waited for which, and how balanced the two workers were).

Record (a pytest plugin; ~35 min on 2 cores, the whole suite):

    RAG_SUITE_TIMELINE=/tmp/timeline PYTHONPATH=bench .venv/bin/python -m pytest -n 2 --dist loadfile \\
        -p suite_timeline -p no:cacheprovider -q

Report:

    .venv/bin/python bench/suite_timeline.py /tmp/timeline

prints, per worker, each file's start and end (seconds from the worker's first test), its
seconds and test count, then the sum over all files — half of it is the best wall two workers
could reach.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

_out = None


def _log(event: str, nodeid: str) -> None:
    global _out
    if _out is None:
        folder = Path(os.environ.get("RAG_SUITE_TIMELINE", "suite_timeline"))
        folder.mkdir(parents=True, exist_ok=True)
        _out = open(folder / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl", "a", encoding="utf-8")
    _out.write(json.dumps({"ev": event, "id": nodeid, "t": time.time()}) + "\n")
    _out.flush()


def pytest_runtest_logstart(nodeid, location):  # noqa: ARG001 — pytest's hook signature
    _log("start", nodeid)


def pytest_runtest_logfinish(nodeid, location):  # noqa: ARG001
    _log("end", nodeid)


def _by_file(path: Path) -> dict[str, list[float]]:
    """file -> [first start, last end, tests], in the order the worker ran them."""
    files: dict[str, list[float]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        event = json.loads(line)
        name = event["id"].split("::")[0]
        if event["ev"] == "start":
            files.setdefault(name, [event["t"], event["t"], 0])
        else:
            files[name][1] = event["t"]
            files[name][2] += 1
    return files


def main(folder: str) -> None:
    total = 0.0
    for path in sorted(Path(folder).glob("*.jsonl")):
        files = _by_file(path)
        if not files:
            continue
        t0 = min(start for start, _, _ in files.values())
        print(f"{path.stem}: {max(end for _, end, _ in files.values()) - t0:,.0f} s")
        print(f"  {'start':>6} {'end':>6} {'s':>6} {'tests':>5}  file")
        for name, (start, end, tests) in files.items():
            total += end - start
            print(f"  {start - t0:6.0f} {end - t0:6.0f} {end - start:6.0f} {tests:5d}  {name}")
    print(f"sum over files: {total:,.0f} s (half: {total / 2:,.0f} s)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "suite_timeline")
