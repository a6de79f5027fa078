"""Formats beyond the shared corpus's: .tsv, .mht, .bmp/.gif/.webp scans, Word, Excel and
PowerPoint 97-2003 .doc/.xls/.ppt, .rtf, OpenDocument (.odt/.ods/.odp), .epub and the
macro-enabled/template/slide-show Office variants — each parsed from a real file (``files/``,
see its README: saved by Word, Excel, LibreOffice and xlwt; the others written here the way
their applications lay them out), damaged copies quarantined, and indexed and answered from by
one real run."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import zipfile
from email.message import EmailMessage
from pathlib import Path

import olefile
import openpyxl
import pytest
from PIL import Image

from rag_pipeline.ingest.document import UnreadableDocument
from rag_pipeline.ingest.parsers import parse_file

FILES = Path(__file__).parent / "files"
SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"
SAFETY_SCAN = SAMPLE / "scans" / "安全须知_扫描.png"  # a real Chinese scan, pasted into documents as a picture


def _rows(doc) -> list[str]:
    return [b.text for b in doc.blocks if b.kind == "table_row"]


def _reason(path: Path) -> str:
    with pytest.raises(UnreadableDocument) as info:
        parse_file(path)
    return info.value.reason


# ---------------------------------------------------------------- .tsv


def test_tsv_rows_carry_their_header(tmp_path):
    path = tmp_path / "service_centers.tsv"
    path.write_text("城市\t地址\t电话\n上海\t浦东新区张江路88号\t021-5555-0101\nBerlin\tInvalidenstraße 7, Mitte\t+49 30 5555 0102\n",
                    encoding="utf-8")
    doc = parse_file(path)
    assert (doc.format, doc.parser) == ("tsv", "csv")
    assert _rows(doc) == ["城市: 上海; 地址: 浦东新区张江路88号; 电话: 021-5555-0101",
                          "城市: Berlin; 地址: Invalidenstraße 7, Mitte; 电话: +49 30 5555 0102"]


def test_mhtml_single_file_web_page(tmp_path):
    """As Word and Internet Explorer save a page: multipart/related, the HTML quoted-printable in
    GB2312, a picture beside it."""
    from email.message import EmailMessage

    page = EmailMessage()
    page.set_content("<html><head><title>报销须知</title></head><body><h1>报销须知</h1>"
                     "<p>发票须在开具后九十天内提交。</p><table><tr><th>类别</th><th>上限</th></tr>"
                     "<tr><td>餐费</td><td>150 元/天</td></tr></table></body></html>",
                     subtype="html", charset="gb2312", cte="quoted-printable")
    png = tmp_path / "logo.png"
    Image.new("L", (4, 4), 255).save(png)
    page.add_related(png.read_bytes(), maintype="image", subtype="png", cid="<logo>")
    path = tmp_path / "报销须知.mht"
    path.write_bytes(page.as_bytes())
    doc = parse_file(path)
    assert (doc.format, doc.title, doc.language) == ("mhtml", "报销须知", "zh")
    assert [b.text for b in doc.blocks] == ["报销须知", "发票须在开具后九十天内提交。", "类别: 餐费; 上限: 150 元/天"]
    not_a_page = tmp_path / "mail.mht"
    not_a_page.write_bytes(b"Content-Type: text/plain\r\n\r\nhello")
    assert _reason(not_a_page) == "corrupt"


# ---------------------------------------------------------------- images


@pytest.mark.parametrize("suffix, options", [(".bmp", {}), (".gif", {}), (".webp", {"lossless": True}), (".heic", {"quality": -1})])
def test_bmp_gif_webp_and_heic_scans_read_as_the_png_reads(tmp_path, suffix, options):
    """The same pixels saved losslessly in another container give the PNG's OCR text (HEIC: the
    format of an iPhone's photos, written by pillow-heif's own encoder)."""
    png = SAMPLE / "scans" / "expense_policy_scan.png"
    other = tmp_path / f"scan{suffix}"
    with Image.open(png) as img:
        if suffix == ".heic":  # written without teaching Pillow HEIF: the reader must do that itself
            import pillow_heif

            pillow_heif.from_pillow(img.convert("L")).save(other, **options)
        else:
            img.convert("L").save(other, **options)
    expected = parse_file(png)
    got = parse_file(other)
    assert (got.format, got.ocr_used, got.page_count) == ("image", True, 1)
    assert got.text == expected.text and "receipt" in got.text.lower()
    assert got.ocr_confidence == pytest.approx(expected.ocr_confidence, abs=1.0)


# ---------------------------------------------------------------- .xls


def test_xls_sheets_merged_group_labels_dates_and_hidden_sheets():
    doc = parse_file(FILES / "员工名册.xls")  # written by xlwt 1.3.0: BIFF8, a vertical merge per department
    assert (doc.format, doc.parser, doc.language, doc.page_count) == ("xls", "xlrd", "zh", 2)
    assert _rows(doc) == [
        "部门: 研发部; 姓名: 张伟; 入职日期: 2019-03-01; 年假天数: 15",
        "部门: 研发部; 姓名: 李娜; 入职日期: 2021-07-15; 年假天数: 10",
        "部门: 研发部; 姓名: 王芳; 入职日期: 2023-01-09; 年假天数: 5",
        "部门: 销售部; 姓名: 赵磊; 入职日期: 2018-11-20; 年假天数: 15",
        "部门: 销售部; 姓名: 刘洋; 入职日期: 2024-05-06; 年假天数: 5",
    ]
    assert {(b.page, b.sheet, b.heading_path) for b in doc.blocks} == {(1, "员工名册", ("员工名册",)), (2, "说明", ("说明",))}
    assert "sheet '说明' is hidden (included)" in doc.warnings


def test_xls_from_excel_with_non_ascii_sheet_names_dates_and_times():
    doc = parse_file(FILES / "Formate.xls")  # xlrd 1.2.0's tests/Formate.xls (BSD licence), saved by Excel
    assert [b.sheet for b in doc.blocks if b.page == 2][0] == "ÖÄÜ" and doc.page_count == 4
    text = doc.text
    assert "Äcker 2005-02-23" in text  # a date cell, as a date (not the serial 38406)
    assert "06:34:00" in text and "17:47:13" in text  # time-of-day cells
    assert "38406" not in text and "0.2736" not in text


def test_misnamed_xls_an_xlsx_package_or_an_html_table(tmp_path):
    xlsx_named_xls = tmp_path / "price_list.xls"
    shutil.copy(SAMPLE / "products" / "price_list.xlsx", xlsx_named_xls)
    assert _rows(parse_file(xlsx_named_xls)) == _rows(parse_file(SAMPLE / "products" / "price_list.xlsx"))
    html_export = tmp_path / "export.xls"
    html_export.write_text("<html><body><table><tr><th>Part</th><th>Stock</th></tr>"
                           "<tr><td>Valve V-12</td><td>40</td></tr><tr><td>Hose H-3</td><td>7</td></tr></table></body></html>")
    assert _rows(parse_file(html_export)) == ["Part: Valve V-12; Stock: 40", "Part: Hose H-3; Stock: 7"]
    junk = tmp_path / "junk.xls"
    junk.write_bytes(b"not a workbook at all")
    assert _reason(junk) == "corrupt"


# ---------------------------------------------------------------- .rtf


def _rtf_bytes(text: str, codepage: str) -> str:
    return "".join(f"\\'{b:02x}" for b in text.encode(codepage))


def test_rtf_chinese_code_page_unicode_escapes_and_a_table(tmp_path):
    """As WordPad writes Chinese: \\ansicpg936 with GBK bytes as \\'xx, a \\uN character, a table."""
    rtf = (
        r"{\rtf1\ansi\ansicpg936\deff0\nouicompat{\fonttbl{\f0\fnil\fcharset134 \'cb\'ce\'cc\'e5;}}"
        r"{\*\generator Riched20 10.0.19041}\viewkind4\uc1\pard\sa200\sl276\slmult1\f0\fs22\lang2052 "
        + _rtf_bytes("年假制度", "gbk") + r"\par" + "\n"
        + _rtf_bytes("员工入职满一年后，每年享有带薪年假十天。", "gbk") + r" \u8220?OK\u8221?\par" + "\n"
        r"\trowd\cellx3000\cellx6000\intbl " + _rtf_bytes("职级", "gbk") + r"\cell " + _rtf_bytes("天数", "gbk")
        + r"\cell\row\trowd\cellx3000\cellx6000\intbl P5\cell 15\cell\row" + "\n"
        r"\pard\par}"
    )
    path = tmp_path / "年假制度.rtf"
    path.write_bytes(rtf.encode("ascii"))
    doc = parse_file(path)
    assert (doc.format, doc.parser, doc.language) == ("rtf", "rtf", "zh")
    assert [(b.kind, b.text) for b in doc.blocks] == [
        ("paragraph", "年假制度"),
        ("paragraph", "员工入职满一年后，每年享有带薪年假十天。 “OK”"),
        ("table_row", "职级: P5; 天数: 15"),
    ]
    # Chinese text from an English-locale Word: \ansicpg1252, but the font's charset is GB2312
    mixed = tmp_path / "mixed.rtf"
    mixed.write_bytes((r"{\rtf1\ansi\ansicpg1252{\fonttbl{\f0\fswiss Arial;}{\f1\fnil\fcharset134 \'cb\'ce\'cc\'e5;}}"
                       r"{\info{\title Leave}}\f0 Annual leave: {\f1 " + _rtf_bytes("年假十天", "gbk") + r"}.\par}").encode("ascii"))
    assert parse_file(mixed).text == "Annual leave: 年假十天."
    astral = tmp_path / "astral.rtf"  # a character outside the BMP as two \u surrogates (𠀀, U+20000)
    astral.write_bytes(rb"{\rtf1\ansi\uc1 Rare \u-10176?\u-9216? character\par}")
    assert parse_file(astral).text == "Rare \U00020000 character"
    fields = tmp_path / "fields.rtf"  # a field shows its result; a table of contents is generated text
    fields.write_bytes(rb'{\rtf1\ansi{\field{\*\fldinst TOC \\o "1-3"}{\fldrslt Leave 1\par Travel 2\par}}'
                       rb"Leave\par See page {\field{\*\fldinst PAGE}{\fldrslt 3}}.\par}")
    assert [b.text for b in parse_file(fields).blocks] == ["Leave", "See page 3."]
    english = tmp_path / "memo.rtf"
    english.write_bytes(rb"{\rtf1\ansi\ansicpg1252{\fonttbl{\f0 Calibri;}}\f0 The caf\'e9 opens at 8:00.\par}")
    assert parse_file(english).text == "The café opens at 8:00."
    not_rtf = tmp_path / "fake.rtf"
    not_rtf.write_text("plain words under an .rtf name")
    assert _reason(not_rtf) == "corrupt"


