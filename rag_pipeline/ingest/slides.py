"""PowerPoint .pptx via python-pptx: one page per slide, slide title as the heading."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from lxml import etree
from pptx.enum.shapes import MSO_SHAPE_TYPE, PP_PLACEHOLDER
from pptx.package import Package
from pptx.parts.presentation import PresentationPart

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.charts import add_chart
from rag_pipeline.ingest.diagrams import diagram_lines
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.embedded import add_office_object
from rag_pipeline.ingest.pictures import PictureReader
from rag_pipeline.ingest.textutil import squash

# Placeholders that repeat on every slide and carry no content.
_BOILERPLATE = {PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.SLIDE_NUMBER, PP_PLACEHOLDER.HEADER}
_TITLES = {PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE}
_BULLETED = {PP_PLACEHOLDER.BODY, PP_PLACEHOLDER.OBJECT, PP_PLACEHOLDER.VERTICAL_BODY, PP_PLACEHOLDER.VERTICAL_OBJECT}
# Default titles PowerPoint/Google Slides write into core properties; not real titles.
_DEFAULT_TITLE = re.compile(
    r"^(powerpoint (presentation|演示文稿)|presentation\s*\d*|slide\s*\d+|幻灯片\s*\d+|演示文稿\s*\d*)$", re.I
)


def _placeholder_type(shape):  # type: ignore[no-untyped-def]
    if not shape.is_placeholder:
        return None
    try:
        return shape.placeholder_format.type
    except Exception:  # malformed placeholder XML
        return None


def _reading_order(shapes: Iterable) -> list:  # type: ignore[type-arg]
    """Top-to-bottom, then left-to-right; shapes without a position go last."""
    big = 10**12
    return sorted(shapes, key=lambda s: (s.top if s.top is not None else big, s.left if s.left is not None else big))


def _table_rows(table) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Cell texts on the grid; a vertically merged cell repeats its value in every row it
    spans (so each folded row still says which group it belongs to)."""
    grid = [[cell.text for cell in row.cells] for row in table.rows]
    for r, row in enumerate(table.rows):
        for c, cell in enumerate(row.cells):
            if cell.is_merge_origin and cell.span_height > 1:
                for dr in range(1, cell.span_height):
                    if r + dr < len(grid) and c < len(grid[r + dr]):
                        grid[r + dr][c] = grid[r][c]
    return grid


def _picture_bytes(shape) -> bytes | None:  # type: ignore[no-untyped-def]
    """A picture shape's image bytes; None for an empty picture placeholder or a linked image."""
    try:
        return shape.image.blob
    except (AttributeError, KeyError, ValueError):
        return None


_OLE_OBJECT = "{http://schemas.openxmlformats.org/presentationml/2006/main}oleObj"  # an embedded object
_R_ID = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}id"
_DIAGRAM_IDS = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}relIds"  # a SmartArt graphic's parts
_DIAGRAM_DATA = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}dm"


def _emit_shapes(shapes: Iterable, builder: BlockBuilder, page: int, counts: dict[str, int], pictures: PictureReader,  # type: ignore[type-arg]
                 notes: list[str]) -> None:
    for shape in _reading_order(shapes):
        ph = _placeholder_type(shape)
        if ph in _BOILERPLATE or ph in _TITLES:
            continue
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
            _emit_shapes(shape.shapes, builder, page, counts, pictures, notes)
            continue
        if getattr(shape, "has_table", False) and shape.has_table:
            builder.add_table(_table_rows(shape.table), page=page)
            continue
        if getattr(shape, "has_chart", False) and shape.has_chart:
            try:
                add_chart(builder, shape.chart_part.blob, page=page)
            except (etree.XMLSyntaxError, KeyError, ValueError):  # a damaged chart part: counted, the slide read
                counts["charts"] += 1
            continue
        ole = next(shape._element.iter(_OLE_OBJECT), None)
        if ole is not None:  # a worksheet or document embedded as an object: the slide shows its picture
            try:
                held = shape.part.related_part(ole.get(_R_ID))
            except KeyError:
                counts["embedded objects"] += 1
                continue
            notes.append(add_office_object(builder, held.blob, f".{held.partname.ext}", ole.get("progId") or "", pictures.lang, page=page))
            continue
        smartart = next(shape._element.iter(_DIAGRAM_IDS), None)
        if smartart is not None:
            try:
                for line in diagram_lines(shape.part.related_part(smartart.get(_DIAGRAM_DATA)).blob):
                    builder.add(line, "list_item", page=page)
            except (etree.XMLSyntaxError, KeyError, ValueError):
                counts["SmartArt graphics"] += 1
            continue
        if shape.shape_type == MSO_SHAPE_TYPE.PICTURE or ph == PP_PLACEHOLDER.PICTURE:
            blob = _picture_bytes(shape)
            if blob:  # a screenshot's or a pasted scan's text
                pictures.add_text(builder, blob, page=page)
        if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            bulleted = ph in _BULLETED
            for para in shape.text_frame.paragraphs:
                kind = "list_item" if bulleted or para.level > 0 else "paragraph"
                builder.add(para.text, kind, page=page)


def parse_pptx(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse a .pptx: slide number as ``page``, title placeholder as the heading, text
    frames in reading order, tables as folded rows, speaker notes as ``notes`` blocks.

    Date/footer/slide-number placeholders are dropped. Pictures are OCR'd (ingest.pictures:
    their text as ``ocr_text`` blocks with their confidence, judged paragraph by paragraph by
    triage); a chart's title and data as table rows (ingest.charts), a SmartArt graphic's boxes as
    list items (ingest.diagrams), an embedded worksheet's or document's content as that file's
    (ingest.embedded); a damaged one of any is counted in ``warnings``.
    """
    # pptx.Presentation() refuses a template's (.potx) content type; the part is the same
    part = Package.open(str(path)).main_document_part
    if not isinstance(part, PresentationPart):
        raise UnreadableDocument("corrupt", f"not a PowerPoint package: its main part is {part.content_type}")
    presentation = part.presentation
    builder = BlockBuilder()
    counts = {"charts": 0, "SmartArt graphics": 0, "embedded objects": 0}
    objects: list[str] = []  # what each embedded object gave (ingest.embedded)
    pictures = PictureReader(ocr_lang)
    slide_count = 0
    for number, slide in enumerate(presentation.slides, start=1):
        slide_count = number
        builder.reset_headings()
        title = next((s for s in slide.shapes if _placeholder_type(s) in _TITLES and s.has_text_frame), None)
        if title is not None and squash(title.text_frame.text):
            builder.heading(title.text_frame.text, 1, page=number)
        _emit_shapes(slide.shapes, builder, number, counts, pictures, objects)
        if slide.has_notes_slide:
            frame = slide.notes_slide.notes_text_frame
            if frame is not None:
                builder.add(frame.text, "notes", page=number)
    notes = objects + [f"{n} {kind} not extracted (damaged or missing part)" for kind, n in counts.items() if n]
    core_title = (presentation.core_properties.title or "").strip()
    if _DEFAULT_TITLE.match(core_title):
        core_title = ""
    return make_document(
        builder,
        format="pptx",
        parser="python-pptx",
        page_count=slide_count,
        title=builder.first_heading or core_title or None,
        **pictures.metadata(notes),
    )
