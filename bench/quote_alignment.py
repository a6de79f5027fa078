"""Quoting with concept-aligned renderings (issue 14): does the quote hold the answer?

    .venv/bin/python bench/quote_alignment.py \\
        --golden data/golden/sample_golden.jsonl=/work/tmp/sample_lake \\
        --holdout data/golden/corpus_golden.jsonl=/work/tmp/corpus_lake --shares 0 0.25 0.5 0.75 1

Every answerable question is asked once through the product's own `ask` with every answer
composed (the gate is not what is measured here); the arguments `ask` hands to
`select_sentences` are recorded, and the quote is re-chosen for each `RENDERED_CONCEPT_SHARE`
(0 = the question's own words only, the quoting before). A quote is right when it holds one of
the question's expected strings (`answer_contains`); a second table counts only the questions the
shipped gate answers (its evidence does not depend on the quote). ~1 min on 2 cores. The share is chosen on the golden set's fit
half (its `split` field) only; the report half and the held-out set (another corpus, never
looked at while choosing) are read afterwards. Lakes are only read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from rag_pipeline.eval.golden import contains_any, load_golden  # noqa: E402
from rag_pipeline.query import answer as answer_module  # noqa: E402
from rag_pipeline.query import api as api_module  # noqa: E402
from rag_pipeline.query.answer import RefusalPolicy, refusal_reason  # noqa: E402

from refusal_gate import golden_half  # noqa: E402
from answerability import ALWAYS_ANSWER  # noqa: E402


def recorded_calls(golden: Path, lake: Path) -> list[dict]:
    """Per answerable question: its half, expected strings and the select_sentences call of its ask."""
    from rag_pipeline.query import RagIndex

    index = RagIndex.open(lake)
    index.policy = ALWAYS_ANSWER
    assert index.llm is None, "measure the extractive answer: unset the LLM settings"
    original = api_module.select_sentences
    rows = []
    for q in load_golden(golden):
        if not q["answerable"]:
            continue
        calls = []

        def recording(*args, **kwargs):
            calls.append((args, kwargs))
            return original(*args, **kwargs)

        api_module.select_sentences = recording
        try:
            evidence = index.ask(q["question"]).evidence
        finally:
            api_module.select_sentences = original
        answered = refusal_reason(evidence, RefusalPolicy()) is None  # by the shipped gate, which quoting does not touch
        rows.append({"q": q, "half": q.get("split") or golden_half(q["id"]), "call": calls[0] if calls else None, "answered": answered})
    return rows


def quote(row: dict, share: float) -> str:
    if row["call"] is None:
        return ""
    args, kwargs = row["call"]
    answer_module.RENDERED_CONCEPT_SHARE = share
    picked = answer_module.select_sentences(*args, **kwargs)
    return answer_module.compose(picked, args[1])[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", required=True, help="GOLDEN_FILE=LAKE: share chosen on its fit half, read on its report half")
    parser.add_argument("--holdout", action="append", default=[], help="GOLDEN_FILE=LAKE: never used to choose")
    parser.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75, 1.0])
    parser.add_argument("--out", type=Path, default=None, help="write every quote per share here (JSON)")
    args = parser.parse_args()
    shipped = answer_module.RENDERED_CONCEPT_SHARE
    sets = {}
    file, lake = args.golden.split("=", 1)
    golden_rows = recorded_calls(Path(file), Path(lake))
    sets["fit half"] = [r for r in golden_rows if r["half"] == "fit"]
    sets["report half"] = [r for r in golden_rows if r["half"] == "report"]
    for spec in args.holdout:
        file, lake = spec.split("=", 1)
        sets[f"held out ({Path(file).stem})"] = recorded_calls(Path(file), Path(lake))
    quotes = {name: {share: [quote(r, share) for r in rows] for share in args.shares} for name, rows in sets.items()}
    answer_module.RENDERED_CONCEPT_SHARE = shipped
    print("| RENDERED_CONCEPT_SHARE | " + " | ".join(f"{name} ({len(rows)} q)" for name, rows in sets.items()) + " |")
    print("|---|" + "---|" * len(sets))
    for share in args.shares:
        cells = []
        for name, rows in sets.items():
            right = sum(contains_any(text, r["q"]["answer_contains"]) for text, r in zip(quotes[name][share], rows))
            cells.append(f"{right / len(rows):.3f}" if rows else "-")
        print(f"| {share:g} | " + " | ".join(cells) + " |")
    print("\nWith the shipped gate (answered and the quote holds the answer, of the answerable questions):\n")
    print("| RENDERED_CONCEPT_SHARE | " + " | ".join(name for name in sets) + " |")
    print("|---|" + "---|" * len(sets))
    for share in args.shares:
        cells = []
        for name, rows in sets.items():
            right = sum(r["answered"] and contains_any(text, r["q"]["answer_contains"]) for text, r in zip(quotes[name][share], rows))
            cells.append(f"{right / len(rows):.3f}" if rows else "-")
        print(f"| {share:g} | " + " | ".join(cells) + " |")
    base = args.shares[0]
    for name, rows in sets.items():
        for share in args.shares[1:]:
            for text, before, r in zip(quotes[name][share], quotes[name][base], rows):
                was, now = (contains_any(t, r["q"]["answer_contains"]) for t in (before, text))
                if was != now:
                    print(f"{name} share {share:g}: {r['q']['id']} {'gained' if now else 'LOST'} {r['q']['question']!r}")
    if args.out:
        args.out.write_text(json.dumps(
            {name: [{"id": r["q"]["id"], "question": r["q"]["question"], "expected": r["q"]["answer_contains"],
                     **{f"{share:g}": quotes[name][share][n] for share in args.shares}} for n, r in enumerate(rows)]
             for name, rows in sets.items()}, ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
