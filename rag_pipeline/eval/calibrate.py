"""`rag calibrate`: fit the refusal gate on a golden set and store it with the index.

The gate (`RefusalPolicy`) is a logistic model over scale-free evidence (term coverage of the
best sentence and keyword hit, the best passage's standing above the asker's own background,
cross-lingual flags). The evidence is recorded once per question; fitting is a few Newton steps
on it, so it costs no retrieval. The shipped default is fitted on benchmark questions
(bench/refusal_gate.py); `rag calibrate` refits on a golden set of one's own corpus and stores
the result in `<lake>/refusal_policy.json` with the model key it was fitted for, used by
`RagIndex.open` while the served model matches. A few dozen questions fit noisily, so the
report also gives leave-one-out error rates: the honest estimate for unseen questions, and the
refit is stored only when that estimate beats the current gate on the same questions (`replaces`):
refitted on the sample set's 119 fit-half questions, the gate answered the held-out corpus set
right 0.538 of the time against the shipped gate's 0.715, and its leave-one-out error said so
(bench/README.md, "Refusal gate", "`rag calibrate` keeps a better gate").
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from rag_pipeline.query.answer import RefusalPolicy, gate_features, refusal_reason

L2 = 1.0  # ridge on standardized weights: a few dozen questions must not yield extreme weights
NEWTON_STEPS = 25


def collect_evidence(index, questions: list[dict]) -> list[dict]:
    """What the refusal gate sees for each question (hybrid retrieval, as `ask` does)."""
    return [
        {"id": q["id"], "answerable": bool(q["answerable"]), "evidence": index.ask(q["question"]).evidence}
        for q in questions
    ]


def outcome(samples: list[dict], policy: RefusalPolicy) -> tuple[int, int]:
    """(false refusals, false answers) of `policy` on recorded evidence."""
    refused = [refusal_reason(s["evidence"], policy) is not None for s in samples]
    fr = sum(r for r, s in zip(refused, samples) if s["answerable"])
    fa = sum(not r for r, s in zip(refused, samples) if not s["answerable"])
    return fr, fa


def fit(samples: list[dict], false_answer_cost: float = 1.0, l2: float = L2) -> RefusalPolicy:
    """Class-balanced, ridge-regularized logistic regression (Newton's method) on the evidence.

    Each class weighs the same in total (a false answer `false_answer_cost` times more), so the
    even-odds threshold is the cost-balanced one and does not depend on the set's class mix.
    Questions the gate never scores (no candidates, unknown identifiers) are left out.
    """
    design = standardized(samples, false_answer_cost)
    if design is None:
        return RefusalPolicy()
    Z, y, sample_w, mean, std = design
    ridge = np.full(Z.shape[1], l2)
    ridge[0] = 0.0  # the intercept is not shrunk
    return policy_from(newton_logistic(Z, y, sample_w, ridge, np.zeros(Z.shape[1])), mean, std)


def standardized(samples: list[dict], false_answer_cost: float = 1.0):
    """(Z, y, sample weights, feature means, stds) of the questions the gate scores: Z is an
    intercept column and the standardized features, each class weighing the same in total (a false
    answer `false_answer_cost` times more); None when a class is missing."""
    scored = [s for s in samples if s["evidence"].get("candidates") and not s["evidence"].get("unknown_identifiers")]
    X = np.array([gate_features(s["evidence"]) for s in scored], dtype=float)
    y = np.array([float(s["answerable"]) for s in scored])
    n_pos, n_neg = y.sum(), len(y) - y.sum()
    if not n_pos or not n_neg:
        return None
    sample_w = np.where(y == 1, len(y) / (2 * n_pos), false_answer_cost * len(y) / (2 * n_neg))
    mean, std = X.mean(axis=0), X.std(axis=0)
    std[std == 0] = 1.0
    return np.hstack([np.ones((len(y), 1)), (X - mean) / std]), y, sample_w, mean, std


def policy_from(beta: np.ndarray, mean: np.ndarray, std: np.ndarray) -> RefusalPolicy:
    """The policy of standardized coefficients (intercept first), on the features' own scale."""
    weights = beta[1:] / std
    intercept = beta[0] - float(weights @ mean)
    return RefusalPolicy(tuple(round(float(w), 4) for w in weights), round(float(intercept), 4))


def newton_logistic(Z: np.ndarray, y: np.ndarray, sample_w: np.ndarray, ridge: np.ndarray, center: np.ndarray,
                    steps: int = NEWTON_STEPS) -> np.ndarray:
    """Weighted logistic regression coefficients with a ridge pulling them toward `center`."""
    beta = center.astype(float)
    for _ in range(steps):
        p = 1 / (1 + np.exp(-Z @ beta))
        gradient = Z.T @ (sample_w * (p - y)) + ridge * (beta - center)
        hessian = (Z * (sample_w * p * (1 - p))[:, None]).T @ Z + np.diag(ridge)
        step = np.linalg.solve(hessian, gradient)
        beta = beta - step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def tradeoff(samples: list[dict], policy: RefusalPolicy) -> list[dict]:
    """The fitted model's operating points: for each number of false answers, the fewest false
    refusals any threshold on its score reaches (an operator may prefer another than 0)."""
    best: dict[int, tuple[int, float]] = {}
    for min_score in np.arange(-4.0, 4.01, 0.25):
        candidate = RefusalPolicy(policy.weights, policy.intercept, round(float(min_score), 2))
        fr, fa = outcome(samples, candidate)
        if fa not in best or fr < best[fa][0]:
            best[fa] = (fr, candidate.min_score)
    front, lowest_fr = [], None
    for fa in sorted(best):
        fr, min_score = best[fa]
        if lowest_fr is None or fr < lowest_fr:
            front.append({"false_answers": fa, "false_refusals": fr, "min_score": min_score})
            lowest_fr = fr
    return front


def leave_one_out(samples: list[dict], false_answer_cost: float = 1.0) -> tuple[int, int]:
    """(false refusals, false answers) when each question is judged by a gate fitted without it."""
    fr = fa = 0
    for i, held in enumerate(samples):
        policy = fit(samples[:i] + samples[i + 1 :], false_answer_cost)
        refused = refusal_reason(held["evidence"], policy) is not None
        fr += held["answerable"] and refused
        fa += (not held["answerable"]) and not refused
    return fr, fa


def balanced_error(errors: tuple[int, int], n_answerable: int, n_unanswerable: int, false_answer_cost: float) -> float:
    """False-refusal rate + cost × false-answer rate: what the class-balanced fit minimizes."""
    fr, fa = errors
    return (fr / n_answerable if n_answerable else 0.0) + false_answer_cost * (fa / n_unanswerable if n_unanswerable else 0.0)


def calibrate(index, questions: list[dict], golden_path: Path, false_answer_cost: float = 1.0) -> dict:
    """Fit, evaluate and describe a policy for `index` (the record `refusal_policy.json` holds)."""
    if any(q.get("split") for q in questions):  # fit on the fit half only; `rag eval --golden` reports the other
        questions = [q for q in questions if q.get("split") == "fit"]
    samples = collect_evidence(index, questions)
    policy = fit(samples, false_answer_cost)
    n_pos = sum(s["answerable"] for s in samples)
    n_neg = len(samples) - n_pos
    fr, fa = outcome(samples, policy)
    before = outcome(samples, index.policy)
    loo_fr, loo_fa = leave_one_out(samples, false_answer_cost)
    rate = lambda n, d: round(n / d, 4) if d else None  # noqa: E731
    # unseen questions' error of the refit against the current gate's on these questions (in-sample
    # when the current gate was itself fitted on them: then a refit must beat an optimistic figure)
    refit_error = balanced_error((loo_fr, loo_fa), n_pos, n_neg, false_answer_cost)
    current_error = balanced_error(before, n_pos, n_neg, false_answer_cost)
    return {
        **policy.to_record(),
        "model_key": index.manifest["model"]["key"],
        "fitted_on": {
            "golden_file": str(golden_path),
            "golden_sha256": hashlib.sha256(Path(golden_path).read_bytes()).hexdigest(),
            "generation": index.manifest["generation"],
            "questions": len(samples),
            "answerable": n_pos,
            "false_answer_cost": false_answer_cost,
        },
        "fitted": {"false_refusal": rate(fr, n_pos), "false_answer": rate(fa, n_neg)},
        "leave_one_out": {"false_refusal": rate(loo_fr, n_pos), "false_answer": rate(loo_fa, n_neg)},
        "previous": {**index.policy.to_record(), "false_refusal": rate(before[0], n_pos), "false_answer": rate(before[1], n_neg)},
        "tradeoff": tradeoff(samples, policy),
        "replaces": {
            "refit_leave_one_out_error": round(refit_error, 4),
            "current_error": round(current_error, 4),
            "better": refit_error < current_error,
        },
    }


def format_calibration(record: dict, saved_to: str | None) -> str:
    fitted, loo, prev = record["fitted"], record["leave_one_out"], record["previous"]
    weights = ", ".join(f"{f} {w:+.3f}" for f, w in zip(record["features"], record["weights"]))
    lines = [
        f"refusal gate fitted on {record['fitted_on']['questions']} golden questions "
        f"(generation {record['fitted_on']['generation']}, model {record['model_key']})",
        f"  log-odds = {record['intercept']:+.3f} + {weights}; answer when >= {record['min_score']}",
        f"  on the set:     false refusal {fitted['false_refusal']:.3f}, false answer {fitted['false_answer']:.3f}",
        f"  leave-one-out:  false refusal {loo['false_refusal']:.3f}, false answer {loo['false_answer']:.3f}",
        f"  previous gate:  false refusal {prev['false_refusal']:.3f}, false answer {prev['false_answer']:.3f}",
        "",
        "trade-off (fewest false refusals for each number of false answers, by threshold):",
        "| false answers | false refusals | min_score |",
        "|---|---|---|",
    ]
    lines += [f"| {t['false_answers']} | {t['false_refusals']} | {t['min_score']} |" for t in record["tradeoff"]]
    lines.append(f"\n{save_note(record, saved_to)}")
    return "\n".join(lines)


def save_note(record: dict, saved_to: str | None) -> str:
    verdict = record["replaces"]
    compared = (f"leave-one-out error {verdict['refit_leave_one_out_error']:.3f} against the current gate's "
                f"{verdict['current_error']:.3f} (false-refusal rate + cost × false-answer rate)")
    if saved_to:
        return f"saved to {saved_to}: {compared}"
    if not verdict["better"]:
        return f"not saved: the refit is not expected to do better on unseen questions, {compared}; --force saves it anyway"
    return f"not saved (--dry-run): {compared}"
