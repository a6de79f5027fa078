"""Quality gates on each staged generation; blocking, so a failing one stops its promotion."""


import dagster as dg

from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.ingest.scan import scan_raw_folder
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake


@dg.asset_check(asset="lancedb_index", blocking=True)
def every_file_accounted_for(rag: RagSettingsResource, lancedb_index: dict) -> dg.AssetCheckResult:
    """Each scanned file is either an indexed document or a quarantine row — none vanish."""
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    scanned = {f.doc_id: f.source for f in scan_raw_folder(settings.raw_dir)}
    indexed = set(lake.published_arrow(s.DOCUMENTS, lancedb_index).column("doc_id").to_pylist())
    quarantined = set(lake.published_arrow(s.QUARANTINE, lancedb_index).column("doc_id").to_pylist())
    missing = sorted(scanned[d] for d in set(scanned) - indexed - quarantined)
    both = sorted(scanned.get(d, d) for d in indexed & quarantined)
    return dg.AssetCheckResult(
        passed=not missing and not both,
        metadata={
            "scanned": len(scanned),
            "indexed": len(indexed),
            "quarantined": len(quarantined),
            "missing": ", ".join(missing[:20]) or "none",
            "indexed_and_quarantined": ", ".join(both[:20]) or "none",
        },
    )


@dg.asset_check(asset="lancedb_index", blocking=True)
def chunks_are_consistent(rag: RagSettingsResource, lancedb_index: dict) -> dg.AssetCheckResult:
    """No duplicate chunk ids, no chunk without its document, vectors of the recorded dimension."""
    lake = Lake(rag.settings().lake_dir)
    manifest = lancedb_index
    chunks = lake.published_arrow(s.CHUNKS, manifest).select(["chunk_id", "doc_id", "vector"])
    doc_ids = set(lake.published_arrow(s.DOCUMENTS, manifest).column("doc_id").to_pylist())
    ids = chunks.column("chunk_id").to_pylist()
    duplicates = len(ids) - len(set(ids))
    orphans = sum(1 for d in chunks.column("doc_id").to_pylist() if d not in doc_ids)
    dimension = chunks.schema.field("vector").type.list_size
    return dg.AssetCheckResult(
        passed=duplicates == 0 and orphans == 0 and dimension == manifest["model"]["dimension"],
        metadata={"chunks": len(ids), "duplicate_ids": duplicates, "orphans": orphans, "dimension": dimension},
    )
