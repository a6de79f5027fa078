"""Should the refusal gate get another feature? 5-fold cross-validation on the fit halves decides.

    .venv/bin/python bench/gate_feature_cv.py          # after bench/answerability.py and refusal_gate.py

bench/refusal_gate.py fits the shipped gate on the fit halves and reports the rest; comparing
feature sets by their in-sample fit would favour every added feature. Here each candidate set is
fitted on four fifths of the fit-half cases and scored on the fifth (folds by a seeded hash of the
case), the same class-balanced ridge logistic regression as `rag_pipeline.eval.calibrate.fit`.
Only the cross-validated fit columns choose; the sample report half and the held-out corpus golden
set are printed for the record (a gain seen only there does not count). Candidates whose evidence
fields the recorded cases lack are skipped: the evidence comes from the code that recorded it.

    .venv/bin/python bench/gate_feature_cv.py --record /work/tmp/gate_cv_aligned   # ~5 min, then:
    .venv/bin/python bench/gate_feature_cv.py --records /work/tmp/gate_cv_aligned [--seeds 20]

`--record DIR` re-records the fit-half benchmark cases (bench/answerability.py's, --limit 160
--scifact 160) and both golden sets with the code of the working tree, into DIR (the shipped
records are untouched), plus what `ask` handed the quote: the context hits' text and the
question's own idf weights (over the chunks the asker may read), so features computed from them
(`aligned_inputs`: aligned coverage, issue 14) are replayed offline. Only answerable questions
with answer strings compose an answer (their `contains` needs it; the sentence encode across
languages is what an `ask` costs): the other cases record the evidence of a refused `ask`, which
is the same evidence, computed before the gate.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.eval.calibrate import L2, NEWTON_STEPS  # noqa: E402
from rag_pipeline.ingest.language import detect_language  # noqa: E402
from rag_pipeline.query.answer import _sentence_coverages, candidate_sentences, gate_features  # noqa: E402
from rag_pipeline.query.retrieve import query_term_groups  # noqa: E402
from rag_pipeline.query.translate import translate_query  # noqa: E402

from refusal_gate import collect_golden, load_benchmark  # noqa: E402

FOLDS = 5
SAMPLE = (REPO / "data/golden/sample_golden.jsonl", Path(os.environ.get("RAG_BENCH_SAMPLE_LAKE", "/tmp/sample_lake")))
CORPUS = (REPO / "data/golden/corpus_golden.jsonl", Path(os.environ.get("RAG_BENCH_CORPUS_LAKE", "/tmp/corpus_lake")))


def _ev(key):
    return lambda r: [float(r["evidence"].get(key) or 0.0)]


def _zh(r) -> float:
    return float(r["lang"] == "zh")


def aligned_coverage(question: str, hits: list[dict], term_weights: dict[str, float], sentences: bool = False,
                     rendered_share: float = 1.0) -> float:
    """The idf-weighted share of the question's concepts the best passage (`sentences`: the best
    quotable sentence) of `hits` holds, each concept found in either language: by its own spelling,
    or through its dictionary renderings (Translation.aligned; found at `rendered_share` of its
    weight times the share of its rendered words held), counted once — the scoring of the quote
    (answer._sentence_coverages) applied to the context passages. `term_weights` are the question's
    own idf weights over the chunks the asker may read (what `ask` hands the quote), so nothing
    depends on a chunk the asker cannot read; the dictionary is corpus-free. Tried as a gate
    feature and not shipped (bench/README.md, "Aligned coverage as a gate feature").
    """
    candidates = candidate_sentences(hits) if sentences else [(i, 0, hit["text"]) for i, hit in enumerate(hits)]
    if not candidates:
        return 0.0
    groups = query_term_groups(question)
    translation = translate_query(question)
    renderings = translation.aligned(groups) if translation else None
    return max(_sentence_coverages(groups, candidates, term_weights, renderings, rendered_share)[2], default=0.0)


def _aligned(sentences: bool = False, share: float = 1.0):
    """Aligned coverage (issue 14) replayed from the recorded inputs: the share of the question's
    concepts the best context passage (or sentence) holds in either language."""
    def feature(r) -> float:
        inputs = r["evidence"]["aligned_inputs"]
        if not inputs:
            return 0.0
        key = ("aligned", sentences, share)
        if key not in inputs:
            inputs[key] = aligned_coverage(inputs["question"], inputs["hits"], inputs["weights"], sentences, share)
        return inputs[key]
    return feature


_PASSAGE, _PASSAGE_075, _SENTENCE = _aligned(), _aligned(share=0.75), _aligned(sentences=True)
_LEXICAL = 0  # GATE_FEATURES' index of lexical_coverage


def _replace_lexical(r) -> list[float]:
    values = gate_features(r["evidence"])
    values[_LEXICAL] = _PASSAGE(r)
    return values


def _replace_sentence(r) -> list[float]:
    values = gate_features(r["evidence"])
    values[_SENTENCE_INDEX] = _SENTENCE(r)
    return values


def _replace_both(r) -> list[float]:
    values = _replace_lexical(r)
    values[_SENTENCE_INDEX] = _SENTENCE(r)
    return values


_SENTENCE_INDEX = 1  # GATE_FEATURES' index of sentence_coverage
FULL = {  # name: (evidence fields needed, the whole feature vector) — candidates that drop a shipped feature
    "aligned replaces lexical_coverage": (("aligned_inputs",), _replace_lexical),
    "aligned sentence replaces sentence_coverage": (("aligned_inputs",), _replace_sentence),
    "aligned replaces both coverages": (("aligned_inputs",), _replace_both),
}

CANDIDATES = {  # name: (evidence fields needed, extra features beyond GATE_FEATURES)
    "shipped": ((), lambda r: []),
    "+zh": ((), lambda r: [_zh(r)]),
    "+zh×coverage": ((), lambda r: [_zh(r), _zh(r) * r["evidence"]["sentence_coverage"], _zh(r) * r["evidence"]["lexical_coverage"]]),
    "+zh×dense": ((), lambda r: [_zh(r), _zh(r) * r["evidence"]["dense_z"], _zh(r) * r["evidence"]["dense_gap_z"]]),
    "+missing_concept": (("missing_concept",), _ev("missing_concept")),
    "+context_coverage": (("context_coverage",), _ev("context_coverage")),
    "+both": (("missing_concept", "context_coverage"), lambda r: _ev("missing_concept")(r) + _ev("context_coverage")(r)),
    "+aligned_coverage": (("aligned_inputs",), lambda r: [_PASSAGE(r)]),
    "+aligned_coverage (rendering x0.75)": (("aligned_inputs",), lambda r: [_PASSAGE_075(r)]),
    "+aligned_sentence_coverage": (("aligned_inputs",), lambda r: [_SENTENCE(r)]),
    "+aligned_coverage, +cross×aligned": (("aligned_inputs",), lambda r: [_PASSAGE(r), float(bool(r["evidence"].get("cross_lingual"))) * _PASSAGE(r)]),
    "+relevance (trained cross-encoder, --relevance)": (("relevance",), _ev("relevance")),
    "+relevance, +cross×relevance": (("relevance",), lambda r: _ev("relevance")(r) + [_cross(r) * r["evidence"]["relevance"]]),
    "+relevance, +zh×relevance": (("relevance",), lambda r: _ev("relevance")(r) + [_zh(r) * r["evidence"]["relevance"]]),
    "+token recall, sentence (layer 12)": (("token_sentence_12",), _ev("token_sentence_12")),
    "+token recall, passage (layer 12)": (("token_passage_12",), _ev("token_passage_12")),
    "+token recall, sentence (layer 10)": (("token_sentence_10",), _ev("token_sentence_10")),
    "+token recall, passage (layer 8)": (("token_passage_8",), _ev("token_passage_8")),
    "+token recall, sentence and passage (layer 12)": (("token_sentence_12",), lambda r: _ev("token_sentence_12")(r) + _ev("token_passage_12")(r)),
    "+token recall (product: first passage, --token-recall)": (("token_recall",), _ev("token_recall")),
    "+token recall, sentence, +cross×it (layer 12)": (("token_sentence_12",), lambda r: _ev("token_sentence_12")(r) + [
        _cross(r) * r["evidence"]["token_sentence_12"]]),
}
RELEVANCE_ONLY = {  # the trained model's log-odds alone, and beside the dense evidence only
    "relevance alone": (("relevance",), _ev("relevance")),
    "relevance + dense_z + dense_gap_z + cross_lingual": (("relevance",), lambda r: _ev("relevance")(r) + [
        r["evidence"]["dense_z"], r["evidence"]["dense_gap_z"], _cross(r)]),
}


def _cross(r) -> float:
    return float(bool(r["evidence"].get("cross_lingual")))


def _score_recorded_passages(rows: list[dict], cache_path: Path, score) -> list:
    """`score(question, passages)` of each case's recorded context passages (what `ask` hands the
    quote), one value per row, cached in `cache_path` by the question and passages' text."""
    cache = json.loads(cache_path.read_text()) if cache_path.exists() else {}
    values = []
    for r in rows:
        inputs = r["evidence"].get("aligned_inputs") or {}
        passages = [h["text"] for h in inputs.get("hits") or []]
        key = hashlib.sha256(json.dumps([inputs.get("question"), passages], ensure_ascii=False).encode()).hexdigest()
        if key not in cache:
            cache[key] = score(inputs.get("question", ""), passages)
        values.append(cache[key])
    cache_path.write_text(json.dumps(cache))
    return values


