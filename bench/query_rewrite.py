"""Query rewriting (issue 14, item 5): colloquial questions with and without the rewrite.

    .venv/bin/python bench/query_rewrite.py --sample-lake <lake of data/sample> \
        --corpus-lake <lake of ../shared/corpus> [--json out.json]        # ~6 min warm on 2 cores

`data/golden/colloquial_golden.jsonl` holds 180 chat-style re-phrasings ("hi, quick question —
could you tell me…", "您好，麻烦帮我查一下…，谢谢啦") of golden questions chosen by a hash of
their ids, 90 from the sample set and 90 from the corpus set, with the same expected sources,
answers and answerability. The sample-set ones are the **fit** part (the rules may be changed
after reading their failures); the corpus-set ones are **held out** (read only for the table).

Each question is asked through the product's own `RagIndex.ask` four ways: the original with the
rewrite off and on (on must not change what plain questions get), the colloquial one off and on.
`right` = answerable: answered and the answer holds an expected string; unanswerable: refused.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from rag_pipeline.eval.golden import evaluate_question, load_golden, summarize
from rag_pipeline.query import RagIndex

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
SETS = {"sample": ("sample_golden.jsonl", "fit"), "corpus": ("corpus_golden.jsonl", "held out")}


def row(details: list[dict]) -> dict:
    summary = summarize(details)
    return {
        "n": len(details),
        "right": round(summary["answered_correctly"], 3) if details else None,
        **{k: summary[k] for k in ("hit@5", "false_refusal", "false_answer", "answer_contains")},
    }


def measure(index: RagIndex, pairs: list[tuple[dict, dict]]) -> dict[str, list[dict]]:
    out = defaultdict(list)
    for rewrite in (False, True):
        index.rewrite_queries = rewrite
        for original, colloquial in pairs:
            out[f"original, rewrite {'on' if rewrite else 'off'}"].append(evaluate_question(index, original))
            out[f"colloquial, rewrite {'on' if rewrite else 'off'}"].append(evaluate_question(index, colloquial))
    index.rewrite_queries = True
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample-lake", required=True)
    parser.add_argument("--corpus-lake", required=True)
    parser.add_argument("--colloquial", default=str(GOLDEN / "colloquial_golden.jsonl"))
    parser.add_argument("--json", help="write every question's outcome here")
    args = parser.parse_args()
    colloquial = load_golden(Path(args.colloquial))
    lakes = {"sample": args.sample_lake, "corpus": args.corpus_lake}
    report = {}
    print("| set (part) | questions | lang | right | hit@5 | false refusal | false answer | answer contains |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (golden_file, part) in SETS.items():
        originals = {q["id"]: q for q in load_golden(GOLDEN / golden_file)}
        pairs = [(originals[q["variant_of"]], q) for q in colloquial if q["source_set"] == name]
        outcomes = measure(RagIndex.open(lakes[name]), pairs)
        report[name] = outcomes
        for condition, details in outcomes.items():
            for lang in ("all", "en", "zh"):
                chosen = [d for d in details if lang == "all" or d["lang"] == lang]
                r = row(chosen)
                print(f"| {name} ({part}) | {condition} | {lang} ({r['n']}) | {r['right']} | {r['hit@5']} | "
                      f"{r['false_refusal']} | {r['false_answer']} | {r['answer_contains']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=1, default=str), encoding="utf-8")


if __name__ == "__main__":
    main()
