"""Cross-encoder rerank stage: ordering, truncation, kept fields, and degradation to the fused order.

The real-model test builds a sentence-transformers `CrossEncoder` from the local embedding model
folder (XLM-R/BERT backbone). It has no trained classification head, so the one-score head is
freshly initialised (seeded): that checks the plumbing, not the relevance of the scores.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

from rag_pipeline.config import default_model_cache_dir
from rag_pipeline.query.api import Hit
from rag_pipeline.query.rerank import (
    OFF_NOTE,
    RERANK_FIELDS,
    CrossEncoderReranker,
    Reranker,
    RerankSettings,
    load_reranker,
    passage_text,
    rerank,
)

# Hit gains fused_rank / rerank_score / rerank_rank (default None) when rerank is wired into api.py;
# until then the tests use a Hit subclass of exactly that shape.
if set(RERANK_FIELDS) <= {f.name for f in dataclasses.fields(Hit)}:
    RHit = Hit
else:
    RHit = dataclasses.make_dataclass(
        "RHit",
        [
            ("fused_rank", "int | None", dataclasses.field(default=None)),
            ("rerank_score", "float | None", dataclasses.field(default=None)),
            ("rerank_rank", "int | None", dataclasses.field(default=None)),
        ],
        bases=(Hit,),
    )

PASSAGES = [
    ("Leave policy > Annual leave", "Employees get 25 days of paid annual leave per calendar year."),
    ("IT > Backups", "Servers are backed up every night at 02:00 and kept for 30 days."),
    ("", "The X-2000 router supports Wi-Fi 6 and WPA3."),
    ("Expenses", "Travel expenses are reimbursed within 14 days of approval."),
    ("报销", "差旅费用在审批后十四天内报销。"),
    ("Leave policy > Sick leave", "Sick leave needs a doctor's note after three days."),
]


def make_hits(passages=PASSAGES) -> list:
    n = len(passages)
    return [
        RHit(
            chunk_id=f"c{i}", doc_id=f"d{i}", source=f"doc{i}.md", title=f"Doc {i}", page=i or None,
            heading_path=heading, text=text, language="und", score=1.0 / (61 + i),
            dense_rank=i + 1, dense_score=0.9 - i / 100, keyword_rank=n - i, keyword_score=float(n - i),
            keyword_weight=1.0,
        )
        for i, (heading, text) in enumerate(passages)
    ]


class KeywordOverlap:
    """Stand-in reranker: counts query words that occur in the passage."""

    name = "keyword-overlap"

    def __init__(self):
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, query: str, passages: list[str]) -> list[float]:
        self.calls.append((query, passages))
        words = set(query.lower().split())
        return [float(sum(w in p.lower() for w in words)) for p in passages]


class Exploding:
    def score(self, query, passages):
        raise RuntimeError("CUDA out of memory (simulated)")


class ShortCount:
    def score(self, query, passages):
        return [1.0] * (len(passages) - 1)


def assert_fields_kept(out, fused_by_id):
    for h in out:
        f = fused_by_id[h.chunk_id]
        assert (h.score, h.dense_rank, h.dense_score, h.keyword_rank, h.keyword_score, h.text) == (
            f.score, f.dense_rank, f.dense_score, f.keyword_rank, f.keyword_score, f.text
        )


# --- the real CrossEncoder ------------------------------------------------------------------


@pytest.fixture(scope="module")
def local_model_dir():
    path = default_model_cache_dir() / "multilingual-e5-small"
    if not (path / "config.json").is_file():
        pytest.skip(f"local model folder {path} is missing (scripts/install.sh builds it)")
    return path


def test_real_cross_encoder_reorders_by_its_own_predict_scores(local_model_dir):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    reranker = CrossEncoderReranker(str(local_model_dir), batch_size=4, allow_untrained_head=True)
    assert isinstance(reranker, Reranker)
    from sentence_transformers import CrossEncoder

    model = reranker.model
    assert isinstance(model, CrossEncoder)
    assert CrossEncoderReranker(str(local_model_dir), allow_untrained_head=True).model is model  # cached per id

    hits = make_hits()
    query = "how many days of annual leave"
    out = rerank(query, hits, reranker, top_n=5, k=3)
    assert out.status == "reranked" and "top 5" in out.note

    # the model's own scores for the same (query, heading + text) pairs
    pairs = [(query, passage_text(h.heading_path, h.text)) for h in hits[:5]]
    assert pairs[0][1] == "Leave policy > Annual leave\n" + PASSAGES[0][1]  # as the pipeline embeds it
    expected = [float(x) for x in model.predict(pairs, batch_size=4, show_progress_bar=False)]
    assert len(expected) == 5 and all(math.isfinite(x) for x in expected)
    assert len({round(x, 5) for x in expected}) == 5, "the seeded head tied; the order check needs distinct scores"
    want = sorted(range(5), key=lambda i: -expected[i])[:3]

    assert [h.chunk_id for h in out.hits] == [f"c{i}" for i in want]  # top-k of top-n, the 6th hit unread
    assert [h.rerank_rank for h in out.hits] == [1, 2, 3]
    assert [h.fused_rank for h in out.hits] == [i + 1 for i in want]
    for h, i in zip(out.hits, want):
        assert isinstance(h.rerank_score, float) and h.rerank_score == pytest.approx(expected[i], abs=1e-5)
    assert_fields_kept(out.hits, {h.chunk_id: h for h in hits})


def test_a_bare_encoder_is_refused_as_a_reranker(local_model_dir):
    pytest.importorskip("sentence_transformers")
    reranker = CrossEncoderReranker(str(local_model_dir))
    hits = make_hits()
    out = rerank("annual leave", hits, reranker, top_n=5, k=4)
    assert out.status == "degraded"
    assert "no trained classification head" in out.note and "random" in out.note
    assert out.hits == hits[:4]
    start = time.perf_counter()  # the failure is remembered: the next query does not reload the weights
    again = rerank("annual leave", hits, reranker, top_n=5, k=4)
    assert again.status == "degraded" and again.note == out.note and time.perf_counter() - start < 0.5


# --- a stand-in reranker --------------------------------------------------------------------


def test_keyword_overlap_reranker_reorders_and_keeps_fused_fields():
    hits = make_hits()
    reranker = KeywordOverlap()
    out = rerank("sick leave doctor note", hits, reranker, top_n=6, k=3)
    assert out.status == "reranked" and "keyword-overlap" in out.note
    # c5 (fused 6th) matches all 4 query words, c0 only "leave"; the rest score 0 and keep their fused order
    assert [h.chunk_id for h in out.hits] == ["c5", "c0", "c1"]
    assert [h.rerank_score for h in out.hits] == [4.0, 1.0, 0.0]
    assert [(h.fused_rank, h.rerank_rank) for h in out.hits] == [(6, 1), (1, 2), (2, 3)]
    assert_fields_kept(out.hits, {h.chunk_id: h for h in hits})
    assert hits[5].rerank_score is None  # inputs are not mutated
    (query, passages), = reranker.calls
    assert query == "sick leave doctor note" and passages[5] == "Leave policy > Sick leave\n" + PASSAGES[5][1]
    assert passages[2] == PASSAGES[2][1]  # no heading: the text alone


def test_only_top_n_is_rescored_and_the_rest_follows_in_fused_order():
    hits = make_hits()
    reranker = KeywordOverlap()
    out = rerank("sick leave doctor note", hits, reranker, top_n=2, k=10)
    assert len(reranker.calls[0][1]) == 2  # the reranker read only the first two
    assert [h.chunk_id for h in out.hits] == ["c0", "c1", "c2", "c3", "c4", "c5"]  # c5 was past top_n
    assert [h.rerank_rank for h in out.hits] == [1, 2, None, None, None, None]
    assert [h.fused_rank for h in out.hits] == [1, 2, 3, 4, 5, 6]


def test_ties_keep_the_fused_order():
    hits = make_hits()
    out = rerank("nothing matches", hits, KeywordOverlap(), top_n=6, k=6)
    assert out.status == "reranked"
    assert [h.chunk_id for h in out.hits] == [h.chunk_id for h in hits]
    assert [h.rerank_rank for h in out.hits] == [1, 2, 3, 4, 5, 6]


# --- off and degraded ------------------------------------------------------------------------


def test_off_returns_the_fused_top_k_and_says_so():
    hits = make_hits()
    out = rerank("annual leave", hits, None, top_n=50, k=2)
    assert (out.status, out.note) == ("off", OFF_NOTE)
    assert out.hits == hits[:2] and out.hits[0] is hits[0]


def test_a_failing_reranker_degrades_to_the_fused_order():
    hits = make_hits()
    out = rerank("annual leave", hits, Exploding(), top_n=5, k=4)
    assert out.status == "degraded"
    assert out.note == "rerank skipped: RuntimeError: CUDA out of memory (simulated)"
    assert [h.chunk_id for h in out.hits] == ["c0", "c1", "c2", "c3"]
    assert all(h.rerank_score is None and h.rerank_rank is None for h in out.hits)


def test_a_wrong_number_of_scores_degrades():
    hits = make_hits()
    out = rerank("annual leave", hits, ShortCount(), top_n=5, k=5)
    assert out.status == "degraded" and "4 scores for 5 passages" in out.note
    assert out.hits == hits[:5]


def test_non_finite_scores_degrade():
    class NaNs:
        def score(self, query, passages):
            return [float("nan")] * len(passages)

    out = rerank("q", make_hits(), NaNs(), top_n=3, k=3)
    assert out.status == "degraded" and "non-finite" in out.note


@pytest.mark.parametrize("spec", ["/nonexistent/rerankers/bge-reranker-base", "rag-pipeline-tests/no-such-reranker"])
def test_a_configured_but_missing_model_degrades_fast_without_network(monkeypatch, spec):
    pytest.importorskip("sentence_transformers")  # import cost is not what this test times
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("RAG_RERANK_MODEL", spec)
    reranker = load_reranker(RerankSettings.from_env())
    assert isinstance(reranker, CrossEncoderReranker) and reranker.name == spec
    hits = make_hits()
    start = time.perf_counter()
    out = rerank("annual leave", hits, reranker, top_n=50, k=3)
    elapsed = time.perf_counter() - start
    assert out.status == "degraded" and out.hits == hits[:3]
    assert out.note.startswith("rerank skipped: RerankerLoadError:") and spec in out.note
    if spec.startswith("/"):
        assert "does not exist" in out.note
    else:
        assert "HF_HUB_OFFLINE=1" in out.note and "local Hugging Face cache" in out.note
    assert elapsed < 10, f"a missing model took {elapsed:.1f}s to fail"


# --- settings and validation -------------------------------------------------------------------


def test_settings_from_env(monkeypatch):
    monkeypatch.delenv("RAG_RERANK_MODEL", raising=False)
    monkeypatch.delenv("RAG_RERANK_TOP_N", raising=False)
    off = RerankSettings.from_env()
    assert off == RerankSettings(model=None, top_n=50, batch_size=16) and load_reranker(off) is None
    monkeypatch.setenv("RAG_RERANK_MODEL", " cross-encoder/ms-marco-MiniLM-L6-v2 ")
    monkeypatch.setenv("RAG_RERANK_TOP_N", "20")
    on = RerankSettings.from_env()
    assert (on.model, on.top_n) == ("cross-encoder/ms-marco-MiniLM-L6-v2", 20)
    monkeypatch.setenv("RAG_RERANK_TOP_N", "many")
    with pytest.raises(ValueError, match="RAG_RERANK_TOP_N"):
        RerankSettings.from_env()
    with pytest.raises(ValueError, match="top_n"):
        RerankSettings(top_n=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        on.top_n = 5


def test_validation_and_hits_without_rerank_fields():
    with pytest.raises(ValueError, match="top_n"):
        rerank("q", make_hits(), KeywordOverlap(), top_n=0, k=3)
    with pytest.raises(ValueError, match="k must"):
        rerank("q", make_hits(), KeywordOverlap(), top_n=3, k=-1)
    plain = [Hit(**{f.name: getattr(h, f.name) for f in dataclasses.fields(Hit)}) for h in make_hits()]
    if set(RERANK_FIELDS) - {f.name for f in dataclasses.fields(Hit)}:
        with pytest.raises(TypeError, match="rerank fields"):
            rerank("q", plain, KeywordOverlap(), top_n=3, k=3)
    assert rerank("q", [], KeywordOverlap(), top_n=3, k=3).hits == []
