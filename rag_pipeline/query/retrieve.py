"""The two retrieval arms over the published chunks table, both pre-filtered in the engine."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache

import numpy as np

from rag_pipeline.store.ann import EXACT
from rag_pipeline.store.schema import SEARCH_TEXT_COLUMN
from rag_pipeline.text import is_chinese, is_joined_form, question_tokens, search_tokens, without_joins

RESULT_COLUMNS = ["chunk_id", "doc_id", "source", "title", "page", "heading_path", "text", "language", SEARCH_TEXT_COLUMN]


def dense_arm(table, query_vector: np.ndarray, where: str, limit: int, vector_index: dict | None = None) -> list[dict]:
    """Cosine nearest neighbours; `score` is the cosine similarity (1 - distance).

    `vector_index` is the manifest's plan (store.ann). With an ANN index, a permission filter so
    narrow that the probed partitions hold fewer than `limit` permitted rows falls back to the
    exact search over the rows it permits (few by then, so it is fast too).
    """
    approximate = bool(vector_index) and vector_index["kind"] != EXACT
    rows = _nearest(table, query_vector, where, limit, vector_index if approximate else None)
    if approximate and len(rows) < limit:
        rows = _nearest(table, query_vector, where, limit, None)
    for row in rows:
        row["score"] = 1.0 - float(row.pop("_distance"))
    return rows


def _nearest(table, query_vector: np.ndarray, where: str, limit: int, ann: dict | None) -> list[dict]:
    search = table.search(query_vector.astype(np.float32), vector_column_name="vector").metric("cosine")
    if ann:
        search = search.nprobes(ann["nprobes"]).refine_factor(ann["refine_factor"])
    else:
        search = search.bypass_vector_index()
    return search.where(where, prefilter=True).select([*RESULT_COLUMNS, "_distance"]).limit(limit).to_list()


def keyword_arm(table, query: str, where: str, limit: int) -> list[dict]:
    """BM25 over the pre-tokenized column, with the query tokenized the same way as a question
    (text.question_tokens: its interrogatives and framing words are not searched for)."""
    return terms_arm(table, question_tokens(query), where, limit)


def terms_arm(table, tokens: list[str], where: str, limit: int) -> list[dict]:
    """BM25 over the pre-tokenized column for search terms already tokenized (or translated)."""
    if not tokens:
        return []
    rows = (
        table.search(" ".join(tokens), query_type="fts", fts_columns=SEARCH_TEXT_COLUMN)
        .where(where, prefilter=True)
        .select([*RESULT_COLUMNS, "_score"])
        .limit(limit)
        .to_list()
    )
    for row in rows:
        row["score"] = float(row.pop("_score"))
    return rows


def contains_term(table, term: str, where: str) -> bool:
    """Whether any chunk the filter admits holds this exact search term (the index splits on spaces)."""
    hits = table.search(term, query_type="fts", fts_columns=SEARCH_TEXT_COLUMN).where(where, prefilter=True)
    return any(term in row[SEARCH_TEXT_COLUMN].split() for row in hits.select([SEARCH_TEXT_COLUMN]).limit(20).to_list())


def idf_weights(terms: set[str], doc_freq: dict[str, int], n_docs: int) -> dict[str, float]:
    """BM25's idf; a term the corpus never saw gets the highest weight (it is the most telling)."""
    return {t: math.log(1 + (n_docs - doc_freq.get(t, 0) + 0.5) / (doc_freq.get(t, 0) + 0.5)) for t in terms}


@lru_cache(maxsize=256)
def query_terms(query: str) -> frozenset[str]:
    """The query's search terms, tokenized once: coverage is computed for up to 100 hits per query."""
    return frozenset(question_tokens(query))


_CLITICS = frozenset({"s", "t", "ll", "re", "ve"})


