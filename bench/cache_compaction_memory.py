"""What compacting a first build's caches costs: re-encoding vs copying pages (issue 16).

    .venv/bin/python bench/pipeline_scale.py --docs 10000 --shards 40 --runs first --keep   # prints its folder
    .venv/bin/python bench/cache_compaction_memory.py /tmp/pipeline_scale_10000_XXXX/lake [--copies 10] [--fragments 40] [--repeats 3]

Each cache table of the kept lake (parse, chunk, embedding cache) is copied `--copies` times over
(10 × a 10k lake ≈ the caches of 100k documents) into `--fragments` appended fragments, as a
first build's shard writes leave them; then each mode compacts a fresh copy in a fresh process
with the housekeeping step's target (store.lake.CACHE_FRAGMENT_ROWS), sampling VmRSS every 20 ms:
`reencode` (Lance's default: decode and re-encode every row) against `try_binary_copy`
(store.lake.CACHE_COMPACTION_MODE: pages copied as they are). A third row deletes a tenth of the
rows first: fragments with deleted rows are re-encoded in either mode. Prints medians of
`--repeats` runs and the ratio to `reencode` in the same run; checks every copy reads back equal.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMPACT = """
import json, sys, threading, time
import lance
from rag_pipeline.store.lake import CACHE_FRAGMENT_ROWS
path, mode = sys.argv[1], sys.argv[2]
def rss():
    return next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmRSS:")) / 1024
peak = [0.0]
def sample():
    while True:
        peak[0] = max(peak[0], rss()); time.sleep(0.02)
dataset = lance.dataset(path)
threading.Thread(target=sample, daemon=True).start()
time.sleep(0.2); base = rss()
started = time.perf_counter()
dataset.optimize.compact_files(target_rows_per_fragment=CACHE_FRAGMENT_ROWS, compaction_mode=mode)
seconds = time.perf_counter() - started
time.sleep(0.1)
print(json.dumps({"delta_mb": peak[0] - base, "seconds": seconds, "fragments": len(lance.dataset(path).get_fragments())}))
"""


def prepare(source: Path, target: Path, copies: int, fragments: int, delete_share: float) -> tuple[int, int]:
    import lance
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.concat_tables([lance.dataset(source).to_table()] * copies)
    step = -(-table.num_rows // fragments)
    for i, start in enumerate(range(0, table.num_rows, step)):
        lance.write_dataset(table.slice(start, step), target, mode="create" if i == 0 else "append")
    if delete_share:
        dataset = lance.dataset(target)
        keys = pc.unique(table.column("cache_key")).to_pylist()
        doomed = keys[:: round(1 / delete_share)]
        for i in range(0, len(doomed), 500):
            dataset.delete("cache_key IN (" + ",".join("'" + k.replace("'", "''") + "'" for k in doomed[i:i + 500]) + ")")
    return table.num_rows, sum(f.stat().st_size for f in target.rglob("*") if f.is_file())


def compact(path: Path, mode: str) -> dict:
    run = subprocess.run([sys.executable, "-c", COMPACT, str(path), mode], capture_output=True, text=True, cwd=str(ROOT))
    if run.returncode:
        sys.exit(f"compaction failed: {run.stderr[-1500:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    import lance

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("lake", type=Path, help="a kept lake (pipeline_scale.py --keep)")
    ap.add_argument("--copies", type=int, default=10)
    ap.add_argument("--fragments", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    names = sorted(p.name for p in args.lake.glob("*.lance") if p.name.startswith(("parse_cache", "chunk_cache", "embedding_cache_")))
    print(f"{args.lake}: each cache × {args.copies} in {args.fragments} fragments; medians of {args.repeats} runs\n")
    print("| cache | rows | MB | deleted first | mode | peak RSS growth MB | × reencode | s | × reencode | fragments after |")
    print("|---|---:|---:|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="cache_compaction_") as tmp:
        for name in names:
            for delete_share in (0.0, 0.1):
                pristine = Path(tmp) / f"pristine_{name}"
                rows, size = prepare(args.lake / name, pristine, args.copies, args.fragments, delete_share)
                expected = lance.dataset(pristine).to_table().sort_by("cache_key")
                base = None
                for mode in ("reencode", "try_binary_copy"):
                    runs = []
                    for _ in range(args.repeats):
                        work = Path(tmp) / "work.lance"
                        shutil.rmtree(work, ignore_errors=True)
                        shutil.copytree(pristine, work)
                        runs.append(compact(work, mode))
                        assert lance.dataset(work).to_table().sort_by("cache_key").equals(expected), f"{name} {mode}: rows differ"
                    mb = statistics.median(r["delta_mb"] for r in runs)
                    s = statistics.median(r["seconds"] for r in runs)
                    base = base or (mb, s)
                    print(f"| {name.removesuffix('.lance')[:24]} | {rows:,} | {size / 2**20:,.0f} | {delete_share:.0%} | {mode} | "
                          f"{mb:,.0f} | {mb / base[0]:.2f} | {s:.1f} | {s / base[1]:.2f} | {runs[-1]['fragments']} |", flush=True)
                shutil.rmtree(pristine)


if __name__ == "__main__":
    main()
