"""Building blocks shared by the format parsers: heading tracking, table folding, finishing.

Every parser walks its format in reading order and feeds a :class:`BlockBuilder`; the
builder owns the heading stack so that heading_path logic lives in one place.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Literal

from rag_pipeline.ingest import heartbeat
from rag_pipeline.ingest.document import BlockKind, ParsedDocument, TextBlock, UnreadableDocument
from rag_pipeline.ingest.language import detect_language
from rag_pipeline.ingest.textutil import clean_text, squash

BEAT_EVERY = 1000  # blocks: a huge sheet or text file's progress, for the parse pool's stall limit
_NUMERIC = re.compile(r"^[\s$€£¥%+\-.,()0-9]*[0-9][\s$€£¥%+\-.,()0-9]*$")


class BlockBuilder:
    """Collects blocks in order and stamps each with the current heading path."""

    def __init__(self) -> None:
        self.blocks: list[TextBlock] = []
        self._headings: list[tuple[int, str]] = []  # (level, text), levels strictly increasing
        self.first_heading: str | None = None

    @property
    def heading_path(self) -> tuple[str, ...]:
        return tuple(text for _, text in self._headings)

    def heading(self, text: str, level: int, *, page: int | None = None, sheet: str | None = None) -> None:
        """Record a heading of ``level`` (1 = top) and make it the tail of the heading path."""
        text = squash(text)
        if not text:
            return
        while self._headings and self._headings[-1][0] >= level:
            self._headings.pop()
        self._headings.append((level, text))
        if self.first_heading is None:
            self.first_heading = text
        self.blocks.append(TextBlock(text, "heading", self.heading_path, page, sheet))

    def reset_headings(self, path: Sequence[str] = ()) -> None:
        """Start a new section tree (a new slide or sheet), optionally under fixed ``path``."""
        self._headings = [(i, squash(t)) for i, t in enumerate(path) if squash(t)]

    def add(
        self,
        text: str,
        kind: BlockKind = "paragraph",
        *,
        page: int | None = None,
        sheet: str | None = None,
        ocr_confidence: float | None = None,
    ) -> None:
        """Append a block unless it is empty after clean-up."""
        text = clean_text(text)
        if text:
            self.blocks.append(TextBlock(text, kind, self.heading_path, page, sheet, ocr_confidence))
            if len(self.blocks) % BEAT_EVERY == 0:
                heartbeat.beat()

    def add_table(
        self,
        rows: Sequence[Sequence[object]],
        *,
        header: Sequence[str] | None | Literal["auto"] = "auto",
        page: int | None = None,
        sheet: str | None = None,
    ) -> None:
        """Append one table_row block per data row (see :func:`fold_table`)."""
        for kind, text in fold_table(rows, header=header):
            self.add(text, kind, page=page, sheet=sheet)

    def add_sheet(self, rows: Sequence[Sequence[object]], *, page: int | None = None, sheet: str | None = None) -> None:
        """Append a worksheet's stacked tables (see :func:`fold_sheet`)."""
        for kind, text in fold_sheet(rows):
            self.add(text, kind, page=page, sheet=sheet)


