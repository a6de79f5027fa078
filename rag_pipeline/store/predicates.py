"""SQL literals for the filter strings LanceDB (DataFusion) and DuckDB take: one quoting rule."""

from __future__ import annotations

from collections.abc import Iterable


def sql_string(value: str) -> str:
    """`value` as a single-quoted SQL string literal (a quote inside is doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    """`column IN ('a', 'b', ...)` over `values`, each quoted by sql_string."""
    return f"{column} IN (" + ", ".join(sql_string(v) for v in values) + ")"
