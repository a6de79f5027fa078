"""A question that asks for a number (or an address) is answered only by a quote that states one."""

from __future__ import annotations

import dataclasses

import pytest

from rag_pipeline.eval.golden import load_golden
from rag_pipeline.query.answer import RefusalPolicy, quote_states_address, quote_states_number, refusal_reason
from rag_pipeline.query.answer_type import asked_measures, asks_for_identifier, asks_for_number, numbers, states_asked_cell, states_new_number

NUMBER_REASON = "the question asks for a number and no passage you may read states one"


@pytest.mark.parametrize(
    "question",
    [
        "How many days of paid annual leave does a full-time employee get?",
        "What was Iwan Roberts' salary at Norwich City?",
        "What is the maximum hotel rate per night in Beijing?",
        "In what year was IBM founded?",
        "《长安三万里》的票房是多少？",
        "国际空间站上目前同时有几名宇航员？",
        "新员工的试用期是多长时间？",
        "爱因斯坦是哪一年获得诺贝尔物理学奖的？",
        "國際空間站上有幾名宇航員？",  # Traditional script
        "X-2000 機械臂本體有多重？",  # 有多重 = how heavy
        "What input voltage does the CS-5 charging station need?",
    ],
)
def test_questions_asking_for_a_quantity(question):
    assert asks_for_number(question)


@pytest.mark.parametrize(
    "question",
    [
        "What is the name of Iwan Roberts' wife?",
        "Who audits Galaxy Gaming's financial statements?",
        "几乎所有员工都可以远程办公吗？",  # 几乎 = almost
        "VPN 需要多重认证吗？",  # 多重 = multiple
        "几内亚的首都是哪里？",  # Guinea
        "How do I get admin rights on my work laptop?",
    ],
)
def test_questions_not_asking_for_a_quantity(question):
    assert not asks_for_number(question)


@pytest.mark.parametrize(
    "question, quote, states",
    [
        ("What is the list price of the X-2000 in US dollars?", "Model: X-2000; List Price (CNY): 168000; Warranty (months): 24", False),
        ("What is the list price of the X-2000 in US dollars?", "The list price is US$23,000 before tax.", True),
        ("X-2000 的噪音是多少分貝？", "Model: X-2000; Weight (kg): 64; Power: 200-240 V AC, 450 W", False),
        ("What is the noise level of the X-2000 arm in dB?", "Noise: < 65 dB(A) at 1 m", True),
        ("LinnSequencer 重多少公斤？", "The LinnSequencer 32 Track MIDI Sequence Recorder", False),
        ("X-2000 機械臂本體有多重？", "Model: X-2000; Weight (kg): 64", True),
        ("What input voltage does the CS-5 charging station need?", "Input: 100-240V AC, 50/60 Hz", True),
        ("What input voltage does the CS-5 charging station need?", "Charging takes 4 hours from empty.", False),
        ("每个月加班最多能加多少小时？", "每月加班不超过 36 小时。", True),
        ("How many days of paid annual leave does a full-time employee get?", "Full-time employees receive 15 working days.", True),
        ("How many days of paid annual leave does a full-time employee get?", "Leave is granted in 3 tiers.", False),
        ("How far can the X-2000 arm reach?", "Reach: 900 mm", True),
        ("How far can the X-2000 arm reach?", "Payload: 10 kg", False),
        # money with no currency named: a currency sign or word, or an amount in millions/亿
        ("What was Iwan Roberts' salary at Norwich City?", "Next four games could make or break Norwich City's season", False),
        ("What was Iwan Roberts' transfer fee when he moved to Gillingham?", "He moved to Huddersfield Town in 1990.", False),
        ("How much did Leicester City pay to sign Iwan Roberts?", "He was signed by Leicester City for £300,000.", True),
        ("What was IBM's total revenue in 2023?", "Topic: Quarterly revenue; Period: Nine quarters to 30 June 2023", False),
        ("What was IBM's total revenue in 2023?", "Total revenue was 61.9 billion in 2023.", True),
        ("《长安三万里》的票房是多少？", "《长安三万里》的“出圈”是传统文化拥抱大众的一个缩影。", False),
        ("《长安三万里》的票房是多少？", "《长安三万里》票房已突破 18 亿。", True),
        ("国际空间站的造价是多少？", "国际空间站的造价高达1500亿美元", True),
        ("二类城市出差的洗衣费标准是多少？", "住宿标准(元/晚): 450", True),
    ],
)
def test_a_question_naming_a_measure_is_answered_only_by_a_number_in_its_units(question, quote, states):
    """A list price in CNY does not answer "in US dollars"; a weight does not answer "how many decibels";
    a year does not answer "what was his salary"."""
    assert asked_measures(question)
    assert quote_states_number(question, [(0, quote)]) is states


