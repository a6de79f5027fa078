"""The quality gate between a staged generation and its promotion: pure comparisons.

A staged generation is compared with the generation being served (its golden-set report is the
baseline), so the baseline follows every promotion and rollback without a file to maintain. Both
are scored on the same questions: those whose expected sources are all served in both. A
withdrawn or deleted document therefore never blocks promotion (its questions drop out); a
pipeline change that answers the same content worse does.
"""

from __future__ import annotations

from rag_pipeline.eval.golden import summarize

# metric → +1 when higher is better, -1 when lower is better. Refusals are gated as one error rate
# (false refusals + false answers over all questions): a corpus change that moves the refusal
# evidence trades one kind for the other, and only a net loss is a regression.
GATED_METRICS = {"hit@5": 1, "mrr@10": 1, "citation_accuracy": 1, "refusal_error": -1}
# The refusal evidence is corpus-relative (the dense margin is measured against the corpus's own
# background), so adding unrelated documents moves borderline questions: it gets twice the slack.
TOLERANCE_FACTOR = {"refusal_error": 2.0}
DETAIL_KEYS = ("id", "answerable", "refused", "hit@5", "page_hit@5", "first_expected_rank", "cited_expected", "answer_contains")


def eligible(questions: list[dict], served_sources: set[str]) -> list[dict]:
    """Unanswerable questions, and answerable ones whose every expected source is served."""
    return [q for q in questions if not q["answerable"] or set(q["expected_sources"]) <= served_sources]


def compact(details: list[dict]) -> list[dict]:
    """What the gate needs of each judged question (the report keeps no answer text)."""
    return [{k: d[k] for k in DETAIL_KEYS} for d in details]


def scores(details: list[dict]) -> dict:
    """The golden summary plus `refusal_error`: the share of questions refused or answered wrongly."""
    wrong = sum(d["refused"] == d["answerable"] for d in details)
    return {**summarize(details), "refusal_error": round(wrong / len(details), 4) if details else None}


def compare(current: list[dict], baseline: list[dict], tolerance: float) -> tuple[list[str], dict, dict]:
    """(regressions, current summary, baseline summary) over the questions both reports judged.

    A regression is a gated metric worse than the baseline's by more than `tolerance`.
    """
    common = {d["id"] for d in current} & {d["id"] for d in baseline}
    now = scores([d for d in current if d["id"] in common])
    before = scores([d for d in baseline if d["id"] in common])
    problems = []
    for metric, direction in GATED_METRICS.items():
        if now.get(metric) is None or before.get(metric) is None:
            continue
        slack = tolerance * TOLERANCE_FACTOR.get(metric, 1.0) + 1e-9  # rates are rounded to 4 places
        if direction * (now[metric] - before[metric]) < -slack:
            problems.append(f"{metric} {before[metric]:.3f} → {now[metric]:.3f}")
    return problems, now, before
