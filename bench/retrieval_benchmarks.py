"""Reproduce the retrieval benchmark table (every mode × XQuAD zh→zh, XQuAD en→zh, SciFact-train).

Run from the repository root:

    .venv/bin/python bench/retrieval_benchmarks.py [--shared ../shared] [--golden-lake DIR]
                                                   [--limit-queries N] [--out bench/results/retrieval.md]

It calls the same code as ``rag eval --dataset DIR --mode all``: each corpus is chunked and
embedded through the pipeline, published as a lake under ``data/eval_cache/`` (env
RAG_EVAL_CACHE) and queried through ``RagIndex.search``. With ``--golden-lake`` it also runs the
golden question set (``rag eval --golden``) on that lake, e.g. one made with
``rag index --raw data/sample --lake /tmp/eval_sample_lake``.

How long: the first run embeds SciFact's 5,183 abstracts (~7,000 chunks), about 15-20 minutes
on 2 idle cores (much longer on a busy machine), plus ~30 s for XQuAD. With the cache warm the
whole table takes the query time only: ~5,600 searches, about 5-8 minutes on 2 idle cores.
The table is printed as markdown and written to ``--out`` (``bench/results/`` is gitignored;
copy the table into bench/README.md when it changes).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.config import Settings  # noqa: E402
from rag_pipeline.eval.beir import load_beir  # noqa: E402
from rag_pipeline.eval.cli import format_table  # noqa: E402
from rag_pipeline.eval.retrieval import all_modes, evaluate_beir  # noqa: E402

# (dataset folder, queries file or None for queries.jsonl)
RUNS = [
    ("xquad-zh", None),
    ("xquad-zh", "queries_en.jsonl"),
    ("scifact-train", None),
]

# Measured earlier on this machine with the same model (shared/DESIGN.md §5): BM25, dense e5 and
# plain RRF, i.e. our keyword, vector and hybrid-rrf modes. Query-aware `hybrid` has no reference.
REFERENCE_NDCG = {
    ("scifact-train", "queries.jsonl"): {"keyword": 0.696, "vector": 0.658, "hybrid-rrf": 0.721},
    ("xquad-zh", "queries.jsonl"): {"keyword": 0.967, "vector": 0.942, "hybrid-rrf": 0.973},
    ("xquad-zh", "queries_en.jsonl"): {"keyword": 0.27, "vector": 0.854, "hybrid-rrf": 0.596},
}


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{os.cpu_count()} cores (nproc), {cpu}, {platform.system()} {platform.release()}, load average at start {load:.2f}"


def git_rev() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    except OSError:
        return "?"


def with_reference(results: list[dict]) -> str:
    lines = ["| dataset | queries | mode | nDCG@10 | reference | Δ |", "|---|---|---|---|---|---|"]
    for r in results:
        ref = REFERENCE_NDCG.get((r["dataset"], r["queries_file"]), {}).get(r["mode"])
        delta = f"{r['ndcg@10'] - ref:+.3f}" if ref is not None else ""
        lines.append(f"| {r['dataset']} | {r['queries_file']} | {r['mode']} | {r['ndcg@10']:.3f} | {ref if ref is not None else ''} | {delta} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(REPO.parent / "shared"), help="folder holding bench/ (default ../shared)")
    parser.add_argument("--golden-lake", help="also run the golden set on this lake")
    parser.add_argument("--limit-queries", type=int, help="first N queries per dataset (quick look)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results" / "retrieval.md"))
    args = parser.parse_args()

    bench = Path(args.shared) / "bench"
    started = time.perf_counter()
    results: list[dict] = []
    for folder, queries in RUNS:
        path = bench / folder
        if not path.is_dir():
            print(f"skipping {folder}: {path} not found", file=sys.stderr)
            continue
        dataset = load_beir(path, queries_file=path / queries if queries else None)
        t0 = time.perf_counter()
        rows = evaluate_beir(dataset, all_modes(), limit_queries=args.limit_queries)
        print(f"{folder} {dataset.queries_file}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        results.extend(rows)

    parts = [
        f"# Retrieval benchmarks ({date.today().isoformat()})",
        "",
        f"Machine: {machine()}. Commit {git_rev()}. Embedding model: {Settings().embedding_model}.",
        "Indexes: " + "; ".join(sorted({f"{r['dataset']} {r['documents']} docs -> {r['chunks']} chunks" for r in results})) + ".",
        "Command: `.venv/bin/python bench/retrieval_benchmarks.py`"
        + (f" --limit-queries {args.limit_queries}" if args.limit_queries else "")
        + f"; total {time.perf_counter() - started:.0f} s.",
        "",
        format_table(results),
        "",
        "nDCG@10 against the reference figures measured earlier with the same model:",
        "",
        with_reference(results),
    ]
    if args.golden_lake:
        from rag_pipeline.eval.golden import format_report, load_golden, run_golden
        from rag_pipeline.query import RagIndex

        report = run_golden(RagIndex.open(args.golden_lake), load_golden())
        parts += ["", "## Golden set", "", "```", format_report(report), "```"]
    text = "\n".join(parts) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"written to {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
