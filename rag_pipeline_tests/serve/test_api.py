"""The HTTP API on a real uvicorn server over the indexed sample: auth, search, ask (JSON and SSE),
OpenAI-compatible chat, status, health, OpenAPI, feedback and the query log."""

from __future__ import annotations

import contextlib
import io
import json

import duckdb
import httpx
import pytest

from rag_pipeline import cli
from rag_pipeline.query import RagIndex

pytestmark = pytest.mark.slow
LEAVE = "How many days of annual leave do I get?"


def sse_events(text: str) -> list[tuple[str, dict]]:
    events = []
    for block in text.strip().split("\n\n"):
        name, data = "message", []
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((name, json.loads("\n".join(data))))
    return events


def chat_chunks(text: str) -> list:
    lines = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


@pytest.mark.parametrize("path,body", [("/v1/search", {"query": "annual leave"}), ("/v1/ask", {"question": LEAVE}),
                                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": LEAVE}]})])
def test_requests_without_a_valid_token_get_401_with_a_json_error(served, path, body):
    missing = httpx.post(served.url + path, json=body, timeout=60)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "missing_token"
    assert missing.headers["www-authenticate"].startswith("Bearer")
    wrong = httpx.post(served.url + path, json=body, headers={"Authorization": "Bearer rag_not-a-real-token"}, timeout=60)
    assert wrong.status_code == 401 and wrong.json()["error"]["code"] == "invalid_token"
    basic = httpx.post(served.url + path, json=body, headers={"Authorization": "Basic dXNlcjpwYXNz"}, timeout=60)
    assert basic.status_code == 401
    assert served.get("/v1/status", who=None).status_code == 401


def test_debug_fields_need_the_admin_scope(served):
    denied = served.post("/v1/search", {"query": "annual leave", "debug": True}, who="staff")
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "admin_scope_required"
    assert served.post("/v1/ask", {"question": LEAVE, "debug": True}, who="staff").status_code == 403
    plain = served.post("/v1/search", {"query": "annual leave"}, who="cfo").json()["hits"]
    assert plain and "dense_rank" not in plain[0]  # debug fields only when asked for
    hits = served.post("/v1/search", {"query": "annual leave", "debug": True}, who="cfo").json()["hits"]
    assert {"dense_rank", "keyword_rank", "dense_score", "keyword_score", "keyword_weight"} <= set(hits[0])
    assert any(h["dense_rank"] for h in hits) and any(h["keyword_rank"] for h in hits)


@pytest.mark.parametrize("field,value", [("clearance", "secret"), ("groups", ["finance"]), ("user", "cfo@northwind-robotics.example"), ("principal", {"clearance": "secret"})])
def test_a_principal_in_the_body_is_rejected_never_used(served, field, value):
    for path, body in (("/v1/search", {"query": "budget 2026"}), ("/v1/ask", {"question": "budget 2026"})):
        response = served.post(path, {**body, field: value}, who="staff")
        assert response.status_code == 422 and response.json()["error"]["code"] == "invalid_request"
        assert field in response.json()["error"]["message"]


def test_search_returns_ranked_hits_of_the_requested_mode(served):
    sample_index = RagIndex.open(served.lake)
    for mode in ("hybrid", "keyword", "vector", "hybrid-rrf"):
        response = served.post("/v1/search", {"query": "E-45 error", "mode": mode, "k": 3})
        assert response.status_code == 200
        body = response.json()
        assert body["mode"] == mode and len(body["hits"]) == 3
        assert body["generation"] == int(response.headers["x-generation"])
        expected = sample_index.search("E-45 error", mode=mode, k=3, principal=served.principals["staff"])
        assert [h["chunk_id"] for h in body["hits"]] == [h.chunk_id for h in expected]
    retrieve_only = served.post("/v1/search", {"query": "E-45 error", "retrieve_only": True, "debug": True}, who="cfo").json()
    assert retrieve_only["rerank"]["status"] == "off"
    assert served.post("/v1/search", {"query": "x", "mode": "fuzzy"}).status_code == 422
    assert served.post("/v1/search", {"query": "x", "k": 0}).status_code == 422


def test_ask_returns_the_same_json_as_rag_ask_json(served):
    lake = str(served.lake)
    for question in (LEAVE, "What does error code E-99 mean?", "员工每年有多少天年假？"):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert cli.main(["ask", question, "--lake", lake, "--json"]) == 0
        response = served.post("/v1/ask", {"question": question}, who="staff")
        assert response.status_code == 200
        assert response.json() == json.loads(out.getvalue())
    answered = served.post("/v1/ask", {"question": LEAVE}).json()
    assert not answered["refused"] and "15" in answered["answer"] and answered["citations"]
    refused = served.post("/v1/ask", {"question": "What does error code E-99 mean?"}).json()
    assert refused["refused"] and "e-99" in refused["reason"].lower() and not refused["citations"]


def test_ask_retrieve_only_composes_no_answer(served):
    body = served.post("/v1/ask", {"question": LEAVE, "retrieve_only": True, "mode": "keyword"}).json()
    assert body["retrieve_only"] and "answer" not in body and body["hits"]


def test_ask_streams_the_answer_then_the_citations(served):
    plain = served.post("/v1/ask", {"question": LEAVE}).json()
    response = served.post("/v1/ask", {"question": LEAVE, "stream": True})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    names = [name for name, _ in events]
    assert names[0] == "meta" and names[-2:] == ["citations", "done"]
    assert set(names[1:-2]) == {"token"} and len(names) > 5  # several pieces, not one blob
    assert "".join(data["text"] for name, data in events if name == "token") == plain["answer"]
    final = dict(events)["citations"]
    assert final["citations"] == plain["citations"] and final["refused"] is False and final["generation"] >= 1
    assert events[0][1]["request_id"] == response.headers["x-request-id"]
    refusal = sse_events(served.post("/v1/ask", {"question": "What does error code E-99 mean?", "stream": True}).text)
    assert [n for n, _ in refusal] == ["meta", "citations", "done"] and dict(refusal)["citations"]["refused"]


def test_chat_completions_is_openai_shaped_and_carries_citations(served):
    body = {"model": "rag-pipeline", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": LEAVE}], "temperature": 0}
    reply = served.post("/v1/chat/completions", body).json()
    assert reply["object"] == "chat.completion" and reply["choices"][0]["finish_reason"] == "stop"
    text = reply["choices"][0]["message"]["content"]
    assert reply["choices"][0]["message"]["role"] == "assistant"
    assert "15" in text and "Sources:" in text and "employee_handbook_en.md" in text
    assert reply["citations"] and reply["rag"]["citations"][0]["chunk_id"]
    chunks = chat_chunks(served.post("/v1/chat/completions", {**body, "stream": True}).text)
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == text
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["citations"] == reply["citations"]
    refusal = served.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "What does error code E-99 mean?"}]}).json()
    assert refusal["choices"][0]["message"]["content"].startswith("I can't answer") and refusal["rag"]["refused"]
    assert served.post("/v1/chat/completions", {"messages": [{"role": "system", "content": "hi"}]}).status_code == 422
    models = served.get("/v1/models").json()
    assert models["data"][0]["id"] == "rag-pipeline"


