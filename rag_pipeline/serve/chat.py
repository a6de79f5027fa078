"""OpenAI-compatible chat completions: the last user message is the question, the cited answer
(or the refusal) is the assistant message. Citations travel three ways, so any front end keeps
them: numbered in the text with a "Sources" list appended, as `citations` (one string per source,
like other search-backed chat APIs) and as `rag` (the full `rag ask --json` object)."""

from __future__ import annotations

import json
import time

from rag_pipeline.query.answer import Answer
from rag_pipeline.serve.sse import pieces

MODEL_ID = "rag-pipeline"
REFUSAL_PREFIX = "I can't answer that from the indexed documents"


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
