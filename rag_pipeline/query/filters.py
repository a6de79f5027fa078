"""Lifecycle and permission filters, expressed as SQL predicates that run *inside* the search.

LanceDB applies them as pre-filters in both the vector and the full-text arm, so a chunk a
principal may not see is never a candidate — it is not hidden after ranking.

Visibility rule: status is ``published`` AND the chunk's security level is at or below the
principal's clearance AND (the chunk's access groups share a group with the principal OR the
document belongs to one of the principal's departments OR the principal owns the document).
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_pipeline.ingest.scan import SECURITY_LEVELS
from rag_pipeline.store.predicates import sql_in, sql_string

SERVED_STATUS = "published"


@dataclass(frozen=True)
class Principal:
    """Who is asking. The default is an ordinary employee: all-staff, internal clearance."""

    user: str = ""
    groups: tuple[str, ...] = ("all-staff",)
    clearance: str = "internal"
    departments: tuple[str, ...] = ()

    def __post_init__(self):
        if self.clearance not in SECURITY_LEVELS:
            raise ValueError(f"clearance must be one of {SECURITY_LEVELS}, got {self.clearance!r}")


def _in_list(values) -> str:
    return "[" + ", ".join(sql_string(v) for v in values) + "]"


def search_filter(principal: Principal | None = None, extra: str | None = None) -> str:
    """The predicate every retrieval arm runs with; `extra` narrows further (e.g. departments)."""
    principal = principal or Principal()
    levels = SECURITY_LEVELS[: SECURITY_LEVELS.index(principal.clearance) + 1]
    access = []
    if principal.groups:
        access.append(f"array_has_any(access_groups, {_in_list(principal.groups)})")
    if principal.departments:
        access.append(department_filter(principal.departments))
    if principal.user:
        access.append(f"owner = {sql_string(principal.user)}")
    clauses = [
        f"status = {sql_string(SERVED_STATUS)}",
        sql_in("security_level", levels),
        "(" + (" OR ".join(access) or "false") + ")",
    ]
    if extra:
        clauses.append(f"({extra})")
    return " AND ".join(clauses)


def department_filter(departments) -> str:
    """Documents of these departments (also usable as `where=` to narrow a search)."""
    return sql_in("department", departments)
