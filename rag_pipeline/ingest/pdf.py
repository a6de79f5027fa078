"""PDF: text layer via pdfminer.six layout analysis, ruled tables via pdfplumber, OCR for
pages without a usable layer.

pdfminer.six (the engine under pdfplumber) is used directly for the text because its
layout analysis groups characters into text boxes per column, so two-column papers read
column by column instead of line-interleaved, and its text state tells invisible text
(an old OCR layer over a scan) from visible text. pdfplumber is only asked for tables,
and only on pages that draw enough ruling lines to hold one.
"""

from __future__ import annotations

import logging
import os
import re
import statistics
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pdfplumber
from PIL import Image
from pdfminer.converter import PDFPageAggregator
from pdfminer.layout import (
    LAParams,
    LTChar,
    LTComponent,
    LTCurve,
    LTFigure,
    LTImage,
    LTLine,
    LTPage,
    LTRect,
    LTTextBox,
    LTTextLine,
)
from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError, PDFPasswordIncorrect
from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
from pdfminer.pdfpage import PDFPage
from pdfminer.pdfparser import PDFParser
from pdfminer.utils import decode_text

from rag_pipeline.ingest import heartbeat
from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, TextBlock, UnreadableDocument
from rag_pipeline.ingest.image import ocr_frames
from rag_pipeline.ingest.ocr import OcrEngineError, OcrTimeout
from rag_pipeline.ingest.pdf_fields import page_field_lines
from rag_pipeline.ingest.textutil import has_words, join_lines, squash

# pdfminer logs a warning per malformed font descriptor; in a corpus that is noise.
logging.getLogger("pdfminer").setLevel(logging.ERROR)

# Pages are rendered at the native resolution of their scan, clamped to this range:
# upsampling a 72-150 dpi scan to 300 dpi blurs it and made tesseract both slower (x3)
# and less confident (79 vs 91 on scanned-pdf/image.pdf); pages without images get the max.
MIN_OCR_DPI = 150
MAX_OCR_DPI = 300
MAX_RENDER_SIDE_PX = 6000  # caps the DPI for oversized pages (posters, drawings)
RENDER_TIMEOUT_S = 120
MIN_TEXT_CHARS = 20  # fewer non-space characters than this = no usable text layer
MIN_RULES_FOR_TABLES = 4  # ruling lines/rectangles on a page before looking for tables
# A gap wider than this share of the font size between two glyphs of a table cell is a word
# break. pdfplumber's default (a fixed 3 pt) glued TeX-set cells into "GeForceGTX680": TeX
# draws no space glyph, it moves the next word ~0.2-0.33 em along.
TABLE_WORD_GAP = 0.15
# Pages of one PDF OCR'd at once. Tesseract runs single-threaded per page (see ocr.py), so
# this is the CPU parallelism of a scanned PDF; lower it if documents are parsed in parallel.
OCR_WORKERS = max(1, min(4, os.cpu_count() or 1))
_CID = re.compile(r"\(cid:\d+\)")
_PAGE_NUMBER = re.compile(
    r"^(page\s*)?[-–—\s]*\d{1,4}[-–—\s]*((/|of)\s*\d{1,4})?$|^第\s*\d+\s*页(\s*[/，,]?\s*共\s*\d+\s*页)?$", re.I
)
_SENTENCE_END = tuple(".!?:。！？：;；")
_BULLET = re.compile(r"^\s*([-•·▪●◦‣*]\s|\(?\d{1,2}[.)、]\s?|\(?[a-z][.)]\s|[一二三四五六七八九十]+、)")
_BAD_META_TITLE = re.compile(r"^(untitled|microsoft (word|powerpoint|excel)\b.*|.*\.(docx?|pdf|pptx?|xlsx?|tex|dvi))$", re.I)


@dataclass
class _Box:
    """A text box (or several merged ones) with the geometry needed to join and split it."""

    lines: list[LTTextLine]
    size: float
    upright: bool
    x0: float
    x1: float
    top: float  # distance from the top of the page
    bottom: float


