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


def test_a_dense_hit_counts_by_how_far_it_stands_above_the_background():
    import numpy as np

    from rag_pipeline.query.fusion import Background, standing_weights

    background = Background.of(np.array([0.70, 0.72, 0.74, 0.76, 0.78]))  # mean 0.74, spread ~0.0283
    dense = [("strong", 0.74 + 4 * 0.02828), ("half", 0.74 + 2 * 0.02828), ("below", 0.70)]
    weights = standing_weights(dense, background, full_trust=4.0)
    assert weights["strong"] == pytest.approx(1.0, abs=1e-3)
    assert weights["half"] == pytest.approx(0.5, abs=1e-3)
    assert weights["below"] == 0.0  # under the background's mean: no say
    assert standing_weights(dense, background, full_trust=0.0) == {"strong": 1.0, "half": 1.0, "below": 1.0}
    assert standing_weights(dense, Background.of(np.array([0.7])), full_trust=4.0)["below"] == 1.0  # nothing to measure against

    # a keyword hit holding the question's rare word now leads a dense arm that barely stands out
    rankings = {"dense": [("weak", 0.76), ("weaker", 0.75)], "keyword": [("rare-word", 5.0)]}
    hit_weights = {"dense": standing_weights(rankings["dense"], background, 4.0), "keyword": {"rare-word": 0.63}}
    assert rrf(rankings, k=20, hit_weights=hit_weights)[0].chunk_id == "rare-word"
    assert rrf(rankings, k=20, hit_weights={"keyword": {"rare-word": 0.63}})[0].chunk_id == "weak"


def test_hybrid_hits_carry_the_dense_say_an_on_topic_question_earns_more_of(sample_index):
    on_topic = sample_index.search("服务器什么时候做全量备份？", mode="hybrid", k=10)
    off_topic = sample_index.search("Who won the 1998 World Cup?", mode="hybrid", k=10)
    for hits in (on_topic, off_topic):
        dense = sorted((h for h in hits if h.dense_rank is not None), key=lambda h: h.dense_rank)
        assert dense and all(0.0 <= h.dense_weight <= 1.0 for h in dense)
        assert [h.dense_weight for h in dense] == sorted((h.dense_weight for h in dense), reverse=True)
    best = [next(h.dense_weight for h in hits if h.dense_rank == 1) for hits in (on_topic, off_topic)]
    assert best[0] > best[1] + 0.1
    plain = sample_index.search("服务器什么时候做全量备份？", mode="hybrid-rrf", k=3)
    assert all(h.dense_weight in (None, 1.0) for h in plain)  # plain RRF gives every hit full say
