"""Time to the first streamed token of `POST /v1/ask` (`stream: true`) with an LLM configured,
against the LLM server's own time to first token (loopback only, bounded).

    .venv/bin/python bench/serve_ttft.py --lake /path/to/indexed/lake [--rounds 20] [--first-delay-ms 50] [--token-delay-ms 20]

Starts a local OpenAI-compatible streaming server (rag_pipeline_tests/serve/fake_llm.py: it waits
--first-delay-ms before its first token, as a model's prefill would, then sends 11 tokens
--token-delay-ms apart, citing [1]) and `python -m rag_pipeline.serve` on free 127.0.0.1 ports with
RAG_LLM_BASE_URL pointing at it. Each round, for each answerable question in turn: the LLM
server's own time to first token (a direct streamed request with the prompt the service would
send), the service's time to the first `token` event, the whole stream, and the unstreamed
`/v1/ask` (what the first token waited for before tokens were forwarded as they arrive). Prints
medians over rounds x questions and the overhead (service TTFT minus the LLM's own).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from serve_load import running_server  # noqa: E402

QUESTIONS = [
    "How many days of annual leave do I get?",
    "What does error code E-45 mean?",
    "员工每年有多少天年假？",
    "服务器多久备份一次？",
]


def direct_ttft_ms(base_url: str, body: dict) -> float:
    """A streamed request straight to the LLM server: ms to its first non-empty content delta."""
    request = urllib.request.Request(base_url + "/chat/completions", data=json.dumps({**body, "stream": True}).encode(),
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    first = None
    with urllib.request.urlopen(request, timeout=60) as response:
        for line in response:
            if first is None and line.startswith(b"data: {") and b'"content": ""' not in line and b'"content"' in line:
                first = (time.perf_counter() - started) * 1000
    return first


def ask_stream_ms(http: httpx.Client, question: str) -> tuple[float | None, float, bool]:
    """(ms to the first `token` event, ms to the end of the stream, whether a `replace` came)."""
    started = time.perf_counter()
    first, replaced = None, False
    with http.stream("POST", "/v1/ask", json={"question": question, "stream": True}) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if first is None and line == "event: token":
                first = (time.perf_counter() - started) * 1000
            replaced = replaced or line == "event: replace"
    return first, (time.perf_counter() - started) * 1000, replaced


def median(values: list[float]) -> float:
    return round(statistics.median(values), 1) if values else float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lake", required=True, help="an indexed lake (e.g. after `rag index --raw data/sample`)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds over the questions (at most 200)")
    parser.add_argument("--first-delay-ms", type=float, default=50, help="the fake LLM's delay before its first token")
    parser.add_argument("--token-delay-ms", type=float, default=20, help="the fake LLM's delay between tokens")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "serve_ttft.json"))
    args = parser.parse_args(argv)
    rounds = max(1, min(args.rounds, 200))
    from rag_pipeline.serve.auth import add_token
    from rag_pipeline_tests.serve.fake_llm import FakeLLM

    fake = FakeLLM("cite", delay_s=args.token_delay_ms / 1000, first_delay_s=args.first_delay_ms / 1000).start()
    rows = {"llm_ttft": [], "llm_ttft_server_side": [], "ask_ttft": [], "ask_stream_total": [], "ask_json": []}
    replaced = 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            tokens_file = Path(tmp) / "tokens.json"
            token = add_token(tokens_file, "bench", groups=("all-staff",), clearance="internal")
            env = {"RAG_LLM_BASE_URL": fake.base_url, "RAG_LLM_MODEL": "fake", "NO_PROXY": "127.0.0.1", "no_proxy": "127.0.0.1"}
            with running_server(args.lake, tokens_file, env=env) as (url, _, _):
                with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
                    prompts = {}
                    for q in QUESTIONS:  # warm each question once and keep the prompt the service sends
                        fake.requests.clear()
                        ask_stream_ms(http, q)
                        if fake.requests:
                            prompts[q] = fake.requests[-1]
                    questions = [q for q in QUESTIONS if q in prompts]  # refused ones never reach the model
                    for _ in range(rounds):
                        for q in questions:
                            rows["llm_ttft"].append(direct_ttft_ms(fake.base_url, prompts[q]))
                            rows["llm_ttft_server_side"].append(fake.first_token_s[-1] * 1000)
                            first, total, was_replaced = ask_stream_ms(http, q)
                            replaced += was_replaced
                            if first is not None:
                                rows["ask_ttft"].append(first)
                            rows["ask_stream_total"].append(total)
                            t0 = time.perf_counter()
                            http.post("/v1/ask", json={"question": q}).raise_for_status()
                            rows["ask_json"].append((time.perf_counter() - t0) * 1000)
    finally:
        fake.stop()
    medians = {k: median(v) for k, v in rows.items()}
    overhead = [a - d for a, d in zip(rows["ask_ttft"], rows["llm_ttft"])]
    result = {"rounds": rounds, "questions": questions, "samples": len(rows["ask_ttft"]), "replaced": replaced,
              "first_delay_ms": args.first_delay_ms, "token_delay_ms": args.token_delay_ms, "cores": os.cpu_count(),
              "load_average": os.getloadavg(), "median_ms": medians, "overhead_median_ms": median(overhead),
              "overhead_p90_ms": round(sorted(overhead)[int(0.9 * (len(overhead) - 1))], 1) if overhead else None}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"{len(questions)} questions x {rounds} rounds, fake LLM: first token after {args.first_delay_ms:g} ms, "
          f"then 11 tokens {args.token_delay_ms:g} ms apart; load average {result['load_average']}")
    print(f"{'measure':<52} {'median ms':>10}")
    labels = [("llm_ttft", "LLM server's own TTFT (direct streamed request)"),
              ("llm_ttft_server_side", "  same, inside the LLM server"),
              ("ask_ttft", "/v1/ask stream: first `token` event"),
              ("ask_stream_total", "/v1/ask stream: whole stream"),
              ("ask_json", "/v1/ask JSON (the first token's wait before)")]
    for key, label in labels:
        print(f"{label:<52} {medians[key]:>10}")
    print(f"{'overhead: ask TTFT - LLM TTFT (paired), median':<52} {result['overhead_median_ms']:>10}")
    print(f"{'overhead p90':<52} {result['overhead_p90_ms']:>10}")
    if replaced:
        print(f"warning: {replaced} streams ended with `replace`")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
