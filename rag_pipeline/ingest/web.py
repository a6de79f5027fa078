"""HTML via BeautifulSoup: boilerplate dropped, headings drive heading_path.

The walker is a small "text flow" model of how a browser lays text out: block
elements end a paragraph, ``<br>`` breaks a line and two in a row break a paragraph
(old table-layout pages have no ``<p>`` at all), data tables become folded rows and
layout tables are read as ordinary containers.
"""

from __future__ import annotations

import email
import email.policy
import re
import warnings
from pathlib import Path

from bs4 import (
    BeautifulSoup,
    Comment,
    Declaration,
    Doctype,
    NavigableString,
    ProcessingInstruction,
    Tag,
    XMLParsedAsHTMLWarning,
)

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import BlockKind, ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.encoding import decode_bytes, encoding_notes
from rag_pipeline.ingest.language import CJK_CLASS
from rag_pipeline.ingest.textutil import clean_text, squash

# Never content.
_DROP_TAGS = {
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "embed",
    "head", "title", "meta", "link", "button", "select", "option", "textarea", "input", "form",
    "map", "area", "audio", "video", "picture", "source",
}
# Page chrome around the content.
_BOILERPLATE_TAGS = {"nav", "header", "footer", "aside"}
_BOILERPLATE_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search", "menu", "menubar"}
# Class/id tokens of chrome in div-based layouts (tokens split on space, - and _).
_BOILERPLATE_TOKENS = {
    "nav", "navbar", "navigation", "menu", "footer", "sidebar", "breadcrumb", "breadcrumbs",
    "share", "social", "advert", "advertisement", "ads", "cookie", "cookies", "banner",
    "copyright", "toolbar", "skip", "jump", "catlinks", "printfooter", "navbox", "topbar",
}
# Containers whose text is mostly link text are menus, tag clouds and "related" lists.
_LINK_LIST_TAGS = {"ul", "ol", "div", "table", "p", "section", "span", "dl", "td"}
_MIN_LINKS = 3
_MAX_LINK_SHARE = 0.7
_NEVER_DROP = {"html", "body", "main", "article"}
_HAS_WORD = re.compile(r"[^\W_]")  # a letter or digit: separators ("|", "·", "»") are not text
_BLOCK_TAGS = {
    "p", "div", "section", "article", "main", "body", "html", "blockquote", "ul", "ol", "dl",
    "dt", "dd", "table", "thead", "tbody", "tfoot", "tr", "td", "th", "caption", "figure",
    "figcaption", "hr", "address", "center", "fieldset", "details", "summary", "legend",
    "header", "footer", "nav", "aside", "li", "pre", "h1", "h2", "h3", "h4", "h5", "h6",
}
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
# Real pages nest at most ~20 elements deep. Below this depth content is read as plain text:
# recursing further would hit Python's recursion limit, and the boilerplate test (a scan of
# the subtree) at every level makes a 100k-deep chain of <div>s quadratic.
_MAX_DEPTH = 100
_BR = "\u2028"  # marks <br> in the flow buffer; never present in collapsed source text
_CJK_NEWLINE = re.compile(f"(?<=[{CJK_CLASS}])[ \\t\\r]*\\n\\s*(?=[{CJK_CLASS}])")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)


def _is_boilerplate(tag: Tag, drop_by_class: bool) -> bool:
    if tag.name in _NEVER_DROP:
        return False
    if tag.name in _BOILERPLATE_TAGS:
        # <header>/<footer> inside an article hold its title and byline: content.
        return tag.name in ("nav", "aside") or tag.find_parent(["article", "main"]) is None
    attrs = tag.attrs or {}
    if str(attrs.get("role", "")).lower() in _BOILERPLATE_ROLES:
        return True
    if attrs.get("aria-hidden") == "true" or "hidden" in attrs:
        return True
    style = str(attrs.get("style", "")).replace(" ", "").lower()
    if "display:none" in style:
        return True
    if not drop_by_class:
        return False
    classes = attrs.get("class") or []
    names = " ".join(classes if isinstance(classes, list) else [classes]) + " " + str(attrs.get("id", ""))
    names = re.sub(r"([a-z])([A-Z])", r"\1 \2", names)  # headtopNav -> headtop Nav
    tokens = set(re.split(r"[\s_\-]+", names.lower()))
    if tokens & _BOILERPLATE_TOKENS:
        return True
    return tag.name in _LINK_LIST_TAGS and _is_link_list(tag)