def add_relevance(rows: list[dict], weights: Path, cache_dir: Path | None) -> None:
    """The relevance model's best log-odds over each case's recorded context passages, as
    evidence field `relevance`; cached beside the records per weights file."""
    from relevance_model import RelevanceModel, best_relevance, builtin_e5_dir

    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    model = None

    def score(question: str, passages: list[str]) -> float:
        nonlocal model
        model = model or RelevanceModel(builtin_e5_dir(), weights)
        return best_relevance(question, passages, model)

    values = _score_recorded_passages(rows, (cache_dir or weights.parent) / f"relevance_{digest}.json", score)
    for r, value in zip(rows, values):
        r["evidence"]["relevance"] = value


def add_token_alignment(rows: list[dict], cache_dir: Path | None) -> None:
    """Token recall (bench/token_alignment.py) of the question in each case's recorded context
    passages, per layer, as evidence fields `token_sentence_L` / `token_passage_L`; cached."""
    from relevance_model import builtin_e5_dir
    from token_alignment import LAYERS, TokenAligner

    aligner = None

    def score(question: str, passages: list[str]) -> dict:
        nonlocal aligner
        if not passages:
            return {str(layer): (0.0, 0.0) for layer in LAYERS}
        aligner = aligner or TokenAligner(str(builtin_e5_dir()))
        return {str(layer): v for layer, v in aligner.scores(question, passages).items()}

    values = _score_recorded_passages(rows, (cache_dir or REPO / "bench" / "results") / "token_alignment.json", score)
    for r, layers in zip(rows, values):
        for layer, (sentence, passage) in layers.items():
            r["evidence"][f"token_sentence_{layer}"], r["evidence"][f"token_passage_{layer}"] = sentence, passage


