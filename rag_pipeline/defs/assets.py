"""The indexing graph as software-defined assets: thin shells over the pure stage functions.

raw_documents → parsed_documents (+ quarantine) → chunks → chunk_fingerprints → embeddings
→ lancedb_index. Each asset reports counts and samples an operator can act on.
"""


import os
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TypeVar

import dagster as dg
import numpy as np

from rag_pipeline.cluster.executors import embedding_op_tags
from rag_pipeline.chunking import HEADING_SEPARATOR, TokenBudget, chunk_cache_key, chunk_document
import pyarrow as pa
import pyarrow.compute as pc

from rag_pipeline.defs.io import release_stage_pages, spill
from rag_pipeline.defs.memory import release_pool_pages
from rag_pipeline.defs.resources import LakeWriterResource, RagSettingsResource
from rag_pipeline.defs.shards import (
    SHARD_KEYS,
    SHARDS,
    gather_shards,
    iter_shards,
    lineage,
    scan_digest,
    shard_advice,
    shard_of,
    step_shards,
    with_lineage,
)
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.scan import iter_raw_files
from rag_pipeline.ingest.serialize import ParseHeader, outcome_from_json, outcome_to_json, parse_key_of
from rag_pipeline.ingest.pool import ParsePool, is_transient, stop_parse_server
from rag_pipeline.ingest.triage import QuarantineRecord, kept_as_cached, triage, was_released
from rag_pipeline.progress import Progress
from rag_pipeline.store import rows, staging
from rag_pipeline.store import schema as s
from rag_pipeline.store.ann import AnnPolicy, vector_index_plan
from rag_pipeline.store.keyhash import distinct_hashes
from rag_pipeline.store.lake import IndexUnreadableError, Lake, utc_now
from rag_pipeline.store.pending import PendingEntries

OWNERS = ["team:search-platform"]
WRITER_POOL = "rag_lake_writer"  # Dagster concurrency pool of the steps that write the lake (limit 1)
T = TypeVar("T")


def _md_table(header: list[str], records: list[list]) -> dg.MetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v).replace("|", "\\|") for v in r) + " |" for r in records]
    return dg.MetadataValue.md("\n".join(lines))