def test_rtf_reads_as_the_docx_it_was_saved_from():
    """LibreOffice's RTF of the policy: the same headings (from its style sheet), paragraphs and
    table rows (merged cells on the column grid) as the .docx, and its Unicode title."""
    rtf = parse_file(FILES / "差旅报销制度.rtf")
    docx = parse_file(FILES / "差旅报销制度.docx")
    assert [(b.kind, b.text, b.heading_path) for b in rtf.blocks] == [(b.kind, b.text, b.heading_path) for b in docx.blocks]
    assert rtf.title == "差旅报销制度" and _rows(rtf)[1] == "城市类别: 一类; 城市: 上海; 住宿（元/晚）: 600; 餐补（元/天）: 150"


# ---------------------------------------------------------------- OpenDocument

_ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:xlink="http://www.w3.org/1999/xlink" '
    'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0"'
)
_MIMETYPES = {".odt": "text", ".ods": "spreadsheet", ".odp": "presentation"}


def _odf(path: Path, body: str, *, title: str | None = None, encrypted: bool = False) -> Path:
    """An OpenDocument package as LibreOffice stores one: mimetype first and uncompressed."""
    kind = _MIMETYPES[path.suffix]
    entry = '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"'
    entry += '><manifest:encryption-data manifest:checksum-type="SHA1/1K"/></manifest:file-entry>' if encrypted else "/>"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), f"application/vnd.oasis.opendocument.{kind}", zipfile.ZIP_STORED)
        z.writestr("META-INF/manifest.xml", f'<?xml version="1.0" encoding="UTF-8"?><manifest:manifest {_ODF_NS}>'
                   f'<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.{kind}"/>'
                   f"{entry}</manifest:manifest>")
        z.writestr("content.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_ODF_NS} '
                   f'office:version="1.3"><office:body>{body}</office:body></office:document-content>')
        if title:
            z.writestr("meta.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {_ODF_NS}>'
                       f"<office:meta><dc:title>{title}</dc:title></office:meta></office:document-meta>")
    return path


_TRAVEL_ODT = (
    "<office:text><text:sequence-decls/>"
    "<text:table-of-content><text:index-body><text:p>Hotels 1</text:p><text:p>Daily allowance 2</text:p>"
    "</text:index-body></text:table-of-content>"
    '<text:h text:outline-level="1">Travel policy</text:h>'
    '<text:h text:outline-level="2">Hotels</text:h>'
    "<text:p>Book<text:s/>a hotel<text:s text:c=\"2\"/>under <text:span>EUR 180</text:span> a night."
    '<text:note text:note-class="footnote"><text:note-citation>1</text:note-citation>'
    "<text:note-body><text:p>Paris and London: EUR 250.</text:p></text:note-body></text:note></text:p>"
    '<text:p>Pictured: the <draw:frame draw:name="f1" text:anchor-type="paragraph"><draw:text-box><text:p>'
    '<draw:frame draw:name="p1"><draw:image xlink:href="Pictures/lobby.png" xmlns:xlink="http://www.w3.org/1999/xlink"/>'
    "</draw:frame>Hotel Adler, Munich</text:p></draw:text-box></draw:frame>partner hotel.</text:p>"
    "<text:p>Checked<office:annotation><text:p>reviewer: is this right?</text:p></office:annotation> by finance.</text:p>"
    "<text:list><text:list-item><text:p>Keep every receipt.</text:p></text:list-item>"
    "<text:list-item><text:p>Claim within 30 days.</text:p></text:list-item></text:list>"
    '<text:h text:outline-level="2">Daily allowance</text:h>'
    "<table:table><table:table-column/><table:table-column/>"
    "<table:table-row><table:table-cell><text:p>Country</text:p></table:table-cell>"
    "<table:table-cell><text:p>Per day</text:p></table:table-cell></table:table-row>"
    "<table:table-row><table:table-cell><text:p>Germany</text:p></table:table-cell>"
    "<table:table-cell><text:p>EUR 28</text:p></table:table-cell></table:table-row>"
    "</table:table></office:text>"
)


def test_odt_headings_lists_tables_spaces_and_footnotes(tmp_path):
    """The table of contents (generated) and review comments are not text; a picture's caption is its own block."""
    doc = parse_file(_odf(tmp_path / "travel.odt", _TRAVEL_ODT, title="Travel policy 2026"))
    assert (doc.format, doc.parser, doc.title) == ("odt", "lxml", "Travel policy 2026")
    assert [(b.kind, b.text, b.heading_path) for b in doc.blocks] == [
        ("heading", "Travel policy", ("Travel policy",)),
        ("heading", "Hotels", ("Travel policy", "Hotels")),
        ("paragraph", "Book a hotel under EUR 180 a night. (Paris and London: EUR 250.)", ("Travel policy", "Hotels")),
        ("paragraph", "Pictured: the partner hotel.", ("Travel policy", "Hotels")),
        ("paragraph", "Hotel Adler, Munich", ("Travel policy", "Hotels")),  # the picture's caption
        ("paragraph", "Checked by finance.", ("Travel policy", "Hotels")),
        ("list_item", "Keep every receipt.", ("Travel policy", "Hotels")),
        ("list_item", "Claim within 30 days.", ("Travel policy", "Hotels")),
        ("heading", "Daily allowance", ("Travel policy", "Daily allowance")),
        ("table_row", "Country: Germany; Per day: EUR 28", ("Travel policy", "Daily allowance")),
    ]
    assert _reason(_odf(tmp_path / "secret.odt", _TRAVEL_ODT, encrypted=True)) == "encrypted"


def test_odt_table_cells_merged_down_fill_the_rows_they_cover(tmp_path):
    def cell(text: str, attrs: str = "") -> str:
        return f"<table:table-cell {attrs}><text:p>{text}</text:p></table:table-cell>"

    covered, down, across = "<table:covered-table-cell/>", 'table:number-rows-spanned="2"', 'table:number-columns-spanned="2"'
    body = ("<office:text><table:table>"
            f"<table:table-row>{cell('城市类别')}{cell('城市')}{cell('住宿')}</table:table-row>"
            f"<table:table-row>{cell('一类', down)}{cell('北京')}{cell('600')}</table:table-row>"
            f"<table:table-row>{covered}{cell('上海')}{cell('600')}</table:table-row>"
            f"<table:table-row>{cell('二类')}{cell('杭州 成都', across)}{covered}</table:table-row>"
            "</table:table></office:text>")
    assert _rows(parse_file(_odf(tmp_path / "hotels.odt", body))) == [
        "城市类别: 一类; 城市: 北京; 住宿: 600", "城市类别: 一类; 城市: 上海; 住宿: 600", "城市类别: 二类; 城市: 杭州 成都"]


def test_ods_sheets_and_repeated_cells_without_blowing_up(tmp_path):
    """LibreOffice pads a sheet to 1,048,576 rows and 16,384 columns with repeated empty cells."""
    pad_cells = '<table:table-cell table:number-columns-repeated="16381"/>'
    body = (
        '<office:spreadsheet><table:table table:name="价格表">'
        f"<table:table-row><table:table-cell><text:p>型号</text:p></table:table-cell>"
        f"<table:table-cell><text:p>单价</text:p></table:table-cell><table:table-cell><text:p>上市</text:p></table:table-cell>"
        f"{pad_cells}</table:table-row><table:table-row><table:table-cell><text:p>R500</text:p></table:table-cell>"
        f'<table:table-cell office:value-type="currency" office:currency="CNY" office:value="168000"><text:p>¥168,000.00</text:p>'
        '</table:table-cell><table:table-cell office:value-type="date" office:date-value="2026-03-01"><text:p>2026年3月1日</text:p>'
        f"</table:table-cell>{pad_cells}</table:table-row>"
        '<table:table-row table:number-rows-repeated="1048574"><table:table-cell table:number-columns-repeated="16384"/></table:table-row>'
        '</table:table><table:table table:name="Notes"><table:table-row>'
        '<table:table-cell table:number-columns-repeated="2"><text:p>n/a</text:p></table:table-cell>'
        "</table:table-row></table:table></office:spreadsheet>"
    )
    doc = parse_file(_odf(tmp_path / "prices.ods", body))
    assert (doc.format, doc.page_count) == ("ods", 2)
    assert [(b.kind, b.text, b.page, b.sheet) for b in doc.blocks] == [
        ("table_row", "型号: R500; 单价: 168000; 上市: 2026-03-01", 1, "价格表"),  # values, as .xlsx gives them
        ("paragraph", "n/a n/a", 2, "Notes"),
    ]


def test_odp_slides_titles_bodies_and_notes(tmp_path):
    def slide(name: str, title: str, body: str, notes: str) -> str:
        return (
            f'<draw:page draw:name="{name}"><draw:frame presentation:class="title"><draw:text-box>'
            f"<text:p>{title}</text:p></draw:text-box></draw:frame>"
            f'<draw:frame presentation:class="outline"><draw:text-box><text:list><text:list-item>'
            f"<text:p>{body}</text:p></text:list-item></text:list></draw:text-box></draw:frame>"
            f"<presentation:notes><draw:frame><draw:text-box><text:p>{notes}</text:p></draw:text-box></draw:frame>"
            "</presentation:notes></draw:page>"
        )
    body = ("<office:presentation>" + slide("p1", "Q3 results", "Revenue grew 12 %", "Mention the new plant.")
            + slide("p2", "Outlook", "Two launches in Q4", "Keep it short.") + "</office:presentation>")
    doc = parse_file(_odf(tmp_path / "q3.odp", body))
    assert (doc.format, doc.page_count) == ("odp", 2)
    assert [(b.kind, b.text, b.page, b.heading_path) for b in doc.blocks] == [
        ("heading", "Q3 results", 1, ("Q3 results",)),
        ("list_item", "Revenue grew 12 %", 1, ("Q3 results",)),
        ("notes", "Mention the new plant.", 1, ("Q3 results",)),
        ("heading", "Outlook", 2, ("Outlook",)),
        ("list_item", "Two launches in Q4", 2, ("Outlook",)),
        ("notes", "Keep it short.", 2, ("Outlook",)),
    ]


# ---------------------------------------------------------------- .epub


