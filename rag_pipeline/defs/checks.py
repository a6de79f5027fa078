"""Quality gates on each staged generation; blocking, so a failing one stops its promotion."""


import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc

from rag_pipeline.defs.resources import RagSettingsResource
from rag_pipeline.ingest.scan import listed_sources
from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake


@dg.asset_check(asset="lancedb_index", blocking=True)
def every_file_accounted_for(rag: RagSettingsResource, lancedb_index: dict) -> dg.AssetCheckResult:
    """Each file in the folder is either an indexed document or a quarantine row — none vanish.

    Lists the folder again (names only: no file is read or hashed) rather than trusting the run's scan."""
    settings = rag.settings()
    lake = Lake(settings.lake_dir)
    scanned = listed_sources(settings.raw_dir, settings.ignore_file)
    indexed = set(lake.published_arrow(s.DOCUMENTS, lancedb_index, ["doc_id"]).column("doc_id").to_pylist())
    quarantined = set(lake.published_arrow(s.QUARANTINE, lancedb_index, ["doc_id"]).column("doc_id").to_pylist())
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
    """No duplicate chunk ids, no chunk without its document, vectors of the recorded dimension.

    Reads three small columns and the schema, never the text or the vectors: reading the whole
    chunks table made this check the peak of a 100k-document run (4.1 GB).
    """
    lake = Lake(rag.settings().lake_dir)
    manifest = lancedb_index
    chunks = lake.published_arrow(s.CHUNKS, manifest, ["chunk_id", "doc_id", "status"])
    documents = lake.published_arrow(s.DOCUMENTS, manifest, ["doc_id", "status"])
    dimension = lake.open_published(s.CHUNKS, manifest).schema.field("vector").type.list_size
    found = chunk_consistency(chunks, documents)
    return dg.AssetCheckResult(
        passed=found["duplicate_ids"] == 0 and found["orphans"] == 0 and found["status_differs_from_document"] == 0
        and dimension == manifest["model"]["dimension"],
        metadata={"chunks": chunks.num_rows, **found, "dimension": dimension},
    )


def chunk_consistency(chunks: pa.Table, documents: pa.Table) -> dict[str, int]:
    """Duplicate chunk ids, chunks whose document is missing, chunks whose status differs from
    their document's — counted in Arrow (no Python object per chunk)."""
    ids = chunks.column("chunk_id")
    place = pc.index_in(chunks.column("doc_id"), value_set=documents.column("doc_id").combine_chunks()).combine_chunks()
    doc_status = pc.fill_null(documents.column("status").combine_chunks().take(place), "")
    differs = pc.and_(pc.is_valid(place), pc.not_equal(pc.fill_null(chunks.column("status"), ""), doc_status))
    return {
        "duplicate_ids": len(ids) - (pc.count_distinct(ids).as_py() if len(ids) else 0),
        "orphans": place.null_count,
        "status_differs_from_document": pc.sum(differs).as_py() or 0,
    }


@dg.asset_check(asset="lancedb_index", blocking=True)
def model_pin_matches(rag: RagSettingsResource, lancedb_index: dict) -> dg.AssetCheckResult:
    """The generation records exactly the configured embedding model (vectors never mix)."""
    configured = rag.encoder().identity
    recorded = lancedb_index["model"]
    return dg.AssetCheckResult(
        passed=recorded["key"] == configured.key,
        metadata={"recorded": f"{recorded['name']} ({recorded['key']})", "configured": f"{configured.name} ({configured.key})"},
    )


@dg.asset_check(asset="raw_documents", blocking=True)
def scan_is_not_truncated(rag: RagSettingsResource, raw_documents: pa.Table) -> dg.AssetCheckResult:
    """Refuse to go on when the scan sees far fewer files than the served index knows.

    An unmounted share or a permissions change looks exactly like "everything was deleted";
    blocking here means nothing downstream runs and the served generation stays as it was.
    Set allow_mass_deletion (``rag index --allow-mass-deletion``) when the deletion is real.
    """
    settings = rag.settings()
    served = Lake(settings.lake_dir).read_manifest(missing_ok=True)
    known = (served or {}).get("stats", {}).get("scanned_files")
    if known is None and served:
        known = served["counts"]["documents"] + served["counts"]["quarantined"]
    seen = raw_documents.num_rows
    too_few = bool(known) and known >= MIN_FILES_FOR_GUARD and seen < known * (1 - settings.max_deletion_fraction)
    metadata = {
        "files_seen": seen,
        "files_in_served_index": known or 0,
        "max_deletion_fraction": settings.max_deletion_fraction,
        "allow_mass_deletion": settings.allow_mass_deletion,
    }
    # nothing to compare with: say so (`rag index` shows the check as skipped, not passed)
    if not served:
        metadata["skipped"] = "no index is served yet, so no scan can be short of it"
    elif not known or known < MIN_FILES_FOR_GUARD:
        metadata["skipped"] = f"the served index knows {known or 0} files; the guard starts at {MIN_FILES_FOR_GUARD}"
    description = None
    if too_few:
        description = (
            f"scan saw {seen} files but the served index knows {known}: refusing to delete more than "
            f"{settings.max_deletion_fraction:.0%}; re-run with --allow-mass-deletion if intended"
        )
        if settings.allow_mass_deletion:
            description = f"scan saw {seen} of {known} files; deletion allowed by allow_mass_deletion"
    return dg.AssetCheckResult(passed=not too_few or settings.allow_mass_deletion, metadata=metadata, description=description)


MIN_FILES_FOR_GUARD = 5  # below this, a "mass deletion" is just a small folder being edited
