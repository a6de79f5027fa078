"""Which sentences the extractive answer quotes besides the best one, end to end on the golden sets.

    .venv/bin/python bench/quote_context.py --golden data/golden/sample_golden.jsonl=SAMPLE_LAKE \
        --golden data/golden/corpus_golden.jsonl=CORPUS_LAKE

`select_sentences` quotes the best sentence and then the one adding the most question-term weight
the quote still lacks (greedy coverage), from any of the three context chunks. Seen on the sample's
fit half: the second pick is often a sentence of another chunk that shares one common word
("Taxi receipts above 200 CNY…" after "Request annual leave in NorthDesk"), while the fact sits in
the sentence after the best one ("…10 working days in advance"). A topic sentence names the
subject; the next sentence of the same passage is where its specifics usually are.

Rules (each a replacement for `rag_pipeline.query.api.select_sentences`, everything else shipped):
`shipped`; `next` — the best sentence, then the one after it in the same chunk (the greedy second
when there is none); `next + greedy` — both, three sentences. Each is run twice: as the product
(`right`, contains, FR, FA: the number/address rules read the quote) and with the gate open
(every question answered: `quote holds` = the share of answerable questions whose quote holds an
expected string, the quote's own ceiling). Median quote length in characters beside it. Choose on
the sample's fit half; read its report half and the corpus set (never fitted on).
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.levers import outcome, report  # noqa: E402
from rag_pipeline.eval.golden import load_golden, run_golden  # noqa: E402
from rag_pipeline.query import answer as answer_module  # noqa: E402

SHIPPED = answer_module.select_sentences


def _next_sentence(hits: list[dict], picked: tuple[int, str]) -> tuple[int, str] | None:
    """The sentence after `picked` in its own chunk, if any."""
    i, unit = picked
    units = answer_module.answer_units(hits[i]["text"])
    key = answer_module.normalized_unit(unit)
    for n, candidate in enumerate(units[:-1]):
        if answer_module.normalized_unit(candidate) == key:
            following = units[n + 1]
            return (i, following) if len(answer_module.normalized_unit(following)) > 3 else None
    return None


def with_next(greedy: bool):
    def select(question, hits, term_weights, model_scores=None, max_sentences=2, cross_lingual=False):
        shipped = SHIPPED(question, hits, term_weights, model_scores=model_scores, max_sentences=max_sentences, cross_lingual=cross_lingual)
        if not shipped:
            return shipped
        following = _next_sentence(hits, shipped[0])
        if following is None:
            return shipped
        seen = {answer_module.normalized_unit(u) for _, u in shipped[:1]}
        picked = [shipped[0]]
        if answer_module.normalized_unit(following[1]) not in seen:
            picked.append(following)
            seen.add(answer_module.normalized_unit(following[1]))
        if greedy or len(picked) < 2:
            picked += [p for p in shipped[1:] if answer_module.normalized_unit(p[1]) not in seen]
        return picked

    return select


RULES = {"shipped": SHIPPED, "next": with_next(False), "next + greedy": with_next(True)}


def run(spec: str) -> list[dict]:
    import rag_pipeline.query.api as api
    from rag_pipeline.query import RagIndex

    file, lake = spec.split("=", 1)
    index, questions = RagIndex.open(lake), load_golden(Path(file))
    shipped_policy, open_gate = index.policy, dataclasses.replace(
        index.policy, min_score=-1e9, refuse_unknown_identifiers=False, refuse_missing_number=False, refuse_missing_address=False
    )
    rows = []
    for label, rule in RULES.items():
        api.select_sentences = rule
        try:
            index.policy = shipped_policy
            product = run_golden(index, questions)["details"]
            index.policy = open_gate
            opened = run_golden(index, questions)["details"]
        finally:
            api.select_sentences, index.policy = SHIPPED, shipped_policy
        for name in ("all", "fit", "report", "en", "zh"):
            def part(details):
                return [d for d in details if name == "all" or d.get("split") == name or d["lang"] == name]
            p, o = part(product), part(opened)
            if not p:
                continue
            holds = [d["answer_contains"] for d in o if d["answerable"]]
            lengths = [len(d["answer"]) for d in o if d["answerable"] and d["answer"]]
            rows.append({
                "set": Path(file).stem, "questions": name, "rule": label, **outcome(p),
                "quote holds": round(sum(holds) / len(holds), 3) if holds else None,
                "quote chars": int(statistics.median(lengths)) if lengths else None,
            })
        print(f"{Path(file).stem}: {label}: right {outcome(product)['right']}", file=sys.stderr, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="append", required=True, metavar="FILE=LAKE")
    args = parser.parse_args()
    rows = [row for spec in args.golden for row in run(spec)]
    report(rows, ["set", "questions", "rule", "n", "right", "contains", "FR", "FA", "quote holds", "quote chars"], "quote_context")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
