"""The indexing graph as software-defined assets: thin shells over the pure stage functions.

raw_documents → parsed_documents (+ quarantine) → chunks → chunk_fingerprints → embeddings
→ lancedb_index. Each asset reports counts and samples an operator can act on.
"""


import time
from collections import Counter

import dagster as dg
import numpy as np

from rag_pipeline.chunking import HEADING_SEPARATOR, TokenBudget, chunk_cache_key, chunk_document
import pyarrow as pa
import pyarrow.compute as pc

from rag_pipeline.defs.resources import LakeWriterResource, RagSettingsResource
from rag_pipeline.ingest.document import ParsedDocument
from rag_pipeline.ingest.scan import scan_raw_folder
from rag_pipeline.ingest.serialize import outcome_from_json, outcome_to_json, parse_cache_key
from rag_pipeline.ingest.pool import is_transient, parse_many
from rag_pipeline.ingest.triage import QuarantineRecord, triage, was_released
from rag_pipeline.progress import Progress
from rag_pipeline.store import rows, staging
from rag_pipeline.store import schema as s
from rag_pipeline.store.ann import AnnPolicy
from rag_pipeline.store.lake import IndexUnreadableError, Lake, utc_now

OWNERS = ["team:search-platform"]
WRITER_POOL = "rag_lake_writer"  # Dagster concurrency pool of the steps that write the lake (limit 1)


def _md_table(header: list[str], records: list[list]) -> dg.MetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(v).replace("|", "\\|") for v in r) + " |" for r in records]
    return dg.MetadataValue.md("\n".join(lines))


@dg.asset(group_name="ingest", kinds={"python", "file"}, owners=OWNERS)
def raw_documents(context: dg.AssetExecutionContext, rag: RagSettingsResource, lake_writer: LakeWriterResource) -> pa.Table:
    """Every file in the raw folder with its sha256 and sidecar metadata (status, ACL, owner)."""
    files = scan_raw_folder(rag.settings().raw_dir)
    by_ext = Counter((f.path.suffix.lower() or "(none)") for f in files)
    context.add_output_metadata(
        {
            "raw_dir": str(rag.settings().raw_dir),
            "files": len(files),
            "bytes": sum(f.size for f in files),
            "by_extension": dict(sorted(by_ext.items())),
            "with_sidecar_errors": sum(1 for f in files if f.metadata_error),
        }
    )
    return staging.raw_files_to_table(files)


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
)
def parse_documents(
    context: dg.AssetExecutionContext, rag: RagSettingsResource, lake_writer: LakeWriterResource, raw_documents: pa.Table
):
    """Parse every raw file; anything unreadable or low-confidence goes to quarantine instead.

    Files missing from the parse cache are parsed in parallel worker processes, each killed
    after parse_timeout_s (quarantined as `timeout`, never cached, so a later run retries).
    """
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    raw_documents = staging.raw_files_from_table(raw_documents)
    keys = {raw.doc_id: parse_cache_key(raw.sha256, settings.ocr_lang, raw.path.suffix) for raw in raw_documents}
    cached = lake.cached_parses(list(keys.values()))
    parsed: dict[str, ParsedDocument] = {}
    quarantined: list[QuarantineRecord] = []
    started = time.perf_counter()
    # One parse per distinct content: identical files share a cache key.
    to_parse = {keys[r.doc_id]: r.path for r in raw_documents if not r.metadata_error and keys[r.doc_id] not in cached}
    reused = sum(1 for raw in raw_documents if keys[raw.doc_id] in cached)
    note = f"{reused} from the parse cache" if reused else ""
    with Progress("parse", len(to_parse), "files", log=context.log.info, note=note) as progress:
        outcomes = parse_many(
            to_parse,
            ocr_lang=settings.ocr_lang,
            max_bytes=settings.max_file_bytes,
            workers=settings.parse_workers,
            timeout_s=settings.parse_timeout_s,
            memory_mb=settings.parse_memory_mb,
            on_result=lambda _key: progress.advance(),
        )
    fresh = {key: outcome_to_json(o) for key, o in outcomes.items() if not is_transient(o)}
    for raw in raw_documents:
        key = keys[raw.doc_id]
        if raw.metadata_error:
            outcome = None
        elif key in outcomes:
            outcome = outcomes[key]
        else:
            outcome = outcome_from_json(cached[key])
        result = triage(raw, outcome, settings.ocr_min_confidence)
        if isinstance(result, QuarantineRecord):
            context.log.warning(f"quarantined {raw.source}: {result.reason} ({result.detail})")
            quarantined.append(result)
        else:
            parsed[raw.doc_id] = result
    lake.add_parses(fresh)
    ocr = [d.ocr_confidence for d in parsed.values() if d.ocr_used and d.ocr_confidence is not None]
    yield dg.Output(
        staging.parsed_to_table(parsed),
        output_name="parsed_documents",
        metadata={
            "documents": len(parsed),
            "by_format": dict(Counter(d.format for d in parsed.values())),
            "by_language": dict(Counter(d.language for d in parsed.values())),
            "ocr_documents": len(ocr),
            "ocr_confidence_min": float(min(ocr)) if ocr else None,
            "ocr_confidence_mean": float(np.mean(ocr)) if ocr else None,
            "parsed_now": len(outcomes),
            "reused_from_parse_cache": reused,
            "parse_seconds": round(time.perf_counter() - started, 2),
            "parse_workers": min(settings.parse_workers, len(to_parse)) if to_parse else 0,
            "released_from_quarantine": sorted(r.source for r in raw_documents if r.doc_id in parsed and was_released(parsed[r.doc_id])),
        },
    )
    yield dg.Output(
        staging.quarantine_to_table(quarantined),
        output_name="quarantine",
        metadata={
            "quarantined": len(quarantined),
            "by_reason": dict(Counter(q.reason for q in quarantined)),
            "files": _md_table(
                ["source", "reason", "detail"], [[q.source, q.reason, q.detail] for q in quarantined]
            ),
        },
    )


