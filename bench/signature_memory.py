"""Memory of the publish step's input signature over a large stage table (issue 16).

    .venv/bin/python bench/signature_memory.py [--rows 100000] [--code <folder with rag_pipeline>]

`lancedb_index` hashes every staged input (rows.input_signature) before it decides whether
anything changed. This writes a parse-stage-like Arrow file (`--rows` documents of ~5 KB text,
~560 MB at 100k), memory-maps it as the IO manager does, and hashes it once in a fresh process
per measurement: seconds, the Arrow pool's peak (the copies hashing makes) and the process's
peak RSS (VmHWM: the mapped pages it touched included; ru_maxrss would carry the parent's peak
across exec). `--code` points at another checkout's
`rag_pipeline` (e.g. `git archive <commit> rag_pipeline | tar -x -C /tmp/old`) to compare.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MEASURE = """
import re, sys, time
sys.path.insert(0, sys.argv[2])
import pyarrow as pa
from rag_pipeline.store import rows
with pa.memory_map(sys.argv[1]) as source:
    table = pa.ipc.open_file(source).read_all()
started = time.perf_counter()
rows.input_signature([table], "model", 384)
print(round(time.perf_counter() - started, 2), round(pa.default_memory_pool().max_memory() / 2**20),
      round(int(re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) / 1024))
"""


def write_table(path: Path, n: int) -> None:
    import pyarrow as pa

    rnd = random.Random(16)
    words = ["".join(rnd.choice("abcdefghij") for _ in range(6)) for _ in range(5000)]
    table = pa.table({"doc_id": [f"d{i}" for i in range(n)], "outcome": [" ".join(rnd.choices(words, k=800)) for _ in range(n)]})
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--code", type=Path, action="append", help="a folder holding rag_pipeline (repeatable); default this checkout")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "parsed.arrow"
        write_table(path, args.rows)
        print(f"{args.rows:,} rows, {path.stat().st_size / 2**20:.0f} MB on disk; medians of {args.repeat} fresh processes\n")
        print("| code | seconds | Arrow pool peak MB | peak RSS MB |\n|---|---:|---:|---:|")
        for code in args.code or [ROOT]:
            runs = [subprocess.run([sys.executable, "-c", MEASURE, str(path), str(code)], capture_output=True, text=True, check=True).stdout.split()
                    for _ in range(args.repeat)]
            median = [sorted(float(r[i]) for r in runs)[len(runs) // 2] for i in range(3)]
            print(f"| {code} | {median[0]:.2f} | {median[1]:.0f} | {median[2]:.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
