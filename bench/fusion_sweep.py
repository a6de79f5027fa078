"""Which fusion rule? Score candidate rules on the same per-arm rankings, all sets at once.

    .venv/bin/python bench/fusion_sweep.py            # ~3 min with the eval cache, 2 cores

Retrieves each arm once per query (100 chunks, as `rag eval`) from the cached eval lakes
(`rag eval --dataset DIR` builds them), then fuses offline with every rule below and prints
nDCG@10 per set. No embedding of documents happens here; queries are encoded once. This is how
the default `hybrid` rule was chosen (bench/README.md, "Fusion").
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.eval.beir import load_beir  # noqa: E402
from rag_pipeline.eval.metrics import aggregate, doc_ranking  # noqa: E402
from rag_pipeline.eval.retrieval import open_benchmark_index  # noqa: E402
from rag_pipeline.ingest.language import detect_language  # noqa: E402
from rag_pipeline.query.filters import search_filter  # noqa: E402
from rag_pipeline.query.fusion import coverage_weight, rrf, same_language  # noqa: E402
from rag_pipeline.text import is_code_term  # noqa: E402
from rag_pipeline.query.retrieve import dense_arm, keyword_arm, lexical_coverage  # noqa: E402
from rag_pipeline.store import schema as s  # noqa: E402

BENCH = REPO.parent / "shared" / "bench"
SETS = [
    ("xquad zh→zh", BENCH / "xquad-zh", None),
    ("xquad en→zh", BENCH / "xquad-zh", BENCH / "xquad-zh" / "queries_en.jsonl"),
    ("scifact-train", BENCH / "scifact-train", None),
]
DEPTH = 100


def collect(index, dataset) -> list[dict]:
    """Per query: both arms' (chunk_id, score) lists plus what the rules need about each chunk."""
    predicate = search_filter(None, None)
    n_docs = index.manifest["counts"]["chunks"]
    out = []
    for qid, query in dataset.queries.items():
        doc_freq = index._doc_freq(query)
        vec = index.encoder.encode_query(query)
        dense = dense_arm(index.chunks, vec, predicate, DEPTH)
        keyword = keyword_arm(index.chunks, query, predicate, DEPTH)
        rows = {r["chunk_id"]: r for r in dense + keyword}
        out.append({
            "qid": qid,
            "lang": detect_language(query),
            "dense": [(r["chunk_id"], r["score"]) for r in dense],
            "keyword": [(r["chunk_id"], r["score"]) for r in keyword],
            "doc": {cid: r["doc_id"] for cid, r in rows.items()},
            "chunk_lang": {cid: r["language"] for cid, r in rows.items()},
            "coverage": {
                r["chunk_id"]: lexical_coverage(query, r[s.SEARCH_TEXT_COLUMN], doc_freq, n_docs) for r in keyword
            },
            "code_coverage": {
                r["chunk_id"]: lexical_coverage(query, r[s.SEARCH_TEXT_COLUMN], doc_freq, n_docs, only=is_code_term)
                for r in keyword
            },
        })
    return out


def rules():
    yield "plain RRF", lambda q, cid: 1.0
    for t in (0.3, 0.5, 0.7, 1.0):
        yield f"coverage/{t}", lambda q, cid, t=t: coverage_weight(q["coverage"][cid], t)
    for lam in (0.25, 0.5):
        yield f"coverage/0.5 × lang {lam}", lambda q, cid, lam=lam: coverage_weight(q["coverage"][cid], 0.5) * (
            1.0 if same_language(q["lang"], q["chunk_lang"][cid]) else lam
        )
    for t in (0.5, 1.0):
        yield f"coverage/{t} × lang 0", lambda q, cid, t=t: coverage_weight(q["coverage"][cid], t) * (
            1.0 if same_language(q["lang"], q["chunk_lang"][cid]) else 0.0
        )
        yield f"coverage/{t}, cross-language: codes only", lambda q, cid, t=t: coverage_weight(
            q["coverage"][cid] if same_language(q["lang"], q["chunk_lang"][cid]) else q["code_coverage"][cid], t
        )
    for w in (0.5, 0.7):
        yield f"keyword × {w}", lambda q, cid, w=w: w


def score(queries, qrels, weight=None, arm=None) -> float:
    rankings = {}
    for q in queries:
        if arm:
            ranked = [cid for cid, _ in q[arm]]
        else:
            hit_weights = {"keyword": {cid: weight(q, cid) for cid, _ in q["keyword"]}}
            ranked = [h.chunk_id for h in rrf({"dense": q["dense"], "keyword": q["keyword"]}, hit_weights=hit_weights)]
        rankings[q["qid"]] = doc_ranking(q["doc"][cid] for cid in ranked)
    return aggregate(qrels, rankings)["ndcg@10"]


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run only the sets whose name contains this (e.g. xquad)")
    args = parser.parse_args()
    sets = [t for t in SETS if not args.only or args.only in t[0]]
    table: dict[str, dict[str, float]] = {}
    for name, folder, queries_file in sets:
        dataset = load_beir(folder, queries_file=queries_file)
        index = open_benchmark_index(dataset, progress=False)
        queries = collect(index, dataset)
        qrels = {q: dataset.qrels[q] for q in dataset.queries}
        table.setdefault("vector", {})[name] = score(queries, qrels, arm="dense")
        table.setdefault("keyword", {})[name] = score(queries, qrels, arm="keyword")
        for rule, weight in rules():
            table.setdefault(rule, {})[name] = score(queries, qrels, weight)
        print(f"{name}: {len(queries)} queries", file=sys.stderr)
    names = [n for n, _, _ in sets]
    print("| rule | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for rule, row in table.items():
        print(f"| {rule} | " + " | ".join(f"{row[n]:.3f}" for n in names) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
