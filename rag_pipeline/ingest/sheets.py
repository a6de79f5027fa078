"""Excel workbooks, one folded block per row: .xlsx via openpyxl (cached values), the
Excel 97-2003 .xls (BIFF) via xlrd."""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile
from pathlib import Path

import olefile
import openpyxl
import xlrd

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.office_art import xls_sheet_pictures
from rag_pipeline.ingest.ole import ole_title
from rag_pipeline.ingest.pictures import PictureReader


# WPS stores a picture placed in a cell as the formula =DISPIMG("ID_...",1) with that same
# text as its cached value: a reader sees a picture, never the formula.
_PICTURE_FORMULA = re.compile(r"^=\s*(_xlfn\.)?DISPIMG\(", re.I)


def percent_decimals(number_format: str | None) -> tuple[int, int] | None:
    """The decimals a percentage number format shows, (always, at most): "0.0%" -> (1, 1),
    "0.0#%" -> (1, 2), "0%" -> (0, 0); None for any other format. Quoted text, [colour]/[locale]
    codes and escaped characters are not the format's."""
    if not number_format or "%" not in number_format:
        return None
    section = FORMAT_LITERALS.sub("", number_format.split(";")[0])
    if "%" not in section:
        return None
    decimals = re.search(r"\.([0#?]+)", section)
    places = decimals.group(1) if decimals else ""
    return len(places.rstrip("#?")), len(places)


# What a number format writes as it stands, not a code: "quoted text", [colour]/[locale], \escaped,
# _padding and *fill characters
FORMAT_LITERALS = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.|_.|\*.')


def cell_text(value: object, percent: tuple[int, int] | None = None) -> str:
    """Render a cell value the way a reader sees it (1.0 -> "1", dates without 00:00; an
    in-cell picture's =DISPIMG(...) formula is no text). A number is shown by its value
    (168000, not "168,000" or "¥168,000.00"), except in a percentage format (``percent`` its
    decimals, from percent_decimals): 0.25 is shown "25%", as a different number would be read."""
    if value is None:
        return ""
    if isinstance(value, str) and _PICTURE_FORMULA.match(value):
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if percent is not None and isinstance(value, (int, float)):
        fixed, most = percent
        shown = f"{value * 100:.{most}f}"
        if most > fixed:  # optional places ("0.0#%"): trailing zeros beyond the fixed ones are not shown
            whole, _, places = shown.partition(".")
            places = places.rstrip("0").ljust(fixed, "0")
            shown = f"{whole}.{places}" if places else whole
        return f"{shown}%"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, dt.datetime):
        return value.date().isoformat() if value.time() == dt.time() else value.isoformat(sep=" ")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    return str(value)


# Below these sizes (on disk, and unpacked: a small file can inflate enormously) the workbook
# is loaded fully so merged cells can be filled down; above them, read-only streaming keeps
# memory flat and merges are left as Excel stores them.
FULL_LOAD_MAX_BYTES = 5 * 1024 * 1024
FULL_LOAD_MAX_UNPACKED_BYTES = 50 * 1024 * 1024


def _vertical_fills(ws) -> dict[tuple[int, int], object]:  # type: ignore[no-untyped-def]
    """Cells covered by a vertical merge -> the merge's value (only in its first column)."""
    fills: dict[tuple[int, int], object] = {}
    for rng in getattr(ws, "merged_cells", None) and ws.merged_cells.ranges or ():
        if rng.max_row > rng.min_row:
            value = ws.cell(rng.min_row, rng.min_col).value
            for r in range(rng.min_row + 1, rng.max_row + 1):
                fills[(r, rng.min_col)] = value
    return fills


def _rows(ws) -> list[list[str]]:  # type: ignore[no-untyped-def]
    fills = _vertical_fills(ws)
    rows = []
    decimals: dict[str, tuple[int, int] | None] = {}  # number format -> percent_decimals (a sheet uses a few)
    for r, row in enumerate(ws.iter_rows(), start=1):
        texts = []
        for c, cell in enumerate(row):
            value = cell.value
            if value is None and (r, c + 1) in fills:
                value, percent = fills[(r, c + 1)], None
            else:
                fmt = getattr(cell, "number_format", None) or "General"
                if fmt not in decimals:
                    decimals[fmt] = percent_decimals(fmt)
                percent = decimals[fmt]
            texts.append(cell_text(value, percent))
        rows.append(texts)
    return rows


