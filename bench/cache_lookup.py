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
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    from rag_pipeline.store.lake import Lake

    keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(args.keys)]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="cache_lookup_") as folder:
        writer = Lake(Path(folder))
        for start in range(0, args.keys, 50_000):
            writer.add_to_cache("m", {k: rng.standard_normal(32).astype(np.float32) for k in keys[start:start + 50_000]})
        per = args.keys // args.shards
        times = []
        for _ in range(args.repeat):
            lake = Lake(Path(folder))
            started = time.perf_counter()
            found = sum(len(lake.cached_vectors("m", keys[i * per:(i + 1) * per])) for i in range(args.shards))
            times.append(time.perf_counter() - started)
            assert found == per * args.shards
    print(f"| code | cache rows | shards | look-ups of one step, median of {args.repeat} | runs |")
    print("|---|---:|---:|---:|---|")
    print(f"| {args.code} | {args.keys:,} | {args.shards} | {statistics.median(times):.2f} s | {', '.join(f'{t:.2f}' for t in times)} |")


if __name__ == "__main__":
    main()
