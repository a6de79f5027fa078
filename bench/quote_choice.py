"""How `ask` picks the quote when words cannot: sentence-vector cosine vs token recall.

    .venv/bin/rag eval --dataset ../shared/bench/xquad-zh --mode hybrid     # builds the cached eval lake once
    .venv/bin/python bench/quote_choice.py --lake data/eval_cache/xquad-zh-<key> \
        --queries ../shared/bench/xquad-zh/queries_en.jsonl [--limit 400]    # en→zh; queries.jsonl for zh→zh

For each XQuAD question the product's own retrieval (`RagIndex._retrieve`, hybrid) and context
(`context_hits`, `candidate_sentences`) give the sentences `ask` may quote; each rule scores them
and the first two (the quote) are checked for one of the question's Chinese answer strings
(`queries.jsonl`'s `answers`, shared ids). Rules: `dense` — cosine of the model's sentence vectors
to the query vector (what `ask` did); `recall in passage` — token recall of the question in the
sentence's tokens read within its passage; `recall alone` — the sentence read alone (what `ask`
does now when words cannot choose, query.token_recall.sentence_recalls); the two recalls each plus
`dense` as summed z-scores; `as ask quotes` (`select_sentences` itself: the question's own words
first); and the question's idf-weighted term share with recall as a tie-break or a summed z-score. Questions sit in halves by sha256("s36-quote:<id>"): choose on `fit`, read `report`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

REPO = Path(__file__).resolve().parents[1]


def zscore(x: np.ndarray) -> np.ndarray:
    return (x - x.mean()) / (x.std() + 1e-9)


def rule_scores(index, question: str) -> tuple[list[str], dict[str, np.ndarray]] | None:
    from rag_pipeline.query.answer import _sentence_coverages, candidate_sentences, context_hits, query_term_groups, select_sentences
    from rag_pipeline.query.retrieve import idf_weights, query_terms
    from rag_pipeline.query.token_recall import question_recall, sentence_recalls

    hits, (query_vec, evidence, _, doc_freq, n_docs, _) = index._retrieve(question, "hybrid", 5, None, None)
    top = context_hits([h.__dict__ for h in hits])
    candidates = candidate_sentences(top)
    if not candidates:
        return None
    weights = idf_weights(query_terms(question), doc_freq, n_docs)
    picked = select_sentences(question, top, weights, model_scores=lambda units: index._sentence_scores(question, query_vec, units),
                              cross_lingual=bool(evidence.get("cross_lingual")))
    picked_units = {unit for _, unit in picked}
    terms = np.asarray(_sentence_coverages(query_term_groups(question), candidates, weights)[2])
    units = [unit for _, _, unit in candidates]
    states, identity = index.encoder.token_states, index.encoder.identity
    q_states, _ = states.states(question, identity.query_prompt)
    in_passage = []
    for hit, _, unit in candidates:
        text = top[hit]["text"]
        p_states, spans = states.states(text, identity.passage_prompt, cache="passage")
        start = text.find(unit)  # a table row carries its header: not verbatim in the passage
        inside = (spans[:, 0] >= start) & (spans[:, 1] <= start + len(unit)) if start >= 0 else np.zeros(len(spans), bool)
        in_passage.append(question_recall(q_states, p_states[inside]))
    dense = index._sentence_vectors(units) @ query_vec
    in_passage = np.asarray(in_passage)
    alone = np.asarray(sentence_recalls(states, question, units, identity.query_prompt, identity.passage_prompt))
    return units, {
        "dense (sentence vectors)": dense,
        "recall in passage": in_passage,
        "recall alone (shipped)": alone,
        "dense + recall in passage": zscore(dense) + zscore(in_passage),
        "dense + recall alone": zscore(dense) + zscore(alone),
        # what `ask` quotes (own words first, the model's score when they cannot choose): first two sentences, in order
        "as ask quotes": np.asarray([2.0 - [u for _, u in picked].index(u) if u in picked_units else 0.0 for u in units]),
        "question terms, ties by recall": terms + 1e-3 * alone,
        "question terms + recall alone": zscore(terms) + zscore(alone),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lake", required=True, help="the cached XQuAD eval lake (data/eval_cache/xquad-zh-<key>)")
    p.add_argument("--queries", default="../shared/bench/xquad-zh/queries_en.jsonl")
    p.add_argument("--answers", default="../shared/bench/xquad-zh/queries.jsonl", help="Chinese answer strings by id")
    p.add_argument("--limit", type=int, default=400)
    args = p.parse_args(argv)
    from rag_pipeline.query import RagIndex

    index = RagIndex.open(args.lake)
    answers = {}
    for line in Path(args.answers).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        answers[row["_id"]] = row["metadata"]["answers"]
    queries = [json.loads(line) for line in Path(args.queries).read_text(encoding="utf-8").splitlines()][: args.limit]
    held: dict[str, dict[str, list[bool]]] = {"fit": {}, "report": {}}
    for query in queries:
        half = "fit" if int(hashlib.sha256(f"s36-quote:{query['_id']}".encode()).hexdigest(), 16) % 2 == 0 else "report"
        scored = rule_scores(index, query["text"])
        if scored is None:
            continue
        units, rules = scored
        holds = np.array([any(a in unit for a in answers[query["_id"]]) for unit in units])
        row = held[half]
        row.setdefault("any candidate", []).append(bool(holds.any()))
        for name, score in rules.items():
            order = np.argsort(-score, kind="stable")
            row.setdefault(name, []).append(bool(holds[order[:2]].any()))
            row.setdefault(name + " @1", []).append(bool(holds[order[0]]))
    print(f"{args.queries}: share of questions whose quote (first two sentences) holds the answer")
    print("| rule | fit: quote | fit: first sentence | report: quote | report: first sentence |")
    print("|---|---:|---:|---:|---:|")
    names = [n for n in held["fit"] if not n.endswith(" @1")]
    for name in names:
        cells = []
        for half in ("fit", "report"):
            for key in (name, name + " @1"):
                values = held[half].get(key)
                cells.append(f"{np.mean(values):.3f}" if values else "–")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(f"n = {len(held['fit'].get('any candidate', []))} fit / {len(held['report'].get('any candidate', []))} report")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
