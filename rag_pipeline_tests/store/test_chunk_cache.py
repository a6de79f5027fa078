"""The chunk cache hands on exactly what chunking would, and its key sees everything chunks depend on."""

from __future__ import annotations

import pyarrow as pa

from rag_pipeline.chunking import chunk_cache_key, chunk_document
from rag_pipeline.config import ChunkingSettings
from rag_pipeline.defs.io import read_arrow, write_arrow
from rag_pipeline.ingest.document import ParsedDocument, TextBlock
from rag_pipeline.ingest.serialize import outcome_to_json
from rag_pipeline.store import staging
from rag_pipeline.store.lake import Lake
from rag_pipeline.store.rows import input_signature
from rag_pipeline.text import approx_tokens

SETTINGS = ChunkingSettings(max_tokens=40, overlap_tokens=10)


def _docs() -> dict[str, ParsedDocument]:
    long = " ".join(f"Rule {i} says employees must follow step {i} carefully." for i in range(30))
    return {
        "d1": ParsedDocument([TextBlock("Leave", "heading", ("Leave",)), TextBlock(long, heading_path=("Leave",), page=3)], "md", "markdown"),
        "d2": ParsedDocument([TextBlock("年假为十五天。员工须提前申请。", heading_path=())], "txt", "text"),
        "d3": ParsedDocument([TextBlock("Only a heading", "heading", ("Only a heading",))], "md", "markdown"),
        "d4": ParsedDocument([], "txt", "text"),  # no chunks at all: cached as such
    }


def test_chunks_from_the_lake_cache_equal_fresh_chunking_in_document_order(tmp_path):
    docs = _docs()
    fresh = {d: chunk_document(d, doc, SETTINGS) for d, doc in docs.items()}
    expected = staging.chunks_to_table([c for d in docs for c in fresh[d]])
    keys = {d: chunk_cache_key(d, outcome_to_json(doc), SETTINGS, "m1") for d, doc in docs.items()}
    lake = Lake(tmp_path / "lake")
    first = staging.chunk_cache_rows({keys[d]: (fresh[d], [approx_tokens(c.embed_text) for c in fresh[d]]) for d in ("d3", "d1")}, 512)
    lake.add_chunks(first)
    lake.add_chunks(staging.chunk_cache_rows({keys[d]: (fresh[d], [7] * len(fresh[d])) for d in ("d4", "d2")}, 512))
    order = [keys[d] for d in docs]
    cached = lake.cached_chunks(order)
    assert cached.num_rows == 4 and lake.cached_chunks(["nope"]).num_rows == 0
    table, tokens = staging.chunks_from_cache(cached, order)
    assert table.equals(expected) and table.schema == expected.schema
    assert len(fresh["d1"]) > 2 and fresh["d1"][0].page == 3 and fresh["d2"][0].page is None
    assert tokens.to_pylist() == [int(approx_tokens(c.embed_text)) for c in fresh["d1"]] + [7] * len(fresh["d2"]) + [
        int(approx_tokens(c.embed_text)) for c in fresh["d3"]
    ]
    # through the stage hand-off and with other chunking, the signature stays the same
    write_arrow(tmp_path / "c.arrow", table)
    mixed, _ = staging.chunks_from_cache(pa.concat_tables([cached.slice(2), first]), order)
    assert input_signature([read_arrow(tmp_path / "c.arrow")], "m", 4) == input_signature([expected], "m", 4)
    assert input_signature([mixed], "m", 4) == input_signature([expected], "m", 4)


def test_chunk_cache_key_changes_with_the_document_its_parse_the_settings_and_the_model():
    doc = outcome_to_json(_docs()["d1"])
    base = chunk_cache_key("d1", doc, SETTINGS, "m1")
    assert chunk_cache_key("d1", doc, ChunkingSettings(max_tokens=40, overlap_tokens=10), "m1") == base
    changed = [
        chunk_cache_key("d2", doc, SETTINGS, "m1"),
        chunk_cache_key("d1", doc.replace("Rule 3", "Rule 4"), SETTINGS, "m1"),
        chunk_cache_key("d1", doc, ChunkingSettings(max_tokens=41, overlap_tokens=10), "m1"),
        chunk_cache_key("d1", doc, ChunkingSettings(max_tokens=40, overlap_tokens=11), "m1"),
        chunk_cache_key("d1", doc, SETTINGS, "m2"),
    ]
    assert len({base, *changed}) == 6