@dg.asset(group_name="ingest", kinds={"python", "file"}, owners=OWNERS)
def raw_documents(context: dg.AssetExecutionContext, rag: RagSettingsResource, lake_writer: LakeWriterResource) -> pa.Table:
    """Every file in the raw folder with its sha256 and sidecar metadata (status, ACL, owner),
    but those the ignore rules exclude (the folder's `.ragignore`, RAG_IGNORE_FILE; counted as
    `ignored`; ingest.ignore).

    A file whose stat is unchanged since the last scan of this lake keeps its hash (FileHashes)."""
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    hashes = staging.file_hashes_from_table(lake.read_scan_hashes())
    by_ext: Counter[str] = Counter()
    total_bytes = sidecar_errors = 0

    def counted(files):  # the scan's figures, taken as its files stream into Arrow batches
        nonlocal total_bytes, sidecar_errors
        for f in files:
            by_ext[f.path.suffix.lower() or "(none)"] += 1
            total_bytes += f.size
            sidecar_errors += bool(f.metadata_error)
            yield f

    ignored: list[str] = []  # what the ignore rules exclude (ingest.ignore)
    table = staging.raw_files_to_table(counted(iter_raw_files(settings.raw_dir, hashes, ignored, settings.ignore_file)))
    lake.write_scan_hashes(staging.file_hashes_to_table(hashes))
    table = spill(lake.lake_dir, context.run_id, "raw_documents", table)  # the run keeps what the step returns (defs.io.spill)
    context.add_output_metadata(
        {
            "raw_dir": str(settings.raw_dir),
            "files": table.num_rows,
            "bytes": total_bytes,
            "by_extension": dict(sorted(by_ext.items())),
            "with_sidecar_errors": sidecar_errors,
            "ignored": len(ignored),  # by the ignore rules: neither scanned, indexed nor quarantined
            "ignored_paths": ", ".join(ignored[:20]) + (f" … (+{len(ignored) - 20})" if len(ignored) > 20 else "") or "none",
            "hashed_now": hashes.hashed,  # the others' stat was unchanged since the last scan
            "hashes_reused": hashes.reused,
            "documents_per_shard": -(-table.num_rows // len(SHARD_KEYS)),
        }
    )
    advice = shard_advice(table.num_rows, len(SHARD_KEYS))
    if advice:
        context.log.warning(advice)
    return table


@dg.multi_asset(
    outs={
        "parsed_documents": dg.AssetOut(
            group_name="ingest",
            kinds={"python"},
            owners=OWNERS,
            description="Normalized text blocks per trusted file (page/sheet/slide numbers, OCR confidence).",
        ),
        "quarantine": dg.AssetOut(
            group_name="quality",
            kinds={"python"},
            owners=OWNERS,
            description="Files that cannot be trusted (unreadable, encrypted, empty, low OCR confidence), each with a reason.",
        ),
    },
    partitions_def=SHARDS,
)
def parse_documents(
    context: dg.AssetExecutionContext, rag: RagSettingsResource, lake_writer: LakeWriterResource, raw_documents: pa.Table
):
    """Parse the step's shards of the scan; anything unreadable or low-confidence goes to quarantine.

    Files missing from the parse cache are parsed in parallel worker processes, each killed
    after parse_timeout_s without progress or parse_max_s in all (quarantined as `timeout`,
    never cached, so a later run retries).
    """
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    parse_key = parse_key_of(settings.ocr_lang)
    # the work sized up front a shard at a time: the step's keys of every shard held at once were
    # a Python string pair per file (100k at 100k documents, bench/README.md)
    reused, to_parse = 0, set()
    for _, raw_table in iter_shards(raw_documents, step_shards(context)):
        keys = _parse_keys(raw_table, parse_key)
        known = lake.cached_parse_keys(list(keys.values()))
        unreadable_sidecar = {d for d, e in zip(*(raw_table.column(c).to_pylist() for c in ("doc_id", "metadata_error"))) if e}
        reused += sum(1 for key in keys.values() if key in known)
        to_parse.update(key for doc_id, key in keys.items() if key not in known and doc_id not in unreadable_sidecar)
        release_stage_pages()
    parsed_out, quarantine_out, totals = {}, {}, ParseTotals()
    started = time.perf_counter()
    note = f"{reused} from the parse cache" if reused else ""
    workers = ParsePool(workers=min(settings.parse_workers, len(to_parse)) or 1, memory_mb=settings.parse_memory_mb)
    with Progress("parse", len(to_parse), "files", log=context.log.info, note=note) as progress, PendingEntries(lake.add_parses) as pending, workers:
        for shard, raw_table in iter_shards(raw_documents, step_shards(context)):
            keys = _parse_keys(raw_table, parse_key)
            raws = staging.raw_files_from_table(raw_table)
            parsed, quarantined, serialized = _parse_shard(context, lake, settings, raws, keys, progress, totals, pending, workers)
            scan = scan_digest(raw_table)
            parsed_out[shard] = _spill(context, settings, "parsed_documents", shard, with_lineage(staging.parsed_to_table(parsed, serialized), scan))
            quarantine_out[shard] = _spill(context, settings, "quarantine", shard, with_lineage(staging.quarantine_to_table(quarantined), scan))
            context.add_asset_metadata({"shard_files": raw_table.num_rows, "shard_documents": len(parsed)},
                                       asset_key="parsed_documents", partition_key=shard)
            context.add_asset_metadata({"shard_quarantined": len(quarantined)}, asset_key="quarantine", partition_key=shard)
    stop_parse_server()  # its imported parsers would ride through every later step of the run
    yield dg.Output(
        parsed_out,
        output_name="parsed_documents",
        metadata={
            "documents": sum(t.num_rows for t in parsed_out.values()),
            "shards": len(parsed_out),
            "by_format": dict(totals.by_format),
            "by_language": dict(totals.by_language),
            "ocr_documents": len(totals.ocr),
            "ocr_confidence_min": float(min(totals.ocr)) if totals.ocr else None,
            "ocr_confidence_mean": float(np.mean(totals.ocr)) if totals.ocr else None,
            "parsed_now": totals.parsed_now,
            "reused_from_parse_cache": reused,
            "parse_seconds": round(time.perf_counter() - started, 2),
            "parse_workers": totals.workers,
            "released_from_quarantine": sorted(totals.released),
        },
    )
    yield dg.Output(
        quarantine_out,
        output_name="quarantine",
        metadata={
            "quarantined": len(totals.quarantined),
            "by_reason": dict(Counter(q.reason for q in totals.quarantined)),
            "files": _md_table(["source", "reason", "detail"], [[q.source, q.reason, q.detail] for q in totals.quarantined]),
        },
    )


def _parse_keys(raw_table: pa.Table, parse_key) -> dict[str, str]:
    """doc_id → parse cache key of each file of a shard of the scan."""
    return {doc_id: parse_key(sha, os.fsdecode(path)) for doc_id, sha, path in zip(*(raw_table.column(c).to_pylist() for c in ("doc_id", "sha256", "path")))}


def _spill(context, settings, asset: str, shard: str, table: pa.Table) -> pa.Table:
    """The shard's output written now and held memory-mapped (defs.io.spill); the Arrow
    pool's pages the shards before it freed go back to the OS (release_pool_pages)."""
    release_pool_pages()
    return spill(settings.lake_dir, context.run_id, asset, table, shard)


@dataclass
class ParseTotals:
    """What parse_documents reports over all the shards of its step."""

    parsed_now: int = 0
    workers: int = 0
    ocr: list = field(default_factory=list)
    released: list = field(default_factory=list)
    quarantined: list = field(default_factory=list)
    by_format: Counter = field(default_factory=Counter)
    by_language: Counter = field(default_factory=Counter)


def _parse_shard(context, lake: Lake, settings, raws, keys: dict, progress, totals: ParseTotals, pending: PendingEntries,
                 workers: ParsePool):
    """One shard: parse what the cache (or an earlier shard, `pending`) lacks, triage every file.

    `workers` is the step's pool, started by the first shard with a file to parse and kept for the rest.
    """
    cached = lake.cached_parses([keys[r.doc_id] for r in raws])
    cached.update(pending.found(keys[r.doc_id] for r in raws if keys[r.doc_id] not in cached))
    # One parse per distinct content: identical files share a cache key.
    to_parse = {keys[r.doc_id]: r.path for r in raws if not r.metadata_error and keys[r.doc_id] not in cached}
    outcomes = workers.parse(
        to_parse,
        ocr_lang=settings.ocr_lang,
        max_bytes=settings.max_file_bytes,
        timeout_s=settings.parse_timeout_s,
        max_s=settings.parse_max_s,
        on_result=lambda _key: progress.advance(),
    )
    fresh = {key: outcome_to_json(o) for key, o in outcomes.items() if not is_transient(o)}
    pending.add(fresh)
    parsed: dict[str, ParsedDocument | ParseHeader] = {}  # a header stands for a cached parse kept as is
    serialized: dict[str, str] = {}  # doc_id → its cached JSON, where triage kept the outcome as is
    quarantined: list[QuarantineRecord] = []
    for raw in raws:
        key = keys[raw.doc_id]
        header = None if key in outcomes else kept_as_cached(raw, cached.get(key))
        if header is not None:
            parsed[raw.doc_id], serialized[raw.doc_id] = header, cached[key]
            continue
        outcome = None if raw.metadata_error else outcomes[key] if key in outcomes else outcome_from_json(cached[key])
        result = triage(raw, outcome, settings.ocr_min_confidence)
        if isinstance(result, QuarantineRecord):
            context.log.warning(f"quarantined {raw.source}: {result.reason} ({result.detail})")
            quarantined.append(result)
        else:
            parsed[raw.doc_id] = result
            if result is outcome:  # triage returns a changed document as a new object
                serialized[raw.doc_id] = fresh.get(key) or cached.get(key)
    totals.parsed_now += len(outcomes)
    totals.workers = max(totals.workers, workers.workers if to_parse else 0)
    totals.ocr += [d.ocr_confidence for d in parsed.values() if d.ocr_used and d.ocr_confidence is not None]
    totals.released += [r.source for r in raws if r.doc_id in parsed and was_released(parsed[r.doc_id])]
    totals.quarantined += quarantined
    totals.by_format.update(d.format for d in parsed.values())
    totals.by_language.update(d.language for d in parsed.values())
    return parsed, quarantined, serialized


@dg.asset(group_name="index", kinds={"python"}, owners=OWNERS, partitions_def=SHARDS)
def chunks(
    context: dg.AssetExecutionContext,
    rag: RagSettingsResource,
    lake_writer: LakeWriterResource,
    parsed_documents: dict[str, pa.Table],
) -> dict[str, pa.Table]:
    """Structure-aware chunks (heading path, page) with overlap and content-addressed ids.

    Sized in the embedding model's tokens; `over_model_limit` counts chunks the model would
    truncate (zero unless the tokenizer disagrees with itself). A document whose parse, chunk
    settings and model are unchanged takes its chunks (and token counts) from the chunk cache.
    """
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    model_key = rag.encoder().identity.key
    keys = {}
    for shard, t in parsed_documents.items():  # reads every parse: its pages are let go shard by shard
        keys[shard] = [chunk_cache_key(d, o, settings.chunking, model_key) for d, o in zip(t.column("doc_id").to_pylist(), t.column("outcome").to_pylist())]
        release_stage_pages()
    known = lake.cached_chunk_keys([key for shard_keys in keys.values() for key in shard_keys])
    documents = sum(len(k) for k in keys.values())
    rechunk = sum(1 for shard_keys in keys.values() for key in shard_keys if key not in known)
    out, tokens, model_limits, budget = {}, [], set(), None
    note = f"{documents - rechunk} from the chunk cache" if documents - rechunk else ""
    with Progress("chunk", rechunk, "documents", log=context.log.info, note=note) as progress, PendingEntries(_add_chunk_rows(lake)) as pending:
        for shard in list(parsed_documents):
            parsed = parsed_documents.pop(shard)  # let go after this shard: its mapped pages leave with it
            cached = lake.cached_chunks(keys[shard])
            present = set(cached.column("cache_key").to_pylist())
            fresh = {}
            for key, doc_id, outcome in zip(keys[shard], parsed.column("doc_id").to_pylist(), parsed.column("outcome").to_pylist()):
                if key in present:
                    continue
                budget = budget or TokenBudget.for_encoder(rag.encoder())  # the only use of the tokenizer
                records = chunk_document(doc_id, outcome_from_json(outcome), settings.chunking, budget)
                fresh[key] = (records, [budget.count(c.embed_text) for c in records])
                progress.advance()
            fresh_rows = staging.chunk_cache_rows(fresh, budget.model_limit if fresh else None)
            pending.add({key: fresh_rows.slice(row, 1) for row, key in enumerate(fresh_rows.column("cache_key").to_pylist())})
            found = pa.concat_tables([cached, fresh_rows])
            table, shard_tokens = staging.chunks_from_cache(found, keys[shard])
            out[shard] = _spill(context, settings, "chunks", shard, with_lineage(table, lineage(parsed)))
            context.add_asset_metadata({"shard_documents": parsed.num_rows, "shard_chunks": table.num_rows,
                                        "shard_rechunked": len(fresh)}, partition_key=shard)
            tokens.append(shard_tokens.to_numpy())
            model_limits |= {m for m in found.column("model_limit").to_pylist() if m is not None}
    rag.encoder().unload()  # the tokenizer is not needed again this run (Encoder.unload)
    tokens = np.concatenate(tokens) if any(len(t) for t in tokens) else np.zeros(1, dtype=np.int32)
    model_limit = max(model_limits) if model_limits else None  # one model in the key: one limit
    first = next((t for t in out.values() if t.num_rows), None)
    context.add_output_metadata(
        {
            "chunks": sum(t.num_rows for t in out.values()),
            "documents": documents,
            "shards": len(out),
            "rechunked": rechunk,
            "reused_from_chunk_cache": documents - rechunk,
            "max_tokens_setting": settings.chunking.max_tokens,
            "overlap_tokens_setting": settings.chunking.overlap_tokens,
            "model_token_limit": model_limit,
            "tokens_median": float(np.median(tokens)),
            "tokens_max": int(tokens.max()),
            "over_model_limit": int((tokens > model_limit).sum()) if model_limit else 0,
            "sample": _md_table(
                ["chunk_id", "page", "heading", "text"],
                [
                    [r["chunk_id"], r["page"], HEADING_SEPARATOR.join(r["heading_path"])[:40], r["text"][:80]]
                    for r in (first.slice(0, 5).to_pylist() if first is not None else [])
                ],
            ),
        }
    )
    return out


def _add_chunk_rows(lake: Lake):
    """Insert held chunk cache rows (one a document key) at once. A key names its document, so
    no later shard looks a held row up: holding them back only saves inserts (and the key column
    re-read each insert's new table version costs the next shard's look-up)."""
    return lambda entries: lake.add_chunks(pa.concat_tables(entries.values()).combine_chunks())


def _served_table(context, lake: Lake, name: str, served: dict | None, columns: list[str] | None = None):
    """The served generation's table to diff against; None when there is none or it is damaged."""
    return _unless_damaged(context, lambda: lake.published_arrow(name, served, columns), None) if served else None


def _unless_damaged(context, read: Callable[[], T], fallback: T) -> T:
    """`read()` of the served generation, or `fallback` when that generation is damaged.

    A damaged served generation must not block the run that replaces it: everything is rebuilt
    from the caches, and only the diff statistics and document versions start afresh.
    """
    try:
        return read()
    except IndexUnreadableError as exc:
        context.log.error(f"{exc} — building the new generation without it")
        return fallback


def _paged_columns(tables: dict[str, pa.Table], column: str) -> Iterator[pa.ChunkedArray]:
    """Each shard's `column`, the stage pages it faulted in let go before the next shard's (a page
    fault maps its neighbours too: read shard after shard, every shard's file would stay resident)."""
    for table in tables.values():
        yield table.column(column)
        release_stage_pages()


def _served_fingerprints(context, lake: Lake, shards: set[str]) -> np.ndarray:
    """Distinct hashes of the served chunks' fingerprints — of the documents in `shards` when the
    step holds only some — read batch by batch (8 bytes a chunk held, not its fingerprint)."""
    served = lake.read_manifest(missing_ok=True)
    whole = shards >= set(SHARD_KEYS)

    def hashes() -> np.ndarray:
        batches = lake.published_batches(s.CHUNKS, served, ["fingerprint"] if whole else ["fingerprint", "doc_id"]) if served else []
        return distinct_hashes(
            b.column("fingerprint") if whole
            else b.column("fingerprint").filter(pa.array([shard_of(d, SHARD_KEYS) in shards for d in b.column("doc_id").to_pylist()]))
            for b in batches
        )

    return _unless_damaged(context, hashes, distinct_hashes([]))


@dg.asset(group_name="index", kinds={"python"}, owners=OWNERS, partitions_def=SHARDS)
def chunk_fingerprints(
    context: dg.AssetExecutionContext, rag: RagSettingsResource, chunks: dict[str, pa.Table]
) -> dict[str, pa.Table]:
    """chunk_id → sha256 of normalized text, diffed against the published index (new/same/gone)."""
    total = sum(t.num_rows for t in chunks.values())
    with Progress("fingerprint", total, "chunks", log=context.log.info) as progress:
        lake = Lake(rag.settings().lake_dir)
        mine = distinct_hashes(_paged_columns(chunks, "fingerprint"))
        diff = rows.fingerprint_diff(mine, _served_fingerprints(context, lake, set(chunks)))
        progress.advance(total)
    context.add_output_metadata({"fingerprints": diff["new"] + diff["same"], **diff})
    return {shard: with_lineage(t.select(["chunk_id", "fingerprint"]), lineage(t)) for shard, t in chunks.items()}


@dg.asset(group_name="index", kinds={"python", "pytorch"}, owners=OWNERS, partitions_def=SHARDS, op_tags=embedding_op_tags())
def embeddings(
    context: dg.AssetExecutionContext,
    rag: RagSettingsResource,
    lake_writer: LakeWriterResource,
    chunks: dict[str, pa.Table],
    chunk_fingerprints: dict[str, pa.Table],
) -> dict[str, pa.Table]:
    """Vectors per fingerprint; only fingerprints missing from the cache for this model are embedded."""
    encoder = rag.encoder()
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    key = encoder.identity.key
    # sized up front in Arrow: a Python string per fingerprint of every shard (540k at 100k
    # documents) was most of what this step held beyond the model (bench/README.md)
    distinct, missing_total = lake.count_uncached_vectors(key, _paged_columns(chunks, "fingerprint"))
    out, embedded, reused, seconds = {}, 0, 0, 0.0
    note = f"{distinct - missing_total} from the embedding cache" if distinct > missing_total else ""
    pending = PendingEntries(lambda entries: lake.add_to_cache(key, entries))
    with Progress("embed", missing_total, "chunks", log=context.log.info, note=note) as progress, pending:
        for shard in list(chunks):
            table = chunks.pop(shard)  # let go after this shard: its mapped pages leave with it
            fingerprints = list(dict.fromkeys(table.column("fingerprint").to_pylist()))
            vectors = lake.cached_vectors(key, fingerprints)
            vectors.update(pending.found(fp for fp in fingerprints if fp not in vectors))
            missing = [fp for fp in fingerprints if fp not in vectors]
            texts = []
            if missing:  # the shard's text is read only when something in it needs embedding
                text_by_fp = dict(zip(table.column("fingerprint").to_pylist(), table.column("embed_text").to_pylist()))
                texts = [text_by_fp[fp] for fp in missing]
                del text_by_fp
            started = time.perf_counter()
            fresh = dict(zip(missing, encoder.encode_passages(texts, on_batch=progress.advance)))
            seconds += time.perf_counter() - started
            pending.add(fresh)
            embedded, reused = embedded + len(fresh), reused + len(vectors)
            vectors.update(fresh)
            out[shard] = _spill(context, settings, "embeddings", shard, with_lineage(staging.vectors_to_table(vectors, encoder.identity.dimension), lineage(table)))
            context.add_asset_metadata({"shard_vectors": len(vectors), "shard_embedded": len(fresh)}, partition_key=shard)
    encoder.unload()  # no later step of the run embeds a passage (Encoder.unload)
    context.add_output_metadata(
        {
            "model": encoder.identity.name,
            "model_key": key,
            "dimension": encoder.identity.dimension,
            "shards": len(out),
            "embedded": embedded,
            "reused_from_cache": reused,
            "embed_seconds": round(seconds, 2),
            "chunks_per_second": round(embedded / seconds, 1) if embedded and seconds else None,
        }
    )
    return out


@dg.asset(group_name="index", kinds={"lancedb"}, owners=OWNERS, pool=WRITER_POOL)
def lancedb_index(
    context: dg.AssetExecutionContext,
    rag: RagSettingsResource,
    lake_writer: LakeWriterResource,
    raw_documents: pa.Table,
    parsed_documents: dict[str, pa.Table],
    quarantine: dict[str, pa.Table],
    chunks: dict[str, pa.Table],
    embeddings: dict[str, pa.Table],
) -> dict:
    """Write documents, chunks (vector + full-text index) and quarantine as a new, staged generation.

    When nothing would differ from the served generation (same files, metadata, parses, chunks,
    quarantine, model: rows.input_signature of the staged inputs), no generation is staged and
    no row is built: the served one is reported as `unchanged` and stays served. Every shard
    must come from this run's scan (`gather_shards`); the blocking check every_file_accounted_for
    then holds the generation to that scan file by file.
    """
    combined = gather_shards(raw_documents, parsed_documents=parsed_documents, quarantine=quarantine, chunks=chunks, embeddings=embeddings)
    parsed_documents, quarantine, chunks, embeddings = (
        combined[name] for name in ("parsed_documents", "quarantine", "chunks", "embeddings")
    )
    quarantine = quarantine.read_all()  # one row per quarantined file: small
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    identity = rag.encoder().identity
    served = lake.read_manifest(missing_ok=True)
    # what is served is each file's `source` (relative), not where the raw folder is mounted
    inputs = [raw_documents.drop_columns(["path"]), parsed_documents, chunks, quarantine]
    signature = rows.input_signature(inputs, identity.key, identity.dimension, after_slice=release_stage_pages)
    with Progress("write", chunks.num_rows, "chunks", log=context.log.info) as progress:
        if served and served.get("content_signature") == signature and lake.is_readable(served):
            context.log.info(f"nothing changed since generation {served['generation']}: no new generation staged")
            manifest = {**served, "unchanged": True}
            changes = {"added": 0, "updated": 0, "unchanged": served["counts"]["documents"], "deleted": 0}
            statuses = lake.published_arrow(s.DOCUMENTS, served, ["status"]).column("status").to_pylist()
        else:
            manifest, changes, statuses = _stage_generation(
                context, lake, settings, identity, served, signature, raw_documents, parsed_documents, quarantine, chunks, embeddings
            )
        progress.advance(chunks.num_rows)  # the whole generation is written at once (documents, chunks, indexes)
    context.add_output_metadata(
        {
            "lake_dir": str(settings.lake_dir),
            "generation": manifest["generation"],
            "new_generation": not manifest.get("unchanged"),
            # "changes": built from the served generation, only changed documents' rows written
            "build": "unchanged" if manifest.get("unchanged") else (manifest.get("build") or {}).get("kind", "full"),
            # a search reads each segment of an index: deltas since the last whole build (Lake.stage_changes)
            "index_segments": (manifest.get("build") or {}).get("index_segments", 1),
            "table_versions": manifest["table_versions"],
            **manifest["counts"],
            "scanned_files": raw_documents.num_rows,
            **changes,
            "by_status": dict(Counter(statuses)),
            "model": identity.name,
            "model_key": identity.key,
            "vector_index": manifest["vector_index"],
        }
    )
    return manifest


STAGE_BATCH_CHUNKS = 5_000  # chunks whose rows are built and streamed into the table at once
# A generation built from the served one (Lake.stage_changes) leaves deleted rows in the
# full-text index's BM25 statistics (document count, term frequencies) until a full build; a
# full build comes once the rows replaced since the last one reach this share of the table.
REBUILD_AFTER_REPLACED = 0.10


def _stage_generation(context, lake: Lake, settings, identity, served, signature, raw_documents, parsed_documents, quarantine, chunks, embeddings):
    """Build the documents, chunks and quarantine rows and stage them as a new generation.

    The documents table is built column-wise from the memory-mapped stage tables
    (rows.documents_from_stage: no Python object per document); chunk rows are built in batches
    of STAGE_BATCH_CHUNKS and streamed into the staged table: the Python objects alive at once
    (chunks, their files, vectors) are one batch's, not the corpus's.
    Only the chunk rows of documents whose `rows_digest` differs from the served generation's
    are built and written when the served generation can be built upon (`_replaceable`);
    otherwise every row, in the chunks' scan order, whatever the shard count.
    """
    now = utc_now()
    previous_docs = _served_table(context, lake, s.DOCUMENTS, served)
    # every parse and chunk is read here: their pages are let go slice by slice
    headers = staging.parse_header_columns(parsed_documents.table, after_slice=release_stage_pages)
    digests = rows.chunk_digests(chunks.table, after_slice=release_stage_pages)
    documents = rows.documents_from_stage(staging.raw_file_columns(raw_documents), headers, digests, previous_docs, now)

    def of(table: pa.Table, doc_ids: pa.Array) -> pa.Table:
        return table.filter(pc.is_in(table.column("doc_id"), value_set=doc_ids))
    # each chunk row's vector: its fingerprint's row in the embeddings stage
    found = pc.index_in(chunks.table.column("fingerprint"), value_set=embeddings.table.column("fingerprint").combine_chunks())
    if found.null_count:
        raise RuntimeError(f"{found.null_count} chunks have no vector in the embeddings stage: materialize embeddings again")
    vector_of = found.to_numpy()
    replaced = _replaceable(served, previous_docs, documents, identity, chunks.num_rows, settings) if served and lake.is_readable(served) else None
    positions = np.concatenate([chunks.rows(start, STAGE_BATCH_CHUNKS) for start in range(0, chunks.num_rows, STAGE_BATCH_CHUNKS)] or [np.zeros(0, np.int64)])
    if replaced is not None:  # only the replaced documents' chunks get rows
        wanted = pc.is_in(chunks.table.column("doc_id"), value_set=pa.array(sorted(replaced), pa.string())).to_numpy(zero_copy_only=False)
        positions = positions[wanted[positions]]
    release_stage_pages()  # the look-ups above read every shard's fingerprint and doc_id columns

    def chunk_batches():
        for start in range(0, len(positions), STAGE_BATCH_CHUNKS):
            picked = positions[start: start + STAGE_BATCH_CHUNKS]
            records = staging.chunks_from_table(chunks.take(picked))
            ids = pa.array(sorted({c.doc_id for c in records}), pa.string())
            raws = {r.doc_id: r for r in staging.raw_files_from_table(of(raw_documents, ids))}
            doc_rows = {r["doc_id"]: r for r in of(documents, ids).select(["doc_id", "title", "language", "status"]).to_pylist()}
            vectors = staging.vectors_from_table(embeddings.take(np.unique(vector_of[picked])))
            # before the batch is written: taking a few hundred scattered rows faulted in whole
            # shard files (a 1 % change's publish at 10k: every chunk shard, 88 MB, during the write)
            release_stage_pages()
            yield rows.chunks_table(records, raws, doc_rows, vectors, identity.dimension)

    changes = rows.document_changes(previous_docs, documents)
    common = dict(
        model=identity.as_dict(),
        run_id=context.run_id,
        stats={"scanned_files": raw_documents.num_rows, **changes},
        content_signature=signature,
        extra={"row_digests": rows.row_digest_scheme()},
    )
    quarantined = rows.quarantine_table(staging.quarantine_from_table(quarantine), now)
    if replaced is None:
        manifest = lake.stage(documents, chunk_batches(), quarantined, ann_policy=AnnPolicy(min_rows=settings.ann_min_rows), **common)
    else:
        manifest = lake.stage_changes(served, documents, chunk_batches(), replaced, quarantined, **common)
        build = manifest["build"]
        context.log.info(
            f"generation {manifest['generation']} built from generation {served['generation']}: "
            f"{build['documents_replaced']} documents' rows replaced (-{build['rows_deleted']} +{build['rows_added']} chunks; "
            f"indexes in up to {build['index_segments']} segments)"
        )
    return manifest, changes, documents.column("status").to_pylist()


def _replaceable(served: dict, previous_docs, documents: pa.Table, identity, n_chunks: int, settings) -> set[str] | None:
    """The documents whose chunk rows a generation built from the (readable) served one must replace
    (new, changed or gone), or None when it must be built whole: another model, row
    digests of another scheme (or none), another kind of vector index due, or the rows replaced
    since the last full build reaching REBUILD_AFTER_REPLACED of the table."""
    if served.get("row_digests") != rows.row_digest_scheme() or served.get("model") != identity.as_dict():
        return None
    if vector_index_plan(n_chunks, AnnPolicy(min_rows=settings.ann_min_rows))["kind"] != served["vector_index"]["kind"]:
        return None
    diff = rows.replaced_documents(previous_docs, documents)
    if diff is None:
        return None
    replaced, rewritten = diff
    already = int((served.get("build") or {}).get("replaced_rows", 0))
    if already + rewritten > REBUILD_AFTER_REPLACED * max(n_chunks, 1):
        return None
    return replaced


@dg.asset(group_name="index", kinds={"lancedb"}, owners=OWNERS, pool=WRITER_POOL)
def published_index(
    context: dg.AssetExecutionContext,
    rag: RagSettingsResource,
    lake_writer: LakeWriterResource,
    lancedb_index: dict,
    golden_eval: dict,
) -> dg.MaterializeResult:
    """The generation queries read. Promoted only after the blocking checks pass: those on
    lancedb_index (consistency, model pin) and golden_quality_holds on golden_eval.

    A generation built with a different embedding model than the served one is left staged:
    switching models is an explicit `rag generations promote N`. An unchanged run promotes nothing.
    """
    lake = Lake(rag.settings().lake_dir)
    served = lake.read_manifest(missing_ok=True)
    generation = lancedb_index["generation"]
    if lancedb_index.get("unchanged") and served and served["generation"] == generation:
        lake.repair_promotion_log()
        return dg.MaterializeResult(
            metadata={"promoted": False, "new_generation": False, "served_generation": generation, "run_id": context.run_id}
        )
    if served and served["model"]["key"] != lancedb_index["model"]["key"]:
        context.log.warning(
            f"generation {generation} uses model {lancedb_index['model']['name']} "
            f"({lancedb_index['model']['key']}); generation {served['generation']} with "
            f"{served['model']['name']} stays served until `rag generations promote {generation}`"
        )
        return dg.MaterializeResult(metadata={"promoted": False, "served_generation": served["generation"], "staged_generation": generation})
    manifest = lake.promote(generation)
    return dg.MaterializeResult(
        metadata=served_metadata(manifest, previous=served, action="promoted by index_job")
        | {"promoted": True, "run_id": context.run_id, "golden_eval": golden_eval["status"]}
    )


def served_metadata(manifest: dict, *, previous: dict | None, action: str) -> dict:
    """What published_index records whenever the served generation changes (job, CLI, UI)."""
    return {
        "served_generation": manifest["generation"],
        "previous_generation": previous["generation"] if previous else None,
        "action": action,
        "model": manifest["model"]["name"],
        "documents": manifest["counts"]["documents"],
        "chunks": manifest["counts"]["chunks"],
    }


@dg.asset(group_name="index", kinds={"lancedb"}, owners=OWNERS, pool=WRITER_POOL, deps=[published_index])
def lake_housekeeping(
    context: dg.AssetExecutionContext, rag: RagSettingsResource, lake_writer: LakeWriterResource
) -> dg.MaterializeResult:
    """Old generations, LanceDB versions, cache entries the newest generation does not use and
    staging folders removed; the served generation and the RAG_KEEP_GENERATIONS before it (what
    rollback needs) are kept."""
    settings = rag.settings()
    report = Lake(settings.lake_dir).prune(keep=settings.keep_generations, parse_key=parse_key_of(settings.ocr_lang))
    context.log.info(f"housekeeping: {report}")
    return dg.MaterializeResult(metadata=report)
