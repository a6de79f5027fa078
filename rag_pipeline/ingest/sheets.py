"""Excel .xlsx via openpyxl (read-only, cached values): one folded block per row."""

from __future__ import annotations

import datetime as dt
import re
import zipfile
from pathlib import Path

import openpyxl

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument


# WPS stores a picture placed in a cell as the formula =DISPIMG("ID_...",1) with that same
# text as its cached value: a reader sees a picture, never the formula.
_PICTURE_FORMULA = re.compile(r"^=\s*(_xlfn\.)?DISPIMG\(", re.I)


def cell_text(value: object) -> str:
    """Render a cell value the way a reader sees it (1.0 -> "1", dates without 00:00; an
    in-cell picture's =DISPIMG(...) formula is no text)."""
    if value is None:
        return ""
    if isinstance(value, str) and _PICTURE_FORMULA.match(value):
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
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
    for r, row in enumerate(ws.iter_rows(values_only=True), start=1):
        values = list(row)
        for c in range(len(values)):
            if values[c] is None and (r, c + 1) in fills:
                values[c] = fills[(r, c + 1)]
        rows.append([cell_text(v) for v in values])
    return rows


def parse_xlsx(path: Path) -> ParsedDocument:
    """Parse every worksheet: ``sheet`` = its name, ``page`` = its 1-based position,
    heading_path = (sheet name,), each table stacked in the sheet folded with its own header row.

    data_only returns the values Excel last calculated instead of formulas. Files up to
    5 MB (50 MB unpacked) are loaded fully so that a vertically merged cell (a group
    label spanning rows, very common in Chinese office sheets) is repeated in each row it
    covers; larger files are streamed read-only, where merge ranges are not available.
    """
    with zipfile.ZipFile(path) as package:
        unpacked = sum(info.file_size for info in package.infolist())
    read_only = path.stat().st_size > FULL_LOAD_MAX_BYTES or unpacked > FULL_LOAD_MAX_UNPACKED_BYTES
    workbook = openpyxl.load_workbook(str(path), read_only=read_only, data_only=True)
    builder = BlockBuilder()
    notes: list[str] = []
    try:
        names = workbook.sheetnames
        for ws in workbook.worksheets:
            index = names.index(ws.title) + 1
            if getattr(ws, "sheet_state", "visible") != "visible":
                notes.append(f"sheet {ws.title!r} is hidden (included)")
            builder.reset_headings([ws.title])
            builder.add_sheet(_rows(ws), page=index, sheet=ws.title)
        title = (workbook.properties.title or "").strip() or None
    finally:
        if read_only:
            workbook.close()
    return make_document(
        builder,
        format="xlsx",
        parser="openpyxl",
        page_count=len(names),
        title=title,
        warnings=notes,
    )
