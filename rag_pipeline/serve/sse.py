"""Server-sent events for `POST /v1/ask` with `stream: true`.

Events, in order: `meta` (request id, at once), `token` (answer text, piece by piece),
`citations` (citations, refusal flag and reason, evidence, generation: sent when the text ends),
`done` (latency). A refusal sends no `token` events. The answer is composed and its citations
checked before the first token goes out, so a streamed answer is never one that would fail the check.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict

from rag_pipeline.query.answer import Answer

_PIECES = re.compile(r"\S+\s*|\s+")


def sse(event: str | None, data) -> str:
    text = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event else ""
    return head + "".join(f"data: {line}\n" for line in text.split("\n")) + "\n"


def pieces(text: str, size: int = 3) -> list[str]:
    """The answer in small pieces (a few words; CJK text, which has no spaces, a few characters)."""
    words = _PIECES.findall(text)
    out: list[str] = []
    for word in words:
        if len(word) > 12 and not word.isascii():  # a run of CJK characters
            out.extend(word[i : i + 4] for i in range(0, len(word), 4))
        else:
            out.append(word)
    return ["".join(out[i : i + size]) for i in range(0, len(out), size)]


async def answer_events(answer: Answer, extra: dict, started: float):
    if not answer.refused:
        for piece in pieces(answer.answer):
            yield sse("token", {"text": piece})
    yield sse(
        "citations",
        {
            "citations": [asdict(c) for c in answer.citations],
            "refused": answer.refused,
            "reason": answer.reason,
            "evidence": answer.evidence,
            **extra,
        },
    )
    yield sse("done", {"latency_ms": round((time.perf_counter() - started) * 1000, 2)})
