"""Org mode (.org: Emacs notes, READMEs and handbooks kept in Org): read line by line into HTML,
then walked like HTML, as Markdown and reStructuredText are, so headings drive the heading path
and tables fold into rows under their header.

What is kept: ``#+TITLE``, headings (TODO keywords, priorities and tags removed), paragraphs,
plain and description lists (check boxes removed), tables (rows above the first rule are the
header), source, example and verse blocks as code, quote and centre blocks as text, footnote
definitions; links as their description, emphasis and code markers removed. What is not
content is dropped: property and logbook drawers, planning lines (SCHEDULED, DEADLINE),
comments and comment blocks, export blocks and other ``#+KEYWORD:`` settings.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.encoding import decode_bytes, encoding_notes
from rag_pipeline.ingest.web import blocks_from_html

_HEADING = re.compile(r"^(\*+)\s+(?:(?:TODO|DONE|NEXT|WAITING|CANCELLED|CANCELED)\s+)?(?:\[#[A-Z0-9]\]\s*)?(.*?)(?:\s+:[\w@#%:]+:)?\s*$")
_KEYWORD = re.compile(r"^\s*#\+(\w+):\s?(.*)$")
_BLOCK_BEGIN = re.compile(r"^\s*#\+begin_(\w+)", re.I)
_DRAWER = re.compile(r"^\s*:[\w-]+:\s*$")
_PLANNING = re.compile(r"^\s*(SCHEDULED|DEADLINE|CLOSED):")
_COMMENT = re.compile(r"^\s*#(\s|$)")
_TABLE = re.compile(r"^\s*\|")
_RULE_ROW = re.compile(r"^\s*\|[-+:|\s]*$")
_ITEM = re.compile(r"^(\s*)(?:[-+]|(?<=\s)\*|\d+[.)])\s+(?:\[[ Xx-]\]\s+)?(.*)$")
_HRULE = re.compile(r"^\s*-{5,}\s*$")
_LINK = re.compile(r"\[\[([^\[\]]+)\](?:\[([^\[\]]+)\])?\]")  # no bracket inside: "[[[[…" stays linear
# Org's emphasis: a marker pair around text, opened after a space or opening punctuation and closed
# before a space or closing punctuation (Chinese punctuation included). Its text is bounded, as in
# Org: unbounded, a long line of paths ("/usr/bin /usr/bin …") took minutes (each opener scans on).
_EMPHASIS = re.compile(r"(^|[\s\-({'\"“‘（「])([*/_=~+])(\S|\S.{0,300}?\S)\2(?=[\s\-.,:!?;'\")}\[\]”’，。：；！？、）」]|$)")
_CODE_BLOCKS = {"src", "example", "verse"}
_DROPPED_BLOCKS = {"comment", "export"}


def _inline(text: str) -> str:
    text = _LINK.sub(lambda m: m.group(2) or m.group(1), text)
    for _ in range(3):  # nested emphasis (*/bold italic/*) one layer at a time
        text = _EMPHASIS.sub(lambda m: m.group(1) + m.group(3), text)
    return html.escape(text)


def _cells(line: str) -> list[str]:
    return [_inline(c.strip()) for c in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> str:
    """Rows as HTML; the rows above the first rule line are the header."""
    rule = next((i for i, line in enumerate(lines) if _RULE_ROW.match(line)), None)
    rows = []
    for i, line in enumerate(lines):
        if not _RULE_ROW.match(line):
            tag = "th" if rule is not None and i < rule else "td"
            rows.append("<tr>" + "".join(f"<{tag}>{c}</{tag}>" for c in _cells(line)) + "</tr>")
    return "<table>" + "".join(rows) + "</table>"


def org_to_html(text: str) -> tuple[str, str | None]:
    """The Org document as HTML, and its ``#+TITLE``."""
    out: list[str] = []
    title: str | None = None
    paragraph: list[str] = []
    items: list[str] = []
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")

    def flush() -> None:
        if paragraph:
            out.append("<p>" + "\n".join(paragraph) + "</p>")
            paragraph.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
            items.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or _HRULE.match(line):
            flush()
            continue
        if heading := _HEADING.match(line):
            flush()
            if heading.group(2):
                level = min(6, len(heading.group(1)) + (1 if title else 0))
                out.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            continue
        if block := _BLOCK_BEGIN.match(line):
            flush()
            kind = block.group(1).lower()
            body = []
            while i < len(lines) and not re.match(rf"^\s*#\+end_{re.escape(kind)}\b", lines[i], re.I):
                body.append(lines[i])
                i += 1
            i += 1  # the end line
            if kind in _CODE_BLOCKS:
                out.append("<pre>" + html.escape("\n".join(body).strip("\n")) + "</pre>")
            elif kind not in _DROPPED_BLOCKS:  # quote, center, and blocks of unknown kind: their text
                out.append(org_to_html("\n".join(body))[0])
            continue
        if keyword := _KEYWORD.match(line):
            flush()
            if keyword.group(1).lower() == "title" and keyword.group(2).strip():
                title = keyword.group(2).strip()
                out.append(f"<h1>{_inline(title)}</h1>")
            continue
        if _DRAWER.match(line) and line.strip().lower() != ":end:":
            while i < len(lines) and lines[i].strip().lower() != ":end:":
                i += 1
            i += 1
            continue
        if _PLANNING.match(line) or _COMMENT.match(line):
            continue
        if _TABLE.match(line):
            flush()
            rows = [line]
            while i < len(lines) and _TABLE.match(lines[i]):
                rows.append(lines[i])
                i += 1
            out.append(_table(rows))
            continue
        if item := _ITEM.match(line):
            if paragraph:
                flush()
            term, sep, desc = item.group(2).partition(" :: ")  # a description list's term
            items.append(_inline(f"{term}: {desc}" if sep else item.group(2)))
            continue
        if items and line[:1].isspace():  # an item's continuation line
            items[-1] += "\n" + _inline(line.strip())
            continue
        if items:
            flush()
        paragraph.append(_inline(line.strip()))
    flush()
    return "\n".join(out), title


def parse_org(path: Path) -> ParsedDocument:
    """Parse an Org file into heading/paragraph/list_item/table_row blocks; the title is
    ``#+TITLE``, else the first heading."""
    text, encoding = decode_bytes(path.read_bytes())
    markup, title = org_to_html(text)
    builder = BlockBuilder()
    blocks_from_html(markup, builder, drop_by_class=False)
    return make_document(builder, format="org", parser="org", title=title, warnings=encoding_notes(encoding))
