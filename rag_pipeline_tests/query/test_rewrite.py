"""Query rewriting: the conversational wrapper is removed before retrieval, the question's content
and the answer's view of the question are kept."""

from __future__ import annotations

import pytest

from rag_pipeline.query.rewrite import rewrite_query
from rag_pipeline.text import question_tokens


@pytest.mark.parametrize(
    ("asked", "plain"),
    [
        ("Hi, quick question - could you tell me how many days of paid annual leave I get? Thanks!",
         "how many days of paid annual leave I get?"),
        ("Do you happen to know what error E-45 means on the X-2000? thx", "what error E-45 means on the X-2000?"),
        ("Sorry to bother you, but I need to know whether contractors get paid leave.", "contractors get paid leave."),
        ("您好，麻烦帮我查一下年假有几天，谢谢啦", "年假有几天，"),
        ("我想问一下P1级故障要求多长时间内响应呀？", "P1级故障要求多长时间内响应？"),
    ],
)
def test_the_wrapper_goes_and_every_term_of_the_question_stays(asked, plain):
    rewritten = rewrite_query(asked)
    assert rewritten == plain
    assert set(question_tokens(rewritten)) <= set(question_tokens(asked))


@pytest.mark.parametrize(
    "question",
    [
        "这个问题怎么处理",  # 问题 is content, not 问 + 题
        "我下个月要去哈尔滨出差，住宿标准是多少？",  # 哈 of 哈尔滨 is not a particle
        "What is the maximum payload of the X-2000 arm?",
        "Hi! Thanks!",  # nothing would be left: the original is searched
        "Ly6C hi monocytes have a higher inflammatory capacity than Ly6C lo monocytes.",  # a greeting only opens a message
        "What U.S. entity said that corporal punishment was Constitutional?",  # an abbreviation ends no sentence
        'Why was the student group called "the Methodists?"',
    ],
)
def test_a_question_without_a_wrapper_is_searched_as_asked(question):
    assert rewrite_query(question) == question


def test_a_colloquial_question_is_answered_like_its_plain_form_and_keeps_its_words(sample_index):
    plain = sample_index.ask("How many days of paid annual leave does a full-time employee get?")
    asked = "Hey, sorry to bother you! Could you tell me how many days of paid annual leave a full-time employee gets? Thanks a lot"
    answer = sample_index.ask(asked)
    assert not plain.refused and not answer.refused
    assert answer.question == asked  # the reader (and an LLM) sees what was asked
    assert answer.evidence["rewritten_query"] == "how many days of paid annual leave a full-time employee gets?"
    assert [c.source for c in answer.citations][:1] == [c.source for c in plain.citations][:1]
    assert "15 working days" in answer.answer


@pytest.mark.parametrize(
    ("asked", "plain"),
    [
        ("Hi, sorry for the urgent ping. One of our X-2000 arms just stopped mid-cycle and it's reporting E-58. "
         "What should I be checking?", "X-2000 E-58 What should I be checking?"),
        ("明天第一次去上海总部开会，怕走错地方。上海总部的地址在哪里？", "上海总部的地址在哪里？"),
        ("您好，我第一次当值班负责人，有点紧张。想确认一下，发生 P1 故障的时候多久要通报一次进展？", "发生 P1 故障的时候多久要通报一次进展？"),
        ("My laptop fan is super loud. What should I do?", "My laptop fan is super loud. What should I do?"),  # too thin alone
    ],
)
def test_the_question_sentence_is_searched_with_the_codes_its_background_named(asked, plain):
    assert rewrite_query(asked) == plain
