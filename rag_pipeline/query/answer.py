"""Refuse or answer: an extractive answer built only from retrieved chunks, always cited.

Refusal uses evidence that does not depend on a model's absolute cosine scale (e5 scores
unrelated text ≈ 0.83): whether the question names a code (X-3000, E-99) that no indexed chunk
contains, how many query terms the best keyword hits contain, and how far the best dense hit
stands above the query's similarity to the corpus at large.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np

from rag_pipeline.text import search_tokens


@dataclass(frozen=True)
class RefusalPolicy:
    """Answer when the keyword evidence OR the dense evidence is strong enough.

    Provisional defaults, set by hand from the sample corpus's 29 questions
    (data/sample_facts.md); they are meant to be fitted on a golden set.
    """

    min_lexical_coverage: float = 0.45  # idf-weighted share of query terms found in one keyword hit
    min_dense_margin: float = 0.10  # best dense cosine minus the query's median cosine to the corpus
    refuse_unknown_identifiers: bool = True  # a code (X-3000, E-99) no indexed chunk contains


MAX_CANDIDATE_SENTENCES = 40  # bounds the per-answer encode cost


@dataclass
class Citation:
    doc_id: str
    source: str
    title: str
    page: int | None
    chunk_id: str
    text: str


@dataclass
class Answer:
    question: str
    answer: str
    refused: bool
    reason: str
    citations: list[Citation] = field(default_factory=list)
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "question": self.question,
            "answer": self.answer,
            "refused": self.refused,
            "reason": self.reason,
            "citations": [asdict(c) for c in self.citations],
            "evidence": self.evidence,
        }


def refusal_reason(evidence: dict, policy: RefusalPolicy) -> str | None:
    """None when the evidence supports answering, else a sentence saying why not."""
    if evidence["candidates"] == 0:
        return "no document you may read matches this question"
    if policy.refuse_unknown_identifiers and evidence.get("unknown_identifiers"):
        return f"no indexed document mentions {', '.join(evidence['unknown_identifiers'])}"
    if evidence["lexical_coverage"] >= policy.min_lexical_coverage:
        return None
    if evidence["dense_margin"] >= policy.min_dense_margin:
        return None
    return (
        "nothing relevant was found: best keyword match covers "
        f"{evidence['lexical_coverage']:.0%} of the question's terms and the best passage is only "
        f"{evidence['dense_margin']:.3f} above the corpus background"
    )


_UNIT_END = re.compile(r"(?<=[。！？!?])|(?<=[.])(?=\s)")


def answer_units(text: str) -> list[str]:
    """Sentences, but a line is never split on ';' — a table row ("城市: 深圳; 电话: …") stays whole."""
    return [u.strip() for line in text.splitlines() for u in _UNIT_END.split(line) if u.strip()]


def select_sentences(question: str, question_vec: np.ndarray, hits: list[dict], encoder, max_sentences: int = 2):
    """Pick the sentences of the top hits that best match the question (dense + term overlap)."""
    candidates = [(i, u) for i, h in enumerate(hits) for u in answer_units(h["text"]) if len(u) > 3]
    candidates = candidates[:MAX_CANDIDATE_SENTENCES]
    if not candidates:
        return []
    vectors = encoder.encode_passages([s for _, s in candidates])
    terms = set(search_tokens(question))
    scored = []
    for (i, sentence), vec in zip(candidates, vectors):
        overlap = len(terms & set(search_tokens(sentence))) / max(len(terms), 1)
        rank_prior = 0.02 * i  # prefer the better-ranked chunk on ties
        scored.append((float(vec @ question_vec) + 0.1 * overlap - rank_prior, i, sentence))
    scored.sort(key=lambda t: -t[0])
    return [(i, sentence) for _, i, sentence in scored[:max_sentences]]


_MARKER = re.compile(r"\[(\s*\d+\s*)\]")


def defang_markers(sentence: str) -> str:
    """A quoted sentence's own "[7]" would read as one of our citations: show it as "(7)" instead."""
    return _MARKER.sub(r"(\1)", sentence)


def compose(picked: list[tuple[int, str]], hits: list[dict]) -> tuple[str, list[Citation]]:
    """Answer text with [n] markers; citations list exactly the chunks the sentences came from."""
    order: list[int] = []
    for i, _ in picked:
        if i not in order:
            order.append(i)
    parts = [f"{defang_markers(sentence)} [{order.index(i) + 1}]" for i, sentence in picked]
    citations = [
        Citation(
            doc_id=hits[i]["doc_id"],
            source=hits[i]["source"],
            title=hits[i]["title"],
            page=hits[i]["page"],
            chunk_id=hits[i]["chunk_id"],
            text=hits[i]["text"],
        )
        for i in order
    ]
    return " ".join(parts), citations