def _epub(path: Path, chapters: dict[str, str], spine: list[str], *, encryption: str | None = None) -> Path:
    """An EPUB 3 package: mimetype first, the OPF in a subfolder, chapters' hrefs relative to it."""
    items = "".join(f'<item id="{name}" href="text/{name}.xhtml" media-type="application/xhtml+xml"/>' for name in chapters)
    refs = "".join(f'<itemref idref="{name}"/>' for name in spine)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" '
                   'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
                   '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
                   '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>新员工指南</dc:title></metadata>'
                   f'<manifest>{items}<item id="css" href="style.css" media-type="text/css"/></manifest>'
                   f"<spine>{refs}</spine></package>")
        z.writestr("OEBPS/style.css", "h1 { color: navy }")
        for name, html in chapters.items():
            z.writestr(f"OEBPS/text/{name}.xhtml", '<?xml version="1.0" encoding="utf-8"?>'
                       f'<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{name}</title></head><body>{html}</body></html>')
        if encryption:
            z.writestr("META-INF/encryption.xml", '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                       'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
                       f'<enc:EncryptionMethod Algorithm="{encryption}"/></enc:EncryptedData></encryption>')
    return path


_GUIDE_CHAPTERS = {
    "ch2": "<h1>第二章 考勤</h1><p>每天九点前打卡。</p>",
    "ch1": "<h1>第一章 入职</h1><p>入职第一天领取工牌。</p><table><tr><th>物品</th><th>地点</th></tr>"
           "<tr><td>工牌</td><td>前台</td></tr></table>",
}


def test_epub_chapters_in_spine_order_with_headings(tmp_path):
    chapters = _GUIDE_CHAPTERS
    doc = parse_file(_epub(tmp_path / "guide.epub", chapters, spine=["ch1", "ch2"]))
    assert (doc.format, doc.title, doc.language, doc.page_count) == ("epub", "新员工指南", "zh", 2)
    assert [(b.kind, b.text, b.heading_path) for b in doc.blocks] == [
        ("heading", "第一章 入职", ("第一章 入职",)),
        ("paragraph", "入职第一天领取工牌。", ("第一章 入职",)),
        ("table_row", "物品: 工牌; 地点: 前台", ("第一章 入职",)),
        ("heading", "第二章 考勤", ("第二章 考勤",)),
        ("paragraph", "每天九点前打卡。", ("第二章 考勤",)),
    ]
    fonts_only = _epub(tmp_path / "fonts.epub", chapters, ["ch1"], encryption="http://www.idpf.org/2008/embedding")
    assert "入职第一天领取工牌。" in parse_file(fonts_only).text
    drm = _epub(tmp_path / "drm.epub", chapters, ["ch1"], encryption="http://www.w3.org/2001/04/xmlenc#aes128-cbc")
    assert _reason(drm) == "encrypted"


# ---------------------------------------------------------------- .doc


def test_doc_reads_as_the_docx_it_was_saved_from():
    """The same policy as .docx and as Word 97-2003 .doc (LibreOffice's export): the same
    headings (by their built-in styles), paragraphs and table rows — merged group labels
    repeated, the PAGE field's result, not its code."""
    doc = parse_file(FILES / "差旅报销制度.doc")
    docx = parse_file(FILES / "差旅报销制度.docx")
    assert (doc.format, doc.parser, doc.language, doc.title) == ("doc", "olefile", "zh", "差旅报销制度")
    assert [(b.kind, b.text, b.heading_path) for b in doc.blocks] == [(b.kind, b.text, b.heading_path) for b in docx.blocks]
    assert doc.blocks[2].kind == "heading" and doc.blocks[3].heading_path == ("差旅报销制度", "住宿与餐补标准")
    assert _rows(doc) == _rows(docx) and _rows(doc)[1] == "城市类别: 一类; 城市: 上海; 住宿（元/晚）: 600; 餐补（元/天）: 150"
    assert doc.blocks[-1].text == "本页页码：1" and "PAGE" not in doc.text
    word_saved = parse_file(FILES / "test-ole-file.doc")  # saved by Microsoft Word
    assert word_saved.text == "Test OLE file, saved as Word 97-2003 Document."


def test_doc_password_and_misnamed_files(tmp_path):
    path = tmp_path / "locked.doc"
    shutil.copy(FILES / "差旅报销制度.doc", path)
    with olefile.OleFileIO(str(path), write_mode=True) as ole:  # set the FIB's fEncrypted flag (an injected fault)
        word = bytearray(ole.openstream("WordDocument").read())
        word[0x0B] |= 0x01
        ole.write_stream("WordDocument", bytes(word))
    assert _reason(path) == "encrypted"

    docx_named_doc = tmp_path / "policy.doc"
    shutil.copy(FILES / "差旅报销制度.docx", docx_named_doc)
    doc_named_docx = tmp_path / "policy.docx"
    shutil.copy(FILES / "差旅报销制度.doc", doc_named_docx)
    rtf_named_doc = tmp_path / "memo.doc"
    rtf_named_doc.write_bytes(rb"{\rtf1\ansi{\fonttbl{\f0 Arial;}}\f0 Claims are paid within 10 days.\par}")
    expected = _rows(parse_file(FILES / "差旅报销制度.docx"))
    assert _rows(parse_file(docx_named_doc)) == expected and _rows(parse_file(doc_named_docx)) == expected
    assert parse_file(rtf_named_doc).text == "Claims are paid within 10 days."


def test_ppt_reads_as_the_pptx_it_was_saved_from(tmp_path):
    """The same deck as .pptx and as PowerPoint 97-2003 .ppt (LibreOffice's export): slide by
    slide the same titles (headings), text, table rows (a group of text boxes in the .ppt) and
    speaker notes."""
    ppt = parse_file(FILES / "季度经营回顾.ppt")
    pptx = parse_file(FILES / "季度经营回顾.pptx")
    assert (ppt.format, ppt.parser, ppt.page_count, ppt.title) == ("ppt", "olefile", 4, "2026年第三季度经营回顾")
    assert [(b.page, b.text) for b in ppt.blocks] == [(b.page, b.text) for b in pptx.blocks]
    assert _rows(ppt) == _rows(pptx) and _rows(ppt)[1] == "大区: 华东; 产品: X-2000; 出货（台）: 65"  # merged down
    for kind in ("heading", "notes"):
        assert [b.text for b in ppt.blocks if b.kind == kind] == [b.text for b in pptx.blocks if b.kind == kind]
    assert [b.heading_path for b in ppt.blocks if b.kind == "notes"] == [("收入与利润",), ("Outlook for Q4",)]
    ppt_named_pptx = tmp_path / "deck.pptx"
    shutil.copy(FILES / "季度经营回顾.ppt", ppt_named_pptx)
    assert parse_file(ppt_named_pptx).text == ppt.text


