"""Structure-aware chunking: sections by heading and page, packed to a token budget with overlap.

Chunk ids are content-addressed (document id + text fingerprint), so inserting a paragraph at
the top of a file does not rename, and therefore does not re-embed, the chunks below it.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby

from rag_pipeline.config import ChunkingSettings
from rag_pipeline.ingest.document import ParsedDocument, TextBlock
from rag_pipeline.text import approx_tokens, fingerprint, normalize, split_sentences

HEADING_SEPARATOR = " > "


@dataclass(frozen=True)
class Chunk:
    chunk_id: str
    doc_id: str
    ordinal: int
    text: str  # what a reader sees and what is cited
    embed_text: str  # text plus its heading path: what the model embeds
    heading_path: tuple[str, ...]
    page: int | None
    fingerprint: str  # sha256 of normalized embed_text: the embedding cache key


def chunk_document(doc_id: str, parsed: ParsedDocument, settings: ChunkingSettings) -> list[Chunk]:
    has_body = any(b.kind != "heading" for b in parsed.blocks)
    texts: list[tuple[tuple[str, ...], int | None, str]] = []
    for (heading_path, page), group in groupby(parsed.blocks, key=_section_key):
        blocks = list(group)
        if has_body and all(b.kind == "heading" for b in blocks):
            continue  # a heading with subsections only: its text lives on in their heading path
        texts.extend((heading_path, page, t) for t in _pack_section(blocks, settings))
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for ordinal, (heading_path, page, text) in enumerate(texts):
        embed_text = _embed_text(heading_path, text)
        fp = fingerprint(embed_text)
        dup = seen.get(fp, 0)
        seen[fp] = dup + 1
        chunk_id = f"{doc_id}-{fp[:16]}" + (f"-{dup}" if dup else "")
        chunks.append(Chunk(chunk_id, doc_id, ordinal, text, embed_text, heading_path, page, fp))
    return chunks


def _section_key(block: TextBlock) -> tuple[tuple[str, ...], int | None]:
    return block.heading_path, block.page


def _embed_text(heading_path: tuple[str, ...], text: str) -> str:
    context = HEADING_SEPARATOR.join(h for h in heading_path if h)
    return normalize(f"{context}\n{text}" if context and context != text else text)


def _pack_section(blocks: list[TextBlock], settings: ChunkingSettings) -> list[str]:
    """Greedy packing of block- or sentence-sized units; trailing units overlap into the next."""
    body = [b for b in blocks if b.kind != "heading"] or blocks
    units = [u for b in body for u in _units(normalize(b.text), settings.max_tokens)]
    chunks: list[list[str]] = []
    current: list[str] = []
    size = 0.0
    for unit in units:
        n = approx_tokens(unit)
        if current and size + n > settings.max_tokens:
            chunks.append(current)
            current = _overlap_tail(current, settings.overlap_tokens)
            size = sum(approx_tokens(u) for u in current)
        current.append(unit)
        size += n
    if current and (not chunks or current != _overlap_tail(chunks[-1], settings.overlap_tokens)):
        chunks.append(current)
    return ["\n".join(c) for c in chunks]


def _overlap_tail(units: list[str], budget: float) -> list[str]:
    tail: list[str] = []
    size = 0.0
    for unit in reversed(units[1:]):  # never carry the whole previous chunk
        size += approx_tokens(unit)
        if size > budget:
            break
        tail.insert(0, unit)
    return tail


def _units(text: str, max_tokens: int) -> list[str]:
    """A block that fits is one unit; a longer one splits into sentences, then hard slices."""
    if not text:
        return []
    if approx_tokens(text) <= max_tokens:
        return [text]
    units: list[str] = []
    for sentence in split_sentences(text):
        if approx_tokens(sentence) <= max_tokens:
            units.append(sentence)
        else:
            units.extend(_hard_split(sentence, max_tokens))
    return units


def _hard_split(text: str, max_tokens: int) -> list[str]:
    pieces, start = [], 0
    step = max(1, int(len(text) * max_tokens / max(approx_tokens(text), 1)))
    while start < len(text):
        pieces.append(text[start : start + step])
        start += step
    return pieces
