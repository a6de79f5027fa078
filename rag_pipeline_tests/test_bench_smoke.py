"""The benchmark suite runs end to end (tiny sizes): its scripts stay in step with the code."""

from __future__ import annotations

import subprocess
import sys

import pytest

from rag_pipeline_tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_the_benchmark_suite_smoke_run_prints_its_tables(tmp_path):
    out = tmp_path / "suite.md"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "suite.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, check=False, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:]
    report = out.read_text(encoding="utf-8")
    assert "FAILED" not in report
    build = report.split("## Full build by stage")[1]
    assert "| embeddings |" in build and "| no-op re-run (wall) |" in build
    noop_share = float(build.split("| no-op re-run (wall) |")[1].split("|")[3].strip(" %"))
    assert noop_share < 50  # an unchanged folder parses and embeds nothing
    assert "recall@10" in report.split("## Scale")[1]
