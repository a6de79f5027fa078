"""Warm and live: a re-index, a rollback and a re-promotion are picked up by the running server
without a restart, under load, and every response comes from exactly one generation."""

from __future__ import annotations

import shutil
import threading
import time

import httpx
import pytest

from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.indexing import run_index
from rag_pipeline_tests.serve.conftest import make_tokens, start_server

pytestmark = pytest.mark.slow
MARKER = "zq77"
NEW_DOC = "extra/parking_zq77.md"
QUESTION = f"Where do staff park under rule {MARKER}?"


@pytest.fixture
def live(indexed_root, tmp_path):
    shutil.copytree(indexed_root / "raw", tmp_path / "raw")
    shutil.copytree(indexed_root / "lake", tmp_path / "lake")
    tokens, _ = make_tokens(tmp_path / "tokens.json")
    url, stop = start_server(tmp_path / "lake", tmp_path / "tokens.json")
    yield tmp_path, url, {"Authorization": f"Bearer {tokens['staff']}"}
    stop()


def _chunk_ids(lake: Lake, generation: int) -> set[str]:
    return set(lake.published_arrow(s.CHUNKS, lake.read_generation(generation)).column("chunk_id").to_pylist())


def test_promotion_and_rollback_are_served_live_one_generation_per_request(live):
    root, url, auth = live
    lake = Lake(root / "lake")
    first = lake.read_manifest()["generation"]
    records: list[dict] = []
    errors: list[str] = []
    stop = threading.Event()

    def load():
        i = 0
        with httpx.Client(base_url=url, headers=auth, timeout=60) as client:
            while not stop.is_set() and i < 5000:
                mode = ("keyword", "hybrid", "vector")[i % 3]
                try:
                    r = client.post("/v1/search", json={"query": QUESTION, "mode": mode, "k": 10})
                    if r.status_code != 200:
                        errors.append(f"{r.status_code} {r.text[:200]}")
                    else:
                        body = r.json()
                        records.append({"mode": mode, "generation": body["generation"], "header": int(r.headers["x-generation"]),
                                        "chunks": [h["chunk_id"] for h in body["hits"]], "sources": [h["source"] for h in body["hits"]]})
                except httpx.HTTPError as exc:
                    errors.append(repr(exc))
                i += 1

    def wait_for(generation: int, timeout: float = 60) -> None:
        seen = len(records)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(r["generation"] == generation for r in records[seen:]):
                return
            time.sleep(0.2)
        pytest.fail(f"generation {generation} was not served within {timeout} s")

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    try:
        time.sleep(2)
        (root / "raw" / "extra").mkdir()
        (root / "raw" / NEW_DOC).write_text(
            f"# Parking rule {MARKER}\n\nUnder rule {MARKER} staff park in the east car park and bicycles go in the basement.\n",
            encoding="utf-8",
        )
        report = run_index(root / "raw", root / "lake", golden_file="none")  # a real Dagster run writes and promotes a new generation
        assert report["success"], report
        second = lake.read_manifest()["generation"]
        assert second > first
        wait_for(second)
        lake.rollback()
        assert lake.read_manifest()["generation"] == first
        wait_for(first)
        lake.promote(second)
        wait_for(second)
        time.sleep(1)
    finally:
        stop.set()
        thread.join(timeout=60)

    assert not errors, errors[:5]
    chunks = {g: _chunk_ids(lake, g) for g in (first, second)}
    served = [r["generation"] for r in records]
    assert set(served) == {first, second}
    switches = sum(1 for a, b in zip(served, served[1:]) if a != b)
    assert switches >= 3, f"expected promote, rollback and re-promote to be served, saw {switches} switches"
    for r in records:
        assert r["generation"] == r["header"]
        assert set(r["chunks"]) <= chunks[r["generation"]], "a response mixed chunks of two generations"
        if NEW_DOC in r["sources"]:
            assert r["generation"] == second, "the new document was served from the old generation"
        elif r["mode"] == "keyword":
            assert r["generation"] == first, "the keyword arm missed the new document's code in its own generation"
    assert any(NEW_DOC in r["sources"] for r in records if r["generation"] == second)
    status = httpx.get(url + "/v1/status", headers=auth).json()
    assert status["served_generation"] == second and status["reloads"] >= 3
