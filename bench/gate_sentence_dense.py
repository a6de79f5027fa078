"""Does the dense model read "the asked fact is here" better per sentence than per chunk? (issue 14)

Reproduce (bench/README.md "The best sentence's cosine as gate evidence"; ~8 min on 2 cores):

    .venv/bin/rag eval --golden data/golden/sample_golden.jsonl --lake /tmp/sample_lake --json > /tmp/eval_sample.json
    .venv/bin/rag eval --golden data/golden/corpus_golden.jsonl --lake /tmp/corpus_lake --json > /tmp/eval_corpus.json
    .venv/bin/python bench/gate_sentence_dense.py /tmp/sample_lake=/tmp/eval_sample.json /tmp/corpus_lake=/tmp/eval_corpus.json

Per golden question: the answer's candidate sentences (the context `ask` quotes from: top hits,
at most 2 a document, near-duplicates rolled up; at most 40 sentences) encoded as passages, and
their cosine with the question: `sent_max` (the best), `sent_gap` (best − second), `sent_z` (the
best in spreads above the candidates' mean). Printed: each feature's AUC (answerable vs
close-but-unanswerable) beside the gate's features as `ask` recorded them, overall, per language
and where the question's own words are scarce (lexical coverage < 0.45, same language); then a
logistic gate fitted on one golden set and scored on the other, with and without the sentence
features (right = answerable answered or unanswerable refused).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from rag_pipeline.query.answer import candidate_sentences, context_hits
from rag_pipeline.query.api import RagIndex

RECORDED = ["lexical_coverage", "sentence_coverage", "dense_z", "dense_gap_z", "cross_lingual"]
SENTENCE = ["sent_max", "sent_gap", "sent_z"]


def sentence_features(index: RagIndex, question: str) -> dict:
    cands = candidate_sentences(context_hits([h.__dict__ for h in index.search(question, k=10)]))
    if len(cands) < 2:
        return dict.fromkeys(SENTENCE, 0.0)
    cos = index.encoder.encode_passages([c[2] for c in cands]) @ index.encoder.encode_query(question)
    best = np.sort(cos)[::-1]
    return {"sent_max": float(best[0]), "sent_gap": float(best[0] - best[1]), "sent_z": float((best[0] - cos.mean()) / (cos.std() or 1.0))}


def records(lake: str, report: str) -> list[dict]:
    index = RagIndex.open(lake)
    out = []
    for d in json.load(open(report, encoding="utf-8"))["details"]:
        evidence = {k: float(d["evidence"].get(k) or 0.0) for k in RECORDED}
        out.append({"lang": d["lang"], "answerable": d["answerable"], **evidence, **sentence_features(index, d["question"])})
    return out


def auc(pos: list[float], neg: list[float]) -> float | None:
    if not pos or not neg:
        return None
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / len(pos) / len(neg)


def logistic(X: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 3000, lr: float = 0.1) -> np.ndarray:
    X = np.c_[X, np.ones(len(X))]
    w = np.zeros(X.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-X @ w))
        w -= lr * (X.T @ (p - y) + l2 * np.r_[w[:-1], 0]) / len(y)
    return w


def matrix(rows: list[dict], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    X = np.array([[r[n] for n in names] + [r["cross_lingual"] * r["dense_z"]] for r in rows])
    return X, np.array([r["answerable"] for r in rows], float)


def main() -> None:
    sets = {}
    for arg in sys.argv[1:]:
        lake, report = arg.split("=", 1)
        sets[report] = records(lake, report)
    print("| set | questions | n | " + " | ".join(RECORDED[:4] + SENTENCE) + " |")
    print("|---" * (3 + 4 + len(SENTENCE)) + "|")
    for name, rows in sets.items():
        for group, keep in [("all", lambda r: True), ("en", lambda r: r["lang"] == "en"), ("zh", lambda r: r["lang"] == "zh"),
                            ("words scarce", lambda r: r["lexical_coverage"] < 0.45 and not r["cross_lingual"])]:
            sel = [r for r in rows if keep(r)]
            cells = [auc([r[f] for r in sel if r["answerable"]], [r[f] for r in sel if not r["answerable"]]) for f in RECORDED[:4] + SENTENCE]
            print(f"| {name} | {group} | {len(sel)} | " + " | ".join("-" if c is None else f"{c:.3f}" for c in cells) + " |")
    print("\n| fitted on → scored on | features | right | false refusal | false answer |\n|---|---|---|---|---|")
    names = list(sets)
    for fit_on, score_on in ((names[0], names[-1]), (names[-1], names[0])):
        for label, features in (("gate's", RECORDED), ("gate's + sent_max", RECORDED + ["sent_max"]), ("gate's + all three", RECORDED + SENTENCE)):
            w = logistic(*matrix(sets[fit_on], features))
            X, y = matrix(sets[score_on], features)
            answered = np.c_[X, np.ones(len(X))] @ w >= 0
            print(f"| {fit_on} → {score_on} | {label} | {(answered == (y == 1)).mean():.3f} | "
                  f"{(~answered & (y == 1)).sum() / (y == 1).sum():.3f} | {(answered & (y == 0)).sum() / (y == 0).sum():.3f} |")


if __name__ == "__main__":
    main()
