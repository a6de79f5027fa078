"""OpenAI-compatible chat completions: the last user message is the question, the cited answer
(or the refusal) is the assistant message. Citations travel three ways, so any front end keeps
them: numbered in the text with a "Sources" list appended, as `citations` (one string per source,
like other search-backed chat APIs) and as `rag` (the full `rag ask --json` object).

Streaming (`stream: true`) sends a first chunk with the role at once, then content deltas, then a
last chunk with `finish_reason: "stop"`, `citations` and `rag`, then `data: [DONE]`. With an LLM
configured the deltas are the model's reply as it arrives, followed by the "Sources" list once the
whole reply passed the citation check. When it does not pass (or the model refuses, or its stream
breaks) after text was sent, one more content delta appends REPLACE_SEPARATOR and the checked
answer (the extractive answer or the refusal), so any OpenAI client displays the withdrawal and the
checked text; that chunk also carries `rag_replace: {content, reason}` — the complete checked
message — for clients that can swap the text instead."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable

from rag_pipeline.query.answer import Answer
from rag_pipeline.serve.sse import ModelPieces, pieces

MODEL_ID = "rag-pipeline"
REFUSAL_PREFIX = "I can't answer that from the indexed documents"
REPLACE_SEPARATOR = "\n\n---\nWithdrawn: the text above did not pass the citation check. Checked answer:\n\n"


def source_label(c) -> str:
    page = f", page {c.page}" if c.page else ""
    return f"{c.title} — {c.source}{page}"


def content(answer: Answer) -> str:
    if answer.refused:
        return f"{REFUSAL_PREFIX}: {answer.reason}."
    sources = "\n".join(f"[{n}] {source_label(c)}" for n, c in enumerate(answer.citations, start=1))
    return f"{answer.answer}\n\nSources:\n{sources}"


def _extensions(answer: Answer, generation: int) -> dict:
    return {"citations": [source_label(c) for c in answer.citations], "rag": {**answer.to_dict(), "generation": generation}}


def _usage(answer: Answer, text: str) -> dict:
    prompt, completion = len(answer.question.split()), len(text.split())  # words, not model tokens: no model counts here
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def completion(rid: str, model: str, answer: Answer, generation: int) -> dict:
    text = content(answer)
    return {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model or MODEL_ID,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": _usage(answer, text),
        **_extensions(answer, generation),
    }


def _chunk(rid: str, model: str, delta: dict, finish: str | None = None, **extra) -> str:
    body = {
        "id": f"chatcmpl-{rid}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model or MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"


def first_chunk(rid: str, model: str) -> str:
    """Sent at once, before retrieval: clients see the stream open without waiting for the answer."""
    return _chunk(rid, model, {"role": "assistant", "content": ""})


async def stream_chunks(rid: str, model: str, answer: Answer, generation: int):
    for piece in pieces(content(answer)):
        yield _chunk(rid, model, {"content": piece})
    yield _chunk(rid, model, {}, "stop", **_extensions(answer, generation))
    yield "data: [DONE]\n\n"


async def llm_stream_chunks(rid: str, model: str, items: AsyncIterator, generation: int, finished: Callable[[Answer], None]):
    """A model's streamed answer (`generate.stream_answer`'s items) as chat chunks: each piece as
    it arrives; then the Sources list, or — when the checked answer is not what was sent — the
    separator and the checked answer (with `rag_replace`); then the last chunk and [DONE]."""
    stream = ModelPieces(items)
    async for piece in stream:
        yield _chunk(rid, model, {"content": piece})
    end = stream.end
    answer = end.answer
    finished(answer)
    text = content(answer)
    if not stream.sent:
        for piece in pieces(text):
            yield _chunk(rid, model, {"content": piece})
    elif end.replaced:
        yield _chunk(rid, model, {"content": REPLACE_SEPARATOR + text}, rag_replace={"content": text, "reason": answer.reason})
    else:
        yield _chunk(rid, model, {"content": text[len(end.text):]})  # the Sources list
    yield _chunk(rid, model, {}, "stop", **_extensions(answer, generation))
    yield "data: [DONE]\n\n"