def _is_link_list(tag: Tag) -> bool:
    """Mostly link text: a menu, tag cloud or "related" list. Links that are cells of a record
    table (see ``_is_record_table``: a table of contents) are content, not menu links: they
    count as the container's other text."""
    links = tag.find_all("a", limit=200)
    if not _mostly_links(tag, links):
        return False
    tables = ([tag] if tag.name == "table" else []) + tag.find_all("table")
    records = {id(t) for t in tables if t.find("a") is not None and _is_record_table(t)}
    if not records:
        return True
    return _mostly_links(tag, [a for a in links if id(a.find_parent("table")) not in records])


def _mostly_links(tag: Tag, links: list[Tag]) -> bool:
    if len(links) < _MIN_LINKS:
        return False
    total = len(tag.get_text("", strip=True))
    linked = sum(len(a.get_text("", strip=True)) for a in links)
    return total > 0 and linked >= _MAX_LINK_SHARE * total


def _is_record_row(tr: Tag) -> bool:
    """Each link of the row stands beside a cell of its own text (a word or number outside any
    link): "Item 7. | <a>Management's Discussion</a> | 12". A menu row is links and separators
    only; a navbox row is one label beside many links."""
    cells = tr.find_all(["td", "th"], recursive=False)
    text_cells = sum(1 for c in cells if c.find("a") is None and _HAS_WORD.search(c.get_text()))
    return text_cells > 0 and len(tr.find_all("a")) <= text_cells


def _is_record_table(table: Tag) -> bool:
    """A data table whose link rows are records (table of contents with item numbers and page
    numbers, a list of filings with dates): kept as a table however much of its text is links."""
    if not _is_data_table(table):
        return False
    linked_rows = [tr for tr in table.find_all("tr") if tr.find("a") is not None]
    records = sum(1 for tr in linked_rows if _is_record_row(tr))
    return records >= 2 and 2 * records >= len(linked_rows)


def _is_data_table(table: Tag) -> bool:
    """Tables used for layout (nested tables, long prose cells, one column) are not data."""
    if table.find("table") is not None or str(table.get("role", "")).lower() == "presentation":
        return False
    rows = table.find_all("tr")
    multi = [r for r in rows if len(r.find_all(["td", "th"], recursive=False)) >= 2]
    if len(multi) < 2 and not (rows and table.find("th")):
        return False
    return all(len(cell.get_text(" ", strip=True)) <= 400 for cell in table.find_all(["td", "th"]))


def _cell_text(cell: Tag) -> str:
    return squash(_CJK_NEWLINE.sub("", cell.get_text(" ")))


def _span(cell: Tag) -> int:
    try:
        return max(1, min(50, int(str(cell.get("colspan", "1")).strip() or 1)))
    except ValueError:
        return 1


def _table_rows(table: Tag) -> tuple[list[str] | None, list[list[str]]]:
    """Header from leading all-``<th>`` rows (stacked headers joined with " / "), data rows
    on the column grid (colspan expanded). A row led by a ``<th>`` label ("Kingdom:" |
    "Animalia") becomes one "label: value" cell. Without ``<th>`` there is no header:
    guessing one from ``<td>`` rows mislabels the layout-ish tables common in HTML.
    """
    header: list[str] | None = None
    rows: list[list[str]] = []
    for tr in table.find_all("tr"):
        cells = tr.find_all(["td", "th"], recursive=False)
        if not cells:
            continue
        if not rows and len(cells) >= 2 and all(c.name == "th" for c in cells):
            grid = [_cell_text(c) for c in cells for _ in range(_span(c))]
            header = grid if header is None else [f"{a} / {b}" if a and b and a != b else a or b for a, b in zip(header, grid)]
            continue
        if cells[0].name == "th" and len(cells) >= 2 and all(c.name == "td" for c in cells[1:]) and header is None:
            label = _cell_text(cells[0]).rstrip(":：")
            rows.append([f"{label}: " + "; ".join(t for t in (_cell_text(c) for c in cells[1:]) if t)])
            continue
        row: list[str] = []
        for c in cells:
            row.append(_cell_text(c))
            row.extend([""] * (_span(c) - 1))
        rows.append(row)
    return header, rows