@lru_cache(maxsize=256)
def query_term_groups(query: str) -> tuple[frozenset[str], ...]:
    """The query's terms with each code's spellings in one group: "r-500", "r500", "r", "500".

    The tokenizer indexes a code whole, split and joined so any typing of it hits (and jieba's
    search mode a long Chinese word whole and in parts); counted as four terms, one product name
    outweighs the rest of the question. Answer sentence selection
    scores by groups (the title "R-500 手册" must not beat "每运行 500 小时:更换滚刷" for "R-500 的滚刷
    多久更换一次"): a group weighs as its heaviest spelling and counts as found with the heaviest
    spelling a sentence holds, a code's parts only all together (`code_found`: "e" alone, from
    E-45, is not E-71). English clitics left by the tokenizer ("s" of "what's", "t" of "don't")
    are no group: "mm/s" would find the "s" of "What's wrong?". lexical_coverage keeps counting
    spellings apart: fusion's cross-language code matching was fitted on that scale.
    """
    terms = query_terms(query)
    groups, absorbed = [], set()
    for term in sorted(terms, key=lambda t: (-len(t), t)):
        if term in absorbed:
            continue
        if is_joined_form(term):  # a code (R-500, v2.1): its spellings form one group
            members = (set(search_tokens(term)) & terms) | {term}
        elif is_chinese(term) and len(term) > 2:
            members = {t for t in terms if t in term}  # jieba's search mode: 服务中心 → 服务, 中心, 服务中心
        else:
            continue
        members -= absorbed
        absorbed |= members
        groups.append(frozenset(members))
    return tuple(groups) + tuple(frozenset([t]) for t in sorted(terms - absorbed - _CLITICS))


def code_found(members: frozenset[str], held: set[str]) -> bool:
    """Does a sentence holding `held` of a term group's spellings hold the group? A code group
    ("e-31", "e31", "e", "31") is held by its whole or joined spelling, or by all its parts
    ("E 31"); one part alone is another code's ("e" of E-45). Other groups: any spelling."""
    wholes = {m for m in members if is_joined_form(m)}
    if not wholes or not held:
        return bool(held)
    joined = {without_joins(w) for w in wholes}
    return bool(held & (wholes | joined)) or members - wholes - joined <= held


def lexical_coverage(
    query: str, search_text: str, doc_freq: dict[str, int], n_docs: int, only: Callable[[str], bool] | None = None
) -> float:
    """IDF-weighted share of the query's terms found in a chunk: "did the keyword arm really match".

    Weighting matters: "Northwind stock code?" matches the company name everywhere, but the
    telling terms (stock code) nowhere, so its coverage stays low. `only` counts just the found
    terms it accepts (e.g. codes and numbers), still as a share of the whole query. `doc_freq`
    and `n_docs` must describe only the chunks the asker may read
    (store.terms.permitted_frequencies), or coverage is a side channel.
    """
    return terms_coverage(query_terms(query), search_text, doc_freq, n_docs, only)


def rendering_weights(terms, doc_freq: dict[str, int], n_docs: int) -> dict[str, float]:
    """Idf of a translation's renderings that occur in what the asker may read; an absent one is
    left out: with a dictionary, that is a rendering the corpus does not use far more often than
    a fact it lacks. Computed once per query, for every hit and sentence."""
    present = {t: n for t in terms if (n := doc_freq.get(t, 0))}
    return idf_weights(set(present), present, n_docs)


def group_coverage(groups, search_text: str, weights: dict[str, float]) -> float:
    """Idf-weighted share of a translated question's concepts a chunk holds (any rendering counts).

    A concept weighs as its most telling rendering in `weights` (rendering_weights); a concept
    with none there is left out.
    """
    words = set(search_text.split())
    total = found = 0.0
    for group in groups:
        weight = max((weights[t] for t in group if t in weights), default=0.0)
        total += weight
        found += weight if words & group else 0.0
    return found / total if total else 0.0


def terms_coverage(
    terms: frozenset[str], search_text: str, doc_freq: dict[str, int], n_docs: int, only: Callable[[str], bool] | None = None
) -> float:
    """lexical_coverage for terms already tokenized (by any analyzer)."""
    if not terms:
        return 0.0
    weights = idf_weights(terms, doc_freq, n_docs)
    found = terms & set(search_text.split())
    if only is not None:
        found = {t for t in found if only(t)}
    return sum(weights[t] for t in found) / sum(weights.values())
