"""The one normalized representation every parser emits.

Downstream stages (quarantine triage, chunking) only ever see these types, never the
source format, so adding a format never touches the rest of the pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

# Raster image files: OCR'd by ingest/image.py, reported as format "image".
IMAGE_EXTENSIONS = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff", ".bmp", ".gif", ".webp", ".heic", ".heif"})

BlockKind = Literal["title", "heading", "paragraph", "list_item", "table_row", "ocr_text", "notes"]

QuarantineReason = Literal[
    "ocr_low_confidence",
    "no_text",
    "encrypted",
    "corrupt",
    "unsupported_format",
    "too_large",
    "timeout",
    "invalid_metadata",
    "unavailable",  # the file vanished, was replaced or changed between the scan and its parse
]


@dataclass(frozen=True)
class TextBlock:
    """One ordered unit of text as the author laid it out."""

    text: str
    kind: BlockKind = "paragraph"
    heading_path: tuple[str, ...] = ()
    page: int | None = None  # 1-based page, slide or sheet number where the format has one
    sheet: str | None = None  # sheet name for spreadsheets
    ocr_confidence: float | None = None  # mean word confidence 0-100 when the text came from OCR


@dataclass
class ParsedDocument:
    """A parsed file: ordered blocks plus document-level facts."""

    blocks: list[TextBlock]
    format: str  # pdf, docx, doc, wordml, pptx, ppt, xlsx, xls, odt, ods, odp, rtf, epub, csv, tsv, html, mhtml, md, txt, eml, image
    parser: str  # which code path produced it, e.g. "pdfplumber", "tesseract"
    language: str = "und"  # zh, en, mixed, und
    page_count: int | None = None
    ocr_used: bool = False
    ocr_confidence: float | None = None  # document-level mean word confidence over OCR'd pages
    title: str | None = None
    warnings: list[str] = field(default_factory=list)
    # One entry per OCR'd page: {"page", "confidence", "words", "rotation"}; triage drops
    # the text of pages below the confidence threshold and lists them in ``warnings``.
    ocr_pages: list[dict] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n\n".join(b.text for b in self.blocks)


class UnreadableDocument(Exception):
    """Raised by a parser for a file that cannot be trusted; the file goes to quarantine.

    The detail is kept as valid UTF-8: an error message quoting a file name that is not
    UTF-8 carries lone surrogates, which would break the quarantine table."""

    def __init__(self, reason: QuarantineReason, detail: str):
        detail = detail.encode("utf-8", "backslashreplace").decode("utf-8")
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class TransientFailure(UnreadableDocument):
    """A quarantine that says nothing about the file's bytes: the file vanished or changed
    around its parse, the parse ran out of time or memory, its worker died, or it is over the
    size limit (which an operator may raise). The file is
    quarantined for this run only and the outcome is never cached, so the next run (or the
    identical file restored) is parsed again."""
