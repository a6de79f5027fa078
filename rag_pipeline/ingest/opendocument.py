"""OpenDocument (.odt text, .ods spreadsheet, .odp presentation; LibreOffice, WPS, Google
Docs exports) read from the package's ``content.xml`` with lxml.

One walker for the three: ``text:h`` is a heading at its outline level, ``text:p`` and list
items are paragraphs, ``table:table`` is a table folded with its header (in a spreadsheet a
sheet, stacked tables each with their own header, as for .xlsx), a ``draw:page`` is a slide
whose title frame starts its heading path and whose speaker notes are ``notes`` blocks.
Annotations (review comments) and the note citations are not the author's text and are dropped.
"""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from pathlib import Path

from lxml import etree

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.pictures import PictureReader
from rag_pipeline.ingest.sheets import cell_text

_NS = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "manifest": "urn:oasis:names:tc:opendocument:xmlns:manifest:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
    "chart": "urn:oasis:names:tc:opendocument:xmlns:chart:1.0",
}
_FORMATS = {".odt": "odt", ".ods": "ods", ".odp": "odp"}
_HREF = "{http://www.w3.org/1999/xlink}href"
# Spreadsheets pad rows and columns with "repeated" empty cells (1,048,576 rows, 16,384
# columns); only repeats of a cell that holds text are expanded, and at most this many times.
MAX_REPEAT = 1000


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{_NS[prefix]}}}{local}"


_SKIP = {_q("office:annotation"), _q("office:annotation-end"), _q("text:note-citation"), _q("text:tracked-changes")}
# Generated from the text itself (tables of contents, indexes): the text is read where it stands.
_GENERATED = {_q(f"text:{name}") for name in ("table-of-content", "alphabetical-index", "illustration-index",
                                              "table-index", "object-index", "user-index", "bibliography")}
_DRAW = f"{{{_NS['draw']}}}"
_BREAKS = {_q("text:line-break"): "\n", _q("text:tab"): "\t"}
_PARAGRAPHS = {_q("text:p"), _q("text:h")}


def inline_text(el: etree._Element) -> str:
    """The text of a paragraph as a reader sees it: ``text:s`` spaces, tabs and line breaks
    restored, spans and links read through, comments and anchored frames (pictures, text
    boxes: :class:`_Walker` reads their text as blocks of their own) left out."""
    parts = [el.text or ""]
    for child in el:
        if child.tag in _SKIP or child.tag.startswith(_DRAW):  # a frame's caption is its own block
            pass
        elif child.tag == _q("text:s"):
            parts.append(" " * int(child.get(_q("text:c"), "1")))
        elif child.tag in _BREAKS:
            parts.append(_BREAKS[child.tag])
        elif child.tag == _q("text:note"):  # a footnote's body, in brackets where it is cited
            body = child.find(_q("text:note-body"))
            note = " ".join(inline_text(p) for p in body.iter(*_PARAGRAPHS)) if body is not None else ""
            parts.append(f" ({note.strip()})" if note.strip() else "")
        else:
            parts.append(inline_text(child))
        parts.append(child.tail or "")
    return "".join(parts)


def _repeat(el: etree._Element, attr: str, has_text: bool) -> int:
    return min(int(el.get(_q(attr), "1")), MAX_REPEAT) if has_text else 1


def cell_value(cell: etree._Element) -> str:
    """A cell's value as the .xlsx reader renders the same cell (``sheets.cell_text``): a number
    by its value (168000, not the displayed "168,000" or "¥168,000.00"), a percentage as one
    ("25%"), a date in ISO form; text as written."""
    kind = cell.get(_q("office:value-type"))
    try:
        if kind == "percentage":  # shown as a percentage (0.25 -> "25%"), with the decimals displayed
            shown = "".join(inline_text(p) for p in cell.iter(*_PARAGRAPHS)).strip()
            decimals = re.search(r"[.,](\d+)\s*%$", shown)
            places = len(decimals.group(1)) if decimals else 0
            return cell_text(float(cell.get(_q("office:value"))), (places, places))
        if kind in ("float", "currency"):
            return cell_text(float(cell.get(_q("office:value"))))
        if kind == "date":
            value = dt.datetime.fromisoformat(cell.get(_q("office:date-value")))
            return cell_text(value)
        if kind == "boolean":
            return cell_text(cell.get(_q("office:boolean-value")) == "true")
    except (TypeError, ValueError):  # a value attribute missing or malformed: the displayed text
        pass
    return "\n".join(inline_text(p) for p in cell.iter(*_PARAGRAPHS)).strip()