@pytest.mark.parametrize(
    "question",
    [
        "How many employees does Galaxy Gaming have?",  # a number, no unit named
        "费城飞人队拿过几次斯坦利杯？",  # 费城 is Philadelphia, not a fee
        "在成都出差，市内交通每天能报多少？",
        "Does a 250 CNY taxi receipt need approval?",  # names a unit, asks no number
        "国际空间站上目前同时有几名宇航员？",
    ],
)
def test_questions_naming_no_measure_keep_the_plain_number_rule(question):
    assert asked_measures(question) == ()


def test_numbers_are_digits_number_words_and_chinese_numerals_with_a_unit():
    assert numbers("最高１５００元，试用期为三个月，每周远程办公两天") == {"1500", "三", "两"}
    assert numbers("Nine quarters to 30 June 2023") == {"nine", "30", "2023"}
    assert numbers("試用期為三個月，每週兩天") == {"三", "兩"}  # Traditional script
    assert numbers("一边看电影，统一管理") == set()  # numeral characters inside words state no number
    assert numbers("该城市有两所大学，两支球队") == {"两"}  # counters (所, 支) mark a count


def test_a_number_the_question_already_holds_does_not_answer_it():
    asked = numbers("What was Galaxy Gaming's net revenue for 2021?")
    assert not states_new_number("ANNUAL REPORT FOR THE YEAR ENDED DECEMBER 2021", asked)
    assert states_new_number("Net revenues for 2021 were $20.2 million.", asked)


def test_a_quantity_question_whose_quote_states_no_new_number_is_refused_and_replays_so():
    revenue = "What was Galaxy Gaming's net revenue for 2021?"
    assert quote_states_number(revenue, [(0, "GALAXY GAMING, INC. 2021")]) is False
    assert quote_states_number(revenue, [(0, "GALAXY GAMING, INC."), (0, "Net revenue was $20.2 million.")]) is True
    assert quote_states_number("Who founded Galaxy Gaming?", [(0, "GALAXY GAMING, INC.")]) is None
    # recorded evidence refuses the same on replay (rag calibrate, rag eval), whatever the gate says
    confident = {"candidates": 3, "lexical_coverage": 1.0, "sentence_coverage": 1.0, "dense_z": 5.0, "dense_gap_z": 3.0}
    policy = RefusalPolicy()
    assert refusal_reason(confident, policy) is None
    assert refusal_reason({**confident, "quote_states_number": True}, policy) is None
    assert refusal_reason({**confident, "quote_states_number": False}, policy) == NUMBER_REASON
    assert refusal_reason({**confident, "quote_states_number": False}, dataclasses.replace(policy, refuse_missing_number=False)) is None


def test_the_rule_never_refuses_a_golden_answer_that_held_the_fact(sample_index, monkeypatch):
    """Every answerable sample-set question asking for a number that is answered with its fact
    without the rule is answered the same with it; and the rule does refuse where the quote holds
    no number (a question about a figure the corpus never states)."""
    questions = [q for q in load_golden() if q["answerable"] and asks_for_number(q["question"])]
    assert len(questions) >= 20
    rule_on = sample_index.policy
    monkeypatch.setattr(sample_index, "policy", dataclasses.replace(rule_on, refuse_missing_number=False))
    right = [q for q in questions if any(a in sample_index.ask(q["question"]).answer for a in q["answer_contains"])]
    monkeypatch.setattr(sample_index, "policy", rule_on)
    assert len(right) >= 10
    for q in right:
        answer = sample_index.ask(q["question"])
        assert not answer.refused, (q["id"], answer.reason)
    unanswerable = sample_index.ask("北风机器人有多少名员工？")  # the handbook names its offices, never a headcount
    assert unanswerable.refused and unanswerable.reason == NUMBER_REASON
    # the rules alone (the logistic gate may refuse it first): the price list states CNY only
    monkeypatch.setattr(sample_index, "policy", dataclasses.replace(rule_on, min_score=float("-inf")))
    in_dollars = sample_index.ask("What is the list price of the X-2000 in US dollars?")
    assert in_dollars.refused and in_dollars.evidence["asked_measures"] == ["US dollars"], in_dollars.reason
    assert in_dollars.reason == "the question asks for a figure in US dollars and no passage you may read states one"
    monkeypatch.setattr(sample_index, "policy", rule_on)
    in_yuan = sample_index.ask("What is the list price of the X-2000 in CNY?")
    assert not in_yuan.refused and "168000" in in_yuan.answer, in_yuan.reason


