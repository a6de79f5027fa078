"""The golden question set: does the product answer what it should and refuse what it can't?

Each line of the JSONL file is one question: ``id, lang, kind, question, answerable,
expected_sources`` (paths relative to the raw folder; the first is the primary one),
``expected_page`` (page of the primary source, or null) and ``answer_contains`` (short strings,
any one of which a correct answer contains). Unanswerable questions include hard negatives
(product codes and error codes that do not exist, company facts the corpus never states) so a
refusal policy is judged on the questions most likely to fool it.

Metrics (rates in [0, 1]):
  hit@5            answerable: an expected source among the top 5 search hits (hybrid)
  mrr@10           answerable: 1/rank of the first hit from an expected source, 0 beyond 10
  citation_accuracy answerable and answered: the citations include an expected source
  answer_contains  answerable: the answer contains an expected string (a refusal counts as a miss)
  false_refusal    answerable but refused
  false_answer     unanswerable but answered
  answered_correctly every question: answered with the expected text, or refused where nothing
                   answers it (the review's headline), with its 95 % Wilson interval
                   (`answered_correctly_95`): on a few hundred questions a change of one or two
                   is noise, and the interval says how much
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from pathlib import Path

from rag_pipeline.config import PROJECT_ROOT

DEFAULT_GOLDEN = PROJECT_ROOT / "data" / "golden" / "sample_golden.jsonl"
REQUIRED = ("id", "lang", "question", "answerable", "expected_sources", "expected_page", "answer_contains")
METRICS = ("hit@5", "mrr@10", "citation_accuracy", "answer_contains", "false_refusal", "false_answer", "answered_correctly")


def load_golden(path: Path = DEFAULT_GOLDEN) -> list[dict]:
    questions = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        q = json.loads(line)
        missing = [k for k in REQUIRED if k not in q]
        if missing:
            raise ValueError(f"{path}:{n}: question {q.get('id')!r} lacks {missing}")
        if q["answerable"] and not q["expected_sources"]:
            raise ValueError(f"{path}:{n}: answerable question {q['id']!r} needs expected_sources")
        questions.append(q)
    ids = Counter(q["id"] for q in questions)
    if dupes := [i for i, c in ids.items() if c > 1]:
        raise ValueError(f"{path}: duplicate ids {dupes}")
    return questions


def _squash(text: str) -> str:
    """Compare answers without caring about width, case or spacing ("15 分钟" == "15分钟")."""
    return re.sub(r"\s+", "", unicodedata.normalize("NFKC", text).lower())


def contains_any(answer: str, needles: list[str]) -> bool:
    hay = _squash(answer)
    return any(_squash(n) in hay for n in needles)


def evaluate_question(index, q: dict) -> dict:
    """Search (top 10, hybrid) and ask, then judge this one question."""
    hits = index.search(q["question"], mode="hybrid", k=10)
    answer = index.ask(q["question"])
    expected = set(q["expected_sources"])
    rank = next((n for n, h in enumerate(hits, start=1) if h.source in expected), None)
    cited = [c.source for c in answer.citations]
    page_hit = None
    if q["answerable"] and q["expected_page"] is not None:
        primary = q["expected_sources"][0]
        page_hit = any(h.source == primary and h.page == q["expected_page"] for h in hits[:5])
    return {
        "id": q["id"],
        "lang": q["lang"],
        "kind": q.get("kind", ""),
        "question": q["question"],
        "answerable": q["answerable"],
        "refused": answer.refused,
        "first_expected_rank": rank,
        "hit@5": rank is not None and rank <= 5,
        "page_hit@5": page_hit,
        "cited_expected": bool(expected & set(cited)) if not answer.refused else None,
        "answer_contains": contains_any(answer.answer, q["answer_contains"]) if not answer.refused else False,
        "top_sources": [h.source for h in hits[:5]],
        "cited_sources": cited,
        "answer": answer.answer,
        "reason": answer.reason,
        "evidence": answer.evidence,
    }


def _rate(flags: list[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of a share (95 % at z = 1.96): unlike p ± z·se it stays inside
    [0, 1] and is honest at 0 or n successes, which small golden sets hit."""
    if n <= 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def handled_right(d: dict) -> bool:
    """Answered with the expected text, or refused where nothing answers it."""
    return bool(d["answer_contains"]) and not d["refused"] if d["answerable"] else bool(d["refused"])