class _Walker:
    def __init__(self, builder: BlockBuilder, drop_by_class: bool) -> None:
        self.builder = builder
        self.drop_by_class = drop_by_class
        self.buffer: list[str] = []
        self.kind: list[BlockKind] = ["paragraph"]
        self.first_h1: str | None = None

    def flush(self) -> None:
        raw = "".join(self.buffer)
        self.buffer = []
        if not raw.strip():
            return
        raw = _CJK_NEWLINE.sub("", raw)
        raw = re.sub(r"[ \t\r\n\f\v]+", " ", raw)  # source whitespace collapses, like a browser
        for para in re.split(f"(?:[ ]*{_BR}[ ]*){{2,}}", raw):
            text = clean_text(para.replace(_BR, "\n"))
            if text:
                self.builder.add(text, self.kind[-1])

    def walk(self, node: Tag, depth: int = 0) -> None:
        for child in node.children:
            if isinstance(child, (Comment, Doctype, Declaration, ProcessingInstruction)):
                continue
            if isinstance(child, NavigableString):
                self.buffer.append(str(child))
                continue
            if not isinstance(child, Tag):
                continue
            name = (child.name or "").lower()
            if name in _DROP_TAGS:
                continue
            if depth >= _MAX_DEPTH:
                self.buffer.append(child.get_text(" "))
                continue
            if _is_boilerplate(child, self.drop_by_class):
                continue
            if name == "br":
                self.buffer.append(_BR)
            elif name in _HEADINGS:
                self.flush()
                text = _cell_text(child)
                if name == "h1" and self.first_h1 is None and text:
                    self.first_h1 = text
                self.builder.heading(text, _HEADINGS[name])
            elif name == "pre":
                self.flush()
                self.builder.add(child.get_text(), "paragraph")
            elif name == "table" and _is_data_table(child):
                self.flush()
                caption = child.find("caption")
                if caption is not None:
                    self.builder.add(_cell_text(caption))
                header, rows = _table_rows(child)
                self.builder.add_table(rows, header=header)
            elif name == "li":
                self.flush()
                self.kind.append("list_item")
                self.walk(child, depth + 1)
                self.flush()
                self.kind.pop()
            elif name in _BLOCK_TAGS:
                self.flush()
                self.walk(child, depth + 1)
                self.flush()
            else:
                self.walk(child, depth + 1)


def _declared_charset(data: bytes) -> str | None:
    m = _META_CHARSET.search(data[:4096])
    return m.group(1).decode("ascii", errors="ignore") if m else None


def blocks_from_html(html: str, builder: BlockBuilder, *, drop_by_class: bool = True) -> tuple[BeautifulSoup, str | None]:
    """Walk ``html`` into ``builder``; returns the soup and the first content ``<h1>``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", XMLParsedAsHTMLWarning)  # XHTML is fine to read as HTML
        soup = BeautifulSoup(html, "lxml")
    walker = _Walker(builder, drop_by_class)
    walker.walk(soup)
    walker.flush()
    return soup, walker.first_h1


def parse_html(path: Path) -> ParsedDocument:
    """Parse an HTML page into heading/paragraph/list_item/table_row blocks.

    Charset: BOM, then ``<meta charset>``, then detection (Windows-1252 and GBK pages
    without a declaration are common). Dropped as boilerplate: script/style, nav,
    header and footer outside an article, aside, ARIA navigation roles, hidden elements,
    div chrome whose class or id says nav/menu/footer/sidebar/breadcrumb/share/ads, and
    containers whose text is mostly link text (menus, "related articles" lists). A data table
    whose link rows carry their own text beside each link (a table of contents: item number,
    linked title, page number) is not a menu: it is kept as table rows.
    Title: first ``<h1>``, then ``<title>``, then the first heading, then the file name.
    """
    data = path.read_bytes()
    text, encoding = decode_bytes(data, declared=_declared_charset(data))
    builder = BlockBuilder()
    soup, first_h1 = blocks_from_html(text, builder)
    page_title = soup.title.get_text(" ", strip=True) if soup.title else None
    return make_document(
        builder,
        format="html",
        parser="beautifulsoup",
        title=first_h1 or page_title or builder.first_heading,
        warnings=encoding_notes(encoding),
    )


def parse_mhtml(path: Path) -> ParsedDocument:
    """A web page saved as one file (.mht/.mhtml: Word's and browsers' "single file web page"):
    a MIME message whose HTML part (quoted-printable or base64, any charset) is read as a page;
    the pictures and style sheets beside it are not text."""
    message = email.message_from_bytes(path.read_bytes(), policy=email.policy.default)
    part = next((p for p in message.walk() if p.get_content_type() == "text/html"), None)
    if part is None:
        raise UnreadableDocument("corrupt", "no text/html part: not a saved web page")
    data = part.get_payload(decode=True) or b""
    text, encoding = decode_bytes(data, declared=part.get_content_charset() or _declared_charset(data))
    builder = BlockBuilder()
    soup, first_h1 = blocks_from_html(text, builder)
    page_title = soup.title.get_text(" ", strip=True) if soup.title else None
    return make_document(builder, format="mhtml", parser="beautifulsoup", title=first_h1 or page_title or builder.first_heading,
                         warnings=encoding_notes(encoding))
