"""The Dagster UI, as an operator sees it: webserver on loopback, real run, headless Chromium."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from rag_pipeline.defs.shards import SHARD_KEYS

from rag_pipeline_tests.conftest import REPO

pytestmark = pytest.mark.slow
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARTIFACTS = REPO / "data" / "test-artifacts"
ASSETS = ["raw_documents", "parsed_documents", "quarantine", "chunks", "chunk_fingerprints", "embeddings", "lancedb_index", "golden_eval", "published_index", "lake_housekeeping"]
CHROME_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=3200,1400",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _graphql(port: int, query: str) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def _chromium(url: str, tmp: Path, *extra: str) -> str:
    out = subprocess.run(
        [CHROMIUM, *CHROME_FLAGS, f"--user-data-dir={tmp / 'chrome'}", "--virtual-time-budget=20000", *extra, url],
        capture_output=True, text=True, timeout=120,
    )
    return out.stdout


@pytest.fixture
def webserver(tmp_path, indexed_sample):
    """dagster-webserver over the repo's workspace.yaml, pointed at the session's sample run."""
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(indexed_sample["dagster_home"]),
        "RAG_RAW_DIR": str(indexed_sample["raw"]),
        "RAG_LAKE_DIR": str(indexed_sample["lake"]),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "dagster_webserver", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2)
                break
            except OSError:
                time.sleep(1)
        else:
            pytest.fail("dagster-webserver did not come up within 120 s")
        _graphql(port, "mutation { setNuxSeen }")  # the community pop-up would cover the page
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed (scripts/install.sh installs it)")
def test_lineage_page_shows_every_asset_and_the_successful_run(webserver, tmp_path):
    runs = _graphql(webserver, "{ runsOrError(limit: 1) { ... on Runs { results { status jobName } } } }")
    last = runs["data"]["runsOrError"]["results"][0]
    assert (last["jobName"], last["status"]) == ("index_job", "SUCCESS")

    # The "index" group's lineage draws its assets and links to their upstreams in the other groups.
    url = f"http://127.0.0.1:{webserver}/locations/rag_pipeline.definitions/asset-groups/index"
    dom = _chromium(url, tmp_path, "--dump-dom")
    missing = [a for a in ASSETS if a not in dom]
    assert not missing, f"assets not rendered on the lineage page: {missing}"
    assert dom.count("Materialized") >= 4 and "3 / 3 Passed" in dom  # asset status and checks drawn
    # the per-document assets are partitioned by shard: the UI knows every shard was materialized
    nodes = _graphql(webserver, "{ assetNodes { assetKey { path } partitionStats { numMaterialized numPartitions numFailed } } }")
    stats = {n["assetKey"]["path"][-1]: n["partitionStats"] for n in nodes["data"]["assetNodes"]}
    for asset in ("parsed_documents", "quarantine", "chunks", "chunk_fingerprints", "embeddings"):
        assert stats[asset] and stats[asset]["numPartitions"] == len(SHARD_KEYS), (asset, stats[asset])
        assert stats[asset]["numMaterialized"] == len(SHARD_KEYS) and stats[asset]["numFailed"] == 0, (asset, stats[asset])
    assert stats["lancedb_index"] is None  # the publish side is not partitioned

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "dagster_lineage.png"
    _chromium(url, tmp_path, f"--screenshot={shot}")
    assert shot.exists() and shot.stat().st_size > 10_000
