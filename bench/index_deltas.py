"""What indexing a night's changed rows costs: merged into each index vs a delta segment (issue 16).

    .venv/bin/python bench/index_deltas.py [--rows 540000] [--dim 384] [--nights 12] [--out F.md]

A generation built from the served one (store.lake.Lake.stage_changes) deletes the changed
documents' rows, appends their new ones and then indexes the new rows. This builds a chunks-like
table of `--rows` rows (540k ≈ the chunks of 100k benchmark documents) with the lake's indexes —
full-text (store.lake.fts_config()), the filter indexes (FILTER_INDEXES) and, past the ANN threshold,
IVF_SQ — then replays `--nights` nights of 1 % churn (1 % of the rows deleted, as many new rows
appended) from the same base version in two ways:

- `merged`: `optimize_indices()` with Lance's default (new rows merged into the existing index);
- `delta`: store.lake.index_added_rows (a new delta segment a night; past INDEX_SEGMENTS_MAX
  segments the deltas merged into one).

Per way: seconds to index each night (night 1 apart: Lance's default merge rewrites the whole
index there), filtered search p50/p95 of the full-text and vector arms after the last night (40
queries each, prefiltered as query.filters does), and self-recall: for 200 old and 200 added rows,
whether a search with the row's own vector returns it first (nprobes / refine_factor of the plan).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import IvfSq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rag_pipeline.store import lake as lake_module  # noqa: E402
from rag_pipeline.store.ann import EXACT, AnnPolicy, vector_index_plan  # noqa: E402

VOCAB = 60_000
TOKENS = 120  # search-text tokens a row (Zipf-distributed words)
WHERE = "status = 'published' AND security_level IN ('public','internal') AND array_has_any(access_groups, ['all-staff'])"


def rows(start: int, n: int, dim: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    words = np.minimum(rng.zipf(1.2, size=n * TOKENS), VOCAB) - 1
    text = [" ".join(f"w{w}" for w in words[i * TOKENS:(i + 1) * TOKENS]) for i in range(n)]
    vectors = rng.standard_normal((n, dim)).astype(np.float32)
    return pa.table({
        "chunk_id": [f"c{start + i}" for i in range(n)],
        "doc_id": [f"d{(start + i) // 5}" for i in range(n)],
        "search_text": text,
        "status": rng.choice(["published", "draft"], n, p=[0.9, 0.1]),
        "security_level": rng.choice(["public", "internal", "secret"], n),
        "department": rng.choice(["hr", "eng", "sales", "legal"], n),
        "access_groups": [["all-staff"] if i % 3 else ["all-staff", "eng"] for i in range(n)],
        "owner": [f"u{i % 50}" for i in range(n)],
        "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), dim),
    })


def build(root: Path, n: int, dim: int):
    table = lancedb.connect(root).create_table("chunks", data=pa.concat_tables(rows(s, min(50_000, n - s), dim, s) for s in range(0, n, 50_000)))
    table.create_index("search_text", config=lake_module.fts_config(), replace=True)
    for column, kind in lake_module.FILTER_INDEXES.items():
        table.create_index(column, config=lake_module.index_config(kind), replace=True)
    plan = vector_index_plan(n, AnnPolicy())
    if plan["kind"] != EXACT:
        table.create_index("vector", config=IvfSq(distance_type="cosine", num_partitions=plan["num_partitions"]), replace=True)
    return table, plan


def night(table, n: int, dim: int, k: int) -> pa.Table:
    """Delete the rows of n/500 documents (1 % of the rows) and append n/100 new rows."""
    documents = n // 5
    first = (k * 7919) % (documents - documents // 100)
    table.delete("doc_id IN (" + ",".join(f"'d{d}'" for d in range(first, first + n // 500)) + ")")
    added = rows(n * (k + 1), n // 100, dim, 1_000 + k)
    table.add(added)
    return added


def search_ms(fn, queries) -> tuple[float, float]:
    times = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * len(times))]


def replay(table, base: int, plan: dict, n: int, dim: int, nights: int, way: str) -> dict:
    table.checkout(base)
    table.restore()
    seconds, added = [], []
    for k in range(1, nights + 1):
        added.append(night(table, n, dim, k).slice(0, 200 // nights + 1))
        started = time.perf_counter()
        if way == "merged":
            table.to_lance().optimize.optimize_indices()
        else:
            lake_module.index_added_rows(table.to_lance(), lake_module.INDEX_SEGMENTS_MAX)
        seconds.append(time.perf_counter() - started)
    table.checkout_latest()
    segments = Counter(i["name"] for i in table.to_lance().list_indices())

    def vector_search(q):
        query = table.search(q).where(WHERE, prefilter=True).limit(20)
        if plan["kind"] != EXACT:
            query = query.nprobes(plan["nprobes"]).refine_factor(plan["refine_factor"])
        return query.to_arrow()

    rng = np.random.default_rng(9)
    words = [" ".join(f"w{w}" for w in np.minimum(rng.zipf(1.3, 4), VOCAB) - 1) for _ in range(40)]
    fts = lambda q: table.search(q, query_type="fts").where(WHERE, prefilter=True).limit(20).to_arrow()  # noqa: E731
    search_ms(fts, words[:5])  # warm both arms
    fts_p50, fts_p95 = search_ms(fts, words)
    vec_p50, vec_p95 = search_ms(vector_search, rng.standard_normal((40, dim)).astype(np.float32))

    def self_found(sample: pa.Table) -> float:
        ids, vectors = sample.column("chunk_id").to_pylist(), sample.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, dim)
        hits = 0
        for chunk_id, v in zip(ids, vectors):
            query = table.search(v).limit(1)
            if plan["kind"] != EXACT:
                query = query.nprobes(plan["nprobes"]).refine_factor(plan["refine_factor"])
            hits += query.to_arrow().column("chunk_id").to_pylist() == [chunk_id]
        return hits / len(ids)

    picked = np.random.default_rng(3).choice(n, 300, replace=False)  # of the base's rows; some were deleted
    old = table.to_lance().to_table(columns=["chunk_id", "vector"], filter="chunk_id IN (" + ",".join(f"'c{i}'" for i in picked) + ")").slice(0, 200)
    return {
        "night1_s": seconds[0], "later_s": statistics.median(seconds[1:]) if nights > 1 else float("nan"),
        "total_s": sum(seconds), "segments": max(segments.values()),
        "fts": (fts_p50, fts_p95), "vector": (vec_p50, vec_p95),
        "recall_old": self_found(old), "recall_added": self_found(pa.concat_tables(added)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=540_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--nights", type=int, default=12)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="index_deltas_"))
    try:
        started = time.perf_counter()
        table, plan = build(root, args.rows, args.dim)
        base = table.version
        print(f"{args.rows} rows, dim {args.dim}, vector index {plan['kind']}: built in {time.perf_counter() - started:.0f} s", flush=True)
        results = {way: replay(table, base, plan, args.rows, args.dim, args.nights, way) for way in ("merged", "delta")}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    m = results["merged"]
    lines = [
        f"{args.rows:,} rows, dim {args.dim}, {args.nights} nights of 1 % churn; INDEX_SEGMENTS_MAX = {lake_module.INDEX_SEGMENTS_MAX}",
        "",
        "| way | night 1 s | later nights s (median) | all nights s | ratio to merged | max segments after | full-text p50 / p95 ms | vector p50 / p95 ms | self-recall old / added |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for way, r in results.items():
        lines.append(
            f"| {way} | {r['night1_s']:.2f} | {r['later_s']:.2f} | {r['total_s']:.1f} | {r['total_s'] / m['total_s']:.2f} | {r['segments']} | "
            f"{r['fts'][0]:.1f} / {r['fts'][1]:.1f} | {r['vector'][0]:.1f} / {r['vector'][1]:.1f} | {r['recall_old']:.3f} / {r['recall_added']:.3f} |"
        )
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
