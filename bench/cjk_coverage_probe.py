"""Chinese questions: does counting the question's characters instead of jieba's words separate
answerable from close-but-unanswerable questions better? A probe, not a product change.

jieba segments a question and its answer differently ("每个月" → 每个 / 月, the handbook's "每月" one
word), so word coverage misses a restated fact (sample s050: 0.27). Characters cannot be segmented
differently, but an unanswerable question's missing concept may share characters with what is there
(国外 / 国内). Per golden question, the product's own retrieval and context (`ask`'s first three
passages, its candidate sentences) and two scores of the best sentence: the shipped idf-weighted
word coverage, and the share of the question's distinct content Han characters it holds (question
words such as 多少/什么/哪 left out). Prints each score's AUC (answerable vs not) by set and split.

    .venv/bin/python bench/cjk_coverage_probe.py --golden data/golden/sample_golden.jsonl=<sample lake> \
        --golden data/golden/corpus_golden.jsonl=<corpus lake>
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.query import RagIndex  # noqa: E402
from rag_pipeline.query.answer import best_sentence_coverage, candidate_sentences, context_hits  # noqa: E402
from rag_pipeline.query.retrieve import idf_weights, query_terms  # noqa: E402

_HAN = re.compile(r"[\u4e00-\u9fff]")
# characters that frame a question rather than name what it asks about
_QUESTION_CHARS = set("的是了吗嗎呢吧么麼什哪几幾多少怎样樣如何请請问問能可以要会會有在和与與及或")


def content_chars(text: str) -> set[str]:
    return {c for c in _HAN.findall(text) if c not in _QUESTION_CHARS}


def char_coverage(question: str, sentences: list[str]) -> float:
    asked = content_chars(question)
    if not asked:
        return 0.0
    return max((len(asked & set(_HAN.findall(s))) / len(asked) for s in sentences), default=0.0)


def auc(pos: list[float], neg: list[float]) -> float:
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def scores(index: RagIndex, question: str) -> dict:
    query = index._rewritten(question)
    hits, (_, _, _, doc_freq, n_docs, _) = index._retrieve(query, "hybrid", 5, None, None)
    top = context_hits([h.__dict__ for h in hits])
    sentences = [unit for _, _, unit in candidate_sentences(top)]
    weights = idf_weights(query_terms(query), doc_freq, n_docs)
    return {"word": best_sentence_coverage(query, top, weights), "char": char_coverage(query, sentences)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="append", required=True, help="FILE=LAKE (repeatable)")
    args = parser.parse_args()
    print("| set | split | zh answerable / not | AUC word coverage (shipped) | AUC character coverage |")
    print("|---|---|---|---:|---:|")
    for spec in args.golden:
        file, lake = spec.split("=", 1)
        index = RagIndex.open(lake)
        rows = [json.loads(line) for line in open(file, encoding="utf-8") if line.strip()]
        rows = [r for r in rows if r["lang"] == "zh"]
        for r in rows:
            r.update(scores(index, r["question"]))
        for split in sorted({r.get("split") or "all" for r in rows}):
            part = [r for r in rows if (r.get("split") or "all") == split]
            pos = [r for r in part if r["answerable"]]
            neg = [r for r in part if not r["answerable"]]
            print(f"| {Path(file).stem} | {split} | {len(pos)} / {len(neg)} | "
                  f"{auc([r['word'] for r in pos], [r['word'] for r in neg]):.3f} | {auc([r['char'] for r in pos], [r['char'] for r in neg]):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
