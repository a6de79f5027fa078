"""Should the refusal gate get another feature? 5-fold cross-validation on the fit halves decides.

    .venv/bin/python bench/gate_feature_cv.py          # after bench/answerability.py and refusal_gate.py

bench/refusal_gate.py fits the shipped gate on the fit halves and reports the rest; comparing
feature sets by their in-sample fit would favour every added feature. Here each candidate set is
fitted on four fifths of the fit-half cases and scored on the fifth (folds by a seeded hash of the
case), the same class-balanced ridge logistic regression as `rag_pipeline.eval.calibrate.fit`.
Only the cross-validated fit columns choose; the sample report half and the held-out corpus golden
set are printed for the record (a gain seen only there does not count). Candidates whose evidence
fields the recorded cases lack are skipped: the evidence comes from the code that recorded it.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from rag_pipeline.eval.calibrate import L2, NEWTON_STEPS  # noqa: E402
from rag_pipeline.ingest.language import detect_language  # noqa: E402
from rag_pipeline.query.answer import gate_features  # noqa: E402

from refusal_gate import collect_golden, load_benchmark  # noqa: E402

FOLDS = 5
SAMPLE = (REPO / "data/golden/sample_golden.jsonl", Path(os.environ.get("RAG_BENCH_SAMPLE_LAKE", "/tmp/sample_lake")))
CORPUS = (REPO / "data/golden/corpus_golden.jsonl", Path(os.environ.get("RAG_BENCH_CORPUS_LAKE", "/tmp/corpus_lake")))


def _ev(key):
    return lambda r: [float(r["evidence"].get(key) or 0.0)]


def _zh(r) -> float:
    return float(r["lang"] == "zh")


CANDIDATES = {  # name: (evidence fields needed, extra features beyond GATE_FEATURES)
    "shipped": ((), lambda r: []),
    "+zh": ((), lambda r: [_zh(r)]),
    "+zh×coverage": ((), lambda r: [_zh(r), _zh(r) * r["evidence"]["sentence_coverage"], _zh(r) * r["evidence"]["lexical_coverage"]]),
    "+zh×dense": ((), lambda r: [_zh(r), _zh(r) * r["evidence"]["dense_z"], _zh(r) * r["evidence"]["dense_gap_z"]]),
    "+missing_concept": (("missing_concept",), _ev("missing_concept")),
    "+context_coverage": (("context_coverage",), _ev("context_coverage")),
    "+both": (("missing_concept", "context_coverage"), lambda r: _ev("missing_concept")(r) + _ev("context_coverage")(r)),
}


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


def main() -> int:
    bench = load_benchmark()
    for r in bench:
        r.setdefault("lang", detect_language(r["question"]) if detect_language(r["question"]) == "zh" else "en")
    sample, corpus = collect_golden(*SAMPLE), collect_golden(*CORPUS)
    fit_rows = [r for r in bench if r["half"] == "fit"] + [r for r in sample if r["half"] == "fit"]
    with_answers = [r for r in fit_rows if r["set"] != "scifact-subset"]  # SciFact has no answer strings
    fold = {id(r): int(hashlib.sha256(f"gate-cv-1:{r['set']}:{r['id']}:{r['answerable']}".encode()).hexdigest(), 16) % FOLDS for r in fit_rows}
    print(f"{len(fit_rows)} fit-half cases, {FOLDS}-fold CV; report: sample golden report half, corpus golden (held out)\n")
    print("| features | CV fit false refusal | CV fit false answer | CV fit right | sample report right | held-out FR | held-out FA | held-out right |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (needs, extra) in CANDIDATES.items():
        if any(key not in r["evidence"] for key in needs for r in fit_rows):
            continue
        features = lambda r, extra=extra: gate_features(r["evidence"]) + extra(r)
        refused = {}
        for k in range(FOLDS):
            model = _fit([r for r in fit_rows if fold[id(r)] != k and _scored(r)], features)
            refused |= {id(r): _refuses(r, features, model) for r in fit_rows if fold[id(r)] == k}
        fr, fa, _ = _rates(fit_rows, refused)
        cv_right = _rates(with_answers, refused)[2]
        model = _fit([r for r in fit_rows if _scored(r)], features)
        report = [r for r in sample if r["half"] == "report"]
        s_right = _rates(report, {id(r): _refuses(r, features, model) for r in report})[2]
        h = _rates(corpus, {id(r): _refuses(r, features, model) for r in corpus})
        print(f"| {name} | {fr:.3f} | {fa:.3f} | {cv_right:.3f} | {s_right:.3f} | {h[0]:.3f} | {h[1]:.3f} | {h[2]:.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
