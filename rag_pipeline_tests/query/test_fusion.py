import pytest

from rag_pipeline.query.fusion import rrf


def test_rrf_rewards_agreement_and_keeps_per_arm_ranks():
    fused = rrf({"dense": [("a", 0.9), ("b", 0.8), ("c", 0.7)], "keyword": [("b", 12.0), ("d", 9.0)]}, k=60)
    assert fused[0].chunk_id == "b"
    assert fused[0].score == pytest.approx(1 / 62 + 1 / 61)
    assert fused[0].arms["dense"].rank == 2 and fused[0].arms["keyword"].score == 12.0
    assert "keyword" not in next(h for h in fused if h.chunk_id == "a").arms


def test_rrf_weights_and_validation():
    fused = rrf({"dense": [("a", 1.0)], "keyword": [("b", 1.0)]}, weights={"dense": 0.0})
    assert fused[0].chunk_id == "b"
    with pytest.raises(ValueError):
        rrf({"dense": []}, k=0)


def test_rrf_counts_a_duplicate_within_an_arm_once():
    fused = rrf({"dense": [("a", 0.9), ("a", 0.8)]}, k=60)
    assert fused[0].score == pytest.approx(1 / 61)


def test_a_keyword_arm_with_no_lexical_match_gets_no_say():
    from rag_pipeline.query.fusion import coverage_weight

    rankings = {"dense": [("zh-answer", 0.86), ("zh-other", 0.84)], "keyword": [("noise", 3.0), ("zh-other", 2.0)]}
    weights = {"keyword": {"noise": coverage_weight(0.0, 0.5), "zh-other": coverage_weight(0.0, 0.5)}}
    fused = rrf(rankings, hit_weights=weights)
    assert [h.chunk_id for h in fused][:2] == ["zh-answer", "zh-other"]  # the dense order stands
    assert fused[-1].chunk_id == "noise" and fused[-1].score == 0.0
    assert fused[-1].arms["keyword"].rank == 1  # still traceable: the arm ranked it first, with no say
    assert coverage_weight(0.05, 0.5) == pytest.approx(0.1) and coverage_weight(0.8, 0.5) == 1.0


def test_two_agreeing_arms_with_full_coverage_reinforce_as_plain_rrf():
    from rag_pipeline.query.fusion import coverage_weight

    rankings = {"dense": [("a", 0.9), ("b", 0.8)], "keyword": [("b", 9.0), ("a", 8.0)]}
    full = {"keyword": {"a": coverage_weight(0.9, 0.5), "b": coverage_weight(0.6, 0.5)}}
    assert [(h.chunk_id, h.score) for h in rrf(rankings, hit_weights=full)] == [
        (h.chunk_id, h.score) for h in rrf(rankings)
    ]
