"""Refusal calibration and the promotion gate: pure functions on constructed evidence, then the CLI."""

import json

import pytest

from rag_pipeline.eval.calibrate import fit, leave_one_out, outcome, tradeoff
from rag_pipeline.eval.gate import compare, eligible
from rag_pipeline.query.answer import RefusalPolicy


def _sample(i, answerable, coverage, margin):
    evidence = {"candidates": 10, "lexical_coverage": coverage, "dense_margin": margin}
    return {"id": f"q{i}", "answerable": answerable, "evidence": evidence}


SEPARABLE = [_sample(i, True, 0.8, 0.05) for i in range(5)] + [_sample(5 + i, False, 0.2, 0.05) for i in range(5)]


def test_fit_separates_separable_evidence_and_loo_agrees():
    policy = fit(SEPARABLE)
    assert outcome(SEPARABLE, policy) == (0, 0)
    assert 0.2 < policy.min_lexical_coverage <= 0.8
    assert leave_one_out(SEPARABLE) == (0, 0)


def test_fit_prefers_the_middle_of_a_tied_region():
    policy = fit(SEPARABLE)
    assert 0.4 <= policy.min_lexical_coverage <= 0.6  # not hugging either class


def test_tradeoff_front_is_monotone_and_costly_false_answers_refuse_more():
    overlapping = SEPARABLE + [_sample(20, False, 0.9, 0.2), _sample(21, True, 0.1, 0.01)]
    front = tradeoff(overlapping)
    assert [p["false_answers"] for p in front] == sorted(p["false_answers"] for p in front)
    assert all(a["false_refusals"] > b["false_refusals"] for a, b in zip(front, front[1:]))
    cautious = fit(overlapping, false_answer_cost=10)
    assert outcome(overlapping, cautious)[1] == 0


def _detail(qid, answerable=True, refused=False, hit=True, rank=1, cited=True):
    return {"id": qid, "answerable": answerable, "refused": refused, "hit@5": hit, "page_hit@5": None,
            "first_expected_rank": rank, "cited_expected": None if refused else cited, "answer_contains": not refused}


def test_gate_flags_a_retrieval_loss_but_not_a_refusal_trade():
    baseline = [_detail("a"), _detail("b"), _detail("n1", answerable=False, refused=False), _detail("n2", answerable=False, refused=True)]
    traded = [_detail("a"), _detail("b", refused=True), _detail("n1", answerable=False, refused=True), _detail("n2", answerable=False, refused=True)]
    problems, _, _ = compare(traded, baseline, tolerance=0.02)
    assert problems == []  # one false refusal more, one false answer fewer: no net loss
    worse = [_detail("a"), _detail("b", hit=False, rank=None), *baseline[2:]]
    problems, now, before = compare(worse, baseline, tolerance=0.02)
    assert any(p.startswith("hit@5") for p in problems) and now["hit@5"] < before["hit@5"]


def test_gate_compares_only_questions_judged_in_both():
    baseline = [_detail("a"), _detail("gone", hit=True)]
    current = [_detail("a")]  # "gone" lost its source (withdrawn): it drops out instead of counting as a miss
    assert compare(current, baseline, 0.0)[0] == []


def test_eligible_keeps_questions_whose_sources_are_all_served():
    qs = [
        {"id": "1", "answerable": True, "expected_sources": ["a.md", "b.md"]},
        {"id": "2", "answerable": True, "expected_sources": ["a.md"]},
        {"id": "3", "answerable": False, "expected_sources": []},
    ]
    assert [q["id"] for q in eligible(qs, {"a.md"})] == ["2", "3"]


@pytest.mark.slow
def test_rag_calibrate_stores_the_policy_with_the_index_and_queries_use_it(indexed_sample, capsys, tmp_path):
    import shutil

    from rag_pipeline import cli
    from rag_pipeline.query import RagIndex

    lake = tmp_path / "lake"
    shutil.copytree(indexed_sample["lake"], lake)  # the shared session lake stays uncalibrated
    assert cli.main(["calibrate", "--lake", str(lake), "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["saved_to"] == str(lake / "refusal_policy.json")
    assert record["fitted_on"]["questions"] >= 40 and record["tradeoff"]
    for key in ("fitted", "leave_one_out", "previous"):
        assert 0 <= record[key]["false_refusal"] <= 1 and 0 <= record[key]["false_answer"] <= 1
    fitted_errors = record["fitted"]["false_refusal"] + record["fitted"]["false_answer"]
    assert fitted_errors <= record["previous"]["false_refusal"] + record["previous"]["false_answer"]
    index = RagIndex.open(lake)
    assert index.policy == RefusalPolicy(record["min_lexical_coverage"], record["min_dense_margin"])