@dataclass
class _PageFacts:
    boxes: list[_Box] = field(default_factory=list)
    text_chars: int = 0
    junk_chars: int = 0  # (cid:N) glyphs and U+FFFD: text that did not map to Unicode
    image_cover: float = 0.0  # share of the page area covered by raster images
    has_images: bool = False
    native_dpi: float = 0.0  # pixel density of the largest raster image on the page
    curves: int = 0
    rules: int = 0  # straight lines and rectangles (table borders)


class _CountingAggregator(PDFPageAggregator):
    """Layout aggregator that also counts glyphs drawn invisibly (text render mode 3)."""

    def begin_page(self, page, ctm):  # type: ignore[no-untyped-def]
        self.invisible = 0
        self.visible = 0
        super().begin_page(page, ctm)

    def render_string(self, textstate, seq, ncs, graphicstate):  # type: ignore[no-untyped-def]
        n = sum(len(x) for x in seq if isinstance(x, bytes))
        if textstate.render == 3:
            self.invisible += n
        else:
            self.visible += n
        super().render_string(textstate, seq, ncs, graphicstate)


def _make_box(box: LTTextBox, page_top: float) -> _Box | None:
    lines = [ln for ln in box if isinstance(ln, LTTextLine) and ln.get_text().strip()]
    chars = [c for ln in lines for c in ln if isinstance(c, LTChar)]
    if not lines or not chars:
        return None
    upright = sum(1 for c in chars if c.upright and abs(c.matrix[1]) < 1e-3) * 2 >= len(chars)
    size = statistics.median(c.size for c in chars)
    return _Box(lines, size, upright, box.x0, box.x1, page_top - box.y1, page_top - box.y0)


def _continues(a: _Box, b: _Box) -> bool:
    """Is box ``b`` the next lines of ``a``'s paragraph?

    pdfminer starts a new box whenever the line gap exceeds half a line, which splits
    every paragraph set with 1.5 line spacing (common in Word exports) into one box per
    line. ``b`` continues ``a`` when it starts right below at the same left edge in the
    same font size and ``a``'s last line runs to the right edge (it wrapped).
    """
    if a.upright != b.upright or abs(a.size - b.size) > 0.1 * max(a.size, b.size):
        return False
    gap = b.top - a.bottom
    if gap < -0.3 * a.size or gap > 1.2 * a.size or abs(a.x0 - b.x0) > 0.6 * a.size:
        return False
    if _BULLET.match(b.lines[0].get_text()):
        return False
    return a.lines[-1].x1 >= max(a.x1, b.x1) - 2.5 * a.size


def _merge_boxes(boxes: list[_Box]) -> list[_Box]:
    merged: list[_Box] = []
    for box in boxes:
        if merged and _continues(merged[-1], box):
            prev = merged[-1]
            merged[-1] = _Box(prev.lines + box.lines, prev.size, prev.upright, min(prev.x0, box.x0),
                              max(prev.x1, box.x1), prev.top, box.bottom)
        else:
            merged.append(box)
    return merged


def _line_size(line: LTTextLine) -> float:
    sizes = [c.size for c in line if isinstance(c, LTChar)]
    return statistics.median(sizes) if sizes else 0.0


