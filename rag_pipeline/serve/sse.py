"""Server-sent events for `POST /v1/ask` with `stream: true`.

Events, in order:

1. `meta` — `{request_id}`, at once.
2. `token` — `{text}`, zero or more: the answer as it is produced.
3. `replace` — `{text, refused, reason}`, at most one, only with an LLM configured: the answer
   shown so far is withdrawn and `text` (the checked answer; empty for a refusal) replaces it.
4. `citations` — citations, refusal flag and reason, evidence, generation: sent when the text ends.
5. `done` — `{latency_ms}`.

So a client ends with the checked answer: the `token` texts joined, or the `replace` text when
there is one. Without an LLM (extractive answers) the answer is composed and checked before the
first token goes out, and there is never a `replace`. With an LLM the model's reply is requested
with `stream: true` and each piece is sent as a `token` as soon as it arrives (reasoning blocks
dropped, citation markers renumbered as they complete); the whole reply is then checked as a
non-streamed one is (every [n] must be a passage it was given). When it fails the check, when the
model says it does not know, or when the model's stream breaks, `replace` carries what the check
settled on (the extractive answer or the refusal). A citation outside the passages stops the
model's stream at once. A refusal decided before the model is asked sends no `token` events.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import asdict

from rag_pipeline.query.answer import Answer
from rag_pipeline.query.generate import StreamEnd

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


def _closing_events(answer: Answer, extra: dict, started: float):
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


async def answer_events(answer: Answer, extra: dict, started: float):
    """A composed, checked answer: its text in pieces, then citations and done."""
    if not answer.refused:
        for piece in pieces(answer.answer):
            yield sse("token", {"text": piece})
    for event in _closing_events(answer, extra, started):
        yield event


class ModelPieces:
    """`generate.stream_answer`'s items seen as its text pieces (`async for`), then `end`: the
    StreamEnd with the checked answer; `sent` says whether any piece went out."""

    def __init__(self, items: AsyncIterator):
        self._items, self._end, self.sent = items, None, False

    async def __aiter__(self):
        async for item in self._items:
            if isinstance(item, StreamEnd):
                self._end = item
                return
            self.sent = True
            yield item

    @property
    def end(self) -> StreamEnd:
        if self._end is None:
            raise RuntimeError("the answer stream ended without a checked answer")
        return self._end


async def llm_answer_events(items: AsyncIterator, extra: dict, started: float, finished: Callable[[Answer], None]):
    """A model's streamed answer (`generate.stream_answer`'s items): each piece as a token when it
    arrives, `replace` when the checked answer is not what was sent, then citations and done.
    `finished` receives the checked answer before the closing events."""
    stream = ModelPieces(items)
    async for piece in stream:
        yield sse("token", {"text": piece})
    end = stream.end
    finished(end.answer)
    if end.replaced and stream.sent:
        yield sse("replace", {"text": end.text, "refused": end.answer.refused, "reason": end.answer.reason})
    elif end.replaced:  # nothing shown yet: the checked answer streams as an extractive one does
        for piece in pieces(end.text):
            yield sse("token", {"text": piece})
    for event in _closing_events(end.answer, extra, started):
        yield event


async def in_thread(make_iterator: Callable[[], Iterator]) -> AsyncIterator:
    """Items of a blocking iterator (the model's HTTP stream) produced on a thread of its own, so
    a long generation neither blocks the event loop nor holds a worker of the pool. When the
    consumer stops early (the client left) the iterator is closed after its next item."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue = asyncio.Queue()
    stop = threading.Event()
    end = object()

    def put(item) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: nobody is listening
            stop.set()

    def work() -> None:
        iterator = make_iterator()
        try:
            for item in iterator:
                if stop.is_set():
                    break
                put((item, None))
        except BaseException as exc:  # handed to the consumer
            put((end, exc))
        else:
            put((end, None))
        finally:
            close = getattr(iterator, "close", None)
            if close:
                close()

    threading.Thread(target=work, name="rag-llm-stream", daemon=True).start()
    try:
        while True:
            item, error = await queue.get()
            if item is end:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
