"""The shared format corpus through one real Dagster run of index_job: nothing lost, and each
file's parse outcome (real files, real tesseract and poppler).

Every corpus file listed in ``manifest.tsv`` ends up either as an indexed document or as a
quarantine row, each file of ``bad/`` with the reason the manifest expects. Every corpus file is
parsed once, by the pipeline: the outcomes are read from the parse cache of the session's
``shared_corpus_run`` (conftest; the real model at int8-onnx precision), i.e. what the index was
built from. A file the run did not cache (a transient outcome: a timeout) is parsed here with
``parse_file``. One file, so `pytest --dist loadfile` builds the ~5-minute run on one worker only.
"""

from __future__ import annotations

import csv
import functools
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rag_pipeline.config import Settings
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.language import CJK_CLASS
from rag_pipeline.ingest.parsers import SUPPORTED_EXTENSIONS, OcrEngineError, parse_file
from rag_pipeline.ingest.scan import file_sha256
from rag_pipeline.ingest.serialize import outcome_from_json, parse_cache_key
from rag_pipeline.query.sql import connect
from rag_pipeline.store.lake import Lake

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
MANIFEST = CORPUS / "manifest.tsv"
SKIP_NO_CORPUS = f"shared format corpus not found at {CORPUS} (expected a manifest.tsv there)"
pytestmark = pytest.mark.skipif(not MANIFEST.is_file(), reason=SKIP_NO_CORPUS)


def _ocr_available() -> bool:
    if not (shutil.which("tesseract") and shutil.which("pdftoppm")):
        return False
    out = subprocess.run(["tesseract", "--list-langs"], capture_output=True, text=True, check=False)
    return {"eng", "chi_sim"} <= set(out.stdout.split())


OCR_AVAILABLE = _ocr_available()
needs_ocr = pytest.mark.skipif(not OCR_AVAILABLE, reason="tesseract (eng+chi_sim) or pdftoppm not installed")


