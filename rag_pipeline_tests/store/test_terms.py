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