def add_token_recall(rows: list[dict], cache_dir: Path | None, onnx: bool = True) -> None:
    """The product's token recall (query/token_recall.py: int8 ONNX states, or numpy fp32 with
    onnx=False) of the question in each case's first recorded context passage, as `token_recall`."""
    from dataclasses import replace

    from rag_pipeline.config import Settings
    from rag_pipeline.embedding.encoder import encoder_for
    from rag_pipeline.embedding.query_encoder import supported_layout
    from rag_pipeline.query.token_recall import TokenStates
    from relevance_model import builtin_e5_dir

    settings = Settings()
    identity = encoder_for(settings).identity
    onnx_path = settings.model_cache_dir / "onnx" / f"{replace(identity, precision='int8-onnx').key}.onnx"
    folder = builtin_e5_dir()
    states = TokenStates(folder, supported_layout(folder), onnx_path if onnx else None)

    def score(question: str, passages: list[str]) -> float:
        return states.recall(question, passages[0], identity.query_prompt, identity.passage_prompt) if passages else 0.0

    name = f"token_recall_{states.backend}.json"
    values = _score_recorded_passages(rows, (cache_dir or REPO / "bench" / "results") / name, score)
    for r, value in zip(rows, values):
        r["evidence"]["token_recall"] = value


def auc(rows: list[dict], key: str) -> float:
    """How often an answerable case's `key` exceeds an unanswerable one's (ties half)."""
    pos = np.array([float(r["evidence"].get(key) or 0.0) for r in rows if r["answerable"]])[:, None]
    neg = np.array([float(r["evidence"].get(key) or 0.0) for r in rows if not r["answerable"]])[None, :]
    return float(((pos > neg) + 0.5 * (pos == neg)).mean()) if pos.size and neg.size else float("nan")


