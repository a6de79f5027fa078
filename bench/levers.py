"""Issue 14's levers, each switched off alone, end to end on the golden sets (ablation: with / without).

    .venv/bin/python bench/levers.py --golden data/golden/corpus_golden.jsonl=CORPUS_LAKE \
        --golden data/golden/sample_golden.jsonl=SAMPLE_LAKE

Every row is the product (`RagIndex.ask` through `rag eval --golden`'s own scoring) with one lever
off and everything else as shipped; the first row is the product itself. Per golden set and half
(fit / report: the protocol's split; the corpus set was never fitted on at all) and per question
language: `right` (answerable: answered and the answer holds an expected string; unanswerable:
refused — the review's "answered correctly"), hit@5, answer contains, false refusal, false answer.
A lever whose removal loses questions on the report halves and the held-out set earns its place;
one that only moves a fit half does not.

Levers that need another index (English stemming, Traditional→Simplified folding, chunk sizes) or
another benchmark (the fusion rule, the translated arm's weight) are measured where they were
chosen: `bench/fusion_sweep.py`, `bench/keyword_ablation.py`, `bench/cross_lingual.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

from rag_pipeline.eval.golden import handled_right, load_golden, run_golden

RESULTS = Path(__file__).resolve().parent / "results"


def _no_names():
    import rag_pipeline.query.translate as translate

    found = translate._romanized_names
    translate._romanized_names = lambda query: []
    translate.translate_query.cache_clear()

    def undo():
        translate._romanized_names = found
        translate.translate_query.cache_clear()

    return undo


def _index_flag(name: str) -> Callable:
    def off(index):
        setattr(index, name, False)
        return lambda: setattr(index, name, True)

    return off


def _policy_flag(name: str) -> Callable:
    def off(index):
        shipped = index.policy
        index.policy = dataclasses.replace(shipped, **{name: False})
        return lambda: setattr(index, "policy", shipped)

    return off


def _patched(module_name: str, attribute: str, value) -> Callable:
    """A lever that is a module-level rule or constant: replaced while its row runs."""
    def off(index):
        import importlib

        module = importlib.import_module(module_name)
        shipped = getattr(module, attribute)
        setattr(module, attribute, value)
        return lambda: setattr(module, attribute, shipped)

    return off


# (row label, what switching it off does: returns how to switch it back on)
LEVERS: list[tuple[str, Callable | None]] = [
    ("product (every lever on)", None),
    ("− dictionary-translated keyword arm", _index_flag("translate_queries")),
    ("− romanized Chinese names in it", lambda index: _no_names()),
    ("− query rewriting", _index_flag("rewrite_queries")),
    ("− token recall in the gate", _index_flag("token_recall")),
    ("− refuse unknown codes", _policy_flag("refuse_unknown_identifiers")),
    ("− refuse a number question whose quote states none", _policy_flag("refuse_missing_number")),
    ("− refuse an address question whose quote states none", _policy_flag("refuse_missing_address")),
    ("− a dense hit's say by its standing (every dense hit full say)", _patched("rag_pipeline.query.api", "DENSE_FULL_TRUST_Z", 0.0)),
    ("− context rule (a translated-only hit quoted anywhere)", _patched("rag_pipeline.query.answer", "_translated_only", lambda hit: False)),
    ("− identifier rule (a document number stated by a new code)", _patched("rag_pipeline.query.answer", "asks_for_identifier", lambda q: False)),
]


def outcome(details: list[dict]) -> dict:
    answerable = [d for d in details if d["answerable"]]
    unanswerable = [d for d in details if not d["answerable"]]
    right = [handled_right(d) for d in details]

    def mean(values) -> float | None:
        values = [float(v) for v in values]
        return round(sum(values) / len(values), 3) if values else None

    return {
        "n": len(details),
        "right": mean(right),
        "hit@5": mean(d["hit@5"] for d in answerable),
        "contains": mean(d["answer_contains"] for d in answerable),
        "FR": mean(d["refused"] for d in answerable),
        "FA": mean(not d["refused"] for d in unanswerable),
    }


def ablate(spec: str, levers: list[tuple[str, Callable | None]]) -> list[dict]:
    from rag_pipeline.query import RagIndex

    file, lake = spec.split("=", 1)
    index, questions = RagIndex.open(lake), load_golden(Path(file))
    rows = []
    for label, switch_off in levers:
        undo = switch_off(index) if switch_off else None
        try:
            details = run_golden(index, questions)["details"]
        finally:
            if undo:
                undo()
        slices = {"all": details}
        slices.update({f"{s} half": [d for d in details if d["split"] == s] for s in ("fit", "report")})
        slices.update({lang: [d for d in details if d["lang"] == lang] for lang in ("en", "zh")})
        for name, part in slices.items():
            if part:
                rows.append({"set": Path(file).stem, "lever": label, "questions": name, **outcome(part)})
        print(f"{Path(file).stem}: {label}: right {outcome(details)['right']}", file=sys.stderr, flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="append", required=True, metavar="FILE=LAKE")
    args = parser.parse_args()
    rows = [row for spec in args.golden for row in ablate(spec, LEVERS)]
    report(rows, ["set", "questions", "lever", "n", "right", "hit@5", "contains", "FR", "FA"], "levers")
    return 0


def report(rows: list[dict], columns: list[str], name: str) -> None:
    """Print the rows as a markdown table by set and question slice; keep them in results/<name>.json."""
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in sorted(rows, key=lambda r: (r["set"], r["questions"])):
        print("| " + " | ".join(str(row[c]) for c in columns) + " |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(rows, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    raise SystemExit(main())
