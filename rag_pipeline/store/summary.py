"""What an operator asks first: what is served, from which run, and what was left out."""

from __future__ import annotations

from collections import Counter

from rag_pipeline.store import schema as s
from rag_pipeline.store.lake import Lake


def index_status(lake: Lake) -> dict:
    manifest = lake.read_manifest()
    documents = lake.published_arrow(s.DOCUMENTS, manifest).select(["status", "format"]).to_pylist()
    quarantine = lake.published_arrow(s.QUARANTINE, manifest).select(["reason"]).to_pylist()
    generations = lake.list_generations()
    return {
        "lake": str(lake.lake_dir),
        "served_generation": manifest["generation"],
        "promoted_at": manifest.get("promoted_at"),
        "run_id": manifest["run_id"],
        "latest_generation": max(g["generation"] for g in generations),
        "model": {k: manifest["model"][k] for k in ("name", "dimension", "key", "weights_sha256")},
        "documents_by_status": dict(Counter(d["status"] for d in documents)),
        "documents_by_format": dict(Counter(d["format"] for d in documents)),
        "chunks": manifest["counts"]["chunks"],
        "quarantine_by_reason": dict(Counter(q["reason"] for q in quarantine)),
        "last_run_changes": {k: v for k, v in manifest.get("stats", {}).items()},
    }


def quarantine_rows(lake: Lake) -> list[dict]:
    table = lake.published_arrow(s.QUARANTINE)
    return table.select(["source", "reason", "detail", "ocr_confidence", "quarantined_at"]).to_pylist()