def print_aucs(bench: list[dict], sample: list[dict], corpus: list[dict], keys: list[str]) -> None:
    groups = {f"{name} (fit half)": [r for r in bench if r["set"] == name] for name in sorted({r["set"] for r in bench})}
    groups |= {"sample golden fit half": [r for r in sample if r["half"] == "fit"],
               "sample golden report half": [r for r in sample if r["half"] == "report"],
               "sample golden cross-lingual": [r for r in sample if r.get("kind") == "cross-lingual"],
               "corpus golden (held out)": corpus,
               "corpus golden zh / en": None,
               "corpus golden cross-lingual": [r for r in corpus if r.get("kind") == "cross-lingual"]}
    print("| cases | n | " + " | ".join(keys) + " |")
    print("|---|---:|" + "---:|" * len(keys))
    for name, rows in groups.items():
        if rows is None:
            zh, en = ([r for r in corpus if r["lang"] == lang] for lang in ("zh", "en"))
            print(f"| {name} | {len(zh)} / {len(en)} | " + " | ".join(f"{auc(zh, k):.3f} / {auc(en, k):.3f}" for k in keys) + " |")
        else:
            print(f"| {name} | {len(rows)} | " + " | ".join(f"{auc(rows, k):.3f}" for k in keys) + " |")
    print()


FOLD_SEEDS = ("gate-cv-1", "gate-cv-2")  # the second seed: how much the folds alone move a column


def _fit(rows, features):
    X = np.array([features(r) for r in rows], float)
    y = np.array([float(r["answerable"]) for r in rows])
    w = np.where(y == 1, len(y) / (2 * y.sum()), len(y) / (2 * (len(y) - y.sum())))
    mean, std = X.mean(0), X.std(0)
    std[std == 0] = 1.0
    Z = np.hstack([np.ones((len(y), 1)), (X - mean) / std])
    beta, ridge = np.zeros(Z.shape[1]), np.r_[0.0, np.full(Z.shape[1] - 1, L2)]
    for _ in range(NEWTON_STEPS):
        p = 1 / (1 + np.exp(-Z @ beta))
        beta -= np.linalg.solve((Z * (w * p * (1 - p))[:, None]).T @ Z + np.diag(ridge), Z.T @ (w * (p - y)) + ridge * beta)
    weights = beta[1:] / std
    return weights, beta[0] - float(weights @ mean)


def _scored(r) -> bool:
    return bool(r["evidence"].get("candidates")) and not r["evidence"].get("unknown_identifiers")


def _refuses(r, features, model) -> bool:
    return not _scored(r) or model[1] + float(model[0] @ np.array(features(r))) < 0


def _rates(rows, refused) -> tuple[float, float, float]:
    """False refusal, false answer, right (answered with the fact, or refused when none fits)."""
    pos = [r for r in rows if r["answerable"]]
    neg = [r for r in rows if not r["answerable"]]
    contains = [bool(r.get("answer_contains", r.get("contains"))) for r in pos]
    right = sum(c and not refused[id(r)] for c, r in zip(contains, pos)) + sum(refused[id(r)] for r in neg)
    return (sum(refused[id(r)] for r in pos) / len(pos), sum(not refused[id(r)] for r in neg) / len(neg), right / len(rows))


