"""Rich Text Format (.rtf, as Word and WordPad save it) via striprtf.

striprtf decodes the text (``\\'xx`` bytes in the document's ``\\ansicpg`` code page, ``\\uN``
characters) and drops the font, colour and style tables; a table row comes out as one line
of cells each closed by ``|``. Those lines are read back as table rows, everything else as
paragraphs (RTF keeps no heading structure a reader could rely on: headings are styles).
"""

from __future__ import annotations

from pathlib import Path

from striprtf.striprtf import rtf_to_text

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument

def looks_like_rtf(head: bytes) -> bool:
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{\\rtf")


def parse_rtf(path: Path) -> ParsedDocument:
    """Parse an RTF file into paragraph and table_row blocks (a table's first row is its header)."""
    data = path.read_bytes()
    if not looks_like_rtf(data[:64]):
        raise UnreadableDocument("corrupt", "no {\\rtf header: not a Rich Text Format file")
    # RTF is 7-bit text; any raw 8-bit byte is read as Latin-1 and left for striprtf's decoding.
    text = rtf_to_text(data.decode("latin-1"), errors="replace")
    builder = BlockBuilder()
    table: list[list[str]] = []
    for line in text.splitlines():
        if line.endswith("|"):
            table.append([cell.strip() for cell in line[:-1].split("|")])
            continue
        if table:
            builder.add_table(table)
            table = []
        builder.add(line)
    if table:
        builder.add_table(table)
    return make_document(builder, format="rtf", parser="striprtf")
