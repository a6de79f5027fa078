"""Plain text: detected encoding, paragraphs split on blank lines."""

from __future__ import annotations

from pathlib import Path

from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.encoding import decode_bytes, encoding_notes
from rag_pipeline.ingest.textutil import clean_text, split_paragraphs

# A file whose "paragraphs" are this long has no blank lines at all (one paragraph per
# line, as many exports write); it is split per line instead.
_MAX_PARAGRAPH_CHARS = 5000


def parse_txt(path: Path) -> ParsedDocument:
    """Split a text file into paragraph blocks.

    Paragraphs are separated by blank lines; line breaks inside a paragraph are kept
    (poems, addresses and lists depend on them). A file with no blank lines but many
    lines is split per line, so one giant block never hides the structure.
    """
    text, encoding = decode_bytes(path.read_bytes())
    return make_document(text_blocks(text), format="txt", parser="text", warnings=encoding_notes(encoding))


def text_blocks(text: str) -> BlockBuilder:
    """Decoded text as paragraph blocks (see parse_txt); also what a markup reader falls back to."""
    paragraphs = split_paragraphs(clean_text(text))
    if len(paragraphs) == 1 and len(paragraphs[0]) > _MAX_PARAGRAPH_CHARS:
        paragraphs = [line for line in paragraphs[0].split("\n") if line.strip()]
    builder = BlockBuilder()
    for para in paragraphs:
        builder.add(para)
    return builder
