"""Questions over documents in the other language, on the real sample index (query-aware fusion,
the dictionary-translated keyword arm).

it/运维手册.html and products/产品手册_R500.pdf exist only in Chinese. A keyword hit in another
language than the question counts only its codes and numbers (P1, E-71, R-500): the terms that
mean the same in both languages.
"""

from rag_pipeline.text import is_code_term, search_tokens


def _rank(hits, source):
    return next((n for n, h in enumerate(hits, start=1) if h.source == source), None)


def test_english_question_retrieves_the_chinese_only_document_in_hybrid_mode(sample_index):
    hits = sample_index.search("How quickly must a P1 incident be responded to?", mode="hybrid", k=5)
    rank = _rank(hits, "it/运维手册.html")
    assert rank is not None and rank <= 3, [(h.source, h.dense_rank, h.keyword_rank, h.keyword_weight) for h in hits]
    zh = hits[rank - 1]
    assert zh.language == "zh" and zh.dense_rank is not None  # both arms' ranks are kept for tracing
    assert 0 < zh.keyword_weight < 1  # P1 matched across languages, the English words could not


def test_a_code_lifts_the_chinese_manual_above_plain_rrf(sample_index):
    question = "What does error E-71 on the R-500 mean?"
    hybrid = sample_index.search(question, mode="hybrid", k=10)
    plain = sample_index.search(question, mode="hybrid-rrf", k=10)
    manual = "products/产品手册_R500.pdf"
    assert _rank(hybrid, manual) <= 5
    assert _rank(hybrid, manual) < (_rank(plain, manual) or 11)
    assert any("E-71" in h.text for h in hybrid if h.source == manual)


def test_cross_language_keyword_hits_without_a_shared_code_get_no_say(sample_index):
    question = "Which requests go through NorthDesk and the ERP?"  # both words occur in Chinese chunks
    assert not any(is_code_term(t) for t in search_tokens(question))
    hits = sample_index.search(question, mode="hybrid", k=50)
    zh_keyword = [h for h in hits if h.language == "zh" and h.keyword_rank is not None]
    assert zh_keyword, "the keyword arm should still list Chinese chunks (kept for tracing)"
    assert all(h.keyword_weight == 0 for h in zh_keyword)
    en_keyword = [h for h in hits if h.language == "en" and h.keyword_rank is not None]
    assert all(h.keyword_weight > 0 for h in en_keyword)


def test_same_language_hits_keep_their_keyword_say(sample_index):
    hits = sample_index.search("服务器什么时候做全量备份？", mode="hybrid", k=3)
    assert hits[0].source == "it/运维手册.html"
    assert hits[0].keyword_rank == 1 and hits[0].keyword_weight > 0.5


def _ranks(index, question, source):
    """(rank with the dictionary-translated keyword arm, rank without it) of `source` in the top 10."""
    with_arm = index.search(question, mode="hybrid", k=10)
    index.translate_queries = False
    try:
        without_arm = index.search(question, mode="hybrid", k=10)
    finally:
        index.translate_queries = True
    return with_arm, _rank(with_arm, source), _rank(without_arm, source)


def test_a_chinese_question_finds_the_english_only_handbook_through_the_translated_arm(sample_index):
    hits, rank, rank_without = _ranks(sample_index, "国际出差每天的餐补是多少？", "handbook/employee_handbook_en.md")
    assert rank is not None and rank <= 5, [(h.source, h.dense_rank, h.translated_rank) for h in hits]
    assert rank <= (rank_without or 11)
    en = hits[rank - 1]
    assert en.language == "en" and en.translated_rank is not None and en.translated_weight > 0


def test_an_english_question_finds_the_chinese_only_handbook_through_the_translated_arm(sample_index):
    hits, rank, rank_without = _ranks(sample_index, "What is the maximum hotel rate per night in Beijing?", "handbook/员工手册.docx")
    assert rank is not None and rank <= 5, [(h.source, h.dense_rank, h.translated_rank) for h in hits]
    assert rank <= (rank_without or 11)
    assert hits[rank - 1].translated_rank is not None


def test_the_translated_arm_searches_only_the_other_language(sample_index):
    hits = sample_index.search("服务器什么时候做全量备份？", mode="hybrid", k=20)
    assert all(h.language == "en" for h in hits if h.translated_rank is not None)
    assert all(h.translated_rank is None for h in sample_index.search("服务器什么时候做全量备份？", mode="hybrid-rrf", k=20))
