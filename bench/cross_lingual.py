"""Cross-language retrieval with and without the dictionary-translated keyword arm.

    .venv/bin/python bench/cross_lingual.py [--golden FILE=LAKE ...]
    .venv/bin/python bench/cross_lingual.py --sweep --golden-fit data/golden/sample_golden.jsonl=LAKE
    .venv/bin/python bench/cross_lingual.py --names [--golden FILE=LAKE ...]

XQuAD en→zh (English questions, Chinese passages) on both fixed halves of bench/fusion_sweep.py
(`half()`), nDCG@10 and recall@10 per mode: `hybrid` with the translated arm (the product), the
same without it, plain RRF (`hybrid-rrf`), and each single arm.

`--sweep` is how the arm's hit weight (query.api TRANSLATED_ARM_WEIGHT × min(1, concept coverage /
TRANSLATED_FULL_TRUST_COVERAGE)) was chosen, on fit halves only: XQuAD en→zh fit-half nDCG@10 and
hit@5 of the sample golden set's fit-half cross-lingual questions; the shipped pair has the best
mean of the two. The dictionary (CC-CEDICT) and its limits (senses, renderings per word) were
fixed before any number was seen.

`--golden FILE=LAKE` adds a golden set over an indexed lake (e.g. data/golden/corpus_golden.jsonl
over an index of ../shared/corpus): hit@5 and answer/refusal rates of its cross-lingual questions,
and of all the others (which the arm must leave alone), with and without the arm.

`--names` is the ablation of romanized Chinese names (translate._romanized_names: "Chang'an" →
长安): XQuAD en→zh `hybrid` on each half, and on the questions that hold such a name, with and
without it; with `--golden`, each golden set's outcomes with and without, and the questions whose
outcome changed.

Monolingual benchmarks are unaffected by construction: the arm searches only chunks in the other
language, and SciFact (en) and XQuAD zh→zh corpora hold none.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fusion_sweep import half  # noqa: E402

from rag_pipeline.eval.beir import load_beir  # noqa: E402
from rag_pipeline.eval.golden import load_golden, run_golden  # noqa: E402
from rag_pipeline.eval.retrieval import MIN_DEPTH, evaluate_mode, open_benchmark_index  # noqa: E402

XQUAD = Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "xquad-zh"
RESULTS = Path(__file__).resolve().parent / "results"
ROWS = [("hybrid", True), ("hybrid", False), ("hybrid-rrf", False), ("vector", False), ("keyword", False)]


def xquad_table(progress: bool) -> list[dict]:
    dataset = load_beir(XQUAD, queries_file=XQUAD / "queries_en.jsonl")
    index = open_benchmark_index(dataset, progress=progress)
    out = []
    for name in ("fit", "report"):
        ids = [q for q in dataset.queries if q in dataset.qrels and half(q) == name]
        for mode, translate in ROWS:
            index.translate_queries = translate
            row = evaluate_mode(index, dataset, mode, ids, MIN_DEPTH, progress)
            out.append({**row, "half": name, "mode": mode + ("" if mode != "hybrid" else " (translated arm)" if translate else " (no translated arm)")})
    index.translate_queries = True
    return out


SWEEP = [(0.0, 1.0), (1.0, 0.5), (1.0, 1.0), (0.5, 0.5), (0.5, 1.0), (0.25, 0.5), (0.25, 1.0)]


def sweep(golden_fit: str, progress: bool) -> list[dict]:
    """Each (arm weight, full-trust coverage) on the fit halves: XQuAD en→zh and golden cross-lingual."""
    import rag_pipeline.query.api as api
    from rag_pipeline.query.api import RagIndex

    dataset = load_beir(XQUAD, queries_file=XQUAD / "queries_en.jsonl")
    index = open_benchmark_index(dataset, progress=progress)
    ids = [q for q in dataset.queries if q in dataset.qrels and half(q) == "fit"]
    file, lake = golden_fit.split("=", 1)
    golden_index = RagIndex.open(lake)
    questions = [q for q in load_golden(Path(file)) if q["split"] == "fit" and q["answerable"] and q["kind"] == "cross-lingual"]
    shipped = (api.TRANSLATED_ARM_WEIGHT, api.TRANSLATED_FULL_TRUST_COVERAGE)
    out = []
    for weight, full_trust in SWEEP:
        api.TRANSLATED_ARM_WEIGHT, api.TRANSLATED_FULL_TRUST_COVERAGE = weight, full_trust
        xquad = evaluate_mode(index, dataset, "hybrid", ids, MIN_DEPTH, progress)["ndcg@10"]
        hit = _mean(any(h.source in q["expected_sources"] for h in golden_index.search(q["question"], k=5)) for q in questions)
        out.append({"arm weight": weight, "full trust": full_trust, "XQuAD en→zh fit nDCG@10": xquad,
                    f"golden fit cross-lingual hit@5 (n={len(questions)})": hit, "mean": round((xquad + hit) / 2, 4),
                    "shipped": "yes" if (weight, full_trust) == shipped else ""})
    api.TRANSLATED_ARM_WEIGHT, api.TRANSLATED_FULL_TRUST_COVERAGE = shipped
    return out


def names_ablation(goldens: list[str], progress: bool) -> tuple[list[dict], list[str]]:
    """XQuAD en→zh and golden outcomes with and without romanized-name renderings."""
    import rag_pipeline.query.translate as translate
    from rag_pipeline.query.api import RagIndex

    found = translate._romanized_names

    def names(on: bool) -> None:
        translate._romanized_names = found if on else (lambda query: [])
        translate.translate_query.cache_clear()

    dataset = load_beir(XQUAD, queries_file=XQUAD / "queries_en.jsonl")
    index = open_benchmark_index(dataset, progress=progress)
    named = {q for q in dataset.queries if found(dataset.queries[q])}
    rows, changed = [], []
    try:
        for on in (False, True):
            names(on)
            for name in ("fit", "report"):
                ids = [q for q in dataset.queries if q in dataset.qrels and half(q) == name]
                for label, subset in (("all", ids), ("with a name", [q for q in ids if q in named])):
                    row = evaluate_mode(index, dataset, "hybrid", subset, MIN_DEPTH, progress)
                    rows.append({"set": f"XQuAD en→zh {name}", "questions": label, "names": on, "n": len(subset),
                                 "nDCG@10": row["ndcg@10"], "recall@10": row["recall@10"]})
        for spec in goldens:
            file, lake = spec.split("=", 1)
            golden_index, questions = RagIndex.open(lake), load_golden(Path(file))
            outcomes = {}
            for on in (False, True):
                names(on)
                details = run_golden(golden_index, questions)["details"]
                outcomes[on] = {d["id"]: (d["hit@5"], d["refused"], d["answer_contains"]) for d in details}
                answerable = [d for d in details if d["answerable"]]
                rows.append({"set": Path(file).stem, "questions": "all", "names": on, "n": len(details),
                             "hit@5": _mean(d["hit@5"] for d in answerable),
                             "answer_contains": _mean(d["answer_contains"] for d in answerable),
                             "false_refusal": _mean(d["refused"] for d in answerable),
                             "false_answer": _mean(not d["refused"] for d in details if not d["answerable"])})
            changed += [f"{Path(file).stem} {q}: (hit@5, refused, contains) {outcomes[False][q]} → {outcomes[True][q]}"
                        for q in outcomes[True] if outcomes[True][q] != outcomes[False][q]]
    finally:
        names(True)
    return rows, changed


def golden_table(spec: str) -> list[dict]:
    from rag_pipeline.query.api import RagIndex

    file, lake = spec.split("=", 1)
    index = RagIndex.open(lake)
    questions = load_golden(Path(file))
    out = []
    for translate in (False, True):
        index.translate_queries = translate
        details = run_golden(index, questions)["details"]
        for label, keep in (("cross-lingual", lambda d: d["kind"] == "cross-lingual"), ("other kinds", lambda d: d["kind"] != "cross-lingual")):
            rows = [d for d in details if keep(d)]
            answerable = [d for d in rows if d["answerable"]]
            unanswerable = [d for d in rows if not d["answerable"]]
            out.append({
                "set": Path(file).stem, "questions": label, "translated arm": translate, "n": len(rows),
                "hit@5": _mean(d["hit@5"] for d in answerable),
                "answer_contains": _mean(d["answer_contains"] for d in answerable),
                "false_refusal": _mean(d["refused"] for d in answerable),
                "false_answer": _mean(not d["refused"] for d in unanswerable),
            })
    return out


def _mean(values) -> float:
    values = [float(v) for v in values]
    return round(sum(values) / len(values), 3) if values else float("nan")


def _print(rows: list[dict], columns: list[str]) -> None:
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--golden", action="append", default=[], metavar="FILE=LAKE")
    parser.add_argument("--no-xquad", action="store_true")
    parser.add_argument("--sweep", action="store_true", help="the fit-half sweep that chose the arm's weight")
    parser.add_argument("--golden-fit", default="data/golden/sample_golden.jsonl=/tmp/sample_lake", metavar="FILE=LAKE")
    parser.add_argument("--names", action="store_true", help="ablation of romanized Chinese names (XQuAD en→zh, --golden sets)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    report: dict = {}
    if args.names:
        report["names"], changed = names_ablation(args.golden, not args.quiet)
        print("\nRomanized Chinese names (Chang'an → 长安) in the translated arm, without / with")
        _print(report["names"], ["set", "questions", "names", "n", "nDCG@10", "recall@10", "hit@5", "answer_contains", "false_refusal", "false_answer"])
        print("\n".join(changed) or "no golden outcome changed")
        (RESULTS / "cross_lingual_names.json").write_text(json.dumps(report, indent=1))
        return 0
    if args.sweep:
        report["sweep"] = sweep(args.golden_fit, not args.quiet)
        print("\nTranslated arm weight, fit halves only (the product ships the best mean)")
        _print(report["sweep"], list(report["sweep"][0]))
    if not args.no_xquad:
        report["xquad_en_zh"] = xquad_table(not args.quiet)
        print("\nXQuAD en→zh (English question, Chinese passage), nDCG@10 by half")
        _print(report["xquad_en_zh"], ["half", "mode", "queries", "ndcg@10", "recall@10", "mrr@10", "latency_ms_p50"])
    for spec in args.golden:
        report.setdefault("golden", []).extend(golden_table(spec))
    if report.get("golden"):
        print("\nGolden sets: cross-lingual questions and the rest, with / without the translated arm")
        _print(report["golden"], ["set", "questions", "translated arm", "n", "hit@5", "answer_contains", "false_refusal", "false_answer"])
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "cross_lingual.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
