"""Word .docx via python-docx: headings drive heading_path, tables become folded rows.

The body XML is walked directly (with python-docx's Paragraph for text and style
lookup) because python-docx's paragraph/table lists skip content controls (w:sdt),
where cover pages and many template fields live, and lose body order between
paragraphs and tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from docx.opc.constants import RELATIONSHIP_TYPE as RT
from docx.opc.part import PartFactory
from docx.oxml.ns import qn
from docx.oxml.parser import OxmlElement, parse_xml
from docx.package import Package
from docx.parts.document import DocumentPart
from docx.text.paragraph import Paragraph
from lxml import etree

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.charts import add_chart
from rag_pipeline.ingest.diagrams import diagram_lines
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.embedded import add_office_object, parse_bytes
from rag_pipeline.ingest.pictures import PictureReader
from rag_pipeline.ingest.textutil import squash
from rag_pipeline.ingest.word_numbering import Numbering

# Macro-enabled documents (.docm) and templates (.dotx, .dotm) hold the same main part under
# other content types; python-docx maps only .docx's to its document part.
for _content_type in ("application/vnd.ms-word.document.macroEnabled.main+xml",
                      "application/vnd.openxmlformats-officedocument.wordprocessingml.template.main+xml",
                      "application/vnd.ms-word.template.macroEnabledTemplate.main+xml"):
    PartFactory.part_type_for.setdefault(_content_type, DocumentPart)

_HEADING_STYLE = re.compile(r"^(heading|标题)\s*(\d)$", re.I)
_CONTAINERS = {qn("w:sdt"), qn("w:sdtContent"), qn("w:customXml"), qn("w:smartTag")}
_TERMINAL = tuple(".。:：,，;；!！?？")
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"


def _text_box_paragraphs(p, parent) -> list[str]:  # type: ignore[no-untyped-def]
    """The paragraphs of the text boxes anchored in a paragraph (a flowchart's steps, a callout),
    which python-docx's paragraph text leaves out. Word writes each box twice, as DrawingML and
    as a VML fallback for old readers: the fallback's copy is skipped."""
    out = []
    for inner in p.iter(qn("w:p")):
        if inner is p or any(a.tag == _FALLBACK for a in inner.iterancestors() if a is not p):
            continue
        text = Paragraph(inner, parent).text
        if squash(text):
            out.append(text)
    return out


# Inline wrappers python-docx's paragraph text does not look into (it reads a paragraph's own runs
# and hyperlinks only): a tracked insertion or move, a content control (a form's filled-in date or
# name), a smart tag, custom XML, a simple field (its result), bidirectional runs.
_INLINE_WRAPPERS = tuple(qn(t) for t in ("w:ins", "w:moveTo", "w:sdt", "w:smartTag", "w:customXml", "w:fldSimple", "w:dir", "w:bdo"))
_WRAPPER_PROPERTIES = tuple(qn(t) for t in ("w:sdtPr", "w:sdtEndPr", "w:smartTagPr", "w:customXmlPr"))
_BLOCKS = {qn("w:p"), qn("w:tbl"), qn("w:tr"), qn("w:tc")}
_REVISION_REMOVED = tuple(qn(t) for t in ("w:del", "w:moveFrom"))  # deleted, or moved away from here


def _as_shown(root) -> None:  # type: ignore[no-untyped-def]
    """Rewrite a loaded part's tree into what Word shows with its tracked changes accepted:
    deleted and moved-away runs (and deleted table rows) removed, inserted and moved-here runs
    and inline wrappers' runs made the paragraph's own. A content control still showing its
    placeholder ("Click or tap here to enter text.") is removed wherever it stands; a filled-in
    one's content is kept. Block-level content controls stay (``_body_items`` walks them).
    Before this, a tracked insertion, a form's filled-in values and simple fields' results were
    lost and nothing else. Done on the loaded tree; nothing is saved."""
    for el in list(root.iter(*_REVISION_REMOVED)):
        parent = el.getparent()
        if parent is None:
            continue
        row = parent.getparent() if parent.tag == qn("w:trPr") else None
        if row is not None and row.getparent() is not None:
            row.getparent().remove(row)  # a deleted table row
        else:
            parent.remove(el)  # deleted runs, or only the mark of a deleted paragraph mark
    for el in list(root.iter(*_INLINE_WRAPPERS)):
        parent = el.getparent()
        if parent is None:
            continue
        if el.tag == qn("w:sdt"):
            if el.find(f"{qn('w:sdtPr')}/{qn('w:showingPlcHdr')}") is not None:
                parent.remove(el)
                continue
            content = el.find(qn("w:sdtContent"))
            if content is None or any(c.tag in _BLOCKS for c in content):
                continue  # a block, row or cell content control: _body_items and _children walk it
            _unwrap(el, parent)  # its sdtContent now stands in its place
            el = content
        _unwrap(el, parent)


def _unwrap(el, parent) -> None:  # type: ignore[no-untyped-def]
    """Put ``el``'s children (less its own properties) in its place."""
    for child in reversed([c for c in el if c.tag not in _WRAPPER_PROPERTIES]):
        el.addnext(child)
    parent.remove(el)


_NOTE_PARTS = {"footnotes": (qn("w:footnote"), qn("w:footnoteReference")), "endnotes": (qn("w:endnote"), qn("w:endnoteReference"))}


def _inline_notes(part, body) -> None:  # type: ignore[no-untyped-def]
    """Put each footnote's and endnote's text, in brackets, where it is cited (as the OpenDocument
    reader does): a note qualifies its sentence ("30 minutes (at full load)"), and python-docx's
    text leaves notes out. Done on the loaded tree, so every text path (paragraphs, cells, text
    boxes) sees it; nothing is saved."""
    for rel in part.rels.values():
        kind = rel.reltype.rsplit("/", 1)[-1]
        if kind not in _NOTE_PARTS or rel.is_external:
            continue
        note_tag, reference_tag = _NOTE_PARTS[kind]
        try:
            root = parse_xml(rel.target_part.blob)
        except etree.XMLSyntaxError:  # a damaged notes part costs the notes, not the document
            continue
        _as_shown(root)
        notes = {
            note.get(qn("w:id")): squash(" ".join(p.text for p in note.iter(qn("w:p"))))
            for note in root.iter(note_tag)
            if note.get(qn("w:type")) in (None, "normal")  # not the separator lines
        }
        for reference in body.iter(reference_tag):
            if notes.get(reference.get(qn("w:id"))):
                text = OxmlElement("w:t")
                text.text = f" ({notes[reference.get(qn('w:id'))]})"
                text.set("{http://www.w3.org/XML/1998/namespace}space", "preserve")
                reference.addnext(text)


_BLIP = "{http://schemas.openxmlformats.org/drawingml/2006/main}blip"
_IMAGE_DATA = "{urn:schemas-microsoft-com:vml}imagedata"
_EMBED, _VML_ID = qn("r:embed"), qn("r:id")


def _pictures(p, part) -> list[bytes]:  # type: ignore[no-untyped-def]
    """The image bytes of a paragraph's pictures (DrawingML or VML image data; a text box or a
    shape is none), in order, each once (a VML fallback's copy skipped)."""
    out = []
    for el in p.iter(_BLIP, _IMAGE_DATA):
        rid = el.get(_EMBED) if el.tag == _BLIP else el.get(_VML_ID)
        if rid and rid in part.related_parts and not any(a.tag == _FALLBACK for a in el.iterancestors()):
            out.append(part.related_parts[rid].blob)
    return out


def _add_picture_text(builder: BlockBuilder, pictures: PictureReader, el, part) -> None:  # type: ignore[no-untyped-def]
    for blob in _pictures(el, part):
        pictures.add_text(builder, blob)


_CHART = "{http://schemas.openxmlformats.org/drawingml/2006/chart}chart"
_DIAGRAM_IDS = "{http://schemas.openxmlformats.org/drawingml/2006/diagram}relIds"  # a SmartArt graphic's parts
_DIAGRAM_DATA = qn("r:dm")
_OLE_OBJECT = "{urn:schemas-microsoft-com:office:office}OLEObject"  # an embedded object (w:object)
_ALT_CHUNK = qn("w:altChunk")
# An altChunk part's format when its name does not say (html-docx-js names it afchunk.mht)
_ALT_CHUNK_TYPES = {"application/xhtml+xml": ".html", "text/html": ".html", "message/rfc822": ".mht",
                    "application/rtf": ".rtf", "text/rtf": ".rtf", "text/plain": ".txt"}
MAX_ALT_CHUNK_DEPTH = 3  # a chunk that is a .docx importing a .docx...: no deeper than this
_alt_chunk_depth = 0


def _add_alt_chunk(builder: BlockBuilder, chunk, part, ocr_lang: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Content a Word document imports from a part of its own (``w:altChunk``: HTML, MHT, RTF, text
    or another .docx, which Word shows in its place; documents generated from HTML, such as by
    html-docx-js, are nothing else), read by that format's reader where it stands. Returns notes."""
    global _alt_chunk_depth
    from rag_pipeline.ingest.parsers import SUPPORTED_EXTENSIONS

    rel = part.rels.get(chunk.get(_VML_ID))
    if rel is None or rel.is_external or _alt_chunk_depth >= MAX_ALT_CHUNK_DEPTH:
        return ["imported content (altChunk): not read (missing, linked or nested too deep)"]
    held = rel.target_part
    ext = f".{held.partname.ext}".lower()
    ext = ext if ext in SUPPORTED_EXTENSIONS else _ALT_CHUNK_TYPES.get(held.content_type.split(";")[0], "")
    if not ext:
        return [f"imported content (altChunk) {held.content_type}: not read (no format this pipeline reads)"]
    try:
        _alt_chunk_depth += 1
        doc = parse_bytes(held.blob, ext, ocr_lang)
    except UnreadableDocument as exc:
        return [f"imported content (altChunk) {ext}: not read ({exc.reason}: {exc.detail})"[:300]]
    finally:
        _alt_chunk_depth -= 1
    builder.blocks.extend(replace(b, heading_path=(*builder.heading_path, *b.heading_path), page=None) for b in doc.blocks)
    return []


def _add_objects(builder: BlockBuilder, el, part, ocr_lang: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The worksheets and documents embedded as objects in a paragraph or table (the page shows
    a picture of them), each read as the file it is (ingest.embedded), after it. Returns notes."""
    notes = []
    for ole in el.iter(_OLE_OBJECT):
        rel = part.rels.get(ole.get(_VML_ID))
        if rel is None or rel.is_external:  # a linked file: not in the document
            notes.append(f"embedded object {ole.get('ProgID') or ''}: not read (linked, not embedded)")
            continue
        held = rel.target_part
        notes.append(add_office_object(builder, held.blob, f".{held.partname.ext}", ole.get("ProgID") or "", ocr_lang))
    return notes


def _add_graphics(builder: BlockBuilder, el, part) -> int:  # type: ignore[no-untyped-def]
    """The charts and SmartArt graphics drawn in a paragraph or table, after it: a chart as its
    title and data rows (ingest.charts), a SmartArt graphic as its boxes (ingest.diagrams).
    Returns how many could not be read (a damaged or missing part)."""
    damaged = 0
    for graphic in el.iter(_CHART, _DIAGRAM_IDS):
        try:
            if graphic.tag == _CHART:
                add_chart(builder, part.rels[graphic.get(_VML_ID)].target_part.blob)
            else:
                for line in diagram_lines(part.rels[graphic.get(_DIAGRAM_DATA)].target_part.blob):
                    builder.add(line, "list_item")
        except (etree.XMLSyntaxError, KeyError, ValueError):
            damaged += 1
    return damaged


def _children(el, tag: str) -> Iterator:  # type: ignore[no-untyped-def]
    """Direct children with ``tag``, looking through content-control wrappers."""
    for child in el.iterchildren():
        if child.tag == tag:
            yield child
        elif child.tag == qn("w:sdt"):
            content = child.find(qn("w:sdtContent"))
            if content is not None:
                yield from _children(content, tag)
        elif child.tag in _CONTAINERS:
            yield from _children(child, tag)


def _is_toc(sdt) -> bool:  # type: ignore[no-untyped-def]
    """A table-of-contents content control: page-number boilerplate, not content."""
    gallery = sdt.find(f"{qn('w:sdtPr')}/{qn('w:docPartObj')}/{qn('w:docPartGallery')}")
    return gallery is not None and "content" in (gallery.get(qn("w:val")) or "").lower()


def _body_items(el) -> Iterator:  # type: ignore[no-untyped-def]
    """Paragraph, table and imported-content (altChunk) elements of a body or cell, in document order."""
    for child in el.iterchildren():
        if child.tag in (qn("w:p"), qn("w:tbl"), _ALT_CHUNK):
            yield child
        elif child.tag == qn("w:sdt"):
            if not _is_toc(child):
                content = child.find(qn("w:sdtContent"))
                if content is not None:
                    yield from _body_items(content)
        elif child.tag in _CONTAINERS:
            yield from _body_items(child)


def _style_chain(par: Paragraph, chains: dict) -> list:  # type: ignore[type-arg]
    """The paragraph's style and its bases, memoized in ``chains`` by style id: python-docx
    resolves a paragraph without an explicit style by scanning every style of the document,
    which made a long document of plain paragraphs take minutes."""
    key = par._p.style
    if key in chains:
        return chains[key]
    chain, style = [], None
    try:
        style = par.style
    except Exception:  # dangling style id
        style = None
    while style is not None and len(chain) < 8:
        chain.append(style)
        style = style.base_style
    chains[key] = chain
    return chain


def _outline_level(ppr) -> int | None:  # type: ignore[no-untyped-def]
    if ppr is None:
        return None
    el = ppr.find(qn("w:outlineLvl"))
    if el is None:
        return None
    try:
        level = int(el.get(qn("w:val")))
    except (TypeError, ValueError):
        return None
    return level + 1 if level < 9 else None  # 9 = body text


def _heading_level(par: Paragraph, chains: dict) -> int | None:
    """0 for a Title, 1-9 for a heading, None for body text.

    Recognised by style name (English or Chinese "标题 N", including base styles) or by
    an outline level on the paragraph or its style, which is how localized and custom
    heading styles mark themselves.
    """
    direct = _outline_level(par._p.pPr)
    if direct is not None:
        return direct
    for style in _style_chain(par, chains):
        name = (style.name or "").strip()
        if name.lower() == "title" or name == "标题":
            return 0
        m = _HEADING_STYLE.match(name)
        if m:
            return int(m.group(2))
        level = _outline_level(style.element.pPr)
        if level is not None:
            return level
    return None


def _formatted_heading_level(par: Paragraph, text: str) -> int | None:
    """Heading typed as bold, big text in a "Normal" paragraph (common in real documents).

    Only short paragraphs without sentence punctuation, fully bold and explicitly sized
    14pt or more, qualify (plain bold at body size is emphasis, not structure); size
    picks the level (>= 20pt: 1, else 2).
    """
    if len(text) > 100 or text.endswith(_TERMINAL):
        return None
    runs = [r for r in par.runs if r.text.strip()]
    if not runs or not all(r.bold for r in runs):
        return None
    sizes = [r.font.size.pt for r in runs if r.font.size is not None]
    size = max(sizes) if sizes else 0
    if size < 14:
        return None
    return 1 if size >= 20 else 2


def _is_list_item(par: Paragraph, chains: dict) -> bool:
    ppr = par._p.pPr
    if ppr is not None and ppr.find(qn("w:numPr")) is not None:
        return True
    for style in _style_chain(par, chains):
        if (style.name or "").lower().startswith("list"):
            return True
        spp = style.element.pPr
        if spp is not None and spp.find(qn("w:numPr")) is not None:
            return True
    return False


def _list_of(par: Paragraph, chains: dict) -> tuple[str, int] | None:
    """(numId, level) of the numbered list a paragraph belongs to, from its own ``w:numPr`` or its
    style's (a paragraph may give only the level, its style the list); None when not numbered
    (``numId`` 0 switches a style's numbering off)."""
    num_id, level = None, None
    for ppr in [par._p.pPr, *(style.element.pPr for style in _style_chain(par, chains))]:
        numpr = ppr.find(qn("w:numPr")) if ppr is not None else None
        if numpr is None:
            continue
        found_id, found_level = numpr.find(qn("w:numId")), numpr.find(qn("w:ilvl"))
        num_id = num_id if num_id is not None or found_id is None else found_id.get(qn("w:val"))
        level = level if level is not None or found_level is None else found_level.get(qn("w:val"))
        if num_id is not None and level is not None:
            break
    if not num_id or num_id == "0":
        return None
    try:
        return num_id, int(level or 0)
    except ValueError:
        return num_id, 0


def _cell_text(tc, parent) -> str:  # type: ignore[no-untyped-def]
    parts = []
    for item in _body_items(tc):
        if item.tag == qn("w:p"):
            parts.append(Paragraph(item, parent).text)
            parts.extend(_text_box_paragraphs(item, parent))
        elif item.tag == qn("w:tbl"):  # nested table, flattened
            parts.extend(" | ".join(c for c in row if c) for row in _table_rows(item, parent))
    return "\n".join(p for p in parts if p.strip())


def _table_rows(tbl, parent) -> list[list[str]]:  # type: ignore[no-untyped-def]
    """Cell texts per row on the table grid.

    A horizontally merged cell (gridSpan) fills its first column and leaves the others
    empty; a vertically merged continuation repeats the value above, so each row still
    carries it after folding.
    """
    rows: list[list[str]] = []
    previous: list[str] = []
    for tr in _children(tbl, qn("w:tr")):
        row: list[str] = []
        for tc in _children(tr, qn("w:tc")):
            tcpr = tc.find(qn("w:tcPr"))
            span, continuation = 1, False
            if tcpr is not None:
                grid = tcpr.find(qn("w:gridSpan"))
                if grid is not None:
                    try:
                        span = max(1, int(grid.get(qn("w:val"))))
                    except (TypeError, ValueError):
                        span = 1
                vmerge = tcpr.find(qn("w:vMerge"))
                continuation = vmerge is not None and vmerge.get(qn("w:val")) in (None, "continue")
            col = len(row)
            text = (previous[col] if col < len(previous) else "") if continuation else _cell_text(tc, parent)
            row.append(text)
            row.extend([""] * (span - 1))
        rows.append(row)
        previous = row
    return rows


def parse_docx(path: Path, *, ocr_lang: str = "eng+chi_sim") -> ParsedDocument:
    """Parse a .docx into heading, paragraph, list_item and table_row blocks; a text box's
    paragraphs follow the paragraph it is anchored in, a note's text is in brackets where cited.

    Broken packages (not a zip, missing or malformed [Content_Types].xml) raise from
    python-docx and are reported as corrupt by the dispatcher. Embedded pictures are OCR'd
    (ingest.pictures): their text follows the paragraph holding them, as ``ocr_text`` blocks
    with their confidence, for triage to judge paragraph by paragraph. A chart's title and data
    follow it as table rows (ingest.charts), a SmartArt graphic's boxes as list items (ingest.diagrams),
    an embedded worksheet's or document's content as that file's (ingest.embedded).
    """
    part = Package.open(str(path)).main_document_part  # docx.Document() refuses all but .docx's content type
    if not isinstance(part, DocumentPart):
        raise UnreadableDocument("corrupt", f"not a Word package: its main part is {part.content_type}")
    document = part.document
    body = document.element.body
    parent = document._body
    _as_shown(body)
    _inline_notes(part, body)
    pictures = PictureReader(ocr_lang)
    builder = BlockBuilder()
    title: str | None = None
    chains: dict = {}
    try:
        numbering = Numbering(part.part_related_by(RT.NUMBERING).blob)
    except KeyError:  # no numbering part: no list numbers
        numbering = Numbering(None)
    damaged_graphics = 0
    objects: list[str] = []  # what each embedded object gave
    for item in _body_items(body):
        if item.tag == _ALT_CHUNK:
            objects += _add_alt_chunk(builder, item, part, ocr_lang)
            continue
        if item.tag == qn("w:tbl"):
            builder.add_table(_table_rows(item, parent))
            _add_picture_text(builder, pictures, item, part)
            damaged_graphics += _add_graphics(builder, item, part)
            objects += _add_objects(builder, item, part, ocr_lang)
            continue
        par = Paragraph(item, parent)
        listed = _list_of(par, chains)
        label = numbering.label(*listed) if listed else ""  # counted even on an empty paragraph, as Word does
        shown = f"{label} {par.text}" if label and squash(par.text) else par.text
        text = squash(shown)
        if text:
            level = _heading_level(par, chains)
            if level is None and not _is_list_item(par, chains):
                level = _formatted_heading_level(par, text)
            if level == 0:
                title = title or text
                builder.add(text, "title")
            elif level is not None:
                builder.heading(text, level)
            elif _is_list_item(par, chains):
                builder.add(shown, "list_item")
            else:
                builder.add(shown)
        for box_text in _text_box_paragraphs(item, parent):  # after the paragraph they are anchored in
            builder.add(box_text)
        _add_picture_text(builder, pictures, item, part)  # a picture's text (a pasted scan, a screenshot) after it too
        damaged_graphics += _add_graphics(builder, item, part)  # a chart's figures, a SmartArt's boxes, likewise
        objects += _add_objects(builder, item, part, ocr_lang)  # an embedded worksheet's rows, likewise
    try:  # without docProps/core.xml, python-docx makes one up, titled "Word Document"
        part.package.part_related_by(RT.CORE_PROPERTIES)
        core_title = (document.core_properties.title or "").strip() or None
    except KeyError:
        core_title = None
    return make_document(
        builder,
        format="docx",
        parser="python-docx",
        title=title or builder.first_heading or next((b.text for b in builder.blocks if b.kind in ("title", "heading")), None) or core_title,
        **pictures.metadata(objects + ([f"{damaged_graphics} chart(s) or SmartArt graphic(s) not extracted (damaged or missing part)"] if damaged_graphics else [])),
    )