def _box_paragraphs(box: _Box) -> list[str]:
    """Split a box into paragraphs.

    pdfminer merges evenly spaced paragraphs into one box. A paragraph ends after a line
    that stops well short of the box's right edge and ends a sentence, before a line that
    starts with a list bullet, and where the font size changes (a title over a subtitle);
    never inside one visual row, which pdfminer sometimes splits into two lines.
    """
    paras: list[str] = []
    current: list[str] = []
    width = box.x1 - box.x0
    sizes = [_line_size(line) for line in box.lines]
    for i, line in enumerate(box.lines):
        text = line.get_text().strip()
        current.append(text)
        nxt = box.lines[i + 1] if i + 1 < len(box.lines) else None
        if nxt is None or abs(nxt.y0 - line.y0) < 0.5 * max(line.height, 1.0):
            continue
        short = line.x1 < box.x1 - 0.15 * width
        resized = abs(sizes[i] - sizes[i + 1]) > 0.15 * max(sizes[i], sizes[i + 1], 1.0)
        if (short and text.endswith(_SENTENCE_END)) or resized or _BULLET.match(nxt.get_text()):
            paras.append(join_lines("\n".join(current)))
            current = []
    if current:
        paras.append(join_lines("\n".join(current)))
    return [p for p in paras if p]


def _collect(item: LTComponent, page_top: float, page_area: float, facts: _PageFacts) -> None:
    if isinstance(item, LTTextBox):
        box = _make_box(item, page_top)
        if box is not None:
            facts.boxes.append(box)
    elif isinstance(item, LTImage):
        facts.has_images = True
        if page_area > 0:
            share = max(0.0, item.width) * max(0.0, item.height) / page_area
            facts.image_cover += share
            srcsize = getattr(item, "srcsize", None) or (0, 0)
            if share >= 0.01 and item.width > 0 and isinstance(srcsize[0], (int, float)):
                facts.native_dpi = max(facts.native_dpi, srcsize[0] / (item.width / 72))
    elif isinstance(item, LTCurve):
        facts.curves += 1
        if isinstance(item, (LTLine, LTRect)):
            facts.rules += 1
    if isinstance(item, (LTFigure, LTPage)):
        for child in item:
            _collect(child, page_top, page_area, facts)


@dataclass
class _Table:
    top: float
    bottom: float
    x0: float
    x1: float
    rows: list[list[str]]

    def holds(self, box: _Box) -> bool:
        cx, cy = (box.x0 + box.x1) / 2, (box.top + box.bottom) / 2
        return self.x0 - 2 <= cx <= self.x1 + 2 and self.top - 2 <= cy <= self.bottom + 2


def _find_tables(plumber_page) -> list[_Table]:  # type: ignore[no-untyped-def]
    """Ruled tables on one page (pdfplumber's line strategy), minus decorative frames."""
    tables = []
    for found in plumber_page.find_tables():
        rows = [[join_lines(c) if c else "" for c in row] for row in found.extract(x_tolerance_ratio=TABLE_WORD_GAP)]
        cells = [c for row in rows for c in row]
        filled = [c for c in cells if c]
        if len(rows) < 2 or max(len(r) for r in rows) < 2 or len(filled) < 3 or len(filled) < 0.3 * len(cells):
            continue
        x0, top, x1, bottom = found.bbox
        tables.append(_Table(top, bottom, x0, x1, rows))
    return tables


def _render_page(path: Path, page_no: int, width_pt: float, height_pt: float, native_dpi: float) -> Image.Image:
    """Rasterise one page with poppler's pdftoppm (robust with damaged files)."""
    dpi = int(min(MAX_OCR_DPI, max(MIN_OCR_DPI, native_dpi))) if native_dpi else MAX_OCR_DPI
    long_side_pt = max(width_pt, height_pt, 1.0)
    if long_side_pt / 72 * dpi > MAX_RENDER_SIDE_PX:
        dpi = max(72, int(MAX_RENDER_SIDE_PX * 72 / long_side_pt))
    with tempfile.TemporaryDirectory(prefix="pdfocr-") as tmp:
        prefix = Path(tmp) / "page"
        cmd = ["pdftoppm", "-r", str(dpi), "-f", str(page_no), "-l", str(page_no), "-png", "-singlefile", str(path), str(prefix)]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=RENDER_TIMEOUT_S, check=False)
        except FileNotFoundError as exc:
            raise OcrEngineError("pdftoppm (poppler-utils) not found") from exc
        except subprocess.TimeoutExpired as exc:
            raise OcrTimeout(f"pdftoppm exceeded {RENDER_TIMEOUT_S}s") from exc
        out = prefix.with_suffix(".png")
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"pdftoppm exit {proc.returncode}: {proc.stderr.decode(errors='replace').strip()[:200]}")
        with Image.open(out) as img:
            img.load()
            return img.copy()


