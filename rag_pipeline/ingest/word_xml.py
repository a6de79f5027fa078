"""Word 2003 XML ("WordprocessingML"): one XML file, `<?mso-application progid="Word.Document"?>`.

Word's "Save as XML Document" writes it, and so do office-automation systems and WPS when they
export a "Word document": many save it under `.doc`, which Word opens by its content. Read into the
blocks the `.docx` reader gives: headings from the built-in heading styles or an outline level, the
Title style's paragraph as the title, list items, table rows on the column grid (a cell spanning
columns fills the first and leaves the rest empty, a cell merged down takes the text above: the
rule of the `.docx`, `.doc` and RTF readers).
Field codes, deleted text and comments are left out; a footnote's or endnote's text is put in
brackets where it is cited (the `.odt` and `.docx` readers' rule), a text box's paragraphs follow
the paragraph it is anchored in.
"""

from __future__ import annotations

import re
from pathlib import Path

from lxml import etree

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.table_grid import RowLayout, grid_rows
from rag_pipeline.ingest.textutil import squash

_W = "http://schemas.microsoft.com/office/word/2003/wordml"
_NS = {"w": _W, "o": "urn:schemas-microsoft-com:office:office"}
_SKIP = {
    f"{{{_W}}}{name}"
    for name in ("instrText", "delText", "annotation", "pPr", "rPr", "tblPr", "tcPr", "trPr", "txbxContent")
}
_HEADING_NAME = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)
_NOTES = {f"{{{_W}}}footnote", f"{{{_W}}}endnote"}
_NOT_WORD_XML = "an XML file that is not a Word or Excel 2003 XML document (w:wordDocument, ss:Workbook)"
_MARKER = re.compile(rb"progid=[\"']Word\.Document[\"']|schemas\.microsoft\.com/office/word/2003/wordml")


def looks_like_word_xml(head: bytes) -> bool:
    """Whether a file's first bytes are a Word 2003 XML document's."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"<") and bool(_MARKER.search(head))


def _w(name: str) -> str:
    return f"{{{_W}}}{name}"


def _val(el: etree._Element | None) -> str | None:
    return None if el is None else el.get(_w("val"))


def _text(el: etree._Element) -> str:
    """A paragraph's (or cell's) text: its runs' text, tabs and breaks, a footnote's or endnote's
    text in brackets; properties, field codes, deleted text, comments and text boxes left out
    (their subtrees are not entered)."""
    parts: list[str] = []
    for node in el:
        if node.tag in _SKIP:
            continue
        if node.tag == _w("t") and node.text:
            parts.append(node.text)
        elif node.tag == _w("tab"):
            parts.append("\t")
        elif node.tag in (_w("br"), _w("cr")):
            parts.append("\n")
        elif node.tag in _NOTES:  # written where it is cited: in brackets, as the .odt/.docx readers put it
            note = squash(" ".join(_text(p) for p in node.iter(_w("p"))))
            parts.append(f" ({note})" if note else "")
        else:
            parts.append(_text(node))
    return "".join(parts)


def _outline_level(properties: etree._Element | None) -> int | None:
    """A heading level from paragraph properties' outline level (0-8 -> 1-9; 9 is body text)."""
    outline = _val(properties.find("w:outlineLvl", _NS)) if properties is not None else None
    return int(outline) + 1 if outline is not None and outline.isdigit() and int(outline) < 9 else None


_ENCODED = re.compile(r"_([0-9a-fA-F]{2})_")  # LibreOffice writes "Heading 1" as "Heading_20_1"


def _heading_styles(root: etree._Element) -> dict[str, int]:
    """Style id -> heading level: the built-in heading styles (Word names them in English whatever
    the user's language; a localized name is only the wx:uiName), a style's own outline level, and
    styles based on either (LibreOffice writes its headings as automatic styles "P16" based on
    "Heading_20_1"); 0 for Title."""
    own: dict[str, int] = {}
    based_on: dict[str, str] = {}
    for style in root.iterfind("w:styles/w:style", _NS):
        style_id = style.get(_w("styleId")) or ""
        name = _ENCODED.sub(lambda m: chr(int(m.group(1), 16)), _val(style.find("w:name", _NS)) or "").strip()
        match = _HEADING_NAME.match(name)
        outline = _outline_level(style.find("w:pPr", _NS))
        if match or name.lower() == "title":
            own[style_id] = int(match.group(1)) if match else 0
        elif outline is not None:
            own[style_id] = outline
        parent = _val(style.find("w:basedOn", _NS))
        if parent:
            based_on[style_id] = parent
    levels = {}
    for style_id in set(own) | set(based_on):
        current, seen = style_id, set()
        while current not in own and current in based_on and current not in seen:
            seen.add(current)
            current = based_on[current]
        if current in own:
            levels[style_id] = own[current]
    return levels


