"""Run a BEIR benchmark through `RagIndex.search`, per retrieval mode, with latency.

The index is built once (or found in the cache) and every mode reads the same generation, so
the modes differ only in how they retrieve. Latency is the wall time of `search` as a user
calls it (query encoding included), after one untimed warm-up query per mode.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rag_pipeline.config import Settings
from rag_pipeline.eval.beir import BeirDataset
from rag_pipeline.eval.build import build_index
from rag_pipeline.eval.metrics import aggregate, doc_ranking, percentile_ms



def all_modes() -> tuple[str, ...]:
    """Every retrieval mode the product offers (`--mode all`), read from RagIndex itself.

    `rerank` (hybrid + cross-encoder) is included only when RAG_RERANK_MODEL configures one.
    """
    from rag_pipeline.query.api import MODES
    from rag_pipeline.query.rerank import RerankSettings

    return tuple(MODES) + (("rerank",) if RerankSettings.from_env().model else ())

MIN_DEPTH = 100  # chunks per query: enough for recall@100 in documents on one-chunk corpora


def open_benchmark_index(dataset: BeirDataset, cache_root: Path | None = None, progress: bool = True):
    from rag_pipeline.embedding.encoder import encoder_for
    from rag_pipeline.query import RagIndex

    settings = Settings()
    encoder = encoder_for(settings)
    lake_dir = build_index(dataset, encoder, settings, cache_root, progress)
    return RagIndex.open(lake_dir, settings)


def evaluate_mode(index, dataset: BeirDataset, mode: str, query_ids: list[str], depth: int, progress: bool = True) -> dict:
    from tqdm import tqdm

    search_mode, rerank = ("hybrid", True) if mode == "rerank" else (mode, False)
    if rerank and index.reranker is None:
        raise ValueError("--mode rerank needs a cross-encoder: set RAG_RERANK_MODEL to a CrossEncoder id or path")

    def search(query: str):
        hits = index.search(query, mode=search_mode, k=depth, rerank=rerank)
        if rerank and hits.rerank_status != "reranked":
            raise RuntimeError(f"rerank did not run: {hits.rerank_note}")  # a benchmark must not degrade silently
        return hits

    if query_ids:
        search(dataset.queries[query_ids[0]])  # warm-up: lazy loads, caches
    rankings: dict[str, list[str]] = {}
    latencies: list[float] = []
    for qid in tqdm(query_ids, desc=f"search {mode}", unit="q", disable=not progress, mininterval=2, file=sys.stderr):
        started = time.perf_counter()
        hits = search(dataset.queries[qid])
        latencies.append(time.perf_counter() - started)
        rankings[qid] = doc_ranking(h.doc_id for h in hits)
    metrics = aggregate({q: dataset.qrels[q] for q in query_ids}, rankings)
    return {
        "dataset": dataset.name,
        "split": dataset.split,
        "queries_file": dataset.queries_file,
        "mode": mode,
        "queries": len(query_ids),
        **{name: round(value, 4) for name, value in metrics.items()},
        "latency_ms_p50": round(percentile_ms(latencies, 50), 1),
        "latency_ms_p95": round(percentile_ms(latencies, 95), 1),
    }


def evaluate_beir(
    dataset: BeirDataset,
    modes: tuple[str, ...] = ("hybrid",),
    k: int = 10,
    limit_queries: int | None = None,
    cache_root: Path | None = None,
    progress: bool = True,
) -> list[dict]:
    """One result row per mode (keys as `rag eval --json` prints them)."""
    index = open_benchmark_index(dataset, cache_root, progress)
    query_ids = list(dataset.queries)[:limit_queries] if limit_queries else list(dataset.queries)
    depth = max(MIN_DEPTH, k)
    counts = index.manifest["counts"]
    results = []
    for mode in modes:
        row = evaluate_mode(index, dataset, mode, query_ids, depth, progress)
        row.update(depth=depth, documents=counts["documents"], chunks=counts["chunks"], lake=str(index.lake.lake_dir))
        results.append(row)
    return results
