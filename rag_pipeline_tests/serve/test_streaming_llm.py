"""Real token streaming with an LLM configured: a server over the indexed sample whose
RAG_LLM_BASE_URL is a real local OpenAI-compatible server (fake_llm.py) streaming its reply token
by token. The first `token` event must arrive while the model is still generating; a reply that
fails the citation check, a refusal and a model that dies mid-stream end with `replace` and the
checked answer; the chat stream says so in its content; nothing unreadable reaches the model or
the client."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time

import httpx
import pytest

from rag_pipeline.serve.chat import REPLACE_SEPARATOR
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline_tests.oracle import may_read
from rag_pipeline_tests.serve.conftest import Served, make_tokens, start_server
from rag_pipeline_tests.serve.fake_llm import CITED, FakeLLM

pytestmark = pytest.mark.slow
LEAVE = "How many days of annual leave do I get?"
BUDGET = "What is the 2026 budget guidance?"


@pytest.fixture(scope="module")
def llm():
    fake = FakeLLM().start()
    yield fake
    fake.stop()


@pytest.fixture(scope="module")
def served_llm(indexed_root, tmp_path_factory, llm):
    root = tmp_path_factory.mktemp("served_llm")
    shutil.copytree(indexed_root / "lake", root / "lake")
    tokens, principals = make_tokens(root / "tokens.json")
    names = ("RAG_LLM_BASE_URL", "RAG_LLM_MODEL", "RAG_LLM_API_KEY", "NO_PROXY", "no_proxy")
    saved = {n: os.environ.get(n) for n in names}
    os.environ.update(RAG_LLM_BASE_URL=llm.base_url, RAG_LLM_MODEL="fake-model", RAG_LLM_API_KEY="sk-fake",
                      NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    try:
        url, stop = start_server(root / "lake", root / "tokens.json")
        yield Served(url, tokens, principals, root / "lake", root / "tokens.json")
        stop()
    finally:
        for n, v in saved.items():
            if v is None:
                os.environ.pop(n, None)
            else:
                os.environ[n] = v


@pytest.fixture
def fake(llm):
    llm.mode, llm.delay_s, llm.first_delay_s = "cite", 0.0, 0.0
    llm.requests.clear()
    llm.finished_at.clear()
    yield llm


def timed_events(served: Served, path: str, body: dict, who: str = "staff") -> list[tuple[float, str, object]]:
    """(time.monotonic() at arrival, event name, data) of each SSE event, read as it arrives."""
    events, name, data = [], "message", []
    with httpx.stream("POST", served.url + path, json=body, headers=served.headers(who), timeout=60) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif not line and data:
                raw = "\n".join(data)
                events.append((time.monotonic(), name, raw if raw == "[DONE]" else json.loads(raw)))
                name, data = "message", []
    return events


def ask_events(served, question=LEAVE, who="staff"):
    return [(n, d) for _, n, d in timed_events(served, "/v1/ask", {"question": question, "stream": True}, who)]


def tokens_of(events) -> str:
    return "".join(d["text"] for n, d in events if n == "token")


def test_the_first_token_arrives_while_the_model_is_still_generating(served_llm, fake):
    fake.delay_s = 0.3  # 11 tokens: the model takes 3 s
    started = time.monotonic()
    events = timed_events(served_llm, "/v1/ask", {"question": LEAVE, "stream": True})
    names = [n for _, n, _ in events]
    assert names[0] == "meta" and names[-2:] == ["citations", "done"] and "replace" not in names
    first_token = next(t for t, n, _ in events if n == "token")
    (model_done,) = fake.finished_at
    assert first_token < model_done - 2.0, "the first token waited for the model to finish"
    assert first_token - started < 1.5
    arrivals = [t for t, n, _ in events if n == "token"]
    assert len(arrivals) >= 5 and arrivals[-1] - arrivals[0] > 2.0  # tokens spread over the generation
    text = tokens_of([(n, d) for _, n, d in events])
    assert text == "".join(CITED)
    final = next(d for _, n, d in events if n == "citations")
    assert final["evidence"]["generator"] == "llm" and len(final["citations"]) == 1 and not final["refused"]
    assert fake.requests[0]["stream"] is True
    fake.delay_s = 0.0
    plain = served_llm.post("/v1/ask", {"question": LEAVE}).json()  # the unstreamed answer is the same
    assert plain["answer"] == text and plain["citations"] == final["citations"]


def test_a_reply_with_a_bad_citation_ends_with_replace_and_the_extractive_answer(served_llm, fake):
    fake.mode = "bad"
    events = ask_events(served_llm)
    names = [n for n, _ in events]
    assert names[-3:] == ["replace", "citations", "done"] and "token" in names
    assert "[9]" not in tokens_of(events)  # the bad marker stopped the stream before it went out
    replace = dict(events)["replace"]
    plain = served_llm.post("/v1/ask", {"question": LEAVE}).json()
    assert plain["evidence"]["generator"] == "extractive (llm failed)"
    assert replace["text"] == plain["answer"] and not replace["refused"] and "citation [9]" in replace["reason"]
    final = dict(events)["citations"]
    assert final["citations"] == plain["citations"] and final["evidence"]["generator"] == "extractive (llm failed)"


def test_a_model_that_dies_mid_stream_ends_with_replace(served_llm, fake):
    fake.mode, fake.delay_s = "die", 0.05
    events = ask_events(served_llm)
    assert [n for n, _ in events][-3:] == ["replace", "citations", "done"]
    assert tokens_of(events) == "".join(CITED[:3]).rstrip()
    replace = dict(events)["replace"]
    assert "the stream ended before [DONE]" in replace["reason"] and replace["text"]
    assert dict(events)["citations"]["evidence"]["generator"] == "extractive (llm failed)"


def test_a_model_refusal_replaces_the_streamed_text_with_the_refusal(served_llm, fake):
    fake.mode = "refuse"
    events = ask_events(served_llm)
    replace, final = dict(events)["replace"], dict(events)["citations"]
    assert tokens_of(events) == "I don't know" and replace["text"] == "" and replace["refused"]
    assert final["refused"] and final["citations"] == []


def test_a_refusal_before_the_model_asks_no_model_and_streams_no_tokens(served_llm, fake):
    events = ask_events(served_llm, "What does error code E-99 mean?")
    assert [n for n, _ in events] == ["meta", "citations", "done"] and dict(events)["citations"]["refused"]
    assert fake.requests == []


def chat_stream(served, question=LEAVE, who="staff"):
    events = timed_events(served, "/v1/chat/completions", {"messages": [{"role": "user", "content": question}], "stream": True}, who)
    assert events[-1][2] == "[DONE]"
    return [d for _, _, d in events[:-1]]


def chat_text(chunks) -> str:
    return "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)


def test_the_chat_stream_forwards_the_model_and_appends_sources_or_the_checked_answer(served_llm, fake):
    chunks = chat_stream(served_llm)
    plain = served_llm.post("/v1/chat/completions", {"messages": [{"role": "user", "content": LEAVE}]}).json()
    assert chat_text(chunks) == plain["choices"][0]["message"]["content"]
    assert chat_text(chunks).startswith("".join(CITED) + "\n\nSources:\n[1] ")
    assert not any("rag_replace" in c for c in chunks) and chunks[-1]["rag"]["evidence"]["generator"] == "llm"

    fake.mode = "bad"
    chunks = chat_stream(served_llm)
    plain = served_llm.post("/v1/chat/completions", {"messages": [{"role": "user", "content": LEAVE}]}).json()
    checked = plain["choices"][0]["message"]["content"]
    (replacing,) = [c for c in chunks if "rag_replace" in c]
    assert replacing["rag_replace"]["content"] == checked and "citation [9]" in replacing["rag_replace"]["reason"]
    text = chat_text(chunks)
    assert REPLACE_SEPARATOR in text and text.endswith(REPLACE_SEPARATOR + checked) and "[9]" not in text
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop" and chunks[-1]["rag"]["evidence"]["generator"] == "extractive (llm failed)"


@pytest.fixture(scope="module")
def memo(served_llm):
    lake = Lake(served_llm.lake)
    doc = next(d for d in lake.published_arrow(s.DOCUMENTS).to_pylist() if d["source"] == "finance/budget_memo_2026.md")
    texts = [c["text"] for c in lake.published_arrow(s.CHUNKS).to_pylist() if c["doc_id"] == doc["doc_id"]]
    return doc, texts


def test_nothing_unreadable_reaches_the_model_or_the_stream(served_llm, fake, memo):
    """A model that quotes everything it is given ("echo"): the memo is quoted only to the cfo."""
    doc, texts = memo
    assert texts
    fake.mode = "echo"
    for who in ("staff", "public", "guest", "finance-internal", "cfo"):
        assert may_read(doc, served_llm.principals[who]) == (who == "cfo")
        fake.requests.clear()
        answer = json.dumps(ask_events(served_llm, BUDGET, who), ensure_ascii=False)
        answer += json.dumps(chat_stream(served_llm, BUDGET, who), ensure_ascii=False)
        prompts = "".join(r["messages"][-1]["content"] for r in fake.requests)
        seen = [t for t in texts if t[:80] in prompts or json.dumps(t[:80], ensure_ascii=False)[1:-1] in answer]
        if who == "cfo":
            assert fake.requests and seen, "the cleared token should be answered from the memo"
        else:
            assert not seen and doc["doc_id"] not in answer and doc["source"] not in answer, who


def test_the_page_shows_the_model_text_as_it_streams_then_swaps_in_the_checked_answer(served_llm, fake, tmp_path):
    from rag_pipeline_tests.serve.test_page import ARTIFACTS, CHROMIUM, Browser, section

    if CHROMIUM is None:
        pytest.skip("chromium is not installed (Debian package chromium)")
    fake.mode, fake.delay_s = "bad", 0.6  # "Leave is unlimited" shows for 0.6 s, then [9] fails the check
    url = f"{served_llm.url}/?q={LEAVE.replace(' ', '+').replace('?', '%3F')}&lang=en#token={served_llm.tokens['staff']}"
    browser = Browser(tmp_path / "chrome-replace")
    try:
        session = browser.open(url)
        browser.wait_for(session, "document.getElementById('answer').textContent.includes('Leave is unlimited')", timeout=60)
        browser.wait_for(session, "document.body.dataset.state !== undefined", timeout=60)
        browser.screenshot(session, ARTIFACTS / "serve_page_replace.png")
        dom = browser.evaluate(session, "document.documentElement.outerHTML")
    finally:
        browser.close()
    fake.delay_s = 0.0
    plain_answer = served_llm.post("/v1/ask", {"question": LEAVE}).json()["answer"]
    assert 'data-state="done"' in dom
    answer = section(dom, "answer")
    assert "unlimited" not in answer and plain_answer.split(" [")[0][:40] in answer
    assert "employee_handbook_en.md" in section(dom, "citations")


def test_a_client_that_leaves_mid_stream_ends_the_model_stream_and_is_logged(served_llm, fake):
    fake.delay_s = 0.3  # 3 s of generation; the client leaves after the first token
    with httpx.stream("POST", served_llm.url + "/v1/ask", json={"question": LEAVE, "stream": True},
                      headers=served_llm.headers("staff"), timeout=60) as r:
        rid = r.headers["x-request-id"]
        for line in r.iter_lines():
            if line == "event: token":
                break
    deadline = time.monotonic() + 2.5
    rows = []
    while time.monotonic() < deadline:
        logged = [json.loads(line) for f in (served_llm.lake / "querylog").glob("queries-*.jsonl") for line in f.read_text().splitlines()]
        rows = [row for row in logged if row["request_id"] == rid]
        streams = [t for t in threading.enumerate() if t.name == "rag-llm-stream"]
        if rows and not streams:
            break
        time.sleep(0.1)
    assert [(row["status"], row["endpoint"]) for row in rows] == [(499, "ask-stream")]
    assert not streams, "the model stream outlived its client"
    assert fake.finished_at == []  # the model's reply was not read to its end
