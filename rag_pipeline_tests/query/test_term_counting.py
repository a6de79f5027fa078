"""Issue 18: permitted document frequencies looked up in the filter's vocabulary, or counted by
one batched full-text query, equal the per-term full-text counts they replace — term by term,
and in every hit, score, refusal and answer on the golden questions.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from rag_pipeline.eval.golden import DEFAULT_GOLDEN, load_golden
from rag_pipeline.query import RagIndex
from rag_pipeline.query.filters import Principal, search_filter
from rag_pipeline.store import schema as s
from rag_pipeline.store.terms import FTS_MAX_TOKEN_BYTES, count_in_index, fts_token, permitted_frequencies, vocabulary

pytestmark = pytest.mark.slow

PRINCIPALS = {
    "default": None,
    "restricted": Principal(groups=(), departments=("HR",)),  # one department's documents only
    "public": Principal(clearance="public"),
}


@pytest.fixture(scope="module")
def index(base):
    return RagIndex.open(base / "lake")


def test_the_vocabulary_tokenizes_as_the_full_text_index_does():
    texts = pa.array(["abc zz", "ABC r-500", "x" * (FTS_MAX_TOKEN_BYTES - 1) + " " + "y" * FTS_MAX_TOKEN_BYTES, "中" * 14 + "  zz"])
    assert vocabulary(texts) == {"abc": 2, "zz": 2, "r-500": 1, "x" * (FTS_MAX_TOKEN_BYTES - 1): 1}
    assert fts_token("ABC") == "abc" and fts_token("y" * FTS_MAX_TOKEN_BYTES) == "" and fts_token("a b") is None


def test_every_term_counts_the_same_in_the_vocabulary_the_batch_and_the_index(index):
    all_text = index.chunks.to_arrow().column(s.SEARCH_TEXT_COLUMN).to_pylist()
    terms = frozenset(t for text in all_text for t in text.split(" ") if t) | {"R-500", "nosuchterm", "中" * 14, "annual leave"}
    for principal in PRINCIPALS.values():
        where = search_filter(principal)
        known = index._scope(where)["vocabulary"]
        reference = count_in_index(index.chunks, terms, where, batch_rows=0)
        assert reference, "the filter admits something"
        assert permitted_frequencies(index.chunks, terms, where, known=known) == reference
        assert permitted_frequencies(index.chunks, terms, where) == reference  # batched (its match set fits here)
        assert permitted_frequencies(index.chunks, terms, where, batch_rows=3) == reference  # does not fit: per term
        capped = permitted_frequencies(index.chunks, terms, where, cap=2, known=known)
        assert capped == count_in_index(index.chunks, terms, where, cap=2, batch_rows=0)


def test_golden_questions_get_identical_hits_scores_refusals_and_answers(index):
    strata = {}  # the first question of every kind x language x answerable: every term shape, a third of the time
    for q in load_golden(DEFAULT_GOLDEN):
        strata.setdefault((q["kind"], q["lang"], q["answerable"]), q["question"])
    questions = list(strata.values())
    assert len(questions) >= 30
    outcomes = {}
    for counting in ("per-term", "vocabulary", "batched"):
        index.term_counting = counting
        outcomes[counting] = [
            json.dumps(
                [index.search(q, principal=p).to_dicts(), index.ask(q, principal=p).to_dict()],
                ensure_ascii=False, sort_keys=True,
            )
            for p in (PRINCIPALS["default"], PRINCIPALS["restricted"])
            for q in questions
        ]
    index.term_counting = "vocabulary"
    assert outcomes["vocabulary"] == outcomes["per-term"]
    assert outcomes["batched"] == outcomes["per-term"]
    answered = [json.loads(o)[1] for o in outcomes["per-term"]]
    assert any(not a["refused"] for a in answered) and any(a["refused"] for a in answered)  # not vacuous


@pytest.fixture(scope="module")
def all_readable_lake(base, tmp_path_factory):
    """The sample without its withdrawn document: a principal in every group, cleared for
    everything, then admits every chunk of the generation."""
    import shutil

    from rag_pipeline_tests.indexing import run_index

    root = tmp_path_factory.mktemp("all_readable")
    shutil.copytree(base / "raw", root / "raw")
    shutil.copytree(base / "lake", root / "lake")
    withdrawn = root / "raw" / "handbook" / "old_leave_policy_2019.md"
    withdrawn.unlink()
    withdrawn.with_name(withdrawn.name + ".meta.json").unlink()
    report = run_index(root / "raw", root / "lake", golden_file="none")
    assert report["success"], report
    return root / "lake"


def test_a_filter_admitting_every_chunk_reads_the_generations_term_stats(all_readable_lake, monkeypatch):
    """Above the in-memory vocabulary's size, an asker who may read everything is counted from
    term_stats: no full-text query counts a term, and every result is the per-term one."""
    from rag_pipeline.query import api

    everyone = Principal(groups=("all-staff", "finance"), clearance="secret")
    questions = [q["question"] for q in load_golden(DEFAULT_GOLDEN)][:60]
    outcomes = {}
    for counting in ("per-term", "vocabulary"):
        monkeypatch.setattr(api, "SCOPE_VOCABULARY_MAX_ROWS", 0)
        index = RagIndex.open(all_readable_lake)
        index.term_counting = counting
        scope = index._scope(search_filter(everyone))
        assert scope["whole"] and scope["vocabulary"] is None
        if counting == "vocabulary":
            index.chunks.search = _no_term_counting(index.chunks.search)
        outcomes[counting] = [
            json.dumps([index.search(q, principal=everyone).to_dicts(), index.ask(q, principal=everyone).to_dict()],
                       ensure_ascii=False, sort_keys=True)
            for q in questions
        ]
    assert outcomes["vocabulary"] == outcomes["per-term"]


def _no_term_counting(search):
    """table.search that refuses the full-text queries that count terms (per term or batched)."""

    class Guarded:
        def __init__(self, builder):
            self._builder = builder

        def where(self, *args, **kwargs):
            return Guarded(self._builder.where(*args, **kwargs))

        def select(self, columns):
            assert columns not in (["chunk_id"], [s.SEARCH_TEXT_COLUMN]), "a term was counted in the full-text index"
            return self._builder.select(columns)

        def __getattr__(self, name):
            return getattr(self._builder, name)

    def guarded(query=None, *args, **kwargs):
        builder = search(query, *args, **kwargs)
        return Guarded(builder) if kwargs.get("query_type") == "fts" else builder

    return guarded