def _is_header(row: Sequence[str], following: Sequence[Sequence[str]]) -> bool:
    """A header has >= 2 labels, mostly non-numeric, and about as many cells as the data."""
    filled = [c for c in row if c]
    if len(filled) < 2 or sum(1 for c in filled if _NUMERIC.match(c)) > len(filled) // 3:
        return False
    counts = sorted(sum(1 for c in r if c) for r in following[:20])
    typical = counts[len(counts) // 2] if counts else 0
    return len(filled) * 2 >= typical


def fold_table(
    rows: Sequence[Sequence[object]], *, header: Sequence[str] | None | Literal["auto"] = "auto"
) -> list[tuple[BlockKind, str]]:
    """Turn table rows into ``(kind, text)`` pairs with the header folded into every row.

    A data row becomes ``"Header1: v1; Header2: v2"`` so that each row stands alone when
    chunked and embedded. The header is the first of the top 10 rows with two or more
    mostly non-numeric labels and at least half as many cells as a typical data row; rows
    above it (sheet titles, notes) become paragraphs. Without such a row (a numeric
    matrix) rows are plain ``"v1; v2; v3"``. Columns empty everywhere are dropped, empty
    cells skipped, and ragged rows tolerated (extra cells appear without a header).
    A caller that knows the header (HTML ``<th>``) passes it; ``header=None`` means none.
    """
    if header != "auto":
        known = [squash(str(c)) for c in header] if header is not None else None
        rows = ([known] if known else []) + [list(r) for r in rows]

    cleaned = [[squash(str(c)) if c is not None else "" for c in row] for row in rows]
    cleaned = [row for row in cleaned if any(row)]
    if not cleaned:
        return []
    width = max(len(r) for r in cleaned)
    used = [i for i in range(width) if any(i < len(r) and r[i] for r in cleaned)]
    cleaned = [[r[i] if i < len(r) else "" for i in used] for r in cleaned]
    if header == "auto":
        header_idx = next((i for i, r in enumerate(cleaned[:10]) if _is_header(r, cleaned[i + 1 :])), None)
    else:
        header_idx = 0 if header else None
    out: list[tuple[BlockKind, str]] = []
    if header_idx is None or header_idx == len(cleaned) - 1:
        return [("table_row", _join_plain(r)) for r in cleaned]
    for r in cleaned[:header_idx]:
        out.append(("paragraph", " ".join(c for c in r if c)))
    header = cleaned[header_idx]
    for row in cleaned[header_idx + 1 :]:
        parts = []
        for i, value in enumerate(row):
            if not value:
                continue
            name = header[i] if i < len(header) else ""
            parts.append(f"{name}: {value}" if name and name != value else value)
        out.append(("table_row", "; ".join(parts)))
    return out


def fold_sheet(rows: Sequence[Sequence[object]]) -> list[tuple[BlockKind, str]]:
    """A worksheet as the tables stacked in it: each folded under its own header.

    Blank rows cut the sheet into regions. A region whose top rows hold a header (see
    :func:`fold_table`) starts a new table; one without (data after a blank spacer row) goes
    on under the header above it. A header with nothing under it before the next blank row
    (header, blank, data: common in finance sheets) waits for the region below; if none comes
    it is kept as a paragraph. Regions of one-cell rows (titles, notes) are paragraphs.
    Without this a second table was folded under the first one's header labels.
    """
    out: list[tuple[BlockKind, str]] = []
    header: list[str] | None = None  # the raw header row of the table being folded
    waiting = False  # `header` has no data under it yet
    for region in _regions(rows):
        cleaned = [[squash(str(c)) if c is not None else "" for c in r] for r in region]
        if all(sum(1 for c in r if c) <= 1 for r in cleaned):
            out += [("paragraph", " ".join(c for c in r if c)) for r in cleaned]
            continue
        own = next((i for i, r in enumerate(cleaned[:10]) if _is_header(r, cleaned[i + 1 :])), None)
        if own is None and header is not None:
            out += fold_table(region, header=header)
            waiting = False
            continue
        if waiting:
            out.append(("paragraph", " ".join(c for c in header if c)))
        if own is not None and own == len(cleaned) - 1:
            out += [("paragraph", " ".join(c for c in r if c)) for r in cleaned[:own]]
            header, waiting = [str(c) if c is not None else "" for c in region[own]], True
            continue
        out += fold_table(region)
        header = [str(c) if c is not None else "" for c in region[own]] if own is not None else None
        waiting = False
    if waiting:
        out.append(("paragraph", " ".join(c for c in header if c)))
    return out


def _regions(rows: Sequence[Sequence[object]]) -> list[list[Sequence[object]]]:
    """Runs of rows with at least one non-blank cell."""
    regions: list[list[Sequence[object]]] = [[]]
    for row in rows:
        if any(c is not None and squash(str(c)) for c in row):
            regions[-1].append(row)
        elif regions[-1]:
            regions.append([])
    return [r for r in regions if r]


def _join_plain(cells: Sequence[str]) -> str:
    """Join header-less cells with "; ", but "Label:" runs into its value."""
    out = ""
    for cell in (c for c in cells if c):
        out += ("" if not out else " " if out.endswith((":", "：")) else "; ") + cell
    return out


def make_document(
    builder: BlockBuilder | Iterable[TextBlock],
    *,
    format: str,
    parser: str,
    page_count: int | None = None,
    title: str | None = None,
    ocr_used: bool = False,
    ocr_confidence: float | None = None,
    warnings: list[str] | None = None,
    ocr_pages: list[dict] | None = None,
) -> ParsedDocument:
    """Finish a document: language, title fallback, and ``no_text`` if nothing was found.

    Title preference: ``title`` (the parser's choice: first heading or a metadata title),
    then the first heading the builder saw. The file name is never baked in: parses are cached
    by content, and two files with the same bytes must not share a name (store.rows falls back
    to the file's own name).
    """
    blocks = list(builder.blocks if isinstance(builder, BlockBuilder) else builder)
    blocks = [b for b in blocks if b.text.strip()]
    if not blocks:
        raise UnreadableDocument("no_text", f"{format}: parsed but contains no text")
    first_heading = builder.first_heading if isinstance(builder, BlockBuilder) else None
    sample = "\n".join(b.text for b in blocks[:2000])[:200_000]
    return ParsedDocument(
        blocks=blocks,
        format=format,
        parser=parser,
        language=detect_language(sample),
        page_count=page_count,
        ocr_used=ocr_used,
        ocr_confidence=ocr_confidence,
        title=(squash(title) if title and squash(title) else None) or first_heading,
        warnings=list(warnings or []),
        ocr_pages=list(ocr_pages or []),
    )
