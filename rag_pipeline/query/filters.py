"""Lifecycle and permission filters, expressed as SQL predicates that run *inside* the search.

LanceDB applies them as pre-filters in both the vector and the full-text arm, so a chunk a
principal may not see is never a candidate — it is not hidden after ranking.
"""

from __future__ import annotations

SERVED_STATUS = "published"


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def search_filter(extra: str | None = None) -> str:
    """Only published chunks are ever served; `extra` narrows further (e.g. a department)."""
    clauses = [f"status = {_quote(SERVED_STATUS)}"]
    if extra:
        clauses.append(f"({extra})")
    return " AND ".join(clauses)


def department_filter(departments: list[str]) -> str:
    return "department IN (" + ", ".join(_quote(d) for d in departments) + ")"
