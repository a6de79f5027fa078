"""A real uvicorn server on a free loopback port over a copy of the session's indexed sample lake."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
import uvicorn

from rag_pipeline.query.filters import Principal
from rag_pipeline.serve import create_app
from rag_pipeline.serve.auth import add_token

# name -> (principal fields, scopes). cfo reads the confidential finance memo; the others do not.
TOKENS = {
    "staff": (dict(groups=("all-staff",), clearance="internal"), ()),
    "cfo": (dict(user="cfo@northwind-robotics.example", groups=("all-staff", "finance"), clearance="confidential", departments=("Finance",)), ("admin",)),
    "public": (dict(groups=("all-staff",), clearance="public"), ()),
    "guest": (dict(groups=("guests",), clearance="internal"), ()),
    "finance-internal": (dict(groups=("finance",), clearance="internal", departments=("Finance",)), ()),
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    """A running server: its base URL, the tokens by name (with their principals), its lake."""

    def __init__(self, url: str, tokens: dict[str, str], principals: dict[str, Principal], lake: Path, tokens_file: Path):
        self.url, self.tokens, self.principals, self.lake, self.tokens_file = url, tokens, principals, lake, tokens_file

    def headers(self, name: str) -> dict:
        return {"Authorization": f"Bearer {self.tokens[name]}"}

    def post(self, path: str, body: dict, who: str | None = "staff", **kw) -> httpx.Response:
        headers = self.headers(who) if who else {}
        return httpx.post(self.url + path, json=body, headers=headers, timeout=120, **kw)

    def get(self, path: str, who: str | None = "staff") -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers(who) if who else {}, timeout=120)


def make_tokens(path: Path) -> tuple[dict[str, str], dict[str, Principal]]:
    tokens, principals = {}, {}
    for name, (fields, scopes) in TOKENS.items():
        tokens[name] = add_token(path, name, scopes=scopes, **fields)
        principals[name] = Principal(**fields)
    return tokens, principals


def start_server(lake: Path, tokens_file: Path, **app_kwargs):
    """uvicorn.Server in a thread; returns (url, stop). Waits until /readyz says the index is warm."""
    port = free_port()
    app = create_app(lake, tokens_file, **app_kwargs)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 180
    while time.time() < deadline:
        try:
            if httpx.get(url + "/readyz", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    else:
        server.should_exit = True
        pytest.fail("the server did not become ready within 180 s")

    def stop():
        server.should_exit = True
        thread.join(timeout=30)

    return url, stop


@pytest.fixture(scope="session")
def indexed_root(request) -> Path:
    """The session's indexed sample (`base`: raw/ and lake/, one real Dagster run). To iterate on
    these tests alone, RAG_TEST_INDEXED_SAMPLE may name a folder holding such a raw/ and lake/."""
    prebuilt = os.environ.get("RAG_TEST_INDEXED_SAMPLE")
    if prebuilt:
        return Path(prebuilt)
    return request.getfixturevalue("base")


@pytest.fixture(scope="session")
def served(indexed_root, tmp_path_factory):
    """One server for the read-only tests, over a private copy of the indexed sample lake."""
    root = tmp_path_factory.mktemp("served")
    shutil.copytree(indexed_root / "lake", root / "lake")
    tokens, principals = make_tokens(root / "tokens.json")
    url, stop = start_server(root / "lake", root / "tokens.json")
    yield Served(url, tokens, principals, root / "lake", root / "tokens.json")
    stop()
