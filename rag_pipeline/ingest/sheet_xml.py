"""Excel 2003 XML ("SpreadsheetML"): one XML file, `<?mso-application progid="Excel.Sheet"?>`.

Excel's "XML Spreadsheet 2003", report tools and office-automation systems export it, often
under `.xls` (Excel opens it by its content). Read as the `.xls`/`.xlsx` readers read a workbook:
every worksheet a page named by its sheet, tables folded with their header rows, a cell merged
down repeated in each row it covers (its first column), one merged across left in its first.
Streamed row by row: exporters write a million empty rows (LibreOffice does), and runs of empty
rows are kept as one (what separates stacked tables).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

from lxml import etree

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.sheets import cell_text

_SS = "urn:schemas-microsoft-com:office:spreadsheet"
_X = "urn:schemas-microsoft-com:office:excel"
_O = "urn:schemas-microsoft-com:office:office"
_MARKER = re.compile(rb"progid=[\"']Excel\.Sheet[\"']|urn:schemas-microsoft-com:office:spreadsheet")
_NOT_SHEET_XML = "an XML file that is not an Excel 2003 XML workbook (ss:Workbook holding ss:Worksheet)"
MAX_COLUMNS = 16384  # Excel's own: an index beyond it is damage, not data
_EXCEL_TIME_DATE = dt.date(1899, 12, 31)  # a time of day is written on Excel's day 0


def looks_like_sheet_xml(head: bytes) -> bool:
    """Whether a file's first bytes are an Excel 2003 XML workbook's."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<") and bool(_MARKER.search(head))


def _ss(name: str) -> str:
    return f"{{{_SS}}}{name}"


_ROW, _CELL, _DATA, _WORKSHEET = _ss("Row"), _ss("Cell"), _ss("Data"), _ss("Worksheet")
_INDEX, _MERGE_ACROSS, _MERGE_DOWN = _ss("Index"), _ss("MergeAcross"), _ss("MergeDown")


def _number(el: etree._Element, attribute: str) -> int:
    """A 1-based index or a span; 0 when absent or not a number."""
    value = el.get(attribute)
    return int(value) if value is not None and value.isdigit() else 0


def _value(data: etree._Element | None) -> object:
    """A Data element as the Python value the other workbook readers give (see sheets.cell_text)."""
    if data is None:
        return None
    kind, text = data.get(_ss("Type")), "".join(data.itertext())  # rich text: html:Font runs
    try:
        if kind == "Number":
            return float(text)
        if kind == "DateTime":
            moment = dt.datetime.fromisoformat(text[:19])
            return moment.time() if moment.date() == _EXCEL_TIME_DATE else moment
    except ValueError:
        return text
    if kind == "Boolean":
        return text.strip() == "1"
    return text


@dataclass
class _Merge:
    """A cell merged down: rows first_row+1..last_row are covered in columns first..last."""

    last_row: int
    first: int
    last: int
    value: object


def _next_free(merges: list[_Merge], column: int) -> int:
    """The first column from `column` on that no merge from above covers (where a cell
    written without an index goes: exporters leave the covered cells out)."""
    while column <= MAX_COLUMNS and (merge := next((m for m in merges if m.first <= column <= m.last), None)):
        column = merge.last + 1
    return column


class _Sheet:
    """One worksheet's rows as they stream past."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []
        self.row = 0
        self.merges: list[_Merge] = []

    def add(self, row_el: etree._Element) -> None:
        index = _number(row_el, _INDEX)
        if index > self.row + 1:
            self._append([])  # the rows it skips are empty
        self.row = max(self.row + 1, index)
        above = [m for m in self.merges if m.last_row >= self.row]  # merges from above covering this row
        self.merges = list(above)
        if not above and not any(len(cell) for cell in row_el):  # the common empty row, quickly
            self._append([])
            return
        values: dict[int, object] = {}
        column = 0
        for cell in row_el.iterfind(_CELL):
            column = _number(cell, _INDEX) or _next_free(above, column + 1)
            if column > MAX_COLUMNS:
                break
            values[column] = _value(cell.find(_DATA))
            across, down = _number(cell, _MERGE_ACROSS), _number(cell, _MERGE_DOWN)
            if down:
                self.merges.append(_Merge(self.row + down, column, min(column + across, MAX_COLUMNS), values[column]))
            column += across
        for merge in above:
            values.setdefault(merge.first, merge.value)
        texts = {c: cell_text(v) for c, v in values.items()}
        width = max((c for c, t in texts.items() if t), default=0)
        self._append([texts.get(c, "") for c in range(1, width + 1)])

    def _append(self, line: list[str]) -> None:
        if line or (self.rows and self.rows[-1]):  # runs of empty rows kept as one
            self.rows.append(line)


def parse_sheet_xml(path: Path) -> ParsedDocument:
    """Parse an Excel 2003 XML workbook (whatever its name: .xml, .xls); any other XML is
    refused by its first bytes, before it is parsed."""
    with open(path, "rb") as f:
        if not looks_like_sheet_xml(f.read(4096)):
            raise UnreadableDocument("unsupported_format", _NOT_SHEET_XML)
    builder = BlockBuilder()
    names: list[str] = []
    notes: list[str] = []
    title = None
    sheet: _Sheet | None = None
    events = etree.iterparse(
        str(path), resolve_entities=False, no_network=True, huge_tree=True,
        tag=(_WORKSHEET, _ROW, f"{{{_O}}}Title"),
    )  # end events only: a million rows cost one event each
    try:
        for _, el in events:
            if el.tag == _ROW:
                sheet = sheet or _Sheet()
                sheet.add(el)
                el.clear()
                while el.getprevious() is not None:  # rows already read: drop them (streaming)
                    del el.getparent()[0]
            elif el.tag == _WORKSHEET:
                name = el.get(_ss("Name")) or f"Sheet{len(names) + 1}"
                names.append(name)
                if el.findtext(f"{{{_X}}}WorksheetOptions/{{{_X}}}Visible") in ("SheetHidden", "SheetVeryHidden"):
                    notes.append(f"sheet {name!r} is hidden (included)")
                builder.reset_headings([name])
                builder.add_sheet(sheet.rows if sheet else [], page=len(names), sheet=name)
                sheet = None
                el.clear()
            else:
                title = (el.text or "").strip() or title
    except etree.XMLSyntaxError as exc:
        raise UnreadableDocument("corrupt", f"Excel 2003 XML that does not parse: {exc}") from exc
    if events.root is None or events.root.tag != _ss("Workbook") or not names:
        raise UnreadableDocument("unsupported_format", _NOT_SHEET_XML)
    return make_document(builder, format="spreadsheetml", parser="lxml", page_count=len(names), title=title, warnings=notes)