def table_rows(table: etree._Element) -> list[list[str]]:
    """A table's rows of cell texts; repeated rows and cells expanded (empty ones once),
    header rows and row groups read in order, trailing empty cells and rows trimmed. A cell
    merged down over the rows below fills them (a group label repeated in each row it covers,
    as for .docx and .xlsx); one merged across leaves the columns it covers empty."""
    rows: list[list[str]] = []
    merged_down: dict[int, tuple[str, int]] = {}  # column -> (text, rows still covered)
    for row in table.iter(_q("table:table-row")):
        if row.getparent() is not None and _ancestor_table(row) is not table:
            continue  # a row of a table nested in a cell: read as that cell's text
        cells: list[str] = []
        for cell in row:
            if cell.tag not in (_q("table:table-cell"), _q("table:covered-table-cell")):
                continue
            column = len(cells)
            if cell.tag == _q("table:covered-table-cell") and column in merged_down:
                text, left = merged_down.pop(column)
                if left > 1:
                    merged_down[column] = (text, left - 1)
            else:
                text = cell_value(cell)
                spanned = int(cell.get(_q("table:number-rows-spanned")) or 1)
                if spanned > 1 and text:
                    merged_down[column] = (text, spanned - 1)
            cells.extend([text] * _repeat(cell, "table:number-columns-repeated", bool(text)))
        while cells and not cells[-1]:
            cells.pop()
        rows.extend([cells] * _repeat(row, "table:number-rows-repeated", bool(cells)))
    while rows and not rows[-1]:
        rows.pop()
    return rows


def _ancestor_table(el: etree._Element) -> etree._Element | None:
    parent = el.getparent()
    while parent is not None and parent.tag != _q("table:table"):
        parent = parent.getparent()
    return parent


_PARSER = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)


class _Walker:
    def __init__(self, builder: BlockBuilder, package: zipfile.ZipFile, pictures: PictureReader) -> None:
        self.builder, self.package, self.pictures = builder, package, pictures

    def walk(self, el: etree._Element, *, page: int | None = None, kind: str = "paragraph") -> None:
        for child in el:
            tag = child.tag
            if tag in _SKIP or tag in _GENERATED or tag == _q("text:sequence-decls"):
                continue
            if tag == _q("text:h"):
                level = int(child.get(_q("text:outline-level")) or 1)
                self.builder.heading(inline_text(child), level, page=page)
                self._frames(child, page)
            elif tag == _q("text:p"):
                self.builder.add(inline_text(child), kind, page=page)
                self._frames(child, page)
            elif tag == _q("text:list-item"):
                self.walk(child, page=page, kind="list_item" if kind == "paragraph" else kind)
            elif tag == _q("table:table"):
                self.builder.add_table(table_rows(child), page=page)
            elif tag == _q("presentation:notes"):
                self.walk(child, page=page, kind="notes")
            elif tag == _q("draw:image"):
                self.picture(child, page)
            elif tag == _q("draw:object"):
                self.embedded(child, page)
            else:  # sections, lists, frames and text boxes, groups: containers
                self.walk(child, page=page, kind=kind)

    def picture(self, image: etree._Element, page: int | None, sheet: str | None = None) -> None:
        """A picture's text (a pasted scan, a screenshot; ingest.pictures), where its frame is."""
        try:
            blob = self.package.read((image.get(_HREF) or "").removeprefix("./"))  # "./Pictures/…": the package's own
        except (KeyError, ValueError, zipfile.BadZipFile):  # linked from outside, or a damaged member
            return
        self.pictures.add_text(self.builder, blob, page=page, sheet=sheet)

    def embedded(self, obj: etree._Element, page: int | None) -> None:
        """An object embedded in the package ("./Object 1"): a chart as its title and data rows (its
        local table: one row a category, as the .pptx/.docx chart reader gives them), a spreadsheet
        as its tables, a text as its text; a formula or drawing object is not read."""
        try:
            xml = self.package.read(f"{(obj.get(_HREF) or '').removeprefix('./').rstrip('/')}/content.xml")
            body = etree.fromstring(xml, parser=_PARSER).find("office:body", _NS)
        except (KeyError, ValueError, zipfile.BadZipFile, etree.XMLSyntaxError):  # linked, or damaged
            return
        if body is None:
            return
        for chart in body.iterfind("office:chart/chart:chart", _NS):
            self.builder.add(" ".join(inline_text(p) for p in chart.iterfind("chart:title/text:p", _NS)), page=page)
            rows = [table_rows(t) for t in chart.iterfind(".//table:table", _NS)]
            if rows and len(rows[0]) > 1:
                axis = chart.find(".//chart:axis[@chart:dimension='x']/chart:title/text:p", _NS)
                header = [inline_text(axis) if axis is not None else "", *rows[0][0][1:]]
                self.builder.add_table(rows[0][1:], header=header, page=page)
        for table in body.iterfind("office:spreadsheet/table:table", _NS):
            self.builder.add_sheet(table_rows(table), page=page)
        for text in body.iterfind("office:text", _NS):
            self.walk(text, page=page)

    def _frames(self, paragraph: etree._Element, page: int | None) -> None:
        """Text boxes and captions anchored in a paragraph, after it."""
        for frame in paragraph.iterchildren():
            if frame.tag.startswith(_DRAW):
                self.walk(frame, page=page)
            elif frame.tag not in _SKIP:
                self._frames(frame, page)  # a frame anchored inside a span or link


