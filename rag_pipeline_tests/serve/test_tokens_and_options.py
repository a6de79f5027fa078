"""The token helper, the server's entry point without tokens, and a query log without question text."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from rag_pipeline.serve import create_app
from rag_pipeline.serve.auth import AuthError, TokenStore, hash_token
from rag_pipeline_tests.conftest import REPO


def test_the_token_helper_prints_the_token_once_and_stores_only_its_hash(tmp_path):
    path = tmp_path / "tokens.json"
    out = subprocess.run(
        [sys.executable, "-m", "rag_pipeline.serve.tokens", "add", "--tokens", str(path), "--name", "ann",
         "--user", "ann@corp.example", "--group", "finance", "--group", "all-staff", "--clearance", "confidential", "--scope", "admin"],
        capture_output=True, text=True, cwd=REPO, check=True,
    )
    token = out.stdout.strip()
    assert token.startswith("rag_") and len(token) > 40 and "only time" in out.stderr
    stored = path.read_text()
    assert token not in stored and hash_token(token) in stored
    assert (path.stat().st_mode & 0o077) == 0  # not readable by others
    who = TokenStore(path).authenticate(f"Bearer {token}")
    assert who.name == "ann" and who.is_admin
    assert who.principal.groups == ("finance", "all-staff") and who.principal.clearance == "confidential"
    with pytest.raises(AuthError) as err:
        TokenStore(path).authenticate(f"Bearer {token}x")
    assert err.value.status == 401
    listed = subprocess.run([sys.executable, "-m", "rag_pipeline.serve.tokens", "list", "--tokens", str(path)],
                            capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert '"ann"' in listed and token not in listed and "sha256" not in listed
    bad = subprocess.run([sys.executable, "-m", "rag_pipeline.serve.tokens", "add", "--tokens", str(path), "--name", "x", "--clearance", "top"],
                         capture_output=True, text=True, cwd=REPO)
    assert bad.returncode == 2


def test_a_tokens_file_with_plain_tokens_or_none_is_refused(tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps({"tokens": [{"name": "x", "sha256": "hunter2"}]}))
    with pytest.raises(ValueError, match="stored hashed"):
        TokenStore(plain)
    with pytest.raises(ValueError, match="no tokens"):
        TokenStore(tmp_path / "missing.json")
    out = subprocess.run([sys.executable, "-m", "rag_pipeline.serve", "--lake", str(tmp_path)], capture_output=True, text=True,
                         cwd=REPO, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert out.returncode == 2 and "tokens file is required" in out.stderr


@pytest.mark.slow
def test_log_questions_off_keeps_the_question_text_out_of_the_log(indexed_root, tmp_path):
    from rag_pipeline.serve.auth import add_token

    shutil.copytree(indexed_root / "lake", tmp_path / "lake")
    token = add_token(tmp_path / "tokens.json", "t")
    app = create_app(tmp_path / "lake", tmp_path / "tokens.json", log_questions=False)
    with TestClient(app) as client:
        assert app.state.service.ready.wait(180), app.state.service.load_error  # warm: the index is loaded
        r = client.post("/v1/ask", json={"question": "How many days of annual leave do I get?"}, headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and r.json()["citations"]
    text = "".join(p.read_text() for p in (tmp_path / "lake" / "querylog").glob("queries-*.jsonl"))
    record = json.loads(text.splitlines()[-1])
    assert record["question"] is None and "annual leave" not in text and record["hits"]


@pytest.mark.slow
def test_a_server_started_before_the_first_index_answers_503_then_serves_it(indexed_root, tmp_path):
    from rag_pipeline.serve.auth import add_token

    lake = tmp_path / "lake"
    token = add_token(tmp_path / "tokens.json", "t")
    headers = {"Authorization": f"Bearer {token}"}
    app = create_app(lake, tmp_path / "tokens.json")
    with TestClient(app) as client:
        service = app.state.service
        for _ in range(600):
            if service.load_error:
                break
            __import__("time").sleep(0.1)
        assert service.load_error and "no published index" in service.load_error
        ready = client.get("/readyz")
        assert ready.status_code == 503 and "rag index" in ready.json()["error"]
        r = client.post("/v1/search", json={"query": "annual leave"}, headers=headers)
        assert r.status_code == 503 and r.json()["error"]["code"] == "index_unavailable" and r.headers["retry-after"]
        shutil.copytree(indexed_root / "lake", lake)  # the first index lands: no restart needed
        r = client.post("/v1/search", json={"query": "annual leave"}, headers=headers)
        assert r.status_code == 200 and r.json()["hits"]
        assert client.get("/readyz").json()["ready"] is True
