"""The blocking check on a staged generation's chunks, counted in Arrow (defs.checks)."""

from __future__ import annotations

import pyarrow as pa

from rag_pipeline.defs.checks import chunk_consistency


def test_duplicates_orphans_and_status_drift_are_each_counted():
    documents = pa.table({"doc_id": ["a", "b", "c"], "status": ["active", "archived", None]})
    chunks = pa.table(
        {
            "chunk_id": ["a-1", "a-2", "a-2", "b-1", "c-1", "x-1", "x-2"],
            "doc_id": ["a", "a", "a", "b", "c", "x", "x"],  # x: no such document
            "status": ["active", "active", "draft", "archived", None, "active", None],  # a-2 (draft) drifted
        }
    )
    assert chunk_consistency(chunks, documents) == {"duplicate_ids": 1, "orphans": 2, "status_differs_from_document": 1}
    consistent = chunks.filter(pa.array([True, True, False, True, True, False, False]))
    assert chunk_consistency(consistent, documents) == {"duplicate_ids": 0, "orphans": 0, "status_differs_from_document": 0}
    assert chunk_consistency(chunks.slice(0, 0), documents) == {"duplicate_ids": 0, "orphans": 0, "status_differs_from_document": 0}
