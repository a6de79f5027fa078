"""reStructuredText and Org: documentation kept as markup, read through the HTML walker as
Markdown is. The same README in three markups must give the same blocks; Sphinx's and Org's own
constructs are read as their content; nothing outside the file is ever read."""

from __future__ import annotations

from pathlib import Path

import pytest

from rag_pipeline.ingest import serialize
from rag_pipeline.ingest.document import UnreadableDocument
from rag_pipeline.ingest.parsers import SUPPORTED_EXTENSIONS, parse_file

FILES = Path(__file__).parent / "files"
CORPUS_README = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "md" / "unstructured_example_README.md"


def _blocks(path: Path) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(b.kind, b.text, b.heading_path) for b in parse_file(path).blocks]


@pytest.mark.skipif(not CORPUS_README.exists(), reason=f"shared corpus not found at {CORPUS_README}")
def test_one_readme_in_markdown_restructuredtext_and_org_gives_the_same_blocks():
    """unstructured's example-docs README as .md (the shared corpus), .rst and .org: headings,
    list items, the code block and every paragraph alike; only the lines the sources differ in
    (the .md lacks the closing address; the .org spaces "factbook.xml / factbook.xsl") differ."""
    markdown = _blocks(CORPUS_README)
    rst = _blocks(FILES / "unstructured-README.rst")
    org = _blocks(FILES / "unstructured-README.org")
    assert rst[: len(markdown)] == markdown and rst[len(markdown):] == [("paragraph", "fake.mail@gmail.com", ("Example Docs", "XBRL 10-K"))]
    assert [b for i, b in enumerate(org) if i != 4][:-1] == [b for i, b in enumerate(markdown) if i != 4]
    assert org[4][1] == "factbook.xml / factbook.xsl - Example XML/XLS files that you can use to test stylesheets"
    assert parse_file(FILES / "unstructured-README.rst").title == parse_file(FILES / "unstructured-README.org").title == "Example Docs"


def test_sphinx_directives_and_roles_are_read_as_their_content_and_nothing_outside_the_file():
    doc = parse_file(FILES / "差旅报销指南.rst")
    texts = [b.text for b in doc.blocks]
    assert doc.title == "差旅报销指南" and doc.language == "zh" and doc.warnings == []
    assert texts[1] == "本指南说明差旅费用的报销流程，详见 报销标准 与 policy。"  # :ref:`text <target>` and :doc:
    note = texts.index("住宿费按城市等级报销，超标部分自理。")  # an admonition: kept, not dropped as page chrome
    assert doc.blocks[note].heading_path == ("差旅报销指南", "报销标准")
    rows = [b.text for b in doc.blocks if b.kind == "table_row"]
    assert rows == [  # list-table and grid table, each row under its header
        "城市等级: 一线城市; 每晚上限: 600 元",
        "城市等级: 其他城市; 每晚上限: 400 元",
        "交通方式: 飞机; 舱位: 经济舱",
        "交通方式: 高铁; 舱位: 二等座",
    ]
    api = texts[texts.index("接口"):]
    assert api == [
        "接口",
        "submit_claim(employee_id, amount)",  # py:function: its signature, then its description
        "提交一笔报销申请，金额单位为元。",
        "New in version 2.1",
        "调用 submit_claim 即可提交。",  # :func:`~finance.claims.submit_claim`
        'submit_claim("E1024", 350)',  # code-block
        "财务部常见问题。",  # seealso
        "参数",
        "未知指令里的说明文字。",  # a directive nobody registered: its argument and content
        "审批时限",
        "提交后 5 个工作日内审批。",
        "Changed in version 2.2 单笔上限改为 5000 元，见 报销标准。",  # the explanation on the directive's lines, its markup read
        "仅网页版显示的提示。",  # `only:: html`: the content, not the condition
    ]
    everything = "\n".join(texts)
    assert "root:" not in everything and "不应出现" not in everything  # include, csv-table :file:, raw: not read
    assert "intro" not in everything  # toctree entries are navigation, not content