def record(into: Path, parts=("bench", "golden")) -> None:
    """Re-record the fit-half benchmark cases and both golden sets into `into` (see the docstring)."""
    import answerability
    import refusal_gate
    from fusion_sweep import SETS, half

    from rag_pipeline.eval.beir import load_beir
    from rag_pipeline.eval.golden import evaluate_question, load_golden
    from rag_pipeline.eval.retrieval import open_benchmark_index
    from rag_pipeline.query import RagIndex
    from rag_pipeline.query import api as api_module
    from rag_pipeline.query.answer import RefusalPolicy

    refuse_all = RefusalPolicy(min_score=float("inf"))
    captured: dict = {}
    real_coverage, real_reason = api_module.best_sentence_coverage, api_module.refusal_reason

    def coverage(question, hits, term_weights, groups=None):
        if groups is None:  # ask's first call: the question's own words over the context hits
            captured.update(question=question, hits=[{"text": h["text"], "language": h["language"]} for h in hits],
                            weights=dict(term_weights))
        return real_coverage(question, hits, term_weights, groups)

    def reason(evidence, policy):
        # {} when ask had no context hits; ask's second look at the gate (after the quote states a
        # number) must keep what the first recorded, not replace it with {}
        evidence.setdefault("aligned_inputs", dict(captured))
        captured.clear()
        return real_reason(evidence, policy)

    api_module.best_sentence_coverage, api_module.refusal_reason = coverage, reason
    into.mkdir(parents=True, exist_ok=True)
    sets = list(SETS[:2]) + [answerability.scifact_subset(160)] if "bench" in parts else []
    for name, folder, queries_file in sets:
        dataset = load_beir(folder, queries_file=queries_file)
        index = open_benchmark_index(dataset, progress=False)
        answers = answerability.answers_of(folder, queries_file)
        ids = [q for q in sorted(q for q in dataset.queries if dataset.qrels.get(q)) if half(q) == "fit"][:80]  # --limit 160's fit half
        path = into / f"{name.replace(' ', '_').replace('→', '-')}.jsonl"
        with path.open("w", encoding="utf-8") as out:
            for qid in ids:
                gold = [d for d, rel in dataset.qrels[qid].items() if rel > 0]
                expected = answers.get(qid) or []
                for answerable, where in ((True, None), (False, answerability.without(gold))):
                    index.policy = answerability.ALWAYS_ANSWER if answerable and expected else refuse_all
                    answer = index.ask(dataset.queries[qid], where=where)
                    out.write(json.dumps({
                        "id": qid, "set": name, "half": "fit", "question": dataset.queries[qid], "answerable": answerable,
                        "contains": bool(expected) and any(a in answer.answer for a in expected), "evidence": answer.evidence,
                    }, ensure_ascii=False) + "\n")
        print(f"wrote {path}", file=sys.stderr)
    for golden, lake in (SAMPLE, CORPUS) if "golden" in parts else ():
        index = RagIndex.open(lake)
        rows = []
        for q in load_golden(golden):
            index.policy = answerability.ALWAYS_ANSWER if q["answerable"] else refuse_all
            rows.append({**evaluate_question(index, q), "set": golden.stem, "half": q.get("split") or refusal_gate.golden_half(q["id"])})
        (into / f"golden_{golden.stem}.json").write_text(json.dumps(rows, ensure_ascii=False))
        print(f"wrote golden_{golden.stem}.json", file=sys.stderr)


