"""Document frequency of every search term in a generation, computed once when it is staged.

Query-time weights (idf coverage, unknown identifiers) need the frequency of only the handful
of terms in a question. Counting all terms in Python on the first query took 22 s and 4 GB at
1M chunks; counted here in polars at build time and looked up by term, it costs milliseconds.
"""

from __future__ import annotations

import pyarrow as pa

from rag_pipeline.store.predicates import sql_in

TERM_STATS_SCHEMA = pa.schema([pa.field("term", pa.string(), nullable=False), pa.field("df", pa.int64())])
# The full-text index's tokenizer (whitespace, lower_case, lance's default max_token_length): it
# splits on ASCII whitespace, lowercases, and drops a token of this many UTF-8 bytes or more.
FTS_MAX_TOKEN_BYTES = 40
_ASCII_SPACE = " \t\n\f\r"
# A filter admitting up to this many chunks keeps their vocabulary in memory (issue 18; one dict
# per cached filter, as large as the admitted chunks' distinct terms); beyond it, counts come
# from term_stats (a filter admitting every chunk) or from the full-text index.
SCOPE_VOCABULARY_MAX_ROWS = 20_000
PERMITTED_DF_CAP = 10_000  # counting stops here: idf barely moves past it, and counting costs postings
BATCH_COUNT_ROWS = 2_000  # one OR-ed full-text query counts all terms while its match set fits


def document_frequencies(search_text: pa.Array | pa.ChunkedArray, batch_rows: int = 50_000, as_indexed: bool = False) -> pa.Table:
    """term → number of chunks whose pre-tokenized search text holds it (each chunk counted once).

    Counted per batch of chunks and summed: exploding a million chunks' terms at once took 8 GB.
    `as_indexed` tokenizes as the full-text index does (see fts_token): lowercased, split on
    ASCII whitespace, long tokens dropped (the same terms for text from rag_pipeline.text).
    """
    import polars as pl

    texts = pl.from_arrow(search_text)
    if texts.len() == 0:
        return TERM_STATS_SCHEMA.empty_table()
    term = pl.col("term")
    if as_indexed:
        term = term.str.to_lowercase().str.replace_all(r"[\t\n\f\r]", " ")
    partial = [
        pl.DataFrame({"term": texts.slice(start, batch_rows)})
        .select(term.str.split(" ").list.unique())
        .explode("term")
        .filter(pl.col("term").is_not_null() & (pl.col("term") != ""))
        .filter(pl.col("term").str.len_bytes() < FTS_MAX_TOKEN_BYTES if as_indexed else pl.lit(True))
        .group_by("term")
        .len("df")
        for start in range(0, texts.len(), batch_rows)
    ]
    return _summed(partial)


def sum_frequencies(parts: list[pa.Table]) -> pa.Table:
    """document_frequencies of several disjoint sets of chunks, summed into one (each chunk was
    counted once in its own part): the term statistics of a generation written in batches."""
    import polars as pl

    parts = [pl.from_arrow(p) for p in parts if p.num_rows]
    return _summed(parts) if parts else TERM_STATS_SCHEMA.empty_table()


def changed_frequencies(base: pa.Table | None, added: list[pa.Table], removed: list[pa.Table]) -> pa.Table:
    """A generation's term statistics from its base's, plus the rows it added, minus those it
    deleted (each a document_frequencies table); terms left in no chunk are dropped."""
    import polars as pl

    frames = [pl.from_arrow(p) for p in ([base] if base is not None else []) + added if p.num_rows]
    frames += [pl.from_arrow(p).with_columns(-pl.col("df")) for p in removed if p.num_rows]
    if not frames:
        return TERM_STATS_SCHEMA.empty_table()
    counted = pl.from_arrow(_summed(frames)).filter(pl.col("df") > 0)
    return counted.to_arrow().cast(TERM_STATS_SCHEMA)


def _summed(frames) -> pa.Table:
    """Per-term sums of (term, df) polars frames, sorted by term, as a TERM_STATS_SCHEMA table."""
    import polars as pl

    counted = pl.concat(frames).group_by("term").agg(pl.col("df").sum()).sort("term")
    return counted.to_arrow().cast(TERM_STATS_SCHEMA)


def lookup(dataset, terms: frozenset[str]) -> dict[str, int]:
    """Frequencies of `terms` in a lance dataset of TERM_STATS_SCHEMA (a term absent is in no chunk)."""
    if not terms:
        return {}
    found = dataset.to_table(columns=["term", "df"], filter=sql_in("term", sorted(terms)))
    return dict(zip(found.column("term").to_pylist(), found.column("df").to_pylist()))