@dg.asset(group_name="index", kinds={"python"}, owners=OWNERS)
def chunks(
    context: dg.AssetExecutionContext, rag: RagSettingsResource, lake_writer: LakeWriterResource, parsed_documents: pa.Table
) -> pa.Table:
    """Structure-aware chunks (heading path, page) with overlap and content-addressed ids.

    Sized in the embedding model's tokens; `over_model_limit` counts chunks the model would
    truncate (zero unless the tokenizer disagrees with itself). A document whose parse, chunk
    settings and model are unchanged takes its chunks (and token counts) from the chunk cache.
    """
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    model_key = rag.encoder().identity.key
    doc_ids, outcomes = parsed_documents.column("doc_id").to_pylist(), parsed_documents.column("outcome").to_pylist()
    keys = [chunk_cache_key(d, o, settings.chunking, model_key) for d, o in zip(doc_ids, outcomes)]
    cached = lake.cached_chunks(keys)
    known = set(cached.column("cache_key").to_pylist())
    missing = [(key, doc_id, outcome) for key, doc_id, outcome in zip(keys, doc_ids, outcomes) if key not in known]
    reused = len(doc_ids) - len(missing)
    fresh = {}
    note = f"{reused} from the chunk cache" if reused else ""
    with Progress("chunk", len(missing), "documents", log=context.log.info, note=note) as progress:
        budget = TokenBudget.for_encoder(rag.encoder()) if missing else None  # the only use of the tokenizer
        for key, doc_id, outcome in missing:
            records = chunk_document(doc_id, outcome_from_json(outcome), settings.chunking, budget)
            fresh[key] = (records, [budget.count(c.embed_text) for c in records])
            progress.advance()
    fresh_rows = staging.chunk_cache_rows(fresh, budget.model_limit if budget else None)
    lake.add_chunks(fresh_rows)
    found = pa.concat_tables([cached, fresh_rows])
    table, tokens = staging.chunks_from_cache(found, keys)
    tokens = tokens.to_numpy() if len(tokens) else np.zeros(1, dtype=np.int32)
    model_limit = pc.max(found.column("model_limit")).as_py()  # one model in the key: one limit
    context.add_output_metadata(
        {
            "chunks": table.num_rows,
            "documents": len(doc_ids),
            "rechunked": len(missing),
            "reused_from_chunk_cache": reused,
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
                    for r in table.slice(0, 5).to_pylist()
                ],
            ),
        }
    )
    return table


def _served_table(context, lake: Lake, name: str, served: dict | None, columns: list[str] | None = None):
    """The served generation's table to diff against; None when there is none or it is damaged.

    A damaged served generation must not block the run that replaces it: everything is rebuilt
    from the caches, and only the diff statistics and document versions start afresh.
    """
    if not served:
        return None
    try:
        return lake.published_arrow(name, served, columns)
    except IndexUnreadableError as exc:
        context.log.error(f"{exc} — building the new generation without it")
        return None


@dg.asset(group_name="index", kinds={"python"}, owners=OWNERS)
def chunk_fingerprints(context: dg.AssetExecutionContext, rag: RagSettingsResource, chunks: pa.Table) -> pa.Table:
    """chunk_id → sha256 of normalized text, diffed against the published index (new/same/gone)."""
    with Progress("fingerprint", chunks.num_rows, "chunks", log=context.log.info) as progress:
        fingerprints = dict(zip(chunks.column("chunk_id").to_pylist(), chunks.column("fingerprint").to_pylist()))
        lake = Lake(rag.settings().lake_dir)
        served = _served_table(context, lake, s.CHUNKS, lake.read_manifest(missing_ok=True), ["fingerprint"])
        previous = served.column("fingerprint").to_pylist() if served is not None else []
        progress.advance(chunks.num_rows)
    context.add_output_metadata({"fingerprints": len(set(fingerprints.values())), **rows.fingerprint_diff(fingerprints.values(), previous)})
    return chunks.select(["chunk_id", "fingerprint"])