def load_records(folder: Path):
    bench = []
    for path in sorted(folder.glob("*.jsonl")):
        bench += [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    sample, corpus = (json.loads((folder / f"golden_{golden.stem}.json").read_text()) for golden, _ in (SAMPLE, CORPUS))
    return bench, sample, corpus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, help="re-record the cases into this folder and stop")
    parser.add_argument("--part", choices=("bench", "golden"), action="append", help="--record only these (two processes)")
    parser.add_argument("--seeds", type=int, default=0, help="also: each candidate's CV right minus shipped's, over this many fold seeds")
    parser.add_argument("--records", type=Path, help="read the cases recorded by --record from this folder")
    parser.add_argument("--relevance", type=Path, help="score the recorded context passages with these relevance weights "
                        "(bench/train_relevance.py) and try them as gate evidence")
    parser.add_argument("--token-alignment", action="store_true", help="score the recorded context passages by token "
                        "recall (bench/token_alignment.py), print each feature's AUC and try them as gate evidence")
    parser.add_argument("--token-recall", choices=("onnx", "numpy"), help="score the first recorded context passage by "
                        "the product's token recall (query/token_recall.py) on this backend and try it as gate evidence")
    args = parser.parse_args()
    if args.record:
        record(args.record, tuple(args.part or ("bench", "golden")))
        return 0
    if args.records:
        bench, sample, corpus = load_records(args.records)
    else:
        bench = load_benchmark()
        sample, corpus = collect_golden(*SAMPLE), collect_golden(*CORPUS)
    if args.relevance:
        add_relevance(bench + sample + corpus, args.relevance, args.records)
    if args.token_alignment:
        add_token_alignment(bench + sample + corpus, args.records)
    if args.token_recall:
        add_token_recall(bench + sample + corpus, args.records, onnx=args.token_recall == "onnx")
    for r in bench:
        r.setdefault("lang", detect_language(r["question"]) if detect_language(r["question"]) == "zh" else "en")
    if args.token_alignment or args.relevance or args.token_recall:
        from token_alignment import LAYERS

        keys = ["lexical_coverage", "sentence_coverage", "dense_z", "dense_gap_z"] + (["relevance"] if args.relevance else [])
        keys += [f"token_{unit}_{layer}" for unit in ("sentence", "passage") for layer in LAYERS] if args.token_alignment else []
        keys += ["token_recall"] if args.token_recall else []
        print_aucs(bench, sample, corpus, keys)
    fit_rows = [r for r in bench if r["half"] == "fit"] + [r for r in sample if r["half"] == "fit"]
    with_answers = [r for r in fit_rows if r["set"] != "scifact-subset"]  # SciFact has no answer strings
    folds = {seed: {id(r): int(hashlib.sha256(f"{seed}:{r['set']}:{r['id']}:{r['answerable']}".encode()).hexdigest(), 16) % FOLDS
                    for r in fit_rows} for seed in FOLD_SEEDS}
    print(f"{len(fit_rows)} fit-half cases, {FOLDS}-fold CV; report: sample golden report half, corpus golden (held out)\n")
    print("| features | CV fit false refusal | CV fit false answer | CV fit right | sample report right | held-out FR | held-out FA | held-out right |"
          " CV right, fold seed 2 | Δ right per fold vs shipped (seed 1; seed 2) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    candidates = {name: (needs, lambda r, extra=extra: gate_features(r["evidence"]) + extra(r)) for name, (needs, extra) in CANDIDATES.items()}
    candidates |= FULL | RELEVANCE_ONLY
    base_fold_right = {}
    for name, (needs, features) in candidates.items():
        if any(key not in r["evidence"] for key in needs for r in fit_rows):
            continue
        per_seed = {}
        for seed, fold in folds.items():
            refused = {}
            for k in range(FOLDS):
                model = _fit([r for r in fit_rows if fold[id(r)] != k and _scored(r)], features)
                refused |= {id(r): _refuses(r, features, model) for r in fit_rows if fold[id(r)] == k}
            fold_right = [_rates([r for r in with_answers if fold[id(r)] == k], refused)[2] for k in range(FOLDS)]
            per_seed[seed] = (_rates(fit_rows, refused), _rates(with_answers, refused)[2], fold_right)
        (fr, fa, _), cv_right, _ = per_seed[FOLD_SEEDS[0]]
        if name == "shipped":
            base_fold_right = {seed: v[2] for seed, v in per_seed.items()}
        deltas = "; ".join(" ".join(f"{a - b:+.2f}" for a, b in zip(per_seed[seed][2], base_fold_right[seed])) for seed in FOLD_SEEDS)
        model = _fit([r for r in fit_rows if _scored(r)], features)
        report = [r for r in sample if r["half"] == "report"]
        s_right = _rates(report, {id(r): _refuses(r, features, model) for r in report})[2]
        h = _rates(corpus, {id(r): _refuses(r, features, model) for r in corpus})
        print(f"| {name} | {fr:.3f} | {fa:.3f} | {cv_right:.3f} | {s_right:.3f} | {h[0]:.3f} | {h[1]:.3f} | {h[2]:.3f} |"
              f" {per_seed[FOLD_SEEDS[1]][1]:.3f} | {deltas} |")
    if args.seeds:
        print(f"\nCV fit right minus shipped's, paired, over {args.seeds} fold seeds (gate-cv-s0…):\n")
        print("| features | mean Δ right | min Δ | max Δ |")
        print("|---|---|---|---|")
        usable = {n: f for n, (needs, f) in candidates.items() if not any(key not in r["evidence"] for key in needs for r in fit_rows)}
        rights = {n: [] for n in usable}
        for s in range(args.seeds):
            fold = {id(r): int(hashlib.sha256(f"gate-cv-s{s}:{r['set']}:{r['id']}:{r['answerable']}".encode()).hexdigest(), 16) % FOLDS
                    for r in fit_rows}
            for name, features in usable.items():
                refused = {}
                for k in range(FOLDS):
                    model = _fit([r for r in fit_rows if fold[id(r)] != k and _scored(r)], features)
                    refused |= {id(r): _refuses(r, features, model) for r in fit_rows if fold[id(r)] == k}
                rights[name].append(_rates(with_answers, refused)[2])
        for name, values in rights.items():
            delta = np.array(values) - np.array(rights["shipped"])
            print(f"| {name} | {delta.mean():+.4f} | {delta.min():+.3f} | {delta.max():+.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