@pytest.mark.parametrize("name", [
    "差旅报销制度.doc", "季度经营回顾.ppt", "员工名册.xls", "差旅报销制度.rtf", "travel.odt", "guide.epub",
    "审批流程.doc", "设备维护.doc", "设备维护.rtf", "delivery-failure.msg", "员工名册.xml",
])
def test_a_damaged_file_of_each_new_format_is_quarantined_not_crashed(tmp_path, name):
    """Cut in half, or with its middle overwritten: a quarantine reason, never a hang or a crash."""
    source = tmp_path / "source" / name
    source.parent.mkdir()
    if name.endswith(".odt"):
        _odf(source, _TRAVEL_ODT)
    elif name.endswith(".epub"):
        _epub(source, _GUIDE_CHAPTERS, ["ch1", "ch2"])
    else:
        shutil.copy(FILES / name, source)
    data = source.read_bytes()
    cut, scrambled = tmp_path / f"cut{source.suffix}", tmp_path / f"scrambled{source.suffix}"
    cut.write_bytes(data[: len(data) // 2])
    middle = len(data) // 3
    scrambled.write_bytes(data[:middle] + bytes((i * 37) % 251 for i in range(len(data) // 3)) + data[2 * middle:])
    for path in (cut, scrambled):
        try:
            doc = parse_file(path)
        except UnreadableDocument as exc:
            assert exc.reason in {"corrupt", "no_text"}, (path.name, exc)
        else:  # a binary file can lose only text it did not need: what is read is still text
            assert doc.blocks and doc.format in (source.suffix.lstrip("."), "spreadsheetml")


_OOXML_VARIANTS = {  # the original's main content type -> its macro-enabled, template and slide-show variants
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml": {
        ".docm": "application/vnd.ms-word.document.macroEnabled.main+xml",
        ".dotx": "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
        ".dotm": "application/vnd.ms-word.template.macroEnabledTemplate.main+xml"},
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml": {
        ".xlsm": "application/vnd.ms-excel.sheet.macroEnabled.main+xml",
        ".xltx": "application/vnd.openxmlformats-officedocument.spreadsheetml.template.main+xml"},
    "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": {
        ".pptm": "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml",
        ".ppsx": "application/vnd.openxmlformats-officedocument.presentationml.slideshow.main+xml",
        ".potx": "application/vnd.openxmlformats-officedocument.presentationml.template.main+xml"},
}


@pytest.mark.parametrize("original", [FILES / "差旅报销制度.docx", SAMPLE / "products" / "price_list.xlsx", FILES / "季度经营回顾.pptx"],
                         ids=["word", "excel", "powerpoint"])
def test_macro_enabled_templates_and_slide_shows_read_as_their_documents(tmp_path, original):
    """A .docm/.dotx/.dotm, .xlsm/.xltx, .pptm/.ppsx/.potx is the same package as its document
    but for the main part's content type (and, for macros, a VBA part the reader ignores)."""
    expected = [(b.kind, b.text) for b in parse_file(original).blocks]
    with zipfile.ZipFile(original) as package:
        members = {info.filename: package.read(info) for info in package.infolist()}
    types = members["[Content_Types].xml"].decode("utf-8")
    main = next(ct for ct in _OOXML_VARIANTS if ct in types)
    for suffix, content_type in _OOXML_VARIANTS[main].items():
        variant = tmp_path / f"variant{suffix}"
        with zipfile.ZipFile(variant, "w", zipfile.ZIP_DEFLATED) as package:
            for name, data in members.items():
                package.writestr(name, types.replace(main, content_type) if name == "[Content_Types].xml" else data)
        assert [(b.kind, b.text) for b in parse_file(variant).blocks] == expected, suffix


def test_wps_office_files_read_as_the_microsoft_formats_they_are_written_in(tmp_path):
    """WPS Office saves .wps/.et/.dps (and the .wpt/.ett/.dpt templates) in Word, Excel and
    PowerPoint 97-2003's binary formats (LibreOffice opens them with those filters): read as those.
    The fixtures are Microsoft-format files under WPS's names (no WPS-written file is at hand)."""
    for source, names in (
        ("差旅报销制度.doc", ("制度.wps", "制度.WPT")),
        ("员工名册.xls", ("名册.et", "名册.ett")),
        ("季度经营回顾.ppt", ("回顾.dps", "回顾.dpt")),
    ):
        expected = parse_file(FILES / source)
        for name in names:
            path = tmp_path / name
            shutil.copy(FILES / source, path)
            doc = parse_file(path)
            assert (doc.format, [(b.kind, b.text, b.heading_path) for b in doc.blocks]) == (
                expected.format, [(b.kind, b.text, b.heading_path) for b in expected.blocks]
            ), name


def test_a_wps_that_is_not_wps_writers_is_refused_with_how_to_convert_it(tmp_path):
    """`.wps` is Microsoft Works' extension too: an OLE file without a Word document, or a
    non-OLE one that is no other Word format, is refused `unsupported_format` saying what to do;
    a damaged OLE file is corrupt."""
    works_like = tmp_path / "notes.wps"
    shutil.copy(FILES / "员工名册.xls", works_like)  # an OLE file holding no WordDocument stream
    old_layout = tmp_path / "letter.wps"
    old_layout.write_bytes(b"\x01\xfe" + b"Dear Sir, " * 40)
    wrong_sheet = tmp_path / "sheet.et"
    shutil.copy(FILES / "差旅报销制度.doc", wrong_sheet)
    for path in (works_like, old_layout, wrong_sheet):
        with pytest.raises(UnreadableDocument) as info:
            parse_file(path)
        assert info.value.reason == "unsupported_format", path.name
        assert ("save it as .docx" in info.value.detail) == (path.suffix == ".wps"), info.value.detail
    damaged = tmp_path / "damaged.dps"
    damaged.write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 504)
    assert _reason(damaged) == "corrupt"


# ---------------------------------------------------------------- indexed and answered


def test_new_formats_are_indexed_by_a_real_run_and_answered_with_citations(tmp_path):
    """One real Dagster run over a folder of the new formats (real model, LanceDB on disk):
    every file indexed with its format, and questions answered from the .xls, .doc, .odt, .epub,
    .rst, .org, JSON Lines and an e-mail's attachment."""
    from rag_pipeline.query import RagIndex
    from rag_pipeline.query.sql import connect
    from rag_pipeline_tests.indexing import run_index

    raw = tmp_path / "raw"
    raw.mkdir()
    shutil.copy(FILES / "员工名册.xls", raw)
    shutil.copy(FILES / "差旅报销制度.doc", raw)
    _odf(raw / "travel.odt", _TRAVEL_ODT, title="Travel policy 2026")
    _epub(raw / "guide.epub", _GUIDE_CHAPTERS, spine=["ch1", "ch2"])
    (raw / "centers.tsv").write_text("City\tAddress\nBerlin\tInvalidenstraße 7, Mitte\n", encoding="utf-8")
    shutil.copy(FILES / "差旅报销指南.rst", raw)
    shutil.copy(FILES / "项目周报.org", raw)
    (raw / "faq.jsonl").write_text(json.dumps({"question": "工牌丢失怎么办？", "answer": "到行政部补办，工本费 20 元。"}, ensure_ascii=False) + "\n",
                                   encoding="utf-8")
    notice = EmailMessage()
    notice["From"], notice["Subject"] = "admin@example.com", "会议室使用须知"
    notice.set_content("详见附件。\n")
    notice.add_attachment("会议室须提前两天在 OA 系统预订，每次最长使用四小时。\n".encode(), maintype="text", subtype="plain",
                          filename="会议室规则.txt")
    (raw / "notice.eml").write_bytes(notice.as_bytes())
    report = run_index(raw, tmp_path / "lake", golden_file="none")
    assert report["success"], report["failures"]
    con = connect(tmp_path / "lake", admin=True)
    formats = dict(con.sql("SELECT source, format FROM documents").fetchall())
    assert formats == {"员工名册.xls": "xls", "差旅报销制度.doc": "doc", "travel.odt": "odt", "guide.epub": "epub",
                       "centers.tsv": "tsv", "差旅报销指南.rst": "rst", "项目周报.org": "org", "faq.jsonl": "jsonl", "notice.eml": "eml"}
    index = RagIndex.open(tmp_path / "lake")
    for question, fact, source in [
        ("李娜的入职日期是什么？", "2021-07-15", "员工名册.xls"),
        ("杭州的住宿标准是每晚多少元？", "450", "差旅报销制度.doc"),
        ("What is the daily allowance in Germany?", "EUR 28", "travel.odt"),
        ("入职第一天在哪里领取工牌？", "前台", "guide.epub"),
        ("住宿费超标的部分怎么处理？", "自理", "差旅报销指南.rst"),
        ("本周的召回率是多少？", "0.95", "项目周报.org"),
        ("工牌丢失后的补办工本费是多少？", "20 元", "faq.jsonl"),
        ("会议室最长可以使用多久？", "四小时", "notice.eml"),
    ]:
        answer = index.ask(question)
        assert not answer.refused and fact in answer.answer, (question, answer.reason, answer.answer)
        assert answer.citations[0].source == source, (question, answer.citations)


# ---------------------------------------------------------------- Word 2003 XML

def test_word_2003_xml_reads_as_the_docx_it_was_saved_from_under_either_name(tmp_path):
    """LibreOffice's Word 2003 XML of the policy, as .xml and under .doc (as office-automation
    systems export "Word documents"): the .docx's headings (LibreOffice's "Heading_20_1" style
    names), paragraphs and title. LibreOffice drops the vertical merges (the merged-down rows have
    one cell fewer), so those rows are read as the file has them; every other row is the .docx's."""
    docx = parse_file(FILES / "差旅报销制度.docx")
    as_doc = tmp_path / "差旅报销制度.doc"
    shutil.copy(FILES / "差旅报销制度.xml", as_doc)
    for path in (FILES / "差旅报销制度.xml", as_doc):
        doc = parse_file(path)
        assert (doc.format, doc.language, doc.title) == ("wordml", "zh", "差旅报销制度")
        assert [(b.kind, b.heading_path) for b in doc.blocks] == [(b.kind, b.heading_path) for b in docx.blocks]
        assert [b.text for b in doc.blocks if b.kind != "table_row"][:-1] == [b.text for b in docx.blocks if b.kind != "table_row"][:-1]
        rows, expected = _rows(doc), _rows(docx)
        assert [rows[0], rows[2]] == [expected[0], expected[2]]
        assert rows[1] == "城市类别: 上海; 城市: 600; 住宿（元/晚）: 150"  # the export's row, cell for cell
        assert doc.blocks[-1].text.startswith("本页页码：") and "PAGE" not in doc.text


def test_text_box_paragraphs_follow_the_paragraph_they_are_anchored_in():
    """A flowchart's steps written in text boxes (LibreOffice's .docx, .doc, RTF and Word 2003 XML
    of files/审批流程.fodt): read after their anchor paragraph, once each (a .docx holds every box
    twice, DrawingML and its VML fallback; a .doc keeps them in a subdocument, each story naming
    its shape), as the OpenDocument reader reads the .odt of the same source; a text box is not
    counted as a picture."""
    expected = [(b.kind, b.text, b.heading_path) for b in parse_file(FILES / "审批流程.odt").blocks]
    assert [text for _, text, _ in expected] == [
        "采购审批流程", "采购申请按以下流程办理：", "第一步：申请人在系统中提交采购申请单。", "金额超过五万元须附三家报价。",
        "第二步：部门经理在三个工作日内审批。", "审批通过后由财务部付款。",
    ]
    for name in ("审批流程.docx", "审批流程.doc", "审批流程.rtf", "审批流程.xml"):
        doc = parse_file(FILES / name)
        assert [(b.kind, b.text, b.heading_path) for b in doc.blocks] == expected, name
        assert doc.warnings == [], name


@pytest.mark.parametrize("name", ["流程表.docx", "流程表.doc", "流程表.rtf", "流程表.xml"])
def test_a_text_box_in_a_table_cell_is_read_in_that_cell(name):
    """A text box anchored in a table cell (files/流程表.fodt, saved by LibreOffice in each Word
    format): its text joins that cell's, as the OpenDocument reader reads the .odt."""
    expected = [(b.kind, b.text) for b in parse_file(FILES / "流程表.odt").blocks]
    assert expected[1] == ("table_row", "节点: 部门审批; 说明: 见图示三个工作日内完成")
    assert [(b.kind, b.text) for b in parse_file(FILES / name).blocks] == expected


@pytest.mark.parametrize("name", ["设备维护.docx", "设备维护.doc", "设备维护.rtf", "设备维护.xml"])
def test_a_note_is_read_in_brackets_where_it_is_cited_in_every_word_format(name):
    """Footnotes and an endnote (LibreOffice's .docx, .doc, RTF and Word 2003 XML of
    files/设备维护.fodt) read as the OpenDocument reader reads the .odt of the same source: the
    note's text in brackets after its reference mark, in the sentence it qualifies."""
    expected = [(b.kind, b.text) for b in parse_file(FILES / "设备维护.odt").blocks]
    assert [text for _, text in expected] == [
        "UPS 维护规定", "断电后 UPS 须支撑 30 分钟 (按满载功率计算。)，电池每两年更换一次。", "每月自检一次 (自检记录保存三年。)。",
        "The battery room must stay below 25 °C. (Measured at rack height.)",
    ]
    assert [(b.kind, b.text) for b in parse_file(FILES / name).blocks] == expected


@pytest.mark.parametrize("name", ["年假制度修订.docx", "年假制度修订.doc", "年假制度修订.rtf", "年假制度修订.odt"])
def test_tracked_changes_read_as_accepted_in_every_word_format(name):
    """A policy under revision (files/年假制度修订.fodt saved by LibreOffice): the inserted text is
    read and the deleted text is not — the document as it will read. The .docx lost its
    insertions and its content control's date (python-docx reads a paragraph's own runs only);
    the .doc and RTF read the deleted text beside the inserted."""
    assert [(b.kind, b.text) for b in parse_file(FILES / name).blocks] == [
        ("heading", "年假制度（修订稿）"),
        ("paragraph", "年假天数：入职满一年后为 15 天。"),
        ("paragraph", "生效日期：2026-04-01。"),
        ("paragraph", "Carry-over: unused days may be carried over until 30 June."),
    ]


def test_docx_inline_wrappers_are_read_and_placeholders_are_not(tmp_path):
    """What Word writes and LibreOffice does not: a smart tag, a simple field's result, custom XML,
    a moved run, a content control still showing its placeholder, a deleted table row."""
    import docx
    from docx.oxml.parser import parse_xml

    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = docx.Document()
    p = document.add_paragraph("会议地点：")._p
    for xml in (
        f'<w:smartTag {w} w:uri="urn:schemas-microsoft-com:office:smarttags" w:element="place"><w:smartTagPr/><w:r><w:t>北京</w:t></w:r></w:smartTag>',
        f'<w:fldSimple {w} w:instr="DOCPROPERTY Company"><w:r><w:t>（北风机器人）</w:t></w:r></w:fldSimple>',
        f'<w:customXml {w} w:element="room"><w:r><w:t>3 号会议室</w:t></w:r></w:customXml>',
        f'<w:moveFrom {w} w:id="1" w:author="A"><w:r><w:t>旧位置</w:t></w:r></w:moveFrom>',
        f'<w:moveTo {w} w:id="2" w:author="A"><w:r><w:t>，下午三点</w:t></w:r></w:moveTo>',
        f'<w:sdt {w}><w:sdtPr><w:showingPlcHdr/></w:sdtPr><w:sdtContent><w:r><w:t>单击或点击此处输入文字。</w:t></w:r></w:sdtContent></w:sdt>',
    ):
        p.append(parse_xml(xml))
    table = document.add_table(rows=3, cols=2)
    for i, row in enumerate(table.rows):
        row.cells[0].text, row.cells[1].text = ("项目", "负责人") if i == 0 else (f"项目{i}", f"负责人{i}")
    table.rows[2]._tr.insert(0, parse_xml(f'<w:trPr {w}><w:del w:id="3" w:author="A"/></w:trPr>'))
    document.save(tmp_path / "wrappers.docx")
    assert [(b.kind, b.text) for b in parse_file(tmp_path / "wrappers.docx").blocks] == [
        ("paragraph", "会议地点：北京（北风机器人）3 号会议室，下午三点"),
        ("table_row", "项目: 项目1; 负责人: 负责人1"),
    ]


# files/区域指标.* as every reader (and an object embedding it) gives them: percentages as shown
REGION_ROWS = [
    "区域: 华东; 营收（万元）: 1520; 同比增长: 12.5%; 毛利率: 34.82%; 市场份额: 31%",
    "区域: 华南; 营收（万元）: 980; 同比增长: -3.5%; 毛利率: 29.16%; 市场份额: 19%",
    "区域: 华北; 营收（万元）: 1105; 同比增长: 8.8%; 毛利率: 33.07%; 市场份额: 22%",
]


@pytest.mark.parametrize("name", ["区域指标.xlsx", "区域指标.xls", "区域指标.ods"])
def test_a_percentage_cell_reads_as_the_percentage_it_shows(name):
    """0.125 in a "0.0%" cell is read "12.5%" (was "0.125": another number to a reader and to a
    question about "12.5%"), with the format's decimals; other numbers by their value."""
    assert [b.text for b in parse_file(FILES / name).blocks] == REGION_ROWS


def test_percent_decimals_reads_only_a_formats_own_percent_sign():
    from rag_pipeline.ingest.sheets import cell_text, percent_decimals

    assert [percent_decimals(f) for f in ("0%", "0.0%", "0.00%;[Red]-0.00%", "#,##0.0#%", "[$-804]0.000%")] == [
        (0, 0), (1, 1), (2, 2), (1, 2), (3, 3)]
    assert [cell_text(v, (1, 2)) for v in (0.125, 0.1256, 0.12, 0.1)] == ["12.5%", "12.56%", "12.0%", "10.0%"]
    assert [percent_decimals(f) for f in (None, "General", "0.00", '0.0"%"', "0.0\\%", "#,##0", "yyyy-mm-dd")] == [None] * 7


def _deck_with_charts(path: Path) -> Path:
    """A slide with a bar chart (category axis titled) and one with a pie chart in percentages,
    written by python-pptx's chart writer (the chart part caches the values it plots)."""
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "2025 年经营数据"
    data = CategoryChartData()
    data.categories = ["Q1", "Q2", "Q3", "Q4"]
    data.add_series("营收（万元）", (120, 132.5, 128, 151))
    data.add_series("成本（万元）", (90, 97, 95.25, 101))
    bars = slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1.5), Inches(8), Inches(5), data).chart
    bars.has_title = True
    bars.chart_title.text_frame.text = "季度营收与成本"
    bars.category_axis.has_title = True
    bars.category_axis.axis_title.text_frame.text = "季度"
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Revenue by region"
    shares = CategoryChartData(number_format="0%")
    shares.categories = ["North", "South", "West"]
    shares.add_series("Share", (0.5, 0.3, 0.2))
    slide.shapes.add_chart(XL_CHART_TYPE.PIE, Inches(1), Inches(1.5), Inches(6), Inches(5), shares)
    deck.save(path)
    return path


