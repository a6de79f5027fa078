"""Document frequency of every search term in a generation, computed once when it is staged.

Query-time weights (idf coverage, unknown identifiers) need the frequency of only the handful
of terms in a question. Counting all terms in Python on the first query took 22 s and 4 GB at
1M chunks; counted here in polars at build time and looked up by term, it costs milliseconds.
"""

from __future__ import annotations

import pyarrow as pa

TERM_STATS_SCHEMA = pa.schema([pa.field("term", pa.string(), nullable=False), pa.field("df", pa.int64())])


def document_frequencies(search_text: pa.Array | pa.ChunkedArray, batch_rows: int = 50_000) -> pa.Table:
    """term → number of chunks whose pre-tokenized search text holds it (each chunk counted once).

    Counted per batch of chunks and summed: exploding a million chunks' terms at once took 8 GB.
    """
    import polars as pl

    texts = pl.from_arrow(search_text)
    if texts.len() == 0:
        return TERM_STATS_SCHEMA.empty_table()
    partial = [
        pl.DataFrame({"term": texts.slice(start, batch_rows)})
        .select(pl.col("term").str.split(" ").list.unique())
        .explode("term")
        .filter(pl.col("term").is_not_null() & (pl.col("term") != ""))
        .group_by("term")
        .len("df")
        for start in range(0, texts.len(), batch_rows)
    ]
    counted = pl.concat(partial).group_by("term").agg(pl.col("df").sum()).sort("term")
    return counted.to_arrow().cast(TERM_STATS_SCHEMA)


def lookup(dataset, terms: frozenset[str]) -> dict[str, int]:
    """Frequencies of `terms` in a lance dataset of TERM_STATS_SCHEMA (a term absent is in no chunk)."""
    if not terms:
        return {}
    quoted = ", ".join("'" + t.replace("'", "''") + "'" for t in sorted(terms))
    found = dataset.to_table(columns=["term", "df"], filter=f"term IN ({quoted})")
    return dict(zip(found.column("term").to_pylist(), found.column("df").to_pylist()))


PERMITTED_DF_CAP = 10_000  # counting stops here: idf barely moves past it, and counting costs postings


def permitted_frequencies(chunks, terms: frozenset[str], where: str, cap: int = PERMITTED_DF_CAP) -> dict[str, int]:
    """Chunks that `where` admits holding each term, counted in the full-text index (at most `cap`).

    Statistics that decide an answer or a refusal must speak only of what the asker may read:
    the generation's term_stats count every chunk (secret ones too), so whether a rare word
    sits in a secret document would change an ordinary user's coverage, idf and refusal. The
    full-text index is built with the whitespace tokenizer over the pre-tokenized column, so a
    one-term match is exactly "this chunk holds the term"; the filter is applied before the
    search (prefilter), as in the retrieval arms.
    """
    from rag_pipeline.store.schema import SEARCH_TEXT_COLUMN

    counts: dict[str, int] = {}
    for term in sorted(terms):
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
