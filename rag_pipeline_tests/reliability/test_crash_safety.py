"""Crash safety: a real `rag index` process SIGKILLed at each stage of a re-index, then re-run.

Each case adds, edits and deletes documents, kills the indexing process at one point (a signal
from outside when the embedding step starts; a failpoint for the instants a signal cannot hit:
rag_pipeline.faults), queries in between, re-runs, and checks that the served index is whole and
that nothing indexed before was lost. Fault injected, everything else real.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_pipeline.faults import ENV, POINTS
from rag_pipeline.query import RagIndex
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.indexing import assert_consistent, run_index

pytestmark = pytest.mark.slow
MEMOS = 12
EDITED = "handbook/employee_handbook_en.md"
DELETED = "handbook/notes.txt"


def _change_corpus(raw: Path) -> None:
    extra = raw / "extra"
    extra.mkdir()
    for i in range(MEMOS):  # enough text that parsing and embedding take a moment
        (extra / f"memo_{i:02d}.md").write_text(
            f"# Memo {i}\n\n" + " ".join(f"Item {i}-{j}: the {j}th rule of memo {i} about topic {i * j}." for j in range(40)),
            encoding="utf-8",
        )
    with (raw / EDITED).open("a", encoding="utf-8") as fh:
        fh.write("\n## Parking\n\nStaff park in the east car park; bicycles go in the basement.\n")
    (raw / DELETED).unlink()


def _sources(lake: Path) -> set[str]:
    return set(Lake(lake).published_arrow(s.DOCUMENTS).column("source").to_pylist())


def _session_processes(sid: int) -> list[int]:
    """Processes still alive in the killed run's session (parse workers, forkserver)."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":  # field 6 of stat: session id
            alive.append(int(stat.parent.name))
    return alive


def _kill_run(work: Path, point: str) -> None:
    env = {**os.environ, "DAGSTER_HOME": str(work / "home"), "RAG_GOLDEN_FILE": "none"}  # the gate is not under test
    if point != "embed":
        env[ENV] = point
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.cli", "index", "--raw", str(work / "raw"), "--lake", str(work / "lake"), "-v"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True,
    )
    log = []
    try:
        for line in proc.stdout:
            log.append(line)
            if point == "embed" and "embeddings - STEP_START" in line:
                proc.send_signal(signal.SIGKILL)  # from outside, like the OOM killer
                break
    finally:
        proc.wait(timeout=300)
    assert proc.returncode == -signal.SIGKILL, "".join(log[-30:])
    deadline = time.monotonic() + 20
    while _session_processes(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not _session_processes(proc.pid), "processes of the killed run outlived it"


@pytest.mark.parametrize("point", ["parse", "embed", *(p for p in POINTS if p != "parse")])
def test_a_run_killed_at_any_point_loses_nothing_and_the_rerun_repairs_it(work, point):
    lake = Lake(work / "lake")
    before = lake.read_manifest()
    sources_before = _sources(work / "lake")
    _change_corpus(work / "raw")

    _kill_run(work, point)

    served = assert_consistent(work / "lake")
    if point == "promote_log":  # died one instruction after the swap: the new generation serves, whole
        assert served["generation"] > before["generation"] and DELETED not in _sources(work / "lake")
    else:  # readers keep the last good generation, everything in it intact
        assert served["generation"] == before["generation"] and _sources(work / "lake") == sources_before
    index = RagIndex.open(work / "lake")
    assert index.search("E-45", k=1)[0].source == "products/x2000_datasheet.pdf"

    report = run_index(work / "raw", work / "lake", golden_file="none")
    assert report["success"] and all(report["checks"].values()), report["checks"]
    final = assert_consistent(work / "lake")
    expected = (sources_before - {DELETED}) | {f"extra/memo_{i:02d}.md" for i in range(MEMOS)}
    assert _sources(work / "lake") == expected
    assert final["generation"] > before["generation"]
    hit = RagIndex.open(work / "lake").search("Where do staff park bicycles?", k=1)[0]
    assert hit.source == EDITED and "basement" in hit.text
    history = lake.promotion_history()
    assert history[-1] == final["generation"] and before["generation"] in history
    if point == "promote_log":  # the lost log entry was restored before the next promotion
        assert served["generation"] in history