def summarize(details: list[dict]) -> dict:
    pos = [d for d in details if d["answerable"]]
    neg = [d for d in details if not d["answerable"]]
    answered = [d for d in pos if not d["refused"]]
    pages = [d["page_hit@5"] for d in pos if d["page_hit@5"] is not None]
    right = [handled_right(d) for d in details]
    return {
        "questions": len(details),
        "answerable": len(pos),
        "unanswerable": len(neg),
        "hit@5": _rate([d["hit@5"] for d in pos]),
        "mrr@10": round(sum(1 / d["first_expected_rank"] for d in pos if d["first_expected_rank"]) / len(pos), 4) if pos else None,
        "citation_accuracy": _rate([d["cited_expected"] for d in answered]),
        "answer_contains": _rate([d["answer_contains"] for d in pos]),
        "false_refusal": _rate([d["refused"] for d in pos]),
        "false_answer": _rate([not d["refused"] for d in neg]),
        "answered_correctly": _rate(right),
        "answered_correctly_95": wilson_interval(sum(right), len(right)),
        "page_hit@5": _rate(pages),
    }


def policy_sweep(details: list[dict]) -> dict:
    """The gate fitted on these very questions (see calibrate): how much of the refusal error is
    the gate's fit, and how much the evidence cannot separate."""
    from rag_pipeline.eval.calibrate import fit, outcome

    policy = fit(details)
    fr, fa = outcome(details, policy)
    return {"errors": fr + fa, "false_refusals": fr, "false_answers": fa, **policy.to_record()}


def run_golden(index, questions: list[dict]) -> dict:
    details = [{**evaluate_question(index, q), "split": q.get("split")} for q in questions]
    by_lang = {lang: summarize([d for d in details if d["lang"] == lang]) for lang in sorted({d["lang"] for d in details})}
    by_kind = {kind: summarize([d for d in details if d["kind"] == kind]) for kind in sorted({d["kind"] for d in details})}
    by_split = {f"{split} half": summarize([d for d in details if d["split"] == split])
                for split in ("fit", "report") if any(d["split"] == split for d in details)}
    policy = index.policy.to_record()
    return {
        **summarize(details), "by_lang": by_lang, "by_kind": by_kind, "by_split": by_split, "lake": str(index.lake.lake_dir),
        "policy": policy, "best_policy_on_this_set": policy_sweep(details), "details": details,
    }


def failures(report: dict) -> list[str]:
    """One line per question the system got wrong, saying how."""
    lines = []
    for d in report["details"]:
        if d["answerable"]:
            problems = [
                msg
                for bad, msg in (
                    (not d["hit@5"], f"expected source not in top 5 (rank {d['first_expected_rank']})"),
                    (d["refused"], "refused"),
                    (d["cited_expected"] is False, f"cited {d['cited_sources']}"),
                    (not d["refused"] and not d["answer_contains"], "answer lacks the expected text"),
                )
                if bad
            ]
        else:
            problems = [] if d["refused"] else [f"answered from {d['cited_sources']}"]
        if problems:
            lines.append(f"  {d['id']:<6} {d['kind']:<14} {d['question'][:60]!r}: " + "; ".join(problems))
    return lines


def format_report(report: dict) -> str:
    lines = [f"golden set: {report['questions']} questions ({report['answerable']} answerable) on {report['lake']}"]
    scopes = {"all": report, **report.get("by_split", {}), **report["by_lang"]}
    lines.append("| metric | " + " | ".join(scopes) + " |")
    lines.append("|---|" + "---|" * len(scopes))
    for m in (*METRICS, "page_hit@5"):
        cells = ["-" if s.get(m) is None else f"{s[m]:.3f}" for s in scopes.values()]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    low_high = report.get("answered_correctly_95")
    if low_high:
        lines.append(
            f"\nanswered correctly {report['answered_correctly']:.3f} of {report['questions']} questions, 95 % interval "
            f"{low_high[0]:.3f}–{low_high[1]:.3f}: compare two runs question by question (--json details), not by a "
            "difference inside that width"
        )
    best = report["best_policy_on_this_set"]
    lines.append(
        f"\nrefusal gate fitted on these very questions would still make "
        f"{best['false_refusals']} false refusals + {best['false_answers']} false answers"
    )
    if report.get("by_kind"):
        lines.append("\n| kind | n | hit@5 | answer_contains | false_refusal | false_answer |")
        lines.append("|---|---|---|---|---|---|")
        for kind, k in report["by_kind"].items():
            cells = ["-" if k.get(m) is None else f"{k[m]:.3f}" for m in ("hit@5", "answer_contains", "false_refusal", "false_answer")]
            lines.append(f"| {kind} | {k['questions']} | " + " | ".join(cells) + " |")
    wrong = failures(report)
    lines.append(f"\nwrong: {len(wrong)} of {report['questions']}")
    return "\n".join(lines + wrong)
