"""Resident stage pages and VmRSS at each operation of a change's publish step (issue 16).

    .venv/bin/python bench/pipeline_scale.py --docs 100000 --shards 40 --keep    # prints its folder
    RAG_SHARDS=40 .venv/bin/python bench/publish_trace.py /tmp/pipeline_scale_100000_XXXX /tmp/pipeline_scale_model_XXXX/tiny-bert-h32 [--seed 305]

`bench/publish_pages.py` samples /proc every 0.3 s and can miss a spike that lasts a fraction of a
second; this one prints, before and after each operation of `lancedb_index` (the input signature,
the document rows, every `ShardedTable.take`, `Lake.stage_changes` and its index update), how many
MB of the lake's stage files are resident in the process and its VmRSS — the same each run. It
appends a paragraph to 1 % of the kept corpus's .txt/.md files (seeded, as publish_pages.py) and
runs `rag index` in this process (the parse workers re-import this module: hence the main guard).
Prints the trace lines, then the step's largest VmRSS and stage residency at the traced points.
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

TRACED = {
    "rag_pipeline.store.rows": ["input_signature", "chunk_digests", "documents_from_stage", "replaced_documents", "document_changes", "chunks_table"],
    "rag_pipeline.store.staging": ["parse_header_columns", "chunks_from_table", "vectors_from_table"],
    "rag_pipeline.store.lake": ["index_added_rows", "changed_frequencies"],
    "rag_pipeline.defs.assets": ["gather_shards", "_stage_generation"],
}
LINES: list[str] = []


def resident() -> str:
    """MB of stage files resident in this process, and its VmRSS."""
    stage, in_stage = 0, False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            if fields and "-" in fields[0] and not fields[0].endswith(":"):
                in_stage = len(fields) > 5 and "/staging/" in fields[5]
            elif in_stage and fields[:1] == ["Rss:"]:
                stage += int(fields[1])
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
    return f"stage {stage // 1024} MB, VmRSS {rss // 1024} MB"


def trace(owner, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    def traced(*args, **kwargs):
        LINES.append(f">> {label}: {resident()}")
        result = original(*args, **kwargs)
        LINES.append(f"<< {label}: {resident()}")
        return result

    setattr(owner, name, traced)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("work", type=Path, help="a folder `pipeline_scale.py --keep` left (raw/, lake/, dagster_home/)")
    ap.add_argument("model", help="the tiny model folder of that run")
    ap.add_argument("--seed", type=int, default=305)
    args = ap.parse_args()
    from publish_pages import change_one_percent

    os.environ.update(change_one_percent(args.work, args.model, args.seed, "publish_trace.py"))
    import importlib

    from rag_pipeline.defs import shards
    from rag_pipeline.store.lake import Lake

    for module, names in TRACED.items():
        for name in names:
            trace(importlib.import_module(module), name, name)
    trace(Lake, "stage_changes", "Lake.stage_changes")
    trace(shards.ShardedTable, "take", "ShardedTable.take")
    from rag_pipeline import cli

    code = cli.main(["index", "--raw", str(args.work / "raw"), "--lake", str(args.work / "lake"), "--json", "-q"])
    start = next(i for i, line in enumerate(LINES) if line.startswith(">> gather_shards"))
    end = max(i for i, line in enumerate(LINES) if line.startswith("<< _stage_generation"))
    print("\n".join(LINES[start:end + 1]))
    window = "\n".join(LINES[start:end + 1])
    largest_rss = max(int(v) for v in re.findall(r"VmRSS (\d+) MB", window))
    largest_stage = max(int(v) for v in re.findall(r"stage (\d+) MB", window))
    print(f"lancedb_index, traced points: largest VmRSS {largest_rss} MB, largest stage residency {largest_stage} MB; rag index exit {code}")


if __name__ == "__main__":
    main()
