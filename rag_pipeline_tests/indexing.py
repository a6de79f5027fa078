"""Test helper: run index_job through Dagster on a folder and collect what it reported."""

from __future__ import annotations

import dagster as dg

from rag_pipeline.definitions import build_definitions
from rag_pipeline.defs.resources import RagSettingsResource


def run_index(raw, lake, **settings) -> dict:
    """Materialize the whole graph (real Dagster run, ephemeral instance); return metadata by asset."""
    defs = build_definitions(RagSettingsResource(raw_dir=str(raw), lake_dir=str(lake), **settings))
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("index_job").execute_in_process(instance=instance, raise_on_error=False)
    report: dict = {"success": result.success}
    for event in result.get_asset_materialization_events():
        mat = event.event_specific_data.materialization
        report[mat.asset_key.to_user_string()] = {k: v.value for k, v in mat.metadata.items()}
    report["failures"] = {
        e.step_key: _error_chain(e.event_specific_data.error) for e in result.all_events if e.event_type_value == "STEP_FAILURE"
    }
    report["checks"] = {
        e.event_specific_data.check_name: e.event_specific_data.passed
        for e in result.all_events
        if e.event_type_value == "ASSET_CHECK_EVALUATION"
    }
    return report


def _error_chain(error) -> str:
    """A step failure's message and those of its causes (Dagster wraps the asset's own error)."""
    messages = []
    while error is not None:
        messages.append(f"{error.cls_name}: {error.message.strip()}")
        error = error.cause
    return "\n".join(messages)


def assert_consistent(lake_dir) -> dict:
    """The served generation is whole: counts match, chunk ids unique, no orphan or missing chunks."""
    from collections import Counter

    from rag_pipeline.store import schema as s
    from rag_pipeline.store.lake import Lake

    lake = Lake(lake_dir)
    manifest = lake.read_manifest()
    documents = lake.published_arrow(s.DOCUMENTS, manifest).to_pylist()
    chunks = lake.published_arrow(s.CHUNKS, manifest).select(["chunk_id", "doc_id", "ordinal", "vector"]).to_pylist()
    assert manifest["counts"]["documents"] == len(documents)
    assert manifest["counts"]["chunks"] == len(chunks)
    assert len({c["chunk_id"] for c in chunks}) == len(chunks), "duplicate chunk ids"
    by_doc = {d["doc_id"]: d for d in documents}
    assert len(by_doc) == len(documents), "duplicate documents"
    assert not {c["doc_id"] for c in chunks} - set(by_doc), "orphan chunks"
    per_doc = Counter(c["doc_id"] for c in chunks)
    assert {d: n for d, n in per_doc.items()} == {d["doc_id"]: d["n_chunks"] for d in documents if d["n_chunks"]}
    ordinals: dict[str, list[int]] = {}
    for c in chunks:
        ordinals.setdefault(c["doc_id"], []).append(c["ordinal"])
    assert all(sorted(o) == list(range(len(o))) for o in ordinals.values()), "chunks of two versions of a document"
    assert all(c["vector"] is not None and len(c["vector"]) == manifest["model"]["dimension"] for c in chunks)
    return manifest