def _anchored_boxes(p: etree._Element) -> list[etree._Element]:
    """The text boxes anchored in a paragraph itself (not those inside one of its boxes)."""
    return [box for box in p.iter(_w("txbxContent")) if next(box.iterancestors(_w("p")), None) is p]


def _cell_paragraphs(el: etree._Element):  # type: ignore[no-untyped-def]
    """A cell's paragraphs in order, a nested table's and a text box's included (their text joins
    the cell's); not a note's (its text is read, in brackets, with the paragraph citing it)."""
    for child in el:
        if child.tag == _w("p"):
            yield child
            for box in _anchored_boxes(child):  # a text box's paragraphs after the one it is anchored in
                yield from _cell_paragraphs(box)
        elif child.tag not in _SKIP:
            yield from _cell_paragraphs(child)


def _grid_span(properties: etree._Element | None, name: str) -> int:
    """A cell's or row's span in grid columns (w:gridSpan, w:gridBefore), capped at 64."""
    value = _val(properties.find(f"w:{name}", _NS)) if properties is not None else None
    return max(0, min(int(value), 64)) if value is not None and value.isdigit() else 0


def _rows(table: etree._Element) -> list[list[str]]:
    """A table's rows on its column grid: laid out by each cell's grid span (and the columns a row
    skips before its first cell) and put back by the rule every Word reader here shares."""
    rows: list[tuple[list[str], RowLayout]] = []
    for tr in table.iterfind("w:tr", _NS):
        cells: list[str] = []
        edges = [_grid_span(tr.find("w:trPr", _NS), "gridBefore")]
        above: list[bool] = []
        for tc in tr.iterfind("w:tc", _NS):
            properties = tc.find("w:tcPr", _NS)
            merge = properties.find("w:vmerge", _NS) if properties is not None else None
            cells.append("\n".join(t for t in (_text(p).strip() for p in _cell_paragraphs(tc)) if t))  # as the .docx reader
            edges.append(edges[-1] + max(1, _grid_span(properties, "gridSpan")))
            above.append(merge is not None and _val(merge) != "restart")
        rows.append((cells, RowLayout(tuple(edges), tuple(above), (False,) * len(cells))))
    return grid_rows(rows)


class _Walker:
    def __init__(self, builder: BlockBuilder, heading_styles: dict[str, int]) -> None:
        self.builder, self.heading_styles = builder, heading_styles
        self.title: str | None = None  # the first Title paragraph, as the .docx reader takes it

    def walk(self, el: etree._Element) -> None:
        for child in el:
            if child.tag == _w("p"):
                self._paragraph(child)
            elif child.tag == _w("tbl"):
                self.builder.add_table(_rows(child))
            elif child.tag not in _SKIP and child.tag != _w("sectPr"):
                self.walk(child)  # wx:sect, wx:sub-section, w:sdt, w:hlink and other containers

    def _paragraph(self, p: etree._Element) -> None:
        properties = p.find("w:pPr", _NS)
        text = _text(p)
        level = None
        if properties is not None:
            level = self.heading_styles.get(_val(properties.find("w:pStyle", _NS)) or "")
            level = _outline_level(properties) if level is None else level
        if level == 0:
            self.title = self.title or text.strip() or None
            self.builder.add(text, "title")
        elif level is not None:
            self.builder.heading(text, level)
        elif properties is not None and properties.find("w:listPr", _NS) is not None:
            self.builder.add(text, "list_item")
        else:
            self.builder.add(text)
        for box in _anchored_boxes(p):  # a text box's paragraphs follow the one it is anchored in
            self.walk(box)


def parse_word_xml(path: Path) -> ParsedDocument:
    """Parse a Word 2003 XML document (whatever its name: .xml, .doc); any other XML is refused
    by its first bytes, before it is parsed (a folder may hold large data or config XML)."""
    with open(path, "rb") as f:
        if not looks_like_word_xml(f.read(4096)):
            raise UnreadableDocument("unsupported_format", _NOT_WORD_XML)
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    try:
        root = etree.parse(str(path), parser).getroot()
    except etree.XMLSyntaxError as exc:
        raise UnreadableDocument("corrupt", f"Word 2003 XML that does not parse: {exc}") from exc
    body = root.find("w:body", _NS)
    if root.tag != _w("wordDocument") or body is None:
        raise UnreadableDocument("unsupported_format", _NOT_WORD_XML)
    builder = BlockBuilder()
    walker = _Walker(builder, _heading_styles(root))
    walker.walk(body)
    stored = (root.findtext("o:DocumentProperties/o:Title", namespaces=_NS) or "").strip() or None
    return make_document(builder, format="wordml", parser="lxml", title=walker.title or builder.first_heading or stored)
