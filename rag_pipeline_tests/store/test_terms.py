"""Term document frequencies: counted in batches, equal to a plain count over the same chunks."""

from collections import Counter

import pyarrow as pa

from rag_pipeline.store.terms import document_frequencies
from rag_pipeline.text import search_tokens
from rag_pipeline_tests.conftest import SAMPLE


def test_batched_counts_equal_a_plain_count_over_real_text():
    texts = []
    for path in sorted(SAMPLE.rglob("*")):
        if path.suffix in {".md", ".txt", ".html", ".csv"}:  # the GBK page decodes lossily: still real text
            texts += [" ".join(search_tokens(line)) for line in path.read_text(encoding="utf-8", errors="replace").splitlines()]
    texts += ["", "e-45 e-45 e45"]  # an empty chunk, and a term repeated inside one chunk
    expected = Counter(t for text in texts for t in set(text.split()))
    for batch_rows in (7, 50_000):  # many batches whose counts must be summed, and one
        table = document_frequencies(pa.chunked_array([texts[:40], texts[40:]]), batch_rows=batch_rows)
        assert dict(zip(table.column("term").to_pylist(), table.column("df").to_pylist())) == expected
    assert document_frequencies(pa.array([], pa.string())).num_rows == 0


def test_a_generation_written_in_many_batches_counts_its_terms_as_one_count_over_every_row():
    """`Lake.stage` sums the per-batch counts as it goes (every TERM_PARTS_HELD batches): the
    statistics must equal one count over every chunk, whatever the batch count."""
    from rag_pipeline.store import schema as s
    from rag_pipeline.store.lake import TERM_PARTS_HELD, _counted
    from rag_pipeline.store.terms import sum_frequencies

    lines = [line for path in sorted(SAMPLE.rglob("*.md")) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = [" ".join(search_tokens(line)) for line in lines]
    batches = [pa.table({s.SEARCH_TEXT_COLUMN: texts[i : i + 1]}) for i in range(len(texts))]
    assert len(batches) > 2 * TERM_PARTS_HELD
    counted = {"rows": 0, "terms": []}
    assert sum(b.num_rows for b in _counted(batches, counted)) == len(texts) == counted["rows"]
    assert len(counted["terms"]) < TERM_PARTS_HELD  # summed on the way, not one part a batch
    summed = sum_frequencies(counted["terms"])
    assert summed.equals(sum_frequencies([document_frequencies(pa.array(texts))]))