def test_a_charts_data_is_read_as_table_rows_on_its_slide(tmp_path):
    """A chart's figures are nowhere in a slide's text: before, only its title was read."""
    document = parse_file(_deck_with_charts(tmp_path / "经营数据.pptx"))
    assert [(b.page, b.kind, b.text) for b in document.blocks] == [
        (1, "heading", "2025 年经营数据"),
        (1, "paragraph", "季度营收与成本"),
        (1, "table_row", "季度: Q1; 营收（万元）: 120; 成本（万元）: 90"),
        (1, "table_row", "季度: Q2; 营收（万元）: 132.5; 成本（万元）: 97"),
        (1, "table_row", "季度: Q3; 营收（万元）: 128; 成本（万元）: 95.25"),
        (1, "table_row", "季度: Q4; 营收（万元）: 151; 成本（万元）: 101"),
        (2, "heading", "Revenue by region"),
        (2, "table_row", "North; Share: 50%"),
        (2, "table_row", "South; Share: 30%"),
        (2, "table_row", "West; Share: 20%"),
    ]
    assert not document.warnings


def test_a_date_axis_reads_as_dates(tmp_path):
    """A line chart over dates keeps its categories as Excel day numbers with a date format."""
    import datetime as dt

    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = Presentation()
    data = CategoryChartData(number_format="0.0")
    data.categories = [dt.date(2026, 3, 1), dt.date(2026, 3, 2)]
    data.add_series("在线用户（万）", (12.5, 13.25))
    deck.slides.add_slide(deck.slide_layouts[6]).shapes.add_chart(XL_CHART_TYPE.LINE, Inches(1), Inches(1), Inches(6), Inches(4), data)
    deck.save(tmp_path / "dates.pptx")
    assert [b.text for b in parse_file(tmp_path / "dates.pptx").blocks] == [
        "2026-03-01; 在线用户（万）: 12.5", "2026-03-02; 在线用户（万）: 13.25",
    ]


def test_a_charts_data_is_read_in_opendocument_too():
    """The same deck saved by LibreOffice as .odp: each chart is an embedded object whose local
    table holds the figures (LibreOffice titles a one-series pie with its series' name, as
    PowerPoint shows it; the table keeps the shares as fractions)."""
    assert [(b.page, b.kind, b.text) for b in parse_file(FILES / "经营数据.odp").blocks] == [
        (1, "heading", "2025 年经营数据"),
        (1, "paragraph", "季度营收与成本"),
        (1, "table_row", "季度: Q1; 营收（万元）: 120; 成本（万元）: 90"),
        (1, "table_row", "季度: Q2; 营收（万元）: 132.5; 成本（万元）: 97"),
        (1, "table_row", "季度: Q3; 营收（万元）: 128; 成本（万元）: 95.25"),
        (1, "table_row", "季度: Q4; 营收（万元）: 151; 成本（万元）: 101"),
        (2, "heading", "Revenue by region"),
        (2, "paragraph", "Share"),
        (2, "table_row", "North; Share: 0.5"),
        (2, "table_row", "South; Share: 0.3"),
        (2, "table_row", "West; Share: 0.2"),
    ]


