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