def fts_token(term: str) -> str | None:
    """The one token the full-text index holds for `term` ("" when the index drops it), or None
    when `term` is not one plain token (it has spaces or a phrase quote: only the index counts it).
    """
    if not term or any(c in term for c in _ASCII_SPACE) or '"' in term:
        return None
    token = term.lower()
    return "" if len(token.encode("utf-8")) >= FTS_MAX_TOKEN_BYTES else token


def vocabulary(search_text: pa.Array | pa.ChunkedArray) -> dict[str, int]:
    """token → chunks holding it, tokenized exactly as the full-text index does (see fts_token).

    Given only the chunks a filter admits, this is the permitted document frequency of every
    term at once: what permitted_frequencies would otherwise count one index query per term.
    """
    counted = document_frequencies(search_text, as_indexed=True)
    return dict(zip(counted.column("term").to_pylist(), counted.column("df").to_pylist()))


def permitted_frequencies(
    chunks,
    terms: frozenset[str],
    where: str,
    cap: int = PERMITTED_DF_CAP,
    known: dict[str, int] | None = None,
    batch_rows: int = BATCH_COUNT_ROWS,
) -> dict[str, int]:
    """Chunks that `where` admits holding each term (at most `cap`); a term in none is left out.

    Statistics that decide an answer or a refusal must speak only of what the asker may read:
    the generation's term_stats count every chunk (secret ones too), so whether a rare word
    sits in a secret document would change an ordinary user's coverage, idf and refusal.

    `known` is the vocabulary (see `vocabulary`) of exactly the chunks `where` admits, kept per
    filter by the caller: then every term is a dictionary look-up, no index query at all. Else
    the full-text index counts them (count_in_index). The work never depends on a chunk the
    filter refuses: the dictionary holds admitted chunks only, and the index path issues the
    same queries whether or not a term occurs anywhere (pruning the terms absent from the
    generation would make a word present only in a secret document cost one more query).
    """
    counted = {}
    if known is not None:
        unplain = set()
        for term in terms:
            token = fts_token(term)
            if token is None:
                unplain.add(term)
            elif token and (n := known.get(token)):
                counted[term] = min(n, cap)
        if unplain:
            counted.update(count_in_index(chunks, frozenset(unplain), where, cap, batch_rows))
    else:
        counted = count_in_index(chunks, terms, where, cap, batch_rows)
    return {t: counted[t] for t in sorted(terms) if t in counted}


def count_in_index(chunks, terms: frozenset[str], where: str, cap: int = PERMITTED_DF_CAP, batch_rows: int = BATCH_COUNT_ROWS) -> dict[str, int]:
    """Per-term counts from the full-text index, pre-filtered: one OR-ed query while it fits.

    The index is built with the whitespace tokenizer over the pre-tokenized column, so a
    one-term match is exactly "this chunk holds the term". One query over all plain terms
    returns every admitted chunk holding any of them when fewer than `batch_rows` do; each
    term is then counted in the returned chunks' own search text. When the match set does not
    fit (a decision about admitted chunks only), each term is counted by its own query;
    `batch_rows=0` counts every term by its own query (the reference the batch is checked on).
    """
    from rag_pipeline.store.schema import SEARCH_TEXT_COLUMN

    plain = {t: fts_token(t) for t in sorted(terms)}
    single = sorted(t for t, token in plain.items() if token is None)
    batched = {t: token for t, token in plain.items() if token is not None}
    counts: dict[str, int] = {}
    tokens = sorted({token for token in batched.values() if token})
    if not batch_rows:
        single = sorted(terms)
    elif tokens:
        rows = (
            chunks.search(" ".join(tokens), query_type="fts", fts_columns=SEARCH_TEXT_COLUMN)
            .where(where, prefilter=True)
            .select([SEARCH_TEXT_COLUMN])
            .limit(batch_rows)
            .to_arrow()
        )
        if rows.num_rows < batch_rows:
            held = vocabulary(rows.column(SEARCH_TEXT_COLUMN))
            counts.update((t, min(held[token], cap)) for t, token in batched.items() if held.get(token))
        else:
            single = sorted(terms)
    for term in single:
        rows = (
            chunks.search(term, query_type="fts", fts_columns=SEARCH_TEXT_COLUMN)
            .where(where, prefilter=True)
            .select(["chunk_id"])
            .limit(cap)
            .to_arrow()
        )
        if rows.num_rows:
            counts[term] = rows.num_rows
    return counts
