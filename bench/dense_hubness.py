"""Hubness reduction for the dense arm, measured alone: does ranking by cosine − a·hubness find the
gold passage sooner than cosine? (Tried for issue 14, session 45; not shipped: bench/README.md.)

A hub is a passage close to everything (reference lists, an all-languages page): e5 ranks it
first for questions it does not answer, most of all across languages. A passage's hubness is
its mean cosine to its k nearest other passages of the lake (mutual-proximity / CSLS-style
local scaling). (k, a) is chosen on the `--golden` sets' fit halves (summed MRR@10), reported on
their report halves and on the `--holdout` sets whole (never chosen on).

    .venv/bin/python bench/dense_hubness.py --golden data/golden/sample_golden.jsonl=<sample lake> \\
        --holdout data/golden/corpus_golden.jsonl=<corpus lake>
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NEIGHBOURS = (5, 20, 50)
STRENGTHS = (0.0, 0.25, 0.5, 0.75, 1.0)


def gold_ranks(golden: Path, lake: Path, index_cls, load_golden) -> tuple[list[tuple[dict, np.ndarray, np.ndarray]], dict]:
    """Per answerable question (question, cosine to every chunk, gold mask); hubness per k."""
    index = index_cls.open(lake)
    table = index.chunks.to_lance().to_table(columns=["source", "vector"])
    vectors = table.column("vector").combine_chunks().flatten().to_numpy(zero_copy_only=False)
    vectors = np.asarray(vectors, dtype=np.float32).reshape(table.num_rows, -1)
    sources = np.asarray(table.column("source").to_pylist())
    similarity = vectors @ vectors.T
    np.fill_diagonal(similarity, -1.0)
    ordered = np.sort(similarity, axis=1)
    hubness = {k: ordered[:, -k:].mean(axis=1) for k in NEIGHBOURS}
    rows = [
        (q, vectors @ index.encoder.encode_query(q["question"]), np.isin(sources, q["expected_sources"]))
        for q in load_golden(golden) if q["answerable"]
    ]
    return rows, hubness


def first_gold(scores: np.ndarray, gold: np.ndarray) -> int | None:
    hits = np.nonzero(gold[np.argsort(-scores, kind="stable")])[0]
    return int(hits[0]) + 1 if len(hits) else None


def main() -> int:
    from rag_pipeline.eval.golden import load_golden
    from rag_pipeline.query import RagIndex

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="append", required=True, help="GOLDEN_FILE=LAKE (repeatable): fit half chooses")
    parser.add_argument("--holdout", action="append", default=[], help="GOLDEN_FILE=LAKE (repeatable): reported whole")
    args = parser.parse_args()
    results = {}  # (set, half, k, a) -> (hit@5, mrr@10, n)
    columns = []
    for spec, halves in [(g, ("fit", "report")) for g in args.golden] + [(h, ("all",)) for h in args.holdout]:
        file, lake = spec.split("=", 1)
        columns += [(Path(file).stem, half) for half in halves]
        rows, hubness = gold_ranks(Path(file), Path(lake), RagIndex, load_golden)
        for k, hub in hubness.items():
            for a in STRENGTHS:
                for half in halves:
                    ranks = [first_gold(cos - a * hub, gold) for q, cos, gold in rows if half in ("all", q.get("split", "fit"))]
                    hit5 = float(np.mean([r is not None and r <= 5 for r in ranks]))
                    mrr = float(np.mean([1 / r if r and r <= 10 else 0.0 for r in ranks]))
                    results[(Path(file).stem, half, k, a)] = (hit5, mrr, len(ranks))
    fitted = [c for c in columns if c[1] == "fit"]
    chosen = max(((k, a) for k in NEIGHBOURS for a in STRENGTHS), key=lambda ka: sum(results[(*c, *ka)][1] for c in fitted))
    print("dense arm alone: hit@5 / MRR@10 of the gold source, answerable questions")
    print("| k | a | " + " | ".join(f"{s} {half}" for s, half in columns) + " |")
    print("|---:|---:|" + "---|" * len(columns))
    for k in NEIGHBOURS:
        for a in STRENGTHS:
            if a == 0.0 and k != NEIGHBOURS[0]:
                continue  # a = 0 is plain cosine whatever k
            mark = " (chosen on fit halves)" if (k, a) == chosen else " (cosine)" if a == 0.0 else ""
            cells = " | ".join(f"{results[(*c, k, a)][0]:.3f} / {results[(*c, k, a)][1]:.3f}" for c in columns)
            print(f"| {k} | {a}{mark} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