GRADES = "班级: 一班; 姓名: 蔡徐坤; 英语: A; 数学: D; 语文: A"  # a row of the corpus's grades workbook


@pytest.mark.parametrize(
    "question, row, answers",
    [
        ("蔡徐坤的数学成绩是多少？", GRADES, True),  # the row it names, the column it asks: the cell answers
        ("王五的数学成绩是多少？", GRADES, False),  # another student's row
        ("王五的数学成绩是多少？", "班级: 一班; 姓名: 王五; 英语: B; 语文: C", False),  # his row has no 数学 cell
        ("蔡徐坤的体育成绩是多少？", GRADES, False),  # no such column
        ("How many units did the Sheryl Baxter account order?", "First Name: Sheryl; Last Name: Baxter; Company: Rasmussen Group", False),
        ("How many points did Alice get in Maths?", "Name: Alice; Maths: absent", True),
        ("How many bytes is it when opened?", "file: a.pptx; bytes: n/a; lang: en", False),  # "en" counts only as a word, not in "when"
        ("How many grades does 蔡徐坤 have?", "蔡徐坤 has grades in 英语, 数学 and 语文.", False),  # prose, not a row
    ],
)
def test_a_table_row_answers_the_column_asked_about_in_the_row_the_question_names(question, row, answers):
    assert states_asked_cell(row, question) is answers
    assert quote_states_number(question, [(0, row)]) is (answers or states_new_number(row, numbers(question)))


def test_a_question_naming_a_measure_still_needs_its_unit_in_a_table_row():
    assert quote_states_number("How much does ticket 42 cost in US dollars?", [(0, "Ticket: 42; Cost: waived")]) is False


@pytest.mark.parametrize(
    "question, quote, states",
    [
        # a count or an amount is not answered by a calendar date or a link's digits
        ("How many participants attended the 5th International Conference?", "5th International Conference July 10-12, 2023 : Konya, Turkey", False),
        ("How many participants attended the 5th International Conference?", "See https://www.researchgate.net/publication/372669736 for details", False),
        ("How many participants attended the 5th International Conference?", "Article in the conference proceedings · July 2023 DOI: 10.59287/icaens.1127", False),
        ("How many participants attended the 5th International Conference?", "The conference drew 412 participants on July 11, 2023.", True),
        ("How many common shares did Galaxy Gaming have outstanding in March 2022?", "23,718,968 common shares as of March 28, 2022.", True),
        ("公司有多少名员工？", "公司成立于2003年5月1日。", False),
        ("公司有多少名员工？", "截至2023年底，公司共有1200名员工。", True),
        ("深圳服务中心的电话是多少？", "城市: 深圳; 电话: 0755-5555-0115", True),  # a phone number is no date
        # ... while a question about when, how long or how old is answered by one
        ("In what year was IBM founded?", "IBM was founded in 1911.", True),
        ("报销的截止日期是几号？", "截止日期为 3 月 25 日。", True),
        ("爱因斯坦是哪一年提出这个公式的？", "在物理学“奇迹年”1905年提出。", True),
    ],
)
def test_a_date_or_a_link_does_not_answer_a_count(question, quote, states):
    assert quote_states_number(question, [(0, quote)]) is states


ADDRESS_REASON = "the question asks for an address and no passage you may read states one"