def _manifest() -> list[dict[str, str]]:
    if not MANIFEST.is_file():
        return []
    with open(MANIFEST, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


ROWS = _manifest()
ROW_PARAMS = [pytest.param(r, id=r["file"]) for r in ROWS] or [
    pytest.param(None, marks=pytest.mark.skip(reason=SKIP_NO_CORPUS), id="no-corpus")
]


_PIPELINE: dict[str, ParsedDocument | UnreadableDocument] = {}  # rel -> the corpus run's cached outcome


@pytest.fixture(scope="module", autouse=True)
def pipeline_outcomes(request) -> None:
    """Each corpus file's parse outcome as the session's corpus index run cached it."""
    if not MANIFEST.is_file():
        return
    run = request.getfixturevalue("shared_corpus_run")
    lang = Settings().ocr_lang
    keys = {parse_cache_key(file_sha256(run["raw"] / r["file"]), lang, Path(r["file"]).suffix): r["file"] for r in ROWS}
    for key, outcome in Lake(run["lake"]).cached_parses(list(keys)).items():
        _PIPELINE[keys[key]] = outcome_from_json(outcome)


@functools.lru_cache(maxsize=None)
def parsed(rel: str) -> ParsedDocument | UnreadableDocument:
    """The pipeline's outcome for a corpus file (parsed here if it has none); the exception is
    returned, not raised."""
    if not CORPUS.is_dir():
        pytest.skip(SKIP_NO_CORPUS)
    if rel in _PIPELINE:
        return _PIPELINE[rel]
    try:
        return parse_file(CORPUS / rel, ocr_lang=Settings().ocr_lang)
    except UnreadableDocument as exc:
        return exc


def doc(rel: str) -> ParsedDocument:
    try:
        result = parsed(rel)
    except OcrEngineError as exc:  # pragma: no cover - environment without OCR
        pytest.skip(f"OCR engine unavailable: {exc}")
    assert isinstance(result, ParsedDocument), f"{rel}: {result}"
    return result


_FOLDER_FORMAT = {"pdf": "pdf", "scanned-pdf": "pdf", "image": "image", "docx": "docx", "pptx": "pptx",
                  "xlsx": "xlsx", "csv": "csv", "html": "html", "md": "md", "txt": "txt"}


def _expected(row: dict[str, str]) -> str:
    """Outcome class from the manifest's free-text expectation."""
    e = row["expectation"].lower()
    if e.startswith("edge:"):  # unusual but valid input ("1-bit PNG", "UTF-16 encoding")
        return "text"
    if "(encrypted)" in e:
        return "encrypted"
    if "(corrupt)" in e:
        return "corrupt"
    if "reject or lenient parse" in e:
        return "corrupt_or_text"
    if "lenient parse" in e:
        return "text"
    if "empty" in e or "no content" in e or "no text" in e:
        return "no_text"
    if "low ocr confidence" in e:
        return "low_confidence"
    return "text"


def test_manifest_lists_every_corpus_file():
    if not ROWS:
        pytest.skip(SKIP_NO_CORPUS)
    on_disk = {p.relative_to(CORPUS).as_posix() for p in CORPUS.rglob("*") if p.is_file()}
    on_disk -= {"manifest.tsv", "SOURCES.md"}
    assert on_disk == {r["file"] for r in ROWS}


@pytest.mark.parametrize("row", ROW_PARAMS)
def test_corpus_file(row):
    rel = row["file"]
    assert Path(rel).suffix.lower() in SUPPORTED_EXTENSIONS
    expected = _expected(row)
    is_image = rel.lower().endswith((".png", ".jpg", ".jpeg", ".tif", ".tiff"))
    if (is_image or rel.startswith("scanned-pdf/")) and not OCR_AVAILABLE:
        pytest.skip("needs tesseract")
    result = parsed(rel)

    if isinstance(result, UnreadableDocument):
        allowed = {
            "encrypted": {"encrypted"},
            "corrupt": {"corrupt"},
            "corrupt_or_text": {"corrupt"},
            "no_text": {"no_text"},
            "low_confidence": {"no_text"},  # nothing recognisable at all is the extreme case
            "text": set(),
        }[expected]
        assert result.reason in allowed, f"{rel}: unexpected {result.reason}: {result.detail}"
        assert result.detail
        return

    assert expected not in {"encrypted", "corrupt"}, f"{rel} should have been rejected as {expected}"
    if expected == "no_text":
        # Tesseract may hallucinate a few "words" on a textless photo; then they must look bad.
        assert is_image and result.ocr_used and result.ocr_confidence is not None and result.ocr_confidence < 50, rel
        return
    assert result.text.strip(), rel
    assert result.format == _FOLDER_FORMAT.get(rel.split("/")[0], result.format)
    assert result.title is None or result.title.strip()  # untitled files are named by store.rows, not cached
    assert result.language in {"zh", "en", "mixed", "und"}
    for block in result.blocks:
        assert block.text == block.text.strip() and block.text, (rel, block)
        assert all(isinstance(h, str) and h for h in block.heading_path)
        if result.page_count is not None and block.page is not None:
            assert 1 <= block.page <= result.page_count, (rel, block)
    if result.format in {"pdf", "pptx", "xlsx", "image"}:
        assert result.page_count and all(b.page is not None for b in result.blocks), rel
    if row["lang"] in {"en", "zh"} and not result.ocr_used:
        assert result.language in {row["lang"], "mixed"}, (rel, result.language)
    if rel.startswith(("scanned-pdf/", "image/")):
        assert result.ocr_used and result.ocr_confidence is not None, rel
    if expected == "low_confidence":
        assert result.ocr_confidence < 80, (rel, result.ocr_confidence)


# --- focused checks -------------------------------------------------------------------


def test_pdf_text_layer_has_pages_and_reads_columns_in_order():
    d = doc("pdf/multi-column-2p.pdf")
    assert d.page_count == 2 and not d.ocr_used
    assert {b.page for b in d.blocks} == {1, 2}
    assert d.title == "Dense Passage Retrieval for Open-Domain Question Answering"
    # The abstract is one paragraph, not interleaved with the right-hand column.
    abstract = next(b for b in d.blocks if b.text.startswith("Open-domain question answering relies on"))
    assert "dense representations" in abstract.text
    assert "Introduction" not in abstract.text


def test_pdf_with_empty_user_password_opens():
    d = doc("pdf/copy-protected.pdf")
    assert "LayoutParser" in d.text
    assert any("encrypted" in w for w in d.warnings)


def test_pdf_drops_rotated_margin_stamp():
    # arXiv's rotated side stamp comes out one glyph per line ("2 v 8 4 3 5 1 . 3 0 1 2").
    d = doc("pdf/layout-parser-paper-fast.pdf")
    assert "v i X r a" not in d.text
    assert d.blocks[0].kind == "title"


def test_pdf_chinese_text_layer_and_kangxi_radicals_normalised():
    d = doc("pdf/chemical_knowledge_introduction.pdf")
    assert d.language == "zh"
    assert "方程式" in d.text  # the PDF font encodes 方 as the Kangxi radical U+2F45
    assert "\u2f45" not in d.text


@needs_ocr
def test_scanned_pdf_is_ocred_with_good_confidence():
    d = doc("scanned-pdf/image.pdf")
    assert d.ocr_used and d.parser == "pdfminer+tesseract"
    assert d.ocr_confidence > 80
    assert all(b.kind == "ocr_text" and b.page == 1 for b in d.blocks)
    assert [p["confidence"] > 80 for p in d.ocr_pages] == [True]
    assert well_read_share(d.blocks) >= 0.9  # blocks carry their own paragraph's confidence
    assert "glycoprotein" in d.text


def well_read_share(blocks) -> float:
    """Share of the OCR text in paragraphs read at confidence > 60 (the rest: specks, margins)."""
    return sum(len(b.text) for b in blocks if b.ocr_confidence > 60) / sum(len(b.text) for b in blocks)


@needs_ocr
def test_mixed_pdf_decides_per_page():
    d = doc("scanned-pdf/direct_and_image.pdf")
    page1 = [b for b in d.blocks if b.page == 1]
    page2 = [b for b in d.blocks if b.page == 2]
    assert page1 and all(b.ocr_confidence is None and b.kind != "ocr_text" for b in page1)
    assert page2 and all(b.kind == "ocr_text" for b in page2) and well_read_share(page2) >= 0.9
    assert {p["page"] for p in d.ocr_pages} == {2}
    assert d.ocr_confidence > 80


@needs_ocr
def test_invisible_junk_ocr_layer_is_replaced_by_fresh_ocr():
    d = doc("scanned-pdf/pdf-with-ocr-text.pdf")
    assert d.ocr_used
    assert "tanntxim" not in d.text  # junk from the old invisible layer
    assert "Sugar" in d.text
    assert any("invisible text layer" in w for w in d.warnings)


@needs_ocr
def test_clean_image_scan_confidence():
    d = doc("image/linn.png")  # 1-bit palette PNG
    assert d.ocr_used and d.ocr_confidence > 85
    assert "LinnSequencer" in d.text


@needs_ocr
def test_multipage_tiff_pages():
    d = doc("image/2206.01062.tif")
    assert d.page_count == 2 and {b.page for b in d.blocks} == {1, 2}
    assert "DocLayNet" in d.text


@needs_ocr
def test_chinese_ocr_has_no_spaces_between_cjk_characters():
    d = doc("image/chi_sim_image.jpeg")
    assert d.language == "zh"
    assert "适用人群" in d.text and "肌肤" in d.text
    assert not re.search(f"[{CJK_CLASS}] +[{CJK_CLASS}]", d.text), d.text


@needs_ocr
def test_textless_images_have_no_text():
    for rel in ("bad/example.jpg", "bad/empty_black.jpg"):
        result = parsed(rel)
        assert isinstance(result, UnreadableDocument) and result.reason == "no_text", rel


def test_docx_heading_path_lists_and_tables():
    d = doc("docx/docx_01.docx")
    assert d.title == "MinerU supports DOCX document parsing now"
    assert d.blocks[0].kind == "title"
    item = next(b for b in d.blocks if b.text == "1 和文本在一起的带下划线的空格")  # Word's list numbers, as LibreOffice shows them
    assert item.kind == "list_item"
    assert item.heading_path == ("1. 有序列表构成的章节标题", "1.1. 显式空白字符表示")
    texts = [b.text for b in d.blocks]
    assert "正文内插入内联SDT元素无税固定总价￥125000" in texts  # an inline content control's value
    assert "Figure 1: This is a cute mascot" in texts  # a simple field's result (SEQ Figure)
    assert "类别 2; 系列 1: 2.5; 系列 2: 4.4; 系列 3: 2" in texts  # a chart's data (ingest.charts)

    d = doc("docx/word_sample.docx")
    row = next(b for b in d.blocks if "Ash, Elm, Maple" in b.text)
    assert row.kind == "table_row"
    assert "Food: Ash, Elm, Maple" in row.text and "Calories per portion: 50" in row.text
    assert row.heading_path == ("Let’s swim!", "Let’s eat")


@needs_ocr
def test_text_inside_an_embedded_picture_is_ocrd_in_docx_and_pptx():
    """The manifest's "body text + OCR of embedded image" (.docx) and "picture containing text"
    (.pptx): the picture's words are read, as ocr_text blocks with their confidence."""
    for rel in ("docx/ocr_test.docx", "pptx/ocr_test.pptx"):
        d = doc(rel)
        assert "我是文字" in d.text and d.ocr_used, rel
        assert "横向文本框" in [b.text for b in d.blocks if b.kind == "ocr_text" and b.ocr_confidence], rel


def test_docx_vertical_merge_repeats_group_value():
    d = doc("docx/word_example.docx")
    rows = [b.text for b in d.blocks if b.kind == "table_row"]
    assert "班级: 一班; 姓名: 李四; 英语: Ｂ; 语文: Ｃ" in rows


def test_docx_formatted_heading_without_heading_style():
    d = doc("docx/handbook-1p.docx")
    assert [b.text for b in d.blocks if b.kind == "heading"][:2] == ["CHAPTER 1", "INTRODUCTION"]


def test_pptx_slides_titles_tables_notes():
    d = doc("pptx/powerpoint_sample.pptx")
    assert d.page_count == 3
    notes = [b for b in d.blocks if b.kind == "notes"]
    assert [(b.page, b.text) for b in notes][0] == (2, "Some notes on the second slide.")
    assert notes[0].heading_path == ("Second slide title",)
    assert any(b.kind == "table_row" and b.page == 1 for b in d.blocks)
    d = doc("pptx/fake-power-point-malformed.pptx")
    assert d.title == "Test Slide"


def test_xlsx_sheet_names_pages_and_merged_cells():
    d = doc("xlsx/excel_with_image.xlsx")
    assert {(b.sheet, b.page) for b in d.blocks} == {("Sheet1", 1), ("Sheet2", 2)}
    assert all(b.heading_path == (b.sheet,) for b in d.blocks)
    rows = [b.text for b in d.blocks]
    assert "班级: 一班; 姓名: 李四; 英语: Ｂ; 语文: Ｃ" in rows  # merged 班级 filled down
    assert "姓名: 张飞; 分数: 80; 备注: 鲁莽; 老师: 诸葛亮" in rows

    d = doc("xlsx/2023-half-year-analyses-by-segment.xlsx")
    assert d.page_count == 5
    assert "OS-Rev.and results 30 06 2023" in {b.sheet for b in d.blocks}


def test_xlsx_tables_stacked_in_one_sheet_keep_their_own_headers():
    """xlsx_01's Sheet2 holds a second table four blank rows under the first, in other columns;
    it was folded under the first table's labels ("col-3: col-1")."""
    rows = [b.text for b in doc("xlsx/xlsx_01.xlsx").blocks if b.sheet == "Sheet2"]
    assert rows[-4:] == ["col-1: 1; col-2: 2; col-3: 3", "col-1: 2; col-2: 4; col-3: 6",
                         "col-1: 3; col-2: 6; col-3: 9", "col-1: 4; col-2: 8; col-3: 12"]
    assert not any(r.startswith("col-3: col-1") for r in rows)


def test_xlsx_header_blank_row_then_data_and_a_second_year_below():
    """Nestlé's segment sheet: title, header, blank row, data; then the 2022 table under it.
    Each data row carries the header; the second table's title is kept as text."""
    blocks = [b for b in doc("xlsx/2023-half-year-analyses-by-segment.xlsx").blocks if b.sheet == "OS-Rev.and results 30 06 2023"]
    texts = [b.text for b in blocks]
    zone_na = [t for t in texts if t.startswith("Zone NA;")]
    assert [t.split("; ")[1] for t in zone_na] == ["Sales (a): 12553", "Sales (a): 12138"]  # 2023, then 2022
    second = texts.index("In millions of CHF January–June 2022")
    assert blocks[second].kind == "paragraph" and texts.index(zone_na[1]) > second
    assert any(b.kind == "paragraph" and b.text.startswith("(a) Inter-segment sales") for b in blocks)


def test_csv_utf16_and_title_row():
    d = doc("csv/stanley-cups-utf-16.csv")
    assert [b.text for b in d.blocks] == [
        "Stanley Cups",
        "Team: Blues; Location: STL; Stanley Cups: 1",
        "Team: Flyers; Location: PHI; Stanley Cups: 2",
        "Team: Maple Leafs; Location: TOR; Stanley Cups: 13",
    ]
    assert any("utf-16" in w for w in d.warnings)


def test_csv_quoted_cells_one_block_per_record():
    d = doc("csv/langchain-ChatGLM_open.csv")
    with open(CORPUS / "csv/langchain-ChatGLM_open.csv", encoding="utf-8", newline="") as fh:
        records = list(csv.reader(fh))
    assert sum(b.kind == "table_row" for b in d.blocks) == len(records) - 1
    assert d.blocks[0].text.startswith("0; title: 效果如何优化; file: 2023-04-04.00")


def test_html_cp1252_is_decoded():
    d = doc("html/fake-html-cp1252.html")
    assert "Die schöne Frau" in d.text and "15,50 €" in d.text and "El niño" in d.text
    assert "\ufffd" not in d.text
    assert d.title == "My First Heading"


def test_html_boilerplate_and_heading_path():
    d = doc("html/gmw.html")
    assert d.title == "宇航员在太空中喝酒会怎么样？后果很严重"
    assert "光明培训" not in d.text  # channel navigation
    assert any(b.heading_path == ("宇航员在太空中喝酒会怎么样？后果很严重",) for b in d.blocks)
    d = doc("html/wiki_duck.html")
    assert "Jump to content" not in d.text
    assert any(b.heading_path == ("Duck", "Behaviour", "Feeding") for b in d.blocks)
    assert "Kingdom: Animalia" in [b.text for b in d.blocks]


def test_markdown_structure():
    d = doc("md/wiki.md")
    assert d.title == "IBM"
    assert any(b.heading_path == ("IBM", "1910s–1950s") and b.kind == "paragraph" for b in d.blocks)
    assert "**" not in d.text and "](" not in d.text
    d = doc("md/分布式训练技术原理.md")
    assert d.language == "zh" and any(b.kind == "list_item" for b in d.blocks)


def test_txt_encodings_and_mojibake():
    d = doc("txt/fake-text-utf-16.txt")
    assert d.blocks[0].text == "This is a test document to use for unit tests."
    d = doc("txt/norwich-city.txt")
    assert "1986–1990 Watford" in d.text  # UTF-8 that had been decoded as latin-1 once
    assert "\u00e2\u0080" not in d.text


# --- the project's own sample corpus (data/sample) --------------------------------------

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


@pytest.mark.skipif(not (SAMPLE / "products").is_dir(), reason="data/sample not present")
def test_pdf_ruled_tables_are_folded_rows_and_running_footers_dropped():
    d = parse_file(SAMPLE / "products" / "x2000_datasheet.pdf")
    rows = [b.text for b in d.blocks if b.kind == "table_row"]
    assert "Parameter: Rated payload; Value: 20 kg" in rows
    assert any(r.startswith("Code: E-45; Meaning: Safety lidar sensor blocked or dirty; What to do:") for r in rows)
    assert next(b for b in d.blocks if "Rated payload" in b.text).page == 1
    assert "page 1 of 2" not in d.text  # running footer
    # A paragraph set with wide line spacing is one block, not one block per line.
    assert any(b.text.startswith("The X-2000 is a six-axis") and "work zone" in b.text for b in d.blocks)

    d = parse_file(SAMPLE / "products" / "产品手册_R500.pdf")
    assert "代码: E-71; 含义: 滚刷缠绕或卡死; 处理方法: 关机后取下滚刷，清除缠绕的毛发和线头后重新装回。" in [b.text for b in d.blocks]
    assert d.title == "北风 R-500 商用清洁机器人 产品手册"


def expected_bad_reasons(expectation: str) -> set[str | None]:
    """Allowed outcomes of a bad/ file from the manifest's free text; None = indexed."""
    e = expectation.lower()
    if "(encrypted)" in e:
        return {"encrypted"}
    if "(corrupt)" in e:
        return {"corrupt"}
    if "reject or lenient parse" in e:
        return {"corrupt", None}
    if "lenient parse" in e:  # "lenient parse or reject row": a row may go, the file stays
        return {None}
    if "empty" in e or "no content" in e or "no text" in e:
        return {"no_text"}
    raise AssertionError(f"manifest expectation not understood: {expectation!r}")


@pytest.mark.slow
def test_every_corpus_file_is_indexed_or_quarantined_with_its_reason(shared_corpus, shared_corpus_run):
    manifest = shared_corpus / "manifest.tsv"
    if not manifest.is_file():
        pytest.skip(f"no manifest.tsv in {shared_corpus}")
    with open(manifest, encoding="utf-8", newline="") as fh:
        rows = {r["file"]: r for r in csv.DictReader(fh, delimiter="\t")}
    raw, lake, report = shared_corpus_run["raw"], shared_corpus_run["lake"], shared_corpus_run["report"]
    files = {p.relative_to(raw).as_posix() for p in raw.rglob("*") if p.is_file()}
    assert files == set(rows)

    assert report["success"], report
    assert all(report["checks"].values()), report["checks"]
    con = connect(lake, admin=True)
    indexed = {s for (s,) in con.sql("SELECT source FROM documents").fetchall()}
    quarantined = {s: r for s, r in con.sql("SELECT source, reason FROM quarantine").fetchall()}
    assert not indexed & set(quarantined)
    assert indexed | set(quarantined) == files  # nothing lost
    assert report["parsed_documents"]["documents"] + report["quarantine"]["quarantined"] == len(files)

    for rel in sorted(f for f in files if f.startswith("bad/")):
        allowed = expected_bad_reasons(rows[rel]["expectation"])
        assert quarantined.get(rel) in allowed, (rel, quarantined.get(rel), rows[rel]["expectation"])
    # Outside bad/ nothing is unreadable; only scans may be judged (low confidence, no text).
    for rel, reason in quarantined.items():
        if not rel.startswith("bad/"):
            assert reason in {"ocr_low_confidence", "no_text"}, (rel, reason)
            assert rel.startswith(("image/", "scanned-pdf/")), (rel, reason)

    by_reason = report["quarantine"]["by_reason"]
    assert sum(by_reason.values()) == len(quarantined)
    assert by_reason == {r: list(quarantined.values()).count(r) for r in set(quarantined.values())}
    assert {"encrypted", "corrupt", "no_text"} <= set(by_reason)
    print(f"\nquarantine by reason: {dict(sorted(by_reason.items()))}; indexed {len(indexed)} of {len(files)}")
    print("quarantined: " + ", ".join(f"{s} ({r})" for s, r in sorted(quarantined.items())))
