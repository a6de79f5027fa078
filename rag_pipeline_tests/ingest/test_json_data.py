"""JSON and JSON Lines: records become rows that carry their keys, objects become sections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_pipeline.ingest.document import UnreadableDocument
from rag_pipeline.ingest.parsers import parse_file

FILES = Path(__file__).parent / "files"
FAQ = [
    {"id": 1, "question": "年假有几天？", "answer": "入职满一年的员工每年享有 10 天带薪年假。", "tags": ["假期", "人事"],
     "owner": {"dept": "人力资源部", "contact": {"email": "hr@example.com"}}},
    {"id": 2, "question": "报销需要哪些材料？", "answer": "发票原件与审批单。", "tags": ["财务"], "draft": None},
]


def _blocks(path: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(b.kind, b.text, b.heading_path) for b in parse_file(path).blocks]


def test_a_json_array_of_records_is_a_table_of_rows_under_their_keys():
    doc = parse_file(FILES / "arbitrary-records.json")  # unstructured's example
    assert (doc.format, doc.parser, doc.language) == ("json", "json", "en")
    assert [b.text for b in doc.blocks] == [
        "sku: GRD-8842; name: Garden Trowel; price: 12.5; in_stock: true",
        "sku: GRD-1290; name: Watering Can; price: 18.0; in_stock: false",
        "sku: GRD-3317; name: Pruning Shears; price: 24.99; in_stock: true",
    ]
    assert {b.kind for b in doc.blocks} == {"table_row"}


@pytest.mark.parametrize("name", ["faq.jsonl", "faq.ndjson", "faq.json"])
def test_json_lines_are_records_and_a_bad_line_is_counted(tmp_path, name):
    """Nested objects flatten to dotted keys, lists of strings join, null is left out; a line that
    is not JSON is skipped and said (JSON Lines saved as .json too, as exports often are)."""
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in FAQ) + "\n{broken\n", encoding="utf-8")
    if name.endswith(".json"):
        with pytest.raises(UnreadableDocument) as info:  # a .json with a broken line is not JSON Lines either
            parse_file(path)
        assert info.value.reason == "corrupt" and info.value.detail.startswith("not JSON")
        path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in FAQ) + "\n", encoding="utf-8")
    doc = parse_file(path)
    assert doc.language == "zh" and [b.text for b in doc.blocks] == [
        "id: 1; question: 年假有几天？; answer: 入职满一年的员工每年享有 10 天带薪年假。; tags: 假期, 人事; owner.dept: 人力资源部; "
        "owner.contact.email: hr@example.com",
        "id: 2; question: 报销需要哪些材料？; answer: 发票原件与审批单。; tags: 财务",
    ]
    expected_note = "JSON Lines (one value per line) in a .json file" if name.endswith(".json") else "1 line(s) that are not JSON skipped"
    assert doc.warnings == [expected_note]


def test_a_json_object_is_sections_headed_by_its_keys(tmp_path):
    path = tmp_path / "stores.json"
    manual = {"title": "门店手册", "version": 3, "stores": [{"city": "上海", "hours": "9:00-21:00"}, {"city": "北京", "hours": "10:00-22:00"}],
              "contacts": {"客服电话": "400-123-4567", "notes": ["节假日照常营业", "会员可预约"]}, "empty": None}
    path.write_text(json.dumps(manual, ensure_ascii=False), encoding="utf-16")  # with a BOM, as Windows tools write it
    doc = parse_file(path)
    assert doc.title == "门店手册"
    assert _blocks(path) == [
        ("paragraph", "title: 门店手册", ()),
        ("paragraph", "version: 3", ()),
        ("heading", "stores", ("stores",)),
        ("table_row", "city: 上海; hours: 9:00-21:00", ("stores",)),
        ("table_row", "city: 北京; hours: 10:00-22:00", ("stores",)),
        ("heading", "contacts", ("contacts",)),
        ("paragraph", "客服电话: 400-123-4567", ("contacts",)),
        ("heading", "notes", ("contacts", "notes")),
        ("list_item", "节假日照常营业", ("contacts", "notes")),
        ("list_item", "会员可预约", ("contacts", "notes")),
    ]


@pytest.mark.parametrize("content, reason", [("{\"a\": ", "corrupt"), ("garbage\n", "corrupt"), ("{}", "no_text"), ("[]", "no_text")])
def test_broken_or_empty_json_is_quarantined_with_a_reason(tmp_path, content, reason):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(UnreadableDocument) as info:
        parse_file(path)
    assert info.value.reason == reason


def test_deeply_nested_json_is_read_without_a_crash(tmp_path):
    path = tmp_path / "deep.json"
    value: object = "底层说明"
    for i in range(200):
        value = {f"k{i}": value}
    path.write_text(json.dumps(value, ensure_ascii=False))
    doc = parse_file(path)
    assert "底层说明" in doc.text and max(len(b.heading_path) for b in doc.blocks) <= 6
