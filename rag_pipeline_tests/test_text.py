from rag_pipeline.text import approx_tokens, fingerprint, normalize, search_tokens, split_sentences


def test_search_tokens_segments_chinese_and_keeps_codes_whole_and_split():
    tokens = search_tokens("X-2000 报错 E-45 是什么意思？")
    assert {"x-2000", "x2000", "2000", "e-45", "e45", "报错"} <= set(tokens)
    assert "什么" not in tokens and "是" not in tokens  # stopwords dropped


def test_search_tokens_same_for_query_and_document_side():
    assert search_tokens("Annual Leave") == search_tokens("annual leave")


def test_normalize_removes_ocr_spaces_between_chinese_but_keeps_english_spaces():
    assert normalize("员 工 手 册  Hello   world") == "员工手册 Hello world"
    assert normalize("第一行\n第二行") == "第一行\n第二行"


def test_fingerprint_ignores_whitespace_noise_only():
    assert fingerprint("Leave  policy\n") == fingerprint("Leave policy")
    assert fingerprint("Leave policy") != fingerprint("Leave policies")


def test_split_sentences_on_chinese_and_western_punctuation():
    assert split_sentences("年假十五天。病假五天！Remote work is allowed. Ok?") == [
        "年假十五天。",
        "病假五天！",
        "Remote work is allowed.",
        "Ok?",
    ]


def test_approx_tokens_counts_cjk_chars_and_words():
    assert approx_tokens("年假") == 2
    assert 2.5 < approx_tokens("annual leave") < 2.7