def test_restructuredtext_markup_errors_are_counted_not_fatal(tmp_path):
    path = tmp_path / "guide.rst"
    path.write_text("Guide\n=====\n\nSee missing_ for details.\n\n.. image:: nothere.png\n\nEnd.\n")
    doc = parse_file(path)
    assert [b.text for b in doc.blocks] == ["Guide", "See missing_ for details.", "End."]  # no "System Message" text
    assert doc.warnings == ["1 reStructuredText markup error(s): read as plain text or skipped"]


def test_a_line_docutils_refuses_is_read_as_plain_text(tmp_path):
    """docutils empties a document holding a line over its length limit (10,000 characters, a
    guard against slow markup): such a file keeps its text, read as plain text, and says so."""
    path = tmp_path / "generated.rst"
    path.write_text("Title\n=====\n\n" + " ".join(["*a"] * 5000) + "\n\nLast paragraph.\n")
    doc = parse_file(path)
    assert [b.text[:8] for b in doc.blocks] == ["Title\n==", "*a *a *a", "Last par"]
    assert doc.warnings == ["a line over 10,000 characters: read as plain text"] and doc.parser == "text"


def test_pathological_markup_reads_in_linear_time(tmp_path):
    """Runs that made the readers' own patterns scan on from every position (47 s for the
    brackets, 7 s for a third of the colons, before their bounds): each file now parses in well
    under a second here. (docutils' own inliner is slow on some runs, ":a:a:a…" at ~1.4 s a
    9,000-character line: the parse timeout guards that.)"""
    import time

    for name, text in {"paths.org": " ".join(["/usr/bin"] * 20000), "brackets.org": "[[" * 50000,
                       "colons.rst": "\n".join([":" * 9000] * 30)}.items():
        path = tmp_path / name
        path.write_text(text)
        started = time.monotonic()
        try:
            parse_file(path)
        except UnreadableDocument:  # nothing but markup may hold no text: that is fine, a hang is not
            pass
        assert time.monotonic() - started < 10, name


def test_org_keeps_content_and_drops_settings_drawers_and_comments():
    doc = parse_file(FILES / "项目周报.org")
    got = [(b.kind, b.text, b.heading_path) for b in doc.blocks]
    week, metrics = ("项目周报", "本周进展"), ("项目周报", "本周进展", "指标")
    assert doc.title == "项目周报" and doc.language == "zh"
    assert got == [
        ("heading", "项目周报", ("项目周报",)),
        ("heading", "本周进展", week),  # TODO keyword, priority and tags removed
        ("paragraph", "完成了 数据接入 模块，修复了 parse_file 的编码问题，详见 内部维基。", week),
        ("list_item", "上线检索服务", week),  # check boxes removed
        ("list_item", "压测报告待补充数据。", week),  # the item's continuation line
        ("list_item", "负责人: 李四", week),  # a description item
        ("heading", "指标", metrics),
        ("table_row", "指标: 召回率; 本周: 0.95; 上周: 0.91", metrics),  # rows above the rule are the header
        ("table_row", "指标: 延迟(ms); 本周: 120; 上周: 150", metrics),
        ("paragraph", 'print("hello")', metrics),
        ("paragraph", "质量第一。", metrics),
        ("heading", "下周计划", ("项目周报", "下周计划")),
        ("list_item", "接入权限过滤", ("项目周报", "下周计划")),
        ("list_item", "发布 v2.0", ("项目周报", "下周计划")),
    ]


def test_markup_formats_are_supported_and_their_cached_refusals_are_not_reused():
    """A lake that quarantined .rst/.org files as unsupported_format re-parses them on upgrade."""
    assert {".rst", ".rest", ".org"} <= SUPPORTED_EXTENSIONS
    for suffix in (".rst", ".org"):
        plain = serialize.hashlib.sha256(f"v{serialize.PARSE_CACHE_VERSION}\0eng\0{suffix}\0{'0' * 64}".encode()).hexdigest()
        assert serialize.parse_cache_key("0" * 64, "eng", suffix) != plain