def _ocr_reason(facts: _PageFacts, invisible: int, visible: int) -> str | None:
    """Why a page needs OCR, or None if its text layer is usable."""
    usable = facts.text_chars - facts.junk_chars
    if usable < MIN_TEXT_CHARS:
        if facts.has_images or facts.curves > 200:
            return "no text layer"
        return None  # a blank page (or one with a few vector shapes): nothing to read
    if facts.junk_chars > 0.3 * facts.text_chars:
        return "text layer has unmapped glyphs"
    if invisible > 4 * max(visible, 1) and facts.image_cover >= 0.5:
        return "invisible text layer over a scanned image (unknown-quality OCR)"
    return None


def _meta_title(doc: PDFDocument) -> str | None:
    for info in doc.info or []:
        raw = info.get("Title")
        if raw is None:
            continue
        try:
            raw = raw.resolve() if hasattr(raw, "resolve") else raw
            title = squash(decode_text(raw) if isinstance(raw, bytes) else str(raw))
        except Exception:
            continue
        if title and not _BAD_META_TITLE.match(title):
            return title
    return None


def _open(fp) -> PDFDocument:  # type: ignore[no-untyped-def]
    try:
        return PDFDocument(PDFParser(fp), password="")
    except PDFPasswordIncorrect as exc:
        raise UnreadableDocument("encrypted", "PDF requires a user password") from exc
    except PDFEncryptionError as exc:
        raise UnreadableDocument("encrypted", f"unsupported PDF encryption: {exc}") from exc


def _page_text(facts: _PageFacts, tables: list[_Table]) -> list[tuple[str, object]]:
    """Paragraphs and tables in reading order, keeping only the dominant text orientation.

    Text rotated against the rest of the page (arXiv side stamps, rotated figure labels)
    comes out one glyph per line and is noise; a page rotated as a whole keeps all its
    text. Boxes inside a table are replaced by the table, placed where its first box was.
    """
    upright = sum(len(ln.get_text()) for b in facts.boxes if b.upright for ln in b.lines)
    rotated = sum(len(ln.get_text()) for b in facts.boxes if not b.upright for ln in b.lines)
    keep = upright >= rotated
    items: list[tuple[str, object]] = []
    placed: set[int] = set()
    flow: list[_Box] = []
    for box in facts.boxes:
        if box.upright != keep:
            continue
        owner = next((i for i, t in enumerate(tables) if t.holds(box)), None)
        if owner is None:
            flow.append(box)
            continue
        if owner not in placed:
            placed.add(owner)
            items.extend(("para", (p, b.size)) for b in _merge_boxes(flow) for p in _box_paragraphs(b))
            flow = []
            items.append(("table", tables[owner].rows))
    items.extend(("para", (p, b.size)) for b in _merge_boxes(flow) for p in _box_paragraphs(b))
    items.extend(("table", t.rows) for i, t in enumerate(tables) if i not in placed)
    cleaned: list[tuple[str, object]] = []
    for kind, value in items:
        if kind == "para":
            text, size = value  # type: ignore[misc]
            text = _CID.sub("", text).strip()
            if has_words(text) and not _PAGE_NUMBER.match(text):
                cleaned.append(("para", (text, size)))
        else:
            cleaned.append((kind, value))
    return cleaned


def _count_chars(facts: _PageFacts) -> None:
    for box in facts.boxes:
        for line in box.lines:
            text = line.get_text()
            facts.text_chars += sum(1 for ch in text if not ch.isspace())
            facts.junk_chars += sum(len(m) for m in _CID.findall(text)) + text.count("\ufffd")


