"""Markdown: rendered with markdown-it-py (CommonMark + tables), then read like HTML.

Rendering first means markup is stripped by a real parser (emphasis, links, code
spans, escapes, nested lists with any indentation) instead of regexes, and headings,
lists and tables reuse the HTML walker's heading_path and table folding.
"""

from __future__ import annotations

import re
from pathlib import Path

from markdown_it import MarkdownIt

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.encoding import decode_bytes, encoding_notes
from rag_pipeline.ingest.web import blocks_from_html

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.S)
_FM_TITLE = re.compile(r"^title\s*:\s*(.+?)\s*$", re.M)
# markdown-it silently drops whatever nests deeper than maxNesting (20 by default: a list
# nested 10 levels deep, each level being <ul><li>); 100 keeps real outlines whole and stays
# well inside Python's recursion limit. Deeper content is still dropped, never a crash.
_MAX_NESTING = 100


def split_front_matter(text: str) -> tuple[str, str | None]:
    """Remove a leading YAML front-matter block; return ``(body, title_from_front_matter)``."""
    m = _FRONT_MATTER.match(text)
    if not m or m.group(1).count("\n") > 200:
        return text, None
    title = _FM_TITLE.search(m.group(1))
    return text[m.end() :], title.group(1).strip("'\"") if title else None


def parse_markdown(path: Path) -> ParsedDocument:
    """Parse Markdown into heading/paragraph/list_item/table_row blocks.

    Title: front-matter ``title:``, else the first heading, else the file name. Raw
    HTML inside the Markdown is kept and read by the same walker; class-based
    boilerplate removal is off (Markdown has no site chrome).
    """
    text, encoding = decode_bytes(path.read_bytes())
    body, fm_title = split_front_matter(text.replace("\r\n", "\n"))
    renderer = MarkdownIt("commonmark", {"html": True, "maxNesting": _MAX_NESTING}).enable(["table", "strikethrough"])
    html = renderer.render(body)
    builder = BlockBuilder()
    blocks_from_html(html, builder, drop_by_class=False)
    return make_document(
        builder,
        format="md",
        parser="markdown-it",
        title=fm_title,
        warnings=encoding_notes(encoding),
    )
