"""A step's cache look-ups, shard by shard, on a cache table the size of a 100k-document corpus's.

Each shard of a step looks its keys up in the cache (`Lake.cached_vectors`, `cached_parses`,
`cached_chunks`): a read of the table's key column, a membership test, a take of the rows found.
This times the look-ups of one step — `--shards` look-ups of `--keys / --shards` keys each — on
an embedding cache table of `--keys` rows (32-d vectors: the take is not what is measured), with
the code under `--code` (a checkout or `git archive` of another commit, for a before/after in the
same run). Medians of `--repeat` runs, each on a fresh `Lake` as a step has.

    .venv/bin/python bench/cache_lookup.py --keys 540000 --shards 40
    mkdir -p /tmp/before && git archive <commit> rag_pipeline | tar -x -C /tmp/before
    .venv/bin/python bench/cache_lookup.py --keys 540000 --shards 40 --code /tmp/before

`--pruned 0.01` compacts the table as the first build's housekeeping does, then deletes that
share of the rows (every 100th key) and compacts again as the next run's housekeeping does
(`compact_files` leaves a full-size fragment's deletion file in place below Lance's 10 %
threshold): the state a cache is in after any run that replaced documents. Look-ups then ask for live keys.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=540_000, help="rows of the cache table (540k: a 100k-document corpus's vectors)")
    parser.add_argument("--shards", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--code", type=Path, default=REPO, help="folder holding the rag_pipeline package to time")
    parser.add_argument("--pruned", type=float, default=0.0, help="share of rows deleted (as housekeeping prunes) before timing")
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    from rag_pipeline.store.lake import CACHE_FRAGMENT_ROWS, Lake
    from rag_pipeline.store.schema import embedding_cache_table

    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(args.keys)]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="cache_lookup_") as folder:
        writer = Lake(Path(folder))
        for start in range(0, args.keys, 50_000):
            writer.add_to_cache("m", {k: rng.standard_normal(32).astype(np.float32) for k in keys[start:start + 50_000]})
        if args.pruned:
            step = round(1 / args.pruned)
            table = writer.db.open_table(embedding_cache_table("m"))
            table.to_lance().optimize.compact_files(target_rows_per_fragment=CACHE_FRAGMENT_ROWS)  # the first build's housekeeping
            gone = keys[::step]
            for start in range(0, len(gone), 500):
                table.delete("cache_key IN (" + ", ".join(f"'{k}'" for k in gone[start:start + 500]) + ")")
            table.to_lance().optimize.compact_files(target_rows_per_fragment=CACHE_FRAGMENT_ROWS)
            keys = [k for i, k in enumerate(keys) if i % step]
        per = len(keys) // args.shards
        times = []
        for _ in range(args.repeat):
            lake = Lake(Path(folder))
            started = time.perf_counter()
            found = sum(len(lake.cached_vectors("m", keys[i * per:(i + 1) * per])) for i in range(args.shards))
            times.append(time.perf_counter() - started)
            assert found == per * args.shards
    print(f"| code | cache rows | pruned | shards | look-ups of one step, median of {args.repeat} | runs |")
    print("|---|---:|---:|---:|---:|---|")
    print(f"| {args.code} | {args.keys:,} | {args.pruned:.0%} | {args.shards} | {statistics.median(times):.2f} s | {', '.join(f'{t:.2f}' for t in times)} |")


if __name__ == "__main__":
    main()
