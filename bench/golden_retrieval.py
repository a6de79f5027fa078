"""Retrieval alone on a golden set: hit@5 and MRR@10 of the answerable questions, by split and kind,
for variants of `RagIndex` attributes (ablations), all in one process on one lake.

Reproduce (issue 14, bench/README.md "Language-balanced dense ranking"):

    .venv/bin/python bench/golden_retrieval.py --lake /tmp/sample_lake --golden data/golden/sample_golden.jsonl \
        --variant base: --variant balanced:balance_dense_languages=1
    # the attributes a variant sets must exist in the code on PYTHONPATH (e.g. a pinned commit)

A variant is `name:attr=value,attr=value` (values parsed as JSON when they parse, else strings);
`name:` alone is the code as it stands. Only `search` runs (no answer, no gate): what it measures
is the ceiling retrieval sets, the answers' evidence is `rag eval --golden`'s.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rag_pipeline.query.api import RagIndex


def parse_variant(text: str) -> tuple[str, dict]:
    name, _, assignments = text.partition(":")
    settings = {}
    for item in filter(None, assignments.split(",")):
        key, _, raw = item.partition("=")
        try:
            settings[key] = json.loads(raw)
        except json.JSONDecodeError:
            settings[key] = raw
    return name, settings


def first_expected_rank(question: dict, hits) -> int | None:
    return next((rank for rank, hit in enumerate(hits, start=1) if hit.source in question["expected_sources"]), None)


def summary(ranks: list[int | None]) -> str:
    if not ranks:
        return "-"
    hit5 = sum(1 for r in ranks if r and r <= 5) / len(ranks)
    mrr = sum(1 / r for r in ranks if r) / len(ranks)
    return f"{hit5:.3f} / {mrr:.3f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lake", type=Path, required=True)
    ap.add_argument("--golden", type=Path, required=True)
    ap.add_argument("--variant", action="append", default=None, help="name:attr=value,... (repeatable)")
    args = ap.parse_args()
    questions = [json.loads(line) for line in args.golden.read_text(encoding="utf-8").splitlines() if line.strip()]
    answerable = [q for q in questions if q["answerable"]]
    index = RagIndex.open(args.lake)
    groups = {
        "all": lambda q: True,
        "fit": lambda q: q.get("split") == "fit",
        "report": lambda q: q.get("split") == "report",
        "cross-lingual": lambda q: q["kind"] == "cross-lingual",
        "one language": lambda q: q["kind"] != "cross-lingual",
    }
    print(f"{args.golden.name}: hit@5 / MRR@10 over {len(answerable)} answerable questions\n")
    print("| variant | " + " | ".join(f"{g} (n={sum(map(f, answerable))})" for g, f in groups.items()) + " |")
    print("|---" * (len(groups) + 1) + "|")
    for name, settings in map(parse_variant, args.variant or ["code as it stands:"]):
        defaults = {key: getattr(index, key) for key in settings}
        for key, value in settings.items():
            setattr(index, key, value)
        ranks = [(q, first_expected_rank(q, index.search(q["question"], k=10))) for q in answerable]
        for key, value in defaults.items():
            setattr(index, key, value)
        print(f"| {name} | " + " | ".join(summary([r for q, r in ranks if f(q)]) for f in groups.values()) + " |", flush=True)


if __name__ == "__main__":
    main()
