"""Structure-aware chunking: sections by heading and page, packed to a token budget with overlap.

Sizes are counted with the embedding model's own tokenizer (`TokenBudget.for_encoder`), and no
chunk's embed text (heading path + text) exceeds what the model reads, so nothing is silently
truncated at embedding time. Chunk ids are content-addressed (document id + text fingerprint) and
sections are packed independently, so an edit renames, and re-embeds, only the chunks of its own
section.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby

from rag_pipeline.config import ChunkingSettings
from rag_pipeline.ingest.document import ParsedDocument, TextBlock
from rag_pipeline.text import approx_tokens, fingerprint, normalize, split_sentences

HEADING_SEPARATOR = " > "
CHUNKER_VERSION = 1  # bump when chunk_document returns other chunks for the same input


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


@dataclass(frozen=True)
class TokenBudget:
    """How chunk sizes are counted, and the most tokens of embed text the model reads.

    The default estimate (CJK char ≈ 1, word ≈ 1.3) serves unit tests and tools without a model;
    the pipeline counts with the model's tokenizer.
    """

    count: Callable[[str], float] = approx_tokens
    model_limit: int | None = None

    @classmethod
    def for_encoder(cls, encoder) -> "TokenBudget":
        return cls(encoder.count_tokens, encoder.passage_token_limit)

    def section_budget(self, max_tokens: int, heading_path: tuple[str, ...]) -> float:
        """`max_tokens`, lowered so the section's heading context plus text fits the model."""
        if self.model_limit is None:
            return max_tokens
        context = HEADING_SEPARATOR.join(h for h in heading_path if h)
        room = self.model_limit - (self.count(context + "\n") if context else 0)
        return min(max_tokens, max(room, self.model_limit // 2))  # a giant heading is cut, not the text


APPROXIMATE = TokenBudget()


def chunk_document(
    doc_id: str, parsed: ParsedDocument, settings: ChunkingSettings, budget: TokenBudget = APPROXIMATE
) -> list[Chunk]:
    has_body = any(b.kind != "heading" for b in parsed.blocks)
    texts: list[tuple[tuple[str, ...], int | None, str]] = []
    for (heading_path, page), group in groupby(parsed.blocks, key=_section_key):
        blocks = list(group)
        if has_body and all(b.kind == "heading" for b in blocks):
            continue  # a heading with subsections only: its text lives on in their heading path
        limit = budget.section_budget(settings.max_tokens, heading_path)
        texts.extend((heading_path, page, t) for t in _pack_section(blocks, limit, settings.overlap_tokens, budget.count))
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


def chunk_cache_key(doc_id: str, parsed_json: str, settings: ChunkingSettings, model_key: str) -> str:
    """Everything a document's chunks depend on: its id (in every chunk id), its parse (text and
    structure, as JSON), the sizes, and the model whose tokenizer counts them — its identity key,
    the same trust the embedding cache puts in it."""
    parts = (f"v{CHUNKER_VERSION}", doc_id, str(settings.max_tokens), str(settings.overlap_tokens), model_key, parsed_json)
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _section_key(block: TextBlock) -> tuple[tuple[str, ...], int | None]:
    return block.heading_path, block.page


def _embed_text(heading_path: tuple[str, ...], text: str) -> str:
    context = HEADING_SEPARATOR.join(h for h in heading_path if h)
    return normalize(f"{context}\n{text}" if context and context != text else text)


def _pack_section(blocks: list[TextBlock], limit: float, overlap: float, count: Callable[[str], float]) -> list[str]:
    """Greedy packing of block- or sentence-sized units; trailing units overlap into the next.

    Each unit costs its tokens plus one for the newline that joins it, so a packed chunk never
    exceeds `limit` even though tokenization is not exactly additive.
    """
    body = [b for b in blocks if b.kind != "heading"] or blocks
    units = [(u, count(u) + 1) for b in body for u in _units(normalize(b.text), limit - 1, count)]
    chunks: list[list[tuple[str, float]]] = []
    current: list[tuple[str, float]] = []
    size = 0.0
    for unit in units:
        if current and size + unit[1] > limit:
            chunks.append(current)
            current = _overlap_tail(current, overlap)
            size = sum(n for _, n in current)
        current.append(unit)
        size += unit[1]
    if current and (not chunks or current != _overlap_tail(chunks[-1], overlap)):
        chunks.append(current)
    return ["\n".join(u for u, _ in c) for c in chunks]


def _overlap_tail(units: list[tuple[str, float]], budget: float) -> list[tuple[str, float]]:
    tail: list[tuple[str, float]] = []
    size = 0.0
    for unit in reversed(units[1:]):  # never carry the whole previous chunk
        size += unit[1]
        if size > budget:
            break
        tail.insert(0, unit)
    return tail


def _units(text: str, limit: float, count: Callable[[str], float]) -> list[str]:
    """A block that fits is one unit; a longer one splits into sentences, then hard slices."""
    if not text:
        return []
    if count(text) <= limit:
        return [text]
    units: list[str] = []
    for sentence in split_sentences(text):
        units.extend(_hard_split(sentence, limit, count))
    return units


def _hard_split(text: str, limit: float, count: Callable[[str], float]) -> list[str]:
    """Slices of at most `limit` tokens, cut in proportion to length and re-checked."""
    n = count(text)
    if n <= limit or len(text) <= 1:
        return [text]
    step = max(1, min(len(text) - 1, int(len(text) * limit / n)))
    return _hard_split(text[:step], limit, count) + _hard_split(text[step:], limit, count)
