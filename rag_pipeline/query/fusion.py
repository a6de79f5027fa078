"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009).

score(d) = Σ_arm weight_arm / (k + rank_arm(d)), ranks 1-based. Each fused hit keeps its rank
and raw score in every arm, so a bad answer can be traced to the arm that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ArmHit:
    rank: int  # 1-based
    score: float


@dataclass
class FusedHit:
    chunk_id: str
    score: float
    arms: dict[str, ArmHit] = field(default_factory=dict)


def rrf(
    rankings: dict[str, list[tuple[str, float]]],
    *,
    k: int = 60,
    weights: dict[str, float] | None = None,
) -> list[FusedHit]:
    """Fuse per-arm rankings of (chunk_id, raw score), best first, into one ranking."""
    if k <= 0:
        raise ValueError("RRF k must be positive")
    weights = weights or {}
    fused: dict[str, FusedHit] = {}
    for arm, ranking in rankings.items():
        weight = weights.get(arm, 1.0)
        for rank, (chunk_id, raw) in enumerate(ranking, start=1):
            hit = fused.setdefault(chunk_id, FusedHit(chunk_id, 0.0))
            if arm in hit.arms:  # a chunk listed twice in one arm counts once, at its best rank
                continue
            hit.arms[arm] = ArmHit(rank, raw)
            hit.score += weight / (k + rank)
    return sorted(fused.values(), key=lambda h: (-h.score, h.chunk_id))