def test_status_health_and_openapi(served):
    assert httpx.get(served.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(served.url + "/readyz").json()
    status = served.get("/v1/status").json()
    assert ready == {"ready": True, "generation": status["served_generation"]}
    assert status["model"]["name"] and status["counts"]["chunks"] > 0
    assert status["you"] == {"name": "staff", "admin": False, "clearance": "internal", "groups": ["all-staff"], "departments": []}
    assert "lake" not in status and "lake" in served.get("/v1/status", who="cfo").json()
    schema = httpx.get(served.url + "/openapi.json").json()
    assert {"/v1/search", "/v1/ask", "/v1/chat/completions", "/v1/status", "/v1/feedback", "/healthz", "/readyz"} <= set(schema["paths"])
    assert "HTTPBearer" in schema["components"]["securitySchemes"]
    docs = httpx.get(served.url + "/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()


def test_every_request_lands_in_the_query_log_readable_with_duckdb(served):
    ask = served.post("/v1/ask", {"question": "log me: annual leave carry over"})
    rid = ask.headers["x-request-id"]
    assert served.post("/v1/feedback", {"request_id": rid, "rating": "down", "comment": "too long"}).json() == {"ok": True}
    assert served.post("/v1/feedback", {"request_id": rid, "rating": "meh"}).status_code == 422
    folder = served.lake / "querylog"
    rows = duckdb.sql(
        f"SELECT * FROM read_json_auto('{folder}/queries-*.jsonl', format='newline_delimited') WHERE request_id = '{rid}'"
    ).fetchall()
    assert len(rows) == 1
    record = next(json.loads(line) for f in folder.glob("queries-*.jsonl") for line in f.read_text().splitlines() if rid in line)
    assert record["endpoint"] == "ask" and record["question"] == "log me: annual leave carry over"
    assert record["generation"] >= 1 and record["latency_ms"] > 0 and record["refused"] is not None
    assert record["hits"] and {"rank", "chunk_id", "dense_rank", "keyword_rank"} <= set(record["hits"][0])
    assert len(record["principal"]) == 16 and served.tokens["staff"] not in json.dumps(record)
    summary = duckdb.sql(
        f"SELECT endpoint, count(*) n, avg(latency_ms) FROM read_json_auto('{folder}/queries-*.jsonl', format='newline_delimited') GROUP BY endpoint"
    ).fetchall()
    assert {row[0] for row in summary} >= {"ask"}
    feedback = duckdb.sql(f"SELECT rating, comment FROM read_json_auto('{folder}/feedback-*.jsonl') WHERE request_id = '{rid}'").fetchall()
    assert feedback == [("down", "too long")]


def test_tokens_added_or_revoked_take_effect_without_a_restart(served):
    from rag_pipeline.serve.auth import add_token, revoke_token

    token = add_token(served.tokens_file, "temp", clearance="public")
    ok = httpx.get(served.url + "/v1/status", headers={"Authorization": f"Bearer {token}"}).json()
    assert ok["you"]["name"] == "temp" and ok["you"]["clearance"] == "public"
    assert token not in served.tokens_file.read_text()  # stored hashed
    assert revoke_token(served.tokens_file, "temp")
    assert httpx.get(served.url + "/v1/status", headers={"Authorization": f"Bearer {token}"}).status_code == 401


def test_model_calls_do_not_block_the_event_loop(served):
    """While asks run on the worker pool, the loop still answers /healthz at once."""
    import threading
    import time

    asks: list[float] = []

    def ask():  # four asks in a row per thread: long enough a busy spell for the loop to show
        for _ in range(4):
            started = time.perf_counter()
            assert served.post("/v1/ask", {"question": "员工每年有多少天年假？"}).status_code == 200
            asks.append(time.perf_counter() - started)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for t in threads:
        t.start()
    health = []
    with httpx.Client(base_url=served.url, timeout=60) as client:
        while any(t.is_alive() for t in threads):
            started = time.perf_counter()
            assert client.get("/healthz").status_code == 200
            health.append(time.perf_counter() - started)
            time.sleep(0.02)
    for t in threads:
        t.join()
    assert len(asks) == 24
    # blocked, the loop answered 3 health checks in all, the slowest after a whole ask; on the pool, 25 in ms
    assert len(health) >= 8 and max(health) < min(asks) / 2, (health, asks)
