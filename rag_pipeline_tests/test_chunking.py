from rag_pipeline.chunking import chunk_document
from rag_pipeline.config import ChunkingSettings
from rag_pipeline.ingest.document import ParsedDocument, TextBlock
from rag_pipeline.text import approx_tokens

SMALL = ChunkingSettings(max_tokens=60, overlap_tokens=15)


def _doc(blocks):
    return ParsedDocument(blocks=blocks, format="md", parser="test")


def _section(heading, n, page=None):
    path = ("Handbook", heading)
    return [TextBlock(heading, kind="heading", heading_path=path, page=page)] + [
        TextBlock(f"{heading} rule {i} says employees must follow step {i} carefully.", heading_path=path, page=page)
        for i in range(n)
    ]


def test_chunks_respect_sections_pages_and_budget():
    blocks = [TextBlock("Handbook", kind="heading", heading_path=("Handbook",))]
    blocks += _section("Leave", 12) + _section("Travel", 3, page=2)
    chunks = chunk_document("doc1", _doc(blocks), SMALL)
    assert {c.heading_path for c in chunks} == {("Handbook", "Leave"), ("Handbook", "Travel")}
    assert all(approx_tokens(c.text) <= SMALL.max_tokens for c in chunks)
    assert [c.page for c in chunks if c.heading_path[-1] == "Travel"] == [2]
    assert chunks[0].embed_text.startswith("Handbook > Leave\n")  # heading path gives context


def test_consecutive_chunks_overlap():
    chunks = chunk_document("doc1", _doc(_section("Leave", 12)), SMALL)
    assert len(chunks) > 2
    for a, b in zip(chunks, chunks[1:]):
        assert a.text.splitlines()[-1] == b.text.splitlines()[0]


def test_chunk_ids_are_content_addressed_and_survive_an_insertion_at_the_top():
    before = chunk_document("doc1", _doc(_section("Leave", 12)), SMALL)
    inserted = _section("Leave", 12)
    inserted.insert(1, TextBlock("A new introductory paragraph.", heading_path=("Handbook", "Leave")))
    after = chunk_document("doc1", _doc(inserted), SMALL)
    kept = {c.chunk_id for c in before} & {c.chunk_id for c in after}
    assert len(kept) >= len(before) - 2  # only the chunk(s) around the insertion change


def test_long_chinese_paragraph_splits_on_sentence_ends():
    text = "员工每年享有十五天带薪年假。" * 20
    chunks = chunk_document("zh", _doc([TextBlock(text, heading_path=("员工手册",))]), SMALL)
    assert len(chunks) > 1
    assert all(c.text.endswith("。") for c in chunks)
    assert len({c.chunk_id for c in chunks}) == len(chunks)  # repeated text still gets unique ids
