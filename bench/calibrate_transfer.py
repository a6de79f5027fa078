"""Does `rag calibrate`'s refit carry to unseen questions? Fit on one golden set, read another.

    .venv/bin/python bench/calibrate_transfer.py --sample-lake /tmp/sample_lake --corpus-lake /tmp/corpus_lake

Records the gate's evidence for every question of the sample golden set (on its lake) and of the
corpus golden set (on its lake) with `eval.calibrate.collect_evidence` (~2 min), then replays:

* the shipped gate (`RefusalPolicy()`);
* the refit `rag calibrate` makes (`eval.calibrate.fit`: class-balanced logistic regression, ridge
  toward zero on standardized weights) at several ridge strengths;
* the same refit with its ridge pulling toward the shipped weights instead of zero (a prior).

Fitted on the sample set's fit half, reported on its report half and on the whole corpus set;
then fitted on the corpus set's fit half and reported on both report halves. Each refit's leave-one-out error
on its own fit questions is printed beside it: `rag calibrate` stores a refit only when that
error (false-refusal rate + false-answer rate) is below the current gate's on the same questions.
`right` counts a refusal of an unanswerable question and an answer to an answerable one (not
whether the answer holds the fact: `rag eval` reads that).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rag_pipeline.eval.calibrate import (  # noqa: E402
    NEWTON_STEPS, balanced_error, fit, newton_logistic, outcome, policy_from, standardized,
)
from rag_pipeline.query.answer import RefusalPolicy, refusal_reason  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


def fit_toward(samples: list[dict], prior: RefusalPolicy, l2: float) -> RefusalPolicy:
    """`eval.calibrate.fit` with the ridge pulling the standardized weights toward `prior`'s."""
    Z, y, sample_w, mean, std = standardized(samples)
    center = np.concatenate([[prior.intercept + float(np.array(prior.weights) @ mean)], np.array(prior.weights) * std])
    return policy_from(newton_logistic(Z, y, sample_w, np.full(Z.shape[1], l2), center, steps=NEWTON_STEPS * 2), mean, std)


def error(samples: list[dict], policy: RefusalPolicy) -> float:
    n_pos = sum(s["answerable"] for s in samples)
    return balanced_error(outcome(samples, policy), n_pos, len(samples) - n_pos, 1.0)


def loo_error(samples: list[dict], fitter) -> float:
    fr = fa = 0
    for i, held in enumerate(samples):
        refused = refusal_reason(held["evidence"], fitter(samples[:i] + samples[i + 1:])) is not None
        fr += held["answerable"] and refused
        fa += (not held["answerable"]) and not refused
    n_pos = sum(s["answerable"] for s in samples)
    return balanced_error((fr, fa), n_pos, len(samples) - n_pos, 1.0)


def cell(samples: list[dict], policy: RefusalPolicy) -> str:
    fr, fa = outcome(samples, policy)
    n_pos = sum(s["answerable"] for s in samples)
    n_neg = len(samples) - n_pos
    return f"{(n_pos - fr + n_neg - fa) / len(samples):.3f} ({fr / n_pos:.3f} / {fa / n_neg:.3f})"


def print_table(variants, fit_on: list[dict], reports: dict[str, list[dict]]) -> None:
    shipped = RefusalPolicy()
    print("| gate | leave-one-out error where fitted | shipped gate's error there | " + " | ".join(reports) + " |")
    print("|---|---:|---:|" + "---|" * len(reports))
    for name, fitter in variants:
        policy = shipped if fitter is None else fitter(fit_on)
        loo = "–" if fitter is None else f"{loo_error(fit_on, fitter):.3f}"
        cells = " | ".join(cell(samples, policy) for samples in reports.values())
        print(f"| {name} | {loo} | {error(fit_on, shipped):.3f} | {cells} |")


def record(golden: Path, lake: str) -> list[dict]:
    from rag_pipeline.eval.calibrate import collect_evidence
    from rag_pipeline.eval.golden import load_golden
    from rag_pipeline.query import RagIndex

    questions = load_golden(golden)
    return [{**s, "split": q.get("split")} for q, s in zip(questions, collect_evidence(RagIndex.open(lake), questions))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample-lake", required=True, help="a lake indexed from data/sample")
    p.add_argument("--corpus-lake", required=True, help="a lake indexed from ../shared/corpus")
    args = p.parse_args(argv)
    sample = record(REPO / "data/golden/sample_golden.jsonl", args.sample_lake)
    corpus = record(REPO / "data/golden/corpus_golden.jsonl", args.corpus_lake)
    fit_half = [s for s in sample if s["split"] == "fit"]
    report_half = [s for s in sample if s["split"] == "report"]
    corpus_fit = [s for s in corpus if s["split"] == "fit"]  # as `rag calibrate` fits a set with splits
    corpus_report = [s for s in corpus if s["split"] == "report"]
    shipped = RefusalPolicy()
    variants = [("shipped gate (no refit)", None)]
    variants += [(f"refit, ridge {l2} toward zero" + (" (`rag calibrate`)" if l2 == 1 else ""),
                  lambda s, l2=l2: fit(s, l2=l2)) for l2 in (1, 10, 100)]
    variants += [(f"refit, ridge {l2} toward the shipped weights", lambda s, l2=l2: fit_toward(s, shipped, l2))
                 for l2 in (1, 10, 100)]
    print(f"right (false refusal / false answer); fitted on the sample fit half ({len(fit_half)} questions)")
    print_table(variants, fit_half, {"sample report half": report_half, "corpus (held out)": corpus})
    print(f"\nfitted on the corpus set's fit half ({len(corpus_fit)} questions)")
    print_table(variants, corpus_fit, {"sample report half": report_half, "corpus report half": corpus_report})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
