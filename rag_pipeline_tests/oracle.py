"""Who may read what, written independently of the SQL predicate the tests check (query.filters)."""

from __future__ import annotations

from rag_pipeline.ingest.scan import SECURITY_LEVELS
from rag_pipeline.query.filters import Principal


def may_read(doc: dict, p: Principal) -> bool:
    if doc["status"] != "published":
        return False
    if SECURITY_LEVELS.index(doc["security_level"]) > SECURITY_LEVELS.index(p.clearance):
        return False
    return bool(set(doc["access_groups"]) & set(p.groups)) or doc["department"] in p.departments or (
        bool(p.user) and doc["owner"] == p.user
    )
