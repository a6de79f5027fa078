"""`rag eval`: retrieval quality on a BEIR folder, or answer quality on the golden set.

    rag eval --dataset ../shared/bench/xquad-zh --mode all
    rag eval --dataset ../shared/bench/xquad-zh --queries ../shared/bench/xquad-zh/queries_en.jsonl
    rag eval --golden [FILE] [--lake DIR] [--json]
    rag calibrate [--golden FILE] [--lake DIR] [--dry-run] [--force] [--json]
"""

from __future__ import annotations

import json
from pathlib import Path

from rag_pipeline.config import default_lake_dir

MODE_CHOICES = ("hybrid", "hybrid-rrf", "vector", "keyword")  # RagIndex's modes (a test keeps them in step)
RERANK_MODE = "rerank"  # hybrid, then the cross-encoder in RAG_RERANK_MODEL
TABLE_COLUMNS = ("ndcg@10", "recall@10", "recall@100", "mrr@10", "latency_ms_p50", "latency_ms_p95")


def register(sub) -> None:
    """Add the eval subcommand to the `rag` argument parser."""
    from rag_pipeline.eval.golden import DEFAULT_GOLDEN

    p = sub.add_parser("eval", help="measure retrieval (BEIR folder) or answers (golden set)")
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--dataset", help="BEIR folder: corpus.jsonl, queries.jsonl, qrels/<split>.tsv")
    what.add_argument(
        "--golden", nargs="?", const=str(DEFAULT_GOLDEN), metavar="FILE",
        help=f"run the golden question set (default {DEFAULT_GOLDEN.relative_to(DEFAULT_GOLDEN.parents[2])}) on an existing index",
    )
    p.add_argument("--split", help="qrels split (default: test if present, else the first qrels file)")
    p.add_argument("--queries", help="queries file to use instead of the folder's queries.jsonl")
    p.add_argument(
        "--mode", choices=[*MODE_CHOICES, RERANK_MODE, "all"], default="hybrid",
        help="retrieval mode as in `rag search`, rerank (hybrid + RAG_RERANK_MODEL), or all of them "
        "on one index build (rerank included when configured; default hybrid)",
    )
    p.add_argument("-k", type=int, default=100, help="chunks retrieved per query (at least 100)")
    p.add_argument("--limit-queries", type=int, help="evaluate only the first N judged queries")
    p.add_argument("--cache-dir", help="index cache root (env RAG_EVAL_CACHE, default data/eval_cache)")
    p.add_argument("--lake", default=str(default_lake_dir()), help="lake for --golden (env RAG_LAKE_DIR, default data/lake)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_eval)

    c = sub.add_parser("calibrate", help="fit the refusal thresholds on the golden set and store them with the index")
    c.add_argument("--golden", default=str(DEFAULT_GOLDEN), metavar="FILE", help="golden question set (JSONL)")
    c.add_argument("--lake", default=str(default_lake_dir()), help="lake to calibrate (env RAG_LAKE_DIR, default data/lake)")
    c.add_argument(
        "--false-answer-cost", type=float, default=1.0,
        help="how many false refusals one false answer is worth (default 1; raise it to refuse more readily)",
    )
    c.add_argument("--dry-run", action="store_true", help="report, do not save")
    c.add_argument(
        "--force", action="store_true",
        help="save the refit even when its leave-one-out error is not below the current gate's",
    )
    c.add_argument("--json", action="store_true", help="machine-readable output")
    c.set_defaults(func=cmd_calibrate)


def cmd_eval(args) -> int:
    if args.golden:
        return _golden(args)
    from rag_pipeline.eval.beir import load_beir
    from rag_pipeline.eval.retrieval import all_modes, evaluate_beir

    if args.limit_queries is not None and args.limit_queries < 1:
        raise ValueError("--limit-queries must be at least 1")
    dataset = load_beir(args.dataset, args.split, args.queries)
    modes = all_modes() if args.mode == "all" else (args.mode,)
    results = evaluate_beir(
        dataset, modes, k=args.k, limit_queries=args.limit_queries,
        cache_root=Path(args.cache_dir) if args.cache_dir else None, progress=not args.json,
    )
    if args.json:
        print(json.dumps(results[0] if len(results) == 1 else results, indent=2, ensure_ascii=False))
    else:
        print(format_table(results))
    return 0


def format_table(results: list[dict]) -> str:
    """A markdown table: one row per (dataset, queries file, mode)."""
    header = ["dataset", "queries", "mode", "n", *TABLE_COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r in results:
        cells = [r["dataset"], r.get("queries_file", ""), r["mode"], r["queries"]]
        cells += [f"{r[c]:.1f}" if c.startswith("latency") else f"{r[c]:.3f}" for c in TABLE_COLUMNS]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)


def cmd_calibrate(args) -> int:
    from rag_pipeline.eval.calibrate import calibrate, format_calibration
    from rag_pipeline.eval.golden import load_golden
    from rag_pipeline.query import RagIndex

    index = RagIndex.open(args.lake)
    record = calibrate(index, load_golden(Path(args.golden)), Path(args.golden), args.false_answer_cost)
    keep = args.dry_run or not (record["replaces"]["better"] or args.force)
    saved = None if keep else str(index.lake.write_refusal_policy(record))
    print(json.dumps({**record, "saved_to": saved}, indent=2, ensure_ascii=False) if args.json else format_calibration(record, saved))
    return 0


def _golden(args) -> int:
    from rag_pipeline.eval.golden import format_report, load_golden, run_golden
    from rag_pipeline.query import RagIndex

    questions = load_golden(Path(args.golden))
    report = run_golden(RagIndex.open(args.lake), questions)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_report(report))
    return 0
