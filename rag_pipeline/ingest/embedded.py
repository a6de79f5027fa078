"""A file carried inside another — a mail's attachment, a workbook embedded in a slide or a Word
document — read as the file it is, with the parser of its format, under a time limit of its own.

One level only: what the carried file carries in turn is named by its reader, not read (a zip of
zips, a mail forwarding mails forwarding mails would otherwise multiply one file's parse). The
limit is on time without progress (ingest.deadline): past it the carried file is given up and the
carrier's own text is kept.

Office embeds an object as an OOXML package (``Microsoft_Excel_Worksheet.xlsx``) or as an OLE
file (``oleObject1.bin``) holding a 97-2003 file's streams, or a ``Package`` stream holding an
OOXML package, or a PDF in a ``CONTENTS`` stream; ``office_object`` tells which.
"""

from __future__ import annotations

import io
import tempfile
from dataclasses import replace
from pathlib import Path

import olefile

from rag_pipeline.ingest.deadline import TimeLimitPassed, time_limit
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument

EMBEDDED_STALL_S = 45.0  # an embedded file or attachment stopped after this long without progress
_reading = False  # a carried file is being read: what it carries is named, not read

# An OLE object's stream -> the format it holds (Word/Excel/PowerPoint 97-2003, Acrobat's PDF)
_OLE_STREAMS = {"WordDocument": ".doc", "Workbook": ".xls", "Book": ".xls", "PowerPoint Document": ".ppt", "CONTENTS": ".pdf"}
# A "Package" stream's OOXML package, by the object's program id ("Excel.Sheet.12")
_PACKAGE_PROGIDS = {"excel": ".xlsx", "word": ".docx", "powerpoint": ".pptx"}


def reading_one() -> bool:
    """True while a carried file is being read (its own carried files are named, not read)."""
    return _reading


def parse_embedded(payload: bytes, ext: str, ocr_lang: str) -> ParsedDocument:
    """Parse a carried file's bytes as a file of extension ``ext`` (parse_bytes), one level deep.
    Raises UnreadableDocument, or TimeLimitPassed past EMBEDDED_STALL_S without progress; callers
    name what they could not read."""
    global _reading
    try:
        _reading = True
        with time_limit(EMBEDDED_STALL_S):
            return parse_bytes(payload, ext, ocr_lang)
    finally:
        _reading = False


def parse_bytes(payload: bytes, ext: str, ocr_lang: str) -> ParsedDocument:
    """Parse bytes as a file of extension ``ext`` (ingest.parsers.parse_file on a scratch copy
    named only by its extension), with no limit or level of its own: for a part of the document
    itself, such as a Word document's imported HTML (``w:altChunk``)."""
    from rag_pipeline.ingest.parsers import parse_file

    with tempfile.TemporaryDirectory(prefix="rag-embedded-") as scratch:
        copy = Path(scratch) / f"embedded{ext}"
        copy.write_bytes(payload)
        return parse_file(copy, ocr_lang=ocr_lang)


def office_object(payload: bytes, ext: str, progid: str = "") -> tuple[bytes, str] | None:
    """(bytes, extension) of the file an Office embedded object holds, or None when it holds
    none this pipeline reads (an equation, a drawing, a media clip, an unknown OLE server)."""
    from rag_pipeline.ingest.parsers import SUPPORTED_EXTENSIONS

    ext = ext.lower()
    if ext != ".bin":
        return (payload, ext) if ext in SUPPORTED_EXTENSIONS else None
    if not olefile.isOleFile(io.BytesIO(payload)):
        return None
    with olefile.OleFileIO(io.BytesIO(payload)) as ole:
        streams = {"/".join(s) for s in ole.listdir()}
        if "Package" in streams:
            kind = next((x for key, x in _PACKAGE_PROGIDS.items() if progid.lower().startswith(key)), None)
            return (ole.openstream("Package").read(), kind) if kind else None
        for stream, kind in _OLE_STREAMS.items():
            if stream in streams:
                return (ole.openstream(stream).read(), kind) if kind == ".pdf" else (payload, kind)
    return None


def add_office_object(builder, payload: bytes, ext: str, progid: str, ocr_lang: str, *, page: int | None = None) -> str:  # type: ignore[no-untyped-def]
    """Read an Office embedded object (a worksheet pasted into a slide or a Word document as an
    object: its table is in the object, the page shows a picture of it) into ``builder``, its
    blocks where the object stands, under the current headings and on ``page``. Returns a note
    for the document's warnings: what was read, or why not."""
    name = progid or ext
    held = office_object(payload, ext, progid)
    if held is None:
        return f"embedded object {name}: not read (no format this pipeline reads)"
    if reading_one():
        return f"embedded object {name}: not read (inside a file carried by another)"
    try:
        doc = parse_embedded(*held, ocr_lang)
    except (UnreadableDocument, TimeLimitPassed) as exc:
        why = f"{exc.reason}: {exc.detail}" if isinstance(exc, UnreadableDocument) else f"stopped after {EMBEDDED_STALL_S:g} s without progress"
        return f"embedded object {name}: not read ({why})"[:300]
    builder.blocks.extend(replace(b, heading_path=(*builder.heading_path, *b.heading_path), page=page) for b in doc.blocks)
    return f"embedded object {name}: read as {held[1]} ({len(doc.blocks)} blocks)"