@pytest.mark.parametrize(
    "question, quote, states",
    [
        # a question about what or where an address is: any address in the quote answers it
        ("上海总部的地址在哪里？", "上海总部地址:上海市浦东新区碧波路 188 号北风大厦。", True),
        ("苏州研发中心的地址是什么？", "本手册适用于北风机器人有限公司上海总部、苏州研发中心和深圳装配工厂的全体员工。", False),
        ("苏州研发中心的地址是什么？", "各地服务中心的地址和电话见 service_centers.csv。", False),  # a file name is no address
        ("What is the address of the Hangzhou office?", "Our Hangzhou office is at 18 Wensan Road, Xihu District.", True),
        ("What is the address of the Hangzhou office?", "Room 1203, Building 5, West Lake Science Park", True),
        ("What is the address of the Shanghai office?", "Building C, Zhangjiang Hi-Tech Park, Pudong New District", True),
        ("What is the address of the Shanghai office?", "We are building a new office in Shanghai.", False),
        ("公司的注册地址是什么？", "注册地址为上海市浦东新区张江高科技园区。", True),
        ("What is the email address of the Beijing service center?", "Write to service-bj@northwind.example.", True),
        ("What is the email address of the Beijing service center?", "The Beijing service center opens at 9:00.", False),
        ("Which address does the VPN client connect to?", "The gateway is vpn.northwind.cn (10.20.0.1).", True),
        ("廣州服務中心的地址在哪裡？", "每 6 个月:由授权服务中心进行一次全面保养。", False),  # Traditional script
        # not a question for an address: no rule
        ("How do I change my home address in the HR system?", "Open the HR portal and edit your profile.", None),
        ("如何修改我的邮箱？", "在个人资料页修改。", None),
        ("I got a new phone and my VPN codes stopped working. How do I fix it?", "Reset your VPN access.", None),
    ],
)
def test_a_question_asking_for_an_address_is_answered_only_by_a_quote_that_states_one(question, quote, states):
    assert quote_states_address(question, [(0, quote)]) is states
    confident = {"candidates": 3, "lexical_coverage": 1.0, "sentence_coverage": 1.0, "dense_z": 5.0, "dense_gap_z": 3.0}
    evidence = {**confident, "quote_states_address": states} if states is not None else confident
    expected = ADDRESS_REASON if states is False else None
    assert refusal_reason(evidence, RefusalPolicy()) == expected  # replayed from the evidence as `ask` decided


def test_ask_refuses_an_address_its_quote_does_not_state_and_answers_one_it_does(sample_index, monkeypatch):
    """The rule alone (the logistic gate opened): the handbook names the Suzhou R&D center among
    its sites but gives no address; the Shanghai headquarters' address is stated."""
    monkeypatch.setattr(sample_index, "policy", dataclasses.replace(sample_index.policy, min_score=float("-inf")))
    missing = sample_index.ask("苏州研发中心的地址是什么？")
    assert missing.refused and missing.reason == ADDRESS_REASON and missing.evidence["quote_states_address"] is False
    stated = sample_index.ask("上海总部的地址在哪里？")
    assert not stated.refused and "碧波路 188 号" in stated.answer, stated.reason


def test_a_document_number_is_stated_by_an_identifier_the_question_does_not_hold():
    """"The document number of the X-2000 datasheet" is NW-DS-X2000: its digits are the product's own
    and its date is no answer, so only the identifier says the quote answers it."""
    from rag_pipeline.query.answer import quote_states_number

    question = "What is the document number of the X-2000 datasheet?"
    assert quote_states_number(question, [(0, "Product datasheet - document NW-DS-X2000, revision C, March 2026")])
    assert quote_states_number(question, [(0, "Northwind X-2000 Collaborative Robot Arm, March 2026")]) is False
    assert quote_states_number("X-2000 产品手册的文档编号是什么？", [(0, "文档编号：NW-DS-X2000")]) is True
    assert quote_states_number("X-2000 產品手冊的文檔編號是什麼？", [(0, "Northwind X-2000 产品手册")]) is False  # no new code
    assert not asks_for_identifier("How many X-2000 arms ship per pallet?")  # a count: identifiers do not answer it
    assert not asks_for_identifier("编号为 A-12 的设备放在哪个仓库？")  # a thing named by its number: not asked for
    assert quote_states_number("编号为 A-12 的设备放在哪个仓库？", [(0, "A-12 放在北区仓库")]) is None
