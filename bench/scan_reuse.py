"""The raw folder's scan with and without the last scan's hashes (issue 16: a no-op's scan).

`raw_documents` hashed every byte of the corpus on every run. Now a file whose stat (size, mtime,
ctime, inode) is unchanged since the lake's last scan keeps its hash (`ingest.scan.FileHashes`).
This times `scan_raw_folder` over `--raw` in one process, alternating: every file hashed (as
before, and as the first scan of a lake) and with the previous scan's hashes (as a no-op run),
`--repeat` rounds, medians. The hashes table's write and read (`Lake.write_scan_hashes`,
`read_scan_hashes`) are timed apart. Page cache: the first round warms it; later rounds read
file bytes from memory, so the saving shown is the hashing CPU, not disk reads.

    .venv/bin/python bench/scan_reuse.py --raw <folder, e.g. bench/pipeline_scale.py --keep's raw> [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_pipeline.ingest import scan  # noqa: E402
from rag_pipeline.store import staging  # noqa: E402
from rag_pipeline.store.lake import Lake  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--raw", type=Path, required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    times: dict[str, list[float]] = {"every file hashed": [], "hashes reused": [], "hashes table write": [], "hashes table read": []}
    with tempfile.TemporaryDirectory() as tmp:
        lake = Lake(Path(tmp))
        scan.scan_raw_folder(args.raw)  # warm the page cache and the directory entries
        for _ in range(args.repeat):
            started = time.perf_counter()
            hashes = scan.FileHashes()
            files = scan.scan_raw_folder(args.raw, hashes)
            times["every file hashed"].append(time.perf_counter() - started)
            started = time.perf_counter()
            lake.write_scan_hashes(staging.file_hashes_to_table(hashes))
            times["hashes table write"].append(time.perf_counter() - started)
            time.sleep(scan.RACY_WINDOW_NS / 1e9)  # files changed just before a scan are re-hashed
            started = time.perf_counter()
            previous = staging.file_hashes_from_table(lake.read_scan_hashes())
            times["hashes table read"].append(time.perf_counter() - started)
            started = time.perf_counter()
            again = scan.scan_raw_folder(args.raw, previous)
            times["hashes reused"].append(time.perf_counter() - started)
            assert [f.sha256 for f in again] == [f.sha256 for f in files] and previous.hashed == 0, previous.hashed
    size = sum(f.size for f in files) / 2**20
    print(f"{len(files):,} files, {size:,.1f} MB, {args.repeat} rounds (medians)\n")
    print("| scan | s (median) | runs |")
    print("|---|---:|---|")
    for name, values in times.items():
        print(f"| {name} | {statistics.median(values):.2f} | {' / '.join(f'{v:.2f}' for v in values)} |")
    whole = statistics.median(times["every file hashed"])
    reused = statistics.median(times["hashes reused"]) + statistics.median(times["hashes table read"]) + statistics.median(times["hashes table write"])
    print(f"\nno-op scan with its table read and written / every file hashed: {reused / whole:.2f}")


if __name__ == "__main__":
    main()
