"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009), optionally query-aware.

score(d) = Σ_arm w_arm · w_arm(d) / (k + rank_arm(d)), ranks 1-based. Plain RRF has every weight
1. The query-aware default (chosen by bench/fusion_sweep.py) gives a keyword hit a say equal to
the idf-weighted share of the question's terms it contains; a hit written in another language
than the question counts only its codes and numbers (E-71, R-500, 2019), the terms that mean the
same in any language. So an English question over Chinese passages, whose keyword matches are
titles and stray words, leaves the dense order alone, while two arms that both match reinforce
as in plain RRF. A dense hit likewise has the say its evidence earns: how far its cosine stands
above the question's similarity to unrelated text (standing_weights), so a dense arm whose best
passage barely stands out ("Annoy 这个名字的全称是什么？" over FAQ rows ~1.8 spreads out) no longer
buries a keyword hit holding the question's rare word. Each fused hit keeps its rank, raw score
and weight in every arm, so a bad answer can be traced to the arm that produced it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class ArmHit:
    rank: int  # 1-based
    score: float
    weight: float = 1.0  # the say this arm got for this hit


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
    hit_weights: dict[str, dict[str, float]] | None = None,
) -> list[FusedHit]:
    """Fuse per-arm rankings of (chunk_id, raw score), best first, into one ranking.

    `weights` scale whole arms; `hit_weights[arm][chunk_id]` scales one hit in one arm.
    """
    if k <= 0:
        raise ValueError("RRF k must be positive")
    weights = weights or {}
    hit_weights = hit_weights or {}
    fused: dict[str, FusedHit] = {}
    for arm, ranking in rankings.items():
        for rank, (chunk_id, raw) in enumerate(ranking, start=1):
            hit = fused.setdefault(chunk_id, FusedHit(chunk_id, 0.0))
            if arm in hit.arms:  # a chunk listed twice in one arm counts once, at its best rank
                continue
            weight = weights.get(arm, 1.0) * hit_weights.get(arm, {}).get(chunk_id, 1.0)
            hit.arms[arm] = ArmHit(rank, raw, weight)
            hit.score += weight / (k + rank)
    return sorted(fused.values(), key=lambda h: (-h.score, h.chunk_id))


def same_language(query_language: str, chunk_language: str) -> bool:
    """Languages as ingest.language tags them; mixed or undetermined text is compatible with all."""
    return query_language == chunk_language or bool({query_language, chunk_language} & {"mixed", "und"})


def coverage_weight(coverage: float, full_trust: float) -> float:
    """A keyword hit's say: linear in its term coverage, full once it covers `full_trust`."""
    if full_trust <= 0:
        return 1.0
    return max(0.0, min(1.0, coverage / full_trust))


@dataclass(frozen=True)
class Background:
    """The query's similarity to unrelated text: mean and spread of its cosines to a sample of
    what the asker may read. The scale on which a dense cosine means something (e5 scores
    unrelated text ~0.8, Chinese questions higher than English ones)."""

    mean: float
    spread: float

    @classmethod
    def of(cls, cosines: np.ndarray) -> "Background":
        return cls(float(np.mean(cosines)) if len(cosines) else 0.0, float(np.std(cosines)) if len(cosines) > 1 else 0.0)

    def standing(self, cosine: float) -> float:
        """How many spreads `cosine` stands above the background; 0 with nothing to measure against."""
        return (cosine - self.mean) / self.spread if self.spread > 0 else 0.0


def standing_weights(dense: list[tuple[str, float]], background: Background, full_trust: float) -> dict[str, float]:
    """Each dense hit's say: linear in how many spreads its cosine stands above the query's
    background, full once it stands `full_trust` spreads above. 0, or no spread: full say."""
    if full_trust <= 0 or background.spread <= 0:
        return {cid: 1.0 for cid, _ in dense}
    return {cid: coverage_weight(background.standing(cosine), full_trust) for cid, cosine in dense}
