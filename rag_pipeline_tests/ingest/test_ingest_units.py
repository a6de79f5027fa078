"""Small, fast checks of the ingest helpers and the dispatcher's error mapping."""

from __future__ import annotations

import random
import re
import shutil
import string
import zipfile

import pytest
from PIL import Image, ImageDraw

from rag_pipeline.ingest.blocks import fold_sheet, fold_table
from rag_pipeline.ingest.document import TransientFailure, UnreadableDocument
from rag_pipeline.ingest.encoding import decode_bytes
from rag_pipeline.ingest.language import detect_language, is_cjk, is_han
from rag_pipeline.ingest.parsers import SUPPORTED_EXTENSIONS, parse_file
from rag_pipeline.ingest import textutil
from rag_pipeline.ingest.textutil import fix_mojibake, join_lines, remove_cjk_spaces

ZH = "我与父亲不相见已二年余了，我最不能忘记的是他的背影。那年冬天，祖母死了，父亲的差使也交卸了，正是祸不单行的日子。"


def test_language_detection():
    assert detect_language(ZH) == "zh"
    assert detect_language("The quick brown fox jumps over the lazy dog.") == "en"
    assert detect_language("使用 PyTorch 的 FSDP 做分布式训练，显存占用更低。") == "zh"
    assert detect_language("Chapter one 第一章 and chapter two 第二章 with many English words in between here") == "mixed"
    assert detect_language("12 + 34 = 46 !!") == "und"
    assert detect_language("") == "und"


def test_cjk_predicates():
    assert is_cjk("中") and is_cjk("，") and is_cjk("。") and is_cjk("カ")
    assert not is_cjk("a") and not is_cjk(" ") and not is_cjk("1")
    assert is_han("中") and not is_han("，")


def test_cjk_spacing_and_line_joining():
    assert remove_cjk_spaces("适 用 人 群 : 适 合 A B") == "适用人群 : 适合 A B"
    assert join_lines("电影中的盛唐美景如诗\n如画，李白") == "电影中的盛唐美景如诗如画，李白"
    assert join_lines("document exam-\nple and more\ntext") == "document example and more text"


def test_mojibake_repair_leaves_real_accents_alone():
    assert fix_mojibake("1986\u00e2\u0080\u00931990") == "1986–1990"
    assert fix_mojibake("café Ärger") == "café Ärger"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("Grüße, €5".encode("cp1252"), "Grüße, €5"),
        ("Stanley Cups,,\nTeam".encode("utf-16"), "Stanley Cups,,\nTeam"),
        ("plain ascii".encode("utf-16-le"), "plain ascii"),
        (ZH.encode("gbk"), ZH),
        (ZH.encode("utf-8-sig"), ZH),
    ],
)
def test_decode_bytes(data, expected):
    assert decode_bytes(data)[0] == expected


def test_fold_table_header_title_rows_and_ragged_rows():
    rows = [["Report 2023", "", ""], ["Name", "City", "Cups"], ["Blues", "STL", "1"], ["Leafs", "", "13", "extra"]]
    assert fold_table(rows) == [
        ("paragraph", "Report 2023"),
        ("table_row", "Name: Blues; City: STL; Cups: 1"),
        ("table_row", "Name: Leafs; Cups: 13; extra"),
    ]
    # A numeric matrix has no header: plain rows.
    assert fold_table([["1", "2"], ["3", "4"]]) == [("table_row", "1; 2"), ("table_row", "3; 4")]
    assert fold_table([["a", "b"], ["1", "2"]], header=None) == [("table_row", "a; b"), ("table_row", "1; 2")]


