"""Cache compaction after a 1 % change: Lance's default fragment target vs CACHE_FRAGMENT_ROWS.

    .venv/bin/python bench/cache_compaction.py [--docs 100000] [--nights 3]     # ~6 min at 100k

`lake_housekeeping` compacts the parse, chunk and embedding caches after every run. Lance merges
every fragment smaller than `target_rows_per_fragment` (default 1M rows) with its neighbours, so a
cache under a million rows is one fragment, rewritten whole whenever a run adds to it. This builds
caches shaped like a `--docs`-document corpus's (the parse cache: one ~5 KB JSON per document; the
embedding cache: 5.4 vectors of 384 floats per document), written as a first build writes them (one
append per shard of 2,500 documents) and compacted once; then each "night" deletes the entries of
1 % of the documents (batches of 500 keys, as `Lake._delete_keys`), adds as many new ones and
times the compaction — with the default target and with `store.lake.CACHE_FRAGMENT_ROWS`, in the
same process, on the same rows. Temp files are removed at the end.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import lancedb
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_pipeline.store.lake import CACHE_FRAGMENT_ROWS  # noqa: E402
from rag_pipeline.store.predicates import sql_in  # noqa: E402

SHARD_DOCS = 2_500
VECTORS_PER_DOC = 5.4
DIM = 384


def rows(kind: str, keys: list[str], rng: np.random.Generator) -> pa.Table:
    if kind == "parse cache":
        words = np.array("robot arm payload lidar safety manual leave travel policy 员工 手册 出差 报销 标准".split())
        text = [" ".join(rng.choice(words, 700)) for _ in keys]
        return pa.table({"cache_key": keys, "outcome": text})
    vectors = rng.random((len(keys), DIM), dtype=np.float32)
    return pa.table({"cache_key": keys, "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), DIM)})


def night_seconds(root: Path, kind: str, n_rows: int, per_doc: float, target: int | None, nights: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    table = None
    shard_rows = max(1, int(SHARD_DOCS * per_doc))
    db = lancedb.connect(root / f"{kind.replace(' ', '_')}_{target}")
    for start in range(0, n_rows, shard_rows):
        batch = rows(kind, [f"k{i}" for i in range(start, min(n_rows, start + shard_rows))], rng)
        table = db.create_table("cache", batch) if table is None else table
        if start:
            table.add(batch)
    options = {} if target is None else {"target_rows_per_fragment": target}
    table.to_lance().optimize.compact_files(**options)
    live, fresh, seconds, rewritten = list(range(n_rows)), n_rows, [], []
    churn = max(1, n_rows // 100)
    for _ in range(nights):
        gone = rng.choice(len(live), churn, replace=False)
        keys = [f"k{live[i]}" for i in gone]
        for start in range(0, len(keys), 500):
            table.delete(sql_in("cache_key", keys[start:start + 500]))
        dropped = set(gone.tolist())
        live = [k for i, k in enumerate(live) if i not in dropped] + list(range(fresh, fresh + churn))
        table.add(rows(kind, [f"k{i}" for i in range(fresh, fresh + churn)], rng))
        fresh += churn
        dataset = db.open_table("cache").to_lance()
        before = {f.fragment_id: f.count_rows() for f in dataset.get_fragments()}
        started = time.perf_counter()
        metrics = dataset.optimize.compact_files(**options)
        seconds.append(time.perf_counter() - started)
        after = {f.fragment_id for f in db.open_table("cache").to_lance().get_fragments()}
        rewritten.append(sum(n for fid, n in before.items() if fid not in after))
        del metrics
    return {
        "seconds": statistics.median(seconds),
        "rows_rewritten": int(statistics.median(rewritten)),
        "fragments": len(db.open_table("cache").to_lance().get_fragments()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=100_000)
    ap.add_argument("--nights", type=int, default=3)
    ap.add_argument("--seed", type=int, default=16)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="cache_compaction_"))
    try:
        print(f"{args.docs:,} documents, 1 % churn, median of {args.nights} nights\n")
        print("| cache | rows | target rows per fragment | compaction s | rows rewritten | fragments after |")
        print("|---|---:|---|---:|---:|---:|")
        for kind, per_doc in (("parse cache", 1.0), ("embedding cache", VECTORS_PER_DOC)):
            n_rows = int(args.docs * per_doc)
            for target in (None, CACHE_FRAGMENT_ROWS):
                r = night_seconds(root, kind, n_rows, per_doc, target, args.nights, args.seed)
                label = "Lance default (1,048,576)" if target is None else f"CACHE_FRAGMENT_ROWS ({target:,})"
                print(f"| {kind} | {n_rows:,} | {label} | {r['seconds']:.2f} | {r['rows_rewritten']:,} | {r['fragments']} |", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