@dg.asset(group_name="index", kinds={"python", "pytorch"}, owners=OWNERS)
def embeddings(
    context: dg.AssetExecutionContext,
    rag: RagSettingsResource,
    lake_writer: LakeWriterResource,
    chunks: pa.Table,
    chunk_fingerprints: pa.Table,
) -> pa.Table:
    """Vectors per fingerprint; only fingerprints missing from the cache for this model are embedded."""
    encoder = rag.encoder()
    lake = Lake(rag.settings().lake_dir)
    key = encoder.identity.key
    text_by_fp = dict(zip(chunks.column("fingerprint").to_pylist(), chunks.column("embed_text").to_pylist()))
    vectors = lake.cached_vectors(key, list(text_by_fp))
    missing = [fp for fp in text_by_fp if fp not in vectors]
    started = time.perf_counter()
    texts = [text_by_fp[fp] for fp in missing]
    note = f"{len(vectors)} from the embedding cache" if vectors else ""
    with Progress("embed", len(texts), "chunks", log=context.log.info, note=note) as progress:
        fresh = dict(zip(missing, encoder.encode_passages(texts, on_batch=progress.advance)))
    seconds = time.perf_counter() - started
    lake.add_to_cache(key, fresh)
    vectors.update(fresh)
    context.add_output_metadata(
        {
            "model": encoder.identity.name,
            "model_key": key,
            "dimension": encoder.identity.dimension,
            "embedded": len(fresh),
            "reused_from_cache": len(text_by_fp) - len(fresh),
            "embed_seconds": round(seconds, 2),
            "chunks_per_second": round(len(fresh) / seconds, 1) if fresh else None,
        }
    )
    return staging.vectors_to_table(vectors, encoder.identity.dimension)


@dg.asset(group_name="index", kinds={"lancedb"}, owners=OWNERS, pool=WRITER_POOL)
def lancedb_index(
    context: dg.AssetExecutionContext,
    rag: RagSettingsResource,
    lake_writer: LakeWriterResource,
    raw_documents: pa.Table,
    parsed_documents: pa.Table,
    quarantine: pa.Table,
    chunks: pa.Table,
    embeddings: pa.Table,
) -> dict:
    """Write documents, chunks (vector + full-text index) and quarantine as a new, staged generation.

    When nothing would differ from the served generation (same files, metadata, parses, chunks,
    quarantine, model: rows.input_signature of the staged inputs), no generation is staged and
    no row is built: the served one is reported as `unchanged` and stays served.
    """
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    identity = rag.encoder().identity
    served = lake.read_manifest(missing_ok=True)
    # what is served is each file's `source` (relative), not where the raw folder is mounted
    inputs = [raw_documents.drop_columns(["path"]), parsed_documents, chunks, quarantine]
    signature = rows.input_signature(inputs, identity.key, identity.dimension)
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


def _stage_generation(context, lake: Lake, settings, identity, served, signature, raw_documents, parsed_documents, quarantine, chunks, embeddings):
    """Build the documents, chunks and quarantine rows and stage them as a new generation."""
    now = utc_now()
    raws = staging.raw_files_from_table(raw_documents)
    chunk_records = staging.chunks_from_table(chunks)
    previous_docs = _served_table(context, lake, s.DOCUMENTS, served)
    counts = Counter(c.doc_id for c in chunk_records)
    versions = rows.document_versions(raws, previous_docs)
    documents = rows.documents_table(raws, staging.parsed_from_table(parsed_documents), counts, versions, now)
    doc_rows = {r["doc_id"]: r for r in documents.to_pylist()}
    chunk_table = rows.chunks_table(
        chunk_records, {r.doc_id: r for r in raws}, doc_rows, staging.vectors_from_table(embeddings), identity.dimension
    )
    changes = rows.document_changes(previous_docs, documents)
    manifest = lake.stage(
        documents,
        chunk_table,
        rows.quarantine_table(staging.quarantine_from_table(quarantine), now),
        model=identity.as_dict(),
        run_id=context.run_id,
        stats={"scanned_files": len(raws), **changes},
        ann_policy=AnnPolicy(min_rows=settings.ann_min_rows),
        content_signature=signature,
    )
    return manifest, changes, [r["status"] for r in doc_rows.values()]


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
    """Old generations, LanceDB versions and staging folders removed; the served generation and
    the RAG_KEEP_GENERATIONS before it (what rollback needs) are kept."""
    settings = rag.settings()
    report = Lake(settings.lake_dir).prune(keep=settings.keep_generations)
    context.log.info(f"housekeeping: {report}")
    return dg.MaterializeResult(metadata=report)