def test_supported_extensions():
    assert {".pdf", ".docx", ".docm", ".dotx", ".dotm", ".doc", ".pptx", ".pptm", ".ppsx", ".ppsm", ".potx", ".potm", ".ppt",
            ".xlsx", ".xlsm", ".xltx", ".xltm", ".xls", ".odt", ".ods", ".odp", ".rtf", ".epub", ".csv", ".tsv",
            ".html", ".htm", ".mht", ".mhtml", ".md", ".markdown", ".rst", ".rest", ".org", ".json", ".jsonl", ".ndjson", ".txt", ".eml", ".msg", ".xml",
            ".wps", ".wpt", ".et", ".ett", ".dps", ".dpt",
            ".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp", ".heic", ".heif"} == SUPPORTED_EXTENSIONS


def _reason(path, **kw) -> str:
    with pytest.raises(UnreadableDocument) as info:
        parse_file(path, **kw)
    return info.value.reason


def test_dispatch_error_reasons(tmp_path):
    (tmp_path / "a.exe").write_bytes(b"MZ")
    assert _reason(tmp_path / "a.exe") == "unsupported_format"
    big = tmp_path / "big.txt"
    big.write_text("x" * 100)
    with pytest.raises(TransientFailure) as over:  # never cached: a raised limit reads it next run
        parse_file(big, max_bytes=10)
    assert over.value.reason == "too_large" and "RAG_MAX_FILE_MB" in over.value.detail
    assert parse_file(big, max_bytes=100).text == "x" * 100
    (tmp_path / "fake.docx").write_text("not a zip")
    assert _reason(tmp_path / "fake.docx") == "corrupt"
    (tmp_path / "fake.pdf").write_text("hello")
    assert _reason(tmp_path / "fake.pdf") == "corrupt"
    (tmp_path / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    assert _reason(tmp_path / "broken.png") == "corrupt"
    with pytest.raises(TransientFailure) as vanished:  # deleted after the scan: looked at again, never cached
        parse_file(tmp_path / "missing.txt")
    assert vanished.value.reason == "unavailable"
    empty_zip = tmp_path / "empty.xlsx"
    with zipfile.ZipFile(empty_zip, "w") as zf:
        zf.writestr("hello.txt", "hi")
    assert _reason(empty_zip) == "corrupt"


def test_decompression_bomb_is_too_large(tmp_path):
    bomb = tmp_path / "bomb.png"
    Image.new("1", (12_000, 12_000)).save(bomb)  # 144 Mpx, a few hundred KB on disk
    assert _reason(bomb) == "too_large"


def test_whitespace_and_markup_only_files_have_no_text(tmp_path):
    (tmp_path / "blank.md").write_text("\n\n   \n")
    assert _reason(tmp_path / "blank.md") == "no_text"
    (tmp_path / "blank.html").write_text("<html><head><title>t</title><script>var a;</script></head><body> </body></html>")
    assert _reason(tmp_path / "blank.html") == "no_text"
    (tmp_path / "blank.csv").write_text(",,\n,,\n")
    assert _reason(tmp_path / "blank.csv") == "no_text"


def test_csv_multiline_cells_and_semicolon_delimiter(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text('名称;说明\n"A";"第一行\n第二行"\n"B";"x; y"\n', encoding="utf-8")
    d = parse_file(path)
    assert [b.text for b in d.blocks] == ["名称: A; 说明: 第一行第二行", "名称: B; 说明: x; y"]
    assert all(b.kind == "table_row" for b in d.blocks)


def test_gbk_text_file(tmp_path):
    path = tmp_path / "gbk.txt"
    path.write_bytes((ZH + "\n\n第二段。").encode("gb18030"))
    d = parse_file(path)
    assert [b.text for b in d.blocks] == [ZH, "第二段。"]
    assert d.language == "zh" and any("gb18030" in w for w in d.warnings)


_TOC_AND_MENUS = """<html><body>
<table><tr><td><a href="/">Home</a></td><td>|</td><td><a href="/products">Products</a></td></tr>
<tr><td><a href="/support">Support</a></td><td>|</td><td><a href="/contact">Contact us</a></td></tr></table>
<h1>Annual Report</h1><p>TABLE OF CONTENTS</p>
<div><table>
<tr><th>Item</th><th>Section</th><th>Page</th></tr>
<tr><td>PART I</td></tr>
<tr><td>Item 1.</td><td><a href="#i1">Business</a></td><td>4</td></tr>
<tr><td>Item 5.</td><td><a href="#i5">Market for Registrant's Common Equity and Related Stockholder Matters</a></td><td>10</td></tr>
<tr><td>Item 7.</td><td><a href="#i7">Management's Discussion and Analysis of Financial Condition</a></td><td>12</td></tr>
<tr><td>Item 7A.</td><td><a href="#i7a">Quantitative and Qualitative Disclosures about Market Risk</a></td><td>14</td></tr>
</table></div>
<p>We design and build industrial robots.</p>
<ul><li><a href="/a">Careers</a></li><li><a href="/b">Investors</a></li><li><a href="/c">Press</a></li></ul>
</body></html>"""


@pytest.mark.parametrize("wrap", [("<div>", "</div>"), ("<table><tr><td>", "</td></tr></table>")], ids=["div", "layout-table"])
def test_html_table_of_contents_is_kept_link_menus_are_dropped(tmp_path, wrap):
    """A table whose link rows carry their own text (item number, page number) is content, even
    though most (> 70 %) of its text is link text, also inside a wrapper that is then mostly links;
    a menu of links (as a table or a list) is chrome."""
    path = tmp_path / "report.html"
    path.write_text(_TOC_AND_MENUS.replace("<div>", wrap[0]).replace("</div>", wrap[1]), encoding="utf-8")
    d = parse_file(path)
    rows = [b.text for b in d.blocks if b.kind == "table_row"]
    assert "Item: Item 1.; Section: Business; Page: 4" in rows
    assert "Item: Item 7.; Section: Management's Discussion and Analysis of Financial Condition; Page: 12" in rows
    assert "Item: PART I" in rows
    assert "We design and build industrial robots." in d.text
    for menu in ("Home", "Products", "Contact us", "Careers", "Investors"):
        assert menu not in d.text


@pytest.mark.skipif(not shutil.which("tesseract"), reason="tesseract not installed")
def test_rendered_english_image_ocr(tmp_path):
    img = Image.new("L", (1400, 300), "white")
    draw = ImageDraw.Draw(img)
    draw.text((40, 100), "Quarterly revenue grew by twelve percent", fill="black", font_size=56)
    path = tmp_path / "scan.png"
    img.save(path)
    d = parse_file(path)
    assert d.ocr_used and d.format == "image" and d.page_count == 1
    assert "revenue" in d.text.lower() and d.ocr_confidence > 60


def test_fold_sheet_regions():
    rows = [
        ["Report"], [],
        ["Item", "Qty", "Price"], [],           # header, blank spacer, data: the data keeps the header
        ["Bolt", 4, 2.5], ["Nut", 10, 0.1], [],
        ["Code", "Meaning"],                    # a second table: its own labels
        ["E-1", "jam"], [],
        ["Owner", "Since"],                     # a header with nothing under it is kept as text
    ]
    assert fold_sheet(rows) == [
        ("paragraph", "Report"),
        ("table_row", "Item: Bolt; Qty: 4; Price: 2.5"),
        ("table_row", "Item: Nut; Qty: 10; Price: 0.1"),
        ("table_row", "Code: E-1; Meaning: jam"),
        ("paragraph", "Owner Since"),
    ]


def test_squash_of_plain_ascii_takes_a_short_cut_to_the_same_result():
    """Table cells are mostly printable ASCII: their short cut must equal the full clean-up."""
    rng = random.Random(7)
    alphabet = string.printable[:95] + "\t\n\r\x0b\x0c\x00"  # printable ASCII, then what is not
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 24)))
        full = re.sub(r"\s+", " ", textutil._CJK_LINEBREAK.sub("", textutil.clean_text(text))).strip()
        assert textutil.squash(text) == full, repr(text)
    assert textutil.squash("  Total\u00a0amount  ") == "Total amount"  # not ASCII: the full path