def parse_xlsx(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse every worksheet: ``sheet`` = its name, ``page`` = its 1-based position,
    heading_path = (sheet name,), each table stacked in the sheet folded with its own header row.

    data_only returns the values Excel last calculated instead of formulas. Files up to
    5 MB (50 MB unpacked) are loaded fully so that a vertically merged cell (a group
    label spanning rows, very common in Chinese office sheets) is repeated in each row it
    covers, and pictures placed on a sheet (a pasted screenshot) are OCR'd after its rows
    (ingest.pictures); larger files are streamed read-only, where merges are not available and
    the package's pictures are OCR'd after the last sheet.
    """
    with zipfile.ZipFile(path) as package:
        unpacked = sum(info.file_size for info in package.infolist())
    read_only = path.stat().st_size > FULL_LOAD_MAX_BYTES or unpacked > FULL_LOAD_MAX_UNPACKED_BYTES
    # An open file, not the path: openpyxl refuses a path not ending in .xlsx (a renamed .xls).
    with open(path, "rb") as fh:
        return _parse_workbook(openpyxl.load_workbook(fh, read_only=read_only, data_only=True), read_only, ocr_lang, path)


def _parse_workbook(workbook, read_only: bool, ocr_lang: str, path: Path) -> ParsedDocument:  # type: ignore[no-untyped-def]
    builder = BlockBuilder()
    notes: list[str] = []
    pictures = PictureReader(ocr_lang)
    try:
        names = workbook.sheetnames
        for ws in workbook.worksheets:
            index = names.index(ws.title) + 1
            if getattr(ws, "sheet_state", "visible") != "visible":
                notes.append(f"sheet {ws.title!r} is hidden (included)")
            builder.reset_headings([ws.title])
            builder.add_sheet(_rows(ws), page=index, sheet=ws.title)
            for picture in getattr(ws, "_images", ()):  # a screenshot pasted on the sheet: its text after the rows
                pictures.add_text(builder, picture._data(), page=index, sheet=ws.title)
        title = (workbook.properties.title or "").strip() or None
    finally:
        if read_only:
            workbook.close()
    if read_only:  # a streamed workbook names no sheet's pictures: the package's, after the last sheet
        builder.reset_headings()
        with zipfile.ZipFile(path) as package:
            for member in sorted(n for n in package.namelist() if n.startswith("xl/media/")):
                pictures.add_text(builder, package.read(member))
    return make_document(builder, format="xlsx", parser="openpyxl", page_count=len(names), title=title, **pictures.metadata(notes))


def _xls_value(cell: xlrd.sheet.Cell, datemode: int) -> object:
    """A BIFF cell as the Python value openpyxl would give: dates and times, booleans, error text."""
    if cell.ctype == xlrd.XL_CELL_DATE:
        if 0 <= cell.value < 1:  # a time of day without a date
            return xlrd.xldate.xldate_as_datetime(cell.value, datemode).time()
        return xlrd.xldate.xldate_as_datetime(cell.value, datemode)
    if cell.ctype == xlrd.XL_CELL_BOOLEAN:
        return bool(cell.value)
    if cell.ctype == xlrd.XL_CELL_ERROR:
        return xlrd.error_text_from_code.get(cell.value, "#ERR")
    return cell.value if cell.ctype in (xlrd.XL_CELL_TEXT, xlrd.XL_CELL_NUMBER) else None


def _xls_percent(book: xlrd.book.Book, cell: xlrd.sheet.Cell) -> tuple[int, int] | None:
    """A number cell's percentage decimals, from its XF record's number format (formatting_info)."""
    if cell.ctype != xlrd.XL_CELL_NUMBER:
        return None
    try:
        fmt = book.format_map.get(book.xf_list[cell.xf_index].format_key)
    except (IndexError, TypeError, AttributeError):
        return None
    return percent_decimals(fmt.format_str) if fmt is not None else None


def _xls_rows(book: xlrd.book.Book, sheet: xlrd.sheet.Sheet) -> list[list[str]]:
    """A sheet's rows, a vertically merged cell's value repeated in each row it covers (as for .xlsx)."""
    cells = [sheet.row(r) for r in range(sheet.nrows)]
    values = [[(_xls_value(c, book.datemode), _xls_percent(book, c)) for c in row] for row in cells]
    for first_row, end_row, first_col, _ in sheet.merged_cells:
        for r in range(first_row + 1, min(end_row, sheet.nrows)):
            if first_col < len(values[r]) and values[r][first_col][0] in (None, ""):
                values[r][first_col] = values[first_row][first_col]
    return [[cell_text(v, percent) for v, percent in row] for row in values]


def parse_xls(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse an Excel 97-2003 workbook like :func:`parse_xlsx`: every worksheet a page named
    by its sheet, tables folded with their header rows, merged group labels filled down.

    xlrd reads the BIFF records itself (no Excel, no LibreOffice); a workbook protected by
    a password is ``encrypted``. Chart sheets hold no cells and are skipped. A picture is OCR'd
    after the rows of the sheet that shows it, as in an .xlsx; one no sheet shows, after the last
    sheet (ingest.office_art, ingest.pictures).
    """
    log = io.StringIO()  # xlrd prints format notes (a missing code page) to stdout otherwise
    try:
        book = xlrd.open_workbook(str(path), formatting_info=True, on_demand=True, logfile=log)
    except xlrd.XLRDError as exc:
        if "encrypted" in str(exc).lower():
            raise UnreadableDocument("encrypted", "password-protected Excel 97-2003 workbook") from exc
        raise
    by_sheet: dict[str, list[bytes]] = {}
    unplaced: list[bytes] = []
    if olefile.isOleFile(str(path)):  # xlrd also reads a bare BIFF stream
        with olefile.OleFileIO(str(path)) as ole:
            stream = next((name for name in ("Workbook", "Book") if ole.exists(name)), None)
            if stream:
                by_sheet, unplaced = xls_sheet_pictures(ole.openstream(stream).read())
    builder = BlockBuilder()
    notes: list[str] = [line.strip(" *") for line in log.getvalue().splitlines() if line.strip()]
    pictures = PictureReader(ocr_lang)
    try:
        names = book.sheet_names()
        for index, name in enumerate(names, start=1):
            sheet = book.sheet_by_index(index - 1)
            if sheet.visibility:
                notes.append(f"sheet {name!r} is hidden (included)")
            builder.reset_headings([name])
            builder.add_sheet(_xls_rows(book, sheet), page=index, sheet=name)
            book.unload_sheet(index - 1)
            for blob in by_sheet.pop(name, ()):  # a screenshot pasted on the sheet: its text after the rows
                pictures.add_text(builder, blob, page=index, sheet=name)
    finally:
        book.release_resources()
    builder.reset_headings()
    for blob in [*unplaced, *(blob for blobs in by_sheet.values() for blob in blobs)]:  # shown by no sheet xlrd read
        pictures.add_text(builder, blob)
    return make_document(builder, format="xls", parser="xlrd", page_count=len(names), title=ole_title(path), **pictures.metadata(notes))