def _check_not_encrypted(package: zipfile.ZipFile) -> None:
    try:
        manifest = package.read("META-INF/manifest.xml")
    except KeyError:
        return
    if b"encryption-data" in manifest:
        raise UnreadableDocument("encrypted", "password-protected OpenDocument file (manifest lists encrypted parts)")


def _title(package: zipfile.ZipFile) -> str | None:
    try:
        meta = etree.fromstring(package.read("meta.xml"))
    except (KeyError, etree.XMLSyntaxError):
        return None
    title = meta.find(".//dc:title", _NS)
    return (title.text or "").strip() or None if title is not None else None


def parse_opendocument(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse an .odt, .ods or .odp package: text documents by headings, paragraphs, lists and
    tables; spreadsheets sheet by sheet (``page`` = the sheet's position, ``sheet`` = its
    name); presentations slide by slide (``page`` = the slide, its title frame the heading).
    Pictures in text and on slides are OCR'd where their frame is, on a sheet after its rows
    (ingest.pictures)."""
    fmt = _FORMATS[path.suffix.lower()]
    with zipfile.ZipFile(path) as package:
        _check_not_encrypted(package)
        try:
            content = package.read("content.xml")
        except KeyError as exc:
            raise UnreadableDocument("corrupt", "the package has no content.xml: not an OpenDocument file") from exc
        title = _title(package)
        root = etree.fromstring(content, parser=_PARSER)
        body = root.find("office:body", _NS)
        if body is None:
            raise UnreadableDocument("corrupt", "content.xml has no office:body")
        builder = BlockBuilder()
        pictures = PictureReader(ocr_lang)
        walker = _Walker(builder, package, pictures)
        sheets = body.findall("office:spreadsheet/table:table", _NS)
        slides = body.findall("office:presentation/draw:page", _NS)
        for index, sheet in enumerate(sheets, start=1):
            name = sheet.get(_q("table:name")) or f"Sheet{index}"
            builder.reset_headings([name])
            builder.add_sheet(table_rows(sheet), page=index, sheet=name)
            for image in sheet.iter(_q("draw:image")):  # a screenshot on the sheet: its text after the rows
                walker.picture(image, index, name)
        for index, slide in enumerate(slides, start=1):
            builder.reset_headings()
            for frame in list(slide.iterfind(".//draw:frame[@presentation:class='title']", _NS)):
                builder.heading(" ".join(inline_text(p) for p in frame.iter(*_PARAGRAPHS)), 1, page=index)
                frame.getparent().remove(frame)
            walker.walk(slide, page=index)
        for text in body.findall("office:text", _NS):
            walker.walk(text)
    pages = len(sheets) or len(slides) or None
    return make_document(builder, format=fmt, parser="lxml", page_count=pages, title=title, **pictures.metadata())
