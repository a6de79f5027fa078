"""A small real OpenAI-compatible chat-completions server on a free loopback port, in a thread:
it streams its reply (`stream: true`: `data: {choices:[{delta:{content}}]}` events, then
`data: [DONE]`) token by token with a chosen delay, or sends it whole. Used by the serve tests
and by bench/serve_ttft.py.

`mode` picks the reply from the request: "cite" (a short answer citing [1]), "bad" (cites [9], a
source no prompt has), "refuse" ("I don't know"), "die" (the stream stops after `die_after`
tokens without [DONE] or a finish reason), "echo" (quotes every source it was given, citing [1]).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CITED = ["Full-time ", "employees ", "receive ", "15 ", "working ", "days ", "of ", "annual ", "leave ", "[1]", "."]
BAD = ["Leave ", "is ", "unlimited ", "[9]", ", ", "says ", "HR ", "[1]", "."]
REFUSE = ["I ", "don't ", "know"]
_SOURCE = re.compile(r"<source [^>]*>\n(.*?)\n</source>", re.DOTALL)


class FakeLLM:
    def __init__(self, mode: str = "cite", delay_s: float = 0.0, first_delay_s: float = 0.0, die_after: int = 3):
        self.mode, self.delay_s, self.first_delay_s, self.die_after = mode, delay_s, first_delay_s, die_after
        self.requests: list[dict] = []
        self.first_token_s: list[float] = []  # per streamed request: request read -> first token written
        self.finished_at: list[float] = []  # time.monotonic() when each streamed reply's last token was written
        self.release = threading.Event()  # cuts the delays short at teardown
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as real servers do

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                received = time.perf_counter()
                fake.requests.append(body)
                tokens = fake.tokens_for(body)
                try:
                    if not body.get("stream"):  # the whole reply when a streamed one would have ended
                        fake.release.wait(fake.first_delay_s + fake.delay_s * max(0, len(tokens) - 1))
                        fake._whole(self, "".join(tokens))
                    else:
                        fake._stream(self, tokens, received)
                except OSError:  # the client left
                    pass

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> FakeLLM:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()

    def sources(self, body: dict) -> list[str]:
        """The passage texts the request's prompt carries."""
        return _SOURCE.findall(body["messages"][-1]["content"])

    def tokens_for(self, body: dict) -> list[str]:
        if self.mode == "echo":
            return [text + " [1]\n" for text in self.sources(body)] or REFUSE
        return {"cite": CITED, "bad": BAD, "refuse": REFUSE, "die": CITED}[self.mode]

    def _whole(self, handler, text: str) -> None:
        payload = json.dumps({"id": "chatcmpl-fake", "object": "chat.completion", "model": "fake",
                              "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}).encode()
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def _stream(self, handler, tokens: list[str], received: float) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.end_headers()
        handler.wfile.flush()

        def event(delta: dict, finish: str | None = None) -> None:
            chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": "fake",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.flush()

        event({"role": "assistant", "content": ""})
        if self.first_delay_s:
            self.release.wait(self.first_delay_s)
        for i, token in enumerate(tokens):
            if i and self.delay_s:
                self.release.wait(self.delay_s)
            if self.mode == "die" and i == self.die_after:
                self.finished_at.append(time.monotonic())
                return  # the connection closes: no finish reason, no [DONE]
            event({"content": token})
            if i == 0:
                self.first_token_s.append(time.perf_counter() - received)
        self.finished_at.append(time.monotonic())
        event({}, "stop")
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()
