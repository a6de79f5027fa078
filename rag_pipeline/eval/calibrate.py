"""`rag calibrate`: fit the refusal thresholds on a golden set and store them with the index.

e5 cosines are compressed (unrelated text ≈ 0.83), so no fixed threshold transfers between
corpora or models. The two pieces of evidence `RefusalPolicy` reads (keyword coverage, dense
margin over the corpus background) are recorded once per golden question; fitting replays the
policy on them over a grid, so it costs no retrieval. The fitted thresholds go to
`<lake>/refusal_policy.json` with the model key they were fitted for; `RagIndex.open` uses them
while the served model matches. A few dozen questions fit a policy noisily, so the report also
gives leave-one-out error rates: the honest estimate for questions the fit has not seen.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from rag_pipeline.query.answer import RefusalPolicy, refusal_reason

COVERAGE_GRID = [c / 20 for c in range(2, 21)] + [1.01]  # 1.01: never answer on keyword evidence alone
MARGIN_GRID = [m / 200 for m in range(0, 41)] + [1.0]  # 1.0: never answer on dense evidence alone


def collect_evidence(index, questions: list[dict]) -> list[dict]:
    """What the refusal policy sees for each question (hybrid retrieval, as `ask` does)."""
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


def _grid() -> list[RefusalPolicy]:
    return [RefusalPolicy(min_lexical_coverage=c, min_dense_margin=m) for c in COVERAGE_GRID for m in MARGIN_GRID]


def fit(samples: list[dict], false_answer_cost: float = 1.0) -> RefusalPolicy:
    """The grid policy with the least cost (false refusals + cost × false answers).

    Ties (common: many thresholds separate a small set equally well) go to the policy nearest the
    middle of the tied region, which generalizes better than its edge.
    """
    scored = [(fr + false_answer_cost * fa, fa, p) for p in _grid() for fr, fa in [outcome(samples, p)]]
    best_cost, best_fa = min((c, fa) for c, fa, _ in scored)
    tied = [p for c, fa, p in scored if c == best_cost and fa == best_fa]
    mid_c = sorted(p.min_lexical_coverage for p in tied)[len(tied) // 2]
    mid_m = sorted(p.min_dense_margin for p in tied)[len(tied) // 2]
    return min(tied, key=lambda p: (abs(p.min_lexical_coverage - mid_c) + abs(p.min_dense_margin - mid_m), p.min_lexical_coverage))


def tradeoff(samples: list[dict]) -> list[dict]:
    """The Pareto front: for each number of false answers, the fewest false refusals reachable."""
    best: dict[int, tuple[int, RefusalPolicy]] = {}
    for p in _grid():
        fr, fa = outcome(samples, p)
        if fa not in best or fr < best[fa][0]:
            best[fa] = (fr, p)
    front, lowest_fr = [], None
    for fa in sorted(best):
        fr, p = best[fa]
        if lowest_fr is None or fr < lowest_fr:
            front.append({"false_answers": fa, "false_refusals": fr, **_thresholds(p)})
            lowest_fr = fr
    return front


def leave_one_out(samples: list[dict], false_answer_cost: float = 1.0) -> tuple[int, int]:
    """(false refusals, false answers) when each question is judged by a policy fitted without it."""
    fr = fa = 0
    for i, held in enumerate(samples):
        policy = fit(samples[:i] + samples[i + 1 :], false_answer_cost)
        refused = refusal_reason(held["evidence"], policy) is not None
        fr += held["answerable"] and refused
        fa += (not held["answerable"]) and not refused
    return fr, fa


def _thresholds(p: RefusalPolicy) -> dict:
    return {"min_lexical_coverage": p.min_lexical_coverage, "min_dense_margin": p.min_dense_margin}


def calibrate(index, questions: list[dict], golden_path: Path, false_answer_cost: float = 1.0) -> dict:
    """Fit, evaluate and describe a policy for `index` (the record `refusal_policy.json` holds)."""
    samples = collect_evidence(index, questions)
    policy = fit(samples, false_answer_cost)
    n_pos = sum(s["answerable"] for s in samples)
    n_neg = len(samples) - n_pos
    fr, fa = outcome(samples, policy)
    before = outcome(samples, index.policy)
    loo_fr, loo_fa = leave_one_out(samples, false_answer_cost)
    rate = lambda n, d: round(n / d, 4) if d else None  # noqa: E731
    return {
        **_thresholds(policy),
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
        "previous": {**_thresholds(index.policy), "false_refusal": rate(before[0], n_pos), "false_answer": rate(before[1], n_neg)},
        "tradeoff": tradeoff(samples),
    }


def format_calibration(record: dict, saved_to: str | None) -> str:
    fitted, loo, prev = record["fitted"], record["leave_one_out"], record["previous"]
    lines = [
        f"refusal policy fitted on {record['fitted_on']['questions']} golden questions "
        f"(generation {record['fitted_on']['generation']}, model {record['model_key']})",
        f"  min_lexical_coverage {record['min_lexical_coverage']}, min_dense_margin {record['min_dense_margin']}",
        f"  on the set:     false refusal {fitted['false_refusal']:.3f}, false answer {fitted['false_answer']:.3f}",
        f"  leave-one-out:  false refusal {loo['false_refusal']:.3f}, false answer {loo['false_answer']:.3f}",
        f"  previous policy ({prev['min_lexical_coverage']}, {prev['min_dense_margin']}): "
        f"false refusal {prev['false_refusal']:.3f}, false answer {prev['false_answer']:.3f}",
        "",
        "trade-off (fewest false refusals for each number of false answers):",
        "| false answers | false refusals | min_lexical_coverage | min_dense_margin |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {t['false_answers']} | {t['false_refusals']} | {t['min_lexical_coverage']} | {t['min_dense_margin']} |"
        for t in record["tradeoff"]
    ]
    lines.append(f"\nsaved to {saved_to}" if saved_to else "\nnot saved (--dry-run)")
    return "\n".join(lines)
