"""Warm `ask` latency on an index: p50 / p95 / max over the golden questions, as a table.

    .venv/bin/python bench/ask_latency.py --lake /path/to/lake [--golden data/golden/sample_golden.jsonl]
        [--search] [--term-counting vocabulary|batched|per-term] [--no-token-recall | --cold-passages]
        [--token-state-threads N] [--numpy-layers] [--no-token-set-cache]

`--search` also times `search` (hybrid, k=10) on each question, just before its `ask`.
`--numpy-layers`: the question's vector through the numpy layers (before session 46), not the
exported fp32 ONNX graph (query_encoder.QueryEncoder).
`--no-token-set-cache`: every sentence and chunk tokenized each time it is read (answer.token_set
uncached, before session 46).
`--term-counting` picks how permitted document frequencies are counted (api.TERM_COUNTING;
the counts, hence the results, are the same): per-term is the full-text count before issue 18.

The index is opened once and warmed by one untimed question (model load, table open, first
per-principal statistics); each question is then asked `--repeat` times and every call is
timed (wall clock, and process CPU time, which a shared machine's load disturbs less). Answered and refused questions are reported apart: a refusal stops before sentence
selection, so mixing them hides what answering costs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("LANCEDB_LOG", "error")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def main(argv: list[str] | None = None) -> int:
    from rag_pipeline.eval.golden import DEFAULT_GOLDEN, load_golden
    from rag_pipeline.query import RagIndex

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lake", required=True)
    p.add_argument("--golden", default=str(DEFAULT_GOLDEN))
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument("--repeat", type=int, default=1, help="timed calls per question")
    p.add_argument("--search", action="store_true", help="time search (hybrid, k=10) too")
    p.add_argument("--term-counting", default=None, help="api.TERM_COUNTING (default: the index's)")
    p.add_argument("--no-token-recall", action="store_true", help="without the gate's token recall (its cost; the gate reads its fitted mean)")
    p.add_argument("--cold-passages", action="store_true", help="forget the passages' token states before each call (as if no chunk repeated)")
    p.add_argument("--token-state-threads", type=int, default=None,
                   help="threads of one token-state run (token_states.TOKEN_STATE_THREADS; 1 = before session 45)")
    p.add_argument("--no-token-set-cache", action="store_true", help="tokenize every candidate sentence each time it is read")
    p.add_argument("--numpy-layers", action="store_true", help="the question's vector through numpy's layers, not onnxruntime's")
    args = p.parse_args(argv)
    if args.token_state_threads:
        from rag_pipeline.embedding import token_states

        token_states.TOKEN_STATE_THREADS = args.token_state_threads

    questions = [q["question"] for q in load_golden(Path(args.golden))][: args.limit]
    if len(questions) < 5:
        raise SystemExit("need at least 5 questions for a median")
    index = RagIndex.open(args.lake)
    if args.term_counting:
        index.term_counting = args.term_counting
    index.token_recall = not args.no_token_recall
    if args.no_token_set_cache:
        from rag_pipeline.query import answer

        answer.token_set = answer.token_set.__wrapped__
    if args.numpy_layers and index.encoder.query_encoder is not None:
        index.encoder.query_encoder._layers = None
    index.ask("warm-up: how does this index answer?")
    timings: dict[str, list[float]] = {"answered": [], "refused": []}
    cpu: dict[str, list[float]] = {"answered": [], "refused": []}
    for question in questions:
        for _ in range(args.repeat):
            if args.search:
                started, cpu_started = time.perf_counter(), time.process_time()
                index.search(question, mode="hybrid", k=10)
                timings.setdefault("search", []).append((time.perf_counter() - started) * 1000)
                cpu.setdefault("search", []).append((time.process_time() - cpu_started) * 1000)
            if args.cold_passages and index.encoder.token_states is not None:
                index.encoder.token_states.forget()
            started, cpu_started = time.perf_counter(), time.process_time()
            answer = index.ask(question)
            kind = "refused" if answer.refused else "answered"
            timings[kind].append((time.perf_counter() - started) * 1000)
            cpu[kind].append((time.process_time() - cpu_started) * 1000)
    timings["all"] = timings["answered"] + timings["refused"]
    cpu["all"] = cpu["answered"] + cpu["refused"]
    timings["search"], cpu["search"] = timings.pop("search", []), cpu.pop("search", [])
    print(f"warm ask latency, {len(questions)} questions x {args.repeat} on {args.lake}, term counting {index.term_counting}, token recall {'off' if not index.token_recall else 'on, cold passages' if args.cold_passages else 'on'}"
          f"{f', token states on {args.token_state_threads} thread(s)' if args.token_state_threads else ''}"
          f"{', token sets uncached' if args.no_token_set_cache else ''}"
          f", question vector layers in {'numpy' if getattr(index.encoder.query_encoder, '_layers', None) is None else 'onnxruntime'}")
    print("| calls | n | p50 ms | p95 ms | mean ms | max ms | CPU p50 ms |")
    print("|---|---|---|---|---|---|---|")
    for name, values in timings.items():
        if values:
            print(
                f"| {name} | {len(values)} | {percentile(values, 0.5):.0f} | {percentile(values, 0.95):.0f} "
                f"| {statistics.fmean(values):.0f} | {max(values):.0f} | {percentile(cpu[name], 0.5):.0f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