def test_a_chart_whose_part_is_missing_is_counted_and_the_slide_read(tmp_path):
    """The first slide's relationship to its chart part removed: the chart's shape names a part
    the package does not hold."""
    import re

    deck = _deck_with_charts(tmp_path / "deck.pptx")
    damaged = tmp_path / "damaged.pptx"
    with zipfile.ZipFile(deck) as src, zipfile.ZipFile(damaged, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "ppt/slides/_rels/slide1.xml.rels":
                data = re.sub(rb'<Relationship [^>]*charts/chart[^>]*/>', b"", data)
            dst.writestr(item, data)
    document = parse_file(damaged)
    texts = [b.text for b in document.blocks]
    assert texts[0] == "2025 年经营数据" and "North; Share: 50%" in texts and not any("Q1" in t for t in texts)
    assert "1 charts not extracted (damaged or missing part)" in document.warnings


def test_smartart_and_a_chart_on_a_powerpoint_slide_are_read():
    """A slide PowerPoint saved (python-pptx's test file): the SmartArt graphic's boxes and the
    chart's figures, neither of which is in any text frame, were lost."""
    blocks = [(b.page, b.kind, b.text) for b in parse_file(FILES / "smartart-shapes.pptx", ocr_lang="eng").blocks]
    assert (1, "list_item", "Smart Art") in blocks
    assert (1, "table_row", "1st Qtr; Sales: 8.2") in blocks and (1, "table_row", "4th Qtr; Sales: 1.2") in blocks


def test_smartart_and_a_chart_in_a_word_document_are_read():
    """A document Word saved (python-docx's test file) whose only text is in a SmartArt graphic
    and a chart: before, only its pictures' OCR was read."""
    blocks = [(b.kind, b.text) for b in parse_file(FILES / "smartart-chart.docx", ocr_lang="eng").blocks]
    assert [t for k, t in blocks if k == "list_item"] == ["foo", "bar", "baz"]
    assert ("table_row", "Category 2; Series 1: 2.5; Series 2: 4.4; Series 3: 2") in blocks


def test_a_workbook_embedded_in_a_slide_is_read_on_that_slide(tmp_path):
    """A worksheet pasted into a slide as an object (python-pptx's add_ole_object, as PowerPoint
    stores it: the .xlsx package in ppt/embeddings, a picture of it on the slide)."""
    from pptx import Presentation
    from pptx.enum.shapes import PROG_ID
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "区域经营指标"
    slide.shapes.add_ole_object(str(FILES / "区域指标.xlsx"), PROG_ID.XLSX, Inches(1), Inches(2))
    deck.save(tmp_path / "指标.pptx")
    document = parse_file(tmp_path / "指标.pptx")
    assert [(b.page, b.text) for b in document.blocks] == [
        (1, "区域经营指标"), *((1, row) for row in REGION_ROWS),
    ]
    assert document.blocks[1].heading_path == ("区域经营指标", "2025 区域指标")
    assert "embedded object Excel.Sheet.12: read as .xlsx (3 blocks)" in document.warnings


def test_objects_embedded_in_a_word_document(tmp_path):
    """Word's w:object: an embedded workbook is read after its paragraph; a linked one and an
    object of a kind no parser reads are named in the warnings, the document read."""
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml.parser import parse_xml

    document = docx.Document()
    body = document.part

    def embed(paragraph, rid, progid):
        paragraph._p.append(parse_xml(
            '<w:r xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
            'xmlns:o="urn:schemas-microsoft-com:office:office" '
            'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
            f'<w:object><o:OLEObject Type="Embed" ProgID="{progid}" ShapeID="_x0000_i1025" DrawAspect="Content" r:id="{rid}"/></w:object></w:r>'))

    sheet = Part(PackURI("/word/embeddings/Microsoft_Excel_Worksheet1.xlsx"),
                 "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", (FILES / "区域指标.xlsx").read_bytes(), body.package)
    embed(document.add_paragraph("各区域指标见下表："), body.relate_to(sheet, RT.PACKAGE), "Excel.Sheet.12")
    equation = Part(PackURI("/word/embeddings/oleObject1.bin"), "application/vnd.openxmlformats-officedocument.oleObject", b"not an OLE file", body.package)
    embed(document.add_paragraph("公式："), body.relate_to(equation, RT.OLE_OBJECT), "Equation.3")
    embed(document.add_paragraph("链接："), body.relate_to("file:///C:/data/budget.xlsx", RT.OLE_OBJECT, is_external=True), "Excel.Sheet.12")
    document.save(tmp_path / "说明.docx")
    parsed = parse_file(tmp_path / "说明.docx")
    assert [b.text for b in parsed.blocks] == [
        "各区域指标见下表：", *REGION_ROWS, "公式：", "链接：",
    ]
    assert parsed.warnings == [
        "embedded object Excel.Sheet.12: read as .xlsx (3 blocks)",
        "embedded object Equation.3: not read (no format this pipeline reads)",
        "embedded object Excel.Sheet.12: not read (linked, not embedded)",
    ]


def test_word_list_numbers_are_read_as_the_reader_sees_them():
    """A regulation's articles numbered by Word ("第%1条", Chinese counting), not typed: python-docx's
    text held "为规范员工考勤管理…" without its "第一条", so "第十二条规定了什么" had nothing to find.
    Expected: what LibreOffice shows for the same file (its text export)."""
    texts = [b.text for b in parse_file(FILES / "考勤制度.docx").blocks]
    assert texts[:4] == ["考勤管理制度", "第一条 为规范员工考勤管理，制定本制度。", "第二条 本制度适用于公司全体员工。",
                         "第三条 工作时间为每周一至周五 9:00 至 18:00。"]
    assert texts[10:] == ["第十条 第10项占位条款内容。", "第十一条 第11项占位条款内容。", "第十二条 迟到超过 30 分钟按旷工半天处理。",
                          "请假分为以下两类：", "（一） 事假须提前一天申请；", "（二） 病假须提供医院证明。"]


def test_number_formats():
    from rag_pipeline.ingest.word_numbering import format_number

    assert [format_number(n, "chineseCounting") for n in (1, 10, 12, 20, 105, 110, 1003)] == [
        "一", "十", "十二", "二十", "一百零五", "一百一十", "一千零三"]
    assert [format_number(n, f) for n, f in ((4, "upperRoman"), (9, "lowerRoman"), (28, "upperLetter"), (3, "lowerLetter"),
                                             (3, "decimalZero"), (2, "ideographTraditional"), (5, "decimalEnclosedCircle"), (7, "decimal"))] == [
        "IV", "ix", "BB", "c", "03", "乙", "⑤", "7"]


def test_content_a_word_document_imports_from_its_own_part_is_read():
    """html-docx-js (a generator web systems use) writes a .docx whose body is one w:altChunk of
    MHT: Word shows the page; the document was quarantined no_text, titled "Word Document"."""
    document = parse_file(FILES / "差旅审批单.docx")
    assert document.title == "差旅审批单"
    assert [(b.kind, b.text) for b in document.blocks] == [
        ("heading", "差旅审批单"),
        ("paragraph", "申请人：王小明，部门：销售部。"),
        ("table_row", "项目: 机票; 金额（元）: 1,860"),
        ("table_row", "项目: 酒店; 金额（元）: 1,200"),
        ("paragraph", "审批意见：同意，由区域经理李华签批。"),
    ]


def test_imported_content_of_a_kind_no_reader_reads_is_named(tmp_path):
    import docx
    from docx.opc.constants import RELATIONSHIP_TYPE as RT
    from docx.opc.packuri import PackURI
    from docx.opc.part import Part
    from docx.oxml.parser import parse_xml

    document = docx.Document()
    document.add_paragraph("正文。")
    chunk = Part(PackURI("/word/chunk1.bin"), "application/x-unknown", b"\x00\x01", document.part.package)
    rid = document.part.relate_to(chunk, RT.A_F_CHUNK)
    document.element.body.insert(1, parse_xml(
        '<w:altChunk xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        f'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" r:id="{rid}"/>'))
    document.save(tmp_path / "chunk.docx")
    parsed = parse_file(tmp_path / "chunk.docx")
    assert [b.text for b in parsed.blocks] == ["正文。"]
    assert "imported content (altChunk) application/x-unknown: not read (no format this pipeline reads)" in parsed.warnings


def test_a_smartart_org_chart_reads_each_box_under_the_one_above():
    """The data model's parOf connections make the tree; connectors, layout points, empty and
    placeholder boxes are not read; a box no connection reaches still is."""
    from rag_pipeline.ingest.diagrams import diagram_lines

    def pt(model_id, text=None, kind=None):
        body = f"<dgm:t><a:p><a:r><a:t>{text}</a:t></a:r></a:p></dgm:t>" if text else "<dgm:t><a:p/></dgm:t>"
        return f'<dgm:pt modelId="{model_id}"{f" type={chr(34)}{kind}{chr(34)}" if kind else ""}>{body}</dgm:pt>'

    def cxn(src, dest, order, kind=None):
        return f'<dgm:cxn modelId="c{src}{dest}" srcId="{src}" destId="{dest}" srcOrd="{order}"{f" type={chr(34)}{kind}{chr(34)}" if kind else ""}/>'

    model = (
        '<dgm:dataModel xmlns:dgm="http://schemas.openxmlformats.org/drawingml/2006/diagram" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"><dgm:ptLst>'
        + pt("doc", kind="doc") + pt("ceo", "总经理 张三") + pt("cto", "技术部 李四") + pt("cfo", "财务部 王五")
        + pt("dev", "研发组 赵六") + pt("tr", "连接线", kind="parTrans") + pt("empty") + pt("lone", "外部顾问")
        + "</dgm:ptLst><dgm:cxnLst>"
        + cxn("doc", "ceo", 0) + cxn("ceo", "cfo", 1) + cxn("ceo", "cto", 0) + cxn("cto", "dev", 0)
        + cxn("ceo", "empty", 2) + cxn("ceo", "cto", 0, kind="presOf")
        + "</dgm:cxnLst></dgm:dataModel>"
    )
    assert diagram_lines(model.encode()) == [
        "总经理 张三", "总经理 张三 > 技术部 李四", "技术部 李四 > 研发组 赵六", "总经理 张三 > 财务部 王五", "外部顾问",
    ]


def test_a_picture_in_a_docx_is_ocrd_after_its_paragraph_and_judged_paragraph_by_paragraph(tmp_path):
    """A scanned page pasted into Word (the sample's scan in a python-docx document): its text is
    read after the paragraph holding it, as the scan itself is read, as ocr_text with each
    paragraph's confidence; the same picture again is read once. Triage judges those paragraphs
    alone: above every confidence they all go, the document's own text stays (no quarantine)."""
    import docx

    from rag_pipeline.ingest.scan import scan_raw_folder
    from rag_pipeline.ingest.triage import PARAGRAPHS_DROPPED_NOTE, triage

    document = docx.Document()
    document.add_paragraph("以下为扫描件：")
    document.add_picture(str(SAFETY_SCAN))
    document.add_paragraph("扫描件结束。")
    document.add_picture(str(SAFETY_SCAN))
    path = tmp_path / "扫描件.docx"
    document.save(path)
    doc = parse_file(path)
    read_alone = [b.text for b in parse_file(SAFETY_SCAN).blocks]
    assert [b.text for b in doc.blocks] == ["以下为扫描件：", *read_alone, "扫描件结束。"]
    assert {b.kind for b in doc.blocks[1:-1]} == {"ocr_text"} and all(b.ocr_confidence for b in doc.blocks[1:-1])
    assert doc.ocr_used and doc.ocr_confidence and doc.warnings == ["1 embedded picture(s) OCR'd"]
    raw = next(iter(scan_raw_folder(tmp_path)))
    assert triage(raw, doc, ocr_min_confidence=60).blocks == doc.blocks  # a clean scan: every paragraph kept
    strict = triage(raw, doc, ocr_min_confidence=101)
    assert [b.text for b in strict.blocks] == ["以下为扫描件：", "扫描件结束。"]
    assert strict.warnings[-1].startswith(f"{PARAGRAPHS_DROPPED_NOTE}: {len(read_alone)} below threshold 101")


def test_a_picture_on_a_slide_is_ocrd_on_its_slide(tmp_path):
    """A scan pasted onto the second slide of a python-pptx deck: its text is read on that
    slide's page, as the scan itself is read, each paragraph with its confidence."""
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = "安全培训"
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "扫描件"
    slide.shapes.add_picture(str(SAFETY_SCAN), Inches(1), Inches(1.5), width=Inches(8))
    path = tmp_path / "培训.pptx"
    deck.save(path)
    doc = parse_file(path)
    ocr = [b for b in doc.blocks if b.kind == "ocr_text"]
    assert [b.text for b in ocr] == [b.text for b in parse_file(SAFETY_SCAN).blocks]
    assert {b.page for b in ocr} == {2} and all(b.ocr_confidence for b in ocr) and doc.ocr_used
    assert doc.warnings == ["1 embedded picture(s) OCR'd"]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_picture_on_a_worksheet_is_ocrd_after_its_rows(tmp_path, monkeypatch, streamed):
    """A screenshot pasted on a sheet (an openpyxl workbook holding the sample's scan): its text
    follows that sheet's rows, on the sheet's page, each paragraph with its confidence. A workbook
    too large to load whole is streamed, which names no sheet's pictures: the package's pictures
    are read after the last sheet."""
    from openpyxl.drawing.image import Image as SheetPicture

    from rag_pipeline.ingest import sheets

    if streamed:
        monkeypatch.setattr(sheets, "FULL_LOAD_MAX_BYTES", 0)

    workbook = openpyxl.Workbook()
    first = workbook.active
    first.title = "目录"
    first.append(["见第二页"])
    sheet = workbook.create_sheet("截图")
    sheet.append(["项目", "说明"])
    sheet.append(["安全须知", "见下图"])
    sheet.add_image(SheetPicture(str(SAFETY_SCAN)), "A4")
    path = tmp_path / "截图.xlsx"
    workbook.save(path)
    doc = parse_file(path)
    assert [b.text for b in doc.blocks if b.kind != "ocr_text"] == ["见第二页", "项目: 安全须知; 说明: 见下图"]
    ocr = [b for b in doc.blocks if b.kind == "ocr_text"]
    assert [b.text for b in ocr] == [b.text for b in parse_file(SAFETY_SCAN).blocks] and doc.blocks[-len(ocr):] == ocr
    assert {(b.page, b.sheet) for b in ocr} == ({(None, None)} if streamed else {(2, "截图")})
    assert all(b.ocr_confidence for b in ocr) and doc.ocr_used


@pytest.mark.parametrize(("suffix", "href"), [(".odt", "Pictures/scan.png"), (".odp", "./Pictures/scan.png"),
                                              (".ods", "Pictures/scan.png")])
def test_a_picture_in_opendocument_is_ocrd_where_its_frame_is(tmp_path, suffix, href):
    """A scan in a frame (the package's Pictures/ member: LibreOffice links it as Pictures/…, some
    writers as ./Pictures/…), in a text document, on a slide and on a sheet: its text follows the
    paragraph holding it, on the slide's page, after the sheet's rows."""
    frame = f'<draw:frame draw:name="scan"><draw:image xlink:href="{href}"/></draw:frame>'
    body = {
        ".odt": f"<office:text><text:p>以下为扫描件：{frame}</text:p><text:p>扫描件结束。</text:p></office:text>",
        ".odp": f'<office:presentation><draw:page draw:name="p1"><draw:frame><draw:text-box><text:p>以下为扫描件：</text:p>'
                f"</draw:text-box></draw:frame>{frame}</draw:page></office:presentation>",
        ".ods": f'<office:spreadsheet><table:table table:name="须知"><table:shapes>{frame}</table:shapes><table:table-row>'
                f"<table:table-cell><text:p>以下为扫描件：</text:p></table:table-cell></table:table-row></table:table></office:spreadsheet>",
    }[suffix]
    path = _odf(tmp_path / f"扫描件{suffix}", body)
    with zipfile.ZipFile(path, "a") as package:
        package.write(SAFETY_SCAN, "Pictures/scan.png")
    doc = parse_file(path)
    read_alone = [b.text for b in parse_file(SAFETY_SCAN).blocks]
    texts = [b.text for b in doc.blocks]
    assert texts[:1 + len(read_alone)] == ["以下为扫描件：", *read_alone] and doc.ocr_used
    where = {".odt": (None, None), ".odp": (1, None), ".ods": (1, "须知")}[suffix]
    assert all(b.ocr_confidence and (b.page, b.sheet) == where for b in doc.blocks if b.kind == "ocr_text")


def test_pictures_not_worth_reading_are_counted_not_read(monkeypatch):
    """Each picture is read once (a logo repeated in every section); an icon too small for a
    line of text, a vector picture and any beyond the per-document limit are skipped and counted."""
    import io

    from rag_pipeline.ingest import heartbeat, pictures

    beats = []
    monkeypatch.setattr(heartbeat, "beat", lambda: beats.append(1))  # each picture read is progress (pool.py)
    scan = SAFETY_SCAN.read_bytes()
    icon, other = io.BytesIO(), io.BytesIO()
    Image.new("RGB", (16, 16), "white").save(icon, "PNG")
    Image.new("RGB", (200, 80), "white").save(other, "PNG")
    monkeypatch.setattr(pictures, "MAX_PICTURES", 1)  # the limit, met at the second picture read
    reader = pictures.PictureReader("eng+chi_sim")
    assert reader.paragraphs(scan) and not reader.paragraphs(scan)  # the same picture again: read once
    for blob in (icon.getvalue(), b'<svg xmlns="http://www.w3.org/2000/svg"/>', other.getvalue()):
        assert reader.paragraphs(blob) == []
    meta = reader.metadata()
    assert meta["ocr_used"] and meta["ocr_confidence"] > 60 and len(beats) == 1
    assert meta["warnings"] == [
        "1 embedded picture(s) OCR'd", "1 embedded picture(s) not OCR'd: too small to hold text",
        "1 embedded picture(s) not OCR'd: not a raster image", "1 embedded picture(s) not OCR'd: over the 1-picture limit",
    ]


_WORDML = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<?mso-application progid="Word.Document"?>\n'
    '<w:wordDocument xmlns:w="http://schemas.microsoft.com/office/word/2003/wordml" '
    'xmlns:wx="http://schemas.microsoft.com/office/word/2003/auxHint" xmlns:o="urn:schemas-microsoft-com:office:office">'
    '<o:DocumentProperties><o:Title>设备清单</o:Title></o:DocumentProperties>'
    '<w:styles><w:style w:type="paragraph" w:styleId="2"><w:name w:val="heading 2"/><wx:uiName wx:val="标题 2"/></w:style></w:styles>'
    '<w:body><wx:sect>'
    '<w:p><w:pPr><w:outlineLvl w:val="0"/></w:pPr><w:r><w:t>机房设备</w:t></w:r></w:p>'
    '<w:p><w:pPr><w:pStyle w:val="2"/></w:pPr><w:r><w:t>UPS</w:t></w:r></w:p>'
    '<w:p><w:r><w:t>断电后支撑 </w:t></w:r><w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText> REF x </w:instrText></w:r>'
    '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>30</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>'
    '<w:r><w:t> 分钟。</w:t></w:r><w:r><w:footnote><w:p><w:r><w:t>满载时。</w:t></w:r></w:p></w:footnote></w:r></w:p>'
    '<w:p><w:pPr><w:listPr><w:ilvl w:val="0"/></w:listPr></w:pPr><w:r><w:t>每月自检一次</w:t></w:r></w:p>'
    '<w:tbl><w:tblGrid><w:gridCol/><w:gridCol/><w:gridCol/></w:tblGrid>'
    '<w:tr><w:tc><w:p><w:r><w:t>类别</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>型号</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>数量</w:t></w:r></w:p></w:tc></w:tr>'
    '<w:tr><w:tc><w:tcPr><w:vmerge w:val="restart"/></w:tcPr><w:p><w:r><w:t>电源</w:t></w:r></w:p></w:tc>'
    '<w:tc><w:p><w:r><w:t>UPS-3K</w:t></w:r><w:r><w:footnote><w:p><w:r><w:t>含电池柜</w:t></w:r></w:p></w:footnote></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>2</w:t></w:r></w:p></w:tc></w:tr>'
    '<w:tr><w:tc><w:tcPr><w:vmerge/></w:tcPr><w:p/></w:tc>'
    '<w:tc><w:p><w:r><w:t>PDU-8</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>4</w:t></w:r></w:p></w:tc></w:tr>'
    '<w:tr><w:tc><w:tcPr><w:gridSpan w:val="2"/></w:tcPr><w:p><w:r><w:t>合计</w:t></w:r></w:p></w:tc>'
    '<w:tc><w:p><w:r><w:t>6</w:t></w:r></w:p></w:tc></w:tr>'
    '</w:tbl></wx:sect></w:body></w:wordDocument>'
)


def test_word_2003_xml_as_word_writes_it(tmp_path):
    """Word's own markup: an outline level and the English built-in style name (whatever the UI
    language) make headings; a list item; a field's result without its code; a footnote's text in
    brackets where cited, in a paragraph and in a cell (not a paragraph of its own); a cell merged
    down filled from above; a cell spanning two columns fills the
    first and leaves the second empty (the .docx reader's rule), so the next cell keeps its header."""
    path = tmp_path / "设备清单.xml"
    path.write_text(_WORDML, encoding="utf-8")
    doc = parse_file(path)
    assert doc.title == "机房设备"  # as the .docx reader: a Title paragraph, else the first heading, else the stored title
    assert [(b.kind, b.text, b.heading_path) for b in doc.blocks[:4]] == [
        ("heading", "机房设备", ("机房设备",)),
        ("heading", "UPS", ("机房设备", "UPS")),
        ("paragraph", "断电后支撑 30 分钟。 (满载时。)", ("机房设备", "UPS")),
        ("list_item", "每月自检一次", ("机房设备", "UPS")),
    ]
    assert _rows(doc) == ["类别: 电源; 型号: UPS-3K (含电池柜); 数量: 2", "类别: 电源; 型号: PDU-8; 数量: 4", "类别: 合计; 数量: 6"]
    assert "REF" not in doc.text


# ---------------------------------------------------------------- Excel 2003 XML (SpreadsheetML)


def test_excel_2003_xml_reads_as_the_xls_it_was_saved_from_under_either_name(tmp_path):
    """LibreOffice's "MS Excel 2003 XML" export of the .xls fixture (group labels merged down,
    dates, a second sheet; its million empty rows cut to the last one, ss:Index 1048576), read
    as .xml and under .xls (what report tools name it): the .xls's blocks, sheet for sheet."""
    as_xls = tmp_path / "员工名册.xls"
    shutil.copy(FILES / "员工名册.xml", as_xls)
    expected = parse_file(FILES / "员工名册.xls")
    for path in (FILES / "员工名册.xml", as_xls):
        doc = parse_file(path)
        assert (doc.format, doc.parser, doc.page_count) == ("spreadsheetml", "lxml", 2)
        assert [(b.kind, b.text, b.page, b.sheet) for b in doc.blocks] == [(b.kind, b.text, b.page, b.sheet) for b in expected.blocks]
        assert _rows(doc)[1] == "部门: 研发部; 姓名: 李娜; 入职日期: 2021-07-15; 年假天数: 10"


_SPREADSHEETML = """<?xml version="1.0"?>
<?mso-application progid="Excel.Sheet"?>
<Workbook xmlns="urn:schemas-microsoft-com:office:spreadsheet" xmlns:o="urn:schemas-microsoft-com:office:office"
 xmlns:x="urn:schemas-microsoft-com:office:excel" xmlns:ss="urn:schemas-microsoft-com:office:spreadsheet"
 xmlns:html="http://www.w3.org/TR/REC-html40">
<DocumentProperties xmlns="urn:schemas-microsoft-com:office:office"><Title>值班表</Title></DocumentProperties>
<Worksheet ss:Name="一月"><Table>
<Row><Cell ss:MergeAcross="3"><Data ss:Type="String">一月值班安排</Data></Cell></Row>
<Row><Cell><Data ss:Type="String">班组</Data></Cell><Cell><Data ss:Type="String">值班人</Data></Cell>
 <Cell><Data ss:Type="String">开始时间</Data></Cell><Cell><Data ss:Type="String">时长（小时）</Data></Cell></Row>
<Row><Cell ss:MergeDown="1"><Data ss:Type="String">运维组</Data></Cell>
 <Cell><ss:Data ss:Type="String" xmlns="http://www.w3.org/TR/REC-html40"><B>张</B><Font html:Color="#FF0000">伟</Font></ss:Data></Cell>
 <Cell><Data ss:Type="DateTime">1899-12-31T08:30:00.000</Data></Cell><Cell><Data ss:Type="Number">8</Data></Cell></Row>
<Row><Cell ss:Index="2"><Data ss:Type="String">李娜</Data></Cell><Cell><Data ss:Type="DateTime">1899-12-31T20:30:00.000</Data></Cell>
 <Cell><Data ss:Type="Number">7.5</Data></Cell></Row>
<Row ss:Index="8"><Cell><Data ss:Type="String">节假日双人值班。</Data></Cell></Row>
</Table></Worksheet>
<Worksheet ss:Name="草稿"><Table><Row><Cell><Data ss:Type="String">已审核</Data></Cell><Cell><Data ss:Type="Boolean">1</Data></Cell>
 <Cell><Data ss:Type="DateTime">2024-02-10T00:00:00.000</Data></Cell></Row></Table>
<WorksheetOptions xmlns="urn:schemas-microsoft-com:office:excel"><Visible>SheetHidden</Visible></WorksheetOptions></Worksheet>
</Workbook>
"""


def test_excel_2003_xml_as_excel_writes_it_reads_as_the_same_xlsx(tmp_path):
    """Excel's own markup — a title merged across, a group label merged down (the row below
    leaves the covered cell out and indexes its next cell), rich text, times on Excel's day 0,
    a jump in row index, a hidden sheet, the stored title — read as the .xlsx reader reads the
    same workbook written by openpyxl."""
    path = tmp_path / "值班表.xml"
    path.write_text(_SPREADSHEETML, encoding="utf-8")
    twin = openpyxl.Workbook()
    january = twin.active
    january.title = "一月"
    for row in (["一月值班安排"], ["班组", "值班人", "开始时间", "时长（小时）"],
                ["运维组", "张伟", dt.time(8, 30), 8], [None, "李娜", dt.time(20, 30), 7.5]):
        january.append(row)
    january["A8"] = "节假日双人值班。"
    january.merge_cells("A1:D1")
    january.merge_cells("A3:A4")
    draft = twin.create_sheet("草稿")
    draft.append(["已审核", True, dt.datetime(2024, 2, 10)])
    draft.sheet_state = "hidden"
    twin.properties.title = "值班表"
    twin.save(tmp_path / "值班表.xlsx")
    doc, expected = parse_file(path), parse_file(tmp_path / "值班表.xlsx")
    assert [(b.kind, b.text, b.page, b.sheet) for b in doc.blocks] == [(b.kind, b.text, b.page, b.sheet) for b in expected.blocks]
    assert (doc.title, doc.warnings) == (expected.title, expected.warnings) == ("值班表", ["sheet '草稿' is hidden (included)"])
    assert _rows(doc)[:2] == ["班组: 运维组; 值班人: 张伟; 开始时间: 08:30:00; 时长（小时）: 8",
                              "班组: 运维组; 值班人: 李娜; 开始时间: 20:30:00; 时长（小时）: 7.5"]


def test_other_xml_is_refused_and_a_cut_office_xml_file_is_corrupt(tmp_path):
    """Any other XML is refused (a file carrying Excel's marker on another root too); under
    .xls, SpreadsheetML is told from HTML (its <Table> is no HTML table); a cut file is corrupt."""
    for name, text in (
        ("pom.xml", '<?xml version="1.0"?><project><name>not a document</name></project>'),
        ("config.xml", '<?mso-application progid="Excel.Sheet"?><Settings><Worksheet/></Settings>'),
    ):
        (tmp_path / name).write_text(text, encoding="utf-8")
        assert _reason(tmp_path / name) == "unsupported_format", name
    as_xls = tmp_path / "report.xls"
    as_xls.write_text(_SPREADSHEETML, encoding="utf-8")
    assert parse_file(as_xls).format == "spreadsheetml"
    for name, markup in (("cut.doc", _WORDML), ("cut.xml", _WORDML), ("cut.xls", _SPREADSHEETML)):
        (tmp_path / name).write_text(markup[: len(markup) // 2], encoding="utf-8")
        assert _reason(tmp_path / name) == "corrupt", name


def test_an_extension_version_re_parses_only_that_extensions_files():
    """Reading Word 2003 XML changes what a .doc or .xml parses to; every other cached parse (OCR'd
    scans and PDFs above all) keeps its key, so an upgrade re-parses only .doc and .xml files."""
    from rag_pipeline.ingest import serialize

    sha = "ab" * 32
    keys = {suffix: serialize.parse_cache_key(sha, "eng+chi_sim", suffix) for suffix in (".pdf", ".png", ".doc", ".XML")}
    unchanged = serialize.EXTENSION_VERSIONS.pop(".doc"), serialize.EXTENSION_VERSIONS.pop(".xml")
    try:
        before = {suffix: serialize.parse_cache_key(sha, "eng+chi_sim", suffix) for suffix in keys}
    finally:
        serialize.EXTENSION_VERSIONS.update({".doc": unchanged[0], ".xml": unchanged[1]})
    assert keys[".pdf"] == before[".pdf"] and keys[".png"] == before[".png"]
    assert keys[".doc"] != before[".doc"] and keys[".XML"] != before[".XML"]
    assert len(set(keys.values())) == 4


@pytest.mark.parametrize("reader", [".doc", ".xls", ".ppt"])
def test_a_readers_version_re_parses_the_wps_files_it_reads(reader, monkeypatch):
    """WPS Office's extensions are read by the .doc/.xls/.ppt readers: bumping a reader's version
    re-parses its WPS files too (session 51 bumped .doc and .ppt and forgot them), and only those."""
    from rag_pipeline.ingest import parsers, serialize

    assert parsers._KINGSOFT is serialize.READ_AS  # the dispatch and the keys read one map
    sha = "cd" * 32
    suffixes = sorted(serialize.READ_AS) + [".doc", ".xls", ".ppt", ".docx", ".pdf"]
    before = {x: serialize.parse_cache_key(sha, "eng+chi_sim", x) for x in suffixes}
    monkeypatch.setitem(serialize.EXTENSION_VERSIONS, reader, serialize.EXTENSION_VERSIONS[reader] + 1)
    after = {x: serialize.parse_cache_key(sha, "eng+chi_sim", x) for x in suffixes}
    changed = {x for x in suffixes if before[x] != after[x]}
    assert changed == {reader} | {x for x, r in serialize.READ_AS.items() if r == reader}


# ---------------------------------------------------------------- pictures in 97-2003 files


def test_a_picture_in_an_xls_is_ocrd_after_the_rows_of_its_sheet():
    """Three sheets, the scan pasted on the second (LibreOffice's .xls: its PNG blip in the
    workbook's picture store, split over BIFF records, named by a shape in that sheet's drawing
    records): its text after that sheet's rows, on its page and under its name, before the third
    sheet — where the .xlsx it was saved from puts it — read as the scan alone reads."""
    doc = parse_file(FILES / "扫描件.xls")
    rows = [(b.text, b.page, b.sheet) for b in doc.blocks if b.kind != "ocr_text"]
    assert rows == [("项目: 培训; 说明: 每年一次", 1, "概览"), ("项目: 安全; 说明: 见下图", 2, "须知"), ("项目: 签字; 说明: 培训后签字", 3, "结束")]
    ocr = doc.blocks[2:-1]
    assert [b.text for b in ocr] == [b.text for b in parse_file(SAFETY_SCAN).blocks]
    assert all(b.kind == "ocr_text" and b.ocr_confidence and (b.page, b.sheet, b.heading_path) == (2, "须知", ("须知",)) for b in ocr)
    assert doc.ocr_used and doc.warnings[-1] == "1 embedded picture(s) OCR'd"


def test_xls_pictures_no_sheet_shows_are_read_after_the_last_sheet():
    """The picture store's entries no sheet's shapes name (a chart's, or drawing records not
    followed) are read after the last sheet: none is lost."""
    from rag_pipeline.ingest.office_art import xls_sheet_pictures

    with olefile.OleFileIO(str(FILES / "扫描件.xls")) as ole:
        workbook = ole.openstream("Workbook").read()
    by_sheet, rest = xls_sheet_pictures(workbook)
    assert [len(v) for v in by_sheet.values()] == [1] and list(by_sheet) == ["须知"] and rest == []
    unnamed = workbook.replace(b"\x04\x41", b"\x04\x01")  # the shape's pib property no longer marked a store index
    assert unnamed != workbook and len(unnamed) == len(workbook)
    assert xls_sheet_pictures(unnamed) == ({}, by_sheet["须知"])


def test_an_inline_picture_in_a_doc_is_read_where_it_stands():
    """The scan inline in its own paragraph of a Word 97-2003 file (a \\x01 character whose run
    carries sprmCPicLocation: the picture's PICF in the Data stream): its text between the
    paragraphs around it, as the .docx reader places it, read as the scan alone reads."""
    doc = parse_file(FILES / "扫描件.doc")
    read_alone = [b.text for b in parse_file(SAFETY_SCAN).blocks]
    assert [b.text for b in doc.blocks] == ["以下为扫描件：", *read_alone, "扫描件结束。"]
    assert all(b.ocr_confidence for b in doc.blocks if b.kind == "ocr_text") and doc.warnings == ["1 embedded picture(s) OCR'd"]


def test_a_floating_picture_in_a_doc_is_read_after_the_paragraph_it_is_anchored_in():
    """The scan floating beside the second of three paragraphs (LibreOffice's .doc: a shape anchored
    in that paragraph, PlcSpaMom naming its id, its properties a picture store entry whose blip is in
    the WordDocument stream): its text between the second and the third, as the scan alone reads."""
    doc = parse_file(FILES / "浮动扫描件.doc")
    read_alone = [b.text for b in parse_file(SAFETY_SCAN).blocks]
    assert [b.text for b in doc.blocks] == ["第一段：安全培训的安排。", "第二段：扫描件浮动在此段右侧。", *read_alone, "第三段：培训结束后签字。"]
    assert all(b.ocr_confidence for b in doc.blocks if b.kind == "ocr_text") and doc.warnings == ["1 embedded picture(s) OCR'd"]


def test_a_picture_in_a_ppt_is_read_on_the_slide_that_shows_it():
    """Three slides, the scan on the second (LibreOffice's .ppt: the picture's blip in the Pictures
    stream, named by the shape's `pib` through the picture store): its text on page 2, under that
    slide's title, before the third slide, as the scan alone reads."""
    doc = parse_file(FILES / "扫描件.ppt")
    assert [(b.text, b.page) for b in doc.blocks if b.kind == "heading"] == [("安全培训", 1), ("扫描件", 2), ("结束", 3)]
    ocr = [b for b in doc.blocks if b.kind == "ocr_text"]
    assert [b.text for b in ocr] == [b.text for b in parse_file(SAFETY_SCAN).blocks]
    assert all(b.page == 2 and b.heading_path == ("扫描件",) and b.ocr_confidence for b in ocr)
    assert doc.blocks[-1].text == "结束" and doc.warnings == ["1 embedded picture(s) OCR'd"]
