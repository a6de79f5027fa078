"""Tokens × endpoints × questions: no response, refusals and streams included, carries anything of a
document the token's principal may not read. Principals are drawn at random, each gets a real
token (added to the live tokens file), and the oracle is the independent `may_read`."""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rag_pipeline.serve.auth import add_token
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.oracle import may_read
from rag_pipeline_tests.principals import principals

pytestmark = pytest.mark.slow
QUESTIONS = ["What is the 2026 budget guidance?", "budget 2026 travel freeze", "annual leave", "E-45", "服务器备份",
             "报销", "password policy", "Who approves the 2026 budget?"]
ENDPOINTS = ("search", "search-keyword", "search-vector", "ask", "ask-stream", "ask-retrieve", "chat", "chat-stream")


@pytest.fixture(scope="module")
def documents(served):
    lake = Lake(served.lake)
    return {d["doc_id"]: d for d in lake.published_arrow(s.DOCUMENTS).to_pylist()}


def call(served, endpoint: str, question: str, who: str) -> tuple[list[str], str]:
    """(doc ids the response returned, the whole response text)."""
    if endpoint.startswith("search"):
        mode = endpoint.partition("-")[2] or "hybrid"
        r = served.post("/v1/search", {"query": question, "mode": mode, "k": 50}, who=who)
        return [h["doc_id"] for h in r.json()["hits"]], r.text
    if endpoint == "ask-retrieve":
        r = served.post("/v1/ask", {"question": question, "retrieve_only": True, "k": 50}, who=who)
        return [h["doc_id"] for h in r.json()["hits"]], r.text
    if endpoint.startswith("ask"):
        r = served.post("/v1/ask", {"question": question, "stream": endpoint == "ask-stream"}, who=who)
        return _doc_ids_in(r.text), r.text
    r = served.post("/v1/chat/completions", {"messages": [{"role": "user", "content": question}], "stream": endpoint == "chat-stream"}, who=who)
    return _doc_ids_in(r.text), r.text


def _doc_ids_in(text: str) -> list[str]:
    """Every doc id anywhere in a response: citations of JSON bodies, SSE events and chat chunks."""
    return re.findall(r'"doc_id": ?"([0-9a-f]+)"', text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(p=principals, question=st.sampled_from(QUESTIONS), endpoint=st.sampled_from(ENDPOINTS))
def test_no_endpoint_ever_returns_what_the_token_may_not_read(served, documents, p, question, endpoint):
    name = f"fuzz-{abs(hash(p)) % 10**8}"
    token = add_token(served.tokens_file, name, user=p.user, groups=p.groups, clearance=p.clearance, departments=p.departments)
    served.tokens[name] = token
    returned, text = call(served, endpoint, question, name)
    assert returned or endpoint != "search-vector" or not any(may_read(d, p) and d["n_chunks"] for d in documents.values())
    assert all(may_read(documents[d], p) for d in returned), f"{endpoint} returned a document {p} may not read"
    hidden = [d for d in documents.values() if not may_read(d, p)]
    leaked = [d["source"] for d in hidden if d["source"] in text or d["doc_id"] in text]
    assert not leaked, f"{endpoint} answered {p} with unreadable documents: {leaked}"


def test_the_confidential_memo_reaches_only_the_tokens_cleared_for_it(served, documents):
    memo = next(d for d in documents.values() if d["source"] == "finance/budget_memo_2026.md")
    assert memo["security_level"] == "confidential"
    for who in ("staff", "public", "guest", "finance-internal"):
        for endpoint in ENDPOINTS:
            _, text = call(served, endpoint, "What is the 2026 budget guidance?", who)
            assert memo["doc_id"] not in text and memo["source"] not in text, (who, endpoint)
    returned, text = call(served, "search", "What is the 2026 budget guidance?", "cfo")
    assert memo["doc_id"] in returned  # the cleared token does see it: the filter is not just "hide finance"
