"""No side channel: a document the asker may not read changes nothing the asker gets back.

Two lakes are built by the real index job from corpora that differ only by one secret document
whose rare words (and a made-up product code) also appear in the questions. An ordinary user
(default Principal, internal clearance) asks the same questions in both: every answer and
every refusal, evidence included, must be byte-identical. A principal cleared for secret
documents asks too, to prove the secret document is indexed and relevant to those questions.
"""

from __future__ import annotations

import json

import pytest

from rag_pipeline.query import RagIndex
from rag_pipeline.query.filters import Principal, search_filter
from rag_pipeline_tests.indexing import run_index

pytestmark = pytest.mark.slow

SECRET_TEXT = """# Project Zephyrine (restricted)

Project Zephyrine is the codename for the ZX-9 quokka-class prototype arm.
The ZX-9 replaces the X-2000 in 2027; error code E-45 on the ZX-9 means the zephyrine lidar failed.
The ZX-9 payload is 45 kg and every full-time engineer on Zephyrine gets 5 extra days of paid annual leave.

## 绝密项目

泽菲林项目的深圳实验室电话是 0755-9999-0001，报销上限为每月 9000 元。
"""

SECRET_META = {
    "title": "Project Zephyrine",
    "department": "Product",
    "security_level": "secret",
    "status": "published",
    "access_groups": ["all-staff"],
    "owner": "cto@northwind-robotics.example",
    "language": "en",
}

QUESTIONS = [
    "What is Project Zephyrine?",
    "What is the payload of the ZX-9 quokka prototype?",
    "What does error code E-45 mean on the X-2000?",
    "How many days of paid annual leave does a full-time employee get?",
    "Which arm replaces the X-2000?",
    "深圳服务中心的电话是多少？",
    "泽菲林项目的报销上限是多少？",
]


def _as_bytes(answer) -> bytes:
    return json.dumps(answer.to_dict(), ensure_ascii=False, sort_keys=True).encode("utf-8")


@pytest.fixture(scope="module")
def twin_lakes(base, tmp_path_factory):
    """(lake without, lake with) the secret document; the second is the first plus one file."""
    import shutil

    root = tmp_path_factory.mktemp("side_channel")
    shutil.copytree(base / "raw", root / "raw")
    shutil.copytree(base / "lake", root / "lake")
    secret = root / "raw" / "product" / "zephyrine.md"
    secret.parent.mkdir(parents=True, exist_ok=True)
    secret.write_text(SECRET_TEXT, encoding="utf-8")
    secret.with_name(secret.name + ".meta.json").write_text(json.dumps(SECRET_META), encoding="utf-8")
    report = run_index(root / "raw", root / "lake", golden_file="none")  # what is served is the point, not its score
    assert report["success"], report
    return base / "lake", root / "lake"


def test_an_ordinary_user_gets_byte_identical_answers_whether_or_not_a_secret_document_exists(twin_lakes):
    without, with_secret = (RagIndex.open(lake) for lake in twin_lakes)
    assert with_secret.manifest["counts"]["chunks"] > without.manifest["counts"]["chunks"]
    for question in QUESTIONS:
        a, b = without.ask(question), with_secret.ask(question)
        assert _as_bytes(a) == _as_bytes(b), f"{question!r}:\n{a.to_dict()}\n!=\n{b.to_dict()}"
        assert not any("zephyrine" in c.source for c in b.citations)


def test_the_secret_document_is_indexed_and_relevant_to_the_questions(twin_lakes):
    """Guard against a vacuous pass: the cleared reader is answered from the secret document."""
    cleared = Principal(clearance="secret")
    with_secret = RagIndex.open(twin_lakes[1])
    answer = with_secret.ask("What is the payload of the ZX-9 quokka prototype?", principal=cleared)
    assert not answer.refused and any(c.source.endswith("zephyrine.md") for c in answer.citations)
    ordinary = with_secret.ask("What is the payload of the ZX-9 quokka prototype?")
    # the ordinary user's refusal names the code as unknown: to them, no document mentions it
    assert ordinary.refused and "zx-9" in ordinary.reason.lower()


class CountingTable:
    """The real chunks table, with every full-text query it is asked recorded (issue 18)."""

    def __init__(self, table):
        self._table = table
        self.fts_queries: list[str] = []

    def search(self, query=None, *args, **kwargs):
        if kwargs.get("query_type") == "fts":
            self.fts_queries.append(query)
        return self._table.search(query, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._table, name)


@pytest.mark.parametrize("counting", ["vocabulary", "batched", "per-term"])
def test_a_secret_document_changes_neither_the_answers_nor_the_full_text_queries_an_ordinary_user_costs(twin_lakes, counting):
    """Document frequencies (idf, coverage, unknown codes) are counted the same way whether or not
    a secret document holds the question's rare words ("zephyrine", "quokka", "zx-9"): the same
    full-text queries, in the same order, and byte-identical answers, in each counting mode.
    (search()'s keyword_score is the engine's BM25, whose idf spans the whole index: not compared.)
    """
    without, with_secret = (RagIndex.open(lake) for lake in twin_lakes)
    for index in (without, with_secret):
        index.term_counting = counting
        index.chunks = CountingTable(index.chunks)
    for question in QUESTIONS:
        issued = []
        for index in (without, with_secret):
            index.chunks.fts_queries.clear()
            answer = _as_bytes(index.ask(question))
            issued.append((list(index.chunks.fts_queries), answer))
        assert issued[0] == issued[1], question
        if counting == "vocabulary":  # the two keyword arms' own queries only: no query counts a term
            assert len(issued[0][0]) <= 2, issued[0][0]


def test_an_ordinary_users_vocabulary_holds_only_what_they_may_read(twin_lakes):
    """The per-filter vocabulary the counts are looked up in is read from admitted chunks only."""
    with_secret = RagIndex.open(twin_lakes[1])
    ordinary = set(with_secret._scope(search_filter())["vocabulary"])
    cleared = set(with_secret._scope(search_filter(Principal(clearance="secret")))["vocabulary"])
    secret_words = {"zephyrin", "zephyrine", "quokka", "zx-9", "zx9"}
    assert secret_words & cleared
    assert not secret_words & ordinary
