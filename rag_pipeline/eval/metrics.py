"""Ranking metrics over documents, computed by ir-measures (trec_eval underneath).

The index ranks chunks but benchmarks judge documents, so a ranking of chunk hits becomes a
ranking of documents first: a document sits at the rank of its best chunk, later chunks of the
same document are dropped. Scores handed to trec_eval are strictly decreasing (1/rank), so its
tie-breaking (by document id) can never reorder what the index returned.

Queries with judgments but no results count as 0 in every average (trec_eval alone would
silently skip them and flatter the run).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

METRICS = ("ndcg@10", "recall@10", "recall@100", "mrr@10")


def doc_ranking(doc_ids: Iterable[str]) -> list[str]:
    """Documents in order of their first (best-ranked) chunk."""
    seen: dict[str, None] = {}
    for doc_id in doc_ids:
        seen.setdefault(doc_id, None)
    return list(seen)


def to_run(rankings: Mapping[str, list[str]]) -> dict[str, dict[str, float]]:
    """Per query, documents best first -> {doc: score} with score 1/rank."""
    return {q: {d: 1.0 / rank for rank, d in enumerate(docs, start=1)} for q, docs in rankings.items()}


def _measures():
    from ir_measures import RR, R, nDCG

    return {"ndcg@10": nDCG @ 10, "recall@10": R @ 10, "recall@100": R @ 100, "mrr@10": RR @ 10}


def per_query(qrels: Mapping[str, Mapping[str, int]], rankings: Mapping[str, list[str]]) -> dict[str, dict[str, float]]:
    """{query id: {metric: value}} for every judged query (0 where nothing relevant was ranked)."""
    import ir_measures

    measures = _measures()
    names = {str(m): name for name, m in measures.items()}
    out = {q: {name: 0.0 for name in measures} for q in qrels}
    run = {q: docs for q, docs in to_run(rankings).items() if q in qrels and docs}
    judged = {q: {d: int(r) for d, r in rels.items()} for q, rels in qrels.items()}
    for m in ir_measures.iter_calc(list(measures.values()), judged, run):
        if m.query_id in out:
            out[m.query_id][names[str(m.measure)]] = float(m.value)
    return out


def aggregate(qrels: Mapping[str, Mapping[str, int]], rankings: Mapping[str, list[str]]) -> dict[str, float]:
    """Mean of each metric over all judged queries."""
    scores = per_query(qrels, rankings)
    if not scores:
        return {name: 0.0 for name in METRICS}
    return {name: float(np.mean([s[name] for s in scores.values()])) for name in METRICS}


def percentile_ms(seconds: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(seconds) * 1000.0, q)) if seconds else 0.0
