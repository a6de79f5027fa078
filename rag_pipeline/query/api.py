"""Python API for notebooks and the CLI: open the published index, search, ask.

    from rag_pipeline.query import RagIndex
    index = RagIndex.open("data/lake")
    index.search("E-45 error", mode="hybrid").to_polars()
    index.ask("How many days of annual leave do I get?").answer
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from rag_pipeline.config import Settings
from rag_pipeline.embedding.encoder import Encoder, ModelMismatchError, encoder_for
from rag_pipeline.query.answer import (
    Answer,
    RefusalPolicy,
    best_sentence_coverage,
    compose,
    context_hits,
    quote_states_address,
    quote_states_number,
    refusal_reason,
    select_sentences,
)
from rag_pipeline.query.answer_type import asked_measures
from rag_pipeline.query.filters import Principal, search_filter
from rag_pipeline.ingest.language import detect_language
from rag_pipeline.query.fusion import Background, coverage_weight, rrf, same_language, standing_weights
from rag_pipeline.text import is_code_term, is_identifier
from rag_pipeline.query.generate import LLMSettings, generate_answer
from rag_pipeline.query.rerank import Reranker, RerankSettings, load_reranker
from rag_pipeline.query.rerank import rerank as rerank_hits
from rag_pipeline.query.retrieve import (
    dense_arm, group_coverage, idf_weights, keyword_arm, lexical_coverage, query_terms, rendering_weights, terms_arm,
)
from rag_pipeline.query.rewrite import rewrite_query
from rag_pipeline.query.token_recall import sentence_recalls, token_recall
from rag_pipeline.query.translate import translate_query
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake
from rag_pipeline.store.terms import BATCH_COUNT_ROWS, SCOPE_VOCABULARY_MAX_ROWS, fts_token, lookup, permitted_frequencies, vocabulary

MODES = ("hybrid", "hybrid-rrf", "vector", "keyword")  # hybrid = query-aware fusion; hybrid-rrf = plain RRF
RRF_K = 60  # plain RRF (hybrid-rrf), the baseline of Cormack et al.
# hybrid: chosen on the fit halves of ../shared/bench only, reported on the other halves
# (bench/fusion_sweep.py, bench/README.md "Fusion rule")
HYBRID_RRF_K = 20
DENSE_GAP_RANK = 5  # dense_gap_z compares the best passage with the one at this rank
KEYWORD_FULL_TRUST_COVERAGE = 0.5  # keyword hit weight = min(1, coverage / this)
# The dictionary-translated keyword arm: a hit's say = arm weight × min(1, concept coverage / full
# trust), chosen on fit halves (XQuAD en→zh, sample golden cross-lingual) by bench/cross_lingual.py --sweep
TRANSLATED_ARM_WEIGHT = 1.0
TRANSLATED_FULL_TRUST_COVERAGE = 1.0
# A dense hit's say = min(1, its cosine's standing above the asker's background, in spreads / this):
# chosen on the fit halves by bench/fusion_sweep.py ("dense z/…" rules; bench/README.md)
DENSE_FULL_TRUST_Z = 4.0
BACKGROUND_SAMPLE = 512
SENTENCE_CACHE = 4096  # answer-sentence vectors kept in-process (sentence choice for a model folder without token states)
SCOPES_CACHED = 32  # per-filter statistics (row count, background sample, vocabulary) kept for this many filters
# How permitted document frequencies are counted (issue 18): "vocabulary" = looked up in the
# filter's own vocabulary when it admits at most SCOPE_VOCABULARY_MAX_ROWS chunks, or in the
# generation's term_stats when it admits every chunk, else as "batched" = one OR-ed full-text
# query; "per-term" = one full-text query per term (the reference). All give the same counts.
TERM_COUNTING = ("vocabulary", "batched", "per-term")


@dataclass
class Hit:
    chunk_id: str
    doc_id: str
    source: str
    title: str
    page: int | None
    heading_path: str
    text: str
    language: str
    score: float
    dense_rank: int | None
    dense_score: float | None
    keyword_rank: int | None
    keyword_score: float | None
    keyword_weight: float | None  # the keyword arm's say for this hit (query-aware fusion)
    fused_rank: int | None = None  # set when a reranker reordered the fused list
    rerank_score: float | None = None
    rerank_rank: int | None = None
    translated_rank: int | None = None  # rank in the dictionary-translated keyword arm (another language)
    translated_weight: float | None = None
    dense_weight: float | None = None  # the dense arm's say for this hit (its standing above the background)


class SearchResult(list):
    """A list of Hit that converts to the dataframes analysts use."""

    rerank_status: str = "off"  # off | reranked | degraded
    rerank_note: str = ""

    def to_dicts(self) -> list[dict]:
        return [asdict(h) for h in self]

    def to_arrow(self) -> pa.Table:
        return pa.Table.from_pylist(self.to_dicts())

    def to_polars(self):
        import polars as pl

        return pl.DataFrame(self.to_dicts(), infer_schema_length=None)


def stored_policy(lake: Lake, manifest: dict) -> RefusalPolicy:
    """The thresholds `rag calibrate` fitted for the served model, else the defaults."""
    record = lake.read_refusal_policy(manifest["model"]["key"])
    return (RefusalPolicy.from_record(record) if record else None) or RefusalPolicy()


class RagIndex:
    """A read-only view of one published index generation."""

    def __init__(
        self,
        lake: Lake,
        manifest: dict,
        encoder: Encoder,
        policy: RefusalPolicy,
        arm_depth: int = 100,
        llm: LLMSettings | None = None,
        reranker: Reranker | None = None,
        rerank_top_n: int = 50,
    ):
        self.lake = lake
        self.manifest = manifest
        self.encoder = encoder
        self.policy = policy
        self.arm_depth = arm_depth
        self.llm = llm  # None: extractive answers only
        self.reranker = reranker  # None: fused order is final
        self.rerank_top_n = rerank_top_n
        self.translate_queries = True  # the dictionary-translated keyword arm of `hybrid` (off: ablation)
        self.rewrite_queries = True  # conversational wrapper removed before retrieval (off: ablation)
        self.token_recall = True  # the gate's token recall evidence (off: ablation and its cost; the gate reads its fitted mean)
        self.term_counting = "vocabulary"  # one of TERM_COUNTING; all give the same counts
        self.chunks = lake.open_published(s.CHUNKS, manifest)
        self._term_stats = None  # opened on first need: a filter admitting every chunk of a large generation
        # Statistics that decide answers and refusals are taken over the rows the asker may read
        # (keyed by the search filter), never over the whole generation: see _scope.
        self._scopes: dict[str, dict] = {}
        self._sentence_cache: dict[str, np.ndarray] = {}

    @classmethod
    def open(
        cls,
        lake_dir: str | Path | None = None,
        settings: Settings | None = None,
        policy: RefusalPolicy | None = None,
        llm: LLMSettings | None = None,
        rerank: RerankSettings | None = None,
    ) -> "RagIndex":
        """The published generation in `lake_dir`.

        `llm` defaults to RAG_LLM_* (unset: extractive answers), `rerank` to RAG_RERANK_* (unset: off).
        """
        settings = settings or Settings()
        lake = Lake(Path(lake_dir) if lake_dir else settings.lake_dir)
        manifest = lake.read_manifest()
        encoder = encoder_for(settings)
        recorded = manifest["model"]
        if recorded["key"] != encoder.identity.key:
            raise ModelMismatchError(
                f"the index in {lake.lake_dir} was built with model {recorded['name']} "
                f"({recorded.get('precision', 'fp32')}, key {recorded['key']}) but {encoder.identity.name} "
                f"({encoder.identity.precision}, key {encoder.identity.key}) is configured; set "
                "RAG_EMBEDDING_MODEL / RAG_EMBEDDING_PRECISION to the index's or re-index with the new one"
            )
        rerank = rerank or RerankSettings.from_env()
        return cls(
            lake, manifest, encoder, policy or stored_policy(lake, manifest),
            llm=llm or LLMSettings.from_env(), reranker=load_reranker(rerank), rerank_top_n=rerank.top_n,
        )

    # --- retrieval ------------------------------------------------------------------------

    def search(
        self,
        query: str,
        mode: str = "hybrid",
        k: int = 10,
        principal: Principal | None = None,
        where: str | None = None,
        rerank: bool | None = None,
    ) -> SearchResult:
        """Ranked chunks the principal may read; `where` is an extra SQL filter (e.g. departments).

        `rerank`: None reranks when a reranker is configured; True asks for it (the result says
        `rerank_status = "degraded"` when it could not run); False never reranks.
        """
        hits, _ = self._retrieve(self._rewritten(query), mode, k, principal, where, rerank)
        return hits

    def _rewritten(self, query: str) -> str:
        """What retrieval and the evidence read (query.rewrite); readers see the original."""
        return rewrite_query(query) if self.rewrite_queries else query

    def _retrieve(self, query: str, mode: str, k: int, principal: Principal | None, where: str | None, rerank: bool | None = None):
        """Hits plus what ask() needs; a damaged table surfaces as IndexUnreadableError (with the fix)."""
        with self.lake.reading(s.CHUNKS, self.manifest):
            return self._retrieve_unguarded(query, mode, k, principal, where, rerank)

    def _retrieve_unguarded(self, query, mode, k, principal, where, rerank):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        predicate = search_filter(principal, where)
        depth = max(self.arm_depth, k)
        query_vec = self.encoder.encode_query(query)
        rows: dict[str, dict] = {}
        rankings: dict[str, list[tuple[str, float]]] = {}
        hybrid = mode.startswith("hybrid")
        if hybrid or mode == "vector":
            dense = dense_arm(self.chunks, query_vec, predicate, depth, self.manifest.get("vector_index"))
            rankings["dense"] = [(r["chunk_id"], r["score"]) for r in dense]
            rows.update((r["chunk_id"], r) for r in dense)
        if hybrid or mode == "keyword":
            keyword = keyword_arm(self.chunks, query, predicate, depth)
            rankings["keyword"] = [(r["chunk_id"], r["score"]) for r in keyword]
            rows.update((r["chunk_id"], r) for r in keyword)
        translation = translate_query(query) if mode == "hybrid" and self.translate_queries else None
        if translation:
            language = f"language = '{translation.target}'"
            translated = terms_arm(self.chunks, translation.terms, f"{predicate} AND {language}", depth)
            rankings["translated"] = [(r["chunk_id"], r["score"]) for r in translated]
            rows.update((r["chunk_id"], r) for r in translated)
        scope = self._scope(predicate)
        sims = scope["background"] @ query_vec  # the query's similarity to unrelated text the asker may read
        background = Background.of(sims)
        terms = query_terms(query) | frozenset(translation.terms if translation else ())
        doc_freq = self._permitted_frequencies(terms, predicate, scope)
        hit_weights = {}
        if mode == "hybrid" and "keyword" in rankings:
            hit_weights["keyword"] = self._keyword_weights(
                query, [rows[cid] for cid, _ in rankings["keyword"]], doc_freq, scope["rows"]
            )
        if mode == "hybrid" and "dense" in rankings:
            hit_weights["dense"] = standing_weights(rankings["dense"], background, DENSE_FULL_TRUST_Z)
        rendered = (translation.groups, rendering_weights(translation.terms, doc_freq, scope["rows"])) if translation else None
        if "translated" in rankings:
            hit_weights["translated"] = {
                cid: TRANSLATED_ARM_WEIGHT * coverage_weight(
                    group_coverage(rendered[0], rows[cid][s.SEARCH_TEXT_COLUMN], rendered[1]), TRANSLATED_FULL_TRUST_COVERAGE
                )
                for cid, _ in rankings["translated"]
            }
        fused = rrf(rankings, k=HYBRID_RRF_K if mode == "hybrid" else RRF_K, hit_weights=hit_weights)
        use_rerank = rerank if rerank is not None else self.reranker is not None
        hits = SearchResult()
        for f in fused[: max(k, self.rerank_top_n) if use_rerank else k]:
            row = rows[f.chunk_id]
            dense_hit, keyword_hit, translated_hit = (f.arms.get(arm) for arm in ("dense", "keyword", "translated"))
            hits.append(
                Hit(
                    chunk_id=f.chunk_id,
                    doc_id=row["doc_id"],
                    source=row["source"],
                    title=row["title"],
                    page=row["page"],
                    heading_path=row["heading_path"],
                    text=row["text"],
                    language=row["language"],
                    score=f.score,
                    dense_rank=dense_hit.rank if dense_hit else None,
                    dense_score=dense_hit.score if dense_hit else None,
                    keyword_rank=keyword_hit.rank if keyword_hit else None,
                    keyword_score=keyword_hit.score if keyword_hit else None,
                    keyword_weight=keyword_hit.weight if keyword_hit else None,
                    translated_rank=translated_hit.rank if translated_hit else None,
                    translated_weight=translated_hit.weight if translated_hit else None,
                    dense_weight=dense_hit.weight if dense_hit else None,
                )
            )
        if use_rerank:
            outcome = rerank_hits(query, hits, self.reranker, self.rerank_top_n, k)
            hits = SearchResult(outcome.hits)
            hits.rerank_status, hits.rerank_note = outcome.status, outcome.note
        evidence = {**self._evidence(query, sims, background, rankings, rows, scope, doc_freq), "rerank": hits.rerank_status}
        return hits, (query_vec, evidence, rows, doc_freq, scope["rows"], rendered)

    def _permitted_frequencies(self, terms: frozenset[str], predicate: str, scope: dict) -> dict[str, int]:
        """Document frequencies over the chunks the asker may read (TERM_COUNTING)."""
        if self.term_counting not in TERM_COUNTING:
            raise ValueError(f"term_counting must be one of {TERM_COUNTING}, got {self.term_counting!r}")
        known = scope["vocabulary"] if self.term_counting == "vocabulary" else None
        if self.term_counting == "vocabulary" and known is None and scope["whole"] and s.TERM_STATS in self.manifest["table_versions"]:
            # nothing is hidden from this asker: the generation's own counts are theirs
            if self._term_stats is None:
                self._term_stats = self.lake.open_published(s.TERM_STATS, self.manifest).to_lance()
            known = lookup(self._term_stats, frozenset(token for t in terms if (token := fts_token(t))))
        batch_rows = 0 if self.term_counting == "per-term" else BATCH_COUNT_ROWS
        return permitted_frequencies(self.chunks, terms, predicate, known=known, batch_rows=batch_rows)

    def _keyword_weights(self, query: str, keyword_rows: list[dict], doc_freq: dict[str, int], n_docs: int) -> dict[str, float]:
        """Each keyword hit's say: its idf coverage of the query; across languages, of codes only."""
        query_language = detect_language(query)
        weights = {}
        for row in keyword_rows:
            only = None if same_language(query_language, row["language"]) else is_code_term
            coverage = lexical_coverage(query, row[s.SEARCH_TEXT_COLUMN], doc_freq, n_docs, only=only)
            weights[row["chunk_id"]] = coverage_weight(coverage, KEYWORD_FULL_TRUST_COVERAGE)
        return weights

    def _evidence(self, query, sims: np.ndarray, background: Background, rankings, rows, scope: dict, doc_freq: dict[str, int]) -> dict:
        """Refusal evidence, every statistic taken over what the asker may read (no side channel).

        Keyword evidence is the question's own words: dictionary renderings match loosely
        (measured: counting them as the question's words raised false answers, bench/README.md);
        they enter the gate only as their own feature, across languages (see ask).
        """
        n_docs = scope["rows"]
        keyword_top = [rows[cid] for cid, _ in rankings.get("keyword", [])[:3]]
        coverage = max(
            (lexical_coverage(query, r[s.SEARCH_TEXT_COLUMN], doc_freq, n_docs) for r in keyword_top), default=0.0
        )
        dense = rankings.get("dense", [])
        top_cos = dense[0][1] if dense else 0.0
        median = float(np.median(sims)) if len(sims) else top_cos
        depth = min(len(dense), DENSE_GAP_RANK) - 1
        gap = top_cos - dense[depth][1] if depth > 0 else 0.0
        query_language = detect_language(query)
        top_language = rows[dense[0][0]]["language"] if dense else query_language
        unknown = sorted(
            t for t in query_terms(query) if is_identifier(t) and not doc_freq.get(t)
        )  # doc_freq counts only permitted chunks: "no document mentions X" must not leak that X exists
        return {
            "candidates": len(rows),
            "unknown_identifiers": unknown,
            "lexical_coverage": round(coverage, 3),
            "dense_top": round(top_cos, 4),
            "dense_background": round(median, 4),
            "dense_margin": round(top_cos - median, 4),
            "dense_z": round(background.standing(top_cos), 3),
            # how far the best passage stands out from the next ones, in background spreads: an
            # answerable question's gold passage stands out; close-but-unanswerable ones tie
            "dense_gap_z": round(gap / background.spread, 3) if background.spread else 0.0,
            "cross_lingual": not same_language(query_language, top_language),
        }

    def _scope(self, predicate: str) -> dict:
        """Per-filter statistics: how many chunks the filter admits, a background vector sample and,
        for a filter admitting at most SCOPE_VOCABULARY_MAX_ROWS chunks, their vocabulary.

        The background (the query's similarity to "unrelated text") is a deterministic sample of
        the admitted chunks, ordered by chunk id, so it depends on the admitted rows alone: a
        secret document neither enters an ordinary user's sample nor shifts which rows it holds.
        The vocabulary (term -> admitted chunks holding it) is read from the admitted rows alone
        too, so a query's document frequencies are look-ups that neither count nor touch a chunk
        the asker may not read (store.terms.permitted_frequencies); `whole` says the filter
        admits every chunk, so the generation's term_stats are the asker's. Cached per filter (a
        principal and its extra `where`) for the index's lifetime.
        """
        cached = self._scopes.get(predicate)
        if cached is not None:
            return cached
        ids = self.chunks.to_lance().to_table(columns=["chunk_id"], filter=predicate, with_row_id=True)
        order = np.argsort(np.asarray(ids.column("chunk_id").to_pylist(), dtype=object), kind="stable")
        step = max(1, ids.num_rows // BACKGROUND_SAMPLE)
        row_ids = ids.column("_rowid").to_numpy()[order][::step]
        dim = self.manifest["model"]["dimension"]
        background = np.zeros((0, dim), dtype=np.float32)
        if len(row_ids):
            vectors = self.chunks.to_lance()._take_rows(row_ids.tolist(), columns=["vector"]).column("vector")
            background = vectors.combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(-1, dim).astype(np.float32)
        known = None
        if ids.num_rows <= SCOPE_VOCABULARY_MAX_ROWS:
            admitted = ids.column("_rowid").to_pylist()
            texts = self.chunks.to_lance()._take_rows(admitted, columns=[s.SEARCH_TEXT_COLUMN]) if admitted else None
            known = vocabulary(texts.column(s.SEARCH_TEXT_COLUMN)) if texts is not None else {}
        if len(self._scopes) >= SCOPES_CACHED:
            self._scopes.pop(next(iter(self._scopes)))
        whole = ids.num_rows == self.chunks.count_rows()  # the filter admits every chunk of the generation
        scope = self._scopes[predicate] = {"rows": ids.num_rows, "background": background, "vocabulary": known, "whole": whole}
        return scope

    # --- answering ------------------------------------------------------------------------

    def _sentence_vectors(self, sentences: list[str]) -> np.ndarray:
        """Passage vectors of answer sentences, cached in-process by text (only the fallback encodes)."""
        missing = [u for u in dict.fromkeys(sentences) if u not in self._sentence_cache]
        if missing:
            for unit, vec in zip(missing, self.encoder.encode_passages(missing)):
                if len(self._sentence_cache) >= SENTENCE_CACHE:
                    self._sentence_cache.pop(next(iter(self._sentence_cache)))
                self._sentence_cache[unit] = np.asarray(vec, dtype=np.float32)
        return np.stack([self._sentence_cache[u] for u in sentences])

    def _sentence_scores(self, query: str, query_vec: np.ndarray, sentences: list[str]) -> np.ndarray:
        """How well each candidate sentence restates `query`, for quoting when words cannot tell:
        token recall from the model's token states (no torch in the query process), else the
        cosine of the model's sentence vectors (a folder without token states)."""
        states = self.encoder.token_states
        if states is None:
            return self._sentence_vectors(sentences) @ query_vec
        identity = self.encoder.identity
        return np.asarray(sentence_recalls(states, query, sentences, identity.query_prompt, identity.passage_prompt))

    def _token_recall(self, query: str, top: list[dict]) -> float | None:
        """How much of the question the best sentence of the first context passage restates, token
        by token (query.token_recall); None when the model's folder gives no token states."""
        states = self.encoder.token_states if self.token_recall else None
        if states is None:
            return None
        if not top:
            return 0.0
        identity = self.encoder.identity
        return token_recall(states, query, top[0]["text"], identity.query_prompt, identity.passage_prompt)

    def ask(self, question: str, k: int = 5, principal: Principal | None = None, where: str | None = None) -> Answer:
        """A cited answer from the chunks the principal may read, or a refusal.

        Extractive by default; with an LLM configured its answer replaces the extractive one only
        when every citation checks out (otherwise the extractive answer comes back with a note).
        """
        query = self._rewritten(question)  # retrieval, evidence and sentence choice; the answer keeps `question`
        hits, (query_vec, evidence, _, doc_freq, n_docs, rendered) = self._retrieve(query, "hybrid", k, principal, where)
        top = context_hits([h.__dict__ for h in hits])
        weights = idf_weights(query_terms(query), doc_freq, n_docs)
        # rendered = (concept groups, weights) of the dictionary translation: its share one sentence holds
        evidence = {
            **evidence,
            "sentence_coverage": round(best_sentence_coverage(query, top, weights), 3),
            "translated_sentence_coverage": round(best_sentence_coverage(query, top, rendered[1], rendered[0]), 3) if rendered else 0.0,
            "token_recall": self._token_recall(query, top),
        }
        if query != question:
            evidence["rewritten_query"] = query
        reason = refusal_reason(evidence, self.policy)
        if reason:
            return Answer(question, "", True, reason, [], evidence)
        picked = select_sentences(
            query, top, weights, model_scores=lambda units: self._sentence_scores(query, query_vec, units),
            cross_lingual=bool(evidence.get("cross_lingual")),
        )
        stated, address = quote_states_number(query, picked), quote_states_address(query, picked)
        if stated is not None:
            evidence["quote_states_number"] = stated
            measures = asked_measures(query)
            if measures:
                evidence["asked_measures"] = list(measures)
        if address is not None:
            evidence["quote_states_address"] = address
        if stated is not None or address is not None:
            reason = refusal_reason(evidence, self.policy)
            if reason:
                return Answer(question, "", True, reason, [], evidence)
        text, citations = compose(picked, top)
        answer = Answer(question, text, False, "answered from the cited passages", citations, {**evidence, "generator": "extractive"})
        if self.llm is not None:
            context = {h["chunk_id"] for h in context_hits([h.__dict__ for h in hits], limit=len(hits))}
            answer = generate_answer(question, [h for h in hits if h.chunk_id in context], answer, self.llm)
        retrieved = {h.chunk_id for h in hits}
        if any(c.chunk_id not in retrieved for c in answer.citations):  # mechanical guard, never expected
            raise RuntimeError("citation outside the retrieved set")
        return answer
