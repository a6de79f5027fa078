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


def test_chunk_ids_are_content_addressed_and_an_edit_rechunks_only_its_section():
    before = chunk_document("doc1", _doc(_section("Leave", 12) + _section("Travel", 6)), SMALL)
    edited = _section("Leave", 12)
    edited.insert(1, TextBlock("A new introductory paragraph.", heading_path=("Handbook", "Leave")))
    after = chunk_document("doc1", _doc(edited + _section("Travel", 6)), SMALL)
    travel = lambda chunks: [c.chunk_id for c in chunks if c.heading_path[-1] == "Travel"]  # noqa: E731
    assert travel(before) and travel(before) == travel(after)  # nothing to re-embed there
    assert {c.chunk_id for c in after} - {c.chunk_id for c in before}  # the edited section did change
    assert chunk_document("doc1", _doc(edited), SMALL)[0].chunk_id == after[0].chunk_id


def test_long_chinese_paragraph_splits_on_sentence_ends():
    text = "员工每年享有十五天带薪年假。" * 20
    chunks = chunk_document("zh", _doc([TextBlock(text, heading_path=("员工手册",))]), SMALL)
    assert len(chunks) > 1
    assert all(c.text.endswith("。") for c in chunks)
    assert len({c.chunk_id for c in chunks}) == len(chunks)  # repeated text still gets unique ids


def _model_budget():
    from rag_pipeline.chunking import TokenBudget
    from rag_pipeline.config import Settings
    from rag_pipeline.embedding.encoder import encoder_for

    settings = Settings()
    encoder = encoder_for(settings)
    return encoder, TokenBudget.for_encoder(encoder)


def test_sizes_are_in_model_tokens_and_never_exceed_what_the_model_reads():
    encoder, budget = _model_budget()
    assert budget.model_limit == encoder.model.max_seq_length - 2 - encoder.count_tokens(encoder.identity.passage_prompt)
    long_heading = ("产品手册 " * 60).strip()  # a heading path that eats much of the model's window
    blocks = [
        TextBlock("The X-3000 pump must be serviced every 500 hours by a certified technician. " * 40, heading_path=("Manual",)),
        TextBlock("员工每年享有十五天带薪年假，未休完的假期可顺延至次年第一季度。" * 40, heading_path=(long_heading,)),
        TextBlock("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" * 120, heading_path=("Appendix",)),  # no sentence ends at all
    ]
    settings = ChunkingSettings(max_tokens=480, overlap_tokens=40)
    chunks = chunk_document("doc", _doc(blocks), settings, budget)
    assert len(chunks) > 6
    for c in chunks:
        embedded = encoder.count_tokens(encoder.identity.passage_prompt + c.embed_text) + 2
        assert embedded <= encoder.model.max_seq_length, (embedded, c.embed_text[:60])
        assert encoder.count_tokens(c.text) <= settings.max_tokens
    # the long heading lowers the text budget of its section, so those chunks are smaller
    zh = [encoder.count_tokens(c.text) for c in chunks if c.heading_path == (long_heading,)]
    en = [encoder.count_tokens(c.text) for c in chunks if c.heading_path == ("Manual",)]
    assert max(zh) < max(en)


def test_model_token_budget_differs_from_the_estimate_on_chinese():
    """The estimate counts one token per Han character; XLM-R merges common words, so fewer chunks."""
    encoder, budget = _model_budget()
    text = "员工每年享有十五天带薪年假。" * 60
    doc = _doc([TextBlock(text, heading_path=("员工手册",))])
    settings = ChunkingSettings(max_tokens=100, overlap_tokens=0)
    by_model = chunk_document("zh", doc, settings, budget)
    assert all(encoder.count_tokens(c.text) <= 100 for c in by_model)
    assert encoder.count_tokens(text) < approx_tokens(text)
    assert len(by_model) < len(chunk_document("zh", doc, settings))
