"""Disk after many nightly runs with 1 % churn (issue 16, item 5: within 1.5x of one build).

    .venv/bin/python bench/disk_growth.py [--docs 1000] [--nights 30] [--seed 16]

The generated corpus and the tiny random-weight model of ``bench/pipeline_scale.py`` (it measures
the pipeline's storage, not the model's): one first build, then ``--nights`` runs of the real
``rag index``, each after appending a paragraph to 1 % of the documents (a different 1 % each
night, seeded). The lake's size (``du -sb``) after every run, and at the end per top-level folder
of the lake (LanceDB tables: served and staged generations, the parse / chunk / embedding caches;
``staging/`` run outputs), against the first build. Housekeeping runs inside every ``index_job``
(``lake_housekeeping``: RAG_KEEP_GENERATIONS, old LanceDB versions, old staging runs). About
8 min at 1,000 documents and 30 nights on 2 cores. Temp files are removed at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pipeline_scale import build_tiny_model, change_one_percent, du_bytes, generate_corpus, run_index  # noqa: E402


def _mb(n: int) -> float:
    return round(n / 2**20, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--seed", type=int, default=16)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="disk_growth_"))
    try:
        raw, lake, home = work / "raw", work / "lake", work / "dagster_home"
        home.mkdir()
        model = build_tiny_model(work / "model", args.seed)
        paths = generate_corpus(raw, args.docs, args.seed)
        env = dict(os.environ, DAGSTER_HOME=str(home), RAG_GOLDEN_FILE="none", RAG_EMBEDDING_MODEL=str(model),
                   HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", RAG_PROGRESS="0")
        env.pop("RAG_RAW_DIR", None)
        env.pop("RAG_LAKE_DIR", None)
        sizes = []
        for night in range(args.nights + 1):
            changed = change_one_percent(paths, args.seed + night) if night else 0
            run = run_index(raw, lake, env)
            if run["rc"] != 0:
                raise SystemExit(f"night {night}: rag index failed\n{run['stderr_tail']}")
            sizes.append(du_bytes(lake))
            summary = run["summary"]
            print(f"night {night}: {changed} changed, {run['seconds']} s, lake {_mb(sizes[-1])} MB, "
                  f"generation {summary.get('generation')}", file=sys.stderr, flush=True)
        first = sizes[0]
        print(f"\n{args.docs} documents, {args.nights} nights with 1 % changed each\n")
        print("| after | lake MB | vs first build |\n|---|---:|---:|")
        for night in sorted({0, 1, 5, 10, 20, args.nights} & set(range(args.nights + 1))):
            print(f"| {'first build' if night == 0 else f'night {night}'} | {_mb(sizes[night])} | {sizes[night] / first:.2f}x |")
        print("\n| lake folder (after the last night) | MB |\n|---|---:|")
        for entry in sorted(lake.iterdir(), key=lambda p: -du_bytes(p)):
            print(f"| {entry.name} | {_mb(du_bytes(entry))} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
