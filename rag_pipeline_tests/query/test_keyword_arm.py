"""The keyword arm over a real LanceDB full-text index, built as the lake builds it."""

import lancedb
import pyarrow as pa
import pytest
from lancedb.index import FTS

from rag_pipeline.query.retrieve import RESULT_COLUMNS, keyword_arm
from rag_pipeline.store.schema import SEARCH_TEXT_COLUMN
from rag_pipeline.text import search_tokens

PAGES = {
    "tw": "美樹的頭髮是金色的，她在臺灣開發軟體。",  # Traditional script
    "cn": "年假为十五天，病假另计。",
    "en": "The studies showed that treated cells produced more proteins.",
    "code": "Error E-45 on the X-2000 means the filter is blocked.",
}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    rows = [
        {
            "chunk_id": cid, "doc_id": cid, "source": cid, "title": cid, "page": None, "heading_path": "",
            "text": text, "language": "zh" if cid in ("tw", "cn") else "en",
            SEARCH_TEXT_COLUMN: " ".join(search_tokens(text)),  # as store.rows writes it
        }
        for cid, text in PAGES.items()
    ]
    assert set(RESULT_COLUMNS) <= set(rows[0])
    db = lancedb.connect(tmp_path_factory.mktemp("kw"))
    t = db.create_table("chunks", data=pa.Table.from_pylist(rows))
    t.create_index(
        SEARCH_TEXT_COLUMN,
        config=FTS(base_tokenizer="whitespace", lower_case=True, stem=False, remove_stop_words=False,
                   ascii_folding=False, with_position=False),
    )
    return t


def top(table, query):
    hits = keyword_arm(table, query, "true", 5)
    return hits[0]["chunk_id"] if hits else None


def test_a_simplified_question_finds_a_traditional_page(table):
    assert top(table, "美树的头发是什么颜色？") == "tw"
    assert top(table, "美樹的頭髮是什麼顏色？") == "tw"
    assert top(table, "台湾开发软体") == "tw"


def test_an_inflected_english_question_finds_the_page(table):
    assert top(table, "Does the study show a cell producing protein?") == "en"


def test_codes_still_hit_whole_and_typed_without_the_dash(table):
    assert top(table, "E-45") == "code"
    assert top(table, "x2000 error") == "code"
