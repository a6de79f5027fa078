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


def test_two_server_processes_answer_on_one_port_and_share_one_query_log(indexed_root, tmp_path):
    """`rag serve --processes 2`: two uvicorn worker processes (each with its model and index) on
    one socket. Under concurrent asks both answer, every request is logged as one whole JSON line
    (appends from two processes never interleave), and stopping the server stops both."""
    import os
    import time
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    from rag_pipeline.serve.auth import add_token
    from rag_pipeline_tests.serve.conftest import free_port

    shutil.copytree(indexed_root / "lake", tmp_path / "lake")
    tokens = tmp_path / "tokens.json"
    staff = add_token(tokens, "staff", groups=("all-staff",), clearance="internal")
    admin = add_token(tokens, "ops", scopes=("admin",), groups=("all-staff",), clearance="internal")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "rag_pipeline.serve", "--port", str(port), "--lake", str(tmp_path / "lake"), "--tokens", str(tokens),
         "--processes", "2", "--workers", "2", "--log-level", "warning"],
        cwd=REPO, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        ready, deadline = 0, time.time() + 240
        while ready < 20 and time.time() < deadline:  # new connections reach either process: both must be warm
            try:
                ready = ready + 1 if httpx.get(url + "/readyz", timeout=5).status_code == 200 else 0
            except httpx.HTTPError:
                ready = 0
            time.sleep(0.05 if ready else 0.5)
        assert ready >= 20, "the two processes did not both become ready"

        def ask(n: int) -> int:
            question = ("How many days of annual leave do employees get?", "年假有多少天？")[n % 2]
            return httpx.post(url + "/v1/ask", json={"question": question}, headers={"Authorization": f"Bearer {staff}"}, timeout=120).status_code

        def status(_) -> int:
            return httpx.get(url + "/v1/status", headers={"Authorization": f"Bearer {admin}"}, timeout=120).json()["process"]

        with ThreadPoolExecutor(8) as pool:
            asked = pool.map(ask, range(48))
            pids = set(pool.map(status, range(48)))
            assert list(asked) == [200] * 48
        assert len(pids) == 2 and server.pid not in pids
        lines = [line for f in sorted((tmp_path / "lake" / "querylog").glob("queries-*.jsonl"))
                 for line in f.read_text(encoding="utf-8").splitlines()]
        records = [json.loads(line) for line in lines]  # a torn or interleaved line would not parse
        assert sum(r["endpoint"] == "ask" for r in records) == 48
    finally:
        server.terminate()
        server.wait(timeout=60)
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