def parse_pdf(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Extract a PDF page by page: paragraphs and ruled tables from the text layer, OCR
    where the layer is unusable.

    A page is OCR'd when it has images but almost no text, when its text is mostly
    unmapped glyphs, or when nearly all of its text is invisible over a page-sized image:
    that is a third-party OCR layer of unknown quality, re-read to get a confidence. The
    title is the largest-font short text on page 1, else the metadata title.
    """
    notes: list[str] = []
    ocr_words, ocr_conf_sum, ocr_pages = 0, 0.0, 0
    page_facts: list[dict] = []
    pages: list[tuple[int, list[tuple[str, object]]]] = []
    fields: dict[int, list[str]] = {}  # page -> its filled form values and typed-on text (pdf_fields)
    ocr_jobs: list[_OcrJob] = []
    meta_title: str | None = None
    page_count = 0
    plumber = None
    try:
        with open(path, "rb") as fp:
            doc = _open(fp)
            if doc.encryption is not None:
                notes.append("encrypted with an empty user password (opened without one)")
            rsrc = PDFResourceManager(caching=True)
            device = _CountingAggregator(rsrc, laparams=LAParams(all_texts=True))
            interpreter = PDFPageInterpreter(rsrc, device)
            for page_no, page in enumerate(PDFPage.create_pages(doc), start=1):
                page_count = page_no
                x0, y0, x1, y1 = page.mediabox
                width, height = abs(x1 - x0), abs(y1 - y0)
                facts = _PageFacts()
                tables: list[_Table] = []
                try:
                    interpreter.process_page(page)
                    layout = device.get_result()
                    _collect(layout, layout.y1, width * height, facts)
                    _count_chars(facts)
                    reason = _ocr_reason(facts, device.invisible, device.visible)
                    if reason is None and facts.rules >= MIN_RULES_FOR_TABLES:
                        try:
                            plumber = plumber or pdfplumber.open(path, password="")
                            tables = _find_tables(plumber.pages[page_no - 1])
                        except MemoryError:
                            raise
                        except Exception as exc:  # tables are a bonus; the text is still there
                            notes.append(f"page {page_no}: table detection failed ({type(exc).__name__})")
                except MemoryError:
                    raise  # the worker's memory cap: the whole file is too_large (parsers.parse_file)
                except Exception as exc:  # one broken page must not lose the others
                    reason = f"text extraction failed ({type(exc).__name__})"
                if reason is not None:
                    ocr_jobs.append(_OcrJob(len(pages), page_no, width, height, facts.native_dpi, reason))
                # The text layer stays as the fallback for pages whose OCR finds nothing.
                pages.append((page_no, _page_text(facts, tables)))
                fields[page_no] = page_field_lines(page)  # drawn apart from the content stream: an OCR of the page may miss them too
                heartbeat.beat()  # a page read: a long document is progressing, not hung (pool.py)
            meta_title = _meta_title(doc)
    finally:
        if plumber is not None:
            plumber.close()

    if ocr_jobs:
        with ThreadPoolExecutor(max_workers=max(1, min(OCR_WORKERS, len(ocr_jobs)))) as pool:
            results = list(pool.map(lambda job: _ocr_page(path, job, ocr_lang), ocr_jobs))
        for job, (blocks, words, conf_sum, page_notes, read) in zip(ocr_jobs, results):
            notes.extend(page_notes)
            if words:
                page_facts.extend(read)
                ocr_words += words
                ocr_conf_sum += conf_sum
                ocr_pages += 1
                pages[job.index] = (job.page_no, [("block", b) for b in blocks])

    _drop_running_lines(pages)
    first = next((items for no, items in pages if no == 1), [])
    title = _pick_title([v for k, v in first if k == "para"]) or meta_title  # type: ignore[misc]
    builder = BlockBuilder()
    for page_no, items in pages:
        for kind, value in items:
            if kind == "block":
                builder.blocks.append(value)  # type: ignore[arg-type]
            elif kind == "table":
                builder.add_table(value, page=page_no)  # type: ignore[arg-type]
            else:
                text = value[0]  # type: ignore[index]
                builder.add(text, "title" if page_no == 1 and text == title else "paragraph", page=page_no)
        for text in fields.get(page_no, ()):
            builder.add(text, "paragraph", page=page_no)
    if page_count == 0:
        raise UnreadableDocument("corrupt", "PDF has no pages")
    if not builder.blocks and any("timeout" in n for n in notes):
        raise UnreadableDocument("timeout", "; ".join(notes))
    return make_document(
        builder,
        format="pdf",
        parser="pdfminer+tesseract" if ocr_pages else "pdfminer",
        page_count=page_count,
        title=title,
        ocr_used=ocr_pages > 0,
        ocr_confidence=round(ocr_conf_sum / ocr_words, 1) if ocr_words else (0.0 if ocr_pages else None),
        warnings=notes,
        ocr_pages=page_facts,
    )


@dataclass(frozen=True)
class _OcrJob:
    index: int  # position in the page list
    page_no: int
    width: float
    height: float
    native_dpi: float
    reason: str


def _ocr_page(path: Path, job: _OcrJob, lang: str) -> tuple[list[TextBlock], int, float, list[str], list[dict]]:
    """Render and OCR one page; returns ``(blocks, word_count, confidence_sum, notes, pages)``.

    Runs in a worker thread: rendering and tesseract are subprocesses, so pages of one
    scanned PDF proceed in parallel.
    """
    notes: list[str] = []
    try:
        image = _render_page(path, job.page_no, job.width, job.height, job.native_dpi)
    except OcrTimeout as exc:
        return [], 0, 0.0, [f"page {job.page_no}: {job.reason}; render timeout ({exc})"], []
    except OcrEngineError:
        raise
    except Exception as exc:
        return [], 0, 0.0, [f"page {job.page_no}: {job.reason}; render failed: {exc}"], []
    notes.append(f"page {job.page_no}: OCR ({job.reason})")
    scratch = BlockBuilder()
    words, conf_sum, ocr_notes, read = ocr_frames([(job.page_no, image)], lang, scratch, upscale=False)
    return scratch.blocks, words, conf_sum, notes + ocr_notes, read


def _drop_running_lines(pages: list[tuple[int, list[tuple[str, object]]]]) -> None:
    """Remove running headers and footers ("X-2000 datasheet - page 1 of 2") in place.

    A short paragraph among the first or last two of a page whose digit-blind form recurs
    there on at least half of the text pages (and on two or more) is page furniture.
    """
    def key(text: str) -> str:
        return re.sub(r"\d+", "#", text)

    def edges(items: list[tuple[str, object]]) -> list[int]:
        paras = [i for i, (k, _) in enumerate(items) if k == "para"]
        return sorted(set(paras[:2] + paras[-2:]))

    text_pages = [items for _, items in pages if any(k == "para" for k, _ in items)]
    if len(text_pages) < 2:
        return
    seen: dict[str, int] = {}
    for items in text_pages:
        for k in {key(items[i][1][0]) for i in edges(items) if len(items[i][1][0]) <= 120}:  # type: ignore[index]
            seen[k] = seen.get(k, 0) + 1
    running = {k for k, n in seen.items() if n >= max(2, len(text_pages) / 2)}
    if not running:
        return
    for items in text_pages:
        drop = {i for i in edges(items) if key(items[i][1][0]) in running}  # type: ignore[index]
        items[:] = [item for i, item in enumerate(items) if i not in drop]


def _pick_title(paras: list[tuple[str, float]]) -> str | None:
    """The short paragraph set in the largest font on page 1, if it stands out from body text."""
    sizes = [s for _, s in paras if s > 0]
    if not sizes:
        return None
    body = statistics.median(sizes)
    text, size = max(paras, key=lambda b: b[1])
    if size >= 1.2 * body and len(text) <= 200:
        return text
    return None
