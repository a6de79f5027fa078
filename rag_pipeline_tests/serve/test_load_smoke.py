"""`bench/serve_load.py` in miniature (2 s per level): the load benchmark stays runnable, and a
real server under concurrent clients answers every request (the numbers live in bench/README.md)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from rag_pipeline_tests.conftest import REPO

pytestmark = pytest.mark.slow


def test_serve_load_smoke_has_no_errors_at_1_and_4_clients(indexed_root, tmp_path):
    shutil.copytree(indexed_root / "lake", tmp_path / "lake")
    out = tmp_path / "serve_load.json"
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "serve_load.py"), "--lake", str(tmp_path / "lake"), "--duration", "2",
         "--clients", "1,4", "--workers", "2", "--out", str(out)],
        capture_output=True, text=True, check=False, timeout=600, cwd=REPO,
    )
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    result = json.loads(out.read_text(encoding="utf-8"))
    levels = {(r["endpoint"], r["clients"]): r for r in result["levels"]}
    assert set(levels) == {("search", 1), ("search", 4), ("ask", 1), ("ask", 4)}
    for level in levels.values():
        assert level["requests"] > 0 and level["errors"] == 0, level
    assert result["first_token_p50_ms"] > 0  # the SSE stream sent `token` events
    assert "p95 ms" in proc.stdout  # the printed table
