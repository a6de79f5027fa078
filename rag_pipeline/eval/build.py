"""Index a BEIR corpus through the pipeline's own chunking, embedding and lake code.

A benchmark only says something about the product if it measures the product: each corpus
document becomes a ParsedDocument (title as heading, text as paragraphs), is chunked with the
pipeline's settings, embedded by the configured encoder and published as a normal lake, which
`RagIndex` then reads exactly as it reads a production index.

Two caches make reruns cost seconds: the lake itself, in a folder keyed by (corpus sha256,
chunking settings, model key, build version), and vectors in a shared content-addressed
embedding cache (``<cache root>/embeddings``), so a chunking experiment only embeds the chunks
it changed, and an interrupted first run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from rag_pipeline.chunking import APPROXIMATE, Chunk, TokenBudget, chunk_document
from rag_pipeline.config import ChunkingSettings, Settings, eval_cache_dir
from rag_pipeline.embedding.encoder import Encoder
from rag_pipeline.eval.beir import BeirDataset
from rag_pipeline.ingest.blocks import BlockBuilder, make_document
from rag_pipeline.ingest.document import ParsedDocument, UnreadableDocument
from rag_pipeline.ingest.scan import DocumentMetadata, RawFile, file_sha256
from rag_pipeline.store import rows
from rag_pipeline.store.lake import Lake, utc_now
from rag_pipeline.text import ANALYZER_VERSION

BUILD_VERSION = 2  # bump when how a corpus document becomes chunks changes (2: sizes in model tokens)
EMBED_SLICE = 256  # texts per encode call: the cache is written after each, so a kill loses little
EMBEDDINGS_LAKE = "embeddings"


def default_cache_root() -> Path:
    return eval_cache_dir()


def cache_key(corpus_sha256: str, chunking: ChunkingSettings, model_key: str) -> str:
    blob = json.dumps(
        {"corpus": corpus_sha256, "chunking": asdict(chunking), "model": model_key, "build": BUILD_VERSION,
         "analyzer": ANALYZER_VERSION},  # search_text is written by rag_pipeline.text.search_tokens
        sort_keys=True,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def corpus_document(title: str, text: str) -> ParsedDocument:
    """Title as a level-1 heading, each blank-line-separated paragraph as a paragraph block."""
    builder = BlockBuilder()
    if title.strip():
        builder.heading(title, 1)
    for paragraph in text.replace("\r\n", "\n").split("\n\n"):
        builder.add(paragraph, "paragraph")
    return make_document(builder, format="jsonl", parser="beir", title=title or None)


def chunk_corpus(dataset: BeirDataset, chunking: ChunkingSettings, budget: TokenBudget = APPROXIMATE):
    """RawFile records, parsed documents and chunks for every non-empty corpus document."""
    raws: list[RawFile] = []
    parsed: dict[str, ParsedDocument] = {}
    chunks: list[Chunk] = []
    for doc_id, (title, text) in dataset.corpus.items():
        try:
            doc = corpus_document(title, text)
        except UnreadableDocument:
            continue  # an empty corpus entry can never be retrieved; qrels pointing at it score 0
        body = f"{title}\n{text}".encode("utf-8")
        raws.append(
            RawFile(
                doc_id=doc_id,
                source=doc_id,
                path=dataset.corpus_path,
                size=len(body),
                sha256=hashlib.sha256(body).hexdigest(),
                metadata=DocumentMetadata(),  # published, internal, all-staff: visible to the default principal
            )
        )
        parsed[doc_id] = doc
        chunks.extend(chunk_document(doc_id, doc, chunking, budget))
    return raws, parsed, chunks


def embed_with_cache(cache: Lake, encoder: Encoder, texts: dict[str, str], progress: bool = True) -> dict[str, np.ndarray]:
    """Vectors per fingerprint: cached ones read back, missing ones embedded longest-first."""
    from tqdm import tqdm

    key = encoder.identity.key
    vectors = cache.cached_vectors(key, list(texts))
    missing = sorted((fp for fp in texts if fp not in vectors), key=lambda fp: -len(texts[fp]))
    print(f"embeddings: {len(vectors)} cached, {len(missing)} to embed", file=sys.stderr)
    with tqdm(total=len(missing), desc="embedding", unit="chunk", disable=not progress or not missing, mininterval=2) as bar:
        for start in range(0, len(missing), EMBED_SLICE):
            batch = missing[start : start + EMBED_SLICE]
            fresh = dict(zip(batch, encoder.encode_passages([texts[fp] for fp in batch])))
            cache.add_to_cache(key, fresh)
            vectors.update(fresh)
            bar.update(len(batch))
    return vectors


def build_index(
    dataset: BeirDataset,
    encoder: Encoder,
    settings: Settings | None = None,
    cache_root: Path | None = None,
    progress: bool = True,
) -> Path:
    """The lake folder holding this corpus's index, built only if no matching one exists."""
    settings = settings or Settings()
    cache_root = Path(cache_root or default_cache_root())
    key = cache_key(file_sha256(dataset.corpus_path), settings.chunking, encoder.identity.key)
    lake_dir = cache_root / f"{dataset.name}-{key}"
    lake = Lake(lake_dir)
    manifest = lake.read_manifest(missing_ok=True)
    if manifest and manifest["model"]["key"] == encoder.identity.key:
        return lake_dir
    raws, parsed, chunks = chunk_corpus(dataset, settings.chunking, TokenBudget.for_encoder(encoder))
    print(f"indexing {dataset.name}: {len(parsed)} documents -> {len(chunks)} chunks into {lake_dir}", file=sys.stderr)
    vectors = embed_with_cache(
        Lake(cache_root / EMBEDDINGS_LAKE), encoder, {c.fingerprint: c.embed_text for c in chunks}, progress
    )
    now = utc_now()
    counts: dict[str, int] = {}
    for c in chunks:
        counts[c.doc_id] = counts.get(c.doc_id, 0) + 1
    versions = {r.doc_id: 1 for r in raws}
    documents = rows.documents_table(raws, parsed, counts, versions, now)
    doc_rows = {r["doc_id"]: r for r in documents.to_pylist()}
    chunk_table = rows.chunks_table(chunks, {r.doc_id: r for r in raws}, doc_rows, vectors, encoder.identity.dimension)
    lake.publish(documents, chunk_table, rows.quarantine_table([], now), model=encoder.identity.as_dict(), run_id=f"eval-{key}")
    return lake_dir
